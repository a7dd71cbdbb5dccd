#!/usr/bin/env bash
# What delegating the business step to the order's node gives on Citus
# (docs/CITUS.md, "The business step delegated to the order's node"):
# paynotify's own delegated step and a stand-in for it, measured.  Prints
# figures, asserts nothing.
#
#   test/bench/citus-delegate.sh [--smoke]
#
# --smoke: BENCH_DELEGATE_N 20 unless set, to see that it still runs (the
# suite's test/bench/smoke-citus.sh); the figures mean little at that size.
#
# It also times paynotify's own step delegated (1.4, paynotify_step_at:
# paynotify_handle with no hook registered, on one node and on the cluster).
# And a stand-in for it: pn_step_standin(order_no, channel, notify_id, trade_no,
# amount), a PL/pgSQL function that takes the notification's advisory lock,
# writes the log row (ON CONFLICT DO NOTHING), moves the order (through the
# guard trigger), writes the payment and an outbox row and sets the commit
# level, the statements of a first WeChat Pay payment minus the history,
# the order's event sequence and the hook.  It is called through SPI from a
# SECURITY DEFINER function with the order number as a constant
# (SELECT * FROM pn_step_standin('PN...', ...)), and on the cluster
# distributed with create_distributed_function(..., 'p_order', colocate_with
# => 'orders', force_delegation => true).
#
# Printed, for one session making BENCH_DELEGATE_N (default 300) first
# deliveries in a row: calls/s and server CPU per call summed over every
# process of every PostgreSQL server (from /proc, as test/bench/run.sh db
# does), of
#   one node   paynotify_handle (Stripe), and the stand-in called in place
#   cluster    paynotify_handle on the coordinator and on a worker (today's
#              routing: every statement a round trip), the stand-in
#              routed statement by statement (not distributed) with the
#              two cross-shard reads in front and without them, delegated
#              with them and without them, and an empty step delegated
# and the remote commands (citus.log_remote_commands) of one first
# delivery for each.  Everything on one machine (nproc printed), fsync off.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
citus_ensure || exit 1
citus_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }

N=${BENCH_DELEGATE_N:-300}
[ "${1:-}" = --smoke ] && N=${BENCH_DELEGATE_N:-20}
ORDERS=$((12 * N + 100))

STANDIN=$(cat <<'SQL'
SET client_min_messages = warning;
CREATE FUNCTION public.pn_step_standin(p_order text, p_channel text, p_notify text, p_trade text, p_amount bigint)
RETURNS TABLE(outcome text) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE n int;
BEGIN
  PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(p_channel), pg_catalog.hashtext(p_notify));
  INSERT INTO public.payment_notify_log (channel, notify_id, order_no, status)
    VALUES (p_channel, p_notify, p_order, 'succeeded') ON CONFLICT DO NOTHING;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n = 0 THEN RETURN QUERY SELECT 'duplicate'::text; RETURN; END IF;
  UPDATE public.orders SET status = 'paid' WHERE order_no = p_order AND status = 'pending';
  INSERT INTO public.payment_record (channel, trade_no, order_no, amount, currency, notify_id)
    VALUES (p_channel, p_trade, p_order, p_amount, 'CNY', p_notify) ON CONFLICT DO NOTHING;
  INSERT INTO public.paynotify_outbox (event, channel, order_no, notify_id, amount)
    VALUES ('paid', p_channel, p_order, p_notify, p_amount);
  PERFORM pg_catalog.set_config('synchronous_commit', 'on', true);
  RETURN QUERY SELECT 'processed'::text;
END $$;
REVOKE EXECUTE ON FUNCTION public.pn_step_standin(text, text, text, text, bigint) FROM PUBLIC;
-- the caller: the step alone, or after the two cross-shard reads
CREATE FUNCTION public.pn_handle_standin(p_order text, p_channel text, p_notify text, p_trade text,
    p_amount bigint, p_reads boolean)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE r record; a bigint; b bigint;
BEGIN
  IF p_reads THEN
    SELECT count(*) INTO a FROM public.payment_notify_log WHERE channel = p_channel AND notify_id = p_notify;
    SELECT count(*) INTO b FROM public.payment_record WHERE channel = p_channel AND trade_no = p_trade;
  END IF;
  EXECUTE pg_catalog.format('SELECT * FROM public.pn_step_standin(%L, %L, %L, %L, %s)',
    p_order, p_channel, p_notify, p_trade, p_amount) INTO r;
  RETURN r.outcome;
END $$;
GRANT EXECUTE ON FUNCTION public.pn_handle_standin(text, text, text, text, bigint, boolean) TO notify_shim;
-- the round trip alone: a step that does nothing
CREATE FUNCTION public.pn_step_empty(p_order text) RETURNS TABLE(outcome text) LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$ BEGIN RETURN QUERY SELECT 'processed'::text; END $$;
CREATE FUNCTION public.pn_handle_empty(p_order text) RETURNS text LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE r record;
BEGIN
  EXECUTE pg_catalog.format('SELECT * FROM public.pn_step_empty(%L)', p_order) INTO r;
  RETURN r.outcome;
