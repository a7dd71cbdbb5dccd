#!/usr/bin/env bash
# paynotify-relay with real parts: a throwaway cluster, signed Stripe
# notifications through paynotify_handle (payments, then refunds, of many
# orders), a loopback receiver that fails, times out and is slow at random
# and checks every signature itself, two relays SIGKILLed and restarted, and
# the database crashed (immediate shutdown) and restarted mid-run.
# Then: every event reached the receiver (accepted) at least once, every
# request verifies (the receiver's own HMAC check and the npm library
# "standardwebhooks"), nothing is left undelivered, each order's events were
# accepted in order, no outbox row is left; an endpoint that refuses
# connections dead-letters each delivery right when its horizon passes, and
# one paynotify_redeliver call brings them all to the receiver.  SIGTERM
# stops idle relays with status 0, and one in the middle of a batch after
# recording the requests in flight and releasing the rest.  A request that
# hangs holds back no other delivery of its endpoint: its slot is the only
# one it holds.  The roles are those of a real
# installation, each given its capacity by paynotify_grant: the shim's
# (handler), the operator's (admin) and the relay's (relay).
#
# Run as root (or the cluster's user) from anywhere in the repository:
#   test/e2e/relay.sh
# Everything started here is stopped by pid on exit.  Takes about a minute;
# the last line printed is "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

ORDERS=${RELAY_TEST_ORDERS:-150}
dir=$(pn_tmp_dir relay)
port=$(pn_free_port)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pn_cluster_stop "$dir"
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0
fail=0
# ok, not_ok, check, finish: test/lib.sh

pn_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }
RELAY=$PWD/shim/relay/paynotify-relay
SEND=$PWD/shim/paynotify-send

pn_cluster_start "$dir" "$port" "fsync = off" || exit 1
sql() { pn_psql "$dir" "$port" -d postgres "$@"; }
q() { sql -Atc "$1"; }
as_role() { local r=$1; shift; "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U "$r" -d postgres "$@"; }

secret="whsec_$(openssl rand -base64 32)"
sql >/dev/null <<SQL || { echo "setup failed"; exit 1; }
CREATE EXTENSION paynotify;
CREATE ROLE shim LOGIN;
CREATE ROLE ops LOGIN;
CREATE ROLE relay LOGIN;
SELECT paynotify_grant('shim', 'handler');
SELECT paynotify_grant('ops', 'admin');
SELECT paynotify_grant('relay', 'relay');
CREATE TABLE orders (order_no text PRIMARY KEY, status text NOT NULL, amount bigint);
INSERT INTO orders SELECT 'R' || lpad(i::text, 5, '0'), 'pending', 8888 FROM generate_series(1, $((ORDERS + 50))) i;
SELECT paynotify_bind_orders('orders', amount_column => 'amount');
SELECT paynotify_add_channel('st', 'stripe', '{}');
SELECT paynotify_add_key('st', 's1', '$(cat test/vectors/keys/stripe_secret_1.txt)');
SQL

# the independent verifier
npm_ok=0
if timeout 90 npm install --silent --no-audit --no-fund --prefix "$dir/npm" standardwebhooks >"$dir/npm.log" 2>&1; then
    npm_ok=1
else
    echo "# npm install standardwebhooks failed (offline?): only the receiver's own HMAC check is used"
fi

# the receiver
python3 test/e2e/relay_receiver.py "$dir/rport" "$dir/received" "$secret" \
    --fail 0.15 --timeout 0.03 --slow 0.1 --hang 1.2 --seed 7 &
pids+=($!)
for _ in $(seq 50); do [ -s "$dir/rport" ] && break; sleep 0.1; done
rport=$(cat "$dir/rport")
closed=$(pn_free_port)		# nobody listens there: connection refused

# the operator's configuration: chaos endpoint for every event
ep_a=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/chaos', '$secret')") || exit 1
as_role ops -c "SELECT paynotify_alter_endpoint($ep_a, retry_base => '1 second', retry_max => '2 seconds', max_in_flight => 16)" >/dev/null

# what the roles may do
out=$(as_role ops -Atc "SELECT secret FROM paynotify_endpoint" 2>&1)
case $out in *"permission denied"*) ok "the operator (admin) cannot read endpoint secrets" ;; *) not_ok "the operator (admin) cannot read endpoint secrets" "$out" ;; esac
check "the operator (admin) reads the rest of the endpoint" "http://127.0.0.1:$rport/chaos|t" \
    "$(as_role ops -Atc "SELECT url, enabled FROM paynotify_endpoint" 2>&1)"
check "the operator (admin) reads what is bound" "public.orders|order_no|status|amount" \
    "$(as_role ops -Atc "SELECT orders, key_column, status_column, amount_column FROM paynotify_binding" 2>&1)"
out=$(as_role ops -Atc "SELECT count(*) FROM paynotify_relay_claim(1)" 2>&1)
case $out in *"permission denied"*) ok "the operator (admin) cannot claim (the claim returns secrets)" ;; *) not_ok "the operator (admin) cannot claim" "$out" ;; esac
denied=0
for stmt in "SELECT * FROM paynotify_delivery" "SELECT * FROM paynotify_outbox" \
    "SELECT paynotify_redeliver()" "SELECT paynotify_add_endpoint('http://x/', '$secret')" \
    "SELECT * FROM paynotify_outbox_claim(1)" "UPDATE paynotify_delivery SET attempts = 0"; do
    out=$(as_role relay -Atc "$stmt" 2>&1)
    case $out in *"permission denied"*) denied=$((denied + 1)) ;; *) echo "#   relay role could: $stmt" ;; esac
done
check "the relay's role can do nothing but claim and report" 6 "$denied"
out=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1/', 'whsec_c2hvcnQ=')" 2>&1)
case $out in *"24 to 64 bytes"*) ok "a short secret is refused" ;; *) not_ok "a short secret is refused" "$out" ;; esac

# signed traffic: a payment, then a refund, of each order
now=$(date +%s)
"$SEND" --gateway stripe --keys test/vectors/keys --mode distinct -n "$ORDERS" --order-format 'R%05d' \
    --channel st --now "$now" --quiet --dump-sql "$dir/pay.sql" >/dev/null || exit 1
