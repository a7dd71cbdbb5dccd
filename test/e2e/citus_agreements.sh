#!/usr/bin/env bash
# A sign and an end of one agreement on two nodes of a Citus cluster at
# once: a coordinator and two workers on loopback (test/e2e/citus-lib.sh).
#
#   test/e2e/citus_agreements.sh
#
# paynotify_agreement is a reference table and an agreement's notices run
# on the node that received them.  The race is made deterministic by
# holding one notice's transaction open: an end on worker 2 in a
# transaction kept open (it parks: no sign yet), its sign sent on worker 1
# meanwhile, then the end committed; and the reverse (a sign held open on
# worker 1, its end sent on worker 2 meanwhile).  The second notice waits
# for the first (seen as a lock not granted on some node) or, where it
# does not, has finished before the first commits.  Checked: the
# agreement ended on every node, both notifications succeeded, nothing
# parked.  Then, with the first notice held open longer than
# paynotify.lock_timeout on worker 2: the second is busy (nothing
# written), and delivered again after the first committed, processed.  A parked end by itself
# (no sign anywhere) is parked and leaves nothing prepared.  Last, the sender's
# agreement events (paynotify-send --event sign, terminate, charge): signs
# on worker 1 and their ends on worker 2 at once, then a charge of each
# ended agreement on the coordinator: every agreement ended on every
# node, nothing parked, every charge processed with the anomaly
# charge_after_agreement_ended.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
pass=0 fail=0
citus_begin citus-agreements
citus_cluster "paynotify.lock_timeout = 60000" || exit 1
citus_schema 40 >/dev/null 2>&1 || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

KEYS=test/vectors/keys
# dump EVENT START N FILE: the sender's Stripe agreement notifications as calls
dump() {
    shim/paynotify-send --gateway stripe --mode distinct --event "$1" -n "$3" --start "$2" --seed 80 \
        --keys "$KEYS" --quiet --dump-sql "$4" >/dev/null 2>&1
}
conn() { echo "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_shim"; }
handle_on() {	# handle_on NODE FILE: the outcomes of FILE's calls on NODE, space-separated
    "$PN_PGBIN/psql" -X -q -tA "$(conn "$1")" -f "$2" 2>&1 | grep -v '^$' | tr '\n' ' ' | sed 's/ $//'
}
# a lock not granted on any node (a notice waiting for another)
waiting() {
    local i n=0
    for i in 0 1 2; do
        n=$((n + $(citus_q $i "SELECT count(*) FROM pg_locks WHERE NOT granted" 2>/dev/null || echo 0)))
    done
    echo "$n"
}
# agreement_of START: the agreement id the sender derives for order START
agreement_of() { citus_q 0 "SELECT agreement_id FROM paynotify_agreement WHERE merchant_ref = '$(printf PN%08d "$1")'"; }
# state START: the agreement of order START on each node, the log statuses
# of the notifications it recorded, and how many of its notices are parked
state() {
    local i ref
    ref=$(printf PN%08d "$1")
    for i in 0 1 2; do
        citus_q $i "SELECT coalesce((SELECT state FROM paynotify_agreement WHERE merchant_ref = '$ref'), 'none')"
    done | tr '\n' ' '
    citus_q 0 "SELECT (SELECT string_agg(status, ',' ORDER BY status) FROM payment_notify_log
                       WHERE order_no = '' AND notify_id IN
                             (SELECT unnest(notify_ids) FROM paynotify_agreement WHERE merchant_ref = '$ref'))
                      || '|' || (SELECT count(*) FROM payment_notify_log
                                 WHERE order_no = '' AND status = 'parked' AND notice->>'agreement_id' IN
                                       (SELECT agreement_id FROM paynotify_agreement WHERE merchant_ref = '$ref'))"
}

# race FIRST_EVENT FIRST_NODE SECOND_EVENT SECOND_NODE START: FIRST's call in
# a transaction kept open on FIRST_NODE, SECOND's sent on SECOND_NODE
# meanwhile, then FIRST committed; prints FIRST's and SECOND's outcomes and
# whether SECOND waited
race() {
    local fifo=$STACK_DIR/hold.$5 out1=$STACK_DIR/first.$5 out2=$STACK_DIR/second.$5 holder second waited=no
    dump "$1" "$5" 1 "$STACK_DIR/first.$5.sql"
    dump "$3" "$5" 1 "$STACK_DIR/second.$5.sql"
    rm -f "$fifo"
    mkfifo "$fifo"
    "$PN_PGBIN/psql" -X -q -tA "$(conn "$2")" <"$fifo" >"$out1" 2>&1 &
    holder=$!
    exec 7>"$fifo"
    { echo "BEGIN;"; cat "$STACK_DIR/first.$5.sql"; } >&7
    # the first call done, its transaction open
    for _ in $(seq 1 600); do
        [ "$(citus_q "$2" "SELECT count(*) FROM pg_stat_activity WHERE usename = 'notify_shim' AND state = 'idle in transaction'")" -gt 0 ] && break
        sleep 0.05
    done
    handle_on "$4" "$STACK_DIR/second.$5.sql" >"$out2" &
    second=$!
    # the second notice waits for the first, or has finished
    for _ in $(seq 1 600); do
        [ "$(waiting)" -gt 0 ] && { waited=yes; break; }
        pn_alive "$second" || break
        sleep 0.05
    done
    echo "COMMIT;" >&7
    exec 7>&-
    wait "$holder"
    wait "$second"
    echo "$(grep -v '^$' "$out1" | grep -v '^COMMIT' | tr '\n' ' ' | sed 's/ $//')|$(cat "$out2")|$waited"
}

