#!/usr/bin/env bash
# High availability with the manager people run: Patroni and etcd.
#
#   test/e2e/patroni.sh                     synchronous mode (in the suite)
#   PN_PATRONI_ASYNC=1 test/e2e/patroni.sh  synchronous_mode: false, the
#                                           same kill: the acknowledgements
#                                           lost are a figure, not a verdict
#
# etcd and two Patroni members (pg1, pg2), each configured from
# deploy/patroni/patroni.yml.in (the file the README shows; only the ports
# and paths are filled in here), all on loopback in a temporary directory,
# with the PostgreSQL binaries of PN_PGBIN.  The passwords (superuser,
# replication, REST API, the shim's and the relay's roles) are generated for
# this run and given to Patroni in its environment from a 0600 file, never in
# its configuration.  Two FastCGI shims behind nginx and paynotify-relay
# connect with a multi-host DSN (target_session_attrs=read-write, the
# passwords in a passfile); paynotify-send --ledger re-delivers WeChat Pay
# notifications until acknowledged.
#   1. failover: mid-traffic (batches one after another until one has
#      started after the new leader answers /primary) the leader's machine
#      dies (Patroni, its
#      postmaster and every child SIGKILLed together); Patroni promotes the
#      synchronous standby once the leader key expires (ttl 20 s); the old
#      leader's Patroni is started again and it rejoins as a standby
#      (pg_rewind where its WAL went further).
#   2. a planned `patronictl switchover` under traffic: batches one after
#      another until one has started after the new leader answers /primary.
# After each, from the sender's ledger, on the leader: every acknowledged
# notification applied exactly once (lost 0, doubled 0), every notification
# acknowledged in the end, every event delivered by the relay; the time
# without acknowledgements is printed.  Also: etcd, the REST API and
# PostgreSQL listen on 127.0.0.1 only; the REST API refuses a switchover
# without its password; etcd (auth enabled, as its own user) refuses a
# write or read without credentials and Patroni's user outside its scope,
# and synchronous mode stays on; pg_hba rejects postgres, replicator and
# rewind from a client's address (127.0.0.2) and asks a member's (127.0.0.1)
# for a password; pg_rewind's role has its grants and no superuser; no
# generated password in any file or log of the run
# (but the secrets file and the passfiles), in etcd or in what the REST API
# answers without a password.
# Everything started here is stopped by pid.  80-115 s on the shared 2-core
# machine (a third of it the failover: the leader key's ttl, 20 s, and the rejoin).
# Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."

. test/lib.sh
. test/e2e/stack.sh
pass=0 fail=0
ASYNC=${PN_PATRONI_ASYNC:-0}
for p in patroni patronictl etcd; do
    command -v "$p" >/dev/null || { echo "$p is not installed (scripts/deps.sh)"; exit 1; }
done
pn_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }

N=${PATRONI_N:-400}             # the kill (and patronictl) once N/3 are acknowledged;
NB=$((N / 2))                   # failover and switchover: batches of NB, 4 at a time,
                                # one after another until one has started
                                # after the new leader answers /primary
NBMAX=${PATRONI_SWITCH_BATCHES:-60} # (at most: the orders created for them)
stack_init patroni
chmod 755 "$STACK_DIR"
D=$STACK_DIR
# re-delivered every 0.25, then 0.5, then 1 s, for 39 s (64 intervals,
# paynotify-send's most): longer than a failover (the leader key's ttl, 20 s)
SCHEDULE=$(python3 -c 'print(",".join(["0.25"] * 4 + ["0.5"] * 44 + ["1"] * 16))')

# ---- the generated secrets ----------------------------------------------------
pw() { openssl rand -hex 24; }
PW_SUPER=$(pw) PW_REPL=$(pw) PW_REST=$(pw) PW_SHIM=$(pw) PW_RELAY=$(pw)
PW_REWIND=$(pw) PW_ETCD=$(pw) PW_ETCD_ROOT=$(pw)
install -m 600 -o "$PN_RUNUSER" /dev/null "$D/patroni.env"
printf '%s\n' "PATRONI_SUPERUSER_USERNAME=postgres" "PATRONI_SUPERUSER_PASSWORD=$PW_SUPER" \
    "PATRONI_REPLICATION_USERNAME=replicator" "PATRONI_REPLICATION_PASSWORD=$PW_REPL" \
    "PATRONI_REWIND_USERNAME=rewind" "PATRONI_REWIND_PASSWORD=$PW_REWIND" \
    "PATRONI_RESTAPI_USERNAME=patroni" "PATRONI_RESTAPI_PASSWORD=$PW_REST" \
    "PATRONI_ETCD3_USERNAME=patroni" "PATRONI_ETCD3_PASSWORD=$PW_ETCD" >"$D/patroni.env"