"$SEND" --gateway stripe --keys test/vectors/keys --mode distinct --event refund -n "$ORDERS" \
    --order-format 'R%05d' --channel st --now "$now" --quiet --dump-sql "$dir/refund.sql" >/dev/null || exit 1
traffic() {	# traffic FILE...: replay as the shim's role; errors (a crashed server) are fine
    for f in "$@"; do as_role shim -v ON_ERROR_STOP=0 -f "$f" >/dev/null 2>&1; done
}

# the receivers are on loopback: allowed here, refused by default (see below)
relay_env=(env PAYNOTIFY_DSN="host=$dir port=$port dbname=postgres user=relay"
    PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 PAYNOTIFY_RELAY_TIMEOUT=1000 PAYNOTIFY_RELAY_POLL_MAX=200 PAYNOTIFY_RELAY_RECONNECT_MAX=300)
declare -A relay_pid
start_relay() {	# start_relay NAME [OPTION...]
    local name=$1; shift
    "${relay_env[@]}" "$RELAY" --batch=20 "$@" >>"$dir/relay-$name.log" 2>&1 &
    relay_pid[$name]=$!
    pids+=($!)
}
start_relay r1
start_relay r2
t0=$(date +%s.%N)

traffic "$dir/pay.sql" &
tpid=$!; pids+=($tpid)
sleep 1.5
kill -KILL "${relay_pid[r1]}"; wait "${relay_pid[r1]}" 2>/dev/null; start_relay r1
sleep 1
traffic "$dir/refund.sql" &
tpid2=$!; pids+=($tpid2)
sleep 1
# crash the database (immediate shutdown by the postmaster's pid), restart it
kill -QUIT "$(pn_cluster_pid "$dir")"
for _ in $(seq 100); do [ -f "$dir/data/postmaster.pid" ] || break; sleep 0.1; done
kill -KILL "${relay_pid[r2]}"; wait "${relay_pid[r2]}" 2>/dev/null; start_relay r2
pn_as_user "$PN_PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null || { cat "$dir/server.log"; exit 1; }
wait "$tpid" "$tpid2" 2>/dev/null
# what was lost in the crash is sent again, as a gateway would; duplicates are answered as such
traffic "$dir/pay.sql" "$dir/refund.sql"
sleep 1
kill -KILL "${relay_pid[r1]}"; wait "${relay_pid[r1]}" 2>/dev/null; start_relay r1

check "every notification was applied" "$((2 * ORDERS))" \
    "$(q "SELECT count(*) FROM payment_notify_log WHERE status = 'succeeded'")"

# wait for the relays
undelivered=-1
for _ in $(seq 600); do
    undelivered=$(q "SELECT (SELECT count(*) FROM paynotify_outbox) + (SELECT count(*) FROM paynotify_delivery WHERE delivered_at IS NULL)" 2>/dev/null || echo -1)
    [ "$undelivered" = 0 ] && break
    sleep 0.1
done
t1=$(date +%s.%N)
check "everything delivered (outbox empty, no pending delivery)" 0 "$undelivered"
echo "# delivered in $(python3 -c "print(round($t1 - $t0, 1))") s; attempts: $(q "SELECT sum(attempts) FROM paynotify_delivery")"
check "one delivery per event: a payment and a refund per order" "$ORDERS|$ORDERS|0" \
    "$(q "SELECT count(*) FILTER (WHERE event = 'paid'), count(*) FILTER (WHERE event = 'refunded'), count(*) FILTER (WHERE event NOT IN ('paid', 'refunded')) FROM paynotify_delivery")"
check "retries happened (failures, timeouts)" t "$(q "SELECT max(attempts) > 1 FROM paynotify_delivery")"

python3 - "$dir/received" "$(q "SELECT string_agg(webhook_id || ':' || order_no, ' ') FROM paynotify_delivery WHERE endpoint_id = $ep_a")" >"$dir/check.out" 2>&1 <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
want = dict(x.split(':') for x in sys.argv[2].split())
bad = []
unverified = [r['id'] for r in recs if not r['verified']]
if unverified: bad.append('not verified by the receiver: %s' % unverified[:5])
accepted = [r for r in recs if r['verdict'] == 'ok' and r['path'] == '/chaos']
got = {r['id'] for r in accepted}
missing = sorted(set(want) - got)
if missing: bad.append('never accepted: %s' % missing[:10])
extra = sorted(got - set(want))
if extra: bad.append('accepted but not an event: %s' % extra[:10])
# per order: the first acceptance of each event in the order of the events
seen, last = set(), {}
for r in accepted:
    b = json.loads(r['body'])
    if b['id'] != r['id']: bad.append('body id %s under webhook-id %s' % (b['id'], r['id']))
    if r['id'] in seen: continue
    seen.add(r['id'])
    n = int(r['id'].rsplit('_', 1)[1]); o = b['order_no']
    if last.get(o, 0) > n: bad.append('order %s: %s accepted after event %d' % (o, r['id'], last[o]))
    last[o] = max(last.get(o, 0), n)
    if b['event'] == 'refunded' and b['amount'] != 1000: bad.append('refund amount %s' % b['amount'])
kinds = {}
for r in recs: kinds[r['verdict']] = kinds.get(r['verdict'], 0) + 1
print('# receiver: %d requests %s, %d events accepted, %d duplicates' % (len(recs), kinds, len(got), len(accepted) - len(got)))
for b in bad: print(b)
sys.exit(1 if bad else 0)
EOF
rc=$?
head -1 "$dir/check.out"
# webhook-id: this installation's id and the event's outbox id; another
# installation (a second database) has another id
inst=$(q "SELECT id FROM paynotify_installation")
check "every webhook-id is evt_<installation id>_<outbox id> (installation id: 16 hex digits)" "0 1" \
    "$(q "SELECT count(*) FROM paynotify_delivery WHERE webhook_id <> 'evt_$inst' || '_' || outbox_id OR body::jsonb->>'id' <> webhook_id") $(echo "$inst" | grep -c '^[0-9a-f]\{16\}$')"
