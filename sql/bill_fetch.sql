-- Fetching the bills (1.4): fetches planned per channel, claimed with a
-- backoff, each step's request signed in the database and the gateway's
-- answer verified there, the bill imported at the end.  The answers are
-- made by test/unit/make_query_responses.py; the files are test/bills/.
\getenv abs_srcdir PG_ABS_SRCDIR
\set bdir :abs_srcdir '/test/bills/'
SET search_path = public;
SET timezone = 'UTC';
SET datestyle = 'ISO';
CREATE TABLE t.bf AS
	SELECT e->>'name' AS name, e
	FROM jsonb_array_elements(pg_read_file((SELECT dir FROM t.vdir) || 'query/responses.json')::jsonb) e;
CREATE FUNCTION t.bfile(name text) RETURNS bytea LANGUAGE sql
	AS $$ SELECT pg_read_binary_file(current_setting('paynotify_test.bdir') || name) $$;
SELECT set_config('paynotify_test.bdir', :'bdir', false) IS NOT NULL AS bdir;
-- Hand an answer to paynotify_bill_apply at the clock it was signed at.
CREATE FUNCTION t.bapply(chan text, day date, answer text, OUT outcome text, OUT more boolean)
	LANGUAGE plpgsql AS $$
DECLARE
	e jsonb := (SELECT b.e FROM t.bf b WHERE b.name = answer);
BEGIN
	IF e IS NULL THEN
		RAISE EXCEPTION 'no answer "%"', answer;
	END IF;
	PERFORM set_config('paynotify.now', e->>'now', false);
	SELECT a.outcome, a.more INTO outcome, more
		FROM pay.paynotify_bill_apply(chan, day, (e->>'status')::int, e->'headers',
									  convert_to(e->>'body', 'UTF8')) a;
	PERFORM set_config('paynotify.now', '0', false);
END
$$;
-- Where the fetches of the test's channels are.
CREATE FUNCTION t.bstate() RETURNS TABLE (channel text, bill_date date, step text, attempts int,
		download_url text, hash_value text, cursor text, pages int, last_result text, done boolean)
	LANGUAGE sql AS $$
	SELECT f.channel, f.bill_date, f.step, f.attempts, f.download_url, f.hash_value, f.cursor,
		   jsonb_array_length(f.pages), f.last_result, f.done_at IS NOT NULL
	FROM pay.paynotify_bill_fetch f WHERE f.channel LIKE 'bf%' ORDER BY 1, 2
$$;

-- the channels: WeChat Pay (the vectors' platform keys, the merchant's
-- API key), Alipay (on a local gateway in a box), Stripe trusted and not
SELECT t.configure('wx_transaction_success_valid', 'bf_wx');
SELECT pay.paynotify_alter_channel('bf_wx', jsonb_build_object(
	'merchant_private_key', t.vtext('keys/merchant_1.key.pem'),
	'merchant_serial', '5A1B2C3D4E5F60718293A4B5C6D7E8F901234567'));
SELECT pay.paynotify_add_channel('bf_wx_off', 'wxpay', jsonb_build_object(
	'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'mchid', '1900000199',
	'merchant_private_key', t.vtext('keys/merchant_1.key.pem'),
	'merchant_serial', '5A1B2C3D4E5F60718293A4B5C6D7E8F901234567', 'fetch_bills', false));
