#!/usr/bin/env bash
# paynotify_purge scheduled with pg_cron (Debian: postgresql-15-cron), as the
# README's Operations section shows: a cluster with
# shared_preload_libraries = 'pg_cron', the job scheduled every minute (the
# finest schedule of Debian 12's pg_cron 1.4; 1.5 also takes '2 seconds') by
# an operator (given the admin capacity) with cron.schedule; the settled
# notifications older than the keep disappear while young, failed, parked
# and anomaly rows and every payment stay, and cron.job_run_details records
# the runs as succeeded.  The daily plan of the bills' fetch
# (paynotify_bill_plan) is scheduled the same way and plans the Stripe
# channel's bill of yesterday.
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/cron.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir cron)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; rm -rf "$dir"' EXIT

pass=0
fail=0
# ok, not_ok, check, finish: test/lib.sh

if [ ! -f "$(pg_config --pkglibdir)/pg_cron.so" ]; then
    not_ok "pg_cron is installed ($(pg_config --pkglibdir)/pg_cron.so; scripts/deps.sh installs postgresql-15-cron)"
    finish
fi
pn_cluster_start "$dir" "$port" "fsync = off" "shared_preload_libraries = 'pg_cron'" \
    "cron.database_name = 'shop'" "cron.use_background_workers = on" "max_worker_processes = 16"
pn_fixture_copy "$dir"
sql() { pn_psql "$dir" "$port" "$@"; }
q() { sql -d shop -Atc "$@"; }

sql -d postgres -c "CREATE DATABASE shop" >/dev/null
pn_fixture_load "$dir" "$port" shop
PGOPTIONS="-c client_min_messages=error" sql -d shop >/dev/null <<'SQL'
CREATE EXTENSION pg_cron;
CREATE ROLE cron_op LOGIN;
SELECT pay.paynotify_grant('cron_op', 'admin');
GRANT USAGE ON SCHEMA cron TO cron_op;
-- traffic on a Stripe channel: 30 payments, a failure, a parked refund, an anomaly
\i test/e2e/stripe.sql
SELECT t.set_order('C' || i, 'pending') FROM generate_series(1, 30) i;
SELECT t.st('evt_pay_' || i, 'C' || i) FROM generate_series(1, 30) i;
SELECT t.st('evt_missing', 'CM');
SELECT t.set_order('CP', 'paid');
SELECT t.st('evt_parked', 'CP', 'refund');
SELECT t.set_order('CX', 'pending', 1);
SELECT t.st('evt_mismatch', 'CX');
-- 20 of the payments, the failure, the parked refund and the anomaly are 10 days old
UPDATE pay.payment_notify_log SET first_seen = now() - interval '10 days', last_seen = now() - interval '10 days'
WHERE notify_id IN (SELECT 'evt_pay_' || i FROM generate_series(1, 20) i)
   OR notify_id IN ('evt_missing', 'evt_parked', 'evt_mismatch');
SQL
check "traffic: statuses" "anomaly:1 failed:1 parked:1 succeeded:30" \
    "$(q "SELECT string_agg(status || ':' || n, ' ' ORDER BY status) FROM
          (SELECT status, count(*) n FROM pay.payment_notify_log WHERE channel = 'st' GROUP BY 1) s")"
payments=$(q "SELECT count(*) FROM pay.payment_record")

# the operator schedules the purge, as the README shows
job=$("$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U cron_op -d shop -Atc \
    "SELECT cron.schedule('paynotify-purge', '* * * * *', \$\$SELECT * FROM pay.paynotify_purge('7 days')\$\$)")
check "cron.schedule returns a job id" yes "$( [[ "$job" =~ ^[0-9]+$ ]] && echo yes || echo "$job")"

# and the daily bills' fetch (the daemon, paynotify-reconcile, fetches what
# is planned: test/e2e/reconciliation.sh); every minute here, daily in use
q "SELECT pay.paynotify_alter_channel('st', '{\"secret_key\": \"rk_test_cron\"}')" >/dev/null
bjob=$("$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U cron_op -d shop -Atc \
    "SELECT cron.schedule('paynotify-bills', '* * * * *', \$\$SELECT pay.paynotify_bill_plan()\$\$)")
check "cron.schedule of the bills' plan returns a job id" yes "$( [[ "$bjob" =~ ^[0-9]+$ ]] && echo yes || echo "$bjob")"

left=""
for _ in $(seq 1 160); do	# the next minute starts within 60 s
    left=$(q "SELECT count(*) FROM pay.payment_notify_log WHERE channel = 'st'")
    [ "$left" = 13 ] && break
    sleep 0.5
done
check "pg_cron ran the purge: 20 old settled notifications gone" 13 "$left"
check "what stays: young, failed, parked, anomaly" "anomaly:1 failed:1 parked:1 succeeded:10" \
    "$(q "SELECT string_agg(status || ':' || n, ' ' ORDER BY status) FROM
          (SELECT status, count(*) n FROM pay.payment_notify_log WHERE channel = 'st' GROUP BY 1) s")"
check "every payment record stays" "$payments" "$(q "SELECT count(*) FROM pay.payment_record")"
runs=""
for _ in $(seq 1 20); do
    runs=$(q "SELECT count(*) FILTER (WHERE status = 'succeeded') || ' ' || count(*) FILTER (WHERE status = 'failed')
              FROM cron.job_run_details WHERE jobid = ${job:-0}")
    [ "${runs%% *}" -ge 1 ] 2>/dev/null && break
    sleep 0.5
done
check "cron.job_run_details: runs succeeded, none failed" "yes 0" \
    "$( [ "${runs%% *}" -ge 1 ] 2>/dev/null && echo "yes ${runs##* }" || echo "$runs")"
check "the job runs as the operator" cron_op \
    "$(q "SELECT DISTINCT username FROM cron.job WHERE jobid = ${job:-0}")"
planned=""
for _ in $(seq 1 40); do
    planned=$(q "SELECT channel || ' ' || (bill_date = (now() AT TIME ZONE 'UTC')::date - 1) || ' ' || step
                 FROM pay.paynotify_bill_fetch")
    [ -n "$planned" ] && break
    sleep 0.5
done
check "pg_cron planned the Stripe channel's bill of yesterday (UTC), once" "st true page" "$planned"
check "the bills' job ran as the operator and succeeded" "cron_op|yes" \
    "$(q "SELECT DISTINCT username FROM cron.job WHERE jobid = ${bjob:-0}")|$(
       q "SELECT CASE WHEN count(*) FILTER (WHERE status = 'succeeded') >= 1 AND count(*) FILTER (WHERE status = 'failed') = 0
                 THEN 'yes' ELSE string_agg(status || ': ' || return_message, '; ') END
          FROM cron.job_run_details WHERE jobid = ${bjob:-0}")"
check "cron.unschedule" t \
    "$("$PN_PGBIN/psql" -X -q -h "$dir" -p "$port" -U cron_op -d shop -Atc "SELECT cron.unschedule('paynotify-purge')")"

finish
