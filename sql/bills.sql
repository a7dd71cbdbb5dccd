-- Daily bills (1.4): the gateway's own ledger read in and compared with
-- ours.  The bills are test/bills/ (made by test/bills/make_bills.py in the
-- gateways' own layouts).
\getenv abs_srcdir PG_ABS_SRCDIR
\set bdir :abs_srcdir '/test/bills/'
SET search_path = public;
CREATE FUNCTION t.bill(name text) RETURNS bytea LANGUAGE sql SECURITY DEFINER
	AS $$ SELECT pg_read_binary_file(current_setting('paynotify_test.bdir') || name) $$;
SELECT set_config('paynotify_test.bdir', :'bdir', false) IS NOT NULL AS bdir;
SET timezone = 'UTC';
SET datestyle = 'ISO';

SELECT pay.paynotify_add_channel('bl_wx', 'wxpay',
	'{"apiv3_key": "0123456789abcdef0123456789abcdef", "mchid": "1900000109"}');
SELECT pay.paynotify_add_channel('bl_ali', 'alipay', '{"app_id": "2021000000000001"}');
SELECT pay.paynotify_add_channel('bl_st', 'stripe', '{}');

-- our ledger, as notifications recorded it (created_at: when we did)
INSERT INTO pay.payment_record (channel, trade_no, order_no, amount, currency, notify_id, created_at) VALUES
	('bl_wx', '4200002087202603142345678901', 'PN20260314000101', 10000, 'CNY', 'n1', '2026-03-14 09:21:10+08'),
	('bl_wx', '4200002087202603142345678902', 'PN20260314000102', 2550, 'CNY', 'n2', '2026-03-14 11:02:50+08'),
	-- paid at 23:59:58 on the 14th (Beijing), recorded here after midnight
	('bl_wx', '4200002087202603142345678903', 'PN20260314000103', 880, 'CNY', 'n3', '2026-03-15 00:00:03+08'),
	('bl_wx', '4200002087202603152345678904', 'PN20260315000104', 5000, 'CNY', 'n4', '2026-03-15 10:00:05+08'),
	-- in no bill of the gateway's
	('bl_wx', '4200002087202603152345678905', 'PN20260315000105', 1200, 'CNY', 'n5', '2026-03-15 12:00:00+08'),
	('bl_ali', '2026091622001412341234567890', 'PN20260916000201', 10000, 'CNY', 'a1', '2026-09-16 10:55:25+08'),
	('bl_ali', '2026091622001412341234567891', 'PN20260916000202', 2550, 'CNY', 'a2', '2026-09-16 16:59:00+08'),
	('bl_st', 'pi_3PzChargeTest000000000001', 'PN-S1', 10000, 'usd', 'evt_s1', '2026-03-14 09:21:09+00'),
	('bl_st', 'pi_3PzChargeTest000000000002', 'PN-S2', 2550, 'usd', 'evt_s2', '2026-03-14 11:02:47+00');
INSERT INTO pay.paynotify_refund (channel, refund_id, order_no, trade_no, amount, status, notify_id, created_at) VALUES
	('bl_wx', '50303108562026031401487282563', 'PN20260314000101', '4200002087202603142345678901', 1000, 'succeeded', 'n6', '2026-03-14 15:30:20+08'),
	('bl_ali', 'RF20260916000201', 'PN20260916000201', '2026091622001412341234567890', 1000, 'succeeded', 'a3', '2026-09-16 14:15:20+08'),
	('bl_st', 're_3PzRfundTest0000000000003', 'PN-S1', 'pi_3PzChargeTest000000000001', 1000, 'succeeded', 'evt_s3', '2026-03-14 15:33:22+00');
-- Stripe's payment_intent.succeeded names the intent's charge
INSERT INTO pay.payment_notify_log (channel, notify_id, order_no, event_type, payload, status) VALUES
	('bl_st', 'evt_s1', 'PN-S1', 'payment_intent.succeeded',
	 '{"data": {"object": {"id": "pi_3PzChargeTest000000000001", "latest_charge": "ch_3PzChargeTest000000000001"}}}', 'succeeded'),
	('bl_st', 'evt_s2', 'PN-S2', 'payment_intent.succeeded',
	 '{"data": {"object": {"id": "pi_3PzChargeTest000000000002", "charges": {"data": [{"id": "ch_3PzChargeTest000000000002"}]}}}}', 'succeeded');

CREATE VIEW t.recon AS
	SELECT channel, day, discrepancy, order_no, trade_no, refund_id, bill_amount, our_amount, line_no
	FROM pay.paynotify_reconciliation ORDER BY channel, day, discrepancy, order_no, refund_id;

-- ===== WeChat Pay =====
-- the 15th first: the payment recorded at 00:00:03 on the 15th is within
-- the day's tolerance and the 14th's bill is not here yet: not reported;
-- the one in no bill is
SELECT channel, bill_date, format, line_count, row_count, paid_total, refund_total, fee_total
FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260315.csv'));
SELECT * FROM t.recon;
-- the 14th, gzip: it has the midnight payment, matched by trade
SELECT channel, bill_date, format, line_count, row_count, paid_total, refund_total, fee_total
FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260314.csv.gz'));
SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at, status
FROM pay.paynotify_bill_line WHERE channel = 'bl_wx' AND bill_date = '2026-03-14' ORDER BY line_no;
SELECT raw->>'商户数据包' AS attach, raw->>'手续费' AS fee FROM pay.paynotify_bill_line
WHERE channel = 'bl_wx' AND line_no = 2 AND bill_date = '2026-03-14';
SELECT * FROM t.recon;
SELECT * FROM pay.paynotify_reconcile_summary('bl_wx', '2026-03-14');
-- plain (BOM, CRLF) and LF give the same lines; importing again replaces
CREATE TABLE t.wx_lines AS SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee,
	currency, at, status, raw FROM pay.paynotify_bill_line WHERE channel = 'bl_wx' AND bill_date = '2026-03-14';
SELECT format, line_count FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260314.csv'), '2026-03-14');
SELECT count(*) AS differing FROM (
	(SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at, status, raw
	 FROM pay.paynotify_bill_line WHERE channel = 'bl_wx' AND bill_date = '2026-03-14'
	 EXCEPT SELECT * FROM t.wx_lines)
	UNION ALL
	(SELECT * FROM t.wx_lines EXCEPT
	 SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at, status, raw
	 FROM pay.paynotify_bill_line WHERE channel = 'bl_wx' AND bill_date = '2026-03-14')) d;
SELECT format, line_count FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260314_lf.csv'));
SELECT count(*) AS lines, count(DISTINCT line_no) AS distinct_lines FROM pay.paynotify_bill_line
WHERE channel = 'bl_wx' AND bill_date = '2026-03-14';
SELECT count(*) AS differing FROM (
	SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at, status, raw
	FROM pay.paynotify_bill_line WHERE channel = 'bl_wx' AND bill_date = '2026-03-14'
	EXCEPT SELECT * FROM t.wx_lines) d;
SELECT count(*) AS bills FROM pay.paynotify_bill WHERE channel = 'bl_wx';
-- the gateway's ledger says otherwise: 902 for 25.60, 901 not there
SELECT line_count FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260314_changed.csv'));
SELECT * FROM t.recon WHERE day = '2026-03-14';
SELECT * FROM pay.paynotify_reconcile_summary('bl_wx', '2026-03-14');
SELECT line_count FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260314.csv'));
SELECT * FROM t.recon;

-- ===== Alipay =====
SELECT channel, bill_date, format, line_count, payment_count, refund_count, paid_total, refund_total, fee_total
FROM pay.paynotify_import_bill('bl_ali', t.bill('alipay_20260916.zip'));
SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at, status
FROM pay.paynotify_bill_line WHERE channel = 'bl_ali' ORDER BY line_no;
SELECT raw->>'对方账户' AS peer, raw->>'退款批次号/请求号' AS refund_no FROM pay.paynotify_bill_line
WHERE channel = 'bl_ali' AND line_no = 2;
SELECT * FROM t.recon WHERE channel = 'bl_ali';
-- a day of 12,000 payments, 2.6 MB of GBK converted a chunk of whole lines
-- at a time: every line, every character (its first 1 MB ends inside a
-- character: a chunk cut there would be refused; a line lost or doubled
-- would change the counts)
SELECT count(*) AS lines, count(DISTINCT trade_no) AS trades, sum(amount) AS paid, sum(fee) AS fees,
	   count(*) FILTER (WHERE raw->>'商品名称' = '测试商品甲乙丙'
						AND raw->>'备注' LIKE '大额账单第' || (line_no - 1) || '笔%') AS names_intact
FROM pay.paynotify_bill_parse('alipay', t.bill('alipay_20260916_big.zip')) WHERE line_no > 0;
SELECT * FROM pay.paynotify_reconcile_summary('bl_ali', '2026-09-16');

-- ===== Stripe =====
-- the API's list names charges: the intents whose notifications named them
SELECT channel, bill_date, format, line_count, paid_total
FROM pay.paynotify_import_bill('bl_st', t.bill('stripe_20260314.json'));
SELECT line_no, kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at, status
FROM pay.paynotify_bill_line WHERE channel = 'bl_st' ORDER BY line_no;
SELECT * FROM t.recon WHERE channel = 'bl_st';
-- the Dashboard's export (times to the minute) and a balance report
SELECT format, line_count FROM pay.paynotify_import_bill('bl_st', t.bill('stripe_20260314_dashboard.csv'));
SELECT line_no, kind, trade_no, order_no, refund_id, amount, fee, at
FROM pay.paynotify_bill_line WHERE channel = 'bl_st' ORDER BY line_no;
SELECT * FROM t.recon WHERE channel = 'bl_st';
SELECT format, line_count FROM pay.paynotify_import_bill('bl_st', t.bill('stripe_20260314_report.csv'));
SELECT line_no, kind, trade_no, order_no, refund_id, amount, fee FROM pay.paynotify_bill_line
WHERE channel = 'bl_st' ORDER BY line_no;
SELECT * FROM t.recon WHERE channel = 'bl_st';
SELECT * FROM pay.paynotify_reconcile_summary('bl_st', '2026-03-14');
SELECT count(*) AS bills FROM pay.paynotify_bill;

-- ===== bad input: a precise SQLSTATE, nothing written =====
CREATE TABLE t.bill_before AS
	SELECT (SELECT count(*) FROM pay.paynotify_bill) AS bills,
		   (SELECT count(*) FROM pay.paynotify_bill_line) AS lines,
		   (SELECT max(imported_at) FROM pay.paynotify_bill) AS last_import;
\set VERBOSITY sqlstate
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_truncated.csv.gz'));
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_bad_amount.csv'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_few_fields.csv'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_no_summary.csv'));
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_bomb.csv.gz'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('alipay_20260916.zip'));
SELECT pay.paynotify_import_bill('bl_st', t.bill('wx_20260314.csv'));
SELECT pay.paynotify_import_bill('bl_ali', t.bill('stripe_20260314.json'));
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_no_detail.zip'));
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_two_details.zip'));
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_20260916_detail.csv'));
SELECT pay.paynotify_import_bill('bl_ali', '\x504b0304deadbeef'::bytea);
SELECT pay.paynotify_import_bill('bl_st', t.bill('stripe_has_more.json'));
SELECT pay.paynotify_import_bill('bl_st', '{"object": "list", "data": [{"object": "charge"}]}'::bytea);
SELECT pay.paynotify_import_bill('bl_st', convert_to('{"object": "list", "data": [' || repeat('[', 100), 'UTF8'));
SELECT pay.paynotify_import_bill('bl_st', convert_to(E'id,Type,Amount,Currency,Created (UTC)\ntxn_1,charge,"12.00\n', 'UTF8'));
-- a file of the 14th said to be the 15th's; Stripe lines of two days
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_20260315.csv'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_st', t.bill('stripe_20260314.json'), '2026-03-13');
SELECT pay.paynotify_import_bill('no_such', t.bill('wx_20260314.csv'));
SELECT pay.paynotify_import_bill('bl_wx', NULL);
SELECT pay.paynotify_import_bill('bl_wx', ''::bytea);
SELECT pay.paynotify_import_bill('bl_wx', '\xe4baa4e69893e697b6e997b42c'::bytea || '\xff'::bytea);
SELECT pay.paynotify_reconcile_summary('bl_wx', '2020-01-01');
\set VERBOSITY terse
-- what they say
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_bad_amount.csv'), '2026-03-14');
-- a field quoted in the message is cut to 40 bytes, not inside a character
-- (14 three-byte characters: 13 of them, 39 bytes)
SELECT pay.paynotify_import_bill('bl_wx', convert_to(replace(convert_from(t.bill('wx_bad_amount.csv'), 'UTF8'),
	'1.2.3', repeat('金', 14)), 'UTF8'), '2026-03-14');
