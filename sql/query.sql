-- Asking the gateway (1.4): the due expectations claimed with a backoff,
-- the request signed in the database, the gateway's signed answer verified
-- there and applied by the pipeline as a notification (source 'query').
-- The answers are made by test/unit/make_query_responses.py.
SET search_path = public;
CREATE TABLE t.qy AS
	SELECT e->>'name' AS name, e
	FROM jsonb_array_elements(pg_read_file((SELECT dir FROM t.vdir) || 'query/responses.json')::jsonb) e;
-- Hand an answer to paynotify_query_apply, at the clock it was signed at
-- (for the order it answers unless ord says otherwise).
CREATE FUNCTION t.qapply(chan text, answer text, ord text DEFAULT NULL,
		OUT status int, OUT outcome text)
	LANGUAGE plpgsql AS $$
DECLARE
	e jsonb := (SELECT q.e FROM t.qy q WHERE q.name = answer);
BEGIN
	IF e IS NULL THEN
		RAISE EXCEPTION 'no answer "%"', answer;
	END IF;
	PERFORM set_config('paynotify.now', e->>'now', false);
	SELECT a.status, a.outcome INTO status, outcome
		FROM pay.paynotify_query_apply(chan, COALESCE(ord, e->>'order'), (e->>'status')::int,
									   e->'headers', convert_to(e->>'body', 'UTF8')) a;
	PERFORM set_config('paynotify.now', '0', false);
END
$$;
-- Answers handed back one after another, and what each left on the
-- order's expectation.
-- Each step as the daemon takes it: the request built (a query, or the
-- gateway's close call), then the answer handed back.
CREATE FUNCTION t.qsteps(chan text, ord text, answers text[])
	RETURNS TABLE (step int, request text, answer text, outcome text, last_result text,
				   close_requested boolean, close_attempts int)
	LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. array_length(answers, 1) LOOP
		step := i;
		SELECT CASE WHEN r.url LIKE '%/close' OR r.url LIKE '%method=alipay.trade.close%' THEN 'close'
					ELSE 'query' END
			INTO request FROM pay.paynotify_query_request(chan, ord) r;
		answer := answers[i];
		SELECT a.outcome INTO outcome FROM t.qapply(chan, answers[i]) a;
		SELECT e.last_result, e.close_requested_at IS NOT NULL, e.close_attempts
			INTO last_result, close_requested, close_attempts
			FROM pay.paynotify_expectation e WHERE e.order_no = ord AND e.channel = chan;
		RETURN NEXT;
	END LOOP;
END
$$;
-- The clock of the answers, as a timestamp.
CREATE FUNCTION t.qnow(secs int DEFAULT 0) RETURNS timestamptz LANGUAGE sql AS
	$$ SELECT to_timestamp(1767300000 + secs) $$;
-- What the pipeline recorded of an order.
CREATE FUNCTION t.qtrace(ord text) RETURNS TABLE (notify_id text, source text, status text, note text,
		deliveries int)
	LANGUAGE sql AS $$
	SELECT l.notify_id, l.source, l.status, l.note, l.delivery_count
	FROM pay.payment_notify_log l WHERE l.order_no = ord ORDER BY l.first_seen, l.notify_id
$$;

-- ===== WeChat Pay =====
-- the channel of the vectors, with the merchant's API key and its serial
SELECT t.configure('wx_transaction_success_valid', 'qy_wx');
SELECT pay.paynotify_alter_channel('qy_wx', jsonb_build_object(
	'merchant_private_key', t.vtext('keys/merchant_1.key.pem'),
	'merchant_serial', '5A1B2C3D4E5F60718293A4B5C6D7E8F901234567'));
SELECT t.set_order('QY-1', 'pending'), t.set_order('QY-2', 'pending'),
	   t.set_order('QY-3', 'pending'), t.set_order('QY-4', 'pending'),
	   t.set_order('QY-5', 'pending');

-- the request: GET by out_trade_no, signed with the merchant's key at the
-- clock (paynotify.now) with a fresh nonce: verified, not compared
SET paynotify.now = 1767300000;
CREATE TABLE t.qreq AS SELECT * FROM pay.paynotify_query_request('qy_wx', 'QY-1');
CREATE TABLE t.qreq2 AS SELECT * FROM pay.paynotify_query_request('qy_wx', 'QY-1');
RESET paynotify.now;
SELECT method, url, body, headers->>'Accept' AS accept,
	   (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(headers) k) AS header_names
FROM t.qreq;
CREATE TABLE t.qauth AS
	SELECT m[1] AS mchid, m[2] AS nonce, m[3] AS signature, m[4] AS ts, m[5] AS serial,
		   substr(q.url, length('https://api.mch.weixin.qq.com') + 1) AS path
	FROM t.qreq q, regexp_match(q.headers->>'Authorization',
		'^WECHATPAY2-SHA256-RSA2048 mchid="([^"]*)",nonce_str="([0-9A-F]{32})",signature="([A-Za-z0-9+/=]+)",timestamp="([0-9]+)",serial_no="([^"]*)"$') m;
SELECT mchid, ts, serial, path FROM t.qauth;
-- the signature is the merchant's, over "GET\npath\ntimestamp\nnonce\n\n"
SELECT pay.paynotify_rsa_verify(t.vtext('keys/merchant_1.pub.pem'),
	convert_to('GET' || E'\n' || path || E'\n' || ts || E'\n' || nonce || E'\n' || E'\n', 'UTF8'),
	signature) AS signed_by_merchant,
	   pay.paynotify_rsa_verify(t.vtext('keys/merchant_1.pub.pem'),
	convert_to('GET' || E'\n' || path || E'\n' || ts || E'\n' || nonce || E'\n', 'UTF8'),
	signature) AS without_empty_body_line
FROM t.qauth;
-- a fresh nonce each time
SELECT (SELECT headers->>'Authorization' FROM t.qreq) <> (SELECT headers->>'Authorization' FROM t.qreq2) AS fresh;
-- a service provider's channel asks for its sub-merchant's order
SELECT pay.paynotify_add_channel('qy_wx_sp', 'wxpay', jsonb_build_object(
	'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'),
	'sp_mchid', '1900000100', 'sub_mchid', '1900000109',
	'api_base', 'http://127.0.0.1:8099/',
	'merchant_private_key', t.vtext('keys/merchant_1.key.pem'),
	'merchant_serial', '5A1B2C3D4E5F60718293A4B5C6D7E8F901234567'));
