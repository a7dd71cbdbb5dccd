#!/usr/bin/env bash
# test/e2e/hostile.sh: hostile input, through SQL and (when the shim builds)
# through paynotify-cgi run as a plain CGI process.
#
#   1. Hand-written hostile requests (test/e2e/hostile/cases.py) for all
#      three gateways: empty, NULL and 10 MiB bodies (with
#      paynotify.max_body_size raised too, so the parsers see them), invalid
#      UTF-8, NUL bytes, JSON nested 10,000 deep, SQL in every field, wrong
#      content types, replayed stale timestamps, WECHATPAY/SIGNTEST probes,
#      unknown channels and serials, headers as arrays/numbers/null/two
#      spellings, and validly signed bodies whose fields are missing or of the
#      wrong type (1e999999 among them).  Each must get its documented
#      outcome and status; a rejected or malformed one must write nothing
#      (every table of schemas pay and public, the orders table included,
#      hashed by row version before and after each request: any write).
#   2. A mutation fuzzer (test/e2e/hostile/mutate.py): every vector's body
#      and headers mutated at random (seeded), each delivered in its own
#      transaction: no error, no crash, only the eight outcomes with their
#      documented statuses, nothing written unless authentic, and nothing
#      authentic unless its signed bytes are a genuine gateway's.  The work
#      is bounded by the number of mutations, never by time: every one of
#      them is delivered, however fast the machine is.
#   3. A subset through paynotify-cgi with its body cap: 10 MiB bodies,
#      duplicated and oversized headers, wrong content types, NUL bytes.
#   At the end the postmaster must be the one that started (no backend
#   crashed) and the server log must not show a backend that died: no
#   "terminated by signal", no server process that "exited with exit code",
#   no "all server processes terminated; reinitializing".
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/hostile.sh
# Environment: PN_HOSTILE_SEED (default 20260101), PN_HOSTILE_MUTATIONS
# (default 25000), PN_KEEP_TMP=1 keeps the temporary directory.  Needs postgresql-15
# with contrib (pgcrypto), python3 and python3-cryptography.  Everything
# started here is stopped by pid on exit.  The last line printed is
# "N passed, M failed"; the exit status is non-zero when M > 0.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
# shellcheck source=test/lib.sh
. test/lib.sh

HERE=$ROOT/test/e2e/hostile
SEED=${PN_HOSTILE_SEED:-20260101}
MUTATIONS=${PN_HOSTILE_MUTATIONS:-25000}
TMP=$(mktemp -d /tmp/pn-hostile.XXXXXX)
chmod 711 "$TMP"
PGDIR=$TMP/pg
PGPORT=$(pn_free_port)
export PGCLIENTENCODING=UTF8 PYTHONIOENCODING=utf-8 PYTHONDONTWRITEBYTECODE=1
pass=0
fail=0

# ok, not_ok, check, relay_results, summary, remove_tmp: test/lib.sh
finish() {
    summary
    exit
}

