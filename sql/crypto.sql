-- The two primitives: RSA verification and AES-GCM opening.
\set VERBOSITY sqlstate
SET search_path = pay, public;

-- a vector's signed message verifies with its key and with its certificate,
-- not with another key, not once a byte changes
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'),
	t.vbytes('cases/wx_transaction_success_valid/signed_message.bin'),
	t.header('wx_transaction_success_valid', 'Wechatpay-Signature')) AS right_key,
	paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.cert.pem'),
	t.vbytes('cases/wx_transaction_success_valid/signed_message.bin'),
	t.header('wx_transaction_success_valid', 'Wechatpay-Signature')) AS certificate,
	paynotify_rsa_verify(t.vtext('keys/wechat_platform_2.pub.pem'),
	t.vbytes('cases/wx_transaction_success_valid/signed_message.bin'),
	t.header('wx_transaction_success_valid', 'Wechatpay-Signature')) AS other_key,
	paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'),
	t.vbytes('cases/wx_transaction_success_valid/signed_message.bin') || '\x00'::bytea,
	t.header('wx_transaction_success_valid', 'Wechatpay-Signature')) AS changed_message;

-- digests: sha256 default, sha1 on request, unknown refused
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'),
	t.vbytes('cases/wx_transaction_success_valid/signed_message.bin'),
	t.header('wx_transaction_success_valid', 'Wechatpay-Signature'), 'sha1') AS as_sha1;
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'), '\x00', 'AAAA', 'md5');
-- bad inputs raise, never crash
SELECT paynotify_rsa_verify('garbage', '\x00', 'AAAA');
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'), '\x00', 'not base64!');
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'), '\x00', 'AAA=');
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'), '\x00', '');

-- AES-256-GCM: the vector's resource opens to its plaintext
SELECT convert_from(paynotify_aead_decrypt(
		convert_to(btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'UTF8'),
		convert_to(b->'resource'->>'nonce', 'UTF8'),
		convert_to(b->'resource'->>'associated_data', 'UTF8'),
		b->'resource'->>'ciphertext'), 'UTF8')::jsonb
	= t.vtext('cases/wx_transaction_success_valid/resource_plaintext.json')::jsonb AS opens
FROM (SELECT convert_from(t.vbytes('cases/wx_transaction_success_valid/body.json'), 'UTF8')::jsonb AS b) s;
-- wrong AAD, wrong tag, wrong key size, short ciphertext, not base64: errors, never garbage
SELECT paynotify_aead_decrypt(
		convert_to(btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'UTF8'),
		convert_to(b->'resource'->>'nonce', 'UTF8'), 'other',
		b->'resource'->>'ciphertext')
FROM (SELECT convert_from(t.vbytes('cases/wx_transaction_success_valid/body.json'), 'UTF8')::jsonb AS b) s;
SELECT paynotify_aead_decrypt(convert_to(btrim(t.vtext('keys/wechat_apiv3.key'), E'\n'), 'UTF8'),
		'123456789012', '', encode('\x000102030405060708090a0b0c0d0e0f10'::bytea, 'base64'));
SELECT paynotify_aead_decrypt('\x0001', '123456789012', '', 'AAAA');
SELECT paynotify_aead_decrypt(convert_to(repeat('k', 32), 'UTF8'), '123456789012', '', 'AAAA');
SELECT paynotify_aead_decrypt(convert_to(repeat('k', 32), 'UTF8'), '', '', 'AAAA');
SELECT paynotify_aead_decrypt(convert_to(repeat('k', 32), 'UTF8'), '123456789012', '', '%%%%');
-- AES-128-GCM by key length: a round trip through a known NIST vector (key 0, nonce 0, empty)
SELECT paynotify_aead_decrypt('\x00000000000000000000000000000000', '\x000000000000000000000000', '',
		encode('\x58e2fccefa7e3061367f1d57a4e7455a'::bytea, 'base64')) AS empty_plaintext;

-- WeChat's signed message is "timestamp\nnonce\nbody\n" (docs/GATEWAYS.md §1.3):
-- a line break inside Wechatpay-Nonce reframes it.  This signature (made
-- with the vectors' TEST-ONLY platform key 1) is genuine over the message
-- whose nonce line is the vector's nonce and whose next line is "split",
-- so a nonce carrying "\nsplit" would verify: it is malformed instead.
CREATE TABLE t.reframed AS
SELECT t.header('wx_transaction_success_valid', 'Wechatpay-Timestamp') AS ts,
	t.header('wx_transaction_success_valid', 'Wechatpay-Nonce') || E'\nsplit' AS nonce,
	t.header('wx_transaction_success_valid', 'Wechatpay-Serial') AS serial,
	t.vbytes('cases/wx_transaction_success_valid/body.json') AS body,
	'glISRIEz7yMiCM8bFF4xJYS4pAT7V2qIH4cIw9EHi/gLmMI30AstKpsUKlVpw8eJToylh6Zgrvnpn2MJ437pP0TCpwRFAx9aMnkJ6j2+032bFzwJRXAEjzdkBdEHTMTI+4rLnKlXBZguVF0A4jn7yLJ4DClEZsLN6pX8FRmB4ihA6BVBdeap6nzlp9uqeAwG54FVaSIBh9qinT0ZEffn7eU27NXuUTsFZqJtw1VMAZ+ycDdkIUdmtac0t/DwECBv/rW7T41zq4WL/WNbOthGpe7cRhKqbyIU+M9+pBX3n8nzX0FeEn8EfzbgsBEMLSIraZC5LIeqwmF31i1ZV1NwJw=='::text AS sig;
SELECT paynotify_rsa_verify(t.vtext('keys/wechat_platform_1.pub.pem'),
	convert_to(ts || E'\n' || nonce || E'\n', 'UTF8') || body || '\x0a'::bytea, sig) AS genuine
FROM t.reframed;
SELECT t.configure('wx_transaction_success_valid', 'cr_wx');
SELECT t.set_order('PN20260101000001', 'pending');
SET paynotify.now = 1767225610;
-- the reframed nonce; a line break in the serial, in the timestamp
SELECT name, r.status, r.outcome FROM t.reframed, LATERAL (VALUES
		('nonce with a line break', ts, nonce, serial),
		('serial with a line break', ts, split_part(nonce, E'\n', 1), serial || E'\n'),
		('serial with a carriage return', ts, split_part(nonce, E'\n', 1), E'\r' || serial),
		('timestamp with a line break', ts || E'\n', split_part(nonce, E'\n', 1), serial)
	) v(name, vts, vnonce, vserial),
	paynotify_handle('cr_wx', jsonb_build_object('Wechatpay-Timestamp', vts,
		'Wechatpay-Nonce', vnonce, 'Wechatpay-Serial', vserial,
		'Wechatpay-Signature', sig), body) r;
RESET paynotify.now;
SELECT count(*) AS logged FROM payment_notify_log WHERE channel = 'cr_wx';
SELECT status FROM public.orders WHERE order_no = 'PN20260101000001';
DELETE FROM paynotify_channel WHERE name = 'cr_wx';
