#!/usr/bin/env bash
# The upgrades from 1.0 to 1.1 to 1.2 to 1.3 to 1.4: a database created with
# CREATE EXTENSION paynotify VERSION '1.0' and filled with traffic on all
# three gateways (every signed test vector replayed, Stripe payments and
# refunds, failures, parked refunds, anomalies, notifications without an
# order) is upgraded with ALTER EXTENSION paynotify UPDATE TO '1.1', gets
# more traffic (with paynotify.delivery_history), and is upgraded again to
# 1.2, then to 1.3 and to 1.4.  Every row of every table must survive each step
# (count and a hash of the sorted rows, over the columns it had before the
# step; order_no read as 1.2 writes it: '' for none), the new functions
# must work on the old rows (trace, retry of an old failure, stats, purge)
# as an operator made the 1.2 way (a member of the group role
# paynotify_admin), who keeps the admin capacity in this database after the
# update to 1.3 (paynotify_role, a WARNING naming it) while the group roles
# lose every privilege, and the upgraded extension must have exactly the
# catalog objects of a fresh CREATE EXTENSION paynotify (1.4) given the same
# capacity holder: \dx+ listings, definitions of functions, tables, views,
# triggers, indexes, constraints, privileges and pg_extension_config_dump
# registrations.  The 1.3 database at work goes on working at 1.4: a refund
# parked at 1.3 applies when its payment comes after the update (the hook
# registered before sees the payment), agreements are signed on channels
# made at 1.3, and the relay claims and reports every delivery, those the
# fan-out made at 1.3 and the new events' (the 1.3 endpoint given the
# agreement events).
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/upgrade.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir upgrade)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; rm -rf "$dir"' EXIT

pass=0
fail=0
# ok, not_ok, check, finish: test/lib.sh

pn_fixture_cluster "$dir" "$port"
sql() { pn_psql "$dir" "$port" "$@"; }
q() { local db=$1; shift; sql -d "$db" -Atc "$@"; }

# the fixture, with the extension at 1.0 in "old" and at 1.4 in "fresh"
sed "s/^CREATE EXTENSION paynotify SCHEMA pay;/CREATE EXTENSION paynotify SCHEMA pay VERSION '1.0';/" \
    test/fixture.sql >"$dir/fixture10.sql"
grep -q "VERSION '1.0'" "$dir/fixture10.sql" || { not_ok "fixture creates version 1.0"; finish; }
sql -d postgres -c "CREATE DATABASE old" -c "CREATE DATABASE fresh" >/dev/null
pn_fixture_load "$dir" "$port" old "$dir/fixture10.sql"
pn_fixture_load "$dir" "$port" fresh
check "old database is at 1.0" 1.0 "$(q old "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"
check "fresh database is at 1.4" 1.4 "$(q fresh "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"

PGOPTIONS="-c client_min_messages=error" sql -d old >/dev/null <<'SQL'
-- failures: a WeChat and an Alipay payment for orders that do not exist yet
SELECT t.configure('wx_transaction_success_valid', 'u_wx');
SELECT t.deliver('wx_transaction_success_valid', 'u_wx');
SELECT t.configure('ali_trade_success_valid', 'u_ali');
SELECT t.deliver('ali_trade_success_valid', 'u_ali');
-- parked: a WeChat refund whose payment is not recorded
SELECT t.configure('wx_refund_success_pubkey_id_valid', 'u_wxr');
SELECT t.prepare_order('wx_refund_success_pubkey_id_valid');
SELECT t.deliver('wx_refund_success_pubkey_id_valid', 'u_wxr');
-- every signed test notification on its own channel, twice (all three gateways)
SELECT count(*) FROM t.manifest, t.replay(name, 'r_');
-- Stripe: payments, a refund, an amount mismatch (anomaly), a failure
\i test/e2e/stripe.sql
SELECT t.set_order('U' || i, 'pending') FROM generate_series(1, 20) i;
SELECT t.st('evt_pay_' || i, 'U' || i) FROM generate_series(1, 20) i;
SELECT t.st('evt_pay_1', 'U1');
SELECT t.st('evt_refund_1', 'U1', 'refund');
SELECT t.set_order('UX', 'pending', 1);
SELECT t.st('evt_mismatch', 'UX');
SELECT t.st('evt_missing', 'UM');
SELECT t.st('evt_missing_old', 'UM2');
-- a failure written by the 1.0 library, which kept no notice for it
UPDATE pay.payment_notify_log SET notice = NULL WHERE channel = 'st' AND notify_id = 'evt_missing_old';
-- notifications without an order (an event type paynotify ignores, a
-- payment without an order number): the 1.0 library wrote order_no NULL
SELECT t.st('evt_no_order', NULL, 'other');
SELECT t.st('evt_no_order_pay', NULL);
UPDATE pay.payment_notify_log SET order_no = NULL WHERE order_no = '';
UPDATE pay.paynotify_anomaly SET order_no = NULL WHERE order_no = '';
SQL

