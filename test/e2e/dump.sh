#!/usr/bin/env bash
# pg_dump / pg_restore round trip of a database using paynotify: channels,
# keys, a hook, a customised state machine (a transition added, a default one
# removed) and traffic (every signed test notification replayed, Stripe
# payments, refunds and anomalies) are dumped with pg_dump -Fc and restored
# into a new database with pg_restore --exit-on-error.  Every table of the
# extension and of the application must come back with the same rows (count
# and a hash of the sorted contents), the identity sequences with their
# values, and the next payment, refund-less anomaly and hook call must work
# there with no duplicate key.  A second round trip from the restored
# database keeps the state machine as customised.
#
# Run as root (or as the cluster's user) from anywhere in the repository:
#   test/e2e/dump.sh
# Everything started here is stopped by pid on exit.  The last line printed
# is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir dump)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; remove_tmp "$dir"' EXIT

pass=0
fail=0
# ok, not_ok, check, finish, remove_tmp: test/lib.sh

pn_fixture_cluster "$dir" "$port"
sql() { pn_psql "$dir" "$port" "$@"; }
q() { local db=$1; shift; sql -d "$db" -Atc "$@"; }

sql -d postgres -c "CREATE DATABASE src" >/dev/null
pn_fixture_load "$dir" "$port" src
PGOPTIONS="-c client_min_messages=error" sql -d src >/dev/null <<'SQL'
-- the application: a hook that records every payment it is told about
CREATE SCHEMA shop;
CREATE TABLE shop.hook_calls (id bigserial PRIMARY KEY, order_no text, outbox_id bigint);
CREATE FUNCTION shop.on_paid(e jsonb) RETURNS bigint LANGUAGE sql
BEGIN ATOMIC
	INSERT INTO shop.hook_calls (order_no, outbox_id)
	VALUES (e->'notice'->>'order_no', (e->>'outbox_id')::bigint) RETURNING id;
END;
-- registered by the shop's operator: no superuser may register a hook
CREATE ROLE dump_ops;
SELECT pay.paynotify_grant('dump_ops', 'admin');
GRANT USAGE ON SCHEMA shop TO dump_ops;
GRANT SELECT, INSERT ON shop.hook_calls TO dump_ops;
GRANT USAGE ON SEQUENCE shop.hook_calls_id_seq TO dump_ops;
SET ROLE dump_ops;
SELECT pay.paynotify_on('paid', 'shop.on_paid(jsonb)');
RESET ROLE;

-- the state machine as this shop wants it: returns, and no "completed"
INSERT INTO pay.paynotify_transition VALUES ('shipped', 'returned'), ('returned', 'refunding');
DELETE FROM pay.paynotify_transition WHERE (from_state, to_state) = ('received', 'completed');

-- traffic: every signed test notification on its own channel, twice
SELECT count(*) FROM t.manifest, t.replay(name, 'r_');

-- and a Stripe channel with payments, a refund and an amount mismatch
\i test/e2e/stripe.sql
SELECT t.set_order('D' || i, 'pending') FROM generate_series(1, 20) i;
SELECT t.st('evt_pay_' || i, 'D' || i) FROM generate_series(1, 20) i;
SELECT t.st('evt_refund_1', 'D1', 'refund');
SELECT t.set_order('DX', 'pending', 1);
SELECT t.st('evt_mismatch', 'DX');

-- agreements: a WeChat Pay contract ended before its sign, another signed
-- and charged under
SELECT t.wx('d_wx', n) FROM unnest(ARRAY['ent_term_1', 'ent_sign_1', 'ent_sign_2']) n;
SELECT t.set_order('LG-PAP-2', 'pending', 100);
SELECT t.wx('d_wx', 'pap_pay_2');
SQL

check "traffic: outbox rows" yes "$(q src "SELECT CASE WHEN count(*) >= 20 THEN 'yes' ELSE count(*)::text END FROM pay.paynotify_outbox")"
check "traffic: anomalies" yes "$(q src "SELECT CASE WHEN count(*) >= 1 THEN 'yes' ELSE 'none' END FROM pay.paynotify_anomaly")"
check "traffic: agreements" "ended signed" "$(q src "SELECT string_agg(state, ' ' ORDER BY agreement_id) FROM pay.paynotify_agreement")"
check "traffic: a charge under an agreement" WXC-2 "$(q src "SELECT agreement_id FROM pay.payment_record WHERE agreement_id IS NOT NULL")"
check "traffic: the hook ran" yes "$(q src "SELECT CASE WHEN count(*) >= 20 THEN 'yes' ELSE count(*)::text END FROM shop.hook_calls")"

