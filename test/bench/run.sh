#!/usr/bin/env bash
# paynotify benchmarks: prints figures, asserts nothing.
#
#   test/bench/run.sh [--smoke] [all|db|storm|http|growth|history|wake] ...
#
#   --smoke  every part (db storm http growth history wake unless parts are
#           named) at a few hundred notifications, one round each, to see
#           that it still runs (the suite's test/bench/smoke.sh): the
#           defaults below become BENCH_NOTIFICATIONS=200, BENCH_*ROUNDS=1,
#           BENCH_STORM_DELIVERIES=100, BENCH_STORM_NOTIFICATIONS=100,
#           BENCH_HTTP_SECONDS=1, BENCH_HTTP_PROBE=100, BENCH_CGI_PROBE=20,
#           BENCH_GROWTH_ROWS=2000, BENCH_WAKE_MODES without coalesced:1000,
#           BENCH_CRYPTO_SECONDS=0.2
#           (the environment still overrides them), and no VACUUM or
#           CHECKPOINT between runs.  The figures mean nothing at that size.
#   db      pgbench drives paynotify_handle with pre-signed, distinct WeChat
#           notifications (verify + decrypt + lock + log + transition + record
#           + outbox) against a baseline making only the equivalent plain SQL
#           writes (advisory lock, log insert, conditional order update,
#           order history insert, payment insert, outbox insert) in a
#           PL/pgSQL function (test/bench/baseline.sh); same run,
#           same settings; TPS and ratio at 8 and 32 clients in
#           BENCH_DB_ROUNDS (default 3) interleaved rounds, each side after
#           its own reset, the first side alternating; medians of the
#           per-round ratios.  With each run the server's CPU per
#           transaction (all of the cluster's processes, from /proc), which
#           other load on the machine moves much less than throughput, and
#           its ratio (the baseline's over paynotify's).  And the limit:
#           the baseline's writes plus the crypto no verifier can skip,
#           one RSA-2048 verification (SHA-256, PKCS#1 v1.5) of the signed
#           message and one AES-256-GCM decryption of a 1 KB resource,
#           measured in each round by test/bench/crypto_cost.c (CPU of one
#           core per notification; BENCH_CRYPTO_SECONDS per part, default
#           2): the limit's CPU per transaction is the baseline's plus
#           that, and the limit ratio the limit's over paynotify's (1.00:
#           paynotify costs no more than its writes and its crypto).  Then
#           the same notifications again: duplicates/s against first
#           deliveries/s.
#   storm   1000 deliveries (BENCH_STORM_DELIVERIES) of one notification at
#           concurrency 50 through nginx and the FastCGI shim: latency
#           p50/p99.
#   http    nginx -> FastCGI shim -> PostgreSQL with paynotify-send, distinct
#           notifications: requests/s, p50/p99, ratio to db at the same
#           concurrency; CGI mode (fcgiwrap) for the record.
#   growth  db at 8 clients again with 1,000,000 rows already in
#           payment_notify_log and payment_record: ratio to the empty run.
#   history paynotify.delivery_history off against all: first deliveries/s
#           and duplicates/s at 8 clients in BENCH_ROUNDS (default 5)
#           interleaved rounds; medians and their ratio (not in "all").
#   wake    paynotify.notify modes (BENCH_WAKE_MODES, default "on
#           coalesced:50 coalesced:1000 off baseline+notify"; coalesced:MS
#           sets paynotify.notify_interval), each against the baseline in
#           the same round; baseline+notify is the baseline with a NOTIFY
#           per transaction; at 8 and 32 clients in BENCH_ROUNDS (default
#           3) interleaved rounds; medians of the per-round ratios (not in
#           "all").
#
# A throwaway cluster with default durability (fsync on, synchronous_commit
# on) on loopback; everything started is stopped by pid.  Environment:
# BENCH_NOTIFICATIONS (signed once; each pgbench run delivers all of them,
# default 40000), BENCH_NOTIFY (paynotify.notify for the run: coalesced,
# the default, on or off; BENCH_NOTIFY_OFF=1 means off),
# BENCH_GROWTH_ROWS (default 1000000), BENCH_DELIVERY_HISTORY
# (paynotify.delivery_history for the run: off, failures or all; default off).
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
. test/lib.sh
. test/e2e/stack.sh
. test/bench/baseline.sh