check "traffic: failed on all three gateways" "alipay stripe wxpay" \
    "$(q old "SELECT string_agg(DISTINCT c.gateway, ' ' ORDER BY c.gateway) FROM pay.payment_notify_log l
              JOIN pay.paynotify_channel c ON c.name = l.channel WHERE l.status = 'failed'")"
check "traffic: parked" 1 "$(q old "SELECT count(*) FROM pay.payment_notify_log WHERE status = 'parked'")"
check "traffic: anomalies" yes "$(q old "SELECT CASE WHEN count(*) >= 1 THEN 'yes' ELSE 'none' END FROM pay.paynotify_anomaly")"
check "traffic: payments on all three gateways" 3 \
    "$(q old "SELECT count(DISTINCT c.gateway) FROM pay.payment_record p JOIN pay.paynotify_channel c ON c.name = p.channel")"

check "traffic: notifications without an order (order_no NULL, as 1.0 wrote them)" 2 \
    "$(q old "SELECT count(*) FROM pay.payment_notify_log WHERE order_no IS NULL")"

# hashes DB: per table of the extension and the application, its row count
# and an md5 of its sorted rows over the columns it had before the update
# (columns: the tables and their columns now); order_no as 1.2 has it ('' for
# a notification without an order)
declare -A cols
columns() {
    tables=$(q old "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
                    WHERE schemaname IN ('pay', 'public') ORDER BY 1")
    for t in $tables; do
        cols[$t]=$(q old "SELECT string_agg(CASE WHEN attname = 'order_no' THEN 'COALESCE(order_no, '''') AS order_no'
                                             ELSE quote_ident(attname) END, ', ' ORDER BY attnum) FROM pg_attribute
                          WHERE attrelid = '$t'::regclass AND attnum > 0 AND NOT attisdropped")
    done
}
columns
hashes() {
    for t in $tables; do
        q old "SELECT '$t', count(*), md5(COALESCE(string_agg(x::text, E'\n' ORDER BY x::text), ''))
               FROM (SELECT ${cols[$t]} FROM $t) x"
    done
    q old "SELECT 'outbox_id_seq', last_value FROM pay.paynotify_outbox_id_seq"
    q old "SELECT 'anomaly_id_seq', last_value FROM pay.paynotify_anomaly_id_seq"
}
# update_step TARGET: ALTER EXTENSION paynotify UPDATE TO TARGET; the
# database is then at TARGET, and every row of every table survived it
# (hashed over the columns the tables had before the step)
update_step() {
    local to=$1
    hashes >"$dir/before-$to"
    if sql -d old -c "ALTER EXTENSION paynotify UPDATE TO '$to'" >"$dir/update-$to.log" 2>&1; then
        ok "ALTER EXTENSION paynotify UPDATE TO '$to'"
    else
        not_ok "ALTER EXTENSION paynotify UPDATE TO '$to'" "$(head -5 "$dir/update-$to.log")"
    fi
    check "old database is at $to" "$to" "$(q old "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"
    hashes >"$dir/after-$to"
    if diff "$dir/before-$to" "$dir/after-$to" >"$dir/hashes-$to.diff"; then
        ok "every row of every table ($(grep -c '^[a-z]*\.' "$dir/before-$to")) survived the update to $to"
    else
        not_ok "rows survived the update to $to" "$(head -20 "$dir/hashes-$to.diff")"
    fi
}
update_step 1.1

# traffic at 1.1, with its delivery history (rows 1.2 gives an order_no)
PGOPTIONS="-c client_min_messages=error -c paynotify.delivery_history=all" sql -d old >/dev/null <<'SQL'
SELECT t.set_order('V' || i, 'pending') FROM generate_series(1, 5) i;
SELECT t.st('evt_v_' || i, 'V' || i) FROM generate_series(1, 5) i;
SELECT t.st('evt_v_1', 'V1');
SELECT t.st('evt_v_1', 'V1');
SELECT t.st('evt_v_missing', 'VM');
SELECT t.st('evt_v_no_order', NULL, 'other');
SQL
check "traffic at 1.1: delivery history" 9 "$(q old "SELECT count(*) FROM pay.paynotify_delivery_history")"
# the 1.2 library before ALTER EXTENSION UPDATE: a repeat of a notification
# recorded without an order (order_no NULL) is refused, retryably, with a hint
check "before the update to 1.2, a repeat of a notification recorded without an order: refused (55000), the server up" \
    "1|1" "$(sql -d old -v VERBOSITY=verbose -c "SELECT t.st('evt_no_order', NULL, 'other')" 2>&1 |
             grep -c 'ERROR:  55000: paynotify: notification \"evt_no_order\" of channel \"st\" was recorded without an order number')|$(q old "SELECT 1")"
