#!/usr/bin/env bash
# paynotify-reconcile against a throwaway cluster and a loopback gateway
# (test/e2e/reconcile_responder.py, which records every request):
#   - it sends exactly the method, URL, headers and body the database built
#     (nothing of libcurl's own but Host and Content-Length), and hands back
#     the status, the response headers (repeated ones joined, names as
#     received) and the body's bytes intact (NULs, bytes that are not UTF-8);
#   - it logs one line per query and never a request header;
#   - --rate holds each channel to N requests a second, channels side by side;
#   - a 503 backs its channel off (1 s, then 2 s), a 429's Retry-After too,
#     while another channel goes on;
#   - no response (connection refused, a loopback address not allowed) is
#     applied to nothing and fails --once;
#   - as a daemon it survives a database restart (reconnects), stops on
#     SIGTERM when idle and, mid-request, after applying that request;
#   - a bill's fetch: its steps in order while the database says more, a
#     body larger than --max-response but within --max-bill handed back
#     whole, one log line per step, the --once summary; a body over
#     --max-bill is no response and fails --once;
#   - --help, --version, a bad option and a password in --dsn.
#
# STAND-INS: the database's side of queries (paynotify_query_due,
# paynotify_query_request, paynotify_query_apply) and of bills
# (paynotify_bill_due, paynotify_bill_request, paynotify_bill_apply) is
# stood in for here by
# functions of the same signatures in the test's own schema "standin", which
# claim, build and record from a table the test fills; the daemon is pointed
# at them with --schema=standin.  They test the daemon, not the database.
#
# Run as root (or the cluster's user) from anywhere in the repository:
#   test/e2e/reconcile.sh
# Everything started here is stopped by pid on exit.  Takes about 20 s;
# the last line printed is "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir reconcile)
port=$(pn_free_port)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pn_cluster_stop "$dir"
    remove_tmp "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0
fail=0

make -s -C shim reconcile/paynotify-reconcile >/dev/null || { echo "build failed"; exit 1; }
RECONCILE=$PWD/shim/reconcile/paynotify-reconcile

pn_cluster_start "$dir" "$port" "fsync = off" || exit 1
sql() { pn_psql "$dir" "$port" -d postgres "$@"; }
q() { sql -Atc "$1"; }

# ---- the stand-ins (see the header) ----------------------------------------
sql >/dev/null <<'SQL' || { echo "setup failed"; exit 1; }
CREATE ROLE reco LOGIN;
CREATE SCHEMA standin;
-- what the test makes due, and the request the "database" builds for it
CREATE TABLE standin.due (
    channel text, order_no text, next_at timestamptz NOT NULL DEFAULT now(),
    method text NOT NULL, url text NOT NULL, headers jsonb NOT NULL DEFAULT '{}', body text,
    PRIMARY KEY (channel, order_no));
-- what the daemon handed back
CREATE TABLE standin.applied (
    id serial PRIMARY KEY, channel text, order_no text, status integer, headers jsonb, body bytea,
    at timestamptz DEFAULT clock_timestamp());
-- STAND-IN for paynotify_query_due: claims (moves next_at an hour on)
CREATE FUNCTION standin.paynotify_query_due(max_rows integer DEFAULT 10)
RETURNS TABLE (channel text, order_no text)
LANGUAGE sql SECURITY DEFINER SET search_path = standin, pg_catalog AS $$
    UPDATE standin.due d SET next_at = now() + interval '1 hour'
    FROM (SELECT s.channel, s.order_no FROM standin.due s WHERE s.next_at <= now()
          ORDER BY s.next_at, s.channel, s.order_no LIMIT max_rows FOR UPDATE SKIP LOCKED) c
    WHERE (d.channel, d.order_no) = (c.channel, c.order_no)
    RETURNING d.channel, d.order_no