SELECT url, headers->>'Authorization' ~ '^WECHATPAY2-SHA256-RSA2048 mchid="1900000100",' AS sp_signs
FROM pay.paynotify_query_request('qy_wx_sp', 'QY-1*a|b_c');
-- an order number with what would end a field of what is signed (a space,
-- /, &, =, a quote, non-ASCII): refused, nothing signed
\set VERBOSITY sqlstate
SELECT url FROM pay.paynotify_query_request('qy_wx_sp', 'QY 1/é');
SELECT url FROM pay.paynotify_query_request('qy_wx_sp', '..');
SELECT url FROM pay.paynotify_query_request('qy_wx_sp', 'x&method=alipay.trade.refund&z=');
\set VERBOSITY default

-- due: unsettled expectations whose time has come, claimed with a backoff
SELECT (pay.paynotify_expect('qy_wx', o)).order_no FROM unnest('{QY-1,QY-2,QY-3,QY-4,QY-5}'::text[]) o;
SELECT * FROM pay.paynotify_query_due() ORDER BY 2;
UPDATE pay.paynotify_expectation SET next_query_at = now() - interval '1 second',
	expected_at = now() - interval '1 hour' WHERE channel = 'qy_wx';
SELECT * FROM pay.paynotify_query_due(2) ORDER BY 2;
SELECT * FROM pay.paynotify_query_due(10) ORDER BY 2;
-- claimed once: not due again until the backoff has passed
SELECT * FROM pay.paynotify_query_due(10);
SELECT order_no, queries, last_query_at IS NOT NULL AS asked,
	   round(extract(epoch FROM next_query_at - last_query_at)) AS next_in_s
FROM pay.paynotify_expectation WHERE channel = 'qy_wx' ORDER BY order_no;
-- the backoff doubles up to an hour: queries 5 and 6 of QY-4
UPDATE pay.paynotify_expectation SET queries = 4, next_query_at = now() - interval '1 second'
WHERE order_no = 'QY-4' AND channel = 'qy_wx';
SELECT * FROM pay.paynotify_query_due();
SELECT queries, round(extract(epoch FROM next_query_at - last_query_at)) AS next_in_s
FROM pay.paynotify_expectation WHERE order_no = 'QY-4' AND channel = 'qy_wx';
-- never after an expiry still ahead: the query at expires_at is made
UPDATE pay.paynotify_expectation SET next_query_at = now() - interval '1 second',
	expires_at = now() + interval '100 seconds'
WHERE order_no = 'QY-4' AND channel = 'qy_wx';
SELECT * FROM pay.paynotify_query_due();
SELECT next_query_at = expires_at AS at_expiry
FROM pay.paynotify_expectation WHERE order_no = 'QY-4' AND channel = 'qy_wx';
-- three days past expires_at (expected_at without one): no longer due
UPDATE pay.paynotify_expectation SET next_query_at = now() - interval '1 second',
	expires_at = now() - interval '3 days 1 second'
WHERE order_no = 'QY-4' AND channel = 'qy_wx';
SELECT * FROM pay.paynotify_query_due();
UPDATE pay.paynotify_expectation SET expires_at = NULL,
	expected_at = now() - interval '3 days 1 second' WHERE order_no = 'QY-4' AND channel = 'qy_wx';
SELECT * FROM pay.paynotify_query_due();
UPDATE pay.paynotify_expectation SET expected_at = now(), expires_at = NULL
WHERE order_no = 'QY-4' AND channel = 'qy_wx';