columns
update_step 1.2
check "no order_no is NULL after the update to 1.2" 0 \
    "$(q old "SELECT (SELECT count(*) FROM pay.payment_notify_log WHERE order_no IS NULL)
                   + (SELECT count(*) FROM pay.paynotify_anomaly WHERE order_no IS NULL)")"
check "delivery history rows have their notification's order" "V1:3 VM:1 none:1" \
    "$(q old "SELECT string_agg(o || ':' || n, ' ' ORDER BY o) FROM (
                  SELECT COALESCE(NULLIF(order_no, ''), 'none') AS o, count(*) AS n FROM pay.paynotify_delivery_history
                  WHERE notify_id IN ('evt_v_1', 'evt_v_missing', 'evt_v_no_order') GROUP BY 1) x")"
check "a duplicate of a notification without an order recorded by 1.0" duplicate \
    "$(q old "SELECT t.st('evt_no_order', NULL, 'other')" 2>/dev/null | tail -1)"

# the new functions on old rows, as an operator made the way of 1.2 and
# earlier: a member of the group role paynotify_admin (the update to 1.3
# below turns that into a capacity of its own)
sql -d old -c "CREATE ROLE upgrade_op LOGIN IN ROLE paynotify_admin" -c "GRANT USAGE ON SCHEMA pay TO upgrade_op" >/dev/null
op() { "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U upgrade_op -d old -Atc "$@" 2>&1; }
op_state() { "$PN_PGBIN/psql" -X -q -v VERBOSITY=sqlstate -h "$dir" -p "$port" -U upgrade_op -d old -Atc "$@" 2>&1; }
check "trace of an old notification" "notification succeeded|payment|outbox" \
    "$(op "SELECT string_agg(kind || COALESCE(' ' || (detail->>'status'), ''), '|' ORDER BY n)
           FROM pay.paynotify_trace('st', 'evt_pay_2') WITH ORDINALITY x(at, kind, channel, notify_id, detail, n)
           WHERE kind IN ('notification', 'payment', 'outbox')")"
check "trace of an old order" yes \
    "$(op "SELECT CASE WHEN count(*) FILTER (WHERE kind = 'refund') = 1 AND count(*) FILTER (WHERE kind = 'payment') = 1
                  THEN 'yes' ELSE string_agg(kind, ',') END FROM pay.paynotify_trace_order('U1')")"
check "stats on old rows: failed now per gateway (st: two at 1.0, one at 1.1)" "st:3 u_ali:1 u_wx:1" \
    "$(op "SELECT string_agg(channel || ':' || failed, ' ' ORDER BY channel) FROM pay.paynotify_stats WHERE failed > 0")"
check "stats on old rows: parked now" "u_wxr:1" \
    "$(op "SELECT string_agg(channel || ':' || parked, ' ' ORDER BY channel) FROM pay.paynotify_stats WHERE parked > 0")"
sql -d old -c "SELECT t.set_order('UM', 'pending')" >/dev/null
check "dry run of an old failure" "failed|processed|succeeded" \
    "$(op "SELECT status_before || '|' || outcome || '|' || status FROM pay.paynotify_retry('st', 'evt_missing', true)")"
check "retry of an old failure" "failed|processed|succeeded" \
    "$(op "SELECT status_before || '|' || outcome || '|' || status FROM pay.paynotify_retry('st', 'evt_missing')")"
check "its payment recorded once" 1 "$(q old "SELECT count(*) FROM pay.payment_record WHERE notify_id = 'evt_missing'")"
check "a failure from the 1.0 library has no notice to replay: SQLSTATE 55000" "55000" \
    "$(op_state "SELECT * FROM pay.paynotify_retry('st', 'evt_missing_old')" | head -1 | sed 's/^ERROR: *//')"
check "resolve an old anomaly" 1 \
    "$(op "SELECT count(*) FROM pay.paynotify_resolve_anomaly((SELECT min(id) FROM pay.paynotify_anomaly), 'checked after the upgrade')")"
check "purge on old rows keeps everything young" 0 \
    "$(op "SELECT sum(notifications) FROM pay.paynotify_purge('30 days')")"
check "a new delivery after the update" processed \
    "$(q old "SELECT t.set_order('U21', 'pending'); SELECT t.st('evt_pay_21', 'U21')" 2>/dev/null | tail -1)"
check "its move is in the order history" "pending>paid paynotify" \
    "$(q old "SELECT from_state || '>' || to_state || ' ' || source FROM pay.paynotify_order_history WHERE order_no = 'U21'")"

# the 1.3 library on a database still at 1.2 checks the orders table's
# code as at 1.3: the application's domain on the status column of the
# table a superuser owns, its CHECK of built-in functions only (it writes a
# large object as whoever runs it): the step fails, nothing runs as postgres
sql -d old >/dev/null <<'SQL'
CREATE ROLE up_app;
CREATE SCHEMA up_app AUTHORIZATION up_app;
CREATE DOMAIN up_app.st AS text;
ALTER DOMAIN up_app.st OWNER TO up_app;
ALTER TABLE public.orders ALTER COLUMN status TYPE up_app.st;
SELECT t.set_order('U22', 'pending');
SET ROLE up_app;
ALTER DOMAIN up_app.st ADD CONSTRAINT evil CHECK (VALUE IS NULL OR
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0) NOT VALID;
RESET ROLE;
SQL
check "1.2 schema, 1.3 library: the application's domain on a superuser's table: failed, naming it; nothing ran" "failed|1|0" \
    "$(q old "SELECT t.st('evt_pay_22', 'U22')" 2>/dev/null | tail -1)|$(
       q old "SELECT count(*) FROM pay.payment_notify_log WHERE notify_id = 'evt_pay_22' AND error_msg LIKE '%up_app.st%of role up_app%'")|$(
       q old "SELECT count(*) FROM pg_largeobject_metadata m WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %'")"
