#!/usr/bin/env bash
# The business step delegated to the order's node on Citus
# (paynotify_step_at, docs/CITUS.md): a coordinator and two workers on
# loopback (test/e2e/citus-lib.sh), 4 shards, no hook registered (a hook
# keeps today's path).
#
#   test/e2e/citus_delegate.sh
#
# Checked: paynotify_distribute() distributes paynotify_step_at by its
# order with force_delegation; a first Stripe payment from the coordinator
# and one from the worker without the order's shard are sent there as one
# call (the remote commands, citus.log_remote_commands, printed and
# counted: the one read of every shard, then the call) and applied once,
# a repeat a duplicate; no two-phase commit for any of it; the inner
# function refused (42501) to the shim's, the relay's and an operator's
# roles on every node, and a function of the same name with text
# arguments planted in the extension's schema (public) on every node never
# called; two deliveries of one notification on two nodes while the first
# holds the lock: the second answered busy at once (the step does not
# wait on the order's node); one notification id signed for two orders on
# two workers, delivered at once to the coordinator: the second waits for
# the first there and is ignored, an anomaly (the caller's lock, taken
# before the read of every shard); the same, each delivered to the other
# order's node at once: no error (no distributed deadlock), and the
# retries leave one order paid, the other's an anomaly; a
# Stripe dispute still on today's path; of the request's headers only the
# client's sent to the order's node; an error the delegated call catches
# outside the business step (the delivery's record refused once on the
# order's node, from another node and from that node itself; that node's
# configuration unreadable): warned on both nodes, the step run again on
# today's path, applied once; a duplicate's record refused there once: a
# duplicate on today's path; a gateway's signed answer to a query handed to
# paynotify_query_apply by the relay's role: delegated the same way,
# applied once, and falling back the same way; the record refused there and on the routed
# path too: an error, nothing applied, the call's message cut to 1,000
# bytes; a hook registered after the
# distribution (paynotify_on, twice as its role, refused to a role without
# its rights) puts deliveries back on today's path.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
pass=0 fail=0
unset FALLBACK_USER
citus_begin citus-delegate
citus_cluster "autovacuum = off" || exit 1
{ stack_schema 0 40 && citus_sql 0 -c "DELETE FROM paynotify_hook" && citus_grant notify_shim handler &&
    citus_sql 0 -c "CREATE ROLE notify_relay LOGIN" -c "CREATE ROLE pn_ops LOGIN" &&
    citus_grant notify_relay relay && citus_grant pn_ops admin; } >/dev/null 2>&1 ||
    { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
dist=$(citus_q 0 "SELECT kind || ': ' || action FROM paynotify_distribute() WHERE kind = 'delegated function'" 2>&1)
echo "# paynotify_distribute(): $dist"
STEP="paynotify_step_at(text, text, text, jsonb, jsonb, jsonb, integer, text, text)"
check "paynotify_step_at distributed by order_no, with the orders table, force_delegation" "0|true|true" \
    "$(citus_q 0 "SELECT o.distribution_argument_index || '|' ||
                  (o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'orders'::regclass)) || '|' ||
                  o.force_delegation FROM pg_dist_object o WHERE o.objid = '$STEP'::regprocedure" 2>&1)"
check "paynotify_distribute() again: already" "delegated function: already: $(citus_q 0 "SET search_path = pg_catalog; SELECT 'public.$STEP'::regprocedure")" \
    "$(citus_q 0 "SELECT kind || ': ' || action FROM paynotify_distribute() WHERE kind = 'delegated function'" 2>&1)"

# a worker whose database lists public before pg_catalog: refused before
# anything is changed (Citus's connections would look pg_catalog's names
# up in public first, as paynotify's owner)
citus_sql 1 -c "SET citus.enable_ddl_propagation = off" -c "ALTER DATABASE postgres SET search_path = public, pg_catalog" >/dev/null
out=$(citus_sql 0 -tA -c "SELECT count(*) FROM paynotify_distribute()" 2>&1)
citus_sql 1 -c "SET citus.enable_ddl_propagation = off" -c "ALTER DATABASE postgres RESET search_path" >/dev/null
check "paynotify_distribute() refused while worker 1's database lists public before pg_catalog" yes \
    "$(grep -q 'ERROR:  the search_path of worker 127.0.0.1:[0-9]* lists another schema before pg_catalog: public, pg_catalog' <<<"$out" && echo yes || echo "no: $out")"
# written otherwise, as the server reads it: a tab, capitals; and set for
# paynotify's owner in this database rather than for the database
citus_sql 1 -c "SET citus.enable_ddl_propagation = off" -c "SELECT set_config('search_path', E'public,\\tPG_Catalog', false)" \
    -c "ALTER ROLE postgres IN DATABASE postgres SET search_path FROM CURRENT" >/dev/null
out=$(citus_sql 0 -tA -c "SELECT count(*) FROM paynotify_distribute()" 2>&1)
citus_sql 1 -c "SET citus.enable_ddl_propagation = off" -c "ALTER ROLE postgres IN DATABASE postgres RESET search_path" >/dev/null
check "paynotify_distribute() refused while the owner's setting on worker 1 lists public before PG_Catalog (a tab between)" yes \
    "$(grep -q 'ERROR:  the search_path of worker 127.0.0.1:[0-9]* lists another schema before pg_catalog' <<<"$out" && echo yes || echo "no: $out")"

node_of() { citus_q 0 "SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column('orders', '$1')"; }
# orders on worker 2, and one on worker 1
w2=() w1= w1b= w1c= w1d= w1e=
for i in $(seq 1 40); do
    o=$(printf 'PN%08d' "$i")
    p=$(node_of "$o")
    if [ "$p" = "${CITUS_PORTS[2]}" ]; then w2+=("$i")
    elif [ "$p" = "${CITUS_PORTS[1]}" ] && [ -z "$w1" ]; then w1=$i
    elif [ "$p" = "${CITUS_PORTS[1]}" ] && [ -z "$w1b" ]; then w1b=$i
    elif [ "$p" = "${CITUS_PORTS[1]}" ] && [ -z "$w1c" ]; then w1c=$i
    elif [ "$p" = "${CITUS_PORTS[1]}" ] && [ -z "$w1d" ]; then w1d=$i
    elif [ "$p" = "${CITUS_PORTS[1]}" ] && [ -z "$w1e" ]; then w1e=$i; fi
done
echo "# orders on worker 2: ${w2[*]:0:4} (${#w2[@]} in all); on worker 1: $w1"
[ "${#w2[@]}" -ge 18 ] && [ -n "$w1e" ] ||
    { echo "setup: 18 orders on worker 2 and 5 on worker 1 needed, found ${#w2[@]} and $([ -n "$w1e" ] && echo 5 || echo fewer)"
      echo "$pass passed, $((fail + 1)) failed"; exit 1; }
