-- User hooks run inside the business step: a failing hook rolls back the
-- whole step, the log row says failed, and the next delivery runs it again.
\set VERBOSITY terse
SET search_path = pay, public;

-- Hooks whose body is text (PL/pgSQL, SQL outside BEGIN ATOMIC) are
-- registered by hk_op, a plain role with the admin capacity: a superuser's
-- hook may have no such body (the last part).
CREATE ROLE hk_op;
SELECT paynotify_grant('hk_op', 'admin');
GRANT USAGE ON SCHEMA t TO hk_op;
CREATE TABLE t.hook_calls (event text, order_no text, amount bigint, channel text);
CREATE TABLE t.hook_switch (fail boolean);
INSERT INTO t.hook_switch VALUES (true);
GRANT SELECT, INSERT ON t.hook_calls TO hk_op;
GRANT SELECT ON t.hook_switch TO hk_op;
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
SELECT paynotify_on('paid', 't.bad_hook(jsonb)');
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
SELECT current_user AS su \gset
CREATE TABLE t.hook_shape (who name, path text, keys text, notice_keys text,
	event text, amount bigint, channel text, outbox_id_ok boolean);
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
SELECT paynotify_on('paid', 't.shape(jsonb)');
SELECT paynotify_on('paid', 't.null_result(jsonb)');
SELECT t.configure('wx_transaction_success_valid', 'h_shape');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_shape');
SELECT who = :'su' AS registering_role, path, keys, notice_keys, event, amount, channel, outbox_id_ok
FROM t.hook_shape;
SELECT event, handler, registered_by = :'su'::regrole AS registered_by_caller
FROM paynotify_hook ORDER BY handler;
DELETE FROM paynotify_hook;

-- Refused at registration: procedures, aggregates, set-returning functions
CREATE PROCEDURE t.proc_hook(ev jsonb) LANGUAGE sql AS $$ SELECT 1 $$;
CREATE AGGREGATE t.agg_hook(jsonb) (SFUNC = pg_catalog.jsonb_concat, STYPE = jsonb);
CREATE FUNCTION t.srf_hook(ev jsonb) RETURNS SETOF integer LANGUAGE sql AS $$ SELECT 1 $$;
SELECT paynotify_on('paid', 't.proc_hook(jsonb)');
SELECT paynotify_on('paid', 't.agg_hook(jsonb)');
SELECT paynotify_on('paid', 't.srf_hook(jsonb)');
SELECT paynotify_on('paid', NULL);
SELECT paynotify_on(NULL, 't.shape(jsonb)');
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
-- A superuser's hook is held to the rule of an orders table a superuser
-- owns (table_code case 27).  The application's domain has a CHECK calling
-- built-in functions only (it writes a large object, owned by whoever runs
-- it); a PL/pgSQL body that declares a variable of it records nothing of
-- that, and no guard at run time tells those built-ins from the hook's own.
CREATE ROLE hk_app;
CREATE SCHEMA hk AUTHORIZATION hk_app;
GRANT USAGE ON SCHEMA hk TO hk_op;
SET ROLE hk_app;
CREATE DOMAIN hk.ref AS text CHECK (VALUE IS NULL OR
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
RESET ROLE;
CREATE FUNCTION t.keep_ref(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE r hk.ref;
BEGIN r := ev->'notice'->>'order_no'; END $f$;
-- a superuser registering it: refused, with the reason
\set VERBOSITY default
SELECT paynotify_on('paid', 't.keep_ref(jsonb)');
\set VERBOSITY terse
\echo :LAST_ERROR_SQLSTATE
-- a SQL body in BEGIN ATOMIC records what it names: the application's
-- domain, or a superuser's composite type with an attribute of it
CREATE FUNCTION t.keep_ref_atomic(ev jsonb) RETURNS boolean LANGUAGE sql BEGIN ATOMIC
	SELECT (ev->'notice'->>'order_no')::hk.ref IS NOT NULL;
END;
SELECT paynotify_on('paid', 't.keep_ref_atomic(jsonb)');
CREATE TYPE t.ref_pair AS (r hk.ref, n integer);
CREATE FUNCTION t.keep_pair_atomic(ev jsonb) RETURNS boolean LANGUAGE sql BEGIN ATOMIC
	SELECT pg_catalog.jsonb_populate_record(NULL::t.ref_pair, ev->'notice') IS NOT NULL;
END;
SELECT paynotify_on('paid', 't.keep_pair_atomic(jsonb)');
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
-- a superuser's BEGIN ATOMIC hook replaced after the registration by one
-- in PL/pgSQL naming the domain: the next payment fails with the reason,
-- and the check does not run as the superuser
CREATE FUNCTION t.later(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC SELECT; END;
SELECT paynotify_on('paid', 't.later(jsonb)');
CREATE OR REPLACE FUNCTION t.later(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE r hk.ref;
BEGIN r := ev->'notice'->>'order_no'; END $f$;
SELECT t.configure('wx_transaction_success_valid', 'h_later');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_later');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'h_later';
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
DELETE FROM paynotify_hook;
SELECT count(lo_unlink(m.oid)) AS unlinked FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
DROP FUNCTION t.keep_ref(jsonb), t.keep_ref_atomic(jsonb), t.keep_pair_atomic(jsonb), t.later(jsonb);
DROP TYPE t.ref_pair;
DROP SCHEMA hk CASCADE;
DROP ROLE hk_app;
SELECT paynotify_revoke('hk_op', 'admin');
DROP OWNED BY hk_op;
DROP ROLE hk_op;
