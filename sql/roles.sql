-- paynotify_grant and paynotify_revoke (1.3): a capacity (admin, handler,
-- relay) given to a role in this database and taken back.  The extension
-- is in the schema pay, not public, so USAGE on it matters: paynotify
-- gives it with a capacity when the role lacks it, and takes back only
-- what it gave.  Each role acts in a fresh backend (\c).
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;
SELECT extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'paynotify';
CREATE ROLE rg_op LOGIN;		-- an operator
CREATE ROLE rg_other LOGIN;		-- someone the operator would promote
CREATE ROLE rg_shim LOGIN;		-- the shim, and an operator too for a while
CREATE ROLE rg_relay LOGIN;		-- a relay that could use the schema already
-- what a role holds now: its capacities, whether paynotify gave it USAGE,
-- and a sample of the privileges (handler, admin, relay)
CREATE FUNCTION t.rg_holds(r regrole) RETURNS TABLE (capacities text, paynotify_gave_usage text,
		schema_usage boolean, handle boolean, add_channel boolean, read_log boolean,
		relay_claim boolean)
	LANGUAGE sql AS $$
	SELECT (SELECT coalesce(string_agg(capacity, ',' ORDER BY capacity), '-')
			FROM pay.paynotify_role WHERE role = r::text),
		   (SELECT coalesce(string_agg(capacity, ',' ORDER BY capacity), '-')
			FROM pay.paynotify_role WHERE role = r::text AND schema_usage),
		   has_schema_privilege(r, 'pay', 'USAGE'),
		   has_function_privilege(r, 'pay.paynotify_handle(text,jsonb,text)', 'EXECUTE'),
		   has_function_privilege(r, 'pay.paynotify_add_channel(text,text,jsonb)', 'EXECUTE'),
		   has_table_privilege(r, 'pay.payment_notify_log', 'SELECT'),
		   has_function_privilege(r, 'pay.paynotify_relay_claim(integer)', 'EXECUTE')
$$;
SELECT * FROM t.rg_holds('rg_op');

