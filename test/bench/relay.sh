#!/usr/bin/env bash
# paynotify-relay's commit-to-receiver latency: prints figures, asserts nothing.
#
#   test/bench/relay.sh [--smoke]
#
# --smoke: 100 payments/s for 1 s per mode, after 1 s without load, and 20
# payments/s to each receiver below, unless BENCH_RATES, BENCH_SECONDS,
# BENCH_IDLE and BENCH_SLOW_RATE say otherwise, to see that it still runs
# (the suite's test/bench/smoke.sh); the figures mean little at that size.
#
# A throwaway cluster with default durability on loopback; pgbench applies
# pre-signed Stripe payments through paynotify_handle at a fixed rate
# (BENCH_RATES, default "1000 20" per second, one run each) for
# BENCH_SECONDS (default 10) while one
# paynotify-relay (default settings) delivers each "paid" event to a
# loopback receiver that answers 200 at once and checks every signature.
# Latency per event: the receiver's arrival time minus the event's
# occurred_at (the paying transaction's start, a millisecond or so before
# its commit).  Run with each paynotify.notify mode (BENCH_MODES, default
# "on coalesced:50 coalesced:1000 off"): on (a NOTIFY per event; the relay
# LISTENs and wakes at once), coalesced:MS (a wake-up at most once per
# backend per MS, paynotify.notify_interval) and off (the relay only polls
# the index of due deliveries).  Each run starts
# after BENCH_IDLE (default 2) s without load, so the relay has backed off
# to a slow poll.
#
# Then a receiver that is sometimes slow, against a healthy one, in the
# same run: BENCH_SLOW_RATE payments/s (default 10) for BENCH_SECONDS to an
# endpoint that answers every request at once (healthy), then to one that
# answers 20 % of the requests 500 and 5 % only after the relay's request
# timeout (sometimes slow; test/e2e/relay_receiver.py's /flaky/ path), with
# a relay whose request timeout is 2 s (paynotify.notify = on).  Figures:
# the commit-to-acceptance latency of the events accepted at their first
# attempt (the others wait for their retry, by design).  BENCH_RELAY names
# another relay binary to measure (e.g. an earlier version's).
# Everything started is stopped by pid.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

rates=${BENCH_RATES:-${BENCH_RATE:-1000 20}}
modes=${BENCH_MODES:-on coalesced:50 coalesced:1000 off}
secs=${BENCH_SECONDS:-10}
slow_rate=${BENCH_SLOW_RATE:-10}
relay_bin=${BENCH_RELAY:-$PWD/shim/relay/paynotify-relay}
if [ "${1:-}" = --smoke ]; then
    rates=${BENCH_RATES:-${BENCH_RATE:-100}}
    secs=${BENCH_SECONDS:-1}
    idle=${BENCH_IDLE:-1}
    slow_rate=${BENCH_SLOW_RATE:-20}
fi
idle=${idle:-${BENCH_IDLE:-2}}
n=1000
for rate in $rates; do for _ in $modes; do n=$((n + rate * secs + rate)); done; done
n=$((n + 2 * (slow_rate * secs + slow_rate)))
dir=$(mktemp -d /tmp/paynotify-relaybench.XXXXXX)
chmod 755 "$dir"
port=$(pn_free_port)
pids=()
cleanup() {
    set +e
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pn_cluster_stop "$dir"
    rm -rf "$dir"
}
trap cleanup EXIT

# (PN_BENCH_BUILT=1: built and installed already, by test/bench/smoke.sh)
[ -n "${PN_BENCH_BUILT:-}" ] || { pn_install && make -s -C shim >/dev/null; }
pn_cluster_start "$dir" "$port"
sql() { pn_psql "$dir" "$port" -d postgres "$@"; }
secret="whsec_$(openssl rand -base64 32)"
sql -q >/dev/null <<SQL
CREATE EXTENSION paynotify;
CREATE ROLE relay LOGIN;
SELECT paynotify_grant('relay', 'relay');
CREATE TABLE orders (order_no text PRIMARY KEY, status text NOT NULL, amount bigint);
INSERT INTO orders SELECT 'B' || lpad(i::text, 8, '0'), 'pending', 8888 FROM generate_series(1, $n) i;
SELECT paynotify_bind_orders('orders', amount_column => 'amount');
SELECT paynotify_add_channel('st', 'stripe', '{}');
SELECT paynotify_add_key('st', 's1', '$(cat test/vectors/keys/stripe_secret_1.txt)');
CREATE SCHEMA bench;
CREATE TABLE bench.req (id serial PRIMARY KEY, headers jsonb, body bytea);
CREATE SEQUENCE bench.seq;
SQL
echo "== signing $n Stripe payments"
shim/paynotify-send --gateway stripe --keys test/vectors/keys --mode distinct -n "$n" \
    --order-format 'B%08d' --channel st --now "$(date +%s)" --seed 5 --quiet --dump-sql "$dir/signed.sql" >/dev/null
sed -e "s/^SELECT outcome FROM paynotify_handle('st', /INSERT INTO bench.req (headers, body) VALUES (/" \
    "$dir/signed.sql" | sql -q >/dev/null