sql -q -c "CREATE DATABASE shop_b" >/dev/null
pn_psql "$dir" "$port" -d shop_b -q >/dev/null <<SQL
CREATE EXTENSION paynotify;
SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/b', '$secret');
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'st', 'R00001', 'n1', 1);
SELECT paynotify_relay_fanout();
SQL
other=$(pn_psql "$dir" "$port" -d shop_b -Atc "SELECT webhook_id FROM paynotify_delivery")
mine=$(q "SELECT webhook_id FROM paynotify_delivery WHERE outbox_id = 1 AND endpoint_id = $ep_a")
check "the same outbox id in two installations gives two webhook-ids" 1 "$([ -n "$other" ] && [ -n "$mine" ] && [ "$other" != "$mine" ] && echo 1 || echo 0)"
echo "# webhook-ids of outbox id 1: $mine here, $other in another database"
if [ $rc = 0 ]; then ok "every event accepted at least once, verified, per-order order held"; else not_ok "every event accepted at least once, verified, per-order order held" "$(cat "$dir/check.out")"; fi
grep -q '"verdict": "fail"' "$dir/received" && grep -q '"verdict": "timeout"' "$dir/received"
check "the receiver failed and timed out some requests" 0 $?

# dead letters: an endpoint that refuses connections, horizon 3 s
ep_b=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$closed/dead', '$secret', events => '{paid}', retry_horizon => '3 seconds')")
as_role ops -c "SELECT paynotify_alter_endpoint($ep_b, retry_base => '1 second', retry_max => '1 second')" >/dev/null
"$SEND" --gateway stripe --keys test/vectors/keys --mode distinct -n 40 --start $((ORDERS + 1)) \
    --order-format 'R%05d' --channel st --now "$(date +%s)" --quiet --dump-sql "$dir/pay2.sql" >/dev/null
traffic "$dir/pay2.sql"
sleep 1.5
check "nothing is dead before its horizon" 0 "$(q "SELECT count(*) FROM paynotify_delivery d JOIN paynotify_endpoint e ON e.id = d.endpoint_id WHERE endpoint_id = $ep_b AND dead_at < started_at + retry_horizon")"
for _ in $(seq 200); do
    [ "$(q "SELECT count(*) FROM paynotify_delivery WHERE endpoint_id = $ep_b AND dead_at IS NULL")" = 0 ] && break
    sleep 0.1
done
# how many attempts fit into the 3 s horizon depends on how busy the
# relay is (its other endpoint times out): each was tried, failed the same
# way, and died at its horizon (the next check), whatever the count
dead=$(q "SELECT count(*), count(delivered_at), count(*) FILTER (WHERE attempts >= 1 AND last_status IS NULL AND last_error = 'could not connect') FROM paynotify_delivery WHERE endpoint_id = $ep_b AND dead_at IS NOT NULL")
check "40 dead letters, each with its attempts and last error (a class, not libcurl's text)" "40|0|40" "$dead"
[ "$dead" = "40|0|40" ] || q "SELECT id, attempts, last_status, last_error, started_at, dead_at FROM paynotify_delivery WHERE endpoint_id = $ep_b ORDER BY id" | sed 's/^/#   /'
echo "# attempts per dead letter: $(q "SELECT min(attempts) || '..' || max(attempts) FROM paynotify_delivery WHERE endpoint_id = $ep_b")"
# never before the horizon (the code's promise); how soon after it is the
# relay's speed (40 due at once, 8 in flight), printed below, checked only
# against a hang (5 s)
check "each dead once its horizon passed, not before (and within 5 s of it)" "0" \
    "$(q "SELECT count(*) FROM paynotify_delivery d JOIN paynotify_endpoint e ON e.id = d.endpoint_id WHERE endpoint_id = $ep_b AND NOT (dead_at >= started_at + retry_horizon AND dead_at < started_at + retry_horizon + interval '5 seconds')")"
echo "# dead after horizon + $(q "SELECT round(extract(epoch FROM max(dead_at - started_at - retry_horizon))::numeric, 2) FROM paynotify_delivery d JOIN paynotify_endpoint e ON e.id = d.endpoint_id WHERE endpoint_id = $ep_b") s at most"
# the live endpoint's receiver fails and is slow at random: wait for it
live_sql="SELECT count(*) FROM paynotify_delivery WHERE endpoint_id = $ep_a AND order_no > 'R$(printf %05d "$ORDERS")' AND delivered_at IS NOT NULL"
for _ in $(seq 300); do
    [ "$(q "$live_sql")" = 40 ] && break
    sleep 0.1
done
check "the same events reached the live endpoint" 40 "$(q "$live_sql")"

# one call replays them, here to a repaired URL
as_role ops -c "SELECT paynotify_alter_endpoint($ep_b, url => 'http://127.0.0.1:$rport/fast/b')" >/dev/null
check "paynotify_redeliver requeues every dead letter" 40 "$(as_role ops -Atc "SELECT paynotify_redeliver(endpoint_id => $ep_b)")"
for _ in $(seq 100); do
    [ "$(q "SELECT count(*) FROM paynotify_delivery WHERE endpoint_id = $ep_b AND delivered_at IS NULL")" = 0 ] && break
    sleep 0.1
done
check "replayed dead letters delivered" "40|0" \
    "$(q "SELECT count(delivered_at), count(dead_at) FROM paynotify_delivery WHERE endpoint_id = $ep_b")"
check "the receiver got each of them" 40 "$(grep -c '"path": "/fast/b"' "$dir/received" | tr -d ' ')"

# the independent check of every signature
if [ $npm_ok = 1 ]; then
    out=$(NODE_PATH="$dir/npm/node_modules" node test/e2e/relay_verify.js "$secret" "$dir/received" 2>&1)
    rc=$?
    echo "# standardwebhooks: $(echo "$out" | tail -1)"
    check "standardwebhooks verifies every request" 0 $rc
fi

# graceful stop (idle relays)
for r in r1 r2; do kill -TERM "${relay_pid[$r]}"; done
for r in r1 r2; do
    rc=124
    for _ in $(seq 50); do
        if ! pn_alive "${relay_pid[$r]}"; then wait "${relay_pid[$r]}"; rc=$?; break; fi
        sleep 0.1
    done
    check "SIGTERM stops relay $r with status 0" 0 "$rc"
