#!/usr/bin/env bash
# The shim through pgbouncer in transaction pooling mode.
#
#   test/e2e/pgbouncer.sh
#
# A throwaway cluster, pgbouncer (Debian 12: 1.18, which does not keep named
# prepared statements across transactions) on a free loopback port with its
# own ini in the temp dir, pool_mode = transaction, 4 server connections for
# 8 shim workers; nginx and paynotify-cgi in FastCGI mode.  The same storm
# (one notification, many deliveries) and distinct notifications go
#   direct     to PostgreSQL, the statement prepared once per connection;
#   direct     with --no-prepare;
#   pooled     through pgbouncer with --no-prepare;
# and the results (HTTP statuses, outcomes, rows) must be equal.  The
# throughput of each is printed (a figure, not a verdict), as is what happens
# through pgbouncer without --no-prepare (the prepared statement lives on one
# server connection; other transactions land on others: 503s).
# Everything is started here on loopback and stopped by pid.  About a
# minute; in the --full suite.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
pass=0 fail=0
command -v pgbouncer >/dev/null || { echo "pgbouncer is not installed (scripts/deps.sh)"; echo "0 passed, 1 failed"; exit 1; }
pn_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }

N=${PGB_N:-2000}
stack_init pgbouncer
stack_pg || exit 1
stack_schema 0 $((4 * N + 10)) || exit 1
DIRECT=$STACK_DSN

# pgbouncer, as the cluster's owner, by its pid
pgb=$STACK_DIR/pgbouncer
PB=$(pn_free_port)
mkdir -p "$pgb"
cat >"$pgb/pgbouncer.ini" <<INI
[databases]
postgres = host=127.0.0.1 port=$STACK_PGPORT dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PB
unix_socket_dir =
auth_type = trust
auth_file = $pgb/userlist.txt
pool_mode = transaction
default_pool_size = 4
max_client_conn = 100
logfile = $pgb/pgbouncer.log
pidfile = $pgb/pgbouncer.pid
INI
echo '"notify_shim" ""' >"$pgb/userlist.txt"
chown -R "$PN_RUNUSER" "$pgb" 2>/dev/null
(
    setpriv --reuid="$(id -u "$PN_RUNUSER")" --regid="$(id -g "$PN_RUNUSER")" --clear-groups \
        pgbouncer "$pgb/pgbouncer.ini" >>"$pgb/stdout.log" 2>&1 &
    echo $! >"$STACK_DIR/pgbouncer.pid"
)
STACK_PIDS+=("$(cat "$STACK_DIR/pgbouncer.pid")")
stack_wait_port "$PB" || { cat "$pgb/pgbouncer.log"; exit 1; }
POOLED="host=127.0.0.1 port=$PB dbname=postgres user=notify_shim"
echo "# $(pgbouncer --version | head -1), pool_mode = transaction, default_pool_size = 4"

# run NAME DSN START [shim args...]: a shim with that DSN behind nginx, then
# a storm of N deliveries of order START and N distinct orders START+1...
start=1
run() {
    local name=$1 dsn=$2 first=$3
    shift 3
    STACK_DSN=$dsn
    stack_shim_named "$name" 8 "$@" || return 1
    stack_nginx_stop
    stack_nginx_upstream "$STACK_DIR/run/$name.sock" || return 1
    stack_send wxpay --mode storm -n "$N" -c 16 --start "$first" --seed 7 --quiet --json >"$STACK_DIR/$name-storm.json"
    stack_send wxpay --mode distinct -n "$N" -c 16 --start $((first + 1)) --seed 7 --quiet --json >"$STACK_DIR/$name-distinct.json"
    stop_pid "$(cat "$STACK_DIR/$name.pid")"
}
# counts FILE: statuses and outcomes of a run, comparable across runs
counts() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sorted(d["status"].items()), sorted(d["outcome"].items()), d["transport_errors"])' "$1"; }
rps() { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["rps"]))' "$1"; }
rows() {	# rows FIRST: payments and log rows of the run's orders
    stack_sql -tA -c "SELECT count(*), count(DISTINCT order_no) FROM payment_record
        WHERE order_no BETWEEN 'PN$(printf %08d "$1")' AND 'PN$(printf %08d $(($1 + N)))'"
}

run direct "$DIRECT" 1 || exit 1
run direct-noprep "$DIRECT" $((N + 2)) --no-prepare || exit 1
run pooled "$POOLED" $((2 * N + 3)) PAYNOTIFY_NO_PREPARE=1 || exit 1
check "--no-prepare: the shim sends no named statement (PAYNOTIFY_NO_PREPARE=1 through pgbouncer)" 0 \
    "$(grep -c 'prepar' "$STACK_DIR/log/pooled.err")"
want_storm="[('200', $N)] [('duplicate', $((N - 1))), ('processed', 1)] 0"
want_distinct="[('200', $N)] [('processed', $N)] 0"
for r in direct direct-noprep pooled; do
    check "$r: storm of $N deliveries: all 200, processed once" "$want_storm" "$(counts "$STACK_DIR/$r-storm.json")"
    check "$r: $N distinct notifications: all 200 processed" "$want_distinct" "$(counts "$STACK_DIR/$r-distinct.json")"
done
check "the rows: one payment per order, the same for each run" "$((N + 1))|$((N + 1)) $((N + 1))|$((N + 1)) $((N + 1))|$((N + 1))" \
    "$(rows 1) $(rows $((N + 2))) $(rows $((2 * N + 3)))"
printf '# throughput, requests/s (storm | distinct): direct %s | %s; direct --no-prepare %s | %s; pgbouncer --no-prepare %s | %s\n' \
    "$(rps "$STACK_DIR/direct-storm.json")" "$(rps "$STACK_DIR/direct-distinct.json")" \
    "$(rps "$STACK_DIR/direct-noprep-storm.json")" "$(rps "$STACK_DIR/direct-noprep-distinct.json")" \
    "$(rps "$STACK_DIR/pooled-storm.json")" "$(rps "$STACK_DIR/pooled-distinct.json")"

# without the option, through the same pgbouncer: a figure of what breaks
first=$((3 * N + 4))
N=500
run pooled-prep "$POOLED" "$first" || exit 1
echo "# through pgbouncer WITHOUT --no-prepare: storm $(counts "$STACK_DIR/pooled-prep-storm.json"), distinct $(counts "$STACK_DIR/pooled-prep-distinct.json")"
echo "# its log: $(grep -c 'prepared statement' "$STACK_DIR/log/pooled-prep.err") lines about the prepared statement, e.g. $(grep -m1 'prepared statement\|the call failed' "$STACK_DIR/log/pooled-prep.err")"
summary
