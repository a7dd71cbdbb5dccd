#!/usr/bin/env bash
# test/e2e/planted.sh: paynotify in a database whose schema a plain role
# may CREATE in (public, in a database upgraded from PostgreSQL 14 or
# older, or where the DBA granted it).
#
# The role "pl_attacker" plants there, before anything of paynotify exists,
# an exact-type shadow of every pg_catalog function, aggregate and operator
# that paynotify's scripts and C code name (test/e2e/planted/plant.sql: for
# every combination of common argument types where pg_catalog has no exact
# match of its own; each counts its calls in the sequence planted_calls,
# which no rollback undoes); and a shadow of each of paynotify's own
# functions for each input argument retyped to another common type
# (test/e2e/planted/own.sql, the signatures of every version read from a
# database of their own), which a call of paynotify's with an argument not
# of its exact type would take.  Two databases:
#   shop     CREATE EXTENSION paynotify (1.4) into public;
#   shop_up  CREATE EXTENSION paynotify VERSION '1.0' into public, then
#            ALTER EXTENSION UPDATE TO 1.1, 1.2, 1.3 and 1.4, one step at a time,
#            with the shadows there before each step.
# Checked:
#   (a) the catalog (test/e2e/planted/catalog.sql): after the install and
#       after each step, every function and operator the extension's objects
#       depend on is in pg_catalog or the extension's own; from 1.3 every
#       function also pins search_path;
#   (b) no shadow ever ran (nor did a call meet two at once: no "is not
#       unique" in the server's log): during the installs and updates, while a
#       superuser replays every signed test vector through paynotify_handle
#       and calls the superuser-only functions, while the operator's, the
#       shim's and the relay's login roles (public first in their
#       search_path) call every function of their capacity (the shim's
#       notices sign and end a WeChat partner contract and a Stripe
#       subscription), and while the application's role updates the orders
#       table under the guard;
#   (c) a table of the application's in public, readable by PUBLIC before
#       CREATE EXTENSION and before each update, is still readable by PUBLIC.
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/planted.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir planted)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; [ -z "${PLANTED_LOG:-}" ] || cp "$dir/server.log" "$PLANTED_LOG"; remove_tmp "$dir"' EXIT
pass=0
fail=0

pn_fixture_cluster "$dir" "$port"
# The test's own statements never meet a shadow: pg_catalog only.
su() { local db=$1; shift; PGOPTIONS="-c search_path=pg_catalog" pn_psql "$dir" "$port" -d "$db" "$@"; }
suq() { local db=$1; shift; su "$db" -Atc "$@"; }
# A login role's session, its search_path as a real one's: public first.
as() {
    local role=$1 db=$2; shift 2
    PGOPTIONS="-c search_path=public,pg_catalog" "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 \
        -h "$dir" -p "$port" -U "$role" -d "$db" "$@"
}
calls() { suq "$1" "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.planted_calls"; }
# check_calls DB WHAT: no shadow ran during WHAT
check_calls() { check "no planted object ran: $2 ($1)" 0 "$(calls "$1")"; }
check_catalog() {	# check_catalog DB WHAT [all]: (a)
    local v
    v=$(su "$1" -At -f test/e2e/planted/catalog.sql)
    [ "${3:-}" = all ] || v=$(grep -v '^search_path: ' <<<"$v" || true)
    check "catalog: nothing of paynotify resolves outside pg_catalog and itself: $2 ($1)" "" "$v"
}
check_public_grant() {	# check_public_grant DB TABLE WHAT: (c)
    check "PUBLIC still reads $2: $3 ($1)" t \
        "$(suq "$1" "SELECT has_table_privilege('public', 'public.$2', 'SELECT')")"
}

# the names of pg_catalog objects paynotify's scripts and C code name
names="{$(grep -ohE '\b[a-z_][a-z0-9_]*[[:space:]]*\(' paynotify--*.sql src/*.c src/parse/*.c |
          sed -E 's/[[:space:]]*\($//' | grep -v '^paynotify' | sort -u | paste -sd, -)}"
