#!/usr/bin/env bash
# Chaos: nothing lost, nothing applied twice, whatever fails.
#
#   test/chaos/run.sh [--full] [-n NOTIFICATIONS] [--seed S]
#
# Delivers N distinct payment notifications across WeChat Pay, Alipay and
# Stripe (N >= 5000 with --full; 600 by default, as in the test suite), plus
# a partial refund for every third order, through nginx and the FastCGI shim,
# with paynotify-send retrying each until it is acknowledged, on each
# gateway's schedule compressed 1000 times (500 with --full).  Every notification is sent by
# two senders at once (concurrent first deliveries, lock waits) and some are
# sent again after their acknowledgement; refunds start before their
# payments, so many arrive first and are parked.  The server runs with
# synchronous_commit = off: an acknowledged notification must survive the
# crashes below whatever that setting says.  Meanwhile, at random moments,
# it injects faults, and checks that each one happened:
#   - a backend killed with SIGKILL in the middle of its transaction (the
#     postmaster then restarts every backend; the server log must say so),
#   - an immediate PostgreSQL restart (the postmaster's start time changes),
#   - the shim killed with SIGKILL and restarted (the old pid is gone),
#   - user hooks failing for 10% of the notifications for a few seconds,
#   - lock waits timing out (paynotify.lock_timeout set to 1 ms for a while).
# Faults stop after the first CHAOS_FAULT_S seconds (default 45, 120 with
# --full), fewer than any gateway's compressed schedule lasts (WeChat Pay
# 87 s, Alipay 88 s, Stripe 229 s; twice that with --full): the last
# delivery of every notification then meets a working stack, as a
# gateway's last retry hours later would.  The window is fixed so that the
# run's length is: a notification that meets several faults in a row is
# retried late (Alipay's 5th and 6th retries come 7 s and 22 s after the
# one before; 14 s and 43 s with --full), and faults going on while it
# waits would stretch the run.  How many notifications were saved by a
# late retry is printed, not judged.
# Every sender writes one line per delivery to one ledger (paynotify-send
# --ledger): the gateway's side of the story.  When the deliveries stop the
# audit judges from that ledger: every notification acknowledged by
# somebody; every acknowledged notification applied exactly once (its log
# row succeeded, its payment or refund row and its outbox event once each,
# its order paid); nothing applied that was never acknowledged; at most one
# "processed" reply per notification; some deliveries disturbed.
# All randomness (ids, nonces, fault timing and choice, failing hooks)
# follows from --seed (default 20260101, printed).
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh

n=600
seed=20260101
fault_default=45
time_scale=0.001
while [ $# -gt 0 ]; do
    case $1 in
        --full) n=6000; fault_default=120; time_scale=0.002 ;;
        -n) n=$2; shift ;;
        --seed) seed=$2; shift ;;
        -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case $seed in ''|*[!0-9]*) echo "--seed wants a non-negative integer" >&2; exit 2 ;; esac
per=$((n / 3))
n=$((per * 3))
refunds=$(((per + 2) / 3))
conc=$((per / 60 > 3 ? per / 60 : 3))

pn_install && make -s -C shim >/dev/null || exit 1

