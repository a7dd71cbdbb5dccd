-- One channel per gateway account (README "Channels and accounts"):
-- notification ids, payments and refunds are unique per channel while the
-- orders table is shared, so two channels that accept the same
-- notifications would let one captured on one be replayed to the other.
-- The fixture lifts the rule for the vector replays; a real installation
-- runs with it, as here, configured by an operator (the admin capacity).
SET paynotify.allow_shared_accounts = off;
CREATE ROLE acc_ops;
SELECT pay.paynotify_grant('acc_ops', 'admin');
SET ROLE acc_ops;
SET search_path = pay, public;
\set VERBOSITY sqlstate

-- WeChat Pay: the mchid is the account.
SELECT paynotify_add_channel('acc_wx1', 'wxpay',
	'{"apiv3_key": "acc-key-A-0123456789abcdef012345", "mchid": "1900000001", "appid": "wx00000000acc00001"}');
-- the same merchant again, even with another key: refused, with what to do
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT paynotify_add_channel('acc_wx2', 'wxpay',
	'{"apiv3_key": "acc-key-B-0123456789abcdef012345", "mchid": "1900000001"}');
\set VERBOSITY sqlstate
-- two merchants that chose one APIv3 key, each checking its own mchid: fine
-- (a notification of one is a merchant_mismatch at the other)
SELECT paynotify_add_channel('acc_wx2', 'wxpay',
	'{"apiv3_key": "acc-key-A-0123456789abcdef012345", "mchid": "1900000002"}');
-- but a channel that checks no mchid may not share the key
SELECT paynotify_add_channel('acc_wx3', 'wxpay',
	'{"apiv3_key": "acc-key-A-0123456789abcdef012345"}');
SELECT paynotify_add_channel('acc_wx3', 'wxpay',
	'{"apiv3_key": "acc-key-C-0123456789abcdef012345"}');
-- the appid is no account: one app may pay into several merchant accounts
SELECT paynotify_add_channel('acc_wx4', 'wxpay',
	'{"apiv3_key": "acc-key-D-0123456789abcdef012345", "mchid": "1900000004", "appid": "wx00000000acc00001"}');
-- changing settings is held to the same rule
SELECT paynotify_alter_channel('acc_wx4',
	'{"apiv3_key": "acc-key-D-0123456789abcdef012345", "mchid": "1900000002"}');
SELECT paynotify_alter_channel('acc_wx3',
	'{"apiv3_key": "acc-key-A-0123456789abcdef012345", "mchid": "1900000003"}');

-- A service provider (partner mode): sp_mchid with sub_mchid is the
-- account.  Its sub-merchants' channels share the provider's APIv3 key;
-- the same sub-merchant again, the provider without a sub-merchant (all of
-- them), or a direct channel whose mchid is the provider's (it takes the
-- provider's notices) is the same account; without sub_mchid a partner
-- channel checks no merchant of its own, so it may not share the key.
SELECT paynotify_add_channel('acc_sp1', 'wxpay',
	'{"apiv3_key": "acc-key-P-0123456789abcdef012345", "sp_mchid": "1900000100", "sub_mchid": "1900000101"}');
SELECT paynotify_add_channel('acc_sp2', 'wxpay',
	'{"apiv3_key": "acc-key-P-0123456789abcdef012345", "sp_mchid": "1900000100", "sub_mchid": "1900000102"}');
\set VERBOSITY default
SELECT paynotify_add_channel('acc_sp3', 'wxpay',
	'{"apiv3_key": "acc-key-Q-0123456789abcdef012345", "sp_mchid": "1900000100", "sub_mchid": "1900000102"}');
SELECT paynotify_add_channel('acc_sp3', 'wxpay',
	'{"apiv3_key": "acc-key-Q-0123456789abcdef012345", "sp_mchid": "1900000100"}');
SELECT paynotify_add_channel('acc_sp3', 'wxpay',
	'{"apiv3_key": "acc-key-Q-0123456789abcdef012345", "mchid": "1900000100"}');
