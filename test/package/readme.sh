#!/usr/bin/env bash
# test/package/readme.sh BUILD_DIR: the README's section "On a real machine",
# run step by step as it is written there.
#
# The commands are read from README.md itself (the fenced blocks of the
# section, and the relay's one round in the prose of step 8), so a changed
# README is a changed test.  They run as root, with the packages built in
# BUILD_DIR (../*.deb beside it, as step 1 leaves them; test/package/run.sh
# builds and installs them first, with the same dpkg-buildpackage command),
# into the system's PostgreSQL 15.  What the machine itself has is never
# touched; the commands are run with these substitutions only, each printed:
#
#   15 main, /etc/postgresql/15/main   a cluster of the test's own, made with
#                                      pg_createcluster (Debian's stock
#                                      pg_hba.conf), data in the temporary
#                                      directory, on a free port (PGPORT is
#                                      exported: psql, the shim, the relay)
#   /etc/paynotify/                    a copy of the packaged /etc/paynotify
#   /run/paynotify-cgi.*, /var/log/paynotify-cgi.log   in the temporary dir
#   /etc/nginx/sites-available/default a copy of Debian's stock default site
#                                      on a free loopback port, served by an
#                                      nginx of the test's own; `systemctl
#                                      reload nginx` starts it
#   http://127.0.0.1/, :8081           those two free ports
#   systemctl enable --now ...         skipped: the README's path without
#                                      systemd (spawn-fcgi, --once) is run
#   dpkg-buildpackage                  skipped: run.sh built the packages
#
# your_apiv3.key and your_platform_cert.pem (step 5) are a random key and
# the test platform certificate 2.  After the section's steps: the shim and
# nginx see what the README says (nginx's access log, outside the database),
# the database has one payment and one refund, the receiver verified every
# event's signature; then three failures of the troubleshooting table, each
# as its row says.  Everything is stopped by pid and removed at the end.
# Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
TOP=$(pwd)
BUILD=${1:?usage: test/package/readme.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PG_CONFIG PGHOST PGDATABASE PGUSER
export PN_PGBIN=/usr/lib/postgresql/15/bin
# shellcheck source=test/lib.sh
. test/lib.sh
pass=0
fail=0
check_status() { check "$1" 0 "$2"; }

T=$(mktemp -d /tmp/pn-readme.XXXXXX)
chmod 755 "$T"
CL=pnreadme$$
PORT=$(pn_free_port)
NPORT=$(pn_free_port)
RPORT=$(pn_free_port)
export PGPORT=$PORT
mkdir -p "$T/etc" "$T/run" "$T/log" "$T/nginx/sites-available" "$T/nginx/snippets" "$T/work" "$T/blocks"

stop_pid() {	# stop_pid FILE [SIGNAL]: the process whose pid FILE's first line is
    local pid
    [ -s "$1" ] || return 0
    pid=$(head -1 "$1")
    kill -"${2:-TERM}" "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
}
cleanup() {
    stop_pid "$T/receiver.pid"
    stop_pid "$T/nginx/nginx.pid" QUIT
    stop_pid "$T/run/paynotify-cgi.pid"
    stop_pid "$T/pgdata/postmaster.pid" INT
    pg_dropcluster 15 "$CL" >/dev/null 2>&1
    rm -rf "/etc/postgresql/15/$CL"
    remove_tmp "$T"
}
trap cleanup EXIT

# ---- the section's commands, from the README ---------------------------------
python3 - "$TOP/README.md" "$T/blocks" <<'PY' || { echo "README: section not found"; exit 1; }
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r"^## On a real machine\n(.*?)^## ", text, re.S | re.M)
if not m:
    sys.exit(1)
sec, step, n = m.group(1), 0, 0
for part in re.split(r"(^```\w*\n.*?^```\n)", sec, flags=re.S | re.M):
    fence = re.match(r"```(\w*)\n(.*)```\n", part, re.S)
    if not fence:
        for line in part.split("\n\n"):
            s = re.search(r"(?m)^\*\*(\d+)\. ", line)
            if s:
                step = int(s.group(1))
            for cmd in re.findall(r"`([^`]*paynotify-relay --once)`", line):
                n += 1
                open(f"{sys.argv[2]}/{step:02d}-{n:02d}.prose.sh", "w").write(cmd + "\n")
        continue
    n += 1
    open(f"{sys.argv[2]}/{step:02d}-{n:02d}.{fence.group(1)}", "w").write(fence.group(2))