SELECT pay.paynotify_add_channel('bf_wx_nokey', 'wxpay', jsonb_build_object(
	'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'mchid', '1900000198'));
SELECT t.configure('ali_trade_success_valid', 'bf_ali');
SELECT pay.paynotify_alter_channel('bf_ali', jsonb_build_object(
	'app_private_key', t.vtext('keys/merchant_1.key.pem'), 'api_base', 'http://127.0.0.1:8099'));
SELECT t.configure('stripe_payment_intent_succeeded_valid', 'bf_st');
SELECT t.configure('stripe_payment_intent_succeeded_valid', 'bf_st_u');
SELECT pay.paynotify_alter_channel(c, jsonb_build_object('secret_key', 'rk_test_TESTONLY0000000000000000',
	'query_trusted', c = 'bf_st', 'api_base', 'http://127.0.0.1:8099'))
FROM unnest('{bf_st,bf_st_u}'::text[]) c;
-- a setting fetch_bills must be a boolean
SELECT pay.paynotify_alter_channel('bf_st_u', '{"fetch_bills": "no"}');

-- ===== plan =====
-- by default: yesterday in the gateway's zone, every channel that can
-- (not bf_wx_off: fetch_bills false; not bf_wx_nokey: no key)
SELECT pay.paynotify_bill_plan() >= 4 AS planned;
SELECT channel, step, attempts, bill_date = CASE WHEN channel LIKE 'bf_st%'
	THEN (now() AT TIME ZONE 'UTC')::date ELSE (now() AT TIME ZONE 'Asia/Shanghai')::date END - 1 AS yesterday
FROM t.bstate();
-- again: the unfinished ones are left as they are
SELECT pay.paynotify_bill_plan(NULL, 'bf_wx') AS planned;
-- a channel named: planned even with fetch_bills false; one that cannot: an error
SELECT pay.paynotify_bill_plan('2026-03-14', 'bf_wx_off') AS planned;
\set VERBOSITY sqlstate
SELECT pay.paynotify_bill_plan('2026-03-14', 'bf_wx_nokey');
SELECT pay.paynotify_bill_plan('2026-03-14', 'bf_nosuch');
-- a day to come, or no day at all
SELECT pay.paynotify_bill_plan((now() AT TIME ZONE 'Asia/Shanghai')::date + 2, 'bf_wx');
SELECT pay.paynotify_bill_plan('infinity', 'bf_wx');
\set VERBOSITY default
-- the daily plan leaves a day whose bill is imported already (by hand)
-- alone; a day given plans it again
DELETE FROM pay.paynotify_bill_fetch;
INSERT INTO pay.paynotify_bill (channel, bill_date, format, line_count, summary)
	VALUES ('bf_wx', (now() AT TIME ZONE 'Asia/Shanghai')::date - 1, 'wxpay', 0, '{}');
SELECT pay.paynotify_bill_plan(NULL, 'bf_wx') AS planned_by_default;
SELECT pay.paynotify_bill_plan((now() AT TIME ZONE 'Asia/Shanghai')::date - 1, 'bf_wx') AS planned_by_day;
DELETE FROM pay.paynotify_bill WHERE channel = 'bf_wx';
DELETE FROM pay.paynotify_bill_fetch;
SELECT pay.paynotify_bill_plan('2026-03-14', c) FROM unnest('{bf_wx,bf_st,bf_st_u}'::text[]) c;
SELECT pay.paynotify_bill_plan('2026-09-16', 'bf_ali');
SELECT channel, bill_date, step, attempts FROM t.bstate();

-- ===== due: claimed, put off 10 minutes doubling, at most 6 hours =====
SELECT * FROM pay.paynotify_bill_due(1000) WHERE channel LIKE 'bf%' ORDER BY 1;
SELECT channel, attempts, extract(epoch FROM next_at - last_at) AS put_off
FROM pay.paynotify_bill_fetch WHERE channel LIKE 'bf%' ORDER BY 1;
-- not due again until then
SELECT count(*) FROM pay.paynotify_bill_due(1000) WHERE channel LIKE 'bf%';
UPDATE pay.paynotify_bill_fetch SET next_at = now() - interval '1 second' WHERE channel = 'bf_wx';
SELECT * FROM pay.paynotify_bill_due(1000) WHERE channel LIKE 'bf%';
SELECT attempts, extract(epoch FROM next_at - last_at) AS put_off FROM pay.paynotify_bill_fetch WHERE channel = 'bf_wx';
UPDATE pay.paynotify_bill_fetch SET next_at = now() - interval '1 second', attempts = 9 WHERE channel = 'bf_wx';
SELECT * FROM pay.paynotify_bill_due(1000) WHERE channel LIKE 'bf%';
SELECT attempts, extract(epoch FROM next_at - last_at) AS put_off FROM pay.paynotify_bill_fetch WHERE channel = 'bf_wx';
\set VERBOSITY sqlstate
SELECT * FROM pay.paynotify_bill_due(0);
\set VERBOSITY default
-- given up three days after planned
SELECT pay.paynotify_bill_plan('2026-03-13', 'bf_wx');
UPDATE pay.paynotify_bill_fetch SET planned_at = now() - interval '3 days 1 minute', last_result = 'not ready'
WHERE channel = 'bf_wx' AND bill_date = '2026-03-13';
SELECT count(*) FROM pay.paynotify_bill_due(1000) WHERE bill_date = '2026-03-13';
SELECT step, last_result FROM pay.paynotify_bill_fetch WHERE channel = 'bf_wx' AND bill_date = '2026-03-13';
-- a failed one is planned again when its day is given, not by default
SELECT pay.paynotify_bill_plan('2026-03-13', 'bf_wx') AS planned;
SELECT step, attempts, last_result FROM pay.paynotify_bill_fetch WHERE channel = 'bf_wx' AND bill_date = '2026-03-13';
DELETE FROM pay.paynotify_bill_fetch WHERE bill_date = '2026-03-13';

-- ===== WeChat Pay =====
-- list: GET tradebill, signed with the merchant's key as a query is
SET paynotify.now = 1767300000;
CREATE TABLE t.breq AS SELECT * FROM pay.paynotify_bill_request('bf_wx', '2026-03-14');
RESET paynotify.now;
SELECT method, url, body, headers->>'Accept' AS accept FROM t.breq;
CREATE TABLE t.bauth AS
	SELECT m[1] AS mchid, m[2] AS nonce, m[3] AS signature, m[4] AS ts, m[5] AS serial,
		   substr(q.url, length('https://api.mch.weixin.qq.com') + 1) AS path
	FROM t.breq q, regexp_match(q.headers->>'Authorization',
		'^WECHATPAY2-SHA256-RSA2048 mchid="([^"]*)",nonce_str="([0-9A-F]{32})",signature="([A-Za-z0-9+/=]+)",timestamp="([0-9]+)",serial_no="([^"]*)"$') m;
SELECT mchid, ts, serial, path FROM t.bauth;
SELECT pay.paynotify_rsa_verify(t.vtext('keys/merchant_1.pub.pem'),
	convert_to('GET' || E'\n' || path || E'\n' || ts || E'\n' || nonce || E'\n' || E'\n', 'UTF8'),
	signature) AS signed_by_merchant
FROM t.bauth;
-- refused: another key's signature, a body changed after signing, a
-- download_url on another origin; nothing changes
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list_wrong_key');
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list_tampered');
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list_other_origin');
-- on the origin but no /v3/billdownload/file?, or not plain (a byte above
-- 0x7f): refused too
SELECT a, (t.bapply('bf_wx', '2026-03-14', 'bill_wx_list_url_' || a)).*
FROM unnest('{dots,slash,at,nonascii}'::text[]) a;
SELECT step, download_url, hash_value, last_result FROM t.bstate() WHERE channel = 'bf_wx';
-- not ready: 400 NO_STATEMENT_EXIST, signed
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_not_ready');
-- a hash that is not the file's: the download is refused, the fetch starts over
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list_bad_hash');
SELECT step FROM t.bstate() WHERE channel = 'bf_wx';
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_wx', '2026-03-14', 200, '{}', t.bfile('wx_20260314.csv.gz'));
SELECT step, download_url, last_result FROM t.bstate() WHERE channel = 'bf_wx';
SELECT count(*) FROM pay.paynotify_bill_line WHERE channel = 'bf_wx';
-- good: next, then the download signed over the download_url's path
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list');
SELECT step, download_url, hash_value FROM t.bstate() WHERE channel = 'bf_wx';
SET paynotify.now = 1767300000;
SELECT method, url, body, headers->>'Authorization' ~ '^WECHATPAY2-SHA256-RSA2048 mchid="1900000109",' AS signed
FROM pay.paynotify_bill_request('bf_wx', '2026-03-14');
RESET paynotify.now;
-- a failed download: refused, back to list
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_wx', '2026-03-14', 404, '{}', '\x');
SELECT step FROM t.bstate() WHERE channel = 'bf_wx';
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list');
-- a gzip that decompresses to more than a bill may hold: refused
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_wx', '2026-03-14', 200, '{}', t.bfile('wx_bomb.csv.gz'));
SELECT * FROM t.bapply('bf_wx', '2026-03-14', 'bill_wx_list');
-- the file, gzip as asked (its SHA-1 is the plain CSV's): imported
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_wx', '2026-03-14', 200,
	'{"Content-Type": "application/octet-stream"}', t.bfile('wx_20260314.csv.gz'));
SELECT step, last_result, done FROM t.bstate() WHERE channel = 'bf_wx';
SELECT format, line_count FROM pay.paynotify_bill WHERE channel = 'bf_wx';
SELECT count(*) FROM pay.paynotify_bill_line WHERE channel = 'bf_wx';
-- over: no more request nor answer
\set VERBOSITY sqlstate
SELECT * FROM pay.paynotify_bill_request('bf_wx', '2026-03-14');
SELECT * FROM pay.paynotify_bill_apply('bf_wx', '2026-03-14', 200, '{}', '\x');
SELECT * FROM pay.paynotify_bill_request('bf_wx', '2026-03-15');
SELECT * FROM pay.paynotify_bill_request('bf_wx', NULL);
SELECT * FROM pay.paynotify_bill_request('bf_wx', 'infinity');
\set VERBOSITY default
-- planned again explicitly: from the list step
SELECT pay.paynotify_bill_plan('2026-03-14', 'bf_wx') AS planned;
SELECT step, attempts, done FROM t.bstate() WHERE channel = 'bf_wx';

-- ===== Alipay =====
-- list: bill.downloadurl.query signed RSA2 (deterministic: compared)
SET paynotify.now = 1767300000;
SELECT r.method, r.url = b.e->>'url' AS url_as_signed, r.body = b.e->>'body' AS body_as_signed
FROM pay.paynotify_bill_request('bf_ali', '2026-09-16') r, t.bf b WHERE b.name = 'bill_ali_request';
RESET paynotify.now;
SELECT * FROM t.bapply('bf_ali', '2026-09-16', 'bill_ali_list_wrong_key');
SELECT * FROM t.bapply('bf_ali', '2026-09-16', 'bill_ali_list_other_host');
-- refused: a dot segment, an encoded slash, a ';' or '@' or a byte above
-- 0x7f, even on api_base's host; https to a host not under alipay.com
-- (evilalipay.com is not), or a host of other characters than letters,
-- digits, '.' and '-' (evil.com%2f.alipay.com, evil.com;.alipay.com)
SELECT a, (t.bapply('bf_ali', '2026-09-16', 'bill_ali_list_url_' || a)).*
FROM unnest('{dots,slash,at,nonascii,evil,evilalipay,hostpct,hostsemi}'::text[]) a;
-- https to a host of Alipay's: next; its download failed: back to list
SELECT * FROM t.bapply('bf_ali', '2026-09-16', 'bill_ali_list_url_https');
SELECT step, download_url FROM t.bstate() WHERE channel = 'bf_ali';
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_ali', '2026-09-16', 404, '{}', '\x');
SELECT * FROM t.bapply('bf_ali', '2026-09-16', 'bill_ali_not_ready');
SELECT step, download_url, last_result FROM t.bstate() WHERE channel = 'bf_ali';
SELECT * FROM t.bapply('bf_ali', '2026-09-16', 'bill_ali_list');
-- download: GET the URL as given, unsigned
SELECT method, url = (SELECT download_url FROM pay.paynotify_bill_fetch WHERE channel = 'bf_ali') AS as_given,
	   headers, body FROM pay.paynotify_bill_request('bf_ali', '2026-09-16');
-- a file that is no zip: refused, back to list
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_ali', '2026-09-16', 200, '{}', '\x504b0304');
SELECT step FROM t.bstate() WHERE channel = 'bf_ali';
SELECT * FROM t.bapply('bf_ali', '2026-09-16', 'bill_ali_list');
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_ali', '2026-09-16', 200, '{}', t.bfile('alipay_20260916.zip'));
SELECT step, last_result, done FROM t.bstate() WHERE channel = 'bf_ali';
SELECT format, line_count FROM pay.paynotify_bill WHERE channel = 'bf_ali';

-- ===== Stripe =====
SELECT method, url, headers, body FROM pay.paynotify_bill_request('bf_st', '2026-03-14');
-- unsigned: refused on a channel that does not say query_trusted
SELECT * FROM t.bapply('bf_st_u', '2026-03-14', 'bill_st_page1');
SELECT step, pages, last_result FROM t.bstate() WHERE channel = 'bf_st_u';
-- two pages accumulated, then imported as one list
SELECT * FROM t.bapply('bf_st', '2026-03-14', 'bill_st_page1');
SELECT step, cursor, pages, last_result FROM t.bstate() WHERE channel = 'bf_st';
SELECT url FROM pay.paynotify_bill_request('bf_st', '2026-03-14');
SELECT outcome, more FROM pay.paynotify_bill_apply('bf_st', '2026-03-14', 200, '{}', convert_to('{"object": "list"}', 'UTF8'));
-- the same page again: no progress, refused (a daemon would loop on it);
-- with has_more false: it repeats transactions read, refused; the pages
-- read stay as they were
SELECT * FROM t.bapply('bf_st', '2026-03-14', 'bill_st_page1');
UPDATE t.bf SET e = jsonb_set(e, '{body}', to_jsonb(replace(e->>'body', '"has_more": true', '"has_more": false'))),
	name = 'bill_st_page1_last' WHERE name = 'bill_st_page1' RETURNING e->>'body' LIKE '%"has_more": false%' AS last;
SELECT * FROM t.bapply('bf_st', '2026-03-14', 'bill_st_page1_last');
SELECT step, cursor, pages, last_result FROM t.bstate() WHERE channel = 'bf_st';
-- a transaction not created on the day (00:00 UTC and the 86400 s after): refused
SELECT c, (SELECT outcome FROM pay.paynotify_bill_apply('bf_st', '2026-03-14', 200, '{}', convert_to(
	format('{"object": "list", "has_more": false, "data": [{"object": "balance_transaction", "id": "txn_OtherDay", "created": %s}]}', c),
	'UTF8'))) FROM unnest('{1773446399,1773532800}'::bigint[]) c;
-- more than 100000 transactions in a day: refused, the pages read kept
BEGIN;
UPDATE pay.paynotify_bill_fetch SET pages = pages || (SELECT jsonb_agg(jsonb_build_object('id', 'txn_x' || i))
	FROM generate_series(1, 99999) i) WHERE channel = 'bf_st';
SELECT * FROM t.bapply('bf_st', '2026-03-14', 'bill_st_page2');
SELECT pages, last_result FROM t.bstate() WHERE channel = 'bf_st';
ROLLBACK;
SELECT * FROM t.bapply('bf_st', '2026-03-14', 'bill_st_page2');
SELECT step, cursor, pages, last_result, done FROM t.bstate() WHERE channel = 'bf_st';
SELECT format, line_count FROM pay.paynotify_bill WHERE channel = 'bf_st';
SELECT line_no, kind, amount FROM pay.paynotify_bill_line WHERE channel = 'bf_st' ORDER BY line_no;

-- ===== who may =====
CREATE ROLE bf_relay LOGIN;
CREATE ROLE bf_handler LOGIN;
CREATE ROLE bf_nobody LOGIN;
SELECT pay.paynotify_grant('bf_relay', 'relay');
SELECT pay.paynotify_grant('bf_handler', 'handler');
SET ROLE bf_relay;
SELECT count(*) >= 0 AS may FROM pay.paynotify_bill_due();
SELECT method FROM pay.paynotify_bill_request('bf_st_u', '2026-03-14');
SELECT outcome FROM pay.paynotify_bill_apply('bf_st_u', '2026-03-14', 500, '{}', '\x');
\set VERBOSITY sqlstate
SELECT pay.paynotify_bill_plan();
SELECT count(*) FROM pay.paynotify_bill_fetch;
RESET ROLE;
SET ROLE bf_handler;
SELECT * FROM pay.paynotify_bill_due();
SELECT * FROM pay.paynotify_bill_request('bf_st_u', '2026-03-14');
SELECT * FROM pay.paynotify_bill_apply('bf_st_u', '2026-03-14', 500, '{}', '\x');
SELECT pay.paynotify_bill_plan();
RESET ROLE;
SET ROLE bf_nobody;
SELECT * FROM pay.paynotify_bill_due();
SELECT * FROM pay.paynotify_bill_request('bf_st_u', '2026-03-14');
SELECT * FROM pay.paynotify_bill_apply('bf_st_u', '2026-03-14', 500, '{}', '\x');
SELECT pay.paynotify_bill_plan();
SELECT * FROM pay.paynotify_bill_sign('bf_st_u', 'page', '2026-03-14', NULL, NULL);
\set VERBOSITY default
RESET ROLE;
SELECT pay.paynotify_revoke('bf_relay', 'relay');
SELECT pay.paynotify_revoke('bf_handler', 'handler');
DROP ROLE bf_relay, bf_handler, bf_nobody;

-- the test leaves no fetch nor bill behind
DELETE FROM pay.paynotify_bill_fetch;
DELETE FROM pay.paynotify_bill_line WHERE channel LIKE 'bf%';
DELETE FROM pay.paynotify_bill WHERE channel LIKE 'bf%';
DROP TABLE t.bf, t.breq, t.bauth;
DROP FUNCTION t.bapply(text, date, text), t.bstate(), t.bfile(text);