# the shims and the relay run as nobody; their passwords in a passfile
install -m 600 -o nobody /dev/null "$D/client.pgpass"
printf '%s\n' "127.0.0.1:*:postgres:notify_shim:$PW_SHIM" "127.0.0.1:*:postgres:relay:$PW_RELAY" >"$D/client.pgpass"

# ---- etcd ---------------------------------------------------------------------
# as its own user (Debian's etcd-server creates it), not as nobody: the
# shims' and the relay's uid must not own the store's process or files
ETCD_USER=${PN_ETCD_USER:-etcd}
id "$ETCD_USER" >/dev/null 2>&1 || { echo "no user $ETCD_USER (etcd-server creates it; or PN_ETCD_USER)"; exit 1; }
EC=$(pn_free_port) EP=$(pn_free_port)
# Patroni 3.0.2 takes PATRONI_ETCD3_USERNAME / _PASSWORD only along with
# another PATRONI_ETCD3_ setting: the hosts, the same as in the file
echo "PATRONI_ETCD3_HOSTS=127.0.0.1:$EC" >>"$D/patroni.env"
install -d -m 700 -o "$ETCD_USER" "$D/etcd"
setpriv --reuid="$ETCD_USER" --regid="$(id -g "$ETCD_USER")" --clear-groups env -i PATH="$PATH" ETCD_UNSUPPORTED_ARCH= \
    etcd --name e1 --data-dir "$D/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$EC" --advertise-client-urls "http://127.0.0.1:$EC" \
    --listen-peer-urls "http://127.0.0.1:$EP" --initial-advertise-peer-urls "http://127.0.0.1:$EP" \
    --initial-cluster "e1=http://127.0.0.1:$EP" --listen-metrics-urls "http://127.0.0.1:$(pn_free_port)" \
    >"$D/log/etcd.log" 2>&1 &
