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
# (paid, then refunded) by the relay's key.
#
# Then, on the same nodes, ALTER EXTENSION paynotify UPDATE from 1.3 to 1.4
# of a distributed installation with traffic, compared with a database
# created at 1.4 (the last section).  Last line: "N passed, M failed".
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

# ---- ALTER EXTENSION paynotify UPDATE from 1.3 to 1.4 on the cluster ------------
# On the same nodes, in two databases of their own: "up13", created at 1.3,
# distributed, given traffic (payments, a parked refund, a delivery pending
# for the relay), then updated to 1.4 as docs/CITUS.md says (ALTER
# EXTENSION paynotify UPDATE on the coordinator, then paynotify_distribute()
# again); "fresh14", created at 1.4 and distributed.  Checked: the updated
# database applies new notifications once on the coordinator and on a
# worker, the relay delivers the old and the new events once, and its
# tables are laid out as the fresh one's (pg_dist_partition, co-location
# with the orders table, the shards' columns, indexes and constraints on
# the workers, the privileges on every node).
up_setup() {	# up_setup DB [VERSION]: paynotify (at VERSION), stripe, 20 orders, distributed
    local i db=$1
    citus_database "$db" || return 1
    local version=${2:+"VERSION '$2'"}
    citus_sql 0 -d "$db" -q -v whsec="$(tr -d '\n' <test/vectors/keys/stripe_secret_1.txt)" >/dev/null <<SQL || return 1
CREATE EXTENSION paynotify $version;
SELECT paynotify_add_channel('stripe', 'stripe', '{}');
SELECT paynotify_add_key('stripe', 'whsec_1', :'whsec');
CREATE TABLE orders (order_no text PRIMARY KEY, status text NOT NULL DEFAULT 'pending', amount_fen bigint NOT NULL);
INSERT INTO orders SELECT 'PN' || lpad(i::text, 8, '0'), 'pending', 8888 FROM generate_series(1, 20) i;
CREATE TRIGGER orders_guard BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION paynotify_guard_transition();
SELECT paynotify_bind_orders('orders', 'order_no', 'status', 'amount_fen');
SQL
    for i in 0 1 2; do
        citus_sql $i -d "$db" -c "SELECT paynotify_grant('notify_shim', 'handler')" \
            -c "SELECT paynotify_grant('notify_relay', 'relay')" >/dev/null || return 1
    done
    PGOPTIONS='-c client_min_messages=warning' citus_sql 0 -d "$db" -c "SELECT count(*) FROM paynotify_distribute()" >/dev/null
}
dq() { citus_sql "$1" -d "$2" -tA -c "$3" 2>&1; }	# dq NODE DB SQL: one query's tuples
ua() {	# ua NODE DB: the notifications on stdin through paynotify_handle, as the shim's role
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=$2 user=notify_shim" 2>&1
}
citus_sql 0 -c "CREATE ROLE notify_relay LOGIN" >/dev/null
up_ok=yes
up_setup up13 1.3 || up_ok=no
up_setup fresh14 || up_ok=no
check "1.3 and 1.4 installed and distributed in two databases of the cluster" "yes 1.3 1.3 1.3 1.4" \
    "$up_ok $(for i in 0 1 2; do dq $i up13 "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'"; done | tr '\n' ' ')$(dq 0 fresh14 "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"
for w in pay refund; do
    shim/paynotify-send --gateway stripe --mode distinct --event $w -n 20 --start 1 --seed 81 --keys test/vectors/keys \
        --quiet --dump-sql "$STACK_DIR/up-$w.sql" >/dev/null 2>&1
done
whsec=$(tr -d '\n' <test/vectors/keys/stripe_secret_1.txt)
python3 test/e2e/relay_receiver.py "$STACK_DIR/up-rport" "$STACK_DIR/up-received" "$whsec" &
STACK_PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$STACK_DIR/up-rport" ] && break; sleep 0.05; done
citus_sql 0 -d up13 -c "SELECT paynotify_add_endpoint('http://127.0.0.1:$(cat "$STACK_DIR/up-rport")/fast/a', '$whsec')" >/dev/null
# at 1.3: orders 1..4 paid (coordinator, worker 1), order 1 refunded, order 10's refund parked (not paid)
check "at 1.3: payments on the coordinator and on worker 1, a refund, a parked refund" \
    "processed processed processed processed processed parked" \
    "$({ sed -n 1,2p "$STACK_DIR/up-pay.sql" | ua 0 up13; sed -n 3,4p "$STACK_DIR/up-pay.sql" | ua 1 up13
        sed -n 1p "$STACK_DIR/up-refund.sql" | ua 0 up13; sed -n 10p "$STACK_DIR/up-refund.sql" | ua 2 up13; } | tr '\n' ' ' | sed 's/ $//')"