# table_hashes DB: one line per table: name, row count, md5 of the sorted rows;
# then the extension's sequences.
table_hashes() {
    local db=$1 t
    for t in $(q "$db" "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
                        WHERE schemaname IN ('pay', 'public', 'shop') ORDER BY 1"); do
        q "$db" "SELECT '$t', count(*), md5(COALESCE(string_agg(x::text, E'\n' ORDER BY x::text), ''))
                 FROM $t x"
    done
    q "$db" "SELECT 'outbox_id_seq', last_value, is_called FROM pay.paynotify_outbox_id_seq"
    q "$db" "SELECT 'anomaly_id_seq', last_value, is_called FROM pay.paynotify_anomaly_id_seq"
}

# round_trip FROM TO: pg_dump -Fc FROM, pg_restore into a new database TO.
round_trip() {
    local from=$1 to=$2
    if "$PN_PGBIN/pg_dump" -h "$dir" -p "$port" -U postgres -Fc -f "$dir/$from.dump" "$from" \
            2>"$dir/$from.dump.log"; then
        ok "pg_dump -Fc $from"
    else
        not_ok "pg_dump -Fc $from" "$(head -5 "$dir/$from.dump.log")"
    fi
    sql -d postgres -c "CREATE DATABASE $to" >/dev/null
    # the fixture replays one signed account on many channels, which only
    # paynotify.allow_shared_accounts permits (README: Backup and restore)
    if PGOPTIONS='-c paynotify.allow_shared_accounts=on' "$PN_PGBIN/pg_restore" -h "$dir" -p "$port" -U postgres --exit-on-error -d "$to" \
            "$dir/$from.dump" 2>"$dir/$to.restore.log"; then
        ok "pg_restore --exit-on-error into $to"
    else
        not_ok "pg_restore --exit-on-error into $to" "$(head -5 "$dir/$to.restore.log")"
    fi
}

table_hashes src >"$dir/src.hashes"
round_trip src dst
table_hashes dst >"$dir/dst.hashes"
if diff "$dir/src.hashes" "$dir/dst.hashes" >"$dir/hashes.diff"; then
    ok "every table ($(grep -c '^[a-z]*\.' "$dir/src.hashes")) and both sequences restored equal"
else
    not_ok "tables restored equal" "$(head -20 "$dir/hashes.diff")"
fi
check "customised transitions restored" "returned>refunding shipped>returned | received>completed" \
    "$(q dst "SELECT string_agg(from_state || '>' || to_state, ' ' ORDER BY from_state, to_state) FILTER (WHERE NOT
                  pay.paynotify_transition_is_default(from_state, to_state)) || ' | ' ||
              (SELECT string_agg(from_state || '>' || to_state, ' ') FROM pay.paynotify_transition_removed)
              FROM pay.paynotify_transition")"
check "the removed default is not allowed after the restore" 0 \
    "$(q dst "SELECT count(*) FROM pay.paynotify_transition WHERE (from_state, to_state) = ('received', 'completed')")"

# the next payment, an anomaly and the hook in the restored database
max_outbox=$(q dst "SELECT max(id) FROM pay.paynotify_outbox")
max_anomaly=$(q dst "SELECT max(id) FROM pay.paynotify_anomaly")
hooks=$(q dst "SELECT count(*) FROM shop.hook_calls")
check "next payment processed" processed \
    "$(q dst "SELECT t.set_order('D21', 'pending'); SELECT t.st('evt_pay_21', 'D21')" 2>&1 | tail -1)"
check "its outbox row takes the next id" yes \
    "$(q dst "SELECT CASE WHEN max(id) > $max_outbox THEN 'yes' ELSE max(id)::text END FROM pay.paynotify_outbox")"
check "its hook ran" $((hooks + 1)) "$(q dst "SELECT count(*) FROM shop.hook_calls")"
check "a redelivery of a payment from before the dump is a duplicate" duplicate \
    "$(q dst "SELECT t.st('evt_pay_1', 'D1')" 2>&1)"
check "next anomaly recorded" ignored \
    "$(q dst "SELECT t.set_order('DY', 'pending', 1); SELECT t.st('evt_mismatch_2', 'DY')" 2>&1 | tail -1)"
check "its anomaly row takes the next id" yes \
    "$(q dst "SELECT CASE WHEN max(id) > $max_anomaly THEN 'yes' ELSE max(id)::text END FROM pay.paynotify_anomaly")"
check "a charge under an agreement ended before the dump: its anomaly" charge_after_agreement_ended \
    "$(q dst "SELECT t.set_order('LG-PAP-1', 'pending', 100); SELECT outcome FROM t.wx('d_wx', 'pap_pay_1');
              SELECT kind FROM pay.paynotify_anomaly WHERE order_no = 'LG-PAP-1'" 2>&1 | tail -1)"
check "a vector replayed on a restored channel" duplicate \
    "$(q dst "SELECT outcome FROM t.deliver('wx_retry_duplicate_valid', 'r_wx_transaction_success_valid')" 2>&1)"

# a second round trip keeps the customised state machine and the sequences
round_trip dst dst2
check "second round trip: transitions equal" \
    "$(q dst "SELECT string_agg(from_state || '>' || to_state, ' ' ORDER BY from_state, to_state) FROM pay.paynotify_transition")" \
    "$(q dst2 "SELECT string_agg(from_state || '>' || to_state, ' ' ORDER BY from_state, to_state) FROM pay.paynotify_transition")"
check "second round trip: sequences equal" \
    "$(q dst "SELECT last_value FROM pay.paynotify_outbox_id_seq")/$(q dst "SELECT last_value FROM pay.paynotify_anomaly_id_seq")" \
    "$(q dst2 "SELECT last_value FROM pay.paynotify_outbox_id_seq")/$(q dst2 "SELECT last_value FROM pay.paynotify_anomaly_id_seq")"

finish