ETCD_PID=$!; STACK_PIDS+=("$ETCD_PID")
stack_wait_port "$EC" || { cat "$D/log/etcd.log"; exit 1; }
# auth: a root user, and Patroni's user with a role that reads and writes
# the scope's prefix only.  The passwords on etcdctl's standard input
# (asked twice) or in its environment (ETCDCTL_USER), never on a command line
ectl() { env -i PATH="$PATH" ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$EC" "$@"; }
ectl_as() {	# ectl_as USER ARGS...: etcdctl as a local user, no etcd credentials
    local u=$1
    shift
    setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups env -i PATH="$PATH" ETCDCTL_API=3 \
        etcdctl --endpoints="127.0.0.1:$EC" "$@"
}
ectl_root() { env -i PATH="$PATH" ETCDCTL_API=3 ETCDCTL_USER="root:$PW_ETCD_ROOT" etcdctl --endpoints="127.0.0.1:$EC" "$@"; }
{
    printf '%s\n%s\n' "$PW_ETCD_ROOT" "$PW_ETCD_ROOT" | ectl user add root &&
    ectl user grant-role root root &&
    printf '%s\n%s\n' "$PW_ETCD" "$PW_ETCD" | ectl user add patroni &&
    ectl role add patroni &&
    ectl role grant-permission patroni --prefix=true readwrite /service/paynotify-test/ &&
    ectl user grant-role patroni patroni &&
    ectl auth enable
} >"$D/log/etcd-auth.log" 2>&1 || { echo "etcd auth setup failed"; cat "$D/log/etcd-auth.log"; exit 1; }

# ---- the Patroni members ------------------------------------------------------
declare -A PGPORT RESTPORT PID
member_conf() {	# member_conf NAME: DIR/NAME/patroni.yml from the deploy/ template
    local m=$1
    install -d -m 700 -o "$PN_RUNUSER" "$D/$m" "$D/$m/secrets"
    sed -e "s|@SCOPE@|paynotify-test|" -e "s|@NAME@|$m|" \
        -e "s|@RESTAPI_LISTEN@|127.0.0.1:${RESTPORT[$m]}|" -e "s|@ETCD_HOSTS@|127.0.0.1:$EC|" \
        -e "s|@PG_LISTEN@|127.0.0.1:${PGPORT[$m]}|" -e "s|@PG_ADDRESS@|127.0.0.1:${PGPORT[$m]}|" \
        -e "s|@DATA_DIR@|$D/$m/data|" -e "s|@BIN_DIR@|$PN_PGBIN|" -e "s|@SOCKET_DIR@|$D/$m|" \
        -e "s|@PGPASS@|$D/$m/pgpass|" -e "s|@SECRETS_DIR@|$D/$m/secrets|" \
        -e "s|@MEMBER_NET@|127.0.0.1/32|" -e "s|@CLIENT_NET@|127.0.0.0/8|" \
        -e "s|@SYNCHRONOUS_MODE@|$([ "$ASYNC" = 1 ] && echo false || echo true)|" \
        -e "s|@WATCHDOG_MODE@|off|" \
        deploy/patroni/patroni.yml.in >"$D/$m/patroni.yml"
    chown "$PN_RUNUSER" "$D/$m/patroni.yml"
    # every field filled in
    ! grep -q '@[A-Z_]*@' "$D/$m/patroni.yml"
}
member_start() {	# member_start NAME: Patroni as the cluster's owner; its pid in PID[NAME]
    local m=$1
    # setpriv execs Patroni itself: the pid is Patroni's; started from a
    # subshell, it is no job of this shell (its SIGKILL is not reported)
    (
      (
        set -a; . "$D/patroni.env"; set +a
        exec setpriv --reuid="$PN_RUNUSER" --regid="$(id -g "$PN_RUNUSER")" --init-groups \
            env -i PATH="$PATH" HOME="$D/$m" LC_ALL=C.UTF-8 TZ=UTC \
            PATRONI_SUPERUSER_USERNAME="$PATRONI_SUPERUSER_USERNAME" PATRONI_SUPERUSER_PASSWORD="$PATRONI_SUPERUSER_PASSWORD" \
            PATRONI_REPLICATION_USERNAME="$PATRONI_REPLICATION_USERNAME" PATRONI_REPLICATION_PASSWORD="$PATRONI_REPLICATION_PASSWORD" \
            PATRONI_REWIND_USERNAME="$PATRONI_REWIND_USERNAME" PATRONI_REWIND_PASSWORD="$PATRONI_REWIND_PASSWORD" \
            PATRONI_RESTAPI_USERNAME="$PATRONI_RESTAPI_USERNAME" PATRONI_RESTAPI_PASSWORD="$PATRONI_RESTAPI_PASSWORD" \
            PATRONI_ETCD3_HOSTS="$PATRONI_ETCD3_HOSTS" \
            PATRONI_ETCD3_USERNAME="$PATRONI_ETCD3_USERNAME" PATRONI_ETCD3_PASSWORD="$PATRONI_ETCD3_PASSWORD" \
            patroni "$D/$m/patroni.yml"
      ) >>"$D/log/patroni-$m.log" 2>&1 &
      echo $! >"$D/$m/patroni.pid"
    )
    PID[$m]=$(cat "$D/$m/patroni.pid")
    STACK_PIDS+=("${PID[$m]}")
}
rest() {	# rest NAME PATH: the HTTP status of Patroni's REST API (000: no answer)
    curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:${RESTPORT[$1]}$2"
}
wait_rest() {	# wait_rest NAME PATH SECONDS: until PATH answers 200; prints the seconds waited
    local t0 i
    t0=$(date +%s.%N)
    for ((i = 0; i < $3 * 10; i++)); do
        [ "$(rest "$1" "$2")" = 200 ] && { python3 -c "print(round($(date +%s.%N) - $t0, 2))"; return 0; }
        sleep 0.1
    done
    echo "never"
    return 1
}
q() {	# q NAME SQL: one statement as postgres on that member (peer, its socket)
    pn_as_user "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$D/$1" -p "${PGPORT[$1]}" -U postgres -tA -c "$2"
}
# the watchdog is off here: this host has no /dev/watchdog, and the test
# simulates a machine's death by SIGKILLing its Patroni, which an armed
# watchdog would answer by resetting the host the test runs on.  A
# deployment sets mode: required (docs/DEPLOYMENT.md).
for m in pg1 pg2; do
    PGPORT[$m]=$(pn_free_port) RESTPORT[$m]=$(pn_free_port)
    member_conf "$m" || { echo "the template left a field unfilled"; exit 1; }
done
# stopped by pid: Patroni (a fast shutdown of its PostgreSQL with it), the
# standby first (else it would take over), then any postmaster left behind
# by a member killed and never restarted
stop_members() {
    local m first=pg2
    [ "$(rest pg2 /primary)" = 200 ] && first=pg1
    for m in "$first" "$(other "$first")"; do stop_pid "${PID[$m]:-}" TERM 30; done
    for m in pg1 pg2; do pn_cluster_stop "$D/$m"; done
    stack_stop
}
trap stop_members EXIT

# the README shows this file: every setting its excerpt names is in pg1's
# (the template filled in) with the same value (a path there is a field)
[ "$ASYNC" = 1 ] ||
check "README's Patroni excerpt matches deploy/patroni/patroni.yml.in" "" "$(python3 - "$D/pg1/patroni.yml" <<'PY'
import sys
import re
readme = open("README.md").read()
sec = readme[readme.index("## Two machines: Patroni and etcd"):]
block = re.search(r"```yaml\n(.*?)```", sec, re.S).group(1)
tmpl = {}
for l in open(sys.argv[1]):
    l = l.split("#")[0].strip()
    if ":" in l and not l.startswith("-"):
        k, v = l.split(":", 1)
        tmpl.setdefault(k.strip(), set()).add(v.strip())
bad = []
for l in block.splitlines():
    l = l.split("#")[0].strip()
    if not l:
        continue
    k, v = (x.strip() for x in l.split(":", 1))
    if k not in tmpl or (v and not v.startswith("/") and v not in tmpl[k]):
        bad.append(l)
print(" | ".join(bad))
PY
)"
mode=sync; [ "$ASYNC" = 1 ] && mode=async
member_start pg1
waited=$(wait_rest pg1 /primary 60)
check "pg1 bootstraps the cluster and leads it" 200 "$(rest pg1 /primary)"
echo "# [${SECONDS} s] pg1 led after $waited s"
member_start pg2
if [ "$ASYNC" = 1 ]; then want=/async; else want=/sync; fi
waited=$(wait_rest pg2 "$want" 90)
check "pg2 is a streaming $mode standby" "200|streaming" \
    "$(rest pg2 "$want")|$(q pg1 "SELECT state FROM pg_stat_replication WHERE application_name = 'pg2'")"