$$;
-- STAND-IN for paynotify_query_request: the stored request
CREATE FUNCTION standin.paynotify_query_request(channel text, order_no text)
RETURNS TABLE (method text, url text, headers jsonb, body text)
LANGUAGE sql SECURITY DEFINER SET search_path = standin, pg_catalog AS $$
    SELECT d.method, d.url, d.headers, d.body FROM standin.due d
    WHERE d.channel = $1 AND d.order_no = $2
$$;
-- STAND-IN for paynotify_query_apply: records what came back
CREATE FUNCTION standin.paynotify_query_apply(channel text, order_no text, status integer,
                                              headers jsonb, body bytea)
RETURNS TABLE (status integer, content_type text, body text, outcome text)
LANGUAGE sql SECURITY DEFINER SET search_path = standin, pg_catalog AS $$
    INSERT INTO standin.applied (channel, order_no, status, headers, body) VALUES ($1, $2, $3, $4, $5);
    SELECT 200, 'text/plain', 'ok', CASE WHEN $3 = 200 THEN 'paid' ELSE 'gateway_' || $3 END
$$;
-- a bill's fetch: its steps' requests in order, the step it is at
CREATE TABLE standin.bill (
    channel text, bill_date date, next_at timestamptz NOT NULL DEFAULT now(),
    steps jsonb NOT NULL, step integer NOT NULL DEFAULT 0, PRIMARY KEY (channel, bill_date));
-- STAND-IN for paynotify_bill_due
CREATE FUNCTION standin.paynotify_bill_due(max_rows integer DEFAULT 10)
RETURNS TABLE (channel text, bill_date date)
LANGUAGE sql SECURITY DEFINER SET search_path = standin, pg_catalog AS $$
    UPDATE standin.bill b SET next_at = now() + interval '1 hour'
    FROM (SELECT s.channel, s.bill_date FROM standin.bill s WHERE s.next_at <= now()
          ORDER BY s.channel LIMIT max_rows FOR UPDATE SKIP LOCKED) c
    WHERE (b.channel, b.bill_date) = (c.channel, c.bill_date)
    RETURNING b.channel, b.bill_date
$$;
-- STAND-IN for paynotify_bill_request: the step's stored request
CREATE FUNCTION standin.paynotify_bill_request(channel text, bill_date date)
RETURNS TABLE (method text, url text, headers jsonb, body text)
LANGUAGE sql SECURITY DEFINER SET search_path = standin, pg_catalog AS $$
    SELECT s->>'method', s->>'url', COALESCE(s->'headers', '{}'), s->>'body'
    FROM standin.bill b, jsonb_extract_path(b.steps, b.step::text) s
    WHERE b.channel = $1 AND b.bill_date = $2
$$;
-- STAND-IN for paynotify_bill_apply: records the answer, moves to the next step
CREATE FUNCTION standin.paynotify_bill_apply(channel text, bill_date date, status integer,
                                             headers jsonb, body bytea)
RETURNS TABLE (outcome text, more boolean)
LANGUAGE sql SECURITY DEFINER SET search_path = standin, pg_catalog AS $$
    INSERT INTO standin.applied (channel, order_no, status, headers, body)
    SELECT $1, 'bill:' || $2 || ':' || b.step, $3, $4, $5 FROM standin.bill b
    WHERE b.channel = $1 AND b.bill_date = $2;
    UPDATE standin.bill b SET step = b.step + 1 WHERE b.channel = $1 AND b.bill_date = $2
    RETURNING CASE WHEN b.step < jsonb_array_length(b.steps) THEN 'next' ELSE 'imported' END,
              b.step < jsonb_array_length(b.steps)
$$;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA standin FROM PUBLIC;
GRANT USAGE ON SCHEMA standin TO reco;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA standin TO reco;
SQL

# ---- the gateway ------------------------------------------------------------
python3 test/e2e/reconcile_responder.py "$dir/gport" "$dir/requests.jsonl" &
pids+=($!)
for _ in $(seq 50); do [ -s "$dir/gport" ] && break; sleep 0.1; done
gport=$(cat "$dir/gport")
gw="http://127.0.0.1:$gport"
closed=$(pn_free_port)