-- the answers are signed at their own clock (paynotify.now), which the
-- expiry of an expectation is judged by: QY-2 expires an hour after it,
-- QY-3 and QY-5 a minute before
UPDATE pay.paynotify_expectation SET expires_at = CASE order_no WHEN 'QY-2' THEN t.qnow(3600)
	ELSE t.qnow(-60) END WHERE order_no IN ('QY-2', 'QY-3', 'QY-5') AND channel = 'qy_wx';

-- refused answers change nothing but last_result: the amount changed after
-- signing, another key under the serial, an unknown serial, another body's
-- signature, an authentic answer about another order
SELECT a AS answer, r.*
FROM unnest('{wx_paid_tampered,wx_paid_wrong_key,wx_paid_wrong_serial,wx_paid_other_body,wx_paid_other_order}'::text[]) a, LATERAL t.qapply('qy_wx', a) r;
SELECT status FROM public.orders WHERE order_no = 'QY-1';
SELECT * FROM t.qtrace('QY-1');
SELECT count(*) FROM pay.payment_record WHERE order_no = 'QY-1';
SELECT last_result, settled_at IS NULL AS unsettled
FROM pay.paynotify_expectation WHERE order_no = 'QY-1' AND channel = 'qy_wx';
-- an answer signed outside the window, or without its signature headers
SET paynotify.now = 1767310000;
SELECT status, outcome FROM pay.paynotify_query_apply('qy_wx', 'QY-1', 200,
	(SELECT e->'headers' FROM t.qy WHERE name = 'wx_paid'),
	convert_to((SELECT e->>'body' FROM t.qy WHERE name = 'wx_paid'), 'UTF8'));
RESET paynotify.now;
SELECT status, outcome FROM pay.paynotify_query_apply('qy_wx', 'QY-1', 502,
	'{"Content-Type": "text/html"}', convert_to('<html>bad gateway</html>', 'UTF8'));
SELECT last_result FROM pay.paynotify_expectation WHERE order_no = 'QY-1' AND channel = 'qy_wx';

-- a payment found: applied once, as its notification would be
SELECT * FROM t.qapply('qy_wx', 'wx_paid');
SELECT status FROM public.orders WHERE order_no = 'QY-1';
SELECT channel, trade_no, amount, currency, notify_id FROM pay.payment_record WHERE order_no = 'QY-1';
SELECT event, amount FROM pay.paynotify_outbox WHERE order_no = 'QY-1' ORDER BY id;
SELECT settled_by, settled_notify_id, last_result
FROM pay.paynotify_expectation WHERE order_no = 'QY-1' AND channel = 'qy_wx';
-- the same answer again: a duplicate
SELECT * FROM t.qapply('qy_wx', 'wx_paid');
-- the notification that comes later: a duplicate too, and nothing moves
SET paynotify.now = 1767300000;
SELECT status, outcome FROM pay.paynotify_handle('qy_wx',
	(SELECT e->'headers' FROM t.qy WHERE name = 'wx_paid_notification'),
	convert_to((SELECT e->>'body' FROM t.qy WHERE name = 'wx_paid_notification'), 'UTF8'));
SELECT status, outcome FROM pay.paynotify_handle('qy_wx',
	(SELECT e->'headers' FROM t.qy WHERE name = 'wx_paid_notification'),
	convert_to((SELECT e->>'body' FROM t.qy WHERE name = 'wx_paid_notification'), 'UTF8'));
RESET paynotify.now;
SELECT * FROM t.qtrace('QY-1');
SELECT count(*) AS payments FROM pay.payment_record WHERE order_no = 'QY-1';
SELECT count(*) AS events FROM pay.paynotify_outbox WHERE order_no = 'QY-1';

-- never paid, before expires_at: nothing changes but last_result, and no
-- close is requested
SELECT * FROM t.qapply('qy_wx', 'wx_notpay');
SELECT status FROM public.orders WHERE order_no = 'QY-2';
SELECT * FROM t.qtrace('QY-2');
SELECT last_result, settled_by, close_requested_at, close_attempts
FROM pay.paynotify_expectation WHERE order_no = 'QY-2' AND channel = 'qy_wx';
SELECT method FROM pay.paynotify_query_request('qy_wx', 'QY-2');
-- after expires_at NOTPAY closes nothing itself (the customer may pay yet,
-- and an old one replayed would say so after the payment): the order is
-- closed at WeChat Pay, its next request the close call, due now
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-1) WHERE order_no = 'QY-2' AND channel = 'qy_wx';
SELECT * FROM t.qapply('qy_wx', 'wx_notpay');
SELECT status FROM public.orders WHERE order_no = 'QY-2';
SELECT event FROM pay.paynotify_outbox WHERE order_no = 'QY-2' ORDER BY id;
SELECT * FROM t.qtrace('QY-2');
SELECT last_result, settled_by, close_requested_at IS NOT NULL AS close_requested, close_attempts,
	   next_query_at <= now() AS due_now
FROM pay.paynotify_expectation WHERE order_no = 'QY-2' AND channel = 'qy_wx';
-- the close call: POST .../close with {"mchid"}, signed by the merchant
-- over "POST\npath\ntimestamp\nnonce\nbody\n"
SET paynotify.now = 1767300000;
CREATE TABLE t.qclose AS SELECT * FROM pay.paynotify_query_request('qy_wx', 'QY-2');
RESET paynotify.now;
SELECT method, url, body, headers->>'Content-Type' AS content_type,
	   (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(headers) k) AS header_names