sql -d old -c "ALTER TABLE public.orders ALTER COLUMN status TYPE text" -c "DROP SCHEMA up_app CASCADE" \
    -c "DROP ROLE up_app" >/dev/null
# a kind paynotify does not apply: 1.3 hands it on as a notification
# event, which a 1.2 schema has no place for: recorded as before, no event
check "1.2 schema, 1.3 library: a kind not applied is recorded, and queues no event" "ignored|0" \
    "$(q old "SELECT t.st('evt_cust_12', 'U23', 'customer')" 2>/dev/null | tail -1)|$(
       q old "SELECT count(*) FROM pay.paynotify_outbox WHERE notify_id = 'evt_cust_12'")"

# 1.2 to 1.3 with a hook a superuser registered (1.2's library let it; the
# row as it left it): 1.3 runs no hook as a superuser, so the update stops
# before it changes anything, naming the hook; registered again by the
# operator, the update goes on
sql -d old -c "CREATE FUNCTION public.up_hook(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC SELECT; END" \
    -c "INSERT INTO pay.paynotify_hook (event, handler, registered_by) VALUES ('paid', 'public.up_hook(jsonb)', 'postgres')" >/dev/null
check "1.2 to 1.3 with a superuser's hook: refused, naming it, still at 1.2" "42501|1|1.2" \
    "$(sql -d old -v VERBOSITY=sqlstate -c "ALTER EXTENSION paynotify UPDATE TO '1.3'" 2>&1 | sed -n 's/^ERROR: *//p' | head -1)|$(
       sql -d old -c "ALTER EXTENSION paynotify UPDATE TO '1.3'" 2>&1 | grep -c 'registered by one: public.up_hook(jsonb) on paid by postgres')|$(
       q old "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")"
