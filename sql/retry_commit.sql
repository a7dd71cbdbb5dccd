-- paynotify_retry and paynotify_retry_failed commit what they apply as
-- durably as paynotify_handle does: where the server's default is
-- synchronous_commit = off, the gateway's next delivery is acknowledged as
-- a duplicate of what the retry committed, so the retry's commit must be
-- synchronous (SET LOCAL semantics: until its transaction ends).  A dry run
-- writes nothing and leaves the caller's level alone.
-- In a database of its own: paynotify_retry_failed retries every failed
-- notification there is.
\set VERBOSITY terse
SELECT current_user AS su, current_database() AS regression_db \gset
CREATE DATABASE retry_commit;
\c retry_commit
\getenv abs_srcdir PG_ABS_SRCDIR
\set fixture :abs_srcdir '/test/fixture.sql'
\set vdir :abs_srcdir '/test/vectors/'
SET paynotify_test.vdir = :'vdir';
\set ECHO none
\i :fixture
\set ECHO all
RESET paynotify_test.vdir;
SET search_path = pay, public;
SELECT paynotify_add_channel('rc', 'stripe', '{}');
SELECT paynotify_add_key('rc', 'secret_1', t.secret(1));
CREATE ROLE rc_ops LOGIN;
SELECT paynotify_grant('rc_ops', 'admin');
CREATE FUNCTION public.rc_pay(evt text, ord text) RETURNS text
	LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('rc', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', 100, 'amount_received', 100,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)])
$$;
-- three payments of orders that do not exist yet: failed
SELECT rc_pay('evt_rc_1', 'RC-1'), rc_pay('evt_rc_2', 'RC-2'), rc_pay('evt_rc_3', 'RC-3');
SELECT t.set_order(o, 'pending', 100) FROM unnest(ARRAY['RC-1', 'RC-2', 'RC-3']) o;
ALTER DATABASE :"DBNAME" SET synchronous_commit = off;

\c - rc_ops
SET search_path = pay, public;
SHOW synchronous_commit;
BEGIN;
SELECT outcome, status FROM paynotify_retry('rc', 'evt_rc_1', true);
SELECT current_setting('synchronous_commit') AS after_dry_run;
SELECT outcome, status FROM paynotify_retry('rc', 'evt_rc_1');
SELECT current_setting('synchronous_commit') AS after_retry;
COMMIT;
SHOW synchronous_commit;
BEGIN;
SELECT count(*) FILTER (WHERE outcome = 'processed') AS processed
FROM paynotify_retry_failed('0 seconds', 10);
SELECT current_setting('synchronous_commit') AS after_retry_failed;
COMMIT;

\c - :su
SELECT order_no, status FROM public.orders WHERE order_no LIKE 'RC-%' ORDER BY 1;
\c :regression_db
DROP DATABASE retry_commit;
DROP ROLE rc_ops;
