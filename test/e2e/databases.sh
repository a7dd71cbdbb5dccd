#!/usr/bin/env bash
# test/e2e/databases.sh: two databases of one cluster, each with paynotify.
# What a login role is given to operate, serve or relay paynotify in one
# database (paynotify_grant) gives it nothing in another, although roles
# are the cluster's and PUBLIC may CONNECT to both:
#   - the relay role of database a cannot claim b's deliveries (whose rows
#     carry b's endpoint secrets) nor fan out or report there;
#   - the operator of a cannot re-point b's endpoint, register a hook, add a
#     channel or read b's notifications;
#   - the shim role of a cannot call b's paynotify_handle;
# and each still can in a.  Agreements (a WeChat partner-mode contract and a
# Stripe subscription, signed and ended) are each database's own, each
# processed by its own shim role.  The way from 1.2, where every privilege went to
# the cluster-wide group roles: a database updated to 1.3 keeps each member
# of a group role working as a grant of its own (and says so), the group
# roles hold nothing there, paynotify_revoke takes a role's capacity away;
# a database still at 1.2 is untouched; a database that creates the
# extension fresh gives the group roles' members nothing.
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/databases.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir databases)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; remove_tmp "$dir"' EXIT
pass=0
fail=0

pn_cluster_start "$dir" "$port" "fsync = off"
su() { local db=$1; shift; pn_psql "$dir" "$port" -d "$db" "$@"; }
# as ROLE DB SQL: the SQLSTATE of the statement's error, or "ok"
as() {
    local out
    if out=$(PGOPTIONS="-c client_min_messages=error" "$PN_PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 \
                 -v VERBOSITY=sqlstate -h "$dir" -p "$port" -U "$1" -d "$2" -c "$3" 2>&1); then
        echo ok
    else
        sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\).*/\1/p' <<<"$out" | head -1
    fi
}

secret="whsec_$(printf 'AAAA%.0s' $(seq 1 8))"
su postgres -q <<SQL
CREATE ROLE a_shim LOGIN;
CREATE ROLE a_ops LOGIN;
CREATE ROLE a_relay LOGIN;
CREATE DATABASE a;
CREATE DATABASE b;
SQL
for db in a b; do
    su "$db" -q >/dev/null <<SQL
CREATE SCHEMA payments;
CREATE EXTENSION paynotify SCHEMA payments;
SELECT payments.paynotify_add_channel('st', 'stripe', '{}');
SELECT payments.paynotify_add_key('st', 'k1', 'whsec_test_$db');
SELECT payments.paynotify_add_endpoint('http://127.0.0.1:9/$db', '$secret');
INSERT INTO payments.paynotify_outbox (event, channel, order_no, notify_id, amount)
	VALUES ('paid', 'st', 'O-$db', 'n-$db', 1);
