-- The fixture every pg_regress test and isolation spec starts from:
-- paynotify in its own schema (any schema works), an orders table guarded
-- by the state machine, and helpers that replay the signed test vectors.
-- Plain SQL, so that isolation specs can run it too.  The vectors' folder
-- is paynotify_test.vdir when set, else test/vectors next to the temporary
-- instance's data directory (pg_regress puts it in tmp_check*/data).
CREATE SCHEMA pay;
CREATE EXTENSION paynotify SCHEMA pay;
-- The vectors are signed for one account per gateway, and the tests replay
-- them on many channels: something a real installation must never do (one
-- channel per gateway account), allowed here for every later session.
DO $$ BEGIN
	EXECUTE format('ALTER DATABASE %I SET paynotify.allow_shared_accounts = on', current_database());
END $$;
SET paynotify.allow_shared_accounts = on;

CREATE TABLE public.orders (
	order_no	varchar(32) PRIMARY KEY,
	status		text NOT NULL DEFAULT 'pending',
	amount_fen	bigint NOT NULL
);
CREATE TRIGGER orders_guard BEFORE UPDATE ON public.orders
	FOR EACH ROW EXECUTE FUNCTION pay.paynotify_guard_transition();
SELECT pay.paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');

CREATE SCHEMA t;
CREATE TABLE t.vdir AS SELECT COALESCE(NULLIF(current_setting('paynotify_test.vdir', true), ''),
	current_setting('data_directory') || '/../../test/vectors/') AS dir;
CREATE TABLE t.manifest AS
	SELECT c->>'case' AS name, c
	FROM jsonb_array_elements(pg_read_file((SELECT dir FROM t.vdir) || 'manifest.json')::jsonb) c;

-- Read a vector file as text (keys) or bytes (bodies).
CREATE FUNCTION t.vtext(path text) RETURNS text LANGUAGE sql AS
	$$ SELECT pg_read_file((SELECT dir FROM t.vdir) || path) $$;
CREATE FUNCTION t.vbytes(path text) RETURNS bytea LANGUAGE sql AS
	$$ SELECT pg_read_binary_file((SELECT dir FROM t.vdir) || path) $$;

-- A request header of a case.
CREATE FUNCTION t.header(case_name text, hname text) RETURNS text LANGUAGE sql AS $$
	SELECT h->>1 FROM t.manifest, jsonb_array_elements(c->'headers') h
	WHERE name = case_name AND lower(h->>0) = lower(hname)
$$;

-- One channel per case, named after it, configured as the manifest says.
CREATE FUNCTION t.configure(case_name text, chan text DEFAULT NULL) RETURNS void
	LANGUAGE plpgsql AS $$
DECLARE
	m jsonb := (SELECT c FROM t.manifest WHERE name = case_name);
	cfg jsonb := m->'config';
	k record;
	f text;
BEGIN
	chan := COALESCE(chan, case_name);
	IF EXISTS (SELECT FROM pay.paynotify_channel WHERE name = chan) THEN
		RETURN;
	END IF;
	CASE m->>'gateway'
	WHEN 'wxpay' THEN
		PERFORM pay.paynotify_add_channel(chan, 'wxpay', jsonb_build_object(
			'apiv3_key', btrim(t.vtext(cfg->>'apiv3_key_file'), E'\n'),
			'mchid', cfg->>'mchid', 'appid', cfg->>'appid',
			'tolerance_s', (cfg->>'tolerance_s')::int));
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
		PERFORM pay.paynotify_add_channel(chan, 'stripe',
			jsonb_build_object('tolerance_s', (cfg->>'tolerance_s')::int));
		FOR f IN SELECT jsonb_array_elements_text(cfg->'secret_files') LOOP
			PERFORM pay.paynotify_add_key(chan, f, btrim(t.vtext(f), E'\n'));
		END LOOP;
	END CASE;
END
$$;

-- Put an order in a given state and amount, bypassing the guard.
CREATE FUNCTION t.set_order(ord text, st text, amt bigint DEFAULT 8888) RETURNS void
	LANGUAGE plpgsql AS $$
