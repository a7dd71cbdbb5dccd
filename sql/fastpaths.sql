-- The shortcuts of a first delivery on one server hold only while the
-- indexes they rely on are as the extension made them; otherwise the full
-- statements run:
-- - the order's parked notifications are listed only when a probe of
--   payment_notify_log_parked (order_no WHERE status = 'parked') finds one;
-- - the log is read for the notification's id, and the payments for its
--   trade, only when a probe of payment_notify_log_notify (channel,
--   notify_id) or payment_record_trade (channel, trade_no) finds one;
-- - inside the business step, the log's and the payment's inserts run
--   without ON CONFLICT: a conflict on them rolls the step back and is
--   read as one (the row taken by another delivery, the trade recorded
--   for another order at the same time), whatever unique keys there are.
-- Last in the list: it changes the extension's indexes, and puts them back.
\set VERBOSITY terse
SET search_path = pay, public;
SELECT paynotify_add_channel('fp_s', 'stripe', '{}');
SELECT paynotify_add_key('fp_s', 's1', t.secret(1));
CREATE FUNCTION t.fp_stripe(ord text, id text, type text, obj jsonb, OUT outcome text) LANGUAGE sql AS $$
	SELECT s.outcome FROM t.stripe('fp_s', pg_catalog.jsonb_build_object('id', id, 'object', 'event',
		'type', type, 'livemode', false, 'data', pg_catalog.jsonb_build_object('object',
		obj || pg_catalog.jsonb_build_object('currency', 'usd', 'metadata',
			pg_catalog.jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)]) s
$$;
CREATE FUNCTION t.fp_refund_then_pay(ord text) RETURNS TABLE (refund text, payment text, status text)
	LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.orders (order_no, status, amount_fen) VALUES (ord, 'pending', 100);
	refund := t.fp_stripe(ord, 'evt_' || ord || '_r', 'charge.refunded',
		pg_catalog.jsonb_build_object('id', 'ch_' || ord, 'payment_intent', 'pi_' || ord, 'amount', 100,
			'amount_refunded', 100, 'refunds', '{"data": [{"id": "re_1"}]}'::jsonb));
	payment := t.fp_stripe(ord, 'evt_' || ord || '_p', 'payment_intent.succeeded',
		pg_catalog.jsonb_build_object('id', 'pi_' || ord, 'amount', 100, 'amount_received', 100));
	SELECT o.status INTO status FROM public.orders o WHERE o.order_no = ord;
	RETURN NEXT;
END
$$;
CREATE VIEW t.fp_log AS
	SELECT order_no, notify_id, status FROM pay.payment_notify_log WHERE channel = 'fp_s';

-- the parked index as created: a refund before its payment is parked, and
-- applied when the payment comes
SELECT * FROM t.fp_refund_then_pay('FP-1');
-- rebuilt with another predicate: the probe is not trusted, the list is read
DROP INDEX payment_notify_log_parked;
CREATE INDEX payment_notify_log_parked ON payment_notify_log (order_no) WHERE status = 'failed';
SELECT * FROM t.fp_refund_then_pay('FP-2');
-- rebuilt on another column
DROP INDEX payment_notify_log_parked;
CREATE INDEX payment_notify_log_parked ON payment_notify_log (notify_id) WHERE status = 'parked';
SELECT * FROM t.fp_refund_then_pay('FP-3');
-- no such index
DROP INDEX payment_notify_log_parked;
SELECT * FROM t.fp_refund_then_pay('FP-4');
-- a sequence by the index's name: nothing to probe, the list is read
CREATE SEQUENCE payment_notify_log_parked;
SELECT * FROM t.fp_refund_then_pay('FP-4S');
DROP SEQUENCE payment_notify_log_parked;
-- of another operator class: not probed, which would run the class's
-- comparison (here counting its calls); its "=" is not the list's, so the
-- list does not read it either
CREATE SEQUENCE t.fp_cmp_calls;
CREATE FUNCTION t.fp_cmp(a text, b text) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM pg_catalog.nextval('t.fp_cmp_calls');
	RETURN pg_catalog.bttextcmp(a, b);
END
$$;
CREATE OPERATOR t.== (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_catalog.texteq);
CREATE OPERATOR CLASS t.fp_text_ops FOR TYPE text USING btree AS
	OPERATOR 1 pg_catalog.<, OPERATOR 2 pg_catalog.<=, OPERATOR 3 t.==,
	OPERATOR 4 pg_catalog.>=, OPERATOR 5 pg_catalog.>, FUNCTION 1 t.fp_cmp(text, text);
CREATE INDEX payment_notify_log_parked ON payment_notify_log (order_no t.fp_text_ops) WHERE status = 'parked';
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FP-4C', 'pending', 100);
SELECT t.fp_stripe('FP-4C', 'evt_FP-4C_r', 'charge.refunded',
	'{"id": "ch_FP-4C", "payment_intent": "pi_FP-4C", "amount": 100, "amount_refunded": 100, "refunds": {"data": [{"id": "re_1"}]}}');
SELECT pg_catalog.setval('t.fp_cmp_calls', 1, false);
SELECT t.fp_stripe('FP-4C', 'evt_FP-4C_p', 'payment_intent.succeeded',
	'{"id": "pi_FP-4C", "amount": 100, "amount_received": 100}');
SELECT o.status, s.is_called AS compared FROM public.orders o, t.fp_cmp_calls s WHERE o.order_no = 'FP-4C';
DROP INDEX payment_notify_log_parked;
DROP OPERATOR FAMILY t.fp_text_ops USING btree;
CREATE INDEX payment_notify_log_parked ON payment_notify_log (order_no) WHERE status = 'parked';
SELECT * FROM t.fp_refund_then_pay('FP-5');
SELECT * FROM t.fp_log ORDER BY 1, 2;

-- the id's and the trade's probes: an id known under another order, with
-- other content, is never applied to this one (payload_differs_for_same_id),
-- and a trade recorded for another order never pays this one
-- (trade_of_another_order), whatever index has the keys' names
CREATE FUNCTION t.fp_known(ord text) RETURNS TABLE (order_no text, status text, trade_no text, kinds text)
	LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.orders (order_no, status, amount_fen)
		VALUES (ord || 'a', 'pending', 100), (ord || 'b', 'pending', 100), (ord || 'c', 'pending', 100);
	PERFORM t.fp_stripe(ord || 'a', 'evt_' || ord, 'payment_intent.succeeded',
		pg_catalog.jsonb_build_object('id', 'pi_' || ord, 'amount', 100, 'amount_received', 100));
	-- the same id for order b, another trade
	PERFORM t.fp_stripe(ord || 'b', 'evt_' || ord, 'payment_intent.succeeded',
		pg_catalog.jsonb_build_object('id', 'pi_' || ord || 'b', 'amount', 100, 'amount_received', 100));
	-- order a's trade for order c, another id
	PERFORM t.fp_stripe(ord || 'c', 'evt_' || ord || 'c', 'payment_intent.succeeded',
		pg_catalog.jsonb_build_object('id', 'pi_' || ord, 'amount', 100, 'amount_received', 100));
	RETURN QUERY SELECT o.order_no::text, o.status::text, p.trade_no,
		(SELECT pg_catalog.string_agg(a.kind, ',' ORDER BY a.kind) FROM pay.paynotify_anomaly a
			WHERE a.channel = 'fp_s' AND a.order_no = o.order_no)
		FROM public.orders o LEFT JOIN pay.payment_record p ON p.channel = 'fp_s' AND p.order_no = o.order_no
		WHERE o.order_no LIKE ord || '_' ORDER BY 1;
END
$$;
-- as created
SELECT * FROM t.fp_known('FK1');
-- the keys as partial unique indexes by the same names: they hold neither
-- row, which the statements still find
ALTER TABLE payment_notify_log DROP CONSTRAINT payment_notify_log_notify;
ALTER TABLE payment_record DROP CONSTRAINT payment_record_trade;
CREATE UNIQUE INDEX payment_notify_log_notify ON payment_notify_log (channel, notify_id) WHERE status = 'none';
CREATE UNIQUE INDEX payment_record_trade ON payment_record (channel, trade_no) WHERE amount < 0;
SELECT * FROM t.fp_known('FK2');
-- on the same columns in the other order
DROP INDEX payment_notify_log_notify, payment_record_trade;
CREATE INDEX payment_notify_log_notify ON payment_notify_log (notify_id, channel);
CREATE INDEX payment_record_trade ON payment_record (trade_no, channel);
SELECT * FROM t.fp_known('FK3');
-- sequences by the names
DROP INDEX payment_notify_log_notify, payment_record_trade;
CREATE SEQUENCE payment_notify_log_notify;
CREATE SEQUENCE payment_record_trade;
SELECT * FROM t.fp_known('FK5');
DROP SEQUENCE payment_notify_log_notify, payment_record_trade;
ALTER TABLE payment_notify_log ADD CONSTRAINT payment_notify_log_notify UNIQUE (channel, notify_id);
ALTER TABLE payment_record ADD CONSTRAINT payment_record_trade UNIQUE (channel, trade_no);
-- the id and the trade in child tables, which the statements read too
CREATE TABLE t.fp_log_child () INHERITS (payment_notify_log);
CREATE TABLE t.fp_record_child () INHERITS (payment_record);
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FK6x', 'paid', 100);
INSERT INTO t.fp_log_child (channel, notify_id, order_no, status, payload)
	VALUES ('fp_s', 'evt_FK6', 'FK6x', 'succeeded', '{}');
INSERT INTO t.fp_record_child (channel, trade_no, order_no, amount, notify_id)
	VALUES ('fp_s', 'pi_FK6', 'FK6x', 100, 'evt_FK6x');
SELECT * FROM t.fp_known('FK6');
DROP TABLE t.fp_log_child, t.fp_record_child;
-- (ANALYZE finds the children gone: the probes are used again below)
ANALYZE payment_notify_log, payment_record;
SELECT relname, relhassubclass FROM pg_class
	WHERE oid IN ('payment_notify_log'::regclass, 'payment_record'::regclass) ORDER BY 1;
-- a unique violation in the step that is not its own insert's conflict
-- (here a trigger's, on a table of the same name in another schema, and
-- on the log itself for another notification's key) is a failure like
-- any other, recorded with its own message: not a trade recorded for
-- another order, not a log row taken (which would answer busy, for ever)
CREATE TABLE t.payment_record (channel text, trade_no text, PRIMARY KEY (channel, trade_no));
INSERT INTO t.payment_record VALUES ('fp_s', 'pi_FK9');
CREATE FUNCTION t.fp_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO t.payment_record VALUES (NEW.channel, NEW.trade_no);
	RETURN NULL;
END
$$;
CREATE TRIGGER fp_copy AFTER INSERT ON payment_record FOR EACH ROW EXECUTE FUNCTION t.fp_copy();
INSERT INTO payment_notify_log (channel, notify_id, order_no, status)
	VALUES ('fp_s', 'evt_FK10_other', 'FK10', 'succeeded');
CREATE FUNCTION t.fp_log_twice() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO pay.payment_notify_log (channel, notify_id, order_no, status)
		VALUES ('fp_s', 'evt_FK10_other', 'FK10', 'succeeded');
	RETURN NULL;
END
$$;
CREATE TRIGGER fp_log_twice AFTER INSERT ON payment_notify_log FOR EACH ROW
	WHEN (NEW.notify_id = 'evt_FK10' AND NEW.status = 'succeeded') EXECUTE FUNCTION t.fp_log_twice();
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FK9', 'pending', 100), ('FK10', 'pending', 100);
SELECT t.fp_stripe('FK9', 'evt_FK9', 'payment_intent.succeeded', '{"id": "pi_FK9", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FK10', 'evt_FK10', 'payment_intent.succeeded', '{"id": "pi_FK10", "amount": 100, "amount_received": 100}');
SELECT l.order_no, l.status, l.error_msg LIKE 'duplicate key value violates unique constraint %' AS duplicate,
	o.status AS order_status
	FROM payment_notify_log l JOIN public.orders o ON o.order_no = l.order_no
	WHERE l.channel = 'fp_s' AND l.notify_id IN ('evt_FK9', 'evt_FK10') ORDER BY 1;
DROP TRIGGER fp_copy ON payment_record;
DROP TRIGGER fp_log_twice ON payment_notify_log;
DROP TABLE t.payment_record;
-- a unique index of the DBA's on payment_record (one payment per order): a
-- second trade paying the order violates it, which is no trade recorded
-- for another order at the same time: the step fails with the index's own
-- message
CREATE UNIQUE INDEX fp_one_payment ON payment_record (order_no) WHERE channel = 'fp_s';
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FK11', 'pending', 100);
SELECT t.fp_stripe('FK11', 'evt_FK11a', 'payment_intent.succeeded', '{"id": "pi_FK11a", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FK11', 'evt_FK11b', 'payment_intent.succeeded', '{"id": "pi_FK11b", "amount": 100, "amount_received": 100}');
SELECT notify_id, status, error_msg FROM payment_notify_log
	WHERE channel = 'fp_s' AND notify_id LIKE 'evt_FK11%' ORDER BY 1;
DROP INDEX fp_one_payment;

-- the unique keys dropped: a new notification is applied, a repeat
-- answered as one
ALTER TABLE payment_notify_log DROP CONSTRAINT payment_notify_log_notify;
ALTER TABLE payment_record DROP CONSTRAINT payment_record_trade;
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FP-6', 'pending', 100);
SELECT t.fp_stripe('FP-6', 'evt_FP-6', 'payment_intent.succeeded', '{"id": "pi_FP-6", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FP-6', 'evt_FP-6', 'payment_intent.succeeded', '{"id": "pi_FP-6", "amount": 100, "amount_received": 100}');
SELECT * FROM t.fp_refund_then_pay('FP-7');
-- and back
ALTER TABLE payment_notify_log ADD CONSTRAINT payment_notify_log_notify UNIQUE (channel, notify_id);
ALTER TABLE payment_record ADD CONSTRAINT payment_record_trade UNIQUE (channel, trade_no);
INSERT INTO public.orders (order_no, status, amount_fen) VALUES ('FP-8', 'pending', 100);
SELECT t.fp_stripe('FP-8', 'evt_FP-8', 'payment_intent.succeeded', '{"id": "pi_FP-8", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FP-8', 'evt_FP-8', 'payment_intent.succeeded', '{"id": "pi_FP-8", "amount": 100, "amount_received": 100}');
SELECT o.order_no, o.status, p.trade_no, p.amount FROM public.orders o
	LEFT JOIN payment_record p ON p.channel = 'fp_s' AND p.order_no = o.order_no
	WHERE o.order_no LIKE 'FP-%' ORDER BY 1;


-- a trade that paid another order is still that order's, whether this
-- order is pending or paid already by the application
INSERT INTO public.orders (order_no, status, amount_fen) VALUES
	('FP-9', 'pending', 100), ('FP-10', 'pending', 100), ('FP-11', 'paid', 100);
SELECT t.fp_stripe('FP-9', 'evt_FP-9', 'payment_intent.succeeded', '{"id": "pi_FP-9", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FP-10', 'evt_FP-10', 'payment_intent.succeeded', '{"id": "pi_FP-9", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('FP-11', 'evt_FP-11', 'payment_intent.succeeded', '{"id": "pi_FP-9", "amount": 100, "amount_received": 100}');
SELECT o.order_no, o.status, p.trade_no, a.kind FROM public.orders o
	LEFT JOIN payment_record p ON p.channel = 'fp_s' AND p.order_no = o.order_no
	LEFT JOIN paynotify_anomaly a ON a.channel = 'fp_s' AND a.order_no = o.order_no
	WHERE o.order_no IN ('FP-9', 'FP-10', 'FP-11') ORDER BY 1;
-- an order's move counts the rows with its key only where no unique index
-- on the key alone makes it one row: a table with such a key, then without
-- it and with the key twice (refused, counted), the same with a unique
-- index on the key for one status only, then a child table holding
-- the key again under a parent whose key is unique (refused: the move
-- reaches the child), then another table under the bound name
CREATE SCHEMA fp;
CREATE TABLE fp.o (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO fp.o VALUES ('K1', 'pending', 100), ('K2', 'pending', 100), ('K3', 'pending', 100);
SELECT paynotify_bind_orders('fp.o', 'k', 'st', 'amount');
CREATE FUNCTION t.fp_pay(ord text) RETURNS TABLE (outcome text, error text) LANGUAGE plpgsql AS $$
BEGIN
	outcome := t.fp_stripe(ord, 'evt_fp_' || ord, 'payment_intent.succeeded',
		pg_catalog.jsonb_build_object('id', 'pi_fp_' || ord, 'amount', 100, 'amount_received', 100));
	SELECT l.error_msg INTO error FROM pay.payment_notify_log l
		WHERE l.channel = 'fp_s' AND l.notify_id = 'evt_fp_' || ord;
	RETURN NEXT;
END
$$;
SELECT * FROM t.fp_pay('K1');
ALTER TABLE fp.o DROP CONSTRAINT o_pkey;
INSERT INTO fp.o VALUES ('K2', 'paid', 100);
SELECT * FROM t.fp_pay('K2');
CREATE UNIQUE INDEX ON fp.o (k) WHERE st = 'pending';
SELECT * FROM t.fp_pay('K2');
DELETE FROM fp.o WHERE k = 'K2' AND st = 'paid';
CREATE UNIQUE INDEX ON fp.o (k) INCLUDE (st);
SELECT * FROM t.fp_pay('K2');
CREATE TABLE fp.o_child () INHERITS (fp.o);
INSERT INTO fp.o_child VALUES ('K3', 'paid', 100);
SELECT * FROM t.fp_pay('K3');
ALTER TABLE fp.o RENAME TO o_old;
CREATE TABLE fp.o (k text NOT NULL, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO fp.o VALUES ('K4', 'pending', 100), ('K4', 'paid', 100);
SELECT * FROM t.fp_pay('K4');
SELECT tableoid::regclass, k, st FROM fp.o_old UNION ALL SELECT tableoid::regclass, k, st FROM fp.o ORDER BY 2, 1, 3;
-- a trade of another order never moves this one, not even for a moment a
-- step rolls back (the table's trigger would see it, and one refusing it
-- would fail the step where the anomaly is the answer); a first payment
-- moves its order once
CREATE ROLE fp_app;
GRANT USAGE ON SCHEMA fp TO fp_app;
CREATE TABLE fp.t (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE fp.t OWNER TO fp_app;
CREATE FUNCTION fp.watch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'order % moves from % to %', NEW.k, OLD.st, NEW.st;
	IF NEW.k = 'T2' THEN
		RAISE EXCEPTION 'T2 is held' USING ERRCODE = 'check_violation';
	END IF;
	RETURN NEW;
END
$$;
ALTER FUNCTION fp.watch() OWNER TO fp_app;
CREATE TRIGGER watch BEFORE UPDATE ON fp.t FOR EACH ROW EXECUTE FUNCTION fp.watch();
INSERT INTO fp.t VALUES ('T1', 'pending', 100), ('T2', 'pending', 100), ('T3', 'pending', 100);
SELECT paynotify_bind_orders('fp.t', 'k', 'st', 'amount');
SELECT t.fp_stripe('T1', 'evt_fp_T1', 'payment_intent.succeeded', '{"id": "pi_FP-9", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('T2', 'evt_fp_T2', 'payment_intent.succeeded', '{"id": "pi_FP-9", "amount": 100, "amount_received": 100}');
SELECT t.fp_stripe('T3', 'evt_fp_T3', 'payment_intent.succeeded', '{"id": "pi_T3", "amount": 100, "amount_received": 100}');
SELECT o.k, o.st, p.trade_no, a.kind FROM fp.t o
	LEFT JOIN payment_record p ON p.channel = 'fp_s' AND p.order_no = o.k
	LEFT JOIN paynotify_anomaly a ON a.channel = 'fp_s' AND a.order_no = o.k
	ORDER BY 1;
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
DROP SCHEMA fp CASCADE;
DROP ROLE fp_app;

-- FK12: the words of the log's status and source and of the history's
-- source (their CHECK constraints): each word goes in, anything else
-- (another case, a space, an empty word) is refused, 23514
BEGIN;
INSERT INTO payment_notify_log (channel, notify_id, order_no, status, source)
	SELECT 'fp_w', s || '/' || o, 'W', s, o
	FROM unnest('{succeeded,failed,ignored,parked,anomaly}'::text[]) s,
		 unnest('{notification,query}'::text[]) o;
INSERT INTO paynotify_order_history (order_no, from_state, to_state, source)
	SELECT 'W', 'pending', 'paid', s FROM unnest('{paynotify,application}'::text[]) s;
SELECT count(*) AS log_rows, count(DISTINCT status) AS statuses, count(DISTINCT source) AS sources
	FROM payment_notify_log WHERE channel = 'fp_w';
ROLLBACK;
INSERT INTO payment_notify_log (channel, notify_id, order_no, status) VALUES ('fp_w', 'x', 'W', 'Succeeded');
INSERT INTO payment_notify_log (channel, notify_id, order_no, status) VALUES ('fp_w', 'x', 'W', 'succeeded ');
INSERT INTO payment_notify_log (channel, notify_id, order_no, status) VALUES ('fp_w', 'x', 'W', '');
INSERT INTO payment_notify_log (channel, notify_id, order_no, status, source) VALUES ('fp_w', 'x', 'W', 'failed', 'notice');
INSERT INTO paynotify_order_history (order_no, from_state, to_state, source) VALUES ('W', 'pending', 'paid', 'app');
SELECT count(*) AS rows_after FROM payment_notify_log WHERE channel = 'fp_w';
