-- Secrets loaded from files in paynotify.secrets_directory never appear in
-- statement text, so not in the server log even with log_statement = all;
-- names that leave the directory are refused; paynotify_alter_channel
-- changes only the settings it names.
\set VERBOSITY terse
SELECT current_user AS su \gset
CREATE ROLE sk_ops LOGIN;
SELECT pay.paynotify_grant('sk_ops', 'admin');
CREATE FUNCTION t.sk_whsec(n integer) RETURNS text LANGUAGE sql AS
	$$ SELECT 'whsec_' || encode(sha256(convert_to('paynotify endpoint secret ' || n, 'UTF8')), 'base64') $$;
-- the directory a superuser set up, with this database's own directory in
-- it: the gateway's files, a link inside it, a link out of it, a
-- subdirectory, an unreadable and an empty file; and another database's
-- directory, and a file beside the databases' directories, which this
-- database's operator must not reach
DO $$
DECLARE
	top text := current_setting('data_directory') || '/../pn_secrets';
	dir text := top || '/' || current_database();
BEGIN
	EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', format(
		'rm -rf %3$s && mkdir -m 700 %3$s %1$s %3$s/otherdb && cp %2$s/wechat_apiv3.key %2$s/wechat_platform_1.pub.pem'
		' %2$s/stripe_secret_1.txt %1$s/ && cd %1$s && ln -s wechat_apiv3.key apiv3_link'
		' && ln -s ../../data/postgresql.conf outside && mkdir subdir && touch empty'
		' && echo x > unreadable && chmod 000 unreadable'
		' && cp %2$s/stripe_secret_2.txt %3$s/otherdb/theirs.txt && cp %2$s/stripe_secret_2.txt %3$s/shared.txt',
		dir, (SELECT d.dir FROM t.vdir d) || 'keys', top));
	EXECUTE format('ALTER ROLE sk_ops SET paynotify.secrets_directory = %L', top);
	-- two relay endpoint secrets (whsec_ + base64 of 32 bytes)
	EXECUTE format('COPY (SELECT %s) TO %L', 't.sk_whsec(1)', dir || '/endpoint.whsec');
	EXECUTE format('COPY (SELECT %s) TO %L', 't.sk_whsec(2)', dir || '/endpoint_new.whsec');
END
$$;
-- every statement sk_ops sends is logged
ALTER ROLE sk_ops SET log_statement = 'all';
SELECT t.set_order('PN20260101000001', 'pending');

\c - sk_ops
SET search_path = pay;
SHOW log_statement;
-- a WeChat channel whose APIv3 key is read from a file, and its platform key
SELECT paynotify_add_channel('sk_wx', 'wxpay',
	'{"apiv3_key": {"file": "wechat_apiv3.key"}, "mchid": "1900000109", "appid": "wx0000000000test01"}');