BEGIN
	ALTER TABLE public.orders DISABLE TRIGGER orders_guard;
	INSERT INTO public.orders VALUES (ord, st, amt)
		ON CONFLICT (order_no) DO UPDATE SET status = st, amount_fen = amt;
	ALTER TABLE public.orders ENABLE TRIGGER orders_guard;
END
$$;

-- Put the case's order in the state the case needs: paid for refunds, with
-- the payment of the refunded trade recorded on channel chan when given.
CREATE FUNCTION t.prepare_order(case_name text, chan text DEFAULT NULL) RETURNS void
	LANGUAGE plpgsql AS $$
DECLARE
	d jsonb := (SELECT c->'decrypted_fields' FROM t.manifest WHERE name = case_name);
	ord text := COALESCE(d->>'out_trade_no', d->>'data.object.metadata.order_id');
	want text := CASE WHEN d ? 'refund_id' OR d ? 'refund_fee'
						OR d->>'type' = 'charge.refunded' THEN 'paid' ELSE 'pending' END;
	trade text := COALESCE(d->>'transaction_id', d->>'trade_no', d->>'data.object.payment_intent');
BEGIN
	IF ord IS NOT NULL THEN
		PERFORM t.set_order(ord, want);
		IF want = 'paid' AND chan IS NOT NULL AND trade IS NOT NULL THEN
			INSERT INTO pay.payment_record (channel, trade_no, order_no, amount, notify_id)
				VALUES (chan, trade, ord, 8888, 'prepared') ON CONFLICT DO NOTHING;
		END IF;
	END IF;
END
$$;

-- Deliver a case as the shim would, on channel chan, at the case's now_unix.
CREATE FUNCTION t.deliver(case_name text, chan text,
		OUT status int, OUT content_type text, OUT body text, OUT outcome text)
	LANGUAGE plpgsql AS $$
DECLARE
	m jsonb := (SELECT c FROM t.manifest WHERE name = case_name);
	headers jsonb := (SELECT jsonb_object_agg(lower(h->>0), h->>1)
					  FROM jsonb_array_elements(m->'headers') h);
BEGIN
	PERFORM set_config('paynotify.now', m->>'now_unix', false);
	SELECT * INTO status, content_type, body, outcome
		FROM pay.paynotify_handle(chan, headers, t.vbytes(m->'files'->>'body'));
	PERFORM set_config('paynotify.now', '0', false);
END
$$;

-- Whether a reply acknowledges, by each gateway's own rule.
CREATE FUNCTION t.acked(gateway text, status int, body text) RETURNS boolean
	LANGUAGE sql AS $$
	SELECT CASE gateway
		WHEN 'wxpay' THEN status IN (200, 204)
		WHEN 'alipay' THEN body = 'success'
		ELSE status BETWEEN 200 AND 299 END
$$;

-- Replay one case on a fresh channel named prefix || case (its original
-- first, for a re-delivery), then deliver it once more.
CREATE FUNCTION t.replay(case_name text, prefix text DEFAULT '',
		OUT outcome text, OUT acked boolean, OUT again text)
	LANGUAGE plpgsql AS $$
DECLARE
	m jsonb := (SELECT c FROM t.manifest WHERE name = case_name);
	orig text := COALESCE(m->>'duplicate_of', case_name);
	chan text := prefix || orig;
	r record;
BEGIN
	PERFORM t.configure(orig, chan);
	PERFORM t.prepare_order(orig, chan);
	IF orig <> case_name THEN
		PERFORM t.deliver(orig, chan);
	END IF;
	SELECT * INTO r FROM t.deliver(case_name, chan);
	outcome := r.outcome;
	acked := t.acked(m->>'gateway', r.status, r.body);
	SELECT d.outcome INTO again FROM t.deliver(case_name, chan) d;
END
$$;

-- Stripe events are signed here, as Stripe does: HMAC-SHA256 keyed by the
-- whole whsec_ secret over "t.body", from pgcrypto.
CREATE EXTENSION pgcrypto SCHEMA t;
CREATE FUNCTION t.hmac_sha256(key bytea, msg bytea) RETURNS text
	LANGUAGE sql IMMUTABLE STRICT AS
	$$ SELECT encode(t.hmac(msg, key, 'sha256'), 'hex') $$;