dump() {	# dump INDEX SEED FILE: a first Stripe payment of order INDEX as one SQL call
    shim/paynotify-send --gateway stripe --mode distinct -n 1 --start "$1" --seed "$2" --keys test/vectors/keys \
        --quiet --dump-sql "$3" >/dev/null 2>&1
}
# call NODE FILE: the call on NODE with the remote commands logged, as a
# superuser (Citus's messages of the statements it sends are kept from
# other roles while paynotify runs: checked below); prints the outcome,
# then the remote commands (one a line)
call() {
    PGOPTIONS="-c citus.log_remote_commands=on -c client_min_messages=log" \
        "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=postgres" -f "$2" 2>&1 |
        grep -v '^$' | sed -n 's/^.*issuing /remote: /p; /^[a-z]*$/p'
}
remote_count() { grep -c '^remote: ' <<<"$1"; }
tpc0=$(citus_2pc_count)

# ---- a first delivery from the coordinator, and from worker 1 -------------------------
for from in 0 1; do
    idx=${w2[$from]} ord=$(printf 'PN%08d' "${w2[$from]}")
    dump "$idx" $((90 + from)) "$STACK_DIR/first$from.sql"
    out=$(call $from "$STACK_DIR/first$from.sql")
    echo "# node $from, order $ord (on worker 2): remote commands"
    sed -n 's/^remote: /#   /p' <<<"$out" | cut -c1-200
    check "node $from: a first payment of $ord (shard on worker 2): processed" processed "$(grep -v '^remote: ' <<<"$out")"
    n=$(remote_count "$out")
    # the one read of every shard (4 shards: 4 commands, those of a shard on this node run
    # here), BEGIN per node, the call, COMMIT per node: never the step's statements one by one
    check "node $from: delegated: the call sent as one statement, no step statement routed ($n remote commands)" \
        "1|0" "$(grep -c 'paynotify_step_at' <<<"$out")|$(grep -Eci 'INSERT INTO|UPDATE ' <<<"$out")"
    check "node $from: the cross-shard reads one command per shard, not per shard and table" 0 \
        "$(grep 'payment_record_[0-9]' <<<"$out" | grep -vc 'payment_notify_log_[0-9]')"
    check "node $from: applied once: one payment, one log row succeeded, the order paid, one event in the outbox" \
        "1|1|succeeded|paid|1" \
        "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no = '$ord') || '|' ||
                      (SELECT count(*) FROM payment_notify_log WHERE order_no = '$ord') || '|' ||
                      (SELECT string_agg(status, ',') FROM payment_notify_log WHERE order_no = '$ord') || '|' ||
                      (SELECT status FROM orders WHERE order_no = '$ord') || '|' ||
                      (SELECT count(*) FROM paynotify_outbox WHERE order_no = '$ord')" 2>&1)"
    out=$(call $((from + 1)) "$STACK_DIR/first$from.sql")
    check "node $from: the same notification again on node $((from + 1)): duplicate, nothing more applied" \
        "duplicate|1" "$(grep -v '^remote: ' <<<"$out")|$(citus_q 0 "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")"
