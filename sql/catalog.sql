-- What CREATE EXTENSION sets up and the README promises about it: the
-- capacities paynotify_grant gives (handler, admin, relay) and what each
-- may do, the group roles of 1.2 and earlier holding nothing, PUBLIC
-- holding nothing, and the SET clauses of the functions.
SET search_path = pay, public;
CREATE VIEW t.ext_functions AS
	SELECT p.oid, p.oid::regprocedure AS fn, p.prosecdef, p.proconfig
	FROM pg_proc p
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify';

-- Every SECURITY DEFINER function pins search_path, so nothing planted in a
-- caller's search_path can change what it runs.
SELECT count(*) > 0 AS has_definer_functions,
	   count(*) FILTER (WHERE NOT coalesce(proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false))
		   AS definer_without_pinned_search_path
FROM t.ext_functions WHERE prosecdef;
SELECT fn FROM t.ext_functions
WHERE prosecdef AND NOT coalesce(proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false);
-- The entry points also plan every statement as a keyed lookup and never JIT.
SELECT fn, prosecdef, proconfig FROM t.ext_functions
WHERE fn::text LIKE 'paynotify_handle(%' OR fn::text LIKE 'paynotify_transit(%'
ORDER BY fn::text;

-- Nothing of paynotify is executable by PUBLIC, no table readable.
SELECT fn FROM t.ext_functions WHERE has_function_privilege('public', oid, 'EXECUTE');
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind = 'r'
  AND has_table_privilege('public', c.oid, 'SELECT,INSERT,UPDATE,DELETE');

-- The three group roles of 1.2 and earlier: still there, no login, no
-- special attributes, and nothing of paynotify's in this database: no
-- function, table, view, sequence or column, not the schema either.
SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolreplication,
	   rolbypassrls, rolinherit
FROM pg_roles WHERE rolname IN ('paynotify_handler', 'paynotify_admin', 'paynotify_relay')
ORDER BY rolname;
SELECT r.rolname, f.fn FROM pg_roles r CROSS JOIN t.ext_functions f
WHERE r.rolname IN ('paynotify_handler', 'paynotify_admin', 'paynotify_relay')
  AND has_function_privilege(r.oid, f.oid, 'EXECUTE');
SELECT r.rolname, c.relname FROM pg_roles r CROSS JOIN pg_class c
WHERE r.rolname IN ('paynotify_handler', 'paynotify_admin', 'paynotify_relay')
  AND c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'S')
  AND (has_table_privilege(r.oid, c.oid, 'SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER')
	   OR has_any_column_privilege(r.oid, c.oid, 'SELECT,INSERT,UPDATE,REFERENCES')
	   OR (c.relkind = 'S' AND has_sequence_privilege(r.oid, c.oid, 'USAGE,SELECT,UPDATE')));
SELECT rolname, has_schema_privilege(oid, 'pay', 'USAGE') AS schema_usage
FROM pg_roles WHERE rolname IN ('paynotify_handler', 'paynotify_admin', 'paynotify_relay')
ORDER BY rolname;

-- A login role given each capacity by paynotify_grant (as the extension's
-- owner), and USAGE on the extension's schema with it.
CREATE ROLE cat_handler LOGIN;
CREATE ROLE cat_admin LOGIN;
CREATE ROLE cat_relay LOGIN;
SELECT paynotify_grant('cat_handler', 'handler'), paynotify_grant('cat_admin', 'admin'),
	   paynotify_grant('cat_relay', 'relay');
SELECT role, capacity, schema_usage, has_schema_privilege(role, 'pay', 'USAGE') AS can_use_schema
FROM paynotify_role WHERE role::text LIKE 'cat\_%' ORDER BY 1::text;
-- Each may execute exactly the functions its capacity lists
-- (paynotify_capacity), no other.
SELECT r.capacity, f.fn,
	   has_function_privilege(r.role, f.oid, 'EXECUTE') AS can_execute
FROM paynotify_role r CROSS JOIN t.ext_functions f
WHERE r.role::text LIKE 'cat\_%'
  AND has_function_privilege(r.role, f.oid, 'EXECUTE') IS DISTINCT FROM
	  EXISTS (SELECT FROM paynotify_capacity c WHERE c.capacity = r.capacity AND c.fn = f.oid);