FROM t.qclose;
SELECT pay.paynotify_rsa_verify(t.vtext('keys/merchant_1.pub.pem'),
	convert_to('POST' || E'\n' || substr(q.url, length('https://api.mch.weixin.qq.com') + 1) || E'\n'
			   || m[3] || E'\n' || m[1] || E'\n' || q.body || E'\n', 'UTF8'), m[2]) AS signed_by_merchant
FROM t.qclose q, regexp_match(q.headers->>'Authorization',
	'nonce_str="([0-9A-F]{32})",signature="([A-Za-z0-9+/=]+)",timestamp="([0-9]+)"') m;
-- a service provider's close names its sub-merchant
INSERT INTO pay.paynotify_expectation (order_no, channel, close_requested_at) VALUES ('QY-2', 'qy_wx_sp', now());
SELECT method, url, body FROM pay.paynotify_query_request('qy_wx_sp', 'QY-2');
DELETE FROM pay.paynotify_expectation WHERE channel = 'qy_wx_sp';
-- the close answer, verified: a forged one changes nothing but last_result
SELECT * FROM t.qapply('qy_wx', 'wx_close_forged');
SELECT last_result, close_requested_at IS NOT NULL AS close_requested
FROM pay.paynotify_expectation WHERE order_no = 'QY-2' AND channel = 'qy_wx';
-- 204, signed: closed; nothing is applied, the order is queried again now
SELECT * FROM t.qapply('qy_wx', 'wx_close_done');
SELECT status FROM public.orders WHERE order_no = 'QY-2';
SELECT last_result, settled_by, close_requested_at IS NOT NULL AS close_requested, close_attempts,
	   next_query_at <= now() AS due_now
FROM pay.paynotify_expectation WHERE order_no = 'QY-2' AND channel = 'qy_wx';
SELECT method FROM pay.paynotify_query_request('qy_wx', 'QY-2');
-- the query finds it CLOSED: closed once
SELECT * FROM t.qapply('qy_wx', 'wx_closed_qy2');
SELECT * FROM t.qapply('qy_wx', 'wx_closed_qy2');
SELECT status FROM public.orders WHERE order_no = 'QY-2';
SELECT event FROM pay.paynotify_outbox WHERE order_no = 'QY-2' ORDER BY id;
SELECT last_result, settled_by, settled_notify_id
FROM pay.paynotify_expectation WHERE order_no = 'QY-2' AND channel = 'qy_wx';
-- paid meanwhile: the close is refused (ORDERPAID, signed), the order is
-- queried again and the query finds the payment.  A close after each
-- NOTPAY, three at most
SELECT t.set_order('QY-6', 'pending');
SELECT (pay.paynotify_expect('qy_wx', 'QY-6', now() + interval '1 hour')).order_no;
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-1) WHERE order_no = 'QY-6';
SELECT * FROM t.qsteps('qy_wx', 'QY-6', '{wx_notpay_qy6,wx_close_orderpaid,wx_notpay_qy6,wx_close_orderpaid,wx_notpay_qy6,wx_close_orderpaid,wx_notpay_qy6}');
SELECT status FROM public.orders WHERE order_no = 'QY-6';
SELECT event FROM pay.paynotify_outbox WHERE order_no = 'QY-6' ORDER BY id;
SELECT * FROM t.qapply('qy_wx', 'wx_paid_qy6');
SELECT status FROM public.orders WHERE order_no = 'QY-6';
SELECT last_result, settled_by, close_requested_at IS NOT NULL AS close_requested, close_attempts
FROM pay.paynotify_expectation WHERE order_no = 'QY-6';
-- after expires_at, CLOSED (for good, of the order asked about) closes;
-- ORDER_NOT_EXIST does not: its signed body names no order, so the answer
-- about one order would read as the answer for any other
SELECT * FROM t.qapply('qy_wx', 'wx_closed');
SELECT * FROM t.qapply('qy_wx', 'wx_not_exist');
SELECT order_no, status FROM public.orders WHERE order_no IN ('QY-3', 'QY-5') ORDER BY 1;
SELECT order_no, last_result, settled_by FROM pay.paynotify_expectation
WHERE order_no IN ('QY-3', 'QY-5') AND channel = 'qy_wx' ORDER BY 1;
-- still paying: nothing but last_result
SELECT * FROM t.qapply('qy_wx', 'wx_userpaying');
SELECT status FROM public.orders WHERE order_no = 'QY-4';
SELECT last_result, settled_at IS NULL AS unsettled
FROM pay.paynotify_expectation WHERE order_no = 'QY-4' AND channel = 'qy_wx';
-- settled expectations are not due any more
UPDATE pay.paynotify_expectation SET next_query_at = now() - interval '1 second' WHERE channel = 'qy_wx';
SELECT * FROM pay.paynotify_query_due() ORDER BY 2;