ops='{=,<>,<,>,<=,>=,+,-,*,/,%,||,~,~*,!~,~~,!~~,<@,@>,&&,?,?|,?&,->,->>,#>,#>>,<<,>>,^,|/,&,|,#,@@}'

su postgres -q <<'SQL'
CREATE ROLE pl_attacker LOGIN;
CREATE ROLE pl_ops LOGIN;
CREATE ROLE pl_shim LOGIN;
CREATE ROLE pl_relay LOGIN;
CREATE ROLE pl_app LOGIN;
CREATE DATABASE shop;
CREATE DATABASE shop_up;
SQL
for db in shop shop_up; do
    su "$db" -q <<'SQL'
GRANT CREATE ON SCHEMA public TO pl_attacker;
-- the application's own lookup table, readable by everyone
CREATE TABLE public.app_lookup (k text PRIMARY KEY);
GRANT SELECT ON public.app_lookup TO PUBLIC;
SQL
    as pl_attacker "$db" -v schema=public -v names="$names" -v ops="$ops" \
        -f test/e2e/planted/plant.sql 2>&1 | grep -o 'planted [0-9]* shadows.*' || true
done
check "the shadows are planted (shop)" t "$(suq shop "SELECT count(*) > 1000 FROM pg_proc WHERE pronamespace = 'public'::regnamespace")"

# and a shadow of each of paynotify's own functions for each input argument
# retyped to another common type (test/e2e/planted/own.sql), of every
# version an update passes through, read from a database of their own: a
# call of paynotify's own function with an argument not of its exact type
# (an unknown literal or NULL where it takes regclass, a name where it takes
# text) would take the shadow
su postgres -q -c "CREATE DATABASE plref"
su plref -q -c "CREATE EXTENSION paynotify SCHEMA public VERSION '1.0'" -f test/e2e/planted/own.sql >/dev/null
for v in 1.1 1.2 1.3; do
    su plref -q -c "ALTER EXTENSION paynotify UPDATE TO '$v'" -f test/e2e/planted/own.sql >/dev/null 2>&1
done
su plref -q -c "ALTER EXTENSION paynotify UPDATE TO '1.4'" >/dev/null 2>&1
su plref -At -c "SET planted.warn = '${PLANTED_WARN:-0}'" -v emit=1 -f test/e2e/planted/own.sql >"$dir/own_shadows.sql"
for db in shop shop_up; do
    PGOPTIONS="-c search_path=pg_catalog -c client_min_messages=warning" "$PN_PGBIN/psql" -X -q \
        -h "$dir" -p "$port" -U pl_attacker -d "$db" -f "$dir/own_shadows.sql" >/dev/null 2>"$dir/own_$db.err" || true
done
check "shadows of paynotify's own functions planted (shop: the most that can be before it exists)" t \
    "$(suq shop "SELECT count(*) > 2000 FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND prosrc LIKE '%planted shadow of paynotify%'")"

# ---- shop: a fresh install ----------------------------------------------------
# the fixture, with the extension in public (test/fixture.sql says pay)
sed -e '/^CREATE SCHEMA pay;$/d' -e 's/^CREATE EXTENSION paynotify SCHEMA pay;/CREATE EXTENSION paynotify SCHEMA public;/' \
    -e 's/\bpay\./public./g' test/fixture.sql >"$dir/fixture_public.sql"
su shop -q -c "SET paynotify_test.vdir = '$dir/vectors/'" -f "$dir/fixture_public.sql" >/dev/null
# the fixture's helpers run with pg_catalog only, as the test's statements do
su shop -q -c "DO \$\$ DECLARE f regprocedure; BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 't'::regnamespace
             AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, t', f);
    END LOOP; END \$\$"
check_calls shop "CREATE EXTENSION paynotify"
# the shadows whose results are paynotify's own types, now that they exist
PGOPTIONS="-c search_path=pg_catalog -c client_min_messages=warning" "$PN_PGBIN/psql" -X -q \
    -h "$dir" -p "$port" -U pl_attacker -d shop -f "$dir/own_shadows.sql" >/dev/null 2>&1 || true
