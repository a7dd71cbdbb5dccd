#!/usr/bin/env bash
# The whole paynotify test suite, from a clean clone, as root on Debian 12:
#   installs what is missing, builds, installs, then runs pg_regress and the
#   isolation specs (temporary instances), the shim's CGI and FastCGI tests,
#   the load generator's tests, the end-to-end tests through nginx, the
#   short fuzzing runs, and every benchmark in its smoke mode.  Prints
#   "N passed, M failed" last; exits non-zero on any failure.
#
#   test/run-all.sh [--quick]     --quick runs the first list below only:
#                                 no longer end-to-end tests, Citus,
#                                 Patroni, chaos, fuzzing, benchmarks or
#                                 packages
#
# The scripts it runs are a fixed list (below): a script that is missing or
# not executable is a failure, never skipped.  The pg_regress tests (in two
# parts, beside each other) and the isolation specs run as separate phases,
# so a failing pg_regress test does not keep the isolation specs from
# running.
set -uo pipefail
# make's own variables from the caller's environment (a parallel build
# around this script, say) must not reach the makes run here
unset MAKEFLAGS MFLAGS GNUMAKEFLAGS MAKELEVEL
# one locale whatever the caller's (a machine set to another language, or
# to none): the expected outputs were made in C.UTF-8, which every Debian 12
# has
unset LC_ALL LC_COLLATE LC_CTYPE LC_MESSAGES LC_NUMERIC LC_TIME LC_MONETARY LANGUAGE
export LANG=C.UTF-8
cd "$(dirname "$0")/.."
top=$(pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

# The test scripts, one per line, in the order they run.
quick_tests=(
    test/vectors/check-vectors.sh
    test/docs/links.py
    test/unit/run.sh
    test/unit/crypto-fault.sh
    shim/tests/cgi-test.sh
    shim/tests/send-test.sh
    shim/tests/serve-test.sh
    test/e2e/cron.sh
    test/e2e/dump.sh
    test/model/run.sh
    test/e2e/reconcile.sh
    test/e2e/upgrade.sh
    test/e2e/planted.sh
    test/e2e/databases.sh
    test/e2e/relay.sh
    test/e2e/monitoring.sh
    test/e2e/pipeline.sh
)
# ... and, without --quick, after them:
full_tests=(
    test/e2e/http.sh
    test/e2e/samples.sh
    test/e2e/reconciliation.sh
    test/e2e/hostile.sh
    test/e2e/patroni.sh
    test/e2e/failover.sh
    test/e2e/memory.sh
    test/e2e/pgbouncer.sh
    test/e2e/multishim.sh
    test/e2e/citus.sh
    test/e2e/citus_commit.sh
    test/e2e/citus_agreements.sh
    test/e2e/citus_delegate.sh
    test/e2e/citus_distribute_live.sh
    test/e2e/citus_distribute_owner.sh
    test/fuzz/notices.sh
    test/chaos/run.sh
    test/bench/smoke-citus.sh
    test/fuzz/run.sh
    test/bench/smoke.sh
    test/package/run.sh
)

# The suite's share of the mutation fuzzer: 12,000 of hostile.sh's default
# 25,000 (the same seed, so the same first 12,000), to keep the suite
# under 20 minutes on two cores; PN_HOSTILE_MUTATIONS overrides it.
export PN_HOSTILE_MUTATIONS=${PN_HOSTILE_MUTATIONS:-12000}

# cpu_ticks: the machine's busy CPU time so far, in clock ticks (all cores)
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat; }
# busy T0 C0: "N s, P% of the cores busy" since SECONDS T0 and cpu_ticks C0
busy() {
    local s=$((SECONDS - $1)) c=$(( $(cpu_ticks) - $2 )) n hz
    n=$(nproc); hz=$(getconf CLK_TCK)
    if [ $s -gt 0 ]; then echo "$s s, $(( c * 100 / (hz * n * s) ))% of $n cores busy"
    else echo "$s s"; fi
}