# a delivery made at 1.3 (the fan-out), pending when the update runs
check "at 1.3: the fan-out made deliveries, pending" "yes" \
    "$("$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=up13 user=notify_relay" -c "SELECT paynotify_relay_fanout(2)" >/dev/null 2>&1
       dq 0 up13 "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END FROM paynotify_delivery WHERE delivered_at IS NULL")"
citus_sql 0 -d up13 -c "ALTER EXTENSION paynotify UPDATE" >"$STACK_DIR/up-alter.out" 2>&1
check "ALTER EXTENSION paynotify UPDATE on the coordinator: no error" "" "$(grep -E 'ERROR|FATAL' "$STACK_DIR/up-alter.out")"
PGOPTIONS='-c client_min_messages=warning' citus_sql 0 -d up13 -tA -c "SELECT relation || ':' || action FROM paynotify_distribute() WHERE action <> 'already'" >"$STACK_DIR/up-dist.out" 2>&1
echo "# paynotify_distribute() after the update: $(tr '\n' ' ' <"$STACK_DIR/up-dist.out")"
check "paynotify_distribute() after the update: no error" "" "$(grep -E 'ERROR|FATAL' "$STACK_DIR/up-dist.out")"
check "1.4 on every node of up13" "1.4 1.4 1.4" \
    "$(for i in 0 1 2; do dq $i up13 "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'"; done | tr '\n' ' ' | sed 's/ $//')"
check "paynotify_step_at distributed after the update: by order_no, with the orders table, force_delegation" "0|true|true" \
    "$(dq 0 up13 "SELECT o.distribution_argument_index || '|' ||
                  (o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass)) || '|' ||
                  o.force_delegation FROM pg_dist_object o
                  WHERE o.objid = 'paynotify_step_at(text, text, text, jsonb, jsonb, jsonb, integer, text, text)'::regprocedure" 2>&1)"
# at 1.4: payments on the coordinator and on worker 2, order 10 paid (its
# parked refund then applies), order 1's payment sent again (applied once)
check "at 1.4: new payments on the coordinator and on worker 2, order 10 paid, order 1's payment again" \
    "processed processed processed processed duplicate" \
    "$({ sed -n 5,6p "$STACK_DIR/up-pay.sql" | ua 0 up13; sed -n 7p "$STACK_DIR/up-pay.sql" | ua 2 up13
        sed -n 10p "$STACK_DIR/up-pay.sql" | ua 2 up13; sed -n 1p "$STACK_DIR/up-pay.sql" | ua 1 up13; } | tr '\n' ' ' | sed 's/ $//')"
check "at 1.4: each order paid once, order 1 and order 10 refunded once, every notification logged once" \
    "PN00000001 PN00000002 PN00000003 PN00000004 PN00000005 PN00000006 PN00000007 PN00000010|PN00000001 PN00000010|0" \
    "$(dq 0 up13 "SELECT (SELECT string_agg(order_no, ' ' ORDER BY order_no) FROM payment_record) || '|' ||
                       (SELECT string_agg(order_no, ' ' ORDER BY order_no) FROM paynotify_refund WHERE status = 'succeeded') || '|' ||
                       (SELECT count(*) FROM (SELECT channel, notify_id FROM payment_notify_log GROUP BY 1, 2 HAVING count(*) > 1) d)")"
echo "# up13: $(dq 0 up13 "SELECT string_agg(status || ':' || n, ' ' ORDER BY status) FROM (SELECT status, count(*) n FROM payment_notify_log GROUP BY 1) s")"
# the relay (1.4's) delivers the events of before and after the update, once each
env PAYNOTIFY_DSN="host=127.0.0.1 port=${CITUS_PORTS[1]} dbname=up13 user=notify_relay" \
    PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 PAYNOTIFY_RELAY_POLL_MAX=200 PAYNOTIFY_RELAY_RECONNECT_MAX=500 \
    PAYNOTIFY_RELAY_VERBOSE=2 shim/relay/paynotify-relay --batch=64 >>"$STACK_DIR/log/up-relay.log" 2>&1 &