SELECT paynotify_add_channel('acc_sp3', 'wxpay',
	'{"apiv3_key": "acc-key-P-0123456789abcdef012345", "sp_mchid": "1900000200"}');
\set VERBOSITY sqlstate
SELECT paynotify_add_channel('acc_sp3', 'wxpay',
	'{"apiv3_key": "acc-key-P-0123456789abcdef012345", "sp_mchid": "1900000200", "sub_mchid": "1900000201"}');

-- Alipay: the app_id is the account, unless each channel checks its own seller_id.
SELECT paynotify_add_channel('acc_ali1', 'alipay', '{"app_id": "2021000000acc001"}');
SELECT paynotify_add_channel('acc_ali2', 'alipay', '{"app_id": "2021000000acc001"}');
SELECT paynotify_add_channel('acc_ali2', 'alipay',
	'{"app_id": "2021000000acc001", "seller_id": "2088000000acc002"}');
SELECT paynotify_alter_channel('acc_ali1',
	'{"app_id": "2021000000acc001", "seller_id": "2088000000acc001"}');
SELECT paynotify_add_channel('acc_ali2', 'alipay',
	'{"app_id": "2021000000acc001", "seller_id": "2088000000acc002"}');
SELECT paynotify_add_channel('acc_ali3', 'alipay',
	'{"app_id": "2021000000acc001", "seller_id": "2088000000acc002"}');
SELECT paynotify_add_channel('acc_ali3', 'alipay', '{"app_id": "2021000000acc003"}');

-- Stripe: the endpoint's signing secret is the account.
SELECT paynotify_add_channel('acc_st1', 'stripe', '{}');
SELECT paynotify_add_channel('acc_st2', 'stripe', '{}');
SELECT paynotify_add_key('acc_st1', 's1', 'whsec_acc_secret_one');
\set VERBOSITY default
SELECT paynotify_add_key('acc_st2', 's1', 'whsec_acc_secret_one');
\set VERBOSITY sqlstate
-- the same secret twice in one channel is harmless
SELECT paynotify_add_key('acc_st1', 's1_again', 'whsec_acc_secret_one');
-- once retired where it was, another channel may trust it
SELECT paynotify_retire_key('acc_st1', 's1');
SELECT paynotify_add_key('acc_st2', 's1', 'whsec_acc_secret_one');
SELECT paynotify_retire_key('acc_st1', 's1_again');
SELECT paynotify_add_key('acc_st2', 's1', 'whsec_acc_secret_one');

-- Only a superuser may lift the rule.
SET paynotify.allow_shared_accounts = on;
RESET ROLE;

-- what was configured (the operator may not read settings or keys)
SELECT name, gateway, settings->>'mchid' AS mchid, settings->>'app_id' AS app_id,
	   settings->>'seller_id' AS seller_id
FROM pay.paynotify_channel WHERE name LIKE 'acc\_%' ORDER BY name;
SELECT channel, key_id, retired_at IS NULL AS trusted FROM pay.paynotify_key
WHERE channel LIKE 'acc\_st%' ORDER BY channel, key_id;

-- Whatever writes the configuration: direct changes by a superuser too.
UPDATE pay.paynotify_key SET retired_at = NULL WHERE channel = 'acc_st1' AND key_id = 's1';
UPDATE pay.paynotify_channel SET settings = settings - 'mchid' WHERE name = 'acc_wx2';
INSERT INTO pay.paynotify_channel (name, gateway, settings)
	VALUES ('acc_ali4', 'alipay', '{"app_id": "2021000000acc003"}');
-- and the superuser's explicit exception (the test fixture's)
SET paynotify.allow_shared_accounts = on;
INSERT INTO pay.paynotify_channel (name, gateway, settings)
	VALUES ('acc_ali4', 'alipay', '{"app_id": "2021000000acc003"}');
RESET paynotify.allow_shared_accounts;

DELETE FROM pay.paynotify_channel WHERE name LIKE 'acc\_%';
SELECT pay.paynotify_revoke('acc_ops', 'admin');
DROP OWNED BY acc_ops;
DROP ROLE acc_ops;