done

# SIGTERM in the middle of a batch: the requests in flight finish and are
# recorded, the rest is left untouched
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
ep_c=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/slow/c', '$secret', max_in_flight => 2)")
"$SEND" --gateway stripe --keys test/vectors/keys --mode distinct -n 10 --start $((ORDERS + 41)) \
    --order-format 'R%05d' --channel st --now "$(date +%s)" --quiet --dump-sql "$dir/pay3.sql" >/dev/null
traffic "$dir/pay3.sql"
start_relay r3 --timeout=5000
for _ in $(seq 100); do [ "$(grep -c '"path": "/slow/c"' "$dir/received")" -ge 2 ] && break; sleep 0.05; done
t_term=$(date +%s.%N)
kill -TERM "${relay_pid[r3]}"
wait "${relay_pid[r3]}"
rc=$?
# the 2 in flight take 1 s at the receiver; 4 s, under the 5 s request
# timeout, tells "finished them" from "waited them out" on a slow machine too
check "SIGTERM mid-batch: status 0 within 4 s" "0 1" "$rc $(python3 -c "print(int($(date +%s.%N) - $t_term < 4))")"
check "SIGTERM mid-batch: the 2 requests in flight recorded delivered, the 8 others untouched" "2|8|10" \
    "$(q "SELECT count(delivered_at), count(*) FILTER (WHERE attempts = 0 AND delivered_at IS NULL), count(*) FROM paynotify_delivery WHERE endpoint_id = $ep_c")"
check "the receiver saw exactly those 2" 2 "$(grep -c '"path": "/slow/c"' "$dir/received")"

# A request that hangs does not hold back the other deliveries of its
# endpoint: a slot refilled as soon as a request ends.  One order's event
# hangs at a receiver of its own (10 s, past this relay's 8 s request
# timeout); the 12 events of other orders that come after it, to the same
# endpoint (max_in_flight 3), all arrive before that request times out.
# (In rounds, they waited for it.)  The window is wide: on any machine the
# 12 take a fraction of it, and in rounds they would come after it.
python3 test/e2e/relay_receiver.py "$dir/rport_ho" "$dir/received_ho" "$secret" --hang 10 &
pids+=($!)
for _ in $(seq 100); do [ -s "$dir/rport_ho" ] && break; sleep 0.1; done
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
ep_o=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$(cat "$dir/rport_ho")/hang-order/O1/', '$secret', channels => '{hangone}', max_in_flight => 3)")
as_role ops -c "SELECT paynotify_alter_endpoint($ep_o, retry_base => '1 day', retry_max => '1 day')" >/dev/null
start_relay r6 --timeout=8000
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'hangone', 'O1', 'o1', 1)" >/dev/null
for _ in $(seq 200); do grep -q '"path": "/hang-order/O1/"' "$dir/received_ho" 2>/dev/null && break; sleep 0.05; done
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
   SELECT 'paid', 'hangone', 'O' || i, 'o' || i, 1 FROM generate_series(2, 13) i" >/dev/null
for _ in $(seq 600); do [ "$(grep -c '"path": "/hang-order/O1/"' "$dir/received_ho")" -ge 13 ] && break; sleep 0.05; done
for _ in $(seq 600); do [ "$(q "SELECT count(*) FROM paynotify_delivery WHERE endpoint_id = $ep_o AND attempts > 0")" = 13 ] && break; sleep 0.05; done
kill -TERM "${relay_pid[r6]}"; wait "${relay_pid[r6]}" 2>/dev/null
hang_order=$(python3 - "$dir/received_ho" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
reqs = [r for r in reqs if r["path"] == "/hang-order/O1/"]
first = {}
for r in reqs:
    first.setdefault(json.loads(r["body"])["order_no"], r["at"])
hung = first.get("O1")
others = [t for o, t in first.items() if o != "O1"]
# the relay's request timeout is 8 s here: what arrived while O1's request was in flight
print(len(others), sum(1 for t in others if hung is not None and hung < t < hung + 8.0), len(reqs))
EOF
)
check "a hanging request: the endpoint's 12 other events all arrive while it is in flight (13 requests)" "12 12 13" "$hang_order"
check "... and it is recorded as a failed attempt (timeout), the 12 others delivered" "1|1|12" \
    "$(q "SELECT count(*) FILTER (WHERE order_no = 'O1' AND delivered_at IS NULL AND attempts = 1 AND last_error = 'timed out'), count(*) FILTER (WHERE order_no = 'O1'), count(delivered_at) FROM paynotify_delivery WHERE endpoint_id = $ep_o")"

# A receiver that hangs does not hold the other endpoints back: its backlog
# of 300 events (distinct orders) and one event for a healthy endpoint, a
# relay with a 1 s request timeout.  The claim gives each endpoint at most
# its max_in_flight (8), so the healthy event goes in the next round.
python3 test/e2e/relay_hang.py "$dir/hport" "$dir/hung" &
pids+=($!)
for _ in $(seq 50); do [ -s "$dir/hport" ] && break; sleep 0.1; done
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
ep_h=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$(cat "$dir/hport")/hang', '$secret', channels => '{hostile}')")
as_role ops -c "SELECT paynotify_alter_endpoint($ep_h, retry_base => '1 day', retry_max => '1 day')" >/dev/null
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/good', '$secret', channels => '{good}')" >/dev/null
# (written straight into the outbox, as paynotify_handle would for these channels)
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
   SELECT 'paid', 'hostile', 'H' || i, 'h' || i, 1 FROM generate_series(1, 300) i" >/dev/null
start_relay r4 --timeout=1000
# the relay busy with the backlog: its max_in_flight (8) hanging at once
for _ in $(seq 300); do [ "$(wc -l <"$dir/hung" 2>/dev/null || echo 0)" -ge 8 ] && break; sleep 0.05; done
t_good=$(date +%s.%N)
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'good', 'G1', 'g1', 1)" >/dev/null
for _ in $(seq 300); do grep -q '"path": "/fast/good"' "$dir/received" && break; sleep 0.1; done
waited=$(python3 -c "print(round($(date +%s.%N) - $t_good, 1))")
echo "# the healthy endpoint's event arrived after $waited s, the hanging receiver had $(wc -l < "$dir/hung") connections"
check "a hanging receiver with a backlog of 300 holds another endpoint's event back less than 5 s" "1 1" \
    "$(grep -c '"path": "/fast/good"' "$dir/received") $(python3 -c "print(int($waited < 5))")"