up_relay=$!
STACK_PIDS+=("$up_relay")
pending=-1 last=-1 still=0
while [ "$still" -lt 300 ]; do
    pending=$(dq 0 up13 "SELECT (SELECT count(*) FROM paynotify_outbox) + (SELECT count(*) FROM paynotify_delivery WHERE delivered_at IS NULL)")
    [ "$pending" = 0 ] && break
    if [ "$pending" = "$last" ]; then still=$((still + 1)); else still=0 last=$pending; fi
    sleep 0.1
done
kill "$up_relay" 2>/dev/null
check "relay after the update: the outbox empty, no delivery pending" 0 "$pending"
check "relay after the update: no failed statement logged" "" "$(grep -E 'failed: |could not record|ERROR' "$STACK_DIR/log/up-relay.log" | head -3)"
check "relay after the update: each event of before and after it accepted once by the receiver" \
    "$(printf '%s\n' PN00000001:paid PN00000001:refunded PN00000002:paid PN00000003:paid PN00000004:paid PN00000005:paid \
        PN00000006:paid PN00000007:paid PN00000010:paid PN00000010:refunded | tr '\n' ' ')|0" \
    "$(python3 - "$STACK_DIR/up-received" <<'EOF'
import json, sys
acc = [json.loads(l) for l in open(sys.argv[1])]
acc = [r for r in acc if r['verdict'] == 'ok' and r['verified']]
got = sorted('%s:%s' % (json.loads(r['body'])['order_no'], json.loads(r['body'])['event']) for r in acc)
print(' '.join(got) + ' |' + str(len(acc) - len({r['id'] for r in acc})))
EOF
)"
# the layout: up13 (updated) as fresh14 (created at 1.4), shard ids taken out
layout() {	# layout DB
    local i
    dq 0 "$1" "SELECT 'dist', logicalrelid::regclass, partmethod, repmodel,
                      coalesce(column_to_column_name(logicalrelid, partkey), ''),
                      colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass),
                      (SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid)
               FROM pg_dist_partition p ORDER BY logicalrelid::regclass::text"
    for i in 0 1 2; do
        citus_sql $i -d "$1" -tA -c "SET citus.show_shards_for_app_name_prefixes = '*'" -c "
            SELECT DISTINCT 'node $i', x FROM (
              SELECT regexp_replace(format('column %s.%s %s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                                           a.attnotnull, pg_get_expr(d.adbin, d.adrelid)), '_[0-9]{4,}', '', 'g')
              FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
              WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
              UNION ALL SELECT regexp_replace('index ' || indexdef, '_[0-9]{4,}', '', 'g') FROM pg_indexes WHERE schemaname = 'public'
              UNION ALL SELECT regexp_replace(format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)), '_[0-9]{4,}', '', 'g')
                FROM pg_constraint WHERE connamespace = 'public'::regnamespace
              UNION ALL SELECT regexp_replace(format('acl %s %s %s', relname, relkind, relacl), '_[0-9]{4,}', '', 'g')
                FROM pg_class WHERE relnamespace = 'public'::regnamespace
              UNION ALL SELECT format('capacity rows %s %s %s', k.capacity, k.privilege, count(*))
                FROM paynotify_capacity k GROUP BY k.capacity, k.privilege
              UNION ALL SELECT format('function %s %s %s %s', p.oid::regprocedure, p.prosecdef, p.proconfig, p.proacl)
                FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
                JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify') l(x) ORDER BY 2" 2>&1
    done
}
layout fresh14 >"$STACK_DIR/layout-fresh14"
layout up13 >"$STACK_DIR/layout-up13"
echo "# layout: $(grep -c '^dist' "$STACK_DIR/layout-fresh14") distributed/reference tables, $(wc -l <"$STACK_DIR/layout-fresh14") lines compared"
check "the updated cluster's layout equals a fresh 1.4 cluster's (pg_dist_partition, co-location, the shards' columns, indexes, constraints, privileges, each node's rows of paynotify_capacity)" "" \
    "$(diff "$STACK_DIR/layout-fresh14" "$STACK_DIR/layout-up13" | head -40)"
finish
