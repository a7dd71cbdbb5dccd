-- Expectations (1.4): the application says which orders it sent to a
-- gateway; a payment recorded settles every expectation of its order, a
-- close the one of its channel.
SET search_path = public;
SELECT t.configure('stripe_payment_intent_succeeded_valid', 'ex_st');
SELECT t.configure('stripe_payment_intent_succeeded_valid', 'ex_st2');
SELECT pay.paynotify_alter_channel('ex_st2', '{"query_after_s": 60}');
SELECT t.set_order('EX-1', 'pending', 500), t.set_order('EX-2', 'pending', 500),
	   t.set_order('EX-3', 'pending', 500), t.set_order('EX-4', 'pending', 500);

-- EX-1: expected on two channels, then paid on one: both settled
SELECT order_no, channel, round(extract(epoch FROM expires_at - now()) / 60) AS expires_in_min, queries, settled_by,
	   next_query_at - expected_at AS query_after
FROM pay.paynotify_expect('ex_st', 'EX-1', now() + interval '2 hours');
SELECT order_no, channel, next_query_at - expected_at AS query_after
FROM pay.paynotify_expect('ex_st2', 'EX-1');
-- called again: expires_at moves later, never earlier
SELECT round(extract(epoch FROM expires_at - now()) / 60) AS expires_in_min FROM pay.paynotify_expect('ex_st', 'EX-1', now() + interval '3 hours');
SELECT round(extract(epoch FROM expires_at - now()) / 60) AS expires_in_min FROM pay.paynotify_expect('ex_st', 'EX-1', now() + interval '1 hour');
SELECT t.stripe_ledger('ex_st', 'EX-1', 'evt_ex_1', 'pi_ex_1', 500);
SELECT order_no, channel, settled_by, settled_notify_id, settled_at IS NOT NULL AS settled
FROM pay.paynotify_expectation WHERE order_no = 'EX-1' ORDER BY channel;
-- settled stays settled: a later call changes nothing
SELECT settled_by, round(extract(epoch FROM expires_at - now()) / 60) AS expires_in_min FROM pay.paynotify_expect('ex_st', 'EX-1', now() + interval '9 hours');

-- EX-2: the notification came before the expectation: settled at once
SELECT t.stripe_ledger('ex_st', 'EX-2', 'evt_ex_2', 'pi_ex_2', 500);
SELECT settled_by, settled_notify_id FROM pay.paynotify_expect('ex_st', 'EX-2');

-- EX-3: closed on ex_st2 (payment_intent.canceled): settles that channel's only
SELECT (pay.paynotify_expect('ex_st', 'EX-3')).channel, (pay.paynotify_expect('ex_st2', 'EX-3')).channel;
SELECT outcome FROM t.stripe('ex_st2', jsonb_build_object('id', 'evt_ex_3c', 'object', 'event',
	'type', 'payment_intent.canceled', 'livemode', false, 'data', jsonb_build_object('object',
	jsonb_build_object('id', 'pi_ex_3', 'object', 'payment_intent', 'amount', 500,
		'currency', 'usd', 'metadata', jsonb_build_object('order_id', 'EX-3'))))::text,
	ARRAY[t.secret(1)]);
SELECT channel, settled_by, settled_notify_id FROM pay.paynotify_expectation
WHERE order_no = 'EX-3' ORDER BY channel;
SELECT status FROM public.orders WHERE order_no = 'EX-3';

-- EX-4: a payment refused as an anomaly (wrong amount) records no payment
-- and settles nothing: it is still looked up
SELECT (pay.paynotify_expect('ex_st', 'EX-4')).order_no;
SELECT t.stripe_ledger('ex_st', 'EX-4', 'evt_ex_4', 'pi_ex_4', 499);
SELECT settled_at IS NULL AS unsettled FROM pay.paynotify_expectation WHERE order_no = 'EX-4';