# NOTIFYs arriving while the relay stays busy (here with the hanging
# receiver's backlog) are freed every round, not kept until it is idle
rss() { awk '/VmRSS/{print $2}' "/proc/${relay_pid[r4]}/status"; }
rss0=$(rss)
q "SELECT count(pg_notify('paynotify', format('{\"id\": %s, \"event\": \"paid\", \"channel\": \"st\", \"order_no\": \"PN2026010100%s\"}', i, i))) FROM generate_series(1, 150000) i" >/dev/null
# measured once the relay's session has passed them all on (the queue
# empty again: its backend sends them as the relay reads them), else a
# relay that had not read them yet would pass
for _ in $(seq 300); do [ "$(q "SELECT pg_notification_queue_usage() = 0")" = t ] && break; sleep 0.1; done
sleep 0.5
rss1=$(rss)
echo "# relay RSS before and after 150,000 NOTIFYs while busy: $rss0 kB, $rss1 kB (queue usage after: $(q "SELECT pg_notification_queue_usage()"))"
check "a busy relay reads the NOTIFYs it gets (the queue empty again) and does not keep them (RSS grows < 5 MB over 150,000)" "t 1" \
    "$(q "SELECT pg_notification_queue_usage() = 0") $([ -n "$rss1" ] && [ $((rss1 - rss0)) -lt 5000 ] && echo 1 || echo 0)"
kill -TERM "${relay_pid[r4]}"; wait "${relay_pid[r4]}" 2>/dev/null

# One result the database refuses (here a trigger, as superuser, fails the
# update that records an attempt of one delivery) does not undo the other results of the batch:
# the healthy endpoint's event is recorded delivered and POSTed once; the
# refused one is logged once and kept, its report tried again (not given
# back as not attempted, which sent it again and again, attempts 0): once
# the database takes it, it is recorded, POSTed once, attempts 1
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/poison', '$secret', channels => '{poison}')" >/dev/null
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/healthy', '$secret', channels => '{healthy}')" >/dev/null
sql -q >/dev/null <<'SQL'
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN RAISE EXCEPTION 'refused for the test'; END$$;
CREATE TRIGGER refuse_poison BEFORE UPDATE ON paynotify_delivery
	FOR EACH ROW WHEN (NEW.channel = 'poison' AND NEW.lease IS NULL AND OLD.lease IS NOT NULL) EXECUTE FUNCTION refuse_poison();
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
	VALUES ('paid', 'poison', 'P1', 'p1', 1), ('paid', 'healthy', 'Q1', 'q1', 1);
SQL
start_relay r5
# (it waits for what it checks, up to 60 s, never a fixed time; then one
# second more, in which the relay's reports of it are refused again)
for _ in $(seq 600); do
    [ "$(q "SELECT count(delivered_at) FROM paynotify_delivery WHERE channel = 'healthy'")" = 1 ] &&
        grep -q 'could not record the result of delivery' "$dir/relay-r5.log" && break
    sleep 0.1
done
sleep 1
check "a refused result: the other endpoint's delivery is recorded and POSTed once" "1|1|1" \
    "$(q "SELECT count(delivered_at), sum(attempts) FROM paynotify_delivery WHERE channel = 'healthy'")|$(grep -c '"path": "/fast/healthy"' "$dir/received")"
check "a refused result is logged once, kept (POSTed once, not released: attempts 0, still leased)" "1|1|0|t" \
    "$(grep -c 'could not record the result of delivery' "$dir/relay-r5.log")|$(grep -c '"path": "/fast/poison"' "$dir/received")|$(q "SELECT attempts, lease IS NOT NULL FROM paynotify_delivery WHERE channel = 'poison'")"
q "DROP TRIGGER refuse_poison ON paynotify_delivery" >/dev/null
for _ in $(seq 600); do
    [ "$(q "SELECT count(delivered_at) FROM paynotify_delivery WHERE channel = 'poison'")" = 1 ] && break
    sleep 0.1
done
kill -TERM "${relay_pid[r5]}"; wait "${relay_pid[r5]}" 2>/dev/null
check "... and recorded once the database takes it: delivered, attempts 1, POSTed once" "1|1|1" \
    "$(q "SELECT count(delivered_at), sum(attempts) FROM paynotify_delivery WHERE channel = 'poison'")|$(grep -c '"path": "/fast/poison"' "$dir/received")"

# A row the relay reports locked by another session for longer than the
# request timeout (an operator dropping an endpoint, then rolling back)
# while the receiver answers: the report skips it (lock_timeout bounds any
# other wait) and reports it again once the lock is gone, so no answered
# request is recorded as timed out or sent twice, and other endpoints'
# deliveries go on meanwhile.  Six deliveries over endpoints A and B
# (answered 200 after 1 s), request timeout 4 s; as soon as B's are leased,
# an operator's transaction locks them (paynotify_drop_endpoint) and holds
# them until this test has seen what it checks and at least 5 s have
# passed (then it is cancelled: rolled back); meanwhile an event for C
# (answered after 1 s: in flight when A's and B's results are reported)
# and one for E (answered at once: a lease during the hold).  Each wait
# waits for what it checks (up to 60 s), never a fixed time.
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
ep_la=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/slow/lka', '$secret', channels => '{lka}')")
ep_lb=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/slow/lkb', '$secret', channels => '{lkb}')")
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/slow/lkc', '$secret', channels => '{lkc}')" >/dev/null
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/lke', '$secret', channels => '{lke}')" >/dev/null
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
   SELECT 'paid', CASE WHEN i <= 3 THEN 'lka' ELSE 'lkb' END, 'K' || i, 'k' || i, 1 FROM generate_series(1, 6) i;
   SELECT paynotify_relay_fanout(10)" >/dev/null
