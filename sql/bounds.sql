-- The ids a notice carries are bounded (PN_MAX_ID_LEN, 128 bytes), once,
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
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-b-01&notify_type=dut_user_sign&status=NORMAL&agreement_no=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&sign=bvHlQnX5SrXdJilWxy7ElZCEQjgqgIUMTsVTv38N0XCdCHqvDLKTrzMq4Su3AdB3Y8UzJUbJ0VrIWwPxyhqgJ5Oy1sDv1iVzzkFncSL03FqMcNX4AgXDaI67fgCt7NgiInGD5gawXYKiNJnLy%2BwlJUwbhI%2Fc0PtBKj15OoSG4qchIY7nZf81afB8j1zl%2F43sumvZMvTbXxgzG8NygKaDhVD%2BkA5z2GktqScgaj%2FEHFOqmZK9ISO66%2FFWt3eGdjP59L4K0uyCO3AsHDm2KGb0pKoia64XS8hKefkIdZE6L2iZctqQCFkKC8svL9L%2FR8K2M8PaC7vbXBCqoUBXQwrg4w%3D%3D'),
	('long_order', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-b-02&out_trade_no=BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB&trade_no=ALI-B-T2&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=qn4It171lzZ235YanbUO0vsKHijc0KNqRFDns6OS8cLQLeFgbL7ovApCKEI%2BooRMsrdO36CWAKJEx0dri46vtvFxJXTkomUSRsDXYz1lX%2B%2FKoK0NwSpEQZdOIJ%2FgKTgtT9dpp2e7z2i%2FbX%2FKgD9suaPSgRCgVNQjCkhAybCSVNDc1%2B574zUWU%2FAS5Gawox%2FXJYotSrpACuJDy7jNsyWKKdqUkyDja0m6bjWPvuiO5Ub0FUTLWnssqDlFjbzMHi0kceskBnO2r9KhmsGqGdc0AH0wpOeHYLOwtYf4LJKtLuXe98adlbqBXbaMlxhO2Fma6Z5xpNLiz8zi6scU90QBzw%3D%3D'),
	('long_trade', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-b-03&out_trade_no=ALI-B-O3&trade_no=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=iL4cpPTEYQcv4riKkhtz%2FFsZBeMBDnFzTsTkJ4z3cvMWY1XDtqPqaxwxskBQypjCZQvEgLvIajVY7FSPjr8Cy7yyAnV9kJKRZIkiBhFmxcwrWtkof4FmsEgq8MZJlEIAxZcemGa9HQieSjYpvX5kkMJ%2Foz%2FP%2FrWOVn9Lj8UHuZ5h8JM4T0CnrHTQQZT%2FEYRrxCGjqkU4esMMwyFZrruKVg4tgWp9ayvUGZHhzJeBvitmHJLwIP8lCUFOdeSYjx20sfY%2B0478hZKvSDdMNMOQP4axewKUhKD2PIEUfdKghB%2Bb4lTW16JPHdymJfEvyL5R3OgtvXy0GL5jNst8RLd%2Fiw%3D%3D'),
	('limit_agreement', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_id=ali-b-04&notify_type=dut_user_sign&status=NORMAL&agreement_no=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&sign=QL9IiSFVPFjihzTwu6TyQ09%2Ff1RgB5StXfshFn4OSgU3Q93iUfO3ODNn2uhc7OE7DTpnDGhSLlZj7rYJCPhi5rVAAa2sWNfPDUqKlBJRmLmXRoACOyua%2FGo06PjROJCDPz10B2uEJ8VGtdV5yMxzJAL%2FEout0yQvJUixS%2Fp0PlMRhfdiMchRhTINNLIabqU%2FcSPw2wBEA8Q3DQNoLX64MUqSSb430zrjeAbLEBrzTPTYEtgD7K%2BckySt2ElIPE%2FqbjNEqYuiG88t7%2B5USVJFd6qXIUI7lSP9EMoa3e0H2VPH3GNU6P3NQfptpn8z6WcdLvvxSsZFpuElnr8X5ryDAw%3D%3D'),
	('limit_pay', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&alipay_user_id=2088000000000001&personal_product_code=CYCLE_PAY_AUTH_P&sign_scene=INDUSTRY%7CDEFAULT_SCENE&sign_time=2026-01-02+09%3A00%3A00&notify_type=trade_status_sync&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-b-05&out_trade_no=ALI-B-O5&trade_no=TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=RLtP7HYSl0K6zFXKb4Jx8Hoy0FkqKKG9mWv%2F%2FIKKUJUVN1UjqRx1LdZ7frvkDKALYPRo5In0AarGkN5%2Bvjelj0X2x6gdk3ZZn91NtVX98CUkrCQ7Ynsjm8K9GlFvz2bEPrGlzYYVr6uvKe0Swacx0PzhD9HI1x8skQoyJq24CLB2%2B%2BwzKKzMXaxgejbr8FP9DG%2FwBbY%2BMDwiOSaEbrF5sUvGGiYq5ZbePjiDIw6X81bN1QLw0fms%2F4Dm51bYRkWl%2FdQ4CHf426PhLbaitcn3teemBC%2FCl25iSmbf3gPyzelZkOB8XKOTPYLaBNqjTbiCEwuC%2B%2BRgXjalzvM6m8nYDg%3D%3D');
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
SELECT t.st_bound('evt_bound_1', 'customer.subscription.created', t.st_sub('sub_' || repeat('A', 125)));
SELECT t.st_bound('evt_bound_2', 'payment_intent.succeeded', t.st_pi('pi_bound_2', repeat('B', 129)));
SELECT t.st_bound('evt_bound_3', 'payment_intent.succeeded', t.st_pi('pi_' || repeat('T', 126), 'ST-BOUND-3'));
SELECT * FROM t.bound_seen('st_bound');
SELECT * FROM t.bound_rows EXCEPT SELECT * FROM t.bound_before;
-- at the bound: applied
SELECT t.st_bound('evt_bound_4', 'customer.subscription.created', t.st_sub('sub_' || repeat('A', 124)));
SELECT t.st_bound('evt_bound_5', 'payment_intent.succeeded', t.st_pi('pi_' || repeat('T', 125), 'ST-BOUND-5'));
SELECT length(agreement_id), state FROM pay.paynotify_agreement WHERE channel = 'st_bound';
SELECT length(order_no) AS order_len, length(trade_no) AS trade_len FROM pay.payment_record
WHERE channel = 'st_bound';
-- a notification id over the bound: malformed, nothing written; at it: taken
SELECT t.st_bound('evt_' || repeat('9', 125), 'customer.created', '{"id": "cus_1", "object": "customer"}');
SELECT t.st_bound('evt_' || repeat('9', 124), 'customer.created', '{"id": "cus_1", "object": "customer"}');
SELECT length(notify_id), status FROM pay.payment_notify_log
WHERE channel = 'st_bound' AND notify_id LIKE 'evt_999%';
