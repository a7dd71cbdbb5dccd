#!/usr/bin/env bash
# Every benchmark of test/bench in its smoke mode (--smoke: a few hundred
# requests, one round), so that the suite notices when one stops running.
# Asserts only that each one ends well and prints its figures: nothing
# about speed.
#
#   test/bench/smoke.sh [run|callgrind|relay|fresh|vs-seed|citus|citus-delegate] ...
#
# Without arguments: all but citus and citus-delegate, which
# test/bench/smoke-citus.sh runs
# (the full suite only: it starts a three-node cluster).  vs-seed is
# skipped when the seed it compares against is not there (SEED_PHP, see
# vs-seed.sh).  Run as root from anywhere in the repository; what a
# benchmark printed is shown when one of its checks fails.  The last line
# printed is "N passed, M failed".
#
# The tree is built and installed once, first (PN_BENCH_BUILT=1 tells the
# benchmarks so).  Without arguments the benchmarks run in two lanes side
# by side, each on its own cluster and ports: run then fresh, and relay
# (which mostly waits: fixed rates, idle pauses) then callgrind then
# vs-seed; their verdicts come in the order above.  Nothing here asserts a
# speed, so a neighbour's load cannot fail a check.  PN_BENCH_LANES=1 runs
# them one after the other.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. test/lib.sh

out=$(pn_tmp_dir bench-smoke)
trap 'remove_tmp "$out"' EXIT
pass=0
fail=0
num='[0-9]+(\.[0-9]+)?'

# bench NAME CMD...: run one benchmark into $out/NAME.log (or wait for it,
# when a lane started it already); ok when it exits 0.
bench() {
    local name=$1 rc
    shift
    echo "# $name: $*"
    if [ -e "$out/$name.started" ]; then
        while [ ! -s "$out/$name.rc" ]; do
            pn_alive "$(cat "$out/$name.started")" || break
            sleep 0.2
        done
        rc=$(cat "$out/$name.rc" 2>/dev/null)
        rc=${rc:-none: its lane ended before it}
    else
        "$@" >"$out/$name.log" 2>&1
        rc=$?
    fi
    if [ "$rc" = 0 ]; then ok "$name --smoke ends well"; else not_ok "$name --smoke ends well (exit $rc)" "$(cat "$out/$name.log")"; fi
}

# figures NAME DESC REGEX [COUNT]: ok when at least COUNT (default 1) lines
# of NAME's output match the extended REGEX.
figures() {
    local n
    n=$(grep -cE "$3" "$out/$1.log")
    if [ "$n" -ge "${4:-1}" ]; then
        ok "$1: $2"
    else
        not_ok "$1: $2 (${n} lines match /$3/, want ${4:-1})" "$(cat "$out/$1.log")"
    fi
}

smoke_run() {
    bench run test/bench/run.sh --smoke
    figures run "db: ratio to the baseline at 8 and 32 clients" \
        "^median ratio to the baseline, (8|32) clients: $num " 2
    figures run "db: duplicates against first deliveries" "^duplicates/s at 8 clients: $num vs first deliveries/s $num"
    figures run "storm: req/s, p50, p99 of a valid run" "^median \| +$num +$num +$num +\(1 of 1 valid\)"
    figures run "storm: duplicates against first deliveries over HTTP" \
        "^duplicates/s at concurrency 50 over HTTP: $num vs first deliveries/s $num"
    figures run "http: req/s, p50, p99 for FastCGI at 8, 32, 50 and CGI at 8" \
        "^(fastcgi +(8|32|50)|cgi +8) +[0-9]+ +1 +$num +$num +$num +$num$" 4
    figures run "growth: the rate with rows against the empty one" "^empty: $num/s +with [0-9]+ rows: $num/s +ratio $num"
    figures run "history: delivery_history off against all" "^medians: first deliveries off $num/s, all $num/s"
    figures run "wake: each mode's ratio to the baseline at 8 and 32 clients" \
        "^median ratio to the baseline, (8|32) clients, [a-z:0-9+]+: $num$" 8
}

smoke_callgrind() {
    bench callgrind test/bench/callgrind.sh --smoke
    figures callgrind "instructions per first delivery, paynotify and the baseline" \
        "^instructions per first delivery .*: paynotify_handle [0-9]+, baseline [0-9]+, paynotify/baseline $num"
}

