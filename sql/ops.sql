-- Operations (1.1): trace, per-delivery history, retry, purge, stats and
-- anomaly resolution, called by an operator (given the admin capacity)
-- in a fresh backend, as a real installation's operators do.
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;
SET client_min_messages = warning;
-- the failures the tests before this one left are not this test's: dated
-- in the future, so that no window of paynotify_retry_failed here reaches
-- them, however long those tests or this one take
UPDATE pay.payment_notify_log SET last_seen = now() + interval '100 years'
	WHERE status = 'failed';

SELECT paynotify_add_channel('op', 'stripe', '{}');
SELECT paynotify_add_key('op', 'secret_1', t.secret(1));
-- a Stripe event for an order: pay, refund (all of it)
CREATE FUNCTION t.op_evt(evt text, ord text, kind text DEFAULT 'pay') RETURNS text
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', evt, 'object', 'event', 'created', 1767300000,
		'type', CASE kind WHEN 'pay' THEN 'payment_intent.succeeded' ELSE 'charge.refunded' END,
		'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || ord,
			'payment_intent', 'pi_' || ord, 'amount', 100, 'amount_received', 100,
			'amount_refunded', 100, 'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text
$$;
-- delivered as the shim does, with the client address it passes
CREATE FUNCTION t.op(evt text, ord text, kind text DEFAULT 'pay', amount bigint DEFAULT 100) RETURNS text
	LANGUAGE plpgsql AS $$
DECLARE
	body text := replace(t.op_evt(evt, ord, kind), '"amount": 100,', format('"amount": %s,', amount));
	r record;
BEGIN
	PERFORM set_config('paynotify.now', '1767300002', false);
	SELECT * INTO r FROM pay.paynotify_handle('op', jsonb_build_object(
		'content-type', 'application/json',
		'stripe-signature', 't=1767300000,v1=' || t.hmac_sha256(convert_to(t.secret(1), 'UTF8'),
			convert_to('1767300000.' || body, 'UTF8')),
		'x-paynotify-client', '203.0.113.7'), body);
	PERFORM set_config('paynotify.now', '0', false);
	RETURN r.outcome;
END
$$;

CREATE ROLE op_admin LOGIN;		-- an operator
CREATE ROLE op_nobody LOGIN;		-- anyone else
SELECT paynotify_grant('op_admin', 'admin');
GRANT USAGE ON SCHEMA pay TO op_nobody;

-- traffic: a payment delivered three times, the last with another payload
-- (an anomaly); a payment for an order that does not exist yet (failed);
-- a refund that arrives before its payment (parked); the guard lets the
-- application ship an order
SET paynotify.delivery_history = 'all';
INSERT INTO public.orders VALUES ('OP-1', 'pending', 100), ('OP-3', 'pending', 100);
SELECT t.op('evt_op_1', 'OP-1') AS first, t.op('evt_op_1', 'OP-1') AS again,
	t.op('evt_op_1', 'OP-1', 'pay', 99) AS other_payload;
SELECT t.op('evt_op_2', 'OP-2') AS missing_order;
SELECT t.op('evt_op_3r', 'OP-3', 'refund') AS refund_first;
UPDATE public.orders SET status = 'shipped' WHERE order_no = 'OP-1';
-- failures only: an acknowledged delivery adds no row, a failed one does
SET paynotify.delivery_history = 'failures';
SELECT t.op('evt_op_1', 'OP-1') AS duplicate, t.op('evt_op_2', 'OP-2') AS still_missing;
RESET paynotify.delivery_history;
SELECT t.op('evt_op_1', 'OP-1') AS not_recorded;
SELECT outcome, http_status, client, count(*) FROM paynotify_delivery_history WHERE channel = 'op'
	GROUP BY 1, 2, 3 ORDER BY 1, 2;

-- Who may: only the admin capacity's holders (and superusers)
\c - op_nobody
\set VERBOSITY terse
SET search_path = pay, public;
SELECT * FROM paynotify_trace('op', 'evt_op_1');
SELECT * FROM paynotify_trace_order('OP-1');
SELECT * FROM paynotify_retry('op', 'evt_op_2');
SELECT * FROM paynotify_retry_failed('1 hour');
SELECT * FROM paynotify_purge('30 days');
SELECT * FROM paynotify_resolve_anomaly(1, 'x');
SELECT * FROM paynotify_stats;

