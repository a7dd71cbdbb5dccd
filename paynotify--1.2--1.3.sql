/* paynotify--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.3'" to load this file. \quit

-- Version 1.3: hardening.  Nothing of the extension resolves to an object
-- outside pg_catalog and the extension itself; what a role is given to
-- operate, serve or relay paynotify holds in one database only; on Citus,
-- paynotify_distribute() runs no one's code with more rights than its
-- author, and the relay's claim and report reach each node over one
-- connection (no distributed deadlock of a relay with itself).

-- ===== No hook runs as a superuser =====
--
-- A hook runs as the role that registered it.  A superuser's ran whatever
-- its code reached with every right: a domain's CHECK or a table's trigger
-- of another role, which no catalog fully records.  1.3 refuses such a
-- hook at registration and fails the step that would run one; rather than
-- fail payments after the update, the update stops first and names them.
DO $$
DECLARE
	hooks text;
BEGIN
	SELECT pg_catalog.string_agg(pg_catalog.format('%s on %s by %s', h.handler, h.event, r.rolname),
								 ', ' ORDER BY h.event, h.handler)
	  INTO hooks
	  FROM @extschema@.paynotify_hook h
	  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) h.registered_by::pg_catalog.oid
	 WHERE r.rolsuper;
	IF hooks IS NOT NULL THEN
		RAISE EXCEPTION 'paynotify 1.3 runs no hook as a superuser, and these are registered by one: %', hooks
			USING ERRCODE = 'insufficient_privilege',
				  HINT = 'Before the update, register each again as a plain role with the rights it needs: SET ROLE that role; SELECT paynotify_on(event, handler).';
	END IF;
END
$$;

-- ===== Hooks: the registrant by name, and where it was registered =====
--
-- On Citus paynotify_hook is a reference table, copied to every node as
-- it is, registered_by (an oid) too: on a worker that oid is another
-- role, or none.  The row now also keeps the registrant's name and the
-- system identifier of the cluster where it was registered; a node that
-- is not that cluster (a Citus worker, a restore elsewhere) runs the hook
-- as the role of that name there.
ALTER TABLE @extschema@.paynotify_hook
	ADD COLUMN registrant name,
	ADD COLUMN registered_on bigint;
UPDATE @extschema@.paynotify_hook
	SET registrant = (SELECT r.rolname FROM pg_catalog.pg_roles r
					  WHERE r.oid OPERATOR(pg_catalog.=) registered_by::pg_catalog.oid),
		registered_on = (SELECT c.system_identifier FROM pg_catalog.pg_control_system() c);
COMMENT ON COLUMN @extschema@.paynotify_hook.registrant IS
	'the name of registered_by, by which another node (a Citus worker) finds the role';
COMMENT ON COLUMN @extschema@.paynotify_hook.registered_on IS
	'system identifier of the cluster where the hook was registered: there registered_by is the role';

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
		CHECK (event OPERATOR(pg_catalog.=) ANY ('{paid,refunded,refund_failed,closed,dispute_opened,dispute_won,dispute_lost,notification}'::text[]));
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
		CHECK (events OPERATOR(pg_catalog.<@) '{paid,refunded,refund_failed,closed,dispute_opened,dispute_won,dispute_lost,notification}'::text[]
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
						AND d.order_no OPERATOR(pg_catalog.<>) ''
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

-- Whether a role holds a capacity: every privilege of it granted to the
-- role itself (the catalog's ACLs, not paynotify_role, which keeps names: a
-- role dropped and created again under its name holds nothing).
CREATE FUNCTION @extschema@.paynotify_capacity_held(rolname name, capacity text)
	RETURNS boolean
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) $1)
   AND NOT EXISTS (
	SELECT FROM @extschema@.paynotify_capacity c
	WHERE c.capacity OPERATOR(pg_catalog.=) $2
	  AND NOT EXISTS (
		SELECT FROM pg_catalog.aclexplode(CASE
				WHEN c.fn IS NOT NULL THEN (SELECT p.proacl FROM pg_catalog.pg_proc p
											WHERE p.oid OPERATOR(pg_catalog.=) c.fn)
				WHEN c.columns IS NULL THEN (SELECT k.relacl FROM pg_catalog.pg_class k
											 WHERE k.oid OPERATOR(pg_catalog.=) c.rel)
				ELSE (SELECT a.attacl FROM pg_catalog.pg_attribute a
					  WHERE a.attrelid OPERATOR(pg_catalog.=) c.rel
						AND a.attname OPERATOR(pg_catalog.=) c.columns[1]) END) x
		WHERE x.grantee OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r
												WHERE r.rolname OPERATOR(pg_catalog.=) $1)
		  AND x.privilege_type OPERATOR(pg_catalog.=) c.privilege))
$$;

-- The checks paynotify_grant and paynotify_revoke share.
CREATE FUNCTION @extschema@.paynotify_capacity_check(role regrole, capacity text)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
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
	IF role::oid OPERATOR(pg_catalog.=) (SELECT e.extowner FROM pg_catalog.pg_extension e
										 WHERE e.extname OPERATOR(pg_catalog.=) 'paynotify') THEN
		RAISE EXCEPTION 'role % owns the extension paynotify', role
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'It holds every privilege on the extension''s objects: there is nothing to grant, and revoking would take away its own.';
	END IF;
END
$$;

CREATE FUNCTION @extschema@.paynotify_grant(role regrole, capacity text)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	usage boolean := false;
	gone text[];
	rolname name := (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role);
BEGIN
	PERFORM @extschema@.paynotify_capacity_check(role, capacity);
	-- rows a role of this name left when it was dropped: found first, then
	-- deleted by their values (on Citus paynotify_role is a reference
	-- table, and Citus refuses a DELETE that calls a STABLE function with
	-- its columns)
	gone := ARRAY(SELECT r.capacity FROM @extschema@.paynotify_role r
				  WHERE r.role OPERATOR(pg_catalog.=) rolname
					AND NOT @extschema@.paynotify_capacity_held(rolname, r.capacity));
	IF pg_catalog.cardinality(gone) OPERATOR(pg_catalog.>) 0 THEN
		DELETE FROM @extschema@.paynotify_role r
			WHERE r.role OPERATOR(pg_catalog.=) rolname
			  AND r.capacity OPERATOR(pg_catalog.=) ANY (gone);
	END IF;
	-- USAGE on the extension's schema, unless the role can use it already
	IF NOT pg_catalog.has_schema_privilege(role, '@extschema@'::regnamespace, 'USAGE') THEN
		EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@'::regnamespace, role);
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
	others text[];
	other text;
	hooks text;
	rolname name := (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role);
BEGIN
	PERFORM @extschema@.paynotify_capacity_check(role, capacity);
	-- what the role holds besides (by the catalog: a row of a dropped role
	-- of this name gives nothing back)
	others := ARRAY(SELECT r.capacity FROM @extschema@.paynotify_role r
					WHERE r.role OPERATOR(pg_catalog.=) rolname
					  AND r.capacity OPERATOR(pg_catalog.<>) paynotify_revoke.capacity
					  AND @extschema@.paynotify_capacity_held(rolname, r.capacity));
	DELETE FROM @extschema@.paynotify_role r
		WHERE r.role OPERATOR(pg_catalog.=) rolname
		  AND (r.capacity OPERATOR(pg_catalog.=) paynotify_revoke.capacity
			   OR r.capacity OPERATOR(pg_catalog.<>) ALL (others))
		RETURNING r.schema_usage INTO usage;
	-- its privileges, then again those of what the role still holds (the
	-- capacities share some: paynotify_handle)
	PERFORM @extschema@.paynotify_capacity_acl(role, capacity, false);
	FOREACH other IN ARRAY others LOOP
		PERFORM @extschema@.paynotify_capacity_acl(role, other, true);
	END LOOP;
	IF usage THEN
		IF pg_catalog.cardinality(others) OPERATOR(pg_catalog.>) 0 THEN
			-- the schema stays usable for what the role still holds
			UPDATE @extschema@.paynotify_role r SET schema_usage = true
				WHERE r.role OPERATOR(pg_catalog.=) rolname
				  AND r.capacity OPERATOR(pg_catalog.=) others[1];
		ELSE
			EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %s FROM %s', '@extschema@'::regnamespace, role);
		END IF;
	END IF;
	-- an operator no more: the hooks it registered stop with its capacity
	IF capacity OPERATOR(pg_catalog.=) 'admin' AND 'admin' OPERATOR(pg_catalog.<>) ALL (others) THEN
		WITH gone AS (
			DELETE FROM @extschema@.paynotify_hook h
			WHERE h.registered_by OPERATOR(pg_catalog.=) role
			RETURNING h.event OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) h.handler::text AS hook)
		SELECT pg_catalog.string_agg(g.hook, ', ') INTO hooks FROM gone g;
		IF hooks IS NOT NULL THEN
			RAISE WARNING 'the hooks % registered by % are deleted with its admin capacity', hooks, role
				USING HINT = 'An operator registers them again with paynotify_on.';
		END IF;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_revoke(regrole, text) IS
	'takes a capacity (admin, handler or relay) in this database from a role; with admin, the hooks it registered';
REVOKE ALL ON @extschema@.paynotify_capacity, @extschema@.paynotify_role FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.paynotify_capacity_acl(regrole, text, boolean),
	@extschema@.paynotify_capacity_held(name, text), @extschema@.paynotify_capacity_check(regrole, text),
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
	IF pg_catalog.current_setting('paynotify_install.fresh', true)
			IS DISTINCT FROM pg_catalog.pg_current_xact_id()::text THEN
		FOR m IN SELECT a.member::regrole AS role, g.capacity
				 FROM pg_catalog.pg_auth_members a
				 JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) a.roleid
				 JOIN (VALUES ('paynotify_handler'::name, 'handler'), ('paynotify_admin', 'admin'),
							  ('paynotify_relay', 'relay')) g(grp, capacity)
					ON r.rolname OPERATOR(pg_catalog.=) g.grp
				 WHERE a.member::regrole::text OPERATOR(pg_catalog.<>) ALL
					   ('{paynotify_handler,paynotify_admin,paynotify_relay}'::text[])
				   AND a.member OPERATOR(pg_catalog.<>) (SELECT e.extowner FROM pg_catalog.pg_extension e
														 WHERE e.extname OPERATOR(pg_catalog.=) 'paynotify')
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

-- ===== Code on the orders table runs as its owner: whose code it is =====
--
-- paynotify reads and moves orders as the orders table's owner (so that
-- the shim's role needs no right on the table), and Citus copies a table's
-- rows as the role that distributes it.  Either way the table's code runs
-- with that role's rights.  A function of that code written by a role
-- without those rights (a trigger function an application role owns,
-- attached to a table a superuser owns) would run with more rights than
-- its author.  paynotify_table_authors lists every function the table can
-- run, with what runs it and its owner, and paynotify_table_owners the
-- owners of the domains and relations the code is made of (who
-- can change it without changing a function) and the roles that may give
-- those relations triggers: paynotify acts on the table only when every
-- one has the rights of the role that runs the code (the table's owner;
-- on Citus, the caller of paynotify_distribute), as it does for hooks.
--
-- What it lists is found by following the catalog, not by a list of
-- kinds: from the code of each relation (triggers and their WHEN, check
-- and foreign key constraints, indexes, generated columns, partition keys,
-- rules, forced policies, the columns' types; the defaults of the tables
-- a rule writes to) through every type, function, operator, operator
-- class and family, relation and domain constraint they depend on
-- (pg_depend), and from each type to its input and output functions, its
-- domain's constraints, its base, element, range, multirange and
-- attribute types, its default btree and hash operator classes (arrays,
-- records and ranges compare their elements with them), and the casts
-- paynotify's statements and foreign keys apply to it.

-- The relations whose code runs when the table's rows are read or moved:
-- the table, the partitioned tables it is a partition of (their keys are
-- its partition check), its partitions and child tables, and every
-- relation a rule or a policy of any of them names (a rule's action runs
-- the code of the tables it writes to, a policy's check that of the views
-- and tables it reads: by_rule).  paynotify_table_authors reads their
-- code, and a change of any of them makes the configuration load again.
CREATE FUNCTION @extschema@.paynotify_table_relations(rel regclass)
	RETURNS TABLE (relid oid, by_rule boolean)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET jit = off
	AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH RECURSIVE rels(relid, by_rule) AS (
	-- a relation that is not there has no code (nor has oid 0)
	SELECT rel::oid, false WHERE EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel::oid)
	UNION
	SELECT a.relid::oid, false FROM pg_catalog.pg_partition_ancestors(rel) a
	UNION
	SELECT x.relid, x.by_rule FROM rels r CROSS JOIN LATERAL (
		SELECT i.inhrelid AS relid, r.by_rule FROM pg_catalog.pg_inherits i
		WHERE i.inhparent OPERATOR(pg_catalog.=) r.relid
		UNION ALL
		-- the partitioned tables a relation is a partition of (a rule
		-- writing into a partition checks its parents' keys)
		SELECT a.relid::oid, r.by_rule FROM pg_catalog.pg_partition_ancestors(r.relid) a
		WHERE a.relid::oid OPERATOR(pg_catalog.<>) r.relid
		UNION ALL
		SELECT d.refobjid, true FROM pg_catalog.pg_rewrite w
		JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::regclass::oid
			AND d.objid OPERATOR(pg_catalog.=) w.oid
			AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass::oid
		WHERE w.ev_class OPERATOR(pg_catalog.=) r.relid
		  AND d.refobjid OPERATOR(pg_catalog.<>) r.relid
		UNION ALL
		-- the relations its policies read (a view's query, a table's
		-- policies run with the policy's check)
		SELECT d.refobjid, true FROM pg_catalog.pg_policy p
		JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_policy'::regclass::oid
			AND d.objid OPERATOR(pg_catalog.=) p.oid
			AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass::oid
		WHERE p.polrelid OPERATOR(pg_catalog.=) r.relid
		  AND d.refobjid OPERATOR(pg_catalog.<>) r.relid) x)
SELECT DISTINCT ON (r.relid) r.relid, r.by_rule FROM rels r ORDER BY r.relid, r.by_rule DESC;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_table_relations(regclass) IS
	'the relations whose code a table runs when its rows are read or moved: itself, its partition ancestors, partitions and children, and the relations its rules and policies name (by_rule)';
REVOKE ALL ON FUNCTION @extschema@.paynotify_table_relations(regclass) FROM PUBLIC;

CREATE FUNCTION @extschema@.paynotify_table_code(rel regclass)
	RETURNS TABLE (what text, classid oid, objid oid)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET jit = off
	AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH RECURSIVE
rels AS (SELECT r.relid, r.by_rule FROM @extschema@.paynotify_table_relations(rel) r),
-- where the code starts, named for a message
objs(classid, objid, what) AS (
	-- the relation's partition key: what its expressions and operator
	-- classes depend on (a relation reached from a type or a foreign key
	-- is walked whole, through its pg_depend)
	SELECT d.refclassid, d.refobjid, pg_catalog.format('the partition key of %s', r.relid::regclass)
	FROM rels r JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass::oid
		AND d.objid OPERATOR(pg_catalog.=) r.relid AND d.objsubid OPERATOR(pg_catalog.=) 0
	WHERE d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog.pg_type'::regclass::oid,
			'pg_catalog.pg_proc'::regclass::oid, 'pg_catalog.pg_operator'::regclass::oid,
			'pg_catalog.pg_opclass'::regclass::oid, 'pg_catalog.pg_opfamily'::regclass::oid])
	UNION ALL
	-- the relation's columns' types
	SELECT 'pg_catalog.pg_type'::regclass::oid, a.atttypid,
		   pg_catalog.format('the type %s of column "%s" of %s', a.atttypid::regtype, a.attname, a.attrelid::regclass)
	FROM pg_catalog.pg_attribute a JOIN rels r ON a.attrelid OPERATOR(pg_catalog.=) r.relid
	WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
	UNION ALL
	SELECT 'pg_catalog.pg_trigger'::regclass::oid, t.oid,
		   pg_catalog.format('trigger "%s" of %s', t.tgname, t.tgrelid::regclass)
	FROM pg_catalog.pg_trigger t JOIN rels r ON t.tgrelid OPERATOR(pg_catalog.=) r.relid
	WHERE NOT t.tgisinternal
	UNION ALL
	SELECT 'pg_catalog.pg_constraint'::regclass::oid, c.oid,
		   pg_catalog.format('constraint "%s" of %s', c.conname, c.conrelid::regclass)
	FROM pg_catalog.pg_constraint c JOIN rels r ON c.conrelid OPERATOR(pg_catalog.=) r.relid
	UNION ALL
	-- generated columns; the defaults of a table a rule inserts into (the
	-- table's own defaults run only for an INSERT, which paynotify never
	-- makes, and a copy sends every column)
	SELECT 'pg_catalog.pg_attrdef'::regclass::oid, d.oid,
		   pg_catalog.format(CASE WHEN a.attgenerated OPERATOR(pg_catalog.<>) '' THEN 'the generated column "%s" of %s'
								  ELSE 'the default of column "%s" of %s' END, a.attname, d.adrelid::regclass)
	FROM pg_catalog.pg_attrdef d JOIN rels r ON d.adrelid OPERATOR(pg_catalog.=) r.relid
	JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.adrelid
		AND a.attnum OPERATOR(pg_catalog.=) d.adnum
	WHERE a.attgenerated OPERATOR(pg_catalog.<>) '' OR r.by_rule
	UNION ALL
	SELECT 'pg_catalog.pg_class'::regclass::oid, i.indexrelid,
		   pg_catalog.format('index %s', i.indexrelid::regclass)
	FROM pg_catalog.pg_index i JOIN rels r ON i.indrelid OPERATOR(pg_catalog.=) r.relid
	UNION ALL
	SELECT 'pg_catalog.pg_rewrite'::regclass::oid, w.oid,
		   pg_catalog.format('rule "%s" of %s', w.rulename, w.ev_class::regclass)
	FROM pg_catalog.pg_rewrite w JOIN rels r ON w.ev_class OPERATOR(pg_catalog.=) r.relid
	UNION ALL
	-- policies the owner is held to (a superuser reads past them): those
	-- of a table whose row security is forced, and those of every table
	-- another role owns (a table a rule writes to or reads)
	SELECT 'pg_catalog.pg_policy'::regclass::oid, p.oid,
		   pg_catalog.format('policy "%s" of %s', p.polname, p.polrelid::regclass)
	FROM pg_catalog.pg_policy p JOIN rels r ON p.polrelid OPERATOR(pg_catalog.=) r.relid
	JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.polrelid
	WHERE c.relrowsecurity
	  AND (c.relforcerowsecurity
		   OR c.relowner OPERATOR(pg_catalog.<>) (SELECT o.relowner FROM pg_catalog.pg_class o
												 WHERE o.oid OPERATOR(pg_catalog.=) rel::oid))),
-- everything that code reaches (each object once for each start: the
-- union ends the walk)
walk(classid, objid, what) AS (
	SELECT o.classid, o.objid, o.what FROM objs o
	UNION
	SELECT x.classid, x.objid, w.what
	FROM walk w CROSS JOIN LATERAL (
		-- what it depends on
		SELECT d.refclassid AS classid, d.refobjid AS objid FROM pg_catalog.pg_depend d
		WHERE d.classid OPERATOR(pg_catalog.=) w.classid AND d.objid OPERATOR(pg_catalog.=) w.objid
		  AND d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog.pg_type'::regclass::oid,
				'pg_catalog.pg_proc'::regclass::oid, 'pg_catalog.pg_operator'::regclass::oid,
				'pg_catalog.pg_opclass'::regclass::oid, 'pg_catalog.pg_opfamily'::regclass::oid])
		UNION ALL
		-- the table a foreign key references (its columns' types compare)
		SELECT 'pg_catalog.pg_class'::regclass::oid, c.confrelid FROM pg_catalog.pg_constraint c
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::regclass::oid
		  AND c.oid OPERATOR(pg_catalog.=) w.objid AND c.contype OPERATOR(pg_catalog.=) 'f'
		UNION ALL
		-- a type: its functions, the types it is made of, its domain's
		-- constraints, its default btree and hash operator classes
		SELECT y.classid, y.objid FROM pg_catalog.pg_type t CROSS JOIN LATERAL (VALUES
			('pg_catalog.pg_proc'::regclass::oid, t.typinput::oid), ('pg_catalog.pg_proc'::regclass::oid, t.typoutput::oid),
			('pg_catalog.pg_proc'::regclass::oid, t.typreceive::oid), ('pg_catalog.pg_proc'::regclass::oid, t.typsend::oid),
			('pg_catalog.pg_proc'::regclass::oid, t.typmodin::oid), ('pg_catalog.pg_proc'::regclass::oid, t.typmodout::oid),
			('pg_catalog.pg_proc'::regclass::oid, t.typsubscript::oid),
			('pg_catalog.pg_type'::regclass::oid, t.typbasetype), ('pg_catalog.pg_type'::regclass::oid, t.typelem),
			('pg_catalog.pg_class'::regclass::oid, t.typrelid)) y(classid, objid)
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::regclass::oid
		  AND t.oid OPERATOR(pg_catalog.=) w.objid AND y.objid OPERATOR(pg_catalog.<>) 0
		UNION ALL
		SELECT 'pg_catalog.pg_constraint'::regclass::oid, c.oid FROM pg_catalog.pg_constraint c
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::regclass::oid
		  AND c.contypid OPERATOR(pg_catalog.=) w.objid
		UNION ALL
		SELECT 'pg_catalog.pg_opclass'::regclass::oid, oc.oid FROM pg_catalog.pg_opclass oc
		JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) oc.opcmethod
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::regclass::oid
		  AND oc.opcintype OPERATOR(pg_catalog.=) w.objid AND oc.opcdefault
		  AND am.amname OPERATOR(pg_catalog.=) ANY (ARRAY['btree'::name, 'hash'::name])
		UNION ALL
		-- a range: its functions, its subtype's operator class; a
		-- multirange: its range
		SELECT y.classid, y.objid FROM pg_catalog.pg_range g CROSS JOIN LATERAL (VALUES
			('pg_catalog.pg_type'::regclass::oid, g.rngsubtype), ('pg_catalog.pg_proc'::regclass::oid, g.rngcanonical::oid),
			('pg_catalog.pg_proc'::regclass::oid, g.rngsubdiff::oid), ('pg_catalog.pg_opclass'::regclass::oid, g.rngsubopc)) y(classid, objid)
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::regclass::oid
		  AND g.rngtypid OPERATOR(pg_catalog.=) w.objid AND y.objid OPERATOR(pg_catalog.<>) 0
		UNION ALL
		SELECT 'pg_catalog.pg_type'::regclass::oid, g.rngtypid FROM pg_catalog.pg_range g
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::regclass::oid
		  AND g.rngmultitypid OPERATOR(pg_catalog.=) w.objid
		UNION ALL
		-- the casts paynotify's statements make: text to a column's type
		-- (an order number, a status value), a column's type to text or
		-- bigint (a key, a status or a currency read back, an amount)
		SELECT 'pg_catalog.pg_proc'::regclass::oid, k.castfunc FROM pg_catalog.pg_cast k
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::regclass::oid
		  AND k.castfunc OPERATOR(pg_catalog.<>) 0
		  AND ((k.castsource OPERATOR(pg_catalog.=) 'pg_catalog.text'::regtype::oid
				AND k.casttarget OPERATOR(pg_catalog.=) w.objid)
			   OR (k.castsource OPERATOR(pg_catalog.=) w.objid
				   AND k.casttarget OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog.text'::regtype::oid,
																	 'pg_catalog.int8'::regtype::oid])))
		UNION ALL
		-- an operator class: its family; a family: its support functions
		-- and operators
		SELECT 'pg_catalog.pg_opfamily'::regclass::oid, oc.opcfamily FROM pg_catalog.pg_opclass oc
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opclass'::regclass::oid
		  AND oc.oid OPERATOR(pg_catalog.=) w.objid
		UNION ALL
		SELECT 'pg_catalog.pg_proc'::regclass::oid, ap.amproc::oid FROM pg_catalog.pg_amproc ap
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opfamily'::regclass::oid
		  AND ap.amprocfamily OPERATOR(pg_catalog.=) w.objid
		UNION ALL
		SELECT 'pg_catalog.pg_operator'::regclass::oid, ao.amopopr FROM pg_catalog.pg_amop ao
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opfamily'::regclass::oid
		  AND ao.amopfamily OPERATOR(pg_catalog.=) w.objid
		UNION ALL
		-- a trigger's function; an operator's function and estimators
		SELECT 'pg_catalog.pg_proc'::regclass::oid, t.tgfoid FROM pg_catalog.pg_trigger t
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::regclass::oid
		  AND t.oid OPERATOR(pg_catalog.=) w.objid
		UNION ALL
		SELECT 'pg_catalog.pg_proc'::regclass::oid, f.fn FROM pg_catalog.pg_operator op
		CROSS JOIN LATERAL (VALUES (op.oprcode::oid), (op.oprrest::oid), (op.oprjoin::oid)) f(fn)
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::regclass::oid
		  AND op.oid OPERATOR(pg_catalog.=) w.objid AND f.fn OPERATOR(pg_catalog.<>) 0
		UNION ALL
		-- a foreign key: the casts from its columns' types to the types
		-- of the columns it references (an implicit one is applied to
		-- compare an updated row's key)
		SELECT 'pg_catalog.pg_proc'::regclass::oid, k.castfunc FROM pg_catalog.pg_constraint c
		CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(c.conkey), pg_catalog.unnest(c.confkey)) u(a, b)
		JOIN pg_catalog.pg_attribute x ON x.attrelid OPERATOR(pg_catalog.=) c.conrelid
			AND x.attnum OPERATOR(pg_catalog.=) u.a
		JOIN pg_catalog.pg_attribute y ON y.attrelid OPERATOR(pg_catalog.=) c.confrelid
			AND y.attnum OPERATOR(pg_catalog.=) u.b
		JOIN pg_catalog.pg_cast k ON k.castsource OPERATOR(pg_catalog.=) x.atttypid
			AND k.casttarget OPERATOR(pg_catalog.=) y.atttypid
		WHERE w.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::regclass::oid
		  AND c.oid OPERATOR(pg_catalog.=) w.objid AND c.contype OPERATOR(pg_catalog.=) 'f'
		  AND k.castfunc OPERATOR(pg_catalog.<>) 0) x)
-- each object once, with the first label (as bytes) that reaches it
SELECT DISTINCT ON (w.classid, w.objid) w.what, w.classid, w.objid
FROM walk w
ORDER BY w.classid, w.objid, w.what COLLATE pg_catalog."C";
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_table_code(regclass) IS
	'every object a table''s code reaches (paynotify_table_authors), each once with the first label that reaches it';
REVOKE ALL ON FUNCTION @extschema@.paynotify_table_code(regclass) FROM PUBLIC;

CREATE FUNCTION @extschema@.paynotify_table_authors(rel regclass)
	RETURNS TABLE (what text, fn regprocedure, owner regrole)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	SET jit = off
	AS $$
SELECT c.what, c.objid::pg_catalog.regprocedure, p.proowner::pg_catalog.regrole
FROM @extschema@.paynotify_table_code(rel) c
JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) c.objid
WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
ORDER BY c.what COLLATE pg_catalog."C", c.objid
$$;
COMMENT ON FUNCTION @extschema@.paynotify_table_authors(regclass) IS
	'every function a table can run when its rows are read, moved or copied, found through the catalog from its code (triggers, constraints, indexes, generated columns, partition keys, rules and policies and the relations they name, column types), each once with the first label that reaches it and its owner';
REVOKE ALL ON FUNCTION @extschema@.paynotify_table_authors(regclass) FROM PUBLIC;

-- The owners of the rest of that code, who can change it without
-- changing a function: every relation whose code the table runs (its
-- owner may give it a trigger, a policy, a rule, a check), every role
-- granted TRIGGER on one (PUBLIC is owner 0), and the owner of every
-- domain the code reaches (it may add a check, SQL no function holds).
CREATE FUNCTION @extschema@.paynotify_table_owners(rel regclass)
	RETURNS TABLE (what text, object text, owner regrole)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
	SET jit = off
	AS $$
SELECT o.what, o.object, o.owner FROM (
	SELECT pg_catalog.format('the code of %s', r.relid::pg_catalog.regclass) AS what,
		   pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, r.relid, 0) AS object,
		   c.relowner::pg_catalog.regrole AS owner
	FROM @extschema@.paynotify_table_relations(rel) r
	JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.relid
	UNION ALL
	SELECT DISTINCT pg_catalog.format('the code of %s', r.relid::pg_catalog.regclass),
		   'the right to create triggers on ' OPERATOR(pg_catalog.||)
		   pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, r.relid, 0),
		   a.grantee::pg_catalog.regrole
	FROM @extschema@.paynotify_table_relations(rel) r
	JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.relid
	CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
	WHERE a.privilege_type OPERATOR(pg_catalog.=) 'TRIGGER'
	  AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
	UNION ALL
	SELECT k.what, pg_catalog.pg_describe_object(k.classid, k.objid, 0), t.typowner::pg_catalog.regrole
	FROM @extschema@.paynotify_table_code(rel) k
	JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) k.objid
	WHERE k.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid
	  AND (t.typtype OPERATOR(pg_catalog.=) 'd' OR t.typtype OPERATOR(pg_catalog.=) 'c')) o
ORDER BY o.what COLLATE pg_catalog."C", o.object COLLATE pg_catalog."C", o.owner::pg_catalog.oid
$$;
COMMENT ON FUNCTION @extschema@.paynotify_table_owners(regclass) IS
	'the owners of the relations whose code a table runs, the roles granted TRIGGER on them, and the owners of the domains and composite types its code reaches';
REVOKE ALL ON FUNCTION @extschema@.paynotify_table_owners(regclass) FROM PUBLIC;

-- ===== Citus: paynotify_distribute runs no one's code as superuser =====
--
-- paynotify_distribute() distributed the bound orders table itself, as the
-- superuser who called it: Citus copied its rows into the shards with the
-- caller's connections, and the table's code ran with the caller's rights
-- on every worker (a BEFORE INSERT trigger that ran ALTER ROLE ... SUPERUSER
-- made its owner a superuser there).  It now distributes a table only where
-- that runs no code with more rights than its author: an orders table that
-- would run a function whose owner lacks the caller's rights
-- (paynotify_table_authors, above) is refused, and its owner distributes it
-- (its code then runs as the owner), after which paynotify_distribute()
-- finds it distributed and does the rest (an extension table whose owner
-- lacks the caller's privileges is refused as well).  The block it runs on every node (the identity ranges, the relay's
-- settings: paynotify_relay_on_citus below) now resolves nothing through the
-- node's search_path, where a public schema others may create in can hold
-- an operator that is a better match than pg_catalog's.

CREATE OR REPLACE FUNCTION @extschema@.paynotify_distribute()
	RETURNS TABLE (relation regclass, kind text, action text)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	b record;
	orders regclass;
	key_type regtype;
	part record;
	orders_colocation integer;
	t record;
	u record;
	ext oid := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'paynotify');
	fk_rels regclass[];
	fk_names name[];
	fk_defs text[];
	orders_owner regrole;
	orders_code text;
	-- What each node needs of its own, run on every node (the same text;
	-- on the workers in a session of their own, whose search_path is the
	-- node's: the block pins it before anything else).
	-- Each node's identity sequences of the notification tables get their
	-- own range: node group g hands out ids (g << 48) + 1 .. (g + 1) << 48
	-- (the coordinator, group 0, from 1), as Citus does for the tables it
	-- creates itself.  CREATE EXTENSION made every node's copy start at 1,
	-- and ids are taken on the node that runs paynotify_handle: without
	-- this, two nodes would hand out the same outbox id (webhook-id
	-- "evt_<id>") or anomaly id.  And the relay's claim and report reach
	-- each node over one connection (paynotify_relay_on_citus).
	ranges constant text := $do$
DO $r$
DECLARE
	g bigint;
	lo bigint;
	hi bigint;
	q record;
BEGIN
	-- first of all: what follows is parsed now, and resolves nothing in a
	-- schema of the node's search_path (public, with operators of someone
	-- else's: "=" for oid and regclass is an exact match there, a better
	-- one than pg_catalog's); each name and operator is qualified as well
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
	g := (SELECT l.groupid FROM pg_catalog.pg_dist_local_group l);
	lo := (g OPERATOR(pg_catalog.<<) 48) OPERATOR(pg_catalog.+) 1;
	hi := (g OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.<<) 48;
	FOR q IN SELECT d.objid::pg_catalog.regclass AS seq, s.min_value, s.last_value
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_depend e
				ON e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
				AND e.objid OPERATOR(pg_catalog.=) d.refobjid AND e.deptype OPERATOR(pg_catalog.=) 'e'
				AND e.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
				AND e.refobjid OPERATOR(pg_catalog.=) (SELECT x.oid FROM pg_catalog.pg_extension x
													   WHERE x.extname OPERATOR(pg_catalog.=) 'paynotify')
			 JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
			 JOIN pg_catalog.pg_sequences s
				ON s.schemaname OPERATOR(pg_catalog.=) c.relnamespace::pg_catalog.regnamespace::pg_catalog.name
				AND s.sequencename OPERATOR(pg_catalog.=) c.relname
			 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
			   AND d.deptype OPERATOR(pg_catalog.=) 'i'
			   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
			   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
						   WHERE a.attrelid OPERATOR(pg_catalog.=) d.refobjid
							 AND a.attname OPERATOR(pg_catalog.=) 'order_no' AND NOT a.attisdropped) LOOP
		IF q.min_value OPERATOR(pg_catalog.<>) lo THEN
			EXECUTE pg_catalog.format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START %s RESTART %s',
				q.seq, lo, hi, lo, greatest(lo, coalesce(q.last_value OPERATOR(pg_catalog.+) 1, lo)));
		END IF;
	END LOOP;
	PERFORM @extschema@.paynotify_relay_on_citus();
END
$r$
$do$;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RAISE EXCEPTION 'paynotify_distribute needs the citus extension in this database'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'On the Citus coordinator: CREATE EXTENSION citus, add the workers, CREATE EXTENSION paynotify, paynotify_bind_orders, then SELECT * FROM paynotify_distribute().';
	END IF;
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
			AND current_user::regrole <> (SELECT e.extowner::regrole FROM pg_catalog.pg_extension e
										  WHERE e.extname = 'paynotify') THEN
		RAISE EXCEPTION 'only a superuser or the owner of extension paynotify may distribute its tables'
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	SELECT * INTO b FROM @extschema@.paynotify_binding;
	orders := pg_catalog.to_regclass(b.orders);
	IF orders IS NULL THEN
		RAISE EXCEPTION 'no orders table is bound'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Call paynotify_bind_orders first: the notification tables are co-located with the orders table.';
	END IF;
	SELECT a.atttypid::regtype INTO key_type FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = orders AND a.attname = b.key_column AND NOT a.attisdropped;
	IF key_type IS DISTINCT FROM 'text'::regtype THEN
		RAISE EXCEPTION 'the key column "%" of the orders table % is %, not text', b.key_column, orders, key_type
			USING ERRCODE = 'datatype_mismatch',
				  DETAIL = 'Citus co-locates only tables whose distribution columns have the same type; paynotify''s order numbers are text.',
				  HINT = pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I TYPE text (before the orders table is distributed), then call paynotify_distribute() again.', orders, b.key_column);
	END IF;
	-- Copying a table's rows into its shards runs the table's code (its
	-- triggers, constraints, index expressions, its columns' types and
	-- domains) with the rights of the role that distributes it, here the
	-- caller's, and on the workers over the caller's connections.  No table
	-- is distributed here whose owner could have put code there that must
	-- not run with those rights: the owner of a table still to be
	-- distributed has the caller's privileges (is the caller, a superuser,
	-- or a member of the caller's role), or, for the orders table, the
	-- table holds no code of its own that the copy would run
	-- (paynotify_table_authors).  Checked before anything is changed.
	SELECT c.oid::regclass AS rel, c.relowner::regrole AS owner INTO u
		FROM pg_catalog.pg_depend d
		JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
		WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
		  AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
		  AND NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = c.oid)
		  AND NOT pg_catalog.pg_has_role(c.relowner, current_user, 'USAGE')
		ORDER BY c.relname LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'table % of extension paynotify is owned by role "%", whose code may not run as role "%"',
				u.rel, u.owner, current_user
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Distributing a table copies its rows into its shards, which runs its triggers with the rights of the role that distributes it.',
				  HINT = pg_catalog.format('Call paynotify_distribute() as role "%s".', u.owner);
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = orders) THEN
		-- the table (and its partitions) held until the copy: no trigger,
		-- rule, policy or column is given to it meanwhile, so its owner's
		-- and the TRIGGER grantees' rows need not be judged, its code is
		EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', orders);
		SELECT c.relowner::regrole INTO orders_owner FROM pg_catalog.pg_class c WHERE c.oid = orders;
		SELECT a.what OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) a.object
			   OPERATOR(pg_catalog.||) ' of role ' OPERATOR(pg_catalog.||)
			   CASE WHEN a.owner OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.owner::text END
			INTO orders_code
			FROM (SELECT f.what, 'function ' OPERATOR(pg_catalog.||) f.fn::text AS object, f.owner::oid AS owner
				  FROM @extschema@.paynotify_table_authors(orders) f
				  UNION ALL
				  SELECT o.what, o.object, o.owner::oid FROM @extschema@.paynotify_table_owners(orders) o) a
			WHERE CASE WHEN a.owner OPERATOR(pg_catalog.=) 0 THEN true
					   ELSE NOT pg_catalog.pg_has_role(a.owner, current_user, 'USAGE') END
			  AND a.what OPERATOR(pg_catalog.<>) pg_catalog.format('the code of %s', orders)
			ORDER BY a.what LIMIT 1;
		IF orders_code IS NOT NULL THEN
			RAISE EXCEPTION 'the orders table % runs code of a role whose rights role "%" has and it has not',
					orders, current_user
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = pg_catalog.format('Distributing it copies its rows into its shards, which runs %s with the rights of the role that distributes it.', orders_code),
					  HINT = pg_catalog.format('Have its owner, %s, distribute it (SET citus.enable_unsafe_triggers = on first if it has triggers; paynotify''s guard needs EXECUTE on paynotify_guard_transition() for the owner on every node): SELECT create_distributed_table(%L, %L); then call paynotify_distribute() again.',
											   orders_owner, orders, b.key_column);
		END IF;
	END IF;
	-- Citus refuses to distribute tables with triggers unless told that it
	-- may: the configuration tables' triggers only touch configuration
	-- tables (reference tables, the same rows on every node)
	PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
	-- foreign keys to reference tables are added in the same transaction as
	-- the distribution, which Citus allows one shard at a time only
	PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);

	-- The foreign keys between the extension's tables (a key's channel, a
	-- delivery's endpoint) are taken off while their tables are not all
	-- distributed, and put back at the end: Citus would otherwise turn the
	-- referencing table into a local table of its own when the referenced
	-- one becomes a reference table.
	SELECT pg_catalog.array_agg(f.conrelid::regclass ORDER BY f.conname),
		   pg_catalog.array_agg(f.conname ORDER BY f.conname),
		   pg_catalog.array_agg(pg_catalog.pg_get_constraintdef(f.oid) ORDER BY f.conname)
		INTO fk_rels, fk_names, fk_defs
		FROM pg_catalog.pg_constraint f
		JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass
			AND d.objid = f.conrelid AND d.deptype = 'e'
			AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
		WHERE f.contype = 'f'
		  AND NOT (EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = f.conrelid)
				   AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = f.confrelid));
	FOR i IN 1 .. coalesce(pg_catalog.array_length(fk_names, 1), 0) LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', fk_rels[i], fk_names[i]);
		-- the workers' copies of the table (CREATE EXTENSION made them) too:
		-- Citus puts the key back on them when it is added below.  Not in
		-- this transaction: if this function fails later, a second call
		-- finds them gone already and adds them back.
		IF EXISTS (SELECT FROM pg_catalog.run_command_on_workers(
					   pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', fk_rels[i], fk_names[i])) w
				   WHERE NOT w.success) THEN
			RAISE EXCEPTION 'could not drop foreign key % of % on every worker', fk_names[i], fk_rels[i]
				USING ERRCODE = 'connection_failure',
					  HINT = 'Check that every worker is up (citus_check_cluster_node_health()), then call paynotify_distribute() again.';
		END IF;
	END LOOP;

	-- configuration: reference tables
	FOR t IN SELECT c.oid::regclass AS rel, p.partmethod
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
			 LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
			   AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
			   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
							   AND a.attname = 'order_no' AND NOT a.attisdropped)
			 ORDER BY c.relname LOOP
		relation := t.rel;
		kind := 'reference';
		IF t.partmethod IS NULL THEN
			PERFORM pg_catalog.create_reference_table(t.rel);
			action := 'created';
		ELSIF t.partmethod = 'n' AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
				WHERE p.logicalrelid = t.rel AND p.repmodel = 't') THEN
			action := 'already';
		ELSE
			RAISE EXCEPTION 'table % is already distributed, not a reference table', t.rel
				USING ERRCODE = 'invalid_table_definition',
					  HINT = pg_catalog.format('SELECT undistribute_table(%L), then call paynotify_distribute() again.', t.rel);
		END IF;
		RETURN NEXT;
	END LOOP;

	-- the orders table, by its key column
	SELECT p.partmethod, p.colocationid,
		   CASE WHEN p.partmethod = 'h' THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END AS col
		INTO part FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = orders;
	relation := orders;
	kind := 'orders';
	IF NOT FOUND THEN
		PERFORM pg_catalog.create_distributed_table(orders, b.key_column::text);
		action := 'created';
	ELSIF part.partmethod = 'h' AND part.col = b.key_column THEN
		action := 'already';
	ELSE
		RAISE EXCEPTION 'the orders table % is distributed otherwise than by its key column "%"%', orders, b.key_column,
				CASE WHEN part.col IS NOT NULL THEN pg_catalog.format(' (by "%s")', part.col)
					 ELSE ' (a reference or local table)' END
			USING ERRCODE = 'invalid_table_definition',
				  DETAIL = 'Every notification is routed to the node of its order: the orders table must be hash-distributed by the column that holds the order number.',
				  HINT = pg_catalog.format('SELECT undistribute_table(%L), then call paynotify_distribute() again (it distributes it by %I).', orders, b.key_column);
	END IF;
	RETURN NEXT;
	SELECT p.colocationid INTO orders_colocation FROM pg_catalog.pg_dist_partition p
		WHERE p.logicalrelid = orders;

	-- notification data: by order_no, co-located with the orders table
	FOR t IN SELECT c.oid::regclass AS rel, p.partmethod, p.colocationid
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
			 LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
			   AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
			   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
						   AND a.attname = 'order_no' AND NOT a.attisdropped)
			 ORDER BY c.relname LOOP
		relation := t.rel;
		kind := 'distributed';
		IF t.partmethod IS NULL THEN
			-- a unique key without order_no (payment_notify_log_notify,
			-- payment_record_trade: see above) cannot exist on Citus: a
			-- plain index of the same name and columns takes its place
			FOR u IN SELECT con.conname,
						 (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY k.i)
						  FROM pg_catalog.unnest(con.conkey) WITH ORDINALITY k(n, i)
						  JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n) AS cols
					 FROM pg_catalog.pg_constraint con
					 WHERE con.conrelid = t.rel AND con.contype = 'u'
					   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
									   WHERE a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey)
										 AND a.attname = 'order_no') LOOP
				EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', t.rel, u.conname);
				EXECUTE pg_catalog.format('CREATE INDEX %I ON %s (%s)', u.conname, t.rel, u.cols);
			END LOOP;
			PERFORM pg_catalog.create_distributed_table(t.rel, 'order_no', colocate_with => orders::text);
			action := 'created';
		ELSIF t.colocationid = orders_colocation THEN
			action := 'already';
		ELSE
			RAISE EXCEPTION 'table % is already distributed, not by order_no with the orders table %', t.rel, orders
				USING ERRCODE = 'invalid_table_definition',
					  HINT = pg_catalog.format('SELECT undistribute_table(%L), then call paynotify_distribute() again.', t.rel);
		END IF;
		RETURN NEXT;
	END LOOP;

	FOR i IN 1 .. coalesce(pg_catalog.array_length(fk_names, 1), 0) LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk_rels[i], fk_names[i], fk_defs[i]);
	END LOOP;

	-- each order's sequence (paynotify_order_seq) continues above every
	-- event recorded for it before: on one server the outbox id was its
	-- sequence (idempotent: a value is never lowered)
	INSERT INTO @extschema@.paynotify_order_seq AS q (order_no, last)
		SELECT s.order_no, pg_catalog.max(s.seq)
		FROM (SELECT o.order_no, coalesce(o.order_seq, o.id) AS seq FROM @extschema@.paynotify_outbox o
			  UNION ALL
			  SELECT d.order_no, d.order_seq FROM @extschema@.paynotify_delivery d) s
		GROUP BY s.order_no
		ON CONFLICT (order_no) DO UPDATE SET last = greatest(q.last, excluded.last);
	relation := '@extschema@.paynotify_order_seq'::regclass;
	kind := 'order sequences';
	action := 'continued above the events recorded before';
	RETURN NEXT;

	-- the identity ranges (see ranges above), here and on every worker
	EXECUTE ranges;
	IF EXISTS (SELECT FROM pg_catalog.run_command_on_workers(ranges) w WHERE NOT w.success) THEN
		RAISE EXCEPTION 'could not give the identity sequences of every worker their range'
			USING ERRCODE = 'connection_failure',
				  HINT = 'Check that every worker is up (citus_check_cluster_node_health()), then call paynotify_distribute() again.';
	END IF;
	relation := NULL;
	kind := 'identity ranges';
	action := 'node group g: ids (g << 48) + 1 .. (g + 1) << 48';
	RETURN NEXT;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_distribute() IS
	'Citus: makes the configuration tables reference tables and distributes the orders table and every notification table by order number, co-located; idempotent';



-- ===== Nothing authentic is swallowed: notification and dispute events =====
--
-- Every authentic notification of a kind paynotify does not apply itself
-- (Stripe customer.*, WeChat PROFITSHARING.*, COMPLAINT.*, PAYSCORE.*,
-- Alipay's agreement notices, thin events, a WeChat trade still NOTPAY,
-- ...) was recorded and acknowledged as "ignored", and the application
-- never heard of it.  It now queues one event "notification", in the step
-- that records it (exactly once, like any event), carrying the gateway's
-- event type and the verified payload (decrypted for WeChat).  A Stripe
-- dispute queues dispute_opened, dispute_won or dispute_lost with the
-- disputed amount.  What an event carries besides its columns is in
-- detail, and the relay's body carries it too; events of no order
-- (order_no '', null in the body) wait for no other event.
ALTER TABLE @extschema@.paynotify_outbox ADD COLUMN detail jsonb;
COMMENT ON COLUMN @extschema@.paynotify_outbox.detail IS
	'what the event carries besides its columns: for notification the gateway, its event type and the verified payload; for a dispute its id, status, reason, charge and currency';
COMMENT ON FUNCTION @extschema@.paynotify_add_endpoint(text, text, text[], text[], interval, integer) IS
	'adds a webhook endpoint for paynotify-relay; events default to paid, refunded, refund_failed and closed, channels NULL or {} to every channel; returns its id';

-- A service provider's channel may serve all its sub-merchants (sp_mchid
-- without sub_mchid): which one was paid is kept with the payment.
ALTER TABLE @extschema@.payment_record ADD COLUMN sub_merchant text;
COMMENT ON COLUMN @extschema@.payment_record.sub_merchant IS
	'the sub-merchant paid, where the channel is a service provider''s (WeChat Pay partner mode: sub_mchid); NULL otherwise';

CREATE OR REPLACE FUNCTION @extschema@.paynotify_check_endpoint(url text, secret text, events text[],
		channels text[])
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n integer;
BEGIN
	IF url IS NOT NULL AND url !~ '^https?://[^[:space:]]+$' THEN
		RAISE EXCEPTION 'endpoint url must start with http:// or https:// and contain no spaces'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF secret IS NOT NULL THEN
		IF secret !~ '^whsec_([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' THEN
			RAISE EXCEPTION 'endpoint secret must be "whsec_" followed by base64'
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Make one with: echo "whsec_$(openssl rand -base64 32)"';
		END IF;
		n := length(decode(substr(secret, 7), 'base64'));
		IF n < 24 OR n > 64 THEN
			RAISE EXCEPTION 'endpoint secret must encode 24 to 64 bytes, not %', n
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Make one with: echo "whsec_$(openssl rand -base64 32)"';
		END IF;
	END IF;
	IF events IS NOT NULL AND (cardinality(events) = 0 OR array_position(events, NULL) IS NOT NULL
			OR NOT events <@ '{paid,refunded,refund_failed,closed,dispute_opened,dispute_won,dispute_lost,notification}') THEN
		RAISE EXCEPTION 'endpoint events must be some of paid, refunded, refund_failed, closed, dispute_opened, dispute_won, dispute_lost, notification'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF channels IS NOT NULL AND EXISTS (SELECT FROM unnest(channels) c
			WHERE c IS NULL OR c !~ '^[A-Za-z0-9_]{1,63}$') THEN
		RAISE EXCEPTION 'endpoint channels must be channel names'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_fanout(max_rows integer DEFAULT 1000)
	RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	taken integer;
	prefix text;
BEGIN
	-- no endpoint yet: leave the outbox alone
	IF NOT EXISTS (SELECT FROM @extschema@.paynotify_endpoint e WHERE e.enabled) THEN
		RETURN 0;
	END IF;
	-- one relay at a time, so that the deliveries of one order are created
	-- in the order of its events.  On Citus the lock is this node's only:
	-- fan-outs on two nodes run at once, and the claim makes a delivery
	-- wait for the order's earlier events still in the outbox as well
	IF NOT pg_try_advisory_xact_lock(1886284396, 1701736302) THEN
		RETURN 0;
	END IF;
	SELECT 'evt_' || i.id || '_' INTO prefix FROM @extschema@.paynotify_installation i;
	IF NOT FOUND THEN
		INSERT INTO @extschema@.paynotify_installation DEFAULT VALUES ON CONFLICT DO NOTHING;
		SELECT 'evt_' || i.id || '_' INTO STRICT prefix FROM @extschema@.paynotify_installation i;
	END IF;
	-- the events are taken the way any outbox worker takes them
	WITH t AS (
		SELECT * FROM @extschema@.paynotify_outbox_claim(max_rows)),
	d AS (
		INSERT INTO @extschema@.paynotify_delivery (endpoint_id, outbox_id, webhook_id, event, channel,
			order_no, order_seq, body)
		SELECT e.id, t.id, prefix || t.id, t.event, t.channel, t.order_no, coalesce(t.order_seq, t.id),
			(coalesce(t.detail, '{}') || jsonb_build_object('id', prefix || t.id, 'event', t.event,
				'channel', t.channel, 'order_no', nullif(t.order_no, ''), 'amount', t.amount,
				'notify_id', t.notify_id,
				'occurred_at', to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))::text
		FROM t JOIN @extschema@.paynotify_endpoint e
			ON e.enabled AND t.event = ANY (e.events)
			   AND (e.channels IS NULL OR t.channel = ANY (e.channels))
		ORDER BY t.id, e.id
		RETURNING 1)
	SELECT count(*) INTO taken FROM t;
	RETURN taken;
END
$$;


CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_claim(max_rows integer DEFAULT 100)
	RETURNS TABLE (delivery_id bigint, webhook_id text, endpoint_id bigint, url text,
				   secret text, max_in_flight integer, attempts integer, body text)
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	ep record;
	cand record;
	ids bigint[] := '{}';
	orders text[] := '{}';
	dues timestamptz[] := '{}';
BEGIN
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		RETURN QUERY
		WITH candidate AS MATERIALIZED (
			SELECT c.id
			FROM @extschema@.paynotify_endpoint e
				CROSS JOIN LATERAL (
					SELECT r.id, r.next_attempt_at
					FROM @extschema@.paynotify_delivery_ready r
					WHERE r.endpoint_id = e.id
					ORDER BY r.next_attempt_at
					LIMIT e.max_in_flight) c
			WHERE e.enabled
			ORDER BY c.next_attempt_at
			LIMIT max_rows)
		SELECT d.id, d.webhook_id, d.endpoint_id, e.url, e.secret, e.max_in_flight,
			d.attempts, d.body
		FROM @extschema@.paynotify_delivery d
			JOIN @extschema@.paynotify_endpoint e ON e.id = d.endpoint_id
		WHERE d.id IN (SELECT candidate.id FROM candidate)
		  AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.next_attempt_at <= pg_catalog.now()
		  AND e.enabled
		ORDER BY d.next_attempt_at
		FOR UPDATE OF d SKIP LOCKED;
		RETURN;
	END IF;
	-- Citus: the candidates of each endpoint read across the shards without
	-- locks (Citus neither locks rows nor pushes a LIMIT per endpoint down
	-- across shards), then each locked on its own shard by order_no and id.
	-- A delivery also waits for an event of its order still in the outbox
	-- with a lower order_seq: fan-outs on two nodes run at once (each node
	-- has its own advisory lock), and one may take an order's later event
	-- before the other has made the deliveries of its earlier one.  The
	-- outbox rows and deliveries of an order are on one shard, read by one
	-- statement there: an event is in one or the other.  Events of no
	-- order (notifications that name none) wait for nothing.
	FOR ep IN SELECT e.id, e.max_in_flight FROM @extschema@.paynotify_endpoint e WHERE e.enabled LOOP
		FOR cand IN
			SELECT r.id, r.order_no, r.next_attempt_at
			FROM @extschema@.paynotify_delivery_ready r
			WHERE r.endpoint_id = ep.id
			  AND (r.order_no = ''
				   OR NOT EXISTS (SELECT FROM @extschema@.paynotify_outbox o
								  WHERE o.order_no = r.order_no
									AND coalesce(o.order_seq, o.id) < r.order_seq))
			ORDER BY r.next_attempt_at
			LIMIT ep.max_in_flight LOOP
			ids := ids || cand.id;
			orders := orders || cand.order_no;
			dues := dues || cand.next_attempt_at;
		END LOOP;
	END LOOP;
	FOR cand IN SELECT u.id, u.order_no FROM unnest(ids, orders, dues) u(id, order_no, due)
				ORDER BY u.due LIMIT max_rows LOOP
		RETURN QUERY
		SELECT d.id, d.webhook_id, d.endpoint_id, e.url, e.secret, e.max_in_flight,
			d.attempts, d.body
		FROM @extschema@.paynotify_delivery d
			JOIN @extschema@.paynotify_endpoint e ON e.id = d.endpoint_id
		WHERE d.order_no = cand.order_no AND d.id = cand.id
		  AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.next_attempt_at <= pg_catalog.now()
		  AND e.enabled
		FOR UPDATE OF d SKIP LOCKED;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_relay_claim(integer) IS
	'paynotify-relay: locks up to max_rows due deliveries, at most max_in_flight per endpoint, until the caller''s transaction ends (with the endpoint and its secret)';


-- ===== Citus: the relay's claims and reports cannot deadlock =====
--
-- A relay's round is one transaction: paynotify_relay_claim locks each
-- claimed delivery on its shard (SELECT ... FOR UPDATE SKIP LOCKED), then
-- paynotify_relay_report updates them.  Citus ties a shard to the
-- connection that wrote it, so that later statements of the transaction use
-- that one, but it counts a SELECT ... FOR UPDATE as a read: a later
-- statement may reach the shard over another connection to the same node.
-- That happened where a node was reached over several connections (the
-- executor opens more when a task takes longer than
-- citus.executor_slow_start_interval, as under load): the claim's
-- statement, which also reads the endpoint's reference table, went over the
-- connection that had read that table on the node, the report's UPDATE over
-- the one that had read the shard first, and waited there for the row locks
-- of its own transaction's other connection, until Citus's deadlock
-- detection cancelled it as a distributed deadlock; the deliveries were
-- then made again.  On a Citus node both functions therefore reach every
-- node over one connection: each statement of the transaction runs in one
-- backend per node, which never waits for its own locks.  (The fan-out and
-- paynotify_outbox_claim lock with DELETE, which Citus ties to its
-- connection.)  One server keeps the functions as they were, without the
-- settings and their cost: paynotify_distribute() gives them on every node
-- as it distributes the tables, and this update where they are distributed
-- already.
CREATE FUNCTION @extschema@.paynotify_relay_on_citus()
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	-- this node's functions only: every node runs it itself
	SET citus.enable_ddl_propagation = off
	AS $$
BEGIN
	ALTER FUNCTION @extschema@.paynotify_relay_claim(integer)
		SET citus.max_adaptive_executor_pool_size = 1
		SET citus.force_max_query_parallelization = off;
	ALTER FUNCTION @extschema@.paynotify_relay_report(bigint[], integer[], text[])
		SET citus.max_adaptive_executor_pool_size = 1
		SET citus.force_max_query_parallelization = off;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_relay_on_citus() IS
	'paynotify_distribute: makes this node''s paynotify_relay_claim and paynotify_relay_report reach each Citus node over one connection';
REVOKE ALL ON FUNCTION @extschema@.paynotify_relay_on_citus() FROM PUBLIC;

DO $$
BEGIN
	IF @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		PERFORM @extschema@.paynotify_relay_on_citus();
	END IF;
END
$$;

-- ===== Triggers made by others on the orders table's relations =====
--
-- A role granted TRIGGER on a relation whose code the bound orders table
-- runs (the table, a partition, a table a rule writes to) makes triggers
-- that run as the table's owner.  The configuration refuses such grants
-- when it loads; a delivery past its load fired one made meanwhile (a
-- built-in trigger function, its WHEN condition calling query_to_xml).
-- Each CREATE TRIGGER by a role without the rights of the relation's
-- owner is refused there, whenever it comes.
CREATE FUNCTION @extschema@.paynotify_trigger_created()
	RETURNS event_trigger
	LANGUAGE C
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'paynotify_trigger_created';
COMMENT ON FUNCTION @extschema@.paynotify_trigger_created() IS
	'event trigger: refuses CREATE TRIGGER on a relation whose code the bound orders table runs by a role without its owner''s rights';
REVOKE ALL ON FUNCTION @extschema@.paynotify_trigger_created() FROM PUBLIC;
CREATE EVENT TRIGGER paynotify_trigger_created ON ddl_command_end
	WHEN TAG IN ('CREATE TRIGGER')
	EXECUTE FUNCTION @extschema@.paynotify_trigger_created();

-- ===== A service provider's channels, one per sub-merchant =====
--
-- A partner channel (sp_mchid, sub_mchid) checks its own merchant as a
-- direct one (mchid) does: its sub-merchant's channels may share the
-- provider's APIv3 key.  The same provider with an overlapping
-- sub-merchant (or none, meaning all), or a direct channel whose mchid is
-- the provider's (it takes the provider's notices), is the same account.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_check_account() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	s jsonb;
	gw text;
	other text;
	what text;
	hint text;
	-- this node's shards of them on Citus (paynotify_sibling)
	channels text := @extschema@.paynotify_sibling('paynotify_channel', TG_TABLE_NAME);
	keys text := @extschema@.paynotify_sibling('paynotify_key', TG_TABLE_NAME);
BEGIN
	IF pg_catalog.current_setting('paynotify.allow_shared_accounts', true) = 'on'
			OR channels IS NULL OR keys IS NULL THEN	-- being distributed (paynotify_sibling)
		RETURN NEW;
	END IF;
	-- one configuration change at a time, so two cannot both pass the check
	PERFORM pg_catalog.pg_advisory_xact_lock(-3751950917148160981);
	IF pg_catalog.regexp_replace(TG_TABLE_NAME, '_[0-9]+$', '') = 'paynotify_channel' THEN
		s := NEW.settings;
		IF NEW.gateway = 'wxpay' THEN
			EXECUTE pg_catalog.format('SELECT c.name FROM %s c
			WHERE c.gateway = ''wxpay'' AND c.name <> $1
			  AND ($2 = ''INSERT'' OR c.name <> $3)
			  AND (c.settings->>''mchid'' = $4->>''mchid''
				   OR c.settings->>''mchid'' = $4->>''sp_mchid''
				   OR c.settings->>''sp_mchid'' = $4->>''mchid''
				   OR (c.settings->>''sp_mchid'' = $4->>''sp_mchid''
					   AND (c.settings->>''sub_mchid'' IS NULL OR $4->>''sub_mchid'' IS NULL
							OR c.settings->>''sub_mchid'' = $4->>''sub_mchid'')))
			ORDER BY c.name LIMIT 1', channels) INTO other USING NEW.name, TG_OP, OLD.name, s;
			IF other IS NOT NULL THEN
				what := pg_catalog.format('WeChat Pay merchant %s', COALESCE(s->>'mchid',
					pg_catalog.concat(s->>'sp_mchid', ' (sub-merchant ', COALESCE(s->>'sub_mchid', 'any'), ')')));
				hint := 'Use one channel per merchant account: route every notify URL of the account to it.';
			ELSE
				EXECUTE pg_catalog.format('SELECT c.name FROM %s c
				WHERE c.gateway = ''wxpay'' AND c.name <> $1
				  AND ($2 = ''INSERT'' OR c.name <> $3)
				  AND c.settings->>''apiv3_key'' = $4->>''apiv3_key''
				  AND (NOT (c.settings->>''mchid'' IS NOT NULL
							OR (c.settings->>''sp_mchid'' IS NOT NULL AND c.settings->>''sub_mchid'' IS NOT NULL))
					   OR NOT ($4->>''mchid'' IS NOT NULL
							   OR ($4->>''sp_mchid'' IS NOT NULL AND $4->>''sub_mchid'' IS NOT NULL)))
				ORDER BY c.name LIMIT 1', channels) INTO other USING NEW.name, TG_OP, OLD.name, s;
				IF other IS NOT NULL THEN
					what := 'WeChat Pay notifications decrypted with the same APIv3 key';
					hint := 'Set mchid (a service provider: sp_mchid and sub_mchid) on both channels, each its own merchant, or use one channel per merchant account.';
				END IF;
			END IF;
		ELSIF NEW.gateway = 'alipay' THEN
			EXECUTE pg_catalog.format('SELECT c.name FROM %s c
			WHERE c.gateway = ''alipay'' AND c.name <> $1
			  AND ($2 = ''INSERT'' OR c.name <> $3)
			  AND c.settings->>''app_id'' = $4->>''app_id''
			  AND (c.settings->>''seller_id'' IS NULL OR $4->>''seller_id'' IS NULL
				   OR c.settings->>''seller_id'' = $4->>''seller_id'')
			ORDER BY c.name LIMIT 1', channels) INTO other USING NEW.name, TG_OP, OLD.name, s;
			IF other IS NOT NULL THEN
				what := pg_catalog.format('Alipay app_id %s', s->>'app_id');
				hint := 'Use one channel per app_id; two channels may share one only when each checks its own seller_id.';
			END IF;
		END IF;
		IF other IS NOT NULL THEN
			RAISE EXCEPTION 'channel "%" would accept % like channel "%"', NEW.name, what, other
				USING ERRCODE = 'exclusion_violation',
					  DETAIL = 'A notification captured on one channel could be replayed to the other and take effect twice.',
					  HINT = hint;
		END IF;
	ELSIF NEW.retired_at IS NULL THEN	-- paynotify_key
		EXECUTE pg_catalog.format('SELECT c.gateway FROM %s c WHERE c.name = $1', channels)
			INTO gw USING NEW.channel;
		IF gw = 'stripe' THEN
			EXECUTE pg_catalog.format('SELECT k.channel
			FROM %s k
			JOIN %s c ON c.name = k.channel
			WHERE c.gateway = ''stripe'' AND k.channel <> $1
			  AND k.retired_at IS NULL AND k.material = $2
			ORDER BY k.channel LIMIT 1', keys, channels) INTO other USING NEW.channel, NEW.material;
			IF other IS NOT NULL THEN
				RAISE EXCEPTION 'key "%" of channel "%" is a signing secret channel "%" already trusts',
						NEW.key_id, NEW.channel, other
					USING ERRCODE = 'exclusion_violation',
						  DETAIL = 'An event captured on one channel could be replayed to the other and take effect twice.',
						  HINT = pg_catalog.format('Each Stripe webhook endpoint has its own signing secret: add this channel''s, or retire the key in channel "%s" first.', other);
			END IF;
		END IF;
	END IF;
	RETURN NEW;
END
$$;

-- ===== Disputes: one record each, and the order's state from all of them =====
--
-- Stripe sends a dispute's events in any order, and an order may have
-- several disputes: no state of the order follows from one event.  Each
-- dispute is kept here once (open, then won or lost; a close that arrives
-- first is recorded as closed, and its open moves nothing when it comes),
-- and the order's state follows from all its disputes, where the state
-- machine has a state "disputed" (docs/LEDGER.md, "Disputes"): an open
-- dispute makes the order disputed; when none is open any more, the order
-- goes back to the state it left for "disputed", or to "refunded" when
-- disputes lost took back what the order kept of its payments.
CREATE TABLE @extschema@.paynotify_dispute (
	channel		text NOT NULL,
	dispute_id	text NOT NULL,
	order_no	text NOT NULL,
	trade_no	text,
	amount		bigint,
	currency	text,
	status		text NOT NULL
				CHECK (status OPERATOR(pg_catalog.=) ANY ('{open,won,lost}'::text[])),
	opened_notify_id text,
	closed_notify_id text,
	opened_at	timestamptz,
	closed_at	timestamptz,
	PRIMARY KEY (channel, dispute_id, order_no)
);
-- the per-order tally of the business step
CREATE INDEX paynotify_dispute_order ON @extschema@.paynotify_dispute (order_no);
COMMENT ON TABLE @extschema@.paynotify_dispute IS
	'paynotify: one row per gateway dispute (chargeback) of a recorded payment: open, won or lost; amount in minor units';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_dispute', '');
REVOKE ALL ON @extschema@.paynotify_dispute FROM PUBLIC;
-- operators read it, like the other records; those who are operators
-- already (found before the capacity grows) get it now
DO $$
DECLARE
	admins name[] := ARRAY(SELECT o.role FROM @extschema@.paynotify_role o
						   WHERE o.capacity OPERATOR(pg_catalog.=) 'admin'
							 AND @extschema@.paynotify_capacity_held(o.role, o.capacity));
	admin name;
BEGIN
	INSERT INTO @extschema@.paynotify_capacity (capacity, privilege, rel)
		VALUES ('admin', 'SELECT', '@extschema@.paynotify_dispute'::regclass);
	FOREACH admin IN ARRAY admins LOOP
		EXECUTE pg_catalog.format('GRANT SELECT ON %s TO %I', '@extschema@.paynotify_dispute'::regclass, admin);
	END LOOP;
END
$$;

-- The traces show a dispute's opening and close.  An order's trace also
-- shows the notifications that queued events for it while their log rows
-- are keyed otherwise: a dispute's (keyed by the order its notice named,
-- or none: the notice names its trade, not the order) and a WeChat Pay
-- combine payment's (keyed by its combine_out_trade_no).
CREATE FUNCTION @extschema@.paynotify_trace_disputes(p_channel text, p_notify_id text, p_order_no text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
BEGIN
	-- PL/pgSQL: Citus plans no SQL function's parameters
	RETURN QUERY
SELECT e.at, 'dispute'::text, e.channel, e.notify_id,
	pg_catalog.jsonb_build_object('dispute_id', e.dispute_id, 'order_no', e.order_no,
		'trade_no', e.trade_no, 'amount', e.amount, 'currency', e.currency, 'status', e.status)
FROM (SELECT d.opened_at AS at, d.channel, d.opened_notify_id AS notify_id, d.dispute_id,
			 d.order_no, d.trade_no, d.amount, d.currency, 'open' AS status
	  FROM @extschema@.paynotify_dispute d
	  WHERE d.opened_notify_id IS NOT NULL
		AND ((p_order_no IS NULL AND d.channel OPERATOR(pg_catalog.=) p_channel
			  AND d.opened_notify_id OPERATOR(pg_catalog.=) p_notify_id)
			 OR d.order_no OPERATOR(pg_catalog.=) p_order_no)
	  UNION ALL
	  SELECT d.closed_at, d.channel, d.closed_notify_id, d.dispute_id,
			 d.order_no, d.trade_no, d.amount, d.currency, d.status
	  FROM @extschema@.paynotify_dispute d
	  WHERE d.closed_notify_id IS NOT NULL
		AND ((p_order_no IS NULL AND d.channel OPERATOR(pg_catalog.=) p_channel
			  AND d.closed_notify_id OPERATOR(pg_catalog.=) p_notify_id)
			 OR d.order_no OPERATOR(pg_catalog.=) p_order_no)) e;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_trace_disputes(text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_trace(channel text, notify_id text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT t.at, t.kind, t.channel, t.notify_id, t.detail
FROM (SELECT r.at, r.kind, r.channel, r.notify_id, r.detail, 0 AS src, r.n
	  FROM @extschema@.paynotify_trace_rows($1, $2, NULL, false)
		   WITH ORDINALITY r(at, kind, channel, notify_id, detail, n)
	  UNION ALL
	  SELECT d.at, d.kind, d.channel, d.notify_id, d.detail, 1, 0
	  FROM @extschema@.paynotify_trace_disputes($1, $2, NULL) d) t
ORDER BY t.at, t.src, t.n, t.channel, t.notify_id, t.detail::text
$$;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_trace_order(order_no text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_order_no text := $1;
	keyed_elsewhere text[];
BEGIN
	IF p_order_no IS NULL THEN
		RAISE EXCEPTION 'order_no must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- the notifications of the order's events, disputes and deliveries whose
	-- log rows are keyed by another order (or none); one query per table,
	-- each on the order's shard on Citus
	SELECT pg_catalog.array_agg(k.key) INTO keyed_elsewhere
	FROM (SELECT o.channel OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) o.notify_id AS key
		  FROM @extschema@.paynotify_outbox o WHERE o.order_no OPERATOR(pg_catalog.=) p_order_no
		  UNION
		  SELECT d.channel OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) (d.body::jsonb OPERATOR(pg_catalog.->>) 'notify_id')
		  FROM @extschema@.paynotify_delivery d WHERE d.order_no OPERATOR(pg_catalog.=) p_order_no
		  UNION
		  SELECT x.channel OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.opened_notify_id
		  FROM @extschema@.paynotify_dispute x WHERE x.order_no OPERATOR(pg_catalog.=) p_order_no
		  UNION
		  SELECT x.channel OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) x.closed_notify_id
		  FROM @extschema@.paynotify_dispute x WHERE x.order_no OPERATOR(pg_catalog.=) p_order_no) k
	WHERE k.key IS NOT NULL;
	IF keyed_elsewhere IS NOT NULL THEN
		keyed_elsewhere := ARRAY(
			SELECT l.channel OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) l.notify_id
			FROM @extschema@.payment_notify_log l
			WHERE l.notify_id OPERATOR(pg_catalog.=) ANY (
					  ARRAY(SELECT pg_catalog.substr(e, pg_catalog.strpos(e, ' ') OPERATOR(pg_catalog.+) 1)
							FROM pg_catalog.unnest(keyed_elsewhere) e))
			  AND l.order_no OPERATOR(pg_catalog.<>) p_order_no
			  AND (l.channel OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) l.notify_id)
				  OPERATOR(pg_catalog.=) ANY (keyed_elsewhere));
	END IF;
	RETURN QUERY
	SELECT t.at, t.kind, t.channel, t.notify_id, t.detail
	FROM (SELECT r.at, r.kind, r.channel, r.notify_id, r.detail, 0 AS src, r.n
		  FROM @extschema@.paynotify_trace_rows(NULL, NULL, p_order_no, true)
			   WITH ORDINALITY r(at, kind, channel, notify_id, detail, n)
		  UNION ALL
		  SELECT d.at, d.kind, d.channel, d.notify_id, d.detail, 1, 0
		  FROM @extschema@.paynotify_trace_disputes(NULL, NULL, p_order_no) d
		  UNION ALL
		  SELECT r.at, r.kind, r.channel, r.notify_id, r.detail, 1, r.n
		  FROM pg_catalog.unnest(keyed_elsewhere) e,
			   LATERAL @extschema@.paynotify_trace_rows(pg_catalog.split_part(e, ' ', 1),
					pg_catalog.substr(e, pg_catalog.strpos(e, ' ') OPERATOR(pg_catalog.+) 1), NULL, false)
					WITH ORDINALITY r(at, kind, channel, notify_id, detail, n)
		  WHERE r.kind OPERATOR(pg_catalog.=) ANY ('{notification,delivery,last_delivery}'::text[])) t
	ORDER BY t.at, t.src, t.n, t.channel, t.notify_id, t.detail::text;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_trace_order(text) IS
	'everything that happened to one order (notifications, also those keyed otherwise that queued its events, deliveries, payments, refunds, disputes, anomalies, status changes, outbox), in time order';
