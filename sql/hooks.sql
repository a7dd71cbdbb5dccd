-- User hooks run inside the business step: a failing hook rolls back the
-- whole step, the log row says failed, and the next delivery runs it again.
\set VERBOSITY terse
SET search_path = pay, public;

-- Hooks are registered by hk_op, a plain role with the admin capacity: no
-- superuser may register one (the last part).
CREATE ROLE hk_op;
SELECT paynotify_grant('hk_op', 'admin');
GRANT USAGE ON SCHEMA t TO hk_op;
CREATE TABLE t.hook_calls (event text, order_no text, amount bigint, channel text);
CREATE TABLE t.hook_switch (fail boolean);
INSERT INTO t.hook_switch VALUES (true);
GRANT SELECT, INSERT ON t.hook_calls TO hk_op;
GRANT SELECT ON t.hook_switch TO hk_op;
GRANT SELECT, UPDATE ON public.orders TO hk_op;
GRANT SELECT ON pay.paynotify_outbox TO hk_op;
CREATE FUNCTION t.on_paid(ev jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO t.hook_calls VALUES (ev->>'event', ev->'notice'->>'order_no',
		(ev->>'amount')::bigint, ev->>'channel');
	IF (SELECT fail FROM t.hook_switch) THEN
		RAISE EXCEPTION 'warehouse system unavailable';
	END IF;
END
$$;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.on_paid(jsonb)');
SELECT paynotify_on('paid', 't.on_paid(jsonb)');
SELECT paynotify_on('paid', 'pg_catalog.lower(text)');
RESET ROLE;

SELECT t.configure('wx_transaction_success_valid', 'h_wx');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, body, outcome FROM t.deliver('wx_transaction_success_valid', 'h_wx');
-- nothing of the business step survived; the failure did
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
SELECT count(*) AS payments FROM payment_record WHERE channel = 'h_wx';
SELECT count(*) AS events FROM paynotify_outbox WHERE channel = 'h_wx';
SELECT count(*) AS hook_rows FROM t.hook_calls;
SELECT status, attempts, delivery_count, error_msg FROM payment_notify_log WHERE channel = 'h_wx';
-- still failing: attempts count up
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'h_wx');
SELECT status, attempts, delivery_count FROM payment_notify_log WHERE channel = 'h_wx';

-- fixed: the next delivery (a re-delivery with a new signature) processes it
UPDATE t.hook_switch SET fail = false;
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_wx');
SELECT status, attempts, delivery_count, error_msg FROM payment_notify_log WHERE channel = 'h_wx';
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
SELECT * FROM t.hook_calls;
SELECT outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_wx');
SELECT count(*) AS hook_rows FROM t.hook_calls;