# registered again by the operator, once the superuser's row is gone (no
# role takes over a hook of a role whose rights it has not)
check "the operator may not take the superuser's hook over" 42501 \
    "$(op_state "SELECT pay.paynotify_on('paid', 'public.up_hook(jsonb)')" | head -1 | sed 's/^ERROR: *//')"
sql -d old -c "DELETE FROM pay.paynotify_hook WHERE registered_by = 'postgres'::regrole" >/dev/null
op "SELECT pay.paynotify_on('paid', 'public.up_hook(jsonb)')" >/dev/null
# the group roles' direct members keep their capacity in this database as
# grants of their own; the group roles lose every privilege
columns
update_step 1.3
check "1.3: a kind not applied is handed on as one notification event" "ignored|notification|customer.created" \
    "$(q old "SELECT t.st('evt_cust_13', 'U23', 'customer')" 2>/dev/null | tail -1)|$(
       q old "SELECT string_agg(event || '|' || (detail->>'event_type'), ',') FROM pay.paynotify_outbox WHERE notify_id = 'evt_cust_13'")"
check "1.3: the operator's hook, its registrant by name, registered on this cluster" "public.up_hook(jsonb)|upgrade_op|upgrade_op|true" \
    "$(q old "SELECT handler || '|' || registered_by || '|' || registrant || '|' ||
              (registered_on = (SELECT system_identifier FROM pg_control_system())) FROM pay.paynotify_hook")"
check "the update to 1.3 warns, naming the member kept" 1 \
    "$(grep -c 'WARNING:.*paynotify 1.3: the group roles .*: upgrade_op (admin)' "$dir/update-1.3.log")"
check "1.3: paynotify_role lists the operator with the admin capacity (USAGE on pay was its own)" "upgrade_op|admin|f" \
    "$(q old "SELECT role, capacity, schema_usage FROM pay.paynotify_role")"
check "1.3: the group roles hold no privilege on any function or relation of paynotify" 0 \
    "$(q old "SELECT count(*) FROM pg_roles r, pg_depend d
              WHERE r.rolname IN ('paynotify_handler', 'paynotify_admin', 'paynotify_relay')
                AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'paynotify')
                AND CASE WHEN d.classid = 'pg_proc'::regclass
                         THEN has_function_privilege(r.oid, d.objid, 'EXECUTE')
                         WHEN d.classid = 'pg_class'::regclass
                         THEN has_table_privilege(r.oid, d.objid, 'SELECT,INSERT,UPDATE,DELETE,TRUNCATE')
                              OR has_any_column_privilege(r.oid, d.objid, 'SELECT,INSERT,UPDATE')
                         ELSE false END")"
# out of the group role, the operator still works: its capacity is its own
sql -d old -c "REVOKE paynotify_admin FROM upgrade_op" >/dev/null
check "1.3: the operator, no longer a member of paynotify_admin, still traces and reads the stats" "yes|yes" \
    "$(op "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END FROM pay.paynotify_trace('st', 'evt_pay_2')")|$(op "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END FROM pay.paynotify_stats")"
check "1.3: the operator still cannot read key material" "permission denied" \
    "$(op "SELECT count(*) FROM pay.paynotify_key" | grep -o 'permission denied' | head -1)"

