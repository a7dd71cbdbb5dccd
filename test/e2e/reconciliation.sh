#!/usr/bin/env bash
# Reconciliation with real parts: nginx and paynotify-cgi in front of the
# database, paynotify-send as the three gateways, both selling (signed
# notifications, 5 % of them lost on purpose: --drop) and answering the
# gateways' query-order and bill APIs from its record of what it sold
# (--mode serve), and paynotify-reconcile asking the gateway about every
# order the application expected (paynotify_expect) and no notification
# settled.  Judged from the gateway's record (--sales), not from paynotify's
# own log:
#   - every payment sold, lost or not, is recorded exactly once, with its
#     trade, order and amount; every lost one by a query (source query); no
#     payment is recorded that was not sold; every order sold is paid;
#   - every expectation is settled;
#   - the lost notifications delivered late, and every other one again, are
#     all answered duplicate, and nothing changes;
#   - each gateway's bill of the day, planned by the operator
#     (paynotify_bill_plan), fetched by the daemon step by step and imported
#     by the database, shows no discrepancy, and its summary agrees; a bill
#     with a changed amount and a missing line lists exactly those two;
#   - a gateway whose answers are tampered with (--serve-bad) is refused:
#     the order stays pending, the refusal is on its expectation; asked
#     again of the real gateway (paynotify_query_order), it is paid;
#   - an expired order never paid (WeChat Pay, Alipay) is closed at the
#     gateway by the daemon's close call, then closed here once.
# Nothing depends on the machine's speed: each wait is for a state, with a
# bound far above what it needs, and the daemon's pace is the database's.
# Run as root from anywhere in the repository: test/e2e/reconciliation.sh
# Everything started here is stopped by pid on exit; the last line printed
# is "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh

pn_install && make -s -C shim >/dev/null || exit 1
N_WX=${RECON_WX:-700}
N_ALI=${RECON_ALI:-700}
N_ST=${RECON_ST:-600}
DROP=${RECON_DROP:-0.05}
pass=0
fail=0
q() { stack_sql -tA -c "$1"; }
keys=$PWD/test/vectors/keys
SEND=$PWD/shim/paynotify-send
RECONCILE=$PWD/shim/reconcile/paynotify-reconcile

stack_init recon
stack_pg
total=$((N_WX + N_ALI + N_ST))
stack_schema 0 $((total + 10))

# ---- the gateway in a box, answering the APIs -----------------------------------
sales=$STACK_DIR/sales.tsv
echo "rk_test_$(openssl rand -hex 16)" >"$STACK_DIR/stripe_rk.txt"
serve() {	# serve LOG [args]: a server on a free port, its base URL in $served
    local log=$1 port
    shift
    port=$(pn_free_port)
    "$SEND" --mode serve --listen "127.0.0.1:$port" --keys "$keys" --sales "$sales" \
        --merchant-cert merchant_1.pub.pem --app-public-key merchant_1.pub.pem \
        --stripe-api-key "$STACK_DIR/stripe_rk.txt" "$@" >"$log" 2>&1 &
    STACK_PIDS+=($!)	# not in a subshell: stopped by pid with the stack
    served=http://127.0.0.1:$port
    for _ in $(seq 1 100); do
        grep -q '^paynotify-send: serving' "$log" && return 0
        sleep 0.1
    done
    return 1
}
serve "$STACK_DIR/serve.log" || { not_ok "the gateway in a box serves" "$(cat "$STACK_DIR/serve.log")"; finish; }
base=$served
serve "$STACK_DIR/serve-bad.log" --serve-bad signature ||
    { not_ok "the tampering gateway serves" "$(cat "$STACK_DIR/serve-bad.log")"; finish; }
bad_base=$served

# ---- the channels learn to ask; the daemon's role ---------------------------------
stack_sql -q -v mkey="$(cat "$keys/merchant_1.key.pem")" -v base="$base" \
    -v rk="$(cat "$STACK_DIR/stripe_rk.txt")" >/dev/null <<'SQL'
SELECT paynotify_alter_channel('wxpay', jsonb_build_object('merchant_private_key', :'mkey',
	'merchant_serial', '4D3C2B1A00000000000000000000000000000001', 'api_base', :'base', 'query_after_s', 5));
