#!/usr/bin/env bash
# paynotify_handle's commit setting on Citus: a coordinator and two workers
# on loopback (test/e2e/citus-lib.sh), wal_writer_delay = 10s so that an
# asynchronous commit stays unflushed.
#
#   test/e2e/citus_commit.sh
#
# A repeat of a settled notification relaxes its transaction's commit only
# when nothing else is written in it.  On Citus, a transaction that wrote on
# two nodes records its decision (pg_dist_transaction rows, then the commit
# record) on the node that ran it, in Citus's pre-commit callback, after
# paynotify's: that record must be flushed before the prepared transactions
# are committed on the nodes, or a crash in between loses it and Citus's
# recovery rolls back what one node has committed already.  Checked: a
# repeat on the coordinator (its counter on the order's worker), then the
# application's row on the other worker, in one statement: two-phase
# commit, and the coordinator's commit is flushed when it returns (as after
# a first delivery with the same write; the check reads the WAL flush
# position, as test/e2e/pipeline.sh does).  Then with every server's
# default synchronous_commit 'off': a first delivery on the coordinator
# whose order is on a worker writes only there, and that worker commits it
# with its own session's setting: it is flushed there when the call returns.
# So is a first delivery after which the caller's SET LOCAL
# synchronous_commit = off reached the worker (citus.propagate_set_commands
# = local; in a transaction block, a DO block, a procedure that commits),
# and a known id signed with another order whose shard is on the same
# worker ("ignored": its anomaly and the first order's counter).  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
pass=0 fail=0
citus_begin citus-commit
citus_cluster "wal_writer_delay = 10s" "autovacuum = off" || exit 1
citus_schema 20 >/dev/null 2>&1 || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
for i in 1 2 3 4 5 6 7 20; do
    shim/paynotify-send --gateway stripe --mode distinct -n 1 --start "$i" --seed $((70 + i)) --keys test/vectors/keys \
        --quiet --dump-sql "$STACK_DIR/n$i.sql" >/dev/null 2>&1
done
# each notification's call kept in a table, the application's table
# distributed beside orders, and the probe: the call, the application's row,
# then the WAL insert position before the commit
citus_sql 0 >/dev/null <<SQL || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
CREATE TABLE inbox (n int PRIMARY KEY, call text NOT NULL);
SELECT create_reference_table('inbox');
INSERT INTO inbox VALUES (1, \$q\$$(sed 's/;$//' "$STACK_DIR/n1.sql")\$q\$), (2, \$q\$$(sed 's/;$//' "$STACK_DIR/n2.sql")\$q\$);
GRANT SELECT ON inbox TO notify_shim;
CREATE TABLE app_rows (order_no text NOT NULL, note text);
SELECT create_distributed_table('app_rows', 'order_no', colocate_with => 'orders');
GRANT INSERT ON app_rows TO notify_shim;
CREATE FUNCTION probe(n int, k text) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
	o text;
BEGIN
	EXECUTE (SELECT i.call FROM inbox i WHERE i.n = probe.n) INTO o;
	INSERT INTO app_rows VALUES (k, 'after notification ' || n);
	RETURN o || ' ' || pg_current_wal_insert_lsn();