start_relay r8 --timeout=4000
for _ in $(seq 600); do
    [ "$(q "SELECT count(*) FROM paynotify_delivery WHERE channel = 'lkb' AND lease IS NOT NULL")" = 3 ] && break
    sleep 0.02
done
PGAPPNAME=pn_relay_hold as_role ops -c "BEGIN" -c "SELECT paynotify_drop_endpoint($ep_lb)" -c "SELECT pg_sleep(120)" \
    -c "ROLLBACK" >/dev/null 2>&1 &
hold=$!; pids+=($hold); t_hold=$(date +%s.%N)
for _ in $(seq 600); do
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pn_relay_hold' AND query LIKE '%pg_sleep%'")" = 1 ] && break
    sleep 0.02
done
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'lkc', 'K7', 'k7', 1)" >/dev/null
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'lke', 'K8', 'k8', 1)" >/dev/null
during=""
for _ in $(seq 600); do
    during="$(grep -c '"path": "/fast/lke"' "$dir/received")|$(q "SELECT count(delivered_at) FROM paynotify_delivery WHERE endpoint_id = $ep_la")|$(q "SELECT count(delivered_at) FROM paynotify_delivery WHERE channel = 'lkc'")"
    [ "$during" = "1|3|1" ] && break
    sleep 0.1
done
held=$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pn_relay_hold'")
check "while B's rows are locked: E's new delivery is leased and sent, A's and C's results recorded" "1|3|1|1" "$during|$held"
while python3 -c "import sys; sys.exit(0 if $(date +%s.%N) - $t_hold < 5 else 1)"; do sleep 0.2; done
q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'pn_relay_hold'" >/dev/null
wait "$hold" 2>/dev/null
for _ in $(seq 600); do [ "$(q "SELECT count(*) FROM paynotify_delivery WHERE channel IN ('lka', 'lkb', 'lkc', 'lke') AND delivered_at IS NULL")" = 0 ] && break; sleep 0.1; done
kill -TERM "${relay_pid[r8]}"; wait "${relay_pid[r8]}" 2>/dev/null
check "... then B's results are recorded: all 8 delivered at the first attempt, none timed out, each sent once" "8|8|0|3|3|1|1" \
    "$(q "SELECT count(delivered_at), count(*) FILTER (WHERE attempts = 1), count(*) FILTER (WHERE last_error IS NOT NULL) FROM paynotify_delivery WHERE channel IN ('lka', 'lkb', 'lkc', 'lke')")|$(grep -c '"path": "/slow/lka"' "$dir/received")|$(grep -c '"path": "/slow/lkb"' "$dir/received")|$(grep -c '"path": "/slow/lkc"' "$dir/received")|$(grep -c '"path": "/fast/lke"' "$dir/received")"

# A disabled endpoint's backlog is not walked by the claims: 20,000 pending
# deliveries of a disabled endpoint, one due delivery of an enabled one; a
# claim reads (table statistics of paynotify_delivery) only a few rows
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
ep_bulk=$(as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$closed/bulk', '$secret', channels => '{bulk}')")
sql -q >/dev/null <<SQL
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
	SELECT 'paid', 'bulk', 'B' || i, 'b' || i, 1 FROM generate_series(1, 20000) i;
SELECT paynotify_relay_fanout(20000);
SQL
as_role ops -c "SELECT paynotify_alter_endpoint($ep_bulk, enabled => false)" >/dev/null
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/one', '$secret', channels => '{one}')" >/dev/null
sql -q >/dev/null <<SQL
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'one', 'O1', 'o1', 1);
SELECT paynotify_relay_fanout(10);
VACUUM ANALYZE paynotify_delivery;
SQL
rows_read="SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relname = 'paynotify_delivery'"
# the counters reach pg_stat_user_tables when a session ends, a moment after
# psql returns: r0 once two reads 0.3 s apart agree (the sessions above
# counted), r1 once the claim's session has counted (it reads at least the
# row it claims), so that "fewer than 100" is never a count not yet made
r0=$(q "$rows_read")
for _ in $(seq 30); do sleep 0.3; r=$(q "$rows_read"); [ "$r" = "$r0" ] && break; r0=$r; done
claimed=$(as_role relay -Atc "BEGIN" -c "SELECT count(*) FROM paynotify_relay_claim(100)" -c "ROLLBACK")
for _ in $(seq 100); do r1=$(q "$rows_read"); [ "$r1" -gt "$r0" ] && break; sleep 0.1; done
echo "# one claim read $((r1 - r0)) rows of paynotify_delivery (20,001 pending, 20,000 of a disabled endpoint)"
check "a claim skips a disabled endpoint's backlog: 1 claimed, at least 1 and fewer than 100 rows read" "1 1" \
    "$claimed $([ $((r1 - r0)) -ge 1 ] && [ $((r1 - r0)) -lt 100 ] && echo 1 || echo 0)"

# Without PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 the relay connects to no loopback,
# private, link-local or own address, by IP or by a name that resolves to one
# (checked on the socket it opens): an operator cannot make it probe the
# relay's network, and last_error says only that
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
for u in "http://127.0.0.1:$rport/fast/ssrf1" "http://localhost:$rport/fast/ssrf2" \
         "http://[::1]:$rport/fast/ssrf3" "http://10.255.255.1:$rport/fast/ssrf4" \
         "http://169.254.169.254/latest/meta-data/"; do
    as_role ops -Atc "SELECT paynotify_add_endpoint('$u', '$secret', channels => '{ssrf}')" >/dev/null
done
# and this host's own address, whatever its class (it reaches every service
# listening on all addresses)
own=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -v '^127\.\|:')
nssrf=5
if [ -n "$own" ]; then
    as_role ops -Atc "SELECT paynotify_add_endpoint('http://$own:$rport/fast/ssrf6', '$secret', channels => '{ssrf}')" >/dev/null
    nssrf=6
fi
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'ssrf', 'S1', 's1', 1)" >/dev/null
env PAYNOTIFY_DSN="host=$dir port=$port dbname=postgres user=relay" PAYNOTIFY_RELAY_CONNECT_TIMEOUT=1000 \
    timeout 30 "$RELAY" --once >"$dir/relay-ssrf.out" 2>"$dir/relay-ssrf.log"
