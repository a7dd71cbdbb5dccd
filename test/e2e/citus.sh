#!/usr/bin/env bash
# paynotify on a Citus cluster: a coordinator and two workers on loopback.
#
#   test/e2e/citus.sh
#
# Builds Citus with the shared script when it is not installed (as root;
# citus_ensure in test/e2e/citus-lib.sh).  Three PostgreSQL clusters with
# citus, the extension and stack_schema's configuration on the coordinator,
# SELECT paynotify_distribute(), then:
#   layout     every extension table that has an order_no is distributed by
#              order_no co-located with the bound orders table (the orders
#              table by its key); the configuration tables are reference
#              tables, readable on each worker, and a channel changed on the
#              coordinator afterwards is changed on each worker;
#              paynotify_distribute() is idempotent (a second call leaves
#              pg_dist_partition as it was)
#   each node  paynotify_handle called on the coordinator and on each worker
#              directly (as the shim's role) processes a notification
#   traffic    one FastCGI shim per node behind one nginx upstream: an Alipay
#              storm (one notification, many deliveries over the three shims)
#              and distinct WeChat Pay notifications (re-delivered until
#              acknowledged), each with paynotify-send's ledger; from the
#              ledger against the tables: lost 0, doubled 0; the storm's
#              notification paid, recorded, evented and hooked once; every
#              node ran paynotify_handle (pg_stat_user_functions)
#   restart    distinct Stripe notifications while one worker is stopped
#              (immediate) and started again: every acknowledged one applied
#              once, every one acknowledged in the end (the unacknowledged
#              re-delivered), none twice, failures seen during the restart
#   routing    no two-phase commit for the restart's traffic (its hook
#              writes nothing; the hook's writes of the traffic before,
#              over its registrant's connection, are counted, not checked): the rows of
#              pg_dist_transaction and pg_prepared_xacts on all nodes are as
#              many after it as before (citus.recover_2pc_interval = -1
#              keeps them); a deliberate multi-shard write is seen by the
#              same count (the check can fail)
#   relay      paynotify_outbox_claim on a worker and on the coordinator at
#              once (different events; all back after rolling back); a
#              relay's round by hand (claim, then report, in one transaction)
#              on the coordinator and on worker 2 with one connection per
#              shard (citus.force_max_query_parallelization): every claimed
#              delivery reported, no distributed deadlock; then two
#              loopback endpoints and two paynotify-relays, one connected to
#              the coordinator, one to worker 2, while payments and refunds
#              of the same orders are applied on different nodes (paid on
#              worker 1 and refunded on the coordinator; both through the
#              shims, round robin; paid on the coordinator before
#              paynotify_distribute() and refunded on worker 2 after it):
#              from the receiver's record, every event (one per payment and
#              per refund applied) accepted exactly once at each endpoint,
#              each order's paid before its refunded; the outbox empty and
#              nothing pending at the end
#   handed on  after the relays stopped, as the shim's role on the workers
#              directly (paynotify-send --payload ... --dump-sql): a Stripe
#              customer.created (no order), delivered twice on worker 1:
#              ignored, then duplicate; one notification event, order_no ''
#              and customer.created in its detail, one log row; on worker 2
#              a charge.dispute.created for the payment intent of an order
#              paid over Stripe above (one whose shard is on another node
#              than the shard of '', where the dispute's log row goes):
#              processed, one dispute_opened event for that order with the
#              dispute's amount and id, no anomaly, the dispute recorded
#              once, open, under that order; no prepared transaction
#              left on any node (the dispute's log row and event, on two
#              nodes, take a two-phase commit: a figure, after the routing
#              count so as not to disturb it)
#   agreements a Stripe subscription's end on worker 2 before its sign:
#              parked; its sign on worker 1: processed, the agreement ended
#              on every node (a reference table), its events signed then
#              ended; invoice.paid of it on the coordinator pays its order,
#              names the subscription, charge_after_agreement_ended; no
#              prepared transaction left
#   ops        the operator's functions on the coordinator, as a role with the
#              admin capacity (granted after the distribution): WeChat Pay
#              payments failed by their hook, retried by paynotify_retry
#              (dry run first) and paynotify_retry_failed: paid once each;
#              the application's own moves (its UPDATE of orders, on the
#              coordinator and on a worker) in the order history as its
#              own, none of paynotify's moves recorded twice or as the
#              application's (paynotify_transit too); paynotify's mark of
#              its own move gone with a rolled-back savepoint, used up on
#              the shard's own node, taken back when the move changed
#              nothing (the application's later moves recorded);
#              paynotify_grant after a parallel GRANT (refused; sequential
#              mode first: granted); paynotify_trace_order
#              and paynotify_trace of a retried notification;
#              paynotify_purge of 40 old Stripe notifications on every
#              shard, one with an anomaly kept, recent ones kept, their
#              delivery history deleted; a purge past 9 locked old
#              notifications purges the 10th; paynotify_stats against each
#              shard's own counts (run_command_on_shards);
#              paynotify_resolve_anomaly, paynotify_redeliver of dead
#              letters on several shards, paynotify_reconcile_summary
#              (P0002 without a bill); the handler's and the relay's roles
#              refused (42501) by each
#   model      test/model/run.sh against the cluster (a database of its own,
#              its backends spread over the three nodes): "all equal"
# Throughput figures: test/bench/citus.sh.  Everything is started here on
# loopback in a temp dir and stopped by pid.  Environment: CITUS_N (distinct
# notifications, default 600), CITUS_STORM (storm deliveries, default 3000),
# CITUS_RESTART_N (default 400), CITUS_MODEL_ORDERS (default 200),
# CITUS_MODEL_TIMEOUT (seconds after which the model test is taken for
# hung, default 900),
# CITUS_RELAY_ORDERS (orders paid and refunded each way in the relay check,
# default 40),
# CITUS_SHARD_COUNT (shards per table, default 4).  In the --full suite.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
pass=0 fail=0

N=${CITUS_N:-600}
STORM=${CITUS_STORM:-3000}
M=${CITUS_RESTART_N:-400}
MODEL_ORDERS=${CITUS_MODEL_ORDERS:-200}
# a guard against a hang only: the run is bounded by its work (--orders,
# --max-attempts) and judged by its verdict, never by how fast it went
MODEL_TIMEOUT=${CITUS_MODEL_TIMEOUT:-900}
K=${CITUS_RELAY_ORDERS:-40}
# order indexes: 1..3 direct calls, 11.. distinct, N+15 the storm, N+21..
# restart, then for the relay: P0.. paid before the distribution, A0.. paid on
# worker 1 and refunded on the coordinator, B0.. both through the shims;
# then F0 and C0 (ops)
D0=11 S0=$((N + 15)) R0=$((N + 21))
P0=$((R0 + M + 10)) A0=$((R0 + M + 20)) B0=$((R0 + M + 20 + K))
# the operator's functions: F0.. failed by their hook and retried, C0.. cancelled
# by the application; the first 40 of the restart's Stripe orders purged
F0=$((B0 + K + 1)) C0=$((B0 + K + 5)) PU0=$R0
citus_begin citus
citus_cluster "track_functions = 'all'" || exit 1
echo "# coordinator 127.0.0.1:${CITUS_PORTS[0]}, workers :${CITUS_PORTS[1]} :${CITUS_PORTS[2]}"
stack_schema 0 $((B0 + K + 10)) || exit 1
# the shim's role calls paynotify_handle on every node: its capacity on each
# (paynotify_grant grants on the node where it runs only; citus_grant)
citus_grant notify_shim handler || exit 1
# paid on one server, before the distribution (refunded after it: see relay)
shim/paynotify-send --gateway stripe --mode distinct -n 5 --start $P0 --seed 60 --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/prepay.sql" >/dev/null 2>&1
"$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_shim" \
    -f "$STACK_DIR/prepay.sql" >/dev/null 2>&1
out=$(citus_sql 0 -c "SELECT paynotify_distribute()" 2>&1)
check "SELECT paynotify_distribute() on the coordinator" "0|" "$?|$(echo "$out" | grep -E 'ERROR|FATAL' | head -3)"
out=$(citus_app 2>&1)
check "the application's tables distributed beside orders (erp_calls not co-located, hook_faults reference)" "0|" \
    "$?|$(echo "$out" | grep -E 'ERROR' | head -3)"

# ---- layout -------------------------------------------------------------------
layout() {
    citus_q 0 "SELECT string_agg(logicalrelid::text || ':' || partmethod::text || ':' || colocationid || ':' || repmodel::text, ' '
                ORDER BY logicalrelid::text) FROM pg_dist_partition" 2>&1
}
ext_tables="SELECT c.oid, c.relname FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
    WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND c.relkind IN ('r', 'p')
    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'paynotify')"
config="'paynotify_channel', 'paynotify_key', 'paynotify_binding', 'paynotify_transition',
    'paynotify_transition_removed', 'paynotify_hook', 'paynotify_endpoint'"
check "orders distributed by order_no (hash)" "h|order_no" \
    "$(citus_q 0 "SELECT partmethod::text || '|' || column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition
                  WHERE logicalrelid = 'orders'::regclass" 2>&1)"
check "every extension table with an order_no distributed by order_no, co-located with orders" "" \
    "$(citus_q 0 "WITH t AS ($ext_tables)
        SELECT string_agg(t.relname || '=' || coalesce(p.partmethod::text || '/' || column_to_column_name(p.logicalrelid, p.partkey)
                          || '/colocation ' || p.colocationid, 'local'), ' ' ORDER BY t.relname)
        FROM t LEFT JOIN pg_dist_partition p ON p.logicalrelid = t.oid
        WHERE EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attname = 'order_no' AND NOT a.attisdropped)
          AND (p.partmethod IS DISTINCT FROM 'h' OR column_to_column_name(p.logicalrelid, p.partkey) <> 'order_no'
               OR p.colocationid <> (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass))" 2>&1)"
