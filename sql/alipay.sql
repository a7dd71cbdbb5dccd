-- Alipay (docs/GATEWAYS.md §2): the urlencoded form signed with RSA2 over its
-- sorted parameters.  Vector cases come from test/vectors; the t.ali_form
-- bodies below were signed with the same TEST-ONLY keys by
-- test/unit/make_alipay_forms.py (deterministic: rerun it to change them).

-- Settings are checked when the channel is added.
SELECT pay.paynotify_add_channel('ali_bad', 'alipay', '{}');
SELECT pay.paynotify_add_channel('ali_bad', 'alipay', '{"app_id": "2021000000000001", "appid": "x"}');
SELECT pay.paynotify_add_channel('ali_bad', 'alipay', '{"app_id": 2021000000000001}');
SELECT pay.paynotify_add_channel('ali_bad', 'alipay', '{"app_id": "2021000000000001", "seller_id": ""}');

-- ---------------------------------------------------------------------------
-- Vector cases, each on a channel of its own ("my_" + case, configured as
-- the manifest says), so later tests can still replay them fresh
-- ---------------------------------------------------------------------------

SELECT name, r.* FROM unnest(ARRAY[
		'ali_gbk_charset_valid', 'ali_empty_param_skipped_valid',
		'ali_empty_param_included_valid', 'ali_trade_success_valid',
		'ali_retry_duplicate_valid', 'ali_second_trusted_key_valid',
		'ali_partial_refund_valid', 'ali_app_id_mismatch', 'ali_rsa_sha1_sign_type',
		'ali_sign_plus_not_escaped', 'ali_signed_with_sign_type_included']) name,
	t.replay(name, 'my_') r;

-- GBK: verified on the GBK octets, logged as UTF-8 text; the per-delivery
-- fields (sign, sign_type, notify_time) stay out of the payload, so a
-- re-delivery compares equal.
SELECT notify_id, order_no, event_type, status,
	   payload->>'subject' AS subject, payload->>'body' AS body,
	   payload->>'charset' AS charset,
	   payload ?| ARRAY['sign', 'sign_type', 'notify_time'] AS has_delivery_fields
FROM pay.payment_notify_log WHERE channel = 'my_ali_gbk_charset_valid';
SELECT channel, notify_id, payload->>'body' AS body, delivery_count
FROM pay.payment_notify_log
WHERE channel IN ('my_ali_empty_param_skipped_valid', 'my_ali_empty_param_included_valid',
				  'my_ali_trade_success_valid')
ORDER BY channel;
-- Decoded exactly once: '+', '%', '&', '=' survive; passback_params stays
-- merchant-encoded.
SELECT payload->>'passback_params' AS passback, payload->>'subject' AS subject,
	   payload->>'body' AS body
FROM pay.payment_notify_log WHERE channel = 'my_ali_trade_success_valid';

-- ---------------------------------------------------------------------------
-- Own channel: generated bodies
-- ---------------------------------------------------------------------------
SELECT pay.paynotify_add_channel('ali', 'alipay',
	'{"app_id": "2021000000000001", "seller_id": "2088000000000002"}');
SELECT pay.paynotify_add_key('ali', 'alipay_1', t.vtext('keys/alipay_1.pub.pem'));
SELECT pay.paynotify_add_key('ali', 'bad', 'not a key');