CREATE FUNCTION t.secret(n int) RETURNS text LANGUAGE sql AS
	$$ SELECT btrim(t.vtext('keys/stripe_secret_' || n || '.txt'), E'\n') $$;
-- Sign body with each secret at ts and deliver it on chan at now (ts + 2).
CREATE FUNCTION t.stripe(chan text, body text, secrets text[],
		ts bigint DEFAULT 1767300000, now bigint DEFAULT NULL,
		OUT status int, OUT content_type text, OUT reply text, OUT outcome text)
	LANGUAGE plpgsql AS $$
DECLARE
	hdr text := 't=' || ts;
	s text;
BEGIN
	FOREACH s IN ARRAY secrets LOOP
		hdr := hdr || ',v1=' || t.hmac_sha256(convert_to(s, 'UTF8'),
											  convert_to(ts || '.' || body, 'UTF8'));
	END LOOP;
	PERFORM set_config('paynotify.now', COALESCE(now, ts + 2)::text, false);
	SELECT * INTO status, content_type, reply, outcome
		FROM pay.paynotify_handle(chan, jsonb_build_object(
			'Content-Type', 'application/json; charset=utf-8',
			'Stripe-Signature', hdr), body);
	PERFORM set_config('paynotify.now', '0', false);
END
$$;

-- Signed WeChat notifications for the ledger tests (test/ledger_notices.json,
-- made by test/unit/make_ledger_notices.py), on a channel configured like
-- the vector case wx_transaction_success_valid.
CREATE TABLE t.wx_note AS
	SELECT e->>'name' AS name, e
	FROM jsonb_array_elements(pg_read_file((SELECT dir FROM t.vdir) || '../ledger_notices.json')::jsonb) e;
CREATE FUNCTION t.wx(chan text, note text,
		OUT status int, OUT content_type text, OUT body text, OUT outcome text)
	LANGUAGE plpgsql AS $$
DECLARE
	e jsonb := (SELECT w.e FROM t.wx_note w WHERE w.name = note);
BEGIN
	IF e IS NULL THEN
		RAISE EXCEPTION 'no ledger notice "%"', note;
	END IF;
	PERFORM t.configure('wx_transaction_success_valid', chan);
	PERFORM set_config('paynotify.now', e->>'now', false);
	SELECT * INTO status, content_type, body, outcome
		FROM pay.paynotify_handle(chan, e->'headers', convert_to(e->>'body', 'UTF8'));
	PERFORM set_config('paynotify.now', '0', false);
END
$$;

-- A Stripe payment (refunded IS NULL) or charge.refunded event of order ord,
-- trade (payment intent) pi, signed with secret 1 and delivered on chan;
-- built without braces so that isolation specs can call it.
CREATE FUNCTION t.stripe_ledger(chan text, ord text, evt text, pi text, amount bigint,
		refunded bigint DEFAULT NULL, refund_ids text[] DEFAULT NULL) RETURNS text
	LANGUAGE sql AS $$
	SELECT s.outcome FROM t.stripe(chan, jsonb_build_object('id', evt, 'object', 'event',
		'type', CASE WHEN refunded IS NULL THEN 'payment_intent.succeeded' ELSE 'charge.refunded' END,
		'livemode', false, 'data', jsonb_build_object('object',
			CASE WHEN refunded IS NULL THEN jsonb_build_object('id', pi, 'object', 'payment_intent',
				'amount', amount, 'amount_received', amount)
			ELSE jsonb_build_object('id', 'ch_' || pi, 'object', 'charge', 'payment_intent', pi,
				'amount', amount, 'amount_refunded', refunded,
				'refunds', jsonb_build_object('object', 'list', 'data',
					(SELECT jsonb_agg(jsonb_build_object('id', r)) FROM unnest(refund_ids) r)))
			END || jsonb_build_object('currency', 'usd',
				'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)]) s
$$;
