#!/usr/bin/env bash
# The whole paynotify test suite, from a clean clone, as root on Debian 12:
#   installs what is missing, builds, installs, then runs pg_regress and the
#   isolation specs (temporary instances), the shim's CGI and FastCGI tests,
#   the load generator's tests, the end-to-end tests through nginx, and the
#   short fuzzing runs.  Prints "N passed, M failed" last; exits non-zero on
#   any failure.
#
#   test/run-all.sh [--quick]     --quick skips end-to-end and fuzzing
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

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

note "build"
make -s clean >/dev/null 2>&1
if make -s 2>&1 | tee /tmp/paynotify-build.$$ | grep -E 'warning|error' ; then
    count "extension builds without warnings" 1
else
    count "extension builds without warnings" 0
fi
rm -f /tmp/paynotify-build.$$
make -s install >/dev/null || { echo "make install failed"; exit 1; }
make -s -C shim >/dev/null 2>&1; count "shim builds" $?

# pg_regress and the isolation tester refuse to run as root: run them as
# the postgres user in a private copy of the tree.
note "pg_regress and isolation specs"
work=$(mktemp -d /tmp/paynotify-test.XXXXXX)
cp -a "$top/." "$work/src"
if [ "$(id -u)" = 0 ]; then
    chown -R postgres "$work"
    as_user() { runuser -u postgres -- "$@"; }
else
    as_user() { "$@"; }
fi
as_user make -C "$work/src" installcheck >"$work/installcheck.log" 2>&1
rc=$?
while read -r name verdict; do
    [ "$verdict" = ok ]
    count "regress: $name" $?
done < <(sed -nE 's/^(test )? *([A-Za-z0-9_]+) +\.\.\. +(ok|FAILED|failed).*/\2 \3/p' "$work/installcheck.log")
if [ $rc -ne 0 ]; then
    count "make installcheck" 1
    for d in "$work/src/regression.diffs" "$work/src/output_iso/regression.diffs"; do
        [ -f "$d" ] && { echo "--- $d"; head -200 "$d"; }
    done
else
    count "make installcheck" 0
fi

# end-to-end tests that --quick runs too, one line each
quick_e2e=(test/e2e/dump.sh)
quick_e2e+=(test/e2e/upgrade.sh)
quick_e2e+=(test/e2e/cron.sh)
quick_e2e+=(test/e2e/monitoring.sh)
for t in test/unit/run.sh test/unit/crypto-fault.sh shim/tests/cgi-test.sh shim/tests/send-test.sh "${quick_e2e[@]}"; do
    [ -x "$t" ] || continue
    note "$t"
    "$t"; count "$t" $?
done

if [ $quick = 0 ]; then
    for t in test/e2e/*.sh test/model/run.sh test/chaos/run.sh test/fuzz/run.sh; do
        [ -x "$t" ] || continue
        [[ " ${quick_e2e[*]} " == *" $t "* ]] && continue	# run above, also with --quick
        note "$t"
        "$t"; count "$t" $?
    done
fi

rm -rf "$work"
note "summary"
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
