#!/usr/bin/env bash
# Several shims behind one nginx upstream; one SIGKILLed mid-storm.
#
#   test/e2e/multishim.sh
#
# A throwaway cluster, two paynotify-cgi FastCGI instances (4 workers each,
# their own sockets and pids) in one nginx upstream (round robin).
# paynotify-send delivers WeChat Pay notifications (distinct orders, each
# re-delivered until acknowledged) and an Alipay storm, both with a ledger.
# When a third of the notifications are acknowledged, shim A is SIGKILLed.
# Then, from the ledger against the database: nothing lost, nothing applied
# twice, every notification acknowledged in the end; shim B is the same
# process and carries on (acknowledgements after the kill, and from half a
# second after it every reply 2xx: nginx passes over the dead socket).
# Everything is started here on loopback and stopped by pid.  About 20 s;
# in the --full suite.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
pass=0 fail=0
pn_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }

N=${MULTISHIM_N:-1500}
stack_init multishim
stack_pg || exit 1
stack_schema 0 $((N + 10)) || exit 1
stack_sql -q -c "SELECT paynotify_alter_channel('wxpay', settings || '{\"tolerance_s\": 3600}') FROM paynotify_channel WHERE name = 'wxpay'" >/dev/null
stack_shim_named shim-a 4 || exit 1
stack_shim_named shim-b 4 || exit 1
a=$(cat "$STACK_DIR/shim-a.pid") b=$(cat "$STACK_DIR/shim-b.pid")
stack_nginx_upstream "$STACK_DIR/run/shim-a.sock" "$STACK_DIR/run/shim-b.sock" || exit 1

ledger=$STACK_DIR/ledger.tsv
stack_send wxpay --mode retry -n "$N" -c 8 --now "$(date +%s)" --seed 4 --schedule 0.2,0.3,0.5,1,1,1,1,1 \
    --timeout 3 --ledger "$ledger" --quiet --json >"$STACK_DIR/distinct.json" 2>"$STACK_DIR/distinct.err" &
s1=$!
stack_send alipay --mode storm -n 6000 -c 4 --start $((N + 5)) --seed 4 --timeout 3 \
    --ledger "$ledger" --quiet --json >"$STACK_DIR/storm.json" 2>"$STACK_DIR/storm.err" &
s2=$!
for _ in $(seq 1 300); do
    [ "$(awk -F'\t' '$2 == "wxpay" && $9 == 1' "$ledger" 2>/dev/null | wc -l)" -ge $((N / 3)) ] && break
    sleep 0.1
done
kill -KILL "$a"
tkill=$(date +%s.%N)
stack_senders_wait 600 "$s1" "$s2"
wait "$s1"; rc1=$?
wait "$s2"; rc2=$?
check "shim A is gone (SIGKILL), shim B is the same process" "no|yes" \
    "$(pn_alive "$a" && echo yes || echo no)|$(pn_alive "$b" && echo yes || echo no)"
check "every distinct notification acknowledged in the end (sender exit 0)" 0 "$rc1"
check "the storm ran to its end (exit 0)" 0 "$rc2"
echo "# distinct: $(stack_send_summary "$STACK_DIR/distinct.json")"
echo "# storm: $(stack_send_summary "$STACK_DIR/storm.json")"

stack_sql -tA -c "COPY (SELECT channel, notify_id, status FROM payment_notify_log) TO STDOUT" >"$STACK_DIR/log.tsv"
stack_sql -tA -c "COPY (SELECT channel, notify_id, order_no FROM payment_record) TO STDOUT" >"$STACK_DIR/payments.tsv"
while IFS=$'\t' read -r desc want got; do
    case $desc in '#'*) echo "$desc" ;; *) check "$desc" "$want" "$got" ;; esac
done < <(python3 test/e2e/ledger_audit.py "$ledger" "$STACK_DIR" --kill "$tkill")
check "the storm's notification applied once" 1 "$(stack_sql -tA -c "SELECT count(*) FROM payment_record WHERE channel = 'alipay'")"
read -r near late lateok < <(python3 - "$ledger" "$tkill" <<'PY'
import calendar, sys, time
def unix(t):
    h, f = t.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(h, "%Y-%m-%dT%H:%M:%S")) + float("0." + f)
k = float(sys.argv[2])
lines = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
near = sum(1 for l in lines if k - 0.2 <= unix(l[0]) <= k + 0.5 and not l[6].startswith("2"))
late = [l for l in lines if unix(l[0]) > k + 0.5]
print(near, len(late), sum(1 for l in late if l[6].startswith("2")))
PY
)
echo "# replies not 2xx around the kill (-0.2 s .. +0.5 s; requests in flight on shim A, nginx 502): $near"
check "after the kill (+0.5 s) the survivor answers every request 2xx" "yes|$late" "$([ "$late" -gt 0 ] && echo yes || echo no)|$lateok"
summary
