#!/usr/bin/env bash
# Chaos: nothing lost, nothing applied twice, whatever fails.
#
#   test/chaos/run.sh [--full] [-n NOTIFICATIONS] [--seed S]
#
# Delivers N distinct payment notifications across WeChat Pay, Alipay and
# Stripe (N >= 5000 with --full; 600 by default, as in the test suite), plus
# a partial refund for every third order, through nginx and the FastCGI shim,
# with paynotify-send retrying each until it is acknowledged, on each
# gateway's schedule compressed 100 times.  Every notification is sent by
# two senders at once (concurrent first deliveries, lock waits) and some are
# sent again after their acknowledgement; refunds start before their
# payments, so many arrive first and are parked.  Meanwhile, at random
# moments, it injects faults:
#   - a backend killed with SIGKILL in the middle of its transaction (the
#     postmaster then restarts every backend),
#   - an immediate PostgreSQL restart,
#   - the shim killed with SIGKILL and restarted,
#   - user hooks failing 10% of the time for a few seconds,
#   - lock waits timing out (paynotify.lock_timeout set to 1 ms for a while).
# When the deliveries stop it audits the database, prints the audit and
# asserts: acknowledged but not applied = 0; applied twice = 0; orders paid =
# payments sent; refunds applied once; no failed or parked rows left.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh

n=600
seed=$RANDOM$RANDOM
while [ $# -gt 0 ]; do
    case $1 in
        --full) n=6000 ;;
        -n) n=$2; shift ;;
        --seed) seed=$2; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
per=$((n / 3))
n=$((per * 3))
refunds=$(((per + 2) / 3))
conc=$((per / 60 > 3 ? per / 60 : 3))

make -s >/dev/null && make -s install >/dev/null && make -s -C shim >/dev/null || exit 1

stack_init chaos
stack_pg "restart_after_crash = on"
stack_schema 10 $((n + 10))
stack_http fastcgi 8 || exit 1
# notifications are signed at their wave's start and re-delivered for minutes
stack_sql -q -c "SELECT paynotify_alter_channel('wxpay', settings || '{\"tolerance_s\": 3600}')
        FROM paynotify_channel WHERE name = 'wxpay'" \
    -c "SELECT paynotify_alter_channel('stripe', '{\"tolerance_s\": 3600}')" >/dev/null
echo "chaos: $n payments ($per per gateway) and $((refunds * 3)) refunds, seed $seed, stack in $STACK_DIR"

# orders: wxpay PN00000001.., alipay and stripe after it
gw_start() { case $1 in wxpay) echo 1 ;; alipay) echo $((per + 1)) ;; stripe) echo $((2 * per + 1)) ;; esac; }
extra() { case $1 in wxpay) echo 2 ;; alipay) echo 1 ;; stripe) echo 3 ;; esac; }

# Each gateway delivers its orders in waves, so that the faults below hit
# every phase: per wave, two payment senders at once (one re-sends after
# the acknowledgement), and the wave's refunds before (WeChat), with
# (Alipay) or after (Stripe) its payments.
waves=${CHAOS_WAVES:-12}
send() {	# send NAME GATEWAY EVENT START COUNT EXTRA (at the wave's $now)
    stack_send "$2" --mode retry --event "$3" -n "$5" -c "$conc" --start "$4" --now "$now" \
        --seed "$seed" --time-scale 0.002 --extra-deliveries "$6" --timeout 3 --refund-amount 1000 \
        --quiet --json >"$STACK_DIR/$1.json" 2>"$STACK_DIR/$1.err"
    echo "$1=$?" >>"$STACK_DIR/senders.rc"
}
gateway_run() {	# gateway_run GATEWAY: every wave of that gateway, in turn
    local gw=$1 w first size rfirst rsize now
    for ((w = 0; w < waves; w++)); do
        wait_faults "$w"
        # one clock per wave: every sender of a notification builds the same
        # bytes, as a gateway's re-deliveries carry the same content
        now=$(date +%s)
        first=$(( $(gw_start "$gw") + w * per / waves ))
        size=$(( (w + 1) * per / waves - w * per / waves ))
        rfirst=$(( $(gw_start "$gw") + w * refunds / waves ))
        rsize=$(( (w + 1) * refunds / waves - w * refunds / waves ))
        case $gw in
            wxpay) send "$gw-refund-$w" "$gw" refund "$rfirst" "$rsize" 0
                   send "$gw-pay-a-$w" "$gw" pay "$first" "$size" 2 &
                   send "$gw-pay-b-$w" "$gw" pay "$first" "$size" 0 ;;
            alipay) send "$gw-refund-$w" "$gw" refund "$rfirst" "$rsize" 0 &
                    send "$gw-pay-a-$w" "$gw" pay "$first" "$size" 1 &
                    send "$gw-pay-b-$w" "$gw" pay "$first" "$size" 0 ;;
            stripe) send "$gw-pay-a-$w" "$gw" pay "$first" "$size" 3 &
                    send "$gw-pay-b-$w" "$gw" pay "$first" "$size" 0
                    wait
                    send "$gw-refund-$w" "$gw" refund "$rfirst" "$rsize" 1 ;;
        esac
        wait
    done
}
# wait_faults W: let at least W faults happen before wave W (5 s at most),
# so that every wave meets some and every kind of fault is met
wait_faults() {
    for _ in $(seq 1 50); do
        [ "$(cat "$faults" 2>/dev/null | wc -l)" -ge "$1" ] && return 0
        sleep 0.1
    done
}
faults="$STACK_DIR/faults.log"
senders=()
for gw in wxpay alipay stripe; do
    gateway_run "$gw" &
    senders+=("$!")