smoke_relay() {
    bench relay test/bench/relay.sh --smoke
    figures relay "events received and their latency in each of the four modes" \
        "received [1-9][0-9]* events .*latency ms: p50 $num +p90 $num +p99 $num" 4
    figures relay "first attempts' latency with a healthy and a sometimes-slow receiver" \
        "receiver (healthy|sometimes-slow): [0-9]+ events, [1-9][0-9]* accepted at the first attempt; .*ms: p50 $num +p90 $num +p99 $num" 2
}

smoke_vs_seed() {
    bench vs-seed test/bench/vs-seed.sh --smoke
    if grep -q '^seed-php not found' "$out/vs-seed.log"; then
        skipped "vs-seed: $(head -1 "$out/vs-seed.log")"
        return
    fi
    figures vs-seed "req/s, p50, p99 of both sides' distinct and storm runs" \
        "^1 +(seed|paynotify) +(distinct|storm) +$num +" 4
    figures vs-seed "paynotify/seed for distinct and storm" "^(distinct|storm): paynotify/seed req/s = $num" 2
}

smoke_fresh() {
    bench fresh test/bench/fresh.sh --smoke
    figures fresh "a fresh backend's first answer, a reload, a temporary table, the walk in SQL and in C" \
        "^(handle|reload|temp|walk, SQL|walk, C|baseline)[^|]* median +$num ms" 8
}

smoke_citus() {
    bench citus test/bench/citus.sh --smoke
    figures citus "notifications/s over HTTP, one node and the cluster" \
        "^(one node|3-node cluster) +[0-9]+ notifications/s over HTTP" 2
    figures citus "notifications/s in one session, one node and two of the cluster's" \
        "^(one node|3-node cluster, coordinator|3-node cluster, worker 1) +[0-9]+ notifications/s in one session" 3
}

smoke_citus_delegate() {
    bench citus-delegate test/bench/citus-delegate.sh --smoke
    figures citus-delegate "calls/s and server CPU per call, one node and the cluster" \
        "^(one node|cluster): .* $num/s +$num us CPU per call" 10
    figures citus-delegate "remote commands of one first delivery, today's and delegated" \
        "^remote commands: .* [0-9]+ remote commands" 11
}

# the command of each benchmark
declare -A cmd=(
    [run]="test/bench/run.sh --smoke" [callgrind]="test/bench/callgrind.sh --smoke"
    [relay]="test/bench/relay.sh --smoke" [fresh]="test/bench/fresh.sh --smoke"
    [vs-seed]="test/bench/vs-seed.sh --smoke" [citus]="test/bench/citus.sh --smoke"
    [citus-delegate]="test/bench/citus-delegate.sh --smoke"
)
# lane NAME...: runs those benchmarks one after the other, in the
# background: $out/NAME.log, and $out/NAME.rc (the exit status) when done
lane() {
    local name
    for name in "$@"; do
        # shellcheck disable=SC2086 # the command is words
        ${cmd[$name]} >"$out/$name.log" 2>&1
        echo $? >"$out/$name.rc.tmp" && mv "$out/$name.rc.tmp" "$out/$name.rc"
    done
}

if pn_install >"$out/build.log" 2>&1 &&
    make -s -C shim >>"$out/build.log" 2>&1; then
    export PN_BENCH_BUILT=1
else
    not_ok "the tree builds and installs" "$(tail -20 "$out/build.log")"
fi

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    names=(run callgrind relay fresh vs-seed)
    if [ "${PN_BENCH_LANES:-2}" -ge 2 ] && [ -n "${PN_BENCH_BUILT:-}" ]; then
        lane run fresh &
        for n in run fresh; do echo $! >"$out/$n.started"; done
        lane relay callgrind vs-seed &
        for n in relay callgrind vs-seed; do echo $! >"$out/$n.started"; done
    fi
fi
for name in "${names[@]}"; do
    case $name in
        run | callgrind | relay | fresh | citus) "smoke_$name" ;;
        citus-delegate) smoke_citus_delegate ;;
        vs-seed) smoke_vs_seed ;;
        *) not_ok "no benchmark called $name" ;;
    esac
done
finish
