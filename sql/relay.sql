-- The relay's SQL side (1.1): endpoints and their checks, who may do what,
-- the fan-out of outbox events to the endpoints that want them, claims (an
-- order's later event waits for its earlier one), results (delivered; retry
-- with backoff and jitter, never past the horizon; dead at the horizon),
-- one-call redelivery, purge.  The operator (admin capacity) and the relay
-- (relay capacity) act in fresh backends as their own login roles.
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;
DELETE FROM paynotify_outbox;		-- events of the earlier tests
SELECT rolcanlogin, rolsuper, rolinherit FROM pg_roles WHERE rolname = 'paynotify_relay';
CREATE ROLE rl_op LOGIN;
CREATE ROLE rl_relay LOGIN;
SELECT paynotify_grant('rl_op', 'admin');
SELECT paynotify_grant('rl_relay', 'relay');
-- what the relay's role may execute: its calls, nothing else
SELECT p.oid::regprocedure AS relay_may_execute
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify'
WHERE has_function_privilege('rl_relay', p.oid, 'EXECUTE')
ORDER BY 1::text;

\c - rl_op
SET search_path = pay, public;
-- what an endpoint must be
SELECT paynotify_add_endpoint('ftp://erp.example/', 'whsec_' || repeat('A', 32));
SELECT paynotify_add_endpoint('https://erp.example/a b', 'whsec_' || repeat('A', 32));
SELECT paynotify_add_endpoint('https://erp.example/hook', 'not-a-secret');
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_c2hvcnQ=');
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('A', 100));
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('A', 32), events => '{paid,shipped}');
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('A', 32), events => '{}');
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('A', 32), channels => '{"no spaces"}');
SELECT paynotify_add_endpoint(NULL, 'whsec_' || repeat('A', 32));
-- every event; refunds of channel rl only; one that will be disabled
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw') AS erp \gset
SELECT paynotify_add_endpoint('http://127.0.0.1:8080/refunds', 'whsec_' || repeat('B', 32),
	events => '{refunded}', channels => '{rl}') AS refunds \gset
SELECT paynotify_add_endpoint('http://127.0.0.1:8080/off', 'whsec_' || repeat('C', 32)) AS off \gset
SELECT paynotify_alter_endpoint(:off, enabled => false);
SELECT paynotify_alter_endpoint(:erp, retry_base => '10 seconds', retry_max => '1 minute',
	retry_horizon => '1 hour', max_in_flight => 4);
SELECT paynotify_alter_endpoint(-1, enabled => false);
SELECT paynotify_alter_endpoint(:erp, secret => 'whsec_short');
-- a setting out of range is refused without the row (and its secret) in the detail
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT paynotify_alter_endpoint(:erp, max_in_flight => 0);
SELECT paynotify_alter_endpoint(:erp, retry_base => '-1 second');
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('D', 32), max_in_flight => 1000);
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('D', 32), retry_horizon => '-1 day');
SELECT paynotify_add_endpoint('https://erp.example/hook', 'whsec_' || repeat('D', 32), retry_horizon => '2 years');
SELECT paynotify_alter_endpoint(:erp, retry_base => '25 hours');
SELECT paynotify_alter_endpoint(:erp, retry_max => '31 days');
-- a retry at least a second later: a millisecond base or cap would be a busy loop
SELECT paynotify_alter_endpoint(:erp, retry_base => '1 millisecond');
SELECT paynotify_alter_endpoint(:erp, retry_max => '500 milliseconds');
\set VERBOSITY terse
\set SHOW_CONTEXT errors
SELECT id = :erp AS erp, url, events, channels, enabled, max_in_flight, retry_base, retry_max,
	retry_horizon
FROM paynotify_endpoint ORDER BY id;
-- the operator reads everything but the secret, and cannot claim (a claim returns secrets)
SELECT secret FROM paynotify_endpoint;
SELECT * FROM paynotify_relay_claim(1);
SELECT paynotify_relay_fanout();
SELECT paynotify_relay_report('{}', '{}', '{}');