SELECT paynotify_alter_channel('alipay', jsonb_build_object('app_private_key', :'mkey',
	'api_base', :'base', 'query_after_s', 5));
SELECT paynotify_alter_channel('stripe', jsonb_build_object('secret_key', :'rk',
	'api_base', :'base', 'query_trusted', true, 'query_after_s', 5));
CREATE ROLE notify_reconcile LOGIN;
SELECT paynotify_grant('notify_reconcile', 'relay');
CREATE ROLE recon_ops LOGIN;
SELECT paynotify_grant('recon_ops', 'admin');
-- the application's role: paynotify_expect, granted by the DBA
CREATE ROLE recon_app LOGIN;
GRANT EXECUTE ON FUNCTION paynotify_expect(text, text, timestamptz) TO recon_app;
SQL
ops() { "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$STACK_DIR/pg" -p "$STACK_PGPORT" -U recon_ops -d postgres "$@"; }

# ---- the daemon ----------------------------------------------------------------------
PAYNOTIFY_DSN="host=$STACK_DIR/pg port=$STACK_PGPORT dbname=postgres user=notify_reconcile" \
    "$RECONCILE" --allow-private=1 --rate=50 --interval=200 >"$STACK_DIR/reconcile.log" 2>&1 &
STACK_PIDS+=($!)
reconcile_pid=$!

# ---- selling: the application expects each order, the gateway sells it -------------
stack_http fastcgi 8 || { not_ok "the stack starts"; finish; }
# the sales of yesterday noon (Beijing), a day whose bill is whole
day=$(TZ=Asia/Shanghai date -d yesterday +%F)
created=$(TZ=Asia/Shanghai date -d "$day 12:00" +%s)
ranges=("wxpay 1 $N_WX" "alipay $((N_WX + 1)) $N_ALI" "stripe $((N_WX + N_ALI + 1)) $N_ST")
for r in "${ranges[@]}"; do
    read -r gw start n <<<"$r"
    # the application, as it creates each order's prepay order or session
    "$PN_PGBIN/psql" -X -q -tA -h "$STACK_DIR/pg" -p "$STACK_PGPORT" -U recon_app -d postgres -c \
        "SELECT count(*) FROM generate_series($start, $start + $n - 1) i,
                LATERAL paynotify_expect('$gw', 'PN' || lpad(i::text, 8, '0'), now() + interval '2 hours') e" >/dev/null
    stack_send "$gw" --mode retry -n "$n" -c 16 --start "$start" --seed 22 --created "$created" \
        --drop "$DROP" --sales "$sales" --ledger "$STACK_DIR/ledger-$gw.tsv" \
        --schedule 0.2,0.5,1,1,1,1,1 --timeout 60 --quiet --json >"$STACK_DIR/sell-$gw.json" 2>"$STACK_DIR/sell-$gw.err"
    check "$gw: $n notifications sold, every one not lost acknowledged (exit 0)" 0 $?
done
dropped=$(awk -F'\t' '$12 == 1' "$sales" | wc -l)
sold=$(wc -l <"$sales")
check "the gateway's record: $total payments sold, some of them lost ($dropped)" "$total|yes" \
    "$sold|$([ "$dropped" -gt 0 ] && echo yes || echo no)"

# every expectation settled: by its notification, or by the daemon's query
for _ in $(seq 1 1200); do
    [ "$(q "SELECT count(*) FROM paynotify_expectation WHERE settled_at IS NULL")" = 0 ] && break
    sleep 0.1
done
check "every expectation settled (within 120 s)" "0|$total" \
    "$(q "SELECT count(*) FILTER (WHERE settled_at IS NULL) || '|' || count(*) FROM paynotify_expectation")"

# judged from the gateway's record: each sale recorded once, with its trade,
# order and amount; each lost one by a query; nothing recorded not sold
audit() {
    q "COPY (SELECT p.channel, p.trade_no, p.order_no, p.amount, l.source
             FROM payment_record p JOIN payment_notify_log l
               ON l.channel = p.channel AND l.notify_id = p.notify_id AND l.order_no = p.order_no) TO STDOUT" \
        >"$STACK_DIR/recorded.tsv"
    python3 - "$sales" "$STACK_DIR/recorded.tsv" <<'PY'
