#!/usr/bin/env bash
# paynotify_handle's CPU per first delivery, in instructions: prints figures,
# asserts nothing.  Deterministic (callgrind counts instructions, so other
# load on the machine does not change it), which makes it the measure to
# compare a change against.
#
#   test/bench/callgrind.sh [K]
#
# The same schema and WeChat notifications as test/bench/run.sh db, in a
# single-user backend under callgrind: K first deliveries (default 100, a
# prepared statement as pgbench -M prepared runs it) and then 2K in a fresh
# backend, counting only statement processing (parse, plan, run, start and
# commit of the transaction); (cost(2K) - cost(K)) / K is the marginal cost
# of one delivery with warm caches, start-up and one-time loading cancel
# out.  Waiting for the WAL flush costs no instructions, so it is not in
# the figure.  The same for the plain-SQL baseline, and paynotify's cost
# divided by the baseline's.  CALLGRIND_NOTIFY=on|coalesced|off sets
# paynotify.notify; CALLGRIND_KEEP=DIR keeps the callgrind.out files there
# for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
k=${1:-100}
n=$((3 * k + 10))
now=1767225600

make -s >/dev/null && make -s install >/dev/null
make -s -C shim >/dev/null
stack_init callgrind
stack_pg
SQL() { stack_sql "$@"; }
stack_schema 0 "$n"
SQL -q -c "ALTER DATABASE postgres SET paynotify.now = $now" -c "DELETE FROM paynotify_hook" \
    ${CALLGRIND_NOTIFY:+-c "ALTER DATABASE postgres SET paynotify.notify = $CALLGRIND_NOTIFY"} >/dev/null
shim/paynotify-send --gateway wxpay --keys test/vectors/keys --mode distinct -n "$n" \
    --now "$now" --seed 42 --channel wxpay --quiet --dump-sql "$STACK_DIR/signed.sql"
SQL -q >/dev/null <<'EOS'
CREATE SCHEMA bench;
CREATE TABLE bench.req (id serial PRIMARY KEY, headers jsonb, body bytea,
	notify_id text, order_no text, payload jsonb);
CREATE TABLE bench.base_log (LIKE payment_notify_log INCLUDING ALL);
CREATE TABLE bench.base_payment (LIKE payment_record INCLUDING ALL);
CREATE TABLE bench.base_outbox (LIKE paynotify_outbox INCLUDING ALL);
CREATE TABLE bench.orders_b (LIKE public.orders INCLUDING ALL);
INSERT INTO bench.orders_b SELECT * FROM public.orders;
CREATE FUNCTION bench.baseline(n bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	r bench.req;
BEGIN
	SELECT * INTO r FROM bench.req WHERE id = n;
	PERFORM pg_advisory_xact_lock(hashtextextended('wxpay:' || r.notify_id, 0));
	INSERT INTO bench.base_log (channel, notify_id, order_no, event_type, payload, status, processed_at)
		VALUES ('wxpay', r.notify_id, r.order_no, 'TRANSACTION.SUCCESS', r.payload, 'succeeded', now());
	UPDATE bench.orders_b SET status = 'paid' WHERE order_no = r.order_no AND status = 'pending';
	INSERT INTO bench.base_payment (channel, trade_no, order_no, amount, currency, notify_id)
		VALUES ('wxpay', 'T' || r.order_no, r.order_no, 8888, 'CNY', r.notify_id);
	INSERT INTO bench.base_outbox (event, channel, order_no, notify_id, amount)
		VALUES ('paid', 'wxpay', r.order_no, r.notify_id, 8888);
END $$;
EOS
sed -e "s/^SELECT outcome FROM paynotify_handle('wxpay', /INSERT INTO bench.req (headers, body) VALUES (/" \
    "$STACK_DIR/signed.sql" | SQL -q >/dev/null
SQL -q -c "UPDATE bench.req SET payload = convert_from(body, 'UTF8')::jsonb,
	notify_id = convert_from(body, 'UTF8')::jsonb->>'id', order_no = 'PN' || lpad(id::text, 8, '0')" \
	-c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
pn_cluster_stop "$STACK_DIR/pg"

# cost FIRST COUNT KIND: total instructions of COUNT statements in one
# single-user backend, ids FIRST.. (every one a first delivery).
cost() {
    local first=$1 count=$2 kind=$3 script out
    script=$STACK_DIR/cg-$kind-$count.sql
    out=$STACK_DIR/callgrind.$kind.$count
    {
    if [ "$kind" = handle ]; then
        echo "PREPARE q(int) AS SELECT h.outcome FROM bench.req r, LATERAL paynotify_handle('wxpay', r.headers, r.body) h WHERE r.id = \$1"
    else
        echo "PREPARE q(int) AS SELECT bench.baseline(\$1)"
    fi
    for i in $(seq "$first" $((first + count - 1))); do
        echo "EXECUTE q($i)"
    done
    } >"$script"
    chmod 644 "$script"
    touch "$out" && chown "$PN_RUNUSER" "$out"
    pn_as_user valgrind --tool=callgrind --callgrind-out-file="$out" \
        --toggle-collect=pg_parse_query --toggle-collect=pg_analyze_and_rewrite_fixedparams \
        --toggle-collect=pg_plan_queries --toggle-collect=PortalStart --toggle-collect=PortalRun \
        --toggle-collect=PortalDrop --toggle-collect=StartTransactionCommand \
        --toggle-collect=CommitTransactionCommand \
        "$PN_PGBIN/postgres" --single -D "$STACK_DIR/pg/data" -c shared_buffers=64MB -c paynotify.now=$now \
        ${CALLGRIND_NOTIFY:+-c paynotify.notify=$CALLGRIND_NOTIFY} postgres \
        <"$script" >"$STACK_DIR/cg-$kind-$count.log" 2>&1 || { tail -20 "$STACK_DIR/cg-$kind-$count.log" >&2; return 1; }
    if [ -n "${CALLGRIND_KEEP:-}" ]; then cp "$out" "$CALLGRIND_KEEP/"; cp "$STACK_DIR/cg-$kind-$count.log" "$CALLGRIND_KEEP/"; fi
    sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$out"
}

declare -A per
for kind in handle baseline; do
    a=$(cost 1 "$k" "$kind")
    b=$(cost $((k + 1)) $((2 * k)) "$kind")
    per[$kind]=$(( (b - a) / k ))
done
printf 'instructions per first delivery (marginal, %d vs %d statements): paynotify_handle %d, baseline %d, paynotify/baseline %s\n' \
    "$k" $((2 * k)) "${per[handle]}" "${per[baseline]}" \
    "$(python3 -c "print(f'{${per[handle]} / ${per[baseline]}:.2f}')")"