-- ===== Alipay =====
-- the channel of the vectors, with the application's private key
SELECT t.configure('ali_trade_success_valid', 'qy_ali');
SELECT pay.paynotify_alter_channel('qy_ali', jsonb_build_object(
	'app_private_key', t.vtext('keys/merchant_1.key.pem')));
SELECT t.set_order(o, 'pending') FROM unnest('{QA-1,QA-2,QA-3}'::text[]) o;
SELECT (pay.paynotify_expect('qy_ali', o)).order_no FROM unnest('{QA-1,QA-2,QA-3}'::text[]) o;
UPDATE pay.paynotify_expectation SET expires_at = CASE order_no WHEN 'QA-2' THEN t.qnow(3600)
	ELSE t.qnow(-60) END WHERE order_no IN ('QA-2', 'QA-3') AND channel = 'qy_ali';

-- the request: alipay.trade.query signed RSA2, which is deterministic at a
-- fixed clock: the same, byte for byte, as the generator's
SET paynotify.now = 1767300000;
SELECT r.method, r.url = q.e->>'url' AS same_url, r.body = q.e->>'body' AS same_body,
	   r.body, r.headers
FROM pay.paynotify_query_request('qy_ali', 'QA-1') r, t.qy q WHERE q.name = 'ali_request';
RESET paynotify.now;
SELECT q.e->>'sign_content' AS signed FROM t.qy q WHERE q.name = 'ali_request';

-- refused, nothing changed: the amount changed after signing, another
-- key, an authentic answer about another order, an unsigned gateway error
SELECT a AS answer, r.*
FROM unnest('{ali_paid_tampered,ali_paid_wrong_key,ali_paid_other_order,ali_gateway_error}'::text[]) a, LATERAL t.qapply('qy_ali', a) r;
SELECT status FROM public.orders WHERE order_no = 'QA-1';
SELECT * FROM t.qtrace('QA-1');
SELECT last_result FROM pay.paynotify_expectation WHERE order_no = 'QA-1' AND channel = 'qy_ali';

-- a payment found: applied once; again, and its notification later: duplicates
SELECT * FROM t.qapply('qy_ali', 'ali_paid');
SELECT * FROM t.qapply('qy_ali', 'ali_paid');
SELECT status, body, outcome FROM pay.paynotify_handle('qy_ali',
	(SELECT e->'headers' FROM t.qy WHERE name = 'ali_paid_notification'),
	convert_to((SELECT e->>'body' FROM t.qy WHERE name = 'ali_paid_notification'), 'UTF8'));
SELECT status FROM public.orders WHERE order_no = 'QA-1';
SELECT channel, trade_no, amount, notify_id FROM pay.payment_record WHERE order_no = 'QA-1';
SELECT * FROM t.qtrace('QA-1');
SELECT event, amount FROM pay.paynotify_outbox WHERE order_no = 'QA-1' ORDER BY id;
SELECT last_result, settled_by FROM pay.paynotify_expectation WHERE order_no = 'QA-1' AND channel = 'qy_ali';

-- WAIT_BUYER_PAY, before expires_at or after it, closes nothing itself (no
-- end, and an Alipay answer carries no time: an old one could be
-- replayed); after expires_at the trade is closed at Alipay
-- (alipay.trade.close) and queried again
SELECT * FROM t.qapply('qy_ali', 'ali_wait');
SELECT status FROM public.orders WHERE order_no = 'QA-2';
SELECT last_result, close_requested_at FROM pay.paynotify_expectation WHERE order_no = 'QA-2' AND channel = 'qy_ali';
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-1) WHERE order_no = 'QA-2' AND channel = 'qy_ali';
SELECT * FROM t.qapply('qy_ali', 'ali_wait');
-- ACQ.TRADE_NOT_EXIST after expires_at: nothing, and no close (no trade
-- to close)
SELECT * FROM t.qapply('qy_ali', 'ali_not_exist');
SELECT order_no, status FROM public.orders WHERE order_no IN ('QA-2', 'QA-3') ORDER BY 1;
SELECT order_no, last_result, settled_by, settled_notify_id, close_requested_at IS NOT NULL AS close_requested,
	   close_attempts, next_query_at <= now() AS due_now
FROM pay.paynotify_expectation
WHERE order_no IN ('QA-2', 'QA-3') AND channel = 'qy_ali' ORDER BY 1;
-- the close call: alipay.trade.close signed RSA2 as the query, the same
-- byte for byte as the generator's
SET paynotify.now = 1767300000;
SELECT r.method, r.url = q.e->>'url' AS same_url, r.body = q.e->>'body' AS same_body, r.body,
	   r.url ~ '&method=alipay\.trade\.close&' AS close