import sys, collections
sold = {}
lost = set()
for line in open(sys.argv[1], encoding="utf-8"):
    f = line.rstrip("\n").split("\t")
    if f[2] != "pay":
        continue
    key = (f[1], f[4])
    sold[key] = (f[3], int(f[5]))
    if f[11] == "1":
        lost.add(key)
rec = collections.Counter()
bad = []
source = {}
for line in open(sys.argv[2], encoding="utf-8"):
    ch, trade, order, amount, src = line.rstrip("\n").split("\t")
    rec[(ch, trade)] += 1
    source[(ch, trade)] = src
    if (ch, trade) not in sold:
        bad.append("not sold: %s %s" % (ch, trade))
    elif sold[(ch, trade)] != (order, int(amount)):
        bad.append("wrong order or amount: %s %s" % (ch, trade))
missing = [k for k in sold if rec[k] == 0]
twice = [k for k in rec if rec[k] > 1]
lost_not_by_query = [k for k in lost if rec[k] and source.get(k) != "query"]
print("every sale recorded once, with its order and amount; none not sold\t0|0|0\t%d|%d|%d"
      % (len(missing), len(twice), len(bad)))
print("every lost notification's payment recorded by a query\t%d\t%d"
      % (len(lost), sum(1 for k in lost if rec[k] and source.get(k) == "query")))
if missing or twice or bad or lost_not_by_query:
    print("# " + "; ".join([str(x) for x in (missing[:3] + twice[:3] + bad[:3] + lost_not_by_query[:3])]))
PY
}
while IFS=$'\t' read -r desc want got; do
    case $desc in '#'*) echo "$desc" ;; *) check "$desc" "$want" "$got" ;; esac
done < <(audit)
check "every order sold is paid" "$total" \
    "$(q "SELECT count(*) FROM orders WHERE status = 'paid' AND order_no <= 'PN$(printf '%08d' "$total")'")"
check "the daemon logged one line per query, and no request header" "yes|0" \
    "$([ "$(grep -c '^.*query ' "$STACK_DIR/reconcile.log")" -ge "$dropped" ] && echo yes || echo no)|$(
       grep -ciE 'authorization|bearer|signature=' "$STACK_DIR/reconcile.log")"

# ---- the lost notifications arrive late, the others again: all duplicates -----------
before="$(q "SELECT count(*) FROM payment_record")|$(q "SELECT count(*) FROM paynotify_outbox WHERE event = 'paid'")"
for r in "${ranges[@]}"; do
    read -r gw start n <<<"$r"
    stack_send "$gw" --mode distinct -n "$n" -c 16 --start "$start" --seed 22 --created "$created" \
        --timeout 60 --quiet --json >"$STACK_DIR/late-$gw.json"
    check "$gw: all $n delivered again (the lost ones for the first time): every one duplicate" "{'duplicate': $n}" \
        "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["outcome"])' "$STACK_DIR/late-$gw.json")"
done
check "nothing changed: payments and paid events" "$before" \
    "$(q "SELECT count(*) FROM payment_record")|$(q "SELECT count(*) FROM paynotify_outbox WHERE event = 'paid'")"

# ---- the bills of the day ----------------------------------------------------------------
# each payment recorded when the gateway says it was made, as it is when
# notifications come at once (this test sells yesterday): the day paynotify
# reports its records on is the bill's
q "UPDATE payment_record SET created_at = to_timestamp($created)" >/dev/null
d0=$(date -u -d "$(date -u -d @"$created" +%F)" +%s)
stday=$(date -u -d @"$d0" +%F)	# Stripe's day is UTC's
# the operator plans the day's fetch of each channel (pg_cron does it daily:
# test/e2e/cron.sh); the daemon fetches each bill step by step, the database
# signs each request, checks each answer (WeChat Pay's SHA-1 of the file)
# and imports the bill
ops -tA -c "SELECT paynotify_bill_plan('$day', 'wxpay') + paynotify_bill_plan('$day', 'alipay')
            + paynotify_bill_plan('$stday', 'stripe')" >"$STACK_DIR/planned" 2>&1