check "no private address reached by default: --once fails, the receiver got nothing" "1 0" \
    "$? $(grep -c '/fast/ssrf' "$dir/received")"
# --once says what failed and why (the class recorded in last_error), then
# sums up, on standard output
check "--once: one line per failure with its reason, then the summary" \
    "$nssrf|claimed $nssrf, delivered 0, failed $nssrf" \
    "$(grep -cE '^delivery [0-9]+ \(evt_[0-9a-f]{16}_[0-9]+\) to endpoint [0-9]+ failed: address not allowed \(not public; see PAYNOTIFY_RELAY_ALLOW_PRIVATE\)$' "$dir/relay-ssrf.out")|$(tail -1 "$dir/relay-ssrf.out")"
check "--once: standard output has nothing else" "$((nssrf + 1))" "$(wc -l <"$dir/relay-ssrf.out" | tr -d ' ')"
check "what the operator (admin) reads: one coarse class for each, no status" \
    "$nssrf|$nssrf|0" \
    "$(as_role ops -Atc "SELECT count(*), count(*) FILTER (WHERE last_error LIKE 'address not allowed%'), count(last_status) FROM paynotify_delivery WHERE channel = 'ssrf'")"

# this host's own public address, also written as an IPv6 address that
# carries it (::ffff:a.b.c.d reaches it through an IPv6 socket): in a
# network namespace of its own whose loopback has a public address (the
# address above may be of a class refused anyway, as 192.0.2.x is)
if unshare -n true 2>/dev/null && command -v ip >/dev/null; then
    as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
    oport=$(pn_free_port)
    for u in "http://100.128.0.1:$oport/own1" "http://[::ffff:100.128.0.1]:$oport/own2" \
             "http://[::ffff:6480:1]:$oport/own3"; do
        as_role ops -Atc "SELECT paynotify_add_endpoint('$u', '$secret', channels => '{own}')" >/dev/null
    done
    q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'own', 'W1', 'w1', 1)" >/dev/null
    : >"$dir/own-received"
    unshare -n bash -c '
        ip link set lo up && ip addr add 100.128.0.1/32 dev lo || exit 3
        python3 -c "
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers[\"Content-Length\"]))
        open(sys.argv[1], \"a\").write(self.path + \"\\n\")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer((\"0.0.0.0\", int(sys.argv[2])), H).serve_forever()" "$1" "$2" &
        rp=$!
        for _ in $(seq 50); do python3 -c "import socket,sys; socket.create_connection((\"100.128.0.1\", int(sys.argv[1])), 1)" "$2" 2>/dev/null && break; sleep 0.1; done
        shift 2
        "$@"; rc=$?
        kill $rp; wait $rp 2>/dev/null
        exit $rc' own "$dir/own-received" "$oport" \
        env PAYNOTIFY_DSN="host=$dir port=$port dbname=postgres user=relay" PAYNOTIFY_RELAY_CONNECT_TIMEOUT=1000 \
        timeout 30 "$RELAY" --once >"$dir/relay-own.log" 2>&1
    check "this host's own public address, as IPv4 and as IPv4-mapped IPv6: --once fails, the receiver got nothing, each refused" \
        "1 0 3" "$? $(grep -c '/own' "$dir/own-received") $(q "SELECT count(*) FROM paynotify_delivery WHERE channel = 'own' AND last_error LIKE 'address not allowed%' AND last_status IS NULL")"
else
    skipped "this host's own public address as IPv4-mapped IPv6 (no network namespace: unshare -n, ip)"
fi

# max_in_flight holds across relays: two relays, a hanging receiver with
# max_in_flight 2 and a backlog of 50: two connections at once, not four
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
: >"$dir/hung"
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$(cat "$dir/hport")/hang2', '$secret', channels => '{two}', max_in_flight => 2)" >/dev/null
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount)
   SELECT 'paid', 'two', 'T' || i, 't' || i, 1 FROM generate_series(1, 50) i" >/dev/null
# (connections counted 3 s after two are open, well inside the 8 s request
# timeout: none has ended, so each is still open, and both relays have had
# seconds to claim)
start_relay r6 --timeout=8000
start_relay r7 --timeout=8000
for _ in $(seq 120); do [ "$(wc -l < "$dir/hung")" -ge 2 ] && break; sleep 0.05; done
sleep 3
check "two relays keep an endpoint's max_in_flight (2): connections within one request timeout" 2 \
    "$(wc -l < "$dir/hung" | tr -d ' ')"
kill -TERM "${relay_pid[r6]}" "${relay_pid[r7]}"; wait "${relay_pid[r6]}" "${relay_pid[r7]}" 2>/dev/null

# --once when everything goes: the summary alone, exit 0; again with
# nothing due
as_role ops -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" >/dev/null
as_role ops -Atc "SELECT paynotify_add_endpoint('http://127.0.0.1:$rport/fast/once', '$secret', channels => '{once}')" >/dev/null
q "INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'once', 'N1', 'n1', 1), ('paid', 'once', 'N2', 'n2', 1)" >/dev/null
"${relay_env[@]}" timeout 30 "$RELAY" --once >"$dir/once.out" 2>"$dir/relay-once.log"
check "--once, all delivered: exit 0, the summary alone" "0|claimed 2, delivered 2, failed 0" "$?|$(cat "$dir/once.out")"
"${relay_env[@]}" timeout 30 "$RELAY" --once >"$dir/once.out" 2>>"$dir/relay-once.log"
check "--once, nothing due: exit 0" "0|claimed 0, delivered 0, failed 0" "$?|$(cat "$dir/once.out")"

# A setup the relay cannot work with is named in its log, with what to do:
# a password it cannot find (PGPASSFILE), the extension in another schema
# (PAYNOTIFY_RELAY_SCHEMA, the schema pg_extension gives) or not in the
# database, a role without the relay capacity
sql -q >/dev/null <<SQL
CREATE ROLE relay_pw LOGIN PASSWORD 'relay-pw-secret';
CREATE ROLE relay_none LOGIN;
CREATE DATABASE payschema;
CREATE DATABASE noext;
SQL
pn_psql "$dir" "$port" -d payschema -q >/dev/null <<SQL
CREATE SCHEMA payments;
CREATE EXTENSION paynotify SCHEMA payments;
SELECT payments.paynotify_grant('relay_pw', 'relay');
SELECT payments.paynotify_grant('relay', 'relay');
SQL
sql -q -c "SELECT paynotify_grant('relay_pw', 'relay')" >/dev/null
{ echo "host all relay_pw 127.0.0.1/32 scram-sha-256"; cat "$dir/data/pg_hba.conf"; } >"$dir/hba.new" &&
    cp "$dir/hba.new" "$dir/data/pg_hba.conf" && q "SELECT pg_reload_conf()" >/dev/null
once_as() {	# once_as NAME DSN [VAR=value...]: --once, stdout in NAME.out, log in relay-NAME.log; the status
    local name=$1 dsn=$2; shift 2
    env -u PGPASSFILE -u PGPASSWORD HOME="$dir/nohome" PAYNOTIFY_DSN="$dsn" "$@" \
        timeout 30 "$RELAY" --once >"$dir/$name.out" 2>"$dir/relay-$name.log"
}
once_as nopw "host=127.0.0.1 port=$port dbname=postgres user=relay_pw" PGPASSFILE="$dir/pgpass"
check "no password: exit 1, the log names PGPASSFILE and its state" "1|1" \
    "$?|$(grep -c "password and none was found: libpq reads it from the file PGPASSFILE names (PGPASSFILE=$dir/pgpass, which does not exist)" "$dir/relay-nopw.log")"
once_as nohome "host=127.0.0.1 port=$port dbname=postgres user=relay_pw"
check "no password, PGPASSFILE unset: the log says which file libpq read" "1|1" \
    "$?|$(grep -c "(PGPASSFILE is unset, so ~/.pgpass: $dir/nohome/.pgpass, which does not exist)" "$dir/relay-nohome.log")"
printf '127.0.0.1:%s:*:relay_pw:relay-pw-secret\n' "$port" >"$dir/pgpass"
chmod 644 "$dir/pgpass"
once_as pwopen "host=127.0.0.1 port=$port dbname=postgres user=relay_pw" PGPASSFILE="$dir/pgpass"
check "a password file others can read: exit 1, the log says libpq ignores it" "1|1" \
    "$?|$(grep -c "PGPASSFILE=$dir/pgpass, which has group or world access (libpq ignores it: chmod 0600)" "$dir/relay-pwopen.log")"
chmod 600 "$dir/pgpass"
once_as pwok "host=127.0.0.1 port=$port dbname=postgres user=relay_pw" PGPASSFILE="$dir/pgpass"
check "the password from PGPASSFILE (0600): exit 0" "0|claimed 0, delivered 0, failed 0" "$?|$(cat "$dir/pwok.out")"
once_as schema "host=$dir port=$port dbname=payschema user=relay"
check "the extension in schema payments, PAYNOTIFY_RELAY_SCHEMA unset: exit 1, the log says what to set" "1|1|1" \
    "$?|$(grep -c 'function public.paynotify_relay_fanout(integer) does not exist' "$dir/relay-schema.log")|$(grep -c 'PAYNOTIFY_RELAY_SCHEMA is "public", but the paynotify extension of database "payschema" is in schema "payments": set PAYNOTIFY_RELAY_SCHEMA=payments$' "$dir/relay-schema.log")"
once_as schema_ok "host=$dir port=$port dbname=payschema user=relay" PAYNOTIFY_RELAY_SCHEMA=payments
check "... with PAYNOTIFY_RELAY_SCHEMA=payments: exit 0" "0|claimed 0, delivered 0, failed 0" "$?|$(cat "$dir/schema_ok.out")"
once_as noext "host=$dir port=$port dbname=noext user=relay"
check "a database without the extension: exit 1, the log says so" "1|1" \
    "$?|$(grep -c 'database "noext" has no paynotify extension' "$dir/relay-noext.log")"
once_as nocap "host=$dir port=$port dbname=payschema user=relay_none" PAYNOTIFY_RELAY_SCHEMA=payments
check "a role without the relay capacity: exit 1, the log says what to grant" "1|1" \
    "$?|$(grep -c "the role \"relay_none\" needs the relay capacity in database \"payschema\": there, as the extension's owner, SELECT payments.paynotify_grant('relay_none', 'relay')" "$dir/relay-nocap.log")"