echo "# [${SECONDS} s] pg2 ($mode standby) after $waited s"
check "paynotify's setting from the template reaches PostgreSQL" "$D/pg1/secrets" \
    "$(q pg1 "SELECT current_setting('paynotify.secrets_directory', true)")"
[ "$ASYNC" = 1 ] || check "Patroni names pg2 in synchronous_standby_names" yes \
    "$(q pg1 "SHOW synchronous_standby_names" | grep -q pg2 && echo yes || echo "no: $(q pg1 "SHOW synchronous_standby_names")")"

# attack: loopback only; the REST API's unsafe endpoints want the password
listening=$(ss -ltnpH 2>/dev/null | grep -E "pid=($ETCD_PID|${PID[pg1]}|${PID[pg2]}|$(pn_cluster_pid "$D/pg1")|$(pn_cluster_pid "$D/pg2"))," |
    awk '{ print $4 }' | sort -u)
check "etcd, Patroni's REST API and PostgreSQL listen on 127.0.0.1 only" "0|yes" \
    "$(echo "$listening" | grep -vc '^127\.0\.0\.1:')|$([ "$(echo "$listening" | wc -l)" -ge 6 ] && echo yes || echo "no: $listening")"
check "the REST API refuses a switchover without the password (401)" 401 \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"leader": "pg1", "candidate": "pg2"}' "http://127.0.0.1:${RESTPORT[pg1]}/switchover")"
check "... and with a wrong one (401)" 401 \
    "$(curl -s -o /dev/null -w '%{http_code}' -u patroni:wrong -X POST -d '{"leader": "pg1", "candidate": "pg2"}' "http://127.0.0.1:${RESTPORT[pg1]}/switchover")"
check "a TCP login without the password is refused (scram-sha-256)" 1 \
    "$(env -i PATH="$PATH" "$PN_PGBIN/psql" -X -w "host=127.0.0.1 port=${PGPORT[pg1]} dbname=postgres user=postgres" -c 'SELECT 1' >/dev/null 2>&1 && echo 0 || echo 1)"
