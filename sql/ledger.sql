-- The ledger: per order and per trade, whatever order notifications of one
-- order arrive in.  WeChat notifications come signed from
-- test/ledger_notices.json (t.wx), Stripe events are signed here (t.stripe).
\set VERBOSITY terse
SET search_path = pay, public;

INSERT INTO public.orders (order_no, status, amount_fen) VALUES
	('LG-PARK', 'pending', 100), ('LG-DBL', 'pending', 100), ('LG-SDBL', 'pending', 100),
	('LG-ABN', 'pending', 100), ('LG-CLO', 'pending', 100), ('LG-APP', 'pending', 100),
	('LG-OVER', 'pending', 100), ('LG-SHIP', 'pending', 100), ('LG-HOOK', 'pending', 100),
	('LG-CUR1', 'pending', 100), ('LG-CUR2', 'pending', 100);
CREATE VIEW t.ledger AS
	SELECT o.order_no, o.status,
		(SELECT string_agg(p.trade_no || ':' || p.amount, ',' ORDER BY p.trade_no)
		 FROM payment_record p WHERE p.order_no = o.order_no) AS payments,
		(SELECT string_agg(r.refund_id || ':' || r.trade_no || ':' || r.amount || ':' || r.status,
						   ',' ORDER BY r.refund_id)
		 FROM paynotify_refund r WHERE r.order_no = o.order_no) AS refunds,
		(SELECT string_agg(x.event || ':' || x.amount, ',' ORDER BY x.id)
		 FROM paynotify_outbox x WHERE x.order_no = o.order_no) AS events,
		(SELECT string_agg(a.kind, ',' ORDER BY a.id)
		 FROM paynotify_anomaly a WHERE a.order_no = o.order_no) AS anomalies
	FROM public.orders o;

-- two refunds of 50 parked before the payment of 100: the payment applies
-- both, the second sees the first, the order is refunded
SELECT outcome FROM t.wx('lg', 'park_r1');
SELECT outcome FROM t.wx('lg', 'park_r2');
SELECT outcome FROM t.wx('lg', 'park_pay');
SELECT * FROM t.ledger WHERE order_no = 'LG-PARK';
SELECT event_type, status, note FROM payment_notify_log WHERE order_no = 'LG-PARK' ORDER BY notify_id;

-- a double payment, its duplicate trade refunded in full: the first
-- payment still stands, the order stays paid; refunding it too refunds the order
SELECT outcome FROM t.wx('lg', 'dbl_pay1');
SELECT outcome FROM t.wx('lg', 'dbl_pay2');
SELECT outcome FROM t.wx('lg', 'dbl_r2');
SELECT * FROM t.ledger WHERE order_no = 'LG-DBL';
SELECT outcome FROM t.wx('lg', 'dbl_r1');
SELECT * FROM t.ledger WHERE order_no = 'LG-DBL';

-- cumulative amounts (Stripe amount_refunded) count per trade: the second
-- trade's total is not subtracted from the first's
SELECT paynotify_add_channel('lg_s', 'stripe', '{}');
SELECT paynotify_add_key('lg_s', 's1', t.secret(1));
CREATE FUNCTION t.lg_stripe(id text, type text, obj jsonb, OUT outcome text) LANGUAGE sql AS $$
	SELECT s.outcome FROM t.stripe('lg_s', jsonb_build_object('id', id, 'object', 'event',
		'type', type, 'livemode', false, 'data', jsonb_build_object('object',
		obj || '{"currency": "usd", "metadata": {"order_id": "LG-SDBL"}}'))::text,
		ARRAY[t.secret(1)]) s
