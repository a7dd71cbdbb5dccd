# The plain-SQL baseline every paynotify benchmark compares against, and the
# signed WeChat notifications both run through.  Source after stack.sh, with
# SQL() defined; STACK_DIR/signed.sql made by paynotify-send --dump-sql.
#
# bench_baseline_load: schema bench with the requests (bench.req), the
# baseline's own copies of the tables and bench.baseline(n), which makes the
# same writes as a first delivery (advisory lock, log row, the order moved,
# its history row, payment, outbox row) without verifying anything.  The
# copies have the same columns, defaults, constraints and indexes (LIKE
# INCLUDING ALL; no triggers: the orders copy has no guard trigger), and the
# rows hold what paynotify writes: the decrypted payload in the log, the
# payload's transaction id, amount and currency in the payment.
bench_baseline_load() {
    SQL -q >/dev/null <<'EOS'
CREATE SCHEMA bench;
CREATE TABLE bench.req (id serial PRIMARY KEY, headers jsonb, body bytea);
-- the baseline's input, what paynotify_handle finds in bench.req's row
CREATE TABLE bench.base_req (id int PRIMARY KEY, notify_id text, order_no text, payload jsonb,
	trade_no text, amount bigint, currency text);
CREATE TABLE bench.base_log (LIKE payment_notify_log INCLUDING ALL);
CREATE TABLE bench.base_payment (LIKE payment_record INCLUDING ALL);
CREATE TABLE bench.base_outbox (LIKE paynotify_outbox INCLUDING ALL);
CREATE TABLE bench.orders_b (LIKE public.orders INCLUDING ALL);
CREATE TABLE bench.base_history (LIKE paynotify_order_history INCLUDING ALL);
CREATE FUNCTION bench.baseline(n bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	r bench.base_req;
BEGIN
	SELECT * INTO r FROM bench.base_req WHERE id = n;
	PERFORM pg_advisory_xact_lock(hashtextextended('wxpay:' || r.notify_id, 0));
	INSERT INTO bench.base_log (channel, notify_id, order_no, event_type, payload, status, processed_at)
		VALUES ('wxpay', r.notify_id, r.order_no, 'TRANSACTION.SUCCESS', r.payload, 'succeeded', now());
	UPDATE bench.orders_b SET status = 'paid' WHERE order_no = r.order_no AND status = 'pending';
	INSERT INTO bench.base_history (order_no, from_state, to_state, source, channel, notify_id)
		VALUES (r.order_no, 'pending', 'paid', 'paynotify', 'wxpay', r.notify_id);
	INSERT INTO bench.base_payment (channel, trade_no, order_no, amount, currency, notify_id)
		VALUES ('wxpay', r.trade_no, r.order_no, r.amount, r.currency, r.notify_id);
	INSERT INTO bench.base_outbox (event, channel, order_no, notify_id, amount)
		VALUES ('paid', 'wxpay', r.order_no, r.notify_id, r.amount);
END $$;
EOS
    sed -e "s/^SELECT outcome FROM paynotify_handle('wxpay', /INSERT INTO bench.req (headers, body) VALUES (/" \
        "$STACK_DIR/signed.sql" | SQL -q >/dev/null
    # the payload as paynotify logs it: the resource, decrypted
    SQL -q -v apiv3="$(tr -d '\n' <test/vectors/keys/wechat_apiv3.key)" >/dev/null <<'EOS'
INSERT INTO bench.base_req (id, notify_id, order_no, payload)
	SELECT id, e->>'id', 'PN' || lpad(id::text, 8, '0'),
		convert_from(paynotify_aead_decrypt(convert_to(:'apiv3', 'UTF8'),
			convert_to(e->'resource'->>'nonce', 'UTF8'),
			convert_to(coalesce(e->'resource'->>'associated_data', ''), 'UTF8'),
			e->'resource'->>'ciphertext'), 'UTF8')::jsonb
	FROM (SELECT id, convert_from(body, 'UTF8')::jsonb AS e FROM bench.req) s;
UPDATE bench.base_req SET trade_no = payload->>'transaction_id', amount = (payload->'amount'->>'total')::bigint,
	currency = coalesce(payload->'amount'->>'currency', 'CNY');
VACUUM ANALYZE bench.req, bench.base_req;
EOS
}