-- a hook that breaks the state machine fails the step like any error
CREATE FUNCTION t.bad_hook(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	UPDATE public.orders SET status = 'pending' WHERE order_no = ev->'notice'->>'order_no';
END;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.bad_hook(jsonb)');
RESET ROLE;
SELECT t.configure('wx_transaction_success_valid', 'h_bad');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_bad');
SELECT error_msg FROM payment_notify_log WHERE channel = 'h_bad';
-- a dropped hook function fails the step (retried), it is never skipped
DELETE FROM paynotify_hook WHERE handler = 't.bad_hook(jsonb)';
DROP FUNCTION t.on_paid(jsonb);
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_bad');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_bad';
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
-- created again: the next delivery runs it
CREATE FUNCTION t.on_paid(ev jsonb) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO t.hook_calls VALUES ('recreated', ev->'notice'->>'order_no', 0, ev->>'channel') $$;
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_bad');
SELECT * FROM t.hook_calls WHERE event = 'recreated';
-- dropped and created again between two deliveries of this backend: the new
-- function runs, not a stale oid
SELECT t.configure('wx_transaction_success_valid', 'h_again');
SELECT t.set_order('PN20260101000001', 'pending');
DROP FUNCTION t.on_paid(jsonb);
CREATE FUNCTION t.on_paid(ev jsonb) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO t.hook_calls VALUES ('second', ev->'notice'->>'order_no', 0, ev->>'channel') $$;
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_again');
SELECT * FROM t.hook_calls WHERE event IN ('recreated', 'second') ORDER BY event;
DELETE FROM paynotify_hook;

-- Any return type, NULL results included: LANGUAGE sql RETURNS void, an
-- integer function returning NULL.  The argument's shape; hooks run as the
-- role that registered them with search_path pinned to pg_catalog, pg_temp.
CREATE TABLE t.hook_shape (who name, path text, keys text, notice_keys text,
	event text, amount bigint, channel text, outbox_id_ok boolean);
GRANT INSERT ON t.hook_shape TO hk_op;
CREATE FUNCTION t.shape(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	INSERT INTO t.hook_shape SELECT current_user, pg_catalog.current_setting('search_path'),
		(SELECT pg_catalog.string_agg(k, ',' ORDER BY k) FROM pg_catalog.jsonb_object_keys(ev) k),
		(SELECT pg_catalog.string_agg(k, ',' ORDER BY k) FROM pg_catalog.jsonb_object_keys(ev->'notice') k),
		ev->>'event', (ev->>'amount')::bigint, ev->>'channel',
		(ev->>'outbox_id')::bigint IN (SELECT id FROM pay.paynotify_outbox);
END;
CREATE FUNCTION t.null_result(ev jsonb) RETURNS integer LANGUAGE sql BEGIN ATOMIC
	SELECT NULL::integer;
END;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.shape(jsonb)');
SELECT paynotify_on('paid', 't.null_result(jsonb)');
RESET ROLE;
SELECT t.configure('wx_transaction_success_valid', 'h_shape');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_shape');
SELECT who = 'hk_op' AS registering_role, path, keys, notice_keys, event, amount, channel, outbox_id_ok
FROM t.hook_shape;
SELECT event, handler, registered_by = 'hk_op'::regrole AS registered_by_caller
FROM paynotify_hook ORDER BY handler;
DELETE FROM paynotify_hook;

-- Refused at registration: procedures, aggregates, set-returning functions
CREATE PROCEDURE t.proc_hook(ev jsonb) LANGUAGE sql AS $$ SELECT 1 $$;
CREATE AGGREGATE t.agg_hook(jsonb) (SFUNC = pg_catalog.jsonb_concat, STYPE = jsonb);
CREATE FUNCTION t.srf_hook(ev jsonb) RETURNS SETOF integer LANGUAGE sql AS $$ SELECT 1 $$;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.proc_hook(jsonb)');
SELECT paynotify_on('paid', 't.agg_hook(jsonb)');
SELECT paynotify_on('paid', 't.srf_hook(jsonb)');
SELECT paynotify_on('paid', NULL);
SELECT paynotify_on(NULL, 't.shape(jsonb)');
RESET ROLE;
SELECT count(*) AS hooks FROM paynotify_hook;
DROP PROCEDURE t.proc_hook(jsonb);
DROP AGGREGATE t.agg_hook(jsonb);
DROP FUNCTION t.srf_hook(jsonb), t.shape(jsonb), t.null_result(jsonb), t.on_paid(jsonb), t.bad_hook(jsonb);
DROP TABLE t.hook_shape;

-- The row as a Citus worker has it: a copy of the coordinator's, whose
-- registered_by is the coordinator's oid (here: another role's),
-- registered on another cluster: the hook runs as the role named
-- registrant, and fails the step when no role has that name.
CREATE ROLE hk_w;
CREATE ROLE hk_w_other;
SELECT paynotify_grant('hk_w_other', 'admin');
GRANT USAGE ON SCHEMA t TO hk_w, hk_w_other;
CREATE TABLE t.who_ran (who name);
GRANT INSERT ON t.who_ran TO hk_w;
CREATE FUNCTION t.who(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	INSERT INTO t.who_ran VALUES (current_user);
END;
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('paid', 't.who(jsonb)', 'hk_w_other'::regrole, 'hk_w', 42);
SELECT t.configure('wx_transaction_success_valid', 'h_worker');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_worker');
SELECT who FROM t.who_ran;
UPDATE paynotify_hook SET registrant = 'hk_nobody';
SELECT t.configure('wx_transaction_success_valid', 'h_worker2');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_worker2');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_worker2';
DELETE FROM paynotify_hook;
-- the name exactly as it is, whatever its letter case, dots or spaces
CREATE ROLE "HK_W.up";
GRANT hk_w TO "HK_W.up";
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('paid', 't.who(jsonb)', 'hk_w_other'::regrole, 'HK_W.up', 42);
SELECT t.configure('wx_transaction_success_valid', 'h_worker3');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_worker3');
SELECT who FROM t.who_ran ORDER BY who;
-- on the cluster it was registered on, a role renamed since is not its
-- registrant: the step fails
UPDATE paynotify_hook SET registered_by = 'hk_w'::regrole, registrant = 'hk_w_renamed',
	registered_on = (SELECT system_identifier FROM pg_control_system());
SELECT t.configure('wx_transaction_success_valid', 'h_worker4');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_worker4');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_worker4';
DELETE FROM paynotify_hook;
DROP ROLE "HK_W.up";
-- registered here: registered_by, and the name and this cluster with it
SET ROLE hk_w_other;
SELECT paynotify_on('paid', 't.who(jsonb)');
RESET ROLE;
SELECT registered_by, registrant,
	registered_on = (SELECT system_identifier FROM pg_control_system()) AS here
FROM paynotify_hook;
DELETE FROM paynotify_hook;
DROP FUNCTION t.who(jsonb);
DROP TABLE t.who_ran;
SELECT paynotify_revoke('hk_w_other', 'admin');
REVOKE USAGE ON SCHEMA t FROM hk_w, hk_w_other;
DROP ROLE hk_w, hk_w_other;
-- No hook runs as a superuser.  The application's domain has a CHECK
-- calling built-in functions only (it writes a large object, owned by
-- whoever runs it); a superuser's hook reaching it in any way (a PL/pgSQL
-- variable of it, a BEGIN ATOMIC body inserting into a superuser's table
-- with a column of it, a query_to_xml string naming it) would run it with
-- every right, and no catalog records all those ways.
CREATE ROLE hk_app;
CREATE SCHEMA hk AUTHORIZATION hk_app;
GRANT USAGE ON SCHEMA hk TO hk_op;
GRANT USAGE ON SCHEMA t TO hk_app;
SET ROLE hk_app;
CREATE DOMAIN hk.ref AS text CHECK (VALUE IS NULL OR
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
RESET ROLE;
CREATE FUNCTION t.keep_ref(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE r hk.ref;
BEGIN r := ev->'notice'->>'order_no'; END $f$;
-- a BEGIN ATOMIC body naming nothing of hk_app's: it inserts into a
-- superuser's audit table that has a column of the domain
CREATE TABLE t.audit (event text, ref hk.ref);
CREATE FUNCTION t.audit_hook(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	INSERT INTO t.audit (event) VALUES (ev->>'event');
END;
-- a superuser registering either: refused, with the reason
\set VERBOSITY default
SELECT paynotify_on('paid', 't.audit_hook(jsonb)');
\set VERBOSITY terse
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_on('paid', 't.keep_ref(jsonb)');
SELECT count(*) AS hooks FROM paynotify_hook;
-- a plain role registers the PL/pgSQL hook: the check runs as that role
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.keep_ref(jsonb)');
RESET ROLE;
SELECT t.configure('wx_transaction_success_valid', 'h_ref');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_ref');
SELECT convert_from(lo_get(m.oid), 'UTF8') AS ran, m.lomowner::regrole AS lo_owner
FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %' ORDER BY 1;
SELECT count(lo_unlink(m.oid)) AS unlinked FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
-- that role made a superuser after the registration: the next payment
-- fails with the reason, and the check does not run
ALTER ROLE hk_op SUPERUSER;
SELECT t.configure('wx_transaction_success_valid', 'h_ref_su');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_ref_su');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_ref_su';
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
ALTER ROLE hk_op NOSUPERUSER;
DELETE FROM paynotify_hook;
-- a superuser's hook as an installation from before 1.3 has it (the
-- update names its registrant): the step fails with the reason, and the
-- hook does not run
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('paid', 't.audit_hook(jsonb)', current_user::regrole, current_user,
	(SELECT system_identifier FROM pg_control_system()));
SELECT t.configure('wx_transaction_success_valid', 'h_old_su');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_old_su');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_old_su';
SELECT count(*) AS audited FROM t.audit;
DELETE FROM paynotify_hook;
-- a row without a registrant (its role was gone when the update named
-- them; restored, its oid may be another role's): no role, the step fails
INSERT INTO paynotify_hook (event, handler, registered_by)
VALUES ('paid', 't.audit_hook(jsonb)', 'hk_op'::regrole);
SELECT t.configure('wx_transaction_success_valid', 'h_no_name');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_no_name');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_no_name';
SELECT count(*) AS audited FROM t.audit;
DELETE FROM paynotify_hook;

-- A hook registered by one role is registered again by another only if
-- that one has the first one's rights: else it would run as the second
-- from then on, with whatever rights that one has (fewer, or others).
CREATE ROLE hk_op2;
SELECT paynotify_grant('hk_op2', 'admin');
GRANT USAGE ON SCHEMA t TO hk_op2;
CREATE FUNCTION t.noop(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC SELECT; END;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.noop(jsonb)');
SET ROLE hk_op2;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT event, handler, registered_by FROM paynotify_hook;
GRANT hk_op TO hk_op2;
SET ROLE hk_op2;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT event, handler, registered_by FROM paynotify_hook;
-- a registrant dropped since (its row stays): anyone may register it again
DELETE FROM paynotify_hook;
CREATE ROLE hk_gone;
INSERT INTO paynotify_hook (event, handler, registered_by)
VALUES ('paid', 't.noop(jsonb)', 'hk_gone'::regrole);
DROP ROLE hk_gone;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT event, handler, registered_by FROM paynotify_hook;
-- Whom a row runs as decides who may register it again, by the rule of
-- the run, never by the raw registered_by: a row as a restore on another
-- cluster has it, registered_by the oid of a role the caller has (here
-- its own), registrant another role's name: the hook runs as hk_r2, so
-- hk_r1 may not take it over
DELETE FROM paynotify_hook;
CREATE ROLE hk_r1;
CREATE ROLE hk_r2;
SELECT paynotify_grant('hk_r1', 'admin');
GRANT USAGE ON SCHEMA t TO hk_r1;
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('paid', 't.noop(jsonb)', 'hk_r1'::regrole, 'hk_r2', 42);
SET ROLE hk_r1;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT registered_by, registrant FROM paynotify_hook;
-- registered_by a role the caller does not have, from another cluster
-- (that oid names no one of it here), the hook running as no one (no role
-- has the name): taken over
UPDATE paynotify_hook SET registered_by = 'hk_r2'::regrole, registrant = 'hk_nobody';
SET ROLE hk_r1;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT registered_by, registrant, registered_on = 42 AS elsewhere FROM paynotify_hook;
-- registered here by hk_r2, renamed since (the hook runs as no one until
-- it registers it again): refused to hk_r1, registered again by hk_r2
UPDATE paynotify_hook SET registered_by = 'hk_r2'::regrole, registrant = 'hk_r2',
	registered_on = (SELECT system_identifier FROM pg_control_system());
ALTER ROLE hk_r2 RENAME TO hk_r2_renamed;
SELECT paynotify_grant('hk_r2_renamed', 'admin');
GRANT USAGE ON SCHEMA t TO hk_r2_renamed;
SET ROLE hk_r1;
SELECT paynotify_on('paid', 't.noop(jsonb)');
SET ROLE hk_r2_renamed;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT registered_by, registrant FROM paynotify_hook;
SELECT paynotify_revoke('hk_r2_renamed', 'admin');
REVOKE USAGE ON SCHEMA t FROM hk_r2_renamed;
ALTER ROLE hk_r2_renamed RENAME TO hk_r2;
-- a row from another cluster running as hk_r2 by its name goes with
-- hk_r2's admin capacity, whatever oid it carries
SELECT paynotify_grant('hk_r2', 'admin');
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('closed', 't.noop(jsonb)', 'hk_r1'::regrole, 'hk_r2', 42);
-- and a row from another cluster whose oid is hk_r2's but that runs as
-- hk_r1 by its name stays
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('refunded', 't.noop(jsonb)', 'hk_r2'::regrole, 'hk_r1', 42);
SELECT paynotify_revoke('hk_r2', 'admin');
SELECT event, registered_by, registrant FROM paynotify_hook ORDER BY event;
DELETE FROM paynotify_hook;
-- and registered here by hk_r2 under its own name: refused
INSERT INTO paynotify_hook (event, handler, registered_by, registrant, registered_on)
VALUES ('paid', 't.noop(jsonb)', 'hk_r2'::regrole, 'hk_r2',
	(SELECT system_identifier FROM pg_control_system()));
SET ROLE hk_r1;
SELECT paynotify_on('paid', 't.noop(jsonb)');
RESET ROLE;
SELECT registered_by, registrant FROM paynotify_hook;
SELECT paynotify_revoke('hk_r1', 'admin');
REVOKE USAGE ON SCHEMA t FROM hk_r1;
DELETE FROM paynotify_hook;
DROP ROLE hk_r1, hk_r2;
DELETE FROM paynotify_hook;
SELECT paynotify_revoke('hk_op2', 'admin');
REVOKE USAGE ON SCHEMA t FROM hk_op2;
DROP ROLE hk_op2;

-- A hook inserting into its own partitioned table: a partition of another
-- role (its own constraints, defaults, triggers) is judged as the table
-- is, though no plan lists a partition an INSERT routes to.
CREATE TABLE t.plog (k text, at date) PARTITION BY RANGE (at);
CREATE TABLE t.plog_2026 PARTITION OF t.plog FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
ALTER TABLE t.plog_2026 OWNER TO hk_app;
GRANT INSERT ON t.plog TO hk_op;
SET ROLE hk_app;
ALTER TABLE t.plog_2026 ADD CONSTRAINT p_check CHECK (
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
RESET ROLE;
CREATE FUNCTION t.plog_hook(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	INSERT INTO t.plog VALUES (ev->'notice'->>'order_no', '2026-06-01');
END;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.plog_hook(jsonb)');
RESET ROLE;
SELECT t.configure('wx_transaction_success_valid', 'h_plog');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_plog');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_plog';
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
-- the partition given back to the table's owner: the hook runs
ALTER TABLE t.plog_2026 DROP CONSTRAINT p_check;
ALTER TABLE t.plog_2026 OWNER TO CURRENT_USER;
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_plog');
SELECT count(*) AS logged FROM t.plog;
DELETE FROM paynotify_hook;
-- A hook copying rows into a table of another role: COPY FROM starts no
-- executor, and its table is judged as a statement's are.
CREATE TABLE t.clog (k text);
ALTER TABLE t.clog OWNER TO hk_app;
SET ROLE hk_app;
ALTER TABLE t.clog ADD CONSTRAINT c_check CHECK (
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
GRANT INSERT ON t.clog TO hk_op;
RESET ROLE;
GRANT pg_execute_server_program TO hk_op;
CREATE FUNCTION t.clog_hook(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	COPY t.clog FROM PROGRAM 'echo copied';
END
$f$;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.clog_hook(jsonb)');
RESET ROLE;
SELECT t.configure('wx_transaction_success_valid', 'h_clog');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_clog');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_clog';
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
SELECT count(*) AS copied FROM t.clog;
-- the table given to the hook's role: copied
ALTER TABLE t.clog DROP CONSTRAINT c_check;
ALTER TABLE t.clog OWNER TO hk_op;
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_clog');
SELECT count(*) AS copied FROM t.clog;
DELETE FROM paynotify_hook;
REVOKE pg_execute_server_program FROM hk_op;
-- TRUNCATE of another role's table, granted TRUNCATE: its TRUNCATE
-- trigger (a built-in function, a WHEN condition of built-ins) would run
-- with the hook's rights; TRUNCATE starts no executor either
CREATE TABLE t.tlog (k text);
ALTER TABLE t.tlog OWNER TO hk_app;
SET ROLE hk_app;
CREATE TRIGGER t_spy BEFORE TRUNCATE ON t.tlog FOR EACH STATEMENT
	WHEN (query_to_xml('SELECT lo_from_bytea(0, convert_to(''ran as '' || current_user, ''UTF8''))',
		false, false, '') IS NULL)
	EXECUTE FUNCTION suppress_redundant_updates_trigger();
GRANT TRUNCATE ON t.tlog TO hk_op;
RESET ROLE;
CREATE FUNCTION t.tlog_hook(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	TRUNCATE t.tlog;
END
$f$;
SET ROLE hk_op;
SELECT paynotify_on('paid', 't.tlog_hook(jsonb)');
RESET ROLE;
SELECT t.configure('wx_transaction_success_valid', 'h_tlog');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_tlog');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_tlog';
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
DELETE FROM paynotify_hook;
SELECT count(lo_unlink(m.oid)) AS unlinked FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
DROP FUNCTION t.keep_ref(jsonb), t.audit_hook(jsonb), t.noop(jsonb), t.plog_hook(jsonb), t.clog_hook(jsonb),
	t.tlog_hook(jsonb);
DROP TABLE t.audit, t.plog, t.clog, t.tlog;
DROP SCHEMA hk CASCADE;
REVOKE USAGE ON SCHEMA t FROM hk_app;
DROP ROLE hk_app;
SELECT paynotify_revoke('hk_op', 'admin');
DROP OWNED BY hk_op;
DROP ROLE hk_op;
