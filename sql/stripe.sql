-- Stripe (docs/GATEWAYS.md §3): events signed with HMAC-SHA256 in the
-- Stripe-Signature header.  Vector cases come from test/vectors; other
-- events are built here and signed with the vectors' TEST-ONLY secrets by
-- t.stripe (test/fixture.sql, pgcrypto's HMAC; checked against a vector).

-- The key is the whole whsec_ string; the fixture's HMAC agrees with the vector.
SELECT t.hmac_sha256(convert_to(t.secret(1), 'UTF8'),
		t.vbytes('cases/stripe_payment_intent_succeeded_valid/signed_payload.bin'))
	= substring(c->'headers'->1->>1 FROM 'v1=([0-9a-f]{64})') AS sql_hmac_matches_vector
FROM t.manifest WHERE name = 'stripe_payment_intent_succeeded_valid';

-- Settings and secrets are checked when they are added.
SELECT pay.paynotify_add_channel('st_bad', 'stripe', '{"tolerance": 300}');
SELECT pay.paynotify_add_channel('st_bad', 'stripe', '{"tolerance_s": 0}');
SELECT pay.paynotify_add_channel('st_bad', 'stripe', '{"tolerance_s": 86401}');
SELECT pay.paynotify_add_channel('st_bad', 'stripe', '{"order_ref_path": "data..order"}');
SELECT pay.paynotify_add_channel('st_bad', 'stripe', '{"livemode": "yes"}');
SELECT pay.paynotify_add_channel('st', 'stripe', '{}');
SELECT pay.paynotify_add_key('st', 'secret_1', t.secret(1));
-- Any non-empty secret: the HMAC key is the whole string, and the SDKs'
-- own fixtures use secrets without the whsec_ prefix (stripe-dotnet signs
-- its fixture with "webhook_secret").
SELECT pay.paynotify_add_channel('st_keys', 'stripe', '{}');
SELECT pay.paynotify_add_key('st_keys', 'plain', 'webhook_secret');
SELECT pay.paynotify_add_key('st_keys', 'short', 'whsec_abc');
SELECT pay.paynotify_add_key('st_keys', 'spaced', 'whsec_0123456789 abcdef');
-- Refused: what is clearly an API key (with a hint), an empty secret, a
-- line break (a secret read from a file with its newline).
SELECT pay.paynotify_add_key('st_keys', 'api', 'sk_test_0123456789abcdefghijklmnop');
SELECT pay.paynotify_add_key('st_keys', 'api', 'rk_live_0123456789abcdefghijklmnop');
SELECT pay.paynotify_add_key('st_keys', 'api', 'pk_test_0123456789abcdefghijklmnop');
SELECT pay.paynotify_add_key('st_keys', 'empty', '');
SELECT pay.paynotify_add_key('st_keys', 'newline', E'whsec_0123456789abcdef\n');
SELECT key_id FROM pay.paynotify_key WHERE channel = 'st_keys' ORDER BY key_id;

-- ---------------------------------------------------------------------------
-- Vector cases, each on a channel of its own ("my_" + case, configured as
-- the manifest says), so later tests can still replay them fresh
-- ---------------------------------------------------------------------------

SELECT name, r.* FROM unnest(ARRAY[
		'stripe_payment_intent_succeeded_valid', 'stripe_retry_duplicate_valid',
		'stripe_two_v1_second_matches', 'stripe_rotated_secret_configured_valid',
		'stripe_v1_and_v0_valid', 'stripe_only_v0', 'stripe_charge_refunded_valid',
		'stripe_timestamp_minus299_valid', 'stripe_timestamp_future',
		'stripe_missing_timestamp', 'stripe_key_is_base64_decoded_secret']) name,
	t.replay(name, 'my_') r;
-- The event is logged as sent; the notice's fields as extracted.
SELECT notify_id, order_no, event_type, status, payload->'data'->'object'->>'id' AS object
FROM pay.payment_notify_log WHERE channel = 'my_stripe_payment_intent_succeeded_valid';
SELECT trade_no, order_no, amount, currency FROM pay.payment_record
WHERE channel = 'my_stripe_payment_intent_succeeded_valid';
SELECT refund_id, trade_no, amount FROM pay.paynotify_refund
WHERE channel = 'my_stripe_charge_refunded_valid';

-- ---------------------------------------------------------------------------
-- Own channel: events signed here
-- ---------------------------------------------------------------------------
-- An event as Stripe sends it.
CREATE FUNCTION t.evt(id text, type text, object jsonb, livemode boolean DEFAULT false)
	RETURNS text LANGUAGE sql AS $$
	SELECT jsonb_pretty(jsonb_build_object('id', id, 'object', 'event',
		'api_version', '2025-03-31.basil', 'created', 1767300000, 'type', type,
		'livemode', livemode, 'pending_webhooks', 1,
		'data', jsonb_build_object('object', object)))
$$;
-- Deliver body with a Stripe-Signature of t=ts and one v1 per secret, at
-- unix time now (default: ts + 2).
-- Deliver body with the Stripe-Signature header given as is.
CREATE FUNCTION t.stripe_raw(chan text, body text, hdr text,
		OUT status int, OUT reply text, OUT outcome text)
	LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('paynotify.now', '1767300002', false);
	SELECT h.status, h.body, h.outcome INTO status, reply, outcome
		FROM pay.paynotify_handle(chan, jsonb_build_object('stripe-signature', hdr), body) h;
	PERFORM set_config('paynotify.now', '0', false);
END
$$;

INSERT INTO public.orders VALUES
	('STR-1', 'pending', 1250), ('STR-2', 'pending', 990), ('STR-3', 'pending', 4200),
	('STR-4', 'pending', 700), ('STR-5', 'pending', 300), ('STR-6', 'pending', 100),
	('STR-7', 'pending', 100), ('STR-8', 'pending', 800);
CREATE TABLE t.ev AS SELECT * FROM (VALUES
	('pi_1', t.evt('evt_st_1', 'payment_intent.succeeded',
		'{"id": "pi_st_1", "object": "payment_intent", "amount": 1250, "amount_received": 1250,
		  "currency": "usd", "metadata": {"order_id": "STR-1"}}')),
	('pi_2', t.evt('evt_st_2', 'payment_intent.succeeded',
		'{"id": "pi_st_2", "object": "payment_intent", "amount": 990, "amount_received": 990,
		  "currency": "eur", "metadata": {"order_id": "STR-2"}}')),
	('refund_part', t.evt('evt_st_3', 'charge.refunded',
		'{"id": "ch_st_1", "object": "charge", "amount": 1250, "amount_refunded": 250,
		  "payment_intent": "pi_st_1", "refunded": false, "currency": "usd",
		  "metadata": {"order_id": "STR-1"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_1", "amount": 250}]}}')),
	('refund_full', t.evt('evt_st_4', 'charge.refunded',
		'{"id": "ch_st_1", "object": "charge", "amount": 1250, "amount_refunded": 1250,
		  "payment_intent": "pi_st_1", "refunded": true, "currency": "usd",
		  "metadata": {"order_id": "STR-1"}}')),
	('checkout_paid', t.evt('evt_st_5', 'checkout.session.completed',
		'{"id": "cs_st_1", "object": "checkout.session", "payment_status": "paid",
		  "payment_intent": "pi_st_3", "amount_total": 4200, "currency": "usd",
		  "metadata": {"order_id": "STR-3"}, "client_reference_id": "STR-4"}')),
	('checkout_unpaid', t.evt('evt_st_6', 'checkout.session.completed',
		'{"id": "cs_st_2", "object": "checkout.session", "payment_status": "unpaid",
		  "payment_intent": null, "amount_total": 700, "metadata": {"order_id": "STR-4"}}')),
	('no_order', t.evt('evt_st_7', 'payment_intent.succeeded',
		'{"id": "pi_st_7", "object": "payment_intent", "amount": 500, "amount_received": 500,
		  "currency": "usd", "metadata": {}}')),
	('customer', t.evt('evt_st_8', 'customer.created', '{"id": "cus_st_1", "object": "customer"}')),
	('pi_5', t.evt('evt_st_9', 'payment_intent.succeeded',
		'{"id": "pi_st_5", "amount_received": 300, "currency": "usd", "metadata": {"order_id": "STR-5"}}')),
	('pi_6', t.evt('evt_st_10', 'payment_intent.succeeded',
		'{"id": "pi_st_6", "amount_received": 100, "currency": "usd", "metadata": {"order_id": "STR-6"}}')),
	('pi_7_live', t.evt('evt_st_11', 'payment_intent.succeeded',
		'{"id": "pi_st_71", "amount_received": 100, "currency": "usd", "metadata": {"order_id": "STR-7"}}',
		true)),
	('pi_7_test', t.evt('evt_st_12', 'payment_intent.succeeded',
		'{"id": "pi_st_72", "amount_received": 100, "currency": "usd", "metadata": {"order_id": "STR-7"}}')),
	('pi_8', t.evt('evt_st_14', 'payment_intent.succeeded',
		'{"id": "pi_st_8", "amount_received": 800, "currency": "usd", "metadata": {"order_id": "STR-8"}}')),
	('checkout_ref', t.evt('evt_st_13', 'checkout.session.completed',
		'{"id": "cs_st_3", "object": "checkout.session", "payment_status": "paid",
		  "payment_intent": "pi_st_4", "amount_total": 700, "client_reference_id": "STR-4"}'))
) v(name, body);
CREATE FUNCTION t.ev(n text) RETURNS text LANGUAGE sql AS $$ SELECT body FROM t.ev WHERE name = n $$;

-- A secret without the whsec_ prefix verifies like any other.
SELECT * FROM t.stripe('st_keys', t.ev('customer'), ARRAY['webhook_secret']);
SELECT * FROM t.stripe('st_keys', t.ev('customer'), ARRAY['webhook_secreT']);

-- A payment, acknowledged with {"received":true}; its repeat is a duplicate.
SELECT * FROM t.stripe('st', t.ev('pi_1'), ARRAY[t.secret(1)]);
SELECT * FROM t.stripe('st', t.ev('pi_1'), ARRAY[t.secret(1)], ts => 1767300100);
SELECT trade_no, order_no, amount, currency FROM pay.payment_record WHERE channel = 'st';
SELECT notify_id, delivery_count FROM pay.payment_notify_log WHERE channel = 'st';

-- Two v1 (an unknown secret's first): one match is enough.
SELECT * FROM t.stripe('st', t.ev('pi_2'), ARRAY['whsec_not_our_secret_0000000000', t.secret(1)]);

-- Refunds: charge.refunded carries the running total (also for partial
-- refunds) and the newest refund id when the list is expanded.
SELECT name, r.* FROM unnest(ARRAY['refund_part', 'refund_full']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
SELECT refund_id, order_no, trade_no, amount FROM pay.paynotify_refund
WHERE channel = 'st' ORDER BY amount;
SELECT status FROM public.orders WHERE order_no = 'STR-1';

-- Checkout: paid sessions pay (trade = the payment intent); unpaid ones wait.
SELECT name, r.* FROM unnest(ARRAY['checkout_paid', 'checkout_unpaid']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
SELECT trade_no, order_no, amount FROM pay.payment_record
WHERE channel = 'st' AND order_no IN ('STR-3', 'STR-4');

-- A refund that fails (refund.failed; refund.updated or charge.refund.updated
-- whose refund says failed): data.object is the refund.  Stripe's failure
-- is final: a refund recorded as succeeded goes back (the ledger as if it
-- had not succeeded; refunded -> paid only where the state machine has it,
-- else the anomaly), a later success of it is ignored, and a failure of a
-- refund never recorded is recorded failed.  Canceled intents and expired
-- sessions close a pending order.
INSERT INTO public.orders VALUES
	('STR-9', 'pending', 500), ('STR-10', 'pending', 600), ('STR-11', 'pending', 700),
	('STR-12', 'pending', 800), ('STR-13', 'pending', 900);
CREATE FUNCTION t.refund_obj(id text, pi text, amount int, status text, ord text) RETURNS jsonb
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'refund', 'amount', amount, 'charge', 'ch_' || pi,
		'currency', 'usd', 'payment_intent', pi, 'status', status,
		'failure_reason', CASE WHEN status = 'failed' THEN 'expired_or_canceled_card' END,
		'metadata', jsonb_build_object('order_id', ord))
$$;
INSERT INTO t.ev VALUES
	('pi_9', t.evt('evt_st_20', 'payment_intent.succeeded',
		'{"id": "pi_st_9", "amount_received": 500, "currency": "usd", "metadata": {"order_id": "STR-9"}}')),
	('refund_9', t.evt('evt_st_21', 'charge.refunded',
		'{"id": "ch_pi_st_9", "object": "charge", "amount": 500, "amount_refunded": 500,
		  "payment_intent": "pi_st_9", "refunded": true, "currency": "usd",
		  "metadata": {"order_id": "STR-9"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_9", "amount": 500}]}}')),
	('refund_9_failed', t.evt('evt_st_22', 'refund.failed', t.refund_obj('re_st_9', 'pi_st_9', 500, 'failed', 'STR-9'))),
	('refund_9_again', t.evt('evt_st_23', 'charge.refunded',
		'{"id": "ch_pi_st_9", "object": "charge", "amount": 500, "amount_refunded": 500,
		  "payment_intent": "pi_st_9", "refunded": true, "currency": "usd",
		  "metadata": {"order_id": "STR-9"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_9", "amount": 500}]}}')),
	('refund_9b_pending', t.evt('evt_st_24', 'refund.updated', t.refund_obj('re_st_9b', 'pi_st_9', 100, 'pending', 'STR-9'))),
	('refund_9b_failed', t.evt('evt_st_25', 'charge.refund.updated', t.refund_obj('re_st_9b', 'pi_st_9', 100, 'failed', 'STR-9'))),
	('pi_10', t.evt('evt_st_26', 'payment_intent.succeeded',
		'{"id": "pi_st_10", "amount_received": 600, "currency": "usd", "metadata": {"order_id": "STR-10"}}')),
	('refund_10', t.evt('evt_st_27', 'charge.refunded',
		'{"id": "ch_pi_st_10", "object": "charge", "amount": 600, "amount_refunded": 600,
		  "payment_intent": "pi_st_10", "refunded": true, "currency": "usd",
		  "metadata": {"order_id": "STR-10"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_10", "amount": 600}]}}')),
	('refund_10_failed', t.evt('evt_st_28', 'refund.failed', t.refund_obj('re_st_10', 'pi_st_10', 600, 'failed', 'STR-10'))),
	('refund_10b', t.evt('evt_st_33', 'charge.refunded',
		'{"id": "ch_pi_st_10", "object": "charge", "amount": 600, "amount_refunded": 600,
		  "payment_intent": "pi_st_10", "refunded": true, "currency": "usd",
		  "metadata": {"order_id": "STR-10"}}')),
	('refund_10b_failed', t.evt('evt_st_34', 'refund.failed', t.refund_obj('re_st_10b', 'pi_st_10', 600, 'failed', 'STR-10'))),
	('canceled_11', t.evt('evt_st_29', 'payment_intent.canceled',
		'{"id": "pi_st_11", "object": "payment_intent", "amount": 700, "status": "canceled",
		  "cancellation_reason": "abandoned", "currency": "usd", "metadata": {"order_id": "STR-11"}}')),
	('expired_12', t.evt('evt_st_30', 'checkout.session.expired',
		'{"id": "cs_st_12", "object": "checkout.session", "status": "expired", "payment_status": "unpaid",
		  "amount_total": 800, "currency": "usd", "metadata": {"order_id": "STR-12"}}')),
	('pi_13', t.evt('evt_st_31', 'payment_intent.succeeded',
		'{"id": "pi_st_13", "amount_received": 900, "currency": "usd", "metadata": {"order_id": "STR-13"}}')),
	('canceled_13', t.evt('evt_st_32', 'payment_intent.canceled',
		'{"id": "pi_st_13b", "object": "payment_intent", "amount": 900, "status": "canceled",
		  "currency": "usd", "metadata": {"order_id": "STR-13"}}'));
SELECT name, r.* FROM unnest(ARRAY['pi_9', 'refund_9', 'refund_9_failed', 'refund_9_again',
		'refund_9b_pending', 'refund_9b_failed', 'canceled_11', 'expired_12', 'pi_13',
		'canceled_13']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
-- the state machine given refunded -> paid: the order is paid again
INSERT INTO pay.paynotify_transition VALUES ('refunded', 'paid');
SELECT name, r.* FROM unnest(ARRAY['pi_10', 'refund_10', 'refund_10_failed']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
-- a charge.refunded without its refunds' ids (API versions since
-- 2022-11-15) is recorded under the event's id: the refund.failed that
-- follows cannot find it, is recorded failed, and says so as an anomaly
SELECT name, r.* FROM unnest(ARRAY['refund_10b', 'refund_10b_failed']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
DELETE FROM pay.paynotify_transition WHERE from_state = 'refunded' AND to_state = 'paid';
SELECT order_no, status FROM public.orders WHERE order_no IN ('STR-9', 'STR-10', 'STR-11', 'STR-12', 'STR-13')
ORDER BY length(order_no), order_no;
SELECT refund_id, order_no, trade_no, amount, status, notify_id FROM pay.paynotify_refund
WHERE channel = 'st' AND order_no IN ('STR-9', 'STR-10') ORDER BY refund_id;
SELECT event, order_no, amount FROM pay.paynotify_outbox
WHERE channel = 'st' AND order_no IN ('STR-9', 'STR-10', 'STR-11', 'STR-12', 'STR-13') ORDER BY id;
SELECT notify_id, event_type, status, note FROM pay.payment_notify_log
WHERE channel = 'st' AND order_no IN ('STR-9', 'STR-10', 'STR-11', 'STR-12', 'STR-13')
ORDER BY length(notify_id), notify_id;
SELECT kind, order_no FROM pay.paynotify_anomaly WHERE channel = 'st' AND order_no IN ('STR-9', 'STR-10')
ORDER BY id;

-- What a hostile review found: a cumulative total recorded on a trade
-- where a refund failed is an anomaly (an older snapshot that arrives
-- after the failure counts the failed refund again, one taken after it
-- does not, and nothing tells them apart: someone must look); a
-- failure naming a trade of another order is that anomaly, and the other
-- order is left alone; an intent canceled as a duplicate closes nothing; a
-- thin event is recorded only, whatever it holds; a failure that names no
-- refund fails nothing.
INSERT INTO public.orders VALUES ('STR-14', 'pending', 500), ('STR-15', 'pending', 500),
	('STR-16', 'pending', 500);
INSERT INTO t.ev VALUES
	('pi_14', t.evt('evt_st_40', 'payment_intent.succeeded',
		'{"id": "pi_st_14", "amount_received": 500, "currency": "usd", "metadata": {"order_id": "STR-14"}}')),
	('refund_14_1', t.evt('evt_st_41', 'charge.refunded',
		'{"id": "ch_pi_st_14", "object": "charge", "amount": 500, "amount_refunded": 200,
		  "payment_intent": "pi_st_14", "refunded": false, "currency": "usd",
		  "metadata": {"order_id": "STR-14"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_14_1", "amount": 200}]}}')),
	('refund_14_1_failed', t.evt('evt_st_42', 'refund.failed', t.refund_obj('re_st_14_1', 'pi_st_14', 200, 'failed', 'STR-14'))),
	('refund_14_2', t.evt('evt_st_43', 'charge.refunded',
		'{"id": "ch_pi_st_14", "object": "charge", "amount": 500, "amount_refunded": 500,
		  "payment_intent": "pi_st_14", "refunded": true, "currency": "usd",
		  "metadata": {"order_id": "STR-14"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_14_2", "amount": 300},
												  {"id": "re_st_14_1", "amount": 200}]}}')),
	('pi_15', t.evt('evt_st_44', 'payment_intent.succeeded',
		'{"id": "pi_st_15", "amount_received": 500, "currency": "usd", "metadata": {"order_id": "STR-15"}}')),
	('refund_14_on_15', t.evt('evt_st_45', 'refund.failed', t.refund_obj('re_st_14_9', 'pi_st_14', 500, 'failed', 'STR-15'))),
	('canceled_16_dup', t.evt('evt_st_46', 'payment_intent.canceled',
		'{"id": "pi_st_16a", "object": "payment_intent", "amount": 500, "status": "canceled",
		  "cancellation_reason": "duplicate", "currency": "usd", "metadata": {"order_id": "STR-16"}}')),
	('thin_16', '{"id": "evt_st_47", "object": "v2.core.event", "type": "payment_intent.succeeded",
		"livemode": false, "created": "2026-01-01T00:00:00.000Z",
		"related_object": {"id": "pi_st_16", "type": "payment_intent", "url": "/v1/payment_intents/pi_st_16"},
		"data": {"object": {"id": "pi_st_16", "amount_received": 500, "currency": "usd",
							"metadata": {"order_id": "STR-16"}}}}'),
	('refund_noid_16', t.evt('evt_st_48', 'refund.failed',
		'{"object": "refund", "amount": 500, "payment_intent": "pi_st_16", "status": "failed",
		  "metadata": {"order_id": "STR-16"}}'));
SELECT name, r.* FROM unnest(ARRAY['pi_14', 'refund_14_1', 'refund_14_1_failed', 'refund_14_2',
		'pi_15', 'refund_14_on_15', 'canceled_16_dup', 'thin_16', 'refund_noid_16']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
SELECT order_no, status FROM public.orders WHERE order_no IN ('STR-14', 'STR-15', 'STR-16') ORDER BY 1;
SELECT refund_id, order_no, amount, status FROM pay.paynotify_refund
WHERE channel = 'st' AND order_no IN ('STR-14', 'STR-15', 'STR-16') ORDER BY refund_id;
SELECT kind, order_no FROM pay.paynotify_anomaly
WHERE channel = 'st' AND order_no IN ('STR-14', 'STR-15', 'STR-16') ORDER BY id;
SELECT notify_id, status, note FROM pay.payment_notify_log
WHERE channel = 'st' AND notify_id IN ('evt_st_45', 'evt_st_46', 'evt_st_47', 'evt_st_48') ORDER BY 1;

-- A third review: a total taken after a refund failed, delivered before
-- the failure (re_17_1 200 recorded; a total of 100 naming re_17_2 then
-- adds nothing): when the failure comes, it is undone as recorded, with
-- the anomaly that the trade's totals may have counted it.
INSERT INTO public.orders VALUES ('STR-17', 'pending', 1000);
INSERT INTO t.ev VALUES
	('pi_17', t.evt('evt_st_50', 'payment_intent.succeeded',
		'{"id": "pi_st_17", "amount_received": 1000, "currency": "usd", "metadata": {"order_id": "STR-17"}}')),
	('refund_17_1', t.evt('evt_st_51', 'charge.refunded',
		'{"id": "ch_pi_st_17", "object": "charge", "amount": 1000, "amount_refunded": 200,
		  "payment_intent": "pi_st_17", "refunded": false, "currency": "usd",
		  "metadata": {"order_id": "STR-17"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_17_1", "amount": 200, "status": "succeeded"}]}}')),
	('refund_17_2', t.evt('evt_st_52', 'charge.refunded',
		'{"id": "ch_pi_st_17", "object": "charge", "amount": 1000, "amount_refunded": 100,
		  "payment_intent": "pi_st_17", "refunded": false, "currency": "usd",
		  "metadata": {"order_id": "STR-17"},
		  "refunds": {"object": "list", "data": [{"id": "re_st_17_2", "amount": 100, "status": "succeeded"},
												  {"id": "re_st_17_1", "amount": 200, "status": "failed"}]}}')),
	('refund_17_1_failed', t.evt('evt_st_53', 'refund.failed', t.refund_obj('re_st_17_1', 'pi_st_17', 200, 'failed', 'STR-17')));
SELECT name, r.* FROM unnest(ARRAY['pi_17', 'refund_17_1', 'refund_17_2', 'refund_17_1_failed']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
SELECT refund_id, amount, status FROM pay.paynotify_refund WHERE channel = 'st' AND order_no = 'STR-17' ORDER BY 1;
SELECT kind FROM pay.paynotify_anomaly WHERE channel = 'st' AND order_no = 'STR-17' ORDER BY id;

-- Disputes (STR-18..26): charge.dispute.created emits dispute_opened,
-- charge.dispute.closed dispute_won (won, warning_closed) or dispute_lost,
-- with the amount disputed, for the order whose payment recorded the
-- trade (a dispute names its payment intent and charge, not the order).
-- Each dispute is recorded once in paynotify_dispute; an open or close of
-- a dispute recorded already moves nothing and is handed on as a
-- notification.  The order moves only where the transitions table has a
-- "disputed" state, from all the order's disputes: disputed while one is
-- open; then back, or refunded when the disputes lost took what the order
-- kept.  A dispute of an unknown trade is the anomaly dispute_unmatched,
-- its event naming no order; one whose metadata names another order than
-- the trade's is trade_of_another_order, its event for the trade's order.
-- Its other events are handed on as notifications.
CREATE FUNCTION t.dispute(evt text, type text, dp text, pi text, amount int, status text)
	RETURNS text LANGUAGE sql AS $$
	SELECT t.evt(evt, type, jsonb_build_object('id', dp, 'object', 'dispute', 'amount', amount,
		'currency', 'usd', 'charge', 'ch_' || pi, 'payment_intent', pi, 'reason', 'fraudulent',
		'status', status, 'metadata', '{}'::jsonb, 'is_charge_refundable', false))
$$;
INSERT INTO public.orders VALUES ('STR-18', 'pending', 800), ('STR-19', 'pending', 900),
	('STR-20', 'pending', 1000), ('STR-23', 'pending', 500), ('STR-24', 'pending', 600),
	('STR-25', 'pending', 700), ('STR-26', 'pending', 600);
SELECT name, r.outcome FROM (VALUES
	('pay 18', t.evt('evt_st_60', 'payment_intent.succeeded',
		'{"id": "pi_st_18", "amount_received": 800, "currency": "usd", "metadata": {"order_id": "STR-18"}}')),
	('pay 19', t.evt('evt_st_61', 'payment_intent.succeeded',
		'{"id": "pi_st_19", "amount_received": 900, "currency": "usd", "metadata": {"order_id": "STR-19"}}')),
	('pay 20', t.evt('evt_st_62', 'payment_intent.succeeded',
		'{"id": "pi_st_20", "amount_received": 1000, "currency": "usd", "metadata": {"order_id": "STR-20"}}')),
	('pay 23', t.evt('evt_st_80', 'payment_intent.succeeded',
		'{"id": "pi_st_23", "amount_received": 500, "currency": "usd", "metadata": {"order_id": "STR-23"}}')),
	('pay 24', t.evt('evt_st_81', 'payment_intent.succeeded',
		'{"id": "pi_st_24", "amount_received": 600, "currency": "usd", "metadata": {"order_id": "STR-24"}}')),
	('pay 25', t.evt('evt_st_82', 'payment_intent.succeeded',
		'{"id": "pi_st_25", "amount_received": 700, "currency": "usd", "metadata": {"order_id": "STR-25"}}')),
	('pay 26', t.evt('evt_st_83', 'payment_intent.succeeded',
		'{"id": "pi_st_26", "amount_received": 600, "currency": "usd", "metadata": {"order_id": "STR-26"}}'))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
-- without a "disputed" state (the default), an open dispute holds nothing;
-- a loss of all the order kept refunds it the refunds' way (STR-25)
SELECT name, r.outcome FROM (VALUES
	('opened 18', t.dispute('evt_st_63', 'charge.dispute.created', 'dp_18', 'pi_st_18', 800, 'needs_response')),
	('opened 18 again', t.dispute('evt_st_63', 'charge.dispute.created', 'dp_18', 'pi_st_18', 800, 'needs_response')),
	('updated 18', t.dispute('evt_st_64', 'charge.dispute.updated', 'dp_18', 'pi_st_18', 800, 'under_review')),
	('won 18', t.dispute('evt_st_65', 'charge.dispute.closed', 'dp_18', 'pi_st_18', 800, 'won')),
	('lost 18 after won', t.dispute('evt_st_84', 'charge.dispute.closed', 'dp_18', 'pi_st_18', 800, 'lost')),
	('lost 25', t.dispute('evt_st_85', 'charge.dispute.closed', 'dp_25', 'pi_st_25', 700, 'lost'))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
-- with a "disputed" state, the order follows its disputes
INSERT INTO pay.paynotify_transition VALUES ('paid', 'disputed'), ('shipped', 'disputed'),
	('disputed', 'paid'), ('disputed', 'shipped'), ('disputed', 'refunded');
SELECT pay.paynotify_transit('STR-19', 'paid', 'shipped');
SELECT name, r.outcome FROM (VALUES
	('opened 19', 'STR-19', t.dispute('evt_st_66', 'charge.dispute.created', 'dp_19', 'pi_st_19', 900, 'warning_needs_response')),
	('won 19 (inquiry closed)', 'STR-19', t.dispute('evt_st_67', 'charge.dispute.closed', 'dp_19', 'pi_st_19', 900, 'warning_closed')),
	('opened 20', 'STR-20', t.dispute('evt_st_68', 'charge.dispute.created', 'dp_20', 'pi_st_20', 400, 'needs_response')),
	('lost 20, in part', 'STR-20', t.dispute('evt_st_69', 'charge.dispute.closed', 'dp_20', 'pi_st_20', 400, 'lost')),
	('closed, odd status', 'STR-20', t.dispute('evt_st_70', 'charge.dispute.closed', 'dp_20', 'pi_st_20', 400, 'under_review')),
	('lost 23 before its open', 'STR-23', t.dispute('evt_st_86', 'charge.dispute.closed', 'dp_23', 'pi_st_23', 500, 'lost')),
	('opened 23 after its close', 'STR-23', t.dispute('evt_st_87', 'charge.dispute.created', 'dp_23', 'pi_st_23', 500, 'needs_response')),
	('opened 24a', 'STR-24', t.dispute('evt_st_88', 'charge.dispute.created', 'dp_24a', 'pi_st_24', 600, 'needs_response')),
	('opened 24b', 'STR-24', t.dispute('evt_st_89', 'charge.dispute.created', 'dp_24b', 'pi_st_24', 600, 'needs_response')),
	('lost 24a, 24b open', 'STR-24', t.dispute('evt_st_90', 'charge.dispute.closed', 'dp_24a', 'pi_st_24', 600, 'lost')),
	('won 24b', 'STR-24', t.dispute('evt_st_91', 'charge.dispute.closed', 'dp_24b', 'pi_st_24', 600, 'won')),
	-- STR-26: the same four events as STR-24, in the reverse order
	('won 26b', 'STR-26', t.dispute('evt_st_92', 'charge.dispute.closed', 'dp_26b', 'pi_st_26', 600, 'won')),
	('lost 26a', 'STR-26', t.dispute('evt_st_93', 'charge.dispute.closed', 'dp_26a', 'pi_st_26', 600, 'lost')),
	('opened 26b', 'STR-26', t.dispute('evt_st_94', 'charge.dispute.created', 'dp_26b', 'pi_st_26', 600, 'needs_response')),
	('opened 26a', 'STR-26', t.dispute('evt_st_95', 'charge.dispute.created', 'dp_26a', 'pi_st_26', 600, 'needs_response')),
	('unknown trade', NULL, t.dispute('evt_st_71', 'charge.dispute.created', 'dp_21', 'pi_st_21', 300, 'needs_response')),
	('metadata of another order', NULL, t.evt('evt_st_72', 'charge.dispute.created',
		'{"id": "dp_22", "object": "dispute", "amount": 100, "currency": "usd", "charge": "ch_pi_st_19",
		  "payment_intent": "pi_st_19", "reason": "duplicate", "status": "needs_response",
		  "metadata": {"order_id": "STR-18"}}')),
	('no dispute id', NULL, t.evt('evt_st_96', 'charge.dispute.created',
		'{"object": "dispute", "amount": 100, "currency": "usd", "payment_intent": "pi_st_19",
		  "status": "needs_response"}'))
) e(name, o, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT o.event, o.order_no, o.notify_id, o.amount, o.detail - 'payload' AS detail,
	o.detail->'payload'->>'type' AS payload_type
FROM pay.paynotify_outbox o
WHERE o.channel = 'st' AND (o.notify_id BETWEEN 'evt_st_63' AND 'evt_st_72'
	OR o.notify_id BETWEEN 'evt_st_84' AND 'evt_st_96') ORDER BY o.id;
SELECT notify_id, status, note FROM pay.payment_notify_log
WHERE channel = 'st' AND notify_id IN ('evt_st_84', 'evt_st_87', 'evt_st_94', 'evt_st_95', 'evt_st_96')
ORDER BY notify_id;
SELECT dispute_id, order_no, trade_no, amount, currency, status, opened_notify_id, closed_notify_id,
	(opened_at IS NOT NULL) AS opened, (closed_at IS NOT NULL) AS closed
FROM pay.paynotify_dispute WHERE channel = 'st' ORDER BY dispute_id;
SELECT order_no, from_state, to_state, notify_id FROM pay.paynotify_order_history
WHERE order_no LIKE 'STR-%' AND 'disputed' IN (from_state, to_state) ORDER BY id;
SELECT order_no, status FROM public.orders
WHERE order_no IN ('STR-18', 'STR-19', 'STR-20', 'STR-23', 'STR-24', 'STR-25', 'STR-26') ORDER BY 1;
SELECT kind, order_no, notify_id FROM pay.paynotify_anomaly
WHERE channel = 'st' AND (notify_id BETWEEN 'evt_st_63' AND 'evt_st_72' OR notify_id BETWEEN 'evt_st_84' AND 'evt_st_96')
ORDER BY id;
-- Refunds and disputes of one order, each set in two opposite orders (a,
-- b): the same end.  DX-1: a refund of half, and a lost dispute of the
-- other half.  DX-2: a full refund while a dispute is open, then won.
-- DX-3: a lost close without its amount, and its open with it.  DX-4: a
-- state the order may leave for disputed but not come back to: it stays.
-- Anomalies may differ: a partial loss is flagged when it is decided,
-- though a later refund or amount makes it whole.
CREATE FUNCTION t.refund(evt text, pi text, o text, total int, refunded int, re text, amt int)
	RETURNS text LANGUAGE sql AS $$
	SELECT t.evt(evt, 'charge.refunded', jsonb_build_object('id', 'ch_' || pi, 'object', 'charge',
		'amount', total, 'amount_refunded', refunded, 'payment_intent', pi,
		'refunded', refunded = total, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', o),
		'refunds', jsonb_build_object('object', 'list', 'data',
			jsonb_build_array(jsonb_build_object('id', re, 'amount', amt)))))
$$;
INSERT INTO public.orders SELECT 'DX-' || n || v, 'pending', 1000
	FROM generate_series(1, 4) n, unnest(ARRAY['a', 'b']) v;
SELECT count(*) FILTER (WHERE r.outcome = 'processed') AS paid FROM
	(SELECT 'DX-' || n || v AS o, 'evt_dx_p' || n || v AS e FROM generate_series(1, 4) n,
	 unnest(ARRAY['a', 'b']) v) x,
	t.stripe('st', t.evt(x.e, 'payment_intent.succeeded', jsonb_build_object('id', 'pi_' || x.o,
		'amount_received', 1000, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', x.o))),
		ARRAY[t.secret(1)]) r;
INSERT INTO pay.paynotify_transition VALUES ('received', 'disputed');
SELECT pay.paynotify_transit(o, 'paid', 'shipped'), pay.paynotify_transit(o, 'shipped', 'received')
FROM unnest(ARRAY['DX-4a', 'DX-4b']) o;
SELECT name, r.outcome FROM (VALUES
	('1a refund half', t.refund('evt_dx_1a1', 'pi_DX-1a', 'DX-1a', 1000, 500, 're_dx_1a', 500)),
	('1a open other half', t.dispute('evt_dx_1a2', 'charge.dispute.created', 'dp_dx_1a', 'pi_DX-1a', 500, 'needs_response')),
	('1a lost', t.dispute('evt_dx_1a3', 'charge.dispute.closed', 'dp_dx_1a', 'pi_DX-1a', 500, 'lost')),
	('1b open other half', t.dispute('evt_dx_1b2', 'charge.dispute.created', 'dp_dx_1b', 'pi_DX-1b', 500, 'needs_response')),
	('1b lost', t.dispute('evt_dx_1b3', 'charge.dispute.closed', 'dp_dx_1b', 'pi_DX-1b', 500, 'lost')),
	('1b refund half', t.refund('evt_dx_1b1', 'pi_DX-1b', 'DX-1b', 1000, 500, 're_dx_1b', 500)),
	('2a open', t.dispute('evt_dx_2a1', 'charge.dispute.created', 'dp_dx_2a', 'pi_DX-2a', 1000, 'needs_response')),
	('2a refund all', t.refund('evt_dx_2a2', 'pi_DX-2a', 'DX-2a', 1000, 1000, 're_dx_2a', 1000)),
	('2a won', t.dispute('evt_dx_2a3', 'charge.dispute.closed', 'dp_dx_2a', 'pi_DX-2a', 1000, 'won')),
	('2b open', t.dispute('evt_dx_2b1', 'charge.dispute.created', 'dp_dx_2b', 'pi_DX-2b', 1000, 'needs_response')),
	('2b won', t.dispute('evt_dx_2b3', 'charge.dispute.closed', 'dp_dx_2b', 'pi_DX-2b', 1000, 'won')),
	('2b refund all', t.refund('evt_dx_2b2', 'pi_DX-2b', 'DX-2b', 1000, 1000, 're_dx_2b', 1000)),
	('3a open', t.dispute('evt_dx_3a1', 'charge.dispute.created', 'dp_dx_3a', 'pi_DX-3a', 1000, 'needs_response')),
	('3a lost, no amount', t.dispute('evt_dx_3a2', 'charge.dispute.closed', 'dp_dx_3a', 'pi_DX-3a', NULL, 'lost')),
	('3b lost, no amount', t.dispute('evt_dx_3b2', 'charge.dispute.closed', 'dp_dx_3b', 'pi_DX-3b', NULL, 'lost')),
	('3b open', t.dispute('evt_dx_3b1', 'charge.dispute.created', 'dp_dx_3b', 'pi_DX-3b', 1000, 'needs_response')),
	('4a open', t.dispute('evt_dx_4a1', 'charge.dispute.created', 'dp_dx_4a', 'pi_DX-4a', 1000, 'needs_response')),
	('4a won', t.dispute('evt_dx_4a2', 'charge.dispute.closed', 'dp_dx_4a', 'pi_DX-4a', 1000, 'won')),
	('4b won', t.dispute('evt_dx_4b2', 'charge.dispute.closed', 'dp_dx_4b', 'pi_DX-4b', 1000, 'won')),
	('4b open', t.dispute('evt_dx_4b1', 'charge.dispute.created', 'dp_dx_4b', 'pi_DX-4b', 1000, 'needs_response'))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT o.order_no, o.status,
	(SELECT string_agg(h.from_state || '>' || h.to_state, ' ' ORDER BY h.id) FROM pay.paynotify_order_history h
	 WHERE h.order_no = o.order_no AND h.source = 'paynotify' AND h.from_state <> 'pending') AS moves,
	(SELECT string_agg(a.kind, ' ' ORDER BY a.id) FROM pay.paynotify_anomaly a WHERE a.order_no = o.order_no) AS anomalies,
	(SELECT string_agg(d.status || ' ' || coalesce(d.amount::text, 'null'), ',') FROM pay.paynotify_dispute d
	 WHERE d.order_no = o.order_no) AS dispute
FROM public.orders o WHERE o.order_no LIKE 'DX-%' ORDER BY 1;
DELETE FROM pay.paynotify_transition WHERE from_state = 'received' AND to_state = 'disputed';

-- the traces: STR-24's two disputes opened and closed, and the dispute
-- notifications (their log rows keyed by '', the order they named: none);
-- one notification's trace shows its dispute row
SELECT kind, notify_id, detail->>'dispute_id' AS dispute, detail->>'status' AS status,
	detail->>'order_no' AS order_no, detail->>'event_type' AS event_type
FROM pay.paynotify_trace_order('STR-24') WHERE kind IN ('dispute', 'notification');
SELECT kind, notify_id, detail->>'dispute_id' AS dispute, detail->>'status' AS status
FROM pay.paynotify_trace('st', 'evt_st_90') WHERE kind IN ('dispute', 'notification');
-- no ledger record: a lost dispute is no refund
SELECT count(*) AS refunds FROM pay.paynotify_refund WHERE order_no LIKE 'STR-2_' OR order_no IN ('STR-18', 'STR-19');
DELETE FROM pay.paynotify_transition WHERE 'disputed' IN (from_state, to_state);
-- DX-5, without a disputed state: a dispute won, then a full refund takes
-- the refunds' way (paid > refunding > refunded), as without disputes
INSERT INTO public.orders VALUES ('DX-5', 'pending', 1000);
SELECT name, r.outcome FROM (VALUES
	('5 pay', t.evt('evt_dx_p5', 'payment_intent.succeeded',
		'{"id": "pi_DX-5", "amount_received": 1000, "currency": "usd", "metadata": {"order_id": "DX-5"}}')),
	('5 open', t.dispute('evt_dx_51', 'charge.dispute.created', 'dp_dx_5', 'pi_DX-5', 1000, 'needs_response')),
	('5 won', t.dispute('evt_dx_52', 'charge.dispute.closed', 'dp_dx_5', 'pi_DX-5', 1000, 'won')),
	('5 refund all', t.refund('evt_dx_53', 'pi_DX-5', 'DX-5', 1000, 1000, 're_dx_5', 1000))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT status, (SELECT string_agg(h.from_state || '>' || h.to_state, ' ' ORDER BY h.id)
	FROM pay.paynotify_order_history h WHERE h.order_no = 'DX-5') AS moves,
	(SELECT count(*) FROM pay.paynotify_anomaly a WHERE a.order_no = 'DX-5') AS anomalies
FROM public.orders WHERE order_no = 'DX-5';
-- and the same without a disputed state (the default): refunds and lost
-- disputes that took all of it make the order refunded by the refunds'
-- way, in any order (DX-6: a full refund and a full loss; DX-7: a full
-- refund and a partial loss); an open dispute holds nothing (DX-8: a full
-- refund while it is open refunds the order); a cancelled order stays so
-- with no new anomaly (DX-9)
INSERT INTO public.orders SELECT 'DX-' || x, 'pending', 1000
	FROM unnest(ARRAY['6a', '6b', '7a', '7b', '8', '9']) x;
SELECT name, r.outcome FROM (VALUES
	('9 canceled', t.evt('evt_dx_90', 'payment_intent.canceled',
		'{"id": "pi_DX-9", "object": "payment_intent", "cancellation_reason": "abandoned", "metadata": {"order_id": "DX-9"}}'))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT count(*) FILTER (WHERE r.outcome = 'processed') AS paid FROM
	unnest(ARRAY['6a', '6b', '7a', '7b', '8', '9']) x,
	t.stripe('st', t.evt('evt_dx_p' || x, 'payment_intent.succeeded', jsonb_build_object('id', 'pi_DX-' || x,
		'amount_received', 1000, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'DX-' || x))),
		ARRAY[t.secret(1)]) r;
SELECT name, r.outcome FROM (VALUES
	('6a refund all', t.refund('evt_dx_6a1', 'pi_DX-6a', 'DX-6a', 1000, 1000, 're_dx_6a', 1000)),
	('6a open', t.dispute('evt_dx_6a2', 'charge.dispute.created', 'dp_dx_6a', 'pi_DX-6a', 1000, 'needs_response')),
	('6a lost', t.dispute('evt_dx_6a3', 'charge.dispute.closed', 'dp_dx_6a', 'pi_DX-6a', 1000, 'lost')),
	('6b open', t.dispute('evt_dx_6b2', 'charge.dispute.created', 'dp_dx_6b', 'pi_DX-6b', 1000, 'needs_response')),
	('6b lost', t.dispute('evt_dx_6b3', 'charge.dispute.closed', 'dp_dx_6b', 'pi_DX-6b', 1000, 'lost')),
	('6b refund all', t.refund('evt_dx_6b1', 'pi_DX-6b', 'DX-6b', 1000, 1000, 're_dx_6b', 1000)),
	('7a lost part', t.dispute('evt_dx_7a2', 'charge.dispute.closed', 'dp_dx_7a', 'pi_DX-7a', 300, 'lost')),
	('7a refund all', t.refund('evt_dx_7a1', 'pi_DX-7a', 'DX-7a', 1000, 1000, 're_dx_7a', 1000)),
	('7b refund all', t.refund('evt_dx_7b1', 'pi_DX-7b', 'DX-7b', 1000, 1000, 're_dx_7b', 1000)),
	('7b lost part', t.dispute('evt_dx_7b2', 'charge.dispute.closed', 'dp_dx_7b', 'pi_DX-7b', 300, 'lost')),
	('8 open', t.dispute('evt_dx_81', 'charge.dispute.created', 'dp_dx_8', 'pi_DX-8', 1000, 'needs_response')),
	('8 refund all', t.refund('evt_dx_82', 'pi_DX-8', 'DX-8', 1000, 1000, 're_dx_8', 1000)),
	('9 open', t.dispute('evt_dx_91', 'charge.dispute.created', 'dp_dx_9', 'pi_DX-9', 1000, 'needs_response')),
	('9 won', t.dispute('evt_dx_92', 'charge.dispute.closed', 'dp_dx_9', 'pi_DX-9', 1000, 'won')),
	('9 refund all', t.refund('evt_dx_93', 'pi_DX-9', 'DX-9', 1000, 1000, 're_dx_9', 1000))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT o.order_no, o.status,
	(SELECT string_agg(h.from_state || '>' || h.to_state, ' ' ORDER BY h.id) FROM pay.paynotify_order_history h
	 WHERE h.order_no = o.order_no AND h.from_state <> 'pending') AS moves,
	(SELECT string_agg(a.kind, ' ' ORDER BY a.id) FROM pay.paynotify_anomaly a WHERE a.order_no = o.order_no) AS anomalies
FROM public.orders o WHERE o.order_no IN ('DX-6a', 'DX-6b', 'DX-7a', 'DX-7b', 'DX-8', 'DX-9') ORDER BY 1;
-- DX-10: a dispute's other event for an order gone from the table (its
-- payment kept): handed on of no order, not failed.  DX-11, where
-- refunded -> paid is allowed: a refund that fails after a loss took all
-- the rest leaves the order refunded.
INSERT INTO public.orders VALUES ('DX-10', 'pending', 1000), ('DX-11', 'pending', 1000);
INSERT INTO pay.paynotify_transition VALUES ('refunded', 'paid');
SELECT count(*) FILTER (WHERE r.outcome = 'processed') AS paid FROM
	unnest(ARRAY['10', '11']) x,
	t.stripe('st', t.evt('evt_dx_p' || x, 'payment_intent.succeeded', jsonb_build_object('id', 'pi_DX-' || x,
		'amount_received', 1000, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'DX-' || x))),
		ARRAY[t.secret(1)]) r;
DELETE FROM public.orders WHERE order_no = 'DX-10';
SELECT name, r.outcome FROM (VALUES
	('10 updated', t.dispute('evt_dx_101', 'charge.dispute.updated', 'dp_dx_10', 'pi_DX-10', 1000, 'under_review')),
	('11 refund part', t.refund('evt_dx_111', 'pi_DX-11', 'DX-11', 1000, 300, 're_dx_11', 300)),
	('11 lost the rest', t.dispute('evt_dx_112', 'charge.dispute.closed', 'dp_dx_11', 'pi_DX-11', 1000, 'lost')),
	('11 refund failed', t.evt('evt_dx_113', 'refund.failed', '{"id": "re_dx_11", "object": "refund",
		"amount": 300, "charge": "ch_pi_DX-11", "payment_intent": "pi_DX-11", "currency": "usd",
		"status": "failed", "metadata": {"order_id": "DX-11"}}'))
) e(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT event, order_no FROM pay.paynotify_outbox WHERE notify_id = 'evt_dx_101';
SELECT status, (SELECT string_agg(h.from_state || '>' || h.to_state, ' ' ORDER BY h.id)
	FROM pay.paynotify_order_history h WHERE h.order_no = 'DX-11' AND h.from_state <> 'pending') AS moves,
	(SELECT string_agg(a.kind, ' ' ORDER BY a.id) FROM pay.paynotify_anomaly a WHERE a.order_no = 'DX-11') AS anomalies
FROM public.orders WHERE order_no = 'DX-11';
DELETE FROM pay.paynotify_transition WHERE from_state = 'refunded' AND to_state = 'paid';
-- DX-12: refunds whose total is in doubt (a total after a failed refund:
-- refund_total_after_failure, the order not moved) stay unmoved by a won
-- dispute, before or after them (a, b)
INSERT INTO public.orders VALUES ('DX-12a', 'pending', 1000), ('DX-12b', 'pending', 1000);
CREATE FUNCTION t.doubtful(x text) RETURNS TABLE (evt text, body text) LANGUAGE sql AS $$
	VALUES ('evt_dx_' || x || '1', t.refund('evt_dx_' || x || '1', 'pi_DX-' || x, 'DX-' || x, 1000, 300, 're_dx_' || x, 300)),
		('evt_dx_' || x || '2', t.evt('evt_dx_' || x || '2', 'refund.failed', jsonb_build_object('id', 're_dx_' || x,
			'object', 'refund', 'amount', 300, 'charge', 'ch_pi_DX-' || x, 'payment_intent', 'pi_DX-' || x,
			'currency', 'usd', 'status', 'failed', 'metadata', jsonb_build_object('order_id', 'DX-' || x)))),
		('evt_dx_' || x || '3', t.evt('evt_dx_' || x || '3', 'charge.refunded', jsonb_build_object('id', 'ch_pi_DX-' || x,
			'object', 'charge', 'amount', 1000, 'amount_refunded', 1000, 'payment_intent', 'pi_DX-' || x,
			'refunded', true, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'DX-' || x))))
$$;
SELECT e.x, r.outcome FROM (
	SELECT 0 AS k, 0 AS j, x, t.evt('evt_dx_p' || x, 'payment_intent.succeeded', jsonb_build_object('id', 'pi_DX-' || x,
		'amount_received', 1000, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'DX-' || x))) AS body
	FROM unnest(ARRAY['12a', '12b']) x
	UNION ALL SELECT 1, 0, '12a', d.body FROM t.doubtful('12a') d
	UNION ALL SELECT 2, 0, '12a', t.dispute('evt_dx_12a4', 'charge.dispute.created', 'dp_dx_12a', 'pi_DX-12a', 1000, 'needs_response')
	UNION ALL SELECT 3, 0, '12a', t.dispute('evt_dx_12a5', 'charge.dispute.closed', 'dp_dx_12a', 'pi_DX-12a', 1000, 'won')
	UNION ALL SELECT 4, 0, '12b', t.dispute('evt_dx_12b4', 'charge.dispute.created', 'dp_dx_12b', 'pi_DX-12b', 1000, 'needs_response')
	UNION ALL SELECT 5, 0, '12b', t.dispute('evt_dx_12b5', 'charge.dispute.closed', 'dp_dx_12b', 'pi_DX-12b', 1000, 'won')
	UNION ALL SELECT 6, 0, '12b', d.body FROM t.doubtful('12b') d
) e, LATERAL t.stripe('st', e.body, ARRAY[t.secret(1)]) r;
SELECT o.order_no, o.status,
	(SELECT string_agg(a.kind, ' ' ORDER BY a.id) FROM pay.paynotify_anomaly a WHERE a.order_no = o.order_no) AS anomalies
FROM public.orders o WHERE o.order_no IN ('DX-12a', 'DX-12b') ORDER BY 1;
DROP FUNCTION t.doubtful(text);
DROP FUNCTION t.refund(text, text, text, int, int, text, int);
DROP FUNCTION t.dispute(text, text, text, text, int, text);

-- Authentic but not applied: no order reference (an anomaly), other types.
SELECT name, r.* FROM unnest(ARRAY['no_order', 'customer']) name,
	t.stripe('st', t.ev(name), ARRAY[t.secret(1)]) r;
SELECT notify_id, event_type, status, note FROM pay.payment_notify_log
WHERE channel = 'st' AND notify_id IN ('evt_st_7', 'evt_st_8') ORDER BY notify_id;

-- The window is symmetric (stricter than the SDKs for future timestamps),
-- and is checked only after the signature.
SELECT * FROM t.stripe('st', t.ev('pi_8'), ARRAY[t.secret(1)], now => 1767300301);
SELECT * FROM t.stripe('st', t.ev('pi_8'), ARRAY[t.secret(1)], now => 1767299699);
SELECT * FROM t.stripe('st', t.ev('pi_8'), ARRAY['whsec_not_our_secret_0000000000'], now => 1767300301);
SELECT * FROM t.stripe('st', t.ev('pi_8'), ARRAY[t.secret(1)], now => 1767299701);

-- Header shapes.
SELECT name, r.* FROM (VALUES
	('no header', NULL),
	('no t', 'v1=' || repeat('0', 64)),
	('t twice', 't=1767300000,t=1767300000,v1=' || repeat('0', 64)),
	('item without =', 't=1767300000,v1'),
	('only v0', 't=1767300000,v0=' || t.hmac_sha256(convert_to(t.secret(1), 'UTF8'),
		convert_to('1767300000.' || t.ev('pi_6'), 'UTF8'))),
	('upper-case v1', 't=1767300000,v1=' || upper(t.hmac_sha256(convert_to(t.secret(1), 'UTF8'),
		convert_to('1767300000.' || t.ev('pi_6'), 'UTF8')))),
	('space before v1', 't=1767300000, v1=' || t.hmac_sha256(convert_to(t.secret(1), 'UTF8'),
		convert_to('1767300000.' || t.ev('pi_6'), 'UTF8')))
) h(name, hdr), t.stripe_raw('st', t.ev('pi_6'), hdr) r;

-- Signed but not an event: malformed; a thin event ("v2.core.event",
-- signed alike) is recorded and acknowledged.
SELECT name, r.* FROM (VALUES
	('not json', '{"id": "evt_st_x", '),
	('thin event', '{"id": "evt_st_y", "object": "v2.core.event", "type": "x"}'),
	('no id', '{"object": "event", "type": "customer.created"}')
) b(name, body), t.stripe('st', body, ARRAY[t.secret(1)]) r;
SELECT count(*) AS logged FROM pay.payment_notify_log
WHERE channel = 'st' AND order_no IN ('STR-5', 'STR-6');

-- ---------------------------------------------------------------------------
-- Secret rotation: during the overlap Stripe signs with both secrets
-- ---------------------------------------------------------------------------
SELECT * FROM t.stripe('st', t.ev('pi_5'), ARRAY[t.secret(2)]);
SELECT pay.paynotify_add_key('st', 'secret_2', t.secret(2));
SELECT * FROM t.stripe('st', t.ev('pi_5'), ARRAY[t.secret(2)]);
SELECT pay.paynotify_retire_key('st', 'secret_1');
SELECT * FROM t.stripe('st', t.ev('pi_6'), ARRAY[t.secret(1)]);
SELECT * FROM t.stripe('st', t.ev('pi_6'), ARRAY[t.secret(1), t.secret(2)]);
SELECT order_no, status FROM public.orders WHERE order_no IN ('STR-5', 'STR-6') ORDER BY 1;

-- ---------------------------------------------------------------------------
-- livemode: a live channel refuses test events, and the other way round
-- ---------------------------------------------------------------------------
SELECT pay.paynotify_add_channel('st_live', 'stripe', '{"livemode": true}');
SELECT pay.paynotify_add_key('st_live', 'secret_1', t.secret(1));
SELECT * FROM t.stripe('st_live', t.ev('pi_7_test'), ARRAY[t.secret(1)]);
SELECT * FROM t.stripe('st_live', t.ev('pi_7_live'), ARRAY[t.secret(1)]);
SELECT pay.paynotify_add_channel('st_test', 'stripe', '{"livemode": false}');
SELECT pay.paynotify_add_key('st_test', 'secret_1', t.secret(1));
SELECT * FROM t.stripe('st_test', t.ev('pi_7_live'), ARRAY[t.secret(1)]);

-- ---------------------------------------------------------------------------
-- order_ref_path: where the order number sits in the event
-- ---------------------------------------------------------------------------
SELECT pay.paynotify_add_channel('st_ref', 'stripe',
	'{"order_ref_path": "data.object.client_reference_id", "tolerance_s": 600}');
SELECT pay.paynotify_add_key('st_ref', 'secret_1', t.secret(1));
SELECT * FROM t.stripe('st_ref', t.ev('checkout_ref'), ARRAY[t.secret(1)], now => 1767300550);
SELECT trade_no, order_no, amount FROM pay.payment_record WHERE channel = 'st_ref';