check "the configuration tables are reference tables" "" \
    "$(citus_q 0 "WITH t AS ($ext_tables)
        SELECT string_agg(t.relname || '=' || coalesce(p.partmethod::text || '/' || p.repmodel::text, 'local'), ' ' ORDER BY t.relname)
        FROM t LEFT JOIN pg_dist_partition p ON p.logicalrelid = t.oid
        WHERE t.relname IN ($config) AND (p.partmethod IS DISTINCT FROM 'n' OR p.repmodel <> 't')" 2>&1)"
check "no extension table is left local to the coordinator (neither reference nor distributed)" "" \
    "$(citus_q 0 "WITH t AS ($ext_tables)
        SELECT string_agg(t.relname, ' ' ORDER BY t.relname) FROM t
        WHERE NOT EXISTS (SELECT FROM pg_dist_partition p WHERE p.logicalrelid = t.oid)" 2>&1)"
echo "# $(citus_q 0 "SELECT 'shards of orders: ' || count(*) || ' on ' || count(DISTINCT nodeport) || ' nodes'
                      FROM citus_shards WHERE table_name = 'orders'::regclass")"
for i in 1 2; do
    check "worker $i reads the configuration (3 channels, 4 keys, the binding)" "3|4|1" \
        "$(citus_q $i "SELECT (SELECT count(*) FROM paynotify_channel) || '|' || (SELECT count(*) FROM paynotify_key)
                       || '|' || (SELECT count(*) FROM paynotify_binding)" 2>&1 | head -1)"
done
# a configuration change after the distribution, on the coordinator: on every node
out=$(citus_q 0 "SELECT paynotify_alter_channel('wxpay', '{\"tolerance_s\": 3600}')" 2>&1 >/dev/null)
check "a channel changed on the coordinator after the distribution: each worker reads the change" "|3600|3600" \
    "$(echo "$out" | grep -m1 ERROR)|$(citus_q 1 "SELECT settings->>'tolerance_s' FROM paynotify_channel WHERE name = 'wxpay'" 2>&1)|$(citus_q 2 "SELECT settings->>'tolerance_s' FROM paynotify_channel WHERE name = 'wxpay'" 2>&1)"
before=$(layout)
out=$(citus_sql 0 -c "SELECT paynotify_distribute()" 2>&1)
check "paynotify_distribute() a second time: succeeds, the layout is unchanged" "0|yes" \
    "$?$(echo "$out" | grep -m1 ERROR | sed 's/^/: /')|$([ "$before" = "$(layout)" ] && echo yes || echo no)"

# ---- each node serves paynotify_handle -------------------------------------------
tpc_start=$(citus_2pc_count)
node_names=(coordinator "worker 1" "worker 2")
for i in 0 1 2; do
    shim/paynotify-send --gateway stripe --mode one --start $((i + 1)) --seed 50 --keys test/vectors/keys \
        --dump-sql "$STACK_DIR/direct$i.sql" >/dev/null 2>&1
    check "${node_names[i]}: paynotify_handle called there as the shim's role processes a notification" processed \
        "$("$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[i]} dbname=postgres user=notify_shim" \
            -f "$STACK_DIR/direct$i.sql" 2>&1 | head -3 | tr '\n' ' ' | sed 's/ $//')"
done

# ---- storm and distinct over three shims ----------------------------------------
# the application expects each distinct order on the coordinator (1.4): the
# payments settle them, each on its order's shard
citus_q 0 "SELECT count(*) FROM generate_series($D0, $D0 + $N - 1) i,
           LATERAL paynotify_expect('wxpay', pg_catalog.format('PN%s', pg_catalog.lpad(i::text, 8, '0'))) e" >/dev/null
citus_shims 4 PAYNOTIFY_RECONNECT_MAX=1000 || exit 1
ledger=$STACK_DIR/ledger.tsv
stack_send wxpay --mode retry -n "$N" -c 8 --start $D0 --seed 14 --schedule 0.2,0.3,0.5,1,1,1,1,1,1,1 \
    --timeout 5 --ledger "$ledger" --quiet --json >"$STACK_DIR/distinct.json" 2>"$STACK_DIR/distinct.err" &
s1=$!
stack_send alipay --mode storm -n "$STORM" -c 12 --start $S0 --seed 14 --timeout 5 \
    --ledger "$ledger" --quiet --json >"$STACK_DIR/storm.json" 2>"$STACK_DIR/storm.err" &
s2=$!
stack_senders_wait 1200 "$s1" "$s2"
wait "$s1"; rc1=$?
wait "$s2"; rc2=$?
check "distinct: every notification acknowledged (sender exit 0)" 0 "$rc1"
check "storm: ran to its end (exit 0)" 0 "$rc2"
echo "# distinct: $(stack_send_summary "$STACK_DIR/distinct.json")"
echo "# storm: $(stack_send_summary "$STACK_DIR/storm.json")"
audit() {	# audit LEDGER [ledger_audit.py args]: its checks, against the coordinator's view
    local l=$1
    shift
    citus_q 0 "COPY (SELECT channel, notify_id, status FROM payment_notify_log) TO STDOUT" >"$STACK_DIR/log.tsv"
    citus_q 0 "COPY (SELECT channel, notify_id, order_no FROM payment_record) TO STDOUT" >"$STACK_DIR/payments.tsv"
    while IFS=$'\t' read -r desc want got; do
        case $desc in '#'*) echo "$desc" ;; *) check "$desc" "$want" "$got" ;; esac
    done < <(python3 test/e2e/ledger_audit.py "$l" "$STACK_DIR" "$@")
}
audit "$ledger"
sno=$(printf 'PN%08d' $S0)
check "storm: the notification applied once (log row, payment, order paid, paid event, hook call)" "1|1|paid|1|1" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_notify_log WHERE channel = 'alipay') || '|' ||
                  (SELECT count(*) FROM payment_record WHERE channel = 'alipay') || '|' ||
                  (SELECT status FROM orders WHERE order_no = '$sno') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE channel = 'alipay' AND event = 'paid') || '|' ||
                  (SELECT count(*) FROM erp_calls WHERE order_no = '$sno' AND event = 'paid')")"
check "storm: deliveries counted on its log row = deliveries answered 2xx" \
    "$(awk -F'\t' '$2 == "alipay" && $7 ~ /^2/' "$ledger" | wc -l)" \
    "$(citus_q 0 "SELECT delivery_count FROM payment_notify_log WHERE channel = 'alipay'")"
check "distinct: $N orders paid, one payment, one paid event and one hook call each" "$N|$N|$N|$N" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM orders WHERE status = 'paid' AND order_no BETWEEN '$(printf 'PN%08d' $D0)' AND '$(printf 'PN%08d' $((D0 + N - 1)))') || '|' ||
                  (SELECT count(*) FROM payment_record WHERE channel = 'wxpay') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE channel = 'wxpay' AND event = 'paid') || '|' ||
                  (SELECT count(DISTINCT order_no) || '' FROM erp_calls WHERE event = 'paid' AND order_no BETWEEN '$(printf 'PN%08d' $D0)' AND '$(printf 'PN%08d' $((D0 + N - 1)))')")"
check "distinct: the $N expectations registered on the coordinator settled by their payments" "$N|$N" \
    "$(citus_q 0 "SELECT count(*) || '|' || count(*) FILTER (WHERE settled_by = 'payment' AND settled_notify_id IS NOT NULL)
                  FROM paynotify_expectation")"
# the shims' backends report their function calls when idle (within a
# second): read until each node has more than 100, or 30 s have passed
for _ in $(seq 1 300); do
    calls=()
    for i in 0 1 2; do
        calls+=("$(citus_q $i "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'paynotify_handle'")")
    done
    [ "${calls[0]:-0}" -gt 100 ] && [ "${calls[1]:-0}" -gt 100 ] && [ "${calls[2]:-0}" -gt 100 ] && break
    sleep 0.1
done
echo "# paynotify_handle calls per node (coordinator, worker 1, worker 2): ${calls[*]}"
check "every node's shim carried traffic (paynotify_handle calls > 100 on each node)" "yes|yes|yes" \
    "$(for c in "${calls[@]}"; do [ "${c:-0}" -gt 100 ] && echo -n yes || echo -n no; echo -n '|'; done | sed 's/|$//')"

