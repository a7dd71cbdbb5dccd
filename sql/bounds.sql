-- The ids a notice carries are bounded (PN_MAX_ID_LEN, 255 bytes), once,
-- before anything is written: an agreement id, order number or trade
-- number one byte longer is the anomaly "<field>_too_long", recorded and
-- acknowledged, never applied and never an error of an index; one at the
-- bound is applied.  A notification id over it is refused as malformed.
-- (The orders table here keys by varchar(32): at the bound, a trade.)
-- WeChat notices: test/ledger_notices.json (t.wx); Alipay bodies:
-- PN_BOUNDS=1 test/unit/make_alipay_forms.py; Stripe events signed here.
SET timezone = 'UTC';

-- the count of every row a notice could have written, to see none was
CREATE VIEW t.bound_rows AS
	SELECT (SELECT count(*) FROM pay.paynotify_agreement) AS agreements,
		(SELECT count(*) FROM pay.payment_record) AS payments,
		(SELECT count(*) FROM pay.paynotify_outbox) AS events,
		(SELECT count(*) FROM public.orders WHERE status <> 'pending') AS moved;
CREATE TABLE t.bound_before AS SELECT * FROM t.bound_rows;
-- what the notification left: its log row and anomaly
CREATE FUNCTION t.bound_seen(chan text) RETURNS TABLE (event_type text, order_no text,
		status text, note text, kind text, anomaly_order text)
	LANGUAGE sql AS $$
	SELECT l.event_type, l.order_no, l.status, l.note, a.kind, a.order_no
	FROM pay.payment_notify_log l
	LEFT JOIN pay.paynotify_anomaly a USING (channel, notify_id)
	WHERE l.channel = chan ORDER BY l.first_seen, l.notify_id
$$;

-- ---------------------------------------------------------------------------
-- WeChat Pay
-- ---------------------------------------------------------------------------
SELECT t.set_order('LG-BOUND-1', 'pending', 100);
SELECT outcome FROM t.wx('wx_bound', 'long_contract');
SELECT outcome FROM t.wx('wx_bound', 'long_order');
SELECT outcome FROM t.wx('wx_bound', 'long_trade');
-- a second delivery: the same log row, a duplicate
SELECT outcome FROM t.wx('wx_bound', 'long_order');
SELECT * FROM t.bound_seen('wx_bound');
SELECT * FROM t.bound_rows EXCEPT SELECT * FROM t.bound_before;
-- at the bound: applied
SELECT t.set_order('LG-BOUND-2', 'pending', 100);
SELECT outcome FROM t.wx('wx_bound', 'limit_contract');
SELECT outcome FROM t.wx('wx_bound', 'limit_pay');
SELECT length(agreement_id), state FROM pay.paynotify_agreement WHERE channel = 'wx_bound';
SELECT length(order_no) AS order_len, length(trade_no) AS trade_len FROM pay.payment_record
WHERE channel = 'wx_bound';

-- ---------------------------------------------------------------------------
-- Alipay
-- ---------------------------------------------------------------------------
SELECT pay.paynotify_add_channel('ali_bound', 'alipay',
	'{"app_id": "2021000000000001", "seller_id": "2088000000000002"}');