# 1.3 to 1.4: the operator kept by the update to 1.3 gets what 1.4 adds to
# the admin capacity (paynotify_capacity_extend): it registers and reads
# expectations; an order paid before the update settles one at once
# a monitoring role given SELECT on paynotify_stats by hand (an odd name),
# without the admin capacity: it still reads the view after the update
sql -d old -c "CREATE ROLE \"mon'it\"\"or\" LOGIN" -c "GRANT USAGE ON SCHEMA pay TO \"mon'it\"\"or\"" \
    -c "GRANT SELECT ON pay.paynotify_stats TO \"mon'it\"\"or\"" >/dev/null
# a 1.3 database at work, which 1.4 must keep working on: the operator's hook
# records what it is given; an endpoint, with the deliveries the fan-out
# made of the events queued so far, pending; a refund parked (its payment
# not come yet); the channels of a WeChat partner contract and of a Stripe
# subscription (the documented samples, pn_sample), no agreement signed yet
sql -d old >/dev/null <<SQL
CREATE TABLE public.up_hook_seen (event text, order_no text);
GRANT INSERT ON public.up_hook_seen TO upgrade_op;
CREATE OR REPLACE FUNCTION public.up_hook(ev jsonb) RETURNS void LANGUAGE sql
	BEGIN ATOMIC INSERT INTO public.up_hook_seen VALUES (ev->>'event', ev->'notice'->>'order_no'); END;
SELECT pay.paynotify_add_endpoint('http://127.0.0.1:9/erp', 'whsec_' || repeat('QUJD', 8));
SELECT pay.paynotify_relay_fanout(100000);
SELECT t.set_order('UP', 'pending');
$(pn_sample channel pay up_ag_wx doc_wx_entrust_sign)
$(pn_sample channel pay up_ag_st doc_stripe_customer_subscription_created)
SQL
check "1.3: a refund before its payment is parked" parked "$(q old "SELECT t.st('evt_up_refund', 'UP', 'refund')" 2>/dev/null | tail -1)"
check "1.3: deliveries pending for the endpoint, the outbox fanned out" "yes" \
    "$(q old "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END FROM pay.paynotify_delivery WHERE delivered_at IS NULL")"
outbox13=$(q old "SELECT max(outbox_id) FROM pay.paynotify_delivery")
pending13=$(q old "SELECT count(*) FROM pay.paynotify_delivery WHERE delivered_at IS NULL AND dead_at IS NULL")
update_step 1.4
# the 1.3 data at work under 1.4: the parked refund applies when its
# payment comes (the hook, registered at 1.2, sees the payment),
# agreements are signed on the channels of 1.3, the pending deliveries of
# 1.3 and the new events' are claimed
check "1.4: the payment of the refund parked at 1.3: processed, and the refund applied with it" \
    "processed|succeeded|UP succeeded|paid UP" \
    "$(q old "SELECT t.st('evt_up_pay', 'UP')" 2>/dev/null | tail -1)|$(
       q old "SELECT status FROM pay.payment_notify_log WHERE notify_id = 'evt_up_refund'")|$(
       q old "SELECT string_agg(order_no || ' ' || status, ',') FROM pay.paynotify_refund WHERE order_no = 'UP'")|$(
       q old "SELECT string_agg(event || ' ' || order_no, ',' ORDER BY event) FROM public.up_hook_seen")"