-- Stripe's JSON read as every JSON body is: a NUL byte and what follows it,
-- or a byte that is no UTF-8 inside a string, refused (jsonb_in took the
-- text before the NUL, and the byte as it stood)
SELECT pay.paynotify_import_bill('bl_st', convert_to('{"object": "list", "data": [], "has_more": false}', 'UTF8')
	|| '\x00'::bytea || convert_to('{"anything": 1}', 'UTF8'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_st', convert_to('{"object": "list", "data": [{"object": "balance_transaction", "id": "txn_', 'UTF8')
	|| '\xff'::bytea || convert_to('"}], "has_more": false}', 'UTF8'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_few_fields.csv'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_no_summary.csv'));
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_bomb.csv.gz'), '2026-03-14');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('alipay_20260916.zip'));
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_no_detail.zip'));
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_two_details.zip'));
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_20260315.csv'), '2026-03-14');
SELECT (SELECT count(*) FROM pay.paynotify_bill) = b.bills AS bills_same,
	   (SELECT count(*) FROM pay.paynotify_bill_line) = b.lines AS lines_same,
	   (SELECT max(imported_at) FROM pay.paynotify_bill) = b.last_import AS none_imported
FROM t.bill_before b;

-- ===== who may: the admin capacity; not a handler, not anybody =====
CREATE ROLE bl_admin LOGIN;
CREATE ROLE bl_shim LOGIN;
CREATE ROLE bl_nobody LOGIN;
SELECT pay.paynotify_grant('bl_admin', 'admin');
SELECT pay.paynotify_grant('bl_shim', 'handler');
GRANT USAGE ON SCHEMA t TO bl_admin, bl_shim, bl_nobody;
GRANT EXECUTE ON FUNCTION t.bill(text) TO bl_admin, bl_shim, bl_nobody;
-- a file is its own day's bill only: Alipay's of 2026-09-16 (its
-- #起始日期) handed in for 2026-09-17, WeChat Pay's of 2026-03-14 (its
-- payments made that day) for 2026-03-15, are refused and change nothing
\set VERBOSITY sqlstate
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_20260916.zip'), '2026-09-17');
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_20260314.csv'), '2026-03-15');
-- Alipay's file names its account (#账号: the seller's PID and 0156): it
-- is no bill of a channel with another seller_id
SELECT pay.paynotify_alter_channel('bl_ali', '{"seller_id": "2088999999999999"}');
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_20260916.zip'));
\set VERBOSITY default
SELECT channel, bill_date, line_count FROM pay.paynotify_bill WHERE bill_date IN ('2026-09-17', '2026-03-15') ORDER BY 1;
SELECT pay.paynotify_import_bill('bl_ali', t.bill('alipay_20260916.zip'));
SELECT pay.paynotify_alter_channel('bl_ali', '{"seller_id": "2088000000000000"}');
SET ROLE bl_admin;
SELECT bill_date, line_count, imported_by FROM pay.paynotify_import_bill('bl_wx', t.bill('wx_20260315.csv'));
SELECT count(*) FROM pay.paynotify_bill_line;
SELECT count(*) FROM pay.paynotify_reconciliation;
SELECT count(*) FROM pay.paynotify_reconcile_summary('bl_wx', '2026-03-15');
RESET ROLE;
\set VERBOSITY sqlstate
SET ROLE bl_shim;
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_20260315.csv'));
SELECT count(*) FROM pay.paynotify_bill;
SELECT count(*) FROM pay.paynotify_bill_line;
SELECT count(*) FROM pay.paynotify_reconciliation;
SELECT pay.paynotify_reconcile_summary('bl_wx', '2026-03-15');
SELECT count(*) FROM pay.paynotify_bill_parse('wxpay', t.bill('wx_20260315.csv'));
RESET ROLE;
SET ROLE bl_nobody;
SELECT pay.paynotify_import_bill('bl_wx', t.bill('wx_20260315.csv'));
SELECT count(*) FROM pay.paynotify_bill;
SELECT count(*) FROM pay.paynotify_bill_line;
SELECT count(*) FROM pay.paynotify_reconciliation;
SELECT pay.paynotify_reconcile_summary('bl_wx', '2026-03-15');
RESET ROLE;
\set VERBOSITY default
SELECT pay.paynotify_revoke('bl_admin', 'admin');
SELECT pay.paynotify_revoke('bl_shim', 'handler');
REVOKE ALL ON FUNCTION t.bill(text) FROM bl_admin, bl_shim, bl_nobody;
REVOKE USAGE ON SCHEMA t FROM bl_admin, bl_shim, bl_nobody;
DROP ROLE bl_admin, bl_shim, bl_nobody;
RESET timezone;
RESET datestyle;