-- events: two payments through paynotify_handle, then (as if from later
-- notifications) a refund of the first order and a close on another channel
\c - :su
SET search_path = pay, public;
SELECT paynotify_add_channel('rl', 'stripe', '{}');
SELECT paynotify_add_key('rl', 's1', t.secret(1));
CREATE FUNCTION t.rl_pay(evt text, ord text) RETURNS text LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('rl', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', 100, 'amount_received', 100,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)])
$$;
INSERT INTO public.orders VALUES ('RL-1', 'pending', 100), ('RL-2', 'pending', 100);
SELECT t.rl_pay('evt_rl_1', 'RL-1'), t.rl_pay('evt_rl_2', 'RL-2');
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
	VALUES ('refunded', 'rl', 'RL-1', 're_1', 40), ('closed', 'other', 'RL-3', 'n_3', 0);

\c - rl_relay
SET search_path = pay, public;
-- the relay reads and writes nothing itself
SELECT count(*) FROM paynotify_delivery;
SELECT count(*) FROM paynotify_outbox;
SELECT paynotify_redeliver();
SELECT * FROM paynotify_outbox_claim(1);
-- fan-out takes the outbox in order, max_rows at a time
SELECT paynotify_relay_fanout(3);
SELECT paynotify_relay_fanout();
SELECT paynotify_relay_fanout();

\c - :su
SET search_path = pay, public;
SELECT count(*) AS outbox_left FROM paynotify_outbox;
-- the installation's id, made by the first fan-out: 16 hex digits
SELECT count(*) AS installations, min(id) ~ '^[0-9a-f]{16}$' AS id_ok FROM paynotify_installation;
-- one delivery per (event, matching enabled endpoint); the body is the
-- event, its id is the webhook-id
SELECT e.url, d.event, d.order_no, d.attempts, d.body::jsonb - 'id' - 'occurred_at' AS body,
	d.body::jsonb->>'id' = d.webhook_id
		AND d.webhook_id = 'evt_' || (SELECT i.id FROM paynotify_installation i) || '_' || d.outbox_id AS id_is_event,
	d.body::jsonb->>'occurred_at' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' AS occurred_at_utc
FROM paynotify_delivery d JOIN paynotify_endpoint e ON e.id = d.endpoint_id
ORDER BY d.outbox_id, d.endpoint_id;

\c - rl_relay
SET search_path = pay, public;
-- the claim: the refund of RL-1 waits for its payment at the same
-- endpoint, not at the other one
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT url, body::jsonb->>'event' AS event, body::jsonb->>'order_no' AS order_no,
	webhook_id = body::jsonb->>'id' AS webhook_id_ok, left(secret, 6) AS secret, max_in_flight, attempts
FROM c ORDER BY delivery_id;
-- results: RL-1 paid 200, RL-2 paid 503, RL-3 no response, the refund 204
SELECT paynotify_relay_report(array_agg(delivery_id ORDER BY delivery_id),
	array_agg(CASE (body::jsonb->>'order_no') || (body::jsonb->>'event')
		WHEN 'RL-1paid' THEN 200 WHEN 'RL-2paid' THEN 503 WHEN 'RL-1refunded' THEN 204 END ORDER BY delivery_id),
	array_agg(CASE WHEN body::jsonb->>'order_no' = 'RL-3' THEN 'Timeout was reached' END ORDER BY delivery_id))
FROM c;
COMMIT;

\c - :su
SET search_path = pay, public;
SELECT e.url, d.event, d.order_no, d.attempts, d.last_status, d.last_error,
	d.delivered_at IS NOT NULL AS delivered, d.dead_at IS NOT NULL AS dead,
	d.next_attempt_at - d.last_attempt_at BETWEEN '5 s' AND '10 s' AS retry_in_5_to_10_s
FROM paynotify_delivery d JOIN paynotify_endpoint e ON e.id = d.endpoint_id
ORDER BY d.outbox_id, d.endpoint_id;

-- the next claim: RL-1's refund (its payment is delivered); the failed ones are not due yet
\c - rl_relay
SET search_path = pay, public;
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT url, body::jsonb->>'event' AS event, body::jsonb->>'order_no' AS order_no FROM c;
SELECT paynotify_relay_report(array_agg(delivery_id), array_agg(500), array_agg(NULL::text)) FROM c;
COMMIT;

-- the backoff doubles (base 10 s: the second retry in 10 to 20 s) and is capped
-- by retry_max (1 minute) and never lands past the horizon
\c - :su
SET search_path = pay, public;
UPDATE paynotify_delivery SET next_attempt_at = now() - '1 s'::interval
	WHERE delivered_at IS NULL AND order_no IN ('RL-2', 'RL-3');
\c - rl_relay
SET search_path = pay, public;
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT paynotify_relay_report(array_agg(delivery_id), array_agg(502), array_agg(NULL::text)) FROM c;
COMMIT;
\c - :su
SET search_path = pay, public;
SELECT d.order_no, d.event, d.attempts, d.last_error,
	d.next_attempt_at - d.last_attempt_at BETWEEN '10 s' AND '20 s' AS retry_in_10_to_20_s
FROM paynotify_delivery d WHERE d.delivered_at IS NULL ORDER BY d.outbox_id;
UPDATE paynotify_delivery SET attempts = 40 WHERE order_no = 'RL-2';
UPDATE paynotify_delivery SET next_attempt_at = now() - '1 s'::interval WHERE order_no = 'RL-2';
UPDATE paynotify_delivery SET started_at = now() - '59 min 50 s'::interval WHERE order_no = 'RL-3';
UPDATE paynotify_delivery SET next_attempt_at = now() - '1 s'::interval WHERE order_no = 'RL-3';
\c - rl_relay
SET search_path = pay, public;
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT paynotify_relay_report(array_agg(delivery_id), array_agg(NULL::integer), array_agg('refused'::text)) FROM c;
COMMIT;
\c - :su
SET search_path = pay, public;
SELECT d.order_no, d.attempts, d.dead_at IS NOT NULL AS dead,
	d.next_attempt_at - d.last_attempt_at BETWEEN '30 s' AND '60 s' AS capped_at_1_min,
	d.next_attempt_at = d.started_at + '1 hour'::interval AS at_the_horizon
FROM paynotify_delivery d WHERE d.delivered_at IS NULL ORDER BY d.outbox_id;

-- a backoff that would overflow as an interval (23 hours * 2^30) is still
-- recorded, capped by retry_max and the horizon: a failing report would
-- give the relay's whole batch back, to be delivered again, round after round
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_add_endpoint('http://127.0.0.1:8080/slow', 'whsec_' || repeat('E', 32),
	retry_horizon => '1 year') AS slow \gset
SELECT paynotify_alter_endpoint(:slow, retry_base => '23 hours', retry_max => '30 days');
\c - :su
SET search_path = pay, public;
INSERT INTO paynotify_delivery (endpoint_id, outbox_id, webhook_id, event, channel, order_no, order_seq, body, attempts)
	VALUES (:slow, 0, 'evt_0', 'paid', 'rl', 'RL-SLOW', 0, '{}', 30);
\c - rl_relay
SET search_path = pay, public;
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT url, attempts FROM c;
SELECT paynotify_relay_report(array_agg(delivery_id), array_agg(503), array_agg(NULL::text)) FROM c;
COMMIT;
\c - :su
SET search_path = pay, public;
SELECT d.attempts, d.dead_at IS NOT NULL AS dead,
	d.next_attempt_at - d.last_attempt_at BETWEEN '15 days' AND '30 days' AS capped_at_30_days
FROM paynotify_delivery d WHERE d.order_no = 'RL-SLOW';
-- attempts saturates at the integer's maximum instead of failing the report
\c - :su
SET search_path = pay, public;
UPDATE paynotify_delivery SET attempts = 2147483647, next_attempt_at = now() - '1 s'::interval
	WHERE order_no = 'RL-SLOW';
\c - rl_relay
SET search_path = pay, public;
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT url, attempts FROM c;
SELECT paynotify_relay_report(array_agg(delivery_id), array_agg(503), array_agg(NULL::text)) FROM c;
COMMIT;
\c - :su
SET search_path = pay, public;
SELECT d.attempts, d.last_status, d.dead_at IS NOT NULL AS dead, d.next_attempt_at > now() AS retry_later
FROM paynotify_delivery d WHERE d.order_no = 'RL-SLOW';
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_drop_endpoint(:slow);

-- dead letters: the horizon passes (made 0 here), the next failure is final
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_alter_endpoint(:erp, retry_horizon => '0');
\c - :su
SET search_path = pay, public;
UPDATE paynotify_delivery SET next_attempt_at = now() - '1 s'::interval WHERE delivered_at IS NULL;
\c - rl_relay
SET search_path = pay, public;
BEGIN;
CREATE TEMP TABLE c AS SELECT * FROM paynotify_relay_claim(10);
SELECT paynotify_relay_report(array_agg(delivery_id), array_agg(500), array_agg(NULL::text)) FROM c;
COMMIT;
-- a dead letter is never claimed again
SELECT count(*) AS claimable FROM paynotify_relay_claim(10);
-- a report for a finished delivery changes nothing
\c - :su
SET search_path = pay, public;
SELECT array_agg(id ORDER BY id) AS finished FROM paynotify_delivery \gset
\c - rl_relay
SET search_path = pay, public;
SELECT paynotify_relay_report(:'finished', array_fill(200, ARRAY[cardinality(:'finished'::bigint[])]), '{}');
\c - rl_op
SET search_path = pay, public;
SELECT d.order_no, d.event, d.attempts, d.last_status, d.last_error, d.dead_at IS NOT NULL AS dead,
	d.delivered_at IS NOT NULL AS delivered
FROM paynotify_delivery d ORDER BY d.outbox_id, d.endpoint_id;
SELECT count(*) AS dead_letters FROM paynotify_delivery WHERE dead_at IS NOT NULL;

-- one call replays them, with a fresh horizon
SELECT paynotify_alter_endpoint(:erp, retry_horizon => '1 hour');
SELECT paynotify_redeliver(endpoint_id => :refunds);
SELECT paynotify_redeliver(endpoint_id => :erp);
SELECT paynotify_redeliver();
SELECT d.order_no, d.attempts, d.dead_at IS NULL AS alive, d.next_attempt_at <= now() AS due,
	d.started_at > d.last_attempt_at AS fresh_horizon, d.last_error
FROM paynotify_delivery d WHERE d.delivered_at IS NULL ORDER BY d.outbox_id;

-- the replayed dead letters are claimed again
\c - rl_relay
SET search_path = pay, public;
BEGIN;
SELECT body::jsonb->>'event' AS event, body::jsonb->>'order_no' AS order_no
FROM paynotify_relay_claim(10) ORDER BY 2;
ROLLBACK;

-- no enabled endpoint: the relay leaves the outbox to a worker of one's own
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint;
\c - :su
SET search_path = pay, public;
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
	VALUES ('paid', 'rl', 'RL-4', 'n_4', 100);
\c - rl_relay
SET search_path = pay, public;
SELECT paynotify_relay_fanout();
SELECT count(*) AS claimable FROM paynotify_relay_claim(10);
\c - rl_op
SET search_path = pay, public;
SELECT event, order_no FROM paynotify_outbox_claim(10);
-- a negative count is refused (the same answer on Citus: test/e2e/citus.sh)
SELECT * FROM paynotify_outbox_claim(-1);

-- An order's events are in order_seq's order: the outbox id where
-- order_seq is NULL (one server), else order_seq (on Citus the order's own
-- sequence: ids come from the range of the node that handled the event).
-- Here the refund has the lower id and the higher order_seq: it waits for
-- the payment.
SELECT paynotify_add_endpoint('http://127.0.0.1:8080/seq', 'whsec_' || repeat('F', 32),
	channels => '{seq}') AS seq \gset
\c - :su
SET search_path = pay, public;
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount, order_seq)
	VALUES ('refunded', 'seq', 'RL-SEQ', 'n_s2', 40, 2), ('paid', 'seq', 'RL-SEQ', 'n_s1', 100, 1);
