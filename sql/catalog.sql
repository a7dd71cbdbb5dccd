-- What CREATE EXTENSION sets up and the README promises about it: the two
-- group roles and their grants, and the SET clauses of the functions.
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

-- The two group roles: no login, no special attributes.
SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolreplication,
	   rolbypassrls, rolinherit
FROM pg_roles WHERE rolname IN ('paynotify_handler', 'paynotify_admin') ORDER BY rolname;
-- paynotify_handler may call paynotify_handle and nothing else, read nothing.
SELECT fn FROM t.ext_functions WHERE has_function_privilege('paynotify_handler', oid, 'EXECUTE')
ORDER BY fn::text;
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('r', 'S')
  AND (has_table_privilege('paynotify_handler', c.oid, 'SELECT,INSERT,UPDATE,DELETE')
	   OR (c.relkind = 'S' AND has_sequence_privilege('paynotify_handler', c.oid, 'USAGE,SELECT,UPDATE')));
-- paynotify_admin configures, claims outbox rows and reads the results, but
-- may not read key material or channel settings, nor write any table itself.
SELECT c.relname, has_table_privilege('paynotify_admin', c.oid, 'SELECT') AS can_read,
	   has_table_privilege('paynotify_admin', c.oid, 'INSERT,UPDATE,DELETE,TRUNCATE') AS can_write
FROM pg_class c WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind = 'r'
ORDER BY c.relname;
SELECT f AS function, has_function_privilege('paynotify_admin', f, 'EXECUTE') AS can_execute
FROM unnest(ARRAY[
	'paynotify_add_channel(text,text,jsonb)',
	'paynotify_alter_channel(text,jsonb)',
	'paynotify_add_key(text,text,text,timestamptz,timestamptz)',
	'paynotify_retire_key(text,text)',
	'paynotify_outbox_claim(integer)',
	'paynotify_check_key(text,text,text)',
	'paynotify_check_settings(text,jsonb)',
	'paynotify_check_account()',
	'paynotify_config_changed()']) f;

-- Version 1.1: no view or sequence of paynotify is PUBLIC's either.
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('v', 'm', 'S')
  AND (has_table_privilege('public', c.oid, 'SELECT')
	   OR (c.relkind = 'S' AND has_sequence_privilege('public', c.oid, 'USAGE,SELECT,UPDATE')));
-- paynotify_admin reads every column of the endpoints but their secrets,
-- and cannot act as the relay (a claim returns the secrets).
SELECT a.attname, has_column_privilege('paynotify_admin', a.attrelid, a.attnum, 'SELECT') AS can_read
FROM pg_attribute a
WHERE a.attrelid = 'pay.paynotify_endpoint'::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum;
SELECT f AS function, has_function_privilege('paynotify_admin', f, 'EXECUTE') AS can_execute
FROM unnest(ARRAY[
	'paynotify_relay_fanout(integer)',
	'paynotify_relay_claim(integer)',
	'paynotify_relay_report(bigint[],integer[],text[])',
	'paynotify_check_endpoint(text,text,text[],text[])',
	'paynotify_trace_rows(text,text,text,boolean)']) f;
-- paynotify_relay: no login, no special attributes; its three calls, and
-- no table, view or sequence of its own.
SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolreplication,
	   rolbypassrls, rolinherit
FROM pg_roles WHERE rolname = 'paynotify_relay';
SELECT fn FROM t.ext_functions WHERE has_function_privilege('paynotify_relay', oid, 'EXECUTE')
ORDER BY fn::text;
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'pay'::regnamespace AND c.relkind IN ('r', 'v', 'S')
  AND (has_table_privilege('paynotify_relay', c.oid, 'SELECT,INSERT,UPDATE,DELETE')
	   OR (c.relkind = 'S' AND has_sequence_privilege('paynotify_relay', c.oid, 'USAGE,SELECT,UPDATE')));
DROP VIEW t.ext_functions;
