-- Every WeChat Pay case of the signed test vectors, replayed through
-- paynotify_handle at its own now_unix: the manifest's outcome and
-- acknowledgement, and a second delivery that is answered from the log.
SELECT name,
	r.outcome,
	r.outcome = CASE WHEN c ? 'duplicate_of' THEN 'duplicate' ELSE c->>'outcome' END AS outcome_ok,
	r.acked = (c->>'ack')::boolean AS ack_ok,
	r.again
FROM t.manifest, LATERAL t.replay(name) r
WHERE c->>'gateway' = 'wxpay'
ORDER BY name;

-- Rejected and malformed deliveries wrote nothing; each accepted one wrote one row.
SELECT count(*) AS log_rows,
	count(*) FILTER (WHERE delivery_count >= 2) AS redelivered
FROM pay.payment_notify_log WHERE channel LIKE 'wx%';
SELECT o.order_no, o.status, p.trade_no, p.amount
FROM public.orders o JOIN pay.payment_record p USING (order_no)
WHERE p.channel LIKE 'wx%' ORDER BY p.channel;
SELECT channel, refund_id, amount, status FROM pay.paynotify_refund WHERE channel LIKE 'wx%' ORDER BY channel;
