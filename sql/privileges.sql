-- No code written by a non-superuser runs with more rights than its author.
-- Hooks run as the role that registered them, work on the orders table as
-- the table's owner, both inside a security-restricted operation; the
-- registering and binding functions check their caller; the guard trigger
-- works for any role that may update the orders table.  Each role acts in
-- a fresh backend (\c), as a real installation's roles do.
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;

SELECT paynotify_add_channel('pv', 'stripe', '{}');
SELECT paynotify_add_key('pv', 'secret_1', t.secret(1));
-- a Stripe payment for an order, signed and delivered (t.stripe, fixture)
CREATE FUNCTION t.pv_pay(evt text, ord text, amount bigint DEFAULT 100) RETURNS text
	LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('pv', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', amount, 'amount_received', amount,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)])
$$;
CREATE FUNCTION t.pv_error(evt text) RETURNS text LANGUAGE sql AS
	$$ SELECT status || ': ' || coalesce(error_msg, '') FROM pay.payment_notify_log
	   WHERE channel = 'pv' AND notify_id = evt $$;

CREATE ROLE pv_op LOGIN;		-- an operator
CREATE ROLE pv_shop LOGIN;		-- owns the shop's orders table
CREATE ROLE pv_app LOGIN;		-- the shop's application
SELECT paynotify_grant('pv_op', 'admin');
SELECT paynotify_grant('pv_shop', 'admin');
CREATE SCHEMA ops AUTHORIZATION pv_op;
CREATE SCHEMA shop AUTHORIZATION pv_shop;
GRANT USAGE ON SCHEMA t TO pv_op, pv_shop;
INSERT INTO public.orders VALUES ('PV-1', 'pending', 100), ('PV-2', 'pending', 100),
	('PV-3', 'pending', 100), ('PV-4', 'pending', 100), ('PV-5', 'pending', 100);

-- 1. The reproduction: an operator registers a hook that makes its author
-- superuser.  The hook runs as its author, fails, and the payment is retried.
\c - pv_op
CREATE FUNCTION ops.escalate(ev jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'ALTER ROLE pv_op SUPERUSER';
END
$$;
SELECT pay.paynotify_on('paid', 'ops.escalate(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT event, handler, registered_by FROM paynotify_hook;
SELECT t.pv_pay('evt_pv_1', 'PV-1');
SELECT rolsuper FROM pg_roles WHERE rolname = 'pv_op';
SELECT t.pv_error('evt_pv_1');
SELECT status FROM orders WHERE order_no = 'PV-1';
DELETE FROM paynotify_hook;

-- 2. Nor can an operator's hook read key material.
\c - pv_op
CREATE TABLE ops.loot (material text);
CREATE FUNCTION ops.steal(ev jsonb) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO ops.loot SELECT material FROM pay.paynotify_key $$;
SELECT pay.paynotify_on('paid', 'ops.steal(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT t.pv_pay('evt_pv_2', 'PV-2');
SELECT t.pv_error('evt_pv_2');
SELECT count(*) AS looted FROM ops.loot;
DELETE FROM paynotify_hook;

-- 3. What its author may do, a hook does, as its author, with search_path
-- pinned.
\c - pv_op
CREATE TABLE ops.seen (who name, path text, order_no text);
CREATE FUNCTION ops.record(ev jsonb) RETURNS void LANGUAGE sql AS
	$$ INSERT INTO ops.seen VALUES (current_user, current_setting('search_path'),
		ev->'notice'->>'order_no') $$;
SELECT pay.paynotify_on('paid', 'ops.record(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT t.pv_pay('evt_pv_3', 'PV-3');
SELECT * FROM ops.seen;
DELETE FROM paynotify_hook;

-- 4. Registering needs ownership of the function or EXECUTE on it; the
-- privilege is checked again each time the hook runs.
CREATE FUNCTION t.private_hook(ev jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION t.shared_hook(ev jsonb) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
REVOKE EXECUTE ON FUNCTION t.private_hook(jsonb), t.shared_hook(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION t.shared_hook(jsonb) TO pv_op;
\c - pv_op
SELECT pay.paynotify_on('paid', 't.private_hook(jsonb)');
SELECT pay.paynotify_on('paid', 't.shared_hook(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT event, handler, registered_by FROM paynotify_hook;
REVOKE EXECUTE ON FUNCTION t.shared_hook(jsonb) FROM pv_op;
SELECT t.pv_pay('evt_pv_4', 'PV-4');
SELECT t.pv_error('evt_pv_4');
DELETE FROM paynotify_hook;
SELECT t.pv_pay('evt_pv_4', 'PV-4');

-- 5. Binding needs ownership of the table, or SELECT and UPDATE on it;
-- nobody calls the internal function that writes the binding.
\c - pv_op
SELECT pay.paynotify_bind_orders('public.orders');
SELECT pay.paynotify_bind_orders('pay.paynotify_key', 'key_id', 'material');
SELECT pay.paynotify_bind_orders_internal('public.orders', 'order_no', 'status', NULL, NULL, NULL);
\c - :su
SELECT orders FROM pay.paynotify_binding;
-- UPDATE alone is not enough: deliveries read the table as its owner and
-- tell whether an order is there and what it costs
CREATE TABLE public.pv_upd (order_no text PRIMARY KEY, status text NOT NULL, amount_fen bigint NOT NULL);
GRANT UPDATE ON public.pv_upd TO pv_op;
\c - pv_op
SELECT pay.paynotify_bind_orders('public.pv_upd', 'order_no', 'status', 'amount_fen');
\c - :su
GRANT SELECT ON public.pv_upd TO pv_op;
\c - pv_op
SELECT pay.paynotify_bind_orders('public.pv_upd', 'order_no', 'status', 'amount_fen');
\c - :su
SELECT orders FROM pay.paynotify_binding;
SELECT pay.paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
DROP TABLE public.pv_upd;

-- 6. The orders table's owner: a trigger, a generated column and an index
-- expression that would make their author superuser run as the owner.
\c - pv_shop
CREATE TABLE shop.orders (order_no text PRIMARY KEY, status text NOT NULL,
	amount_fen bigint NOT NULL);
CREATE FUNCTION shop.try_escalate() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'ALTER ROLE pv_shop SUPERUSER';
EXCEPTION WHEN insufficient_privilege THEN
	NULL;	-- not allowed to: carry on
END
$$;
-- immutable by its label only
CREATE FUNCTION shop.sneaky(s text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	PERFORM shop.try_escalate();
	RETURN s;
END
$$;
ALTER TABLE shop.orders ADD COLUMN status_key text GENERATED ALWAYS AS (shop.sneaky(status)) STORED;
CREATE INDEX ON shop.orders (shop.sneaky(order_no || status));
INSERT INTO shop.orders VALUES ('SH-1', 'pending', 100), ('SH-2', 'pending', 100),
	('SH-3', 'pending', 100);
CREATE FUNCTION shop.on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'ALTER ROLE pv_shop SUPERUSER';
	RETURN NEW;
END
$$;
CREATE TRIGGER escalate AFTER UPDATE ON shop.orders
	FOR EACH ROW EXECUTE FUNCTION shop.on_update();
-- the owner may bind its own table
SELECT pay.paynotify_bind_orders('shop.orders', 'order_no', 'status', 'amount_fen');
\c - :su
SET search_path = pay, public;
CREATE TRIGGER orders_guard BEFORE UPDATE ON shop.orders
	FOR EACH ROW EXECUTE FUNCTION pay.paynotify_guard_transition();
SELECT t.pv_pay('evt_pv_5', 'SH-1');
SELECT rolsuper FROM pg_roles WHERE rolname = 'pv_shop';
SELECT t.pv_error('evt_pv_5');
SELECT status FROM shop.orders WHERE order_no = 'SH-1';
-- paynotify_transit needs ownership of the orders table or UPDATE on it,
-- and moves orders as the owner too
\c - pv_op
SELECT pay.paynotify_transit('SH-2', 'pending', 'cancelled');
\c - :su
GRANT USAGE ON SCHEMA shop TO pv_op;
GRANT SELECT, UPDATE ON shop.orders TO pv_op;
\c - pv_op
SELECT pay.paynotify_transit('SH-2', 'pending', 'cancelled');
\c - :su
SET search_path = pay, public;
SELECT rolsuper FROM pg_roles WHERE rolname = 'pv_shop';
-- without the trigger: the generated column and the index expression run
-- as the owner, cannot escalate, and the payment goes through
DROP TRIGGER escalate ON shop.orders;
SELECT t.pv_pay('evt_pv_5', 'SH-1');
SELECT rolsuper FROM pg_roles WHERE rolname = 'pv_shop';
SELECT order_no, status, status_key FROM shop.orders ORDER BY 1;

-- 7. The guard trigger for an unprivileged application role in a fresh
-- backend: a legal change passes, an illegal one fails with 23514 naming
-- both states; nothing of paynotify's configuration is needed.
GRANT USAGE ON SCHEMA shop TO pv_app;
GRANT SELECT, UPDATE ON shop.orders TO pv_app;
\c - pv_app
UPDATE shop.orders SET status = 'shipped' WHERE order_no = 'SH-1';
UPDATE shop.orders SET status = 'pending' WHERE order_no = 'SH-1';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM pay.paynotify_channel;
-- a hostile search_path in a fresh backend changes nothing (the guard's
-- cache is built as the extension's owner with search_path pinned)
\c - pv_app
CREATE TEMP TABLE paynotify_transition (from_state text, to_state text);
INSERT INTO paynotify_transition VALUES ('shipped', 'pending');
SET search_path = pg_temp, pay, public;
UPDATE shop.orders SET status = 'pending' WHERE order_no = 'SH-1';
UPDATE shop.orders SET status = 'received' WHERE order_no = 'SH-1';
SELECT order_no, status FROM shop.orders ORDER BY 1;

-- 8. Binding with status_values casts each value to the status column's
-- type, and a cast can run code of the table's owner: a CREATE CAST to its
-- enum, a domain's CHECK.  It runs as the owner, never as the extension's.
\c - pv_shop
CREATE TABLE shop.cast_runs (who name, rolsuper boolean);
CREATE TYPE shop.st AS ENUM ('new', 'done', 'back', 'gone');
CREATE FUNCTION shop.to_st(s text) RETURNS shop.st LANGUAGE plpgsql AS $$
BEGIN
	PERFORM shop.try_escalate();
	INSERT INTO shop.cast_runs SELECT current_user, r.rolsuper
		FROM pg_catalog.pg_roles r WHERE r.rolname = 'pv_shop';
	RETURN (SELECT e FROM pg_catalog.unnest(pg_catalog.enum_range(NULL::shop.st)) e
			WHERE e::text = s);
END
$$;
CREATE CAST (text AS shop.st) WITH FUNCTION shop.to_st(text);
CREATE TABLE shop.enum_orders (order_no text PRIMARY KEY, status shop.st NOT NULL);
SELECT pay.paynotify_bind_orders('shop.enum_orders', status_values =>
	'{"pending": "new", "paid": "done", "refunding": "back", "refunded": "gone"}');
CREATE FUNCTION shop.check_st(s text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM shop.try_escalate();
	INSERT INTO shop.cast_runs SELECT current_user, r.rolsuper
		FROM pg_catalog.pg_roles r WHERE r.rolname = 'pv_shop';
	RETURN s IN ('N', 'P');
END
$$;
CREATE DOMAIN shop.st_code AS text CHECK (shop.check_st(VALUE));
CREATE TABLE shop.domain_orders (order_no text PRIMARY KEY, status shop.st_code NOT NULL);
SELECT pay.paynotify_bind_orders('shop.domain_orders', status_values =>
	'{"pending": "N", "paid": "P"}');
SELECT pay.paynotify_bind_orders('shop.domain_orders', status_values =>
	'{"pending": "N", "paid": "X"}');
\c - :su
SELECT rolsuper FROM pg_roles WHERE rolname = 'pv_shop';
SELECT who, rolsuper, count(*) FROM shop.cast_runs GROUP BY 1, 2;
SELECT orders, status_values FROM pay.paynotify_binding;

-- 9. Row-level security: a role that may UPDATE only some rows of a table
-- (a policy) may neither bind it nor move its orders with paynotify, which
-- moves them as the table's owner, whom the policy does not hold.
\c - pv_shop
CREATE TABLE shop.rls (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO shop.rls VALUES ('ops_row', 'pending', 1), ('boss_row', 'pending', 1);
ALTER TABLE shop.rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON shop.rls USING (k = 'ops_row');
GRANT SELECT, UPDATE ON shop.rls TO pv_op;
\c - pv_op
UPDATE shop.rls SET st = 'cancelled' WHERE k = 'boss_row';
SELECT pay.paynotify_bind_orders('shop.rls', 'k', 'st', 'amount');
\c - pv_shop
SELECT pay.paynotify_bind_orders('shop.rls', 'k', 'st', 'amount');
\c - pv_op
SELECT pay.paynotify_transit('boss_row', 'pending', 'cancelled');
\c - pv_shop
SELECT pay.paynotify_transit('boss_row', 'pending', 'cancelled') AS owner_moved;
SELECT k, st FROM shop.rls ORDER BY k;

-- back to the shared fixture's binding
\c - :su
SET search_path = pay, public;
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
DROP SCHEMA ops, shop CASCADE;
DROP FUNCTION t.pv_pay(text, text, bigint), t.pv_error(text),
	t.private_hook(jsonb), t.shared_hook(jsonb);
DELETE FROM public.orders WHERE order_no LIKE 'PV-%';
SELECT paynotify_revoke('pv_op', 'admin');
SELECT paynotify_revoke('pv_shop', 'admin');
DROP OWNED BY pv_op, pv_shop, pv_app;
DROP ROLE pv_op, pv_shop, pv_app;
