#!/usr/bin/env bash
# Failover with real parts: an acknowledgement survives the loss of the primary.
#
#   test/e2e/failover.sh [sync|async]      (both, in turn, by default)
#
# A primary and a streaming standby (pg_basebackup -R) on loopback, nginx,
# the FastCGI shim and paynotify-relay connecting with a multi-host DSN
# (host=127.0.0.1,127.0.0.1 port=P,S target_session_attrs=read-write), a
# webhook receiver for the relay.  paynotify-send delivers WeChat Pay
# notifications (distinct orders, each re-delivered until acknowledged) and
# an Alipay storm (one notification, many times), each writing its ledger.
# Mid-traffic the primary is SIGKILLed (postmaster and every child at once,
# as a dead machine), nothing accepts writes for about 2 s, then the standby
# is promoted (pg_ctl promote) and the shim and relay reconnect by
# themselves (same pids).  From the ledger, against the new primary:
#   sync   (synchronous_standby_names = the standby, synchronous_commit = on):
#          every acknowledged notification applied exactly once (lost 0,
#          doubled 0), every outbox event delivered by the relay;
#   async  (no synchronous standby): the number of acknowledgements lost is
#          printed as a figure; doubled must still be 0.
# Both: from the kill until the promotion is asked for (no primary accepts
# writes) every reply is 503 (none 2xx, none
# missing: no worker hangs); the time from the kill to the first
# acknowledgement is printed.  Also (sync case): a shim pointed at the
# standby (or at a read-only session) answers 503 and logs why; a server that
# accepts TCP but never answers costs a request PAYNOTIFY_CONNECT_TIMEOUT,
# not a hang; a primary turned read-only under the running shim (SQLSTATE
# 25006) gets 503 with the reason logged, and the same shim takes writes
# again once it is writable; a commit whose wait for the synchronous standby
# is cancelled is answered 503, and its retry waits for the standby.
# Everything is started here on loopback in a temp dir and stopped by pid.
# About 40 s per case; in the --full suite.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ $# = 0 ]; then
    rc=0
    total_pass=0 total_fail=0
    log=$(mktemp /tmp/paynotify-failover.XXXXXX) || exit 1
    trap 'rm -f "$log"' EXIT
    for c in sync async; do
        echo "=== $c standby"
        "$0" "$c" 2>&1 | tee "$log"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
        out=$(tail -1 "$log")
        p=$(echo "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
        f=$(echo "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
        [ -n "$p" ] || { rc=1; f=1; p=0; }
        total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    done
    echo "$total_pass passed, $total_fail failed"
    [ $rc = 0 ] && [ $total_fail = 0 ]
    exit
fi
case=$1
case $case in sync|async) ;; *) echo "usage: $0 [sync|async]" >&2; exit 2 ;; esac

. test/lib.sh
. test/e2e/stack.sh
pass=0 fail=0
pn_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }

N=${FAILOVER_N:-1200}          # distinct WeChat Pay notifications
STORM=${FAILOVER_STORM:-8000}  # deliveries of the one Alipay notification
stack_init "failover-$case"
if [ "$case" = sync ]; then syncnames="'standby1'"; else syncnames="''"; fi
STANDBY=$STACK_DIR/pg2
# stack_stop stops the primary (if still alive); the standby is stopped here
trap 'pn_cluster_stop "$STANDBY"; stack_stop' EXIT
stack_pg "wal_level = replica" "max_wal_senders = 5" "wal_keep_size = '256MB'" "synchronous_commit = on" || exit 1
PRIMARY=$STACK_DIR/pg P1=$STACK_PGPORT
stack_schema 0 $((N + 10)) || exit 1
secret="whsec_$(openssl rand -base64 32)"
stack_sql -q -c "CREATE ROLE relay LOGIN" -c "SELECT paynotify_grant('relay', 'relay')" >/dev/null

# the standby: a base backup of the primary, streaming, named standby1
P2=$(pn_free_port)
mkdir -p "$STANDBY"; chown "$PN_RUNUSER" "$STANDBY" 2>/dev/null
pn_as_user "$PN_PGBIN/pg_basebackup" -h 127.0.0.1 -p "$P1" -U postgres -D "$STANDBY/data" -R -X stream -c fast \
    >"$STANDBY/basebackup.log" 2>&1 || { cat "$STANDBY/basebackup.log"; exit 1; }
# after its promotion it runs alone: no synchronous standby to wait for
# (it confirms what it has every second, not every 10: a primary with no
# new WAL to send hears of it only then)
printf '%s\n' "port = $P2" "unix_socket_directories = '$STANDBY'" "cluster_name = 'standby1'" \
    "synchronous_standby_names = ''" "wal_receiver_status_interval = 1" >>"$STANDBY/data/postgresql.conf"