\c - rl_relay
SET search_path = pay, public;
SELECT paynotify_relay_fanout();
BEGIN;
SELECT body::jsonb->>'event' AS claimable FROM paynotify_relay_claim(10);
ROLLBACK;
\c - rl_op
SET search_path = pay, public;
SELECT event, order_seq, outbox_id = (SELECT min(outbox_id) FROM paynotify_delivery WHERE order_no = 'RL-SEQ') AS lower_id
FROM paynotify_delivery WHERE order_no = 'RL-SEQ' ORDER BY order_seq;
SELECT paynotify_drop_endpoint(:seq);

-- Every authentic notification paynotify does not apply itself is handed
-- on: one event "notification" (exactly once, duplicates queue nothing),
-- with the gateway, its event type and the verified payload; the order
-- when the notice names one, else none (null in the body), and an event of
-- no order waits for no other.  An endpoint chooses it like any event;
-- a hook on it gets the same detail.
SELECT paynotify_add_endpoint('http://127.0.0.1:8080/notes', 'whsec_' || repeat('G', 32),
	events => '{notification}', channels => '{rl}') AS notes \gset
\c - :su
SET search_path = pay, public;
CREATE TABLE public.rl_heard (event text, outbox_id bigint, detail jsonb, amount jsonb);
CREATE ROLE rl_hooker;
SELECT paynotify_grant('rl_hooker', 'admin');
GRANT INSERT ON public.rl_heard TO rl_hooker;
CREATE FUNCTION public.rl_note_hook(e jsonb) RETURNS void LANGUAGE sql
	SET search_path = pg_catalog AS
	$$ INSERT INTO public.rl_heard VALUES (e->>'event', (e->>'outbox_id')::bigint, e->'detail', e->'amount') $$;