PY
ls "$T/blocks" | sed 's/^/README block: /'
# the substitutions, in one place (the list above)
subst() {
    sed -e "s|/etc/postgresql/15/main/|/etc/postgresql/15/$CL/|g" \
        -e "s|\b15 main\b|15 $CL|g" \
        -e "s|/etc/paynotify/|$T/etc/paynotify/|g" \
        -e "s|/run/paynotify-cgi\.|$T/run/paynotify-cgi.|g" \
        -e "s|/var/log/paynotify-cgi\.log|$T/log/paynotify-cgi.log|g" \
        -e "s|/etc/nginx/sites-available/default|$T/nginx/sites-available/default|g" \
        -e "s|^nginx -t && systemctl reload nginx$|$NGINX -t -q \&\& $NGINX|" \
        -e "s|^systemctl enable --now \(.*\)$|: skipped, no systemd: systemctl enable --now \1|" \
        -e "s|^dpkg-buildpackage .*|: skipped, built by test/package/run.sh: \&|" \
        -e "s|http://127\.0\.0\.1/|http://127.0.0.1:$NPORT/|g" \
        -e "s|http://127\.0\.0\.1:8081/|http://127.0.0.1:$RPORT/|g"
}
NGINX="nginx -p $T/nginx/ -c $T/nginx/nginx.conf"

# run_block FILE DIR: one block, as root, in DIR, stopping at its first
# failing command; its output in FILE.log
run_block() {
    local f=$1 dir=$2 rc
    subst <"$f" >"$f.run"
    if sed "s|$T/||g" "$f.run" | grep -E '/etc/paynotify/|15/main|/run/paynotify-cgi|/var/log/paynotify|/etc/nginx/sites-available|:8081/|127\.0\.0\.1/' >/dev/null; then
        echo "$f: a path the substitutions missed:"; cat "$f.run"; return 1
    fi
    echo "---- $(basename "$f")"; sed 's/^/    /' "$f.run"
    case "$f" in
    *.sql) (cd "$dir" && runuser -u postgres -- psql -X -v ON_ERROR_STOP=1 -d shop -f "$f.run") >"$f.log" 2>&1 ;;
    *)     (cd "$dir" && bash -e "$f.run") >"$f.log" 2>&1 ;;
    esac
    rc=$?
    sed 's/^/    | /' "$f.log" | head -60
    # psql reads a heredoc to its end: an error does not stop it
    if [ $rc -eq 0 ] && grep -qE '^(ERROR|FATAL|psql:.*ERROR)' "$f.log"; then
        echo "    (an error above)"; rc=1
    fi
    return $rc
}

# ---- what the steps take as given: a cluster, nginx's files, the keys ---------
pg_createcluster 15 "$CL" -d "$T/pgdata" -p "$PORT" --start-conf manual >"$T/createcluster.log" 2>&1
check_status "pg_createcluster 15 $CL (stock pg_hba.conf, port $PORT)" $?
grep -qE '^local +all +all +peer' "/etc/postgresql/15/$CL/pg_hba.conf"
check_status "the cluster's pg_hba.conf is Debian's stock one (local all all peer)" $?
cp -a /etc/paynotify "$T/etc/paynotify"
sed "s|/run/paynotify-cgi\.|$T/run/paynotify-cgi.|g" /etc/nginx/snippets/paynotify-fastcgi.conf \
    >"$T/nginx/snippets/paynotify-fastcgi.conf"
if [ -f /etc/nginx/sites-available/default ]; then
    cp /etc/nginx/sites-available/default "$T/nginx/sites-available/default"
else
    printf 'server {\n\tlisten 80 default_server;\n\troot /var/www/html;\n\tserver_name _;\n}\n' \
        >"$T/nginx/sites-available/default"
fi
sed -i -e "s|^\(\s*\)listen 80 default_server;|\1listen 127.0.0.1:$NPORT default_server;|" \
       -e '/listen \[::\]:80/d' "$T/nginx/sites-available/default"
