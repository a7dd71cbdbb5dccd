-- Build the shared fixture (test/fixture.sql) in the regression database.
\getenv abs_srcdir PG_ABS_SRCDIR
\set fixture :abs_srcdir '/test/fixture.sql'
\set vdir :abs_srcdir '/test/vectors/'
SET paynotify_test.vdir = :'vdir';
\set ECHO none
\set QUIET on
\i :fixture
\set QUIET off
\set ECHO all
RESET paynotify_test.vdir;
SELECT extname, extnamespace::regnamespace AS schema FROM pg_extension WHERE extname = 'paynotify';
SELECT count(*) AS vectors FROM t.manifest;