ALTER FUNCTION public.rl_note_hook(jsonb) OWNER TO rl_hooker;
SET ROLE rl_hooker;
SELECT paynotify_on('notification', 'public.rl_note_hook(jsonb)');
RESET ROLE;
CREATE FUNCTION t.rl_note(evt text, type text, obj jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('rl', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', type, 'livemode', false,
		'data', jsonb_build_object('object', obj))::text, ARRAY[t.secret(1)])
$$;
-- no order; one that names an order (with client_secrets, which Stripe
-- says are never to be passed on: the key left out at any depth, a string
-- that holds one, as a redirect URL does, "redacted"); each delivered
-- twice; and a payment (its own event, not a notification)
SELECT t.rl_note('evt_rl_n1', 'customer.created', '{"id": "cus_1", "object": "customer", "email": "a@example.com"}'),
	t.rl_note('evt_rl_n1', 'customer.created', '{"id": "cus_1", "object": "customer", "email": "a@example.com"}'),
	t.rl_note('evt_rl_n2', 'payment_intent.processing',
		'{"id": "pi_rl_n2", "object": "payment_intent", "amount": 100, "currency": "usd", "metadata": {"order_id": "RL-N"},
		  "client_secret": "pi_rl_n2_secret_abc", "x": [{"client_secret": {"deep": 1}, "keep": 1}],
		  "next_action": {"redirect_to_url": {"return_url": "https://shop.example/r",
			"url": "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent_client_secret=pi_rl_n2_secret_abc"}}}'),
	t.rl_note('evt_rl_n2', 'payment_intent.processing',
		'{"id": "pi_rl_n2", "object": "payment_intent", "amount": 100, "currency": "usd", "metadata": {"order_id": "RL-N"},
		  "client_secret": "pi_rl_n2_secret_abc", "x": [{"client_secret": {"deep": 1}, "keep": 1}],
		  "next_action": {"redirect_to_url": {"return_url": "https://shop.example/r",
			"url": "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent_client_secret=pi_rl_n2_secret_abc"}}}');