stack_init chaos
# synchronous_commit = off in the server's configuration: what paynotify
# acknowledges must be durable anyway
stack_pg "restart_after_crash = on" "synchronous_commit = off" || exit 1
stack_schema 10 $((n + 10))
stack_sql -q -c "UPDATE hook_faults SET seed = $seed"
ledger=$STACK_DIR/ledger.tsv
started0=$(stack_sql -tA -c "SELECT pg_postmaster_start_time()")
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
        --seed "$seed" --time-scale "$time_scale" --extra-deliveries "$6" --timeout 3 --refund-amount 1000 \
        --ledger "$ledger" --quiet --json >"$STACK_DIR/$1.json" 2>"$STACK_DIR/$1.err"
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
        [ -e "$STACK_DIR/faults.done" ] && return 0
        [ "$(cat "$faults" 2>/dev/null | wc -l)" -ge "$1" ] && return 0
        sleep 0.1
    done
}
# faults.log: one line per fault that was injected and seen to happen;
# faults-missed.log: one line per fault that was tried but did not happen.
faults="$STACK_DIR/faults.log"
missed="$STACK_DIR/faults-missed.log"
: >"$faults"
: >"$missed"
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
    for s in "${senders[@]}"; do pn_alive "$s" && return 0; done
    return 1
}
fault() { echo "$(date +%T.%N) $*" >>"$faults"; }
missed() { echo "$(date +%T.%N) $*" >>"$missed"; }
# every kind in turn, at moments drawn from the seed
fault_loop() {
    local r=0 pid pids ms before after old new
    RANDOM=$seed	# this subshell's own generator, seeded
    while running && [ $(($(date +%s) - start)) -lt "$fault_s" ]; do
        ms=$((300 + RANDOM % 901))
        sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
        running || break
        case $((r++ % 5)) in
            0)
                # a backend in the middle of a transaction if one can be caught, else any
                pid=""
                for _ in $(seq 1 20); do
                    pids=($(stack_sql -tA -c "SELECT pid FROM pg_stat_activity WHERE usename = 'notify_shim'
                        AND state = 'active' ORDER BY pid" 2>/dev/null))
                    [ ${#pids[@]} -gt 0 ] || pids=($(stack_sql -tA -c "SELECT pid FROM pg_stat_activity
                        WHERE usename = 'notify_shim' ORDER BY pid" 2>/dev/null))
                    if [ ${#pids[@]} -gt 0 ]; then pid=${pids[RANDOM % ${#pids[@]}]}; break; fi
                    sleep 0.05
                done
                if [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; then
                    # judged at the audit: the server log must name the pid
                    fault "SIGKILL backend $pid"
                else
                    r=$((r - 1))	# no backend at that moment: this kind again next time
                fi ;;
            1)
                before=$(sql_retry "SELECT pg_postmaster_start_time()")
                pn_as_user "$PN_PGBIN/pg_ctl" -D "$STACK_DIR/pg/data" -m immediate stop >/dev/null 2>&1
                sleep 0.5
                pn_as_user "$PN_PGBIN/pg_ctl" -D "$STACK_DIR/pg/data" -l "$STACK_DIR/pg/server.log" -w start >/dev/null 2>&1
                after=$(sql_retry "SELECT pg_postmaster_start_time()")
                if [ -n "$before" ] && [ -n "$after" ] && [ "$before" != "$after" ]; then
                    fault "immediate restart (postmaster start $before -> $after)"
                else
                    missed "immediate restart: postmaster start time [$before] -> [$after]"
                fi ;;
            2)
                old=$(cat "$STACK_DIR/shim.pid" 2>/dev/null)
                stack_shim_stop KILL
                sleep 0.3
                stack_shim 8
                new=$(cat "$STACK_DIR/shim.pid" 2>/dev/null)
                if [ -n "$old" ] && ! pn_alive "$old" && [ -n "$new" ] && [ "$new" != "$old" ] &&
                   pn_alive "$new"; then
                    fault "shim SIGKILL + restart ($old -> $new)"
                else
                    missed "shim SIGKILL + restart: pid [$old] -> [$new]"
                fi ;;
            3)
                if [ "$(sql_retry "UPDATE hook_faults SET until_unix = extract(epoch FROM now())::bigint + 4
                        RETURNING fail_pct")" = 10 ]; then
                    fault "hooks fail 10% for 4 s"
                else
                    missed "hooks fail 10%: the update did not get through"
                fi ;;
            4)
                if sql_retry "LOAD 'paynotify'" "ALTER SYSTEM SET paynotify.lock_timeout = '1ms'" \
                    "SELECT pg_reload_conf()" >/dev/null && sleep 0.2 &&
                   [ "$(sql_retry "LOAD 'paynotify'" "SHOW paynotify.lock_timeout")" = 1ms ]; then
                    fault "lock_timeout 1 ms for 2 s"
                else
                    missed "lock_timeout 1 ms: not in effect"
                fi
                sleep 2
                sql_retry "LOAD 'paynotify'" "ALTER SYSTEM RESET paynotify.lock_timeout" \
                    "SELECT pg_reload_conf()" >/dev/null ;;
        esac
    done
    # calm from here on: no failing hooks, the usual lock timeout
    sql_retry "UPDATE hook_faults SET until_unix = 0" >/dev/null
    sql_retry "LOAD 'paynotify'" "ALTER SYSTEM RESET paynotify.lock_timeout" "SELECT pg_reload_conf()" >/dev/null
    date +%s >"$STACK_DIR/faults.done"
}
fault_s=${CHAOS_FAULT_S:-$fault_default}
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
kinds() { sed -E 's/^[0-9:.]+ //; s/ [(0-9].*$//; s/:.*$//' "$1" 2>/dev/null; }
echo "== faults injected and seen to happen (${elapsed} s of deliveries, faults during the first $(( $(cat "$STACK_DIR/faults.done") - start )) s)"
kinds "$faults" | sort | uniq -c
if [ -s "$missed" ]; then
    echo "== faults that did not happen"
    cat "$missed"
fi
echo "== deliveries (sender summaries)"
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
    tot[kind]["unacknowledged"] += r.get("retry", {}).get("unacknowledged", 0)
for kind, c in sorted(tot.items()):
    print(f"   {kind:14} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
PY

pass=0
fail=0
q() { sql_retry "$1"; }
# A sender exits 1 when its own retries ran out for some notification; the
# gateway's verdict is whether ANY delivery of it was acknowledged (the
# ledger checks below: "acknowledged by nobody").  Exit 2 or worse is a
# sender that could not run.
check "every sender ran to the end (exit 0 or 1)" "0" \
    "$(grep -vEc '=(0|1)$' "$STACK_DIR/senders.rc")"
check "senders run" "$((waves * 9))" "$(wc -l <"$STACK_DIR/senders.rc")"
unacked=$(python3 - "$STACK_DIR" <<'PY'
import glob, json, os, sys
total = 0
for f in glob.glob(os.path.join(sys.argv[1], "*-*-*.json")):
    try:
        total += json.load(open(f))["retry"]["unacknowledged"]
    except Exception as e:
        total += 1000000
        print(f, e, file=sys.stderr)
print(total)
PY
)
# readable summaries (an unreadable one counts a million); what one sender
# gave up on is settled by the ledger's "acknowledged by nobody" below
echo "# notifications one sender gave up on (its retries ran out): $unacked"
check "senders' summaries all readable" 1 "$([ "$unacked" -lt 1000000 ] && echo 1 || echo 0)"

echo "== audit"
stack_sql <<'SQL'
SELECT status, count(*) AS log_rows, sum(delivery_count) AS deliveries, max(attempts) AS max_attempts
FROM payment_notify_log GROUP BY 1 ORDER BY 1;
SELECT kind, count(*) FROM paynotify_anomaly GROUP BY 1;
SQL
check "synchronous_commit is off in the server's configuration" off "$(q "SHOW synchronous_commit")"
# every injected fault happened
check "faults that were tried but did not happen: 0" 0 "$(wc -l <"$missed")"
check "every kind of fault was injected and seen" 5 "$(kinds "$faults" | sort -u | wc -l)"
killed=$(sed -nE 's/.*SIGKILL backend ([0-9]+)$/\1/p' "$faults")
seen=0
for pid in $killed; do
    grep -q "(PID $pid) was terminated by signal 9" "$STACK_DIR/pg/server.log" && seen=$((seen + 1))
done
check "every backend SIGKILL is in the server log (terminated by signal 9)" "$(echo "$killed" | wc -w)" "$seen"
check "the postmaster was restarted during the run (start time changed)" yes \
    "$(q "SELECT CASE WHEN pg_postmaster_start_time() > '$started0'::timestamptz THEN 'yes'
                      ELSE 'no: still ' || pg_postmaster_start_time() END")"

# the gateway's side: the ledger of every delivery, against the database
q "COPY (SELECT channel, notify_id, status FROM payment_notify_log) TO STDOUT" >"$STACK_DIR/log.tsv"
q "COPY (SELECT channel, notify_id, order_no FROM payment_record) TO STDOUT" >"$STACK_DIR/payments.tsv"
q "COPY (SELECT channel, notify_id, order_no, status, amount FROM paynotify_refund) TO STDOUT" >"$STACK_DIR/refunds.tsv"
q "COPY (SELECT channel, notify_id, event FROM paynotify_outbox) TO STDOUT" >"$STACK_DIR/outbox.tsv"
q "COPY (SELECT order_no, status FROM orders) TO STDOUT" >"$STACK_DIR/orders.tsv"
while IFS=$'\t' read -r desc want got; do
    check "$desc" "$want" "$got"
done < <(python3 - "$STACK_DIR" "$ledger" "$n" "$((refunds * 3))" "$(cat "$STACK_DIR/faults.done")" <<'PY'
import calendar, collections, glob, json, os, sys, time
d, ledger, n_pay, n_refund = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
calm = int(sys.argv[5])
def rows(name):
    with open(os.path.join(d, name)) as f:
        return [l.rstrip("\n").split("\t") for l in f if l.strip()]
def out(desc, want, got):
    print(f"{desc}\t{want}\t{got}")

lines = [l.rstrip("\n").split("\t") for l in open(ledger)]
bad_lines = [l for l in lines if len(l) != 11]
lines = [l for l in lines if len(l) == 11]
deliveries = 0
for f in glob.glob(os.path.join(d, "*-*-*.json")):
    try:
        deliveries += json.load(open(f))["deliveries"]
    except Exception:
        pass
out("ledger: one well-formed line per delivery the senders counted", f"{deliveries}|0", f"{len(lines)}|{len(bad_lines)}")
notif = {}          # (channel, id) -> event, order
acked, processed, disturbed = set(), collections.Counter(), 0
for t, channel, event, nid, order, delivery, status, outcome, ack, bad, seconds in lines:
    key = (channel, nid)
    notif.setdefault(key, set()).add((event, order))
    if ack == "1":
        acked.add(key)
    else:
        disturbed += 1
    if outcome == "processed":
        processed[key] += 1
pays = {k for k, v in notif.items() if any(e == "pay" for e, o in v)}
refs = {k for k, v in notif.items() if any(e == "refund" for e, o in v)}
out("ledger: notifications delivered (payments|refunds), each with one event and order",
    f"{n_pay}|{n_refund}|0", f"{len(pays)}|{len(refs)}|{sum(len(v) != 1 for v in notif.values())}")
out("ledger: acknowledged by nobody: 0 notifications", 0, len(set(notif) - acked))
first_ack = {}
for t, channel, event, nid, order, delivery, status, outcome, ack, bad, seconds in lines:
    if ack == "1":
        at = calendar.timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S"))
        first_ack[(channel, nid)] = min(at, first_ack.get((channel, nid), at))
unacked_once = {(l[1], l[3]) for l in lines if l[8] != "1"}
late = sum(1 for k, at in first_ack.items() if at > calm and k in unacked_once)
print(f"# notifications disturbed by the faults and acknowledged only after they stopped: {late}",
      file=sys.stderr)
out("ledger: at most one 'processed' reply per notification (notifications with more)", 0,
    sum(1 for c in processed.values() if c > 1))
out("ledger: deliveries disturbed by the faults (not acknowledged) > 0", "yes",
    "yes" if disturbed > 0 else "no: 0")

log = collections.Counter()
logok = set()
for channel, nid, status in rows("log.tsv"):
    log[(channel, nid)] += 1
    if status == "succeeded":
        logok.add((channel, nid))
payments = collections.Counter((c, i) for c, i, o in rows("payments.tsv"))
pay_order = {(c, i): o for c, i, o in rows("payments.tsv")}
refunds = collections.Counter((c, i) for c, i, o, s, a in rows("refunds.tsv") if s == "succeeded" and a == "1000")
outbox = collections.Counter((c, i) for c, i, e in rows("outbox.tsv"))
orders = dict(rows("orders.tsv"))
lost, twice, problems = [], [], []
for key in sorted(acked):
    (event, order), = notif[key]
    effect = (payments if event == "pay" else refunds)[key]
    if effect == 0 or key not in logok or outbox[key] == 0:
        lost.append(key)
    if effect > 1 or log[key] > 1 or outbox[key] > 1:
        twice.append(key)
    if event == "pay" and (orders.get(order) != "paid" or pay_order.get(key) != order):
        problems.append(key)
def show(keys):
    return len(keys) if not keys else f"{len(keys)} e.g. {' '.join('/'.join(k) for k in keys[:3])}"
out("acknowledged but not applied (no log row succeeded, no payment or refund row, or no outbox event): 0", 0, show(lost))
out("acknowledged and applied twice (two rows of log, payment, refund or outbox): 0", 0, show(twice))
out("acknowledged payments whose order is not paid: 0", 0, show(problems))
effects = set(payments) | set(refunds) | set(outbox) | set(k for k in log)
out("applied but never acknowledged (log, payment, refund or outbox rows of no acknowledged notification): 0", 0,
    show(sorted(effects - acked)))
PY
)

# whole-table counts, as a second view of the same
check "every notification has its log row" "$((n + refunds * 3))" \
    "$(q "SELECT count(*) FROM payment_notify_log")"
check "orders paid = payments sent" "$n" "$(q "SELECT count(*) FROM orders WHERE status = 'paid'")"
check "applied twice: 0 (orders with two payments)" 0 \
    "$(q "SELECT count(*) FROM (SELECT order_no FROM payment_record GROUP BY 1 HAVING count(*) > 1) d")"
check "refunds applied = refunds sent, once each" "$((refunds * 3))|$((refunds * 3))|$((refunds * 3 * 1000))" \
    "$(q "SELECT count(*), count(DISTINCT order_no), sum(amount) FROM paynotify_refund WHERE status = 'succeeded'")"
check "ERP hook ran once per payment and refund" "$n|$((refunds * 3))|0" \
    "$(q "SELECT count(*) FILTER (WHERE event = 'paid'), count(*) FILTER (WHERE event = 'refunded'),
        (SELECT count(*) FROM (SELECT order_no, event FROM erp_calls GROUP BY 1, 2 HAVING count(*) > 1) d)
        FROM erp_calls")"
check "no failed or parked rows left" 0 \
    "$(q "SELECT count(*) FROM payment_notify_log WHERE status IN ('failed', 'parked')")"
check "no anomaly" 0 "$(q "SELECT count(*) FROM paynotify_anomaly")"

echo "seed $seed (test/chaos/run.sh --seed $seed -n $n repeats this run's choices)"
summary
