-- Least privilege: the shim's role can call paynotify_handle and nothing
-- else; no object planted in search_path changes what paynotify does;
-- secrets never leave the configuration tables.
\set VERBOSITY terse
SET search_path = pay, public;
SELECT t.configure('wx_transaction_success_valid', 'sec_wx');
SELECT t.set_order('PN20260101000001', 'pending');

CREATE ROLE pn_shim LOGIN;
CREATE ROLE pn_ops LOGIN;
SELECT paynotify_grant('pn_shim', 'handler');
SELECT paynotify_grant('pn_ops', 'admin');
GRANT USAGE ON SCHEMA t TO pn_shim, pn_ops;
CREATE TABLE t.request AS
	SELECT (SELECT jsonb_object_agg(lower(h->>0), h->>1) FROM jsonb_array_elements(c->'headers') h) AS headers,
		t.vbytes(c->'files'->>'body') AS body
	FROM t.manifest WHERE name = 'wx_transaction_success_valid';
GRANT SELECT ON t.request TO pn_shim;

-- the clock for this replay is set by the superuser, before the role switch
SET paynotify.now = 1767225610;
SET ROLE pn_shim;
-- the one thing it may do
SELECT r.status, r.outcome FROM t.request, paynotify_handle('sec_wx', headers, body) r;
-- no table, no key, no configuration, no clock
SELECT count(*) FROM paynotify_key;
SELECT count(*) FROM paynotify_channel;
SELECT count(*) FROM payment_notify_log;
SELECT count(*) FROM payment_record;
SELECT count(*) FROM paynotify_outbox;
SELECT paynotify_add_channel('x', 'wxpay', '{"apiv3_key": "0123456789abcdef0123456789abcdef"}');
SELECT paynotify_add_key('sec_wx', 'k', 'x');
SELECT paynotify_retire_key('sec_wx', '7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3');
SELECT paynotify_bind_orders('public.orders');
SELECT paynotify_on('paid', 'pg_catalog.now()');
SELECT paynotify_transit('PN20260101000001', 'pending', 'paid');
SELECT paynotify_outbox_claim();
SELECT paynotify_check_key('wxpay', 'k', 'x');
SELECT paynotify_rsa_verify('x', '\x00', 'AAAA');
SET paynotify.now = 1767225610;
SET paynotify.lock_timeout = 0;
UPDATE public.orders SET status = 'paid';
RESET ROLE;
RESET paynotify.now;
SELECT t.set_order('PN20260101000001', 'pending');

-- the admin role configures and reads results, but not the key material
SET ROLE pn_ops;
SELECT count(*) >= 0 AS reads_log FROM payment_notify_log;
SELECT count(*) FROM paynotify_key;
SELECT count(*) FROM paynotify_channel;
SELECT paynotify_retire_key('sec_wx', 'PUB_KEY_ID_0100000000202601010000000000000042');
RESET ROLE;

-- planted objects earlier in search_path change nothing
SELECT t.configure('wx_transaction_success_valid', 'sec_evil');
CREATE SCHEMA evil;
CREATE TABLE evil.payment_notify_log (LIKE pay.payment_notify_log);
CREATE TABLE evil.payment_record (LIKE pay.payment_record);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION evil.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'pwned' $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_catalog.textne);
GRANT USAGE ON SCHEMA evil TO PUBLIC;
SET search_path = evil, pay, public, t;
SELECT status, outcome FROM t.deliver('wx_transaction_success_valid', 'sec_evil');
SELECT count(*) AS planted_rows FROM evil.payment_notify_log;
SELECT count(*) AS planted_payments FROM evil.payment_record;
SELECT status, first_seen > 'epoch' AS real_clock FROM pay.payment_notify_log WHERE channel = 'sec_evil';
SELECT status FROM public.orders WHERE order_no = 'PN20260101000001';
SET search_path = pay, public;
DROP SCHEMA evil CASCADE;

-- every SECURITY DEFINER function pins its search_path
SELECT p.proname
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify'
WHERE p.prosecdef AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')
ORDER BY 1;
-- nothing of paynotify is executable by PUBLIC
SELECT p.proname
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify'
WHERE has_function_privilege('public', p.oid, 'EXECUTE')
ORDER BY 1;

-- the APIv3 key and the signing secrets never reach a reply or the log
SELECT count(*) AS leaks
FROM pay.payment_notify_log l, pay.paynotify_channel c
WHERE l::text LIKE '%' || (c.settings->>'apiv3_key') || '%';

DROP TABLE t.request;
SELECT paynotify_revoke('pn_shim', 'handler');
SELECT paynotify_revoke('pn_ops', 'admin');
DROP OWNED BY pn_shim, pn_ops;
DROP ROLE pn_shim;
DROP ROLE pn_ops;
