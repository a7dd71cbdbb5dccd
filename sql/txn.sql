-- The caller's transaction: paynotify refuses REPEATABLE READ and
-- SERIALIZABLE with one clear error (SQLSTATE 25PN1) however they were set
-- (session, role, database), works under READ COMMITTED whatever the
-- default, and never relaxes synchronous_commit for a transaction that has
-- already written something an acknowledgement depends on.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_user AS su \gset
CREATE ROLE tx_shim LOGIN;
CREATE ROLE tx_ops LOGIN;
SELECT pay.paynotify_grant('tx_shim', 'handler');
SELECT pay.paynotify_grant('tx_ops', 'admin');
ALTER ROLE tx_shim SET paynotify.now = 1767225610;
CREATE SCHEMA tx;
GRANT USAGE ON SCHEMA tx TO tx_shim, tx_ops;
-- the requests the shim would send, in the order they arrive
CREATE TABLE tx.inbox AS
	SELECT row_number() OVER (ORDER BY ord) AS n, name,
		(SELECT jsonb_object_agg(lower(h->>0), h->>1) FROM jsonb_array_elements(c->'headers') h) AS headers,
		t.vbytes(c->'files'->>'body') AS body
	FROM t.manifest JOIN (VALUES ('wx_transaction_success_valid', 1), ('wx_retry_duplicate_valid', 2)) v(name, ord) USING (name);
GRANT SELECT ON tx.inbox TO tx_shim;
SELECT t.configure('wx_transaction_success_valid', 'tx_wx');
SELECT t.configure('wx_transaction_success_valid', 'tx_sync');
SELECT t.configure('wx_transaction_success_valid', 'tx_sync2');
SELECT t.set_order('PN20260101000001', 'pending');
CREATE VIEW tx.logged AS SELECT channel, status, delivery_count FROM pay.payment_notify_log
	WHERE channel LIKE 'tx\_%' ORDER BY channel;
GRANT SELECT ON tx.logged TO tx_ops;

-- REPEATABLE READ set for the session: refused before anything is written
\c - tx_shim
SET default_transaction_isolation = 'repeatable read';
SELECT r.outcome FROM tx.inbox i, pay.paynotify_handle('tx_wx', i.headers, i.body) r WHERE i.n = 1;
\echo :LAST_ERROR_SQLSTATE
-- SERIALIZABLE as the role's default, in a fresh backend
\c - :su
ALTER ROLE tx_shim SET default_transaction_isolation = 'serializable';
\c - tx_shim
SHOW default_transaction_isolation;
SELECT r.outcome FROM tx.inbox i, pay.paynotify_handle('tx_wx', i.headers, i.body) r WHERE i.n = 1;
\echo :LAST_ERROR_SQLSTATE
-- READ COMMITTED asked for explicitly: works whatever the default
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT r.outcome FROM tx.inbox i, pay.paynotify_handle('tx_wx', i.headers, i.body) r WHERE i.n = 1;
COMMIT;
-- REPEATABLE READ as the database's default
\c - :su
ALTER ROLE tx_shim RESET default_transaction_isolation;
ALTER DATABASE :"DBNAME" SET default_transaction_isolation = 'repeatable read';
\c - tx_shim
SHOW default_transaction_isolation;
SELECT r.outcome FROM tx.inbox i, pay.paynotify_handle('tx_wx', i.headers, i.body) r WHERE i.n = 2;
\echo :LAST_ERROR_SQLSTATE
-- paynotify_transit refuses it too
\c - tx_ops
SELECT pay.paynotify_transit('PN20260101000001', 'paid', 'shipped');
\echo :LAST_ERROR_SQLSTATE
\c - :su
ALTER DATABASE :"DBNAME" RESET default_transaction_isolation;
SELECT status FROM public.orders WHERE order_no = 'PN20260101000001';
\c - tx_ops
SELECT * FROM tx.logged;

-- one statement replaying a batch: a first delivery, then a duplicate of
-- it.  The duplicate must not relax synchronous_commit: the transaction
-- holds the payment.
\c - :su
SELECT t.set_order('PN20260101000001', 'pending');
\c - tx_shim
SHOW synchronous_commit;
SELECT i.n, r.outcome, current_setting('synchronous_commit') AS synchronous_commit
FROM tx.inbox i, LATERAL pay.paynotify_handle('tx_sync', i.headers, i.body) r;
-- the other way round: a duplicate alone relaxes it, the first delivery
-- after it in the same statement sets it back
\c - :su
SELECT t.set_order('PN20260101000001', 'pending');
\c - tx_shim
SELECT i.n, r.outcome, current_setting('synchronous_commit') AS synchronous_commit
FROM tx.inbox i, LATERAL pay.paynotify_handle(CASE i.n WHEN 1 THEN 'tx_sync' ELSE 'tx_sync2' END,
	i.headers, i.body) r;
-- a duplicate on its own: relaxed (only its counter is written)
SELECT r.outcome, current_setting('synchronous_commit') AS synchronous_commit
FROM tx.inbox i, pay.paynotify_handle('tx_sync', i.headers, i.body) r WHERE i.n = 2;
\c - tx_ops
SELECT * FROM tx.logged;
\c - :su

-- With a synchronous standby configured, a repeat's commit waits for it
-- whatever the caller's synchronous_commit: the first delivery's commit may
-- be on this primary alone (its wait for the standby cancelled), and
-- 'local' or 'off' would acknowledge the repeat without the standby.  No
-- standby answers here, so the setting is read in a transaction that is
-- rolled back (a commit would wait for the absent standby).
\c - :su
ALTER ROLE tx_shim SET synchronous_commit = local;
ALTER SYSTEM SET synchronous_standby_names = 'pn_absent_standby';
SELECT pg_reload_conf();
SELECT pg_sleep(0.3);
\c - tx_shim
SHOW synchronous_standby_names;
BEGIN;
SELECT r.outcome, current_setting('synchronous_commit') AS synchronous_commit
FROM tx.inbox i, pay.paynotify_handle('tx_sync', i.headers, i.body) r WHERE i.n = 2;
ROLLBACK;
SET synchronous_commit = off;
BEGIN;
SELECT r.outcome, current_setting('synchronous_commit') AS synchronous_commit
FROM tx.inbox i, pay.paynotify_handle('tx_sync', i.headers, i.body) r WHERE i.n = 2;
ROLLBACK;
SHOW synchronous_commit;
\c - :su
SET synchronous_commit = local;
ALTER SYSTEM RESET synchronous_standby_names;
SELECT pg_reload_conf();
ALTER ROLE tx_shim RESET synchronous_commit;
