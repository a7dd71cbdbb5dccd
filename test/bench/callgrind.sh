#!/usr/bin/env bash
# paynotify_handle's CPU per first delivery, in instructions: prints figures,
# asserts nothing.  Deterministic (callgrind counts instructions, so other
# load on the machine does not change it), which makes it the measure to
# compare a change against.
#
#   test/bench/callgrind.sh [--smoke] [K]
#
# --smoke: K = 10 unless given, to see that it still runs (the suite's
# test/bench/smoke.sh); the figure means little at that size.
# The same schema and WeChat notifications as test/bench/run.sh db, in a
# single-user backend under callgrind: K first deliveries (default 100, a
# prepared statement as pgbench -M prepared runs it) and then 2K in a fresh
# backend, counting only statement processing (parse, plan, run, start and
# commit of the transaction); (cost(2K) - cost(K)) / K is the marginal cost
# of one delivery with warm caches, start-up and one-time loading cancel
# out.  Waiting for the WAL flush costs no instructions, so it is not in
# the figure.  The same for the plain-SQL baseline, and paynotify's cost
# divided by the baseline's.  enable_seqscan is off for both (paynotify_handle
# sets it for its own statements): with the few hundred orders here the
# baseline's UPDATE would otherwise scan the whole orders table, where
# run.sh's 40,000 orders take the primary key.  CALLGRIND_NOTIFY=on|
# coalesced|off sets paynotify.notify; CALLGRIND_KEEP=DIR keeps the
# callgrind.out files there for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/bench/baseline.sh
k_default=100
[ "${1:-}" = --smoke ] && { shift; k_default=10; }
k=${1:-$k_default}
n=$((3 * k + 10))
now=1767225600

# (PN_BENCH_BUILT=1: built and installed already, by test/bench/smoke.sh)
if [ -z "${PN_BENCH_BUILT:-}" ]; then
    pn_install
    make -s -C shim >/dev/null
fi
stack_init callgrind
stack_pg
SQL() { stack_sql "$@"; }
stack_schema 0 "$n"
SQL -q -c "ALTER DATABASE postgres SET paynotify.now = $now" -c "DELETE FROM paynotify_hook" \
    ${CALLGRIND_NOTIFY:+-c "ALTER DATABASE postgres SET paynotify.notify = $CALLGRIND_NOTIFY"} >/dev/null
shim/paynotify-send --gateway wxpay --keys test/vectors/keys --mode distinct -n "$n" \
    --now "$now" --seed 42 --channel wxpay --quiet --dump-sql "$STACK_DIR/signed.sql"
bench_baseline_load
SQL -q -c "INSERT INTO bench.orders_b SELECT * FROM public.orders" -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
pn_cluster_stop "$STACK_DIR/pg"

# cost FIRST COUNT KIND: total instructions of COUNT statements in one
# single-user backend, ids FIRST.. (every one a first delivery).
cost() {
    local first=$1 count=$2 kind=$3 script out
    script=$STACK_DIR/cg-$kind-$count.sql
    out=$STACK_DIR/callgrind.$kind.$count
    {
    if [ "$kind" = handle ]; then
        echo "PREPARE q(int) AS SELECT h.outcome FROM bench.req r, LATERAL paynotify_handle('wxpay', r.headers, r.body) h WHERE r.id = \$1"
    else
        echo "PREPARE q(int) AS SELECT bench.baseline(\$1)"
    fi
    for i in $(seq "$first" $((first + count - 1))); do
        echo "EXECUTE q($i)"
    done
    } >"$script"
    chmod 644 "$script"
    touch "$out" && chown "$PN_RUNUSER" "$out"
    pn_as_user valgrind --tool=callgrind --callgrind-out-file="$out" \
        --toggle-collect=pg_parse_query --toggle-collect=pg_analyze_and_rewrite_fixedparams \
        --toggle-collect=pg_plan_queries --toggle-collect=PortalStart --toggle-collect=PortalRun \
        --toggle-collect=PortalDrop --toggle-collect=StartTransactionCommand \
        --toggle-collect=CommitTransactionCommand \
        "$PN_PGBIN/postgres" --single -D "$STACK_DIR/pg/data" -c shared_buffers=64MB -c paynotify.now=$now \
        -c enable_seqscan=off \
        ${CALLGRIND_NOTIFY:+-c paynotify.notify=$CALLGRIND_NOTIFY} postgres \
        <"$script" >"$STACK_DIR/cg-$kind-$count.log" 2>&1 || { tail -20 "$STACK_DIR/cg-$kind-$count.log" >&2; return 1; }
    if [ -n "${CALLGRIND_KEEP:-}" ]; then cp "$out" "$CALLGRIND_KEEP/"; cp "$STACK_DIR/cg-$kind-$count.log" "$CALLGRIND_KEEP/"; fi
    sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out"
}

declare -A per
for kind in handle baseline; do
    a=$(cost 1 "$k" "$kind")
    b=$(cost $((k + 1)) $((2 * k)) "$kind")
    per[$kind]=$(( (b - a) / k ))
done
printf 'instructions per first delivery (marginal, %d vs %d statements): paynotify_handle %d, baseline %d, paynotify/baseline %s\n' \
    "$k" $((2 * k)) "${per[handle]}" "${per[baseline]}" \
    "$(python3 -c "print(f'{${per[handle]} / ${per[baseline]}:.2f}')")"