# ---- a worker restarted mid-traffic -----------------------------------------------
# Up to here the hook wrote erp_calls for each payment: it runs as erp_ops,
# paynotify writes as the tables' owner, so Citus wrote erp_calls over a
# second connection and committed with two phases (a figure, no check).
# For the Stripe traffic below the hook writes nothing: what is left is
# paynotify's own writes, which must need no two-phase commit (routing).
tpc_hooks=$(citus_2pc_count)
echo "# two-phase commit records from the hooks' writes to erp_calls so far: $((tpc_hooks - tpc_start))"
citus_sql 0 >/dev/null <<'SQL'
CREATE OR REPLACE FUNCTION erp_hook(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	IF ev->>'channel' <> 'stripe' THEN
		INSERT INTO public.erp_calls (order_no, event) VALUES (ev->'notice'->>'order_no', ev->>'event');
	END IF;
END
$f$;
SQL
# (counted after the function's DDL, which Citus commits on the workers in two phases)
tpc0=$(citus_2pc_count)
ledger2=$STACK_DIR/ledger-restart.tsv
stack_send stripe --mode retry -n "$M" -c 8 --start $R0 --seed 15 --schedule 0.2,0.3,0.5$(printf ',1%.0s' $(seq 1 19)) \
    --timeout 5 --ledger "$ledger2" --quiet --json >"$STACK_DIR/restart.json" 2>"$STACK_DIR/restart.err" &
s3=$!
for _ in $(seq 1 300); do
    [ "$(awk -F'\t' '$9 == 1' "$ledger2" 2>/dev/null | wc -l)" -ge $((M / 4)) ] && break
    sleep 0.05
done
citus_node_crash 1
tkill=$(date +%s.%N)
acked_at_kill=$(awk -F'\t' '$9 == 1' "$ledger2" | wc -l)
sleep 1
pn_as_user "$PN_PGBIN/pg_ctl" -D "${CITUS_DIRS[1]}/data" -l "${CITUS_DIRS[1]}/server.log" -w -t 60 start >/dev/null
tstart=$(date +%s.%N)
echo "# worker 1 stopped (immediate) after $acked_at_kill of $M acknowledged, started again $(python3 -c "print(round($tstart - $tkill, 2))") s later"
for _ in $(seq 1 1200); do pn_alive "$s3" || break; sleep 0.1; done
stop_pid "$s3"
wait "$s3"; rc3=$?
check "restart: every notification acknowledged in the end (sender exit 0)" 0 "$rc3"
echo "# restart: $(stack_send_summary "$STACK_DIR/restart.json")"
check "restart: deliveries not acknowledged around the restart (the restart was felt)" yes \
    "$(awk -F'\t' '$9 != 1' "$ledger2" | wc -l | awk '{ print ($1 > 0 ? "yes" : "no: " $1) }')"
audit "$ledger2" --kill "$tkill"
check "restart: $M orders paid, one payment, one paid event each" "$M|$M|$M" \
    "$(rr="BETWEEN '$(printf 'PN%08d' $R0)' AND '$(printf 'PN%08d' $((R0 + M - 1)))'"
       citus_q 0 "SELECT (SELECT count(*) FROM orders WHERE status = 'paid' AND order_no $rr) || '|' ||
                  (SELECT count(*) FROM payment_record WHERE channel = 'stripe' AND order_no $rr) || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE channel = 'stripe' AND event = 'paid' AND order_no $rr)")"
check "the shims are the same processes (reconnected by themselves)" "yes yes yes" \
    "$(for i in 0 1 2; do pn_alive "$(cat "$STACK_DIR/shim$i.pid")" && echo -n yes || echo -n no; [ $i -lt 2 ] && echo -n ' '; done)"

# ---- single-shard routing -----------------------------------------------------------
tpc1=$(citus_2pc_count)
echo "# two-phase commit records on the three nodes: $tpc0 before the Stripe traffic (its hook writes nothing), $tpc1 after it"
# (meaningful only when the notification tables are distributed: said with it)
dist=$(citus_q 0 "SELECT count(*) FROM pg_dist_partition WHERE partmethod = 'h'
                  AND logicalrelid IN ('payment_notify_log'::regclass, 'payment_record'::regclass, 'paynotify_outbox'::regclass)" 2>&1)
check "no two-phase commit for any notification whose hook writes nothing (records before = after; log, payment and outbox distributed)" \
    "$tpc0|3" "$tpc1|$dist"
citus_sql 0 -c "CREATE TABLE routing_probe (order_no text, at timestamptz DEFAULT now())" \
    -c "SELECT create_distributed_table('routing_probe', 'order_no')" >/dev/null 2>&1
citus_sql 0 -c "INSERT INTO routing_probe (order_no) SELECT 'PN' || lpad(i::text, 8, '0') FROM generate_series(1, 64) i" >/dev/null
tpc2=$(citus_2pc_count)
check "... and the count sees a deliberate multi-shard write (64 rows over both workers: 2PC)" yes \
    "$([ "$tpc2" -gt "$tpc1" ] && echo yes || echo "no: $tpc1 -> $tpc2")"

# ---- the relay and the outbox on the cluster ----------------------------------------
# paynotify_outbox_claim: candidates read across shards, each taken on its
# shard; two claims at once take different events; rolled back, all are back
before_claims=$(citus_q 0 "SELECT count(*) FROM paynotify_outbox")
# (the first claim's transaction stays open until the second has claimed:
# told by files, not by a sleep that a slow machine outlasts)
citus_sql 1 -tA -c "BEGIN" -c "SELECT string_agg(id::text, ' ' ORDER BY id) FROM paynotify_outbox_claim(5)" \
    -c "\\! touch $STACK_DIR/claim1-held; while [ ! -e $STACK_DIR/claim1-release ]; do sleep 0.05; done" \
    -c "ROLLBACK" >"$STACK_DIR/claim1.out" 2>&1 &
claim_pid=$!
for _ in $(seq 1 1200); do [ -e "$STACK_DIR/claim1-held" ] || ! pn_alive "$claim_pid" && break; sleep 0.05; done
# (a claim that waited for the first one's rows would time out, not hang)
claim2=$(citus_sql 0 -tA -c "SET statement_timeout = '60s'" -c "BEGIN" \
    -c "SELECT string_agg(id::text, ' ' ORDER BY id) FROM paynotify_outbox_claim(5)" -c "ROLLBACK" 2>&1)
touch "$STACK_DIR/claim1-release"
wait "$claim_pid"
claim1=$(grep -v '^$' "$STACK_DIR/claim1.out" | head -1)
check "paynotify_outbox_claim on the cluster: 5 events on worker 1, 5 others at once on the coordinator, all back after the rollbacks" \
    "5|5|0|$before_claims" \
    "$(echo "$claim1" | wc -w)|$(echo "$claim2" | wc -w)|$(comm -12 <(tr ' ' '\n' <<<"$claim1" | sort) <(tr ' ' '\n' <<<"$claim2" | sort) | grep -c .)|$(citus_q 0 "SELECT count(*) FROM paynotify_outbox")"
check "paynotify_outbox_claim(-1) on the cluster: refused (SQLSTATE 2201W), as on one server" "2201W" \
    "$(citus_sql 1 -tA -v VERBOSITY=verbose -c "SELECT * FROM paynotify_outbox_claim(-1)" 2>&1 | grep -o '2201W' | head -1)"

whsec=$(tr -d '\n' <test/vectors/keys/stripe_secret_1.txt)
python3 test/e2e/relay_receiver.py "$STACK_DIR/rport" "$STACK_DIR/received" "$whsec" &
STACK_PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$STACK_DIR/rport" ] && break; sleep 0.05; done
rport=$(cat "$STACK_DIR/rport")
# the relay's role (CREATE ROLE reaches the workers), with the relay
# capacity on every node: a relay connects to the coordinator and one to
# worker 2, and paynotify_grant grants on the node where it runs only
citus_sql 0 -c "CREATE ROLE notify_relay LOGIN" >/dev/null
citus_grant notify_relay relay || not_ok "the relay capacity on every node"
citus_sql 0 >/dev/null <<SQL
SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/a', '$whsec', max_in_flight => 32);
SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/b', '$whsec', max_in_flight => 32);
SQL
direct() {	# direct NODE FILE: the notifications of FILE through paynotify_handle on NODE
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_shim" -f "$2" >/dev/null 2>&1
}
for w in pay refund; do
    shim/paynotify-send --gateway stripe --mode distinct --event $w -n "$K" --start $A0 --seed 61 --keys test/vectors/keys \
        --quiet --dump-sql "$STACK_DIR/a-$w.sql" >/dev/null 2>&1
done
shim/paynotify-send --gateway stripe --mode distinct --event refund -n 5 --start $P0 --seed 60 --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/prerefund.sql" >/dev/null 2>&1
# before the relays start, so that the fan-outs find them all in the
# outbox: paid on worker 1 (ids from its range, above 2^48), refunded on the
# coordinator (lower ids); the refunds of orders paid before the distribution
direct 1 "$STACK_DIR/a-pay.sql"
direct 0 "$STACK_DIR/a-refund.sql"
direct 2 "$STACK_DIR/prerefund.sql"
check "relay: the refunds applied on the coordinator have lower outbox ids than their payments on worker 1" "$K" \
    "$(citus_q 0 "SELECT count(*) FROM paynotify_outbox r JOIN paynotify_outbox p ON p.order_no = r.order_no AND p.event = 'paid'
                  WHERE r.event = 'refunded' AND r.id < p.id")"
# A relay's round by hand, with every node reached over several
# connections (citus.force_max_query_parallelization = on: one per shard,
# as the executor's slow start opens them when a task takes longer than
# 10 ms, under load): the 20 lowest events fanned out, then in one
# transaction the claim and the report of the deliveries, on the
# coordinator and on worker 2.  Citus ties a shard to one connection for
# writes only, not for SELECT ... FOR UPDATE: the report's UPDATE reached a
# shard over another connection than the claim's row locks, waited for
# them, and Citus cancelled it as a distributed deadlock (the deliveries
# were made again).  Rolled back: the relays below deliver them.
relay_round() {	# relay_round NODE: "claimed|reported", or the error
    "$PN_PGBIN/psql" -X -q -tA -v ON_ERROR_STOP=1 \
        "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_relay" 2>&1 <<'SQL' | grep -v '^$'
BEGIN;
SET LOCAL statement_timeout = '60s';
SET LOCAL citus.force_max_query_parallelization = on;
SELECT array_agg(delivery_id) AS ids, count(*) AS n FROM paynotify_relay_claim(64) \gset
SELECT :n || '|' || paynotify_relay_report(:'ids', array_fill(200, ARRAY[:n]), array_fill(NULL::text, ARRAY[:n]));
ROLLBACK;
SQL
}
# the reconciliation daemon's claim (1.4) on the coordinator and on a
# worker: due expectations of orders on both workers' shards, each claimed
# once, its next query put off
citus_q 0 "SELECT count(*) FROM generate_series(1, 6) i,
           LATERAL paynotify_expect('wxpay', 'QD-' || i) e" >/dev/null
citus_q 0 "UPDATE paynotify_expectation SET next_query_at = now() - interval '1 second' WHERE order_no LIKE 'QD-%'" >/dev/null
qd() { "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_relay" \
           -c "SELECT string_agg(order_no, ',' ORDER BY order_no) FROM paynotify_query_due($2)" 2>&1; }
check "query_due on the cluster: 4 claimed on the coordinator, the 2 others on worker 2, none left" \
    "4|2||6" "$(qd 0 4 | tr ',' '\n' | wc -l)|$(qd 2 10 | tr ',' '\n' | wc -l)|$(qd 0 10)|$(
       citus_q 0 "SELECT count(*) FROM paynotify_expectation WHERE order_no LIKE 'QD-%' AND queries = 1 AND next_query_at > now()")"
