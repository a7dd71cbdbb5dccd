# The whole stack on loopback, for demo.sh, test/e2e, test/bench and
# test/chaos: a throwaway PostgreSQL cluster with paynotify configured for
# all three gateways with the test-only keys, nginx, and paynotify-cgi in
# FastCGI (--listen) or CGI (fcgiwrap) mode.  Everything lives in one
# temporary directory and is stopped by pid.  Source after test/lib.sh.

STACK_PIDS=()
STACK_NGINX_PID=""

# stack_init NAME: a private directory, removed with everything in it on exit.
stack_init() {
    STACK_ROOT=$(pwd)
    STACK_DIR=$(mktemp -d "/tmp/paynotify-$1.XXXXXX")
    chmod 711 "$STACK_DIR"
    mkdir -p "$STACK_DIR/run" "$STACK_DIR/log"
    chmod 777 "$STACK_DIR/run"
    trap stack_stop EXIT
    # a signal ends the script through its EXIT trap, so everything is stopped
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# stack_pg [postgresql.conf lines...]: the cluster, on a free port.
stack_pg() {
    STACK_PGPORT=$(pn_free_port)
    pn_cluster_start "$STACK_DIR/pg" "$STACK_PGPORT" "$@"
    STACK_DSN="host=$STACK_DIR/pg port=$STACK_PGPORT dbname=postgres user=notify_shim"
}

stack_sql() { pn_psql "$STACK_DIR/pg" "$STACK_PGPORT" "$@"; }

# stack_schema HOOK_FAIL_PERCENT ORDERS: the extension, channels wxpay,
# alipay and stripe (keys from test/vectors/keys), ORDERS pending orders
# PN00000001... of 88.88, the guard trigger, the shim's login role
# notify_shim (the handler capacity, paynotify_grant), and an ERP hook,
# registered by the plain role erp_ops (the admin capacity), that
# fails HOOK_FAIL_PERCENT % of the time (each call draws from a stream
# seeded by hook_faults.seed) while hook_faults.until_unix (unix time) is in
# the future.
stack_schema() {
    local fail_pct=$1 orders=$2 keys=$STACK_ROOT/test/vectors/keys
    stack_sql -q \
        -v wxcert="$(cat "$keys/wechat_platform_1.cert.pem")" \
        -v wxserial="$(openssl x509 -noout -serial -in "$keys/wechat_platform_1.cert.pem" | cut -d= -f2)" \
        -v wxpub3="$(cat "$keys/wechat_pubkey_3.pub.pem")" \
        -v wxpub3id="$(cat "$keys/wechat_pubkey_3.id")" \
        -v apiv3="$(tr -d '\n' <"$keys/wechat_apiv3.key")" \
        -v alipub="$(cat "$keys/alipay_1.pub.pem")" \
        -v whsec="$(tr -d '\n' <"$keys/stripe_secret_1.txt")" \
        -v orders="$orders" -v fail_pct="$fail_pct" >/dev/null <<'SQL'
CREATE EXTENSION paynotify;
SELECT paynotify_add_channel('wxpay', 'wxpay', jsonb_build_object('apiv3_key', :'apiv3',
	'mchid', '1900000109', 'appid', 'wx0000000000test01'));
SELECT paynotify_add_key('wxpay', :'wxserial', :'wxcert');
SELECT paynotify_add_key('wxpay', :'wxpub3id', :'wxpub3');
SELECT paynotify_add_channel('alipay', 'alipay', '{"app_id": "2021000000000001"}');
SELECT paynotify_add_key('alipay', 'alipay_1', :'alipub');
SELECT paynotify_add_channel('stripe', 'stripe', '{}');
SELECT paynotify_add_key('stripe', 'whsec_1', :'whsec');

CREATE TABLE orders (
	order_no	text PRIMARY KEY,
	status		text NOT NULL DEFAULT 'pending',
	amount_fen	bigint NOT NULL
);
INSERT INTO orders SELECT 'PN' || lpad(i::text, 8, '0'), 'pending', 8888
	FROM generate_series(1, :orders) i;
CREATE TRIGGER orders_guard BEFORE UPDATE ON orders
	FOR EACH ROW EXECUTE FUNCTION paynotify_guard_transition();
SELECT paynotify_bind_orders('orders', 'order_no', 'status', 'amount_fen');

CREATE TABLE erp_calls (order_no text, event text, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE hook_faults (fail_pct int, until_unix bigint, seed bigint NOT NULL DEFAULT 0);
INSERT INTO hook_faults VALUES (:fail_pct, 0);
CREATE SEQUENCE hook_draws;
GRANT USAGE ON SEQUENCE hook_draws TO PUBLIC;
CREATE FUNCTION erp_hook(ev jsonb) RETURNS void LANGUAGE sql
BEGIN ATOMIC
	-- the n-th call fails or not by a hash of hook_faults.seed and n: a
	-- seeded stream of draws instead of random(); the failure, an ERP
	-- that refuses the call, is an error (a text that is no number)
	SELECT CASE WHEN (hashtext(f.seed || '/' || nextval('hook_draws')) & 2147483647) % 100 < f.fail_pct
			 AND extract(epoch FROM clock_timestamp()) < f.until_unix
		THEN ('ERP unavailable (injected) ' || f.seed)::int END
	FROM hook_faults f;
	INSERT INTO erp_calls (order_no, event) VALUES (ev->'notice'->>'order_no', ev->>'event');
END;
-- registered by the operator's role erp_ops (LOGIN: on Citus the hook connects
-- to the other nodes as it): a hook runs as the role that
-- registered it, and no superuser may register one
CREATE ROLE erp_ops LOGIN;
SELECT paynotify_grant('erp_ops', 'admin');
GRANT SELECT ON hook_faults TO erp_ops;
GRANT INSERT ON erp_calls TO erp_ops;
SET ROLE erp_ops;
SELECT paynotify_on('paid', 'erp_hook(jsonb)');
SELECT paynotify_on('refunded', 'erp_hook(jsonb)');
RESET ROLE;

CREATE ROLE notify_shim LOGIN;
SELECT paynotify_grant('notify_shim', 'handler');
SQL
}

# stack_wait_port PORT: until something listens there (10 s at most).
stack_wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    return 1
}

