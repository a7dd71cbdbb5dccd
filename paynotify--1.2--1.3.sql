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

-- ===== Citus: paynotify_distribute runs no one's code as superuser =====

-- ===== Citus: the relay's claims and reports cannot deadlock =====