# bills (1.4): not imported on a cluster yet, refused plainly (0A000) by
# the plan and the import; a fetch row (a reference table) is still
# claimed once by the daemon's role on a worker, and its request built
citus_q 0 "SELECT paynotify_add_channel('wxbill', 'wxpay', jsonb_build_object(
             'apiv3_key', repeat('k', 32), 'mchid', '1900000001',
             'merchant_serial', '5A1B2C3D4E5F60718293A4B5C6D7E8F901234567',
             'merchant_private_key', '$(cat test/vectors/keys/merchant_1.key.pem)'))" >/dev/null
bd() { "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_relay" -c "$2" 2>&1; }
sqlstate() { citus_sql 0 -tA -v VERBOSITY=sqlstate -c "$1" 2>&1 | tr -d '\n'; }
check "bills on the cluster: the plan and the import refused (0A000)" "ERROR:  0A000|ERROR:  0A000" \
    "$(sqlstate "SELECT paynotify_bill_plan(current_date - 2, 'wxbill')")|$(
       sqlstate "SELECT paynotify_import_bill('wxbill', decode('$(base64 -w0 test/bills/wx_20260314.csv)', 'base64'), '2026-03-14')")"
citus_q 0 "INSERT INTO paynotify_bill_fetch (channel, bill_date, step) VALUES ('wxbill', current_date - 2, 'list')" >/dev/null
check "a bill's fetch row on the cluster: claimed once on worker 2, its request built there" \
    "wxbill|0|GET /v3/bill/tradebill" \
    "$(bd 2 "SELECT string_agg(channel, ',') FROM paynotify_bill_due(10)")|$(
       bd 0 "SELECT count(*) FROM paynotify_bill_due(10)")|$(
       bd 2 "SELECT method || ' ' || split_part(substr(url, strpos(url, '/v3/')), '?', 1)
             FROM paynotify_bill_request('wxbill', current_date - 2)")"
"$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_relay" \
    -c "SELECT paynotify_relay_fanout(20)" >/dev/null
for i in 0 2; do
    out=$(relay_round $i)
    check "relay: a claim and its report in one transaction on ${node_names[i]}, over one connection per shard: every claimed delivery reported, no deadlock" \
        yes "$(echo "$out" | awk -F'|' 'NR == 1 && NF == 2 && $1 > 0 && $1 == $2 { ok = 1 } /ERROR/ && !err { err = $0 }
                                         END { print (ok && NR == 1) ? "yes" : "no: " (err ? err : $0) }')"
done
# a failed round by hand on each node, rolled back: leased deliveries
# reported 500 (four arguments) and claimed ones reported 502 (three): each
# attempted once, due again later by the one retry schedule, not dead
relay_fail_round() {	# relay_fail_round NODE: "leased|recorded|scheduled|claimed|reported|scheduled"
    citus_sql "$1" -q -tA -v ON_ERROR_STOP=1 2>&1 <<'SQL' | grep -v '^$' | paste -sd'|'
BEGIN;
SET LOCAL statement_timeout = '60s';
SET LOCAL ROLE notify_relay;
SELECT array_agg(delivery_id) AS ids, array_agg(lease) AS leases, count(*) AS n FROM paynotify_relay_lease(8, 2000) \gset
SELECT :n, recorded FROM paynotify_relay_report(:'ids', array_fill(500, ARRAY[:n]), array_fill(NULL::text, ARRAY[:n]), :'leases');
RESET ROLE;
SELECT count(*) FROM paynotify_delivery WHERE id = ANY (:'ids') AND attempts = 1 AND last_status = 500
   AND next_attempt_at > now() AND lease IS NULL AND dead_at IS NULL AND delivered_at IS NULL;
ROLLBACK;
BEGIN;
SET LOCAL statement_timeout = '60s';
SET LOCAL ROLE notify_relay;
SELECT array_agg(delivery_id) AS ids, count(*) AS n FROM paynotify_relay_claim(8) \gset
SELECT :n, paynotify_relay_report(:'ids', array_fill(502, ARRAY[:n]), array_fill(NULL::text, ARRAY[:n]));
RESET ROLE;
SELECT count(*) FROM paynotify_delivery WHERE id = ANY (:'ids') AND attempts = 1 AND last_status = 502
   AND next_attempt_at > now() AND dead_at IS NULL AND delivered_at IS NULL;
ROLLBACK;
SQL
}
for i in 0 2; do
    out=$(relay_fail_round $i)
    check "relay: failed deliveries reported on ${node_names[i]} (lease and claim): attempted once, due again later" \
        yes "$(echo "$out" | awk -F'|' 'NF == 6 && $1 > 0 && $1 == $2 && $2 == $3 && $4 > 0 && $4 == $5 && $5 == $6 { print "yes"; next } { print "no: " $0 }')"
done
# two relays, on the coordinator and on worker 2 (fan-outs on two nodes at
# once), fanning out 50 events at a time: an order's refund is often made a
# delivery before its payment
relays=()
start_relay() {	# start_relay NODE: a paynotify-relay connected to that node
    env PAYNOTIFY_DSN="host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_relay" \
        PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 PAYNOTIFY_RELAY_POLL_MAX=200 PAYNOTIFY_RELAY_RECONNECT_MAX=500 \
        PAYNOTIFY_RELAY_FANOUT_BATCH=50 PAYNOTIFY_RELAY_VERBOSE=2 shim/relay/paynotify-relay --batch=64 \
        >>"$STACK_DIR/log/relay$1.log" 2>&1 &
    STACK_PIDS+=($!)
    relays+=($!)
}
start_relay 0
start_relay 2
# and while they run, payments and then refunds of other orders through the shims
stack_send stripe --mode retry -n "$K" -c 4 --start $B0 --seed 62 --schedule 0.2,0.5,1,1,1 --timeout 5 --quiet \
    >/dev/null 2>"$STACK_DIR/b-pay.err"
stack_send stripe --mode retry --event refund -n "$K" -c 4 --start $B0 --seed 62 --schedule 0.2,0.5,1,1,1 --timeout 5 --quiet \
    >/dev/null 2>"$STACK_DIR/b-refund.err"
# until nothing is pending, or the count has not moved for 30 s (the relays
# stuck: a slow machine only takes longer)
pending=-1 last=-1 still=0
while [ "$still" -lt 300 ]; do
    pending=$(citus_q 0 "SELECT (SELECT count(*) FROM paynotify_outbox) + (SELECT count(*) FROM paynotify_delivery WHERE delivered_at IS NULL)" 2>&1)
    [ "$pending" = 0 ] && break
    if [ "$pending" = "$last" ]; then still=$((still + 1)); else still=0 last=$pending; fi
    sleep 0.1
done
check "relay: the outbox empty and no delivery pending at the end" 0 "$pending"
early=$(citus_q 0 "SELECT count(*) FROM paynotify_delivery r JOIN paynotify_delivery p ON p.order_no = r.order_no
                   AND p.endpoint_id = r.endpoint_id AND p.event = 'paid'
                   WHERE r.event = 'refunded' AND r.created_at < p.created_at" 2>&1)
check "relay: refunds were made deliveries before their payments (the fan-outs take the outbox by id): $early of them" yes \
    "$([ "${early:-0}" -gt 0 ] 2>/dev/null && echo yes || echo "no: $early")"
check "relay: both relays still running" "yes yes" \
    "$(for p in "${relays[@]}"; do pn_alive "$p" && echo -n yes || echo -n no; echo -n ' '; done | sed 's/ $//')"
sent0=$(grep -c ': delivered$' "$STACK_DIR/log/relay0.log")
sent2=$(grep -c ': delivered$' "$STACK_DIR/log/relay2.log")
echo "# relay: deliveries made by the relay on the coordinator $sent0, on worker 2 $sent2"
check "relay: each relay delivered events (its node's fan-out and claims work), neither logged a failed statement" "yes|" \
    "$([ "$sent0" -gt 0 ] && [ "$sent2" -gt 0 ] && echo yes || echo no)|$(grep -hE 'failed: |could not record|connection lost' "$STACK_DIR"/log/relay[02].log | head -3)"
echo "# relay: $(citus_q 0 "SELECT count(*) || ' deliveries, ' || coalesce(sum(attempts), 0) || ' attempts' FROM paynotify_delivery")"
# what was applied (payments and refunds, not the outbox): the events the receiver must have
citus_q 0 "COPY (SELECT order_no, 'paid' FROM payment_record UNION ALL
                 SELECT order_no, 'refunded' FROM paynotify_refund WHERE status = 'succeeded') TO STDOUT" >"$STACK_DIR/applied.tsv"
check "relay: payments and refunds applied (3 + $N + 1 + $M + 5 + 2 x $K paid, 5 + 2 x $K refunded)" \
    "$((3 + N + 1 + M + 5 + 2 * K))|$((5 + 2 * K))" \
    "$(awk -F'\t' '$2 == "paid"' "$STACK_DIR/applied.tsv" | wc -l)|$(awk -F'\t' '$2 == "refunded"' "$STACK_DIR/applied.tsv" | wc -l)"
python3 - "$STACK_DIR/received" "$STACK_DIR/applied.tsv" >"$STACK_DIR/relay-check.out" 2>&1 <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
want = sorted(tuple(l.rstrip('\n').split('\t')) for l in open(sys.argv[2]) if l.strip())
bad = []
if any(not r['verified'] for r in recs): bad.append('a request not verified by the receiver')
for path in ('/fast/a', '/fast/b'):
    acc = [r for r in recs if r['path'] == path and r['verdict'] == 'ok']
    ids = [r['id'] for r in acc]
    if len(ids) != len(set(ids)): bad.append('%s: %d webhook-ids accepted more than once' % (path, len(ids) - len(set(ids))))
    got = sorted((json.loads(r['body'])['order_no'], json.loads(r['body'])['event']) for r in acc)
    if got != want:
        miss = sorted(set(want) - set(got)); extra = sorted(set(got) - set(want))
        bad.append('%s: %d accepted, %d applied; never accepted: %s; accepted, not applied: %s'
                   % (path, len(got), len(want), miss[:4], extra[:4]))
    paid = {}
    for i, r in enumerate(acc):
        b = json.loads(r['body'])
        if b['event'] == 'paid': paid.setdefault(b['order_no'], i)
        elif b['event'] == 'refunded' and paid.get(b['order_no'], len(acc)) > i:
            bad.append('%s: order %s refunded (%s) before paid' % (path, b['order_no'], r['id']))
    print('# receiver %s: %d events accepted' % (path, len(acc)))
for b in bad[:10]: print(b)
sys.exit(1 if bad else 0)
EOF
rc=$?
grep '^#' "$STACK_DIR/relay-check.out"
check "relay: every event accepted exactly once at each endpoint, each order's paid before its refunded (receiver's record)" \
    "0|" "$rc|$(grep -v '^#' "$STACK_DIR/relay-check.out" | head -5 | tr '\n' ' ')"
for p in "${relays[@]}"; do stop_pid "$p"; done

# ---- notifications handed on, a dispute ---------------------------------------------
# After the routing count and after the relays stopped (they would deliver
# these events).  A dispute names no order: its log row goes under '', its
# event under the order its trade's payment recorded; when the two shards
# are on two nodes that takes a two-phase commit (expected, a figure; the
# routing count must not see it)
tpc_h0=$(citus_2pc_count) t_h0=$SECONDS
handle_on() {	# handle_on NODE FILE: each line's outcome from paynotify_handle on NODE, space-separated
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=notify_shim" \
        -f "$2" 2>&1 | grep -v '^$' | head -3 | tr '\n' ' ' | sed 's/ $//'
}
now=$(date +%s)
cat >"$STACK_DIR/customer.json" <<EOF
{"id": "evt_citusCustomer0001", "object": "event", "api_version": "2025-03-31.basil", "created": $now,
 "data": {"object": {"id": "cus_citus0001", "object": "customer", "email": "c@example.com", "metadata": {}}},
 "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": null},
 "type": "customer.created"}