# pg_hba: the members are 127.0.0.1/32, the clients 127.0.0.0/8.  A
# startup packet from 127.0.0.2 (a client's address) and from 127.0.0.1 (a
# member's): what the server answers before any password (R10: it asks for
# SCRAM; 28000: pg_hba rejects)
hba() {	# hba SOURCE USER DATABASE
    python3 - "$1" "${PGPORT[pg1]}" "$2" "$3" <<'PY'
import socket, struct, sys
src, port, user, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket()
s.settimeout(5)
s.bind((src, 0))
s.connect(("127.0.0.1", port))
body = struct.pack("!I", 196608) + b"user\0" + user.encode() + b"\0database\0" + db.encode() + b"\0\0"
s.sendall(struct.pack("!I", len(body) + 4) + body)
kind = s.recv(1)
n = struct.unpack("!I", s.recv(4))[0]
msg = b""
while len(msg) < n - 4:
    msg += s.recv(n - 4 - len(msg))
if kind == b"R":
    print("R%d" % struct.unpack("!I", msg[:4])[0])
elif kind == b"E":
    f = dict((p[:1].decode(), p[1:].decode()) for p in msg.split(b"\0") if p)
    print(f.get("C"), "rejects" if "rejects" in f.get("M", "") else f.get("M"))
else:
    print(kind)
PY
}
check "pg_hba: postgres, rewind, replicator over TCP from the clients' network rejected" \
    "28000 rejects|28000 rejects|28000 rejects" \
    "$(hba 127.0.0.2 postgres postgres)|$(hba 127.0.0.2 rewind postgres)|$(hba 127.0.0.2 replicator postgres)"
check "... from a member's address asked for a password, as a client from its network" "R10|R10|R10" \
    "$(hba 127.0.0.1 postgres postgres)|$(hba 127.0.0.1 rewind postgres)|$(hba 127.0.0.2 notify_shim postgres)"
check "pg_rewind's role: a login, no superuser, the four functions granted" "t|f|t|t|t|t" \
    "$(q pg1 "SELECT concat_ws('|', rolcanlogin, rolsuper,
        has_function_privilege('rewind', 'pg_catalog.pg_ls_dir(text, boolean, boolean)', 'EXECUTE'),
        has_function_privilege('rewind', 'pg_catalog.pg_stat_file(text, boolean)', 'EXECUTE'),
        has_function_privilege('rewind', 'pg_catalog.pg_read_binary_file(text)', 'EXECUTE'),
        has_function_privilege('rewind', 'pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)', 'EXECUTE'))
        FROM pg_catalog.pg_roles WHERE rolname = 'rewind'")"
# etcd: without credentials (as nobody, the shims' uid) nothing is read or
# written; with Patroni's, nothing outside the scope's prefix
cfg=$(ectl_root get --print-value-only /service/paynotify-test/config 2>/dev/null)
off=$(python3 -c 'import json, sys; c = json.loads(sys.argv[1]); c["synchronous_mode"] = False; print(json.dumps(c))' "$cfg" 2>/dev/null)
r1=$(ectl_as nobody put /service/paynotify-test/config "${off:-x}" >/dev/null 2>&1 && echo written || echo refused)
r2=$(ectl_as nobody del /service/paynotify-test/leader 2>/dev/null)
r3=$(ectl_as nobody del /service/paynotify-test/sync 2>/dev/null)
r4=$(ectl_as nobody get --prefix /service --keys-only 2>/dev/null | grep -c .)
r5=$(env -i PATH="$PATH" ETCDCTL_API=3 ETCDCTL_USER="patroni:$PW_ETCD" etcdctl --endpoints="127.0.0.1:$EC" \
    put /service/other/config x >/dev/null 2>&1 && echo written || echo refused)
check "etcd without credentials: config put refused, /leader and /sync kept, nothing read; Patroni's user refused outside its prefix" \
    "refused|||0|refused" "$r1|$r2|$r3|$r4|$r5"
# a changed config would be applied at Patroni's next loop (loop_wait 1 s)
sleep 3
jget() { python3 -c 'import json, sys; print(str(json.load(sys.stdin).get("synchronous_mode")).lower())' 2>/dev/null; }
check "... synchronous mode still on: in etcd, in /config, pg2 in synchronous_standby_names" "true|true|yes" \
    "$(ectl_root get --print-value-only /service/paynotify-test/config | jget)|$(curl -s -m 2 "http://127.0.0.1:${RESTPORT[pg1]}/config" | jget)|$(q pg1 "SHOW synchronous_standby_names" | grep -q pg2 && echo yes || echo no)"