done
# ---- what Citus shows a session of the statements it sends: the notice and
# its payload are in them, which the shim's role has no key to read.  As
# notify_shim with both of Citus's logs of statements on and every debug
# message asked for: none of them while paynotify runs (what the session
# is shown outside it stays: PostgreSQL's own messages of the transaction's
# start and commit, Citus's COMMIT sent to the nodes at the end), and the
# session's settings as they were after it
ord=$(printf 'PN%08d' "${w2[15]}")
dump "${w2[15]}" 94 "$STACK_DIR/quiet.sql"
out=$(PGOPTIONS="-c citus.log_remote_commands=on -c citus.log_local_commands=on -c client_min_messages=debug5" \
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_shim" \
    -f "$STACK_DIR/quiet.sql" -c "SELECT 'after:' || current_setting('citus.log_remote_commands') || ',' ||
        current_setting('citus.log_local_commands') || ',' || current_setting('client_min_messages')" 2>&1)
check "coordinator, as notify_shim with Citus's statement logs on and client_min_messages debug5: processed, no statement sent shown, no debug message, nothing of the payload; the settings as they were after" \
    "processed|0|0|0|after:on,on,debug5" \
    "$(grep -xE '[a-z]+' <<<"$out")|$(grep -E 'issuing|executing the command locally' <<<"$out" | grep -vc 'issuing COMMIT$')|$(grep 'DEBUG:' <<<"$out" | grep -Evc 'DEBUG:  (StartTransaction|CommitTransaction)\(1\)')|$(grep -Ec 'payment_intent|latest_charge' <<<"$out")|$(grep -o 'after:.*' <<<"$out")"
check "coordinator, as notify_shim: that delivery applied once" "1|paid" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no = '$ord') || '|' || (SELECT status FROM orders WHERE order_no = '$ord')")"
out=$(PGOPTIONS="-c citus.log_remote_commands=on" \
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=postgres" -f "$STACK_DIR/quiet.sql" 2>&1)
check "the same request again as a superuser: duplicate, the statements sent shown (a superuser may read them all)" \
    "duplicate|yes" "$(grep -xE '[a-z]+' <<<"$out")|$(grep -q 'issuing .*paynotify_step_at' <<<"$out" && echo yes || echo no)"
# the same logs asked for on the order's node too: SET LOCAL sent there
# with the call (citus.propagate_set_commands = local), where the call
# runs as paynotify's owner and Citus passes that node's notices back
ord=$(printf 'PN%08d' "${w2[16]}")
dump "${w2[16]}" 93 "$STACK_DIR/quiet_remote.sql"
out=$( { echo "SET citus.propagate_set_commands = 'local';"; echo "BEGIN;";
         echo "SET LOCAL citus.log_remote_commands = on; SET LOCAL citus.log_local_commands = on; SET LOCAL client_min_messages = debug5;";
         cat "$STACK_DIR/quiet_remote.sql"; echo "COMMIT;"; } |
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_shim" 2>&1)
check "coordinator, as notify_shim, the logs also set on the order's node by SET LOCAL: processed, no statement shown from either node, nothing of the payload" \
    "processed|0|0" \
    "$(grep -xE '[a-z]+' <<<"$out")|$(grep -E 'issuing|executing the command locally' <<<"$out" | grep -vcE 'issuing (COMMIT|BEGIN|SET LOCAL|SELECT assign_distributed_transaction_id)')|$(grep -Ec 'payment_intent|latest_charge' <<<"$out")"
# an error the delegated call does not catch (here a cancel, sent once a
# trigger on the order's shard of payment_record is seen sleeping there, so
# that it reaches the call whatever the machine's speed): the call's text,
# with the payload, is not in what the session is shown
ord=$(printf 'PN%08d' "${w2[17]}")
pshard=$(citus_q 0 "SELECT shard_name('payment_record', get_shard_id_for_distribution_column('payment_record', '$ord'))")
citus_sql 2 -c "SET citus.enable_ddl_propagation = off" \
    -c "CREATE FUNCTION public.pn_slow() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_catalog.pg_sleep(120); RETURN NEW; END \$\$" \
    -c "CREATE TRIGGER pn_slow BEFORE INSERT ON $pshard FOR EACH ROW EXECUTE FUNCTION public.pn_slow()" >/dev/null
dump "${w2[17]}" 92 "$STACK_DIR/cancel.sql"
PGAPPNAME=pn_cancel_me "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_shim" \
    -f "$STACK_DIR/cancel.sql" >"$STACK_DIR/cancel.out" 2>&1 &
cpid=$!
for _ in $(seq 1 600); do
    [ "$(citus_q 2 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")" = 1 ] && break
    sleep 0.2
done
sleeping=$(citus_q 2 "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
citus_q 0 "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'pn_cancel_me'" >/dev/null
wait $cpid
out=$(cat "$STACK_DIR/cancel.out")
citus_sql 2 -c "SET citus.enable_ddl_propagation = off" -c "DROP TRIGGER pn_slow ON $pshard" -c "DROP FUNCTION public.pn_slow()" >/dev/null
check "coordinator, as notify_shim, the delegated call cancelled while the step sleeps on the order's node: the error, its context without the call's text or the payload, nothing applied" \
    "1|1|0|0|1|pending" \
    "$sleeping|$(grep -c 'canceling statement due to user request' <<<"$out")|$(grep -c 'paynotify_step_at(' <<<"$out")|$(grep -Ec 'payment_intent|latest_charge' <<<"$out")|$(grep -c "CONTEXT:  paynotify's business step, delegated to the node of the order" <<<"$out")|$(citus_q 0 "SELECT status FROM orders WHERE order_no = '$ord'")"

# ---- a first delivery on the node of its order's shard: Citus runs the call in
# the same backend, the one nesting of paynotify's entries that is let through
ord=$(printf 'PN%08d' "$w1c")
dump "$w1c" 95 "$STACK_DIR/first_local.sql"
out=$(call 1 "$STACK_DIR/first_local.sql")
check "worker 1: a first payment of $ord (shard on worker 1), the step in its own backend: processed" \
    processed "$(grep -v '^remote: ' <<<"$out")"
check "worker 1: applied once: one payment, one log row succeeded, the order paid, one event" \
    "1|succeeded|paid|1" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no = '$ord') || '|' ||
                  (SELECT string_agg(status, ',') FROM payment_notify_log WHERE order_no = '$ord') || '|' ||
                  (SELECT status FROM orders WHERE order_no = '$ord') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE order_no = '$ord')" 2>&1)"
# ---- the step failing on the order's node, here the caller's own backend: a
# trigger on worker 1's shard of payment_record raises at its first insert only.
# The failure is the step's (answered failed, its log row failed, nothing
# applied), and the same notification delivered again is applied once.
ord=$(printf 'PN%08d' "$w1d")
shard=$(citus_q 0 "SELECT shard_name('payment_record', get_shard_id_for_distribution_column('payment_record', '$ord'))")
citus_sql 1 -c "SET citus.enable_ddl_propagation = off" -c "CREATE SEQUENCE public.pn_fail_once" \
    -c "CREATE FUNCTION public.pn_fail_once() RETURNS trigger LANGUAGE plpgsql AS \$\$
        BEGIN IF pg_catalog.nextval('public.pn_fail_once') = 1 THEN RAISE EXCEPTION 'the first insert fails'; END IF;
        RETURN NEW; END \$\$" \
    -c "CREATE TRIGGER pn_fail_once BEFORE INSERT ON $shard FOR EACH ROW EXECUTE FUNCTION public.pn_fail_once()" >/dev/null
dump "$w1d" 96 "$STACK_DIR/first_failing.sql"
out=$(call 1 "$STACK_DIR/first_failing.sql")
check "worker 1: the step failing in its own backend: failed, the log row failed with the error, nothing applied" \
    "failed|failed|the first insert fails|0|pending" \
    "$(grep -v '^remote: ' <<<"$out")|$(citus_q 0 "SELECT l.status || '|' || l.error_msg || '|' ||
        (SELECT count(*) FROM payment_record WHERE order_no = '$ord') || '|' ||
        (SELECT status FROM orders WHERE order_no = '$ord')
        FROM payment_notify_log l WHERE l.order_no = '$ord'" 2>&1)"
out=$(call 1 "$STACK_DIR/first_failing.sql")
check "worker 1: delivered again: processed, applied once (one payment, the log row succeeded, the order paid, one event)" \
    "processed|1|succeeded|paid|1" \
    "$(grep -v '^remote: ' <<<"$out")|$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no = '$ord') || '|' ||
                  (SELECT string_agg(status, ',') FROM payment_notify_log WHERE order_no = '$ord') || '|' ||
                  (SELECT status FROM orders WHERE order_no = '$ord') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE order_no = '$ord')" 2>&1)"
citus_sql 1 -c "SET citus.enable_ddl_propagation = off" -c "DROP TRIGGER pn_fail_once ON $shard" \
    -c "DROP FUNCTION public.pn_fail_once()" -c "DROP SEQUENCE public.pn_fail_once" >/dev/null