pn_as_user "$PN_PGBIN/pg_ctl" -D "$STANDBY/data" -l "$STANDBY/server.log" -w -t 60 start >/dev/null \
    || { cat "$STANDBY/server.log"; exit 1; }
q1() { pn_psql "$PRIMARY" "$P1" -tA -c "$1"; }
q2() { pn_psql "$STANDBY" "$P2" -tA -c "$1"; }
# the standby is named synchronous once it exists (else the schema would wait for it)
q1 "ALTER SYSTEM SET synchronous_standby_names = $syncnames" >/dev/null && q1 "SELECT pg_reload_conf()" >/dev/null
want_state=sync; [ "$case" = async ] && want_state=async
for _ in $(seq 1 100); do
    [ "$(q1 "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")" = "$want_state" ] && break
    sleep 0.1
done
check "the standby streams from the primary ($want_state)" "$want_state|t" \
    "$(q1 "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")|$(q2 "SELECT pg_is_in_recovery()")"

# a shim pointed at the standby, or at a read-only session: 503, and the log says why
cgi_once() {	# cgi_once NAME DSN [VAR=value...]: one request in CGI mode
    local name=$1 dsn=$2; shift 2
    echo '{}' >"$STACK_DIR/empty.json"
    env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST PATH_INFO=/notify/wxpay \
        CONTENT_LENGTH=3 PAYNOTIFY_DSN="$dsn" "$@" "$STACK_ROOT/shim/paynotify-cgi" \
        <"$STACK_DIR/empty.json" >"$STACK_DIR/$name.out" 2>"$STACK_DIR/$name.err"
}
if [ "$case" = sync ]; then
    cgi_once standby "host=127.0.0.1 port=$P2 dbname=postgres user=notify_shim"
    check "a shim connected to the standby by mistake answers 503" "Status: 503" "$(head -1 "$STACK_DIR/standby.out" | cut -d' ' -f1-2)"
    check "... and logs why (a standby in recovery)" 1 "$(grep -c 'does not accept writes (it is a standby' "$STACK_DIR/standby.err")"
    cgi_once readonly "host=127.0.0.1 port=$P1 dbname=postgres user=notify_shim options='-c default_transaction_read_only=on'"
    check "a read-only session is refused too: 503" "Status: 503" "$(head -1 "$STACK_DIR/readonly.out" | cut -d' ' -f1-2)"
    check "... and logged (transaction_read_only is on)" 1 "$(grep -c 'transaction_read_only is on' "$STACK_DIR/readonly.err")"
    # a server that accepts the TCP connection and never answers
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True); time.sleep(30)' >"$STACK_DIR/mute.port" &
    mute=$!; STACK_PIDS+=("$mute")
    for _ in $(seq 50); do [ -s "$STACK_DIR/mute.port" ] && break; sleep 0.1; done
    t0=$(date +%s%N)
    # (libpq's smallest connect_timeout is 2 s)
    cgi_once mute "host=127.0.0.1 port=$(cat "$STACK_DIR/mute.port") dbname=postgres user=notify_shim" PAYNOTIFY_CONNECT_TIMEOUT=2
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    check "a server that never answers: 503 within the connect timeout (2 s + 1.5 s slack)" "Status: 503|yes" \
        "$(head -1 "$STACK_DIR/mute.out" | cut -d' ' -f1-2)|$([ "$ms" -lt 3500 ] && echo yes || echo "no: $ms ms")"
    echo "# the mute server cost the request $ms ms"
    stop_pid "$mute"
fi

# the receiver, the endpoint, the relay and the shim, all with the multi-host DSN
python3 test/e2e/relay_receiver.py "$STACK_DIR/rport" "$STACK_DIR/received" "$secret" --seed 1 \
    >"$STACK_DIR/log/receiver.log" 2>&1 &