check "the operator plans the three bills' fetch" 3 "$(cat "$STACK_DIR/planned")"
fetched=""
for _ in $(seq 1 600); do	# 60 s: each bill is two or three requests
    fetched=$(q "SELECT count(*) FROM paynotify_bill_fetch WHERE step = 'done'")
    [ "$fetched" = 3 ] && break
    sleep 0.1
done
check "the daemon fetched and imported the three bills" "3|wxpay,alipay,stripe" \
    "$fetched|$(q "SELECT string_agg(channel, ',' ORDER BY CASE channel WHEN 'wxpay' THEN 1 WHEN 'alipay' THEN 2 ELSE 3 END)
                   FROM paynotify_bill WHERE bill_date IN ('$day', '$stday')")"
check "one log line per bill imported, none with a header" "3|0" \
    "$(grep -cE "^paynotify-reconcile: bill (wxpay|alipay) $day: HTTP 200, outcome imported$|^paynotify-reconcile: bill stripe $stday: HTTP 200, outcome imported$" "$STACK_DIR/reconcile.log")|$(
       grep -ciE 'authorization|bearer|signature=' "$STACK_DIR/reconcile.log")"
# the WeChat Pay file again, by hand, for the changed bill below
client() { python3 shim/tests/serve_client.py "$base" "$keys" "$@"; }
body_to() {	# body_to FILE < client json: the answer's bytes
    python3 -c 'import base64,json,sys; open(sys.argv[1],"wb").write(base64.b64decode(json.load(sys.stdin)["body_b64"]))' "$1"
}
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
client wx "/v3/bill/tradebill?bill_date=$day&bill_type=ALL&tar_type=GZIP" >"$STACK_DIR/tb.json"
url=$(jget 'd["json"]["download_url"]' <"$STACK_DIR/tb.json")
client wx "${url#"$base"}" | body_to "$STACK_DIR/wx.csv.gz"
import_bill() {	# import_bill CHANNEL FILE: paynotify_import_bill as the operator; the lines written
    { printf "SELECT count(*) FROM paynotify_import_bill('%s', decode('" "$1"; base64 -w0 "$2"; printf "', 'base64'));\n"; } |
        ops -tA 2>&1
}
check "the bills show no discrepancy" 0 "$(ops -tA -c "SELECT count(*) FROM paynotify_reconciliation")"
check "the bills' lines: every payment sold, one line each" "$total" \
    "$(ops -tA -c "SELECT count(*) FROM paynotify_bill_line WHERE kind = 'payment'")"

# a bill with a changed amount and a missing line: exactly those two
python3 - "$STACK_DIR/wx.csv.gz" "$STACK_DIR/wx-bad.csv" <<'PY'
import gzip, sys
raw = open(sys.argv[1], "rb").read()
if raw[:2] == b"\x1f\x8b":
    raw = gzip.decompress(raw)
lines = raw.decode("utf-8-sig").split("\r\n")
data = [i for i, l in enumerate(lines) if l.startswith("`") and "`SUCCESS" in l]
a, b = data[0], data[1]
head = lines[0].split(",")
f = lines[a].split(",`")
for col in ("应结订单金额", "订单金额"):   # one yuan more, as both say
    i = head.index(col)
    f[i] = "%.2f" % (float(f[i]) + 1)
lines[a] = ",`".join(f)
del lines[b]
open(sys.argv[2], "wb").write("\ufeff".encode() + "\r\n".join(lines).encode("utf-8"))
PY
out=$(import_bill wxpay "$STACK_DIR/wx-bad.csv")
check "the changed bill imported" yes "$([[ $out =~ ^[0-9]+$ ]] && echo yes || echo "$out")"
check "a bill with one amount changed and one line missing: exactly those two discrepancies" \
    "amount_differs,ours_only" \
    "$(ops -tA -c "SELECT string_agg(discrepancy, ',' ORDER BY discrepancy) FROM paynotify_reconciliation")"