sql -q -c "VACUUM ANALYZE bench.req" >/dev/null
cat >"$dir/handle.sql" <<'EOS'
SELECT h.outcome FROM bench.req r, LATERAL paynotify_handle('st', r.headers, r.body) h WHERE r.id = (SELECT nextval('bench.seq'));
EOS

python3 test/e2e/relay_receiver.py "$dir/rport" "$dir/received" "$secret" --hang 2.5 &
pids+=($!)
for _ in $(seq 50); do [ -s "$dir/rport" ] && break; sleep 0.1; done
sql -q -c "SELECT paynotify_add_endpoint('http://127.0.0.1:$(cat "$dir/rport")/fast/erp', '$secret', events => '{paid}')" >/dev/null
PAYNOTIFY_DSN="host=$dir port=$port dbname=postgres user=relay" PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 \
    "$relay_bin" >"$dir/relay.log" 2>&1 &
relay_pid=$!
pids+=($relay_pid)

for rate in $rates; do
for notify in $modes; do
    sql -q -c "ALTER DATABASE postgres SET paynotify.notify = ${notify%%:*}" \
        -c "ALTER DATABASE postgres SET paynotify.notify_interval = $(case $notify in *:*) echo "${notify#*:}" ;; *) echo 1000 ;; esac)" >/dev/null
    sleep "$idle"
    : >"$dir/received"
    echo "== paynotify.notify = $notify: $rate payments/s for $secs s (pgbench -R), one relay"
    "$PN_PGBIN/pgbench" -n -h "$dir" -p "$port" -U postgres -c 8 -j 2 -R "$rate" -T "$secs" \
        -f "$dir/handle.sql" postgres 2>&1 | grep -E "^(tps|number of transactions actually)" | sed 's/^/   /'
    for _ in $(seq 100); do
        [ "$(sql -Atc "SELECT (SELECT count(*) FROM paynotify_outbox) + (SELECT count(*) FROM paynotify_delivery WHERE delivered_at IS NULL)")" = 0 ] && break
        sleep 0.1
    done
    python3 - "$dir/received" <<'EOF'
import json, sys, datetime
lat, bad = [], 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if not r['verified']: bad += 1
    b = json.loads(r['body'])
    t = datetime.datetime.strptime(b['occurred_at'], '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=datetime.timezone.utc).timestamp()
    lat.append((r['at'] - t) * 1000)
lat.sort()
if not lat: print('   nothing received'); sys.exit(0)
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print('   received %d events (%d unverified); commit-to-receiver latency ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f'
      % (len(lat), bad, p(0.5), p(0.9), p(0.99), lat[-1]))
EOF
done
done

# a healthy receiver, then a sometimes-slow one
kill -TERM "$relay_pid"; wait "$relay_pid" 2>/dev/null || true
PAYNOTIFY_DSN="host=$dir port=$port dbname=postgres user=relay" PAYNOTIFY_RELAY_ALLOW_PRIVATE=1 \
    PAYNOTIFY_RELAY_TIMEOUT=2000 "$relay_bin" >>"$dir/relay.log" 2>&1 &
pids+=($!)
sql -q -c "ALTER DATABASE postgres SET paynotify.notify = on" >/dev/null
for receiver in healthy sometimes-slow; do
    path=$(case $receiver in healthy) echo fast ;; *) echo flaky ;; esac)
    sql -q -c "SELECT paynotify_alter_endpoint(id, enabled => false) FROM paynotify_endpoint" \
        -c "SELECT paynotify_add_endpoint('http://127.0.0.1:$(cat "$dir/rport")/$path/$receiver', '$secret', events => '{paid}')" >/dev/null
    sleep "$idle"
    : >"$dir/received"
    echo "== receiver $receiver: $slow_rate payments/s for $secs s (pgbench -R), one relay, request timeout 2 s"
    "$PN_PGBIN/pgbench" -n -h "$dir" -p "$port" -U postgres -c 4 -j 2 -R "$slow_rate" -T "$secs" \
        -f "$dir/handle.sql" postgres 2>&1 | grep -E "^(tps|number of transactions actually)" | sed 's/^/   /'
    # until every event had its first attempt (retries come later, by design)
    for _ in $(seq 300); do
        [ "$(sql -Atc "SELECT (SELECT count(*) FROM paynotify_outbox) + (SELECT count(*) FROM paynotify_delivery d JOIN paynotify_endpoint e ON e.id = d.endpoint_id WHERE e.enabled AND d.attempts = 0)")" = 0 ] && break
        sleep 0.1
    done
    python3 - "$dir/received" "$receiver" <<'EOF'
import json, sys, datetime
first = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    first.setdefault(r['id'], r)
lat = []
for r in first.values():
    if r['verdict'] != 'ok' or not r['verified']:
        continue
    b = json.loads(r['body'])
    t = datetime.datetime.strptime(b['occurred_at'], '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=datetime.timezone.utc).timestamp()
    lat.append((r['at'] - t) * 1000)
lat.sort()
if not lat: print('   nothing accepted'); sys.exit(0)
p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print('   receiver %s: %d events, %d accepted at the first attempt; their commit-to-acceptance ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f'
      % (sys.argv[2], len(first), len(lat), p(0.5), p(0.9), p(0.99), lat[-1]))
EOF
done