cat >"$T/nginx/nginx.conf" <<EOF
user www-data;
pid $T/nginx/nginx.pid;
error_log $T/nginx/error.log;
events {}
http {
    access_log $T/nginx/access.log;
    client_body_temp_path $T/nginx/body;
    fastcgi_temp_path $T/nginx/fastcgi;
    proxy_temp_path $T/nginx/proxy;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    include sites-available/default;
}
EOF
ln -s "$TOP/test" "$T/work/test"
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/work/your_apiv3.key"
cp test/vectors/keys/wechat_platform_2.cert.pem "$T/work/your_platform_cert.pem"

# ---- steps 1 to 8, as written -------------------------------------------------
for f in "$T"/blocks/*; do
    case "$f" in *.run|*.log) continue ;; esac
    b=$(basename "$f")
    dir=$T/work
    [ "${b%%-*}" = 01 ] && dir=$BUILD
    run_block "$f" "$dir"
    check_status "README step ${b%%-*}, block $b: every command succeeds" $?
    # the receiver of step 8 listens before the relay's round
    if grep -q 'paynotify_add_endpoint_file' "$f" && [ ! -s "$T/receiver.pid" ]; then
        python3 - "$RPORT" "$T/etc/paynotify/secrets/shop/erp.whsec" "$T/received.jsonl" \
            >"$T/receiver.log" 2>&1 <<'PY' &
import base64, hashlib, hmac, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port, secret, out = int(sys.argv[1]), open(sys.argv[2]).read().strip(), sys.argv[3]
key = base64.b64decode(secret.split("_", 1)[1])
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        msg = b".".join([self.headers["webhook-id"].encode(), self.headers["webhook-timestamp"].encode(), body])
        want = base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()
        ok = any(s.split(",", 1)[1] == want for s in self.headers["webhook-signature"].split())
        with open(out, "a") as f:
            f.write(json.dumps({"verified": ok, "event": json.loads(body)}) + "\n")
        self.send_response(200 if ok else 400)
        self.end_headers()
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
        echo $! >"$T/receiver.pid"
        # until it listens (not a fixed wait: the relay's round comes next)
        for _ in $(seq 1 200); do
            (exec 3<>"/dev/tcp/127.0.0.1/$RPORT") 2>/dev/null && break
            sleep 0.05
        done
    fi
done

# ---- what the steps did, seen from outside the database, then inside ---------
sql() { runuser -u postgres -- psql -X -At -d shop -c "$1" 2>&1; }
send7=$(cat "$T"/blocks/07-*.sh)
storm=$(sed -n 's/.*--mode storm -n \([0-9]*\).*/\1/p' <<<"$send7")
echo "nginx's access log (method, path, status):"
awk '{print $6, $7, $9}' "$T/nginx/access.log" | sort | uniq -c
ok200=$(awk '$7 == "/notify/trial" && $9 == 200' "$T/nginx/access.log" | wc -l)
no401=$(awk '$7 == "/notify/trial" && $9 == 401' "$T/nginx/access.log" | wc -l)
check "nginx: the payment, ${storm:-?} re-deliveries and the refund answered 200" "$((storm + 2))" "$ok200"
check "nginx: the tampered notification answered 401" 1 "$no401"
check "the order PN00000001: refunded (4)" 4 "$(sql "SELECT status FROM sales.orders WHERE order_no = 'PN00000001'")"
check "two notifications applied (log rows succeeded), nothing else written" "succeeded succeeded" \
    "$(sql "SELECT string_agg(status, ' ') FROM payments.payment_notify_log WHERE channel = 'trial'")"
check "one payment and one refund of 8888 recorded" "8888 8888" \
    "$(sql "SELECT (SELECT string_agg(amount::text, ' ') FROM payments.payment_record WHERE order_no = 'PN00000001')
                || ' ' || (SELECT string_agg(amount::text, ' ') FROM payments.paynotify_refund WHERE order_no = 'PN00000001')")"
check "the payment's log row counts every delivery the gateway made of it" "$((storm + 1))" \
    "$(sql "SELECT max(delivery_count) FROM payments.payment_notify_log WHERE channel = 'trial'")"
check "no anomaly" 0 "$(sql "SELECT count(*) FROM payments.paynotify_anomaly")"
grep -q 'refused: channel trial, outcome rejected, HTTP 401' "$T/log/paynotify-cgi.log"
check_status "the shim's log: one line for the refused (tampered) request" $?
grep -q 'PN00000001' "$T"/blocks/07-*.sh.log
check_status "paynotify_trace_order tells the order's story" $?
echo "relay: $(cat "$T"/blocks/08-*.prose.sh.log 2>/dev/null)"
ev=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(all(r["verified"] for r in rows), " ".join(sorted(r["event"]["event"] for r in rows)))' \
    "$T/received.jsonl" 2>&1)
