#!/usr/bin/env bash
# What a fresh backend pays before its first answer (a CGI request's
# backend is always fresh), and what a reload costs a warm one: prints
# figures, asserts nothing.
#
#   test/bench/fresh.sh [--smoke]
#
# --smoke: 3 backends each (the suite's test/bench/smoke.sh), figures that
# mean nothing but show that it still runs.
#
# On the stack's throwaway cluster (test/e2e/stack.sh: the bench's bound
# orders table, the shim's role notify_shim), FRESH_BACKENDS (default 25)
# new connections each time, the median, least and most of:
#   handle   one rejected paynotify_handle as notify_shim, the first
#            statement of its backend: the library loaded, the
#            configuration read, the orders table's code walked;
#   reload   the same in a warm backend after a role changed (ALTER ROLE:
#            the configuration loads again, and walks the code again);
#   temp     the same after a CREATE TEMP TABLE (a new type, which the
#            orders table's code does not reach: nothing is loaded);
#   walk     the orders table's code walked once, the first call of its
#            backend, and again: paynotify_table_authors (SQL) and the C
#            walk the configuration uses (its entry point
#            paynotify_table_authors_c, declared here for the purpose).
# The time is psql's \timing of that statement alone (not the connection).
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh

n=${FRESH_BACKENDS:-25}
[ "${1:-}" = --smoke ] && n=3
# (PN_BENCH_BUILT=1: built and installed already, by test/bench/smoke.sh)
[ -n "${PN_BENCH_BUILT:-}" ] || { pn_install; }

stack_init fresh
stack_pg
stack_schema 0 100
stack_sql -q -c "CREATE FUNCTION public.authors_c(regclass)
	RETURNS TABLE (what text, fn regprocedure, owner regrole)
	AS '\$libdir/paynotify', 'paynotify_table_authors_c' LANGUAGE C STABLE STRICT"

# timed USER SQL...: the time of the last statement, in a new backend
timed() {
    local user=$1
    shift
    "$PN_PGBIN/psql" -X -At -h "$STACK_DIR/pg" -p "$STACK_PGPORT" -U "$user" -d postgres -c '\timing on' "$@" |
        sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
# figures LABEL USER SQL...: n backends
figures() {
    local label=$1
    shift
    for ((i = 1; i <= n; i++)); do timed "$@"; done | sort -n |
        awk -v l="$label" '{a[NR] = $1} END {
            m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
            printf "%-44s median %7.1f ms  least %7.1f  most %7.1f  (%d backends)\n", l, m, a[1], a[NR], NR }'
}

handle="SELECT outcome FROM paynotify_handle('wxpay', '{}'::jsonb, 'x'::bytea)"
sqlwalk="SELECT count(*) FROM paynotify_table_authors('orders')"
cwalk="SELECT count(*) FROM public.authors_c('orders')"
echo "== a fresh backend's first answer; $n backends each; the orders table's code:" \
    "$(stack_sql -At -c "$sqlwalk") functions (SQL), $(stack_sql -At -c "$cwalk") (C)"
figures "handle: first statement of a backend" notify_shim -c "$handle"
figures "reload: after ALTER ROLE, warm" postgres -c "$handle" -c "ALTER ROLE notify_shim CONNECTION LIMIT -1" -c "$handle"
figures "temp: after CREATE TEMP TABLE, warm" notify_shim -c "$handle" -c "CREATE TEMP TABLE x (a int)" -c "$handle"
figures "walk, SQL: first statement of a backend" postgres -c "$sqlwalk"
figures "walk, SQL: second" postgres -c "$sqlwalk" -c "$sqlwalk"
figures "walk, C: first statement of a backend" postgres -c "$cwalk"
figures "walk, C: second" postgres -c "$cwalk" -c "$cwalk"
figures "baseline: SELECT 1, first statement" notify_shim -c "SELECT 1"
