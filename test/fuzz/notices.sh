#!/usr/bin/env bash
# Fuzz the extension's notice extraction with authentic, odd notifications
# (test/fuzz/notices.py): WeChat Pay, Alipay and Stripe notices signed (and
# sealed) with the test keys, built by Hypothesis from the gateways' kinds
# and the documented samples (agreement notices and invoices first), each
# with fields missing, null, of the wrong type, empty, huge, duplicated,
# non-ASCII or GBK, ids at and over 255 bytes, amounts negative, zero and
# past int64; every one delivered twice through paynotify_handle as the
# shim's role.  On every input: the backend survives, the answer is one of
# the contract's outcomes or an error that is not XX000-XX002 and names no
# key, nothing is half-written (an error, rejection or malformed answer
# writes no row anywhere; an answer that applied nothing leaves the orders,
# agreements and payments as they were), and the repeat is answered in the
# same class without a second application.  At the end the postmaster is
# the one that started and its log shows no backend that died.
#
#   test/fuzz/notices.sh [--full] [--examples N] [--seed N] [--out DIR]
#
# Without arguments (the suite) 600 inputs in Hypothesis's derandomized
# sequence, about 20 s on two cores; --full 10,000; --examples N that many.
# With --seed (or --full, or --examples) the sequence is random, its seed
# printed: a failure is reproduced with the same --seed and count.  Failed
# requests are kept in --out (default: the temporary directory, kept when
# anything failed).  Starts its own throwaway cluster (PN_PGBIN's
# PostgreSQL, port PN_NOTICES_PORT or a free one), stopped by pid at the
# end.  Uses Debian's python3 with python3-psycopg2, python3-cryptography
# and python3-hypothesis.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
. test/lib.sh

py=/usr/bin/python3
examples=600
mode=(--derandomize)
out=
seedargs=()
while [ $# -gt 0 ]; do
    case $1 in
        --full) examples=10000; mode=() ;;
        --examples) examples=$2; mode=(); shift ;;
        --seed) seedargs=(--seed "$2"); mode=(); shift ;;
        --out) out=$2; shift ;;
        *) echo "usage: $0 [--full] [--examples N] [--seed N] [--out DIR]" >&2; exit 2 ;;
    esac
    shift
done
"$py" -c 'import psycopg2, cryptography, hypothesis' \
    || { echo "notices: needs python3-psycopg2, python3-cryptography, python3-hypothesis (scripts/deps.sh)"; exit 1; }
pn_install || exit 1

dir=$(pn_tmp_dir notices)
rc=0
cleanup() {
    pn_cluster_stop "$dir/pg"
    if [ "$rc" != 0 ] && [ -z "$out" ]; then PN_KEEP_TMP=1 remove_tmp "$dir"; else remove_tmp "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
port=${PN_NOTICES_PORT:-$(pn_free_port)}
# a throwaway cluster: durability is not what this test is about
pn_cluster_start "$dir/pg" "$port" "fsync = off" "full_page_writes = off"
admin="host=$dir/pg port=$port dbname=postgres user=postgres"
shim="host=$dir/pg port=$port dbname=postgres user=notices_shim"

# Hypothesis's own files (its character tables) in the temporary directory
PYTHONDONTWRITEBYTECODE=1 HYPOTHESIS_STORAGE_DIRECTORY=$dir/hypothesis "$py" "$top/test/fuzz/notices.py" --setup notices_shim \
    --admin-dsn "$admin" --dsn "$shim" --examples "$examples" "${mode[@]}" "${seedargs[@]}" \
    --out "${out:-$dir/failed}" || rc=$?
if grep -qE 'PANIC|terminated by signal|server process \(PID [0-9]+\) exited with exit code|all server processes terminated' \
    "$dir/pg/server.log"; then
    echo "notices: the server log shows a backend that died:"
    grep -E 'PANIC|terminated by signal|exited with exit code|all server processes terminated' "$dir/pg/server.log" | head -5
    rc=1
fi
[ $rc = 0 ] && echo "notices: ok" || echo "notices: FAILED (requests in ${out:-$dir/failed})"
exit $rc
