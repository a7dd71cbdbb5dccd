-- Every case of the signed test vectors (WeChat Pay, Alipay, Stripe),
-- replayed through paynotify_handle at its own now_unix on a channel
-- configured as its manifest entry says: the manifest's outcome and
-- acknowledgement, and a second delivery answered from the log.
CREATE TEMP TABLE replayed AS
SELECT name, c->>'gateway' AS gateway,
	r.outcome,
	r.outcome = CASE WHEN c ? 'duplicate_of' THEN 'duplicate' ELSE c->>'outcome' END AS outcome_ok,
	r.acked = (c->>'ack')::boolean AS ack_ok,
	r.again
FROM t.manifest, LATERAL t.replay(name) r;
SELECT name, outcome, outcome_ok, ack_ok, again FROM replayed ORDER BY gateway DESC, name;

-- all of them as the manifest says
SELECT gateway, count(*) AS cases, count(*) FILTER (WHERE outcome_ok AND ack_ok) AS as_expected
FROM replayed GROUP BY 1 ORDER BY 1 DESC;

-- rejected and malformed deliveries wrote nothing; accepted ones one row each
SELECT split_part(channel, '_', 1) AS gateway, count(*) AS log_rows,
	count(*) FILTER (WHERE delivery_count >= 2) AS redelivered,
	count(*) FILTER (WHERE status = 'succeeded') AS succeeded
FROM pay.payment_notify_log
WHERE channel ~ '^(wx|ali|stripe)_'
GROUP BY 1 ORDER BY 1 DESC;
SELECT channel, trade_no, amount FROM pay.payment_record
WHERE channel ~ '^(wx|ali|stripe)_' AND notify_id <> 'prepared' ORDER BY channel;
SELECT channel, refund_id, amount, status FROM pay.paynotify_refund
WHERE channel ~ '^(wx|ali|stripe)_' ORDER BY channel;