EOF
shim/paynotify-send --gateway stripe --payload "$STACK_DIR/customer.json" --mode storm -n 2 -c 1 --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/customer.sql" >/dev/null 2>&1
check "handed on: a Stripe customer.created (no order) on worker 1, delivered twice: ignored, then a duplicate" \
    "ignored duplicate" "$(handle_on 1 "$STACK_DIR/customer.sql")"
check "handed on: one notification event for it, of no order ('' in the outbox), its event type in the detail; one log row" \
    "1|1|stripe|customer.created|1" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM paynotify_outbox WHERE notify_id = 'evt_citusCustomer0001') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE notify_id = 'evt_citusCustomer0001' AND event = 'notification' AND order_no = '') || '|' ||
                  (SELECT string_agg(detail->>'gateway' || '|' || (detail->>'event_type'), ',') FROM paynotify_outbox
                   WHERE notify_id = 'evt_citusCustomer0001') || '|' ||
                  (SELECT count(*) FROM payment_notify_log WHERE notify_id = 'evt_citusCustomer0001')" 2>&1)"
# an order paid over Stripe (a direct call above, else one of the
# restart's: with 4 shards PN00000001..3 hash to the shard of ''), on
# another node than the shard of '', else on another shard, if one is
dord=$(citus_q 0 "WITH c AS MATERIALIZED (SELECT order_no, trade_no FROM payment_record WHERE channel = 'stripe'
                      AND (order_no BETWEEN 'PN00000001' AND 'PN00000003'
                           OR order_no BETWEEN '$(printf 'PN%08d' $R0)' AND '$(printf 'PN%08d' $((R0 + M - 1)))')),
                  s AS (SELECT order_no, trade_no, get_shard_id_for_distribution_column('paynotify_outbox', order_no) AS shard
                        FROM c),
                  e AS (SELECT get_shard_id_for_distribution_column('paynotify_outbox', '') AS shard)
                  SELECT s.order_no || '|' || s.trade_no || '|' || (s.shard <> e.shard) || '|' || (ps.nodeport <> pe.nodeport)
                  FROM s, e, pg_dist_shard_placement ps, pg_dist_shard_placement pe
                  WHERE ps.shardid = s.shard AND pe.shardid = e.shard
                  ORDER BY ps.nodeport <> pe.nodeport DESC, s.shard <> e.shard DESC, s.order_no LIMIT 1" 2>&1)
IFS='|' read -r dorder dtrade dshard dnode <<<"$dord"
echo "# dispute: order $dorder (trade $dtrade); on another shard than '': $dshard, on another node: $dnode"
cat >"$STACK_DIR/dispute.json" <<EOF
{"id": "evt_citusDispute0001", "object": "event", "api_version": "2025-03-31.basil", "created": $now,
 "data": {"object": {"id": "dp_citus0001", "object": "dispute", "amount": 1234, "currency": "usd",
  "charge": "ch_citus0001", "payment_intent": "$dtrade", "reason": "fraudulent", "status": "needs_response",
  "metadata": {}, "is_charge_refundable": false}},
 "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": null},
 "type": "charge.dispute.created"}
EOF
shim/paynotify-send --gateway stripe --payload "$STACK_DIR/dispute.json" --mode one --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/dispute.sql" >/dev/null 2>&1
check "handed on: a charge.dispute.created for $dorder's payment intent on worker 2: processed" \
    processed "$(handle_on 2 "$STACK_DIR/dispute.sql")"
check "handed on: one event for it, dispute_opened for $dorder with the dispute's amount and id; no anomaly" \
    "1|dispute_opened|$dorder|1234|dp_citus0001|0" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM paynotify_outbox WHERE notify_id = 'evt_citusDispute0001') || '|' ||
                  (SELECT string_agg(event || '|' || order_no || '|' || amount || '|' || (detail->>'dispute_id'), ',')
                   FROM paynotify_outbox WHERE notify_id = 'evt_citusDispute0001') || '|' ||
                  (SELECT count(*) FROM paynotify_anomaly WHERE notify_id = 'evt_citusDispute0001')" 2>&1)"
check "handed on: the dispute recorded once, open, under $dorder (paynotify_dispute, on its order's shard)" \
    "dp_citus0001|$dorder|open|1234|evt_citusDispute0001" \
    "$(citus_q 0 "SELECT string_agg(dispute_id || '|' || order_no || '|' || status || '|' || amount || '|' || opened_notify_id, ',')
                  FROM paynotify_dispute WHERE order_no = '$dorder'" 2>&1)"
check "handed on: paynotify_trace_order($dorder) on the coordinator shows the dispute and its notification (keyed '')" \
    "dispute|evt_citusDispute0001|open,notification|evt_citusDispute0001|succeeded" \
    "$(citus_q 0 "SELECT string_agg(kind || '|' || notify_id || '|' || coalesce(detail->>'status', '') ||
                  CASE WHEN kind = 'notification' THEN coalesce(detail->>'order_no', '') ELSE '' END, ',' ORDER BY kind)
                  FROM paynotify_trace_order('$dorder') WHERE notify_id = 'evt_citusDispute0001'
                  AND kind IN ('dispute', 'notification')" 2>&1)"
tpc_h1=$(citus_2pc_count)
echo "# handed on: $((tpc_h1 - tpc_h0)) two-phase commit records from these three calls, $((SECONDS - t_h0)) s"
check "handed on: no prepared transaction left on any node (pg_prepared_xacts on the coordinator, worker 1, worker 2)" \
    "0 0 0" "$(for i in 0 1 2; do citus_q $i "SELECT count(*) FROM pg_prepared_xacts" 2>&1; done | tr '\n' ' ' | sed 's/ $//')"

# ---- agreements on the cluster ---------------------------------------------------------
# paynotify_agreement is a reference table; an agreement's notices name no
# order (log rows under '') and are never delegated, nor is a charge naming
# one (docs/SCALING.md).  An end first, on worker 2: parked; its sign on
# worker 1 applies both; an invoice of the ended subscription paid on the
# coordinator pays its order with the anomaly charge_after_agreement_ended.
subscription_event() {	# subscription_event ID TYPE STATUS: a Stripe event of subscription sub_citus0001
    cat >"$STACK_DIR/$1.json" <<EOF
{"id": "$1", "object": "event", "api_version": "2025-03-31.basil", "created": $now,
 "data": {"object": {"id": "sub_citus0001", "object": "subscription", "status": "$3",
  "metadata": {"order_id": "member-citus"},
  "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": "price_citus"}}]}}},
 "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": null},
 "type": "$2"}
EOF
    shim/paynotify-send --gateway stripe --payload "$STACK_DIR/$1.json" --mode one --keys test/vectors/keys \
        --quiet --dump-sql "$STACK_DIR/$1.sql" >/dev/null 2>&1
}
subscription_event evt_citusSubEnd0001 customer.subscription.deleted canceled
subscription_event evt_citusSubSign0001 customer.subscription.created active
check "agreements: a subscription's end on worker 2 before its sign: parked" \
    parked "$(handle_on 2 "$STACK_DIR/evt_citusSubEnd0001.sql")"
