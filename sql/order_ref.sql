-- The order a notification names is exactly the order it affects.  The
-- orders table's key column may normalise what is cast to it: varchar(32)
-- cuts a longer reference, char(n) pads and trims, uuid lowers its letters,
-- integers drop signs and zeros.  A reference that only normalises to a key
-- is no order (failed, retried, with the reason), never someone else's:
-- three references that all cut to one varchar(32) key paid it three times.
\set VERBOSITY terse
SET search_path = pay, public;

SELECT paynotify_add_channel('orf', 'stripe', '{}');
SELECT paynotify_add_key('orf', 'secret_1', t.secret(1));
CREATE SCHEMA orf;
-- a key column whose collation ignores case: its own = finds 'ORD-ABC'
CREATE COLLATION orf.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE FUNCTION orf.pay(evt text, ord text) RETURNS text
	LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('orf', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', 500, 'amount_received', 500,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)])
$$;

-- One key type: a table with one pending order keyed `key`, bound; each
-- of `near` (references that cast to that key) delivered, then `key`
-- itself.  Returns each delivery's outcome, the error's detail, the
-- payments and events recorded, and the order's status after it.
CREATE FUNCTION orf.run(n int, key_type text, key text, near text[])
	RETURNS TABLE (ref text, outcome text, error text, payments bigint, events bigint, status text)
	LANGUAGE plpgsql AS $$
DECLARE
	tbl text := 'orf.o' || n;
	r text;
	i int := 0;
BEGIN
	EXECUTE format('CREATE TABLE %s (k %s PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL)',
		tbl, key_type);
	EXECUTE format('INSERT INTO %s VALUES (%L, ''pending'', 500)', tbl, key);
	PERFORM pay.paynotify_bind_orders(tbl::regclass, 'k', 'st', 'amount');
	FOREACH r IN ARRAY near || key LOOP
		i := i + 1;
		ref := r;
		outcome := orf.pay(format('evt_orf_%s_%s', n, i), r);
		SELECT l.error_msg INTO error FROM pay.payment_notify_log l
			WHERE l.channel = 'orf' AND l.notify_id = format('evt_orf_%s_%s', n, i);
		SELECT count(*) INTO payments FROM pay.payment_record p WHERE p.channel = 'orf'
			AND p.notify_id LIKE format('evt\_orf\_%s\_%%', n);
		SELECT count(*) INTO events FROM pay.paynotify_outbox o WHERE o.channel = 'orf'
			AND o.notify_id LIKE format('evt\_orf\_%s\_%%', n);
		EXECUTE format('SELECT st FROM %s', tbl) INTO status;
		RETURN NEXT;
	END LOOP;
END
$$;

SELECT n, key_type, quote_literal(r.ref) AS ref, r.outcome, r.error, r.payments, r.events, r.status
FROM (VALUES
	(1, 'varchar(32)', 'ORDER-00000000000000000000000001',
		ARRAY['ORDER-00000000000000000000000001-x1', 'ORDER-00000000000000000000000001-x2']),
	(2, 'char(16)', 'CH-2', ARRAY['CH-2 ', 'CH-2      ']),
	(3, 'uuid', '6a1b2c3d-0000-4000-8000-00000000000a',
		ARRAY['6A1B2C3D-0000-4000-8000-00000000000A', '{6a1b2c3d-0000-4000-8000-00000000000a}',
			  '6a1b2c3d000040008000-00000000000a']),
	(4, 'integer', '7', ARRAY['007', '+7', ' 7']),
	(5, 'bigint', '9000000000000005', ARRAY['09000000000000005']),
	(6, 'text', 'T-6', ARRAY['T-6 ', 't-6']),
	(7, 'varchar(8)', 'V-7', ARRAY['V-7 ']),
	(8, 'text COLLATE orf.ci', 'ord-abc', ARRAY['ORD-ABC', 'Ord-Abc'])
) v(n, key_type, key, near), orf.run(n, key_type, key, near) r
ORDER BY n, r.ref = v.key, r.ref;

-- a repeat of a near reference, once the order is paid, is still no order
SELECT orf.pay('evt_orf_1_1', 'ORDER-00000000000000000000000001-x1');
SELECT count(*) AS payments FROM payment_record WHERE channel = 'orf' AND order_no LIKE 'ORDER-%';

-- paynotify_transit, the application's own call, matches exactly too
SELECT paynotify_bind_orders('orf.o4', 'k', 'st', 'amount');
SELECT paynotify_transit('007', 'paid', 'shipped') AS moved_007,
	   paynotify_transit('7', 'paid', 'shipped') AS moved_7;
SELECT st FROM orf.o4;

-- A key that is not unique: a table partitioned by month whose primary key
-- is (k, month) holds the same reference in two months.  A payment for it
-- pays neither (failed, with the reason; retried), records nothing and
-- emits nothing: one notification, one order.
CREATE TABLE orf.o9 (k text NOT NULL, month int NOT NULL, st text NOT NULL, amount bigint NOT NULL,
	PRIMARY KEY (k, month)) PARTITION BY LIST (month);
CREATE TABLE orf.o9_1 PARTITION OF orf.o9 FOR VALUES IN (1);
CREATE TABLE orf.o9_2 PARTITION OF orf.o9 FOR VALUES IN (2);
INSERT INTO orf.o9 VALUES ('H1', 1, 'pending', 500), ('H1', 2, 'pending', 500), ('H2', 1, 'pending', 500);
SELECT paynotify_bind_orders('orf.o9', 'k', 'st', 'amount');
SELECT orf.pay('evt_orf_9_1', 'H1') AS outcome;
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'orf' AND notify_id = 'evt_orf_9_1';
SELECT count(*) AS payments FROM payment_record WHERE channel = 'orf' AND order_no = 'H1';
SELECT count(*) AS events FROM paynotify_outbox WHERE channel = 'orf' AND order_no = 'H1';
-- the application's own move: the same refusal
SELECT paynotify_transit('H1', 'pending', 'cancelled');
-- The same reference paid in one month and pending in another: a payment
-- pays neither (the pending row is not this order alone), nor does the
-- application's move of the pending one.
INSERT INTO orf.o9 VALUES ('H3', 1, 'paid', 500), ('H3', 2, 'pending', 500);
SELECT orf.pay('evt_orf_9_3', 'H3') AS outcome;
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'orf' AND notify_id = 'evt_orf_9_3';
SELECT paynotify_transit('H3', 'pending', 'cancelled');
SELECT count(*) AS payments FROM payment_record WHERE channel = 'orf' AND order_no = 'H3';
-- Equal keys written differently: 3.0 in January, 3.00 pending in
-- February, in a table whose key is numeric: the key's own equality takes
-- them for one order, so the payment of "3.00" pays neither.
CREATE TABLE orf.o10 (k numeric NOT NULL, month int NOT NULL, st text NOT NULL, amount bigint NOT NULL,
	PRIMARY KEY (k, month)) PARTITION BY LIST (month);
CREATE TABLE orf.o10_1 PARTITION OF orf.o10 FOR VALUES IN (1);
CREATE TABLE orf.o10_2 PARTITION OF orf.o10 FOR VALUES IN (2);
INSERT INTO orf.o10 VALUES (3.0, 1, 'paid', 500), (3.00, 2, 'pending', 500), (4, 1, 'pending', 500);
SELECT paynotify_bind_orders('orf.o10', 'k', 'st', 'amount');
SELECT orf.pay('evt_orf_10_1', '3.00') AS outcome;
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'orf' AND notify_id = 'evt_orf_10_1';
SELECT orf.pay('evt_orf_10_2', '4') AS outcome;
SELECT k, month, st FROM orf.o10 ORDER BY k, month;
SELECT paynotify_bind_orders('orf.o9', 'k', 'st', 'amount');
-- a key that is there once still pays
SELECT orf.pay('evt_orf_9_2', 'H2') AS outcome;
SELECT k, month, st FROM orf.o9 ORDER BY k, month;

-- Where an index makes the key unique, a move does not count the key's
-- rows; an index that does not make it unique for the key's own equality
-- leaves the count in: each of these tables holds the reference twice,
-- once paid and once pending, and a payment pays neither.
-- A parent's primary key does not cover its inheritance children:
CREATE TABLE orf.o11 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TABLE orf.o11_child () INHERITS (orf.o11);
INSERT INTO orf.o11 VALUES ('I1', 'pending', 500);
INSERT INTO orf.o11_child VALUES ('I1', 'paid', 500);
SELECT paynotify_bind_orders('orf.o11', 'k', 'st', 'amount');
SELECT orf.pay('evt_orf_11_1', 'I1') AS outcome;
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'orf' AND notify_id = 'evt_orf_11_1';
SELECT k, st FROM orf.o11 ORDER BY st;
-- a unique index under another collation than the key column's:
CREATE TABLE orf.o12 (k text COLLATE orf.ci NOT NULL, st text NOT NULL, amount bigint NOT NULL);
CREATE UNIQUE INDEX ON orf.o12 (k COLLATE "C");
INSERT INTO orf.o12 VALUES ('ord-c', 'paid', 500), ('ORD-C', 'pending', 500);
SELECT paynotify_bind_orders('orf.o12', 'k', 'st', 'amount');
SELECT orf.pay('evt_orf_12_1', 'ORD-C') AS outcome;
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'orf' AND notify_id = 'evt_orf_12_1';
SELECT k, st FROM orf.o12 ORDER BY k COLLATE "C";
-- a deferred unique constraint, in the transaction that broke it:
CREATE TABLE orf.o13 (k text UNIQUE DEFERRABLE INITIALLY DEFERRED, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO orf.o13 VALUES ('D1', 'pending', 500);
SELECT paynotify_bind_orders('orf.o13', 'k', 'st', 'amount');
BEGIN;
INSERT INTO orf.o13 VALUES ('D1', 'paid', 500);
SELECT orf.pay('evt_orf_13_1', 'D1') AS outcome;
SELECT status, error_msg FROM payment_notify_log WHERE channel = 'orf' AND notify_id = 'evt_orf_13_1';
SELECT k, st FROM orf.o13 ORDER BY st;
ROLLBACK;
-- and once it holds, the key pays
SELECT orf.pay('evt_orf_13_2', 'D1') AS outcome;
SELECT k, st FROM orf.o13;

-- the fixture's binding again, for the tests after this one
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