echo "receiver: $ev"
case "$ev" in
"True "*paid*refunded*) check_status "the receiver got the paid and refunded events, every signature verified" 0 ;;
*) check_status "the receiver got the paid and refunded events, every signature verified" 1 ;;
esac

# ---- the troubleshooting table, three rows as they say --------------------------
row() { grep -qF -- "$1" README.md; }
send_one() {	# order PN0000000<I>'s payment through nginx; prints the HTTP status
    sql "INSERT INTO sales.orders VALUES ('PN0000000$1', 0, 100) ON CONFLICT DO NOTHING" >/dev/null
    paynotify-send --gateway wxpay --keys test/vectors/keys --mchid 1900000999 --start "$1" --amount 100 \
        --url "http://127.0.0.1:$NPORT/notify/trial" >"$T/send-$1.log" 2>&1
    awk '$7 == "/notify/trial"' "$T/nginx/access.log" | tail -1 | awk '{print $9}'
}
sql "SELECT payments.paynotify_revoke('paynotify_shim', 'handler')" >/dev/null
code=$(send_one 2)
check "without the handler capacity: 503" 503 "$code"
grep -q 'permission denied for \(schema payments\|function paynotify_handle\)' "$T/log/paynotify-cgi.log" &&
    row 'shim log: `permission denied for schema payments` or `for function paynotify_handle`'
check_status "... the shim's log says why, as the troubleshooting table has it" $?
grep -qF "needs the handler capacity in database \"shop\": there, as the extension's owner, SELECT payments.paynotify_grant('\"paynotify_shim\"'::regrole, 'handler')" \
    "$T/log/paynotify-cgi.log"
check_status "... and what to do" $?
sql "SELECT payments.paynotify_grant('paynotify_shim', 'handler')" >/dev/null
check "granted again: the gateway's next delivery 200" 200 "$(send_one 2)"

# a role the peer map does not give the system user paynotify: one CGI
# request through the packaged shim, as that user
printf '{}' | runuser -u paynotify -- env -i PATH="$PATH" PGPORT="$PGPORT" GATEWAY_INTERFACE=CGI/1.1 \
    REQUEST_METHOD=POST PATH_INFO=/notify/trial CONTENT_LENGTH=2 CONTENT_TYPE=application/json \
    PAYNOTIFY_DSN="host=/run/postgresql dbname=shop user=shop_ops" PAYNOTIFY_FUNCTION=payments.paynotify_handle \
    /usr/sbin/paynotify-cgi >"$T/peer.out" 2>"$T/peer.err"
sed 's/^/    | /' "$T/peer.err"
grep -q '^Status: 503' "$T/peer.out" && grep -q 'Peer authentication failed for user "shop_ops"' "$T/peer.err" &&
    grep -q 'pg_hba.conf must let this role in' "$T/peer.err" &&
    row '503; shim log: `Peer authentication failed for user "paynotify_shim"`'
check_status "a role the peer map does not cover: 503, the shim's log says why and what to do, in the table" $?

relay_once() {
    (set -a; . "$T/etc/paynotify/paynotify-relay.env"; set +a
     for kv in "$@"; do export "${kv?}"; done
     runuser -u paynotify-relay -- /usr/sbin/paynotify-relay --once) 2>&1
}
out=$(relay_once PAYNOTIFY_RELAY_ALLOW_PRIVATE=0)
echo "relay --once, PAYNOTIFY_RELAY_ALLOW_PRIVATE=0: $out"
grep -q 'address not allowed' <<<"$out" && row '`address not allowed`: a loopback or private address needs `PAYNOTIFY_RELAY_ALLOW_PRIVATE=1`'
check_status "relay to a loopback receiver without ALLOW_PRIVATE: the failure's reason printed, in the table" $?
out=$(relay_once PAYNOTIFY_RELAY_SCHEMA=public)
echo "relay --once, PAYNOTIFY_RELAY_SCHEMA=public: $out"
grep -q 'function public.paynotify_relay_fanout(integer) does not exist' <<<"$out" &&
    row 'relay: `function public.paynotify_relay_fanout(integer) does not exist`'
check_status "relay with the wrong schema: the error printed, in the table" $?
summary
