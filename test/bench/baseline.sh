# The plain-SQL baseline every paynotify benchmark compares against, and the
# signed WeChat notifications both run through.  Source after stack.sh, with
# SQL() defined; STACK_DIR/signed.sql made by paynotify-send --dump-sql.
#
# bench_baseline_load: schema bench with the requests (bench.req), the
# baseline's own copies of the tables and bench.baseline(n), which makes the
# same writes as a first delivery (advisory lock, log row, the order moved,
# payment, outbox row) without verifying anything.
bench_baseline_load() {
    SQL -q >/dev/null <<'EOS'
CREATE SCHEMA bench;
CREATE TABLE bench.req (id serial PRIMARY KEY, headers jsonb, body bytea,
	notify_id text, order_no text, payload jsonb);
CREATE TABLE bench.base_log (LIKE payment_notify_log INCLUDING ALL);
CREATE TABLE bench.base_payment (LIKE payment_record INCLUDING ALL);
CREATE TABLE bench.base_outbox (LIKE paynotify_outbox INCLUDING ALL);
CREATE TABLE bench.orders_b (LIKE public.orders INCLUDING ALL);
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
        -c "VACUUM ANALYZE bench.req" >/dev/null
}