INSERT INTO public.orders VALUES ('RL-N', 'pending', 100);
SELECT t.rl_pay('evt_rl_n3', 'RL-N');
SELECT event, order_no, notify_id, amount, detail FROM paynotify_outbox ORDER BY id;
-- the hook ran once per notification, as its registrant, with the detail
SELECT h.event, h.outbox_id = o.id AS same_event, h.detail = o.detail AS same_detail, h.amount
FROM public.rl_heard h JOIN paynotify_outbox o ON o.notify_id = h.detail->'payload'->>'id'
ORDER BY h.outbox_id;
\c - rl_relay
SET search_path = pay, public;
SELECT paynotify_relay_fanout();
\c - :su
SET search_path = pay, public;
SELECT d.event, d.order_no, d.body::jsonb - 'id' - 'occurred_at' AS body
FROM paynotify_delivery d WHERE d.endpoint_id = :notes ORDER BY d.outbox_id;
-- a delivery of no order waiting for its retry holds back no later event
-- of no order (one of an order would wait: RL-SEQ below)
UPDATE paynotify_delivery SET attempts = 1, last_error = 'Timeout was reached',
	last_attempt_at = now(), next_attempt_at = now() + '1 hour'
WHERE endpoint_id = :notes AND body::jsonb->>'notify_id' = 'evt_rl_n1';
SELECT paynotify_relay_fanout();
\c - rl_relay
SET search_path = pay, public;
BEGIN;
SELECT body::jsonb->>'notify_id' AS claimable FROM paynotify_relay_claim(10) ORDER BY 1;
ROLLBACK;
\c - :su
SET search_path = pay, public;
SELECT t.rl_note('evt_rl_n4', 'customer.updated', '{"id": "cus_1", "object": "customer"}');
\c - rl_relay
SET search_path = pay, public;
SELECT paynotify_relay_fanout();
BEGIN;
SELECT body::jsonb->>'notify_id' AS claimable FROM paynotify_relay_claim(10) ORDER BY 1;
ROLLBACK;
\c - :su
SET search_path = pay, public;
DELETE FROM paynotify_hook WHERE event = 'notification';
DROP FUNCTION t.rl_note(text, text, jsonb);
DROP FUNCTION public.rl_note_hook(jsonb);
DROP TABLE public.rl_heard;
SELECT paynotify_revoke('rl_hooker', 'admin');
DROP ROLE rl_hooker;
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_drop_endpoint(:notes);