export PAYNOTIFY_DSN="host=$dir port=$port dbname=postgres user=reco"
reco_env=(env PAYNOTIFY_RECONCILE_SCHEMA=standin PAYNOTIFY_RECONCILE_ALLOW_PRIVATE=1)
run() {	# run LOG [OPTION...]: the daemon with the test's settings, in the foreground
    local log=$1; shift
    "${reco_env[@]}" "$RECONCILE" "$@" 2>>"$dir/$log"
}
start() {	# start LOG [OPTION...]: the same in the background, its pid in dpid
    local log=$1; shift
    "${reco_env[@]}" "$RECONCILE" "$@" 2>>"$dir/$log" &
    dpid=$!; pids+=($dpid)
}
requests() {	# requests PYTHON-EXPR: evaluated over the recorded requests (list r)
    python3 -c "import json,sys; r=[json.loads(l) for l in open('$dir/requests.jsonl')]; print($1)"
}
: >"$dir/requests.jsonl"

# ---- the command line -------------------------------------------------------
out=$("$RECONCILE" --help)
case $out in *--rate=N*--once*PAYNOTIFY_RECONCILE_INTERVAL*"Exit status"*) ok "--help lists the settings, --once and the exit codes" ;;
    *) not_ok "--help lists the settings, --once and the exit codes" "$out" ;; esac
check "--version" "paynotify-reconcile $(sed -n "s/^default_version = '\(.*\)'/\1/p" paynotify.control)" "$("$RECONCILE" --version)"
check_rc "a bad option: exit 2" 2 "$RECONCILE" --rate=0
check_rc "a password in --dsn: exit 2" 2 "$RECONCILE" --dsn "host=x password=secret"

# ---- exactly the request, exactly the response -------------------------------
auth='WECHATPAY2-SHA256-RSA2048 mchid="1900000001",nonce_str="n1",signature="SECRET-SIGNATURE-1",timestamp="1",serial_no="5157"'
sql -v auth="$auth" -v gw="$gw" >/dev/null <<'SQL'
INSERT INTO standin.due (channel, order_no, method, url, headers, body) VALUES
 ('wx', 'A-1', 'POST', :'gw' || '/ok/A-1?mchid=1900000001&x=%2F',
  jsonb_build_object('Authorization', :'auth', 'Accept', 'application/json', 'User-Agent', 'paynotify/1.4',
                     'Content-Type', 'application/json; charset=utf-8', 'Wechatpay-Serial', 'PUB_KEY_ID_1', 'X-Empty', ''),
  '{"mchid":"1900000001","note":"é中"}'),
 ('ali', 'B 2', 'GET', :'gw' || '/ok/B2?sign=SECRET-SIGNATURE-2', '{"Authorization": "Bearer SECRET-TOKEN-3"}', NULL);
SQL
out=$(run once.log --once)
rc=$?
check "--once: both queries applied, exit 0" "0|claimed 2, applied 2, failed 0" "$rc|$out"
check "the POST: method, path and query, body as built" \
    "POST|/ok/A-1?mchid=1900000001&x=%2F|{\"mchid\":\"1900000001\",\"note\":\"é中\"}" \
    "$(requests "'|'.join([[x['method'],x['path'],__import__('base64').b64decode(x['body']).decode()] for x in r if x['path'].startswith('/ok/A-1')][0])")"
want=$( (q "SELECT key || ': ' || value FROM standin.due, jsonb_each_text(headers) WHERE order_no = 'A-1'"
        echo "Content-Length: $(q "SELECT octet_length(body) FROM standin.due WHERE order_no = 'A-1'")"
        echo "Host: 127.0.0.1:$gport") | LC_ALL=C sort | paste -sd '|')
check "the POST's headers: the database's, and only Host and Content-Length besides" "$want" \
    "$(requests "b'|'.join(sorted((k+': '+v).encode() for k,v in [x for x in r if x['path'].startswith('/ok/A-1')][0]['headers'])).decode()")"