if grep -q 'relay-pw-secret' "$dir"/relay-*.log "$dir"/*.out; then not_ok "the password appears in no log"; else ok "the password appears in no log"; fi

# the command line
check "--version" "paynotify-relay $(sed -n "s/^default_version = '\(.*\)'/\1/p" paynotify.control)" "$("$RELAY" --version)"
missing=$(for v in $(grep -o '"PAYNOTIFY_[A-Z_]*"' shim/relay/*.c | cut -d: -f2 | tr -d '"' | sort -u); do
    "$RELAY" --help | grep "^  $v (default: " >/dev/null || echo "$v"; done)
check "--help names every variable with its default" "" "$missing"
for dsn in "host=127.0.0.1 port=1 user=relay password=Sup3rSecret" "postgresql://relay:Sup3rSecret@127.0.0.1:1/postgres"; do
    "$RELAY" --dsn="$dsn" --once >/dev/null 2>"$dir/err"
    check "--dsn with a password is refused: exit 2, told why, the password not echoed ($dsn)" "2 1 0" \
        "$? $(grep -c -- '--dsn must not contain a password' "$dir/err") $(grep -c Sup3rSecret "$dir/err")"
done
PAYNOTIFY_RELAY_BATCH=0 "$RELAY" >/dev/null 2>"$dir/err"
check "a bad setting: exit 2, the variable named" "2 1" "$? $(grep -c 'PAYNOTIFY_RELAY_BATCH must be' "$dir/err")"

if grep -qF "${secret#whsec_}" "$dir"/relay-*.log; then not_ok "no secret in the relay's log"; else ok "no secret in the relay's log"; fi
finish