check "agreements: its sign on worker 1: processed" \
    processed "$(handle_on 1 "$STACK_DIR/evt_citusSubSign0001.sql")"
check "agreements: ended on every node (a reference table), signed then ended, both notifications succeeded" \
    "ended|member-citus|price_citus|2 ended|member-citus|price_citus|2 ended|member-citus|price_citus|2|agreement_signed,agreement_ended|succeeded,succeeded" \
    "$(for i in 0 1 2; do citus_q $i "SELECT state || '|' || merchant_ref || '|' || plan_id || '|' || cardinality(notify_ids)
                                      FROM paynotify_agreement WHERE agreement_id = 'sub_citus0001'" 2>&1; done | tr '\n' ' ' | sed 's/ $//')|$(
       citus_q 0 "SELECT string_agg(event, ',' ORDER BY id) FROM paynotify_outbox
                  WHERE notify_id IN ('evt_citusSubEnd0001', 'evt_citusSubSign0001')" 2>&1)|$(
       citus_q 0 "SELECT string_agg(status, ',') FROM payment_notify_log
                  WHERE notify_id IN ('evt_citusSubEnd0001', 'evt_citusSubSign0001')" 2>&1)"
citus_q 0 "INSERT INTO orders (order_no, status, amount_fen) VALUES ('CITUS-SUB-1', 'pending', 8888)" >/dev/null 2>&1
cat >"$STACK_DIR/invoice.json" <<EOF
{"id": "evt_citusInvoice0001", "object": "event", "api_version": "2025-03-31.basil", "created": $now,
 "data": {"object": {"id": "in_citus0001", "object": "invoice", "currency": "usd", "amount_paid": 8888,
  "billing_reason": "subscription_cycle", "metadata": {"order_id": "CITUS-SUB-1"},
  "parent": {"type": "subscription_details", "subscription_details": {"subscription": "sub_citus0001",
   "metadata": {"order_id": "member-citus"}}}}},
 "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": null},
 "type": "invoice.paid"}
EOF
shim/paynotify-send --gateway stripe --payload "$STACK_DIR/invoice.json" --mode one --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/invoice.sql" >/dev/null 2>&1
out=$(handle_on 0 "$STACK_DIR/invoice.sql")
check "agreements: invoice.paid of the ended subscription on the coordinator: processed, with the anomaly's warning" \
    "yes|processed" "$(echo "$out" | grep -q 'anomaly "charge_after_agreement_ended"' && echo yes)|${out##* }"
check "agreements: its order paid, the payment names the subscription, the anomaly charge_after_agreement_ended" \
    "paid|sub_citus0001|charge_after_agreement_ended" \
    "$(citus_q 0 "SELECT (SELECT status FROM orders WHERE order_no = 'CITUS-SUB-1') || '|' ||
                  (SELECT agreement_id FROM payment_record WHERE trade_no = 'in_citus0001') || '|' ||
                  (SELECT string_agg(kind, ',') FROM paynotify_anomaly WHERE notify_id = 'evt_citusInvoice0001')" 2>&1)"
check "agreements: no prepared transaction left on any node" \
    "0 0 0" "$(for i in 0 1 2; do citus_q $i "SELECT count(*) FROM pg_prepared_xacts" 2>&1; done | tr '\n' ' ' | sed 's/ $//')"

# ---- the operator's functions on the cluster ------------------------------------------
# As an operator's role (the admin capacity, on the coordinator), with
# answers equal to one server's: a notification failed by its hook retried
# (one by paynotify_retry, the others by paynotify_retry_failed), traced
# with its payment, history and event; the application's own moves (its
# UPDATE of orders, the guard on the shards) in the order history, and
# none of paynotify's own moves counted twice; a purge of old notifications
# on every shard that keeps the recent ones and one with an anomaly;
# paynotify_stats against each shard's own count; dead letters redelivered;
# an anomaly resolved; and the handler's and the relay's roles refused.
ops_q() { "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=${2:-notify_ops}" -c "$1" 2>&1; }
ops_state() { "$PN_PGBIN/psql" -X -q -tA -v VERBOSITY=sqlstate "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=$2" \
                  -c "$1" 2>&1 | tr -d '\n'; }
# (made after paynotify_distribute(): paynotify_grant's GRANTs on distributed and reference tables in one transaction)
out=$(citus_sql 0 -c "CREATE ROLE notify_ops LOGIN" -c "SELECT paynotify_grant('notify_ops', 'admin')" 2>&1)
check "ops: paynotify_grant(notify_ops, admin) on the coordinator after the distribution" "" "$(echo "$out" | grep -m1 ERROR)"
# paynotify_grant after a parallel GRANT on a distributed table in one
# transaction: refused by Citus; sequential mode first (docs/CITUS.md) lets it run
out=$(citus_sql 0 -v VERBOSITY=terse -c "CREATE ROLE notify_ops2" -c "BEGIN" -c "GRANT SELECT ON orders TO notify_ops2" \
          -c "SELECT paynotify_grant('notify_ops2', 'admin')" -c "ROLLBACK" 2>&1)
out2=$(citus_sql 0 -c "BEGIN" -c "SET LOCAL citus.multi_shard_modify_mode = sequential" -c "GRANT SELECT ON orders TO notify_ops2" \
           -c "SELECT paynotify_grant('notify_ops2', 'admin')" -c "COMMIT" 2>&1)
check "ops: paynotify_grant after a GRANT on orders in one transaction: refused (parallel operation); in sequential mode: granted" \
    "1||admin" \
    "$(echo "$out" | grep -c 'parallel operation on a distributed table')|$(echo "$out2" | grep -m1 ERROR)|$(
       citus_q 0 "SELECT string_agg(capacity, ',') FROM paynotify_role WHERE role = 'notify_ops2'")"
fo=$(printf 'PN%08d' $F0) fl=$(printf 'PN%08d' $((F0 + 3)))
# the hook fails while hook_faults says 100 (a reference table: read on every node)
citus_sql 0 >/dev/null <<'SQL'
CREATE OR REPLACE FUNCTION erp_hook(ev jsonb) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	IF EXISTS (SELECT FROM public.hook_faults WHERE fail_pct = 100) THEN
		RAISE EXCEPTION 'ERP unavailable (injected)';
	END IF;
	IF ev->>'channel' <> 'stripe' THEN
		INSERT INTO public.erp_calls (order_no, event) VALUES (ev->'notice'->>'order_no', ev->>'event');
	END IF;
END
$f$;
UPDATE hook_faults SET fail_pct = 100;
SQL
shim/paynotify-send --gateway wxpay --mode distinct -n 4 --start $F0 --seed 70 --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/fail.sql" >/dev/null 2>&1
check "ops: 4 WeChat Pay payments whose hook fails, on worker 1: failed, stored failed" "failed failed failed failed|4" \
    "$("$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[1]} dbname=postgres user=notify_shim" -f "$STACK_DIR/fail.sql" 2>/dev/null |
       grep -v '^$' | tr '\n' ' ' | sed 's/ $//')|$(citus_q 0 "SELECT count(*) FROM payment_notify_log WHERE channel = 'wxpay'
                                                       AND order_no BETWEEN '$fo' AND '$fl' AND status = 'failed' AND notice IS NOT NULL")"
fid=$(citus_q 0 "SELECT notify_id FROM payment_notify_log WHERE channel = 'wxpay' AND order_no = '$fo'")
check "ops: paynotify_retry(dry_run) on the coordinator, the hook still failing: failed, rolled back" \
    "wxpay|$fid|failed|failed|failed|pending" \
    "$(ops_q "SELECT channel || '|' || notify_id || '|' || status_before || '|' || outcome || '|' || status FROM paynotify_retry('wxpay', '$fid', true)" |
       grep -v '^WARNING:\|^DETAIL:')|$(citus_q 0 "SELECT status FROM orders WHERE order_no = '$fo'")"
citus_q 0 "UPDATE hook_faults SET fail_pct = 0" >/dev/null
check "ops: paynotify_retry of the failed notification: processed, succeeded; the order paid" \
    "failed|processed|succeeded||paid" \
    "$(ops_q "SELECT status_before || '|' || outcome || '|' || status || '|' || coalesce(error, '') FROM paynotify_retry('wxpay', '$fid')")|$(citus_q 0 "SELECT status FROM orders WHERE order_no = '$fo'")"
check "ops: paynotify_retry_failed('0 s') retries the 3 others (on both workers' shards): processed, succeeded" \
    "3|3|0" \
    "$(ops_q "SELECT count(*) || '|' || count(*) FILTER (WHERE status_before = 'failed' AND outcome = 'processed' AND status = 'succeeded')
              FROM paynotify_retry_failed('0 s')")|$(citus_q 0 "SELECT count(*) FROM payment_notify_log WHERE status = 'failed'")"
check "ops: the 4 retried: each order paid once (payment, paid event, hook call)" "4|4|4|4" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM orders WHERE status = 'paid' AND order_no BETWEEN '$fo' AND '$fl') || '|' ||
                  (SELECT count(*) FROM payment_record WHERE order_no BETWEEN '$fo' AND '$fl') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE event = 'paid' AND order_no BETWEEN '$fo' AND '$fl') || '|' ||
                  (SELECT count(*) FROM erp_calls WHERE event = 'paid' AND order_no BETWEEN '$fo' AND '$fl')")"
