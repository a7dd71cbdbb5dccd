-- User hooks run inside the business step: a failing hook rolls back the
-- whole step, the log row says failed, and the next delivery runs it again.
\set VERBOSITY terse
SET search_path = pay, public;

CREATE TABLE t.hook_calls (event text, order_no text, amount bigint, channel text);
CREATE TABLE t.hook_switch (fail boolean);
INSERT INTO t.hook_switch VALUES (true);
CREATE FUNCTION t.on_paid(ev jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO t.hook_calls VALUES (ev->>'event', ev->'notice'->>'order_no',
		(ev->>'amount')::bigint, ev->>'channel');
	IF (SELECT fail FROM t.hook_switch) THEN
		RAISE EXCEPTION 'warehouse system unavailable';
	END IF;
END
$$;
SELECT paynotify_on('paid', 't.on_paid(jsonb)');
SELECT paynotify_on('paid', 't.on_paid(jsonb)');
SELECT paynotify_on('paid', 'pg_catalog.lower(text)');

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
CREATE FUNCTION t.bad_hook(ev jsonb) RETURNS void LANGUAGE sql AS
	$$ UPDATE public.orders SET status = 'pending' WHERE order_no = ev->'notice'->>'order_no' $$;
SELECT paynotify_on('paid', 't.bad_hook(jsonb)');
SELECT t.configure('wx_transaction_success_valid', 'h_bad');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'h_bad');
SELECT error_msg FROM payment_notify_log WHERE channel = 'h_bad';
-- a hook whose function was dropped fails the step, naming it, until the
-- hook is removed
DELETE FROM paynotify_hook WHERE handler = 't.bad_hook(jsonb)';
DROP FUNCTION t.on_paid(jsonb);
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_bad');
SELECT error_msg FROM payment_notify_log WHERE channel = 'h_bad';
DELETE FROM paynotify_hook;
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'h_bad');
