#!/usr/bin/env bash
# deploy/monitoring/queries.yaml with the real prometheus-postgres-exporter
# (Debian: prometheus-postgres-exporter): a test cluster gets Stripe traffic
# (payments, a duplicate, a failure, a parked refund, an anomaly), the
# exporter is started on a free loopback port with --extend.query-path and
# DATA_SOURCE_NAME for a monitoring role (given the admin capacity), and
# the metrics it serves must carry the values paynotify_stats has; more
# traffic and a replay of the failure must show in the next scrape.
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/monitoring.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir monitoring)
port=$(pn_free_port)
eport=$(pn_free_port)
exporter_pid=
cleanup() {
    [ -n "$exporter_pid" ] && kill "$exporter_pid" 2>/dev/null
    pn_cluster_stop "$dir"
    rm -rf "$dir"
}
trap cleanup EXIT

pass=0
fail=0
# ok, not_ok, check, finish: test/lib.sh

exporter=$(command -v prometheus-postgres-exporter || true)
if [ -z "$exporter" ]; then
    not_ok "prometheus-postgres-exporter is installed (scripts/deps.sh installs it)"
    finish
fi
pn_fixture_cluster "$dir" "$port"
sql() { pn_psql "$dir" "$port" "$@"; }
q() { sql -d shop -Atc "$@"; }

sql -d postgres -c "CREATE DATABASE shop" >/dev/null
pn_fixture_load "$dir" "$port" shop
PGOPTIONS="-c client_min_messages=error" sql -d shop >/dev/null <<'SQL'
-- the monitoring role, as deploy/monitoring/queries.yaml says
CREATE ROLE paynotify_exporter LOGIN;
SELECT pay.paynotify_grant('paynotify_exporter', 'admin');
ALTER ROLE paynotify_exporter SET search_path = pay;
\i test/e2e/stripe.sql
-- 6 payments, one delivered twice; a failure; a parked refund; an anomaly
SELECT t.set_order('M' || i, 'pending') FROM generate_series(1, 6) i;
SELECT t.st('evt_pay_' || i, 'M' || i) FROM generate_series(1, 6) i;
SELECT t.st('evt_pay_1', 'M1');
SELECT t.st('evt_missing', 'MM');
SELECT t.set_order('MP', 'paid');
SELECT t.st('evt_parked', 'MP', 'refund');
SELECT t.set_order('MX', 'pending', 1);
SELECT t.st('evt_mismatch', 'MX');
UPDATE pay.payment_notify_log SET first_seen = now() - interval '2 hours' WHERE notify_id = 'evt_missing';
SQL

DATA_SOURCE_NAME="host=$dir port=$port user=paynotify_exporter dbname=shop sslmode=disable" \
    "$exporter" --web.listen-address="127.0.0.1:$eport" --extend.query-path=deploy/monitoring/queries.yaml \
    --disable-default-metrics --disable-settings-metrics >"$dir/exporter.log" 2>&1 &
exporter_pid=$!
up=no
for _ in $(seq 1 50); do
    curl -sf "http://127.0.0.1:$eport/metrics" >/dev/null 2>&1 && { up=yes; break; }
    sleep 0.2
done
check "the exporter serves /metrics" yes "$up"

scrape() { curl -sf "http://127.0.0.1:$eport/metrics" >"$dir/metrics" || true; }
metric() {	# metric NAME [extra label matcher]: the value on channel st
    grep -E "^$1\{" "$dir/metrics" | grep 'channel="st"' | grep -F -- "${2:-}" | awk '{print $2}' | head -1
}
scrape
check "no query errors" 0 "$(grep -E '^pg_exporter_user_queries_load_error\{.*\} 1' "$dir/metrics" | wc -l)"
check "paynotify_notifications_count{status=succeeded}" 6 "$(metric paynotify_notifications_count 'status="succeeded"')"
check "paynotify_notifications_count{status=failed}" 1 "$(metric paynotify_notifications_count 'status="failed"')"
check "paynotify_notifications_count{status=parked}" 1 "$(metric paynotify_notifications_count 'status="parked"')"
check "paynotify_notifications_count{status=anomaly}" 1 "$(metric paynotify_notifications_count 'status="anomaly"')"
check "paynotify_notifications" 9 "$(metric paynotify_notifications)"
check "paynotify_deliveries" 10 "$(metric paynotify_deliveries)"
check "paynotify_duplicate_ratio" 0.1 "$(metric paynotify_duplicate_ratio)"
check "paynotify_failed" 1 "$(metric paynotify_failed)"
check "paynotify_parked" 1 "$(metric paynotify_parked)"
age=$(metric paynotify_oldest_failed_seconds)
check "paynotify_oldest_failed_seconds is about 2 hours" yes \
    "$(awk -v a="${age:-0}" 'BEGIN { print (a >= 7200 && a < 7300) ? "yes" : a }')"
check "paynotify_anomalies_24h" 1 "$(metric paynotify_anomalies_24h)"
check "paynotify_anomalies_unresolved" 1 "$(metric paynotify_anomalies_unresolved)"
check "paynotify_outbox_backlog" 6 "$(metric paynotify_outbox_backlog)"
check "the gateway label" 1 "$(grep -E '^paynotify_failed\{' "$dir/metrics" | grep -c 'gateway="stripe"')"
check "the values equal paynotify_stats" "$(q "SELECT failed || ' ' || parked || ' ' || deliveries FROM pay.paynotify_stats WHERE channel = 'st'")" \
    "$(metric paynotify_failed) $(metric paynotify_parked) $(metric paynotify_deliveries)"

# more traffic while the exporter runs: the failure replayed, a resolved
# anomaly, two more payments, one outbox event claimed
PGOPTIONS="-c client_min_messages=error" sql -d shop >/dev/null <<'SQL'
SELECT t.set_order('MM', 'pending');
SELECT * FROM pay.paynotify_retry('st', 'evt_missing');
SELECT pay.paynotify_resolve_anomaly((SELECT min(id) FROM pay.paynotify_anomaly), 'refunded by hand');
SELECT t.set_order('M' || i, 'pending') FROM generate_series(7, 8) i;
SELECT t.st('evt_pay_' || i, 'M' || i) FROM generate_series(7, 8) i;
SELECT * FROM pay.paynotify_outbox_claim(1);
SQL
scrape
check "after the replay: failed" 0 "$(metric paynotify_failed)"
check "after the replay: oldest failed age" 0 "$(metric paynotify_oldest_failed_seconds)"
check "after more traffic: succeeded" 9 "$(metric paynotify_notifications_count 'status="succeeded"')"
check "after more traffic: deliveries" 12 "$(metric paynotify_deliveries)"
check "after the resolution: unresolved anomalies" 0 "$(metric paynotify_anomalies_unresolved)"
check "after a claim: outbox backlog (6 + replay + 2 - 1)" 8 "$(metric paynotify_outbox_backlog)"

finish