done

# ---- faults -----------------------------------------------------------------
sql_retry() {	# statements that must get through, crash or not (one -c each)
    local args=() c
    for c in "$@"; do args+=(-c "$c"); done
    for _ in $(seq 1 100); do
        stack_sql -tA "${args[@]}" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
running() {
    local s
    for s in "${senders[@]}"; do kill -0 "$s" 2>/dev/null && return 0; done
    return 1
}
# every kind in turn, at random moments
fault_loop() {
    local r=0 pid
    while running; do
        sleep "$(python3 -c "import random; print(round(random.uniform(0.3, 1.2), 2))")"
        running || break
        case $((r++ % 5)) in
            0)
                # a backend in the middle of a transaction if one can be caught, else any
                pid=""
                for _ in $(seq 1 20); do
                    pid=$(stack_sql -tA -c "SELECT pid FROM pg_stat_activity WHERE usename = 'notify_shim'
                        ORDER BY state = 'active' DESC, random() LIMIT 1" 2>/dev/null)
                    [ -n "$pid" ] && break
                    sleep 0.05
                done
                if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null && echo "$(date +%T.%N) SIGKILL backend $pid" >>"$faults"; fi ;;
            1)
                pn_as_user "$PN_PGBIN/pg_ctl" -D "$STACK_DIR/pg/data" -m immediate stop >/dev/null 2>&1
                sleep 0.5
                pn_as_user "$PN_PGBIN/pg_ctl" -D "$STACK_DIR/pg/data" -l "$STACK_DIR/pg/server.log" -w start >/dev/null 2>&1
                echo "$(date +%T.%N) immediate restart" >>"$faults" ;;
            2)
                stack_shim_stop KILL
                sleep 0.3
                stack_shim 8 && echo "$(date +%T.%N) shim SIGKILL + restart" >>"$faults" ;;
            3)
                sql_retry "UPDATE hook_faults SET until_unix = extract(epoch FROM now())::bigint + 4" >/dev/null &&
                    echo "$(date +%T.%N) hooks fail 10% for 4 s" >>"$faults" ;;
            4)
                sql_retry "LOAD 'paynotify'" "ALTER SYSTEM SET paynotify.lock_timeout = '1ms'" \
                    "SELECT pg_reload_conf()" >/dev/null &&
                    echo "$(date +%T.%N) lock_timeout 1 ms for 2 s" >>"$faults"
                sleep 2
                sql_retry "LOAD 'paynotify'" "ALTER SYSTEM RESET paynotify.lock_timeout" \
                    "SELECT pg_reload_conf()" >/dev/null ;;
        esac
    done
}
start=$(date +%s)
fault_loop &
fault_pid=$!

for s in "${senders[@]}"; do
    wait "$s"
done
wait "$fault_pid"
elapsed=$(( $(date +%s) - start ))
sql_retry "UPDATE hook_faults SET until_unix = 0" >/dev/null
sql_retry "LOAD 'paynotify'" "ALTER SYSTEM RESET paynotify.lock_timeout" "SELECT pg_reload_conf()" >/dev/null

