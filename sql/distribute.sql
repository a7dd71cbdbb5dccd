-- Version 1.2 on one server: every table a notification writes is keyed by
-- its order number (so that Citus can distribute it by order_no,
-- co-located with the orders table), a notification without an order is
-- recorded under order_no '', and paynotify_distribute() refuses to run
-- where Citus is not installed.
SET search_path = pay, public;
CREATE VIEW t.ext_tables AS
	SELECT c.oid, c.relname,
		EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'order_no'
				AND NOT a.attisdropped) AS has_order_no
	FROM pg_class c
	JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify'
	WHERE c.relkind = 'r';

-- The notification tables: order_no NOT NULL and in the primary key; the
-- unique keys without it are the contract's, payment_notify_log's
-- (channel, notify_id) and payment_record's (channel, trade_no), which
-- paynotify_distribute() replaces with plain indexes.
SELECT t.relname, a.attnotnull AS order_no_not_null,
	(SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k
	 WHERE k.conrelid = t.oid AND k.contype = 'p') AS primary_key,
	(SELECT string_agg(k.conname || ' ' || pg_get_constraintdef(k.oid), ', ') FROM pg_constraint k
	 WHERE k.conrelid = t.oid AND k.contype IN ('p', 'u') AND NOT k.conkey @> ARRAY[a.attnum])
		AS unique_without_order_no
FROM t.ext_tables t JOIN pg_attribute a ON a.attrelid = t.oid AND a.attname = 'order_no'
ORDER BY 1;
-- The configuration tables (reference tables on Citus): none has order_no.
SELECT relname FROM t.ext_tables WHERE NOT has_order_no ORDER BY 1;

-- A notification whose order is unknown: an event paynotify does not apply,
-- without an order number; its log row has order_no '' and its repeat is a
-- duplicate.
SELECT pay.paynotify_add_channel('ds', 'stripe');
SELECT pay.paynotify_add_key('ds', 's1', t.secret(1));
SELECT outcome FROM t.stripe('ds', '{"id": "evt_ds_1", "object": "event", "type": "customer.created", "livemode": false, "data": {"object": {"id": "cus_1"}}}', ARRAY[t.secret(1)]);
SELECT outcome FROM t.stripe('ds', '{"id": "evt_ds_1", "object": "event", "type": "customer.created", "livemode": false, "data": {"object": {"id": "cus_1"}}}', ARRAY[t.secret(1)]);
SELECT notify_id, order_no = '' AS no_order, status, delivery_count FROM payment_notify_log WHERE channel = 'ds';
-- a payment without an order number is an anomaly, recorded under '' too
SELECT outcome FROM t.stripe('ds', '{"id": "evt_ds_2", "object": "event", "type": "payment_intent.succeeded", "livemode": false, "data": {"object": {"id": "pi_ds", "amount": 100, "amount_received": 100, "currency": "usd"}}}', ARRAY[t.secret(1)]);
SELECT kind, order_no = '' AS no_order FROM paynotify_anomaly WHERE channel = 'ds';
SELECT notify_id, order_no = '' AS no_order, status FROM payment_notify_log WHERE channel = 'ds' ORDER BY 1;

-- One notification id under two orders (other signed content): the second
-- is never applied, whatever order it names (payload_differs_for_same_id).
SELECT t.set_order('DS-1', 'pending', 100), t.set_order('DS-2', 'pending', 100);
SELECT t.stripe_ledger('ds', 'DS-1', 'evt_ds_3', 'pi_ds1', 100);
SELECT t.stripe_ledger('ds', 'DS-2', 'evt_ds_3', 'pi_ds2', 100);
SELECT order_no, status FROM orders WHERE order_no IN ('DS-1', 'DS-2') ORDER BY 1;
SELECT notify_id, order_no, delivery_count FROM payment_notify_log WHERE notify_id = 'evt_ds_3';

-- paynotify_distribute() needs Citus: SQLSTATE 55000 and a hint.
DO $$
DECLARE
	st text;
	msg text;
	hint text;
BEGIN
	PERFORM pay.paynotify_distribute();
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
	RAISE NOTICE '% %', st, msg;
	RAISE NOTICE 'hint: %', hint;
END
$$;
-- ... and is for the extension's owner: not part of the admin capacity.
CREATE ROLE ds_op;
SELECT paynotify_grant('ds_op', 'admin');
SET ROLE ds_op;
SELECT * FROM pay.paynotify_distribute();
RESET ROLE;
SELECT paynotify_revoke('ds_op', 'admin');
DROP ROLE ds_op;

DELETE FROM paynotify_channel WHERE name = 'ds';
