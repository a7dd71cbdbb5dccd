-- Two shortcuts of a first delivery on one server hold only while the
-- indexes they rely on are as the extension made them; otherwise the full
-- statements run:
-- - the order's parked notifications are listed only when a probe of
--   payment_notify_log_parked (order_no WHERE status = 'parked') finds one;
-- - the log's and the payment's inserts name (channel, notify_id) and
--   (channel, trade_no) as their only ON CONFLICT arbiter while those
--   unique keys exist.
-- Last in the list: it changes the extension's indexes, and puts them back.
\set VERBOSITY terse
SET search_path = pay, public;
SELECT paynotify_add_channel('fp_s', 'stripe', '{}');
SELECT paynotify_add_key('fp_s', 's1', t.secret(1));
CREATE FUNCTION t.fp_stripe(ord text, id text, type text, obj jsonb, OUT outcome text) LANGUAGE sql AS $$
	SELECT s.outcome FROM t.stripe('fp_s', pg_catalog.jsonb_build_object('id', id, 'object', 'event',
		'type', type, 'livemode', false, 'data', pg_catalog.jsonb_build_object('object',
		obj || pg_catalog.jsonb_build_object('currency', 'usd', 'metadata',
			pg_catalog.jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)]) s
$$;
CREATE FUNCTION t.fp_refund_then_pay(ord text) RETURNS TABLE (refund text, payment text, status text)
	LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.orders (order_no, status, amount_fen) VALUES (ord, 'pending', 100);
	refund := t.fp_stripe(ord, 'evt_' || ord || '_r', 'charge.refunded',
		pg_catalog.jsonb_build_object('id', 'ch_' || ord, 'payment_intent', 'pi_' || ord, 'amount', 100,
			'amount_refunded', 100, 'refunds', '{"data": [{"id": "re_1"}]}'::jsonb));
	payment := t.fp_stripe(ord, 'evt_' || ord || '_p', 'payment_intent.succeeded',
		pg_catalog.jsonb_build_object('id', 'pi_' || ord, 'amount', 100, 'amount_received', 100));
	SELECT o.status INTO status FROM public.orders o WHERE o.order_no = ord;
	RETURN NEXT;
END
$$;
CREATE VIEW t.fp_log AS
	SELECT order_no, notify_id, status FROM pay.payment_notify_log WHERE channel = 'fp_s';

-- the parked index as created: a refund before its payment is parked, and
-- applied when the payment comes
SELECT * FROM t.fp_refund_then_pay('FP-1');
-- rebuilt with another predicate: the probe is not trusted, the list is read
DROP INDEX payment_notify_log_parked;
CREATE INDEX payment_notify_log_parked ON payment_notify_log (order_no) WHERE status = 'failed';
SELECT * FROM t.fp_refund_then_pay('FP-2');
-- rebuilt on another column
DROP INDEX payment_notify_log_parked;
CREATE INDEX payment_notify_log_parked ON payment_notify_log (notify_id) WHERE status = 'parked';
SELECT * FROM t.fp_refund_then_pay('FP-3');
-- no such index
DROP INDEX payment_notify_log_parked;
SELECT * FROM t.fp_refund_then_pay('FP-4');
CREATE INDEX payment_notify_log_parked ON payment_notify_log (order_no) WHERE status = 'parked';
SELECT * FROM t.fp_refund_then_pay('FP-5');
SELECT * FROM t.fp_log ORDER BY 1, 2;

-- the unique keys dropped: every unique index is the arbiter again, and a
-- new notification is applied, a repeat answered as one
ALTER TABLE payment_notify_log DROP CONSTRAINT payment_notify_log_notify;
ALTER TABLE payment_record DROP CONSTRAINT payment_record_trade;
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FP-6', 'pending', 100);
SELECT t.fp_stripe('FP-6', 'evt_FP-6', 'payment_intent.succeeded', '{"id": "pi_FP-6", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FP-6', 'evt_FP-6', 'payment_intent.succeeded', '{"id": "pi_FP-6", "amount": 100, "amount_received": 100}');
SELECT * FROM t.fp_refund_then_pay('FP-7');
-- and back
ALTER TABLE payment_notify_log ADD CONSTRAINT payment_notify_log_notify UNIQUE (channel, notify_id);
ALTER TABLE payment_record ADD CONSTRAINT payment_record_trade UNIQUE (channel, trade_no);
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FP-8', 'pending', 100);
SELECT t.fp_stripe('FP-8', 'evt_FP-8', 'payment_intent.succeeded', '{"id": "pi_FP-8", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FP-8', 'evt_FP-8', 'payment_intent.succeeded', '{"id": "pi_FP-8", "amount": 100, "amount_received": 100}');
SELECT o.order_no, o.status, p.trade_no, p.amount FROM public.orders o
	LEFT JOIN payment_record p ON p.channel = 'fp_s' AND p.order_no = o.order_no
	WHERE o.order_no LIKE 'FP-%' ORDER BY 1;
