#!/usr/bin/env bash
# synchronous_commit through libpq's pipeline mode: the statements of one
# pipeline (extended protocol, one Sync) are one transaction without a
# transaction block.  A repeat of a settled notification relaxes its commit
# (only its counter is written); the application's own writes after it in
# the same pipeline must still commit as the session says.  A first
# delivery's commit is synchronous even when the application lowers
# synchronous_commit after it in the same transaction.  Whether a
# commit was synchronous is read from the WAL: the flush position right
# after it has passed the last record before it (the WAL writer waits 10 s
# between rounds here, autovacuum is off).
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/pipeline.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir pipeline)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; rm -rf "$dir"' EXIT
pass=0
fail=0

pn_install || { echo "build failed"; exit 1; }
"${CC:-cc}" -Wall -Wextra -o "$dir/pipeline_commit" test/e2e/pipeline_commit.c \
    -I"$("$PN_PGBIN/pg_config" --includedir)" -L"$("$PN_PGBIN/pg_config" --libdir)" -lpq \
    || { echo "pipeline_commit does not build"; exit 1; }
pn_cluster_start "$dir" "$port" "fsync = off" "autovacuum = off" "wal_writer_delay = 10s" || exit 1
sql() { pn_psql "$dir" "$port" -d postgres "$@"; }

secret=$(tr -d '\n' < test/vectors/keys/stripe_secret_1.txt)
signed() {	# signed ID: the headers and body of a signed Stripe event ID
python3 - "$secret" "$1" <<'PY'
import hashlib, hmac, json, sys, time
b = json.dumps({"id": sys.argv[2], "object": "event", "type": "customer.created", "livemode": False,
                "data": {"object": {"id": "cus_1"}}}, separators=(",", ":"))
ts = int(time.time())
sig = hmac.new(sys.argv[1].encode(), f"{ts}.{b}".encode(), hashlib.sha256).hexdigest()
print(json.dumps({"Content-Type": "application/json", "Stripe-Signature": f"t={ts},v1={sig}"},
                 separators=(",", ":")), b)
PY
}
read -r hdr body < <(signed evt_pipeline)
read -r hdr2 body2 < <(signed evt_pipeline_2)
sql -v hdr="$hdr" -v body="$body" -v hdr2="$hdr2" -v body2="$body2" -v whsec="$secret" >/dev/null <<'SQL' || { echo "setup failed"; exit 1; }
CREATE EXTENSION paynotify;
CREATE ROLE shim LOGIN;
SELECT paynotify_grant('shim', 'handler');
CREATE SCHEMA app AUTHORIZATION shim;
SELECT paynotify_add_channel('st', 'stripe', '{}');
SELECT paynotify_add_key('st', 's1', :'whsec');
CREATE TABLE app.inbox AS SELECT :'hdr'::jsonb AS h, convert_to(:'body', 'UTF8') AS b;
ALTER TABLE app.inbox OWNER TO shim;
CREATE TABLE app.inbox2 AS SELECT :'hdr2'::jsonb AS h, convert_to(:'body2', 'UTF8') AS b;
ALTER TABLE app.inbox2 OWNER TO shim;
CREATE TABLE app.log (note text);
ALTER TABLE app.log OWNER TO shim;
SQL
pc() { "$dir/pipeline_commit" "host=$dir port=$port dbname=postgres user=shim" "$@"; }
deliver="SELECT outcome FROM paynotify_handle('st', (SELECT h FROM app.inbox), (SELECT b FROM app.inbox))"
mark="SELECT pg_current_wal_insert_lsn()"
flushed() { echo "SELECT pg_current_wal_flush_lsn() >= '$1'::pg_lsn"; }
# pipeline STATEMENT...: the statements, then the insert position, in one
# pipeline; prints their values and whether the commit flushed past it
pipeline() {
    local out lsn
    out=$(pc "$@" "$mark" "SELECT 1") || return 1
    lsn=$(printf '%s\n' "$out" | sed -n "s/^$(($# + 1)): //p")
    printf '%s\n' "$out" | sed -n "1,$#p" | sed 's/^[0-9]*: //' | tr '\n' ' '
    pc "$(flushed "$lsn")" | sed 's/^1: //'
}

# relaxed WANT STATEMENT...: the pipeline up to three times until it
# prints WANT.  An asynchronous commit whose record starts a new WAL page
# wakes the WAL writer, which may flush the finished page at once; three
# such commits in a row are not chance, and a synchronous commit never
# prints 'f'.
relaxed() {
    local want=$1 got
    shift
    for _ in 1 2 3; do
        got=$(pipeline "$@")
        [ "$got" = "$want" ] && break
    done
    echo "$got"
}

check "a first delivery alone: synchronous" "ignored t" "$(pipeline "$deliver")"
check "a repeat alone in a pipeline: relaxed (only its counter is written)" "duplicate f" \
    "$(relaxed "duplicate f" "$deliver")"
check "a repeat, then the application's own write in the same pipeline: the commit is synchronous" \
    "duplicate INSERT 0 1 t" "$(pipeline "$deliver" "INSERT INTO app.log VALUES ('after a repeat')")"
check "the application's write, then a repeat: synchronous (nothing relaxed)" \
    "INSERT 0 1 duplicate t" "$(pipeline "INSERT INTO app.log VALUES ('before a repeat')" "$deliver")"
check "two repeats in one pipeline: relaxed" "duplicate duplicate f" \
    "$(relaxed "duplicate duplicate f" "$deliver" "$deliver")"
check "a first delivery, then the application's SET LOCAL synchronous_commit = off in the same pipeline: synchronous" \
    "ignored SET t" \
    "$(pipeline "SELECT outcome FROM paynotify_handle('st', (SELECT h FROM app.inbox2), (SELECT b FROM app.inbox2))" \
                "SET LOCAL synchronous_commit = off")"
check "the session's setting is the caller's after each" "on" "$(pc "SHOW synchronous_commit" | sed 's/^1: //')"
finish
