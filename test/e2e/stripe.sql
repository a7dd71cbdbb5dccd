-- A Stripe channel 'st' (one key, t.secret(1)) and two helpers for the
-- end-to-end scripts, on top of test/fixture.sql (\i test/e2e/stripe.sql):
--   t.evt(id, o, kind): the Stripe event id about order o: kind 'pay' a
--     payment_intent.succeeded, 'refund' a charge.refunded, anything else a
--     customer.created (a type paynotify ignores);
--   t.st(id, o, kind): that event delivered, signed, on 'st'; its outcome.
SELECT pay.paynotify_add_channel('st', 'stripe', '{}');
SELECT pay.paynotify_add_key('st', 's1', t.secret(1));
CREATE FUNCTION t.evt(id text, o text, kind text DEFAULT 'pay') RETURNS text LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'event', 'type',
		CASE kind WHEN 'pay' THEN 'payment_intent.succeeded' WHEN 'refund' THEN 'charge.refunded'
			ELSE 'customer.created' END,
		'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object(
			'id', 'pi_' || o, 'payment_intent', 'pi_' || o, 'amount', 8888, 'amount_received', 8888,
			'amount_refunded', 100, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', o)))
	)::text
$$;
CREATE FUNCTION t.st(id text, o text, kind text DEFAULT 'pay') RETURNS text LANGUAGE sql AS
	$$ SELECT outcome FROM t.stripe('st', t.evt(id, o, kind), ARRAY[t.secret(1)]) $$;