STACK_PIDS+=("$!")
for _ in $(seq 50); do [ -s "$STACK_DIR/rport" ] && break; sleep 0.1; done
# (retries 1 s apart at most: an attempt slower than the relay's 2 s
# request timeout, below, on a slow machine, is retried within the wait)
stack_sql -q -c "SELECT paynotify_alter_endpoint(paynotify_add_endpoint('http://127.0.0.1:$(cat "$STACK_DIR/rport")/fast/erp', '$secret'), retry_base => '1 second', retry_max => '1 second')" >/dev/null
multi="host=127.0.0.1,127.0.0.1 port=$P1,$P2 dbname=postgres target_session_attrs=read-write"
# (a delivery the relay leased on the old primary, its result not yet
# recorded, is due again on the new one when its lease ends: 2 * the
# request timeout + 10 s; a 2 s timeout makes that wait 14 s, not 30)
env -i PATH="$PATH" PAYNOTIFY_DSN="$multi user=relay" PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 PAYNOTIFY_RELAY_RECONNECT_MAX=1000 PAYNOTIFY_RELAY_POLL_MAX=200 PAYNOTIFY_RELAY_TIMEOUT=2000 \
    "$STACK_ROOT/shim/relay/paynotify-relay" >>"$STACK_DIR/log/relay.log" 2>&1 &
relay=$!; STACK_PIDS+=("$relay")
STACK_DSN="$multi user=notify_shim"
stack_shim_named shim 8 PAYNOTIFY_RECONNECT_MAX=1000 || exit 1
shim=$(cat "$STACK_DIR/shim.pid")
stack_nginx_upstream "$STACK_DIR/run/shim.sock" || exit 1
# notifications are re-delivered for a while: a wide freshness window
stack_sql -q -c "SELECT paynotify_alter_channel('wxpay', settings || '{\"tolerance_s\": 3600}') FROM paynotify_channel WHERE name = 'wxpay'" >/dev/null