# ---- an error the delegated call catches outside the business step: with
# paynotify.delivery_history = all, a trigger on the order's node's shard of
# paynotify_delivery_history raises, after the step there applied the
# payment.  The call's run there is rolled back with the step's writes;
# the caller warns and runs the step on the routed path in its own
# transaction.
# fallback CALLER ORDER_INDEX SEED none|once|always: a first payment of
# order ORDER_INDEX delivered on node CALLER, with a cookie and the client's
# header among its request's headers, while the trigger on its shard's node
# raises never (none), at its first insert only (once) or at every one
# (always, with a message of 6,029 bytes, of two-byte characters after its
# first 29); prints what psql printed.  With a fifth argument "again": the
# same request as the last one for ORDER_INDEX, byte for byte (or the file
# written there).  As a superuser (see call), or as FALLBACK_USER; with
# FALLBACK_CONTEXT set, psql prints every message's context.
fallback() {
    local ord shard node
    ord=$(printf 'PN%08d' "$2")
    shard=$(citus_q 0 "SELECT shard_name('paynotify_delivery_history', get_shard_id_for_distribution_column('paynotify_delivery_history', '$ord'))")
    node=$(node_of "$ord")
    for i in 0 1 2; do [ "${CITUS_PORTS[$i]}" = "$node" ] && node=$i && break; done
    citus_sql "$node" -c "SET citus.enable_ddl_propagation = off" -c "CREATE SEQUENCE public.pn_fail_once" \
        -c "CREATE FUNCTION public.pn_fail_once() RETURNS trigger LANGUAGE plpgsql AS \$\$
            BEGIN IF '$4' = 'always' THEN RAISE EXCEPTION 'every delivery record fails: %', pg_catalog.repeat('é', 3000); END IF;
            IF '$4' = 'once' AND pg_catalog.nextval('public.pn_fail_once') = 1 THEN RAISE EXCEPTION 'the first delivery record fails'; END IF;
            RETURN NEW; END \$\$" \
        -c "CREATE TRIGGER pn_fail_once BEFORE INSERT ON $shard FOR EACH ROW EXECUTE FUNCTION public.pn_fail_once()" >/dev/null
    for i in 0 1; do
        citus_sql "$i" -c "SET citus.enable_ddl_propagation = off" -c "ALTER DATABASE postgres SET paynotify.delivery_history = 'all'" >/dev/null
    done
    if [ "${5:-}" != again ]; then
        dump "$2" "$3" "$STACK_DIR/fallback$2.sql"
        sed -i "s/'{\"Content-Type\"/'{\"Cookie\":\"session=topsecret-cookie\",\"X-Paynotify-Client\":\"$CLIENT\",\"Content-Type\"/" \
            "$STACK_DIR/fallback$2.sql"
    fi
    PGOPTIONS="-c citus.log_remote_commands=on -c client_min_messages=log" \
        "$PN_PGBIN/psql" -X -q -tA ${FALLBACK_CONTEXT:+-v SHOW_CONTEXT=always} \
        "host=127.0.0.1 port=${CITUS_PORTS[$1]} dbname=postgres user=${FALLBACK_USER:-postgres}" -f "$STACK_DIR/fallback$2.sql" 2>&1
    for i in 0 1; do
        citus_sql "$i" -c "SET citus.enable_ddl_propagation = off" -c "ALTER DATABASE postgres RESET paynotify.delivery_history" >/dev/null
    done
    citus_sql "$node" -c "SET citus.enable_ddl_propagation = off" -c "DROP TRIGGER pn_fail_once ON $shard" \
        -c "DROP FUNCTION public.pn_fail_once()" -c "DROP SEQUENCE public.pn_fail_once" >/dev/null
}
# applied ORDER: payments, log rows' status, delivery count, attempts, the order's status, events, deliveries recorded
applied() {
    citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no = '$1') || '|' ||
                      (SELECT coalesce(string_agg(status || ',' || delivery_count || ',' || attempts, ';'), '') FROM payment_notify_log WHERE order_no = '$1') || '|' ||
                      (SELECT status FROM orders WHERE order_no = '$1') || '|' ||
                      (SELECT count(*) FROM paynotify_outbox WHERE order_no = '$1') || '|' ||
                      (SELECT coalesce(string_agg(outcome, ',' ORDER BY id), '') FROM paynotify_delivery_history WHERE order_no = '$1')" 2>&1
}
# the node's warning (relayed by Citus), the caller's, each with the error
warned() {
    echo "$(grep -xE '[a-z]+' <<<"$1" | tr '\n' ' ' | sed 's/ $//')|$(grep -c 'WARNING:  paynotify: delegated business step failed for notification' <<<"$1")|$(grep -c 'WARNING:  paynotify: business step failed on the node of order "'"$2"'"' <<<"$1")|$(grep -c "DETAIL:  $3" <<<"$1")"
}
# a client's header of 219 bytes, two-byte characters from its 200th: sent
# and recorded as the history keeps it, 199 bytes (200 would split one)
CUT="10.0.0.7-$(printf 'x%.0s' $(seq 190))"
CLIENT="${CUT}éééééééééé"
ord=$(printf 'PN%08d' "${w2[11]}")
raw=$(fallback 0 "${w2[11]}" 96 none)
check "coordinator: delegated with delivery history on: processed, the client's header alone sent to the order's node (cut to 199 bytes, whole characters), the client recorded" \
    "processed|1|0|0|$CUT" \
    "$(grep -xE '[a-z]+' <<<"$raw")|$(grep 'issuing .*paynotify_step_at' <<<"$raw" | grep -c "{\"X-Paynotify-Client\": \"$CUT\"}")|$(grep -c 'topsecret' <<<"$raw")|$(grep 'issuing .*paynotify_step_at' <<<"$raw" | grep -c 'Stripe-Signature')|$(citus_q 0 "SELECT string_agg(client, ',') FROM paynotify_delivery_history WHERE order_no = '$ord'")"
# fallback_once CALLER ORDER_INDEX SEED WHERE: the record refused once; sets raw
fallback_once() {
    local ord
    ord=$(printf 'PN%08d' "$2")
    raw=$(fallback "$1" "$2" "$3" once)
    check "$4: the delegated call failing outside the step (its delivery record): warned there and here, the step run on the routed path" \
        "processed|1|1|2" "$(warned "$raw" "$ord" 'the first delivery record fails')"
    check "$4: after the fallback, applied once: one payment, one log row (succeeded, one delivery, one attempt), the order paid, one event, one delivery recorded" \
        "1|succeeded,1,1|paid|1|processed" "$(applied "$ord")"
}
fallback_once 0 "${w2[9]}" 97 "coordinator, order on worker 2"
check "coordinator: the call sent once, then the step's statements routed to worker 2" \
    "1|yes" "$(grep -c 'issuing .*paynotify_step_at' <<<"$raw")|$(grep -Eq 'issuing INSERT INTO [a-z_.]*payment_record_[0-9]' <<<"$raw" && echo yes || echo no)"
# the same request again: a duplicate, which the call deduplicates on the
# order's node; its record refused there once, so the duplicate's path
# falls back as the first delivery's did
ord=$(printf 'PN%08d' "${w2[9]}")
raw=$(fallback 0 "${w2[9]}" 97 once again)
check "coordinator: the same notification again, its record refused once on the order's node: warned there and here, answered duplicate on the routed path" \
    "duplicate|1|1|2" "$(warned "$raw" "$ord" 'the first delivery record fails')"
check "coordinator: after the duplicate's fallback still applied once: one payment, the log row succeeded with two deliveries and one attempt, one event, both deliveries recorded" \
    "1|succeeded,2,1|paid|1|processed,duplicate" "$(applied "$ord")"