check "1.4: agreements signed on the channels of 1.3 (WeChat partner contract, Stripe subscription)" \
    "processed|processed|up_ag_st:sub_1Pgc6rB7WZ01zgkWNy0Cn5nw:signed up_ag_wx:123124412412423431:signed" \
    "$(sql -d old -Atc "SET paynotify.now = $(pn_sample now pay up_ag_wx doc_wx_entrust_sign)" \
           -c "$(pn_sample handle pay up_ag_wx doc_wx_entrust_sign)" 2>&1)|$(
       sql -d old -Atc "SET paynotify.now = $(pn_sample now pay up_ag_st doc_stripe_customer_subscription_created)" \
           -c "$(pn_sample handle pay up_ag_st doc_stripe_customer_subscription_created)" 2>&1)|$(
       q old "SELECT string_agg(channel || ':' || agreement_id || ':' || state, ' ' ORDER BY channel)
              FROM pay.paynotify_agreement")"
# the endpoint of 1.3 (its events 1.3's default: paid, refunded,
# refund_failed, closed) given 1.4's agreement events too; then the relay's
# work, as paynotify-relay does it, until nothing is due: claim (at most
# max_in_flight per endpoint, an order's events in order), report each
# accepted (HTTP 200)
sql -d old -c "SELECT pay.paynotify_alter_endpoint(id, events => events || '{agreement_signed,agreement_ended}')
               FROM pay.paynotify_endpoint" >/dev/null
check "1.4: every delivery claimed and reported, those made at 1.3 and the new events' (paid UP, agreement_signed)" \
    "0|$pending13|1|2" \
    "$(q old "SELECT pay.paynotify_relay_fanout(100000) >= 0;
              CREATE TEMP TABLE claimed (delivery_id bigint, round int);
              DO \$\$ DECLARE n bigint; BEGIN
                  FOR i IN 1..10000 LOOP
                      INSERT INTO claimed SELECT delivery_id, i FROM pay.paynotify_relay_claim(100);
                      GET DIAGNOSTICS n = ROW_COUNT;
                      EXIT WHEN n = 0;
                      PERFORM pay.paynotify_relay_report(ARRAY(SELECT delivery_id FROM claimed WHERE round = i),
                          ARRAY(SELECT 200 FROM claimed WHERE round = i), ARRAY(SELECT NULL::text FROM claimed WHERE round = i));
                  END LOOP; END \$\$;
              SELECT (SELECT count(*) FROM pay.paynotify_delivery WHERE delivered_at IS NULL AND dead_at IS NULL) || '|' ||
                     count(*) FILTER (WHERE d.outbox_id <= $outbox13) || '|' ||
                     count(*) FILTER (WHERE d.event = 'paid' AND d.order_no = 'UP') || '|' ||
                     count(*) FILTER (WHERE d.event = 'agreement_signed')
              FROM claimed c JOIN pay.paynotify_delivery d ON d.id = c.delivery_id AND d.delivered_at IS NOT NULL" | tail -1)"
check "1.4: a role given SELECT on paynotify_stats by hand before the update still reads it" "yes" \
    "$("$PN_PGBIN/psql" -X -q -h "$dir" -p "$port" -U "mon'it\"or" -d old -Atc \
       "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END FROM pay.paynotify_stats" 2>&1)"
check "1.4: the operator registers an expectation and reads it; a paid order's is settled" "U-EX|t|payment" \
    "$(op "SELECT order_no FROM pay.paynotify_expect('st', 'U-EX')")|$(
       op "SELECT count(*) = 1 FROM pay.paynotify_expectation WHERE settled_at IS NULL")|$(
       op "SELECT settled_by FROM pay.paynotify_expect('st', (SELECT order_no FROM pay.payment_record WHERE channel = 'st' ORDER BY created_at LIMIT 1))")"
sql -d old -c "DELETE FROM pay.paynotify_expectation" >/dev/null
check "1.4: the operator reads the imported bills" "0" "$(op "SELECT count(*) FROM pay.paynotify_bill_line")"
check "1.4: the operator plans the bills' fetches and reads them" "t|t" \
    "$(op "SELECT pay.paynotify_bill_plan() >= 0")|$(op "SELECT count(*) >= 0 FROM pay.paynotify_bill_fetch")"

# 1.1 to 1.2 with the relay's rows: a delivery made at 1.1 keeps its
# webhook-id (evt_<outbox id>: its receiver may have it already), a new one
# gets the installation's id
sql -d postgres -c "CREATE DATABASE r11" >/dev/null
sql -d r11 -q >/dev/null <<'SQL'
CREATE EXTENSION paynotify VERSION '1.1';
SELECT paynotify_add_endpoint('http://127.0.0.1:9/erp', 'whsec_' || repeat('A', 32));
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'st', 'O1', 'n1', 1);
SELECT paynotify_relay_fanout();
ALTER EXTENSION paynotify UPDATE TO '1.2';
INSERT INTO paynotify_outbox (event, channel, order_no, notify_id, amount) VALUES ('paid', 'st', 'O2', 'n2', 1);
SELECT paynotify_relay_fanout();
SQL
check "1.1 to 1.2: the 1.1 delivery keeps evt_<outbox id>, the claim sends it; the new one has the installation id" \
    "1.2|evt_1|evt_1|evt_1|t" \
    "$(q r11 "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'paynotify'),
                     (SELECT webhook_id FROM paynotify_delivery WHERE outbox_id = 1),
                     (SELECT body::jsonb->>'id' FROM paynotify_delivery WHERE outbox_id = 1),
                     (SELECT webhook_id FROM paynotify_relay_claim(10) WHERE webhook_id NOT LIKE 'evt\_%\_%'),
                     (SELECT webhook_id = 'evt_' || (SELECT id FROM paynotify_installation) || '_2' FROM paynotify_delivery WHERE outbox_id = 2)")"