check_catalog shop "fresh install" all
check_public_grant shop app_lookup "after CREATE EXTENSION"
check "installed at 1.4" 1.4 "$(suq shop "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"

# a superuser replays every signed test vector (all three gateways:
# payments, refunds, parked refunds, anomalies, rejections), each twice
check "every vector replayed" 50 \
    "$(suq shop "SELECT count(*) FROM t.manifest, t.replay(name, 'r_')")"
check_calls shop "a superuser replaying every vector through paynotify_handle"

# the superuser-only functions
su shop -q >/dev/null 2>&1 <<'SQL' || true
SELECT public.paynotify_grant('pl_ops'::regrole, 'admin'::text);
SELECT public.paynotify_grant('pl_shim'::regrole, 'handler'::text);
SELECT public.paynotify_grant('pl_relay'::regrole, 'relay'::text);
SELECT public.paynotify_grant('pl_app'::regrole, 'relay'::text);
SELECT public.paynotify_revoke('pl_app'::regrole, 'relay'::text);
SELECT * FROM public.paynotify_distribute();	-- no Citus here: refused
SQL
check "roles granted" "pl_ops:admin pl_relay:relay pl_shim:handler" \
    "$(suq shop "SELECT string_agg(role::text || ':' || capacity, ' ' ORDER BY role::text) FROM public.paynotify_role")"
check_calls shop "paynotify_grant, paynotify_revoke, paynotify_distribute as a superuser"