fallback_once 1 "$w1e" 98 "worker 1, order on worker 1 (the call in the caller's backend)"
ord=$(printf 'PN%08d' "${w2[10]}")
raw=$(fallback 0 "${w2[10]}" 99 always)
# cut to 1,000 bytes and not inside a character: 29 + 485 * 2 = 999
check "coordinator: the delivery record failing there and on the routed path: an error, no answer; the delegated call's message cut to 999 bytes, whole characters" \
    "|1|1|2|1|999 999" \
    "$(warned "$raw" "$ord" 'every delivery record fails')|$(grep -c 'ERROR:  every delivery record fails' <<<"$raw")|$(grep 'DETAIL:  every delivery record fails' <<<"$raw" | sed 's/^DETAIL:  //' |
        python3 -c 'import sys; print(" ".join(str(len(l.rstrip(b"\n").decode("utf-8"))) and str(len(l.rstrip(b"\n"))) for l in sys.stdin.buffer))' 2>&1)"
check "coordinator: after that error nothing applied or recorded: no payment, no log row, the order pending, no event, no delivery recorded" \
    "0||pending|0|" "$(applied "$ord")"
# the warnings relayed from the order's node while the call runs, their
# context printed (psql's SHOW_CONTEXT always), as the shim's role: the
# call's statement there names its arguments, not the notice or payload
ord=$(printf 'PN%08d' "${w2[8]}")
raw=$(FALLBACK_USER=notify_shim FALLBACK_CONTEXT=1 fallback 0 "${w2[8]}" 91 once)
check "coordinator, as notify_shim, every message's context printed: the fallback's warnings shown, with their context, nothing of the payload" \
    "processed|1|1|yes|0" \
    "$(warned "$raw" "$ord" 'the first delivery record fails' | cut -d'|' -f1-3)|$(grep -q '^CONTEXT:' <<<"$raw" && echo yes || echo no)|$(grep -Ec 'payment_intent|latest_charge' <<<"$raw")"
# ---- the order's node's configuration unreadable (a channel of an unknown
# gateway written into worker 2's copy of the reference table alone, as a
# node half-way through an upgrade may have): the call's error is caught
# there, and the caller, whose configuration is whole, runs the step on the
# routed path
ord=$(printf 'PN%08d' "${w2[12]}")
chshard=$(citus_q 0 "SELECT shard_name('paynotify_channel', shardid) FROM pg_dist_shard WHERE logicalrelid = 'paynotify_channel'::regclass")
citus_sql 2 -c "SET citus.enable_manual_changes_to_shards = on" \
    -c "INSERT INTO $chshard (name, gateway) VALUES ('bogus_ch', 'nosuch')" >/dev/null