passed=0
failed=0
failures=()
note() { printf '\n=== %s ===\n' "$*"; }
count() {	# count NAME STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "PASS: $1"
    else failed=$((failed + 1)); failures+=("$1"); echo "FAIL: $1"; fi
}

if [ "$(id -u)" = 0 ]; then
    scripts/deps.sh || { echo "dependency installation failed"; exit 1; }
fi

# Debian's python3, whose modules scripts/deps.sh installs (cryptography,
# hypothesis, psycopg2), whatever python3 comes first on PATH: a pyenv shim
# there costs most of a second at every start, and the scripts start it
# hundreds of times.
pybin=""
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
    if pybin=$(mktemp -d /tmp/paynotify-python.XXXXXX) && [ -n "$pybin" ] && chmod 755 "$pybin" &&
        ln -s /usr/bin/python3 "$pybin/python3"; then
        export PATH="$pybin:$PATH"
    else
        echo "run-all.sh: cannot make a directory for python3"; exit 1
    fi
fi

note "build"
jobs=$(nproc 2>/dev/null || echo 1)
make -s clean >/dev/null 2>&1
# (the build's status and its output judged apart: a build that fails
# without printing "error" fails this too)
build_out=$(make -s -j"$jobs" 2>&1)
build_rc=$?
if [ $build_rc -ne 0 ] || grep -E 'warning|error' <<<"$build_out"; then
    [ $build_rc -ne 0 ] && echo "$build_out"
    count "extension builds without warnings" 1
else
    count "extension builds without warnings" 0
fi
make -s install >/dev/null || { echo "make install failed"; exit 1; }
make -s -j"$jobs" -C shim >/dev/null 2>&1; count "shim builds" $?

# pg_regress and the isolation tester refuse to run as root: run them as
# the postgres user in private copies of the tree.  Three phases, each with
# its own temporary instance: "regress" (the Makefile's REGRESS but the
# tests of regress_2) runs beside "regress-2" (setup, then tests that need
# nothing else and read no other test's objects: the slowest) followed by
# "isolation" (ISOLATION): two cores.  A failing phase does not keep the
# others from running; a test of the lists without a verdict is a failure.
note "pg_regress and isolation specs"
# make_list VAR: the Makefile's value of VAR (REGRESS, ISOLATION), as make
# sees it (+= and continuation lines included)
make_list() {
    make -s --no-print-directory --eval ".PHONY: print-list
print-list: ; @echo \$($1)" print-list
}
regress_2="table_code bills"
regress_all=$(make_list REGRESS) && isolation_all=$(make_list ISOLATION) &&
    [ -n "$regress_all" ] && [ -n "$isolation_all" ] ||
    { echo "run-all.sh: cannot read REGRESS and ISOLATION from the Makefile"; count "the Makefile's test lists" 1; }
regress_1=""
for t in $regress_all; do
    case " $regress_2 " in *" $t "*) ;; *) regress_1="$regress_1 $t" ;; esac
done
for t in $regress_2; do
    case " $regress_all " in
        *" $t "*) ;;
        *) echo "run-all.sh: $t (regress_2) is not in the Makefile's REGRESS"; count "regress-2: $t" 1 ;;
    esac
done
# The phases: their tree, their tests and where their differences are
# written.  $work itself stays the caller's (mode 711): the logs and
# statuses written there cannot be replaced by the user the tests run as,
# who owns only the trees, and whose files are read as that user.
declare -A phase_dir=([regress]=src [regress-2]=src2 [isolation]=src2)
declare -A phase_regress=([regress]="$regress_1" [regress-2]="setup $regress_2" [isolation]="")
declare -A phase_isolation=([regress]="" [regress-2]="" [isolation]="$isolation_all")
declare -A phase_diffs=([regress]=regression.diffs [regress-2]=regression.diffs
    [isolation]=output_iso/regression.diffs)
work=$(mktemp -d /tmp/paynotify-test.XXXXXX) && [ -n "$work" ] && chmod 711 "$work" ||
    { echo "run-all.sh: cannot make a work directory"; exit 1; }
