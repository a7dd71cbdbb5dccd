#!/usr/bin/env bash
# Model-based concurrency test of the ledger (see test/model/model_test.py):
# random payments, double payments, WeChat combine payments (合单支付: one
# notice pays 2-3 orders; its sub-orders of another merchant or unpaid are
# not applied), partial and full refunds, failed refunds completed later,
# Stripe refunds that fail after they succeeded (refund.failed), Stripe
# disputes won or lost (charge.dispute.created / .closed, 1 or 2 per order,
# only on orders of one trade without refunds, each sent once its order's
# payment was acknowledged), closes and
# refunds before payments over WeChat Pay, Alipay and Stripe, signed as each
# gateway signs, delivered from 8 backends at once in random order with
# duplicates and redeliveries; afterwards every order must equal the
# reference model (where the rules let the arrival order decide an order's
# status, anomalies or events, one of exactly the outcomes they allow) and
# the ledger's invariants must hold.
#
#   test/model/run.sh [--full] [--seed N] [--orders N] [--workers N] [--refunded-to-paid]
#                     [--agreements]
#                     [--admin-dsn DSN --dsn DSN [--dsn DSN...] [--after-setup SQL]]
#
# 2,000 orders by default (the suite), 20,000 with --full.  The seed is
# fixed unless given, and printed: a failure is reproduced with --seed.
# --refunded-to-paid adds refunded -> paid to the state machine: a refund
# that fails after it refunded the order then takes the order back to paid
# (by default it stays refunded, with an anomaly).
# --agreements runs, instead, agreements (subscriptions) over the three
# gateways, ORDERS/4 of them: signed, charged, a Stripe charge failed, ended,
# every notice delivered in random order with duplicates; each charge must
# pay its order once, a failed one leave it pending with payment_failed,
# each end give one agreement_ended, a signing acknowledged before its end
# was sent one agreement_signed.  It needs paynotify to apply agreement
# notices and is not part of the default run.
# By default it starts its own throwaway cluster.  With --admin-dsn it uses
# an existing, empty database instead (the superuser's DSN; the extension,
# installed on that server by the caller, is created there in schema pay,
# with the login role model_shim), and the backends connect with the --dsn
# given, spread over them in turn (e.g. a Citus coordinator and its
# workers, each DSN as model_shim); --after-setup
# runs as the superuser once the orders are bound (on Citus: SELECT
# pay.paynotify_distribute() and the distribution of the test's own hook
# table).  The caller then owns the servers' logs.
# Exit status non-zero on any discrepancy.  Uses Debian's python3 with
# python3-psycopg2, python3-cryptography and python3-hypothesis.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
. test/lib.sh

py=/usr/bin/python3
args=()
orders=2000
admin_dsn=
dsns=()
while [ $# -gt 0 ]; do
    case $1 in
        --full) orders=20000 ;;
        --refunded-to-paid|--agreements) args+=("$1") ;;
        --orders) orders=$2; shift ;;
        --seed|--workers|--max-attempts|--self-check|--show|--show-class|--ledger-out|--after-setup)
            args+=("$1" "$2"); shift ;;
        --admin-dsn) admin_dsn=$2; shift ;;
        --dsn) dsns+=(--dsn "$2"); shift ;;
        *) echo "usage: $0 [--full] [--seed N] [--orders N] [--workers N] [--refunded-to-paid] [--agreements] [--admin-dsn DSN --dsn DSN... [--after-setup SQL]]" >&2
           exit 2 ;;
    esac
    shift
