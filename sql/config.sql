-- Configuration: channels, keys, the orders binding, and every way to get
-- them wrong, each with its own SQLSTATE.
\set VERBOSITY sqlstate
SET search_path = pay, public;

-- unknown gateway
SELECT paynotify_add_channel('c1', 'paypal', '{}');
-- bad channel names
SELECT paynotify_add_channel('bad name', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef"}');
SELECT paynotify_add_channel('', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef"}');
-- APIv3 key must be exactly 32 bytes; required; settings typo caught
SELECT paynotify_add_channel('wx1', 'wxpay', '{"apiv3_key": "0123456789abcdef"}');
SELECT paynotify_add_channel('wx1', 'wxpay', '{}');
SELECT paynotify_add_channel('wx1', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef", "mch_id": "1"}');
SELECT paynotify_add_channel('wx1', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef", "tolerance_s": 0}');
SELECT paynotify_add_channel('wx1', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef", "tolerance_s": "300"}');
SELECT paynotify_add_channel('wx1', 'wxpay', '[1, 2]');
-- a good one, then a duplicate
SELECT paynotify_add_channel('wx1', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef", "mchid": "1900000109"}');
SELECT paynotify_add_channel('wx1', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef"}');
SELECT paynotify_alter_channel('nope', '{}');
SELECT paynotify_alter_channel('wx1', '{"apiv3_key": "short"}');
SELECT paynotify_alter_channel('wx1', '{"apiv3_key": "0123456789abcdef0123456789abcdef", "tolerance_s": 120}');
SELECT name, gateway, settings->>'tolerance_s' AS tolerance FROM paynotify_channel WHERE name = 'wx1';

-- the secret never shows in an error message
\set VERBOSITY default
SELECT paynotify_add_channel('wx2', 'wxpay', '{"apiv3_key": "SECRET-SECRET-SECRET-SECRET-SECRE-"}');
\set VERBOSITY sqlstate

-- keys: unknown channel, unparsable PEM, a private key, an empty id
SELECT paynotify_add_key('nope', 'S1', t.vtext('keys/wechat_platform_1.pub.pem'));
SELECT paynotify_add_key('wx1', 'S1', 'not a key');
SELECT paynotify_add_key('wx1', 'S1', '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n');
SELECT paynotify_add_key('wx1', 'S1', t.vtext('keys/wechat_platform_1.key.pem'));
SELECT paynotify_add_key('wx1', '', t.vtext('keys/wechat_platform_1.pub.pem'));
-- a PEM public key, a certificate (its serial must match the id), a public-key id side by side
SELECT paynotify_add_key('wx1', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3', t.vtext('keys/wechat_platform_1.cert.pem'));
SELECT paynotify_add_key('wx1', 'WRONGSERIAL', t.vtext('keys/wechat_platform_2.cert.pem'));
SELECT paynotify_add_key('wx1', '6A1B2C3D4E5F60718293A4B5C6D7E8F901234567', t.vtext('keys/wechat_platform_2.pub.pem'));
SELECT paynotify_add_key('wx1', 'PUB_KEY_ID_0100000000202601010000000000000042', t.vtext('keys/wechat_pubkey_3.pub.pem'));
SELECT paynotify_add_key('wx1', 'PUB_KEY_ID_0100000000202601010000000000000042', t.vtext('keys/wechat_pubkey_3.pub.pem'));
SELECT paynotify_add_key('wx1', 'K9', t.vtext('keys/wechat_pubkey_3.pub.pem'), '2026-02-01', '2026-01-01');
SELECT key_id, retired_at IS NULL AS active FROM paynotify_key WHERE channel = 'wx1' ORDER BY key_id;
-- retire
SELECT paynotify_retire_key('wx1', '6A1B2C3D4E5F60718293A4B5C6D7E8F901234567');
SELECT paynotify_retire_key('wx1', '6A1B2C3D4E5F60718293A4B5C6D7E8F901234567');
SELECT paynotify_retire_key('wx1', 'nope');

-- the orders binding
CREATE TABLE public.other_orders (id bigint PRIMARY KEY, state text, total numeric);
SELECT paynotify_bind_orders('public.other_orders');
SELECT paynotify_bind_orders('public.other_orders', 'id', 'nope');
SELECT paynotify_bind_orders('public.other_orders', 'id', 'state', 'missing');
SELECT paynotify_bind_orders('public.no_such_table');
SELECT paynotify_bind_orders(NULL);
CREATE VIEW public.orders_view AS SELECT * FROM public.orders;
SELECT paynotify_bind_orders('public.orders_view');
-- a system catalog, even for a superuser (who may update it)
SELECT paynotify_bind_orders('pg_catalog.pg_class', 'relname', 'relname', 'relpages');
SELECT orders, key_column, status_column, amount_column FROM paynotify_binding;

-- hooks
SELECT paynotify_on('shipped', 'pg_catalog.now()'::regprocedure);
SELECT paynotify_on('paid', 'pg_catalog.now()'::regprocedure);

-- the clock is superuser-only, the lock timeout bounded
SET paynotify.lock_timeout = -1;
SET paynotify.lock_timeout = '5s';
SHOW paynotify.lock_timeout;
RESET paynotify.lock_timeout;
SET paynotify.unknown_setting = 1;

-- clean up
DROP TABLE public.other_orders;
DROP VIEW public.orders_view;
DELETE FROM paynotify_channel WHERE name = 'wx1';