cp -a "$top/." "$work/src" && cp -a "$top/." "$work/src2" ||
    { echo "run-all.sh: cannot copy the tree"; exit 1; }
if [ "$(id -u)" = 0 ]; then
    chown -R postgres "$work/src" "$work/src2"
    as_user() { runuser -u postgres -- "$@"; }
else
    as_user() { "$@"; }
fi
# run_phase NAME: that phase's make installcheck, its output in
# $work/NAME.log, its status in $work/NAME.rc
run_phase() {
    local rc
    as_user make -C "$work/${phase_dir[$1]}" installcheck \
        REGRESS="${phase_regress[$1]}" ISOLATION="${phase_isolation[$1]}" >"$work/$1.log" 2>&1
    rc=$?
    echo $rc >"$work/$1.rc"
}
t0=$SECONDS c0=$(cpu_ticks)
run_phase regress &
lane1=$!
run_phase regress-2
run_phase isolation
wait $lane1
for phase in regress regress-2 isolation; do
    rc=$(cat "$work/$phase.rc" 2>/dev/null)
    case $rc in '' | *[!0-9]*) rc=1 ;; esac
    declare -A seen=()
    while read -r name verdict; do
        [ "$verdict" = ok ]
        count "$phase: $name" $?
        seen[$name]=1
        case " ${phase_regress[$phase]} ${phase_isolation[$phase]} " in
            *" $name "*) ;;
            *) echo "$phase: $name is not of this phase's list"; count "$phase: $name (listed)" 1; rc=1 ;;
        esac
    done < <(sed -nE 's/^(test )? *([A-Za-z0-9_]+) +\.\.\. +(ok|FAILED|failed).*/\2 \3/p' "$work/$phase.log")
    for t in ${phase_regress[$phase]} ${phase_isolation[$phase]}; do
        [ -n "${seen[$t]:-}" ] || { echo "$phase: $t has no verdict"; count "$phase: $t" 1; rc=1; }
    done
    unset seen
    if [ "$rc" -ne 0 ]; then
        count "make installcheck ($phase)" 1
        tail -20 "$work/$phase.log"
        d=$work/${phase_dir[$phase]}/${phase_diffs[$phase]}
        as_user test -f "$d" && { echo "--- $d"; as_user head -200 "$d"; }
    else
        count "make installcheck ($phase)" 0
    fi
done
echo "(pg_regress and isolation specs: $(busy $t0 $c0))"

# Scripts that spend most of their time waiting, or keep one core busy and
# time nothing, start early, in the background, beside the script named
# after them; their output goes to a file and is printed, and counted, at
# their own place in the list, which comes after the scripts they run beside
# (each script's line in the output says how busy the cores were: most keep
# one of two busy). No script that runs while another one does installs
# anything: a make install or a package would replace paynotify.so (install
# unlinks it, then writes it again) while a backend of the other may be
# loading it; their own pn_install finds this build installed and does
# nothing (two that do not take turns). So
# test/package/run.sh, which installs the packages, comes last, alone.
#   test/e2e/cron.sh waits for pg_cron's next minute (up to 60 s: Debian
#     12's pg_cron 1.4 has no finer schedule): beside the shim's own tests.
#   test/e2e/relay.sh waits for its receiver's slow and hung answers and
#     retries (a third of two cores busy): beside four short end-to-end tests.
#   test/e2e/patroni.sh waits for Patroni's leader key to expire (20 s) and
#     its members to rejoin: beside the mutation fuzzer, which keeps one core
#     busy and counts its work in mutations, never in time.
#   shim/tests/serve-test.sh times nothing: beside shim/tests/send-test.sh
#     (which compiles in a copy of the shim's tree, not in the tree).
#   test/e2e/reconciliation.sh and test/e2e/memory.sh keep one core busy
#     and time nothing closely (memory.sh counts bytes over a count of
#     calls; reconciliation.sh gives its expectations 120 s to settle):
#     beside test/e2e/samples.sh and test/e2e/failover.sh, which keep the
#     other one busy (side by side they took 30 s where they took 42 s one
#     after the other, and 50 s where they took 64 s).
#   test/chaos/run.sh mostly waits for the late retries of what its faults
#     disturbed, and judges only what was applied, never how fast; and
#     test/bench/smoke-citus.sh asserts nothing about speed (no benchmark
#     does): both beside test/fuzz/notices.sh, whose work is counted in
#     examples.  (Not beside test/fuzz/run.sh, which runs each libFuzzer
#     target for a fixed time and would do less work without saying so;
#     nor beside test/bench/smoke.sh: benchmarks beside benchmarks took
#     longer than one after the other.)
# A script started in the background is waited for at its place; one
# whose place came before the script it runs beside is a failure.
early_tests=(
    "test/e2e/cron.sh before shim/tests/cgi-test.sh"
    "test/e2e/relay.sh before test/e2e/reconcile.sh"
    "test/e2e/patroni.sh before test/e2e/hostile.sh"
    "shim/tests/serve-test.sh before shim/tests/send-test.sh"
    "test/e2e/reconciliation.sh before test/e2e/samples.sh"
    "test/e2e/memory.sh before test/e2e/failover.sh"
    "test/chaos/run.sh before test/fuzz/notices.sh"
    "test/bench/smoke-citus.sh before test/fuzz/notices.sh"
)
declare -A early_pid=() early_t0=()
early_dir=$(mktemp -d /tmp/paynotify-early.XXXXXX) && [ -n "$early_dir" ] ||
    { echo "run-all.sh: cannot make a directory for the early scripts"; exit 1; }