dump "${w2[12]}" 100 "$STACK_DIR/config_broken.sql"
raw=$(PGOPTIONS="-c client_min_messages=warning" \
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=notify_shim" -f "$STACK_DIR/config_broken.sql" 2>&1)
citus_sql 2 -c "SET citus.enable_manual_changes_to_shards = on" -c "DELETE FROM $chshard WHERE name = 'bogus_ch'" >/dev/null
check "coordinator: worker 2's configuration unreadable: the call's error caught there, warned, the step run on the routed path" \
    "processed|1|1|2" "$(warned "$raw" "$ord" 'channel "bogus_ch" has unknown gateway "nosuch"')"
check "coordinator: applied once (one payment, one log row succeeded, the order paid, one event)" \
    "1|succeeded,1,1|paid|1|" "$(applied "$ord")"
check "no two-phase commit for the delegated deliveries (pg_dist_transaction, prepared)" "$tpc0" "$(citus_2pc_count)"

# ---- paynotify_query_apply: the gateway's signed answer to a query of the
# order (WeChat Pay's, laid out and signed as test/unit/make_query_responses.py
# makes them, at the real clock) applies through the same delegated call
# (seen as a superuser), and falls back the same way (as the relay's role)
qanswer() {	# qanswer ORDER_INDEX FILE: the call handing back "paid" for order ORDER_INDEX
    python3 - "$(printf 'PN%08d' "$1")" "420000000020260102$(printf '%010d' "$1")" >"$2" <<'PY'
import json, sys, time
sys.path.insert(0, "test/unit")
import make_query_responses as q
order, trade = sys.argv[1:3]
q.TS = int(time.time())
a = q.wx_answer("citus", order, q.wx_txn(order, "SUCCESS", trade))
lit = lambda s: "'" + s.replace("'", "''") + "'"
print("SELECT outcome FROM paynotify_query_apply('wxpay', %s, 200, %s::jsonb, pg_catalog.convert_to(%s, 'UTF8'));"
      % (lit(order), lit(json.dumps(a["headers"])), lit(a["body"])))
PY
}
ord=$(printf 'PN%08d' "${w2[13]}")
qanswer "${w2[13]}" "$STACK_DIR/query.sql"
out=$(PGOPTIONS="-c citus.log_remote_commands=on -c client_min_messages=log" \
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=postgres" -f "$STACK_DIR/query.sql" 2>&1)
check "coordinator: a query's signed answer that $ord (worker 2) is paid: processed, its step sent as one call to its node, no warning, no step statement routed" \
    "processed|1|0|0" "$(grep -xE '[a-z]+' <<<"$out")|$(grep -c 'issuing .*paynotify_step_at' <<<"$out")|$(grep -c WARNING <<<"$out")|$(grep -Ec 'issuing (INSERT INTO|UPDATE) [a-z_.]*(payment_record|payment_notify_log|orders|paynotify_outbox|paynotify_order_history)_[0-9]' <<<"$out")"
check "the query's answer applied once: one payment, one log row (succeeded, source query), the order paid, one event" \
    "1|succeeded,query|paid|1" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no = '$ord') || '|' ||
                  (SELECT string_agg(status || ',' || source, ';') FROM payment_notify_log WHERE order_no = '$ord') || '|' ||
                  (SELECT status FROM orders WHERE order_no = '$ord') || '|' ||
                  (SELECT count(*) FROM paynotify_outbox WHERE order_no = '$ord')" 2>&1)"
ord=$(printf 'PN%08d' "${w2[14]}")
qanswer "${w2[14]}" "$STACK_DIR/fallback${w2[14]}.sql"
raw=$(FALLBACK_USER=notify_relay fallback 0 "${w2[14]}" 0 once again)
check "coordinator, as the relay: a query's answer whose record is refused once on the order's node: warned there and here, applied on the routed path" \
    "processed|1|1|2" "$(warned "$raw" "$ord" 'the first delivery record fails')"
check "the query's answer after the fallback applied once: one payment, one log row, the order paid, one event" \
    "1|succeeded,1,1|paid|1|processed" "$(applied "$ord")"
check "the query's answer after the fallback: its log row's source query" "query" \
    "$(citus_q 0 "SELECT string_agg(source, ',') FROM payment_notify_log WHERE order_no = '$ord'")"

# ---- the operator writing secrets: the channel's settings and a key go to
# every node in statements Citus would show; as pn_ops with both logs on and
# every debug message asked for, neither the APIv3 key nor the new secret
apiv3=$(tr -d '\n' <test/vectors/keys/wechat_apiv3.key)
whsec=$(tr -d '\n' <test/vectors/keys/stripe_secret_2.txt)
out=$(PGOPTIONS="-c citus.log_remote_commands=on -c citus.log_local_commands=on -c client_min_messages=debug5" \
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[0]} dbname=postgres user=pn_ops" \
    -c "SELECT paynotify_alter_channel('wxpay'::text, '{\"tolerance_s\": 300}'::jsonb)" \
    -c "SELECT paynotify_add_key('stripe'::text, 'whsec_q'::text, '$whsec'::text)" 2>&1)
check "as pn_ops with Citus's logs on: the channel altered and a key added, neither the APIv3 key nor the key's secret shown" \
    "0|0|1" "$(grep -cF "$apiv3" <<<"$out")|$(grep -cF "$whsec" <<<"$out")|$(citus_q 0 "SELECT count(*) FROM paynotify_key WHERE key_id = 'whsec_q'")"

# ---- the inner function: nobody but paynotify's owner, on every node -----------------
for i in 0 1 2; do
    for r in notify_shim notify_relay pn_ops; do
        got=$("$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$i]} dbname=postgres user=$r" \
            -v VERBOSITY=verbose -c "SELECT * FROM paynotify_step_at('PN00000040', 'stripe', 'evt_forged', '{\"action\": \"pay\", \"order_no\": \"PN00000040\"}', '{}', NULL, 0, 'on', NULL)" 2>&1 |
            sed -n 's/^ERROR: *\([0-9A-Z]\{5\}\):.*/\1/p')
        check "node $i: $r calling paynotify_step_at directly: 42501" 42501 "$got"
    done
done
check "nothing forged applied: order PN00000040 pending, no log row" "pending|0" \
    "$(citus_q 0 "SELECT (SELECT status FROM orders WHERE order_no = 'PN00000040') || '|' ||
                  (SELECT count(*) FROM payment_notify_log WHERE notify_id = 'evt_forged')" 2>&1)"

# ---- a hostile public schema (the extension's schema here) on every node --------------
# a role that may create in public plants paynotify_step_at with text
# arguments, which untyped literals would prefer: the call must still reach
# paynotify's function, and never run the planted one (as paynotify's owner)
citus_sql 0 -c "CREATE ROLE mallory LOGIN" >/dev/null 2>&1
for i in 0 1 2; do
    citus_sql $i -q -c "GRANT CREATE ON SCHEMA public TO mallory" >/dev/null 2>&1
    "$PN_PGBIN/psql" -X -q "host=127.0.0.1 port=${CITUS_PORTS[$i]} dbname=postgres user=mallory" >/dev/null 2>&1 <<'SQL'
SET citus.enable_ddl_propagation = off;
CREATE TABLE public.planted_calls (who text, at timestamptz DEFAULT now());
GRANT INSERT ON public.planted_calls TO PUBLIC;
CREATE FUNCTION public.paynotify_step_at(text, text, text, text, text, text, integer, text, text,
    OUT outcome text, OUT error text) LANGUAGE sql
    AS $$ INSERT INTO public.planted_calls (who) VALUES (current_user); SELECT 'processed'::text, NULL::text $$;
GRANT EXECUTE ON FUNCTION public.paynotify_step_at(text, text, text, text, text, text, integer, text, text) TO PUBLIC;
SQL
done
idx=${w2[2]} ord=$(printf 'PN%08d' "${w2[2]}")
dump "$idx" 95 "$STACK_DIR/planted.sql"
out=$(call 1 "$STACK_DIR/planted.sql")
check "planted function on every node: a first payment of $ord from worker 1 processed and applied" "processed|1" \
    "$(grep -v '^remote: ' <<<"$out")|$(citus_q 0 "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")"
planted=0
for i in 0 1 2; do
    n=$(citus_q $i "SELECT count(*) FROM public.planted_calls" 2>/dev/null) || n=missing
    planted="$planted+$n"
done
check "the planted function never called on any node" "0+0+0+0" "$planted"

pay_as() {	# pay_as ORDER EVENT_ID FILE: a first Stripe payment of ORDER signed as event EVENT_ID, as one SQL call
    cat >"$3.json" <<EOF
{"id": "$2", "object": "event", "api_version": "2025-03-31.basil", "created": $(date +%s),
 "data": {"object": {"id": "pi_$2$1", "object": "payment_intent", "amount": 8888,
  "amount_received": 8888, "currency": "usd", "latest_charge": "ch_$2$1", "livemode": false,
  "metadata": {"order_id": "$1"}, "status": "succeeded"}},
 "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": null},
 "type": "payment_intent.succeeded"}
EOF
    shim/paynotify-send --gateway stripe --payload "$3.json" --mode one --keys test/vectors/keys \
        --quiet --dump-sql "$3" >/dev/null 2>&1
}
# ---- a gate: a delivery held in its open transaction until the test opens it ----
citus_sql 0 -c "CREATE TABLE gate (name text PRIMARY KEY)" -c "SELECT create_reference_table('gate')" >/dev/null
hold() {	# hold IN NAME OUT: IN's call, then a wait for the gate NAME, in one transaction
    { echo "BEGIN;"; cat "$1"
      echo "DO \$\$ BEGIN WHILE NOT EXISTS (SELECT FROM gate WHERE name = '$2') LOOP PERFORM pg_sleep(0.02); END LOOP; END \$\$;"
      echo "COMMIT;"; } >"$3"
}
until_true() {	# until_true NODE SQL: polls until SQL answers t; 1 after 120 s
    local i
    for i in $(seq 1 6000); do
        [ "$(citus_q "$1" "$2" 2>/dev/null)" = t ] && return 0
        sleep 0.02
    done
    return 1
}
at_gate() {	# at_gate NAME: SQL, whether a session waits at the gate NAME
    echo "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active'
                         AND query LIKE 'DO %gate WHERE name = ''$1''%')"
}