# the application moves orders itself (as the tables' owner: its own UPDATE, the guard on the shards)
co=$(printf 'PN%08d' $C0) cl=$(printf 'PN%08d' $((C0 + 3)))
citus_q 0 "UPDATE orders SET status = 'cancelled' WHERE order_no BETWEEN '$co' AND '$cl'" >/dev/null
citus_q 2 "UPDATE orders SET status = 'shipped' WHERE order_no = '$fo'" >/dev/null
citus_q 0 "SELECT paynotify_transit('$(printf 'PN%08d' $((F0 + 1)))', 'paid', 'shipped')" >/dev/null
check "ops: the application's moves in the order history (4 cancelled on the coordinator, 1 shipped on worker 2), as the application's, by its role" \
    "$co:pending>cancelled:postgres,$(printf 'PN%08d' $((C0 + 1))):pending>cancelled:postgres,$(printf 'PN%08d' $((C0 + 2))):pending>cancelled:postgres,$cl:pending>cancelled:postgres,$fo:paid>shipped:postgres" \
    "$(ops_q "SELECT string_agg(order_no || ':' || from_state || '>' || to_state || ':' || by_role, ',' ORDER BY to_state, order_no)
              FROM paynotify_order_history WHERE source = 'application'")"
check "ops: none of paynotify's moves recorded as the application's: one history row per payment applied (and the transit's)" \
    "0|1" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record r WHERE (SELECT count(*) FROM paynotify_order_history h
                       WHERE h.order_no = r.order_no AND h.from_state = 'pending' AND h.to_state = 'paid') <> 1) || '|' ||
                  (SELECT count(*) FROM paynotify_order_history WHERE order_no = '$(printf 'PN%08d' $((F0 + 1)))'
                   AND to_state = 'shipped' AND source = 'paynotify')")"
check "ops: paynotify_trace_order($fo) on the coordinator: the retried notification, its payment, event and both moves" \
    "notification:succeeded:2,outbox:paid,payment:$(citus_q 0 "SELECT trade_no FROM payment_record WHERE order_no = '$fo'"),state:pending>paid:paynotify,state:paid>shipped:application" \
    "$(ops_q "SELECT string_agg(kind || ':' || CASE kind WHEN 'notification' THEN (detail->>'status') || ':' || (detail->>'attempts')
                                                  WHEN 'outbox' THEN detail->>'event' WHEN 'payment' THEN detail->>'trade_no'
                                                  WHEN 'state' THEN (detail->>'from') || '>' || (detail->>'to') || ':' || (detail->>'source')
                                                  ELSE kind END, ',' ORDER BY at, kind)
              FROM paynotify_trace_order('$fo')")"
check "ops: paynotify_trace(wxpay, its id) gives the same rows as paynotify_trace_order but the application's move" \
    "$(ops_q "SELECT count(*) FROM paynotify_trace_order('$fo') WHERE NOT (kind = 'state' AND detail->>'source' = 'application')")" \
    "$(ops_q "SELECT count(*) FROM paynotify_trace('wxpay', '$fid')")"
# paynotify's mark of its own move (Citus: told to the shard's node) lives no
# longer than the move: not past a rolled-back savepoint, not when the shard
# is on the session's node (local execution), not when the move changed
# nothing; each time the application's later move is recorded as its own.
# Pending orders 4..10 (no notification), on a given worker's shard.
pend_on() {	# pend_on NODE [SKIP]: a pending order among 4..10 whose shard is on worker NODE
    citus_q 0 "WITH p AS MATERIALIZED (SELECT o.order_no FROM orders o WHERE o.status = 'pending'
                   AND o.order_no BETWEEN 'PN00000004' AND 'PN00000010' AND o.order_no <> '${2:-}')
               SELECT p.order_no FROM p JOIN citus_shards s
                 ON s.shardid = get_shard_id_for_distribution_column('orders', p.order_no) AND s.table_name = 'orders'::regclass
               WHERE s.nodeport = ${CITUS_PORTS[$1]} ORDER BY p.order_no LIMIT 1"
}
app_moves() { citus_q 0 "SELECT coalesce(string_agg(from_state || '>' || to_state || ':' || source, ',' ORDER BY id), '-')
                         FROM paynotify_order_history WHERE order_no = '$1'"; }
mk1=$(pend_on 2)
citus_hold 0 pn_lock_mark "SELECT 1 FROM orders WHERE order_no = '$mk1' FOR UPDATE" >/dev/null
citus_sql 0 >"$STACK_DIR/mark.out" 2>&1 <<SQL &
BEGIN;
SET LOCAL statement_timeout = '500ms';
DO \$\$ BEGIN PERFORM paynotify_transit('$mk1', 'pending', 'paid');
EXCEPTION WHEN query_canceled THEN RAISE NOTICE 'move cancelled'; END \$\$;
SET LOCAL statement_timeout = 0;
UPDATE orders SET status = 'paid' WHERE order_no = '$mk1';
COMMIT;
SQL
marker=$!
# the lock is released once the move has been cancelled (the UPDATE waits for it)
for _ in $(seq 1 1200); do
    grep -q 'move cancelled' "$STACK_DIR/mark.out" && break
    pn_alive "$marker" || break
    sleep 0.05
done
citus_release pn_lock_mark
wait $marker
out=$(cat "$STACK_DIR/mark.out")
check "ops: mark: paynotify_transit($mk1) cancelled in a savepoint, then the application's UPDATE: recorded as the application's" \
    "move cancelled|paid|pending>paid:application" \
    "$(echo "$out" | grep -o 'move cancelled' | head -1)|$(citus_q 0 "SELECT status FROM orders WHERE order_no = '$mk1'")|$(app_moves "$mk1")"
mk2=$(pend_on 1)
citus_q 1 "SELECT paynotify_transit('$mk2', 'pending', 'paid')" >/dev/null
out=$(citus_sql 1 -c "BEGIN" -c "SELECT paynotify_transit('$mk2', 'paid', 'refunding')" \
          -c "UPDATE orders SET status = 'paid' WHERE order_no = '$mk2'" \
          -c "UPDATE orders SET status = 'refunding' WHERE order_no = '$mk2'" -c "COMMIT" 2>&1)
check "ops: mark: on worker 1, $mk2's shard there: paynotify_transit, then the application's moves back and again: all four recorded" \
    "|pending>paid:paynotify,paid>refunding:paynotify,refunding>paid:application,paid>refunding:application" \
    "$(echo "$out" | grep -m1 ERROR)|$(app_moves "$mk2")"
mk3=$(pend_on 2 "$mk1")
out=$(citus_sql 0 -c "BEGIN" -c "SELECT paynotify_transit('$mk3', 'paid', 'refunding')" \
          -c "UPDATE orders SET status = 'paid' WHERE order_no = '$mk3'" \
          -c "UPDATE orders SET status = 'refunding' WHERE order_no = '$mk3'" -c "COMMIT" 2>&1)
check "ops: mark: paynotify_transit($mk3, paid, refunding) of a pending order (no move), then the application's two moves: both recorded" \
    "|pending>paid:application,paid>refunding:application" \
    "$(echo "$out" | grep -m1 ERROR)|$(app_moves "$mk3")"
# purge: 40 Stripe notifications made old (every shard), one of them with an anomaly, each with a delivery history row
po=$(printf 'PN%08d' $PU0) pl=$(printf 'PN%08d' $((PU0 + 39))) pk=$(printf 'PN%08d' $((PU0 + 5)))
citus_q 0 "UPDATE payment_notify_log SET last_seen = '2000-01-01', first_seen = '2000-01-01'
           WHERE channel = 'stripe' AND order_no BETWEEN '$po' AND '$pl'" >/dev/null
# (one row at a time: each takes its id from the coordinator's range)
citus_q 0 "SELECT format('INSERT INTO paynotify_delivery_history (channel, notify_id, order_no, outcome, http_status)
                          VALUES (%L, %L, %L, %L, 200);', channel, notify_id, order_no, 'processed')
           FROM payment_notify_log WHERE channel = 'stripe' AND order_no BETWEEN '$po' AND '$pl'
           UNION ALL
           SELECT format('INSERT INTO paynotify_anomaly (channel, notify_id, order_no, kind, detail)
                          VALUES (%L, %L, %L, %L, %L);', channel, notify_id, order_no, 'amount_mismatch', '{\"by\": \"citus.sh\"}')
           FROM payment_notify_log WHERE channel = 'stripe' AND order_no = '$pk'" | citus_sql 0 >/dev/null
stripe_before=$(citus_q 0 "SELECT count(*) FROM payment_notify_log WHERE channel = 'stripe'")
check "ops: 40 old Stripe notifications with a delivery row each, on every shard (${CITUS_SHARD_COUNT:-4})" "40|40|${CITUS_SHARD_COUNT:-4}" \
    "$(citus_q 0 "SELECT count(*) || '|' || count(DISTINCT get_shard_id_for_distribution_column('payment_notify_log', order_no))
                  FROM payment_notify_log WHERE channel = 'stripe' AND last_seen < now() - interval '10 days'" |
       sed "s/|/|$(citus_q 0 "SELECT count(*) FROM paynotify_delivery_history WHERE channel = 'stripe'")|/")"
check "ops: paynotify_purge('10 days', only_channel => stripe): 39 notifications and their 39 delivery rows deleted" \
    "stripe|10 days|39|39" \
    "$(ops_q "SELECT channel || '|' || kept || '|' || notifications || '|' || deliveries FROM paynotify_purge('10 days', only_channel => 'stripe')")"
check "ops: after the purge: the one with an anomaly kept (and its delivery row), every recent one kept, payments kept" \
    "$pk|1|$((stripe_before - 39))|40" \
    "$(citus_q 0 "SELECT (SELECT string_agg(order_no, ',') FROM payment_notify_log WHERE channel = 'stripe' AND last_seen < now() - interval '10 days') || '|' ||
                  (SELECT count(*) FROM paynotify_delivery_history WHERE channel = 'stripe') || '|' ||
                  (SELECT count(*) FROM payment_notify_log WHERE channel = 'stripe') || '|' ||
                  (SELECT count(*) FROM payment_record WHERE channel = 'stripe' AND order_no BETWEEN '$po' AND '$pl')")"
check "ops: paynotify_purge again: nothing more" "stripe|0|0" \
    "$(ops_q "SELECT channel || '|' || notifications || '|' || deliveries FROM paynotify_purge('10 days', only_channel => 'stripe')")"
# a purge whose first reads find only locked notifications goes on to the others:
# 10 more made old, 9 held FOR UPDATE by another session, the 10th made old last
# (each shard's scan reads it after its locked neighbours), one per batch
q0=$(printf 'PN%08d' $((PU0 + 40))) q8=$(printf 'PN%08d' $((PU0 + 48))) q9=$(printf 'PN%08d' $((PU0 + 49)))
citus_q 0 "UPDATE payment_notify_log SET last_seen = '2000-01-01' WHERE channel = 'stripe' AND order_no BETWEEN '$q0' AND '$q8'" >/dev/null
citus_q 0 "UPDATE payment_notify_log SET last_seen = '2000-01-01' WHERE channel = 'stripe' AND order_no = '$q9'" >/dev/null
locks=()
for i in $(seq 40 48); do
    locks+=("SELECT 1 FROM payment_notify_log WHERE channel = 'stripe' AND order_no = '$(printf 'PN%08d' $((PU0 + i)))' FOR UPDATE")
done
citus_hold 0 pn_lock_purge "${locks[@]}" >/dev/null
check "ops: paynotify_purge('10 days', 100, 1, stripe) with 9 of 10 old notifications locked: the 10th purged, the 9 kept" \
    "stripe|1|$q9|9" \
    "$(ops_q "SELECT channel || '|' || notifications FROM paynotify_purge('10 days', 100, 1, 'stripe')")|$(
       citus_q 0 "SELECT count(*) FILTER (WHERE order_no = '$q9') FROM payment_notify_log WHERE channel = 'stripe'" | sed "s/^0$/$q9/")|$(
       citus_q 0 "SELECT count(*) FROM payment_notify_log WHERE channel = 'stripe' AND order_no BETWEEN '$q0' AND '$q8'")"
citus_release pn_lock_purge
citus_q 0 "UPDATE payment_notify_log SET last_seen = now() WHERE channel = 'stripe' AND order_no BETWEEN '$q0' AND '$q8'" >/dev/null
# paynotify_stats against each shard's own count
shard_sum() {	# shard_sum TABLE EXPR: EXPR (comma-separated counts) summed over the table's shards
    citus_q 0 "SELECT string_agg(s::text, ',' ORDER BY i) FROM (
                 SELECT i, sum(split_part(result, ',', i)::bigint) s
                 FROM run_command_on_shards('$1', \$\$SELECT $2 FROM %s\$\$), generate_series(1, 9) i
                 WHERE success AND split_part(result, ',', i) <> '' GROUP BY i) x"
}
want=""
for ch in alipay stripe wxpay; do
    want+="$ch:$(shard_sum payment_notify_log "count(*) FILTER (WHERE channel = '$ch') || ',' || count(*) FILTER (WHERE channel = '$ch' AND status = 'succeeded') || ',' || count(*) FILTER (WHERE channel = '$ch' AND status = 'ignored') || ',' || count(*) FILTER (WHERE channel = '$ch' AND status = 'failed') || ',' || coalesce(sum(delivery_count) FILTER (WHERE channel = '$ch'), 0)"):$(shard_sum paynotify_anomaly "count(*) FILTER (WHERE channel = '$ch' AND resolved_at IS NULL)") "
