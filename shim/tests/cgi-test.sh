#!/usr/bin/env bash
# shim/tests/cgi-test.sh: tests paynotify-cgi.
#
#   1. As a plain CGI process: environment and stdin in, stdout checked, no
#      web server.  Every reply path: the row relayed, each outcome, 204,
#      404, 405, 413 (declared and actual), 400, 503 (database unreachable,
#      SQL error, no row, unusable row), exact binary body, header naming.
#   2. Through nginx: CGI mode (fcgiwrap, started by spawn-fcgi) and FastCGI
#      mode (--listen; systemd-style socket activation; spawn-fcgi), with a
#      database outage and restart, and a graceful stop on SIGTERM.  FastCGI
#      with clients that connect and send nothing, or a byte and no more, or
#      a byte now and then, or stall in the middle of PARAMS or STDIN: the
#      others' requests are still answered at once, the shim closes them all
#      and stops at once on SIGTERM, within the timeout when stalled
#      requests had begun.  Hostile FastCGI records straight
#      to the shim (shim/tests/fcgi_hostile.py): refused, logged, and the
#      shim answering on.  FCGI_WEB_SERVER_ADDRS on a dual-stack [::] socket.
#      Before all that, the unit test of the shim's FastCGI checks
#      (shim/tests/fcgi_check_test.c, with ASan and UBSan when cc has them).
#   3. Under valgrind: the CGI request path and a short FastCGI run (with
#      silent and stalled connections and hostile records).
#
# Run as root from the repository root:   shim/tests/cgi-test.sh
# Needs postgresql-15, nginx, fcgiwrap, spawn-fcgi, curl, valgrind, python3.
# PN_KEEP_TMP=1 keeps the temporary directory (logs, cluster) for inspection.
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed"; the exit status is non-zero when M > 0.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
# shellcheck source=test/lib.sh
. test/lib.sh

SHIM=$ROOT/shim/paynotify-cgi
TMP=$(mktemp -d /tmp/pn-cgi-test.XXXXXX)
chmod 711 "$TMP"                # nginx and fcgiwrap workers (nobody) pass through
PGDIR=$TMP/pg
PGPORT=$(pn_free_port)
SHIM_ROLE=pn_shim
SHIM_PASSWORD="pw-$RANDOM$RANDOM-never-logged"
DSN="host=127.0.0.1 port=$PGPORT dbname=postgres user=$SHIM_ROLE password=$SHIM_PASSWORD sslmode=disable"
BAD_DSN="host=127.0.0.1 port=$(pn_free_port) dbname=postgres user=$SHIM_ROLE password=$SHIM_PASSWORD sslmode=disable"
STARTED=()                      # pids of processes we started, stopped on exit
NGINX_PIDFILES=()
pass=0
fail=0

# ---- processes ----------------------------------------------------------------

