-- Column types of real orders tables: text, varchar(n), char(n), integer,
-- bigint and uuid keys; text, varchar(n), char(n), enum, domain and
-- smallint status columns; status columns that do not hold paynotify's state
-- names, mapped with status_values.  Each case binds its table, pays one
-- order through a signed Stripe event, and reads the status back.
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;

SELECT paynotify_add_channel('ty', 'stripe', '{}');
SELECT paynotify_add_key('ty', 'secret_1', t.secret(1));
CREATE SCHEMA ty;
CREATE FUNCTION ty.event(evt text, type text, ord text, amount bigint) RETURNS text
	LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', evt, 'object', 'event', 'created', 1767300000,
		'type', type, 'livemode', false, 'data', jsonb_build_object('object',
			CASE type WHEN 'payment_intent.succeeded' THEN
				jsonb_build_object('id', 'pi_' || ord, 'object', 'payment_intent',
					'amount', amount, 'amount_received', amount, 'currency', 'usd',
					'metadata', jsonb_build_object('order_id', ord))
			ELSE
				jsonb_build_object('id', 'ch_' || ord, 'object', 'charge',
					'amount', amount, 'amount_refunded', amount, 'refunded', true,
					'payment_intent', 'pi_' || ord, 'currency', 'usd',
					'metadata', jsonb_build_object('order_id', ord))
			END))::text
$$;
CREATE FUNCTION ty.pay(evt text, ord text, amount bigint DEFAULT 500) RETURNS text
	LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('ty', ty.event(evt, 'payment_intent.succeeded', ord, amount),
		ARRAY[t.secret(1)])
$$;
CREATE FUNCTION ty.refund(evt text, ord text, amount bigint DEFAULT 500) RETURNS text
	LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('ty', ty.event(evt, 'charge.refunded', ord, amount),
		ARRAY[t.secret(1)])
$$;

CREATE TYPE ty.state AS ENUM ('pending', 'paid', 'cancelled', 'refunding', 'refunded',
	'shipped', 'received', 'completed');
CREATE TYPE ty.shop_state AS ENUM ('UNPAID', 'PAID', 'CLOSED', 'REFUNDING', 'REFUNDED',
	'SENT', 'DELIVERED', 'DONE');
CREATE DOMAIN ty.status_d AS text CHECK (VALUE ~ '^[a-z]+$');

-- One case: a table with these column types, one pending order, a guard,
-- the binding, a payment; the outcome, the status after it, any error.
CREATE FUNCTION ty.run(n int, key_type text, status_type text, key text, pending text,
		mapping jsonb, OUT outcome text, OUT status text, OUT error text)
	LANGUAGE plpgsql AS $$
DECLARE
	tbl text := 'ty.o' || n;
BEGIN
	EXECUTE format('CREATE TABLE %s (k %s PRIMARY KEY, st %s NOT NULL, amount bigint NOT NULL)',
		tbl, key_type, status_type);
	EXECUTE format('INSERT INTO %s VALUES (%L, %L, 500)', tbl, key, pending);
	EXECUTE format('CREATE TRIGGER guard BEFORE UPDATE ON %s'
		' FOR EACH ROW EXECUTE FUNCTION pay.paynotify_guard_transition()', tbl);
	PERFORM pay.paynotify_bind_orders(tbl::regclass, 'k', 'st', 'amount',
		status_values => mapping);
	outcome := ty.pay('evt_ty_' || n, key);
	EXECUTE format('SELECT st::text FROM %s', tbl) INTO status;
	SELECT l.error_msg INTO error FROM pay.payment_notify_log l
		WHERE l.channel = 'ty' AND l.notify_id = 'evt_ty_' || n;
END
$$;

SELECT n, key_type, status_type, r.*
FROM (VALUES
	(1, 'text', 'text', 'T-1', 'pending', NULL::jsonb),
	(2, 'varchar(20)', 'varchar(12)', 'VC-0000000002', 'pending', NULL),
	(3, 'char(16)', 'char(10)', 'CH-0000000003', 'pending', NULL),
	(4, 'integer', 'ty.state', '1004', 'pending', NULL),
	(5, 'bigint', 'ty.status_d', '9000000000000005', 'pending', NULL),
	(6, 'uuid', 'smallint', '6a1b2c3d-0000-4000-8000-000000000006', '0',
		'{"pending": 0, "paid": 1, "cancelled": 2, "refunding": 3, "refunded": 4,
		  "shipped": 5, "received": 6, "completed": 7}'),
	(7, 'text', 'varchar(16)', 'UP-7', 'WAIT_PAY',
		'{"pending": "WAIT_PAY", "paid": "PAID", "cancelled": "CLOSED"}'),
	(8, 'char(8)', 'ty.shop_state', 'EN-8', 'UNPAID',
		'{"pending": "UNPAID", "paid": "PAID", "cancelled": "CLOSED", "refunding": "REFUNDING",
		  "refunded": "REFUNDED", "shipped": "SENT", "received": "DELIVERED", "completed": "DONE"}'),
	(9, 'char(8)', 'char(8)', 'C8-9', 'P', '{"pending": "P", "paid": "OK"}')
) v(n, key_type, status_type, key, pending, mapping), ty.run(n, key_type, status_type, key, pending, mapping) r
ORDER BY n;

