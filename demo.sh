#!/usr/bin/env bash
# paynotify in one minute, on a fresh Debian 12 machine, as root:
# installs what is missing, builds, starts a throwaway PostgreSQL cluster,
# nginx and the FastCGI shim on loopback, creates an orders table, and runs
# the blog's acceptance test: 1000 deliveries of one WeChat Pay notification
# at concurrency 50.  Then it shows, from the database, what happened; sells
# a second order whose notification is lost on purpose, which
# paynotify-reconcile finds by asking the gateway in a box; lets
# paynotify-relay deliver both orders' "paid" events to a small ERP
# receiver (signed, Standard Webhooks); follows a WeChat Pay subscription
# (a contract signed, two periods charged, one of them delivered 20 times,
# the contract ended) to the database and the ERP, and stops everything
# it started.
#
#   ./demo.sh [-n DELIVERIES] [-c CONCURRENCY]
set -euo pipefail
cd "$(dirname "$0")"
n=1000
c=50
while getopts "n:c:h" opt; do
    case $opt in
        n) n=$OPTARG ;;
        c) c=$OPTARG ;;
        *) sed -n '2,15p' "$0"; exit 2 ;;
    esac
done

if [ "$(id -u)" != 0 ]; then
    echo "demo.sh installs packages and starts services: run it as root" >&2
    exit 2
fi
echo "== installing what is missing"
scripts/deps.sh
echo "== building"
make -s >/dev/null
make -s install >/dev/null
make -s -C shim >/dev/null

. test/lib.sh
. test/e2e/stack.sh
echo "== starting PostgreSQL, nginx and paynotify-cgi (FastCGI) on loopback"
stack_init demo
stack_pg
stack_schema 0 10
stack_http fastcgi 8
echo "   POST $STACK_URL/wxpay -> nginx -> paynotify-cgi -> paynotify_handle()"

echo "== $n deliveries of one WeChat Pay notification (order PN00000001), $c at a time"
stack_send wxpay --mode storm -n "$n" -c "$c" --start 1 --quiet --json >"$STACK_DIR/storm.json"
python3 - "$STACK_DIR/storm.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("   replies by HTTP status: " + ", ".join(f"{k}: {v}" for k, v in sorted(r["status"].items())))
print("   replies by outcome:     " + ", ".join(f"{k}: {v}" for k, v in sorted(r["outcome"].items(), key=lambda kv: -kv[1])))
print(f"   {r['rps']:.0f} requests/s, latency p50 {r['latency_ms']['p50']:.1f} ms, p99 {r['latency_ms']['p99']:.1f} ms")
PY

echo "== what the database says"
stack_sql -X <<'SQL'
\pset footer off
SELECT notify_id, status, delivery_count AS deliveries, attempts AS business_runs
  FROM payment_notify_log;