done
if [ -n "$admin_dsn" ] && [ ${#dsns[@]} = 0 ] || { [ -z "$admin_dsn" ] && [ ${#dsns[@]} != 0 ]; }; then
    echo "model: --admin-dsn and --dsn go together" >&2
    exit 2
fi
"$py" -c 'import psycopg2, cryptography, hypothesis' \
    || { echo "model: needs python3-psycopg2, python3-cryptography, python3-hypothesis (scripts/deps.sh)"; exit 1; }

if [ -z "$admin_dsn" ]; then
    # paynotify for the cluster started here, which runs PN_PGBIN's
    # PostgreSQL.  (With --admin-dsn nothing is installed: the caller's
    # server has it already, and a make install there, under the caller's
    # running nodes, removes each file before it writes it again.)
    make -s PG_CONFIG="$PN_PGBIN/pg_config" >/dev/null &&
        make -s PG_CONFIG="$PN_PGBIN/pg_config" install >/dev/null || exit 1
    dir=$(mktemp -d /tmp/paynotify-model.XXXXXX)
    chmod 711 "$dir"
    cleanup() { pn_cluster_stop "$dir/pg"; remove_tmp "$dir"; }
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    port=$(pn_free_port)
    # a throwaway cluster: durability is not what this test is about
    pn_cluster_start "$dir/pg" "$port" "fsync = off" "full_page_writes = off"
    admin_dsn="host=$dir/pg port=$port dbname=postgres user=postgres"
    dsns=(--dsn "host=$dir/pg port=$port dbname=postgres user=model_shim")
fi
keys=$top/test/vectors/keys
# setup_db DSN: paynotify, the three channels and the roles in one database
setup_db() {
"$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$1" \
    -v wxcert="$(cat "$keys/wechat_platform_1.cert.pem")" \
    -v wxserial="$(openssl x509 -noout -serial -in "$keys/wechat_platform_1.cert.pem" | cut -d= -f2)" \
    -v apiv3="$(tr -d '\n' <"$keys/wechat_apiv3.key")" \
    -v alipub="$(cat "$keys/alipay_1.pub.pem")" \
    -v whsec="$(tr -d '\n' <"$keys/stripe_secret_1.txt")" >/dev/null <<'SQL'
CREATE SCHEMA pay;
CREATE EXTENSION paynotify SCHEMA pay;
SELECT pay.paynotify_add_channel('wxpay', 'wxpay', jsonb_build_object('apiv3_key', :'apiv3',
	'mchid', '1900000109', 'appid', 'wx0000000000test01'));
SELECT pay.paynotify_add_key('wxpay', :'wxserial', :'wxcert');
SELECT pay.paynotify_add_channel('alipay', 'alipay', '{"app_id": "2021000000000001"}');
SELECT pay.paynotify_add_key('alipay', 'alipay_1', :'alipub');
SELECT pay.paynotify_add_channel('stripe', 'stripe', '{}');
SELECT pay.paynotify_add_key('stripe', 'whsec_1', :'whsec');
-- the shim's login role: the handler capacity in this database (with
-- USAGE on pay), nothing more
SELECT 'CREATE ROLE model_shim LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'model_shim')
\gexec
SELECT pay.paynotify_grant('model_shim', 'handler');
-- the role that registers the hooks (model_test.py gives it the admin
-- capacity): a hook runs as its registrant, never a superuser
SELECT 'CREATE ROLE model_hooks LOGIN' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'model_hooks')
\gexec
SQL
}
setup_db "$admin_dsn"

rc=0
"$py" "$top/test/model/model_test.py" --orders "$orders" "${args[@]}" \
    "${dsns[@]}" --admin-dsn "$admin_dsn" || rc=$?
# the default run on its own cluster goes on with the agreements
# (subscriptions), out of order, in a second database of that cluster
if [ -n "${dir:-}" ] && [ ${#args[@]} = 0 ]; then
    "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$admin_dsn" -c "CREATE DATABASE agreements" >/dev/null
    setup_db "host=$dir/pg port=$port dbname=agreements user=postgres"
    "$py" "$top/test/model/model_test.py" --orders "$orders" --agreements \
        --dsn "host=$dir/pg port=$port dbname=agreements user=model_shim" \
        --admin-dsn "host=$dir/pg port=$port dbname=agreements user=postgres" || rc=$?
fi
if [ -n "${dir:-}" ] && grep -qE 'PANIC|server process .* was terminated' "$dir/pg/server.log"; then
    echo "model: the server log shows a crash:"
    grep -E 'PANIC|terminated' "$dir/pg/server.log" | head -5
    rc=1
fi
exit $rc