-- bad input: a precise SQLSTATE, nothing written
\set VERBOSITY sqlstate
SELECT pay.paynotify_expect('no_such', 'EX-5');
SELECT pay.paynotify_expect('ex_st', '');
SELECT pay.paynotify_expect(NULL, 'EX-5');
SELECT pay.paynotify_expect('ex_st', NULL);
-- an order number no gateway could be asked about, a time past or endless
SELECT pay.paynotify_expect('ex_st', 'EX-5&method=alipay.trade.refund');
SELECT pay.paynotify_expect('ex_st', 'EX/../5');
SELECT pay.paynotify_expect('ex_st', repeat('5', 129));
-- (at the bound: taken, then taken back)
SELECT length((pay.paynotify_expect('ex_st', repeat('5', 128))).order_no);
DELETE FROM pay.paynotify_expectation WHERE order_no = repeat('5', 128);
SELECT pay.paynotify_expect('ex_st', 'EX-5', now() - interval '1 second');
SELECT pay.paynotify_expect('ex_st', 'EX-5', 'infinity');
SELECT pay.paynotify_alter_channel('ex_st2', '{"query_after_s": 4}');
SELECT pay.paynotify_alter_channel('ex_st2', '{"query_after_s": "x"}');
\set VERBOSITY default
SELECT count(*) FROM pay.paynotify_expectation WHERE order_no = 'EX-5';

-- who may: operators, and a role the DBA grants EXECUTE (the
-- application's); not the handler capacity, which serves the internet
CREATE ROLE ex_shim LOGIN;
CREATE ROLE ex_app LOGIN;
CREATE ROLE ex_nobody LOGIN;
SELECT pay.paynotify_grant('ex_shim', 'handler');
GRANT USAGE ON SCHEMA pay TO ex_app;
GRANT EXECUTE ON FUNCTION pay.paynotify_expect(text, text, timestamptz) TO ex_app;
SET ROLE ex_shim;
SELECT pay.paynotify_expect('ex_st', 'EX-6');
RESET ROLE;
SET ROLE ex_app;
SELECT order_no, settled_by FROM pay.paynotify_expect('ex_st', 'EX-6');
SELECT count(*) FROM pay.paynotify_expectation;
RESET ROLE;
SET ROLE ex_nobody;
SELECT pay.paynotify_expect('ex_st', 'EX-7');
RESET ROLE;
SELECT pay.paynotify_revoke('ex_shim', 'handler');
REVOKE ALL ON FUNCTION pay.paynotify_expect(text, text, timestamptz) FROM ex_app;
REVOKE ALL ON SCHEMA pay FROM ex_app;
DROP ROLE ex_shim, ex_app, ex_nobody;

-- paynotify_query_order: an operator has the order asked about now
SELECT t.set_order('EX-8', 'pending', 500);
SELECT (pay.paynotify_expect('ex_st', 'EX-8', now() + interval '1 hour')).order_no;
-- a day later: expired
UPDATE pay.paynotify_expectation SET expires_at = now() - interval '1 day' WHERE order_no = 'EX-8';
SELECT order_no, channel, next_query_at <= now() AS due_now, expires_at, settled_by
FROM pay.paynotify_query_order('ex_st', 'EX-8');
-- settled by a close: opened again, due now
SELECT order_no, channel, next_query_at <= now() AS due_now, settled_by
FROM pay.paynotify_query_order('ex_st2', 'EX-3');
-- settled by a payment: nothing to ask, returned as it is
SELECT order_no, settled_by, settled_notify_id, next_query_at <= now() AS due_now
FROM pay.paynotify_query_order('ex_st', 'EX-1');
-- none registered: registered, due now
SELECT order_no, channel, next_query_at <= now() AS due_now FROM pay.paynotify_query_order('ex_st', 'EX-9');
\set VERBOSITY sqlstate
SELECT pay.paynotify_query_order('no_such', 'EX-9');
SELECT pay.paynotify_query_order('ex_st', '');
\set VERBOSITY default
-- operators only: the handler may not
CREATE ROLE ex_shim2 LOGIN;
SELECT pay.paynotify_grant('ex_shim2', 'handler');
SET ROLE ex_shim2;
SELECT pay.paynotify_query_order('ex_st', 'EX-9');
RESET ROLE;
SELECT pay.paynotify_revoke('ex_shim2', 'handler');
DROP ROLE ex_shim2;
-- the next tests claim what is due: nothing of these
DELETE FROM pay.paynotify_expectation WHERE order_no LIKE 'EX-%';