-- 1. Arguments: an unknown capacity is 22023, a NULL 22004, an unknown
-- role the cast's 42704; nothing is granted.
SELECT paynotify_grant('rg_op', 'superuser');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant('rg_op', 'Admin');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_revoke('rg_op', 'owner');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant(NULL, 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant('rg_op', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_revoke(NULL, 'handler');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_revoke('rg_op', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant('rg_nobody', 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM t.rg_holds('rg_op');

-- 2. The group roles of 1.2 and earlier are refused (22023), whatever the
-- capacity: their members are in every database.
SELECT paynotify_grant('paynotify_admin', 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant('paynotify_handler', 'handler');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant('paynotify_relay', 'relay');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_grant('paynotify_relay', 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT g.rolname, h.* FROM pg_roles g, t.rg_holds(g.oid::regrole) h
WHERE g.rolname IN ('paynotify_admin', 'paynotify_handler', 'paynotify_relay') ORDER BY 1;

-- 3. An operator: the schema and the admin capacity, in a fresh backend.
SELECT paynotify_grant('rg_op', 'admin');
SELECT * FROM t.rg_holds('rg_op');
-- a second grant of the same capacity changes nothing
SELECT paynotify_grant('rg_op', 'admin');
SELECT role, capacity, schema_usage FROM paynotify_role WHERE role::text LIKE 'rg\_%' ORDER BY 1::text, 2;
\c - rg_op
\set VERBOSITY terse
SELECT count(*) >= 0 AS reads_log FROM pay.payment_notify_log;
-- ... and what is bound (the orders table, its key and status columns)
SELECT count(orders) + count(key_column) + count(status_column) >= 0 AS reads_binding FROM pay.paynotify_binding;
-- the holders are an operator's to read ...
SELECT role, capacity FROM pay.paynotify_role WHERE role::text LIKE 'rg\_%' ORDER BY 1::text, 2;
-- ... not to change: only the extension's owner (or a superuser) grants
-- and revokes (42501)
SELECT pay.paynotify_grant('rg_other', 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT pay.paynotify_grant('rg_op', 'relay');
\echo :LAST_ERROR_SQLSTATE
SELECT pay.paynotify_revoke('rg_op', 'admin');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO pay.paynotify_role (role, capacity) VALUES ('rg_other', 'admin');
\echo :LAST_ERROR_SQLSTATE
\c - :su
SET search_path = pay, public;
SELECT * FROM t.rg_holds('rg_other');
SELECT * FROM t.rg_holds('rg_op');
-- A capacity is this database's only: in another database with the
-- extension the operator holds nothing.
SELECT current_database() AS db \gset
CREATE DATABASE rg_db;
\c rg_db
\set VERBOSITY terse
CREATE SCHEMA pay;
CREATE EXTENSION paynotify SCHEMA pay;
SELECT has_schema_privilege('rg_op', 'pay', 'USAGE') AS schema_usage,
	   has_function_privilege('rg_op', 'pay.paynotify_add_channel(text,text,jsonb)', 'EXECUTE') AS add_channel,
	   has_table_privilege('rg_op', 'pay.payment_notify_log', 'SELECT') AS read_log,
	   (SELECT count(*) FROM pay.paynotify_role) AS holders;
\c :db
SET search_path = pay, public;
DROP DATABASE rg_db;

-- 4. Two capacities that share a privilege: admin and handler both
-- execute paynotify_handle.  Revoking one keeps what the other has; USAGE
-- on the schema, given with the first, stays while a capacity is left.
SELECT paynotify_grant('rg_shim', 'handler');
SELECT paynotify_grant('rg_shim', 'admin');
SELECT role, capacity, schema_usage FROM paynotify_role WHERE role = 'rg_shim' ORDER BY 2;
SELECT paynotify_revoke('rg_shim', 'admin');
SELECT * FROM t.rg_holds('rg_shim');
SELECT paynotify_grant('rg_shim', 'admin');
SELECT paynotify_revoke('rg_shim', 'handler');
-- the schema's USAGE, given with handler, is now admin's to take back
SELECT * FROM t.rg_holds('rg_shim');
\c - rg_shim
\set VERBOSITY terse
SELECT count(*) >= 0 AS reads_log FROM pay.payment_notify_log;
\c - :su
SET search_path = pay, public;
SELECT paynotify_revoke('rg_shim', 'admin');
SELECT * FROM t.rg_holds('rg_shim');
\c - rg_shim
\set VERBOSITY terse
SELECT count(*) FROM pay.payment_notify_log;
\echo :LAST_ERROR_SQLSTATE
\c - :su
SET search_path = pay, public;
-- revoking what the role does not hold changes nothing
SELECT paynotify_revoke('rg_shim', 'relay');
SELECT * FROM t.rg_holds('rg_shim');

-- 5. USAGE the role had before is not paynotify's: kept after a revoke.
GRANT USAGE ON SCHEMA pay TO rg_relay;
SELECT paynotify_grant('rg_relay', 'relay');
SELECT * FROM t.rg_holds('rg_relay');
SELECT paynotify_revoke('rg_relay', 'relay');
SELECT * FROM t.rg_holds('rg_relay');
REVOKE USAGE ON SCHEMA pay FROM rg_relay;

-- 6. The operator's capacity taken back: USAGE with it, and nothing left
-- (the roles can be dropped without DROP OWNED).
SELECT paynotify_revoke('rg_op', 'admin');
SELECT * FROM t.rg_holds('rg_op');
\c - rg_op
\set VERBOSITY terse
SELECT count(*) FROM pay.payment_notify_log;
\echo :LAST_ERROR_SQLSTATE
\c - :su
SET search_path = pay, public;
SELECT count(*) AS holders_left FROM paynotify_role WHERE role::text LIKE 'rg\_%';
DROP FUNCTION t.rg_holds(regrole);
DROP ROLE rg_op, rg_other, rg_shim, rg_relay;

-- 7. The extension's owner is refused both ways: it holds everything, and
-- revoking would take its own privileges away.
SELECT paynotify_grant(:'su', 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_revoke(:'su', 'admin');
\echo :LAST_ERROR_SQLSTATE
SELECT has_table_privilege(:'su', 'pay.payment_notify_log', 'SELECT') AS owner_reads_log;

-- 8. A role dropped and created again under its name holds nothing of the
-- dropped one's: its rows are gone at the next grant, and a revoke gives
-- back only what the new role holds.
CREATE ROLE rg_alice LOGIN;
SELECT paynotify_grant('rg_alice', 'admin');
DROP OWNED BY rg_alice;
DROP ROLE rg_alice;
CREATE ROLE rg_alice LOGIN;
SELECT paynotify_grant('rg_alice', 'handler');
SELECT role, capacity FROM paynotify_role WHERE role = 'rg_alice' ORDER BY 2;
SELECT paynotify_revoke('rg_alice', 'handler');
SELECT has_function_privilege('rg_alice', 'pay.paynotify_add_channel(text,text,jsonb)', 'EXECUTE') AS alice_admin,
	   has_function_privilege('rg_alice', 'pay.paynotify_handle(text,jsonb,bytea)', 'EXECUTE') AS alice_handler,
	   (SELECT count(*) FROM paynotify_role WHERE role = 'rg_alice') AS alice_rows;
DROP ROLE rg_alice;

-- 9. An operator no more: the hooks it registered are deleted with its
-- admin capacity (they would run as it, with the payments' data).
CREATE ROLE rg_hooker LOGIN;
SELECT paynotify_grant('rg_hooker', 'admin');
CREATE SCHEMA rg_h AUTHORIZATION rg_hooker;
\c - rg_hooker
SET search_path = pay, public;
CREATE FUNCTION rg_h.on_paid(ev jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT paynotify_on('paid', 'rg_h.on_paid(jsonb)');
\c - :su
SET search_path = pay, public;
SELECT count(*) AS hooks FROM paynotify_hook WHERE registered_by = 'rg_hooker'::regrole;
SELECT paynotify_revoke('rg_hooker', 'admin');
SELECT count(*) AS hooks FROM paynotify_hook WHERE registered_by = 'rg_hooker'::regrole;
DROP SCHEMA rg_h CASCADE;
DROP ROLE rg_hooker;