if [ "$case" = sync ]; then
    # the primary stops taking writes under a connected shim (as a demoted
    # server would): 503 with the reason logged, then back without a restart
    one() { local n=$1; shift; stack_send stripe --mode one --start "$n" --seed 99 --json "$@" 2>/dev/null |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["reply"]; print(r["status"], r["outcome"])'; }
    check "a notification through the multi-host DSN" "200 processed" "$(one $((N + 8)))"
    # reloaded_as NAME VALUE: until a new session sees it (the postmaster has
    # read the file, and so has signalled every backend, the shim's too,
    # which read it before their next statement)
    reloaded_as() { for _ in $(seq 1 200); do [ "$(q1 "SHOW $1")" = "$2" ] && return 0; sleep 0.05; done; return 1; }
    q1 "ALTER SYSTEM SET default_transaction_read_only = on" >/dev/null && q1 "SELECT pg_reload_conf()" >/dev/null
    reloaded_as default_transaction_read_only on
    check "the primary turned read-only: 503" "503 unavailable" "$(one $((N + 9)))"
    check "... the shim logged the read-only server and looked for another" 1 \
        "$(grep -c 'does not accept writes (standby or read-only); reconnecting\|transaction_read_only is on' "$STACK_DIR/log/shim.err" | awk '{ print ($1 > 0) }')"
    q1 "ALTER SYSTEM RESET default_transaction_read_only" >/dev/null && q1 "SELECT pg_reload_conf()" >/dev/null
    got=
    for _ in $(seq 1 30); do got=$(one $((N + 9))); [ "$got" = "200 processed" ] && break; sleep 0.1; done
    check "writable again: the same shim process takes it" "200 processed" "$got"

    # the synchronous standby goes away (the primary now waits for another
    # name); a commit waiting for it is cancelled, as a DBA cancels stuck
    # sessions: the server commits locally and only warns, so the shim must
    # not acknowledge it; the gateway's retry must wait for the standby too
    sync_wait() {	# sync_wait: pids of paynotify_handle backends waiting for the standby
        q1 "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%paynotify_handle%'"; }
    q1 "ALTER SYSTEM SET synchronous_standby_names = 'absent'" >/dev/null && q1 "SELECT pg_reload_conf()" >/dev/null
    # until the walsender has read it too: the standby connected, no longer synchronous
    for i in $(seq 1 200); do
        [ "$(q1 "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")" = async ] && break
        [ "$i" = 200 ] && echo "# the standby still synchronous (or gone) 10 s after the reload"
        sleep 0.05
    done
    now=$(date +%s)     # both deliveries carry the same body, as a gateway's retry does
    one $((N + 7)) --now "$now" >"$STACK_DIR/cancelled.reply" &
    sender=$!
    for _ in $(seq 1 50); do [ -n "$(sync_wait)" ] && break; sleep 0.1; done
    q1 "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%paynotify_handle%'" >/dev/null
    wait "$sender"
    check "a commit whose wait for the synchronous standby is cancelled is not acknowledged: 503" \
        "503 unavailable" "$(cat "$STACK_DIR/cancelled.reply")"
    check "... and the shim logs why" 1 "$(grep -c 'not confirmed by the synchronous standby' "$STACK_DIR/log/shim.err")"
    # (the standby confirms the flush in its next status message, within
    # its wal_receiver_status_interval, 1 s here, after it is named again)
    one $((N + 7)) --now "$now" --timeout 30 >"$STACK_DIR/retry.reply" &
    sender=$!
    waiting=no
    for _ in $(seq 1 30); do [ -n "$(sync_wait)" ] && { waiting=yes; break; }; sleep 0.1; done
    check "its retry, a repeat, waits for the synchronous standby too (not answered from this primary alone)" \
        "yes|" "$waiting|$(cat "$STACK_DIR/retry.reply")"
    q1 "ALTER SYSTEM SET synchronous_standby_names = $syncnames" >/dev/null && q1 "SELECT pg_reload_conf()" >/dev/null
    wait "$sender"
    check "... and is acknowledged once the standby has it" "200 duplicate" "$(cat "$STACK_DIR/retry.reply")"
fi

ledger=$STACK_DIR/ledger.tsv
now=$(date +%s)
stack_send wxpay --mode retry -n "$N" -c 8 --now "$now" --seed 14 --schedule 0.2,0.3,0.5,1,1,1,1,1,1,1,1,1,1,1,1 \
    --timeout 3 --ledger "$ledger" --quiet --json >"$STACK_DIR/distinct.json" 2>"$STACK_DIR/distinct.err" &
s1=$!
# signed as it goes (--presign 200), so that the storm starts at once and spans the failover
stack_send alipay --mode storm -n "$STORM" -c 2 --presign 200 --start $((N + 5)) --seed 14 --timeout 3 \
    --ledger "$ledger" --quiet --json >"$STACK_DIR/storm.json" 2>"$STACK_DIR/storm.err" &
s2=$!
# the kill comes when a third of the distinct notifications and the storm's are acknowledged
for _ in $(seq 1 300); do
    [ "$(awk -F'\t' '$2 == "wxpay" && $9 == 1' "$ledger" 2>/dev/null | wc -l)" -ge $((N / 3)) ] &&
        [ "$(awk -F'\t' '$2 == "alipay" && $9 == 1' "$ledger" 2>/dev/null | wc -l)" -ge 1 ] && break
    sleep 0.1
done

# the primary dies: SIGKILL to the postmaster and every process it started
pm=$(pn_cluster_pid "$PRIMARY")
kids=$(ps --ppid "$pm" -o pid= 2>/dev/null)
# shellcheck disable=SC2086
kill -KILL "$pm" $kids
tkill=$(date +%s.%N)
rm -f "$PRIMARY/data/postmaster.pid"	# dead: stack_stop has nothing to stop there
acked_at_kill=$(awk -F'\t' '$9 == 1' "$ledger" | wc -l)
sleep 2
tpromote0=$(date +%s.%N)
pn_as_user "$PN_PGBIN/pg_ctl" -D "$STANDBY/data" -w -t 60 promote >/dev/null || echo "# promote failed"
tpromote=$(date +%s.%N)
echo "# killed the primary after $acked_at_kill acknowledged deliveries; promoted the standby $(python3 -c "print(round($tpromote0 - $tkill, 2))") s later (pg_ctl promote -w took $(python3 -c "print(round($tpromote - $tpromote0, 2))") s)"

stack_senders_wait 900 "$s1" "$s2"
wait "$s1"; rc1=$?
wait "$s2"; rc2=$?
check "the re-delivering sender got every notification acknowledged (exit 0)" 0 "$rc1"
check "the storm ran to its end (exit 0)" 0 "$rc2"
echo "# distinct: $(stack_send_summary "$STACK_DIR/distinct.json")"
echo "# storm: $(stack_send_summary "$STACK_DIR/storm.json")"
check "the shim is the same process (reconnected without a restart)" yes "$(pn_alive "$shim" && echo yes || echo no)"
check "the relay is the same process" yes "$(pn_alive "$relay" && echo yes || echo no)"
grep -q 'does not accept writes\|cannot connect' "$STACK_DIR/log/shim.err"
check "the shim logged the outage" 0 $?

# the audit, on the new primary
args=(--kill "$tkill" --promote-start "$tpromote0" --promote "$tpromote")
[ "$case" = async ] && args+=(--lost-is-figure)
stack_ledger_audit q2 "$ledger" "${args[@]}"
check "the storm's notification applied once" 1 "$(q2 "SELECT count(*) FROM payment_record WHERE channel = 'alipay'")"

# the relay: every event of the new primary delivered, each received
stack_relay_verify q2 "$STACK_DIR/received"
summary