CREATE TABLE t.ali_form (name text PRIMARY KEY, charset text NOT NULL, body text NOT NULL);
INSERT INTO t.ali_form (name, charset, body) VALUES
	('pay_yuan0', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-01&out_trade_no=ALI-1&trade_no=ALI-T1&total_amount=20&trade_status=TRADE_SUCCESS&sign=oPOkjTCD7SwvWZfGcyEvH6dZ20Z6i36XDdPZC14IvW9CtL21rYGDxcRLXiYyQE1WjfzJOg4uV3eM4JA1aiSGJFwYqgteiSlo%2F0tkgSS49k0oBaVUO78oiK1ppO0aWITMKTtFRvSIqj4g0eEjU11gnao3WR7NgCtkZRDh%2F85u%2FuE0sVTbhA8JfZ5eB6hd9LN6Uhs0fDzM9Iw8LJX8%2FiRuiF7FMa2j6oQPOy5tuIcz%2BmjBKJu3S8xEylhXObAHQxlvEmhwXF49godYKn3%2BsBkHTUF0ysPxq%2FrJUKkN8LhagY%2FzCQy4kVji8h4%2F1IRX5na3p13V3aNzk%2BdNk7niLaPAkQ%3D%3D'),
	('pay_yuan1', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-02&out_trade_no=ALI-2&trade_no=ALI-T2&total_amount=88.8&trade_status=TRADE_SUCCESS&sign=L3iYSfVde%2FuJ6jlOFo6930OjLO8aqvnN%2BQ8cfNR%2FunecTk1MPEe7pzRwME5OEuigxgAOesqzi07Y4MjsF8YLT6g9axO9ObfK4BhwxR9UguhiO%2FCuq3tksWfpMN%2BSaBf35Q95YuBULBmjh6IA9remlcubUPd7zT%2FzhZANiF5HNQGQFy76EoqzLAHnVIOiBTJjrjpN7u5VMobTJLUm0vozPNQhsntzYwKJCnhDEdTBIboO46fSMleR1t2olC1KnymOcurB1dR%2FtBddLUJ%2BAfGV321LnKijPbdaA1p5Qj68kQfEVRozmPGYQxzQ6cohIJNMd3zoktrdYLmBkdqsIl1tsw%3D%3D'),
	('pay_yuan2', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-03&out_trade_no=ALI-3&trade_no=ALI-T3&total_amount=0.01&trade_status=TRADE_SUCCESS&sign=cjphwBQuCZCnkVQGd5%2Bc9DVjz544RgfJdQJFZk%2FFv0uBFY3b%2FqNSdc0hRE2Ehpa4ELGJ0FIo52RQLbNvF5ztKoYUwwI27BWyKssg6vp%2B754wObO82a5Y4MRbdaQEuNiydRPGtRzuvOVBmpBQk4swE0AEwNwHbTXhgl7DfkRep9AnkHGYK0F%2BBNlNe9bAL3vh%2BcQnB3bSbnCGdroZHdy8L%2FTXrax5RiwBDhUlRkGBO53QtNhHlprBTQkhqhZuossELqZKN1JDJ8gHog%2FStqY1LSe8GMpBfXB9c8KEq4TGjbKkvY9tWk8ipTPlCxVbGEZPTF9x96seu4O6rrVw7EJn%2Fw%3D%3D'),
	('amt_3dec', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-04&out_trade_no=ALI-4&trade_no=ALI-T4&total_amount=88.888&trade_status=TRADE_SUCCESS&sign=IxZsGzVxMT7EGQ4oQ%2BaDgxtA9k0JGhn8OUhSNy8ok%2FIdjmTFg3HgYFK21uXvQ%2BUIIeIaGDMpeTNVaISqqyCQQc%2BHxA1CIML9BUta5TFlf5jptP1qffEXwfF2gwWrh3pZcvuKv3GkRxM7s%2FtxTmCL5%2F1ziEwyM963bAhdFJ%2BxDSqhMzBv0VRV4YCT%2FBLPrCN%2Ft7I6YcwFaatGWGxZN8vI8IWkYz3lZe0xrt7epwDdNQdctIQI6mkHJhdaIzQMcBjxgtUXIUNoxQr4hDxf2UfIm9o2H9wi3RRZTAuqoHuLQcFn81hHeBAyQETW%2FzpkEhBUHAyKQZAZ%2BBVuKwtq%2Fq%2FoqA%3D%3D'),
	('amt_comma', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-05&out_trade_no=ALI-4&trade_no=ALI-T4&total_amount=1%2C000.00&trade_status=TRADE_SUCCESS&sign=TfjTQdzyHrKX%2B2Nj8j32x5%2FXXeZue%2FnwGSOXvZss4x8wBGOYgSnqfpJiIy20WlHPA%2B76PIKb%2FhTTS3y7CpisFDsBfikEDUwlk7DPRyMGX83VxO0tNN%2Fo2Y18ugG6qeZbplm2cbgLbHaPzYCFpNBJ1JdiMe5AdLmBaHQozlRPKWyJoGDpATHWybjQ6sl3HZchQfiYQIl6BeVMFuMGHPUkoqqjleEoddYGfPvzxDy5RfPQZLJE4lWSG%2ByyW4EoPTtETLT1mdMQP5r5tfDPz2owj3A2khoxWOElMYpVLC45C7InUrMFPa6OYUDqshrI%2BTkl%2Fvd84WsYBhnBxoNIp2r%2Flg%3D%3D'),
	('amt_negative', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-06&out_trade_no=ALI-4&trade_no=ALI-T4&total_amount=-1.00&trade_status=TRADE_SUCCESS&sign=o8AJEUHSNLdIg0s%2FT6xKh0r5kz2sk%2B8uCUtyV%2BBcWA2d5fNO%2FKMHtxh6ZEtmMp%2BpuE%2FhC7MFQnluqlXclcbnDMwSkqM3E%2BcxHyBnzvuvu%2B3M%2BCCyAhPxfgHxs5yANlb3funpLJ2KVM3otdJ4xbKJ3Ul6gE8CDKGU1sjnmLL3cieKVG7OnlKnhFK4dTccy67QYtaL8b47dPgF8GoQ2bjsjQ8vE%2F2Yb1tL7EkSrjYXken2K7AYr25fx%2Bl5BftIHX5jXC4XfNpZW8u%2FV4hND8pgGsTseNOn8tyONCutgLIW1C0hZGAJAfMif6KrY722EbV%2Ftuoa4P8TKKVb5D0MUWxkZg%3D%3D'),
	('amt_exponent', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-07&out_trade_no=ALI-4&trade_no=ALI-T4&total_amount=1e2&trade_status=TRADE_SUCCESS&sign=DBwUtpbmUwmp4Q1pXVPE4gMKpYh5u37gBkK6Kx0hbudkG1NGkQxXoyGNjsuQj4VHb7cS68mxAV7lNTnDmRNcp6Rto1Hm%2FcUIs3DOn%2BKgyhaGK%2B7DTLYg%2BZrW5mnT%2Fr%2F1JBMXOCZJ3JSyNjgXf4hjVcn9Kj2a4CIqQz76JykZmN%2B%2Fon6UBPG%2BBNnQ5RxuloUaQWMkcebv9J7c7LmyzNe8FhIq3c2MuP0CHjNAyR2s7izscl4tHiUCIAL4eVLDRmMoowrNarCz4p5Af4Ev7cpw9iNffnsvrWgwUn6natOlYoVBTpxX9cgJsfzaIGPTchTGOlk5DMiCnwhYEXZoCk5%2FqQ%3D%3D'),
	('amt_bare_point', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-08&out_trade_no=ALI-4&trade_no=ALI-T4&total_amount=.50&trade_status=TRADE_SUCCESS&sign=iIoT0TQX%2Bw1QWIfGwSyO%2FhmMV0cWO%2BlT5QWvdWxjRlHBMSgHnXCYmGYTPVOPdR9r8Zyh6%2BlbtqgyEijWNFsTVxlFxMLG1JciiptORaz5rx7Jkmkc574geQz3Rc%2BVpdgLHt0uSIJiqWq25QEp%2BLAo%2FVBQGQxRJiEaAi4a8%2BYFU%2FFL2i8Kny0LXTBGA6C5GXRKU9QJCdiHKswpTmxyDE01SZOFPI9RpDWZGV3hrOVR4kybuhLk40uPKs52qlSfZsDPU2UskJnoKDVxHhHDLGlJA40k7UJprX7KiOUH9AiQ7WM5fHfpFIX1v8elxQqigvBVqPM1RIr061D2uGeeh%2FAYPg%3D%3D'),
	('amt_space', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-09&out_trade_no=ALI-4&trade_no=ALI-T4&total_amount=+1.00&trade_status=TRADE_SUCCESS&sign=i%2B6jQUGEh%2FVjWkg5tvOA9IFI8RyOqnnB14kRgIvoO5jEYuO%2FA1fUO2kQmUJZoX1qZjqbVyFJs2uqPetpFsrzZwAkEv%2BuldGY5lQ393UrBRxsZH15KDZUB52PoCLfYeumEsRyYn016fe0pWG3oT7%2BU8x9z8%2B2xPuCmXH4Z%2Fd075%2BOOn8G9VZBjzwH2HGfacoyb5IlsU59H9WYybnIwPfHUP%2BC%2FS1BjKdsihGNc0yzux1ZPOXzQjGF2Wh12Y4zgMgng0dPgh2Hzwxik1fheKGr3SuvfW%2FoV8rLPvB7IoGwjx9tlBmpcAP54vyjKN8TwdI3dcjbfNPrsCQFxamMi10GPQ%3D%3D'),
	('success_5', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-10&out_trade_no=ALI-5&trade_no=ALI-T5&total_amount=66.00&trade_status=TRADE_SUCCESS&sign=VaJtAZpMMzXjOoawAS5ZUtymBjQPVeXjG%2B4A8v7jW7HJwY3HZ0AZ84FRWDcAGjw1QUudDT50u4NKu7Dy%2FTsIVe2nwga%2FGSvknIwU9hRSgab%2FRulyujDEktFNwvZLmCqTPEbrx7xXcQro2cwNOjKJKSRQwMt7bm4XZ4xrxvnfgIIBP1x1Wu2RnZ1KgNRdw4kxPoP1%2FjmI0dAO8NkVwUJSFOo9ECUeRxqdXJDxQ2vtuDeX%2BPhapdry0WBofSO8PsnpT6peNe70wJJADaK6vy3HK4lZNk0T3diSKOLJwZFg4PuhyTXVEmn%2F9pcZTQzcy4%2FMQPJX0Rq%2B7cJmB61MgSThRg%3D%3D'),
	('finished_5', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-11&out_trade_no=ALI-5&trade_no=ALI-T5&total_amount=66.00&trade_status=TRADE_FINISHED&sign=tSDNgktiVeVtLrYvn6X7NxYumpbZW%2B9GoO%2FzAYDfCmQCldh5rTb3AYPGjvngVBfo60qZqHhDO%2BKnZMfv%2BhUrBgWHqWphi7VSpmDdcm6u4NREPM70BMhOf4hpfKuxMToH6se8kuo4SYxQjB00iiDDwSccAZ4kb4WVTtjN9BGYNQZewFUV5mKvvYxr8anf%2BiRdoCdW4RsPzOibh6cxyDd1b1sWq7ilnb5O%2FKuwv%2FLr9y4s%2FtFf%2B%2BRG6SQGsfDEB%2FFqmQVylkALGWxl3h42cX2z4jc1bAteF925JVrDkK2r2UsTMUHruGxPUtyZQiNow71v0w5f3%2B2qsjMafJHJupOp4w%3D%3D'),
	('closed_6', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-12&out_trade_no=ALI-6&trade_no=ALI-T6&total_amount=10.00&trade_status=TRADE_CLOSED&sign=C60i6WEBx1FQ6igfe82gki8o5NoeOol4bVcApkVmhZ13fsG%2F9J9mZ%2FC%2B4fc0uup%2F2x6VfHlc9VtT%2BzSteIjqcu82YS8tUjpcc0zIG1iUdoGNLIUj0Q6skzZSetdMKpGwiJHouNc4zsjpKunE%2BmcCj7ERQR6icgzHVkaTXJ7LH9m6rn3rDnL4mN8LNtHdGOoot70x4Sxw0JawUtj3bjEbDduG%2FI57lWWoYc0e%2BpCTYFT%2FAa8I7IbiER%2F26BLk5%2FzpTQX0XAhaJHXWctLpIf82mg%2B8O6WORMv3oFcxPbJwxAEFBs0qc7p2J8L1iI2BRgdFFoRcpsXA61OePKRrh9AEeg%3D%3D'),
	('refund_part_1', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-13&out_trade_no=ALI-1&trade_no=ALI-T1&total_amount=20&trade_status=TRADE_SUCCESS&refund_fee=5.00&out_biz_no=ALI-R1&gmt_refund=2026-01-02+10%3A00%3A00.123&sign=JbegkVXFuOMkHlpll%2BNNTCB2kn92cIxyh1somu%2B6ezVl6jtx8FufcemMfzJy%2B8ZEoO%2F82q%2BJdo4WqBFA1WVpgHwK2F82nnx1IZv8y%2ByRBIg%2BH1mq%2BeEnsBmUzbl6VNJvntPCjyDzC6Muge9ugOm%2FMBYTClt3RMcevTDqfHIrEIlY2rt4peV6bUtn0%2F0oW6v%2F3PYK0ctDGM7QreoV6zkK5Jmb5vsMpA627JioCCr1i29YVbFLNauTQ6ns1Q8dYjPhRXJFicJgsCwIOT9Yn17QzgndaYGPTbE0tGrVcLkFb6laRcNxS32McpaRT%2BFb3svpfszM%2Bod9g2qWBX5Ygm6E9g%3D%3D'),
	('refund_full_1', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-14&out_trade_no=ALI-1&trade_no=ALI-T1&total_amount=20&trade_status=TRADE_CLOSED&refund_fee=20.00&out_biz_no=ALI-R2&gmt_refund=2026-01-02+11%3A00%3A00.456&sign=txpoifsaiH9uQvhp4wdRyPYSV5hLmCOBIrlWAAJ0z%2Fb%2Boe9Adeb9ClAJgHI4ekl5gqXWiNXEs0rnp99XFJusHwwOsx2lQxCmsNh4y%2BqGNGjY8%2FHkV0yaAH4RVf4KiLA6je6mJ4UwHVKiad1bZwsTrbcnxfNzA5FyFy7cJpa%2FbymQNbKtNcrnRkvOHF2Rru%2FUB1M1%2Fao%2B92dxjoHXeVOhK7r4fQOP7H%2F2uUWhrHRZ8vDKiCFNKP%2BSs3v30AzhcrKdg0Os1vIgF5AoSPlpiA7r4gr%2BKOIQXa8%2BNATQLxXfsGu8e3cxvu5gCyDPeqR%2FATXYnEV%2BEwcqi5VOzRlHN5g9oA%3D%3D'),
	('wait_7', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-15&out_trade_no=ALI-7&trade_no=ALI-T7&total_amount=1.00&trade_status=WAIT_BUYER_PAY&sign=HObSfDxuXKjuoIiWFRp5Ghq7foIfILEa0nJtdbWt7amnHzUA9w1RN624D8ATWs1MH6xVK60iLuByj6q905dogYVkDwnWIq4i2%2BAHQBZIDG7R5XC0ZzlCf98VULYfg4VXa0%2BkykMPb%2F%2BR98KrClhEqfRGTDhnllFkwnoX3j0np8qG6igUzJhB7tYjF9kwzJErc8hByZJ6PtZoRG8rl9LVL%2B%2F59gNpC5NE0npHMtZYwft479GMSMpw4epAGaqA7bo9x3P99qzkMmqCm9rj8FIA9Fl3%2BHbg4Tz3WsQRGvwwIpy5yGuBElqnvJWbnpjgFp9kZvyEOVWxb8NUIpWzsThBVg%3D%3D'),
	('seller_other', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000009999&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-16&out_trade_no=ALI-7&trade_no=ALI-T7&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=qtlQVECPntQZjeL2UlOJfMfne1kdpCKzUl1KOVI5eFbw%2FwE%2B4hQqjZlBpQTZpgfRcAADliWqJcmdV%2BE3%2BHrEoBtwKQ5PK3kOEYpFkcHhGBpQiuyWy%2FoiUTkLXzB%2Bd9%2B7AdgRNcOnj%2BqbWwY8uHguJFqySO%2BDgqrLjVB8YvLDtviTtf%2FxhN2ls3Tw9rTLZHb0PP%2B0YWCcWZVV7EvoUVGQywBQMZzfL1akYo%2FpUl8vLPqofUQeZ4M%2BGiyiVqzVKaW2pz%2B7L7zBPrvzsukZ3cGldrES%2FjNUJ3cSHq6We21P9Vr%2BuB1dr9Prv7sg%2F8eEhKmmKqwh%2FHtH0tP3nYLgLQsGAw%3D%3D'),
	('no_sign_type', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-17&out_trade_no=ALI-7&trade_no=ALI-T7&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=QWTEdYpBouM%2BECxB56CAKnOyRlxJD%2BXqyivFk0v5tGXOOchjtsdNrYXGrNROhmB8brvjpl%2BKAJn3rU9PfeWLZ52sNOWp4CJB87wde96zr39vqB0x6RKFOviM%2F0rlSc%2Fp1DOFeFxGa4ACK0X7IljtVkoKANTXoZQTn5Lg5ehDKVqp253rwQVaxDy12efEjFcPZbsyGB4jbL4OJ0b5U6aTsRK9rOA%2BBQfolURA%2Fqc1mnkDE0m5QjeqHvePpKklPlVWaY4oAlP532azS3OToMs1Uv%2FiMTS84of1jTgEfooW54Ekphfmz%2BIM8Io9iRAVqGiVOPk1hMbRPmERoxQ%2B8rtG0Q%3D%3D'),
	('no_order_no', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-18&trade_no=ALI-T7&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=ODa5ndykW%2FTbMVgGZvbZc3ZeB7YP7NWNH1jIOeYTuICx6MJPlg7cK7MGTVAKn23OnT5epAsO4ynBB86lPx%2Bs5s2TqkKTg5qcukMu%2B%2Fj3xykBg7SdljxtrYWFwuPrAEFCIegVMB%2BLOkWmrM%2BS3UMU7CCn7IYD9XIw%2BrDOv7CS9KrhHyzW3ynnWrevofFTY5r27H70tp%2Bqxn0H%2F5L%2FSWKhsHrTy2Gh45799w5TITB4KuDXqLyxlMIuPPFS4mp2eQPrKlPjZYieW4LwYrC2Z9L1A1JJ7AAO0FliFVQ02p4tM%2FEF9ivaBWfJfXp0yl88VmE%2B1bdf5CmU7UAJt7SdEaCciQ%3D%3D'),
	('key2_8', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-20&out_trade_no=ALI-8&trade_no=ALI-T8&total_amount=30.00&trade_status=TRADE_SUCCESS&sign=PSBfaiRQkDKjt7RVvMpVyFrs%2FQnsRW3TSuva9O9ACikaoLF7ENzG3FwTHV9ZscJSIc9Zmv%2FyuOdMfm%2FrQuCwRMc2y1sJ8r90JwAjLF5JMcpe0RUtXs4liaRdjfsA7LasVSBGYJI%2Fpv1%2FqKJv40LIIlSYwX6%2Flje%2B4BQhhRtahiDcEc27E6UhT8VHPlNCZSbjLohXmpFXG%2BZVMJDiqG40Gx1RX6hi4NYyk%2FELF64tMA6IA1bVSERmRS%2FMdbFaY9MwuVu50nd7z3OWHrnTrSpq8hpvrsBcGBL%2FpuJPtKCvyq1EFLxckB2Gd96UqCI0osgTGm2yIxWw67VJXUOHznMbsA%3D%3D'),
	('key1_9', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-21&out_trade_no=ALI-9&trade_no=ALI-T9&total_amount=40.00&trade_status=TRADE_SUCCESS&sign=JL31HzlxlHcvu4BqDu8obk8pweOHZFP3NMbUYGwBs5EnEcnoDbrUTuXfvKoTGA60kpCR%2FgqI1iJaMrQPSIPOAXsTFlbFxk6F4r0c1ScpI7Qi913t4mmifGafo1IZCCoEApf2rCgPQ%2FQgx3Vo42nxkwI%2BRgB43TrsFtk0lTLq9CrGn00mSYIGnemE%2BYKVPIPdYeG4SnC%2FEnnKrbB3r5Ga4rPvCN09ngVKRbU8CwdMjgFd6QR6WgOxzYVfRhEfsW4yYikkQ22Mo%2BQBt4ih4H0by0mrYKQR4Rpm%2FtAmCRUToHpRqWh%2BuJPaUipRIiVILJp%2FXjgdhrXz5ODDspZWqOea9g%3D%3D'),
	('key2_9', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-22&out_trade_no=ALI-9&trade_no=ALI-T9&total_amount=40.00&trade_status=TRADE_SUCCESS&sign=lb32FYVfvcQ0B6iSKzdg345XMf7nZHhx4pgNKQhjGgBBYUenxHC0cMF2DJJyzSiHrsIGmbSguhTCGl0jmGL%2BEJ9RZHUZ%2B3A%2BrWt3Ho4BoR3TEExiMt%2FTondFH9eoZGeRGcLZttEEou4xUaGDuu6Xpe4f7BgVQwNGr2p8SNK2ciyAslwsaG2%2FydwSu2qoZfCk50rVIljtK2FWjMR8qSEAPScC98CuHIj7RartKVNyBvSyitc8zqWyW%2BSebEYuy6wqbME3BxEbRiI5yqDY3YfSHu%2BCZQYwNZzTOfBIPH5e5N32OWUDuuTMvrzmI8oVsvNbBRSbZlcb9d94vVJuKFE0pQ%3D%3D'),
	('paid_zero_fee_10', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-24&out_trade_no=ALI-10&trade_no=ALI-T10&total_amount=20.00&trade_status=TRADE_SUCCESS&refund_fee=0.00&gmt_close=2026-01-02+10%3A00%3A00&sign=oE7MmjDE%2FZgmpnwm1MiMg7%2BeHJ3RmioZUOC8r07DsoYLF6W4Ee1fIjSOanhvTzGyUdsTVnnuTKySsz9bK2nmG2Xy%2Fs61ccymCNj63ZUA50DNLdrWjnFXV8o6OsR02gNRZl08U0e4SBBgUcvqN2eydbZ0PCngnnZTnGxKEQHFQU9biBX%2Bhw2jyEKxyysqn0g9xhz5aCdJP5XoHfjXUHqn5CSrvnXtitw%2FWSHd%2BLV%2BSuJv9OM%2FnwR%2B8XCuUQp%2BFQhwq6NrDCQ0ajeCmVlbnQqu3B89gZlJGd1ssEe324SSc7JDv0n2oyz8LZmXecGIS2sONOkxJiKfKb1oe%2B%2Bdzfon%2Bg%3D%3D'),
	('closed_zero_fee_11', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-25&out_trade_no=ALI-11&trade_no=ALI-T11&total_amount=20.00&trade_status=TRADE_CLOSED&refund_fee=0.00&gmt_close=2026-01-02+10%3A00%3A00&sign=A6xM6bQRrqiXn0EBfE1k4ak4DuubbKPFEFBDIaMMYQgjGLODhCQqwM7kUIOBlH8DLUh2%2Ffb83qC0GCITB%2FdQ6NtbNttfpu9opXse%2FzY74VFd79IizM20UQH7c4hLnz4qhfCWfMs6IqjDUwGmtx4dbt1B%2Fn3lkl3IXamdkZGDQXjSNH6GCMj24gtHdB5G3Qc6WHpbdcD0t7bq%2FhawC0SFA3OZaPL9Hh49KbC8V72U17k5GW7O8HQHqQJFEdYxmKOCNbcIG2DkAP%2FTO8mDo3o3z2m0Q2bSSPX8%2BKv58D3ErStAudtppsfeyh%2B%2BXBnW8PlilkPXLFg80CYCFZvO5gDyXg%3D%3D'),
	('finished_fee_only_12', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-26&out_trade_no=ALI-12&trade_no=ALI-T12&total_amount=20.00&trade_status=TRADE_SUCCESS&refund_fee=5.00&sign=eZMAexSm3NnQEoRA6WlUKz1mUXpPoxZQ%2BBbg0%2BuK3L%2B8QBaMF%2Bg7%2Fzsc7LmsWI2LROxsVP51agB0A9gGrv3K2YTPbJ4NZek4v4OLypzrb1bq78qp7yNoxu1M7v%2BrtAbn5GtJw0yDgyV%2FVD6Js%2FI%2FNGy0hVA0hLeNrVyQcmk6Ok7n6ecLZU8rdCIs5qax%2BgclBgFzczr2kcnVHqOmaeF4p7tklaD9KsD3YuSZxd4QZYcTzSlY1Dkn1Q8XcB2MxY4hYU7IiI%2B7xgV56BSo0oUjbXZfTafdMSa9u4ijzP8tvGDL3WIQ1CaW6uEEkIV2caKbBH7f16rHPegcBtMWk2t%2Fqw%3D%3D'),
	('refund_zero_fee_10', 'utf-8',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=utf-8&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%E5%9B%9E%E5%BD%92%E6%B5%8B%E8%AF%95+order&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-27&out_trade_no=ALI-10&trade_no=ALI-T10&total_amount=20.00&trade_status=TRADE_SUCCESS&refund_fee=0.00&out_biz_no=ALI-R10&gmt_refund=2026-01-02+11%3A00%3A00&sign=QtxpUUKgSLczWIOa%2FTsYAGgXGuH%2B5gphcdyDo9xm2pPW2YHNcgZCNnGWcMQ4Rc3kUKq14h7Saq79OpWEQE2BfdH7jzYEeKvAJNtP9XXybX4nDEB2ccIxUGOIqUmTiLgW9izBVqfvEAsMLX9tf1WIxF%2FzGRNReUOnTgeDb7wd1Lt9fwe9SUeO6pcwst6OxqCW6j%2Bu5A9xTW5v4d3PlbpIYtX0oicIxjIXv4pWowO%2FpU3tLWi%2Fy25b%2BDVIjMjS4r93%2BkJVGQxjh8OirUJ%2BG4wJBH8q9Rypc6lDxCBaXBY47PQ1TUyW8H3PCkfR7JIXtTCEBNd31heNmBwRrLteGaau0A%3D%3D'),
	('gbk_invalid', 'GBK',
	 'notify_time=2026-01-02+10%3A00%3A00&notify_type=trade_status_sync&charset=GBK&version=1.0&sign_type=RSA2&app_id=2021000000000001&auth_app_id=2021000000000001&seller_id=2088000000000002&buyer_id=2088000000000001&subject=%81+bad&gmt_payment=2026-01-02+09%3A59%3A58&notify_id=ali-n-23&out_trade_no=ALI-7&trade_no=ALI-T7&total_amount=1.00&trade_status=TRADE_SUCCESS&sign=CkVDjTKUBheUDUH2772H32ru1va%2B73TbmQ7JtXloJNj6P3YRDs%2Bfd5gBvzDprWzL6EhC%2FA5TiiBCnY6SdXvvsY29xZfb%2BfOGG9b0JMTFlvGlcofDBZMtKICCau57IwOihMajiimFJIcpZLftq3fOdXDmjPrdh%2F8WjyBqQJRoeJzmclv5uN2Ra8SKeF0z5oEr97g65s94Os4Lw66s8LJD4C9MtWUcMFhs9fWj4%2BtGJjqJ2MaLW3hFyApmRFeB8tN1%2BDRIXXUn0wY5jXLoe9dYuPHYkpHc%2BmBPhMTcC%2BvEOskD8iYyG%2FGnJLsUaPn3PqGpOdFeDV00LzXTlwDb3xP%2FZg%3D%3D');

-- Deliver a generated body with its Content-Type, as the shim would.
CREATE FUNCTION t.ali(chan text, form text,
		OUT status int, OUT content_type text, OUT body text, OUT outcome text)
	LANGUAGE sql AS $$
	SELECT h.* FROM t.ali_form f,
		pay.paynotify_handle(chan,
			jsonb_build_object('content-type',
				'application/x-www-form-urlencoded; charset=' || f.charset),
			convert_to(f.body, 'UTF8')) h
	WHERE f.name = form
$$;

INSERT INTO public.orders VALUES
	('ALI-1', 'pending', 2000), ('ALI-2', 'pending', 8880), ('ALI-3', 'pending', 1),
	('ALI-4', 'pending', 100), ('ALI-5', 'pending', 6600), ('ALI-6', 'pending', 1000),
	('ALI-7', 'pending', 100), ('ALI-8', 'pending', 3000), ('ALI-9', 'pending', 4000),
	('ALI-10', 'pending', 2000), ('ALI-11', 'pending', 2000), ('ALI-12', 'pending', 2000);

-- Amounts in yuan with 0, 1 and 2 decimals become exact fen.
SELECT name, r.* FROM unnest(ARRAY['pay_yuan0', 'pay_yuan1', 'pay_yuan2']) name, t.ali('ali', name) r;
SELECT order_no, trade_no, amount, currency FROM pay.payment_record
WHERE channel = 'ali' ORDER BY order_no;
SELECT order_no, status FROM public.orders WHERE order_no IN ('ALI-1', 'ALI-2', 'ALI-3') ORDER BY 1;

-- Anything else is malformed (after a good signature) and writes nothing.
SELECT name, r.* FROM unnest(ARRAY['amt_3dec', 'amt_comma', 'amt_negative', 'amt_exponent',
								   'amt_bare_point', 'amt_space']) name, t.ali('ali', name) r;
SELECT count(*) AS logged FROM pay.payment_notify_log
WHERE channel = 'ali' AND order_no = 'ALI-4';

-- TRADE_SUCCESS then TRADE_FINISHED for one trade: one payment, one move.
SELECT name, r.* FROM unnest(ARRAY['success_5', 'finished_5']) name, t.ali('ali', name) r;
SELECT notify_id, event_type, status, note FROM pay.payment_notify_log
WHERE channel = 'ali' AND order_no = 'ALI-5' ORDER BY notify_id;
SELECT count(*) AS payments, sum(amount) AS fen FROM pay.payment_record
WHERE channel = 'ali' AND trade_no = 'ALI-T5';
SELECT status FROM public.orders WHERE order_no = 'ALI-5';

-- TRADE_CLOSED without refund fields closes a pending order; with them it
-- is a refund (refund_fee is cumulative: 5.00 then 20.00 of 20).
SELECT name, r.* FROM unnest(ARRAY['closed_6', 'refund_part_1', 'refund_full_1']) name,
	t.ali('ali', name) r;
SELECT order_no, status FROM public.orders WHERE order_no IN ('ALI-1', 'ALI-6') ORDER BY 1;
SELECT refund_id, order_no, trade_no, amount, status FROM pay.paynotify_refund
WHERE channel = 'ali' ORDER BY refund_id;

-- A refund only by its evidence: refund_fee above zero with gmt_refund or
-- out_biz_no.  Alipay's own documented payment notice carries
-- refund_fee=0.00 and gmt_close: it pays; a TRADE_CLOSED with
-- refund_fee=0.00 closes; a refund_fee alone is no refund; a "refund" of
-- 0.00 with its evidence refunds nothing.
SELECT name, r.* FROM unnest(ARRAY['paid_zero_fee_10', 'closed_zero_fee_11',
		'finished_fee_only_12', 'refund_zero_fee_10']) name,
	t.ali('ali', name) r;
SELECT order_no, status FROM public.orders WHERE order_no IN ('ALI-10', 'ALI-11', 'ALI-12') ORDER BY 1;
SELECT trade_no, order_no, amount FROM pay.payment_record
WHERE channel = 'ali' AND order_no IN ('ALI-10', 'ALI-11', 'ALI-12') ORDER BY 1;
SELECT notify_id, event_type, status, note FROM pay.payment_notify_log
WHERE channel = 'ali' AND order_no IN ('ALI-10', 'ALI-11', 'ALI-12') ORDER BY 1;
SELECT event, order_no, amount FROM pay.paynotify_outbox
WHERE channel = 'ali' AND order_no IN ('ALI-10', 'ALI-11', 'ALI-12') ORDER BY id;
SELECT count(*) AS refunds FROM pay.paynotify_refund
WHERE channel = 'ali' AND order_no IN ('ALI-10', 'ALI-11', 'ALI-12');

-- Recorded, acknowledged, not applied: an unpaid state; no order number.
SELECT name, r.* FROM unnest(ARRAY['wait_7', 'no_order_no']) name, t.ali('ali', name) r;
SELECT notify_id, status, note FROM pay.payment_notify_log
WHERE channel = 'ali' AND notify_id IN ('ali-n-15', 'ali-n-18') ORDER BY notify_id;

-- Refused: another seller, no sign_type, a value that is not GBK.
SELECT name, r.* FROM unnest(ARRAY['seller_other', 'no_sign_type', 'gbk_invalid']) name,
	t.ali('ali', name) r;
-- The Content-Type charset must agree with the signed one.
SELECT r.* FROM t.ali_form f, pay.paynotify_handle('ali',
	'{"content-type": "application/x-www-form-urlencoded; charset=GBK"}', f.body) r
WHERE f.name = 'wait_7';
SELECT r.* FROM t.ali_form f, pay.paynotify_handle('ali',
	'{"content-type": "application/json"}', f.body) r
WHERE f.name = 'wait_7';
SELECT count(*) AS logged FROM pay.payment_notify_log
WHERE channel = 'ali' AND notify_id IN ('ali-n-16', 'ali-n-17', 'ali-n-23');

-- ---------------------------------------------------------------------------
-- Key rotation: no key id in the form, so every active key is tried
-- ---------------------------------------------------------------------------
SELECT r.* FROM t.ali('ali', 'key2_8') r;
SELECT pay.paynotify_add_key('ali', 'alipay_2', t.vtext('keys/alipay_2.pub.pem'));
SELECT r.* FROM t.ali('ali', 'key2_8') r;
SELECT pay.paynotify_retire_key('ali', 'alipay_1');
SELECT name, r.* FROM unnest(ARRAY['key1_9', 'key2_9']) name, t.ali('ali', name) r;
SELECT order_no, status FROM public.orders WHERE order_no IN ('ALI-8', 'ALI-9') ORDER BY 1;
-- A key whose validity window has ended is not tried either.
SELECT pay.paynotify_add_key('ali', 'alipay_1_old', t.vtext('keys/alipay_1.pub.pem'),
	not_after => '2000-01-01');
SELECT r.* FROM t.ali('ali', 'key1_9') r;
-- No active key at all.
SELECT pay.paynotify_retire_key('ali', 'alipay_2');
SELECT r.* FROM t.ali('ali', 'key2_9') r;
-- The key as Alipay's console shows it (bare base64, no PEM armour) works
-- too: the repeat authenticates and is answered as a duplicate.
SELECT pay.paynotify_add_key('ali', 'alipay_2_bare',
	regexp_replace(t.vtext('keys/alipay_2.pub.pem'), '-----[A-Z ]+-----|\n', '', 'g'));
SELECT r.* FROM t.ali('ali', 'key2_9') r;

-- ---------------------------------------------------------------------------
-- Only what the signature covers is the notification (docs/GATEWAYS.md §2.3)
-- ---------------------------------------------------------------------------
-- The empty "body" of the skip-empty vector is outside its signature and is
-- not stored; the keep-empty vector's is signed and is.
SELECT channel, payload ? 'body' AS has_body, payload->>'body' AS body
FROM pay.payment_notify_log
WHERE channel IN ('my_ali_empty_param_skipped_valid', 'my_ali_empty_param_included_valid')
ORDER BY channel;
-- Anyone may add empty parameters to a captured notification and it still
-- verifies (over the skip-empty content): such a copy is neither stored as
-- if authentic nor an anomaly when the original arrives.
SELECT pay.paynotify_add_channel('ali_sig', 'alipay', '{"app_id": "2021000000000001"}');
SELECT pay.paynotify_add_key('ali_sig', 'alipay_1', t.vtext('keys/alipay_1.pub.pem'));
INSERT INTO t.ali_form (name, charset, body)
	SELECT 'wait_7_padded', charset,
		replace(body, '&trade_status=', '&zzz=&body=&trade_status=')
	FROM t.ali_form WHERE name = 'wait_7'
	UNION ALL
	SELECT 'wait_7_refund_fields', charset,
		replace(body, '&trade_status=', '&refund_fee=&trade_status=') || '&out_biz_no='
	FROM t.ali_form WHERE name = 'wait_7';
-- an unsigned refund_fee is no refund field either: absent, not malformed
SELECT name, r.* FROM unnest(ARRAY['wait_7_padded', 'wait_7', 'wait_7_refund_fields']) name,
	t.ali('ali_sig', name) r;
SELECT notify_id, status, delivery_count,
	   payload ?| ARRAY['zzz', 'body', 'refund_fee', 'out_biz_no'] AS has_unsigned
FROM pay.payment_notify_log WHERE channel = 'ali_sig';
SELECT count(*) AS anomalies FROM pay.paynotify_anomaly WHERE channel = 'ali_sig';