# stack_shim [WORKERS]: paynotify-cgi in FastCGI mode on a unix socket, as nobody.
stack_shim() {
    local workers=${1:-8}
    rm -f "$STACK_DIR/run/shim.sock"
    # started from a subshell: not a job of this shell, known by its pid file;
    # setpriv execs the shim itself (no wrapper process), so that pid is the
    # shim's and a SIGKILL reaches it
    (
        setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH="$PATH" PAYNOTIFY_DSN="$STACK_DSN" \
            "$STACK_ROOT/shim/paynotify-cgi" --listen "$STACK_DIR/run/shim.sock" --workers "$workers" \
            >>"$STACK_DIR/log/shim.out" 2>>"$STACK_DIR/log/shim.err" &
        echo $! >"$STACK_DIR/shim.pid"
    )
    for _ in $(seq 1 200); do [ -S "$STACK_DIR/run/shim.sock" ] && return 0; sleep 0.05; done
    echo "the shim did not start: $(cat "$STACK_DIR/log/shim.err")" >&2
    return 1
}

# stack_shim_stop [SIGNAL]: stop the FastCGI shim (SIGTERM: finish in-flight
# requests), by the pid in shim.pid (it may have been restarted by a subshell).
stack_shim_stop() {
    local sig=${1:-TERM} pid
    pid=$(cat "$STACK_DIR/shim.pid" 2>/dev/null) || return 0
    stop_pid "$pid" "$sig"
    rm -f "$STACK_DIR/shim.pid"
}

# stack_shim_named NAME WORKERS [VAR=value...] [--option...]: one more
# FastCGI shim, as nobody, on run/NAME.sock with the given environment
# (PAYNOTIFY_DSN is STACK_DSN unless given) and options; its pid in NAME.pid
# and in STACK_PIDS, its log in log/NAME.err.  For several shims behind one
# upstream, and failover tests.
stack_shim_named() {
    local name=$1 workers=$2 a envs=() opts=()
    shift 2
    for a in "$@"; do
        case $a in --*) opts+=("$a") ;; *) envs+=("$a") ;; esac
    done
    rm -f "$STACK_DIR/run/$name.sock"
    (
        setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH="$PATH" PAYNOTIFY_DSN="$STACK_DSN" "${envs[@]}" \
            "$STACK_ROOT/shim/paynotify-cgi" --listen "$STACK_DIR/run/$name.sock" --workers "$workers" "${opts[@]}" \
            >>"$STACK_DIR/log/$name.out" 2>>"$STACK_DIR/log/$name.err" &
        echo $! >"$STACK_DIR/$name.pid"
    )
    STACK_PIDS+=("$(cat "$STACK_DIR/$name.pid")")
    for _ in $(seq 1 200); do [ -S "$STACK_DIR/run/$name.sock" ] && return 0; sleep 0.05; done
    echo "the shim $name did not start: $(cat "$STACK_DIR/log/$name.err")" >&2
    return 1
}