-- 1.4: leases.  paynotify_relay_lease(n, request_timeout_ms) commits its
-- claims at once: each leased delivery's next_attempt_at is the lease's end
-- (2 * the request timeout + 10 s), so that no claim takes it before then;
-- an endpoint gets at most its max_in_flight less its leases in flight;
-- a result is recorded only where the delivery still holds the lease given.
SELECT paynotify_add_endpoint('http://127.0.0.1:8080/lease', 'whsec_' || repeat('H', 32),
	channels => '{ls}', max_in_flight => 2) AS ls \gset
SELECT paynotify_alter_endpoint(:erp, enabled => false);
-- the operator neither leases nor reports
SELECT * FROM paynotify_relay_lease(1, 1000);
SELECT paynotify_relay_report('{}', '{}', '{}', '{}');
\c - :su
SET search_path = pay, public;
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount, order_seq) VALUES
	('paid', 'ls', 'LS-1', 'n_l1', 100, 1), ('refunded', 'ls', 'LS-1', 'n_l2', 40, 2),
	('paid', 'ls', 'LS-2', 'n_l3', 100, 1), ('paid', 'ls', 'LS-3', 'n_l4', 100, 1);
SELECT paynotify_relay_fanout();
-- due in this order: LS-1's refund (it waits for its payment), LS-1, LS-2, LS-3
UPDATE paynotify_delivery SET next_attempt_at = now() - CASE body::jsonb->>'notify_id'
	WHEN 'n_l2' THEN '4 min' WHEN 'n_l1' THEN '3 min' WHEN 'n_l3' THEN '2 min' ELSE '1 min' END::interval
WHERE endpoint_id = :ls;
CREATE FUNCTION public.ls_state() RETURNS TABLE (o text, e text, attempts int, last_status int,
		delivered boolean, leased boolean, due boolean) LANGUAGE sql AS $$
	SELECT order_no, event, attempts, last_status, delivered_at IS NOT NULL, lease IS NOT NULL,
		next_attempt_at <= clock_timestamp()
	FROM pay.paynotify_delivery WHERE channel = 'ls' ORDER BY order_no, order_seq $$ SECURITY DEFINER;