# ---- the schema, the roles, the relay and two shims -------------------------------
# stack_schema's statements go to the leader (stack_sql, as postgres by peer)
STACK_PGPORT=${PGPORT[pg1]}
stack_sql() { pn_as_user "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$D/pg1" -p "${PGPORT[pg1]}" -U postgres "$@"; }
stack_schema 0 $((2 * NBMAX * NB + 10)) || exit 1
secret="whsec_$(openssl rand -base64 32)"
# (the passwords on psql's standard input, not its command line)
stack_sql -q >/dev/null <<SQL
CREATE ROLE relay LOGIN;
SELECT paynotify_grant('relay', 'relay');
ALTER ROLE notify_shim PASSWORD '$PW_SHIM';
ALTER ROLE relay PASSWORD '$PW_RELAY';
SQL
stack_sql -q -c "SELECT paynotify_alter_channel('wxpay', settings || '{\"tolerance_s\": 3600}') FROM paynotify_channel WHERE name = 'wxpay'" >/dev/null
python3 test/e2e/relay_receiver.py "$D/rport" "$D/received" "$secret" --seed 1 >"$D/log/receiver.log" 2>&1 &
STACK_PIDS+=("$!")
for _ in $(seq 50); do [ -s "$D/rport" ] && break; sleep 0.1; done
# (retries 1 s apart at most: an attempt slower than the relay's 2 s
# request timeout, below, on a slow machine, is retried within the wait)
stack_sql -q -c "SELECT paynotify_alter_endpoint(paynotify_add_endpoint('http://127.0.0.1:$(cat "$D/rport")/fast/erp', '$secret'), retry_base => '1 second', retry_max => '1 second')" >/dev/null

multi="host=127.0.0.1,127.0.0.1 port=${PGPORT[pg1]},${PGPORT[pg2]} dbname=postgres target_session_attrs=read-write passfile=$D/client.pgpass"
# (a delivery the relay leased on the old primary, its result not yet
# recorded, is due again on the new one when its lease ends: 2 * the
# request timeout + 10 s; a 2 s timeout makes that wait 14 s, not 30)
(
    exec setpriv --reuid=nobody --regid=nogroup --clear-groups env -i PATH="$PATH" PAYNOTIFY_DSN="$multi user=relay" \
        PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 PAYNOTIFY_RELAY_RECONNECT_MAX=1000 PAYNOTIFY_RELAY_POLL_MAX=200 PAYNOTIFY_RELAY_TIMEOUT=2000 \
        "$STACK_ROOT/shim/relay/paynotify-relay"
) >>"$D/log/relay.log" 2>&1 &
relay=$!; STACK_PIDS+=("$relay")
STACK_DSN="$multi user=notify_shim"
stack_shim_named shimA 4 PAYNOTIFY_RECONNECT_MAX=1000 || exit 1
stack_shim_named shimB 4 PAYNOTIFY_RECONNECT_MAX=1000 || exit 1
stack_nginx_upstream "$D/run/shimA.sock" "$D/run/shimB.sock" || exit 1