# start_early SCRIPT: starts the early scripts to run beside SCRIPT
start_early() {
    local e s
    for e in "${early_tests[@]}"; do
        s=${e%% before *}
        [ "${e##* before }" = "$1" ] && [ -f "$s" ] && [ -x "$s" ] || continue
        if [ $quick = 1 ] && ! printf '%s\n' "${quick_tests[@]}" | grep -qxF "$s"; then
            continue
        fi
        echo "(started $s in the background: its output comes at its place in the list)"
        { t=$SECONDS; "$s"; rc=$?; echo $((SECONDS - t)) >"$early_dir/${s//\//_}.secs"; exit $rc; } \
            >"$early_dir/${s//\//_}.out" 2>&1 &
        early_pid[$s]=$!
        early_t0[$s]=$SECONDS
    done
}

# run_test SCRIPT: one script of the list; missing or not executable fails
run_test() {
    start_early "$1"
    note "$1"
    if [ -n "${early_pid[$1]:-}" ]; then
        local rc
        wait "${early_pid[$1]}"
        rc=$?
        unset "early_pid[$1]"
        cat "$early_dir/${1//\//_}.out"
        echo "($1: $(cat "$early_dir/${1//\//_}.secs" 2>/dev/null || echo '?') s in the background, waited for after $((SECONDS - early_t0[$1])) s)"
        count "$1" $rc
    elif [ ! -f "$1" ]; then
        echo "missing: $1"
        count "$1" 1
    elif [ ! -x "$1" ]; then
        echo "not executable: $1"
        count "$1" 1
    else
        local t0=$SECONDS c0 rc
        c0=$(cpu_ticks)
        "$1"
        rc=$?
        echo "($1: $(busy $t0 $c0))"
        count "$1" $rc
    fi
}
for t in "${quick_tests[@]}"; do
    run_test "$t"
done
if [ $quick = 0 ]; then
    for t in "${full_tests[@]}"; do
        run_test "$t"
    done
fi

# (a script started in the background whose place in the list had passed)
for t in "${!early_pid[@]}"; do
    note "$t"
    wait "${early_pid[$t]}"
    cat "$early_dir/${t//\//_}.out"
    echo "$t was started in the background after its own place in the list"
    count "$t (background)" 1
done
rm -rf "$work" "$early_dir"
[ -n "$pybin" ] && rm -rf "$pybin"
note "summary"
echo "wall time: $((SECONDS / 60)) min $((SECONDS % 60)) s"
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
