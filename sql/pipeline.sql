-- The pipeline beyond the vectors: durability, business checks, anomalies,
-- failures that retry, refunds that wait for their payment, the outbox.
\set VERBOSITY terse
SET search_path = pay, public;

-- paynotify commits synchronously even where the session says otherwise
SELECT t.configure('wx_transaction_success_valid', 'p_sync');
SELECT t.set_order('PN20260101000001', 'pending');
-- 'local' does not wait for a synchronous standby: raised to 'on' too
-- and the step's bound on its lock waits (paynotify.lock_timeout, 3 s)
-- is the step's alone: the session's lock_timeout is as it was after the
-- call, unset or longer
SET synchronous_commit = local;
BEGIN;
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'p_sync');
SHOW synchronous_commit;
SHOW lock_timeout;
ROLLBACK;
SET synchronous_commit = off;
SET lock_timeout = '7s';
BEGIN;
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'p_sync');
SHOW synchronous_commit;
SHOW lock_timeout;
COMMIT;
SHOW synchronous_commit;
RESET synchronous_commit;
RESET lock_timeout;

-- the log row keeps the decrypted payload and the delivery's story
SELECT notify_id, order_no, event_type, status, payload->>'transaction_id' AS trade,
	payload->'amount'->>'total' AS total, delivery_count, attempts, error_msg,
	processed_at IS NOT NULL AS processed, first_seen = last_seen AS seen_once
FROM payment_notify_log WHERE channel = 'p_sync';
SELECT outcome FROM t.deliver('wx_retry_duplicate_valid', 'p_sync');
SELECT delivery_count, attempts, status FROM payment_notify_log WHERE channel = 'p_sync';
SELECT event, order_no, amount FROM paynotify_outbox WHERE channel = 'p_sync';

-- amount differs from the order: acknowledged, not applied, recorded
SELECT t.configure('wx_transaction_success_valid', 'p_amount');
SELECT t.set_order('PN20260101000001', 'pending', 9999);
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'p_amount');
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
SELECT kind, order_no FROM paynotify_anomaly WHERE channel = 'p_amount';
SELECT status, note FROM payment_notify_log WHERE channel = 'p_amount';
SELECT count(*) AS payments FROM payment_record WHERE channel = 'p_amount';
SELECT outcome FROM t.deliver('wx_retry_duplicate_valid', 'p_amount');

-- another merchant's or app's notification: acknowledged, not applied, recorded
SELECT t.set_order('PN20260101000001', 'pending');
SELECT paynotify_add_channel('p_mch', 'wxpay', jsonb_build_object(
	'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'mchid', '1999999999'));
SELECT paynotify_add_key('p_mch', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3', t.vtext('keys/wechat_platform_1.pub.pem'));
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'p_mch');
SELECT paynotify_add_channel('p_app', 'wxpay', jsonb_build_object(
	'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'appid', 'wxOTHER'));
SELECT paynotify_add_key('p_app', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3', t.vtext('keys/wechat_platform_1.pub.pem'));
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'p_app');
SELECT channel, kind FROM paynotify_anomaly WHERE channel IN ('p_mch', 'p_app') ORDER BY 1;
SELECT status FROM orders WHERE order_no = 'PN20260101000001';

-- a payment for a cancelled order: the money is recorded, the order stays cancelled
SELECT t.configure('wx_transaction_success_valid', 'p_cancel');
SELECT t.set_order('PN20260101000001', 'cancelled');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'p_cancel');
SELECT status FROM orders WHERE order_no = 'PN20260101000001';
SELECT kind FROM paynotify_anomaly WHERE channel = 'p_cancel';
SELECT trade_no, amount FROM payment_record WHERE channel = 'p_cancel';

-- the same payment again (another channel already recorded it here): no effect
SELECT t.configure('wx_transaction_success_valid', 'p_paid');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'p_paid');
DELETE FROM payment_notify_log WHERE channel = 'p_paid';
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'p_paid');
SELECT note FROM payment_notify_log WHERE channel = 'p_paid';
SELECT count(*) AS payments FROM payment_record WHERE channel = 'p_paid';
-- a different payment for a paid order: recorded, flagged
UPDATE payment_record SET trade_no = 'other' WHERE channel = 'p_paid';
DELETE FROM payment_notify_log WHERE channel = 'p_paid';
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'p_paid');
SELECT kind FROM paynotify_anomaly WHERE channel = 'p_paid';

-- an unknown order: failed (5xx, retried), recorded with its error; then it exists
SELECT t.configure('wx_transaction_success_valid', 'p_missing');
DELETE FROM orders WHERE order_no = 'PN20260101000001';
SELECT status, outcome, body FROM t.deliver('wx_transaction_success_valid', 'p_missing');
SELECT status, attempts, delivery_count, error_msg FROM payment_notify_log WHERE channel = 'p_missing';
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'p_missing');
SELECT status, attempts, delivery_count, error_msg FROM payment_notify_log WHERE channel = 'p_missing';
SELECT status FROM orders WHERE order_no = 'PN20260101000001';

