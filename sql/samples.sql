-- The documentation corpus (test/vectors/samples): every sample notification
-- of the gateways' documentation and SDK fixtures, signed with the test keys,
-- replayed through paynotify_handle at its own now_unix on a channel named
-- after the case and configured as its manifest entry says, with the order
-- in the state the entry's "before" names.  Per case: the outcome, the
-- acknowledgement, the order's status after, the events in the outbox, the
-- payment and refund recorded, whether all of it is as the entry expects
-- (as_documented), and a second delivery answered from the log.
\set ECHO none
\set QUIET on
CREATE TABLE t.samples AS
	SELECT c->>'case' AS name, c->>'gateway' AS gateway,
		(c->>'implemented')::boolean AS implemented, c
	FROM jsonb_array_elements(pg_read_file((SELECT dir FROM t.vdir) || 'samples/manifest.json')::jsonb) c;

-- A sample file (paths in the manifest are relative to samples/).
CREATE FUNCTION t.sbytes(path text) RETURNS bytea LANGUAGE sql AS
	$$ SELECT pg_read_binary_file((SELECT dir FROM t.vdir) || 'samples/' || path) $$;

-- One channel per case, configured as its entry says (keys live in test/vectors/keys).
CREATE FUNCTION t.sample_configure(m jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	chan text := m->>'case';
	cfg jsonb := m->'config';
	k record;
	f text;
BEGIN
	CASE m->>'gateway'
	WHEN 'wxpay' THEN
		-- a direct channel (mchid, appid) or a partner one (sp_mchid, sub_mchid, sp_appid, sub_appid)
		PERFORM pay.paynotify_add_channel(chan, 'wxpay', jsonb_strip_nulls(jsonb_build_object(
			'apiv3_key', btrim(t.vtext(cfg->>'apiv3_key_file'), E'\n'),
			'mchid', cfg->>'mchid', 'appid', cfg->>'appid',
			'sp_mchid', cfg->>'sp_mchid', 'sub_mchid', cfg->>'sub_mchid',
			'sp_appid', cfg->>'sp_appid', 'sub_appid', cfg->>'sub_appid',
			'tolerance_s', (cfg->>'tolerance_s')::int)));
		FOR k IN SELECT * FROM jsonb_each_text(cfg->'trusted') LOOP
			PERFORM pay.paynotify_add_key(chan, k.key, t.vtext(k.value));
		END LOOP;
	WHEN 'alipay' THEN
		PERFORM pay.paynotify_add_channel(chan, 'alipay',
			jsonb_build_object('app_id', cfg->>'app_id'));
		FOR f IN SELECT jsonb_array_elements_text(cfg->'alipay_public_keys') LOOP
			PERFORM pay.paynotify_add_key(chan, f, t.vtext(f));
		END LOOP;
	WHEN 'stripe' THEN
		PERFORM pay.paynotify_add_channel(chan, 'stripe', jsonb_build_object(
			'tolerance_s', (cfg->>'tolerance_s')::int,
			'order_ref_path', cfg->>'order_ref_path'));
		FOR f IN SELECT jsonb_array_elements_text(cfg->'secret_files') LOOP
			PERFORM pay.paynotify_add_key(chan, f, btrim(t.vtext(f), E'\n'));
		END LOOP;
	END CASE;
END
$$;

-- Deliver a case's signed request on its channel at its now_unix.
CREATE FUNCTION t.sample_deliver(m jsonb, OUT status int, OUT body text, OUT outcome text)
	LANGUAGE plpgsql AS $$
DECLARE
	headers jsonb := (SELECT jsonb_object_agg(lower(h->>0), h->>1)
					  FROM jsonb_array_elements(m->'headers') h);
BEGIN
	PERFORM set_config('paynotify.now', m->>'now_unix', false);
	SELECT r.status, r.body, r.outcome INTO status, body, outcome
		FROM pay.paynotify_handle(m->>'case', headers, t.sbytes(m->'files'->>'body')) r;
	PERFORM set_config('paynotify.now', '0', false);
END
$$;

CREATE TABLE t.sample_result (
	name text PRIMARY KEY, gateway text, implemented boolean,
	outcome text, acked boolean, after_status text, events jsonb,
	payment jsonb, refund jsonb, as_documented boolean, again text);

-- Run one case: configure, set the order, deliver, look, deliver again.
CREATE FUNCTION t.sample_run(case_name text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	m jsonb := (SELECT c FROM t.samples WHERE name = case_name);
	b jsonb := m->'before';
	e jsonb := m->'expected';
	r record;
	res t.sample_result;
BEGIN
	PERFORM t.sample_configure(m);
	-- a termination's agreement, signed before it (the sign is another case)
	IF jsonb_typeof(m->'before_agreement') = 'object' THEN
		INSERT INTO pay.paynotify_agreement (channel, agreement_id, merchant_ref, state, gateway_state, signed_at)
			VALUES (case_name, m->'before_agreement'->>'agreement_id',
					m->'before_agreement'->>'merchant_ref', 'signed', 'prepared', now());
	END IF;
	IF jsonb_typeof(b) = 'object' THEN
		PERFORM t.set_order(b->>'order_no', b->>'status', (b->>'amount')::bigint);
		IF b->>'paid_trade' IS NOT NULL THEN
			INSERT INTO pay.payment_record (channel, trade_no, order_no, amount, notify_id)
				VALUES (case_name, b->>'paid_trade', b->>'order_no', (b->>'amount')::bigint, 'prepared');
		END IF;
	END IF;
	SELECT * INTO r FROM t.sample_deliver(m);
	res.name := case_name;
	res.gateway := m->>'gateway';
	res.implemented := (m->>'implemented')::boolean;
	res.outcome := r.outcome;
	res.acked := t.acked(m->>'gateway', r.status, r.body);
	res.after_status := (SELECT status FROM public.orders WHERE order_no = b->>'order_no');
	res.events := (SELECT COALESCE(jsonb_agg(event ORDER BY id), '[]') FROM pay.paynotify_outbox
				   WHERE channel = case_name);
	res.payment := (SELECT jsonb_build_object('trade_no', trade_no, 'amount', amount)
					FROM pay.payment_record WHERE channel = case_name AND notify_id <> 'prepared'
					ORDER BY trade_no LIMIT 1);
	res.refund := (SELECT jsonb_build_object('refund_id', refund_id, 'amount', amount, 'status', status)
				   FROM pay.paynotify_refund WHERE channel = case_name ORDER BY refund_id LIMIT 1);
	res.as_documented := res.outcome = e->>'outcome'
		AND res.acked = (e->>'ack')::boolean
		AND res.after_status IS NOT DISTINCT FROM e->>'after_status'
		AND res.events = e->'events'
		AND COALESCE(res.payment, 'null') = e->'payment'
		AND COALESCE(res.refund, 'null') = e->'refund'
		AND (e->'agreement' IS NULL OR EXISTS (
			SELECT FROM pay.paynotify_agreement a
			WHERE a.channel = case_name AND a.agreement_id = e->'agreement'->>'agreement_no'
			  AND a.merchant_ref IS NOT DISTINCT FROM e->'agreement'->>'merchant_ref'
			  AND a.state = CASE e->'agreement'->>'action' WHEN 'agreement_signed' THEN 'signed' ELSE 'ended' END));
	SELECT d.outcome INTO res.again FROM t.sample_deliver(m) d;
	INSERT INTO t.sample_result SELECT res.*;
	-- Several samples name the same order: the next case starts from its
	-- own "before", without this case's trades and refunds.
	DELETE FROM pay.paynotify_refund WHERE channel = case_name;
	DELETE FROM pay.payment_record WHERE channel = case_name;
END
$$;

DO $$
DECLARE
	n text;
BEGIN
	FOR n IN SELECT name FROM t.samples ORDER BY gateway DESC, name LOOP
		BEGIN
			PERFORM t.sample_run(n);
		EXCEPTION WHEN OTHERS THEN
			-- e.g. a setting this build does not know: shown, not as documented
			INSERT INTO t.sample_result (name, gateway, implemented, outcome, as_documented)
				SELECT name, gateway, implemented, 'error ' || SQLSTATE, false
				FROM t.samples WHERE name = n;
		END;
	END LOOP;
END
$$;
\set QUIET off
\set ECHO all

-- every case: what paynotify did, and whether it is what the entry expects
SELECT name, outcome, acked AS ack, after_status AS after, events, as_documented, again
FROM t.sample_result ORDER BY gateway DESC, name;

-- what was recorded
SELECT name, payment, refund FROM t.sample_result
WHERE payment IS NOT NULL OR refund IS NOT NULL ORDER BY gateway DESC, name;

-- per gateway: implemented cases must all be as documented
SELECT gateway, implemented, count(*) AS cases, count(*) FILTER (WHERE as_documented) AS as_expected
FROM t.sample_result GROUP BY 1, 2 ORDER BY 1 DESC, 2 DESC;

-- refused (rejected or malformed) only where the entry expects it; every
-- accepted case answered "duplicate" the second time
SELECT count(*) FILTER (WHERE outcome IN ('rejected', 'malformed')) AS refused,
	count(*) FILTER (WHERE outcome IN ('rejected', 'malformed') AND NOT as_documented) AS refused_unexpectedly,
	count(*) FILTER (WHERE outcome NOT IN ('rejected', 'malformed') AND again <> 'duplicate') AS not_deduplicated
FROM t.sample_result;

-- the corpus's channels go: later tests set up merchants of their own
DELETE FROM pay.paynotify_channel WHERE name LIKE 'doc\_%';