# ---- two deliveries of one notification on two nodes, the first holding the lock ----
idx=${w2[3]} ord=$(printf 'PN%08d' "${w2[3]}")
dump "$idx" 96 "$STACK_DIR/busy.sql"
hold "$STACK_DIR/busy.sql" busy "$STACK_DIR/busy_hold.sql"
citus_sql 0 -tA -f "$STACK_DIR/busy_hold.sql" >"$STACK_DIR/busy_hold.out" 2>&1 &
holder=$!
until_true 0 "$(at_gate busy)" || echo "# the first delivery never reached the gate"
t0=$(date +%s%N)
second=$(citus_sql 1 -tA -c "SET paynotify.lock_timeout = 60000" -f "$STACK_DIR/busy.sql" 2>&1 | grep -v '^$' | tail -1)
ms=$((($(date +%s%N) - t0) / 1000000))
held=$(citus_q 0 "$(at_gate busy)")
citus_q 0 "INSERT INTO gate VALUES ('busy')" >/dev/null
wait "$holder"
echo "# the second delivery answered after $ms ms (its node's paynotify.lock_timeout 60 s), the first still holding: $held"
check "the first delivery (coordinator, held open): processed" processed "$(grep -E '^[a-z]+$' "$STACK_DIR/busy_hold.out" | head -1)"
check "the second delivery on worker 1 meanwhile: busy" busy "$second"
check "the second answered without waiting on the order's node, while the first still held its transaction" yes \
    "$([ "$held" = t ] && echo yes || echo "no: $ms ms, first holding: $held")"
check "applied once: one payment of $ord" 1 "$(citus_q 0 "SELECT count(*) FROM payment_record WHERE order_no = '$ord'")"

# ---- the order's row held by the application: the step's wait bounded ----
# (the step tries the notification's lock only, but waits for the order's
# row at most paynotify.lock_timeout, the caller's, passed)
ridx=${w2[7]} rord=$(printf 'PN%08d' "${w2[7]}")
dump "$ridx" 98 "$STACK_DIR/rowheld.sql"
{ echo "BEGIN;"; echo "SELECT order_no FROM orders WHERE order_no = '$rord' FOR UPDATE;"
  echo "DO \$\$ BEGIN WHILE NOT EXISTS (SELECT FROM gate WHERE name = 'row') LOOP PERFORM pg_sleep(0.02); END LOOP; END \$\$;"
  echo "COMMIT;"; } >"$STACK_DIR/row_hold.sql"
citus_sql 0 -tA -f "$STACK_DIR/row_hold.sql" >/dev/null 2>&1 &
holder=$!
until_true 0 "$(at_gate row)" || echo "# the application's transaction never reached the gate"
t0=$(date +%s%N)
rowans=$(timeout 60 "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[1]} dbname=postgres user=postgres" \
    -c "SET paynotify.lock_timeout = 700" -f "$STACK_DIR/rowheld.sql" 2>&1 | grep -E '^[a-z]+$' | tail -1)
ms=$((($(date +%s%N) - t0) / 1000000))
citus_q 0 "INSERT INTO gate VALUES ('row')" >/dev/null
wait "$holder"
echo "# the delivery while the application held the order's row: $rowans after $ms ms (paynotify.lock_timeout 700 ms)"
check "the order's row held by the application: the delegated step answered busy, not waiting without end" busy "$rowans"
check "then the retry applies it once" "processed|1" \
    "$(citus_sql 1 -tA -f "$STACK_DIR/rowheld.sql" 2>&1 | grep -E '^[a-z]+$' | tail -1)|$(citus_q 0 "SELECT count(*) FROM payment_record WHERE order_no = '$rord'")"

# ---- one notification id signed for two orders, both delivered at once to one node ----
# The first (order on worker 2) is held open after its call; the second
# (order on worker 1) reaches the same node meanwhile and waits for the
# notification's lock there; once the first commits it sees the first's
# log row under the other order: ignored, an anomaly, never applied.
oa=$(printf 'PN%08d' "${w2[4]}") ob=$(printf 'PN%08d' "$w1")
pay_as "$oa" evt_delegSameId0001 "$STACK_DIR/same-$oa.sql"
pay_as "$ob" evt_delegSameId0001 "$STACK_DIR/same-$ob.sql"
hold "$STACK_DIR/same-$oa.sql" same "$STACK_DIR/same_hold.sql"
citus_sql 0 -tA -f "$STACK_DIR/same_hold.sql" >"$STACK_DIR/same_hold.out" 2>&1 &
holder=$!
until_true 0 "$(at_gate same)" || echo "# the first delivery never reached the gate"
citus_sql 0 -tA -c "SET paynotify.lock_timeout = 60000" -f "$STACK_DIR/same-$ob.sql" >"$STACK_DIR/same_second.out" 2>&1 &
second=$!
until_true 0 "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)" ||
    echo "# the second delivery never waited for the lock"
citus_q 0 "INSERT INTO gate VALUES ('same')" >/dev/null
wait "$holder" "$second"
check "one id for two orders on one node at once: the first processed, the second ignored" "processed|ignored" \
    "$(grep -E '^[a-z]+$' "$STACK_DIR/same_hold.out" | head -1)|$(grep -E '^[a-z]+$' "$STACK_DIR/same_second.out" | head -1)"
check "only the first order paid; the second's an anomaly payload_differs_for_same_id" "paid|pending|0|1" \
    "$(citus_q 0 "SELECT (SELECT status FROM orders WHERE order_no = '$oa') || '|' ||
                        (SELECT status FROM orders WHERE order_no = '$ob') || '|' ||
                        (SELECT count(*) FROM payment_record WHERE order_no = '$ob') || '|' ||
                        (SELECT count(*) FROM paynotify_anomaly WHERE notify_id = 'evt_delegSameId0001'
                            AND kind = 'payload_differs_for_same_id')" 2>&1)"

