#!/usr/bin/env bash
# paynotify_distribute() while a backend is inside paynotify's work: a
# coordinator and two workers on loopback (test/e2e/citus-lib.sh).
#
#   test/e2e/citus_distribute_live.sh
#
# A backend loads paynotify's configuration (whether the outbox is
# distributed among it) when a call starts; a paynotify_distribute() that
# commits while the call runs (the call's writes wait for its locks) leaves
# that call with the configuration of one server, and its event went into
# the distributed outbox without its order's sequence value (order_seq
# NULL: the outbox id, from this node's range), so that the order's next
# event, numbered by paynotify_order_seq, came before it.  Played
# deterministically: one session opens a transaction and makes a call that
# loads the configuration (refused: no signature); paynotify_distribute()
# starts and is held up half-way by a lock on one of the last tables it
# distributes; the first session pays an order (its call waits for the
# tables paynotify_distribute() has taken), and paynotify_distribute()
# commits; the order's refund follows on another node.  Checked:
# the payment has an order_seq, and the order's events are in order
# (paid, then refunded) by the relay's key.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
pass=0 fail=0
citus_begin citus-live
citus_cluster || exit 1
stack_schema 0 20 >/dev/null 2>&1 || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
# the shim's role calls paynotify_handle on the coordinator and on the
# workers: its capacity on every node (paynotify_grant grants on its node only)
citus_grant notify_shim handler || { echo "setup failed (paynotify_grant)"; echo "0 passed, 1 failed"; exit 1; }
for w in pay refund; do
    shim/paynotify-send --gateway stripe --mode distinct --event $w -n 6 --start 1 --seed 80 --keys test/vectors/keys \
        --quiet --dump-sql "$STACK_DIR/$w.sql" >/dev/null 2>&1
done
as_app() {	# as_app NODE [psql args...]
    local n=$1
    shift
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[n]} dbname=postgres user=notify_shim" "$@"
}
# orders 2..6 paid on one server: the outbox ids go on from there
check "orders 2 to 6 paid before the distribution" "processed processed processed processed processed" \
    "$(sed -n 2,6p "$STACK_DIR/pay.sql" | as_app 0 2>&1 | tr '\n' ' ' | sed 's/ $//')"
su_q() { citus_q 0 "$1" 2>/dev/null; }
waiting() {	# waiting PATTERN: until a backend whose query matches waits for a lock (60 s at most)
    for _ in $(seq 1 600); do
        [ "$(su_q "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '$1'")" -gt 0 ] && return 0
        sleep 0.1
    done
    return 1
}
until_file() { echo "while [ ! -e $STACK_DIR/$1 ]; do sleep 0.1; done"; }
# the application's backend: a call that loads the configuration (refused:
# no signature), then, when told, order 1's payment
as_app 0 >"$STACK_DIR/app.out" 2>&1 <<SQL &
SELECT outcome FROM paynotify_handle('stripe', '{}'::jsonb, '\x7b7d'::bytea);
\! touch $STACK_DIR/app-ready; $(until_file go)
$(sed -n 1p "$STACK_DIR/pay.sql")
SQL
app=$!
for _ in $(seq 1 600); do [ -e "$STACK_DIR/app-ready" ] && break; sleep 0.1; done
# paynotify_distribute() held up half-way (by a lock on one of the last
# tables it distributes) while the payment starts: the payment waits for
# the tables it already has, and goes on when it commits
citus_sql 0 >/dev/null 2>&1 <<SQL &
BEGIN;
LOCK TABLE paynotify_order_seq IN ACCESS EXCLUSIVE MODE;
\! touch $STACK_DIR/locked; $(until_file release)
COMMIT;
SQL
blocker=$!
for _ in $(seq 1 600); do [ -e "$STACK_DIR/locked" ] && break; sleep 0.1; done
PGOPTIONS='-c client_min_messages=warning' citus_sql 0 -tA -c "SELECT count(*) FROM paynotify_distribute()" >"$STACK_DIR/distribute.out" 2>&1 &
dist=$!
waiting '%paynotify_distribute%' || echo "# paynotify_distribute() never waited"
touch "$STACK_DIR/go"
waiting '%paynotify_handle%' || echo "# the payment never waited"
touch "$STACK_DIR/release"
wait $blocker $dist $app
check "paynotify_distribute() committed while the payment waited" "" "$(grep -E 'ERROR|FATAL' "$STACK_DIR/distribute.out")"
check "the backend's calls: one before paynotify_distribute(), order 1 paid after it" "malformed processed" \
    "$(tr '\n' ' ' <"$STACK_DIR/app.out" | sed 's/ $//')"
citus_app >/dev/null 2>&1
check "order 1 refunded on worker 1 afterwards" "processed" "$(sed -n 1p "$STACK_DIR/refund.sql" | as_app 1 2>&1)"
check "the payment made after the distribution has its order's sequence value" "paid:1" \
    "$(citus_q 0 "SELECT string_agg(event || ':' || coalesce(order_seq::text, 'NULL'), ' ') FROM paynotify_outbox
                  WHERE order_no = 'PN00000001' AND event = 'paid'")"
check "order 1's events in the relay's order: paid, then refunded" "paid refunded" \
    "$(citus_q 0 "SELECT string_agg(event, ' ' ORDER BY coalesce(order_seq, id)) FROM paynotify_outbox
                  WHERE order_no = 'PN00000001'")"
finish
