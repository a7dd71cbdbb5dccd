#!/usr/bin/env bash
# Memory stays flat: MEMORY_CALLS (default 20000; the full check is 100000)
# calls of paynotify_handle in ONE backend, one transaction each, cycling
# through every outcome (processed, duplicate, ignored, parked, failed, rejected,
# malformed) and every kind of agreement notice (a sign, an end, an end
# parked before its sign, Stripe's unsigned incomplete_expired end, an
# invoice.paid charged under its subscription, an over-long agreement id, a
# WeChat ENTRUST and an Alipay dut_user_sign notice).  Compares the backend's private memory (RssAnon) and its memory
# contexts after a warm-up with the same at the end: no OpenSSL object or
# palloc'd buffer may outlive its call.  Then MEMORY_RELOADS (default 1000)
# configuration loads in one backend, each after a change of a type (which
# marks the configuration stale), each walking the orders table's code: the
# same comparison.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

calls=${MEMORY_CALLS:-20000}
warmup=$((calls / 10))
reloads=${MEMORY_RELOADS:-1000}
reload_warmup=$((reloads / 10))
limit_kb=${MEMORY_LIMIT_KB:-1024}
dir=$(pn_tmp_dir mem)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; remove_tmp "$dir"' EXIT

pn_fixture_cluster "$dir" "$port" "synchronous_commit = off"
sql() { pn_psql "$dir" "$port" "$@"; }
pn_fixture_load "$dir" "$port" postgres
PN_AGREEMENTS=1 python3 test/unit/make_alipay_forms.py >"$dir/forms.sql"
sql -q -v calls="$calls" -v forms="$dir/forms.sql" >/dev/null <<'SQL'
SELECT t.configure('wx_transaction_success_valid', 'm_wx');
SELECT t.configure('ali_trade_success_valid', 'm_ali');
SELECT t.set_order('PN20260101000001', 'pending');
SELECT t.set_order('PN20260101000002', 'pending');
-- registered by a plain role: a superuser's hook may have no PL/pgSQL body
CREATE FUNCTION t.flaky(ev jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF ev->'notice'->>'order_no' LIKE 'MF%' THEN
		RAISE EXCEPTION 'hook refuses %', ev->'notice'->>'order_no';
	END IF;
END $$;
CREATE ROLE mem_hooks;
SELECT pay.paynotify_grant('mem_hooks', 'admin');
GRANT USAGE ON SCHEMA t TO mem_hooks;
SET ROLE mem_hooks;
SELECT pay.paynotify_on('paid', 't.flaky(jsonb)');
RESET ROLE;

-- Stripe events on channel 'st': t.st(id, order, 'pay' | 'refund' | 'other')
\i test/e2e/stripe.sql
CREATE FUNCTION t.vec(case_name text, chan text) RETURNS text LANGUAGE sql AS
	$$ SELECT outcome FROM t.deliver(case_name, chan) $$;

-- Agreement notices: Stripe subscription events on 'st' (fresh ids each
-- call), t.wx's ENTRUST sign (test/ledger_notices.json) and the Alipay
-- dut_user_sign body of sql/agreements.sql (test/unit/make_alipay_forms.py)
CREATE FUNCTION t.sub(evt text, type text, object jsonb) RETURNS text LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('st', jsonb_build_object('id', evt, 'object', 'event',
		'type', type, 'livemode', false, 'data', jsonb_build_object('object', object))::text,
		ARRAY[t.secret(1)])
$$;
CREATE FUNCTION t.subo(id text, status text) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'subscription', 'status', status,
		'start_date', 1767200000, 'metadata', jsonb_build_object('order_id', 'member'),
		'items', jsonb_build_object('object', 'list', 'data', jsonb_build_array(
			jsonb_build_object('id', 'si_1', 'price', jsonb_build_object('id', 'price_monthly')))))
		|| CASE WHEN status IN ('canceled', 'incomplete_expired')
				THEN jsonb_build_object('ended_at', 1767290000) ELSE '{}'::jsonb END
$$;
CREATE FUNCTION t.invoice(id text, sub text, ord text) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object('id', id, 'object', 'invoice', 'currency', 'usd',
		'amount_due', 8888, 'amount_paid', 8888, 'billing_reason', 'subscription_create',
		'metadata', '{}'::jsonb,
		'parent', jsonb_build_object('type', 'subscription_details',
			'subscription_details', jsonb_build_object('subscription', sub,
				'metadata', jsonb_build_object('order_id', ord))))
$$;
SELECT pay.paynotify_add_channel('ali_sub', 'alipay',
	'{"app_id": "2021000000000001", "seller_id": "2088000000000002"}');