log_time() {	# log_time NAME TEXT AFTER: unix time of NAME's first Patroni log line with TEXT after AFTER
    python3 - "$D/log/patroni-$1.log" "$2" "$3" <<'PY'
import calendar, sys, time
# Patroni runs with TZ=UTC (above): its log's times are UTC, whatever this shell's TZ
for line in open(sys.argv[1]):
    if sys.argv[2] in line and line[:4].isdigit():
        t = calendar.timegm(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + int(line[20:23]) / 1000
        if t > float(sys.argv[3]):
            print(t)
            break
PY
}
log_time_wait() {	# log_time_wait NAME TEXT AFTER: log_time, read until the line is there (30 s at most):
    local i t	# Patroni writes its log from a queue, a line may reach the file seconds after the event
    for i in $(seq 1 300); do
        t=$(log_time "$@")
        [ -n "$t" ] && { echo "$t"; return; }
        sleep 0.1
    done
}
leader() {	# leader: the member whose REST API answers /primary 200 (none: "")
    local m
    for m in pg1 pg2; do [ "$(rest "$m" /primary)" = 200 ] && { echo "$m"; return; }; done
}
other() { [ "$1" = pg1 ] && echo pg2 || echo pg1; }

# traffic_batches NAME START: batches of NB, one after another (no gap but
# a process start), until one has started after the new leader answered
# /primary (the file NAME.done): traffic from before the kill or
# patronictl until after the new leader, however fast this machine is.  The batches' ledgers are
# concatenated (distinct orders); the subshell's exit, the worst batch's.
traffic_batches() {
    local name=$1 start=$2 k=0 rc=0 last
    while [ "$k" -lt "$NBMAX" ]; do
        last=0
        [ -e "$D/$name.done" ] && last=1
        stack_send wxpay --mode retry -n "$NB" -c 4 --start $((start + k * NB)) --now "$(date +%s)" \
            --seed $((start + k * NB)) --schedule "$SCHEDULE" --timeout 3 --ledger "$D/ledger-$name-$k.tsv" \
            --quiet --json >"$D/$name-$k.json" 2>"$D/$name-$k.err" || rc=1
        k=$((k + 1))
        [ "$last" = 1 ] && break
    done
    echo "$k" >"$D/$name.batches"
    [ -e "$D/$name.done" ] || rc=1	# NBMAX batches did not reach the new leader
    exit "$rc"
}
# traffic_third NAME: waits until a third of N of NAME's batches are
# acknowledged
traffic_third() {
    for _ in $(seq 1 600); do
        [ "$(cat "$D/ledger-$1"-*.tsv 2>/dev/null | awk -F'\t' '$9 == 1' | wc -l)" -ge $((N / 3)) ] && return 0
        sleep 0.1
    done
    return 1
}
# verdict NAME T0 [ledger_audit options]: the sender's exit, the ledger
# against the leader, the relay
verdict() {
    local name=$1 t0=$2 rc l
    shift 2
    stack_senders_wait 900 "$SENDER"
    wait "$SENDER"; rc=$?
    cat "$D/ledger-$name"-*.tsv >"$D/ledger-$name.tsv"
    check "$name: every notification acknowledged in the end (sender exit 0)" 0 "$rc"
    for j in "$D/$name".json "$D/$name"-*.json; do
        [ -e "$j" ] && echo "# [${SECONDS} s] ${j##*/}: $(stack_send_summary "$j")"
    done
    l=$(leader)
    qleader() { q "$l" "$1"; }
    stack_ledger_audit qleader "$D/ledger-$name.tsv" --kill "$t0" "$@"
    stack_relay_verify qleader "$D/received"
    check "$name: the shims and the relay are the same processes" yes \
        "$(pn_alive "$(cat "$D/shimA.pid")" && pn_alive "$(cat "$D/shimB.pid")" && pn_alive "$relay" && echo yes || echo no)"
}

# ---- 1. the leader's machine dies ----------------------------------------------
traffic_batches failover 1 &
SENDER=$!
traffic_third failover || echo "# the traffic did not reach a third acknowledged"
old=$(leader) new=$(other "$old")
pm=$(pn_cluster_pid "$D/$old")
kids=$(ps --ppid "$pm" -o pid= 2>/dev/null)
# shellcheck disable=SC2086
kill -KILL "${PID[$old]}" "$pm" $kids
tkill=$(date +%s.%N)
acked=$(cat "$D"/ledger-failover-*.tsv | awk -F'\t' '$9 == 1' | wc -l)
echo "# [${SECONDS} s] killed $old (Patroni ${PID[$old]}, postmaster $pm and its children) after $acked acknowledged deliveries"
waited=$(wait_rest "$new" /primary 60)
check "Patroni promotes $new" 200 "$(rest "$new" /primary)"
touch "$D/failover.done"
echo "# [${SECONDS} s] $new answered /primary $waited s after the kill"
# the old machine comes back: its Patroni started on its data directory
member_start "$old"
waited=$(wait_rest "$old" "$( [ "$ASYNC" = 1 ] && echo /async || echo /sync )" 90)
check "$old rejoins as a streaming $mode standby of $new" "200|streaming|$new" \
    "$(rest "$old" "$( [ "$ASYNC" = 1 ] && echo /async || echo /sync )")|$(q "$new" "SELECT state FROM pg_stat_replication WHERE application_name = '$old'")|$(leader)"
echo "# [${SECONDS} s] $old rejoined $waited s after its Patroni started; pg_rewind ran $(grep -c 'pg_rewind exit code=0' "$D/log/patroni-$old.log") time(s)"
# when Patroni decided (its log): no primary accepted writes before that
tpromote0=$(log_time_wait "$new" "promoted self to leader" "$tkill")
check "$new's Patroni logged its promotion (when no primary took writes until)" yes \
    "$([ -n "$tpromote0" ] && echo yes || echo no)"
args=()
[ -n "$tpromote0" ] && args+=(--promote-start "$tpromote0" --promote "$tpromote0")
[ "$ASYNC" = 1 ] && args+=(--lost-is-figure)
verdict failover "$tkill" "${args[@]}"

# ---- 2. a planned switchover under traffic ------------------------------------------
traffic_batches switchover $((NBMAX * NB + 1)) &
SENDER=$!
traffic_third switchover
old=$(leader) new=$(other "$old")
tsw=$(date +%s.%N)
(
    set -a; . "$D/patroni.env"; set +a
    patronictl -c "$D/$old/patroni.yml" switchover --leader "$old" --candidate "$new" --force
) >"$D/log/switchover.log" 2>&1
check "patronictl switchover $old -> $new" 0 $?
tpc=$(date +%s.%N)
waited=$(wait_rest "$new" /primary 60)
check "$new leads" 200 "$(rest "$new" /primary)"
tdone=$(date +%s.%N)
touch "$D/switchover.done"
echo "# [${SECONDS} s] $new answered /primary $waited s after patronictl returned; patronictl took $(python3 -c "print(round($tpc - $tsw, 2))") s"
stack_senders_wait 900 "$SENDER"
cat "$D"/ledger-switchover-*.tsv >"$D/ledger-switchover.tsv"
echo "# [${SECONDS} s] switchover traffic: $(cat "$D/switchover.batches" 2>/dev/null) batches of $NB"
check "the traffic goes on after the switchover (acknowledgements after it)" yes \
    "$(python3 - "$D/ledger-switchover.tsv" "$tdone" <<'PY'
import calendar, sys, time
def unix(t):
    head, frac = t.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S")) + float("0." + frac)
acks = [unix(l.split("\t")[0]) for l in open(sys.argv[1]) if l.split("\t")[8] == "1"]
print("yes" if any(t > float(sys.argv[2]) for t in acks) else "no")
PY
)"
waited=$(wait_rest "$old" "$( [ "$ASYNC" = 1 ] && echo /async || echo /sync )" 60)
check "$old follows as a streaming $mode standby" "200|streaming" \
    "$(rest "$old" "$( [ "$ASYNC" = 1 ] && echo /async || echo /sync )")|$(q "$new" "SELECT state FROM pg_stat_replication WHERE application_name = '$old'")"
