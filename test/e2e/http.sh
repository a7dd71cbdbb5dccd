#!/usr/bin/env bash
# End to end through nginx, in both modes (FastCGI: paynotify-cgi --listen;
# CGI: fcgiwrap), with paynotify-send as the gateway:
#   - the blog's storm: 1000 deliveries of one notification at concurrency 50
#     -> one processed, one payment, the order paid;
#   - 2,000 distinct notifications -> 2,000 orders paid, 2,000 payment_records;
#   (in CGI mode, where every request forks a process and opens a database
#   connection, 200 deliveries in the storm and 200 distinct notifications:
#   the same checks, a fifth of the time)
#   - the database stopped in the middle of retry-until-acknowledged
#     traffic: 150 notifications acknowledged while it is up, then it is
#     stopped, then a run that re-delivers 50 of them and delivers 150 new
#     ones (the same --seed and --created: the same notifications) starts,
#     and the database is started again once the sender's ledger shows
#     deliveries that failed: only 503s while it is down; after it is back
#     the run ends with every notification acknowledged (the sender's
#     summary and ledger) and applied exactly once.  The order of events is
#     the test's, never a race with the sender: nothing here depends on how
#     fast the machine is (the senders wait up to 60 s for a reply, nginx
#     50 s for the shim, and paynotify-send signs again a request it sends
#     more than 60 s after signing it: a run longer than the gateways'
#     5-minute tolerance on a slow machine sends no stale signatures).
# Prints "N passed, M failed" last; non-zero exit on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh

pn_install && make -s -C shim >/dev/null || exit 1
distinct=${E2E_DISTINCT:-2000}
cgi_storm=${E2E_CGI_STORM:-200}
cgi_distinct=${E2E_CGI_DISTINCT:-200}
pass=0
fail=0
q() { stack_sql -tA -c "$1"; }
# field of paynotify-send's --json summary
jf() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }

stack_init e2e
stack_pg
stack_schema 0 $((distinct * 2 + 2000))

for mode in fastcgi cgi; do
    echo "== $mode mode"
    stack_http "$mode" 8 || { check "$mode: stack started" 0 1; continue; }
    base=$([ "$mode" = fastcgi ] && echo 0 || echo $((distinct + 1000)))
    storm=1000
    n=$distinct
    [ "$mode" = cgi ] && storm=$cgi_storm && n=$cgi_distinct

    # the storm: one notification, $storm deliveries at concurrency 50
    order=$((base + 1))
    stack_send wxpay --mode storm -n "$storm" -c 50 --start "$order" --timeout 60 --quiet --json >"$STACK_DIR/storm.json"
    check "$mode storm: every reply 200" "{'200': $storm}" "$(jf "$STACK_DIR/storm.json" 'r["status"]')"
    check "$mode storm: one processed, $((storm - 1)) duplicates" "{'processed': 1, 'duplicate': $((storm - 1))}" \
        "$(jf "$STACK_DIR/storm.json" 'dict(sorted(r["outcome"].items(), key=lambda kv: kv[0] != "processed"))')"
    ord=$(printf 'PN%08d' "$order")
    check "$mode storm: one log row with $storm deliveries, applied once" "succeeded|$storm|1" \
        "$(q "SELECT status, delivery_count, attempts FROM payment_notify_log WHERE order_no = '$ord'")"
    check "$mode storm: one payment record" 1 "$(q "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")"
    check "$mode storm: order paid" paid "$(q "SELECT status FROM orders WHERE order_no = '$ord'")"

    # distinct notifications
    start=$((base + 2))
    end=$((start + n - 1))
    stack_send wxpay --mode distinct -n "$n" -c 32 --start "$start" --timeout 60 --quiet --json >"$STACK_DIR/distinct.json"
    check "$mode distinct: $n processed" "{'processed': $n}" "$(jf "$STACK_DIR/distinct.json" 'r["outcome"]')"
    range="order_no BETWEEN '$(printf 'PN%08d' $start)' AND '$(printf 'PN%08d' $end)'"
    check "$mode distinct: $n orders paid" "$n" "$(q "SELECT count(*) FROM orders WHERE $range AND status = 'paid'")"
    check "$mode distinct: $n payment records" "$n" "$(q "SELECT count(*) FROM payment_record WHERE $range")"
    stack_nginx_stop
    [ "$mode" = fastcgi ] && stack_shim_stop