FROM pay.paynotify_query_request('qy_ali', 'QA-2') r, t.qy q WHERE q.name = 'ali_close_request';
RESET paynotify.now;
-- its answer verified as the query's: another key, another order's close:
-- nothing but last_result
SELECT a AS answer, r.*
FROM unnest('{ali_close_forged,ali_close_other_order}'::text[]) a, LATERAL t.qapply('qy_ali', a) r;
SELECT last_result, close_requested_at IS NOT NULL AS close_requested
FROM pay.paynotify_expectation WHERE order_no = 'QA-2' AND channel = 'qy_ali';
-- closed (10000): queried again now, and TRADE_CLOSED closes the order once
SELECT * FROM t.qsteps('qy_ali', 'QA-2', '{ali_close_done,ali_closed_qa2,ali_closed_qa2}');
SELECT status FROM public.orders WHERE order_no = 'QA-2';
SELECT event FROM pay.paynotify_outbox WHERE order_no = 'QA-2' ORDER BY id;
SELECT settled_by, settled_notify_id FROM pay.paynotify_expectation WHERE order_no = 'QA-2' AND channel = 'qy_ali';
-- paid meanwhile: the close refused (ACQ.TRADE_STATUS_ERROR), the query
-- finds the payment
SELECT t.set_order('QA-6', 'pending');
SELECT (pay.paynotify_expect('qy_ali', 'QA-6', now() + interval '1 hour')).order_no;
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-1) WHERE order_no = 'QA-6';
SELECT * FROM t.qsteps('qy_ali', 'QA-6', '{ali_wait_qa6,ali_close_status_error,ali_paid_qa6}');
SELECT status FROM public.orders WHERE order_no = 'QA-6';
SELECT event FROM pay.paynotify_outbox WHERE order_no = 'QA-6' ORDER BY id;
-- a later expires_at withdraws a close requested
SELECT t.set_order('QA-7', 'pending');
SELECT (pay.paynotify_expect('qy_ali', 'QA-7', now() + interval '1 hour')).order_no;
UPDATE pay.paynotify_expectation SET close_requested_at = now() WHERE order_no = 'QA-7';
SELECT close_requested_at FROM pay.paynotify_expect('qy_ali', 'QA-7', now() + interval '2 hours');
-- once the close call was built (it may have reached the gateway), the
-- order is not extended: a trade closed there cannot be paid (55000); the
-- same or an earlier expires_at changes nothing and raises nothing
UPDATE pay.paynotify_expectation SET close_requested_at = now() WHERE order_no = 'QA-7';
SELECT method, url LIKE '%method=alipay.trade.close%' AS is_close FROM pay.paynotify_query_request('qy_ali', 'QA-7');
SELECT close_sent_at IS NOT NULL AS close_sent, close_attempts FROM pay.paynotify_expectation WHERE order_no = 'QA-7';
SELECT order_no FROM pay.paynotify_expect('qy_ali', 'QA-7', now() + interval '3 hours');
SELECT (pay.paynotify_expect('qy_ali', 'QA-7', now() + interval '90 minutes')).order_no;
-- the same once the trade was closed (settled by the close)
UPDATE pay.paynotify_expectation SET settled_at = now(), settled_by = 'close' WHERE order_no = 'QA-7';
SELECT order_no FROM pay.paynotify_expect('qy_ali', 'QA-7', now() + interval '3 hours');
UPDATE pay.paynotify_expectation SET settled_at = NULL, settled_by = NULL WHERE order_no = 'QA-7';
-- while that close is unanswered, a query's answer is still read as a
-- query's (the gateway's answers tell them apart): a query's answer (of
-- another order here) is refused as a query's, not as a close's, and the
-- close stays outstanding
SELECT * FROM t.qapply('qy_ali', 'ali_wait_qa6', 'QA-7');
SELECT last_result, close_requested_at IS NOT NULL AS close_requested FROM pay.paynotify_expectation WHERE order_no = 'QA-7';
-- the bound is on the calls built: at most 3 signed close calls, however
-- often the request is asked for; then a query again, the close dropped
CREATE FUNCTION t.qkind(chan text, ord text, OUT is_close boolean, OUT close_attempts int,
		OUT close_requested boolean)
	LANGUAGE plpgsql AS $$
BEGIN
	SELECT r.url LIKE '%method=alipay.trade.close%' INTO is_close FROM pay.paynotify_query_request(chan, ord) r;
	SELECT e.close_attempts, e.close_requested_at IS NOT NULL INTO close_attempts, close_requested
		FROM pay.paynotify_expectation e WHERE e.order_no = ord AND e.channel = chan;