$$;
SELECT t.lg_stripe('evt_lg_1', 'payment_intent.succeeded', '{"id": "pi_lg_1", "amount": 100, "amount_received": 100}');
SELECT t.lg_stripe('evt_lg_2', 'payment_intent.succeeded', '{"id": "pi_lg_2", "amount": 100, "amount_received": 100}');
SELECT t.lg_stripe('evt_lg_3', 'charge.refunded', '{"id": "ch_lg_2", "payment_intent": "pi_lg_2", "amount": 100, "amount_refunded": 100, "refunds": {"data": [{"id": "re_lg_2"}]}}');
SELECT t.lg_stripe('evt_lg_4', 'charge.refunded', '{"id": "ch_lg_1", "payment_intent": "pi_lg_1", "amount": 100, "amount_refunded": 40, "refunds": {"data": [{"id": "re_lg_1a"}]}}');
SELECT * FROM t.ledger WHERE order_no = 'LG-SDBL';
-- the rest of the first trade (cumulative 100): the order is refunded
SELECT t.lg_stripe('evt_lg_5', 'charge.refunded', '{"id": "ch_lg_1", "payment_intent": "pi_lg_1", "amount": 100, "amount_refunded": 100, "refunds": {"data": [{"id": "re_lg_1b"}, {"id": "re_lg_1a"}]}}');
-- an older cumulative total arriving late changes nothing
SELECT t.lg_stripe('evt_lg_6', 'charge.refunded', '{"id": "ch_lg_1", "payment_intent": "pi_lg_1", "amount": 100, "amount_refunded": 40, "refunds": {"data": [{"id": "re_lg_1c"}]}}');
SELECT * FROM t.ledger WHERE order_no = 'LG-SDBL';

-- a refund of a second trade arrives before that trade's payment: parked,
-- and applied by the payment (a double payment) together with it
SELECT t.set_order('LG-SDBL2', 'pending', 100);
SELECT t.stripe_ledger('lg_s', 'LG-SDBL2', 'evt_lg2_1', 'pi_lg2_a', 100);
SELECT t.stripe_ledger('lg_s', 'LG-SDBL2', 'evt_lg2_2', 'pi_lg2_b', 100, 100, ARRAY['re_lg2_b']);
SELECT * FROM t.ledger WHERE order_no = 'LG-SDBL2';
SELECT t.stripe_ledger('lg_s', 'LG-SDBL2', 'evt_lg2_3', 'pi_lg2_b', 100);
SELECT * FROM t.ledger WHERE order_no = 'LG-SDBL2';
SELECT notify_id, status, note FROM payment_notify_log WHERE order_no = 'LG-SDBL2' ORDER BY notify_id;

-- a refund that failed (REFUND.ABNORMAL) and was then completed under the
-- same refund id: the row becomes succeeded and the order refunded; a
-- later REFUND.CLOSED of it changes nothing
SELECT outcome FROM t.wx('lg', 'abn_pay');
SELECT outcome FROM t.wx('lg', 'abn_fail');
SELECT * FROM t.ledger WHERE order_no = 'LG-ABN';
SELECT outcome FROM t.wx('lg', 'abn_ok');
SELECT outcome FROM t.wx('lg', 'abn_closed');
SELECT * FROM t.ledger WHERE order_no = 'LG-ABN';
SELECT event_type, status, note FROM payment_notify_log WHERE order_no = 'LG-ABN' ORDER BY notify_id;

-- REFUND.CLOSED while the application has the order refunding: back to paid
SELECT outcome FROM t.wx('lg', 'clo_pay');
SELECT paynotify_transit('LG-CLO', 'paid', 'refunding');
SELECT outcome FROM t.wx('lg', 'clo_closed');
SELECT * FROM t.ledger WHERE order_no = 'LG-CLO';