done

echo "== the database stopped in the middle of retry-until-acknowledged traffic (FastCGI)"
stack_http fastcgi 8
n_retry=300
start=$((distinct * 2 + 1200))
# retries compressed: WeChat's 15 s, 15 s, 30 s, 3 min ... become 15 ms, 15 ms, 30 ms, 180 ms ...
range="order_no BETWEEN '$(printf 'PN%08d' $start)' AND '$(printf 'PN%08d' $((start + n_retry - 1)))'"
ledger=$STACK_DIR/retry.ledger
created=$(date +%s)
retry_send() {	# retry_send COUNT START JSON: the same notifications in every run
    stack_send wxpay --mode retry -n "$1" -c 16 --start "$2" --time-scale 0.001 --timeout 60 \
        --seed 20260101 --created "$created" --extra-deliveries 1 --ledger "$ledger" --quiet --json >"$3"
}
# wait_for SECONDS CMD...: until CMD succeeds (polled every 20 ms); false on timeout
wait_for() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || return 1
        sleep 0.02
    done
}
failed_deliveries() { [ "$(awk -F'\t' '$9 == 0' "$ledger" 2>/dev/null | wc -l)" -gt 0 ]; }
retry_send 150 "$start" "$STACK_DIR/retry1.json"
check "retry run while up: 150 acknowledged" 0 "$(jf "$STACK_DIR/retry1.json" 'r["retry"]["unacknowledged"]')"
applied_before=$(q "SELECT count(*) FROM payment_notify_log WHERE $range")
pn_cluster_stop "$STACK_DIR/pg"
stack_send wxpay --mode distinct -n 50 -c 10 --start $((start + n_retry + 10)) --timeout 60 --quiet --json >"$STACK_DIR/down.json"
check "database down: only 503s" "{'503': 50}" "$(jf "$STACK_DIR/down.json" 'r["status"]')"
# 50 of the first 150 again (duplicates) and the 150 after them, all while down
retry_send 200 $((start + 100)) "$STACK_DIR/retry.json" 2>"$STACK_DIR/retry.err" &
sender=$!
wait_for 60 failed_deliveries
check "database down: the retry run's ledger shows failed deliveries before the restart" yes \
    "$(failed_deliveries && echo yes || echo no)"
pn_as_user "$PN_PGBIN/pg_ctl" -D "$STACK_DIR/pg/data" -l "$STACK_DIR/pg/server.log" -w start >/dev/null
wait "$sender"
rc=$?
echo "   (stopped with $applied_before of $n_retry log rows written)"
check "retry run: every notification acknowledged (exit 0)" 0 "$rc"
check "retry run: nothing left unacknowledged (summary)" 0 "$(jf "$STACK_DIR/retry.json" 'r["retry"]["unacknowledged"]')"
check "retry run: some deliveries failed while the database was down" yes \
    "$(jf "$STACK_DIR/retry.json" '"yes" if any(k != "200" and k != "204" for k in r["status"]) else "no: " + str(r["status"])')"
check "retry run ledger: notifications | acknowledged by nobody | with two 'processed' replies" "$n_retry|0|0" \
    "$(python3 - "$ledger" <<'PY'
import collections, sys
acked, proc, ids = set(), collections.Counter(), set()
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    ids.add(f[3])
    if f[8] == "1":
        acked.add(f[3])
    if f[7] == "processed":
        proc[f[3]] += 1
print(f"{len(ids)}|{len(ids - acked)}|{sum(c > 1 for c in proc.values())}")
PY
)"
check "retry run: $n_retry orders paid" "$n_retry" "$(q "SELECT count(*) FROM orders WHERE $range AND status = 'paid'")"
check "retry run: $n_retry payments, none twice" "$n_retry|$n_retry" \
    "$(q "SELECT count(*), count(DISTINCT order_no) FROM payment_record WHERE $range")"
check "retry run: every log row succeeded and applied once" "$n_retry|$n_retry|0" \
    "$(q "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'), count(*) FILTER (WHERE attempts > 1 AND status <> 'succeeded') FROM payment_notify_log WHERE $range")"
check "down requests wrote nothing" 0 \
    "$(q "SELECT count(*) FROM payment_notify_log WHERE order_no > '$(printf 'PN%08d' $((start + n_retry)))'")"

summary