END
$$;
SELECT * FROM t.qkind('qy_ali', 'QA-7');
SELECT * FROM t.qkind('qy_ali', 'QA-7');
SELECT * FROM t.qkind('qy_ali', 'QA-7');
-- TRADE_CLOSED after expires_at: unpaid (timed out), closed; after a
-- payment (refunded in full: a payment date, money received), nothing
SELECT t.set_order(o, 'pending') FROM unnest('{QA-4,QA-5}'::text[]) o;
SELECT (pay.paynotify_expect('qy_ali', o, now() + interval '1 hour')).order_no FROM unnest('{QA-4,QA-5}'::text[]) o;
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-1) WHERE order_no IN ('QA-4', 'QA-5');
SELECT * FROM t.qapply('qy_ali', 'ali_closed');
SELECT * FROM t.qapply('qy_ali', 'ali_closed_refunded');
SELECT o.order_no, o.status, e.last_result, e.settled_by FROM public.orders o
JOIN pay.paynotify_expectation e ON e.order_no = o.order_no
WHERE o.order_no IN ('QA-4', 'QA-5') ORDER BY 1;
-- an order expected on two channels: closed on one, it stays pending (it
-- may be paid on the other), that channel's expectation settled; closed on
-- the other too, it is closed
SELECT t.set_order('QZ-1', 'pending');
SELECT (pay.paynotify_expect(c, 'QZ-1', now() + interval '1 hour')).channel FROM unnest('{qy_wx,qy_ali}'::text[]) c;
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-1) WHERE order_no = 'QZ-1';
SELECT * FROM t.qapply('qy_wx', 'wx_closed_qz');
SELECT status FROM public.orders WHERE order_no = 'QZ-1';
SELECT * FROM t.qapply('qy_ali', 'ali_closed_qz');
SELECT status FROM public.orders WHERE order_no = 'QZ-1';
SELECT channel, last_result, settled_by FROM pay.paynotify_expectation WHERE order_no = 'QZ-1' ORDER BY 1;

-- ===== Stripe =====
-- answers are not signed: applied on a channel that trusts them
-- (query_trusted), a payment found is an anomaly for a human elsewhere
SELECT t.configure('stripe_payment_intent_succeeded_valid', 'qy_st');
SELECT t.configure('stripe_payment_intent_succeeded_valid', 'qy_st_u');
SELECT pay.paynotify_alter_channel(c, jsonb_build_object('secret_key', 'rk_test_TESTONLY0000000000000000',
	'query_trusted', c = 'qy_st')) FROM unnest('{qy_st,qy_st_u}'::text[]) c;
SELECT t.set_order(o, 'pending') FROM unnest('{QS-1,QS-2,QS-3,QS-4}'::text[]) o;
SELECT (pay.paynotify_expect(c, o)).order_no
FROM unnest('{qy_st,qy_st_u}'::text[]) c, unnest('{QS-1,QS-2,QS-3,QS-4}'::text[]) o;
UPDATE pay.paynotify_expectation SET expires_at = t.qnow(-60) WHERE channel IN ('qy_st', 'qy_st_u');
-- the request: a search of the PaymentIntents by the order's metadata key
-- (order_ref_path), with the API key as the bearer
SELECT * FROM pay.paynotify_query_request('qy_st', 'QS-1');
-- a quote would end the search query's string: refused
\set VERBOSITY sqlstate
SELECT url FROM pay.paynotify_query_request('qy_st', E'QS''1\\');
\set VERBOSITY default

-- untrusted: the payment found is recorded as an anomaly, nothing moves;
-- canceled closes nothing
SELECT * FROM t.qapply('qy_st_u', 'st_paid');
SELECT * FROM t.qapply('qy_st_u', 'st_canceled');
SELECT order_no, status FROM public.orders WHERE order_no IN ('QS-1', 'QS-2') ORDER BY 1;
SELECT * FROM t.qtrace('QS-1');
SELECT kind FROM pay.paynotify_anomaly WHERE order_no = 'QS-1';
SELECT channel, order_no, last_result FROM pay.paynotify_expectation
WHERE channel = 'qy_st_u' AND order_no IN ('QS-1', 'QS-2') ORDER BY 2;

-- trusted: another order's intent refused; paid once, then its
-- notification is a duplicate
SELECT * FROM t.qapply('qy_st', 'st_other_order');
SELECT * FROM t.qapply('qy_st', 'st_paid');
SELECT * FROM t.qapply('qy_st', 'st_paid');
SELECT t.stripe_ledger('qy_st', 'QS-1', 'evt_qs_1', 'pi_qs_1', 8888);
SELECT status FROM public.orders WHERE order_no = 'QS-1';
SELECT channel, trade_no, amount, currency, notify_id FROM pay.payment_record WHERE order_no = 'QS-1';
SELECT * FROM t.qtrace('QS-1');
-- canceled after expires_at: closed, but not from a page with more to come
-- (has_more: not every intent seen); no intent at all (Stripe's search
-- lags), processing and an error: nothing
-- (QS-2 expected on the trusted channel only: an expectation still open on
-- another channel would keep the order open)
DELETE FROM pay.paynotify_expectation WHERE order_no = 'QS-2' AND channel = 'qy_st_u';
SELECT a AS answer, r.*
FROM unnest('{st_canceled_more,st_canceled,st_none,st_processing,st_error}'::text[]) a, LATERAL t.qapply('qy_st', a) r;
SELECT order_no, status FROM public.orders WHERE order_no IN ('QS-2', 'QS-3', 'QS-4') ORDER BY 1;
SELECT * FROM t.qtrace('QS-2') UNION ALL SELECT * FROM t.qtrace('QS-3');
SELECT order_no, last_result, settled_by FROM pay.paynotify_expectation
WHERE channel = 'qy_st' ORDER BY 1;
-- an error's code longer than any gateway's (64 bytes): malformed, as the
-- other gateways' are, and not written into the expectation's result; one
-- of 64 bytes is
SELECT status, outcome FROM pay.paynotify_query_apply('qy_st', 'QS-4', 400, '{}',
	convert_to('{"error": {"code": "' || repeat('x', 65) || '"}}', 'UTF8'));