-- what the relay leased, kept across its backends
CREATE TABLE public.ls_claims AS SELECT ''::text AS claim, * FROM paynotify_relay_lease(0, 1000);
GRANT SELECT, INSERT ON public.ls_claims TO rl_relay;
CREATE VIEW public.l1 AS SELECT * FROM public.ls_claims WHERE claim = 'l1';
CREATE VIEW public.l2 AS SELECT * FROM public.ls_claims WHERE claim = 'l2';
CREATE VIEW public.l3 AS SELECT * FROM public.ls_claims WHERE claim = 'l3';
GRANT SELECT ON public.l1, public.l2, public.l3 TO rl_relay;
\c - rl_relay
SET search_path = pay, public;
-- a timeout out of the relay's range, a negative count
SELECT * FROM paynotify_relay_lease(10, 99);
SELECT * FROM paynotify_relay_lease(10, 600001);
SELECT * FROM paynotify_relay_lease(10, NULL);
SELECT * FROM paynotify_relay_lease(-1, 1000);
-- the endpoint's two slots: the first two due, one token
INSERT INTO public.ls_claims SELECT 'l1', * FROM paynotify_relay_lease(10, 1000);
SELECT body::jsonb->>'order_no' AS o, body::jsonb->>'event' AS e, attempts, url, max_in_flight
FROM l1 ORDER BY 1, 2;
SELECT count(DISTINCT lease) AS tokens, bool_and(lease IS NOT NULL) AS leased FROM l1;
-- committed (this is a fresh backend): leased until 12 s from now, not due
\c - :su
SET search_path = pay, public;
SELECT order_no, leased_until = next_attempt_at AS until_is_next,
	leased_until - clock_timestamp() BETWEEN '5 s' AND '12 s' AS lease_12s
FROM paynotify_delivery WHERE lease IS NOT NULL ORDER BY order_no;
\c - rl_relay
SET search_path = pay, public;
-- a second claimer: the endpoint is full (its leases count, whoever holds them)
SELECT count(*) AS second_claimer FROM paynotify_relay_lease(10, 1000);
-- a relay of 1.3 (a row-lock claim) skips the leased ones too
BEGIN;
SELECT body::jsonb->>'order_no' AS old_claim FROM paynotify_relay_claim(10);
ROLLBACK;
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_alter_endpoint(:ls, max_in_flight => 10);
\c - rl_relay
SET search_path = pay, public;
-- room again: LS-3; LS-1's refund waits for its leased payment
INSERT INTO public.ls_claims SELECT 'l2', * FROM paynotify_relay_lease(10, 1000);
SELECT body::jsonb->>'order_no' AS o, body::jsonb->>'event' AS e,
	lease <> (SELECT min(lease) FROM l1) AS new_token FROM l2;