# stack_nginx_upstream SOCKET...: nginx (FastCGI) whose upstream is every
# given shim socket, round robin; a shim that refuses connections is skipped
# (fastcgi_next_upstream error); sets STACK_URL.
stack_nginx_upstream() {
    local prefix=$STACK_DIR/nginx-upstream servers="" sock
    STACK_HTTPPORT=$(pn_free_port)
    mkdir -p "$prefix/tmp"
    for sock in "$@"; do servers="$servers server unix:$sock;"; done
    sed -e "s|@SHIM_ADDRESS@|paynotify_shims|g" \
        "$STACK_ROOT/deploy/nginx-fastcgi.conf.in" >"$prefix/location.conf"
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@PORT@|$STACK_HTTPPORT|g" -e "s|@USER@|nobody nogroup|g" \
        -e "s|@LOCATION@|$prefix/location.conf|g" \
        -e "s|^\( *\)server_tokens off;|&\n\1upstream paynotify_shims {$servers }|" \
        "$STACK_ROOT/deploy/nginx-standalone.conf.in" >"$prefix/nginx.conf"
    nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" || return 1
    stack_wait_port "$STACK_HTTPPORT" || return 1
    STACK_NGINX_PID=$(cat "$prefix/nginx.pid")
    STACK_URL=http://127.0.0.1:$STACK_HTTPPORT/notify
}

# stack_fcgiwrap: fcgiwrap (for CGI mode) on a unix socket, as nobody.
stack_fcgiwrap() {
    rm -f "$STACK_DIR/run/fcgiwrap.sock"
    env -i PATH="$PATH" PAYNOTIFY_DSN="$STACK_DSN" \
        spawn-fcgi -n -s "$STACK_DIR/run/fcgiwrap.sock" -M 0600 -U nobody -G nogroup \
        -u nobody -g nogroup -F 1 -- /usr/sbin/fcgiwrap -c 8 \
        >>"$STACK_DIR/log/fcgiwrap.out" 2>>"$STACK_DIR/log/fcgiwrap.err" &
    STACK_PIDS+=("$!")
    for _ in $(seq 1 200); do [ -S "$STACK_DIR/run/fcgiwrap.sock" ] && return 0; sleep 0.05; done
    echo "fcgiwrap did not start" >&2
    return 1
}

# stack_nginx fastcgi|cgi: nginx from the deploy/ templates; sets STACK_URL.
# The one change to the templates: nginx waits STACK_READ_TIMEOUT (50 s, within
# the 60 s paynotify-send waits in the tests)
# for the shim's reply instead of 10 s, so that a slow or busy machine (a
# CGI process per request) makes a test slower, never a 504 that fails it;
# the replies a test judges are the shim's own.
stack_nginx() {
    local mode=$1 prefix=$STACK_DIR/nginx-$1
    STACK_HTTPPORT=$(pn_free_port)
    mkdir -p "$prefix/tmp"
    if [ "$mode" = fastcgi ]; then
        sed -e "s|@SHIM_ADDRESS@|unix:$STACK_DIR/run/shim.sock|g" \
            "$STACK_ROOT/deploy/nginx-fastcgi.conf.in" >"$prefix/location.conf"
    else
        sed -e "s|@FCGIWRAP_SOCKET@|$STACK_DIR/run/fcgiwrap.sock|g" \
            -e "s|@SHIM@|$STACK_ROOT/shim/paynotify-cgi|g" \
            "$STACK_ROOT/deploy/nginx-cgi.conf.in" >"$prefix/location.conf"
    fi
    grep -q '^ *fastcgi_read_timeout 10s;$' "$prefix/location.conf" || return 1
    sed -i "s|^\( *fastcgi_read_timeout\) 10s;\$|\1 ${STACK_READ_TIMEOUT:-50}s;|" "$prefix/location.conf"
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@PORT@|$STACK_HTTPPORT|g" -e "s|@USER@|nobody nogroup|g" \
        -e "s|@LOCATION@|$prefix/location.conf|g" \
        "$STACK_ROOT/deploy/nginx-standalone.conf.in" >"$prefix/nginx.conf"
    nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" || return 1
    stack_wait_port "$STACK_HTTPPORT" || return 1
    STACK_NGINX_PID=$(cat "$prefix/nginx.pid")
    STACK_URL=http://127.0.0.1:$STACK_HTTPPORT/notify
}

# stack_nginx_stop: stop nginx (by its pid file's pid).
stack_nginx_stop() {
    [ -n "$STACK_NGINX_PID" ] || return 0
    stop_pid "$STACK_NGINX_PID" QUIT
    STACK_NGINX_PID=""
}

# stack_http fastcgi|cgi: the shim (or fcgiwrap) and nginx in front of it.
stack_http() {
    if [ "$1" = fastcgi ]; then stack_shim "${2:-8}"; else stack_fcgiwrap; fi
    stack_nginx "$1"
}

# stack_send GATEWAY [paynotify-send args...]: paynotify-send to this stack.
stack_send() {
    local gw=$1
    shift
    "$STACK_ROOT/shim/paynotify-send" --gateway "$gw" --keys "$STACK_ROOT/test/vectors/keys" \
        --url "$STACK_URL/$gw" "$@"
}