-- a refund that arrives before its payment waits, durably, and is applied
-- in the transaction that pays the order
SELECT t.configure('wx_transaction_success_valid', 'p_park');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT status, outcome FROM t.deliver('wx_refund_success_pubkey_id_valid', 'p_park');
SELECT status, note, notice->>'refund_id' AS refund FROM payment_notify_log WHERE channel = 'p_park';
SELECT outcome FROM t.deliver('wx_refund_success_pubkey_id_valid', 'p_park');
SELECT count(*) AS refunds FROM paynotify_refund WHERE channel = 'p_park';
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'p_park');
SELECT event_type, status, attempts FROM payment_notify_log WHERE channel = 'p_park' ORDER BY event_type DESC;
SELECT refund_id, amount, status FROM paynotify_refund WHERE channel = 'p_park';
SELECT event, amount FROM paynotify_outbox WHERE channel = 'p_park' ORDER BY id;
SELECT outcome FROM t.deliver('wx_refund_success_pubkey_id_valid', 'p_park');

-- the outbox is taken once; a rollback gives the rows back
BEGIN;
SELECT count(*) > 0 AS taken FROM paynotify_outbox_claim(1000);
ROLLBACK;
SELECT count(*) > 0 AS still_there FROM paynotify_outbox;
SELECT count(*) > 0 AS taken FROM paynotify_outbox_claim(1000);
SELECT count(*) AS left_over FROM paynotify_outbox;

-- without pending -> paid in the state machine the business step fails, retryably
SELECT t.configure('wx_transaction_success_valid', 'p_nopath');
SELECT t.set_order('PN20260101000001', 'pending');
DELETE FROM paynotify_transition WHERE from_state = 'pending' AND to_state = 'paid';
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'p_nopath');
INSERT INTO paynotify_transition VALUES ('pending', 'paid');
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'p_nopath');

-- unknown channel, NULL or oversized bodies, non-object headers
SELECT * FROM paynotify_handle('no_such_channel', '{}', '\x7b7d'::bytea);
SELECT status, outcome FROM paynotify_handle(NULL, '{}', '\x7b7d'::bytea);
SELECT status, outcome FROM paynotify_handle('p_sync', '{}', NULL::bytea);
SELECT status, outcome FROM paynotify_handle('p_sync', '[1]', '\x7b7d'::bytea);
SELECT status, outcome FROM paynotify_handle('p_sync', NULL, '\x7b7d'::bytea);
SET paynotify.max_body_size = 1024;
SELECT status, outcome FROM paynotify_handle('p_sync', '{}', convert_to(repeat('x', 1025), 'UTF8'));
RESET paynotify.max_body_size;
-- the text overload signs the UTF-8 bytes
SELECT status, outcome FROM paynotify_handle('p_sync', '{}', '{}'::text);

-- the same event id again with other content and a valid signature: recorded
-- as an anomaly, acknowledged, never applied
SELECT paynotify_add_channel('p_same', 'stripe', '{}');
SELECT paynotify_add_key('p_same', 's1', t.secret(1));
SELECT t.set_order('PD1', 'pending'), t.set_order('PD2', 'pending');
SELECT status, outcome FROM t.stripe('p_same', '{"id": "evt_same", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "data": {"object": {"id": "pi_d1", "amount": 8888, "amount_received": 8888, "currency": "usd", "metadata": {"order_id": "PD1"}}}}', ARRAY[t.secret(1)]);
SELECT status, outcome FROM t.stripe('p_same', '{"id": "evt_same", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "data": {"object": {"id": "pi_d2", "amount": 8888, "amount_received": 8888, "currency": "usd", "metadata": {"order_id": "PD2"}}}}', ARRAY[t.secret(1)]);
SELECT kind, order_no FROM paynotify_anomaly WHERE channel = 'p_same';
SELECT order_no, status FROM orders WHERE order_no IN ('PD1', 'PD2') ORDER BY 1;
SELECT order_no, delivery_count, payload->'data'->'object'->>'id' AS kept FROM payment_notify_log WHERE channel = 'p_same';
-- ... and when the first one failed, the other content is refused (the
-- gateway keeps retrying the first, which then goes through)
SELECT status, outcome FROM t.stripe('p_same', '{"id": "evt_same2", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "data": {"object": {"id": "pi_d3", "amount": 8888, "amount_received": 8888, "currency": "usd", "metadata": {"order_id": "PD3"}}}}', ARRAY[t.secret(1)]);
SELECT status, outcome FROM t.stripe('p_same', '{"id": "evt_same2", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "data": {"object": {"id": "pi_d4", "amount": 8888, "amount_received": 8888, "currency": "usd", "metadata": {"order_id": "PD2"}}}}', ARRAY[t.secret(1)]);
SELECT t.set_order('PD3', 'pending');
SELECT status, outcome FROM t.stripe('p_same', '{"id": "evt_same2", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "data": {"object": {"id": "pi_d3", "amount": 8888, "amount_received": 8888, "currency": "usd", "metadata": {"order_id": "PD3"}}}}', ARRAY[t.secret(1)], ts => 1767300100);
SELECT kind, order_no FROM paynotify_anomaly WHERE channel = 'p_same' ORDER BY id;
SELECT order_no, status FROM orders WHERE order_no IN ('PD1', 'PD2', 'PD3') ORDER BY 1;
-- Stripe's pending_webhooks changes between deliveries of one event: not a difference
SELECT status, outcome FROM t.stripe('p_same', '{"id": "evt_same", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "pending_webhooks": 3, "data": {"object": {"id": "pi_d1", "amount": 8888, "amount_received": 8888, "currency": "usd", "metadata": {"order_id": "PD1"}}}}', ARRAY[t.secret(1)]);