-- results: LS-1 delivered; LS-2 reported with another claim's token (nothing)
SELECT paynotify_relay_report(array_agg(delivery_id), '{200}', '{NULL}', array_agg(lease))
FROM l1 WHERE body::jsonb->>'order_no' = 'LS-1';
SELECT paynotify_relay_report(array_agg(delivery_id), '{200}', '{NULL}', (SELECT array_agg(lease) FROM l2))
FROM l1 WHERE body::jsonb->>'order_no' = 'LS-2';
-- LS-3 not attempted (the relay stopped first): due again at once, attempts unchanged
SELECT paynotify_relay_report(array_agg(delivery_id), '{NULL}', '{NULL}', array_agg(lease)) FROM l2;
SELECT * FROM public.ls_state();
-- LS-1's refund is due now that its payment is delivered; LS-3 again
SELECT body::jsonb->>'order_no' AS o, body::jsonb->>'event' AS e
FROM paynotify_relay_lease(10, 1000) ORDER BY 1, 2;
-- LS-2's relay hangs: its lease ends, and LS-2 is due again for a new claim
\c - :su
SET search_path = pay, public;
UPDATE paynotify_delivery SET next_attempt_at = now() - '1 s'::interval, leased_until = now() - '1 s'::interval
WHERE channel = 'ls' AND order_no = 'LS-2';
\c - rl_relay
SET search_path = pay, public;
INSERT INTO public.ls_claims SELECT 'l3', * FROM paynotify_relay_lease(10, 1000);
SELECT body::jsonb->>'order_no' AS o, lease <> (SELECT min(lease) FROM l1) AS new_token FROM l3;
-- the hung relay's late report is stale: nothing recorded; the new holder's is
SELECT paynotify_relay_report(array_agg(delivery_id), '{500}', '{NULL}', array_agg(lease))
FROM l1 WHERE body::jsonb->>'order_no' = 'LS-2';
SELECT paynotify_relay_report(array_agg(delivery_id), '{503}', '{NULL}', array_agg(lease)) FROM l3;
-- a report for a delivery delivered already changes nothing
SELECT paynotify_relay_report(array_agg(delivery_id), '{500}', '{NULL}', array_agg(lease))
FROM l1 WHERE body::jsonb->>'order_no' = 'LS-1';
SELECT * FROM public.ls_state();
\c - :su
SET search_path = pay, public;
SELECT order_no, last_error, next_attempt_at > now() AS retry_later, leased_until, lease
FROM paynotify_delivery WHERE channel = 'ls' AND order_no = 'LS-2';
-- A relay of 1.3 during the upgrade: its three-argument report leaves a
-- delivery a live lease holds alone (LS-3, leased again above)...
SELECT paynotify_relay_report(array_agg(delivery_id), '{200}', '{NULL}') AS old_report_leased FROM l2;
-- ...but once that lease has ended, a 1.3 claim takes it and its report is
-- recorded, the ended lease cleared (no longer counted in flight)
UPDATE paynotify_delivery SET next_attempt_at = now() - '1 s'::interval, leased_until = now() - '1 s'::interval
WHERE channel = 'ls' AND order_no = 'LS-3';
\c - rl_relay
SET search_path = pay, public;
BEGIN;
SELECT body::jsonb->>'order_no' AS old_claim FROM paynotify_relay_claim(10)
WHERE body::jsonb->>'order_no' = 'LS-3';
SELECT paynotify_relay_report(array_agg(delivery_id), '{500}', '{NULL}') AS old_report_ended FROM l2;
COMMIT;
-- the ended lease's holder reports late: nothing
SELECT paynotify_relay_report(array_agg(delivery_id), '{200}', '{NULL}', array_agg(lease)) AS stale FROM l2;
\c - :su
SET search_path = pay, public;
SELECT order_no, attempts, last_status, delivered_at IS NOT NULL AS delivered, lease, leased_until
FROM paynotify_delivery WHERE channel = 'ls' AND order_no = 'LS-3';
DROP FUNCTION public.ls_state();
DROP VIEW public.l1, public.l2, public.l3;
DROP TABLE public.ls_claims;
\c - rl_op
SET search_path = pay, public;
SELECT paynotify_drop_endpoint(:ls);
SELECT paynotify_alter_endpoint(:erp, enabled => true);

-- purge and drop
SELECT paynotify_purge_deliveries('1 day');
SELECT paynotify_purge_deliveries('-1 day');
SELECT paynotify_purge_deliveries(NULL);
SELECT paynotify_purge_deliveries('0');
SELECT paynotify_drop_endpoint(:off);
SELECT paynotify_drop_endpoint(:off);
SELECT paynotify_drop_endpoint(:erp);
SELECT count(*) AS deliveries_left FROM paynotify_delivery;

\c - :su
SET search_path = pay, public;
DELETE FROM paynotify_endpoint;
DELETE FROM paynotify_channel WHERE name = 'rl';
DELETE FROM public.orders WHERE order_no LIKE 'RL-%';
DROP FUNCTION t.rl_pay(text, text);
SELECT paynotify_revoke('rl_op', 'admin');
SELECT paynotify_revoke('rl_relay', 'relay');
DROP OWNED BY rl_op, rl_relay;
DROP ROLE rl_op, rl_relay;