check "the GET: no body, its one header and Host only" \
    "GET|/ok/B2?sign=SECRET-SIGNATURE-2||Authorization: Bearer SECRET-TOKEN-3|Host: 127.0.0.1:$gport" \
    "$(requests "'|'.join([[x['method'],x['path'],x['body']]+sorted(k+': '+v for k,v in x['headers']) for x in r if x['path'].startswith('/ok/B2')][0])")"
expect_hex=$(python3 -c 'import sys; sys.path.insert(0,"test/e2e"); print((bytes(range(256))+b"\xff\xfe\x00end").hex())')
check "the response body's bytes reach the database intact (NULs, not UTF-8)" "2|$expect_hex" \
    "$(q "SELECT count(*), min(encode(body, 'hex')) FROM standin.applied WHERE status = 200 AND body = '\\x$expect_hex'::bytea")"
check "the response headers: one object, repeated ones joined, names as received" \
    "one, two|v|application/octet-stream" \
    "$(q "SELECT headers->>'X-Multi', headers->>'X-MiXed-Case', headers->>'Content-Type' FROM standin.applied WHERE order_no = 'A-1'")"
check "one log line per query: channel, order, status, outcome" "1|1" \
    "$(grep -c '^paynotify-reconcile: query wx A-1: HTTP 200, outcome paid$' "$dir/once.log")|$(grep -c '^paynotify-reconcile: query ali B 2: HTTP 200, outcome paid$' "$dir/once.log")"
check "no request header (Authorization) or signature in the log" 0 "$(grep -c 'SECRET' "$dir/once.log")"

# ---- --rate, per channel ---------------------------------------------------------
: >"$dir/requests.jsonl"
q "INSERT INTO standin.due (channel, order_no, method, url)
   SELECT c, c || i, 'GET', '$gw/ok/' || c || i FROM unnest('{r,s}'::text[]) c, generate_series(1, 8) i" >/dev/null
out=$(run rate.log --once --rate=4 --batch=100)
check "--rate=4: 16 queries of 2 channels applied" "claimed 16, applied 16, failed 0" "$out"
# the daemon starts each channel's requests 250 ms apart; the stand-in
# stamps them on arrival, which a loaded machine delays unevenly: each
# channel's 8 span 7 gaps (1.75 s; at --rate=5, 1.4 s), no two arrive
# together, and the two channels run side by side (one after the other:
# 3.75 s or more)
span=$(requests "' '.join('%.2f' % (lambda t: t[-1] - t[0])([x['t'] for x in r if x['path'].startswith('/ok/' + c)]) for c in 'rs')")
gaps=$(requests "min(b['t']-a['t'] for c in 'rs' for a,b in zip([x for x in r if x['path'].startswith('/ok/'+c)], [x for x in r if x['path'].startswith('/ok/'+c)][1:]))")
both=$(requests "'%.2f' % (max(x['t'] for x in r) - min(x['t'] for x in r))")
check "--rate=4: each channel's 8 requests paced at 250 ms (spans $span s, at least 1.5; min gap ${gaps} s, over 0.05)" 1 \
    "$(python3 -c "print(int(all(float(x) >= 1.5 for x in '$span'.split()) and $gaps > 0.05))")"
check "--rate=4: the channels side by side (the 16 within $both s, under 3 s)" 1 "$(python3 -c "print(int($both < 3))")"

# ---- back-off on 503 and 429, the other channel going on ---------------------------
: >"$dir/requests.jsonl"
q "INSERT INTO standin.due (channel, order_no, method, url)
   SELECT 'busy', 'busy' || i, 'GET', '$gw/busy/' || i FROM generate_series(1, 3) i
   UNION ALL SELECT 'lim', 'lim' || i, 'GET', '$gw/limit/' || i FROM generate_series(1, 2) i
   UNION ALL SELECT 'calm', 'calm' || i, 'GET', '$gw/ok/calm' || i FROM generate_series(1, 3) i" >/dev/null
