-- Agreements (subscriptions, docs/GATEWAYS.md "Agreements"): a Stripe
-- subscription's events sign and end a row of paynotify_agreement exactly
-- once, in any arrival order; its invoices pay orders, each payment
-- recording the agreement it was charged under.  Events are built here and
-- signed with the vectors' TEST-ONLY secret by t.stripe (test/fixture.sql).

SELECT pay.paynotify_add_channel('st_sub', 'stripe', '{}');
SELECT pay.paynotify_add_key('st_sub', 'secret_1', t.secret(1));
-- the invoice's order path is checked as order_ref_path is
SELECT pay.paynotify_add_channel('st_sub_bad', 'stripe', '{"invoice_order_path": "metadata..order"}');

-- An event as Stripe sends it, delivered on chan.
CREATE FUNCTION t.sub_evt(chan text, id text, type text, object jsonb, livemode boolean DEFAULT false)
	RETURNS text LANGUAGE sql AS $$
	SELECT s.outcome FROM t.stripe(chan, jsonb_build_object('id', id, 'object', 'event',
		'api_version', '2025-03-31.basil', 'created', 1767300000, 'type', type,
		'livemode', livemode, 'pending_webhooks', 1,
		'data', jsonb_build_object('object', object))::text, ARRAY[t.secret(1)]) s
$$;
-- A subscription object.
CREATE FUNCTION t.sub(id text, status text, ref text DEFAULT NULL) RETURNS jsonb
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'subscription', 'status', status,
		'start_date', 1767200000,
		'items', jsonb_build_object('object', 'list', 'data', jsonb_build_array(
			jsonb_build_object('id', 'si_1', 'price', jsonb_build_object('id', 'price_monthly')))))
		|| CASE WHEN ref IS NULL THEN '{}'::jsonb
				ELSE jsonb_build_object('metadata', jsonb_build_object('order_id', ref)) END
		|| CASE WHEN status IN ('canceled', 'incomplete_expired')
				THEN jsonb_build_object('ended_at', 1767290000) ELSE '{}'::jsonb END
$$;
-- An invoice (API 2025-03-31.basil: the subscription under parent).
CREATE FUNCTION t.invoice(id text, sub text, ord text, paid bigint) RETURNS jsonb
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'invoice', 'currency', 'usd',
		'amount_due', 8888, 'amount_paid', paid,
		'parent', jsonb_build_object('type', 'subscription_details',
			'subscription_details', jsonb_build_object('subscription', sub,
				'metadata', jsonb_build_object('order_id', ord))))
$$;
CREATE VIEW t.agr AS
	SELECT agreement_id, merchant_ref, plan_id, state, gateway_state,
		signed_at IS NOT NULL AS signed, ended_at IS NOT NULL AS ended, notify_ids
	FROM pay.paynotify_agreement WHERE channel = 'st_sub';

-- ---------------------------------------------------------------------------
-- Sign, sign again, end
-- ---------------------------------------------------------------------------
SELECT t.sub_evt('st_sub', 'evt_sub_1', 'customer.subscription.created', t.sub('sub_A', 'active', 'member-7'));
-- the same event again: a duplicate of the log; another event signing it: a no-op
SELECT t.sub_evt('st_sub', 'evt_sub_1', 'customer.subscription.created', t.sub('sub_A', 'active', 'member-7'));
SELECT t.sub_evt('st_sub', 'evt_sub_2', 'customer.subscription.updated', t.sub('sub_A', 'trialing', 'member-7'));
SELECT * FROM t.agr;
-- past_due moves nothing but the gateway's state
SELECT t.sub_evt('st_sub', 'evt_sub_3', 'customer.subscription.updated', t.sub('sub_A', 'past_due', 'member-7'));
SELECT agreement_id, state, gateway_state FROM t.agr;
SELECT t.sub_evt('st_sub', 'evt_sub_4', 'customer.subscription.deleted', t.sub('sub_A', 'canceled', 'member-7'));
-- a late snapshot of it signed: recorded, acknowledged, ignored
SELECT t.sub_evt('st_sub', 'evt_sub_5', 'customer.subscription.updated', t.sub('sub_A', 'active', 'member-7'));
SELECT * FROM t.agr;
SELECT notify_id, order_no, status, note FROM pay.payment_notify_log
WHERE channel = 'st_sub' ORDER BY first_seen, notify_id;
-- one event each for the sign and the end, of no order, with the agreement
SELECT event, order_no, notify_id, detail->>'agreement_id' AS agreement_id,
	detail->>'merchant_ref' AS merchant_ref, detail->>'plan_id' AS plan_id,
	detail->>'gateway_state' AS gateway_state
FROM pay.paynotify_outbox WHERE channel = 'st_sub' AND event LIKE 'agreement%' ORDER BY id;

-- ---------------------------------------------------------------------------
-- An end before its sign: parked, applied when the sign comes
-- ---------------------------------------------------------------------------
SELECT t.sub_evt('st_sub', 'evt_sub_b2', 'customer.subscription.deleted', t.sub('sub_B', 'canceled'));
SELECT count(*) AS agreements_b FROM t.agr WHERE agreement_id = 'sub_B';
SELECT notify_id, status, note FROM pay.payment_notify_log WHERE notify_id = 'evt_sub_b2';
SELECT t.sub_evt('st_sub', 'evt_sub_b1', 'customer.subscription.created', t.sub('sub_B', 'active'));
SELECT * FROM t.agr WHERE agreement_id = 'sub_B';
SELECT notify_id, status FROM pay.payment_notify_log WHERE notify_id IN ('evt_sub_b1', 'evt_sub_b2')
ORDER BY notify_id;
-- the events in order: signed, then ended
SELECT event, notify_id FROM pay.paynotify_outbox
WHERE channel = 'st_sub' AND detail->>'agreement_id' = 'sub_B' ORDER BY id;
-- the agreement's story
SELECT kind, notify_id, detail->>'status' AS status, detail->>'event' AS event,
	detail->>'state' AS state