END \$\$;
SQL
node_of() { citus_q 0 "SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column('orders', '$1')"; }
# an application key whose shard is on another worker than order $1's
other_key() {
    local on k
    on=$(node_of "$1")
    for k in $(seq 1 200); do
        [ "$(node_of "K$k")" != "$on" ] && [ "$(node_of "K$k")" != "${CITUS_PORTS[0]}" ] && { echo "K$k"; return; }
    done
}
as_app() { "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_shim" "$@"; }
# run N KEY: probe(N, KEY) as the application on the coordinator; prints its
# outcome and whether the commit flushed past the position before it
run() {
    local out lsn
    out=$(as_app -c "SELECT probe($1, '$2')" 2>&1) || { echo "$out"; return; }
    lsn=${out##* }
    echo "${out% *} $(citus_q 0 "SELECT pg_current_wal_flush_lsn() > '$lsn'::pg_lsn")"
}
# synchronous WANT N KEY: up to three runs until one prints WANT (an
# asynchronous commit whose record starts a new WAL page wakes the WAL
# writer; see pipeline.sh)
synchronous() {
    local want=$1 got
    shift
    for _ in 1 2 3; do
        got=$(run "$@")
        [ "$got" = "$want" ] || break
    done
    echo "$got"
}
k1=$(other_key PN00000001) k2=$(other_key PN00000002)
echo "# order PN00000001 on :$(node_of PN00000001), the application's row $k1 on :$(node_of "$k1")"
echo "# order PN00000002 on :$(node_of PN00000002), the application's row $k2 on :$(node_of "$k2")"
before=$(citus_2pc_count)
check "a first delivery, then the application's row on the other worker: synchronous" "processed t" "$(run 1 "$k1")"
check "that was a two-phase commit (its records on the coordinator)" "1" \
    "$(( $(citus_2pc_count) > before ))"
before=$(citus_2pc_count)
check "a repeat, then the application's row on the other worker: synchronous (three times)" "duplicate t" \
    "$(synchronous "duplicate t" 1 "$k1")"
check "those were two-phase commits" "1" "$(( $(citus_2pc_count) > before ))"
check "a first delivery of another order: synchronous" "processed t" "$(run 2 "$k2")"
check "the session's setting is the caller's afterwards" "on" "$(as_app -c "SHOW synchronous_commit")"

# Every server's default 'off' (paynotify raises it for its transactions):
# a first delivery on the coordinator writes only on its order's worker,
# which commits it (no two-phase commit) with its own session's setting
for i in 0 1 2; do
    citus_sql $i -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null
done
sleep 0.5
for o in 3 4 5; do
    port=$(node_of PN0000000$o)
    for w in 1 2; do [ "${CITUS_PORTS[w]}" = "$port" ] && break; done
    mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
    out=$(as_app -f "$STACK_DIR/n$o.sql" 2>&1)
    check "servers' default 'off': a first delivery on the coordinator (order PN0000000$o on worker $w) is committed there synchronously" \
        "processed t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
done
port=$(node_of PN00000003)
for w in 1 2; do [ "${CITUS_PORTS[w]}" = "$port" ] && break; done
mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
out=$(PGOPTIONS="-c synchronous_commit=on" as_app -f "$STACK_DIR/n3.sql" 2>&1)
check "servers' default 'off', the caller's 'on': a repeat on the coordinator is committed synchronously on its order's worker" \
    "duplicate t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
out=$(as_app -f "$STACK_DIR/n3.sql" 2>&1)
check "servers' default 'off', the caller's too: a repeat on the coordinator is committed synchronously on its order's worker (whose standbys the coordinator cannot see)" \
    "duplicate t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
# the caller lowers the level after the call with SET LOCAL, which Citus
# sends to the nodes in the transaction (citus.propagate_set_commands =
# local): the commit raises it again on the order's node too
port=$(node_of PN00000006)
for w in 1 2; do [ "${CITUS_PORTS[w]}" = "$port" ] && break; done
mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
out=$(as_app -c "SET citus.propagate_set_commands = local" -c "BEGIN" -f "$STACK_DIR/n6.sql" \
    -c "SET LOCAL synchronous_commit = off" -c "COMMIT" 2>&1)
check "servers' default 'off': a first delivery, then the caller's SET LOCAL synchronous_commit = off sent to the nodes (citus.propagate_set_commands = local): committed synchronously on its order's worker" \
    "processed t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
# ...and the same in a DO block that is its own transaction (the SET LOCAL
# is sent from inside it, the commit comes after it)
port=$(node_of PN00000007)
for w in 1 2; do [ "${CITUS_PORTS[w]}" = "$port" ] && break; done
mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
out=$(as_app -c "SET citus.propagate_set_commands = local" -c "DO \$d\$ DECLARE o text; BEGIN
    EXECUTE \$q\$$(sed 's/;$//' "$STACK_DIR/n7.sql")\$q\$ INTO o; RAISE NOTICE '%', o;
    SET LOCAL synchronous_commit = off; END \$d\$" 2>&1)
check "servers' default 'off': the same in a DO block that is its own transaction: committed synchronously on its order's worker" \
    "NOTICE:  processed t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
# ...and in a procedure that commits after it
citus_sql 0 >/dev/null <<SQL
CREATE PROCEDURE pay_then_commit(o INOUT text) LANGUAGE plpgsql AS \$p\$
BEGIN
	EXECUTE \$q\$$(sed 's/;$//' "$STACK_DIR/n20.sql")\$q\$ INTO o;
	SET LOCAL synchronous_commit = off;
	COMMIT;
END \$p\$;
GRANT EXECUTE ON PROCEDURE pay_then_commit(text) TO notify_shim;
SQL
port=$(node_of PN00000020)
for w in 1 2; do [ "${CITUS_PORTS[w]}" = "$port" ] && break; done
mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
out=$(as_app -c "SET citus.propagate_set_commands = local" -c "CALL pay_then_commit(NULL)" 2>&1)
check "servers' default 'off': the same in a procedure that commits after it: committed synchronously on its order's worker" \
    "processed t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
# one id signed with another order (payload_differs_for_same_id): the
# anomaly goes to the new order's shard and the delivery counter to the
# first order's log row; with both shards on one worker (one-phase commit
# there) the acknowledged "ignored" is committed synchronously on it
for i in $(seq 8 19); do
    port=$(node_of "$(printf PN%08d "$i")")
    [ "$port" = "$(node_of "$(printf PX%08d "$i")")" ] && [ "$port" != "${CITUS_PORTS[0]}" ] && break
done
for w in 1 2; do [ "${CITUS_PORTS[w]}" = "$port" ] && break; done
for f in PN PX; do
    shim/paynotify-send --gateway stripe --mode distinct -n 1 --start "$i" --seed 90 --order-format "$f%08d" \
        --keys test/vectors/keys --quiet --dump-sql "$STACK_DIR/$f.sql" >/dev/null 2>&1
done
check "order $(printf PN%08d "$i") paid first" "processed" "$(as_app -f "$STACK_DIR/PN.sql" 2>&1)"
mark=$(citus_q $w "SELECT pg_current_wal_insert_lsn()")
out=$(as_app -c "SET client_min_messages = error" -f "$STACK_DIR/PX.sql" 2>&1)
check "servers' default 'off': its id signed with order $(printf PX%08d "$i") (shard on the same worker $w) is ignored and committed synchronously there" \
    "ignored t" "$out $(citus_q $w "SELECT pg_current_wal_flush_lsn() > '$mark'::pg_lsn")"
check "...and the anomaly recorded" "1" \
    "$(citus_q 0 "SELECT count(*) FROM paynotify_anomaly WHERE order_no = '$(printf PX%08d "$i")' AND kind = 'payload_differs_for_same_id'")"
check "...and applied" "6" "$(citus_q 0 "SELECT count(*) FROM payment_notify_log WHERE order_no IN ('PN00000003', 'PN00000004', 'PN00000005', 'PN00000006', 'PN00000007', 'PN00000020') AND status = 'succeeded'")"
finish
