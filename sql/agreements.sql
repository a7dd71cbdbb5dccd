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
-- An invoice (API 2025-03-31.basil: the subscription under parent, with the
-- subscription's metadata naming ord); the invoice's own metadata names own.
CREATE FUNCTION t.invoice(id text, sub text, ord text, paid bigint,
	reason text DEFAULT 'subscription_create', own text DEFAULT NULL) RETURNS jsonb
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'invoice', 'currency', 'usd',
		'amount_due', 8888, 'amount_paid', paid, 'billing_reason', reason,
		'metadata', CASE WHEN own IS NULL THEN '{}'::jsonb
						 ELSE jsonb_build_object('order_id', own) END,
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
-- a notification's trace shows its agreement as it is now
SELECT kind, detail->>'agreement_id' AS agreement_id, detail->>'state' AS state
FROM pay.paynotify_trace('st_sub', 'evt_sub_b1') WHERE kind IN ('notification', 'agreement');

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
-- a start date no timestamp holds: signed, at the time it is recorded
SELECT t.sub_evt('st_sub', 'evt_sub_far', 'customer.subscription.created',
	t.sub('sub_F', 'active') || '{"start_date": 99999999999999}');
SELECT state, signed_at = created_at AS signed_when_recorded FROM pay.paynotify_agreement
WHERE channel = 'st_sub' AND agreement_id = 'sub_F';

-- endpoints and hooks take the new events
SELECT pay.paynotify_check_endpoint(NULL, NULL, '{agreement_signed,agreement_ended,payment_failed}', NULL);
SELECT pay.paynotify_check_endpoint(NULL, NULL, '{agreement_paused}', NULL);

-- ---------------------------------------------------------------------------
-- Renewals: each period's invoice pays its own order
-- ---------------------------------------------------------------------------
SELECT t.set_order('REN-A', 'pending', 8888);
SELECT t.set_order('REN-B', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_ren_c', 'customer.subscription.created', t.sub('sub_R', 'active', 'REN-A'));
-- the invoice that created the subscription: the subscription's order
SELECT t.sub_evt('st_sub', 'evt_ren_1', 'invoice.paid', t.invoice('in_r1', 'sub_R', 'REN-A', 8888));
-- a renewal whose own metadata names the period's order pays that order
SELECT t.sub_evt('st_sub', 'evt_ren_2', 'invoice.paid',
	t.invoice('in_r2', 'sub_R', 'REN-A', 8888, 'subscription_cycle', 'REN-B'));
-- a renewal naming no order of its own names none: no_order_number, never
-- a second payment of the first period's order
SELECT t.sub_evt('st_sub', 'evt_ren_3', 'invoice.paid',
	t.invoice('in_r3', 'sub_R', 'REN-A', 8888, 'subscription_cycle'));
SELECT order_no, status FROM public.orders WHERE order_no LIKE 'REN-%' ORDER BY 1;
SELECT trade_no, order_no, agreement_id FROM pay.payment_record
WHERE channel = 'st_sub' AND agreement_id = 'sub_R' ORDER BY trade_no;
SELECT notify_id, order_no, status, note FROM pay.payment_notify_log
WHERE notify_id LIKE 'evt_ren_%' ORDER BY notify_id;
SELECT notify_id, kind, order_no FROM pay.paynotify_anomaly
WHERE notify_id LIKE 'evt_ren_%' ORDER BY notify_id;
SELECT event, order_no, notify_id FROM pay.paynotify_outbox
WHERE notify_id LIKE 'evt_ren_%' ORDER BY id;
-- invoice.payment_failed alike: the renewal's own order, else none
SELECT t.set_order('REN-C', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_ren_4', 'invoice.payment_failed',
	t.invoice('in_r4', 'sub_R', 'REN-A', 0, 'subscription_cycle', 'REN-C'));
SELECT t.sub_evt('st_sub', 'evt_ren_5', 'invoice.payment_failed',
	t.invoice('in_r5', 'sub_R', 'REN-A', 0, 'subscription_cycle'));
SELECT event, order_no, notify_id FROM pay.paynotify_outbox
WHERE notify_id IN ('evt_ren_4', 'evt_ren_5') ORDER BY id;
-- invoice_order_path overrides both: the period's order opened under the invoice id
SELECT pay.paynotify_add_channel('st_sub_inv', 'stripe', '{"invoice_order_path": "id"}');
SELECT pay.paynotify_add_key('st_sub_inv', 'secret_1', t.secret(1));
SELECT t.set_order('in_r6', 'pending', 8888);
SELECT t.sub_evt('st_sub_inv', 'evt_ren_6', 'invoice.paid',
	t.invoice('in_r6', 'sub_R', 'REN-A', 8888, 'subscription_cycle', 'REN-B'));
SELECT trade_no, order_no FROM pay.payment_record WHERE channel = 'st_sub_inv';

-- ---------------------------------------------------------------------------
-- One trade per money movement
-- ---------------------------------------------------------------------------
-- A subscription's checkout session names its first invoice: the session and
-- that invoice's invoice.paid are one payment, in either order
CREATE FUNCTION t.sub_session(id text, inv text, sub text, ord text) RETURNS jsonb
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'checkout.session', 'mode', 'subscription',
		'status', 'complete', 'payment_status', 'paid', 'amount_total', 8888, 'currency', 'usd',
		'payment_intent', NULL, 'invoice', inv, 'subscription', sub,
		'metadata', jsonb_build_object('order_id', ord))
$$;
SELECT t.set_order('CS-A', 'pending', 8888);
SELECT t.set_order('CS-B', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_cs_a1', 'checkout.session.completed',
	t.sub_session('cs_a', 'in_csa', 'sub_SA', 'CS-A'));
SELECT t.sub_evt('st_sub', 'evt_cs_a2', 'invoice.paid', t.invoice('in_csa', 'sub_SA', 'CS-A', 8888));
SELECT t.sub_evt('st_sub', 'evt_cs_b2', 'invoice.paid', t.invoice('in_csb', 'sub_SB', 'CS-B', 8888));
SELECT t.sub_evt('st_sub', 'evt_cs_b1', 'checkout.session.completed',
	t.sub_session('cs_b', 'in_csb', 'sub_SB', 'CS-B'));
-- a session naming no invoice: the session is the trade, as before
SELECT t.set_order('CS-C', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_cs_c1', 'checkout.session.completed',
	t.sub_session('cs_c', NULL, 'sub_SC', 'CS-C') - 'invoice');
-- An invoice of an older API version names its PaymentIntent, and the
-- intent its invoice: the invoice is the trade of both, one payment; the
-- intent naming no order (it carries none of the invoice's metadata) is
-- handed on, whichever comes first
SELECT t.set_order('PI-A', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_old_1', 'invoice.paid',
	jsonb_build_object('id', 'in_old', 'object', 'invoice', 'currency', 'usd', 'amount_paid', 8888,
		'billing_reason', 'subscription_cycle', 'payment_intent', 'pi_old', 'subscription', 'sub_R',
		'metadata', jsonb_build_object('order_id', 'PI-A')));
SELECT t.sub_evt('st_sub', 'evt_old_2', 'payment_intent.succeeded',
	jsonb_build_object('id', 'pi_old', 'object', 'payment_intent', 'amount', 8888,
		'amount_received', 8888, 'currency', 'usd', 'invoice', 'in_old', 'metadata', '{}'::jsonb));
-- and an intent that names the order too
SELECT t.set_order('PI-B', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_old_3', 'invoice.paid',
	jsonb_build_object('id', 'in_old_b', 'object', 'invoice', 'currency', 'usd', 'amount_paid', 8888,
		'billing_reason', 'subscription_cycle', 'payment_intent', 'pi_old_b', 'subscription', 'sub_R',
		'metadata', jsonb_build_object('order_id', 'PI-B')));
SELECT t.sub_evt('st_sub', 'evt_old_4', 'payment_intent.succeeded',
	jsonb_build_object('id', 'pi_old_b', 'object', 'payment_intent', 'amount', 8888,
		'amount_received', 8888, 'currency', 'usd', 'invoice', 'in_old_b',
		'metadata', jsonb_build_object('order_id', 'PI-B')));
-- the intent first, then its invoice
SELECT t.set_order('PI-C', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_old_5', 'payment_intent.succeeded',
	jsonb_build_object('id', 'pi_old_c', 'object', 'payment_intent', 'amount', 8888,
		'amount_received', 8888, 'currency', 'usd', 'invoice', 'in_old_c', 'metadata', '{}'::jsonb));
SELECT t.sub_evt('st_sub', 'evt_old_6', 'invoice.paid',
	jsonb_build_object('id', 'in_old_c', 'object', 'invoice', 'currency', 'usd', 'amount_paid', 8888,
		'billing_reason', 'subscription_cycle', 'payment_intent', 'pi_old_c', 'subscription', 'sub_R',
		'metadata', jsonb_build_object('order_id', 'PI-C')));
-- an older API version's subscription session, then its first invoice
-- naming its intent: one payment (the invoice, the session's too)
SELECT t.set_order('CS-D', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_cs_d1', 'checkout.session.completed',
	t.sub_session('cs_d', 'in_csd', 'sub_SD', 'CS-D'));
SELECT t.sub_evt('st_sub', 'evt_cs_d2', 'invoice.paid',
	jsonb_build_object('id', 'in_csd', 'object', 'invoice', 'currency', 'usd', 'amount_paid', 8888,
		'billing_reason', 'subscription_create', 'payment_intent', 'pi_csd', 'subscription', 'sub_SD',
		'subscription_details', jsonb_build_object('metadata', jsonb_build_object('order_id', 'CS-D')),
		'metadata', '{}'::jsonb));
-- a refund of that charge names the invoice: it refunds that payment
SELECT t.sub_evt('st_sub', 'evt_old_7', 'charge.refunded',
	jsonb_build_object('id', 'ch_old_c', 'object', 'charge', 'amount', 8888, 'amount_refunded', 8888,
		'currency', 'usd', 'payment_intent', 'pi_old_c', 'invoice', 'in_old_c', 'refunded', true,
		'metadata', jsonb_build_object('order_id', 'PI-C')));
SELECT order_no, trade_no, amount, status FROM pay.paynotify_refund WHERE order_no = 'PI-C';
SELECT status FROM public.orders WHERE order_no = 'PI-C';
-- A one-off session's intent and charge carry none of its metadata: naming
-- no order, they are of the order their trade paid (the intent: that
-- payment again; a refund of the charge: refunds it); an unknown trade
-- naming no order is still the anomaly no_order_number
SELECT t.set_order('OO-1', 'pending', 8888);
SELECT t.sub_evt('st_sub', 'evt_oo_1', 'checkout.session.completed',
	jsonb_build_object('id', 'cs_oo', 'object', 'checkout.session', 'mode', 'payment',
		'status', 'complete', 'payment_status', 'paid', 'amount_total', 8888, 'currency', 'usd',
		'payment_intent', 'pi_oo', 'metadata', jsonb_build_object('order_id', 'OO-1')));
SELECT t.sub_evt('st_sub', 'evt_oo_2', 'payment_intent.succeeded',
	jsonb_build_object('id', 'pi_oo', 'object', 'payment_intent', 'amount', 8888,
		'amount_received', 8888, 'currency', 'usd', 'metadata', '{}'::jsonb));
SELECT t.sub_evt('st_sub', 'evt_oo_3', 'charge.refunded',
	jsonb_build_object('id', 'ch_oo', 'object', 'charge', 'amount', 8888, 'amount_refunded', 3000,
		'currency', 'usd', 'payment_intent', 'pi_oo', 'refunded', false, 'metadata', '{}'::jsonb));
SELECT t.sub_evt('st_sub', 'evt_oo_3', 'charge.refunded',
	jsonb_build_object('id', 'ch_oo', 'object', 'charge', 'amount', 8888, 'amount_refunded', 3000,
		'currency', 'usd', 'payment_intent', 'pi_oo', 'refunded', false, 'metadata', '{}'::jsonb));
SELECT t.sub_evt('st_sub', 'evt_oo_4', 'charge.refunded',
	jsonb_build_object('id', 'ch_none', 'object', 'charge', 'amount', 8888, 'amount_refunded', 8888,
		'currency', 'usd', 'payment_intent', 'pi_none', 'refunded', true, 'metadata', '{}'::jsonb));
SELECT notify_id, order_no, status, note, delivery_count FROM pay.payment_notify_log
WHERE notify_id LIKE 'evt_oo_%' ORDER BY notify_id;
SELECT order_no, trade_no, amount, status FROM pay.paynotify_refund WHERE order_no = 'OO-1';
SELECT (SELECT count(*) FROM pay.payment_record WHERE order_no = 'OO-1') AS payments,
	(SELECT count(*) FROM pay.paynotify_outbox WHERE order_no = 'OO-1' AND event = 'paid') AS paid_events;
-- each order paid once, by one payment record and one paid event, no anomaly
SELECT o.order_no, o.status,
	(SELECT string_agg(p.trade_no, ',') FROM pay.payment_record p WHERE p.order_no = o.order_no) AS trades,
	(SELECT count(*) FROM pay.paynotify_outbox e WHERE e.order_no = o.order_no AND e.event = 'paid') AS paid_events,
	(SELECT count(*) FROM pay.paynotify_anomaly a WHERE a.order_no = o.order_no) AS anomalies
FROM public.orders o WHERE o.order_no LIKE 'CS-%' OR o.order_no LIKE 'PI-%' ORDER BY 1;
SELECT notify_id, order_no, status, note FROM pay.payment_notify_log
WHERE notify_id LIKE 'evt_cs_%' OR notify_id LIKE 'evt_old_%' ORDER BY notify_id;
SELECT count(*) AS anomalies FROM pay.paynotify_anomaly
WHERE notify_id LIKE 'evt_cs_%' OR notify_id LIKE 'evt_old_%';

-- ---------------------------------------------------------------------------
-- incomplete → incomplete_expired: never in force, ended at once, unsigned
-- ---------------------------------------------------------------------------
SELECT t.sub_evt('st_sub', 'evt_inc_1', 'customer.subscription.created', t.sub('sub_I', 'incomplete', 'member-9'));
SELECT t.sub_evt('st_sub', 'evt_inc_2', 'customer.subscription.updated', t.sub('sub_I', 'incomplete_expired', 'member-9'));
SELECT * FROM t.agr WHERE agreement_id = 'sub_I';
SELECT notify_id, status, note FROM pay.payment_notify_log WHERE notify_id LIKE 'evt_inc_%' ORDER BY notify_id;
-- nothing was signed: no agreement event
SELECT count(*) AS agreement_events FROM pay.paynotify_outbox WHERE detail->>'agreement_id' = 'sub_I';
SELECT kind, detail->>'status' AS status, detail->>'state' AS state
FROM pay.paynotify_trace('st_sub', 'evt_inc_2') WHERE kind IN ('notification', 'agreement');
-- a later snapshot active changes nothing: an end is final
SELECT t.sub_evt('st_sub', 'evt_inc_3', 'customer.subscription.updated', t.sub('sub_I', 'active', 'member-9'));
SELECT agreement_id, state, gateway_state, signed, ended, notify_ids FROM t.agr WHERE agreement_id = 'sub_I';
-- an end parked for it before: applied, ending nothing more
SELECT t.sub_evt('st_sub', 'evt_inc_j1', 'customer.subscription.deleted', t.sub('sub_J', 'canceled'));
SELECT t.sub_evt('st_sub', 'evt_inc_j2', 'customer.subscription.updated', t.sub('sub_J', 'incomplete_expired'));
SELECT notify_id, status, note FROM pay.payment_notify_log WHERE notify_id LIKE 'evt_inc_j%' ORDER BY notify_id;
SELECT agreement_id, state, signed, ended, notify_ids FROM t.agr WHERE agreement_id = 'sub_J';
-- canceled (deleted) of an agreement not recorded still waits for its sign
SELECT t.sub_evt('st_sub', 'evt_unk_1', 'customer.subscription.deleted', t.sub('sub_U', 'canceled'));
SELECT notify_id, status, note FROM pay.payment_notify_log WHERE notify_id = 'evt_unk_1';
SELECT count(*) AS agreements_u FROM t.agr WHERE agreement_id = 'sub_U';

-- ---------------------------------------------------------------------------
-- WeChat Pay PAP contracts: notices of test/ledger_notices.json (t.wx), on a
-- channel configured like the vector case wx_transaction_success_valid
-- ---------------------------------------------------------------------------
CREATE VIEW t.wx_agr AS
	SELECT agreement_id, merchant_ref, plan_id, state, gateway_state,
		signed_at, ended_at, notify_ids
	FROM pay.paynotify_agreement WHERE channel = 'wx_sub';
SET timezone = 'UTC';
-- an end before its sign: parked; the sign applies both, in order
SELECT outcome FROM t.wx('wx_sub', 'ent_term_1');
SELECT count(*) AS agreements FROM t.wx_agr;
SELECT outcome FROM t.wx('wx_sub', 'ent_sign_1');
SELECT outcome FROM t.wx('wx_sub', 'ent_sign_1');
SELECT agreement_id, merchant_ref, plan_id, state, gateway_state, signed_at, ended_at,
	cardinality(notify_ids) AS notices FROM t.wx_agr;
SELECT event, detail->>'agreement_id' AS agreement_id, detail->>'merchant_ref' AS merchant_ref
FROM pay.paynotify_outbox WHERE channel = 'wx_sub' ORDER BY id;
-- states that move nothing: handed on; another merchant's: its anomaly;
-- no contract_id: no_agreement_id
SELECT outcome FROM t.wx('wx_sub', 'ent_sign_2');
SELECT outcome FROM t.wx('wx_sub', 'ent_renew_2');
SELECT outcome FROM t.wx('wx_sub', 'ent_failed_3');
SELECT outcome FROM t.wx('wx_sub', 'ent_other_mch');
SELECT outcome FROM t.wx('wx_sub', 'ent_no_id');
SELECT agreement_id, state, gateway_state FROM t.wx_agr ORDER BY agreement_id;
SELECT l.event_type, l.status, l.note, a.kind
FROM pay.payment_notify_log l
LEFT JOIN pay.paynotify_anomaly a USING (channel, notify_id)
WHERE l.channel = 'wx_sub' AND l.event_type LIKE 'ENTRUST.%' ORDER BY l.first_seen;
-- a deduction under a contract in force pays with it; under an ended one,
-- pays as an anomaly
SELECT t.set_order('LG-PAP-2', 'pending', 100);
SELECT t.set_order('LG-PAP-1', 'pending', 100);
SELECT outcome FROM t.wx('wx_sub', 'pap_pay_2');
SELECT outcome FROM t.wx('wx_sub', 'pap_pay_1');
SELECT order_no, status FROM public.orders WHERE order_no LIKE 'LG-PAP-%' ORDER BY 1;
SELECT p.trade_no, p.order_no, p.agreement_id, a.kind
FROM pay.payment_record p
LEFT JOIN pay.paynotify_anomaly a ON a.channel = p.channel AND a.notify_id = p.notify_id
WHERE p.channel = 'wx_sub' ORDER BY p.trade_no;
-- an end whose time is in contract_terminate_info: ended at that time
SELECT outcome FROM t.wx('wx_sub', 'ent_term_2');
SELECT agreement_id, state, ended_at FROM t.wx_agr WHERE agreement_id = 'WXC-2';

-- ---------------------------------------------------------------------------
-- Alipay deduction agreements: bodies signed by test/unit/make_alipay_forms.py
-- (PN_AGREEMENTS=1; deterministic)
-- ---------------------------------------------------------------------------
SELECT pay.paynotify_add_channel('ali_sub', 'alipay',
	'{"app_id": "2021000000000001", "seller_id": "2088000000000002"}');
SELECT pay.paynotify_add_key('ali_sub', 'alipay_1', t.vtext('keys/alipay_1.pub.pem'));
CREATE TABLE t.ali_agr_form (name text PRIMARY KEY, charset text NOT NULL, body text NOT NULL);
INSERT INTO t.ali_agr_form (name, charset, body) VALUES
	('sign_1', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-01&notify_type=dut_user_sign&status=NORMAL&agreement_no=ALI-AG-1&external_agreement_no=M-AG-1&sign=DOQT%2FbFoe5Xm1xjXLrcfAEvJtDzHrw8vazjS6oaVP2nqkSFdOeRv5Bm4Vy9m7TWnmQAP9Yram%2BHRxYSI7TlgDjWWkEt94ZScqmmQ9dUeLjQbLCpMYjdoMlarWMhAws2vHQfK6EfzSizFMolDQoddfUExOWhzcoNvDmcdKGA8nChETo51YljDmVIJ%2FPiVTfLk3g3rik4SRdECNq5kE9iIhXR6xxcTHFtDF4ZxzXyG%2F5jlQMUz2JoXkckhWpoS2OEEKc7Ss1UUd34CQ3WO73VWi8d%2FnHVuPQNMTUKis6bIaF27grnaF0X5mIe%2FkXpO2C%2B0f6rcBx%2Bb5ucGn4E%2BCGRniQ%3D%3D'),
	('unsign_1', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-02&notify_type=dut_user_unsign&status=UNSIGN&agreement_no=ALI-AG-1&external_agreement_no=M-AG-1&unsign_time=2026-01-03+09%3A00%3A00&sign=XwTYCHu5l78WmXbghJo2Qnj%2BPg4D7kU8hIjTePQ76nb7jEWlxTHu85wk09S7NdIBFht4bC4Xzp9UI7I7m%2Fr1gaCAUnMD44bOyS0io89vpdWq2fnhMR%2FTc68MBLivIkqJew80JP5SDw38w4vPTYXqLM8G%2F2yZozv8SIHKXV%2BK3SIk1m0Adqv%2FCZc612KImkTo8MrUDLqd0cZvhHNkMN%2BNW18Dbj8%2F8sPq%2F0V1rT%2FKkmBYShiSmOUbgLrJftVb1kPcuRlH6IhS2CfpWsrzsX1AYg2ufppfJ0LyiZ%2FMLA1eL84E1oyxOq86u3FVGXXkznoBZDfHdY24RIEM92rG1qrT3g%3D%3D'),
	('sign_2_partner', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-03&notify_type=dut_user_sign&status=NORMAL&agreement_no=ALI-AG-2&partner_id=2088000000000002&sign=uFEE%2BphFIv6SAmMreIVqfjxYbtp0TX62mJiLGLj1nYCemC1%2BLkuF2%2F9Cg0x034ndWStH%2FASzKVj%2F%2B4HIjG3Z048IIpyKuAHSSrboFFqM06YF8aHGvusKyfMpHfLGAqUmUPvHgfzScNpKPmcPC%2Bz2dEkZ%2F%2BoeJFXuCuPlR4TakHajSih%2BduVqOODvE2%2FXrkPEa5NJ3IhGVX5lkiXATqag7QmBZZnMHlJ2NeQHyy9iCjgNjnU8udXSYLDcEigWIgThAoDcTYTrqs3hHGFBdv6Bhi6v05wXWBSSPnb7Z%2FJUm6eTA%2BPye6emap43ybZnJYUifZR2Tsiv2wJTpGPbd9B3UQ%3D%3D'),
	('sign_3_other_app', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000009999&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-04&notify_type=dut_user_sign&status=NORMAL&agreement_no=ALI-AG-3&sign=Q3%2FW6ezIkksoy7KTnd8we0Yqls2iSJZNTbG2TkM6GsCcuDSjyYApVitKYeVLKk6yLKihURoh3w5%2BQQa%2FFzvK9ooJ3bYWJZTwqs60wibEdhMwvpwF3GWUqVjrEExk6a9i4q6l5vXnSckE3rEhWZ%2BWdaxo5eH5ue3oHWyrfQQQdY9VmEpKWRJg8k1TOK4g53M%2FWh10qwQQTV3UfS5nX0o9cng8VbS6IpGu%2BXiHcnIhvO1zEvPmUVCjC7e%2FexmBPgGnndCgDKjsS0wBvt8n1W%2BOexQle7EwafhrDd%2Bej5Jn2lSmjUVgCJFi6sGIDyZidy8rC2EARpT%2FRGAoGdT0tP9vMg%3D%3D'),
	('sign_no_agreement', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-05&notify_type=dut_user_sign&status=NORMAL&sign=d%2BgSTmdLeXUJjxoOQjwluWAoaeFdSQ1JgEEg39AAX8yYvIxXOS0waUJ80BCxp6jyavyH0Ymz7hLnJDVKRDnJQN71vghqNMGbHhoRzjqrI89zfDS62UkD4yjXGsH%2Be0gV0ANJlt8t6h9EJBMlK1ni8Ad2L2BeOSBC9x1lepvXf%2Ff4tYDOhVLcv4Yo%2FlxSvvPjV4GX9rePzgjRC2moxKhOnwhXjYfXiUlc%2BOpujYcaeDG3KvL%2FmTaVXcu%2Bjh4BzOQshPD0E%2Bs3lSkMLljqTFjVqWL%2Bx7GbvkkUttaci4snjwfAEvziBUCRDZTOjDDGmKnB%2F0TeJ5tN%2B9K%2BrycOA63Nzw%3D%3D'),
	('pay_ag_1', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-a-06&out_trade_no=ALI-AG-O1&trade_no=ALI-AG-T1&total_amount=1.00&trade_status=TRADE_SUCCESS&agreement_no=ALI-AG-1&sign=qy37pzTi%2FDDFY4eSiquZ8eFqJM8rrV5uISRcGHivvXcVXYI7As8dLjrCIUv3wzRPEm3WiwDUOzaSPXyjULWHOSHiolQcopbDfzmE1jiZDrqsMVddCqQwB7a5zEK%2Bl8J2OvMkNzI5GFJX79CDmJJi0dDyhHX1owdhdvCi2ewVUZJ7mlMrzcQntKyFc0MlDIwrzVlSgCeG%2BEK8BqSiUtEdNEpye68awGsUKcVnpbB2YyTtZenIz6M4WsPwDL%2FkUABeM%2BFCbNs6vIxrU%2BlYbZU%2BJstgtpDcgvLivvmHeybfxca5DuQcP4x9RrMp1nPaWul2zJXlT4IgR0zHkF8W8ON0SA%3D%3D'),
	('sign_4_other_partner', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-07&notify_type=dut_user_sign&status=NORMAL&agreement_no=ALI-AG-4&partner_id=2088999999999999&sign=Wwp88pWUvFxLpmrbPY%2BoRXuJ15mRnfdjyMfxzDniwv5MYeoUusTXp1SSeAW0xwdyFY9LL2xvxb%2BQMWHMF%2FSaU27rHrnncgda31syIHzWRMooTz2z0VO8ZzEes3TU05WoPhOugkYJ%2FNBZ6DEwqeqenv3205S1HC0okDZqRyzYhhPWCwMSHszqQOqGOhXVaxeSYeFMpJsq1NRmyEV1Xnaz027R12paKj4Ru6ztxMbvjZLMfBW4Z%2BgtMLmzk%2Bvi21E%2B9WBnPn3ekRdIMYwu%2Fargl7w6DyBq0AytAg7tBFV60178mhdYHgDllGUdJOhe1MFYZ5BIdVJXWMmEANWYpuQtnA%3D%3D'),
	('unsign_2_other_partner', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-a-08&notify_type=dut_user_unsign&status=UNSIGN&agreement_no=ALI-AG-2&partner_id=2088999999999999&unsign_time=2026-01-05+09%3A00%3A00&sign=UM3F9QXhtZvVmpKTs73KPM2tM83I1VYdtVyhcFE6LAHG0qTOa%2B%2BcGzEX5fcPY0DWSkO8NcLnQaHUmLPECdbvINAyJutsNfDUlDUIMWDvqxuuKceKjUx%2FB5dF6OQIRkcyfZdhn4W%2BU8xD%2FGeX%2FTdu3NHfqCYQ7YWquR7Y0%2BYh0tWOemT2VsTEciMhJ6JxLQ9VzLwngnFPlK%2F5H7QNIOOf%2BoBOYIggS31VyMFFPqpxZOxl9X%2BgkUZcT7FDZFDQTI75hU07PPe4ZLOtrdATnYxKoZ2%2B1AW%2FnBT7kSSEO7U1rg5QhQ9EivkKlJGxBabBlhufBi8%2BrMuts82BjHVVoPhAvw%3D%3D');
CREATE FUNCTION t.ali_agr(form text) RETURNS text LANGUAGE sql AS $$
	SELECT h.outcome FROM t.ali_agr_form f,
		pay.paynotify_handle('ali_sub',
			jsonb_build_object('content-type',
				'application/x-www-form-urlencoded; charset=' || f.charset),
			convert_to(f.body, 'UTF8')) h
	WHERE f.name = form
$$;
SELECT t.ali_agr('unsign_1');
SELECT t.ali_agr('sign_1');
SELECT t.ali_agr('sign_1');
-- a merchant named by partner_id only: ours (signed with our key); another app_id: refused
SELECT t.ali_agr('sign_2_partner');
SELECT t.ali_agr('sign_3_other_app');
SELECT t.ali_agr('sign_no_agreement');
-- another merchant's PID (partner_id) is refused, with or without our app_id
SELECT t.ali_agr('sign_4_other_partner');
SELECT t.ali_agr('unsign_2_other_partner');
-- on a channel without seller_id a notice without app_id is nobody's
SELECT pay.paynotify_add_channel('ali_sub_noseller', 'alipay', '{"app_id": "2021000000000001"}');
SELECT pay.paynotify_add_key('ali_sub_noseller', 'alipay_1', t.vtext('keys/alipay_1.pub.pem'));
SELECT f.name, h.outcome FROM t.ali_agr_form f,
	pay.paynotify_handle('ali_sub_noseller',
		jsonb_build_object('content-type', 'application/x-www-form-urlencoded; charset=' || f.charset),
		convert_to(f.body, 'UTF8')) h
WHERE f.name IN ('sign_2_partner', 'sign_1') ORDER BY f.name;
SELECT count(*) AS noseller_agreements FROM pay.paynotify_agreement WHERE channel = 'ali_sub_noseller';
SELECT agreement_id, merchant_ref, plan_id, state, gateway_state, signed_at, ended_at,
	notify_ids
FROM pay.paynotify_agreement WHERE channel = 'ali_sub' ORDER BY agreement_id;
SELECT notify_id, event_type, order_no, status, note FROM pay.payment_notify_log
WHERE channel = 'ali_sub' ORDER BY first_seen, notify_id;
SELECT event, notify_id FROM pay.paynotify_outbox WHERE channel = 'ali_sub' ORDER BY id;
-- a payment under the ended agreement pays, as an anomaly, with it
SELECT t.set_order('ALI-AG-O1', 'pending', 100);
SELECT t.ali_agr('pay_ag_1');
SELECT p.order_no, p.agreement_id, o.status, a.kind
FROM pay.payment_record p JOIN public.orders o USING (order_no)
LEFT JOIN pay.paynotify_anomaly a ON a.channel = p.channel AND a.notify_id = p.notify_id
WHERE p.channel = 'ali_sub';