smoke=0
if [ "${1:-}" = --smoke ]; then
    shift
    smoke=1
    : "${BENCH_NOTIFICATIONS:=200}" "${BENCH_DB_ROUNDS:=1}" "${BENCH_STORM_ROUNDS:=1}"
    : "${BENCH_STORM_DELIVERIES:=100}" "${BENCH_STORM_NOTIFICATIONS:=100}" "${BENCH_HTTP_ROUNDS:=1}"
    : "${BENCH_HTTP_SECONDS:=1}" "${BENCH_HTTP_PROBE:=100}" "${BENCH_CGI_PROBE:=20}" "${BENCH_CGI_ROUNDS:=1}"
    : "${BENCH_GROWTH_ROWS:=2000}" "${BENCH_ROUNDS:=1}" "${BENCH_WAKE_MODES:=on coalesced:50 off baseline+notify}"
    : "${BENCH_CRYPTO_SECONDS:=0.2}"
fi
parts=("$@")
if [ ${#parts[@]} -eq 0 ]; then
    parts=(all)
    [ $smoke = 1 ] && parts=(db storm http growth history wake)
fi
[ "${parts[0]}" = all ] && parts=(db storm http growth)
nsig=${BENCH_NOTIFICATIONS:-40000}
growth_rows=${BENCH_GROWTH_ROWS:-1000000}
now=1767225600
notify_mode=${BENCH_NOTIFY:-coalesced}
[ -n "${BENCH_NOTIFY_OFF:-}" ] && notify_mode=off

# (PN_BENCH_BUILT=1: built and installed already, by test/bench/smoke.sh)
if [ -z "${PN_BENCH_BUILT:-}" ]; then
    pn_install
    make -s -C shim >/dev/null
fi

stack_init bench
stack_pg
SQL() { stack_sql "$@"; }
stack_schema 0 "$nsig"
SQL -q -c "ALTER DATABASE postgres SET paynotify.now = $now" -c "DELETE FROM paynotify_hook" -c "ALTER DATABASE postgres SET paynotify.notify = $notify_mode" \
    -c "ALTER DATABASE postgres SET paynotify.delivery_history = '${BENCH_DELIVERY_HISTORY:-off}'" >/dev/null

echo "== signing $nsig distinct WeChat notifications"
shim/paynotify-send --gateway wxpay --keys test/vectors/keys --mode distinct -n "$nsig" \
    --now "$now" --seed 42 --channel wxpay --quiet --dump-sql "$STACK_DIR/signed.sql"
bench_baseline_load
SQL -q >/dev/null <<'EOS'
CREATE SEQUENCE bench.seq;
CREATE SEQUENCE bench.bseq;
CREATE FUNCTION bench.baseline_notify(n bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM bench.baseline(n);
	PERFORM pg_notify('bench', n::text);
END $$;
EOS

cat >"$STACK_DIR/handle.sql" <<'EOS'
SELECT h.outcome FROM bench.req r, LATERAL paynotify_handle('wxpay', r.headers, r.body) h WHERE r.id = (SELECT nextval('bench.seq'));
EOS
cat >"$STACK_DIR/baseline.sql" <<'EOS'
SELECT bench.baseline(nextval('bench.bseq'));
EOS
cat >"$STACK_DIR/baseline_notify.sql" <<'EOS'
SELECT bench.baseline_notify(nextval('bench.bseq'));
EOS

# Empty every table both sides write to, and make every order pending again;
# then VACUUM ANALYZE and CHECKPOINT, which steady the figures (not with
# --smoke, whose figures mean nothing: a reset costs seconds there).
reset_tables() {
    SQL -q >/dev/null <<EOS
TRUNCATE payment_notify_log, payment_record, paynotify_outbox, paynotify_anomaly, paynotify_order_history,
	bench.base_log, bench.base_payment, bench.base_outbox, bench.base_history, public.orders, bench.orders_b;
INSERT INTO public.orders SELECT 'PN' || lpad(i::text, 8, '0'), 'pending', 8888 FROM generate_series(1, $nsig) i;
INSERT INTO bench.orders_b SELECT * FROM public.orders;
SELECT setval('bench.seq', 1, false), setval('bench.bseq', 1, false);
EOS
    [ $smoke = 1 ] || SQL -q -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
}

# pgbench_tps SCRIPT CLIENTS: every signed notification once, print the TPS.
pgbench_tps() {
    local out
    out=$(pn_as_user "$PN_PGBIN/pgbench" -n -h "$STACK_DIR/pg" -p "$STACK_PGPORT" -U postgres \
        -M prepared -c "$2" -j 2 -t $((nsig / $2)) -f "$1" postgres 2>&1) || { echo "$out" >&2; return 1; }
    echo "$out" | sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
# median_ratio R...: the median of ratios, two decimals.
median_ratio() { python3 -c 'import statistics, sys; print(f"{statistics.median(map(float, sys.argv[1:])):.2f}")' "$@"; }
# cluster_cpu: CPU time (clock ticks, user + system) the cluster has used so
# far: the postmaster's own and that of its children it has reaped (every
# backend of a finished pgbench run, autovacuum workers), plus its live
# children's (checkpointer, WAL writer, ...).  The difference over a run,
# per transaction, is the server's CPU per transaction, which other load on
# the machine changes far less than it changes throughput.
cluster_cpu() {
    local pm kids
    pm=$(head -1 "$STACK_DIR/pg/data/postmaster.pid")
    kids=$(ps -o pid= --ppid "$pm" | tr -d ' ' | tr '\n' ' ')
    # shellcheck disable=SC2086 # one argument per pid
    python3 - "$pm" $kids <<'PY'
import sys
total = 0
for i, pid in enumerate(sys.argv[1:]):
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue                # a child that has just exited (then reaped: counted later)
    total += int(f[11]) + int(f[12])            # utime, stime
    if i == 0:
        total += int(f[13]) + int(f[14])        # cutime, cstime of the postmaster
print(total)
PY
}
# cpu_us BEFORE AFTER: microseconds of server CPU per transaction.
cpu_us() { python3 -c "print(round(($2 - $1) * 1e6 / $(getconf CLK_TCK) / $nsig))"; }
check_outcomes() {
    SQL -tA -c "SELECT string_agg(status || '=' || n, ' ') FROM (SELECT status, count(*) n FROM payment_notify_log GROUP BY 1) s"
}

declare -A TPS
# db: BENCH_DB_ROUNDS interleaved rounds (default 3), each with both sides at
# 8 and 32 clients.  Each side runs after reset_tables of its own (empty
# tables, VACUUM ANALYZE, CHECKPOINT: neither inherits the other's dead rows,
# autovacuum work or WAL segments to create), and the side that runs first
# alternates between rounds.  The ratio of each round and the median of them.
run_db() {
    local rounds=${BENCH_DB_ROUNDS:-3} r c p b seen side t0 pc bc cr lc
    local -A rat tp crat lrat
    cc -O2 -o "$STACK_DIR/crypto_cost" test/bench/crypto_cost.c -lcrypto
    echo "== db: paynotify_handle vs plain SQL writes ($nsig notifications each, fsync on, synchronous_commit on, $rounds interleaved rounds)"
    echo "   (cpu_us: server CPU per transaction, all of the cluster's processes; cpu ratio: the baseline's over paynotify's;"
    echo "    crypto_us: one RSA-2048 verification + AES-256-GCM decryption (test/bench/crypto_cost.c), measured in the round;"
    echo "    l_cpu_us: the limit, b_cpu_us + crypto_us; lim_ratio: the limit's over paynotify's)"
    printf '%-6s %-8s %14s %14s %7s %8s %8s %9s %9s %8s %9s\n' round clients paynotify/s baseline/s ratio p_cpu_us b_cpu_us cpu_ratio crypto_us l_cpu_us lim_ratio
    for r in $(seq 1 "$rounds"); do
        for c in 8 32; do
            if [ $((r % 2)) = 1 ]; then side="handle baseline"; else side="baseline handle"; fi
            for k in $side; do
                reset_tables
                t0=$(cluster_cpu)
                if [ "$k" = handle ]; then
                    p=$(pgbench_tps "$STACK_DIR/handle.sql" "$c")
                    pc=$(cpu_us "$t0" "$(cluster_cpu)")
                    seen=$(check_outcomes)
                else
                    b=$(pgbench_tps "$STACK_DIR/baseline.sql" "$c")
                    bc=$(cpu_us "$t0" "$(cluster_cpu)")
                fi
            done
            cr=$("$STACK_DIR/crypto_cost" "${BENCH_CRYPTO_SECONDS:-2}" | sed -n 's/^crypto_us=\([0-9.]*\) .*/\1/p')
            lc=$(python3 -c "print(f'{$bc + $cr:.1f}')")
            printf '%-6s %-8s %14s %14s %7s %8s %8s %9s %9s %8s %9s   (log: %s)\n' "$r" "$c" "$p" "$b" "$(ratio "$p" "$b")" \
                "$pc" "$bc" "$(ratio "$bc" "$pc")" "$cr" "$lc" "$(ratio "$lc" "$pc")" "$seen"
            rat[$c]+="$(ratio "$p" "$b") "
            crat[$c]+="$(ratio "$bc" "$pc") "
            lrat[$c]+="$(ratio "$lc" "$pc") "
            tp[$c]+="$p "
        done
    done
    for c in 8 32; do
        # shellcheck disable=SC2086 # the values are a space-separated list
        TPS[db$c]=$(median ${tp[$c]})
        # shellcheck disable=SC2086
        echo "median ratio to the baseline, $c clients: $(median_ratio ${rat[$c]}) (rounds: ${rat[$c]% }); server CPU per transaction, baseline's over paynotify's: $(median_ratio ${crat[$c]}) (rounds: ${crat[$c]% }); the limit's over paynotify's: $(median_ratio ${lrat[$c]}) (rounds: ${lrat[$c]% })"
    done
    # the same notifications again: every one is a duplicate now
    reset_tables
    p=$(pgbench_tps "$STACK_DIR/handle.sql" 8)
    SQL -q -c "SELECT setval('bench.seq', 1, false)" >/dev/null
    local d
    d=$(pgbench_tps "$STACK_DIR/handle.sql" 8)
    TPS[dup8]=$d
    echo "duplicates/s at 8 clients: $d vs first deliveries/s $p (a duplicate costs $(ratio "$p" "$d") of a first delivery)"
}

run_growth() {
    echo "== growth: db at 8 clients with $growth_rows rows already in payment_notify_log and payment_record"
    reset_tables
    local empty
    empty=${TPS[db8]:-$(pgbench_tps "$STACK_DIR/handle.sql" 8)}
    reset_tables
    SQL -q >/dev/null <<EOS
INSERT INTO payment_notify_log (channel, notify_id, order_no, event_type, payload, status, processed_at)
	SELECT 'wxpay', 'old-' || i, 'OLD' || i, 'TRANSACTION.SUCCESS',
		jsonb_build_object('out_trade_no', 'OLD' || i, 'amount', jsonb_build_object('total', 8888)),
		'succeeded', now() FROM generate_series(1, $growth_rows) i;
INSERT INTO payment_record (channel, trade_no, order_no, amount, currency, notify_id)
	SELECT 'wxpay', 'OLDT' || i, 'OLD' || i, 8888, 'CNY', 'old-' || i FROM generate_series(1, $growth_rows) i;
VACUUM ANALYZE;
CHECKPOINT;
EOS
    local full
    full=$(pgbench_tps "$STACK_DIR/handle.sql" 8)
    echo "empty: $empty/s   with $growth_rows rows: $full/s   ratio $(ratio "$full" "$empty")"
}

# ---- storm and http: paynotify-send through nginx, signed at $now ----------

# http_send OUT [paynotify-send args...]: WeChat notifications to the running
# stack, signed with the pinned clock; the --json summary goes to OUT.
http_send() {
    local out=$1
    shift
    stack_send wxpay --now "$now" --quiet --json "$@" >"$out" 2>"$out.err" || true
}

# http_summary OUT EXPECTED: "ok RPS P50 P99 SECONDS SPLIT" when every delivery
# got a 2xx reply and the outcomes are exactly EXPECTED (label=count,...);
# otherwise "invalid WHY": a broken run prints no figure.
http_summary() {
    python3 - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    err = open(sys.argv[1] + ".err").read().strip().splitlines()
    print("invalid no summary from paynotify-send (%s)" % (err[-1] if err else e))
    sys.exit(0)
want = {k: int(v) for k, v in (kv.split("=") for kv in sys.argv[2].split(","))}
why = []
bad = {k: v for k, v in r["status"].items() if not k.startswith("2")}
if bad:
    why.append("non-2xx replies %s" % bad)
if r.get("transport_errors"):
    why.append("%d transport errors %s" % (r["transport_errors"], r.get("errors")))
if r.get("interrupted"):
    why.append("interrupted")
if r["replies"] != r["deliveries"]:
    why.append("%d replies to %d deliveries" % (r["replies"], r["deliveries"]))
if r["outcome"] != want:
    why.append("outcomes %s, expected %s" % (r["outcome"], want))
split = ",".join("%s=%d" % kv for kv in sorted(r["outcome"].items(), key=lambda kv: kv[1]))
if why:
    print("invalid " + "; ".join(why))
else:
    print("ok %.1f %.1f %.1f %.1f %s" % (r["rps"], r["latency_ms"]["p50"], r["latency_ms"]["p99"],
                                         r["elapsed_s"], split))
PY
}

# http_db_check EXPECTED SQL: nothing when SQL returns EXPECTED, else why not.
http_db_check() {
    local got
    got=$(SQL -tA -c "$2" 2>&1) || true
    [ "$got" = "$1" ] || echo "database: expected [$1], got [$got]"
}

# median VALUES...: the median to one decimal, "n/a" without values.
median() {
    [ $# -gt 0 ] || { echo n/a; return; }
    python3 -c 'import statistics, sys; print(f"{statistics.median(map(float, sys.argv[1:])):.1f}")' "$@"
}

# http_forget PID: take a process stopped here off stack_stop's list.  Under
# set -e, stack_stop (the EXIT trap) ends at its first kill or wait that fails,
# and a kill of a process that is gone fails: the cluster would be left running.
http_forget() {
    local p keep=()
    for p in "${STACK_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    STACK_PIDS=("${keep[@]}")
}

# http_stack_down: stop nginx and the FastCGI shim, if running.  "|| true":
# stack_nginx_stop ends with a kill -KILL that fails when nginx has gone.
http_stack_down() {
    stack_nginx_stop || true
    stack_shim_stop || true
}

# http_fcgiwrap_stop PID: fcgiwrap and the workers it forked, which outlive a
# TERM to their parent.
http_fcgiwrap_stop() {
    local kids
    kids=$(ps -o pid= --ppid "$1" || true)
    # shellcheck disable=SC2086
    kill -TERM "$1" $kids 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    http_forget "$1"
}

# http_round_col SERIES LINE WHY [split]: the table column of one run (LINE
# from http_summary, WHY from http_db_check) in col: its req/s, p50 and p99
# (and the outcome split when asked), or INVALID and why.  A valid run's
# numbers are added to the caller's arrays SERIES_rps, SERIES_p50, SERIES_p99.
http_round_col() {
    local -n rps_of=$1_rps p50_of=$1_p50 p99_of=$1_p99
    local line=$2 why=$3 st rps p50 p99 el split
    read -r st rps p50 p99 el split <<<"$line"
    if [ "$st" = ok ] && [ -z "$why" ]; then
        rps_of+=("$rps") p50_of+=("$p50") p99_of+=("$p99")
        col=$(printf '%7s %6s %6s' "$rps" "$p50" "$p99")
        [ -z "${4:-}" ] || col+="  $split"
    else
        [ "$st" = ok ] && line=""
        col="INVALID: ${line#invalid }${line:+${why:+; }}$why"
    fi
}

# run_storm: BENCH_STORM_ROUNDS rounds (default 5) through the stack the case
# below started, each after reset_tables: the storm (BENCH_STORM_DELIVERIES
# deliveries, default 1000, of one notification at concurrency 50), then
# BENCH_STORM_NOTIFICATIONS distinct notifications (default 10000, fewer
# than BENCH_NOTIFICATIONS) at 50, then the same ones again.  Medians of the
# valid runs.
run_storm() {
    local rounds=${BENCH_STORM_ROUNDS:-5} n=${BENCH_STORM_NOTIFICATIONS:-10000} r
    local storm_n=${BENCH_STORM_DELIVERIES:-1000}
    local storm_order=$nsig dir=$STACK_DIR/storm
    [ "$n" -lt "$nsig" ] || n=$((nsig - 1))
    mkdir -p "$dir"
    echo "== storm: through nginx and the FastCGI shim, $rounds interleaved rounds of"
    echo "   storm: $storm_n deliveries of one notification (order $(printf 'PN%08d' "$storm_order")) at concurrency 50"
    echo "   first: $n distinct notifications at concurrency 50 (orders 1..$n)"
    echo "   dup:   the same $n again (same --seed, --now and --start: the same ids; checked: every"
    echo "          reply a duplicate, still $n log rows, each with 2 deliveries)"
    printf '%-6s | %-44s | %-22s | %-22s\n' round "storm req/s p50 p99 (ms), outcomes" \
        "first/s p50 p99 (ms)" "dup/s p50 p99 (ms)"
    local -a s_rps=() s_p50=() s_p99=() f_rps=() f_p50=() f_p99=() d_rps=() d_p50=() d_p99=()
    local line why col storm_col first_col dup_col ord range
    ord=$(printf 'PN%08d' "$storm_order")
    range="order_no BETWEEN 'PN00000001' AND '$(printf 'PN%08d' "$n")'"
    for ((r = 1; r <= rounds; r++)); do
        reset_tables
        # the storm
        http_send "$dir/storm.$r.json" --mode storm -n "$storm_n" -c 50 --start "$storm_order" --seed 7
        line=$(http_summary "$dir/storm.$r.json" "processed=1,duplicate=$((storm_n - 1))")
        why=$(http_db_check "succeeded|$storm_n|1|1|paid" "SELECT l.status, l.delivery_count, l.attempts,
            (SELECT count(*) FROM payment_record WHERE order_no = '$ord'), (SELECT status FROM orders WHERE order_no = '$ord')
            FROM payment_notify_log l WHERE l.order_no = '$ord'")
        http_round_col s "$line" "$why" split
        storm_col=$col
        # first deliveries, then the same notifications again
        http_send "$dir/first.$r.json" --mode distinct -n "$n" -c 50 --start 1 --seed 42
        line=$(http_summary "$dir/first.$r.json" "processed=$n")
        why=$(http_db_check "$n|$n|$n|$n" "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
            (SELECT count(*) FROM payment_record WHERE $range), (SELECT count(*) FROM orders WHERE $range AND status = 'paid')
            FROM payment_notify_log WHERE $range")
        http_round_col f "$line" "$why"
        first_col=$col
        http_send "$dir/dup.$r.json" --mode distinct -n "$n" -c 50 --start 1 --seed 42
        line=$(http_summary "$dir/dup.$r.json" "duplicate=$n")
        why=$(http_db_check "$n|$n|$((2 * n))|$n" "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
            sum(delivery_count), (SELECT count(*) FROM payment_record WHERE $range)
            FROM payment_notify_log WHERE $range")
        http_round_col d "$line" "$why"
        dup_col=$col
        printf '%-6s | %-44s | %-22s | %-22s\n' "$r" "$storm_col" "$first_col" "$dup_col"
    done
    printf '%-6s | %-44s | %-22s | %-22s\n' median \
        "$(printf '%7s %6s %6s  (%d of %d valid)' "$(median "${s_rps[@]}")" "$(median "${s_p50[@]}")" "$(median "${s_p99[@]}")" ${#s_rps[@]} "$rounds")" \
        "$(printf '%7s %6s %6s' "$(median "${f_rps[@]}")" "$(median "${f_p50[@]}")" "$(median "${f_p99[@]}")")" \
        "$(printf '%7s %6s %6s' "$(median "${d_rps[@]}")" "$(median "${d_p50[@]}")" "$(median "${d_p99[@]}")")"
    local fm dm
    fm=$(median "${f_rps[@]}") dm=$(median "${d_rps[@]}")
    if [ "$fm" != n/a ] && [ "$dm" != n/a ]; then
        echo "duplicates/s at concurrency 50 over HTTP: $dm vs first deliveries/s $fm (a duplicate costs $(ratio "$fm" "$dm") of a first delivery; medians of ${#d_rps[@]} and ${#f_rps[@]} valid runs)"
    else
        echo "duplicates/s vs first deliveries/s over HTTP: n/a (no valid run)"
    fi
    http_stack_down
}

# http_distinct OUT C N: reset, then N distinct notifications at concurrency C;
# prints http_summary's line, or "invalid WHY" when the database disagrees.
http_distinct() {
    local out=$1 c=$2 n=$3 line why range
    reset_tables
    http_send "$out" --mode distinct -n "$n" -c "$c" --start 1 --seed 42
    line=$(http_summary "$out" "processed=$n")
    range="order_no BETWEEN 'PN00000001' AND '$(printf 'PN%08d' "$n")'"
    why=$(http_db_check "$n|$n|$n|$n" "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
        (SELECT count(*) FROM payment_record WHERE $range), (SELECT count(*) FROM orders WHERE $range AND status = 'paid')
        FROM payment_notify_log")
    case $line in
        invalid*) echo "$line${why:+; $why}" ;;
        *) if [ -n "$why" ]; then echo "invalid $why"; else echo "$line"; fi ;;
    esac
}

# http_size C SECONDS PROBE: PROBE notifications at concurrency C (a warm-up
# too); prints how many make a run of SECONDS at that rate (at most
# BENCH_NOTIFICATIONS).
http_size() {
    local c=$1 secs=$2 probe=$3 st rps rest
    [ "$probe" -le "$nsig" ] || probe=$nsig
    read -r st rps rest <<<"$(http_distinct "$STACK_DIR/http/size.$c.json" "$c" "$probe")"
    [ "$st" = ok ] || { echo "$probe"; return; }
    python3 -c "import math; print(min($nsig, max($probe, math.ceil($rps * $secs / 100) * 100)))"
}

# run_http: FastCGI (BENCH_SHIM_WORKERS shim workers, default 8) at concurrency
# 8, 32 and 50 in BENCH_HTTP_ROUNDS interleaved rounds (default 3), then CGI
# at 8 in BENCH_CGI_ROUNDS rounds (default 1); each run sized to last about
# BENCH_HTTP_SECONDS (default 15; at most BENCH_NOTIFICATIONS notifications)
# by a probe of BENCH_HTTP_PROBE (default 1000) or BENCH_CGI_PROBE (default
# 200) notifications.
run_http() {
    local rounds=${BENCH_HTTP_ROUNDS:-3} secs=${BENCH_HTTP_SECONDS:-15} workers=${BENCH_SHIM_WORKERS:-8}
    local dir=$STACK_DIR/http r c key line st rps p50 p99 el rest
    local -A size=() v_rps=() v_p50=() v_p99=() short=()
    local -a runs=("fastcgi 8" "fastcgi 32" "fastcgi 50")
    mkdir -p "$dir"
    http_stack_down
    echo "== http: nginx -> paynotify-cgi -> PostgreSQL, distinct WeChat notifications signed afresh"
    echo "   FastCGI ($workers shim workers) at concurrency 8, 32, 50 in $rounds interleaved rounds;"
    echo "   CGI (fcgiwrap, one process and connection per request) at 8 for the record; each run"
    echo "   sized by a short run before to last about ${secs}s (BENCH_HTTP_SECONDS); orders and log"
    echo "   reset before each run"
    stack_http fastcgi "$workers"
    for c in 8 32 50; do size["fastcgi $c"]=$(http_size "$c" "$secs" "${BENCH_HTTP_PROBE:-1000}"); done
    printf '%-8s %5s %7s %6s %9s %8s %8s %8s\n' mode conc notif round req/s p50_ms p99_ms seconds
    for ((r = 1; r <= rounds; r++)); do
        for key in "${runs[@]}"; do
            c=${key#* }
            line=$(http_distinct "$dir/$c.$r.json" "$c" "${size[$key]}")
            read -r st rps p50 p99 el rest <<<"$line"
            if [ "$st" = ok ]; then
                v_rps[$key]+=" $rps" v_p50[$key]+=" $p50" v_p99[$key]+=" $p99"
                python3 -c "import sys; sys.exit(0 if $el >= 10 else 1)" || short[$key]=1
                printf '%-8s %5s %7s %6s %9s %8s %8s %8s\n' "${key% *}" "$c" "${size[$key]}" "$r" "$rps" "$p50" "$p99" "$el"
            else
                printf '%-8s %5s %7s %6s %s\n' "${key% *}" "$c" "${size[$key]}" "$r" "INVALID: ${line#invalid }"
            fi
        done
    done
    http_stack_down

    key="cgi 8"
    runs+=("$key")
    stack_http cgi
    local fcgiwrap=${STACK_PIDS[-1]}
    size[$key]=$(http_size 8 "$secs" "${BENCH_CGI_PROBE:-200}")
    for ((r = 1; r <= ${BENCH_CGI_ROUNDS:-1}; r++)); do
        line=$(http_distinct "$dir/cgi.$r.json" 8 "${size[$key]}")
        read -r st rps p50 p99 el rest <<<"$line"
        if [ "$st" = ok ]; then
            v_rps[$key]+=" $rps" v_p50[$key]+=" $p50" v_p99[$key]+=" $p99"
            python3 -c "import sys; sys.exit(0 if $el >= 10 else 1)" || short[$key]=1
            printf '%-8s %5s %7s %6s %9s %8s %8s %8s\n' cgi 8 "${size[$key]}" "$r" "$rps" "$p50" "$p99" "$el"
        else
            printf '%-8s %5s %7s %6s %s\n' cgi 8 "${size[$key]}" "$r" "INVALID: ${line#invalid }"
        fi
    done
    stack_nginx_stop || true
    http_fcgiwrap_stop "$fcgiwrap"

    echo "medians, and the ratio to db (paynotify_handle through pgbench) at the same concurrency:"
    printf '%-8s %5s %9s %8s %8s %10s %7s\n' mode conc req/s p50_ms p99_ms db_tps ratio
    local m db
    for key in "${runs[@]}"; do
        c=${key#* }
        # shellcheck disable=SC2086 # the values are a space-separated list
        m=$(median ${v_rps[$key]:-})
        db=${TPS[db$c]:-n/a}
        [ "$db" = n/a ] || db=$(printf '%.1f' "$db")
        # shellcheck disable=SC2086
        printf '%-8s %5s %9s %8s %8s %10s %7s%s\n' "${key% *}" "$c" "$m" "$(median ${v_p50[$key]:-})" \
            "$(median ${v_p99[$key]:-})" "$db" \
            "$([ "$m" != n/a ] && [ "$db" != n/a ] && ratio "$m" "$db" || echo n/a)" \
            "$([ -n "${short[$key]:-}" ] && echo "  (a run lasted under 10 s)")"
    done
    [ -n "${TPS[db8]:-}" ] || echo "(db TPS: n/a unless the db part runs first in the same invocation: run.sh db http)"
}

# The cost of paynotify.delivery_history: off and all in interleaved rounds.
run_history() {
    local rounds=${BENCH_ROUNDS:-5} mode p d
    local -A first dup
    echo "== history: paynotify.delivery_history off vs all, 8 clients, $rounds interleaved rounds ($nsig notifications each)"
    printf '%-6s %-5s %12s %14s\n' round mode first/s duplicates/s
    for r in $(seq 1 "$rounds"); do
        for mode in off all; do
            SQL -q -c "ALTER DATABASE postgres SET paynotify.delivery_history = '$mode'" \
                -c "TRUNCATE paynotify_delivery_history, paynotify_order_history" >/dev/null
            reset_tables
            p=$(pgbench_tps "$STACK_DIR/handle.sql" 8)
            SQL -q -c "SELECT setval('bench.seq', 1, false)" >/dev/null
            d=$(pgbench_tps "$STACK_DIR/handle.sql" 8)
            printf '%-6s %-5s %12.1f %14.1f   (delivery rows: %s)\n' "$r" "$mode" "$p" "$d" \
                "$(SQL -tA -c "SELECT count(*) FROM paynotify_delivery_history")"
            first[$mode]+="$p "
            dup[$mode]+="$d "
        done
    done
    SQL -q -c "ALTER DATABASE postgres SET paynotify.delivery_history = '${BENCH_DELIVERY_HISTORY:-off}'" >/dev/null
    local fo fa do_ da
    # shellcheck disable=SC2086
    fo=$(median ${first[off]}); fa=$(median ${first[all]}); do_=$(median ${dup[off]}); da=$(median ${dup[all]})
    echo "medians: first deliveries off $fo/s, all $fa/s (ratio $(ratio "$fa" "$fo")); duplicates off $do_/s, all $da/s (ratio $(ratio "$da" "$do_"))"
}

run_wake() {
    local rounds=${BENCH_ROUNDS:-3} c r mode p b
    local modes=${BENCH_WAKE_MODES:-on coalesced:50 coalesced:1000 off baseline+notify}
    local -A rat
    echo "== wake: paynotify.notify modes against the plain-SQL baseline, $rounds interleaved rounds ($nsig notifications each)"
    printf '%-6s %-8s %-14s %12s %12s %7s\n' round clients mode paynotify/s baseline/s ratio
    for r in $(seq 1 "$rounds"); do
        for c in 8 32; do
            for mode in $modes; do
                reset_tables
                if [ "$mode" = baseline+notify ]; then
                    p=$(pgbench_tps "$STACK_DIR/baseline_notify.sql" "$c")
                    SQL -q -c "TRUNCATE bench.base_log, bench.base_payment, bench.base_outbox, bench.base_history" \
                        -c "UPDATE bench.orders_b SET status = 'pending'" -c "SELECT setval('bench.bseq', 1, false)" >/dev/null
                else
                    SQL -q -c "ALTER DATABASE postgres SET paynotify.notify = ${mode%%:*}" \
                        -c "ALTER DATABASE postgres SET paynotify.notify_interval = $(case $mode in *:*) echo "${mode#*:}" ;; *) echo 1000 ;; esac)" >/dev/null
                    p=$(pgbench_tps "$STACK_DIR/handle.sql" "$c")
                fi
                b=$(pgbench_tps "$STACK_DIR/baseline.sql" "$c")
                printf '%-6s %-8s %-14s %12.1f %12.1f %7s\n' "$r" "$c" "$mode" "$p" "$b" "$(ratio "$p" "$b")"
                rat[$c $mode]+="$(ratio "$p" "$b") "
            done
        done
    done
    SQL -q -c "ALTER DATABASE postgres SET paynotify.notify = $notify_mode" \
        -c "ALTER DATABASE postgres RESET paynotify.notify_interval" >/dev/null
    for c in 8 32; do
        for mode in $modes; do
            # shellcheck disable=SC2086
            echo "median ratio to the baseline, $c clients, $mode: $(python3 -c 'import statistics, sys; print(f"{statistics.median(map(float, sys.argv[1:])):.2f}")' ${rat[$c $mode]})"
        done
    done
}

for part in "${parts[@]}"; do
    case $part in
        db) run_db ;;
        wake) run_wake ;;
        growth) run_growth ;;
        history) run_history ;;
        storm) stack_http fastcgi; run_storm ;;
        http) run_http ;;
        *) echo "unknown part $part" >&2; exit 2 ;;
    esac
done
