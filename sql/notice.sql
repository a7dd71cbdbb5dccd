-- The notice kept with a parked notification names its action ("refund"),
-- never the number of a C enum; a row kept before, with the number, is
-- still applied as that action.  Hooks see the same notice.
\set VERBOSITY terse
SET search_path = pay, public;

INSERT INTO public.orders (order_no, status, amount_fen) VALUES
	('NT-1', 'pending', 100), ('NT-2', 'pending', 100);
SELECT paynotify_add_channel('nt_s', 'stripe', '{}');
SELECT paynotify_add_key('nt_s', 's1', t.secret(1));

-- refunds before their payments: parked, with the action by name
SELECT t.stripe_ledger('nt_s', 'NT-1', 'evt_nt_1', 'pi_nt_1', 100, 100, ARRAY['re_nt_1']);
SELECT t.stripe_ledger('nt_s', 'NT-2', 'evt_nt_2', 'pi_nt_2', 100, 100, ARRAY['re_nt_2']);
SELECT notify_id, status, notice->'action' AS action, notice->>'trade_no' AS trade_no,
	notice->'refund_amount' AS refund_amount, notice->'order_amount' AS order_amount
FROM payment_notify_log WHERE notify_id LIKE 'evt_nt_%' ORDER BY notify_id;

-- the second as a row written when the number was stored (2: refund)
UPDATE payment_notify_log SET notice = jsonb_set(notice, '{action}', '2')
WHERE notify_id = 'evt_nt_2';

-- a hook on the refund sees the notice with its action's name
CREATE TABLE t.nt_seen (action text, notify_id text, refund_amount bigint);
CREATE FUNCTION t.nt_refunded(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	INSERT INTO t.nt_seen VALUES (ev->'notice'->>'action', ev->'notice'->>'notify_id',
		(ev->'notice'->>'refund_amount')::bigint);
END;
CREATE ROLE nt_op;
SELECT paynotify_grant('nt_op', 'admin');
GRANT USAGE ON SCHEMA t TO nt_op;
GRANT INSERT ON t.nt_seen TO nt_op;
SET ROLE nt_op;
SELECT paynotify_on('refunded', 't.nt_refunded(jsonb)');
RESET ROLE;

-- the payments apply both parked refunds, the old row's as a refund too
SELECT t.stripe_ledger('nt_s', 'NT-1', 'evt_nt_3', 'pi_nt_1', 100);
SELECT t.stripe_ledger('nt_s', 'NT-2', 'evt_nt_4', 'pi_nt_2', 100);
SELECT order_no, status FROM public.orders WHERE order_no LIKE 'NT-%' ORDER BY order_no;
SELECT notify_id, status FROM payment_notify_log WHERE notify_id LIKE 'evt_nt_%' ORDER BY notify_id;
SELECT refund_id, order_no, amount, status FROM paynotify_refund WHERE order_no LIKE 'NT-%' ORDER BY refund_id;
SELECT * FROM t.nt_seen ORDER BY notify_id;
DELETE FROM paynotify_hook;
SELECT paynotify_revoke('nt_op', 'admin');
DROP OWNED BY nt_op;
DROP ROLE nt_op;

-- a parked notice edited into an action paynotify never wrote is an error,
-- never "nothing to do": the payment that would apply it fails (retried),
-- and goes through once the row is repaired
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('NT-3', 'pending', 100);
SELECT t.stripe_ledger('nt_s', 'NT-3', 'evt_nt_5', 'pi_nt_3', 100, 100, ARRAY['re_nt_3']);
UPDATE payment_notify_log SET notice = jsonb_set(notice, '{action}', '"bogus"')
WHERE notify_id = 'evt_nt_5';
SELECT t.stripe_ledger('nt_s', 'NT-3', 'evt_nt_6', 'pi_nt_3', 100);
SELECT notify_id, status, error_msg FROM payment_notify_log
WHERE notify_id IN ('evt_nt_5', 'evt_nt_6') ORDER BY notify_id;
SELECT status FROM public.orders WHERE order_no = 'NT-3';
UPDATE payment_notify_log SET notice = jsonb_set(notice, '{action}', '"refund"')
WHERE notify_id = 'evt_nt_5';
SELECT t.stripe_ledger('nt_s', 'NT-3', 'evt_nt_6', 'pi_nt_3', 100);
SELECT notify_id, status FROM payment_notify_log
WHERE notify_id IN ('evt_nt_5', 'evt_nt_6') ORDER BY notify_id;
SELECT status FROM public.orders WHERE order_no = 'NT-3';

-- A dispute's notice keeps its amount and detail: a failed step (here a
-- hook that raises) is retried whole and queues the same event; a
-- notification's retry carries the payload, read from its log row.  A stored
-- detail that is not an object is refused, never read as none.
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('NT-5', 'pending', 100);
SELECT t.stripe_ledger('nt_s', 'NT-5', 'evt_nt_9', 'pi_nt_5', 100);
CREATE TABLE t.nt_gate (open boolean);
CREATE FUNCTION t.nt_gate_hook(ev jsonb) RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM t.nt_gate WHERE open) THEN
		RAISE EXCEPTION 'the gate is closed';
	END IF;