SELECT pay.paynotify_add_key('ali_sub', 'alipay_1', t.vtext('keys/alipay_1.pub.pem'));
CREATE TABLE t.ali_agr_form (name text PRIMARY KEY, charset text NOT NULL, body text NOT NULL);
\i :forms
CREATE FUNCTION t.ali_agr(form text) RETURNS text LANGUAGE sql AS $$
	SELECT h.outcome FROM t.ali_agr_form f,
		pay.paynotify_handle('ali_sub', jsonb_build_object('content-type',
			'application/x-www-form-urlencoded; charset=' || f.charset), convert_to(f.body, 'UTF8')) h
	WHERE f.name = form
$$;

-- call i: every outcome in turn, then the agreement notices, each answered
-- as "kind outcome"
CREATE FUNCTION t.mem_call(i int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	CASE i % 18
	WHEN 0 THEN
		RETURN t.st('evt_p' || i, 'M' || i);                  -- processed
	WHEN 1 THEN RETURN t.st('evt_p' || (i - 1), 'M' || (i - 1)); -- duplicate
	WHEN 2 THEN
		RETURN t.st('evt_r' || i, 'MR' || i, 'refund');       -- parked
	WHEN 3 THEN
		RETURN t.st('evt_f' || i, 'MF' || i);                 -- failed (hook)
	WHEN 4 THEN RETURN t.st('evt_i' || i, 'nobody', 'other'); -- ignored: unknown type
	WHEN 5 THEN RETURN t.vec('wx_body_tampered', 'm_wx');     -- rejected
	WHEN 6 THEN RETURN (SELECT outcome FROM pay.paynotify_handle('m_wx', '{}', '\x00ff'::bytea)); -- malformed
	WHEN 7 THEN RETURN t.vec('wx_transaction_success_valid', 'm_wx');
	WHEN 8 THEN RETURN t.vec('ali_trade_success_valid', 'm_ali');
	WHEN 9 THEN RETURN 'a_park ' ||                            -- parked
		t.sub('evt_ap' || i, 'customer.subscription.deleted', t.subo('sub_P' || i, 'canceled'));
	WHEN 10 THEN RETURN 'a_late_sign ' ||                      -- applies the parked end
		t.sub('evt_as' || i, 'customer.subscription.created', t.subo('sub_P' || (i - 1), 'active'));
	WHEN 11 THEN RETURN 'a_sign ' ||
		t.sub('evt_s' || i, 'customer.subscription.created', t.subo('sub_S' || i, 'active'));
	WHEN 12 THEN RETURN 'a_charge ' ||                         -- pays MI<i> under sub_S<i-1>
		t.sub('evt_c' || i, 'invoice.paid', t.invoice('in_' || i, 'sub_S' || (i - 1), 'MI' || i));
	WHEN 13 THEN RETURN 'a_end ' ||
		t.sub('evt_e' || i, 'customer.subscription.deleted', t.subo('sub_S' || (i - 2), 'canceled'));
	WHEN 14 THEN RETURN 'a_unsigned_end ' ||                   -- ended at once, never signed
		t.sub('evt_u' || i, 'customer.subscription.updated', t.subo('sub_I' || i, 'incomplete_expired'));
	WHEN 15 THEN RETURN 'a_long ' ||                           -- agreement_id_too_long
		t.sub('evt_l' || i, 'customer.subscription.created',
			t.subo('sub_' || pg_catalog.repeat('A', 248) || pg_catalog.lpad(i::text, 6, '0'), 'active'));
	WHEN 16 THEN RETURN 'a_wx ' || (SELECT outcome FROM t.wx('m_wxa', 'ent_sign_1'));
	ELSE RETURN 'a_ali ' || t.ali_agr('sign_1');
	END CASE;
END $$;

-- the orders of every call, made beforehand: t.set_order alters the orders
-- table, and a change of the bound table reloads the configuration (the
-- loop measures the calls, not a reload per call)
ALTER TABLE public.orders DISABLE TRIGGER orders_guard;
INSERT INTO public.orders
	SELECT p || i, 'pending', 8888
	  FROM pg_catalog.generate_series(0, :calls) i,
	       LATERAL (VALUES (CASE i % 18 WHEN 0 THEN 'M' WHEN 2 THEN 'MR' WHEN 3 THEN 'MF'
	                                    WHEN 12 THEN 'MI' END)) v(p)
	 WHERE p IS NOT NULL;
ALTER TABLE public.orders ENABLE TRIGGER orders_guard;

CREATE FUNCTION t.rss_kb() RETURNS bigint LANGUAGE sql AS $$
	SELECT substring(pg_read_file('/proc/self/status') FROM 'RssAnon:\s+(\d+) kB')::bigint
$$;
CREATE FUNCTION t.context_bytes() RETURNS bigint LANGUAGE sql AS
	$$ SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts $$;

-- a reload: a type changes (any TYPEOID invalidation marks the bound
-- configuration stale), then a rejected request loads the configuration
CREATE DOMAIN t.reload_d AS int;
CREATE FUNCTION t.reload_call(i int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE pg_catalog.format('ALTER DOMAIN t.reload_d SET DEFAULT %s', i);
	RETURN (SELECT outcome FROM pay.paynotify_handle('m_wx', '{}', '\x00ff'::bytea));
END $$;
SQL
echo "memory: $calls calls in one backend (warm-up $warmup)"
start=$(date +%s)
{
    echo "\\pset tuples_only on"
    echo "\\pset format unaligned"
    for ((i = 1; i <= calls; i++)); do
        echo "SELECT t.mem_call($i);"
        if [ "$i" -eq "$warmup" ]; then
            echo "SELECT 'mark ' || t.rss_kb() || ' ' || t.context_bytes();"
        fi
    done
    echo "SELECT 'mark ' || t.rss_kb() || ' ' || t.context_bytes();"
} | sql -q 2>&1 >"$dir/out" | grep -v 'paynotify: anomaly\|business step failed\|DETAIL\|hook refuses\|CONTEXT\|PL/pgSQL\|SQL statement' || true
elapsed=$(( $(date +%s) - start ))

grep -v '^mark' "$dir/out" | sort | uniq -c | sort -rn
# what the agreement notices left: a payment per charge under its
# agreement, an anomaly per over-long id
read -r charged too_long < <(sql -At -F ' ' -c "SELECT
	(SELECT count(*) FROM pay.payment_record WHERE channel = 'st' AND agreement_id LIKE 'sub_S%'),
	(SELECT count(*) FROM pay.paynotify_anomaly WHERE channel = 'st' AND kind = 'agreement_id_too_long')")
read -r _ rss1 ctx1 < <(grep '^mark' "$dir/out" | head -1)
read -r _ rss2 ctx2 < <(grep '^mark' "$dir/out" | tail -1)
growth=$((rss2 - rss1))
echo "RssAnon after warm-up ${rss1} kB, at the end ${rss2} kB: growth ${growth} kB over $((calls - warmup)) calls (${elapsed} s)"
echo "memory contexts after warm-up ${ctx1} B, at the end ${ctx2} B"

pass=0 fail=0
# check, check_cmd, summary: test/lib.sh
for o in processed duplicate ignored parked failed rejected malformed; do
    check_cmd "outcome $o seen" grep -qx "$o" "$dir/out"
done
check "every call answered" "$calls" "$(grep -cv '^mark' "$dir/out")"
# each agreement kind: its outcome every time (the gateways' fixed notices:
# processed once, then duplicates)
agr_check() {	# agr_check KIND OUTCOME-REGEX
    local n
    n=$(grep -c "^$1 " "$dir/out" || true)
    check_cmd "$1: $n calls, each $2" test "$n" -gt 0 -a "$n" -eq "$(grep -cE "^$1 ($2)\$" "$dir/out" || true)"
}
agr_check a_park parked
agr_check a_late_sign processed
agr_check a_sign processed
agr_check a_charge processed
agr_check a_end processed
agr_check a_unsigned_end ignored
agr_check a_long ignored
agr_check a_wx 'processed|duplicate'
agr_check a_ali 'processed|duplicate'
check "each charge paid under its agreement" "$(grep -c '^a_charge ' "$dir/out")" "$charged"
check "each over-long agreement id an anomaly" "$(grep -c '^a_long ' "$dir/out")" "$too_long"
check_cmd "private memory growth ${growth} kB <= ${limit_kb} kB" test "$growth" -le "$limit_kb"
check_cmd "memory contexts do not grow (${ctx1} -> ${ctx2})" test "$ctx2" -le $((ctx1 + 65536))

echo "memory: $reloads configuration loads in one backend (warm-up $reload_warmup)"
start=$(date +%s)
{
    echo "\\pset tuples_only on"
    echo "\\pset format unaligned"
    for ((i = 1; i <= reloads; i++)); do
        echo "SELECT t.reload_call($i);"
        if [ "$i" -eq "$reload_warmup" ]; then
            echo "SELECT 'mark ' || t.rss_kb() || ' ' || t.context_bytes();"
        fi
    done
    echo "SELECT 'mark ' || t.rss_kb() || ' ' || t.context_bytes();"
} | sql -q >"$dir/reload.out" 2>&1 || true
elapsed=$(( $(date +%s) - start ))
read -r _ rss1 ctx1 < <(grep '^mark' "$dir/reload.out" | head -1)
read -r _ rss2 ctx2 < <(grep '^mark' "$dir/reload.out" | tail -1)
growth=$((rss2 - rss1))
echo "RssAnon after warm-up ${rss1} kB, at the end ${rss2} kB: growth ${growth} kB over $((reloads - reload_warmup)) loads (${elapsed} s)"
echo "memory contexts after warm-up ${ctx1} B, at the end ${ctx2} B"
check "every load answered" "$reloads" "$(grep -cx 'malformed' "$dir/reload.out")"
check_cmd "private memory growth over loads ${growth} kB <= ${limit_kb} kB" test "$growth" -le "$limit_kb"
check_cmd "memory contexts do not grow over loads (${ctx1} -> ${ctx2})" test "$ctx2" -le $((ctx1 + 65536))
summary
