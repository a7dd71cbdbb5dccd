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