# ok, not_ok, check, summary, stop_pid, remove_tmp: test/lib.sh
cleanup() {
    local pid f
    for f in "${NGINX_PIDFILES[@]}"; do
        [ -s "$f" ] && stop_pid "$(cat "$f")" QUIT
    done
    for pid in "${STARTED[@]}"; do stop_pid "$pid"; done
    pn_cluster_stop "$PGDIR" 2>/dev/null
    remove_tmp "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_port PORT: wait until something listens on 127.0.0.1:PORT.
wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# ---- the database -------------------------------------------------------------

psql_su() { pn_psql "$PGDIR" "$PGPORT" -d postgres "$@"; }

# setup_database: everything paynotify-cgi needs inside the database.
#
# >>> THE ONE PLACE TO SWAP FOR THE REAL EXTENSION <<<
# Today it creates a stand-in with the contract's signatures:
#   paynotify_handle(text, jsonb, bytea) -> (status, content_type, body, outcome)
#   and paynotify_grant(role, 'handler'), which lets that role EXECUTE it
#   (and nothing else) in this database, as the extension's does.
# Its behaviour is driven by request headers, so the shim's reply paths can be
# reached on demand:
#   x-test-status: N          reply status (default 200)
#   x-test-outcome: WORD      reply outcome (default processed)
#   x-test-body: TEXT         reply body as text/plain (default: JSON echo of
#                             channel, md5 and length of the body, headers)
#   x-test-content-type: T    reply content type
#   x-test-error: any         raise an error (SQL error path)
#   x-test-sleep: SECONDS     sleep first
#   x-test-norow: any         return no row
# Every answered call is counted in stub_calls (the stand-in is SECURITY
# DEFINER, so the shim's role needs no rights on that table).
# With the real extension: CREATE EXTENSION paynotify; add channels; and
# replace the stub-specific checks below.
setup_database() {
    psql_su <<'SQL'
CREATE TABLE public.stub_calls (
    id bigserial PRIMARY KEY,
    channel text NOT NULL,
    body_md5 text NOT NULL
);
CREATE FUNCTION public.paynotify_handle(p_channel text, p_headers jsonb, p_body bytea)
RETURNS TABLE (status int, content_type text, body text, outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public
AS $$
DECLARE
    h jsonb := coalesce(p_headers, '{}');
BEGIN
    IF h ? 'x-test-error' THEN
        RAISE EXCEPTION 'stub: error requested';
    END IF;
    IF h ? 'x-test-sleep' THEN
        PERFORM pg_sleep((h->>'x-test-sleep')::float8);
    END IF;
    IF h ? 'x-test-norow' THEN
        RETURN;
    END IF;
    INSERT INTO public.stub_calls (channel, body_md5) VALUES (p_channel, md5(p_body));
    status := coalesce((h->>'x-test-status')::int, 200);
    outcome := coalesce(h->>'x-test-outcome', 'processed');
    IF h ? 'x-test-body' THEN
        content_type := 'text/plain';
        body := h->>'x-test-body';
    ELSE
        content_type := 'application/json';
        body := jsonb_build_object('channel', p_channel, 'md5', md5(p_body),
                                   'length', length(p_body), 'headers', h,
                                   'isolation', current_setting('transaction_isolation'))::text;
    END IF;
    IF h ? 'x-test-content-type' THEN
        content_type := h->>'x-test-content-type';
    END IF;
    RETURN NEXT;
END
$$;
REVOKE ALL ON FUNCTION public.paynotify_handle(text, jsonb, bytea) FROM PUBLIC;
CREATE FUNCTION public.paynotify_grant(role regrole, capacity text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public
AS $$
BEGIN
    IF capacity IS DISTINCT FROM 'handler' THEN
        RAISE EXCEPTION 'the stand-in knows only the handler capacity, not "%"', capacity
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('GRANT EXECUTE ON FUNCTION public.paynotify_handle(text, jsonb, bytea) TO %s', role);
END
$$;
REVOKE ALL ON FUNCTION public.paynotify_grant(regrole, text) FROM PUBLIC;
SQL
}

# setup_login_role: the DBA's two lines (the login role, the handler
# capacity in this database), and password authentication for it.
setup_login_role() {
    psql_su -q -c "CREATE ROLE $SHIM_ROLE LOGIN PASSWORD '$SHIM_PASSWORD'" \
        -c "SELECT paynotify_grant('$SHIM_ROLE', 'handler')" >/dev/null &&
    { echo "host all $SHIM_ROLE 127.0.0.1/32 scram-sha-256"; cat "$PGDIR/data/pg_hba.conf"; } \
        >"$PGDIR/pg_hba.new" &&
    cp "$PGDIR/pg_hba.new" "$PGDIR/data/pg_hba.conf" &&
    psql_su -Atc "SELECT pg_reload_conf()" >/dev/null
}

calls() { psql_su -Atc "SELECT count(*) FROM public.stub_calls"; }

db_restart() {
    pn_as_user "$PN_PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -t 60 start >/dev/null
}

# ---- the shim as a CGI process ----------------------------------------------

# cgi NAME BODYFILE [VAR=value...]: run the shim as CGI with a clean
# environment (a POST to /notify/wxpay unless overridden), BODYFILE on stdin
# and CONTENT_LENGTH set to its size (CONTENT_LENGTH=- leaves it unset).
# Reply in $TMP/NAME.out, stderr in $TMP/NAME.err, exit status in $TMP/NAME.rc.
cgi() {
    local name=$1 body=$2 length
    shift 2
    length=CONTENT_LENGTH=$(stat -c %s "$body")
    local args=()
    for a in "$@"; do
        if [ "$a" = CONTENT_LENGTH=- ]; then length=; else args+=("$a"); fi
    done
    # shellcheck disable=SC2086
    env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST \
        PATH_INFO=/notify/wxpay PAYNOTIFY_DSN="$DSN" PAYNOTIFY_FUNCTION=public.paynotify_handle $length "${args[@]}" \
        ${VALGRIND:-} "$SHIM" <"$body" >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

status_of() { head -n1 "$1" | sed -n 's/^Status: \([0-9]*\).*/\1/p'; }
# header_of FILE NAME: the value of a reply header (name case-insensitive).
header_of() {
    awk -v n="$(printf '%s' "$2" | tr '[:upper:]' '[:lower:]')" 'BEGIN { RS = "\r\n" }
        /^$/ { exit }
        { i = index($0, ": "); if (tolower(substr($0, 1, i - 1)) == n) { print substr($0, i + 2); exit } }' "$1"
}
# body_of FILE: the reply body, byte for byte.
body_of() {
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(d.partition(b"\r\n\r\n")[2])' "$1"
}
# json_true FILE EXPR: evaluate a Python expression over the JSON body b.
json_true() {
    python3 - "$1" "$2" <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read().partition(b"\r\n\r\n")[2]
try:
    b = json.loads(data)
    ok = eval(sys.argv[2], {"b": b})
except Exception as e:
    print("error: %s" % e); sys.exit(1)
print("yes" if ok else "no: %s" % data[:400].decode("utf-8", "replace"))
PY
}

# expect NAME STATUS OUTCOME [DESC]: the run's status, outcome and exit 0.
expect() {
    local name=$1 st=$2 oc=$3 desc=${4:-$1} got
    got="$(status_of "$TMP/$name.out") $(header_of "$TMP/$name.out" Paynotify-Outcome) rc=$(cat "$TMP/$name.rc")"
    if [ "$got" = "$st $oc rc=0" ]; then
        ok "$desc: $st $oc"
    else
        not_ok "$desc" "expected [$st $oc rc=0], got [$got]; stderr: $(head -c 400 "$TMP/$name.err")"
    fi
}

# ---- through nginx ------------------------------------------------------------

# nginx_start NAME PORT LOCATION_TEMPLATE SED_EXPR...: instantiate the deploy/
# templates into $TMP/NAME and start nginx there.
nginx_start() {
    local name=$1 port=$2 location=$3
    shift 3
    local prefix=$TMP/$name
    mkdir -p "$prefix/tmp"
    sed "$@" "$ROOT/deploy/$location" >"$prefix/location.conf"
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@PORT@|$port|g" -e "s|@USER@|nobody nogroup|g" \
        -e "s|@LOCATION@|$prefix/location.conf|g" \
        "$ROOT/deploy/nginx-standalone.conf.in" >"$prefix/nginx.conf"
    NGINX_PIDFILES+=("$prefix/nginx.pid")
    nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" 2>"$prefix/start.err" &&
        wait_port "$port"
}

# burst NAME URL COUNT [curl args...]: COUNT POSTs, 8 at a time, to
# URL/notify/chN; one "status outcome" line each in $TMP/NAME.codes.
burst() {
    local name=$1 url=$2 count=$3
    shift 3
    curl -s -Z --parallel-max 8 -o /dev/null \
        -w '%{http_code} %header{paynotify-outcome}\n' \
        -H 'Content-Type: application/json' --data-binary @"$TMP/small.json" \
        "$@" "$url/notify/ch[1-$count]" >"$TMP/$name.codes" 2>/dev/null
}
# expect_burst NAME COUNT "STATUS OUTCOME" DESC
expect_burst() {
    local summary
    summary=$(sort "$TMP/$1.codes" | uniq -c | awk '{ $1 = $1; print }' | paste -sd, -)
    check "$4" "$2 $3" "$summary"
}

# one NAME URL [curl args...]: a single POST of $ONE_BODY (default
# small.json); prints "status outcome", keeps the body in $TMP/NAME.body.
one() {
    local name=$1 url=$2
    shift 2
    curl -s -o "$TMP/$name.body" -w '%{http_code} %header{paynotify-outcome}' \
        -H 'Content-Type: application/json' --data-binary @"${ONE_BODY:-$TMP/small.json}" \
        "$@" "$url" >"$TMP/$name.code" 2>/dev/null
    cat "$TMP/$name.code"
}

shim_connections() {
    psql_su -Atc "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'paynotify-cgi'"
}

# clients NAME COUNT MODE HOLD: COUNT connections straight to the shim that
# misbehave as MODE says (shim/tests/fcgi_clients.py), in the background;
# returns once every one of them is connected.  Their report, one line each
# ("N closed SECONDS" or "N open"), is in $TMP/NAME.clients after
# `wait $CLIENTS_PID`.
clients() {
    python3 "$ROOT/shim/tests/fcgi_clients.py" 127.0.0.1 "$FCGI_PORT" "$2" "$3" "$4" \
        >"$TMP/$1.clients" 2>&1 &
    CLIENTS_PID=$!
    STARTED+=("$CLIENTS_PID")
    # until it says it connected, or has ended without saying so (however
    # long a loaded machine takes to start it: 60 s is a bound on a hang)
    for _ in $(seq 1 1200); do
        # (the file is made by the background job: perhaps not yet)
        grep -qs '^connected' "$TMP/$1.clients" && return 0
        pn_alive "$CLIENTS_PID" || break
        sleep 0.05
    done
    grep -q '^connected' "$TMP/$1.clients" && return 0
    sed 's/^/#   clients: /' "$TMP/$1.clients"
    return 1
}
# timed NAME COUNT: COUNT POSTs through nginx at once (one curl each), each
# given 4 s; one "status outcome seconds" line each in $TMP/NAME.timed, the
# time measured by curl from its start to the end of the reply.
timed() {
    local pids=() i
    for i in $(seq 1 "$2"); do
        curl -s --max-time 4 -o /dev/null \
            -w '%{http_code} %header{paynotify-outcome} %{time_total}\n' \
            --data-binary @"$TMP/small.json" "$URL/notify/slow$i" >"$TMP/$1.timed.$i" 2>/dev/null &
        pids+=($!)
    done
    wait "${pids[@]}"
    for i in $(seq 1 "$2"); do cat "$TMP/$1.timed.$i"; done >"$TMP/$1.timed"
}
# answered NAME COUNT SECONDS: "yes" when all COUNT requests of NAME got
# "200 processed" in less than SECONDS each; prints their slowest time too.
answered() {
    awk -v n="$2" -v max="$3" -v name="$1" '
        { count++; if ($NF + 0 > slow) slow = $NF + 0
          if ($1 != 200 || $2 != "processed" || NF != 3 || $3 + 0 >= max) bad = bad " [" $0 "]" }
        END { printf "#   %s: %d answers, the slowest in %.3f s\n", name, count, slow > "/dev/stderr"
              print (count == n && bad == "") ? "yes" : "no: " count " of " n " answered;" bad }' \
        "$TMP/$1.timed"
}
# open_until NAME EPOCH: "yes" when no connection of NAME had been closed
# by the shim at EPOCH (a time of day, as date +%s.%N prints it).
open_until() {
    awk -v t="$2" '/^connected/ { start = $3 }
        $1 ~ /^[0-9]+$/ && $2 == "closed" && start + $4 <= t { bad = bad " [" $0 "]" }
        END { print bad == "" ? "yes" : "no: closed before " t " (connected at " start "):" bad }' \
        "$TMP/$1.clients"
}
# closed NAME FIRST LAST LOW HIGH: "yes" when the shim closed connections
# FIRST..LAST of NAME between LOW and HIGH seconds after each was opened.
closed() {
    awk -v first="$2" -v last="$3" -v lo="$4" -v hi="$5" '
        $1 ~ /^[0-9]+$/ && $1 >= first && $1 <= last {
            n++; if ($2 != "closed" || $3 + 0 < lo || $3 + 0 > hi) bad = bad " [" $0 "]" }
        END { print (n == last - first + 1 && bad == "") ? "yes" : "no: " n " seen;" bad }' "$TMP/$1.clients"
}

###############################################################################

echo "# building"
if ! make -s -C shim paynotify-cgi >"$TMP/build.log" 2>&1 || grep -q 'warning' "$TMP/build.log"; then
    cat "$TMP/build.log"
    not_ok "shim builds without warnings"
    summary
    exit 1
fi
ok "shim builds without warnings"

echo "# unit: the checks of a FastCGI connection (shim/cgi/cgi_fcgi_check.c)"
unit_flags=(-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -pedantic -Werror -I"$ROOT/shim/cgi")
if cc -fsanitize=address,undefined -x c -o "$TMP/probe" - <<<'int main(void){return 0;}' 2>/dev/null; then
    unit_flags+=(-fsanitize=address,undefined -fno-sanitize-recover=all)
fi
if cc "${unit_flags[@]}" -o "$TMP/fcgi_check_test" "$ROOT/shim/tests/fcgi_check_test.c" \
    "$ROOT/shim/cgi/cgi_fcgi_check.c" >"$TMP/unit.log" 2>&1 &&
    "$TMP/fcgi_check_test" >>"$TMP/unit.log" 2>&1; then
    ok "unit: $(tail -n 1 "$TMP/unit.log")"
else
    not_ok "unit: the checks of a FastCGI connection" "$(cat "$TMP/unit.log")"
fi
echo "# unit: the acceptor (shim/cgi/cgi_accept.c)"
accept_test_srcs=("$ROOT/shim/tests/accept_test.c" "$ROOT/shim/cgi/cgi_refused.c"
    "$ROOT/shim/cgi/cgi_fcgi_check.c" "$ROOT"/shim/common/*.c)
accept_test_flags=(-pthread -I"$ROOT/shim/common" -I"$(pg_config --includedir)" -DPAYNOTIFY_VERSION='"test"')
if cc "${unit_flags[@]}" "${accept_test_flags[@]}" -o "$TMP/accept_test" "${accept_test_srcs[@]}" \
    >"$TMP/accept_unit.log" 2>&1 && "$TMP/accept_test" >>"$TMP/accept_unit.log" 2>&1; then
    ok "unit: $(tail -n 1 "$TMP/accept_unit.log")"
else
    not_ok "unit: the acceptor" "$(cat "$TMP/accept_unit.log")"
fi

echo "# database on port $PGPORT"
if ! pn_cluster_start "$PGDIR" "$PGPORT" || ! setup_database >/dev/null || ! setup_login_role; then
    not_ok "throwaway cluster with the handler function and login role"
    summary
    exit 1
fi
ok "throwaway cluster with the handler function and login role"

# bodies
printf '{"id":"evt_1","amount":100}' >"$TMP/small.json"
printf '\x00\x01binary\xff\xfe\x80\xc3\x28 and NUL \x00 end\x0a\x0d' >"$TMP/binary.bin"
: >"$TMP/empty.bin"
head -c 1048576 /dev/urandom >"$TMP/max.bin"
head -c 1048577 /dev/urandom >"$TMP/over.bin"
head -c 10 /dev/urandom >"$TMP/ten.bin"
head -c 500000 /dev/urandom >"$TMP/half.bin"

echo "# command line"
"$SHIM" --version >"$TMP/version.out" 2>&1
check "--version" "paynotify-cgi $(sed -n "s/^default_version = '\(.*\)'/\1/p" paynotify.control)" "$(cat "$TMP/version.out")"
"$SHIM" --help >"$TMP/help.out" 2>&1
missing=
for word in PAYNOTIFY_DSN PAYNOTIFY_FUNCTION PAYNOTIFY_MAX_BODY PAYNOTIFY_WORKERS \
    PAYNOTIFY_STATEMENT_TIMEOUT PAYNOTIFY_CONNECT_TIMEOUT PAYNOTIFY_RECONNECT_MAX PAYNOTIFY_NO_PREPARE --no-prepare \
    PAYNOTIFY_IDLE_TIMEOUT PAYNOTIFY_IO_TIMEOUT PAYNOTIFY_MAX_PENDING \
    'CGI ' FastCGI --listen --workers 'default: 1048576' 'default: paynotify_handle'; do
    grep -q -- "$word" "$TMP/help.out" || missing="$missing [$word]"
done
check "--help names every variable, default and mode" "" "$missing"
env -i PATH="$PATH" "$SHIM" </dev/null >/dev/null 2>&1
check "neither CGI nor FastCGI: usage error" 2 $?
env -i PATH="$PATH" "$SHIM" --workers 3 --bogus </dev/null >/dev/null 2>&1
check "unknown option: usage error" 2 $?
# an address libfcgi would take for a socket path, a port out of range:
# refused, no socket file made
for a in '[::]:5598' '127.0.0.1:99999' '127.0.0.1:' '127.0.0.1:80:81'; do
    (cd "$TMP" && "$SHIM" --listen "$a" </dev/null >/dev/null 2>&1)
    check "--listen '$a': refused (2), nothing created" "2|" "$?|$(ls "$TMP" | grep -F -- "$a")"
done
# more held connections than the descriptors' limit allows: refused at
# the start, the reason logged (the workers could not take what the
# acceptor held: every request lost); a soft limit under the hard one is
# raised instead
(ulimit -n 256 && cd "$TMP" && PAYNOTIFY_MAX_PENDING=1024 "$SHIM" --listen "$TMP/fd.sock" \
    </dev/null >/dev/null 2>"$TMP/fd.err")
check "PAYNOTIFY_MAX_PENDING=1024 with 256 descriptors: refused (2), the reason logged, no socket" "2 yes no" \
    "$? $(grep -q 'need [0-9]* descriptors, and the limit is 256' "$TMP/fd.err" && echo yes) $([ -e "$TMP/fd.sock" ] && echo yes || echo no)"
if [ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge 2048 ]; then
    (ulimit -Sn 256 && cd "$TMP" && PAYNOTIFY_MAX_PENDING=1024 timeout --preserve-status -s TERM 1 \
        "$SHIM" --listen "$TMP/fd2.sock" </dev/null >/dev/null 2>"$TMP/fd2.err")
    check "the same with a soft limit of 256 under a hard one of $(ulimit -Hn): raised, runs, stops on SIGTERM (0)" "0 no" \
        "$? $(grep -q 'descriptors' "$TMP/fd2.err" && echo yes || echo no)"
fi

echo "# CGI: the row relayed"
before=$(calls)
cgi ok "$TMP/small.json"
expect ok 200 processed "success row"
check "content type from the row" "application/json" "$(header_of "$TMP/ok.out" Content-Type)"
check "Content-Length matches the body" "$(body_of "$TMP/ok.out" | wc -c)" "$(header_of "$TMP/ok.out" Content-Length)"
check "body reached the function byte-exact" yes \
    "$(json_true "$TMP/ok.out" "b['md5'] == '$(md5sum <"$TMP/small.json" | cut -d' ' -f1)' and b['channel'] == 'wxpay'")"
check "one committed call" "$((before + 1))" "$(calls)"

for pair in processed:200 duplicate:200 ignored:200 parked:200 failed:500 busy:503 rejected:401 malformed:400; do
    oc=${pair%%:*} st=${pair##*:}
    cgi "outcome_$oc" "$TMP/small.json" HTTP_X_TEST_OUTCOME="$oc" HTTP_X_TEST_STATUS="$st"
    expect "outcome_$oc" "$st" "$oc" "outcome $oc passed through"
done

echo "# CGI: a refused request is logged, without its headers and body"
printf '{"id":"evt_forged","secret":"body-never-logged"}' >"$TMP/forged.json"
# log_line NAME: the run's stderr without the program's "paynotify-cgi[pid]: " prefix
log_line() { sed -E 's/^paynotify-cgi\[[0-9]+\]: //' "$TMP/$1.err"; }
cgi forged "$TMP/forged.json" HTTP_X_TEST_OUTCOME=rejected HTTP_X_TEST_STATUS=401 \
    REMOTE_ADDR=198.51.100.7 HTTP_WECHATPAY_SIGNATURE=header-never-logged
expect forged 401 rejected "a forged notification (the database's rejected)"
check "rejected: one line with channel, outcome, status and client" \
    "refused: channel wxpay, outcome rejected, HTTP 401, client 198.51.100.7" "$(log_line forged)"
cgi garbled "$TMP/forged.json" HTTP_X_TEST_OUTCOME=malformed HTTP_X_TEST_STATUS=400 REMOTE_ADDR=2001:db8::5
check "malformed: one line" "refused: channel wxpay, outcome malformed, HTTP 400, client 2001:db8::5" \
    "$(log_line garbled)"
cgi probe "$TMP/forged.json" REQUEST_METHOD=GET PATH_INFO=/notify/ REMOTE_ADDR=203.0.113.9
check "the shim's own refusal (no channel): one line" \
    "refused: channel (none), outcome refused, HTTP 404, client 203.0.113.9" "$(log_line probe)"
cgi odd_addr "$TMP/forged.json" REQUEST_METHOD=PUT REMOTE_ADDR=$'1.2.3.4\nrefused: fake line'
check "a REMOTE_ADDR that is no address is not logged as it is" \
    "refused: channel wxpay, outcome refused, HTTP 405, client (unusable)" "$(log_line odd_addr)"
cgi no_addr "$TMP/forged.json" HTTP_X_TEST_OUTCOME=rejected HTTP_X_TEST_STATUS=401
check "no REMOTE_ADDR" "refused: channel wxpay, outcome rejected, HTTP 401, client (unknown)" "$(log_line no_addr)"
cgi accepted "$TMP/forged.json" REMOTE_ADDR=198.51.100.7
check "an accepted notification: nothing logged" "" "$(log_line accepted)"
check "no header value or body byte in the log" 0 \
    "$(cat "$TMP"/{forged,garbled,probe,odd_addr,no_addr}.err | grep -c -e never-logged -e 'fake line')"

cgi alipay "$TMP/small.json" PATH_INFO=/notify/alipay HTTP_X_TEST_BODY=success
expect alipay 200 processed "text body"
check "body is exactly 'success'" success "$(body_of "$TMP/alipay.out")"
check "text body content type" text/plain "$(header_of "$TMP/alipay.out" Content-Type)"

cgi no_content "$TMP/small.json" HTTP_X_TEST_STATUS=204
expect no_content 204 processed "204 reply"
check "204 has no body" "" "$(body_of "$TMP/no_content.out" | od -An -c | tr -d ' \n')"
check "204 has no Content-Length" "" "$(header_of "$TMP/no_content.out" Content-Length)"

cgi binary "$TMP/binary.bin" HTTP_X_TEST_OUTCOME=processed
expect binary 200 processed "binary body"
check "NUL and non-UTF-8 bytes arrive byte-exact" yes \
    "$(json_true "$TMP/binary.out" "b['md5'] == '$(md5sum <"$TMP/binary.bin" | cut -d' ' -f1)' and b['length'] == $(stat -c %s "$TMP/binary.bin")")"
cgi empty "$TMP/empty.bin"
expect empty 200 processed "empty body"
check "empty body arrives empty" yes "$(json_true "$TMP/empty.out" "b['length'] == 0")"
cgi max_nolength "$TMP/max.bin" CONTENT_LENGTH=-
expect max_nolength 200 processed "1 MiB body without CONTENT_LENGTH, read to the end"
check "1 MiB body byte-exact" yes \
    "$(json_true "$TMP/max_nolength.out" "b['md5'] == '$(md5sum <"$TMP/max.bin" | cut -d' ' -f1)'")"

echo "# CGI: headers"
cgi headers "$TMP/small.json" \
    HTTP_WECHATPAY_SIGNATURE='AbC+/dEf==' \
    HTTP_WECHATPAY_SERIAL='PUB_KEY_ID_0114' \
    HTTP_X_MIXED='MiXeD "quoted" \back\slash' \
    HTTP_X_UTF8='支付成功' \
    HTTP_X_CONTROL=$'tab\there\x01' \
    HTTP_X_EMPTY= \
    CONTENT_TYPE='application/json; charset=utf-8'
expect headers 200 processed "headers request"
check "header names lower-cased with '-', values kept exactly, nothing else" yes \
    "$(json_true "$TMP/headers.out" "b['headers'] == {'wechatpay-signature': 'AbC+/dEf==', 'wechatpay-serial': 'PUB_KEY_ID_0114', 'x-mixed': 'MiXeD \"quoted\" \\\\back\\\\slash', 'x-utf8': '\u652f\u4ed8\u6210\u529f', 'x-control': 'tab\there\x01', 'x-empty': '', 'content-type': 'application/json; charset=utf-8'}")"
cgi client "$TMP/small.json" REMOTE_ADDR=198.51.100.9 HTTP_X_PAYNOTIFY_CLIENT=spoofed
expect client 200 processed "client address request"
check "REMOTE_ADDR passed as x-paynotify-client, replacing the client's own" yes \
    "$(json_true "$TMP/client.out" "b['headers'] == {'x-paynotify-client': '198.51.100.9'}")"
cgi noaddr "$TMP/small.json" HTTP_X_PAYNOTIFY_CLIENT=spoofed HTTP_X-PAYNOTIFY-CLIENT=spoofed2 HTTP_x_paynotify_client=spoofed3
expect noaddr 200 processed "client address request without REMOTE_ADDR"
check "a client's own x-paynotify-client is dropped without REMOTE_ADDR too" yes \
    "$(json_true "$TMP/noaddr.out" "b['headers'] == {}")"
before=$(calls)
cgi bad_utf8 "$TMP/small.json" HTTP_X_LATIN1=$'caf\xe9'
expect bad_utf8 400 refused "header value not UTF-8"
check "not UTF-8: function not called" "$before" "$(calls)"

echo "# CGI: refusals"
before=$(calls)
cgi get "$TMP/empty.bin" REQUEST_METHOD=GET
expect get 405 refused "GET"
check "405 says Allow: POST" POST "$(header_of "$TMP/get.out" Allow)"
cgi put "$TMP/small.json" REQUEST_METHOD=PUT
expect put 405 refused "PUT"
cgi dash "$TMP/small.json" PATH_INFO=/notify/bad-channel
expect dash 404 refused "channel with '-'"
cgi trailing "$TMP/small.json" PATH_INFO=/notify/
expect trailing 404 refused "empty channel"
cgi long "$TMP/small.json" PATH_INFO="/notify/$(printf 'a%.0s' $(seq 1 64))"
expect long 404 refused "64-character channel"
cgi nopath "$TMP/small.json" PATH_INFO=
expect nopath 404 refused "no path at all"
cgi dot "$TMP/small.json" PATH_INFO=/notify/..
expect dot 404 refused "channel '..'"
cgi too_big_declared /dev/null CONTENT_LENGTH=1048577
expect too_big_declared 413 refused "CONTENT_LENGTH over the cap"
cgi too_big_huge /dev/null CONTENT_LENGTH=99999999999999999999999999
expect too_big_huge 413 refused "CONTENT_LENGTH beyond any integer"
cgi too_big_actual "$TMP/over.bin" CONTENT_LENGTH=-
expect too_big_actual 413 refused "body over the cap without CONTENT_LENGTH"
cgi small_cap "$TMP/ten.bin" PAYNOTIFY_MAX_BODY=9
expect small_cap 413 refused "PAYNOTIFY_MAX_BODY=9, 10 bytes declared"
cgi small_cap_actual "$TMP/ten.bin" PAYNOTIFY_MAX_BODY=9 CONTENT_LENGTH=-
expect small_cap_actual 413 refused "PAYNOTIFY_MAX_BODY=9, 10 bytes sent"
cgi bad_length "$TMP/small.json" CONTENT_LENGTH=12abc
expect bad_length 400 refused "CONTENT_LENGTH not a number"
cgi negative_length "$TMP/small.json" CONTENT_LENGTH=-5
expect negative_length 400 refused "negative CONTENT_LENGTH"
cgi short_body "$TMP/ten.bin" CONTENT_LENGTH=100
expect short_body 400 refused "body shorter than CONTENT_LENGTH"
check "refusals never reach the function" "$before" "$(calls)"
check "refusal body is JSON FAIL" yes "$(json_true "$TMP/get.out" "b['code'] == 'FAIL'")"
cgi at_cap "$TMP/ten.bin" PAYNOTIFY_MAX_BODY=10 CONTENT_LENGTH=-
expect at_cap 200 processed "PAYNOTIFY_MAX_BODY=10, 10 bytes sent"

echo "# CGI: channel from other variables"
cgi by_uri "$TMP/small.json" PATH_INFO= REQUEST_URI='/notify/stripe_2?x=1'
expect by_uri 200 processed "channel from REQUEST_URI"
check "channel from REQUEST_URI" yes "$(json_true "$TMP/by_uri.out" "b['channel'] == 'stripe_2'")"
cgi by_script "$TMP/small.json" PATH_INFO= SCRIPT_NAME=/notify/alipay
check "channel from SCRIPT_NAME" yes "$(json_true "$TMP/by_script.out" "b['channel'] == 'alipay'")"
cgi max_channel "$TMP/small.json" PATH_INFO="/hooks/notify/$(printf 'Z%.0s' $(seq 1 63))"
expect max_channel 200 processed "63-character channel"

echo "# CGI: failures are 503"
cgi unreachable "$TMP/small.json" PAYNOTIFY_DSN="$BAD_DSN"
expect unreachable 503 unavailable "database unreachable"
check "503 body" '{"code":"FAIL","message":"service unavailable"}' "$(body_of "$TMP/unreachable.out")"
check "503 content type" application/json "$(header_of "$TMP/unreachable.out" Content-Type)"
check "unreachable: one log line" 1 "$(wc -l <"$TMP/unreachable.err")"
cgi sql_error "$TMP/small.json" HTTP_X_TEST_ERROR=1
expect sql_error 503 unavailable "SQL error"
check "SQL error logged with its SQLSTATE" 1 "$(grep -c 'P0001' "$TMP/sql_error.err")"
cgi no_row "$TMP/small.json" HTTP_X_TEST_NOROW=1
expect no_row 503 unavailable "no row"
cgi bad_status "$TMP/small.json" HTTP_X_TEST_STATUS=700
expect bad_status 503 unavailable "status out of range"
cgi injected "$TMP/small.json" HTTP_X_TEST_CONTENT_TYPE=$'text/plain\r\nX-Injected: 1'
expect injected 503 unavailable "content type with CR LF"
check "nothing injected" "" "$(header_of "$TMP/injected.out" X-Injected)"
cgi odd_outcome "$TMP/small.json" HTTP_X_TEST_OUTCOME='Odd Outcome!'
expect odd_outcome 200 unknown "unexpected outcome relayed as unknown"
cgi timeout "$TMP/small.json" HTTP_X_TEST_SLEEP=2 PAYNOTIFY_STATEMENT_TIMEOUT=200
expect timeout 503 unavailable "PAYNOTIFY_STATEMENT_TIMEOUT"
check "timeout logged as 57014" 1 "$(grep -c '57014' "$TMP/timeout.err")"
psql_su -qc "ALTER ROLE $SHIM_ROLE SET default_transaction_isolation = 'serializable'"
cgi isolation "$TMP/small.json"
expect isolation 200 processed "role whose default isolation is serializable"
check "the shim's session runs READ COMMITTED whatever the role's default" yes \
    "$(json_true "$TMP/isolation.out" "b['isolation'] == 'read committed'")"
psql_su -qc "ALTER ROLE $SHIM_ROLE RESET default_transaction_isolation"
cgi qualified "$TMP/small.json" PAYNOTIFY_FUNCTION=public.paynotify_handle
expect qualified 200 processed "PAYNOTIFY_FUNCTION=public.paynotify_handle"
cgi missing_fn "$TMP/small.json" PAYNOTIFY_FUNCTION=public.no_such_function
expect missing_fn 503 unavailable "PAYNOTIFY_FUNCTION naming no function"
# A bare name must find the paynotify extension's function in the role's
# search_path (here it finds the stand-in, a plain function in public, as it
# would find one planted there): refused, and said why.
before=$(calls)
cgi bare_fn "$TMP/small.json" PAYNOTIFY_FUNCTION=paynotify_handle
expect bare_fn 503 unavailable "a bare PAYNOTIFY_FUNCTION resolving to a function not of the extension"
check "... not called, and the log says which function and what to set" "$before|1" \
    "$(calls)|$(grep -c "PAYNOTIFY_FUNCTION=paynotify_handle: the search_path finds paynotify_handle(text,jsonb,bytea), which is not the paynotify extension's" "$TMP/bare_fn.err")"
cgi bare_missing "$TMP/small.json" PAYNOTIFY_FUNCTION=no_such_function
expect bare_missing 503 unavailable "a bare PAYNOTIFY_FUNCTION naming no function"
check "... and the log says so" 1 "$(grep -c "no function no_such_function(text, jsonb, bytea) in this role's search_path" "$TMP/bare_missing.err")"
cgi bad_fn "$TMP/small.json" PAYNOTIFY_FUNCTION='paynotify_handle(); DROP TABLE x; --'
check "PAYNOTIFY_FUNCTION not an identifier: 503, exit 2" "503 2" \
    "$(status_of "$TMP/bad_fn.out") $(cat "$TMP/bad_fn.rc")"
cgi bad_max "$TMP/small.json" PAYNOTIFY_MAX_BODY=1e6
check "PAYNOTIFY_MAX_BODY not a number: 503, exit 2" "503 2" \
    "$(status_of "$TMP/bad_max.out") $(cat "$TMP/bad_max.rc")"
PGPASSWORD=$SHIM_PASSWORD "$PN_PGBIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U "$SHIM_ROLE" -d postgres \
    -Atc "SELECT count(*) FROM public.stub_calls" >/dev/null 2>&1
check "the login role can only call the function" 1 $?

###############################################################################
echo "# nginx, CGI mode (fcgiwrap)"
mkdir -p "$TMP/run"
# start_fcgiwrap [VAR=value...]: fcgiwrap on a unix socket, as nobody, with the
# shim's settings in its environment (it passes them on to the shim).
start_fcgiwrap() {
    rm -f "$TMP/run/fcgiwrap.sock"
    env -i PATH="$PATH" PAYNOTIFY_DSN="$DSN" PAYNOTIFY_FUNCTION=public.paynotify_handle "$@" \
        spawn-fcgi -n -s "$TMP/run/fcgiwrap.sock" -M 0600 -U nobody -G nogroup -u nobody -g nogroup \
        -- /usr/sbin/fcgiwrap >>"$TMP/fcgiwrap.out" 2>>"$TMP/fcgiwrap.err" &
    FCGIWRAP_PID=$!
    STARTED+=("$FCGIWRAP_PID")
    for _ in $(seq 1 100); do [ -S "$TMP/run/fcgiwrap.sock" ] && break; sleep 0.05; done
}
start_fcgiwrap
CGI_PORT=$(pn_free_port)
if nginx_start nginx-cgi "$CGI_PORT" nginx-cgi.conf.in \
    -e "s|@FCGIWRAP_SOCKET@|$TMP/run/fcgiwrap.sock|g" -e "s|@SHIM@|$SHIM|g"; then
    ok "nginx (CGI mode) started from the templates"
else
    not_ok "nginx (CGI mode) started from the templates" "$(cat "$TMP/nginx-cgi/start.err" "$TMP/nginx-cgi/error.log" 2>/dev/null)"
fi
URL=http://127.0.0.1:$CGI_PORT
before=$(calls)
# (one fcgiwrap runs one request at a time, each a new process and a new
# database connection: about 60 ms each here)
burst cgi_burst "$URL" 50
expect_burst cgi_burst 50 "200 processed" "CGI mode: 50 requests all answered 200"
check "CGI mode: 50 committed calls" "$((before + 50))" "$(calls)"
check "CGI mode: GET is 405" "405 refused" "$(one cgi_get "$URL/notify/wxpay" -G)"
check "CGI mode: bad channel is nginx's 404" 404 "$(one cgi_404 "$URL/notify/bad-name" | cut -d' ' -f1)"
check "CGI mode: Alipay-style body" "200 processed/success" \
    "$(one cgi_alipay "$URL/notify/alipay" -H 'X-Test-Body: success')/$(cat "$TMP/cgi_alipay.body")"
check "CGI mode: SQL error is 503" "503 unavailable" "$(one cgi_err "$URL/notify/wxpay" -H 'X-Test-Error: 1')"
check "CGI mode: 204 passes" "204 processed" "$(one cgi_204 "$URL/notify/wxpay" -H 'X-Test-Status: 204')"
pn_cluster_stop "$PGDIR"
burst cgi_down "$URL" 20
expect_burst cgi_down 20 "503 unavailable" "CGI mode, database stopped: only 503"
db_restart
burst cgi_up "$URL" 20
expect_burst cgi_up 20 "200 processed" "CGI mode, database restarted: 200 again"
check "CGI mode: PUT with a 500 kB body is 405" "405 refused" \
    "$(ONE_BODY=$TMP/half.bin one cgi_put "$URL/notify/wxpay" -X PUT)"
stop_pid "$FCGIWRAP_PID"
start_fcgiwrap PAYNOTIFY_MAX_BODY=1000
check "CGI mode: the shim's own 413 (cap below nginx's)" "413 refused" \
    "$(ONE_BODY=$TMP/half.bin one cgi_413 "$URL/notify/wxpay")"
check "CGI mode: within that cap still 200" "200 processed" "$(one cgi_small "$URL/notify/wxpay")"
check "CGI mode: nginx's own 413 over client_max_body_size" 413 \
    "$(ONE_BODY=$TMP/over.bin one cgi_nginx_413 "$URL/notify/wxpay" | cut -d' ' -f1)"

###############################################################################
echo "# nginx, FastCGI mode"
FCGI_PORT=$(pn_free_port)
FASTCGI_NGINX_PORT=$(pn_free_port)
if nginx_start nginx-fastcgi "$FASTCGI_NGINX_PORT" nginx-fastcgi.conf.in \
    -e "s|@SHIM_ADDRESS@|127.0.0.1:$FCGI_PORT|g"; then
    ok "nginx (FastCGI mode) started from the templates"
else
    not_ok "nginx (FastCGI mode) started from the templates" "$(cat "$TMP/nginx-fastcgi/start.err" "$TMP/nginx-fastcgi/error.log" 2>/dev/null)"
fi
URL=http://127.0.0.1:$FASTCGI_NGINX_PORT
SHIM_ENV=(env -i PATH="$PATH" PAYNOTIFY_DSN="$DSN" PAYNOTIFY_FUNCTION=public.paynotify_handle PAYNOTIFY_RECONNECT_MAX=1000)

# start_fastcgi LOG COMMAND...: start a FastCGI shim in the background.
start_fastcgi() {
    local log=$1
    shift
    "${SHIM_ENV[@]}" "$@" >"$TMP/$log.out" 2>"$TMP/$log.err" &
    SHIM_PID=$!
    STARTED+=("$SHIM_PID")
    wait_port "$FCGI_PORT"
}
# stop_fastcgi: SIGTERM, and the shim's exit status.
stop_fastcgi() {
    kill -TERM "$SHIM_PID"
    wait "$SHIM_PID"
}

start_fastcgi listen "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 4
before=$(calls)
burst fcgi_burst "$URL" 300
expect_burst fcgi_burst 300 "200 processed" "--listen: 300 requests all answered 200"
check "--listen: 300 committed calls" "$((before + 300))" "$(calls)"
check "--listen: one connection per worker, kept" 4 "$(shim_connections)"
check "--listen: GET is 405" "405 refused" "$(one fcgi_get "$URL/notify/wxpay" -G)"
check "--listen: SQL error is 503" "503 unavailable" "$(one fcgi_err "$URL/notify/wxpay" -H 'X-Test-Error: 1')"
check "--listen: statement still usable after an SQL error" "200 processed" "$(one fcgi_after "$URL/notify/wxpay")"
check "--listen: Alipay-style body" "200 processed/success" \
    "$(one fcgi_alipay "$URL/notify/alipay" -H 'X-Test-Body: success')/$(cat "$TMP/fcgi_alipay.body")"
one fcgi_dup "$URL/notify/wxpay" -H 'X-Dup: one' -H 'X-Dup: two' >/dev/null
check "--listen: repeated header joined with ', '" "one, two" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["headers"].get("x-dup"))' "$TMP/fcgi_dup.body")"
ONE_BODY=$TMP/binary.bin one fcgi_bin "$URL/notify/wxpay" >/dev/null
check "--listen: binary body byte-exact" "$(md5sum <"$TMP/binary.bin" | cut -d' ' -f1)" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["md5"])' "$TMP/fcgi_bin.body")"
check "--listen: 204 passes" "204 processed" "$(one fcgi_204 "$URL/notify/wxpay" -H 'X-Test-Status: 204')"
# over the acceptor's 64 KiB: a worker takes it with its first 64 KiB and reads the rest
ONE_BODY=$TMP/half.bin one fcgi_half "$URL/notify/wxpay" >/dev/null
check "--listen: a 500 kB body (over 64 KiB) byte-exact" "200 processed $(md5sum <"$TMP/half.bin" | cut -d' ' -f1)" \
    "$(cat "$TMP/fcgi_half.code") $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["md5"])' "$TMP/fcgi_half.body" 2>&1)"

# refused requests in the log: at most a line a second per kind, the rest counted
# refused_sum FILE OUTCOME STATUS: "lines requests" of that kind in a log
# (a request line counts 1 plus the "(and N more such" it carries; a count
# alone counts N)
refused_sum() {
    awk -v k="outcome $2, HTTP $3" '
        index($0, "refused: channel ") && index($0, k ", client ") { lines++; n++
            if (match($0, /\(and [0-9]+ more such/)) n += substr($0, RSTART + 5, RLENGTH - 15) }
        index($0, "refused: ") && index($0, " more with " k " since the last line") { lines++
            sub(/.*refused: /, ""); n += $1 }
        END { print lines + 0, n + 0 }' "$1"
}
# the earlier refusal (the one GET) has had its line (the first of its kind:
# at once), read until it is there (up to 30 s)
for _ in $(seq 1 300); do
    read -r _ n405 < <(refused_sum "$TMP/listen.err" refused 405)
    [ "$n405" -ge 1 ] && break
    sleep 0.1
done
t0=$(date +%s)
burst fcgi_forged "$URL" 300 -H 'X-Test-Outcome: rejected' -H 'X-Test-Status: 401'
burst fcgi_probe "$URL" 100 -X PUT
t1=$(date +%s)
expect_burst fcgi_forged 300 "401 rejected" "--listen: 300 forged requests all answered 401"
# counts that no later line carried are logged alone (2 s after the last
# line of their kind): read until both kinds have all theirs, up to 30 s
for _ in $(seq 1 300); do
    read -r lines n < <(refused_sum "$TMP/listen.err" rejected 401)
    read -r _ n2 < <(refused_sum "$TMP/listen.err" refused 405)
    [ "$n" -ge 300 ] && [ $((n2 - n405)) -ge 100 ] && break
    sleep 0.1
done
echo "#   300 rejected in $((t1 - t0 + 1)) s or less: $lines log lines"
check "--listen: every forged request counted in the log" 300 "$n"
check "--listen: at most a line a second (+1 for the count alone)" yes \
    "$([ "$lines" -ge 2 ] && [ "$lines" -le $((t1 - t0 + 3)) ] && echo yes || echo "no: $lines lines")"
read -r lines n < <(refused_sum "$TMP/listen.err" refused 405)
check "--listen: another kind (the shim's 405) counted apart" 100 "$((n - n405))"
check "--listen: the client is nginx's REMOTE_ADDR" yes \
    "$(grep -q 'refused: channel ch[0-9]*, outcome rejected, HTTP 401, client 127.0.0.1' "$TMP/listen.err" && echo yes || echo no)"

pn_cluster_stop "$PGDIR"
t0=$(date +%s%N)
burst fcgi_down "$URL" 40
t1=$(date +%s%N)
expect_burst fcgi_down 40 "503 unavailable" "--listen, database stopped: only 503"
check "--listen, database stopped: answered at once (40 in < 5 s)" yes \
    "$([ $(((t1 - t0) / 1000000)) -lt 5000 ] && echo yes || echo "no: $(((t1 - t0) / 1000000)) ms")"
db_restart
recovered=no
for _ in $(seq 1 100); do
    if [ "$(one fcgi_probe "$URL/notify/wxpay")" = "200 processed" ]; then recovered=yes; break; fi
    sleep 0.2
done
check "--listen, database restarted: recovers without a restart" yes "$recovered"
sleep 1.2                       # longer than PAYNOTIFY_RECONNECT_MAX: every worker retries
burst fcgi_up "$URL" 60
expect_burst fcgi_up 60 "200 processed" "--listen, after recovery: all 200"
check "--listen, after recovery: one connection per worker" 4 "$(shim_connections)"

curl -s -o "$TMP/slow.body" -w '%{http_code} %header{paynotify-outcome}' \
    -H 'X-Test-Sleep: 1' --data-binary @"$TMP/small.json" "$URL/notify/wxpay" >"$TMP/slow.code" 2>/dev/null &
CURL_PID=$!
for _ in $(seq 1 100); do      # until the request is inside the function
    [ "$(psql_su -Atc "SELECT count(*) FROM pg_stat_activity
        WHERE application_name = 'paynotify-cgi' AND state = 'active'")" -ge 1 ] && break
    sleep 0.05
done
stop_fastcgi
check "SIGTERM: exit status 0" 0 $?
wait "$CURL_PID"
check "SIGTERM: the request in flight is finished" "200 processed" "$(cat "$TMP/slow.code")"
check "SIGTERM: connections closed" 0 "$(shim_connections)"
check "SIGTERM: no accept errors logged" 0 "$(grep -c 'accepting a connection failed' "$TMP/listen.err")"

start_fastcgi capped env PAYNOTIFY_MAX_BODY=1000 "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 2
check "FastCGI: the shim's own 413 (cap below nginx's)" "413 refused" \
    "$(ONE_BODY=$TMP/half.bin one fcgi_413 "$URL/notify/wxpay")"
check "FastCGI: within that cap still 200" "200 processed" "$(one fcgi_small "$URL/notify/wxpay")"
burst fcgi_403 "$URL" 30 -H 'X-Test-Outcome: rejected' -H 'X-Test-Status: 403'
stop_fastcgi
check "FastCGI: SIGTERM exits 0" 0 $?
check "FastCGI: a count not logged yet is logged at stop" "yes 30" \
    "$(grep -q 'refused: [0-9]* more with outcome rejected, HTTP 403 since the last line, not logged' "$TMP/capped.err" && echo yes || echo no) $(refused_sum "$TMP/capped.err" rejected 403 | cut -d' ' -f2)"

echo "# FastCGI: silent and slow clients"
start_fastcgi silent env PAYNOTIFY_IDLE_TIMEOUT=3000 PAYNOTIFY_IO_TIMEOUT=1000 PAYNOTIFY_MAX_PENDING=8 \
    "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 2
# twice as many silent connections as workers: each worker could be given one
clients idle 4 idle 7
check "silent clients: 4 connections open" 0 $?
sleep 0.3
timed idle 4
answered_at=$(date +%s.%N)
check "4 silent connections (2 workers): 4 requests at once, each answered 200 in < 1 s" yes "$(answered idle 4 1)"
wait "$CLIENTS_PID"
check "the 4 silent connections were all still open when the requests had been answered" yes \
    "$(open_until idle "$answered_at")"
check "silent connections closed after PAYNOTIFY_IDLE_TIMEOUT (3 s)" yes "$(closed idle 1 4 2.8 5.5)"
clients cap 12 idle 7
check "silent clients: 12 connections open" 0 $?
sleep 0.3
timed cap 4
check "12 silent connections over PAYNOTIFY_MAX_PENDING=8: 4 requests, each 200 in < 1 s" yes "$(answered cap 4 1)"
wait "$CLIENTS_PID"
# 4 of them (12 - 8) closed before the idle timeout (the oldest displaced
# by newer ones), every one by the idle timeout
check "over PAYNOTIFY_MAX_PENDING 4 are closed early; all by the idle timeout" yes \
    "$(awk '$1 ~ /^[0-9]+$/ { n++
                if ($2 != "closed" || $3 + 0 > 5.5) bad = bad " [" $0 "]"
                if ($2 == "closed" && $3 + 0 < 2.8) early++ }
            END { print (n == 12 && early >= 4 && bad == "") ? "yes" : "no: " early " early;" bad }' \
        "$TMP/cap.clients")"
# more whole requests at once than PAYNOTIFY_MAX_PENDING, beside silent
# connections: none closed unanswered (a connection whose request arrived
# after a poll was once closed as the oldest silent one: nginx's 502)
clients many_idle 12 idle 5
IDLE_PID=$CLIENTS_PID
clients many 16 request 5
wait "$IDLE_PID" "$CLIENTS_PID"
check "16 whole requests at once over PAYNOTIFY_MAX_PENDING=8, beside 12 silent connections: all 200" \
    "16 yes" "$(grep -c ' closed .* status 200$' "$TMP/many.clients") $(closed many_idle 1 12 0 5)"
clients byte 4 byte 6
check "clients that send one byte and stall: 4 connections open" 0 $?
sleep 0.3
timed byte 4
# a connection reaches a worker only once its whole request has arrived
check "4 connections stalled after one byte (2 workers): 4 requests, each 200 in < 1 s" yes \
    "$(answered byte 4 1)"
wait "$CLIENTS_PID"
check "connections stalled after one byte closed after PAYNOTIFY_IDLE_TIMEOUT (3 s)" yes \
    "$(closed byte 1 4 2.8 5.5)"
clients trickle 2 trickle 6
check "clients that send BEGIN_REQUEST, then a byte every 0.2 s without end: 2 connections open" 0 $?
sleep 0.3
timed trickle 2
# a connection reaches a worker only once its whole request has arrived
check "2 trickling connections (2 workers): 2 requests, each 200 in < 1 s" yes "$(answered trickle 2 1)"
wait "$CLIENTS_PID"
check "trickling connections closed PAYNOTIFY_IDLE_TIMEOUT (3 s) after they started" yes \
    "$(closed trickle 1 2 2.8 5.5)"
# clients that begin a request and stall in its middle, twice as many as
# the workers: in PARAMS, and with the whole start sent, in STDIN (a
# worker that took them would wait PAYNOTIFY_IO_TIMEOUT for each)
clients stall 4 stall 7
check "clients stalled mid-request (2 in PARAMS, 2 in STDIN): 4 connections open" 0 $?
sleep 0.3
timed stall 4
answered_at=$(date +%s.%N)
check "4 connections stalled mid-request (2 workers): 4 requests at once, each 200 in < 1 s" yes \
    "$(answered stall 4 1)"
wait "$CLIENTS_PID"
check "the 4 stalled connections were all still open when the requests had been answered" yes \
    "$(open_until stall "$answered_at")"
check "connections stalled mid-request closed unanswered after PAYNOTIFY_IDLE_TIMEOUT (3 s)" "yes 0" \
    "$(closed stall 1 4 2.8 5.5) $(grep -c 'status' "$TMP/stall.clients")"
# clients that send a whole request and then a byte every 0.15 s past
# its end, twice as many as the workers: nothing more is due after a whole
# request, so its worker closes the connection after the reply at once
# (it waited PAYNOTIFY_IO_TIMEOUT for the client to go quiet)
clients after 4 after 4
check "clients that send a whole request and then a byte every 0.15 s: 4 connections open" 0 $?
sleep 0.3
timed after 4
check "4 connections sending past a whole request (2 workers): 4 requests at once, each 200 in < 1 s" yes \
    "$(answered after 4 1)"
wait "$CLIENTS_PID"
check "those 4 answered 200" yes \
    "$(awk '$1 ~ /^[0-9]+$/ { n++; if ($2 != "closed" || $NF != 200) bad = bad " [" $0 "]" }
            END { print (n == 4 && bad == "") ? "yes" : "no: " n " seen;" bad }' "$TMP/after.clients")"
clients keep 2 keep 3
check "a client asking to keep the connection (FCGI_KEEP_CONN, as nginx's fastcgi_keep_conn): 2 connections" 0 $?
wait "$CLIENTS_PID"
check "FCGI_KEEP_CONN: each request answered 200, then the connection closed by the shim" "yes 2" \
    "$(closed keep 1 2 0 0.9) $(grep -c 'status 200$' "$TMP/keep.clients")"
check "silent and slow clients: still one connection per worker" 2 "$(shim_connections)"
# clients that keep their end open after the reply, twice as many as the
# workers: a worker waits for a silent client to close for 0.2 s, not for
# PAYNOTIFY_IO_TIMEOUT (each held one for that long)
clients hold 4 keep 4
check "4 clients keeping their connection open after the reply: 4 connections" 0 $?
sleep 0.3
timed hold 4
check "4 connections kept open after their reply (2 workers): 4 requests, each 200 in < 1 s" yes \
    "$(answered hold 4 1)"
wait "$CLIENTS_PID"
clients term 4 idle 10
check "silent clients before SIGTERM: 4 connections open" 0 $?
sleep 0.3
t0=$(date +%s%N)
stop_fastcgi
rc=$?
t1=$(date +%s%N)
check "SIGTERM with 4 silent connections open: exit 0 in < 3 s" "0 yes" \
    "$rc $([ $(((t1 - t0) / 1000000)) -lt 3000 ] && echo yes || echo "no: $(((t1 - t0) / 1000000)) ms")"
wait "$CLIENTS_PID"
check "SIGTERM: the silent connections closed" yes "$(closed term 1 4 0 3.5)"
# requests queued at SIGTERM are served, but none is waited for longer than
# PAYNOTIFY_IO_TIMEOUT after it: one at a time they would take 8 s
start_fastcgi stalled env PAYNOTIFY_IO_TIMEOUT=1000 PAYNOTIFY_MAX_PENDING=16 \
    "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 1
clients stalled 8 begin 12
check "clients that send BEGIN_REQUEST and stall: 8 connections open" 0 $?
sleep 0.3
t0=$(date +%s%N)
stop_fastcgi
rc=$?
t1=$(date +%s%N)
check "SIGTERM with 8 stalled requests (1 worker, PAYNOTIFY_IO_TIMEOUT 1 s): exit 0 in < 3 s" "0 yes" \
    "$rc $([ $(((t1 - t0) / 1000000)) -lt 3000 ] && echo yes || echo "no: $(((t1 - t0) / 1000000)) ms")"
wait "$CLIENTS_PID"
check "SIGTERM: the stalled requests closed" yes "$(closed stalled 1 8 0 3.5)"

# FCGI_WEB_SERVER_ADDRS, read by libfcgi when it accepted, is kept
start_fastcgi addrs env FCGI_WEB_SERVER_ADDRS=192.0.2.1,127.0.0.1 "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 1
check "FCGI_WEB_SERVER_ADDRS listing 127.0.0.1: 200" "200 processed" "$(one addrs_ok "$URL/notify/wxpay")"
stop_fastcgi
start_fastcgi addrs_other env FCGI_WEB_SERVER_ADDRS=192.0.2.1 "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 1
check "FCGI_WEB_SERVER_ADDRS without 127.0.0.1: nginx's connection refused (502)" 502 \
    "$(one addrs_refused "$URL/notify/wxpay" | cut -d' ' -f1)"
stop_fastcgi
check "FCGI_WEB_SERVER_ADDRS: SIGTERM exits 0" 0 $?

echo "# FastCGI: hostile records, straight to the shim"
# hostile NAME CASE [HOST]: one case of shim/tests/fcgi_hostile.py against
# the shim; prints its line ("closed SECONDS [status N]" or "open"), also
# kept in $TMP/NAME.hostile
hostile() {
    python3 "$ROOT/shim/tests/fcgi_hostile.py" "${3:-127.0.0.1}" "$FCGI_PORT" "$2" 3 >"$TMP/$1.hostile" 2>&1
    cat "$TMP/$1.hostile"
}
# unanswered NAME: "yes" when the shim closed NAME's connection within 0.5 s
# without a reply
unanswered() {
    awk '{ print ($1 == "closed" && $2 + 0 < 0.5 && NF == 2) ? "yes" : "no: " $0 }' "$TMP/$1.hostile"
}
# survives LOG: "yes" when the shim still runs and a request through nginx
# is answered 200 in under a second
survives() {
    local got
    if ! pn_alive "$SHIM_PID"; then
        echo "no: the shim is gone: $(tail -n 2 "$TMP/$1.err" | tr '\n' ' ')"
        return
    fi
    got=$(curl -s --max-time 4 -o /dev/null -w '%{http_code} %header{paynotify-outcome} %{time_total}' \
        --data-binary @"$TMP/small.json" "$URL/notify/wxpay" 2>/dev/null)
    awk -v g="$got" 'BEGIN { split(g, f, " "); print (f[1] == 200 && f[2] == "processed" && f[3] + 0 < 1) ? "yes" : "no: " g }'
}
# refused_line LOG TEXT: "yes" when LOG has the line "refused: a FastCGI
# connection from TEXT"
refused_line() {
    if grep -qF "refused: a FastCGI connection from $2" "$TMP/$1.err"; then echo yes
    else echo "no: $(grep -F 'refused: a FastCGI' "$TMP/$1.err" | tail -n 2 | tr '\n' ' ')"; fi
}
start_fastcgi hostile env PAYNOTIFY_IO_TIMEOUT=2000 "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 2
check "control: a well-formed request straight to the shim" "closed status 200" \
    "$(hostile control request | sed 's/ [0-9.]* / /')"
hostile crash crash >/dev/null
check "the 16-byte PARAMS record (pair lengths 0x40000000): closed at once, unanswered" yes "$(unanswered crash)"
check "... and the shim still answers a request in under a second" yes "$(survives hostile)"
check "... logged with the client and the reason" yes \
    "$(refused_line hostile '127.0.0.1: a name-value pair longer than the PARAMS stream')"
sleep 1.1                       # a line a second per kind
hostile claim claim >/dev/null
check "a pair claiming a 1 GiB name: closed at once (not held until PAYNOTIFY_IO_TIMEOUT), unanswered" yes \
    "$(unanswered claim)"
check "... the shim still answers" yes "$(survives hostile)"
sleep 1.1
hostile oversized oversized >/dev/null
check "PARAMS of 70,000 bytes, well formed: closed at once, unanswered" yes "$(unanswered oversized)"
check "... logged" yes "$(refused_line hostile '127.0.0.1: BEGIN_REQUEST and PARAMS over 64 KiB')"
sleep 1.1
hostile version version >/dev/null
check "a record header of FastCGI version 2: closed at once, unanswered" yes "$(unanswered version)"
check "... logged" yes "$(refused_line hostile '127.0.0.1: a record of another FastCGI version')"
sleep 1.1
hostile getvalues getvalues >/dev/null
check "a management record (FCGI_GET_VALUES) before the request: closed at once, unanswered" yes \
    "$(unanswered getvalues)"
check "... the shim still answers" yes "$(survives hostile)"
check "... logged" yes \
    "$(refused_line hostile "127.0.0.1: a record other than the request's BEGIN_REQUEST, PARAMS and STDIN")"
sleep 1.1
check "a management record with the 16-byte record's pair inside the STDIN stream: 400, closed" \
    "closed status 400" "$(hostile stdin_mgmt stdin_mgmt | sed 's/ [0-9.]* / /')"
check "... the shim still answers" yes "$(survives hostile)"
check "PARAMS of 60,000 bytes (under the 64 KiB bound): answered 200" "closed status 200" \
    "$(hostile large large | sed 's/ [0-9.]* / /')"
check "FCGI_KEEP_CONN, then a second request with the 16-byte record: the first answered, then closed" \
    "closed status 200" "$(hostile keep keep | sed 's/ [0-9.]* / /')"
check "... the shim still answers" yes "$(survives hostile)"
stop_fastcgi
check "hostile records: SIGTERM exits 0" 0 $?

if command -v cgi-fcgi >/dev/null; then
    echo "# FastCGI on a unix socket (--listen PATH), driven by cgi-fcgi"
    SOCK=$TMP/run/shim.sock
    "${SHIM_ENV[@]}" "$SHIM" --listen "$SOCK" --workers 2 >"$TMP/unix.out" 2>"$TMP/unix.err" &
    SHIM_PID=$!
    STARTED+=("$SHIM_PID")
    for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
    length=$(stat -c %s "$TMP/binary.bin")
    env -i REQUEST_METHOD=POST PATH_INFO=/notify/unix_ch CONTENT_LENGTH="$length" \
        cgi-fcgi -bind -connect "$SOCK" <"$TMP/binary.bin" | tr -d '\r' >"$TMP/unix.reply"
    check "--listen PATH: reply" "200 OK" "$(sed -n 's/^Status: //p' "$TMP/unix.reply")"
    check "--listen PATH: channel and body" "unix_ch $(md5sum <"$TMP/binary.bin" | cut -d' ' -f1)" \
        "$(sed '1,/^$/d' "$TMP/unix.reply" | python3 -c 'import json,sys; b=json.load(sys.stdin); print(b["channel"], b["md5"])' 2>&1)"
    stop_fastcgi
    check "--listen PATH: SIGTERM exits 0" 0 $?
    check "--listen PATH: socket removed at exit" no "$([ -e "$SOCK" ] && echo yes || echo no)"
else
    echo "# skipped: --listen PATH (cgi-fcgi from libfcgi-bin is not installed)"
fi

echo "# FastCGI under socket activation (LISTEN_FDS)"
start_fastcgi activated systemd-socket-activate -l "127.0.0.1:$FCGI_PORT" \
    -E PAYNOTIFY_DSN="$DSN" -E PAYNOTIFY_FUNCTION=public.paynotify_handle -E PAYNOTIFY_WORKERS=2 "$SHIM"
burst act_burst "$URL" 50
expect_burst act_burst 50 "200 processed" "socket activation: 50 requests all 200"
check "socket activation: PAYNOTIFY_WORKERS=2 connections" 2 "$(shim_connections)"
stop_fastcgi
check "socket activation: SIGTERM exits 0" 0 $?

# (a machine whose loopback has no IPv6, a container started without it,
# cannot make a dual-stack socket: said, not failed)
if grep -qs '^0\{31\}1 ' /proc/net/if_inet6; then
    echo "# FastCGI under socket activation on a dual-stack socket ([::]) with FCGI_WEB_SERVER_ADDRS"
    # nginx connects to 127.0.0.1: the shim sees ::ffff:127.0.0.1
    start_fastcgi act6_other systemd-socket-activate -l "[::]:$FCGI_PORT" -E PAYNOTIFY_DSN="$DSN" \
        -E PAYNOTIFY_FUNCTION=public.paynotify_handle -E PAYNOTIFY_WORKERS=1 -E FCGI_WEB_SERVER_ADDRS=192.0.2.1 "$SHIM"
    check "[::] socket, FCGI_WEB_SERVER_ADDRS without 127.0.0.1: an IPv4 client (mapped) refused (502)" 502 \
        "$(one act6_refused "$URL/notify/wxpay" | cut -d' ' -f1)"
    check "... logged" yes "$(refused_line act6_other '::ffff:127.0.0.1: not an address of FCGI_WEB_SERVER_ADDRS')"
    stop_fastcgi
    check "[::] socket: SIGTERM exits 0" 0 $?
    start_fastcgi act6 systemd-socket-activate -l "[::]:$FCGI_PORT" -E PAYNOTIFY_DSN="$DSN" \
        -E PAYNOTIFY_FUNCTION=public.paynotify_handle -E PAYNOTIFY_WORKERS=1 -E FCGI_WEB_SERVER_ADDRS=192.0.2.1,127.0.0.1 "$SHIM"
    check "[::] socket, FCGI_WEB_SERVER_ADDRS listing 127.0.0.1: the IPv4 client (mapped) served" "200 processed" \
        "$(one act6_ok "$URL/notify/wxpay")"
    check "[::] socket with FCGI_WEB_SERVER_ADDRS: a native IPv6 client (::1) closed unanswered" yes \
        "$(hostile act6_v6 request ::1 >/dev/null; unanswered act6_v6)"
    check "... logged" yes "$(refused_line act6 '::1: not an address of FCGI_WEB_SERVER_ADDRS')"
    stop_fastcgi
    check "[::] socket: SIGTERM exits 0" 0 $?

else
    skipped "FastCGI on a dual-stack socket ([::]): this machine's loopback has no IPv6 (::1)"
fi

echo "# FastCGI under spawn-fcgi (listening socket on stdin)"
start_fastcgi spawned spawn-fcgi -n -a 127.0.0.1 -p "$FCGI_PORT" -- "$SHIM" --workers 3
burst spawn_burst "$URL" 50
expect_burst spawn_burst 50 "200 processed" "spawn-fcgi: 50 requests all 200"
check "spawn-fcgi: --workers 3 connections" 3 "$(shim_connections)"
stop_fastcgi
check "spawn-fcgi: SIGTERM exits 0" 0 $?

###############################################################################
echo "# valgrind"
VALGRIND="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible"
# SCRAM authentication is slow under valgrind: allow more than the default 2 s
DSN="$DSN connect_timeout=20"
SHIM_ENV=(env -i PATH="$PATH" PAYNOTIFY_DSN="$DSN" PAYNOTIFY_FUNCTION=public.paynotify_handle)
for run in "ok:$TMP/small.json" "binary:$TMP/binary.bin" "headers:$TMP/small.json"; do
    name=${run%%:*} body=${run#*:}
    if [ "$name" = headers ]; then
        cgi "vg_$name" "$body" HTTP_X_A=1 HTTP_X_A_B='two words' CONTENT_TYPE=text/plain
    else
        cgi "vg_$name" "$body"
    fi
    expect "vg_$name" 200 processed "valgrind: $name"
done
cgi vg_unreachable "$TMP/small.json" PAYNOTIFY_DSN="$BAD_DSN"
expect vg_unreachable 503 unavailable "valgrind: database unreachable"
cgi vg_sql_error "$TMP/small.json" HTTP_X_TEST_ERROR=1
expect vg_sql_error 503 unavailable "valgrind: SQL error"
cgi vg_too_big "$TMP/over.bin" CONTENT_LENGTH=-
expect vg_too_big 413 refused "valgrind: body over the cap"
cgi vg_not_found "$TMP/small.json" PATH_INFO=/notify/x-y
expect vg_not_found 404 refused "valgrind: bad channel"
cgi vg_bad_utf8 "$TMP/small.json" HTTP_X_LATIN1=$'caf\xe9'
expect vg_bad_utf8 400 refused "valgrind: header not UTF-8"
cgi vg_bad_fn "$TMP/small.json" PAYNOTIFY_FUNCTION='x y'
check "valgrind: bad setting" "503 2" "$(status_of "$TMP/vg_bad_fn.out") $(cat "$TMP/vg_bad_fn.rc")"
# the acceptor's unit test, without the sanitizers
if cc -std=c11 -D_GNU_SOURCE -g -O1 -I"$ROOT/shim/cgi" "${accept_test_flags[@]}" -o "$TMP/accept_test_vg" \
    "${accept_test_srcs[@]}" >"$TMP/accept_vg.log" 2>&1 && $VALGRIND "$TMP/accept_test_vg" >>"$TMP/accept_vg.log" 2>&1; then
    ok "valgrind: $(tail -n 1 "$TMP/accept_vg.log")"
else
    not_ok "valgrind: the acceptor's unit test" "$(tail -n 20 "$TMP/accept_vg.log")"
fi

# with silent connections (more than PAYNOTIFY_MAX_PENDING) and a stalled one
# shellcheck disable=SC2086
start_fastcgi vg_fastcgi env PAYNOTIFY_IDLE_TIMEOUT=1000 PAYNOTIFY_IO_TIMEOUT=3000 PAYNOTIFY_MAX_PENDING=4 \
    $VALGRIND --log-file="$TMP/vg_fastcgi.vg" "$SHIM" --listen "127.0.0.1:$FCGI_PORT" --workers 2
clients vg_silent 6 idle 5
SILENT_PID=$CLIENTS_PID
clients vg_byte 1 byte 8
burst vg_fcgi_burst "$URL" 30
expect_burst vg_fcgi_burst 30 "200 processed" "valgrind, FastCGI: 30 requests all 200"
check "valgrind, FastCGI: SQL error is 503" "503 unavailable" "$(one vg_fcgi_err "$URL/notify/wxpay" -H 'X-Test-Error: 1')"
burst vg_fcgi_refused "$URL" 5 -H 'X-Test-Outcome: rejected' -H 'X-Test-Status: 401'
expect_burst vg_fcgi_refused 5 "401 rejected" "valgrind, FastCGI: refused requests logged and counted"
hostile vg_crash crash >/dev/null
check "valgrind, FastCGI: the 16-byte PARAMS record refused" closed "$(cut -d' ' -f1,3- "$TMP/vg_crash.hostile")"
check "valgrind, FastCGI: a management record in STDIN: 400" "closed status 400" \
    "$(hostile vg_stdin stdin_mgmt | cut -d' ' -f1,3-)"
check "valgrind, FastCGI: PARAMS of 60,000 bytes: 200" "closed status 200" \
    "$(hostile vg_large large | cut -d' ' -f1,3-)"
wait "$SILENT_PID" "$CLIENTS_PID"
check "valgrind, FastCGI: the silent connections closed" yes "$(closed vg_silent 1 6 0 4)"
# silent with its one byte: displaced by the requests over PAYNOTIFY_MAX_PENDING, or idle
check "valgrind, FastCGI: the connection stalled after one byte closed" yes "$(closed vg_byte 1 1 0 5)"
stop_fastcgi
rc=$?
check "valgrind, FastCGI: clean after SIGTERM" "0" "$rc$(grep -v '^==[0-9]*== *$' "$TMP/vg_fastcgi.vg" | head -c 600)"
unset VALGRIND

###############################################################################
leaks=$(grep -l -F -- "$SHIM_PASSWORD" "$TMP"/*.err "$TMP"/*/error.log "$TMP"/*.vg 2>/dev/null | wc -l)
check "the DSN password appears in no log" 0 "$leaks"

summary