# stack_senders_wait TENTHS PID...: wait for each paynotify-send (at most
# TENTHS tenths of a second each), then stop any still running (by pid).
stack_senders_wait() {
    local max=$1 p
    shift
    for p in "$@"; do
        for _ in $(seq 1 "$max"); do pn_alive "$p" || break; sleep 0.1; done
        stop_pid "$p"
    done
}

# stack_send_summary FILE: one line of a paynotify-send --json report.
stack_send_summary() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["deliveries"], "deliveries", d["status"], d["outcome"], d["rps"], "req/s")' "$1" 2>/dev/null
}

# stack_ledger_audit QUERY LEDGER [ledger_audit.py options...]: the
# gateway's ledger (paynotify-send --ledger) against the database that
# survived, one check per line of test/e2e/ledger_audit.py ("# ..." lines,
# figures, printed).  QUERY is a function that runs one statement there
# (QUERY "SQL", psql -tA -c): failover tests pass the new primary's.
stack_ledger_audit() {
    local q=$1 ledger=$2 desc want got
    shift 2
    "$q" "COPY (SELECT channel, notify_id, status FROM payment_notify_log) TO STDOUT" >"$STACK_DIR/log.tsv"
    "$q" "COPY (SELECT channel, notify_id, order_no FROM payment_record) TO STDOUT" >"$STACK_DIR/payments.tsv"
    while IFS=$'\t' read -r desc want got; do
        case $desc in '#'*) echo "$desc" ;; *) check "$desc" "$want" "$got" ;; esac
    done < <(python3 "$STACK_ROOT/test/e2e/ledger_audit.py" "$ledger" "$STACK_DIR" "$@")
}

# stack_relay_verify QUERY RECEIVED: the relay's checks against the
# database QUERY runs on (as stack_ledger_audit): the outbox empty and every
# delivery done (60 s at most), one delivery per payment, and every event
# received and verified by test/e2e/relay_receiver.py (its log RECEIVED).
stack_relay_verify() {
    local q=$1 received=$2 undelivered=-1 t0
    t0=$(date +%s%N)
    for _ in $(seq 1 600); do
        undelivered=$("$q" "SELECT (SELECT count(*) FROM paynotify_outbox) + (SELECT count(*) FROM paynotify_delivery WHERE delivered_at IS NULL)" 2>/dev/null || echo -1)
        [ "$undelivered" = 0 ] && break
        sleep 0.1
    done
    echo "# relay: the outbox was checked empty after $(( ($(date +%s%N) - t0) / 1000000 )) ms of waiting"
    check "relay: outbox empty and every delivery done on the new primary" 0 "$undelivered"
    check "relay: one delivery per payment" "$("$q" "SELECT count(*) FROM payment_record")" \
        "$("$q" "SELECT count(*) FROM paynotify_delivery WHERE event = 'paid'")"
    python3 - "$received" "$("$q" "SELECT string_agg(webhook_id, ' ') FROM paynotify_delivery")" >"$STACK_DIR/relay.check" <<'PY'
import json, sys
got = {r["id"] for r in map(json.loads, open(sys.argv[1])) if r["verdict"] == "ok" and r["verified"]}
want = set(sys.argv[2].split())
print(len(want - got))
PY
    check "relay: every event received and verified by the receiver" 0 "$(cat "$STACK_DIR/relay.check")"
}

# stack_stop: everything started, in reverse order, by pid; then the directory.
# Safe under set -e: nothing here may end the cleanup early.
stack_stop() {
    local i pid child
    stack_nginx_stop || true
    [ -n "${STACK_DIR:-}" ] && { stack_shim_stop || true; }
    for ((i = ${#STACK_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${STACK_PIDS[i]}
        # fcgiwrap's workers are its children: they are stopped with it
        for child in $(ps --ppid "$pid" -o pid= 2>/dev/null); do
            for grandchild in $(ps --ppid "$child" -o pid= 2>/dev/null); do
                kill -TERM "$grandchild" 2>/dev/null || true
            done
            kill -TERM "$child" 2>/dev/null || true
        done
        kill -TERM "$pid" 2>/dev/null || true
    done
    for ((i = ${#STACK_PIDS[@]} - 1; i >= 0; i--)); do
        wait "${STACK_PIDS[i]}" 2>/dev/null || true
    done
    STACK_PIDS=()
    [ -n "${STACK_DIR:-}" ] && { pn_cluster_stop "$STACK_DIR/pg" || true; }
    if [ -n "${STACK_DIR:-}" ] && [ -z "${KEEP_STACK:-}" ]; then
        rm -rf "$STACK_DIR"
    fi
    return 0
}