args=()
[ "$ASYNC" = 1 ] && args+=(--lost-is-figure)
# the switchover begins when the old leader starts to demote (its log)
tdemote=$(log_time_wait "$old" "manual failover: demot" "$tsw")
check "$old's Patroni logged its demotion" yes "$([ -n "$tdemote" ] && echo yes || echo no)"
echo "# (for the switchover, \"the kill\" is when $old began to demote, $(python3 -c "print(round(${tdemote:-$tsw} - $tsw, 2))") s after patronictl started)"
verdict switchover "${tdemote:-$tsw}" "${args[@]}"
check "one leader in the end" 1 "$(for m in pg1 pg2; do rest "$m" /primary; echo; done | grep -c '^200$')"

# ---- no secret in the configuration, a log, etcd or the REST API ---------------------
# what anyone on the host may read without a password: the REST API's GET
# endpoints; and what etcd holds
for ep in config patroni cluster history; do
    curl -s -m 2 "http://127.0.0.1:${RESTPORT[pg1]}/$ep" >"$D/log/rest-$ep.json"
done
ectl_root get --prefix / >"$D/log/etcd-dump.txt" 2>&1
check "etcd holds the cluster's state (the dump is not empty)" yes \
    "$(grep -q paynotify-test "$D/log/etcd-dump.txt" && echo yes || echo no)"
leaks=0
for s in "$PW_SUPER" "$PW_REPL" "$PW_REST" "$PW_SHIM" "$PW_RELAY" "$PW_REWIND" "$PW_ETCD" "$PW_ETCD_ROOT"; do
    n=$(grep -rlF --exclude=patroni.env --exclude=client.pgpass --exclude=pgpass --exclude-dir=data \
        -e "$s" "$D" 2>/dev/null | wc -l)
    leaks=$((leaks + n))
    for m in pg1 pg2; do
        n=$(grep -rlF -e "$s" "$D/$m/data/log" "$D/$m/data/postgresql.conf" "$D/$m/data/postgresql.base.conf" 2>/dev/null | wc -l)
        leaks=$((leaks + n))
    done
done
check "no generated password in the Patroni configuration, any log, etcd or the REST API" 0 "$leaks"
echo "# [${SECONDS} s] done"
summary