# ---- one id signed for two orders, each delivered at once to the other order's node ----
# Each holds its own node's lock; the steps take the order's node's lock
# without waiting: no circle (a wait there was cancelled by Citus as a
# distributed deadlock, an error): both busy while both hold (or one
# applied, the other busy or ignored); the gateway's retries, one after
# the other: one applied, the other ignored, an anomaly.
oc=$(printf 'PN%08d' "${w2[6]}") od=$(printf 'PN%08d' "$w1b")
pay_as "$oc" evt_delegCross0001 "$STACK_DIR/cross-$oc.sql"
pay_as "$od" evt_delegCross0001 "$STACK_DIR/cross-$od.sql"
# $oc (shard on worker 2) to worker 1, $od (shard on worker 1) to worker 2, each held open after its call
hold "$STACK_DIR/cross-$oc.sql" crossc "$STACK_DIR/cross_c.sql"
hold "$STACK_DIR/cross-$od.sql" crossd "$STACK_DIR/cross_d.sql"
citus_sql 1 -tA -c "SET paynotify.lock_timeout = 60000" -f "$STACK_DIR/cross_c.sql" >"$STACK_DIR/cross_c.out" 2>&1 &
pc=$!
citus_sql 2 -tA -c "SET paynotify.lock_timeout = 60000" -f "$STACK_DIR/cross_d.sql" >"$STACK_DIR/cross_d.out" 2>&1 &
pd=$!
# each node's delivery at its gate (one that answered busy ends there too),
# or waiting there for the notification's lock: when the other's step took
# that node's lock first (processed), this one waits for it until that
# transaction ends, which the gate holds; the gates open then, not after
# its paynotify.lock_timeout
for n in 1 2; do
    until_true "$n" "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active'
                                    AND query LIKE 'DO %gate WHERE name = ''cross%')
                     OR EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)" ||
        echo "# worker $n: no delivery reached the gate or waited for the lock"
done
citus_sql 0 -q -c "INSERT INTO gate VALUES ('crossc'), ('crossd')" >/dev/null
wait "$pc" "$pd"
outs="$(grep -hE '^[a-z]+$' "$STACK_DIR/cross_c.out" | head -1),$(grep -hE '^[a-z]+$' "$STACK_DIR/cross_d.out" | head -1)"
echo "# answers: $outs; errors: $(grep -h 'ERROR' "$STACK_DIR/cross_c.out" "$STACK_DIR/cross_d.out" | head -2)"
check "crossing deliveries: no error, no wait; busy (both held), or one processed and the other busy or ignored" yes \
    "$(case "$outs" in busy,busy|processed,busy|busy,processed|processed,ignored|ignored,processed) echo yes ;; *) echo "no: $outs" ;; esac)"
# the gateway's retries of both, one after the other
echo "# the retries: $(citus_sql 1 -tA -f "$STACK_DIR/cross-$oc.sql" 2>&1 | grep -v '^$' | head -2 | paste -sd' '),$(
    citus_sql 2 -tA -f "$STACK_DIR/cross-$od.sql" 2>&1 | grep -v '^$' | head -2 | paste -sd' ')"
# (a first delivery answered ignored recorded the anomaly once already)
ignored=$(printf '%s\n' "${outs//,/$'\n'}" | grep -cx ignored)
check "the retries: one order paid once, the other pending with the anomaly (once more for an ignored first delivery)" \
    "1|1|$((1 + ignored))" \
    "$(citus_q 0 "SELECT (SELECT count(*) FROM payment_record WHERE order_no IN ('$oc', '$od')) || '|' ||
                        (SELECT count(*) FROM orders WHERE order_no IN ('$oc', '$od') AND status = 'pending') || '|' ||
                        (SELECT count(*) FROM paynotify_anomaly WHERE notify_id = 'evt_delegCross0001'
                            AND kind = 'payload_differs_for_same_id')" 2>&1)"

# ---- a dispute: today's path ---------------------------------------------------------
dord=$(printf 'PN%08d' "${w2[0]}")
dtrade=$(citus_q 0 "SELECT trade_no FROM payment_record WHERE order_no = '$dord'")
now=$(date +%s)
cat >"$STACK_DIR/dispute.json" <<EOF
{"id": "evt_delegDispute0001", "object": "event", "api_version": "2025-03-31.basil", "created": $now,
 "data": {"object": {"id": "dp_deleg0001", "object": "dispute", "amount": 1234, "currency": "usd",
  "charge": "ch_deleg0001", "payment_intent": "$dtrade", "reason": "fraudulent", "status": "needs_response",
  "metadata": {}, "is_charge_refundable": false}},
 "livemode": false, "pending_webhooks": 1, "request": {"id": null, "idempotency_key": null},
 "type": "charge.dispute.created"}
EOF
shim/paynotify-send --gateway stripe --payload "$STACK_DIR/dispute.json" --mode one --keys test/vectors/keys \
    --quiet --dump-sql "$STACK_DIR/dispute.sql" >/dev/null 2>&1
out=$(call 1 "$STACK_DIR/dispute.sql")
check "a dispute of $dord's trade on worker 1: processed, on today's path (no paynotify_step_at call)" "processed|0" \
    "$(grep -v '^remote: ' <<<"$out")|$(grep -c 'paynotify_step_at' <<<"$out")"
check "the dispute recorded once under $dord" "1" \
    "$(citus_q 0 "SELECT count(*) FROM paynotify_dispute WHERE order_no = '$dord'" 2>&1)"

# ---- a hook registered after the distribution: today's path again -------------------
# paynotify_on writes a reference table then: the registrant's rights are
# decided on the node that runs it, not in the statement (Citus refused its
# subquery, and a worker would have judged the coordinator's role oids)
citus_sql 0 >/dev/null 2>&1 <<'SQL'
CREATE FUNCTION hook_noop(ev jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
REVOKE EXECUTE ON FUNCTION hook_noop(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION hook_noop(jsonb) TO erp_ops;
SQL
out=$(citus_sql 0 -tA -c "SET ROLE erp_ops" -c "SELECT paynotify_on('paid', 'hook_noop(jsonb)')" \
          -c "SELECT paynotify_on('paid', 'hook_noop(jsonb)')" -c "RESET ROLE" \
          -c "SELECT registrant || '|' || count(*) OVER () FROM paynotify_hook" 2>&1 | grep -v '^$')
check "paynotify_on after the distribution, twice, as the plain role erp_ops: one row, erp_ops's" "erp_ops|1" "$out"
out=$(citus_sql 0 -tA -c "CREATE ROLE pn_other LOGIN" -c "SELECT paynotify_grant('pn_other', 'admin')" \
          -c "GRANT EXECUTE ON FUNCTION hook_noop(jsonb) TO pn_other" \
          -c "SET ROLE pn_other" -c "SELECT paynotify_on('paid', 'hook_noop(jsonb)')" 2>&1 | grep -o 'ERROR: .*')
check "registering it again as a role without erp_ops's rights: refused" \
    "ERROR:  hook public.hook_noop(jsonb) for event \"paid\" is registered by a role whose rights \"pn_other\" does not have" "$out"
hidx=${w2[5]} hord=$(printf 'PN%08d' "${w2[5]}")
dump "$hidx" 97 "$STACK_DIR/hooked.sql"
out=$(call 0 "$STACK_DIR/hooked.sql")
check "with the hook, a first payment of $hord on the coordinator: processed, not delegated" "processed|0" \
    "$(grep -v '^remote: ' <<<"$out")|$(grep -c 'paynotify_step_at' <<<"$out")"
finish