-- handler may call paynotify_handle and nothing else, read nothing.
SELECT fn FROM t.ext_functions WHERE has_function_privilege('cat_handler', oid, 'EXECUTE')
ORDER BY fn::text;
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('r', 'v', 'S')
  AND (has_table_privilege('cat_handler', c.oid, 'SELECT,INSERT,UPDATE,DELETE')
	   OR has_any_column_privilege('cat_handler', c.oid, 'SELECT')
	   OR (c.relkind = 'S' AND has_sequence_privilege('cat_handler', c.oid, 'USAGE,SELECT,UPDATE')));
-- admin configures, claims outbox rows and reads the results (and, from
-- 1.3, the orders binding and who holds which capacity), but may not read
-- key material or channel settings, nor write any table itself.
SELECT c.relname, has_table_privilege('cat_admin', c.oid, 'SELECT') AS can_read,
	   has_table_privilege('cat_admin', c.oid, 'INSERT,UPDATE,DELETE,TRUNCATE') AS can_write
FROM pg_class c WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind = 'r'
ORDER BY c.relname;
SELECT c.relname, has_table_privilege('cat_admin', c.oid, 'SELECT') AS can_read
FROM pg_class c WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('v', 'm', 'S')
ORDER BY c.relname;
SELECT f AS function, has_function_privilege('cat_admin', f, 'EXECUTE') AS can_execute
FROM unnest(ARRAY[
	'paynotify_add_channel(text,text,jsonb)',
	'paynotify_alter_channel(text,jsonb)',
	'paynotify_add_key(text,text,text,timestamptz,timestamptz)',
	'paynotify_retire_key(text,text)',
	'paynotify_outbox_claim(integer)',
	'paynotify_check_key(text,text,text)',
	'paynotify_check_settings(text,jsonb)',
	'paynotify_check_account()',
	'paynotify_config_changed()',
	'paynotify_grant(regrole,text)',
	'paynotify_revoke(regrole,text)',
	'paynotify_distribute()']) f;
-- everything admin may execute
SELECT fn FROM t.ext_functions WHERE has_function_privilege('cat_admin', oid, 'EXECUTE')
ORDER BY fn::text;

-- Version 1.1: no view or sequence of paynotify is PUBLIC's either.
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('v', 'm', 'S')
  AND (has_table_privilege('public', c.oid, 'SELECT')
	   OR (c.relkind = 'S' AND has_sequence_privilege('public', c.oid, 'USAGE,SELECT,UPDATE')));
-- admin reads every column of the endpoints but their secrets, and cannot
-- act as the relay (a claim returns the secrets).
SELECT a.attname, has_column_privilege('cat_admin', a.attrelid, a.attnum, 'SELECT') AS can_read
FROM pg_attribute a
WHERE a.attrelid = 'pay.paynotify_endpoint'::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;
SELECT f AS function, has_function_privilege('cat_admin', f, 'EXECUTE') AS can_execute
FROM unnest(ARRAY[
	'paynotify_relay_fanout(integer)',
	'paynotify_relay_claim(integer)',
	'paynotify_relay_report(bigint[],integer[],text[])',
	'paynotify_check_endpoint(text,text,text[],text[])',
	'paynotify_trace_rows(text,text,text,boolean)']) f;
-- relay: its calls (deliveries, 1.4 queries), and no table, view or sequence of its own.
SELECT fn FROM t.ext_functions WHERE has_function_privilege('cat_relay', oid, 'EXECUTE')
ORDER BY fn::text;
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('r', 'v', 'S')
  AND (has_table_privilege('cat_relay', c.oid, 'SELECT,INSERT,UPDATE,DELETE')
	   OR has_any_column_privilege('cat_relay', c.oid, 'SELECT')
	   OR (c.relkind = 'S' AND has_sequence_privilege('cat_relay', c.oid, 'USAGE,SELECT,UPDATE')));

-- paynotify_revoke takes everything back: the roles can be dropped
SELECT paynotify_revoke('cat_handler', 'handler'), paynotify_revoke('cat_admin', 'admin'),
	   paynotify_revoke('cat_relay', 'relay');
SELECT count(*) AS holders_left FROM paynotify_role WHERE role::text LIKE 'cat\_%';
DROP ROLE cat_handler, cat_admin, cat_relay;
DROP VIEW t.ext_functions;