SELECT paynotify_add_key_file('sk_wx', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3', 'wechat_platform_1.pub.pem');
-- a Stripe signing secret from a file
SELECT paynotify_add_channel('sk_st', 'stripe');
SELECT paynotify_add_key_file('sk_st', 'k1', 'stripe_secret_1.txt');
-- a failing call (a Stripe secret is no PEM key) logs its statement: the name only
SELECT paynotify_add_key_file('sk_wx', 'bad', 'stripe_secret_1.txt');
-- names that are not plain files of the directory
SELECT paynotify_add_key_file('sk_st', 'k2', '../data/postgresql.conf');
SELECT paynotify_add_key_file('sk_st', 'k2', '..');
SELECT paynotify_add_key_file('sk_st', 'k2', '');
SELECT paynotify_add_key_file('sk_st', 'k2', NULL);
SELECT paynotify_add_key_file('sk_st', 'k2', 'outside');
SELECT paynotify_add_key_file('sk_st', 'k2', 'subdir');
SELECT paynotify_add_key_file('sk_st', 'k2', 'unreadable');
SELECT paynotify_add_key_file('sk_st', 'k2', 'empty');
SELECT paynotify_add_key_file('sk_st', 'k2', 'missing');
-- another database's secrets: neither beside this database's directory nor
-- in another database's
SELECT paynotify_add_key_file('sk_st', 'k2', 'shared.txt');
SELECT paynotify_add_key_file('sk_st', 'k2', '../otherdb/theirs.txt');
SELECT paynotify_add_key_file('sk_st', 'k2', 'theirs.txt');
SELECT paynotify_add_channel('sk_bad', 'wxpay', '{"apiv3_key": {"file": "wechat_apiv3.key", "x": 1}}');
-- the file reader itself is nobody's to call
SELECT paynotify_read_secret('wechat_apiv3.key');
-- nor can the operator point the directory elsewhere
SET paynotify.secrets_directory = '/';

-- alter_channel: one setting changes, the others (the secret) stay
SELECT paynotify_alter_channel('sk_wx', '{"tolerance_s": 600}');
SELECT paynotify_alter_channel('sk_wx', '{"mchid": null}');
-- the merged result is validated: nothing changes on error
SELECT paynotify_alter_channel('sk_wx', '{"apiv3_key": null}');
SELECT paynotify_alter_channel('sk_wx', '{"apiv3_key": "short", "tolerance_s": 1}');
SELECT paynotify_alter_channel('sk_wx', '{"tolrance_s": 1}');
SELECT paynotify_alter_channel('sk_wx', NULL);
SELECT paynotify_alter_channel('sk_wx', '[]');
-- the key again from a file, through a link inside the directory
SELECT paynotify_alter_channel('sk_wx', '{"apiv3_key": {"file": "apiv3_link"}}');

-- relay endpoints whose secret is read from a file; a failing call logs
-- its statement: the file name only
SELECT paynotify_add_endpoint_file('https://erp.example/sk', 'endpoint.whsec') AS sk_ep \gset
SELECT paynotify_add_endpoint_file('https://erp.example/sk', 'endpoint.whsec', events => '{paid,shipped}');
SELECT paynotify_add_endpoint_file('https://erp.example/sk', 'wechat_apiv3.key');
SELECT paynotify_add_endpoint_file('https://erp.example/sk', '../data/postgresql.conf');
SELECT paynotify_add_endpoint_file('https://erp.example/sk', NULL);
SELECT paynotify_alter_endpoint_file(:sk_ep, 'endpoint_new.whsec');
SELECT paynotify_alter_endpoint_file(:sk_ep, 'wechat_apiv3.key');
SELECT paynotify_alter_endpoint_file(-1, 'endpoint.whsec');
SELECT url, events FROM paynotify_endpoint WHERE url = 'https://erp.example/sk';

-- no file reaches the operator through a message: settings that messages
-- show (the mchid or app_id two channels share) cannot come from a file, and
-- a NULL gateway is refused before any file is read (it failed the INSERT
-- with the whole row, the secret included, in the message)
\c - :su
ALTER ROLE sk_ops SET paynotify.allow_shared_accounts = off;
\c - sk_ops
SET search_path = pay;
SELECT paynotify_add_channel('sk_leak1', NULL, '{"apiv3_key": {"file": "wechat_apiv3.key"}}');
SELECT paynotify_add_channel('sk_leak2', 'wxpay',
	'{"apiv3_key": {"file": "wechat_apiv3.key"}, "mchid": {"file": "stripe_secret_1.txt"}}');
SELECT paynotify_add_channel('sk_leak3', 'wxpay',
	'{"apiv3_key": {"file": "wechat_apiv3.key"}, "mchid": {"file": "stripe_secret_1.txt"}}');
SELECT paynotify_add_channel('sk_leak4', 'alipay', '{"app_id": {"file": "stripe_secret_1.txt"}}');
SELECT paynotify_add_channel('sk_leak5', 'alipay', '{"app_id": {"file": "stripe_secret_1.txt"}}');
SELECT paynotify_alter_channel('sk_wx', '{"appid": {"file": "stripe_secret_1.txt"}}');

\c - :su
SELECT name, settings - 'apiv3_key' AS settings,
	settings->>'apiv3_key' = btrim(t.vtext('keys/wechat_apiv3.key'), E'\n') AS apiv3_key_from_file
FROM pay.paynotify_channel WHERE name LIKE 'sk\_%' ORDER BY name;
SELECT channel, key_id, material = t.secret(1) AS secret_from_file FROM pay.paynotify_key
WHERE channel = 'sk_st';
SELECT channel, key_id, material = rtrim(t.vtext('keys/wechat_platform_1.pub.pem'), E'\n') AS pem_from_file
FROM pay.paynotify_key WHERE channel = 'sk_wx';
SELECT url, secret = t.sk_whsec(2) AS endpoint_secret_from_file FROM pay.paynotify_endpoint
WHERE url = 'https://erp.example/sk';
DELETE FROM pay.paynotify_endpoint WHERE url = 'https://erp.example/sk';
ALTER TABLE pay.paynotify_endpoint ALTER COLUMN id RESTART;	-- as the later tests expect
-- the key decrypts: the payment is applied
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'sk_wx');
-- a superuser without the directory set is told so
SET paynotify.secrets_directory = '';
SELECT pay.paynotify_add_key_file('sk_st', 'k3', 'stripe_secret_1.txt');
SET paynotify.secrets_directory = 'relative/dir';
SELECT pay.paynotify_add_key_file('sk_st', 'k3', 'stripe_secret_1.txt');
RESET paynotify.secrets_directory;

-- the server log has every statement, and no secret
CREATE TEMP TABLE server_log AS
	SELECT pg_read_file(current_setting('data_directory') || '/../../log/postmaster.log') AS log;
SELECT position('paynotify_add_key_file(''sk_st'', ''k1'', ''stripe_secret_1.txt'')' IN log) > 0 AS statements_logged,
	position('paynotify_add_key_file(''sk_wx'', ''bad''' IN log) > 0 AS failed_statement_logged,
	position(t.secret(1) IN log) = 0 AS no_stripe_secret,
	position(btrim(t.vtext('keys/wechat_apiv3.key'), E'\n') IN log) = 0 AS no_apiv3_key,
	position('paynotify_add_endpoint_file(''https://erp.example/sk'', ''endpoint.whsec'', events' IN log) > 0
		AS failed_endpoint_statement_logged,
	position(substr(t.sk_whsec(1), 7) IN log) = 0 AND position(substr(t.sk_whsec(2), 7) IN log) = 0
		AS no_endpoint_secret
FROM server_log;
DROP FUNCTION t.sk_whsec(integer);
ALTER ROLE sk_ops RESET ALL;