END $$;
GRANT EXECUTE ON FUNCTION public.pn_handle_empty(text) TO notify_shim;
SQL
)

# server_cpu: utime+stime (clock ticks) of every process of every server
# started (the postmasters with what they reaped, and their live children)
server_cpu() {
    local d pids=()
    for d in "${CITUS_DIRS[@]:-$STACK_DIR/pg}"; do pids+=("$(head -1 "$d/data/postmaster.pid")"); done
    python3 - "${pids[@]}" <<'PY'
import subprocess, sys
total = 0
for pm in sys.argv[1:]:
    kids = subprocess.run(["ps", "-o", "pid=", "--ppid", pm], capture_output=True, text=True).stdout.split()
    for i, pid in enumerate([pm] + kids):
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12])
        if i == 0:
            total += int(f[13]) + int(f[14])
print(total)
PY
}

# run LABEL PORT FILE: FILE's statements in one session as the shim's role;
# calls/s and server CPU per processed call
run() {
    local c0 c1 t0 t1 ok
    c0=$(server_cpu)
    t0=$(date +%s.%N)
    ok=$("$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=$2 dbname=postgres user=notify_shim" -f "$3" 2>&1 |
        grep -c '^processed$')
    t1=$(date +%s.%N)
    c1=$(server_cpu)
    python3 -c "import os, sys; n = int(sys.argv[2]); print(f'{sys.argv[1]:<44} {n / ($t1 - $t0):6.0f}/s  {($c1 - $c0) * 1e6 / os.sysconf(\"SC_CLK_TCK\") / max(n, 1):6.0f} us CPU per call  ({n} of $N processed)')" "$1" "$ok"
}

# standin_sql FILE START READS: N calls of the stand-in for orders START...
standin_sql() {
    local i o
    : >"$1"
    for ((i = 0; i < N; i++)); do
        o=$(($2 + i))
        printf "SELECT public.pn_handle_standin('PN%08d', 'wxpay', 'sd-%d', 'td-%d', 100, %s);\n" "$o" "$o" "$o" "$3" >>"$1"
    done
}

# empty_sql FILE START: N calls of the empty step for orders START...
empty_sql() {
    local i
    : >"$1"
    for ((i = 0; i < N; i++)); do printf "SELECT public.pn_handle_empty('PN%08d');\n" $(($2 + i)) >>"$1"; done
}

# idle LABEL: the servers' CPU over 3 s of nothing, per second
idle() {
    local c0 c1
    c0=$(server_cpu)
    sleep 3
    c1=$(server_cpu)
    python3 -c "import os; print(f'{\"$1\":<44} {($c1 - $c0) * 1e6 / os.sysconf(\"SC_CLK_TCK\") / 3:6.0f} us CPU per second, idle')"
}

# handle_sql FILE START: N distinct Stripe notifications for orders START...
handle_sql() {
    shim/paynotify-send --gateway stripe --mode distinct -n "$N" --start "$2" --seed 8 \
        --keys test/vectors/keys --dump-sql "$1" >/dev/null 2>&1
}

# remote LABEL PORT SQL: the remote commands of one statement, as a
# superuser (paynotify keeps Citus's messages of them from other roles)
remote() {
    local out
    out=$("$PN_PGBIN/psql" -X -q "host=127.0.0.1 port=$2 dbname=postgres user=postgres" \
        -c "SET citus.log_remote_commands = on" -c "SET client_min_messages = log" -c "$3" 2>&1)
    printf '%-44s %3d remote commands, %3d run locally (%s)\n' "$1" "$(grep -c 'issuing' <<<"$out")" \
        "$(grep -c 'executing the command locally' <<<"$out")" "$(grep -m1 -oE '^ *(processed|duplicate)' <<<"$out" | tr -d ' ')"
}

echo "# $(nproc) CPUs on this machine, shared by every server; $N first deliveries per figure, one session"

# ---- one node ------------------------------------------------------------------------
stack_init bench-delegate1
stack_pg "fsync = off" || exit 1
stack_schema 0 "$ORDERS" >/dev/null || exit 1
stack_sql -q -v ON_ERROR_STOP=1 -c "$STANDIN" >/dev/null || exit 1
handle_sql "$STACK_DIR/h.sql" 1
run "one node: paynotify_handle" "$STACK_PGPORT" "$STACK_DIR/h.sql"
standin_sql "$STACK_DIR/s.sql" $((N + 1)) false
run "one node: stand-in" "$STACK_PGPORT" "$STACK_DIR/s.sql"
empty_sql "$STACK_DIR/e.sql" 1
run "one node: empty step" "$STACK_PGPORT" "$STACK_DIR/e.sql"
# paynotify_handle without the hook, as on the cluster below (delegated there)
stack_sql -q -c "DELETE FROM paynotify_hook" >/dev/null || exit 1
handle_sql "$STACK_DIR/hn.sql" $((9 * N + 1))
run "one node: paynotify_handle, no hook" "$STACK_PGPORT" "$STACK_DIR/hn.sql"
idle "one node"
stack_stop