SELECT count(*) AS payment_records, sum(amount) AS fen FROM payment_record;
SELECT order_no, status FROM orders WHERE order_no = 'PN00000001';
SELECT event, order_no, amount FROM paynotify_outbox;
SQL
ok=$(stack_sql -tA -c "SELECT (SELECT count(*) FROM payment_notify_log WHERE status = 'succeeded') = 1
    AND (SELECT count(*) FROM payment_record) = 1
    AND (SELECT status FROM orders WHERE order_no = 'PN00000001') = 'paid'
    AND (SELECT delivery_count FROM payment_notify_log) = $n")
if [ "$ok" = t ]; then
    echo "== exactly once: one delivery processed, one payment recorded, the order paid; all $n deliveries counted"
else
    echo "== NOT exactly once: see above" >&2
    exit 1
fi

echo "== a notification lost on the way: found by asking the gateway"
# the gateway in a box answers WeChat Pay's query-order API from what it sold
keys=test/vectors/keys
port=$(pn_free_port)
shim/paynotify-send --mode serve --listen "127.0.0.1:$port" --keys "$keys" --sales "$STACK_DIR/sales.tsv" \
    --merchant-cert merchant_1.pub.pem >"$STACK_DIR/serve.log" 2>&1 &
STACK_PIDS+=("$!")
for _ in $(seq 100); do grep -q '^paynotify-send: serving' "$STACK_DIR/serve.log" && break; sleep 0.1; done
stack_sql -q -v mkey="$(cat "$keys/merchant_1.key.pem")" -v base="http://127.0.0.1:$port" >/dev/null <<'SQL'
SELECT paynotify_alter_channel('wxpay', jsonb_build_object('merchant_private_key', :'mkey',
	'merchant_serial', '4D3C2B1A00000000000000000000000000000001', 'api_base', :'base', 'query_after_s', 5));
CREATE ROLE notify_reconcile LOGIN;
SELECT paynotify_grant('notify_reconcile', 'relay');
SQL
echo "   the shop sends order PN00000002 to WeChat Pay and says so:"
echo "   SELECT paynotify_expect('wxpay', 'PN00000002', now() + interval '2 hours');"
stack_sql -q -c "SELECT paynotify_expect('wxpay', 'PN00000002', now() + interval '2 hours')" >/dev/null
t0=$(date +%s.%N)
stack_send wxpay --mode one --start 2 --drop 1 --sales "$STACK_DIR/sales.tsv" --quiet >/dev/null
echo "   the customer pays; the gateway's notification is lost (paynotify-send --drop 1)"
echo "   PAYNOTIFY_DSN='... user=notify_reconcile' shim/reconcile/paynotify-reconcile"
echo "   (here with --allow-private=1: the gateway is on loopback; the channel's query_after_s is 5)"
PAYNOTIFY_DSN="host=$STACK_DIR/pg port=$STACK_PGPORT dbname=postgres user=notify_reconcile" \
    shim/reconcile/paynotify-reconcile --allow-private=1 --interval=500 2>"$STACK_DIR/reconcile.log" &
STACK_PIDS+=("$!")
for _ in $(seq 300); do
    [ "$(stack_sql -tA -c "SELECT status FROM orders WHERE order_no = 'PN00000002'")" = paid ] && break
    sleep 0.1
done
echo "   paid $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s after the lost notification:"
stack_sql -X <<'SQL'
\pset footer off
SELECT notify_id, source, status FROM payment_notify_log WHERE order_no = 'PN00000002';
SELECT order_no, status FROM orders WHERE order_no = 'PN00000002';
SELECT channel, order_no, queries, last_result, settled_by FROM paynotify_expectation;
SQL
if [ "$(stack_sql -tA -c "SELECT status FROM orders WHERE order_no = 'PN00000002'")" != paid ]; then
    echo "== the lost payment was NOT found: see $STACK_DIR/reconcile.log" >&2
    cat "$STACK_DIR/reconcile.log" >&2
    exit 1
fi

echo "== paynotify-relay delivers the paid events to your ERP (here a small receiver on loopback)"
secret="whsec_$(openssl rand -base64 32)"
python3 test/e2e/relay_receiver.py "$STACK_DIR/erp.port" "$STACK_DIR/erp.log" "$secret" &
STACK_PIDS+=("$!")
for _ in $(seq 50); do [ -s "$STACK_DIR/erp.port" ] && break; sleep 0.1; done
erp="http://127.0.0.1:$(cat "$STACK_DIR/erp.port")/erp/paynotify"
stack_sql -q -v erp="$erp" -v secret="$secret" >/dev/null <<'SQL'
CREATE ROLE notify_relay LOGIN;
SELECT paynotify_grant('notify_relay', 'relay');
SELECT paynotify_add_endpoint(:'erp', :'secret');
SQL
echo "   SELECT paynotify_add_endpoint('$erp', 'whsec_...');"
echo "   PAYNOTIFY_DSN='... user=notify_relay' shim/relay/paynotify-relay"
echo "   (here with PAYNOTIFY_RELAY_ALLOW_PRIVATE=1: the receiver is on loopback)"
PAYNOTIFY_DSN="host=$STACK_DIR/pg port=$STACK_PGPORT dbname=postgres user=notify_relay" \
    PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 shim/relay/paynotify-relay 2>"$STACK_DIR/relay.log" &
STACK_PIDS+=("$!")
for _ in $(seq 100); do [ "$(wc -l <"$STACK_DIR/erp.log" 2>/dev/null || echo 0)" -ge 2 ] && break; sleep 0.1; done
python3 - "$STACK_DIR/erp.log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"   the ERP got POST {r['path']}  webhook-id: {r['id']}  signature verified: {r['verified']}")
    print(f"   {r['body']}")
PY
for _ in $(seq 50); do	# the relay records the 2xx just after the ERP has answered
    [ "$(stack_sql -tA -c "SELECT count(delivered_at) FROM paynotify_delivery")" = 2 ] && break
    sleep 0.1
done
stack_sql -X <<'SQL'
\pset footer off
SELECT endpoint_id, event, order_no, attempts, delivered_at IS NOT NULL AS delivered FROM paynotify_delivery;
SQL
echo "== a subscription (WeChat Pay 委托代扣): signed, two periods charged, ended"
# one contract names its sign, its two charges (each period its own order)
# and its end; the sender would derive another contract from each order
agr=202601010000000001
agr_opts=(--agreement-id "$agr" --agreement-ref AGDEMO0001)
sub_n=20
echo "   the channel already checks the mchid and appid the contract's notices carry"
echo "   (1900000109, wx0000000000test01); the ERP's endpoint takes the agreement events too:"
echo "   SELECT paynotify_alter_endpoint(1, events => '{paid,refunded,refund_failed,closed,agreement_signed,agreement_ended}');"
stack_sql -q -c "SELECT paynotify_alter_endpoint(1, events => '{paid,refunded,refund_failed,closed,agreement_signed,agreement_ended}')" >/dev/null
wx_one() {	# one notice; what the channel answered
    stack_send wxpay --mode one --quiet --json "$@" |
        python3 -c 'import json, sys; r = json.load(sys.stdin)["reply"]; print(r["status"], r["outcome"])'
}
printf '   %-47s %s\n' "ENTRUST.SIGN, contract $agr:" "$(wx_one --event sign --start 3 "${agr_opts[@]}")"
printf '   %-47s %s\n' "period 1: order PN00000003, trade_type PAP:" "$(wx_one --event charge --start 3 "${agr_opts[@]}")"
stack_send wxpay --mode storm -n "$sub_n" -c 5 --event charge --start 4 "${agr_opts[@]}" --quiet --json \
    >"$STACK_DIR/charge.json"
python3 - "$STACK_DIR/charge.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"   {'period 2: order PN00000004, ' + str(r['deliveries']) + ' deliveries:':47} "
      + ", ".join(f"{v} {k}" for k, v in sorted(r["outcome"].items(), key=lambda kv: -kv[1])))