# The upgraded and the fresh extension: the same catalog objects
catalog() {
    local db=$1
    sql -d "$db" -c '\dx+ paynotify' | sed 's/  *$//'
    q "$db" "
    WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'paynotify'),
    members AS (SELECT d.classid, d.objid FROM pg_depend d, ext
                WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e')
    SELECT 'function ' || p.oid::regprocedure || E'\n' || pg_get_functiondef(p.oid)
           || E'\nacl ' || COALESCE(p.proacl::text, '-') || ' owner ' || p.proowner::regrole
    FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
    UNION ALL
    SELECT 'relation ' || c.oid::regclass || ' kind ' || c.relkind::text || ' acl ' || COALESCE(c.relacl::text, '-')
           || COALESCE(E'\nview ' || pg_get_viewdef(c.oid), '')
           || COALESCE((SELECT E'\n' || string_agg(format('column %s %s %s %s %s', a.attname,
                          format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,
                          pg_get_expr(ad.adbin, ad.adrelid)), E'\n' ORDER BY a.attnum)
                        FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                        WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '')
           || COALESCE((SELECT E'\n' || string_agg('constraint ' || conname || ' ' || pg_get_constraintdef(oid), E'\n' ORDER BY conname)
                        FROM pg_constraint WHERE conrelid = c.oid), '')
           || COALESCE((SELECT E'\n' || string_agg('index ' || pg_get_indexdef(indexrelid), E'\n' ORDER BY pg_get_indexdef(indexrelid))
                        FROM pg_index WHERE indrelid = c.oid), '')
           || COALESCE((SELECT E'\n' || string_agg('trigger ' || pg_get_triggerdef(oid), E'\n' ORDER BY pg_get_triggerdef(oid))
                        FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal), '')
           || COALESCE(E'\ncomment ' || obj_description(c.oid, 'pg_class'), '')
    FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
    UNION ALL
    SELECT 'config_dump ' || x.cfg::regclass || ' ' || COALESCE(x.cond, '')
    FROM pg_extension e, unnest(e.extconfig, e.extcondition) x(cfg, cond)
    WHERE e.extname = 'paynotify'
    ORDER BY 1"
}
# the fresh installation with the same capacity holder as the upgraded one
# (privileges are compared too): the one granted now and the one kept by the
# update are the same grants
sql -d fresh -c "SELECT pay.paynotify_grant('upgrade_op', 'admin')" >/dev/null
# (and the monitoring role's grants, as a DBA gives them at 1.4)
sql -d fresh -c "GRANT USAGE ON SCHEMA pay TO \"mon'it\"\"or\"" -c "GRANT SELECT ON pay.paynotify_stats TO \"mon'it\"\"or\"" \
    -c "GRANT EXECUTE ON FUNCTION pay.paynotify_stats_rows() TO \"mon'it\"\"or\"" >/dev/null
catalog old >"$dir/catalog.old"
catalog fresh >"$dir/catalog.fresh"
if diff "$dir/catalog.old" "$dir/catalog.fresh" >"$dir/catalog.diff"; then
    ok "upgraded 1.0 and fresh 1.4 have the same objects ($(grep -c '^function ' "$dir/catalog.old") functions, $(grep -c '^relation ' "$dir/catalog.old") relations, $(grep -c '^config_dump ' "$dir/catalog.old") dump registrations; \\dx+ $(grep -c '^ ' "$dir/catalog.old") lines)"
else
    not_ok "upgraded 1.0 and fresh 1.4 have the same objects" "$(head -30 "$dir/catalog.diff")"
fi

finish