# what an operator sees (the README shows it)
ops -c "SELECT channel, day, discrepancy, order_no, bill_amount, our_amount FROM paynotify_reconciliation ORDER BY 3" | sed 's/^/# /'
ops -c "SELECT * FROM paynotify_reconcile_summary('wxpay', '$day')" | sed 's/^/# /'
import_bill wxpay "$STACK_DIR/wx.csv.gz" >/dev/null
check "the right bill imported again: no discrepancy" 0 "$(ops -tA -c "SELECT count(*) FROM paynotify_reconciliation")"

# ---- a tampering gateway is refused ----------------------------------------------------
n0=$((total + 1))
ord=PN$(printf '%08d' $n0)
q "SELECT paynotify_alter_channel('wxpay', jsonb_build_object('api_base', '$bad_base'))" >/dev/null
q "SELECT order_no FROM paynotify_expect('wxpay', '$ord', now() + interval '2 hours')" >/dev/null
stack_send wxpay --mode one --start $n0 --seed 23 --drop 1 --sales "$sales" --quiet >/dev/null
q "UPDATE paynotify_expectation SET next_query_at = now() WHERE order_no = '$ord'" >/dev/null
for _ in $(seq 1 300); do
    case $(q "SELECT last_result FROM paynotify_expectation WHERE order_no = '$ord'") in refused*) break ;; esac
    sleep 0.1
done
check "a tampered answer: refused, the order still pending, no payment" "refused|pending|0" \
    "$(q "SELECT split_part(last_result, ':', 1) FROM paynotify_expectation WHERE order_no = '$ord'")|$(
       q "SELECT status FROM orders WHERE order_no = '$ord'")|$(q "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")"
q "SELECT paynotify_alter_channel('wxpay', jsonb_build_object('api_base', '$base'))" >/dev/null
ops -tA -c "SELECT order_no FROM paynotify_query_order('wxpay', '$ord')" >/dev/null
for _ in $(seq 1 300); do
    [ "$(q "SELECT status FROM orders WHERE order_no = '$ord'")" = paid ] && break
    sleep 0.1
done
check "asked again of the real gateway (paynotify_query_order): paid, once" "paid|1" \
    "$(q "SELECT status FROM orders WHERE order_no = '$ord'")|$(q "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")"

# ---- an expired order never paid: closed at the gateway, then here -----------------------
# the gateway says "not paid" (a sale not paid yet); once expires_at has
# passed the daemon sends the gateway's close call, then the query that
# finds the trade closed closes the order, once
for r in "wxpay $((total + 2))" "alipay $((total + 3))"; do
    read -r gw n <<<"$r"
    ord=PN$(printf '%08d' "$n")
    q "SELECT order_no FROM paynotify_expect('$gw', '$ord', now() + interval '2 hours')" >/dev/null
    stack_send "$gw" --mode one --start "$n" --seed 24 --created $(( $(date +%s) + 86400 )) --drop 1 \
        --sales "$sales" --quiet >/dev/null
    q "UPDATE paynotify_expectation SET expires_at = now() - interval '1 second', next_query_at = now()
       WHERE order_no = '$ord'" >/dev/null
    for _ in $(seq 1 300); do
        [ -n "$(q "SELECT settled_by FROM paynotify_expectation WHERE order_no = '$ord'")" ] && break
        sleep 0.1
    done
    check "$gw: an expired order never paid: closed at the gateway by the daemon, then here once" \
        "close|1|1|0|not pending" \
        "$(q "SELECT settled_by || '|' || close_attempts FROM paynotify_expectation WHERE order_no = '$ord'")|$(
           q "SELECT count(*) FROM paynotify_outbox WHERE order_no = '$ord' AND event = 'closed'")|$(
           q "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")|$(
           q "SELECT CASE WHEN status = 'pending' THEN 'pending' ELSE 'not pending' END FROM orders WHERE order_no = '$ord'")"
done

# ---- the daemon stops cleanly --------------------------------------------------------
kill -TERM "$reconcile_pid"
for _ in $(seq 1 100); do pn_alive "$reconcile_pid" || break; sleep 0.1; done
wait "$reconcile_pid"
check "the daemon stops on SIGTERM with status 0" 0 $?
stack_stop
check "nothing started here is left running (the gateways in a box stopped by pid)" 0 \
    "$(pgrep -fc -- "--mode serve .*--sales $sales" || true)"
trap - EXIT
finish