END
$$;
CREATE ROLE nt_op;
SELECT paynotify_grant('nt_op', 'admin');
GRANT USAGE ON SCHEMA t TO nt_op;
GRANT SELECT ON t.nt_gate TO nt_op;
ALTER FUNCTION t.nt_gate_hook(jsonb) OWNER TO nt_op;
SET ROLE nt_op;
SELECT paynotify_on('dispute_opened', 't.nt_gate_hook(jsonb)');
SELECT paynotify_on('notification', 't.nt_gate_hook(jsonb)');
RESET ROLE;
-- (a notification, failed the same way, is retried with its payload)
SELECT outcome FROM t.stripe('nt_s', jsonb_build_object('id', 'evt_nt_11', 'object', 'event',
	'created', 1767300000, 'type', 'customer.created', 'livemode', false,
	'data', jsonb_build_object('object', jsonb_build_object('id', 'cus_nt_11', 'object', 'customer')))::text,
	ARRAY[t.secret(1)]);
SELECT outcome FROM t.stripe('nt_s', jsonb_build_object('id', 'evt_nt_10', 'object', 'event',
	'created', 1767300000, 'type', 'charge.dispute.created', 'livemode', false,
	'data', jsonb_build_object('object', jsonb_build_object('id', 'dp_nt_5', 'object', 'dispute',
		'amount', 60, 'currency', 'usd', 'charge', 'ch_nt_5', 'payment_intent', 'pi_nt_5',
		'reason', 'general', 'status', 'needs_response')))::text, ARRAY[t.secret(1)]);
SELECT status, notice->'action' AS action, notice->'dispute_amount' AS amount,
	notice->'detail'->>'dispute_id' AS dispute_id
FROM payment_notify_log WHERE notify_id = 'evt_nt_10';
INSERT INTO t.nt_gate VALUES (true);
UPDATE payment_notify_log SET notice = jsonb_set(notice, '{detail}', '5')
WHERE notify_id = 'evt_nt_10';
SELECT status_before, outcome, status FROM paynotify_retry('nt_s', 'evt_nt_10');
UPDATE payment_notify_log SET notice = jsonb_set(notice, '{detail}', '{"dispute_id": "dp_nt_5"}')
WHERE notify_id = 'evt_nt_10';
SELECT status_before, outcome, status FROM paynotify_retry('nt_s', 'evt_nt_10');
SELECT event, order_no, amount, detail FROM paynotify_outbox WHERE notify_id = 'evt_nt_10';
SELECT status_before, outcome, status FROM paynotify_retry('nt_s', 'evt_nt_11');
SELECT o.event, o.order_no, o.detail->'payload'->'data'->'object'->>'id' AS customer,
	o.detail->'payload' = l.payload AS logged_payload
FROM paynotify_outbox o JOIN payment_notify_log l USING (channel, notify_id)
WHERE o.notify_id = 'evt_nt_11';
DELETE FROM paynotify_hook;
SELECT paynotify_revoke('nt_op', 'admin');
DROP FUNCTION t.nt_gate_hook(jsonb);
DROP TABLE t.nt_gate;
DROP OWNED BY nt_op;
DROP ROLE nt_op;