FROM pay.paynotify_trace_agreement('st_sub', 'sub_B');
SELECT pay.paynotify_trace_agreement('st_sub', NULL);

-- ---------------------------------------------------------------------------
-- Charges: invoice.paid pays its order once, with its agreement
-- ---------------------------------------------------------------------------
SELECT t.set_order('SUB-1', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_sub_c1', 'customer.subscription.created', t.sub('sub_C', 'active'));
SELECT t.sub_evt('st_sub', 'evt_inv_1', 'invoice.paid', t.invoice('in_1', 'sub_C', 'SUB-1', 8888));
SELECT t.sub_evt('st_sub', 'evt_inv_1', 'invoice.paid', t.invoice('in_1', 'sub_C', 'SUB-1', 8888));
SELECT t.sub_evt('st_sub', 'evt_inv_1b', 'invoice.paid', t.invoice('in_1', 'sub_C', 'SUB-1', 8888));
SELECT status FROM public.orders WHERE order_no = 'SUB-1';
SELECT trade_no, order_no, amount, currency, agreement_id FROM pay.payment_record
WHERE channel = 'st_sub' ORDER BY trade_no;
-- an invoice of an older API version names its subscription at the top
SELECT t.set_order('SUB-2', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_inv_2', 'invoice.paid',
	jsonb_build_object('id', 'in_2', 'object', 'invoice', 'currency', 'usd', 'amount_paid', 8888,
		'subscription', 'sub_C', 'metadata', jsonb_build_object('order_id', 'SUB-2')));
SELECT trade_no, order_no, agreement_id FROM pay.payment_record WHERE trade_no = 'in_2';
-- a trial invoice (amount_paid 0) for an order of 8888: the amount check's anomaly
SELECT t.set_order('SUB-3', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_inv_3', 'invoice.paid', t.invoice('in_3', 'sub_C', 'SUB-3', 0));
SELECT status FROM public.orders WHERE order_no = 'SUB-3';
SELECT kind, order_no FROM pay.paynotify_anomaly WHERE notify_id = 'evt_inv_3';
-- a charge after the agreement ended still pays, as an anomaly
SELECT t.set_order('SUB-4', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_inv_4', 'invoice.paid', t.invoice('in_4', 'sub_A', 'SUB-4', 8888));
SELECT status FROM public.orders WHERE order_no = 'SUB-4';
SELECT kind, order_no FROM pay.paynotify_anomaly WHERE notify_id = 'evt_inv_4';
SELECT notify_id, status FROM pay.payment_notify_log WHERE notify_id = 'evt_inv_4';
-- invoice.payment_failed: payment_failed for the order, which stays pending
SELECT t.set_order('SUB-5', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_inv_5', 'invoice.payment_failed', t.invoice('in_5', 'sub_C', 'SUB-5', 0));
SELECT status FROM public.orders WHERE order_no = 'SUB-5';
SELECT event, order_no, amount, detail->>'event_type' AS event_type FROM pay.paynotify_outbox
WHERE notify_id = 'evt_inv_5';
-- and payment_intent.payment_failed alike
SELECT t.sub_evt('st_sub', 'evt_pi_f', 'payment_intent.payment_failed',
	jsonb_build_object('id', 'pi_f', 'object', 'payment_intent', 'amount', 8888, 'currency', 'usd',
		'metadata', jsonb_build_object('order_id', 'SUB-5')));
SELECT status FROM public.orders WHERE order_no = 'SUB-5';
SELECT event, order_no, amount FROM pay.paynotify_outbox WHERE notify_id = 'evt_pi_f';

-- ---------------------------------------------------------------------------
-- Refused and malformed
-- ---------------------------------------------------------------------------
-- another account's mode (livemode): refused as for payments, nothing written
SELECT pay.paynotify_add_channel('st_sub_live', 'stripe', '{"livemode": true}');
SELECT pay.paynotify_add_key('st_sub_live', 'secret_1', t.secret(1));
SELECT t.sub_evt('st_sub_live', 'evt_sub_live', 'customer.subscription.created', t.sub('sub_L', 'active'));
SELECT count(*) AS written FROM pay.payment_notify_log WHERE notify_id = 'evt_sub_live';
SELECT count(*) AS agreements FROM pay.paynotify_agreement WHERE agreement_id = 'sub_L';
-- a subscription event without the subscription's id: the anomaly
-- no_agreement_id, acknowledged, no agreement written
SELECT t.sub_evt('st_sub', 'evt_sub_noid', 'customer.subscription.created',
	t.sub('sub_X', 'active') - 'id');
SELECT kind FROM pay.paynotify_anomaly WHERE notify_id = 'evt_sub_noid';
SELECT count(*) AS agreements FROM pay.paynotify_agreement WHERE channel = 'st_sub';

-- endpoints and hooks take the new events
SELECT pay.paynotify_check_endpoint(NULL, NULL, '{agreement_signed,agreement_ended,payment_failed}', NULL);
SELECT pay.paynotify_check_endpoint(NULL, NULL, '{agreement_paused}', NULL);
