-- Every configuration state answers with a documented reply, never a crash:
-- no channel, a channel without usable keys, no binding, a binding broken by
-- a rename or a drop, a dropped hook function, an emptied transitions table.
-- Each is delivered the way an installation runs: the shim's role (given
-- the handler capacity) in a fresh backend; the operator (admin capacity)
-- configures, the superuser only edits what only a superuser may.
\set VERBOSITY terse
SELECT current_user AS su \gset
CREATE ROLE st_shim LOGIN;
CREATE ROLE st_ops LOGIN;
SELECT pay.paynotify_grant('st_shim', 'handler');
SELECT pay.paynotify_grant('st_ops', 'admin');
-- the replay clock of the signed test notifications, as its superuser sets it
ALTER ROLE st_shim SET paynotify.now = 1767225610;
CREATE SCHEMA st;
GRANT USAGE ON SCHEMA st TO st_shim, st_ops;
GRANT CREATE ON SCHEMA st TO st_ops;
CREATE TABLE st.req AS
	SELECT name, (SELECT jsonb_object_agg(lower(h->>0), h->>1) FROM jsonb_array_elements(c->'headers') h) AS headers,
		t.vbytes(c->'files'->>'body') AS body
	FROM t.manifest WHERE name IN ('wx_transaction_success_valid', 'wx_retry_duplicate_valid');
GRANT SELECT ON st.req TO st_shim;
GRANT SELECT ON st.req TO st_ops;
-- what the shim sends for a case on a channel
CREATE FUNCTION st.post(chan text, case_name text DEFAULT 'wx_transaction_success_valid',
		OUT status int, OUT outcome text)
	LANGUAGE sql AS $$
	SELECT r.status, r.outcome FROM st.req q, pay.paynotify_handle(chan, q.headers, q.body) r
	WHERE q.name = case_name
$$;
-- what the log row of that notification says now
CREATE VIEW st.logrow AS
	SELECT channel, status, attempts, delivery_count, error_msg FROM pay.payment_notify_log
	WHERE channel IN ('st_wx', 'st_nochannel', 'st_nokeys', 'st_retired', 'st_expired');
GRANT SELECT ON st.logrow TO st_ops;
-- the shop's orders table, owned by the operator
SET ROLE st_ops;
CREATE TABLE st.orders (order_no text PRIMARY KEY, status text NOT NULL, amount_fen bigint);
INSERT INTO st.orders VALUES ('PN20260101000001', 'pending', 8888);
RESET ROLE;
-- the WeChat channel with its keys, read from files (superuser)
SELECT t.configure('wx_transaction_success_valid', 'st_wx');

-- no channel: 404 rejected, nothing written
\c - st_shim
SELECT * FROM st.post('st_nochannel');
-- a channel without keys: rejected
\c - st_ops
SELECT pay.paynotify_add_channel('st_nokeys', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef"}');
\c - st_shim
SELECT * FROM st.post('st_nokeys');
-- only a retired key, only an expired key: rejected
\c - :su
SELECT t.configure('wx_transaction_success_valid', 'st_retired');
SELECT count(*) > 0 AS retired FROM pay.paynotify_key k
	WHERE k.channel = 'st_retired' AND pay.paynotify_retire_key(k.channel, k.key_id);
SELECT pay.paynotify_add_channel('st_expired', 'wxpay', jsonb_build_object(
	'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n')));
SELECT pay.paynotify_add_key('st_expired', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3',
	t.vtext('keys/wechat_platform_1.pub.pem'), not_after => '2025-12-31');
\c - st_shim
SELECT * FROM st.post('st_retired');
SELECT * FROM st.post('st_expired');
\c - st_ops
SELECT count(*) AS logged FROM st.logrow;

-- no orders table bound yet (setup order allows it): failed, retried
\c - :su
DELETE FROM pay.paynotify_binding;
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT * FROM st.logrow;
-- paynotify_transit says the same
SELECT pay.paynotify_transit('PN20260101000001', 'pending', 'paid');

-- the status column renamed while a backend has the binding cached
SELECT pay.paynotify_bind_orders('st.orders', 'order_no', 'status', 'amount_fen');
\c - :su
SELECT pay.paynotify_transit('PN_NONE', 'pending', 'cancelled');
ALTER TABLE st.orders RENAME status TO state;
SET paynotify.now = 1767225610;
SET ROLE st_shim;
SELECT * FROM st.post('st_wx');
RESET ROLE;
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
-- and in a fresh backend
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
-- the key column dropped
ALTER TABLE st.orders RENAME state TO status;
ALTER TABLE st.orders ADD COLUMN ref text;
SELECT pay.paynotify_bind_orders('st.orders', 'ref', 'status', 'amount_fen');
ALTER TABLE st.orders DROP COLUMN ref;
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
-- the amount column dropped
ALTER TABLE st.orders ADD COLUMN total bigint;
SELECT pay.paynotify_bind_orders('st.orders', 'order_no', 'status', 'total');
ALTER TABLE st.orders DROP COLUMN total;
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
-- the table renamed
SELECT pay.paynotify_bind_orders('st.orders', 'order_no', 'status', 'amount_fen');
ALTER TABLE st.orders RENAME TO orders_old;
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
SELECT pay.paynotify_transit('PN20260101000001', 'pending', 'paid');
-- the table dropped
DROP TABLE st.orders_old;
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';

-- a hook whose function was dropped: the business step fails, naming it
CREATE TABLE st.orders (order_no text PRIMARY KEY, status text NOT NULL, amount_fen bigint);
INSERT INTO st.orders VALUES ('PN20260101000001', 'pending', 8888);
SELECT pay.paynotify_bind_orders('st.orders', 'order_no', 'status', 'amount_fen');
CREATE FUNCTION st.on_paid(e jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT pay.paynotify_on('paid', 'st.on_paid(jsonb)');
DROP FUNCTION st.on_paid(jsonb);
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
SELECT status FROM st.orders;

-- an emptied transitions table: failed, retried; paynotify_transit refuses
\c - :su
DELETE FROM pay.paynotify_hook WHERE handler = 'st.on_paid(jsonb)';
CREATE TABLE st.saved_transitions AS SELECT * FROM pay.paynotify_transition;
DELETE FROM pay.paynotify_transition;
\c - st_shim
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT status, attempts, error_msg FROM st.logrow WHERE channel = 'st_wx';
SELECT pay.paynotify_transit('PN20260101000001', 'pending', 'paid');

-- everything back: the next delivery of the same notification is applied once
\c - :su
INSERT INTO pay.paynotify_transition SELECT * FROM st.saved_transitions;
\c - st_shim
SELECT * FROM st.post('st_wx', 'wx_retry_duplicate_valid');
SELECT * FROM st.post('st_wx');
\c - st_ops
SELECT * FROM st.logrow;
SELECT status FROM st.orders;
SELECT count(*) AS payments FROM pay.payment_record WHERE channel = 'st_wx';

-- the fixture's binding again, for the tests after this one
\c - :su
SELECT pay.paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