# ---- audit ------------------------------------------------------------------
echo "== faults injected (${elapsed} s of deliveries)"
sed -E 's/^[0-9:.]+ //; s/ [0-9]+$//' "$faults" 2>/dev/null | sort | uniq -c
echo "== deliveries"
python3 - "$STACK_DIR" <<'PY'
import glob, json, os, sys, collections
tot = collections.defaultdict(collections.Counter)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-*-*.json"))):
    name = os.path.basename(f)[:-5]
    kind = name.rsplit("-", 1)[0].replace("-a", "").replace("-b", "")
    try:
        r = json.load(open(f))
    except Exception:
        tot[kind]["no summary"] += 1
        continue
    tot[kind]["deliveries"] += r.get("replies", 0) + r.get("transport_errors", 0)
    tot[kind]["acknowledged"] += r.get("acked", 0)
    tot[kind]["transport errors"] += r.get("transport_errors", 0)
    for k, v in r.get("status", {}).items():
        tot[kind]["HTTP " + k] += v
    tot[kind]["unacknowledged"] += r.get("unacknowledged", 0)
for kind, c in sorted(tot.items()):
    print(f"   {kind:14} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
PY

pass=0
fail=0
check() {	# check DESC EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then pass=$((pass + 1)); echo "ok: $1"
    else fail=$((fail + 1)); echo "FAILED: $1: expected [$2], got [$3]"; fi
}
q() { sql_retry "$1"; }
check "every sender acknowledged everything (exit 0)" "0" \
    "$(grep -vc '=0$' "$STACK_DIR/senders.rc")"
check "senders run" "$((waves * 9))" "$(wc -l <"$STACK_DIR/senders.rc")"
unacked=$(cat "$STACK_DIR"/*-*-*.json 2>/dev/null | python3 -c '
import json, sys
print(sum(json.loads(l).get("unacknowledged", 0) for l in sys.stdin if l.strip()))')
check "acknowledged by nobody: 0 notifications" 0 "$unacked"

echo "== audit"
stack_sql <<'SQL'
SELECT status, count(*) AS log_rows, sum(delivery_count) AS deliveries, max(attempts) AS max_attempts
FROM payment_notify_log GROUP BY 1 ORDER BY 1;
SELECT kind, count(*) FROM paynotify_anomaly GROUP BY 1;
SELECT pg_postmaster_start_time() > now() - interval '1 hour' AS server_restarted_during_run;
SQL
check "acknowledged but not applied: 0 (log rows not succeeded)" 0 \
    "$(q "SELECT count(*) FROM payment_notify_log WHERE status <> 'succeeded'")"
check "every notification has its log row" "$((n + refunds * 3))" \
    "$(q "SELECT count(*) FROM payment_notify_log")"
check "orders paid = payments sent" "$n" "$(q "SELECT count(*) FROM orders WHERE status = 'paid'")"
check "payments recorded = payments sent" "$n" "$(q "SELECT count(*) FROM payment_record")"
check "applied twice: 0 (orders with two payments)" 0 \
    "$(q "SELECT count(*) FROM (SELECT order_no FROM payment_record GROUP BY 1 HAVING count(*) > 1) d")"
check "refunds applied = refunds sent, once each" "$((refunds * 3))|$((refunds * 3))|$((refunds * 3 * 1000))" \
    "$(q "SELECT count(*), count(DISTINCT order_no), sum(amount) FROM paynotify_refund WHERE status = 'succeeded'")"
check "ERP hook ran once per payment and refund" "$n|$((refunds * 3))|0" \
    "$(q "SELECT count(*) FILTER (WHERE event = 'paid'), count(*) FILTER (WHERE event = 'refunded'),
        (SELECT count(*) FROM (SELECT order_no, event FROM erp_calls GROUP BY 1, 2 HAVING count(*) > 1) d)
        FROM erp_calls")"
check "outbox events = effects" "$((n + refunds * 3))" "$(q "SELECT count(*) FROM paynotify_outbox")"
check "no failed or parked rows left" 0 \
    "$(q "SELECT count(*) FROM payment_notify_log WHERE status IN ('failed', 'parked')")"
check "no anomaly" 0 "$(q "SELECT count(*) FROM paynotify_anomaly")"
check "every kind of fault was injected" 5 \
    "$(sed -E 's/^[0-9:.]+ //; s/ [0-9]+$//' "$faults" 2>/dev/null | sort -u | wc -l)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
