-- WeChat Pay keys: a key is trusted only inside its validity window
-- (not_before and not_after, both inclusive) and never again once retired.
-- The vector is signed by platform key 1 (serial 7E3F...) at unix time
-- 1767225610.
SET search_path = pay, public;
CREATE FUNCTION t.kchan(chan text, nb timestamptz, na timestamptz) RETURNS void
	LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pay.paynotify_add_channel(chan, 'wxpay', jsonb_build_object(
		'apiv3_key', btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'mchid', '1900000109'));
	PERFORM pay.paynotify_add_key(chan, '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3',
		t.vtext('keys/wechat_platform_1.pub.pem'), nb, na);
END
$$;
SELECT t.kchan('kw_future', to_timestamp(1767225611), NULL),
	   t.kchan('kw_expired', NULL, to_timestamp(1767225609)),
	   t.kchan('kw_from_now', to_timestamp(1767225610), NULL),
	   t.kchan('kw_until_now', NULL, to_timestamp(1767225610)),
	   t.kchan('kw_retired', NULL, NULL);

-- Outside the window: unknown key, nothing written; on its edges: trusted.
CREATE FUNCTION t.kdeliver(chan text, OUT status int, OUT outcome text)
	LANGUAGE plpgsql AS $$
BEGIN
	PERFORM t.set_order('PN20260101000001', 'pending');
	SELECT d.status, d.outcome INTO status, outcome
		FROM t.deliver('wx_transaction_success_valid', chan) d;
END
$$;
SELECT c AS channel, r.* FROM unnest(ARRAY['kw_future', 'kw_expired', 'kw_from_now', 'kw_until_now']) c,
	LATERAL t.kdeliver(c) r;
SELECT channel, status FROM payment_notify_log WHERE channel LIKE 'kw\_%' ORDER BY channel;

-- Retired: the next request is refused, even a re-delivery of what the key
-- verified before; the key stays on record.
SELECT t.set_order('PN20260101000001', 'pending');
SELECT outcome FROM t.deliver('wx_transaction_success_valid', 'kw_retired');
SELECT paynotify_retire_key('kw_retired', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3');
SELECT status, outcome FROM t.deliver('wx_retry_duplicate_valid', 'kw_retired');
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'kw_retired');
SELECT key_id, retired_at IS NOT NULL AS retired FROM paynotify_key WHERE channel = 'kw_retired';
SELECT delivery_count FROM payment_notify_log WHERE channel = 'kw_retired';

-- Rotation: a notification signed by platform key 2 is refused until that
-- key is added (WeChat names the key in Wechatpay-Serial, so during a
-- rotation the new key is added next to the old one, then the old retired).
SELECT status, outcome FROM t.deliver('wx_refund_abnormal_rotated_cert_valid', 'kw_retired');
SELECT paynotify_add_key('kw_retired', '6A1B2C3D4E5F60718293A4B5C6D7E8F901234567',
	t.vtext('keys/wechat_platform_2.pub.pem'));
SELECT status, outcome <> 'rejected' AS authentic
FROM t.deliver('wx_refund_abnormal_rotated_cert_valid', 'kw_retired');
DELETE FROM paynotify_channel WHERE name LIKE 'kw\_%';
DROP FUNCTION t.kchan(text, timestamptz, timestamptz);
DROP FUNCTION t.kdeliver(text);