done
check "ops: paynotify_stats as the operator: each channel's counts equal the sums of each shard's own counts" "${want% }" \
    "$(ops_q "SELECT string_agg(channel || ':' || notifications || ',' || succeeded || ',' || ignored || ',' || failed || ',' || deliveries || ':' || anomalies_unresolved, ' ' ORDER BY channel)
              FROM paynotify_stats WHERE channel IN ('alipay', 'stripe', 'wxpay')")"
check "ops: paynotify_stats counts something on each channel (the check can fail)" yes \
    "$(ops_q "SELECT CASE WHEN bool_and(notifications > 0) AND sum(anomalies_unresolved) >= 1 THEN 'yes' ELSE 'no' END FROM paynotify_stats WHERE channel IN ('alipay', 'stripe', 'wxpay')")"
# an anomaly resolved; dead letters back in the queue
aid=$(citus_q 0 "SELECT id FROM paynotify_anomaly WHERE order_no = '$pk'")
check "ops: paynotify_resolve_anomaly on the coordinator: resolved by the operator; a second time 55000" \
    "notify_ops|checked|ERROR:  55000" \
    "$(ops_q "SELECT resolved_by || '|' || note FROM paynotify_resolve_anomaly($aid, 'checked')")|$(ops_state "SELECT paynotify_resolve_anomaly($aid, 'again')" notify_ops)"
citus_q 0 "UPDATE paynotify_delivery SET delivered_at = NULL, dead_at = '2026-01-01', attempts = 9
           WHERE id IN (SELECT id FROM paynotify_delivery ORDER BY id LIMIT 6)" >/dev/null
one=$(citus_q 0 "SELECT id FROM paynotify_delivery WHERE dead_at IS NOT NULL ORDER BY id DESC LIMIT 1")
check "ops: 6 dead letters on $(citus_q 0 "SELECT count(DISTINCT get_shard_id_for_distribution_column('paynotify_delivery', order_no)) FROM paynotify_delivery WHERE dead_at IS NOT NULL") shards: paynotify_redeliver(delivery_id) puts one back, paynotify_redeliver() the 5 others" \
    "1|5|0|6" \
    "$(ops_q "SELECT paynotify_redeliver(NULL, $one)")|$(ops_q "SELECT paynotify_redeliver()")|$(citus_q 0 "SELECT count(*) FROM paynotify_delivery WHERE dead_at IS NOT NULL")|$(
       citus_q 0 "SELECT count(*) FROM paynotify_delivery WHERE delivered_at IS NULL AND attempts = 0 AND next_attempt_at IS NOT NULL")"
check "ops: paynotify_reconcile_summary of a day without a bill: P0002, as on one server" "ERROR:  P0002" \
    "$(ops_state "SELECT * FROM paynotify_reconcile_summary('stripe', current_date)" notify_ops)"
# the handler's and the relay's roles may call none of them
refused=""
for r in notify_shim notify_relay; do
    for sql in "SELECT * FROM paynotify_trace('wxpay', '$fid')" "SELECT * FROM paynotify_trace_order('$fo')" \
               "SELECT * FROM paynotify_retry('wxpay', '$fid')" "SELECT * FROM paynotify_retry_failed('0 s')" \
               "SELECT * FROM paynotify_purge('10 days')" "SELECT * FROM paynotify_stats" "SELECT paynotify_redeliver()" \
               "SELECT paynotify_resolve_anomaly($aid, 'x')" "SELECT * FROM paynotify_order_history"; do
        refused+="$(ops_state "$sql" $r | grep -o '42501' | head -1 || true) "
    done
done
check "ops: the handler's and the relay's roles refused (42501) by each of them on the coordinator, as on one server" \
    "$(printf '42501 %.0s' $(seq 1 18))" "$refused"

# ---- the model-based ledger test on the cluster --------------------------------------
if citus_database model; then
    dsn() { echo "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=model user=$2"; }
    # at most 15 deliveries of a notification (about 10 s of backing off):
    # a notification that cannot be applied ends the run in a verdict.
    # model_shim calls paynotify_handle on the workers too: run.sh gives it
    # the handler capacity on the coordinator, and paynotify_grant grants on
    # the node where it runs only, so the setup grants it on each worker
    # (run_command_on_workers; the setup fails where that fails). The hook,
    # in BEGIN ATOMIC, depends on hook_calls: Citus made it on the
    # coordinator only, and copies it to the workers once that is
    # distributed (create_distributed_function)
    t0=$SECONDS
    timeout "$MODEL_TIMEOUT" test/model/run.sh --orders "$MODEL_ORDERS" --self-check 50 --max-attempts 15 \
        --admin-dsn "$(dsn 0 postgres)" \
        --dsn "$(dsn 0 model_shim)" --dsn "$(dsn 1 model_shim)" --dsn "$(dsn 2 model_shim)" \
        --after-setup "SELECT pay.paynotify_distribute();
                       SELECT create_distributed_table('public.hook_calls', 'order_no', colocate_with => 'none');
                       SELECT create_distributed_function('public.record_hook(jsonb)');
                       DO \$\$ BEGIN
                           IF EXISTS (SELECT FROM run_command_on_workers(
                                          \$c\$SELECT pay.paynotify_grant('model_shim', 'handler')\$c\$) WHERE NOT success) THEN
                               RAISE EXCEPTION 'paynotify_grant(model_shim, handler) failed on a worker';
                           END IF;
                       END \$\$" \
        >"$STACK_DIR/model.out" 2>&1
    rc=$?
    # its verdict and summaries, without the stories of single orders
    sed -n 's/^/# /p' "$STACK_DIR/model.out" | grep -v '^# $\|^#   order\|^#     \|^#   [A-Z0-9]' | head -40
    echo "# model: $((SECONDS - t0)) s"
    [ $rc = 124 ] && echo "# model: stopped after $MODEL_TIMEOUT s (CITUS_MODEL_TIMEOUT), taken for a hang"
    check "model: all orders equal the model over the three nodes (exit 0)" "0|1" \
        "$rc|$(grep -c '^model: OK: all' "$STACK_DIR/model.out")"
else
    not_ok "model: a database of its own on the three nodes"
fi

check "no server crashed (no PANIC, no backend terminated by a signal)" "" \
    "$(grep -lE 'PANIC|server process .* was terminated' "${CITUS_DIRS[0]}/server.log" "${CITUS_DIRS[1]}/server.log" "${CITUS_DIRS[2]}/server.log" | tr '\n' ' ')"
summary