cleanup() {
    pn_cluster_stop "$PGDIR" 2>/dev/null
    remove_tmp "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql_su() { pn_psql "$PGDIR" "$PGPORT" -d postgres "$@"; }
# abnormal_exits: how many lines of the server log show a backend that died
# (by a signal or an exit code) or the crash recovery that follows it.
abnormal_exits() {
    grep -cE 'terminated by signal|server process \(PID [0-9]+\) exited with exit code|all server processes terminated; reinitializing' \
        "$PGDIR/server.log"
}

# ---- the cluster ----------------------------------------------------------------

echo "# cluster on port $PGPORT in $TMP"
# The cluster's owner must read the vectors: work on a copy it owns.
pn_fixture_copy "$TMP"
[ "$(id -u)" = 0 ] && chown -R "$PN_RUNUSER" "$TMP/vectors"
if ! pn_cluster_start "$PGDIR" "$PGPORT" "fsync = off"; then
    not_ok "throwaway cluster starts"
    finish
fi
started=$(psql_su -Atc "SELECT pg_postmaster_start_time()")
postmaster=$(pn_cluster_pid "$PGDIR")

if ! psql_su -c "SET paynotify_test.vdir = '$TMP/vectors/'" -f test/fixture.sql \
        >"$TMP/fixture.log" 2>&1 ||
   ! psql_su -c "SET paynotify_test.vdir = '$TMP/vectors/'" \
        -c "SELECT t.configure('wx_transaction_success_valid', 'wx'),
                   t.configure('ali_trade_success_valid', 'ali'),
                   t.configure('stripe_payment_intent_succeeded_valid', 'st')" \
        -f "$HERE/hostile.sql" >"$TMP/setup.log" 2>&1; then
    cat "$TMP/fixture.log" "$TMP/setup.log"
    not_ok "extension, fixture, channels for the three gateways, vector baseline"
    finish
fi
ok "extension, fixture, channels for the three gateways, vector baseline"
check "every vector replayed as the manifest says" "" \
    "$(psql_su -Atc "SELECT string_agg(b.name || ': ' || b.outcome, ', ')
                     FROM h.baseline b JOIN t.manifest m USING (name)
                     WHERE b.outcome <> CASE WHEN m.c ? 'duplicate_of' THEN 'duplicate'
                                             ELSE m.c->>'outcome' END")"

# ---- 1. hand-written hostile requests --------------------------------------------

echo "# hostile requests through paynotify_handle"
if ! python3 "$HERE/cases.py" >"$TMP/cases.sql" 2>"$TMP/cases.err" ||
   ! psql_su -f "$TMP/cases.sql" >"$TMP/cases.log" 2>&1; then
    cat "$TMP/cases.err" "$TMP/cases.log" | tail -20
    not_ok "hostile requests built and signed"
    finish
fi
psql_su -Atc "SELECT format('SELECT h.run_case(%L);', name) FROM h.cases ORDER BY n" \
    >"$TMP/run_cases.sql"
ncases=$(wc -l <"$TMP/run_cases.sql")
# one statement, one transaction per request; anomalies' WARNINGs stay in the log
PGOPTIONS="-c client_min_messages=error" \
    psql_su -qAt -v ON_ERROR_STOP=0 -f "$TMP/run_cases.sql" >"$TMP/run_cases.out" 2>&1
relay_results "$TMP/run_cases.out"
check "every hostile request answered" "$ncases" "$(grep -cE '^(PASS|FAIL) ' "$TMP/run_cases.out")"

# SQL in the fields was stored as data, and every table is still there.
check "SQL-looking ids and order numbers stored verbatim, orders paid" "3 3 3" \
    "$(psql_su -At <<'SQL'
SELECT (SELECT count(*) FROM pay.payment_record
        WHERE order_no IN ($q$';DROP TABLE orders;--S$q$, $q$';DROP TABLE orders;--W$q$,
                           $q$';DROP TABLE orders;--A$q$))
    || ' ' || (SELECT count(*) FROM pay.payment_notify_log
        WHERE notify_id IN ($q$evt_';DROP TABLE pay.payment_notify_log;--$q$,
                            $q$wx'; DROP TABLE pay.payment_record;--$q$,
                            $q$ali';DROP TABLE pay.paynotify_outbox;--$q$))
    || ' ' || (SELECT count(*) FROM public.orders
        WHERE order_no LIKE $q$';DROP TABLE orders;--_$q$ AND status = 'paid')
SQL
)"
check "no table dropped" "9" \
    "$(psql_su -Atc "SELECT count(to_regclass(x)) FROM unnest(ARRAY['pay.payment_notify_log',
        'pay.payment_record', 'pay.paynotify_refund', 'pay.paynotify_outbox', 'pay.paynotify_anomaly',
        'pay.paynotify_channel', 'pay.paynotify_key', 'public.orders', 'pay.paynotify_binding']) x")"

# ---- 2. the mutation fuzzer --------------------------------------------------------

echo "# mutation fuzzer: $MUTATIONS mutations (seed $SEED)"
if ! python3 "$HERE/mutate.py" "$SEED" "$MUTATIONS" >"$TMP/mut.sql" 2>"$TMP/mut.err" ||
   ! psql_su -q -f "$TMP/mut.sql" >"$TMP/mut.log" 2>&1; then
    cat "$TMP/mut.err" "$TMP/mut.log" | tail -20
    not_ok "mutations generated"
    finish
fi
cat "$TMP/mut.err"
t0=$(date +%s)
PGOPTIONS="-c client_min_messages=error" psql_su -c "CALL h.run_mutations()" \
    >"$TMP/run_mut.log" 2>&1 || not_ok "mutation run completes" "$(tail -5 "$TMP/run_mut.log")"
t1=$(date +%s)
done_n=$(psql_su -Atc "SELECT count(*) FROM h.mut_result")
echo "delivered $done_n of $MUTATIONS mutated requests in $((t1 - t0))s; by outcome:"
psql_su -Atc "SELECT format('  %-10s %s  %5s  (%s of them still genuinely signed)',
                            outcome, status, count(*), count(*) FILTER (WHERE allowed))
              FROM h.mut_result JOIN h.mut USING (id)
              GROUP BY outcome, status ORDER BY count(*) DESC"
if [ "$done_n" -lt "$MUTATIONS" ]; then
    # the run stopped before the end: name the mutation it stopped at
    next=$(psql_su -Atc "SELECT min(id) FROM h.mut WHERE id NOT IN (SELECT id FROM h.mut_result)")
    not_ok "the mutation run stopped at mutation $next" \
        "$(psql_su -Atc "SELECT base || ': ' || ops FROM h.mut WHERE id = $next" 2>&1)"
fi
check "every one of the $MUTATIONS mutated requests delivered" "$MUTATIONS" "$done_n"
failures=$(psql_su -Atc "SELECT count(*) FROM h.mut_failures")
if [ "$failures" = 0 ]; then
    ok "mutated requests: no error, documented replies only, nothing forged authenticated, nothing written when refused"
else
    not_ok "mutated requests: $failures wrong" \
        "$(psql_su -Atc "SELECT format('#%s %s [%s] -> %s %s: %s %s', id, base, ops, outcome,
                                        status, problem, COALESCE(err, ''))
                         FROM h.mut_failures ORDER BY id LIMIT 20")"
fi
check "mutated requests whose signed bytes are genuine came out authentic at least once" yes \
    "$(psql_su -Atc "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END
                     FROM h.mut_result JOIN h.mut USING (id)
                     WHERE allowed AND outcome NOT IN ('rejected', 'malformed')")"

# ---- 3. through the CGI shim ---------------------------------------------------------

if [ -f shim/cgi/paynotify-cgi.c ] && [ -f shim/Makefile ]; then
    echo "# through paynotify-cgi as a CGI process"
    mkdir -p "$TMP/build/shim"
    cp -r shim/Makefile shim/common shim/cgi "$TMP/build/shim/" && cp paynotify.control "$TMP/build/"
    if make -s -C "$TMP/build/shim" paynotify-cgi >"$TMP/shim-build.log" 2>&1; then
        psql_su -q -c "CREATE ROLE pn_hostile_shim LOGIN" \
            -c "SELECT pay.paynotify_grant('pn_hostile_shim', 'handler')" >/dev/null
        python3 "$HERE/cgi.py" "$TMP/build/shim/paynotify-cgi" \
            "host=$PGDIR port=$PGPORT dbname=postgres user=pn_hostile_shim" \
            "$PN_PGBIN/psql" "$PGDIR" "$PGPORT" >"$TMP/cgi.out" 2>&1
        relay_results "$TMP/cgi.out" "cgi: "
    else
        echo "  (skipped: the shim does not build here; see $TMP/shim-build.log)"
        tail -5 "$TMP/shim-build.log"
    fi
fi

# ---- the server survived ---------------------------------------------------------------

check "postmaster start time unchanged (no backend crash, no restart)" "$started" \
    "$(psql_su -Atc "SELECT pg_postmaster_start_time()" 2>&1)"
check "same postmaster" "$postmaster" "$(pn_cluster_pid "$PGDIR")"
check "server log has no backend that died (signal, exit code) and no reinitialization" 0 \
    "$(abnormal_exits)"
check "server log has no PANIC or TRAP" 0 "$(grep -cE 'PANIC|TRAP:' "$PGDIR/server.log")"

finish