out=$(run backoff.log --once --rate=100 --batch=100)
check "503 and 429 are answers: applied, exit 0" "0|claimed 8, applied 8, failed 0" "$?|$out"
busy=$(requests "' '.join('%.2f' % (b['t']-a['t']) for a,b in zip([x for x in r if x['path'].startswith('/busy/')], [x for x in r if x['path'].startswith('/busy/')][1:]))")
# (lower bounds: the back-off; upper bounds only tell it from the next
# doubling, whatever the machine's speed)
check "503: the channel backs off 1 s, then 2 s (gaps $busy)" 1 \
    "$(python3 -c "g=[float(x) for x in '$busy'.split()]; print(int(len(g) == 2 and 0.95 <= g[0] < 1.9 and 1.95 <= g[1] < 3.9))")"
lim=$(requests "'%.2f' % (lambda l: l[1]['t']-l[0]['t'])([x for x in r if x['path'].startswith('/limit/')])")
check "429 with Retry-After: 2: the channel waits 2 s (gap $lim)" 1 "$(python3 -c "print(int(1.95 <= $lim < 3.9))")"
calm=$(requests "'%.2f' % (max(x['t'] for x in r if x['path'].startswith('/ok/calm')) - min(x['t'] for x in r))")
# before the busy channel's second request, and within half its first back-off
# of its first (a back-off that held every channel would hold calm's too)
calm_first=$(requests "int((lambda c, b: max(c) < b[1] and max(c) < b[0] + 0.5)([x['t'] for x in r if x['path'].startswith('/ok/calm')], sorted(x['t'] for x in r if x['path'].startswith('/busy/'))))")
check "meanwhile the other channel went on (its 3 within ${calm} s of the first request, before the busy channel's second and within 0.5 s of its first)" 1 "$calm_first"
check "the 503s reached the database as 503" "3" "$(q "SELECT count(*) FROM standin.applied WHERE channel = 'busy' AND status = 503")"
check "each logged with its status and outcome" 1 "$(grep -c 'query busy busy2: HTTP 503, outcome gateway_503$' "$dir/backoff.log")"

# ---- no response ------------------------------------------------------------------
q "INSERT INTO standin.due (channel, order_no, method, url) VALUES ('dead', 'D1', 'GET', 'http://127.0.0.1:$closed/x')" >/dev/null
out=$(run dead.log --once)
check "connection refused: nothing applied, --once fails" "1|claimed 1, applied 0, failed 1|0" \
    "$?|$out|$(q "SELECT count(*) FROM standin.applied WHERE channel = 'dead'")"
check "the log says why" 1 "$(grep -c '^paynotify-reconcile: query dead D1: no response (could not connect' "$dir/dead.log")"
q "INSERT INTO standin.due (channel, order_no, method, url) VALUES ('priv', 'P1', 'GET', '$gw/ok/P1')" >/dev/null
out=$(PAYNOTIFY_RECONCILE_SCHEMA=standin "$RECONCILE" --once 2>"$dir/priv.log")
check "a loopback address is refused by default" "1|1|0" \
    "$?|$(grep -c 'query priv P1: no response (address not allowed' "$dir/priv.log")|$(requests "len([x for x in r if x['path'] == '/ok/P1'])")"

# ---- a bill: its steps in order, a large body within --max-bill ------------------------
: >"$dir/requests.jsonl"
q "INSERT INTO standin.bill (channel, bill_date, steps) VALUES ('wxb', '2026-11-30', jsonb_build_array(
     jsonb_build_object('method', 'GET', 'url', '$gw/ok/list', 'headers', jsonb_build_object('Authorization', 'SECRET-BILL-AUTH')),
     jsonb_build_object('method', 'GET', 'url', '$gw/big/3000000')))" >/dev/null
out=$(run bill.log --once --max-response=1048576 --max-bill=4194304)
check "--once: the bill's two steps, the second's 3 MB body within --max-bill: imported, exit 0" \
    "0|claimed 0, applied 0, failed 0; bills: claimed 1, imported 1, failed 0" "$?|$out"