\c - op_admin
\set VERBOSITY terse
SET search_path = pay, public;

-- 1. What happened to notification evt_op_1: three deliveries, the third
-- with another payload (its hash differs), the anomaly, the payment, the
-- outbox event, paynotify's move of the order
SELECT kind, notify_id, detail->>'outcome' AS outcome, detail->>'http_status' AS http,
	detail->>'client' AS client,
	(detail->>'payload_sha256') = (SELECT encode(sha256(convert_to(payload::text, 'UTF8')), 'hex')
		FROM payment_notify_log WHERE channel = 'op' AND notify_id = 'evt_op_1') AS same_payload,
	detail - 'payload' - 'payload_sha256' - 'notice' - 'first_delivery' - 'last_delivery'
		- 'processed_at' - 'resolved_at' - 'id' - 'client' - 'outcome' - 'http_status' - 'by' AS detail
FROM paynotify_trace('op', 'evt_op_1');
-- 2. What happened to order OP-1: the same, and the application's move
SELECT kind, notify_id, detail->>'from' AS from_state, detail->>'to' AS to_state,
	detail->>'source' AS source, detail->>'status' AS status
FROM paynotify_trace_order('OP-1');
SELECT count(*) AS nothing FROM paynotify_trace('op', 'no_such_id');
SELECT * FROM paynotify_trace(NULL, 'evt_op_1');
SELECT * FROM paynotify_trace_order(NULL);

-- 3. What is failing now, and since when
SELECT channel, notifications, succeeded, anomaly, parked, failed, deliveries, duplicate_ratio,
	oldest_failed_seconds >= 0 AS failed_age, oldest_parked_seconds >= 0 AS parked_age,
	anomalies_24h, anomalies_unresolved, outbox_backlog
FROM paynotify_stats WHERE channel = 'op';
SELECT notify_id, status, error_msg, notice->>'order_no' AS stored_notice_for
FROM payment_notify_log WHERE channel = 'op' AND status IN ('failed', 'parked') ORDER BY 1;

-- 4. Replay: a dry run says what would happen and changes nothing
SELECT * FROM paynotify_retry('op', 'evt_op_2', dry_run => true);
\c - :su
\set VERBOSITY terse
INSERT INTO public.orders VALUES ('OP-2', 'pending', 100);
-- a hook registered by another role runs as that role in a replay too
CREATE ROLE op_hooker LOGIN;
SELECT pay.paynotify_grant('op_hooker', 'admin');
CREATE SCHEMA op_hooks AUTHORIZATION op_hooker;
\c - op_hooker
CREATE TABLE op_hooks.calls (who text, order_no text);
CREATE FUNCTION op_hooks.on_paid(e jsonb) RETURNS void LANGUAGE sql
	AS $$ INSERT INTO op_hooks.calls VALUES (current_user, e->'notice'->>'order_no') $$;
SELECT pay.paynotify_on('paid', 'op_hooks.on_paid(jsonb)');
GRANT USAGE ON SCHEMA op_hooks TO op_admin;
GRANT SELECT ON op_hooks.calls TO op_admin;
\c - op_admin
\set VERBOSITY terse
SET search_path = pay, public;
SELECT * FROM paynotify_retry('op', 'evt_op_2', dry_run => true);
SELECT status, attempts, delivery_count,
	(SELECT count(*) FROM payment_record WHERE channel = 'op' AND notify_id = 'evt_op_2') AS payments
FROM payment_notify_log WHERE channel = 'op' AND notify_id = 'evt_op_2';
SELECT count(*) AS hook_calls_after_dry_run FROM op_hooks.calls;
-- the real thing, as a redelivery would have done it; once
SELECT * FROM paynotify_retry('op', 'evt_op_2');
SELECT * FROM op_hooks.calls;
SELECT status, attempts, delivery_count, error_msg, notice,
	(SELECT count(*) FROM payment_record WHERE channel = 'op' AND notify_id = 'evt_op_2') AS payments