# the operator: every function of the admin capacity
secret=$(tr -d '\n' <"$dir/vectors/keys/stripe_secret_1.txt")
pub=$(cat "$dir/vectors/keys/alipay_1.pub.pem")
su shop -q -c "GRANT SELECT, UPDATE ON public.orders TO pl_ops; CREATE SCHEMA app AUTHORIZATION pl_ops;"
su shop -q -c "SELECT t.set_order('PL-1', 'pending', 100), t.set_order('PL-2', 'pending', 100)" >/dev/null
cat >"$dir/ops.sql" <<'SQL'
SELECT public.paynotify_add_channel('pl_st'::text, 'stripe'::text, '{}'::jsonb);
SELECT public.paynotify_alter_channel('pl_st'::text, '{"tolerance_s": 300}'::jsonb);
SELECT public.paynotify_add_key('pl_st'::text, 'k1'::text, :'secret'::text);
SELECT public.paynotify_add_key('pl_st'::text, 'k2'::text, :'secret'::text, now() - interval '1 day', now() + interval '1 day');
SELECT public.paynotify_retire_key('pl_st'::text, 'k2'::text);
SELECT public.paynotify_bind_orders('public.orders'::regclass, 'order_no'::name, 'status'::name, 'amount_fen'::name);
CREATE FUNCTION app.on_paid(ev jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT public.paynotify_on('paid'::text, 'app.on_paid(jsonb)'::regprocedure);
SELECT public.paynotify_rsa_verify(:'pub'::text, '\x00'::bytea, 'AAAA'::text) AS verified;
SELECT public.paynotify_add_endpoint('http://127.0.0.1:9/erp'::text, 'whsec_' || repeat('QUJD', 8)) AS ep \gset
SELECT public.paynotify_alter_endpoint(:ep::bigint, events => '{paid,refunded}'::text[], max_in_flight => 4,
	retry_base => '2 seconds'::interval, retry_max => '1 minute'::interval);
SELECT count(*) >= 0 FROM public.paynotify_stats;
SELECT count(*) >= 0 FROM public.payment_notify_log;
SELECT count(*) >= 0 FROM public.paynotify_binding;
SELECT count(*) >= 0 FROM public.paynotify_trace('r_stripe_payment_intent_succeeded_valid'::text, 'evt_3PZs1aL2bkqV0x9A'::text);
SELECT count(*) >= 0 FROM public.paynotify_trace_order('PN20260101000001'::text);
SELECT count(*) >= 0 FROM public.paynotify_retry_failed('0 seconds'::interval, 10, true);
SELECT count(*) >= 0 FROM public.paynotify_retry_failed('0 seconds'::interval, 10);
SELECT public.paynotify_resolve_anomaly(a.id, 'checked'::text) FROM public.paynotify_anomaly a LIMIT 1;
SELECT count(*) >= 0 FROM public.paynotify_outbox_claim(0);
SELECT public.paynotify_transit('PL-1'::text, 'pending'::text, 'cancelled'::text);
SELECT public.paynotify_retention_floor('stripe'::text) IS NOT NULL;
SELECT count(*) >= 0 FROM public.paynotify_purge('30 days'::interval);
SELECT public.paynotify_redeliver(:ep::bigint) >= 0;
SELECT public.paynotify_purge_deliveries('7 days'::interval) >= 0;
SELECT public.paynotify_drop_endpoint(:ep::bigint);
SELECT public.paynotify_add_endpoint('http://127.0.0.1:9/erp'::text, 'whsec_' || repeat('QUJD', 8)) IS NOT NULL;
SELECT public.paynotify_alter_channel('pl_st'::text, '{"secret_key": "rk_test_TESTONLY0000000000000000"}'::jsonb);
SELECT public.paynotify_bill_plan('2026-03-14'::date, 'pl_st'::text) = 1;
SELECT public.paynotify_bill_plan() >= 0;
SELECT count(*) >= 0 FROM public.paynotify_bill_fetch;
SQL
check_rc "the operator calls every function of the admin capacity" 0 \
    as pl_ops shop -v secret="$secret" -v pub="$pub" -f "$dir/ops.sql"
check_calls shop "the operator calling every function of the admin capacity"

# the shim: paynotify_handle, both forms, one vector of each gateway, each
# at its own time (paynotify.now, set for the role by a superuser)
shim_deliver() {	# shim_deliver CASE CHANNEL: the outcome
    local c=$1 ch=$2 now headers hex
    now=$(python3 -c "import json,sys; m={x['case']: x for x in json.load(open('$dir/vectors/manifest.json'))}; print(m['$c']['now_unix'])")
    headers=$(python3 -c "import json; m={x['case']: x for x in json.load(open('$dir/vectors/manifest.json'))}; print(json.dumps({h[0].lower(): h[1] for h in m['$c']['headers']}))")
    body=$(python3 -c "import json; m={x['case']: x for x in json.load(open('$dir/vectors/manifest.json'))}; print(m['$c']['files']['body'])")
    hex=$(od -An -v -tx1 "$dir/vectors/$body" | tr -d ' \n')
    su shop -q -c "ALTER ROLE pl_shim SET paynotify.now = $now"
    as pl_shim shop -Atc "SELECT outcome FROM public.paynotify_handle('$ch', '$headers'::jsonb, '\\x$hex'::bytea)" 2>&1
}
su shop -q -c "SELECT t.configure(c, 'sh_' || c), t.prepare_order(c, 'sh_' || c)
               FROM unnest(ARRAY['wx_transaction_success_valid', 'ali_trade_success_valid',
                                 'stripe_payment_intent_succeeded_valid']) c" >/dev/null
got=""
for c in wx_transaction_success_valid ali_trade_success_valid stripe_payment_intent_succeeded_valid; do
    got="$got $(shim_deliver "$c" "sh_$c") $(shim_deliver "$c" "sh_$c")"
done
check "the shim's deliveries (each twice)" " processed duplicate processed duplicate processed duplicate" "$got"
check "the shim's text form: an empty body refused" malformed \
    "$(as pl_shim shop -Atc "SELECT outcome FROM public.paynotify_handle('sh_wx_transaction_success_valid', '{}'::jsonb, '{}'::text)" 2>&1)"
check_calls shop "the shim calling paynotify_handle"

# agreements, as the shim: a WeChat partner-mode contract (ENTRUST.SIGN, then
# ENTRUST.TERMINATE) and a Stripe subscription (created, then deleted), the
# gateways' documented samples (pn_sample), each signed, repeated, ended.  A
# sample's end repeats its sign's notification id: it comes on a channel of
# its own, where the agreement its sign made was carried over (pn_sample carry)
sample_as() {	# sample_as ROLE DB CHANNEL CASE: the outcome
    su "$2" -q -c "ALTER ROLE $1 SET paynotify.now = $(pn_sample now public "$3" "$4")"
    as "$1" "$2" -Atc "$(pn_sample handle public "$3" "$4")" 2>&1 || true
}
for ch in ag_wx ag_wx_end; do
    su shop -q -c "$(pn_sample channel public $ch doc_wx_entrust_sign)" >/dev/null
done
for ch in ag_st ag_st_end; do
    su shop -q -c "$(pn_sample channel public $ch doc_stripe_customer_subscription_created)" >/dev/null
done
got="$(sample_as pl_shim shop ag_wx doc_wx_entrust_sign) $(sample_as pl_shim shop ag_wx doc_wx_entrust_sign)"
got="$got $(sample_as pl_shim shop ag_st doc_stripe_customer_subscription_created)"
got="$got $(sample_as pl_shim shop ag_st doc_stripe_customer_subscription_created)"
su shop -q -c "$(pn_sample carry public ag_wx_end ag_wx)" -c "$(pn_sample carry public ag_st_end ag_st)"
got="$got $(sample_as pl_shim shop ag_wx_end doc_wx_entrust_terminate)"
got="$got $(sample_as pl_shim shop ag_st_end doc_stripe_customer_subscription_deleted)"
check "the shim's agreement notices: sign, again; end (WeChat partner, Stripe)" \
    "processed duplicate processed duplicate processed processed" "$got"
check "the agreements signed, then ended, each with its event" \
    "ag_st:sub_1Pgc6rB7WZ01zgkWNy0Cn5nw:SD-SUB-2000:signed:agreement_signed ag_st_end:sub_1Pgc6rB7WZ01zgkWNy0Cn5nw:SD-SUB-2000:ended:agreement_ended ag_wx:123124412412423431:wxwtdk20200910100000:signed:agreement_signed ag_wx_end:123124412412423431:wxwtdk20200910100000:ended:agreement_ended" \
    "$(suq shop "SELECT string_agg(concat_ws(':', a.channel, a.agreement_id, a.merchant_ref, a.state,
                    (SELECT string_agg(o.event, ',' ORDER BY o.id) FROM public.paynotify_outbox o
                     WHERE o.channel = a.channel AND o.detail->>'agreement_id' = a.agreement_id)), ' ' ORDER BY a.channel)
             FROM public.paynotify_agreement a WHERE a.channel LIKE 'ag\_%'")"
check_calls shop "the shim signing and ending agreements"
check "the operator registers an expectation (1.4)" "PL-EXP|300" \
    "$(as pl_ops shop -Atc "SET search_path = pg_catalog; SELECT order_no, extract(epoch FROM next_query_at OPERATOR(pg_catalog.-) expected_at)::int FROM public.paynotify_expect('sh_wx_transaction_success_valid', 'PL-EXP', now() OPERATOR(pg_catalog.+) interval '2 hours')" 2>&1)"
check_calls shop "the operator calling paynotify_expect"

# the relay: fan out, claim, report
check_rc "the relay fans out, claims and reports, and fetches a bill" 0 as pl_relay shop <<'SQL'
SELECT public.paynotify_relay_fanout(1000) >= 0;
BEGIN;
CREATE TEMP TABLE claimed AS SELECT * FROM public.paynotify_relay_claim(10);
SELECT public.paynotify_relay_report(ARRAY(SELECT delivery_id FROM claimed),
	ARRAY(SELECT 500 FROM claimed), ARRAY(SELECT 'HTTP 500'::text FROM claimed)) >= 0;
COMMIT;
SELECT count(*) >= 0 FROM public.paynotify_bill_due(10);
SELECT method FROM public.paynotify_bill_request('pl_st'::text, '2026-03-14'::date);
SELECT outcome FROM public.paynotify_bill_apply('pl_st'::text, '2026-03-14'::date, 200, '{}'::jsonb, '\x7b7d'::bytea);
SQL
check_calls shop "the relay calling fanout, claim and report, and fetching a bill"

# the application's role: its own updates pass the guard, illegal ones not
su shop -q -c "GRANT UPDATE, SELECT ON public.orders TO pl_app"
# (its statements name pg_catalog's operators: an unqualified one of its own
# would meet the shadows as any statement of that role does)
out=$(as pl_app shop -Atc "UPDATE public.orders SET status = 'cancelled' WHERE order_no OPERATOR(pg_catalog.=) 'PL-2'" \
         -c "UPDATE public.orders SET status = 'refunded' WHERE order_no OPERATOR(pg_catalog.=) 'PL-2'" 2>&1 || true)
check "the guard refuses the application's illegal move" 1 "$(grep -c 'illegal order status transition' <<<"$out")"
check_calls shop "the application's updates under the guard"
check_catalog shop "after all the calls" all

# ---- shop_up: 1.0, then each update with the shadows there -------------------
su shop_up -q -c "CREATE EXTENSION paynotify SCHEMA public VERSION '1.0'"
check_calls shop_up "CREATE EXTENSION paynotify VERSION '1.0'"
check_catalog shop_up "1.0"
check_public_grant shop_up app_lookup "after CREATE EXTENSION VERSION '1.0'"
for v in 1.1 1.2 1.3 1.4; do
    # the shadows whose results are paynotify's own types, as they come to be
    PGOPTIONS="-c search_path=pg_catalog -c client_min_messages=warning" "$PN_PGBIN/psql" -X -q \
        -h "$dir" -p "$port" -U pl_attacker -d shop_up -f "$dir/own_shadows.sql" >/dev/null 2>&1 || true
    t=app_lookup_${v/./_}
    su shop_up -q -c "CREATE TABLE public.$t (k text); GRANT SELECT ON public.$t TO PUBLIC"
    su shop_up -q -c "ALTER EXTENSION paynotify UPDATE TO '$v'" 2>&1 | grep -v '^WARNING\|^HINT' || true
    check "updated to $v" "$v" "$(suq shop_up "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"
    check_calls shop_up "ALTER EXTENSION paynotify UPDATE TO '$v'"
    [ "$v" = 1.3 ] || [ "$v" = 1.4 ] && check_catalog shop_up "$v" all || check_catalog shop_up "$v"
    check_public_grant shop_up "$t" "after the update to $v"
done
check "shadows of paynotify's own functions planted in shop_up too (before the install and each update)" t \
    "$(suq shop_up "SELECT count(*) > 2000 FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND prosrc LIKE '%planted shadow of paynotify%'")"
check_public_grant shop_up app_lookup "after every update"
check "no call of paynotify's met two shadows at once (no 'is not unique' in the server's log)" 0 \
    "$(grep -c 'is not unique' "$dir/server.log" || true)"
# the upgraded install at work: a vector replayed by a superuser, the
# operator's view and an endpoint
su shop_up -q -c "SELECT public.paynotify_grant('pl_ops'::regrole, 'admin'::text)"
as pl_ops shop_up -q >/dev/null 2>&1 <<'SQL' || true
SELECT public.paynotify_add_channel('up_st'::text, 'stripe'::text, '{}'::jsonb);
SELECT count(*) FROM public.paynotify_stats;
SELECT public.paynotify_add_endpoint('http://127.0.0.1:9/erp'::text, 'whsec_' || repeat('QUJD', 8), events => '{paid}'::text[]);
SQL
check "the operator's endpoint on the upgraded install" 1 "$(suq shop_up "SELECT count(*) FROM public.paynotify_endpoint")"
check_calls shop_up "the operator on the upgraded install"

finish
