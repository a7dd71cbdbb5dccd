#!/usr/bin/env bash
# paynotify on one node against a three-node Citus cluster: prints figures,
# asserts nothing.
#
#   test/bench/citus.sh [--smoke]
#
# --smoke: BENCH_CITUS_N 300 and BENCH_CITUS_SQL_N 100 unless set, to see
# that it still runs (the suite's test/bench/smoke-citus.sh); the figures
# mean little at that size.
#
# The same work on both: stack_schema's configuration, three FastCGI shims
# (4 workers each) behind one nginx upstream, paynotify-send delivering
# BENCH_CITUS_N distinct WeChat Pay notifications (default 8000, signed
# before the clock starts) at concurrency BENCH_CITUS_C (default 12):
#   one node   plain PostgreSQL 15 (no citus), the three shims on it
#   cluster    a coordinator and two workers (test/e2e/citus-lib.sh),
#              paynotify_distribute(), one shim per node
# Printed: notifications/s, latency p50/p99 (HTTP), and in-database
# notifications/s of one session calling paynotify_handle for
# BENCH_CITUS_SQL_N (default 1000) distinct Stripe notifications in a row
# (on the one node; on the cluster's coordinator and on a worker).  All
# nodes, nginx, the shims and the sender share one machine (nproc is
# printed): the cluster's figure is what three nodes on ONE machine give,
# not what three machines would.  Both sides run with fsync = off.
# Everything is started on loopback in temp dirs and stopped by pid.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
citus_ensure || exit 1
citus_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }

N=${BENCH_CITUS_N:-8000}
C=${BENCH_CITUS_C:-12}
SQLN=${BENCH_CITUS_SQL_N:-1000}
if [ "${1:-}" = --smoke ]; then
    N=${BENCH_CITUS_N:-300}
    SQLN=${BENCH_CITUS_SQL_N:-100}
fi
ORDERS=$((N + 2 * SQLN + 100))

# http LABEL: the distinct run through STACK_URL, one line of figures
http() {
    stack_send wxpay --mode distinct -n "$N" -c "$C" --start 1 --seed 7 --timeout 10 --quiet --json \
        >"$STACK_DIR/$1.json" 2>"$STACK_DIR/$1.err"
    python3 - "$STACK_DIR/$1.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = d["outcome"].get("processed", 0)
print(f"{sys.argv[2]:<28} {ok / d['elapsed_s']:8.0f} notifications/s over HTTP  "
      f"(p50 {d['latency_ms']['p50']:.1f} ms, p99 {d['latency_ms']['p99']:.1f} ms; "
      f"{ok} of {d['deliveries']} processed, status {d['status']})")
PY
}
# indb LABEL PORT START: one session calling paynotify_handle SQLN times for
# distinct Stripe notifications of orders START..., on 127.0.0.1:PORT
indb() {
    shim/paynotify-send --gateway stripe --mode distinct -n "$SQLN" --start "$3" --seed 8 \
        --keys test/vectors/keys --dump-sql "$STACK_DIR/indb-$2.sql" >/dev/null 2>&1
    local t0 t1 got
    t0=$(date +%s.%N)
    got=$("$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=$2 dbname=postgres user=notify_shim" \
        -f "$STACK_DIR/indb-$2.sql" 2>&1 | grep -c '^processed$')
    t1=$(date +%s.%N)
    python3 -c "import sys; n=int(sys.argv[2]); print(f'{sys.argv[1]:<28} {n / ($t1 - $t0):8.0f} notifications/s in one session  ({n} of $SQLN processed)')" "$1" "$got"
}

echo "# $(nproc) CPUs on this machine; every node, nginx, the shims and the sender share them"
echo "# $N distinct WeChat Pay notifications over HTTP at concurrency $C, 3 shims x 4 workers"

# ---- one node ----------------------------------------------------------------------
stack_init bench-citus1
stack_pg "fsync = off" || exit 1
stack_schema 0 "$ORDERS" >/dev/null || exit 1
for i in 0 1 2; do
    STACK_DSN="host=127.0.0.1 port=$STACK_PGPORT dbname=postgres user=notify_shim" stack_shim_named "shim$i" 4 || exit 1
done
stack_nginx_upstream "$STACK_DIR/run/shim0.sock" "$STACK_DIR/run/shim1.sock" "$STACK_DIR/run/shim2.sock" || exit 1
http "one node"
indb "one node" "$STACK_PGPORT" $((N + 10))
stack_stop

# ---- the cluster ---------------------------------------------------------------------
stack_init bench-citus3
trap citus_stop EXIT
citus_cluster || exit 1
citus_schema "$ORDERS" >/dev/null 2>"$STACK_DIR/schema.err" ||
    { grep -E 'ERROR|FATAL' "$STACK_DIR/schema.err"; echo "the cluster could not be set up (paynotify_distribute)"; exit 1; }
citus_shims 4 || exit 1
http "3-node cluster"
indb "3-node cluster, coordinator" "${CITUS_PORTS[0]}" $((N + 10))
indb "3-node cluster, worker 1" "${CITUS_PORTS[1]}" $((N + SQLN + 20))
echo "# (the cluster: three PostgreSQL servers on the same $(nproc) CPUs; on separate machines each node has its own)"