-- the application marked the order paid itself: the gateway's notification
-- is its payment (recorded, one paid event), not a double payment
SELECT paynotify_transit('LG-APP', 'pending', 'paid');
SELECT outcome FROM t.wx('lg', 'app_pay');
SELECT * FROM t.ledger WHERE order_no = 'LG-APP';
SELECT status, note FROM payment_notify_log WHERE order_no = 'LG-APP';
-- ... but only when it pays the order's amount: the application may have
-- trusted a forged return; a payment of 1 is amount_mismatch (no payment
-- record, no paid event), the real payment after it is the order's payment
SELECT t.set_order('LG-APPAMT', 'pending', 100);
SELECT paynotify_transit('LG-APPAMT', 'pending', 'paid');
SELECT t.stripe_ledger('lg_s', 'LG-APPAMT', 'evt_lg_app_1', 'pi_lg_app_1', 1);
SELECT * FROM t.ledger WHERE order_no = 'LG-APPAMT';
SELECT t.stripe_ledger('lg_s', 'LG-APPAMT', 'evt_lg_app_2', 'pi_lg_app_2', 100);
SELECT * FROM t.ledger WHERE order_no = 'LG-APPAMT';
SELECT notify_id, status, note FROM payment_notify_log WHERE order_no = 'LG-APPAMT' ORDER BY notify_id;
-- a trade already recorded for one order, notified again for another order
-- (a Stripe payment intent whose metadata changed): it pays neither again;
-- the other order stays pending, without a payment record or a paid event
SELECT t.set_order('LG-TR1', 'pending', 100), t.set_order('LG-TR2', 'pending', 100);
SELECT t.stripe_ledger('lg_s', 'LG-TR1', 'evt_lg_tr_1', 'pi_lg_tr', 100);
SELECT t.stripe_ledger('lg_s', 'LG-TR2', 'evt_lg_tr_2', 'pi_lg_tr', 100);
SELECT * FROM t.ledger WHERE order_no IN ('LG-TR1', 'LG-TR2') ORDER BY 1;
-- nor is a refund of that trade notified for the other order applied to
-- it (the trade's order is not locked by it): the anomaly again
SELECT t.stripe_ledger('lg_s', 'LG-TR2', 'evt_lg_tr_3', 'pi_lg_tr', 100, 100, ARRAY['re_lg_tr']);
SELECT * FROM t.ledger WHERE order_no IN ('LG-TR1', 'LG-TR2') ORDER BY 1;
SELECT notify_id, order_no, status, note FROM payment_notify_log WHERE order_no IN ('LG-TR1', 'LG-TR2') ORDER BY notify_id;

-- refunded more than paid: recorded, flagged; the order is refunded
SELECT outcome FROM t.wx('lg', 'over_pay');
SELECT outcome FROM t.wx('lg', 'over_r1');
SELECT outcome FROM t.wx('lg', 'over_r2');
SELECT * FROM t.ledger WHERE order_no = 'LG-OVER';
-- refunded in full while shipped (no way to refunded): recorded, flagged
SELECT outcome FROM t.wx('lg', 'ship_pay');
SELECT paynotify_transit('LG-SHIP', 'paid', 'shipped');
SELECT outcome FROM t.wx('lg', 'ship_r');
SELECT * FROM t.ledger WHERE order_no = 'LG-SHIP';

-- a parked refund whose hook fails fails the payment that applies it: both
-- are rolled back and retried together (the PL/pgSQL hook registered by a
-- plain role with the admin capacity: a superuser's hook may have no body
-- kept as text)
CREATE TABLE t.lg_switch (fail boolean);
INSERT INTO t.lg_switch VALUES (true);
CREATE ROLE lg_op;
SELECT paynotify_grant('lg_op', 'admin');
GRANT USAGE ON SCHEMA t TO lg_op;
GRANT SELECT ON t.lg_switch TO lg_op;
CREATE FUNCTION t.lg_on_refunded(ev jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF (SELECT fail FROM t.lg_switch) THEN
		RAISE EXCEPTION 'refund desk unavailable';
	END IF;
END
$$;
SET ROLE lg_op;
SELECT paynotify_on('refunded', 't.lg_on_refunded(jsonb)');
RESET ROLE;
SELECT outcome FROM t.wx('lg', 'hook_r');
SELECT status, outcome FROM t.wx('lg', 'hook_pay');
SELECT * FROM t.ledger WHERE order_no = 'LG-HOOK';
SELECT event_type, status, error_msg FROM payment_notify_log WHERE order_no = 'LG-HOOK' ORDER BY notify_id;
UPDATE t.lg_switch SET fail = false;
SELECT status, outcome FROM t.wx('lg', 'hook_pay');
SELECT * FROM t.ledger WHERE order_no = 'LG-HOOK';
SELECT event_type, status, attempts, error_msg FROM payment_notify_log WHERE order_no = 'LG-HOOK' ORDER BY notify_id;
DELETE FROM paynotify_hook;
SELECT paynotify_revoke('lg_op', 'admin');
DROP OWNED BY lg_op;
DROP ROLE lg_op;

-- a hook that moves the order (paynotify_transit applies the parked
-- notifications itself) while the payment applies them: each parked
-- refund is applied once, and its log row says so
SELECT t.set_order('LG-REENT', 'pending', 100);
CREATE ROLE lg_mover;
SELECT paynotify_grant('lg_mover', 'admin');
GRANT USAGE ON SCHEMA t TO lg_mover;
GRANT SELECT, UPDATE ON public.orders TO lg_mover;
CREATE FUNCTION t.lg_ship_on_refund(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	SELECT pay.paynotify_transit(ev->'notice'->>'order_no', 'paid', 'shipped');
END;
SET ROLE lg_mover;
SELECT paynotify_on('refunded', 't.lg_ship_on_refund(jsonb)');
RESET ROLE;
SELECT t.stripe_ledger('lg_s', 'LG-REENT', 'evt_lg_re_1', 'pi_lg_re', 100, 30, ARRAY['re_lg_re_1']);
SELECT t.stripe_ledger('lg_s', 'LG-REENT', 'evt_lg_re_2', 'pi_lg_re', 100, 60, ARRAY['re_lg_re_2', 're_lg_re_1']);
SELECT t.stripe_ledger('lg_s', 'LG-REENT', 'evt_lg_re_0', 'pi_lg_re', 100);
SELECT * FROM t.ledger WHERE order_no = 'LG-REENT';
SELECT notify_id, status, note, attempts FROM payment_notify_log WHERE order_no = 'LG-REENT' ORDER BY notify_id;
DELETE FROM paynotify_hook;
SELECT paynotify_revoke('lg_mover', 'admin');
DROP OWNED BY lg_mover;
DROP ROLE lg_mover;

-- the currency is compared with the order's, whatever the letter case
ALTER TABLE public.orders ADD COLUMN currency text;
UPDATE public.orders SET currency = 'CNY' WHERE order_no IN ('LG-CUR1', 'LG-CUR2');
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen',
	currency_column => 'currency');
SELECT outcome FROM t.wx('lg', 'cur_ok');
SELECT outcome FROM t.wx('lg', 'cur_bad');
SELECT * FROM t.ledger WHERE order_no IN ('LG-CUR1', 'LG-CUR2') ORDER BY 1;
SELECT status, note FROM payment_notify_log WHERE order_no IN ('LG-CUR1', 'LG-CUR2') ORDER BY order_no;
-- a currency column that does not exist is refused
SELECT paynotify_bind_orders('public.orders', currency_column => 'no_such_column');
-- without an amount column payments are not checked: said when binding
SELECT paynotify_bind_orders('public.orders');
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
ALTER TABLE public.orders DROP COLUMN currency;

-- a profit-sharing resource under TRANSACTION.SUCCESS (original_type
-- profitsharing) is recorded and acknowledged, never a payment: not even
-- one whose plaintext reads like a payment of a pending order
INSERT INTO public.orders VALUES ('LG-PS', 'pending', 100);
SELECT status, outcome FROM t.wx('lg', 'ps_txn');
SELECT status, outcome FROM t.wx('lg', 'ps_txn_shaped');
SELECT status FROM public.orders WHERE order_no = 'LG-PS';
SELECT count(*) AS payments FROM payment_record WHERE trade_no = 'T-PS';
SELECT event_type, status, note FROM payment_notify_log
WHERE notify_id IN ('1ed9e700-0000-4000-8000-000000000027', '1ed9e700-0000-4000-8000-000000000028')
ORDER BY notify_id;

-- a combine payment (合单支付): each paid sub-order of this merchant pays
-- its own order, one paid event each, in one step; the log row is keyed by
-- combine_out_trade_no; another merchant's or an unpaid sub-order is not
-- applied.  A sub-order of another amount is that order's anomaly while
-- the others pay; an unknown order fails them all (all or none) until it
-- exists, and the retry pays both from the stored notice.
INSERT INTO public.orders VALUES ('LG-CMB-1', 'pending', 100), ('LG-CMB-2', 'pending', 200),
	('LG-CMB-3', 'pending', 300), ('LG-CMB-4', 'pending', 400), ('LG-CMB-5', 'pending', 500),
	('LG-CMB-7', 'pending', 700), ('LG-CMB-8', 'pending', 800), ('LG-CMB-Y', 'pending', 300);
SELECT n, r.status, r.outcome FROM unnest(ARRAY['cmb_ok', 'cmb_ok', 'cmb_mismatch', 'cmb_missing',
		'cmb_others', 'cmb_foreign', 'cmb_no_subs']) WITH ORDINALITY u(n, i),
	LATERAL t.wx('lg', n) r ORDER BY i;
SELECT order_no, status FROM public.orders WHERE order_no LIKE 'LG-CMB-%' ORDER BY 1;
SELECT order_no, trade_no, amount FROM payment_record WHERE order_no LIKE 'LG-CMB-%' ORDER BY 1;
SELECT event, order_no, amount FROM paynotify_outbox WHERE order_no LIKE 'LG-CMB-%' ORDER BY id;
SELECT order_no, status, note, delivery_count FROM payment_notify_log
WHERE order_no LIKE 'LG-CMB-%' ORDER BY 1;
SELECT kind, order_no FROM paynotify_anomaly WHERE order_no LIKE 'LG-CMB-%' ORDER BY id;
-- an unpaid sub-order may name no transaction yet: the paid one pays
INSERT INTO public.orders VALUES ('LG-CMB-9', 'pending', 900), ('LG-CMB-10', 'pending', 100);
SELECT status, outcome FROM t.wx('lg', 'cmb_unpaid_no_txn');
SELECT order_no, status FROM public.orders WHERE order_no IN ('LG-CMB-9', 'LG-CMB-10') ORDER BY 1;
INSERT INTO public.orders VALUES ('LG-CMB-6', 'pending', 600);
SELECT * FROM paynotify_retry('lg', '1ed9e700-0000-4000-8000-000000000031');
SELECT order_no, status FROM public.orders WHERE order_no IN ('LG-CMB-5', 'LG-CMB-6') ORDER BY 1;
SELECT event, order_no, amount FROM paynotify_outbox WHERE order_no IN ('LG-CMB-5', 'LG-CMB-6') ORDER BY id;

-- partner mode: a service provider's channel for one sub-merchant
-- (sp_mchid, sub_mchid; sp_appid) accepts only notices of both: another
-- sub-merchant's or another provider's is an anomaly, never applied; a
-- partner combine pays only the sub-orders of its sub-merchant.  Settings
-- of the two modes do not mix.
SELECT paynotify_add_channel('lgp_bad', 'wxpay', jsonb_build_object('apiv3_key',
	btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'mchid', '1900000109', 'sp_mchid', '1900000100'));
SELECT paynotify_add_channel('lgp_bad', 'wxpay', jsonb_build_object('apiv3_key',
	btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'sub_mchid', '1900000109'));
SELECT paynotify_add_channel('lgp', 'wxpay', jsonb_build_object('apiv3_key',
	btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'sp_mchid', '1900000100',
	'sub_mchid', '1900000109', 'sp_appid', 'wx8888888888888888'));
SELECT paynotify_add_key('lgp', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3',
	t.vtext('keys/wechat_platform_1.pub.pem'));
INSERT INTO public.orders VALUES ('LG-PP-1', 'pending', 100), ('LG-PP-2', 'pending', 100),
	('LG-PP-3', 'pending', 100), ('LG-PP-4', 'pending', 400), ('LG-PP-5', 'pending', 500);
SELECT n, r.status, r.outcome FROM unnest(ARRAY['pp_ok', 'pp_other_sub', 'pp_other_sp',
		'pp_refund_other_sub', 'pp_refund', 'pp_combine']) WITH ORDINALITY u(n, i),
	LATERAL t.wx('lgp', n) r ORDER BY i;
SELECT order_no, status FROM public.orders WHERE order_no LIKE 'LG-PP-%' ORDER BY 1;
SELECT event, order_no, amount FROM paynotify_outbox WHERE order_no LIKE 'LG-PP-%' ORDER BY id;
SELECT order_no, status, note FROM payment_notify_log WHERE channel = 'lgp' ORDER BY 1, 2;
-- the same partner payment on a direct channel whose mchid is the
-- provider's (how 1.3 took partner notices): paid, whatever the
-- sub-merchant (docs/GATEWAYS.md: set sp_mchid and sub_mchid instead)
SELECT paynotify_add_channel('lgd', 'wxpay', jsonb_build_object('apiv3_key',
	btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'mchid', '1900000100'));
SELECT paynotify_add_key('lgd', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3',
	t.vtext('keys/wechat_platform_1.pub.pem'));
SELECT status, outcome FROM t.wx('lgd', 'pp_other_sub');
SELECT status FROM public.orders WHERE order_no = 'LG-PP-2';
-- the sub-merchant paid is kept with the payment (a direct merchant's:
-- none), a combine's sub-order's too
SELECT channel, order_no, trade_no, sub_merchant FROM payment_record
WHERE order_no LIKE 'LG-PP-%' OR order_no = 'LG-CMB-1' ORDER BY 2;

-- a refund whose amount and the trade's refunded total cannot be read
-- (amount_refunded missing, or a string): the anomaly refund_amount_unknown,
-- nothing recorded, the order not moved, no event; a readable one after it
-- is applied
SELECT t.set_order('LG-UNK', 'pending', 100);
SELECT t.stripe_ledger('lg_s', 'LG-UNK', 'evt_lgu_1', 'pi_unk', 100);
SELECT k, s.outcome FROM generate_series(2, 3) k, LATERAL t.stripe('lg_s', jsonb_build_object('id', 'evt_lgu_' || k, 'object', 'event',
	'type', 'charge.refunded', 'livemode', false, 'data', jsonb_build_object('object',
	jsonb_build_object('id', 'ch_unk', 'object', 'charge', 'payment_intent', 'pi_unk',
		'amount', 100, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'LG-UNK'))
	|| CASE k WHEN 2 THEN '{}' ELSE '{"amount_refunded": "100"}' END::jsonb))::text,
	ARRAY[t.secret(1)]) s;
SELECT * FROM t.ledger WHERE order_no = 'LG-UNK';
SELECT notify_id, status, note FROM payment_notify_log WHERE order_no = 'LG-UNK' ORDER BY notify_id;
SELECT t.stripe_ledger('lg_s', 'LG-UNK', 'evt_lgu_4', 'pi_unk', 100, 100, ARRAY['re_unk']);
SELECT * FROM t.ledger WHERE order_no = 'LG-UNK';

-- the per-order and per-trade reads have indexes (the business step runs
-- with enable_seqscan = off; bitmap scans off too, so that the plan's shape
-- does not depend on how many rows earlier tests left)
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT p.channel, p.trade_no, p.amount FROM payment_record p
	WHERE p.order_no = 'LG-DBL';
EXPLAIN (COSTS OFF) SELECT COALESCE(sum(amount), 0) FROM paynotify_refund
	WHERE channel = 'lg' AND trade_no = 'T-DBL-1' AND status = 'succeeded';
RESET enable_seqscan;
RESET enable_bitmapscan;

-- the envelope: its fields read as jsonb gives them (a key given twice
-- keeps its last value, whole; keys spelled with escapes are the same
-- keys; a field of another type is no string; a path one level deeper is
-- not the field), without building it (pn_json_fields)
INSERT INTO public.orders (order_no, status, amount_fen)
	SELECT 'LG-ENV-' || i, 'pending', 100 FROM generate_series(1, 20) i;
CREATE TEMP TABLE env_out AS SELECT v.n, v.name, x.status, x.outcome
FROM (VALUES
	(1, 'env_plain'),
	(2, 'env_dup_resource_last_ok'),
	(3, 'env_dup_resource_last_short'),
	(4, 'env_dup_resource_last_null'),
	(5, 'env_dup_ciphertext_last_ok'),
	(6, 'env_dup_ciphertext_last_bad'),
	(7, 'env_dup_id'),
	(8, 'env_id_number'),
	(9, 'env_id_object'),
	(10, 'env_event_type_null'),
	(11, 'env_aad_null'),
	(12, 'env_original_type_null'),
	(13, 'env_original_type_absent'),
	(14, 'env_nonce_array'),
	(15, 'env_resource_string'),
	(16, 'env_resource_array'),
	(17, 'env_escaped_keys'),
	(18, 'env_deep_extra'),
	(19, 'env_nested_id'),
	(20, 'env_root_array')) v(n, name)
	CROSS JOIN LATERAL t.wx('lg', v.name) x;
SELECT e.name, e.status, e.outcome, o.status AS order_status,
	(SELECT string_agg(l.notify_id || ':' || l.status, ',') FROM payment_notify_log l
	 WHERE l.channel = 'lg' AND l.order_no = o.order_no) AS logged
FROM env_out e JOIN public.orders o ON o.order_no = 'LG-ENV-' || e.n
ORDER BY e.n;