FROM payment_notify_log WHERE channel = 'op' AND notify_id = 'evt_op_2';
SELECT * FROM paynotify_retry('op', 'evt_op_2');
-- a parked refund stays parked until its payment is there
SELECT * FROM paynotify_retry('op', 'evt_op_3r');
-- bad input
SELECT * FROM paynotify_retry('nope', 'evt_op_2');
SELECT * FROM paynotify_retry('op', 'nope');
SELECT * FROM paynotify_retry('op', NULL);
SELECT * FROM paynotify_retry_failed(NULL);
SELECT * FROM paynotify_retry_failed('-1 hour');
SELECT * FROM paynotify_retry_failed('1 hour', 0);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM paynotify_retry('op', 'evt_op_3r');
ROLLBACK;

-- 5. A failure in batches: two failed payments, their orders created, one
-- batch of one, then the rest; a failure an hour old is not yet due
\c - :su
\set VERBOSITY terse
SELECT t.op('evt_op_4', 'OP-4') AS a, t.op('evt_op_5', 'OP-5') AS b, t.op('evt_op_6', 'OP-6') AS c;
UPDATE pay.payment_notify_log SET last_seen = now() - interval '2 days'
	WHERE channel = 'op' AND notify_id IN ('evt_op_4', 'evt_op_5');
INSERT INTO public.orders VALUES ('OP-4', 'pending', 100), ('OP-5', 'pending', 100);
\c - op_admin
\set VERBOSITY terse
SET search_path = pay, public;
SELECT * FROM paynotify_retry_failed('1 day', 1, dry_run => true);
SELECT * FROM paynotify_retry_failed('1 day', 1);
SELECT * FROM paynotify_retry_failed('1 day');
SELECT * FROM paynotify_retry_failed('1 day');
\c - :su
DELETE FROM pay.paynotify_hook WHERE handler = 'op_hooks.on_paid(jsonb)';
\c - op_admin
\set VERBOSITY terse
SET search_path = pay, public;

-- 6. Anomalies: resolved with a note, once
SELECT id AS anomaly_id FROM paynotify_anomaly WHERE channel = 'op' AND notify_id = 'evt_op_1' \gset
SELECT kind, resolved_by, note, resolved_at IS NOT NULL AS resolved
FROM paynotify_resolve_anomaly(:anomaly_id, 'same payment, amount typo in a test resend');
\set VERBOSITY sqlstate
SELECT * FROM paynotify_resolve_anomaly(:anomaly_id, 'again');
\set VERBOSITY terse
SELECT * FROM paynotify_resolve_anomaly(-1, 'no such');
SELECT * FROM paynotify_resolve_anomaly(:anomaly_id, ' ');
SELECT * FROM paynotify_resolve_anomaly(NULL, 'x');
SELECT anomalies_24h, anomalies_unresolved FROM paynotify_stats WHERE channel = 'op';

-- 7. Purge: never sooner than the gateway's retry horizon plus a day
\c - :su
\set VERBOSITY terse
UPDATE pay.payment_notify_log SET last_seen = now() - interval '5 days', first_seen = now() - interval '5 days'
	WHERE channel = 'op';
\c - op_admin
\set VERBOSITY terse
SET search_path = pay, public;
SET client_min_messages = notice;
SELECT gateway, paynotify_retention_floor(gateway) FROM (VALUES ('wxpay'), ('alipay'), ('stripe')) g(gateway);
SELECT * FROM paynotify_purge('30 days', only_channel => 'op');
SELECT channel, kept, notifications FROM paynotify_purge('1 hour', max_rows => 1, only_channel => 'op');
SELECT channel, kept, notifications FROM paynotify_purge('4 days', batch_size => 1, only_channel => 'op');
SELECT * FROM paynotify_purge('4 days', only_channel => 'op');
-- what is left: the anomaly's notification, the parked one, the failed one
SELECT notify_id, status FROM payment_notify_log WHERE channel = 'op' ORDER BY 1;
SELECT count(*) AS payments_kept FROM payment_record WHERE channel = 'op';
SELECT count(*) AS deliveries_kept FROM paynotify_delivery_history WHERE channel = 'op';
SELECT * FROM paynotify_purge(NULL);
SELECT * FROM paynotify_purge('4 days', 0);
RESET client_min_messages;