PY
printf '   %-47s %s\n' "ENTRUST.TERMINATE:" "$(wx_one --event terminate --start 3 "${agr_opts[@]}")"
# the contract's four notifications, and the events they made: in the
# outbox, or already taken by the relay for the ERP
events="WITH ids AS (
    SELECT unnest(notify_ids) AS notify_id FROM paynotify_agreement WHERE channel = 'wxpay' AND agreement_id = '$agr'
    UNION SELECT notify_id FROM payment_record WHERE channel = 'wxpay' AND agreement_id = '$agr')
  SELECT e.event, e.order_no, e.notify_id, e.delivered AS delivered_to_erp
  FROM (SELECT outbox_id AS id, event, order_no, body::jsonb->>'notify_id' AS notify_id,
               delivered_at IS NOT NULL AS delivered FROM paynotify_delivery
        UNION ALL SELECT id, event, order_no, notify_id, false FROM paynotify_outbox) e
  WHERE e.notify_id IN (SELECT notify_id FROM ids)
  ORDER BY e.id"
for _ in $(seq 50); do	# the relay hands them on within a second or so
    [ "$(stack_sql -tA -c "SELECT count(*) FILTER (WHERE delivered_to_erp) FROM ($events) e")" = 4 ] && break
    sleep 0.1
done
stack_sql -X -v agr="$agr" <<SQL
\pset footer off
SELECT state, signed_at, ended_at, notify_ids FROM paynotify_agreement
  WHERE channel = 'wxpay' AND agreement_id = :'agr';
SELECT order_no, status FROM orders WHERE order_no IN ('PN00000003', 'PN00000004') ORDER BY order_no;
SELECT order_no, amount, agreement_id, notify_id FROM payment_record
  WHERE agreement_id IS NOT NULL ORDER BY order_no;
SELECT order_no, status, delivery_count AS deliveries, attempts AS business_runs
  FROM payment_notify_log WHERE order_no IN ('PN00000003', 'PN00000004') ORDER BY order_no;
$events;
SQL
ok=$(stack_sql -tA -v agr="$agr" <<SQL
SELECT (SELECT state = 'ended' AND signed_at IS NOT NULL AND ended_at IS NOT NULL
               AND cardinality(notify_ids) = 2
          FROM paynotify_agreement WHERE channel = 'wxpay' AND agreement_id = :'agr')
   AND (SELECT array_agg(order_no ORDER BY order_no) FROM payment_record WHERE agreement_id = :'agr')
       = '{PN00000003,PN00000004}'
   AND (SELECT count(*) FROM orders WHERE order_no IN ('PN00000003', 'PN00000004') AND status = 'paid') = 2
   AND (SELECT delivery_count FROM payment_notify_log WHERE order_no = 'PN00000004') = $sub_n
   AND (SELECT array_agg(event ORDER BY event) FROM ($events) e) = '{agreement_ended,agreement_signed,paid,paid}';
SQL
)
if [ "$ok" = t ]; then
    echo "== exactly once: the contract signed and ended once, each period's order paid once under it;"
    echo "   all $sub_n deliveries of period 2 counted, one event per notification"
else
    echo "== NOT exactly once: see above" >&2
    exit 1
fi
echo "== stopping everything the demo started"
