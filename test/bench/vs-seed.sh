#!/usr/bin/env bash
# paynotify against the blog's own stack on the same machine, in interleaved
# rounds: seed-php (nginx -> PHP-FPM, 16 workers -> Redis lock + PostgreSQL)
# and paynotify (nginx -> paynotify-cgi FastCGI -> PostgreSQL), both driven by
# the seed's own pre-signed requests and its own load driver (load.sh: wrk
# for the distinct run, ab for the storm).  Prints figures; asserts nothing.
#
#   test/bench/vs-seed.sh [--smoke] [-r ROUNDS] [-d SECONDS] [-m DISTINCT] [-w SHIM_WORKERS] [-N]
#
#   --smoke  a few hundred requests, to see that it still runs (the suite's
#       test/bench/smoke.sh): -r 1 -d 5 -m 300, the storm 200 requests, the
#       seed's orders 1000, QUIET_WAIT 0; later options still apply
#   -r  rounds (default 3); each round runs, alternating which goes first:
#         distinct  load.sh -u URL -d SECONDS distinct   (wrk -t2 -c50)
#         storm     load.sh -u URL -n 1000 storm         (ab -n 1000 -c 50)
#       for the seed and for paynotify, each after a reset of its state
#       (seed: its seed.sh; paynotify: log, payments, outbox and orders)
#   -d  wrk seconds (default 15)
#   -m  distinct notifications signed by the seed's gen-requests.py (default
#       40000: enough that neither side finishes wrk's first pass, so every
#       request of the distinct run is a first delivery)
#   -w  paynotify-cgi FastCGI workers (default 8)
#   -N  paynotify.notify = off (default: the extension's default, on): the
#       outbox row is still written, but no NOTIFY, whose server-wide lock is
#       held through each commit's WAL flush
#
# Environment: SEED_PHP (default ../shared/anchors/seed-php next to the
# repository; absent: nothing to compare, exit 0), QUIET_WAIT (seconds each
# load run first waits for the machine to go idle, default 60; the seed's
# cpu-monitor.py then reports the CPU other processes used during the run),
# VS_LOGS (a directory to keep the raw load.sh outputs in), ORDERS (the
# seed's orders, default 200000: its start.sh and seed.sh seed them, its
# gen-requests.py signs the storm for the last one).
#
# The seed is copied to a private directory and run from there (its start.sh
# writes run.env and gen-requests.py requests/ next to themselves), on free
# ports.  paynotify gets the seed's key material (its platform certificate
# under its serial, its APIv3 key), a channel named after the seed's URL path
# (/notify/wechat -> "wechat"), the seed's orders ORD000001.. with the same
# amounts, and paynotify.now pinned to the requests' signing time (they were
# signed once, before the rounds, and the rounds outlast the 300 s window).
# Its PostgreSQL gets the seed's shared_buffers and max_connections (the
# defaults), and its nginx no access log (the seed's writes none).
# After every run the database must show exactly what the replies said:
# otherwise the figure is printed as INVALID.  Everything started is stopped
# at the end (the seed by its stop.sh, paynotify's stack by pid).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=$(pwd)
. test/lib.sh
. test/e2e/stack.sh

rounds=3 secs=15 distinct=40000 workers=8 notify=on storm_n=1000 orders=${ORDERS:-200000}
if [ "${1:-}" = --smoke ]; then
    shift
    rounds=1 secs=5 distinct=300 storm_n=200 orders=1000
    export QUIET_WAIT=${QUIET_WAIT:-0}
fi
while getopts "r:d:m:w:Nh" o; do
    case $o in
        r) rounds=$OPTARG ;; d) secs=$OPTARG ;; m) distinct=$OPTARG ;; w) workers=$OPTARG ;;
        N) notify=off ;;
        *) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 2 ;;
    esac
done

seed_src=${SEED_PHP:-$top/../shared/anchors/seed-php}
if [ ! -f "$seed_src/load.sh" ] || [ ! -f "$seed_src/start.sh" ]; then
    echo "seed-php not found at $seed_src (set SEED_PHP): nothing to compare against"
    exit 0
fi
seed_src=$(cd "$seed_src" && pwd)
[ "$(id -u)" = 0 ] || { echo "run as root (the seed's setup.sh and start.sh need it)" >&2; exit 2; }
export QUIET_WAIT=${QUIET_WAIT:-60}