-- status_values is checked when bound
CREATE TABLE ty.small (order_no bigint PRIMARY KEY, status smallint NOT NULL, total bigint);
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '[0, 1]');
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '{"pending": "x"}');
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '{"pending": "01"}');
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '{"pending": 1.5}');
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '{"pending": [0]}');
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '{"pending": 0, "paid": 0}');
SELECT paynotify_bind_orders('ty.small', 'order_no', 'status', status_values => '{"pending": 70000}');
SELECT paynotify_bind_orders('ty.o8', 'k', 'st', status_values => '{"pending": "unpaid"}');
-- a state the mapping leaves out fails the step, clearly (retried)
SELECT paynotify_bind_orders('ty.o7', 'k', 'st', 'amount',
	status_values => '{"pending": "WAIT_PAY", "cancelled": "CLOSED"}');
ALTER TABLE ty.o7 DISABLE TRIGGER guard;
UPDATE ty.o7 SET st = 'WAIT_PAY';
ALTER TABLE ty.o7 ENABLE TRIGGER guard;
SELECT ty.pay('evt_ty_7b', 'UP-7');
SELECT error_msg FROM payment_notify_log WHERE channel = 'ty' AND notify_id = 'evt_ty_7b';

-- A smallint status column end to end, as the shop's own roles: the owner
-- binds it with integer codes, paynotify pays and refunds through them,
-- the application's updates are guarded in the table's values.
CREATE ROLE ty_shop LOGIN;
CREATE ROLE ty_app LOGIN;
SELECT paynotify_grant('ty_shop', 'admin');
CREATE SCHEMA tyshop AUTHORIZATION ty_shop;
\c - ty_shop
CREATE TABLE tyshop.orders (order_no bigint PRIMARY KEY,
	status smallint NOT NULL DEFAULT 0, total bigint NOT NULL);
INSERT INTO tyshop.orders (order_no, total) VALUES (7001, 1250), (7002, 990), (7003, 300);
GRANT USAGE ON SCHEMA tyshop TO ty_app;
GRANT SELECT, UPDATE ON tyshop.orders TO ty_app;
SELECT pay.paynotify_bind_orders('tyshop.orders', 'order_no', 'status', 'total',
	status_values => '{"pending": 0, "paid": 1, "cancelled": 2, "refunding": 3,
		"refunded": 4, "shipped": 5, "received": 6, "completed": 7}');
\c - :su
SET search_path = pay, public;
CREATE TRIGGER orders_guard BEFORE UPDATE ON tyshop.orders
	FOR EACH ROW EXECUTE FUNCTION pay.paynotify_guard_transition();
SELECT orders, key_column, status_column, amount_column, status_values->>'paid' AS paid
FROM paynotify_binding;
SELECT ty.pay('evt_sm_1', '7001', 1250);
SELECT ty.pay('evt_sm_2', '7002', 990);
SELECT ty.pay('evt_sm_3', '7003', 1);		-- wrong amount: an anomaly, still 0
SELECT ty.refund('evt_sm_4', '7001', 1250);
SELECT order_no, status FROM tyshop.orders ORDER BY 1;
SELECT order_no, amount FROM payment_record WHERE channel = 'ty' AND order_no LIKE '700%' ORDER BY 1;
SELECT notify_id, status, note FROM payment_notify_log
WHERE channel = 'ty' AND notify_id LIKE 'evt_sm_%' ORDER BY 1;
-- paynotify_transit speaks paynotify's states, the table gets its codes
SELECT paynotify_transit('7002', 'paid', 'shipped');
SELECT status FROM tyshop.orders WHERE order_no = 7002;
\c - ty_app
UPDATE tyshop.orders SET status = 6 WHERE order_no = 7002;		-- shipped → received
\set VERBOSITY default
UPDATE tyshop.orders SET status = 0 WHERE order_no = 7002;		-- received → pending
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
UPDATE tyshop.orders SET status = 9 WHERE order_no = 7002;		-- a code with no state
UPDATE tyshop.orders SET status = 2 WHERE order_no = 7003;		-- pending → cancelled
SELECT order_no, status FROM tyshop.orders ORDER BY 1;

-- back to the shared fixture's binding
\c - :su
SET search_path = pay, public;
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
DROP SCHEMA ty, tyshop CASCADE;
SELECT paynotify_revoke('ty_shop', 'admin');
DROP OWNED BY ty_shop, ty_app;
DROP ROLE ty_shop, ty_app;