-- 8. The functions: SECURITY DEFINER only where needed, search_path pinned,
-- EXECUTE for the admin capacity's holders only: what the owner granted,
-- each holder of admin (paynotify_role) counted as "admin"
\c - :su
CREATE FUNCTION t.op_granted(acl aclitem[], owner oid) RETURNS text[] LANGUAGE sql AS $$
	SELECT ARRAY(SELECT DISTINCT a.privilege_type || ' to ' ||
		CASE WHEN EXISTS (SELECT FROM pay.paynotify_role r
						  WHERE r.role = a.grantee::regrole::text AND r.capacity = 'admin') THEN 'admin'
			 ELSE a.grantee::regrole::text END
		FROM aclexplode(acl) a WHERE a.grantee <> owner ORDER BY 1)
$$;
SELECT count(*) > 0 AS has_admins FROM pay.paynotify_role WHERE capacity = 'admin';
SELECT p.proname, p.prosecdef, p.proconfig, t.op_granted(p.proacl, p.proowner) AS granted
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify'
WHERE p.proname IN ('paynotify_trace', 'paynotify_trace_order', 'paynotify_trace_rows',
	'paynotify_retry', 'paynotify_retry_failed', 'paynotify_purge', 'paynotify_resolve_anomaly',
	'paynotify_retention_floor')
ORDER BY 1;
SELECT c.relname, t.op_granted(c.relacl, c.relowner) AS granted FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace
  AND c.relname IN ('paynotify_stats', 'paynotify_order_history', 'paynotify_delivery_history')
ORDER BY 1;
DROP FUNCTION t.op_granted(aclitem[], oid);

-- 9. A stored notice edited into something paynotify never wrote (an
-- unknown action, not an object, a text field of another type) is refused:
-- it is neither applied as some other event nor settled as ignored or
-- succeeded; the notification stays failed for its next delivery
SELECT t.op('evt_op_hx', 'OP-HX') AS missing_order;
UPDATE pay.payment_notify_log SET notice = jsonb_set(notice, '{action}', '99')
	WHERE channel = 'op' AND notify_id = 'evt_op_hx';
\c - op_admin
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = pay, public;
SELECT * FROM paynotify_retry('op', 'evt_op_hx', dry_run => true);
SELECT * FROM paynotify_retry('op', 'evt_op_hx');
\c - :su
UPDATE pay.payment_notify_log SET notice = '[1]' WHERE channel = 'op' AND notify_id = 'evt_op_hx';
\c - op_admin
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = pay, public;
SELECT * FROM paynotify_retry('op', 'evt_op_hx');
\c - :su
UPDATE pay.payment_notify_log SET notice = '{"action": 1, "order_no": 7}'
	WHERE channel = 'op' AND notify_id = 'evt_op_hx';
\c - op_admin
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = pay, public;
SELECT * FROM paynotify_retry('op', 'evt_op_hx');
SELECT status, attempts, error_msg IS NOT NULL AS has_error FROM payment_notify_log
	WHERE channel = 'op' AND notify_id = 'evt_op_hx';
-- the batch goes on past it (a warning), and past a failure of a library
-- older than 1.1, which has no notice
\c - :su
UPDATE pay.payment_notify_log SET notice = NULL, last_seen = now() - interval '1 hour'
	WHERE channel = 'op' AND notify_id = 'evt_op_6';
UPDATE pay.payment_notify_log SET last_seen = now() - interval '2 hours'
	WHERE channel = 'op' AND notify_id = 'evt_op_hx';
SELECT t.op('evt_op_hy', 'OP-HY') AS missing_order;
UPDATE pay.payment_notify_log SET last_seen = now() - interval '30 minutes'
	WHERE channel = 'op' AND notify_id = 'evt_op_hy';
INSERT INTO public.orders VALUES ('OP-HY', 'pending', 100);
\c - op_admin
\set VERBOSITY terse
SET search_path = pay, public;
SELECT * FROM paynotify_retry_failed('1 minute');
SELECT notify_id, status FROM payment_notify_log WHERE channel = 'op' AND status = 'failed' ORDER BY 1;