echo "== building paynotify"
{ pn_install && make -s -C shim >/dev/null; } || exit 1

work=$(mktemp -d /tmp/paynotify-vsseed.XXXXXX)
chmod 755 "$work"
seed=$work/seed
seed_started=""
cleanup() {
    if [ -n "$seed_started" ] && [ -f "$seed/run.env" ]; then
        "$seed/stop.sh" | sed 's/^/   seed /'
    fi
    stack_stop
    if [ -n "${VS_LOGS:-}" ] && [ -d "$work/logs" ]; then
        mkdir -p "$VS_LOGS" && cp -r "$work/logs/." "$VS_LOGS/" && echo "raw outputs kept in $VS_LOGS"
    fi
    remove_tmp "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp -r "$seed_src" "$seed"
rm -rf "$seed/run.env" "$seed/requests"
mkdir -p "$work/logs"

echo "== the seed: setup.sh, gen-requests.py --distinct $distinct, start.sh (copy in $seed)"
# The seed's setup.sh checks its PHP modules with `php -m | grep -qx X` under
# pipefail. grep -q exits at the match; php, still writing, then fails (255,
# also with SIGPIPE ignored), and the check reports the module missing. It
# failed so twice in a row on a clean machine. The copy's checks read all of
# php's output instead; what setup.sh installs is unchanged.
sed -i 's/| grep -qx \([a-z_]*\)/| grep -x \1 >\/dev\/null/' "$seed/setup.sh"
if grep -q 'grep -qx' "$seed/setup.sh"; then
    echo "the seed's setup.sh has a php -m check this script does not know" >&2; exit 1
fi
"$seed/setup.sh" | tail -1 || { echo "the seed's setup.sh failed" >&2; exit 1; }
"$seed/gen-requests.py" --distinct "$distinct" --orders "$orders" | tail -1 || exit 1
seed_started=1
export ORDERS=$orders	# start.sh and seed.sh seed that many orders
HTTP_PORT=$(pn_free_port) PG_PORT=$(pn_free_port) REDIS_PORT=$(pn_free_port) \
    "$seed/start.sh" >"$work/logs/seed-start.log" 2>&1 || { cat "$work/logs/seed-start.log"; exit 1; }
senv() { sed -n "s/^$1=//p" "$seed/run.env"; }
seed_url=$(senv URL)
seed_q() {
    psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$(senv PG_SOCKET_DIR)" -p "$(senv PG_PORT)" -U postgres -d seed "$@"
}
seed_orders=$(seed_q -c 'SELECT count(*) FROM "order"')
echo "   $seed_url: php-fpm $(senv FPM_WORKERS) workers, persistent connections $(senv PERSISTENT), $seed_orders orders"

# what the seed's requests carry
ts=$(sed -n 's/^Wechatpay-Timestamp: //p' "$seed/requests/storm.req" "$seed/requests/distinct.req" | sort -u)
[ "$(echo "$ts" | wc -l)" = 1 ] || { echo "the requests carry several timestamps: $ts" >&2; exit 1; }
serial=$(tr -d ' \n' <"$seed/keys/platform_serial.txt")
cert=$seed/keys/platform_certs/$serial.pem
[ -f "$cert" ] || { echo "no certificate $cert" >&2; exit 1; }
mchid=$(sed -n 's/^MCHID = "\(.*\)"$/\1/p' "$seed/gen-requests.py")
appid=$(sed -n 's/^APPID = "\(.*\)"$/\1/p' "$seed/gen-requests.py")
channel=${seed_url##*/}
storm_id=$(sed -n 's/^STORM_NOTIFY_ID=//p' "$seed/requests/manifest.env")
storm_order=$(sed -n 's/^STORM_ORDER_NO=//p' "$seed/requests/manifest.env")

echo "== paynotify: PostgreSQL (the seed's settings: default shared_buffers, max_connections), nginx, paynotify-cgi ($workers workers)"
stack_init vsseed
trap cleanup EXIT
stack_pg "shared_buffers = 128MB" "max_connections = 100"
stack_schema 0 0
# shellcheck disable=SC2016
stack_sql -q -v ch="$channel" -v apiv3="$(tr -d '\n' <"$seed/keys/apiv3_key.txt")" -v mchid="$mchid" \
    -v appid="$appid" -v serial="$serial" -v cert="$(cat "$cert")" -v ts="$ts" -v orders="$seed_orders" \
    -v notify="$notify" >/dev/null <<'SQL' || exit 1
DELETE FROM paynotify_hook;
-- one channel per gateway account: the stack's own WeChat channel (the test
-- vectors' merchant, which the seed's gen-requests.py signs for too) makes
-- way for the seed's; nothing here is sent to it
DELETE FROM paynotify_channel WHERE gateway = 'wxpay';
SELECT paynotify_add_channel(:'ch', 'wxpay', jsonb_strip_nulls(jsonb_build_object('apiv3_key', :'apiv3',
	'mchid', NULLIF(:'mchid', ''), 'appid', NULLIF(:'appid', ''))));
SELECT paynotify_add_key(:'ch', :'serial', :'cert');
-- the seed's orders: ORD000001.., amount 100 + i % 900 fen (its seed.sh)
CREATE FUNCTION seed_orders(n int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO orders SELECT 'ORD' || lpad(i::text, 6, '0'), 'pending', 100 + i % 900
		FROM generate_series(1, n) i $$;
SELECT seed_orders(:orders);
ALTER DATABASE postgres SET paynotify.now = :ts;
ALTER DATABASE postgres SET paynotify.notify = :notify;
SQL
stack_http fastcgi "$workers" || exit 1
# the seed's nginx writes no access log: neither does this one, for the comparison
sed -i 's|^\( *\)access_log .*;|\1access_log off;|' "$STACK_DIR/nginx-fastcgi/nginx.conf"
kill -HUP "$STACK_NGINX_PID" && sleep 1
pn_url=$STACK_URL/$channel
echo "   $pn_url: channel $channel, key $serial, $seed_orders orders,"
echo "   paynotify.now = $ts ($(date -u -d "@$ts" +%FT%TZ), the requests' signing time), paynotify.notify = $notify"

pn_reset() {
    stack_sql -q >/dev/null <<EOS
TRUNCATE payment_notify_log, payment_record, paynotify_outbox, paynotify_anomaly, paynotify_refund, orders;
SELECT seed_orders($seed_orders);
VACUUM ANALYZE;
CHECKPOINT;
EOS
}
seed_reset() {
    "$seed/seed.sh" >/dev/null && seed_q -c "CHECKPOINT" >/dev/null
}

# one request by hand first: a clear message if paynotify refuses the seed's requests
pn_reset
body=$(awk -v RS= 'NR == 2' "$seed/requests/storm.req")
hdrs=()
while IFS= read -r h; do hdrs+=(-H "$h"); done < <(awk -v RS= 'NR == 1' "$seed/requests/storm.req")
reply=$(curl -s -i "${hdrs[@]}" --data-binary "$body" "$pn_url" | tr -d '\r')
if ! echo "$reply" | grep -i '^paynotify-outcome: processed' >/dev/null; then
    echo "paynotify did not process the seed's storm request:" >&2
    echo "$reply" >&2
    exit 1
fi

# ROOTS for cpu-monitor.py: both stacks' masters and this script
roots() {
    local r p
    r="$$,$(head -1 "$(senv PG_DATA)/postmaster.pid"),$(cat "$(senv REDIS_PIDFILE)"),$(cat "$(senv FPM_PIDFILE)")"
    r+=",$(cat "$(senv NGINX_PIDFILE)"),$(pn_cluster_pid "$STACK_DIR/pg"),$STACK_NGINX_PID"
    [ -f "$STACK_DIR/shim.pid" ] && r+=",$(cat "$STACK_DIR/shim.pid")"
    for p in "${STACK_PIDS[@]}"; do r+=",$p"; done
    echo "$r"
}

# load SIDE KIND ROUND: one load.sh run against SIDE (seed|paynotify), raw output kept
load() {
    local url=$seed_url out=$work/logs/$1-$2-$3.txt
    [ "$1" = paynotify ] && url=$pn_url
    if [ "$2" = distinct ]; then
        /usr/bin/python3 "$seed/cpu-monitor.py" "$(roots)" -- "$seed/load.sh" -u "$url" -d "$secs" distinct >"$out" 2>&1
    else
        /usr/bin/python3 "$seed/cpu-monitor.py" "$(roots)" -- "$seed/load.sh" -u "$url" -n "$storm_n" storm >"$out" 2>&1
    fi
    sleep 1	# requests cut off when wrk stopped finish in the server
    echo "$out"
}

# parse OUT: "REQ/S P50 P99 OTHER_CPU_S REPLIES_2XX NON2XX ERRORS FIRSTPASS_SENT COMPLETE FIRSTPASS_RATE STATUS MESSAGES"
parse() {
    python3 - "$1" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def g(pat, default="-"):
    m = re.search(pat, t, re.M)
    return m.group(1) if m else default
rps = g(r"^requests:\s+\d+ in [\d.]+s = ([\d.]+) req/s")
p50 = g(r"^latency:\s+p50=([\d.]+)ms")
p99 = g(r"^latency:.* p99=([\d.]+)ms")
other = g(r"other processes used ([\d.]+) CPU-s")
status = g(r"^status:\s+(.*)$", "").split()
ok = sum(int(v) for k, v in (s.split("=") for s in status) if k.startswith("2"))
non2xx = sum(int(v) for k, v in (s.split("=") for s in status) if not k.startswith("2"))
errs = g(r"^errors:\s+(.*)$", "")
nerr = sum(int(v) for k, v in (e.split("=") for e in errs.split()) if k != "non2xx3xx")
nerr += int(g(r"^Failed requests:\s+(\d+)", "0")) if "---- summary (ab)" in t else 0
sent = g(r"first pass sent (\d+) of them")
complete = "complete" if re.search(r"first pass sent \d+ of them \(complete", t) else "incomplete"
fp = g(r"^firstpass:.* = ([\d.]+) req/s")
msgs = "_".join(g(r"^message:\s+(.*)$", "").split())
if "---- summary" not in t:
    rps = "-"
print(rps, p50, p99, other, ok, non2xx, nerr, sent, complete, fp, "_".join(status) or "-", msgs or "-")
PY
}

# db_agrees SIDE KIND OK_REPLIES SENT COMPLETE: nothing when the database agrees with the replies
db_agrees() {
    local side=$1 kind=$2 ok=$3 sent=$4 complete=$5 got
    if [ "$side" = seed ]; then
        if [ "$kind" = storm ]; then
            "$seed/verify.sh" storm >"$work/logs/verify.txt" 2>&1 || echo "seed verify.sh storm: $(grep -c FAIL "$work/logs/verify.txt") FAIL"
            return
        fi
        got=$(seed_q -F' ' -c "SELECT count(*), count(*) FILTER (WHERE status = 1),
            (SELECT count(*) FROM payment_record), (SELECT count(*) FROM \"order\" WHERE status = 'paid')
            FROM payment_notify_log")
    else
        if [ "$kind" = storm ]; then
            got=$(stack_sql -tA -F' ' -c "SELECT count(*), string_agg(status || ' ' || delivery_count || ' ' || attempts, ','),
                (SELECT count(*) FROM payment_record), (SELECT status FROM orders WHERE order_no = '$storm_order')
                FROM payment_notify_log WHERE notify_id = '$storm_id'")
            [ "$got" = "1 succeeded $storm_n 1 1 paid" ] || echo "paynotify storm: log rows, status deliveries attempts, payments, order = $got (expected 1 succeeded $storm_n 1 1 paid)"
            return
        fi
        got=$(stack_sql -tA -F' ' -c "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
            (SELECT count(*) FROM payment_record), (SELECT count(*) FROM orders WHERE status = 'paid')
            FROM payment_notify_log")
    fi
    local rows good pays paid
    read -r rows good pays paid <<<"$got"
    if [ "$rows" != "$good" ] || [ "$pays" != "$good" ] || [ "$paid" != "$good" ]; then
        echo "$side: log rows $rows, succeeded $good, payments $pays, orders paid $paid (all must be equal)"
    elif [ "$complete" = complete ] && [ "$good" != "$distinct" ]; then
        echo "$side: first pass complete but $good notifications applied, not $distinct"
    elif [ "$complete" != complete ] && { [ "$good" -lt "$ok" ] || [ "$good" -gt "$sent" ]; }; then
        echo "$side: $good notifications applied, outside [$ok 2xx replies, $sent sent]"
    fi
}

declare -A R_RPS R_P50 R_P99
printf '\n%-5s %-10s %-9s %9s %8s %8s %8s  %s\n' round side run req/s p50_ms p99_ms other_s "replies / check"
one() {	# one SIDE KIND ROUND
    local side=$1 kind=$2 r=$3 out rps p50 p99 other ok non2xx nerr sent complete fp status msgs why=""
    if [ "$side" = seed ]; then seed_reset; else pn_reset; fi
    out=$(load "$side" "$kind" "$r")
    read -r rps p50 p99 other ok non2xx nerr sent complete fp status msgs <<<"$(parse "$out")"
    [ -n "$msgs" ] || rps=-
    [ "$rps" != - ] || why="load.sh printed no summary: $(tail -2 "$out" | tr '\n' ' ')"
    [ -n "$why" ] || [ "$non2xx" = 0 ] || why="non-2xx replies: $status"
    [ -n "$why" ] || [ "$nerr" = 0 ] || why="transport errors: $(grep -E '^(errors|Failed requests):' "$out" | tr '\n' ' ')"
    [ -n "$why" ] || why=$(db_agrees "$side" "$kind" "$ok" "$sent" "$complete")
    local note="$ok x 2xx"
    if [ "$kind" = distinct ]; then
        if [ "$complete" = complete ]; then
            # the overall figure mixes in repeats: the first pass is the distinct figure
            note+=", first pass complete: all $distinct at $fp/s (overall $rps/s incl. repeats)"
            rps=$fp p50=- p99=-
        else
            note+=", all first deliveries ($sent of $distinct sent)"
        fi
    else
        note+=" (${msgs//_/ })"
    fi
    if [ -n "$why" ]; then
        printf '%-5s %-10s %-9s %9s %8s %8s %8s  INVALID: %s\n' "$r" "$side" "$kind" - - - "$other" "$why"
    else
        printf '%-5s %-10s %-9s %9s %8s %8s %8s  %s\n' "$r" "$side" "$kind" "$rps" "$p50" "$p99" "$other" "$note"
        R_RPS[$side.$kind]+=" $rps"
        [ "$p50" = - ] || R_P50[$side.$kind]+=" $p50"
        [ "$p99" = - ] || R_P99[$side.$kind]+=" $p99"
    fi
}

for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then order=(seed paynotify); else order=(paynotify seed); fi
    for kind in distinct storm; do
        for side in "${order[@]}"; do one "$side" "$kind" "$r"; done
    done
done

median() {
    [ $# -gt 0 ] || { echo n/a; return; }
    python3 -c 'import statistics, sys; print(f"{statistics.median(map(float, sys.argv[1:])):.1f}")' "$@"
}
echo
echo "medians over the valid runs of $rounds rounds (other_s: CPU-seconds other processes on the machine used during a run)"
printf '%-9s %-10s %6s %9s %8s %8s\n' run side valid req/s p50_ms p99_ms
for kind in distinct storm; do
    for side in seed paynotify; do
        # shellcheck disable=SC2086 # space-separated lists
        set -- ${R_RPS[$side.$kind]:-}
        # shellcheck disable=SC2086
        printf '%-9s %-10s %6s %9s %8s %8s\n' "$kind" "$side" "$#/$rounds" "$(median "$@")" \
            "$(median ${R_P50[$side.$kind]:-})" "$(median ${R_P99[$side.$kind]:-})"
    done
    # shellcheck disable=SC2086
    s=$(median ${R_RPS[seed.$kind]:-}) p=$(median ${R_RPS[paynotify.$kind]:-})
    if [ "$s" != n/a ] && [ "$p" != n/a ]; then
        echo "$kind: paynotify/seed req/s = $(python3 -c "print(f'{$p / $s:.2f}')")"
    else
        echo "$kind: paynotify/seed req/s = n/a (no valid run on one side)"
    fi
done
echo "machine: $(nproc) CPUs shared by both stacks' servers and the load tool; load runs one at a time"
echo "== stopping everything"
