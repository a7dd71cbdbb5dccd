-- Hostile uses of what paynotify lets others plug in, run as the roles that
-- would try them: a hook or a trigger of the orders table that calls
-- paynotify_handle again (the same notification inside its own business
-- step) fails that step with a clear error, and the notification is failed
-- and retried, not a raw unique violation on every delivery.
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;

SELECT paynotify_add_channel('at', 'stripe', '{}');
SELECT paynotify_add_key('at', 'secret_1', t.secret(1));
INSERT INTO public.orders VALUES ('AT-1', 'pending', 100);
-- the Stripe payment of AT-1, signed and delivered
CREATE FUNCTION t.at_pay(evt text, ord text DEFAULT 'AT-1') RETURNS text
	LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
	SELECT outcome FROM t.stripe('at', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', 100, 'amount_received', 100,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)])
$$;
CREATE ROLE at_op LOGIN;
SELECT paynotify_grant('at_op', 'admin');
CREATE SCHEMA ops AUTHORIZATION at_op;
GRANT USAGE ON SCHEMA t TO at_op;
GRANT EXECUTE ON FUNCTION t.at_pay(text, text) TO at_op;

\c - at_op
-- a hook that delivers the notification being applied once more
CREATE FUNCTION ops.again(ev jsonb) RETURNS text LANGUAGE sql AS
	$$ SELECT t.at_pay(ev->'notice'->>'notify_id') $$;
SELECT pay.paynotify_on('paid', 'ops.again(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT t.at_pay('evt_at_1');
SELECT status, attempts, error_msg FROM payment_notify_log WHERE channel = 'at';
SELECT status FROM orders WHERE order_no = 'AT-1';
SELECT count(*) AS payments FROM payment_record WHERE channel = 'at';
-- the hook removed: the next delivery applies it once
DELETE FROM paynotify_hook;
SELECT t.at_pay('evt_at_1');
SELECT status, attempts, error_msg FROM payment_notify_log WHERE channel = 'at';
SELECT status FROM orders WHERE order_no = 'AT-1';
SELECT count(*) AS payments FROM payment_record WHERE channel = 'at';

-- a hook that retries a notification (paynotify_retry, which the operator
-- may call), here one applied before: refused inside the step, which
-- fails with that message (a retry runs in a transaction of its own)
\c - at_op
CREATE FUNCTION ops.retry_it(ev jsonb) RETURNS text LANGUAGE sql AS
	$$ SELECT outcome FROM pay.paynotify_retry('at', 'evt_at_1', false) $$;
SELECT pay.paynotify_on('paid', 'ops.retry_it(jsonb)');
\c - :su
SET search_path = pay, public;
INSERT INTO public.orders VALUES ('AT-R', 'pending', 100);
SELECT t.at_pay('evt_at_r', 'AT-R');
SELECT status, attempts, error_msg FROM payment_notify_log WHERE channel = 'at' AND notify_id = 'evt_at_r';
SELECT status FROM orders WHERE order_no = 'AT-R';
DELETE FROM paynotify_hook;
-- the triggers below on paynotify's own tables: each runs its argument,
-- a statement, with the new row as $1
CREATE FUNCTION t.at_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE TG_ARGV[0] USING NEW;
	RETURN NULL;
END
$$;
-- a trigger on paynotify's own payments that delivers another
-- notification: refused inside the step too
CREATE TRIGGER at_nested AFTER INSERT ON payment_record FOR EACH ROW
	WHEN (NEW.order_no = 'AT-N1') EXECUTE FUNCTION t.at_run('SELECT t.at_pay(''evt_at_n2'', ''AT-N2'')');
INSERT INTO public.orders VALUES ('AT-N1', 'pending', 100), ('AT-N2', 'pending', 100);
SELECT t.at_pay('evt_at_n1', 'AT-N1');
SELECT notify_id, status, error_msg FROM payment_notify_log
	WHERE channel = 'at' AND notify_id IN ('evt_at_n1', 'evt_at_n2') ORDER BY 1;
SELECT order_no, status FROM orders WHERE order_no IN ('AT-N1', 'AT-N2') ORDER BY 1;
DROP TRIGGER at_nested ON payment_record;
-- each half of the retry's refusal alone, against a failed notification
-- (its order was missing) that a nested retry would now apply: a trigger
-- on paynotify's payments (inside a step, run as nobody else), a hook
-- (both), and below the orders table's trigger under the application's
-- paynotify_transit (run as the table's owner, in no step); it stays
-- failed after one attempt, its order unpaid, and each caller fails
SELECT t.at_pay('evt_at_f', 'AT-F');
INSERT INTO public.orders VALUES ('AT-F', 'pending', 100), ('AT-T1', 'pending', 100),
	('AT-T2', 'pending', 100);
CREATE TRIGGER at_retry AFTER INSERT ON payment_record FOR EACH ROW
	WHEN (NEW.order_no = 'AT-T1')
	EXECUTE FUNCTION t.at_run('SELECT pay.paynotify_retry(''at'', ''evt_at_f'', false)');
SELECT t.at_pay('evt_at_t1', 'AT-T1');
DROP TRIGGER at_retry ON payment_record;
\c - at_op
CREATE FUNCTION ops.retry_failed(ev jsonb) RETURNS text LANGUAGE sql AS
	$$ SELECT outcome FROM pay.paynotify_retry('at', 'evt_at_f', false) $$;
SELECT pay.paynotify_on('paid', 'ops.retry_failed(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT t.at_pay('evt_at_t2', 'AT-T2');
DELETE FROM paynotify_hook;
SELECT notify_id, status, attempts, error_msg FROM payment_notify_log
	WHERE channel = 'at' AND notify_id IN ('evt_at_f', 'evt_at_t1', 'evt_at_t2') ORDER BY 1;
SELECT order_no, status FROM orders WHERE order_no IN ('AT-F', 'AT-T1', 'AT-T2') ORDER BY 1;

-- the same from a trigger of the orders table (which runs as its owner)
CREATE SCHEMA shop AUTHORIZATION at_op;
\c - at_op
CREATE TABLE shop.orders (order_no text PRIMARY KEY, status text NOT NULL,
	amount_fen bigint NOT NULL);
INSERT INTO shop.orders VALUES ('AT-2', 'pending', 100);
CREATE FUNCTION shop.again() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM t.at_pay('evt_at_2', 'AT-2');
	RETURN NEW;
END
$$;
CREATE TRIGGER again AFTER UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.again();
SELECT pay.paynotify_bind_orders('shop.orders', 'order_no', 'status', 'amount_fen');
\c - :su
SET search_path = pay, public;
SELECT t.at_pay('evt_at_2', 'AT-2');
SELECT status, attempts, error_msg FROM payment_notify_log
WHERE channel = 'at' AND notify_id = 'evt_at_2';
SELECT status FROM shop.orders WHERE order_no = 'AT-2';
-- the orders table's trigger retrying the failed notification under the
-- application's paynotify_transit: refused, the move with it
\c - at_op
DROP TRIGGER again ON shop.orders;
CREATE FUNCTION shop.retry_f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pay.paynotify_retry('at', 'evt_at_f', false);
	RETURN NEW;
END
$$;
CREATE TRIGGER retry_f AFTER UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.retry_f();
INSERT INTO shop.orders VALUES ('AT-T3', 'pending', 100);
\c - :su
SET search_path = pay, public;
SELECT paynotify_transit('AT-T3', 'pending', 'paid');
SELECT status FROM shop.orders WHERE order_no = 'AT-T3';
SELECT status, attempts FROM payment_notify_log WHERE channel = 'at' AND notify_id = 'evt_at_f';
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');

-- the internal paynotify_step_at and paynotify_query_apply from a trigger
-- on paynotify's payments (inside a step): refused, and the step fails
CREATE TRIGGER at_step_at AFTER INSERT ON payment_record FOR EACH ROW
	WHEN (NEW.order_no = 'AT-Q1')
	EXECUTE FUNCTION t.at_run('SELECT pay.paynotify_step_at(''AT-F'', ''at'', ''evt_at_f'', ''{}'', ''{}'', ''{}'', 1000, ''on'', NULL)');
CREATE TRIGGER at_query_apply AFTER INSERT ON payment_record FOR EACH ROW
	WHEN (NEW.order_no = 'AT-Q2')
	EXECUTE FUNCTION t.at_run('SELECT pay.paynotify_query_apply(''at'', ''AT-F'', 200, ''{}'', ''\x7b7d'')');
INSERT INTO public.orders VALUES ('AT-Q1', 'pending', 100), ('AT-Q2', 'pending', 100);
SELECT t.at_pay('evt_at_q1', 'AT-Q1');
SELECT t.at_pay('evt_at_q2', 'AT-Q2');
DROP TRIGGER at_step_at ON payment_record;
DROP TRIGGER at_query_apply ON payment_record;
SELECT notify_id, status, attempts, error_msg FROM payment_notify_log
	WHERE channel = 'at' AND notify_id IN ('evt_at_f', 'evt_at_q1', 'evt_at_q2') ORDER BY 1;
SELECT order_no, status FROM orders WHERE order_no IN ('AT-F', 'AT-Q1', 'AT-Q2') ORDER BY 1;

-- triggers on paynotify's log fired by its writes outside the step (a
-- failed delivery's log row): one that retries the failed rows it is
-- fired by is refused, not a recursion until the stack runs out; one that
-- delivers another notification is refused too.  The delivery fails with
-- the error and writes nothing; the other order stays unpaid.
SELECT t.at_pay('evt_at_l', 'AT-L');
CREATE TRIGGER at_log_retry AFTER UPDATE ON payment_notify_log FOR EACH ROW
	WHEN (NEW.channel = 'at' AND NEW.status = 'failed')
	EXECUTE FUNCTION t.at_run('SELECT pay.paynotify_retry(($1).channel, ($1).notify_id, false)');
SELECT t.at_pay('evt_at_l', 'AT-L');
SELECT pay.paynotify_retry('at', 'evt_at_l', false);
DROP TRIGGER at_log_retry ON payment_notify_log;
CREATE TRIGGER at_log_deliver AFTER INSERT ON payment_notify_log FOR EACH ROW
	WHEN (NEW.notify_id = 'evt_at_m1')
	EXECUTE FUNCTION t.at_run('SELECT t.at_pay(''evt_at_m2'', ''AT-M2'')');
INSERT INTO public.orders VALUES ('AT-M2', 'pending', 100);
SELECT t.at_pay('evt_at_m1', 'AT-M1');
DROP TRIGGER at_log_deliver ON payment_notify_log;
DROP FUNCTION t.at_run();
SELECT notify_id, status, attempts, error_msg FROM payment_notify_log
	WHERE channel = 'at' AND notify_id IN ('evt_at_l', 'evt_at_m1', 'evt_at_m2') ORDER BY 1;
SELECT order_no, status FROM orders WHERE order_no IN ('AT-L', 'AT-M1', 'AT-M2') ORDER BY 1;
-- without the triggers: delivered and retried as always
SELECT pay.paynotify_retry('at', 'evt_at_l', false);
SELECT t.at_pay('evt_at_m2', 'AT-M2');

-- a temporary table is no orders table: it is gone with its session, and
-- the binding would follow its name into the next session's temporary schema
\c - at_op
CREATE TEMP TABLE orders (order_no text PRIMARY KEY, status text NOT NULL,
	amount_fen bigint NOT NULL);
SELECT pay.paynotify_bind_orders('pg_temp.orders', 'order_no', 'status', 'amount_fen');
\c - :su
SET search_path = pay, public;
SELECT orders FROM paynotify_binding;

-- A hook runs as the role that registered it, so its function's owner
-- must have that role's privileges already (be it, a member of it, or a
-- superuser): otherwise the owner could change it (CREATE OR REPLACE, or
-- drop it and create it again under the same name) and have its code run
-- with the registering role's rights.
CREATE ROLE at_evil LOGIN;
CREATE SCHEMA hooks;
GRANT USAGE, CREATE ON SCHEMA hooks TO at_op, at_evil;
INSERT INTO public.orders VALUES ('AT-3', 'pending', 100);
\c - at_op
CREATE TABLE ops.private (note text);	-- at_op's, at_evil may not write it
CREATE FUNCTION hooks.on_paid(ev jsonb) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO ops.private VALUES ('paid ' || (ev->'notice'->>'order_no')) $$;
SELECT pay.paynotify_on('paid', 'hooks.on_paid(jsonb)');
\c - at_evil
-- a function of someone else's, even with EXECUTE, is not registered
CREATE FUNCTION hooks.evil_hook(ev jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
\c - at_op
SELECT pay.paynotify_on('paid', 'hooks.evil_hook(jsonb)');
-- at_op drops its hook's function; at_evil creates one under its name
DROP FUNCTION hooks.on_paid(jsonb);
\c - at_evil
CREATE FUNCTION hooks.on_paid(ev jsonb) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN INSERT INTO ops.private VALUES ('written by at_evil''s code'); END $$;
\c - :su
SET search_path = pay, public;
SELECT t.at_pay('evt_at_3', 'AT-3');
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'at' AND notify_id = 'evt_at_3';
SELECT * FROM ops.private;
SELECT status FROM orders WHERE order_no = 'AT-3';
DELETE FROM paynotify_hook;
-- nor does a superuser register a function a non-superuser could change
\set VERBOSITY sqlstate
SELECT paynotify_on('paid', 'hooks.evil_hook(jsonb)');
\set VERBOSITY terse

DROP SCHEMA ops, shop, hooks CASCADE;
DROP FUNCTION t.at_pay(text, text);
SELECT paynotify_revoke('at_op', 'admin');
DROP OWNED BY at_op, at_evil;
DROP ROLE at_op, at_evil;
DELETE FROM public.orders WHERE order_no IN ('AT-1', 'AT-3');