r=$(race terminate 2 sign 1 1)
echo "# end held open on worker 2, sign on worker 1: $r"
check "an end held open on worker 2 (parked), its sign sent on worker 1 meanwhile: the sign waited for it, then processed" \
    "parked|processed|yes" "$r"
check "...the agreement ended on every node, both notifications succeeded, nothing parked" \
    "ended ended ended succeeded,succeeded|0" "$(state 1)"

r=$(race sign 1 terminate 2 2)
echo "# sign held open on worker 1, end on worker 2: $r"
check "a sign held open on worker 1, its end sent on worker 2 meanwhile: the end waited for it, then processed" \
    "processed|processed|yes" "$r"
check "...the agreement ended on every node, both notifications succeeded, nothing parked" \
    "ended ended ended succeeded,succeeded|0" "$(state 2)"

# the wait is bounded by paynotify.lock_timeout: a sign held open on worker
# 1 longer than worker 2's lock_timeout makes the end there busy
for i in 0 1 2; do
    citus_sql $i -c "LOAD 'paynotify'" -c "ALTER SYSTEM SET paynotify.lock_timeout = 1000" -c "SELECT pg_reload_conf()" >/dev/null
done
sleep 0.5
dump sign 3 1 "$STACK_DIR/sign3.sql"
dump terminate 3 1 "$STACK_DIR/end3.sql"
out=$("$PN_PGBIN/psql" -X -q -tA "$(conn 1)" -c "BEGIN" -f "$STACK_DIR/sign3.sql" \
    -c "\\! $PN_PGBIN/psql -X -q -tA '$(conn 2)' -c 'SET client_min_messages = error' -f $STACK_DIR/end3.sql >$STACK_DIR/end3.out 2>&1" \
    -c "COMMIT" 2>&1 | grep -v '^$' | tr '\n' ' ' | sed 's/ $//')
check "a sign held open on worker 1 longer than paynotify.lock_timeout: the end on worker 2 is busy" \
    "processed|busy" "$out|$(grep -v '^$' "$STACK_DIR/end3.out" | tr '\n' ' ' | sed 's/ $//')"
check "...delivered again after the sign committed: processed" processed "$(handle_on 2 "$STACK_DIR/end3.sql")"
check "...the agreement ended on every node, both notifications succeeded" \
    "ended ended ended succeeded,succeeded|0" "$(state 3)"
for i in 0 1 2; do
    citus_sql $i -c "ALTER SYSTEM RESET paynotify.lock_timeout" -c "SELECT pg_reload_conf()" >/dev/null
done
sleep 0.5

# a parked end by itself: parked, and nothing of it left prepared on a node
dump terminate 4 1 "$STACK_DIR/end4.sql"
check "an end with no sign on worker 2: parked" parked "$(handle_on 2 "$STACK_DIR/end4.sql")"
check "...no prepared transaction left on any node" \
    "0 0 0" "$(for i in 0 1 2; do citus_q $i "SELECT count(*) FROM pg_prepared_xacts" 2>&1; done | tr '\n' ' ' | sed 's/ $//')"

# the sender's agreement events: signs on worker 1 and their ends on worker
# 2 at once, then a charge of each on the coordinator
N=12 A0=11
dump sign $A0 $N "$STACK_DIR/signs.sql"
dump terminate $A0 $N "$STACK_DIR/ends.sql"
dump charge $A0 $N "$STACK_DIR/charges.sql"
handle_on 1 "$STACK_DIR/signs.sql" >"$STACK_DIR/signs.out" &
p1=$!
handle_on 2 "$STACK_DIR/ends.sql" >"$STACK_DIR/ends.out" &
p2=$!
wait $p1 $p2
echo "# signs on worker 1: $(cat "$STACK_DIR/signs.out")"
echo "# ends on worker 2: $(cat "$STACK_DIR/ends.out")"
refs="SELECT 'PN' || lpad(i::text, 8, '0') FROM generate_series($A0, $((A0 + N - 1))) i"
check "the sender's signs (worker 1) and terminates (worker 2) at once: $N agreements ended on every node" \
    "$N $N $N" "$(for i in 0 1 2; do citus_q $i "SELECT count(*) FROM paynotify_agreement WHERE state = 'ended' AND merchant_ref IN ($refs)"; done | tr '\n' ' ' | sed 's/ $//')"
check "...all $((2 * N)) notifications succeeded, none parked" "$((2 * N))|0" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_notify_log WHERE order_no = '' AND status = 'succeeded' AND notify_id IN
                          (SELECT unnest(notify_ids) FROM paynotify_agreement WHERE merchant_ref IN ($refs)))
                  || '|' || (SELECT count(*) FROM payment_notify_log WHERE order_no = '' AND status = 'parked' AND notice->>'agreement_id' IN
                                     (SELECT agreement_id FROM paynotify_agreement WHERE merchant_ref IN ($refs)))")"
out=$(handle_on 0 "$STACK_DIR/charges.sql" | tr ' ' '\n' | grep -c '^processed$')
check "the sender's charges of the ended agreements on the coordinator: processed" "$N" "$out"
check "...each with the anomaly charge_after_agreement_ended" "$N" \
    "$(citus_q 0 "SELECT count(DISTINCT order_no) FROM paynotify_anomaly WHERE kind = 'charge_after_agreement_ended'")"
check "no prepared transaction left on any node" \
    "0 0 0" "$(for i in 0 1 2; do citus_q $i "SELECT count(*) FROM pg_prepared_xacts" 2>&1; done | tr '\n' ' ' | sed 's/ $//')"
finish