SELECT last_result FROM pay.paynotify_expectation WHERE channel = 'qy_st' AND order_no = 'QS-4';
SELECT status, outcome FROM pay.paynotify_query_apply('qy_st', 'QS-4', 400, '{}',
	convert_to('{"error": {"code": "' || repeat('y', 64) || '"}}', 'UTF8'));
SELECT last_result FROM pay.paynotify_expectation WHERE channel = 'qy_st' AND order_no = 'QS-4';

-- bad calls: precise SQLSTATEs
-- an app_id or seller_id that would add fields to what the app's key signs
\set VERBOSITY sqlstate
SELECT pay.paynotify_alter_channel('qy_ali', jsonb_build_object('app_id',
	'2021000000000001&biz_content={}&method=alipay.trade.refund&zzz='));
SELECT pay.paynotify_alter_channel('qy_ali', '{"seller_id": "2088=1"}');
\set VERBOSITY default
-- ... checked only on a channel that signs queries: one of 1.3 with
-- another app_id still loads, and the others work beside it
SELECT pay.paynotify_add_channel('qy_ali_old', 'alipay', '{"app_id": "2021-0000-0002"}');
SELECT count(*) FROM t.qapply('qy_wx', 'wx_paid');
\set VERBOSITY sqlstate
SELECT pay.paynotify_alter_channel('qy_ali_old', jsonb_build_object('app_private_key', t.vtext('keys/merchant_1.key.pem')));
\set VERBOSITY default
DELETE FROM pay.paynotify_channel WHERE name = 'qy_ali_old';
\set VERBOSITY sqlstate
SELECT * FROM pay.paynotify_query_request('no_such', 'QY-1');
SELECT * FROM pay.paynotify_query_request('qy_wx', '');
SELECT * FROM pay.paynotify_query_request(NULL, 'QY-1');
SELECT t.configure('wx_transaction_success_valid', 'qy_wx_nokey');
SELECT * FROM pay.paynotify_query_request('qy_wx_nokey', 'QY-1');
SELECT * FROM pay.paynotify_query_due(0);
SELECT pay.paynotify_alter_channel('qy_wx', '{"merchant_serial": null}');
SELECT pay.paynotify_alter_channel('qy_wx', '{"merchant_private_key": "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----"}');
SELECT pay.paynotify_alter_channel('qy_wx', '{"api_base": "http://pay.example"}');
SELECT pay.paynotify_alter_channel('qy_wx', '{"api_base": "https://a.example/?x=1"}');
SELECT pay.paynotify_alter_channel('qy_wx', '{"merchant_serial": {"file": "x"}}');
SELECT pay.paynotify_alter_channel('qy_ali', '{"app_private_key": "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu"}');
SELECT pay.paynotify_alter_channel('qy_ali', jsonb_build_object('app_private_key', t.vtext('keys/alipay_1.pub.pem')));
SELECT pay.paynotify_alter_channel('qy_st', '{"secret_key": "whsec_notanapikey"}');
-- the account's secret key may refund: the relay capacity, which reads
-- the key in each request, never gets it
SELECT pay.paynotify_alter_channel('qy_st', '{"secret_key": "sk_test_TESTONLY0000000000000000"}');
SELECT pay.paynotify_alter_channel('qy_st', '{"query_trusted": "yes"}');
SELECT pay.paynotify_alter_channel('qy_st', '{"order_ref_path": "data.object.client_reference_id"}');
SELECT * FROM pay.paynotify_query_request('qy_st', 'QS-1');
\set VERBOSITY default
-- the message of a bad key never quotes it
SELECT pay.paynotify_alter_channel('qy_wx', '{"merchant_private_key": "-----BEGIN PRIVATE KEY-----\nMIIsecretsecret\n-----END PRIVATE KEY-----"}');

-- who may: the relay capacity (and operators), nobody else
CREATE ROLE qy_relay LOGIN;
CREATE ROLE qy_nobody LOGIN;
SELECT pay.paynotify_grant('qy_relay', 'relay');
SET ROLE qy_relay;
SELECT * FROM pay.paynotify_query_due();
SELECT method FROM pay.paynotify_query_request('qy_wx', 'QY-4');
SELECT outcome FROM pay.paynotify_query_apply('qy_wx', 'QY-4', 200, '{}', '\x7b7d');
\set VERBOSITY sqlstate
SELECT count(*) FROM pay.paynotify_expectation;
RESET ROLE;
SET ROLE qy_nobody;
SELECT * FROM pay.paynotify_query_due();
SELECT method FROM pay.paynotify_query_request('qy_wx', 'QY-4');
SELECT outcome FROM pay.paynotify_query_apply('qy_wx', 'QY-4', 200, '{}', '\x7b7d');
\set VERBOSITY default
RESET ROLE;
SELECT pay.paynotify_revoke('qy_relay', 'relay');
DROP ROLE qy_relay, qy_nobody;