# ---- the cluster ---------------------------------------------------------------------
stack_init bench-delegate3
trap citus_stop EXIT
citus_cluster || exit 1
citus_schema "$ORDERS" >/dev/null 2>"$STACK_DIR/schema.err" ||
    { grep -E 'ERROR|FATAL' "$STACK_DIR/schema.err"; echo "the cluster could not be set up"; exit 1; }
# routed: the stand-in as it is (Citus creates it on every node, not delegated)
citus_sql 0 -c "$STANDIN" >/dev/null || exit 1
W=${CITUS_PORTS[1]}
handle_sql "$STACK_DIR/h0.sql" 1
run "cluster: paynotify_handle on the coordinator" "${CITUS_PORTS[0]}" "$STACK_DIR/h0.sql"
handle_sql "$STACK_DIR/h1.sql" $((N + 1))
run "cluster: paynotify_handle on worker 1" "$W" "$STACK_DIR/h1.sql"
standin_sql "$STACK_DIR/s0.sql" $((2 * N + 1)) true
run "cluster: stand-in routed, with the reads" "${CITUS_PORTS[0]}" "$STACK_DIR/s0.sql"
standin_sql "$STACK_DIR/s4.sql" $((6 * N + 1)) false
run "cluster: stand-in routed, coordinator" "${CITUS_PORTS[0]}" "$STACK_DIR/s4.sql"
handle_sql "$STACK_DIR/r.sql" $((8 * N + 1))
remote "remote commands: paynotify_handle, coordinator" "${CITUS_PORTS[0]}" "$(sed -n 1p "$STACK_DIR/r.sql")"
remote "remote commands: stand-in routed with reads" "${CITUS_PORTS[0]}" \
    "SELECT public.pn_handle_standin('PN$(printf %08d $((8 * N + 3)))', 'wxpay', 'sd-r1', 'td-r1', 100, true)"
idle "cluster"
empty_sql "$STACK_DIR/e0.sql" 1
run "cluster: empty step, not delegated" "${CITUS_PORTS[0]}" "$STACK_DIR/e0.sql"
citus_sql 0 -c "SELECT create_distributed_function('public.pn_step_empty(text)', 'p_order', colocate_with => 'orders', force_delegation => true)" >/dev/null || exit 1
run "cluster: empty step delegated, coordinator" "${CITUS_PORTS[0]}" "$STACK_DIR/e0.sql"
citus_sql 0 -c "SELECT create_distributed_function('public.pn_step_standin(text, text, text, text, bigint)', 'p_order', colocate_with => 'orders', force_delegation => true)" >/dev/null || exit 1
standin_sql "$STACK_DIR/s1.sql" $((3 * N + 1)) true
run "cluster: stand-in delegated, with the reads" "${CITUS_PORTS[0]}" "$STACK_DIR/s1.sql"
standin_sql "$STACK_DIR/s2.sql" $((4 * N + 1)) false
run "cluster: stand-in delegated, coordinator" "${CITUS_PORTS[0]}" "$STACK_DIR/s2.sql"
standin_sql "$STACK_DIR/s3.sql" $((5 * N + 1)) false
run "cluster: stand-in delegated, worker 1" "$W" "$STACK_DIR/s3.sql"
remote "remote commands: delegated with reads" "${CITUS_PORTS[0]}" \
    "SELECT public.pn_handle_standin('PN$(printf %08d $((8 * N + 4)))', 'wxpay', 'sd-r2', 'td-r2', 100, true)"
for o in 5 6 7 8; do
    remote "remote commands: delegated, coordinator" "${CITUS_PORTS[0]}" \
        "SELECT public.pn_handle_standin('PN$(printf %08d $((8 * N + o)))', 'wxpay', 'sd-r$o', 'td-r$o', 100, false)"
done
for o in 9 10 11 12; do
    remote "remote commands: delegated, worker 1" "$W" \
        "SELECT public.pn_handle_standin('PN$(printf %08d $((8 * N + o)))', 'wxpay', 'sd-r$o', 'td-r$o', 100, false)"
done
echo "# (a call on the node that holds its order's shard runs there: 0 remote commands)"

# ---- paynotify_handle delegated (paynotify_step_at, 1.4): no hook registered --------
citus_sql 0 -c "DELETE FROM paynotify_hook" >/dev/null || exit 1
handle_sql "$STACK_DIR/d0.sql" $((9 * N + 1))
run "cluster: paynotify_handle delegated, coordinator" "${CITUS_PORTS[0]}" "$STACK_DIR/d0.sql"
handle_sql "$STACK_DIR/d1.sql" $((10 * N + 1))
run "cluster: paynotify_handle delegated, worker 1" "$W" "$STACK_DIR/d1.sql"
handle_sql "$STACK_DIR/rd.sql" $((11 * N + 1))
for l in 1 2 3 4; do
    remote "remote commands: handle delegated, coordinator" "${CITUS_PORTS[0]}" "$(sed -n "${l}p" "$STACK_DIR/rd.sql")"
done
for l in 5 6 7 8; do
    remote "remote commands: handle delegated, worker 1" "$W" "$(sed -n "${l}p" "$STACK_DIR/rd.sql")"
done