check "the steps in order, as the database built them" "/ok/list|/big/3000000" \
    "$(requests "'|'.join(x['path'] for x in r)")"
check "the 3 MB body reached the database whole" "3000000|$(python3 -c 'import hashlib; n=3000000; print(hashlib.md5(bytes(range(256))*(n//256)+bytes(range(n%256))).hexdigest())')" \
    "$(q "SELECT octet_length(body) || '|' || md5(body) FROM standin.applied WHERE order_no = 'bill:2026-11-30:1'")"
check "one log line per step, no request header" "1|1|0" \
    "$(grep -c '^paynotify-reconcile: bill wxb 2026-11-30: HTTP 200, outcome next$' "$dir/bill.log")|$(grep -c '^paynotify-reconcile: bill wxb 2026-11-30: HTTP 200, outcome imported$' "$dir/bill.log")|$(grep -c SECRET "$dir/bill.log")"
q "INSERT INTO standin.bill (channel, bill_date, steps) VALUES ('wxb', '2026-11-29', jsonb_build_array(
     jsonb_build_object('method', 'GET', 'url', '$gw/big/2000000')))" >/dev/null
out=$(run bill2.log --once --max-bill=1048576)
check "a bill's body over --max-bill: no response, nothing applied, --once fails" \
    "1|claimed 0, applied 0, failed 0; bills: claimed 1, imported 0, failed 1|0" \
    "$?|$out|$(q "SELECT count(*) FROM standin.applied WHERE order_no LIKE 'bill:2026-11-29:%'")"
check "the log says why" 1 "$(grep -c '^paynotify-reconcile: bill wxb 2026-11-29: no response (response larger than 1048576 bytes (PAYNOTIFY_RECONCILE_MAX_BILL))$' "$dir/bill2.log")"

# ---- the daemon: database restart, SIGTERM ------------------------------------------
start daemon.log --interval=200 --reconnect-max=300
applied_count() { q "SELECT count(*) FROM standin.applied WHERE order_no = '$1'" 2>/dev/null; }
wait_applied() {	# wait_applied ORDER: up to 10 s
    for _ in $(seq 100); do [ "$(applied_count "$1")" = 1 ] && return 0; sleep 0.1; done
    return 1
}
q "INSERT INTO standin.due (channel, order_no, method, url) VALUES ('wx', 'E1', 'GET', '$gw/ok/E1')" >/dev/null
wait_applied E1; check "the daemon applies a query that becomes due" 0 $?
pn_cluster_stop "$dir"
sleep 0.5
pn_as_user "$PN_PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null || { cat "$dir/server.log"; exit 1; }
q "INSERT INTO standin.due (channel, order_no, method, url) VALUES ('wx', 'E2', 'GET', '$gw/ok/E2')" >/dev/null
wait_applied E2; check "after a database restart it reconnects and goes on" "0|1" "$?|$(pn_alive $dpid && echo 1)"
t0=$(date +%s.%N)
stop_pid $dpid TERM 5
wait $dpid; rc=$?
check "SIGTERM when idle (--interval 200 ms): exit 0, not killed (within 3 s)" "0|1" "$rc|$(python3 -c "print(int($(date +%s.%N) - $t0 < 3))")"

start daemon2.log
q "INSERT INTO standin.due (channel, order_no, method, url) VALUES ('wx', 'S1', 'GET', '$gw/slow/S1')" >/dev/null
for _ in $(seq 100); do [ "$(requests "len([x for x in r if x['path'] == '/slow/S1'])")" = 1 ] && break; sleep 0.1; done
t0=$(date +%s.%N)
kill -TERM $dpid
wait $dpid; rc=$?
check "SIGTERM mid-request: that request finished and applied, exit 0" "0|1|1" \
    "$rc|$(applied_count S1)|$(python3 -c "print(int($(date +%s.%N) - $t0 < 3))")"
check "SIGTERM with the default --interval (10 s): exit 0 at once" "1" \
    "$(grep -c '^paynotify-reconcile: stopped$' "$dir/daemon2.log")"

finish