CREATE TABLE public.orders (order_no text PRIMARY KEY, status text NOT NULL, amount bigint);
CREATE FUNCTION public.on_paid(ev jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SQL
done
su a -q >/dev/null <<'SQL'
SELECT payments.paynotify_grant('a_shim', 'handler');
SELECT payments.paynotify_grant('a_ops', 'admin');
SELECT payments.paynotify_grant('a_relay', 'relay');
ALTER TABLE public.orders OWNER TO a_ops;
SQL
su b -q -c "ALTER TABLE public.orders OWNER TO a_ops; ALTER FUNCTION public.on_paid(jsonb) OWNER TO a_ops" >/dev/null
su a -q -c "ALTER FUNCTION public.on_paid(jsonb) OWNER TO a_ops" >/dev/null

relay_sql="SELECT count(*) FROM payments.paynotify_relay_fanout(10), payments.paynotify_relay_claim(10)"
for db in a b; do
    want=ok; [ $db = b ] && want=42501
    check "the relay role of a: fan out and claim in $db" $want "$(as a_relay $db "$relay_sql")"
    check "the relay role of a: report in $db" $want \
        "$(as a_relay $db "SELECT payments.paynotify_relay_report('{1}', '{200}', '{NULL}')")"
    check "the operator of a: re-point the endpoint in $db" $want \
        "$(as a_ops $db "SELECT payments.paynotify_alter_endpoint(1, url => 'http://127.0.0.1:9/evil')")"
    check "the operator of a: register a hook in $db" $want \
        "$(as a_ops $db "SELECT payments.paynotify_on('paid', 'public.on_paid(jsonb)')")"
    check "the operator of a: add a channel in $db" $want \
        "$(as a_ops $db "SELECT payments.paynotify_add_channel('x', 'stripe', '{}')")"
    check "the operator of a: bind the orders table in $db" $want \
        "$(as a_ops $db "SELECT payments.paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount')")"
    check "the operator of a: read the notifications of $db" $want \
        "$(as a_ops $db "SELECT count(*) FROM payments.payment_notify_log")"
    check "the operator of a: read the endpoints of $db" $want \
        "$(as a_ops $db "SELECT url FROM payments.paynotify_endpoint")"
    check "the shim role of a: paynotify_handle in $db" $want \
        "$(as a_shim $db "SELECT outcome FROM payments.paynotify_handle('st', '{}', '\\x7b7d'::bytea)")"
done
check "b's endpoint is where b put it" "http://127.0.0.1:9/b" "$(su b -Atc "SELECT url FROM payments.paynotify_endpoint")"
check "b's deliveries unclaimed, unreported" "1|0" \
    "$(su b -Atc "SELECT payments.paynotify_relay_fanout(10), (SELECT count(*) FROM payments.paynotify_delivery WHERE attempts > 0)")"
check "no hook in b" 0 "$(su b -Atc "SELECT count(*) FROM payments.paynotify_hook")"
check "nobody holds a capacity in b" 0 "$(su b -Atc "SELECT count(*) FROM payments.paynotify_role")"

# agreements in both databases, each by its own shim role: a WeChat
# partner-mode contract (ENTRUST.SIGN, ENTRUST.TERMINATE) and a Stripe
# subscription (created, deleted), the documented samples (pn_sample); the
# same notifications are each database's own (processed in both), and a
# sample's end, which repeats its sign's id, comes on a channel of its own
# (pn_sample carry)
su postgres -q -c "CREATE ROLE b_shim LOGIN"
su b -q -c "SELECT payments.paynotify_grant('b_shim', 'handler')" >/dev/null
sample_in() {	# sample_in ROLE DB CHANNEL CASE: the outcome
    su "$2" -q -c "ALTER ROLE $1 SET paynotify.now = $(pn_sample now payments "$3" "$4")"
    "$PN_PGBIN/psql" -X -q -At -h "$dir" -p "$port" -U "$1" -d "$2" -c "$(pn_sample handle payments "$3" "$4")" 2>&1 || true
}
for db in a b; do
    # (two channels of one account: a test's, never a real installation's)
    su $db -q -c "ALTER DATABASE $db SET paynotify.allow_shared_accounts = on"
    for ch in ag_wx ag_wx_end; do su $db -q -c "$(pn_sample channel payments $ch doc_wx_entrust_sign)" >/dev/null; done
    for ch in ag_st ag_st_end; do su $db -q -c "$(pn_sample channel payments $ch doc_stripe_customer_subscription_created)" >/dev/null; done
done
for db in a b; do
    shim=${db}_shim
    got="$(sample_in $shim $db ag_wx doc_wx_entrust_sign) $(sample_in $shim $db ag_st doc_stripe_customer_subscription_created)"
    su $db -q -c "$(pn_sample carry payments ag_wx_end ag_wx)" -c "$(pn_sample carry payments ag_st_end ag_st)" >/dev/null
    got="$got $(sample_in $shim $db ag_wx_end doc_wx_entrust_terminate) $(sample_in $shim $db ag_st_end doc_stripe_customer_subscription_deleted)"
    got="$got $(sample_in $shim $db ag_wx doc_wx_entrust_sign)"
    check "agreements in $db, by its shim: signed, ended, the sign again a duplicate" \
        "processed processed processed processed duplicate" "$got"
    check "agreements in $db: signed on the sign's channels, ended on the end's, each with its event" \
        "ag_st:sub_1Pgc6rB7WZ01zgkWNy0Cn5nw:signed:agreement_signed ag_st_end:sub_1Pgc6rB7WZ01zgkWNy0Cn5nw:ended:agreement_ended ag_wx:123124412412423431:signed:agreement_signed ag_wx_end:123124412412423431:ended:agreement_ended" \
        "$(su $db -Atc "SELECT string_agg(concat_ws(':', a.channel, a.agreement_id, a.state,
                            (SELECT string_agg(o.event, ',' ORDER BY o.id) FROM payments.paynotify_outbox o
                             WHERE o.channel = a.channel AND o.detail->>'agreement_id' = a.agreement_id)), ' ' ORDER BY a.channel)
                        FROM payments.paynotify_agreement a WHERE a.channel LIKE 'ag\_%'")"
done
check "the shim role of b: the agreement sample in a" 42501 "$(as b_shim a "$(pn_sample handle payments ag_wx doc_wx_entrust_sign)")"

# ---- from 1.2: the group roles -------------------------------------------------
su postgres -q <<'SQL'
CREATE DATABASE c;
CREATE DATABASE d;
CREATE ROLE old_shim LOGIN;
CREATE ROLE old_relay LOGIN;
SQL
for db in c d; do
    su "$db" -q -c "CREATE EXTENSION paynotify VERSION '1.2'"
done
su postgres -q -c "GRANT paynotify_handler TO old_shim; GRANT paynotify_relay TO old_relay"
handle_sql="SELECT outcome FROM public.paynotify_handle('none', '{}', '\\x7b7d'::bytea)"
check "at 1.2, the group role's member calls paynotify_handle in c and d" "ok ok" \
    "$(as old_shim c "$handle_sql") $(as old_shim d "$handle_sql")"
out=$(su c -c "ALTER EXTENSION paynotify UPDATE" 2>&1)
check "the update to 1.3 names the members it keeps" 1 \
    "$(grep -c 'WARNING: .*their members keep their capacity here as grants of their own: old_relay (relay), old_shim (handler)' <<<"$out")"
check "c at 1.3 keeps them, as grants of c" "old_relay:relay old_shim:handler" \
    "$(su c -Atc "SELECT string_agg(role::text || ':' || capacity, ' ' ORDER BY 1) FROM paynotify_role")"
check "... and they work there" "ok ok" \
    "$(as old_shim c "$handle_sql") $(as old_relay c "SELECT paynotify_relay_fanout(1)")"
check "the group roles hold nothing in c" "f f f" \
    "$(su c -Atc "SELECT has_function_privilege('paynotify_handler', 'paynotify_handle(text,jsonb,bytea)', 'EXECUTE'),
                         has_function_privilege('paynotify_relay', 'paynotify_relay_claim(integer)', 'EXECUTE'),
                         has_table_privilege('paynotify_admin', 'payment_notify_log', 'SELECT')" | tr '|' ' ')"
su c -q -c "SELECT paynotify_revoke('old_shim', 'handler')" >/dev/null
check "paynotify_revoke in c: old_shim can no longer call it there" 42501 "$(as old_shim c "$handle_sql")"
check "d, still at 1.2, is untouched" ok "$(as old_shim d "$handle_sql")"
su postgres -q -c "CREATE DATABASE e"
su e -q -c "CREATE EXTENSION paynotify"
check "a fresh install gives the group roles' members nothing" "42501 0" \
    "$(as old_shim e "$handle_sql") $(su e -Atc "SELECT count(*) FROM paynotify_role")"
check "paynotify_grant refuses the group roles" 22023 \
    "$(as postgres e "SELECT paynotify_grant('paynotify_handler', 'handler')")"

# A schema whose name needs quoting, and a marker of a fresh install set
# from outside (it must not make an update skip keeping the members)
su postgres -q -c "CREATE DATABASE f"
su f -q -c 'CREATE SCHEMA "Pay Ments"' -c "CREATE EXTENSION paynotify SCHEMA \"Pay Ments\" VERSION '1.2'"
su postgres -q -c "GRANT paynotify_handler TO old_shim" 2>/dev/null
out=$(PGOPTIONS="-c paynotify_install.fresh=on" su f -c "ALTER EXTENSION paynotify UPDATE" 2>&1)
check "an extension in schema \"Pay Ments\" updates to 1.4, with paynotify_install.fresh set outside" \
    "1.4|1" "$(su f -Atc "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")|$(grep -c 'old_shim (handler)' <<<"$out")"
check "... and the member keeps its capacity there, by a grant of f" ok \
    "$(as old_shim f "SELECT outcome FROM \"Pay Ments\".paynotify_handle('none', '{}', '\\x7b7d'::bytea)")"
su f -q -c "CREATE ROLE f_relay LOGIN" -c "SELECT \"Pay Ments\".paynotify_grant('f_relay', 'relay')" >/dev/null
check "paynotify_grant in that schema gives USAGE on it" ok \
    "$(as f_relay f "SELECT \"Pay Ments\".paynotify_relay_fanout(1)")"

finish
