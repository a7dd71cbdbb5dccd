/* paynotify--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.3'" to load this file. \quit

-- Version 1.3: hardening.  Nothing of the extension resolves to an object
-- outside pg_catalog and the extension itself; what a role is given to
-- operate, serve or relay paynotify holds in one database only; the relay's
-- claims and reports take their locks in one order on Citus.

-- ===== Expressions: every function and operator qualified =====
--
-- A constraint, default, index predicate or view binds its functions and
-- operators when it is created, under the script's search_path, which has
-- the extension's schema first: there an object planted by anyone who may
-- CREATE in that schema (public, in a database upgraded from PostgreSQL 14
-- or older) is a better match than pg_catalog's own wherever pg_catalog's
-- needs a conversion or is polymorphic (cardinality(anyarray), <@,
-- numeric / bigint), and it then ran as whoever wrote the table or read the
-- view.  Each of them is made again here with every function and operator
-- named in pg_catalog, so what an earlier version bound, even to a planted
-- object, is gone after this update, and a fresh installation (which runs
-- the earlier scripts first) ends the same way.

ALTER TABLE @extschema@.paynotify_channel
	DROP CONSTRAINT paynotify_channel_name_check,
	ADD CONSTRAINT paynotify_channel_name_check
		CHECK (name OPERATOR(pg_catalog.~) '^[A-Za-z0-9_]{1,63}$');
ALTER TABLE @extschema@.paynotify_key
	DROP CONSTRAINT paynotify_key_key_id_check,
	ADD CONSTRAINT paynotify_key_key_id_check CHECK (key_id OPERATOR(pg_catalog.<>) ''),
	DROP CONSTRAINT paynotify_key_check,
	ADD CONSTRAINT paynotify_key_check
		CHECK (not_before IS NULL OR not_after IS NULL OR not_before OPERATOR(pg_catalog.<) not_after);
ALTER TABLE @extschema@.paynotify_transition
	DROP CONSTRAINT paynotify_transition_check,
	ADD CONSTRAINT paynotify_transition_check CHECK (from_state OPERATOR(pg_catalog.<>) to_state);
ALTER TABLE @extschema@.paynotify_hook
	DROP CONSTRAINT paynotify_hook_event_check,
	ADD CONSTRAINT paynotify_hook_event_check
		CHECK (event OPERATOR(pg_catalog.=) ANY ('{paid,refunded,refund_failed,closed}'::text[]));
ALTER TABLE @extschema@.payment_notify_log
	DROP CONSTRAINT payment_notify_log_status_check,
	ADD CONSTRAINT payment_notify_log_status_check
		CHECK (status OPERATOR(pg_catalog.=) ANY ('{succeeded,failed,ignored,parked,anomaly}'::text[]));
ALTER TABLE @extschema@.paynotify_refund
	DROP CONSTRAINT paynotify_refund_status_check,
	ADD CONSTRAINT paynotify_refund_status_check
		CHECK (status OPERATOR(pg_catalog.=) ANY ('{succeeded,failed}'::text[]));
ALTER TABLE @extschema@.paynotify_order_history
	DROP CONSTRAINT paynotify_order_history_source_check,
	ADD CONSTRAINT paynotify_order_history_source_check
		CHECK (source OPERATOR(pg_catalog.=) ANY ('{paynotify,application}'::text[]));
ALTER TABLE @extschema@.paynotify_installation
	ALTER COLUMN id SET DEFAULT pg_catalog.substr(pg_catalog.replace(pg_catalog.gen_random_uuid()::text, '-', ''), 17, 16),
	DROP CONSTRAINT paynotify_installation_id_check,
	ADD CONSTRAINT paynotify_installation_id_check CHECK (id OPERATOR(pg_catalog.~) '^[0-9a-f]{1,32}$');
ALTER TABLE @extschema@.paynotify_endpoint
	DROP CONSTRAINT paynotify_endpoint_url_check,
	ADD CONSTRAINT paynotify_endpoint_url_check CHECK (url OPERATOR(pg_catalog.~) '^https?://[^[:space:]]+$'),
	DROP CONSTRAINT paynotify_endpoint_events_check,
	ADD CONSTRAINT paynotify_endpoint_events_check
		CHECK (events OPERATOR(pg_catalog.<@) '{paid,refunded,refund_failed,closed}'::text[]
			   AND pg_catalog.cardinality(events) OPERATOR(pg_catalog.>) 0),
	DROP CONSTRAINT paynotify_endpoint_secret_check,
	ADD CONSTRAINT paynotify_endpoint_secret_check
		CHECK (secret OPERATOR(pg_catalog.~) '^whsec_([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'
			   AND pg_catalog.length(secret) OPERATOR(pg_catalog.>=) 38
			   AND pg_catalog.length(secret) OPERATOR(pg_catalog.<=) 94),
	DROP CONSTRAINT paynotify_endpoint_max_in_flight_check,
	ADD CONSTRAINT paynotify_endpoint_max_in_flight_check
		CHECK (max_in_flight OPERATOR(pg_catalog.>=) 1 AND max_in_flight OPERATOR(pg_catalog.<=) 256),
	DROP CONSTRAINT paynotify_endpoint_retry_base_check,
	ADD CONSTRAINT paynotify_endpoint_retry_base_check
		CHECK (retry_base OPERATOR(pg_catalog.>=) '1 second'::interval
			   AND retry_base OPERATOR(pg_catalog.<=) '1 day'::interval),
	DROP CONSTRAINT paynotify_endpoint_retry_max_check,
	ADD CONSTRAINT paynotify_endpoint_retry_max_check
		CHECK (retry_max OPERATOR(pg_catalog.>=) '1 second'::interval
			   AND retry_max OPERATOR(pg_catalog.<=) '30 days'::interval),
	DROP CONSTRAINT paynotify_endpoint_retry_horizon_check,
	ADD CONSTRAINT paynotify_endpoint_retry_horizon_check
		CHECK (retry_horizon OPERATOR(pg_catalog.>=) '0'::interval
			   AND retry_horizon OPERATOR(pg_catalog.<=) '1 year'::interval);

-- the partial indexes' predicates
DROP INDEX @extschema@.payment_notify_log_parked;
CREATE INDEX payment_notify_log_parked ON @extschema@.payment_notify_log (order_no)
	WHERE status OPERATOR(pg_catalog.=) 'parked';
DROP INDEX @extschema@.payment_notify_log_failed;
CREATE INDEX payment_notify_log_failed ON @extschema@.payment_notify_log (last_seen)
	WHERE status OPERATOR(pg_catalog.=) 'failed';

CREATE OR REPLACE VIEW @extschema@.paynotify_delivery_ready AS
	SELECT d.id, d.endpoint_id, d.order_no, d.order_seq, d.next_attempt_at
	FROM @extschema@.paynotify_delivery d
	WHERE d.delivered_at IS NULL AND d.dead_at IS NULL
	  AND d.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now()
	  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_delivery p
					  WHERE p.endpoint_id OPERATOR(pg_catalog.=) d.endpoint_id
						AND p.order_no OPERATOR(pg_catalog.=) d.order_no
						AND p.order_seq OPERATOR(pg_catalog.<) d.order_seq
						AND p.delivered_at IS NULL AND p.dead_at IS NULL);

CREATE OR REPLACE VIEW @extschema@.paynotify_stats AS
	SELECT ch.name AS channel, ch.gateway,
		COALESCE(l.notifications, 0) AS notifications,
		COALESCE(l.succeeded, 0) AS succeeded,
		COALESCE(l.ignored, 0) AS ignored,
		COALESCE(l.anomaly, 0) AS anomaly,
		COALESCE(l.parked, 0) AS parked,
		COALESCE(l.failed, 0) AS failed,
		COALESCE(l.deliveries, 0) AS deliveries,
		CASE WHEN COALESCE(l.deliveries, 0) OPERATOR(pg_catalog.>) 0
			THEN pg_catalog.round((l.deliveries OPERATOR(pg_catalog.-) l.notifications)::numeric
								  OPERATOR(pg_catalog./) l.deliveries::numeric, 4)
			ELSE 0 END AS duplicate_ratio,
		COALESCE(pg_catalog.extract('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) l.oldest_failed), 0)::bigint
			AS oldest_failed_seconds,
		COALESCE(pg_catalog.extract('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) l.oldest_parked), 0)::bigint
			AS oldest_parked_seconds,
		COALESCE(a.last_24h, 0) AS anomalies_24h,
		COALESCE(a.unresolved, 0) AS anomalies_unresolved,
		COALESCE(o.backlog, 0) AS outbox_backlog,
		COALESCE(pg_catalog.extract('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) o.oldest), 0)::bigint
			AS outbox_oldest_seconds,
		COALESCE(o.dead, 0) AS outbox_dead
	FROM @extschema@.paynotify_channel ch
	LEFT JOIN (
		SELECT x.channel, pg_catalog.count(*) AS notifications,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'succeeded') AS succeeded,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'ignored') AS ignored,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'anomaly') AS anomaly,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'parked') AS parked,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'failed') AS failed,
			pg_catalog.sum(x.delivery_count) AS deliveries,
			pg_catalog.min(x.first_seen) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'failed') AS oldest_failed,
			pg_catalog.min(x.first_seen) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'parked') AS oldest_parked
		FROM @extschema@.payment_notify_log x GROUP BY x.channel) l ON l.channel OPERATOR(pg_catalog.=) ch.name
	LEFT JOIN (
		SELECT y.channel,
			pg_catalog.count(*) FILTER (WHERE y.created_at OPERATOR(pg_catalog.>)
										(pg_catalog.now() OPERATOR(pg_catalog.-) '24 hours'::interval)) AS last_24h,
			pg_catalog.count(*) FILTER (WHERE y.resolved_at IS NULL) AS unresolved
		FROM @extschema@.paynotify_anomaly y GROUP BY y.channel) a ON a.channel OPERATOR(pg_catalog.=) ch.name
	LEFT JOIN (
		SELECT z.channel, pg_catalog.count(*) FILTER (WHERE NOT z.dead) AS backlog,
			pg_catalog.min(z.created_at) FILTER (WHERE NOT z.dead) AS oldest,
			pg_catalog.count(*) FILTER (WHERE z.dead) AS dead
		FROM (SELECT q.channel, q.created_at, false AS dead FROM @extschema@.paynotify_outbox q
			  UNION ALL
			  SELECT d.channel, d.created_at, d.dead_at IS NOT NULL
			  FROM @extschema@.paynotify_delivery d WHERE d.delivered_at IS NULL) z
		GROUP BY z.channel) o ON o.channel OPERATOR(pg_catalog.=) ch.name;

-- Every function pins search_path, C functions too: a superuser calling
-- one with a writable schema first in the path must not run what is
-- planted there, whatever the function reads or runs itself.
ALTER FUNCTION @extschema@.paynotify_config_changed() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_rsa_verify(text, bytea, text, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_aead_decrypt(bytea, bytea, bytea, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_check_settings(text, jsonb) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_read_secret(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_bind_orders(regclass, name, name, name, name, jsonb)
	SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_status_canonical(regclass, name, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_on(text, regprocedure) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION @extschema@.paynotify_guard_transition() SET search_path = pg_catalog, pg_temp;

-- ===== Roles per database: paynotify_grant, paynotify_revoke =====
--
-- Until 1.2 the privileges went to three cluster-wide group roles
-- (paynotify_handler, paynotify_admin, paynotify_relay), granted in every
-- database that has the extension: a relay login made for one database
-- read another database's endpoint secrets, an operator of one database
-- configured another.  A role's privileges on a database's objects are that
-- database's own: from 1.3 each capacity is a set of privileges on the
-- extension's objects, granted to a login (or group) role in this database
-- by paynotify_grant, and nothing goes to the cluster-wide roles.

-- What each capacity is: privileges on the extension's objects (one
-- place; an upgrade that adds an object adds its row and grants it to the
-- roles that hold the capacity).
CREATE TABLE @extschema@.paynotify_capacity (
	capacity	text NOT NULL
				CHECK (capacity OPERATOR(pg_catalog.=) ANY ('{admin,handler,relay}'::text[])),
	privilege	text NOT NULL CHECK (privilege OPERATOR(pg_catalog.=) ANY ('{EXECUTE,SELECT}'::text[])),
	fn			regprocedure,
	rel			regclass,
	columns		name[],			-- SELECT on these columns of rel only
	CHECK ((fn IS NULL) OPERATOR(pg_catalog.<>) (rel IS NULL)),
	UNIQUE (capacity, fn, rel)
);
COMMENT ON TABLE @extschema@.paynotify_capacity IS
	'paynotify: the privileges on the extension''s objects that each capacity (admin, handler, relay) is (paynotify_grant)';
INSERT INTO @extschema@.paynotify_capacity (capacity, privilege, fn)
SELECT v.c, 'EXECUTE', v.f::regprocedure FROM (VALUES
	('handler', '@extschema@.paynotify_handle(text, jsonb, bytea)'),
	('handler', '@extschema@.paynotify_handle(text, jsonb, text)'),
	('relay', '@extschema@.paynotify_relay_claim(integer)'),
	('relay', '@extschema@.paynotify_relay_fanout(integer)'),
	('relay', '@extschema@.paynotify_relay_report(bigint[], integer[], text[])'),
	('admin', '@extschema@.paynotify_handle(text, jsonb, bytea)'),
	('admin', '@extschema@.paynotify_handle(text, jsonb, text)'),
	('admin', '@extschema@.paynotify_add_channel(text, text, jsonb)'),
	('admin', '@extschema@.paynotify_alter_channel(text, jsonb)'),
	('admin', '@extschema@.paynotify_add_key(text, text, text, timestamptz, timestamptz)'),
	('admin', '@extschema@.paynotify_add_key_file(text, text, text, timestamptz, timestamptz)'),
	('admin', '@extschema@.paynotify_retire_key(text, text)'),
	('admin', '@extschema@.paynotify_bind_orders(regclass, name, name, name, name, jsonb)'),
	('admin', '@extschema@.paynotify_on(text, regprocedure)'),
	('admin', '@extschema@.paynotify_outbox_claim(integer)'),
	('admin', '@extschema@.paynotify_transit(text, text, text)'),
	('admin', '@extschema@.paynotify_rsa_verify(text, bytea, text, text)'),
	('admin', '@extschema@.paynotify_aead_decrypt(bytea, bytea, bytea, text)'),
	('admin', '@extschema@.paynotify_add_endpoint(text, text, text[], text[], interval, integer)'),
	('admin', '@extschema@.paynotify_add_endpoint_file(text, text, text[], text[], interval, integer)'),
	('admin', '@extschema@.paynotify_alter_endpoint(bigint, text, text, text[], text[], boolean, interval, integer, interval, interval)'),
	('admin', '@extschema@.paynotify_alter_endpoint_file(bigint, text)'),
	('admin', '@extschema@.paynotify_drop_endpoint(bigint)'),
	('admin', '@extschema@.paynotify_redeliver(bigint, bigint)'),
	('admin', '@extschema@.paynotify_purge_deliveries(interval)'),
	('admin', '@extschema@.paynotify_purge(interval, integer, integer, text)'),
	('admin', '@extschema@.paynotify_retention_floor(text)'),
	('admin', '@extschema@.paynotify_retry(text, text, boolean)'),
	('admin', '@extschema@.paynotify_retry_failed(interval, integer, boolean)'),
	('admin', '@extschema@.paynotify_resolve_anomaly(bigint, text)'),
	('admin', '@extschema@.paynotify_trace(text, text)'),
	('admin', '@extschema@.paynotify_trace_order(text)')) v(c, f);
INSERT INTO @extschema@.paynotify_capacity (capacity, privilege, rel, columns)
SELECT 'admin', 'SELECT', v.r::regclass, v.cols FROM (VALUES
	('@extschema@.payment_notify_log', NULL::name[]),
	('@extschema@.payment_record', NULL),
	('@extschema@.paynotify_refund', NULL),
	('@extschema@.paynotify_anomaly', NULL),
	('@extschema@.paynotify_transition', NULL),
	('@extschema@.paynotify_binding', NULL),
	('@extschema@.paynotify_delivery', NULL),
	('@extschema@.paynotify_order_history', NULL),
	('@extschema@.paynotify_delivery_history', NULL),
	('@extschema@.paynotify_installation', NULL),
	('@extschema@.paynotify_stats', NULL),
	('@extschema@.paynotify_capacity', NULL),
	('@extschema@.paynotify_endpoint',
	 '{id,url,events,channels,enabled,max_in_flight,retry_base,retry_max,retry_horizon,created_at}')) v(r, cols);

-- Who holds which capacity in this database, by the role's name (the
-- same on every node of a Citus cluster, where an OID is not).
CREATE TABLE @extschema@.paynotify_role (
	role		name NOT NULL,
	capacity	text NOT NULL
				CHECK (capacity OPERATOR(pg_catalog.=) ANY ('{admin,handler,relay}'::text[])),
	schema_usage boolean NOT NULL DEFAULT false,	-- paynotify_grant gave USAGE on the schema
	granted_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (role, capacity)
);
COMMENT ON TABLE @extschema@.paynotify_role IS
	'paynotify: the roles that hold a capacity (admin, handler, relay) in this database (paynotify_grant, paynotify_revoke)';
INSERT INTO @extschema@.paynotify_capacity (capacity, privilege, rel)
	VALUES ('admin', 'SELECT', '@extschema@.paynotify_role');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_role', '');

-- The privileges of one capacity given to or taken from a role.  The
-- statements run as the caller: only who may grant on the extension's
-- objects (its owner, a superuser) can.
CREATE FUNCTION @extschema@.paynotify_capacity_acl(role regrole, capacity text, give boolean)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p record;
BEGIN
	FOR p IN SELECT c.privilege, c.fn, c.rel, c.columns FROM @extschema@.paynotify_capacity c
			 WHERE c.capacity OPERATOR(pg_catalog.=) paynotify_capacity_acl.capacity LOOP
		EXECUTE pg_catalog.format('%s %s%s ON %s %s %s %s',
			CASE WHEN give THEN 'GRANT' ELSE 'REVOKE' END,
			p.privilege,
			CASE WHEN p.columns IS NULL THEN ''
				 ELSE pg_catalog.format(' (%s)', (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(x), ', ')
												 FROM pg_catalog.unnest(p.columns) x)) END,
			CASE WHEN p.fn IS NOT NULL THEN 'FUNCTION' ELSE 'TABLE' END,
			coalesce(p.fn::text, p.rel::text),
			CASE WHEN give THEN 'TO' ELSE 'FROM' END,
			role);
	END LOOP;
END
$$;

CREATE FUNCTION @extschema@.paynotify_grant(role regrole, capacity text)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	usage boolean := false;
	rolname name := (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role);
BEGIN
	IF role IS NULL OR capacity IS NULL THEN
		RAISE EXCEPTION 'role and capacity must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF capacity OPERATOR(pg_catalog.<>) ALL ('{admin,handler,relay}'::text[]) THEN
		RAISE EXCEPTION 'unknown capacity "%"', capacity
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A capacity is admin (configure and operate), handler (the shim: paynotify_handle) or relay (paynotify-relay).';
	END IF;
	IF role::text OPERATOR(pg_catalog.=) ANY ('{paynotify_handler,paynotify_admin,paynotify_relay}'::text[]) THEN
		RAISE EXCEPTION 'paynotify does not grant to the group role %', role
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'It is a cluster-wide role of paynotify 1.2 and earlier: its members are in every database.',
				  HINT = 'Grant the capacity to the login role itself.';
	END IF;
	-- USAGE on the extension's schema, unless the role can use it already
	IF NOT pg_catalog.has_schema_privilege(role, '@extschema@', 'USAGE') THEN
		EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %s', '@extschema@', role);
		usage := true;
	END IF;
	PERFORM @extschema@.paynotify_capacity_acl(role, capacity, true);
	INSERT INTO @extschema@.paynotify_role AS r (role, capacity, schema_usage)
		VALUES (rolname, capacity, usage)
		ON CONFLICT ON CONSTRAINT paynotify_role_pkey
		DO UPDATE SET schema_usage = r.schema_usage OR excluded.schema_usage;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_grant(regrole, text) IS
	'gives a role a capacity (admin, handler or relay) in this database, with USAGE on the extension''s schema';

CREATE FUNCTION @extschema@.paynotify_revoke(role regrole, capacity text)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	usage boolean;
	other text;
	rolname name := (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role);
BEGIN
	IF role IS NULL OR capacity IS NULL THEN
		RAISE EXCEPTION 'role and capacity must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF capacity OPERATOR(pg_catalog.<>) ALL ('{admin,handler,relay}'::text[]) THEN
		RAISE EXCEPTION 'unknown capacity "%"', capacity
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A capacity is admin, handler or relay.';
	END IF;
	DELETE FROM @extschema@.paynotify_role r
		WHERE r.role OPERATOR(pg_catalog.=) rolname
		  AND r.capacity OPERATOR(pg_catalog.=) paynotify_revoke.capacity
		RETURNING r.schema_usage INTO usage;
	-- its privileges, then again those of what the role still holds (the
	-- capacities share some: paynotify_handle)
	PERFORM @extschema@.paynotify_capacity_acl(role, capacity, false);
	FOR other IN SELECT r.capacity FROM @extschema@.paynotify_role r
				 WHERE r.role OPERATOR(pg_catalog.=) rolname LOOP
		PERFORM @extschema@.paynotify_capacity_acl(role, other, true);
	END LOOP;
	IF usage THEN
		IF other IS NOT NULL THEN
			-- the schema stays usable for what the role still holds
			UPDATE @extschema@.paynotify_role r SET schema_usage = true
				WHERE r.role OPERATOR(pg_catalog.=) rolname
				  AND r.capacity OPERATOR(pg_catalog.=) other;
		ELSE
			EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %I FROM %s', '@extschema@', role);
		END IF;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_revoke(regrole, text) IS
	'takes a capacity (admin, handler or relay) in this database from a role';
REVOKE ALL ON @extschema@.paynotify_capacity, @extschema@.paynotify_role FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.paynotify_capacity_acl(regrole, text, boolean),
	@extschema@.paynotify_grant(regrole, text), @extschema@.paynotify_revoke(regrole, text)
	FROM PUBLIC;

-- An installation from before 1.3: each direct member of a group role
-- keeps its capacity here, as a grant of its own in this database; then
-- the group roles lose every privilege here.  A fresh installation (its
-- 1.0 step marks it) keeps nothing: the members the group roles have for
-- other databases get nothing here.
DO $$
DECLARE
	m record;
	kept text[] := '{}';
BEGIN
	IF pg_catalog.current_setting('paynotify_install.fresh', true) IS DISTINCT FROM 'on' THEN
		FOR m IN SELECT a.member::regrole AS role, g.capacity
				 FROM pg_catalog.pg_auth_members a
				 JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.roleid
				 JOIN (VALUES ('paynotify_handler'::name, 'handler'), ('paynotify_admin', 'admin'),
							  ('paynotify_relay', 'relay')) g(grp, capacity)
					ON r.rolname OPERATOR(pg_catalog.=) g.grp
				 WHERE a.member::regrole::text OPERATOR(pg_catalog.<>) ALL
					   ('{paynotify_handler,paynotify_admin,paynotify_relay}'::text[])
				 ORDER BY a.member::regrole::text, g.capacity LOOP
			PERFORM @extschema@.paynotify_grant(m.role, m.capacity);
			kept := kept OPERATOR(pg_catalog.||) pg_catalog.format('%s (%s)', m.role, m.capacity);
		END LOOP;
	END IF;
	FOR m IN SELECT r.rolname::regrole AS role, c.capacity FROM pg_catalog.pg_roles r
			 CROSS JOIN (VALUES ('admin'), ('handler'), ('relay')) c(capacity)
			 WHERE r.rolname OPERATOR(pg_catalog.=) ANY ('{paynotify_handler,paynotify_admin,paynotify_relay}'::name[]) LOOP
		PERFORM @extschema@.paynotify_capacity_acl(m.role, m.capacity, false);
	END LOOP;
	IF pg_catalog.cardinality(kept) OPERATOR(pg_catalog.>) 0 THEN
		RAISE WARNING 'paynotify 1.3: the group roles paynotify_handler, paynotify_admin and paynotify_relay have no privileges in this database any more; their members keep their capacity here as grants of their own: %',
			pg_catalog.array_to_string(kept, ', ')
			USING HINT = 'In each database, list them with SELECT * FROM paynotify_role, and take from each role what belongs to another database with paynotify_revoke(role, capacity).';
	END IF;
END
$$;

-- ===== Citus: paynotify_distribute runs no one's code as superuser =====

-- ===== Citus: the relay's claims and reports cannot deadlock =====