SELECT pay.paynotify_add_key('ali_bound', 'alipay_1', t.vtext('keys/alipay_1.pub.pem'));
CREATE TABLE t.ali_bound_form (name text PRIMARY KEY, charset text NOT NULL, body text NOT NULL);
INSERT INTO t.ali_bound_form (name, charset, body) VALUES
	('long_agreement', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-b-01&notify_type=dut_user_sign&status=NORMAL&agreement_no=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&sign=oZup0mNQ59lWKpYRGE9K9itvM0tt3Hj0VM3oK8ot%2BEibv9SjHGsuKpRwQcYRAWatCZBqMn0n9oP10H3qE1JGkjdCJooBbJogCeETeliby%2BRgGesamPqL9Fm7muGM6BNGCMW%2FGiPWP3O%2BimxoRdOsTRv0%2FqOmy5CHHHAyYnfuQPh9ZBEujm%2B8lJzAUEBwYLECfqhbNiVTjmPpzQnh2ehcZW0VyHMOy2gEmh9%2BFj5gkib2SXUpjDy5yhwvRtals9ZRmQJDC%2FvZQRg0WoLZhLg3fVgh35MMVNFSqzLrAczUe5sZDdOUmD0O9Zyrciwgrmp9jOXkXAHu5pJ4ffDJPjASJQ%3D%3D'),
	('long_order', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-b-02&out_trade_no=BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB&trade_no=ALI-B-T2&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=d%2BUInAeA7y098hOcr4xecZ6NTn7yQkKV%2FiH9GBreW3X%2BdZWHpdqOfRwpwOKxfdDTPTrl1mwMD0iKxuwpEiDMe4gLVyniJzGQNqeay7bCg9lCoRUpLWESu%2FkL1lJvanH5nfySsifJebuqsEk44kFRvggmUZ9P7MbplTTBnELhnYPznWSwU8pTv%2Fs7eg5L8ENW%2FX2iyUhBM8nxjSpMjFj%2BwgV1r6ylzjhaWtLtaNCPljEulQzc6jekSbrv%2FL7YvdqEGzVMb6CLARZohdn7LAjUO5UaJrKGsdDVBMnLxqGEoomEalCK9qKfFvq%2FJNsUGvcQn07vrNxii%2Bsat6C%2FvdDYLQ%3D%3D'),
	('long_trade', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-b-03&out_trade_no=ALI-B-O3&trade_no=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=JEXv75AgIaREKF2tEuMbOlT08C6gKPlxwP%2BHH04QYqmhup%2FLMxasNt6bz4twgbu3QxWDayqpu21YcPHx1SH7g%2FyMQLF7zfjWA6thGBVBTuGhj7M%2BKeh7ZLiL%2Ba0EieXvpf6MtPFxeJVYtWUYfO6mJpjC4PZO3SRriq9ML%2FGNxJ4UySP1mJ1X3zsjfHmW3HApsxoT%2BMKR1udSIIe1s%2BNbx%2FMi%2BuTZg18BEsGJPLcCR1CE4WivTmti6AhoMydlGiFxMX9n%2Fs7uHLlyS5hRpvhccAHNaBwSjDAn0C%2BlXw4h0HrX38LNaj3nWHXoNxxhcZh2dwyAwzcil%2Fku4b4c7hv63g%3D%3D'),
	('limit_agreement', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-b-04&notify_type=dut_user_sign&status=NORMAL&agreement_no=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&sign=WxNfYLoOdhln%2BuJgSO2aXAIXv8mSJP84Yj8Cs7W7TIAEc5zatC7AabNYmUqBjqzZsWw8VMaanaJ3L74lnzXC1fAtvxGSsBSWmDZAdubvjRjPBP%2BjF4YsjlxgGbhtmdSjQoEpAnbROluWQw4T27xEiDSc4CGNz3OF20y4B2V997b11L3SKvAmR3tPfgeMx7n6b%2FdW16jyB4mHCk7sRiYbx4VuhgHpXRF8S87EbNiEwJ3vNLS5iTo0Zhe%2FEq06q3XOu5FOq%2BR6ZdZrgP8R0kT4V%2FGLjbqTQvJ7V%2BPazVnYbXQ%2FtkBDjSEdt%2BdC73q1PKRWF2icjhqHRtEEwuJzv6hxAg%3D%3D'),
	('limit_pay', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-b-05&out_trade_no=ALI-B-O5&trade_no=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=L%2BqtRJ%2BWc4iJQ1vFak8hTftmDfIUUPrgJWjckt4WXAexxPBAxYiPMtPv1cORi0xdO5zX4BiYIozqGbP0sU%2FApgKtrQ4dRmhQ3EIvNnWczZdiV1dDfFswVt8F8VGKMqx3M1h0B0Z%2F5GO25N2HnR8WJC80RSPD4%2F2JWwQUJN8h3tFJUn%2FL67IaSgXP17vV3SE6mEIWaOckw9%2B72%2FSGWVdMcioAEZkQ5Mc%2B057nU631RbNiDaAdZx5BEdCxS37jzeGLz0ZHh9xDUI6itmyMwuSU5H6CciLanq5N64b7Rx7MIERCNKLbIyVg0%2B2ZReDVtLu%2FURjQg3qWiQz6AUFBKW42ow%3D%3D');
CREATE FUNCTION t.ali_bound(form text) RETURNS text LANGUAGE sql AS $$
	SELECT h.outcome FROM t.ali_bound_form f,
		pay.paynotify_handle('ali_bound',
			jsonb_build_object('content-type',
				'application/x-www-form-urlencoded; charset=' || f.charset),
			convert_to(f.body, 'UTF8')) h
	WHERE f.name = form
$$;
DELETE FROM t.bound_before;
INSERT INTO t.bound_before SELECT * FROM t.bound_rows;
SELECT t.set_order('ALI-B-O3', 'pending', 100);
SELECT t.set_order('ALI-B-O5', 'pending', 100);
SELECT t.ali_bound('long_agreement');
SELECT t.ali_bound('long_order');
SELECT t.ali_bound('long_trade');
SELECT * FROM t.bound_seen('ali_bound');
SELECT * FROM t.bound_rows EXCEPT SELECT * FROM t.bound_before;
SELECT t.ali_bound('limit_agreement');
SELECT t.ali_bound('limit_pay');
SELECT length(agreement_id), state FROM pay.paynotify_agreement WHERE channel = 'ali_bound';
SELECT length(order_no) AS order_len, length(trade_no) AS trade_len FROM pay.payment_record
WHERE channel = 'ali_bound';

-- ---------------------------------------------------------------------------
-- Stripe
-- ---------------------------------------------------------------------------
SELECT pay.paynotify_add_channel('st_bound', 'stripe', '{}');
SELECT pay.paynotify_add_key('st_bound', 'secret_1', t.secret(1));
CREATE FUNCTION t.st_bound(id text, type text, object jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT s.outcome FROM t.stripe('st_bound', jsonb_build_object('id', id, 'object', 'event',
		'api_version', '2025-03-31.basil', 'created', 1767300000, 'type', type,
		'livemode', false, 'data', jsonb_build_object('object', object))::text,
		ARRAY[t.secret(1)]) s
$$;
CREATE FUNCTION t.st_pi(pi text, ord text) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', pi, 'object', 'payment_intent', 'amount', 100,
		'amount_received', 100, 'currency', 'usd',
		'metadata', jsonb_build_object('order_id', ord))
$$;
CREATE FUNCTION t.st_sub(id text) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'subscription', 'status', 'active',
		'start_date', 1767200000)
$$;
DELETE FROM t.bound_before;
INSERT INTO t.bound_before SELECT * FROM t.bound_rows;
SELECT t.set_order('ST-BOUND-3', 'pending', 100);
SELECT t.set_order('ST-BOUND-5', 'pending', 100);
SELECT t.st_bound('evt_bound_1', 'customer.subscription.created', t.st_sub('sub_' || repeat('A', 252)));
SELECT t.st_bound('evt_bound_2', 'payment_intent.succeeded', t.st_pi('pi_bound_2', repeat('B', 256)));
SELECT t.st_bound('evt_bound_3', 'payment_intent.succeeded', t.st_pi('pi_' || repeat('T', 253), 'ST-BOUND-3'));
SELECT * FROM t.bound_seen('st_bound');
SELECT * FROM t.bound_rows EXCEPT SELECT * FROM t.bound_before;
-- at the bound: applied
SELECT t.st_bound('evt_bound_4', 'customer.subscription.created', t.st_sub('sub_' || repeat('A', 251)));
SELECT t.st_bound('evt_bound_5', 'payment_intent.succeeded', t.st_pi('pi_' || repeat('T', 252), 'ST-BOUND-5'));
SELECT length(agreement_id), state FROM pay.paynotify_agreement WHERE channel = 'st_bound';
SELECT length(order_no) AS order_len, length(trade_no) AS trade_len FROM pay.payment_record
WHERE channel = 'st_bound';
-- a notification id over the bound: malformed, nothing written; at it: taken
SELECT t.st_bound('evt_' || repeat('9', 252), 'customer.created', '{"id": "cus_1", "object": "customer"}');
SELECT t.st_bound('evt_' || repeat('9', 251), 'customer.created', '{"id": "cus_1", "object": "customer"}');
SELECT length(notify_id), status FROM pay.payment_notify_log
WHERE channel = 'st_bound' AND notify_id LIKE 'evt_999%';
