-- paynotify reads and moves orders as the orders table's owner, so the
-- code the table runs (triggers, constraints, generated columns, indexes,
-- rules, forced policies, its columns' types and domains, the casts to and
-- from them) runs with that owner's rights.  A function of that code, or
-- a domain or relation it is made of, whose owner lacks those
-- rights, or a role granted TRIGGER on such a relation, is refused: binding such a table fails (42501),
-- and a table that gets such code after it was bound is unusable until it
-- is repaired (every step fails, retried), never run.  The defect this
-- closes: a trigger function owned by an application role, on a table a
-- superuser owns, made that role a superuser at the next payment.  A table
-- a superuser owns may run no function whose body is text (PL/pgSQL, SQL
-- outside BEGIN ATOMIC): what such a body names is recorded nowhere (case
-- 27); the cases of such code below use a table of a plain role, tc_plain.
\set VERBOSITY terse
SELECT current_user AS su \gset
SET search_path = pay, public;
SELECT paynotify_add_channel('tc', 'stripe', '{}');
SELECT paynotify_add_key('tc', 'secret_1', t.secret(1));
CREATE ROLE tc_app;
CREATE SCHEMA tc;
GRANT CREATE, USAGE ON SCHEMA tc TO tc_app;
CREATE FUNCTION tc.pay(evt text, ord text) RETURNS text
	LANGUAGE sql AS $$
	SELECT outcome FROM t.stripe('tc', jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', 100, 'amount_received', 100,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text,
		ARRAY[t.secret(1)])
$$;
-- the application's code: whoever runs it is made a superuser if it can be
SET ROLE tc_app;
CREATE FUNCTION tc.escalate() RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
		EXECUTE 'ALTER ROLE tc_app SUPERUSER';
	END IF;
	RETURN true;
END $f$;
CREATE FUNCTION tc.stamp() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM tc.escalate(); RETURN NEW; END $f$;
CREATE DOMAIN tc.ref AS text CHECK (tc.escalate());
RESET ROLE;

-- 1. A table the superuser owns, with the application's trigger: refused.
CREATE TABLE tc.o1 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TRIGGER stamp BEFORE UPDATE ON tc.o1 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
SELECT paynotify_bind_orders('tc.o1', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 2. A key column of the application's domain: refused.
CREATE TABLE tc.o2 (k tc.ref PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
SELECT paynotify_bind_orders('tc.o2', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 3. A clean table, bound; the trigger attached afterwards: the next
-- payment fails (retried) with the reason, and runs nothing.
CREATE TABLE tc.o3 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO tc.o3 VALUES ('TC-3', 'pending', 100);
SELECT paynotify_bind_orders('tc.o3', 'k', 'st', 'amount');
CREATE TRIGGER stamp BEFORE UPDATE ON tc.o3 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
SELECT tc.pay('evt_tc_3', 'TC-3') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_3';
SELECT st FROM tc.o3;
-- the trigger gone: the retry pays
DROP TRIGGER stamp ON tc.o3;
SELECT tc.pay('evt_tc_3', 'TC-3') AS outcome;
SELECT st FROM tc.o3;
-- 4. The application's own table with its own code: its code runs as its
-- author, allowed.
CREATE TABLE tc.o4 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o4 OWNER TO tc_app;
INSERT INTO tc.o4 VALUES ('TC-4', 'pending', 100);
CREATE TRIGGER stamp BEFORE UPDATE ON tc.o4 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
SELECT paynotify_bind_orders('tc.o4', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_4', 'TC-4') AS outcome;
SELECT st FROM tc.o4;
-- 5. A partition key the application's function computes (run for every
-- moved row, in the partition's check): refused; a partition bound alone
-- too (its check is the parent's key).
SET ROLE tc_app;
CREATE FUNCTION tc.bucket(k text) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM tc.escalate(); RETURN 0; END $f$;
RESET ROLE;
CREATE TABLE tc.o5 (k text NOT NULL, st text NOT NULL, amount bigint NOT NULL)
	PARTITION BY LIST (tc.bucket(k));
CREATE TABLE tc.o5_0 PARTITION OF tc.o5 FOR VALUES IN (0);
SELECT paynotify_bind_orders('tc.o5', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_bind_orders('tc.o5_0', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 6. A column of the application's range type, whose subtype_diff a GiST
-- index calls: refused.
SET ROLE tc_app;
CREATE FUNCTION tc.diff(a int4, b int4) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM tc.escalate(); RETURN a - b; END $f$;
CREATE TYPE tc.slot AS RANGE (subtype = int4, subtype_diff = tc.diff);
RESET ROLE;
CREATE TABLE tc.o6 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, s tc.slot);
CREATE INDEX ON tc.o6 USING gist (s);
SELECT paynotify_bind_orders('tc.o6', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 7. A rule that writes each move into the application's table, whose
-- trigger is the application's: refused (a rule's action runs the code
-- of the tables it writes to).
SET ROLE tc_app;
CREATE TABLE tc.audit (k text, st text);
CREATE TRIGGER stamp BEFORE INSERT ON tc.audit FOR EACH ROW EXECUTE FUNCTION tc.stamp();
RESET ROLE;
CREATE TABLE tc.o7 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO tc.o7 DO ALSO INSERT INTO tc.audit VALUES (new.k, new.st);
SELECT paynotify_bind_orders('tc.o7', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT what, fn FROM paynotify_table_authors('tc.o5_0') WHERE owner::text = 'tc_app'
UNION ALL SELECT what, fn FROM paynotify_table_authors('tc.o6') WHERE owner::text = 'tc_app'
UNION ALL SELECT what, fn FROM paynotify_table_authors('tc.o7') WHERE owner::text = 'tc_app'
ORDER BY 1, 2;
-- 8. A rule into a table of the owner's that has no code yet: bound; the
-- owner gives that table the application's trigger afterwards: the next
-- payment fails (retried) with the reason, and runs nothing.  (A table
-- the application owns is refused at binding: case 20.)
CREATE TABLE tc.audit8 (k text, st text);
CREATE TABLE tc.o8 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO tc.o8 VALUES ('TC-8', 'pending', 100), ('TC-8b', 'pending', 100);
CREATE RULE audit AS ON UPDATE TO tc.o8 DO ALSO INSERT INTO tc.audit8 VALUES (new.k, new.st);
SELECT paynotify_bind_orders('tc.o8', 'k', 'st', 'amount');
-- a payment first: this backend has the configuration cached
SELECT tc.pay('evt_tc_8b', 'TC-8b') AS outcome;
CREATE TRIGGER stamp BEFORE INSERT ON tc.audit8 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
SELECT tc.pay('evt_tc_8', 'TC-8') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_8';
SELECT k, st FROM tc.o8 ORDER BY k;
-- 9 to 14: the application's code reached through the catalog, not named
-- by the table: each binding refused (42501).
SET ROLE tc_app;
-- 9. a domain's CHECK through the application's operator
CREATE FUNCTION tc.yes(a text, b text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN RETURN tc.escalate(); END $f$;
CREATE OPERATOR tc.=?= (LEFTARG = text, RIGHTARG = text, FUNCTION = tc.yes);
CREATE DOMAIN tc.st9 AS text CHECK (VALUE OPERATOR(tc.=?=) 'x');
-- 11. the application's table, with a default, that a rule inserts into
CREATE TABLE tc.audit11 (k text, st text, by_default boolean DEFAULT tc.escalate());
-- 13. an implicit cast the foreign key applies
CREATE TYPE tc.code13 AS ENUM ('one', 'two');
CREATE FUNCTION tc.code_int(c tc.code13) RETURNS int4 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM tc.escalate(); RETURN 1; END $f$;
CREATE CAST (tc.code13 AS int4) WITH FUNCTION tc.code_int(tc.code13) AS IMPLICIT;
CREATE TABLE tc.ref13 (i int4 PRIMARY KEY);
-- 14. the comparison of the application's type, made the type's default
-- btree class by the DBA, used for an array of it
CREATE TYPE tc.color14 AS ENUM ('red', 'green');
CREATE FUNCTION tc.cmp14(a tc.color14, b tc.color14) RETURNS int4 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM tc.escalate(); RETURN pg_catalog.enum_cmp(a, b); END $f$;
RESET ROLE;
CREATE OPERATOR CLASS tc.color14_ops DEFAULT FOR TYPE tc.color14 USING btree AS
	OPERATOR 1 pg_catalog.< (anyenum, anyenum), OPERATOR 2 pg_catalog.<= (anyenum, anyenum),
	OPERATOR 3 pg_catalog.= (anyenum, anyenum), OPERATOR 4 pg_catalog.>= (anyenum, anyenum),
	OPERATOR 5 pg_catalog.> (anyenum, anyenum), FUNCTION 1 tc.cmp14(tc.color14, tc.color14);
CREATE TABLE tc.o9 (k text PRIMARY KEY, st tc.st9 NOT NULL, amount bigint NOT NULL);
-- 10. the table's own CHECK and index expression convert to the
-- application's domain
CREATE TABLE tc.o10 (k text PRIMARY KEY, st text NOT NULL CHECK ((st || '-')::tc.ref IS NOT NULL),
	amount bigint NOT NULL);
CREATE TABLE tc.o10b (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE INDEX ON tc.o10b (((st || '-')::tc.ref));
CREATE TABLE tc.o11 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO tc.o11 DO ALSO INSERT INTO tc.audit11 (k, st) VALUES (new.k, new.st);
-- 12. a column of the multirange of the application's range (case 6)
CREATE TABLE tc.o12 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, s tc.slot_multirange);
CREATE TABLE tc.o13 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL,
	c tc.code13 REFERENCES tc.ref13 (i));
CREATE TABLE tc.o14 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, tags tc.color14[]);
CREATE UNIQUE INDEX ON tc.o14 (tags, st);
SELECT t, (SELECT pg_catalog.string_agg(a.fn::text, ', ' ORDER BY a.fn::text)
		   FROM paynotify_table_authors(t) a WHERE a.owner::text = 'tc_app') AS application_code
FROM unnest('{tc.o9, tc.o10, tc.o10b, tc.o11, tc.o12, tc.o13, tc.o14}'::regclass[]) t;
SELECT paynotify_bind_orders('tc.o9', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_bind_orders('tc.o10b', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_bind_orders('tc.o11', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_bind_orders('tc.o13', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT paynotify_bind_orders('tc.o14', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 15. A rule writing into a partition of a table whose partition key is
-- the application's function (the partition's check is its parent's
-- key): refused; and the table a rule writes into attached as a partition
-- of that table after the binding: the next payment of a backend that had
-- the configuration fails, runs nothing.
SET ROLE tc_app;
CREATE FUNCTION tc.bucket15(k text) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM tc.escalate(); RETURN pg_catalog.length(k) - 5; END $f$;
RESET ROLE;
CREATE TABLE tc.audit15 (k text, st text) PARTITION BY LIST (tc.bucket15(k));
CREATE TABLE tc.audit15_0 PARTITION OF tc.audit15 FOR VALUES IN (0);
CREATE TABLE tc.audit15b (k text, st text);
CREATE TABLE tc.o15 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO tc.o15 DO ALSO INSERT INTO tc.audit15_0 VALUES (new.k, new.st);
SELECT paynotify_bind_orders('tc.o15', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE tc.o15b (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO tc.o15b VALUES ('TC-15a', 'pending', 100), ('TC-15b', 'pending', 100);
CREATE RULE audit AS ON UPDATE TO tc.o15b DO ALSO INSERT INTO tc.audit15b VALUES (new.k, new.st);
SELECT paynotify_bind_orders('tc.o15b', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_15b', 'TC-15b') AS outcome;
-- (emptied first: attaching checks the rows with the key, as the DBA)
TRUNCATE tc.audit15b;
ALTER TABLE tc.audit15 ATTACH PARTITION tc.audit15b FOR VALUES IN (1);
SELECT tc.pay('evt_tc_15', 'TC-15a') AS outcome;
SELECT k, st FROM tc.o15b ORDER BY k;
-- 16. The DBA gives a type a default btree class whose comparison is the
-- application's function, after the binding, while a backend has the
-- configuration: its next payment fails, runs nothing.
CREATE TYPE tc.color16 AS ENUM ('red', 'green');
SET ROLE tc_app;
CREATE FUNCTION tc.cmp16(a tc.color16, b tc.color16) RETURNS int4 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM tc.escalate(); RETURN pg_catalog.enum_cmp(a, b); END $f$;
RESET ROLE;
CREATE TABLE tc.o16 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, tags tc.color16[]);
CREATE UNIQUE INDEX ON tc.o16 (tags, st);
INSERT INTO tc.o16 VALUES ('TC-16', 'pending', 100, '{red,green}');
SELECT paynotify_bind_orders('tc.o16', 'k', 'st', 'amount');
-- the configuration loaded by a notification for an order that is not there
SELECT tc.pay('evt_tc_16x', 'TC-16x') AS outcome;
CREATE OPERATOR CLASS tc.color16_ops DEFAULT FOR TYPE tc.color16 USING btree AS
	OPERATOR 1 pg_catalog.< (anyenum, anyenum), OPERATOR 2 pg_catalog.<= (anyenum, anyenum),
	OPERATOR 3 pg_catalog.= (anyenum, anyenum), OPERATOR 4 pg_catalog.>= (anyenum, anyenum),
	OPERATOR 5 pg_catalog.> (anyenum, anyenum), FUNCTION 1 tc.cmp16(tc.color16, tc.color16);
SELECT tc.pay('evt_tc_16', 'TC-16') AS outcome;
SELECT st FROM tc.o16;
-- 17. The trigger's function belongs to a superuser when the table is
-- bound; that role is made an ordinary one while a backend has the
-- configuration: its next payment fails, runs nothing.
CREATE ROLE tc_plain;
GRANT USAGE ON SCHEMA tc TO tc_plain;
CREATE ROLE tc_dba SUPERUSER;
CREATE FUNCTION tc.stamp17() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM tc.escalate(); RETURN NEW; END $f$;
ALTER FUNCTION tc.stamp17() OWNER TO tc_dba;
CREATE TABLE tc.o17 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o17 OWNER TO tc_plain;
INSERT INTO tc.o17 VALUES ('TC-17', 'pending', 100);
CREATE TRIGGER stamp BEFORE UPDATE ON tc.o17 FOR EACH ROW EXECUTE FUNCTION tc.stamp17();
SELECT paynotify_bind_orders('tc.o17', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_17x', 'TC-17x') AS outcome;
ALTER ROLE tc_dba NOSUPERUSER;
SELECT tc.pay('evt_tc_17', 'TC-17') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_17';
SELECT st FROM tc.o17;
-- 18. The same with a membership: the function's owner is a member of the
-- table's owner when the table is bound, and is no longer one while a
-- backend has the configuration.
CREATE ROLE tc_owner;
CREATE ROLE tc_dev IN ROLE tc_owner;
GRANT CREATE, USAGE ON SCHEMA tc TO tc_owner, tc_dev;
SET ROLE tc_owner;
CREATE TABLE tc.o18 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TABLE tc.mark18 (who text);
INSERT INTO tc.o18 VALUES ('TC-18', 'pending', 100);
RESET ROLE;
SET ROLE tc_dev;
CREATE FUNCTION tc.stamp18() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO tc.mark18 VALUES (current_user); RETURN NEW; END $f$;
RESET ROLE;
CREATE TRIGGER stamp BEFORE UPDATE ON tc.o18 FOR EACH ROW EXECUTE FUNCTION tc.stamp18();
SELECT paynotify_bind_orders('tc.o18', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_18x', 'TC-18x') AS outcome;
REVOKE tc_owner FROM tc_dev;
SELECT tc.pay('evt_tc_18', 'TC-18') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_18';
SELECT st, (SELECT count(*) FROM tc.mark18) AS trigger_ran FROM tc.o18;
-- 19. A rule of the table writes to a table of another role that has the
-- owner's rights, which has a policy (row security enabled, not forced):
-- the policy holds the table's owner, another role, and runs the
-- application's function as that owner.  Refused at binding, and when
-- added after the binding.
CREATE ROLE tc_aud IN ROLE tc_owner;
GRANT CREATE, USAGE ON SCHEMA tc TO tc_aud;
SET ROLE tc_owner;
CREATE TABLE tc.secret19 (s text);
INSERT INTO tc.secret19 VALUES ('the owner''s secret');
CREATE TABLE tc.o19 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO tc.o19 VALUES ('TC-19', 'pending', 100);
RESET ROLE;
SET ROLE tc_app;
CREATE TABLE tc.loot19 (who text, s text);
CREATE FUNCTION tc.spy19() RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO tc.loot19 SELECT current_user, s FROM tc.secret19;
	RETURN true;
EXCEPTION WHEN insufficient_privilege THEN RETURN true;
END $f$;
GRANT INSERT ON tc.loot19 TO PUBLIC;
RESET ROLE;
SET ROLE tc_aud;
CREATE TABLE tc.audit19 (k text, st text);
GRANT INSERT ON tc.audit19 TO tc_owner;
ALTER TABLE tc.audit19 ENABLE ROW LEVEL SECURITY;
CREATE POLICY p ON tc.audit19 FOR INSERT WITH CHECK (tc.spy19());
RESET ROLE;
SET ROLE tc_owner;
CREATE RULE audit AS ON UPDATE TO tc.o19 DO ALSO INSERT INTO tc.audit19 VALUES (new.k, new.st);
RESET ROLE;
SELECT paynotify_bind_orders('tc.o19', 'k', 'st', 'amount');
-- the policy made after the binding
SET ROLE tc_aud;
DROP POLICY p ON tc.audit19;
RESET ROLE;
SELECT paynotify_bind_orders('tc.o19', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_19x', 'TC-19x') AS outcome;
SET ROLE tc_aud;
CREATE POLICY p ON tc.audit19 FOR INSERT WITH CHECK (tc.spy19());
RESET ROLE;
SELECT tc.pay('evt_tc_19', 'TC-19') AS outcome;
SELECT st FROM tc.o19;
SELECT count(*) AS looted FROM tc.loot19;
-- 20. What can be given code later, owned by the application: refused
-- at binding whatever code it holds now, since its owner may give it
-- any.  The table a rule writes to, with no code yet (any trigger the
-- application gave it while a delivery waited for its lock would run
-- unchecked).  A domain whose check hides SQL in text, where no walk of
-- the catalog sees it, and a domain with no check at all.
SET ROLE tc_app;
CREATE TABLE tc.audit20 (k text, st text);
CREATE DOMAIN tc.hidden20 AS text
	CHECK (pg_catalog.query_to_xml('SELECT tc.escalate()', true, false, '') IS NOT NULL);
CREATE DOMAIN tc.plain20 AS text;
RESET ROLE;
CREATE TABLE tc.o20 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO tc.o20 DO ALSO INSERT INTO tc.audit20 VALUES (new.k, new.st);
SELECT paynotify_bind_orders('tc.o20', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE tc.o20b (k text PRIMARY KEY, st tc.hidden20 NOT NULL, amount bigint NOT NULL);
SELECT paynotify_bind_orders('tc.o20b', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- no function of the application's is named by the catalog: its type is
SELECT count(*) AS application_functions FROM paynotify_table_authors('tc.o20b') WHERE owner::text = 'tc_app';
SELECT what, object FROM paynotify_table_owners('tc.o20b') WHERE owner::text = 'tc_app';
CREATE TABLE tc.o20c (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, note tc.plain20);
SELECT paynotify_bind_orders('tc.o20c', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 21. A policy that reads a view: the view's query runs in the policy's
-- check.  Refused when the application owns the view, and when the
-- owner's view calls the application's function.
SET ROLE tc_app;
CREATE VIEW tc.gate21 AS SELECT tc.escalate() AS ok;
RESET ROLE;
SET ROLE tc_owner;
CREATE VIEW tc.gate21b AS SELECT tc.escalate() AS ok;
CREATE TABLE tc.audit21 (k text, st text);
ALTER TABLE tc.audit21 ENABLE ROW LEVEL SECURITY;
ALTER TABLE tc.audit21 FORCE ROW LEVEL SECURITY;
CREATE POLICY p ON tc.audit21 FOR INSERT WITH CHECK (EXISTS (SELECT 1 FROM tc.gate21));
CREATE TABLE tc.o21 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO tc.o21 DO ALSO INSERT INTO tc.audit21 VALUES (new.k, new.st);
RESET ROLE;
SELECT relid::regclass, by_rule FROM paynotify_table_relations('tc.o21') ORDER BY 1::text;
SELECT paynotify_bind_orders('tc.o21', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SET ROLE tc_owner;
ALTER POLICY p ON tc.audit21 WITH CHECK (EXISTS (SELECT 1 FROM tc.gate21b));
RESET ROLE;
SELECT paynotify_bind_orders('tc.o21', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 22. The right to create triggers on the table, granted to the
-- application or to PUBLIC: refused; revoked: bound.
CREATE TABLE tc.o22 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
GRANT TRIGGER ON tc.o22 TO tc_app;
SELECT paynotify_bind_orders('tc.o22', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
REVOKE TRIGGER ON tc.o22 FROM tc_app;
GRANT TRIGGER ON tc.o22 TO PUBLIC;
SELECT paynotify_bind_orders('tc.o22', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
REVOKE TRIGGER ON tc.o22 FROM PUBLIC;
SELECT paynotify_bind_orders('tc.o22', 'k', 'st', 'amount');
-- granted after the binding: the next payment fails, runs nothing
INSERT INTO tc.o22 VALUES ('TC-22', 'pending', 100);
SELECT tc.pay('evt_tc_22x', 'TC-22x') AS outcome;
GRANT TRIGGER ON tc.o22 TO tc_app;
SELECT tc.pay('evt_tc_22', 'TC-22') AS outcome;
SELECT st FROM tc.o22;
REVOKE TRIGGER ON tc.o22 FROM tc_app;
-- 23. More code than paynotify checks (a table with 135 children of 1,593
-- columns: 215,000 columns, each a start of the walk): refused at
-- binding (54000), and when the children come after the binding.
DO $$ BEGIN EXECUTE (SELECT 'CREATE TABLE tc.o23 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, '
	   || pg_catalog.string_agg('c' || i || ' int', ', ') || ')' FROM pg_catalog.generate_series(1, 1590) i); END $$;
INSERT INTO tc.o23 (k, st, amount) VALUES ('TC-23', 'pending', 100);
SELECT paynotify_bind_orders('tc.o23', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_23x', 'TC-23x') AS outcome;
DO $$ BEGIN FOR i IN 1..135 LOOP EXECUTE pg_catalog.format('CREATE TABLE tc.o23_%s () INHERITS (tc.o23)', i); END LOOP; END $$;
SELECT tc.pay('evt_tc_23', 'TC-23') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_23';
SELECT st FROM tc.o23;
SELECT paynotify_bind_orders('tc.o23', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- 24. Code no walk of the catalog follows, guarded as it runs: a function
-- whose owner lacks the rights of the role it would run as fails before
-- it runs, and the step with it (retried).
-- a. the owner's PL/pgSQL trigger writes each move into the application's
-- table, which the application gives a trigger after the binding
SET ROLE tc_app;
CREATE TABLE tc.audit24 (k text, st text);
RESET ROLE;
CREATE FUNCTION tc.log24() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO tc.audit24 VALUES (NEW.k, NEW.st); RETURN NEW; END $f$;
CREATE TABLE tc.o24a (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o24a OWNER TO tc_plain;
CREATE TRIGGER log AFTER UPDATE ON tc.o24a FOR EACH ROW EXECUTE FUNCTION tc.log24();
INSERT INTO tc.o24a VALUES ('TC-24a', 'pending', 100);
SELECT paynotify_bind_orders('tc.o24a', 'k', 'st', 'amount');
SET ROLE tc_app;
CREATE TRIGGER stamp BEFORE INSERT ON tc.audit24 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
RESET ROLE;
SELECT tc.pay('evt_tc_24a', 'TC-24a') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_24a';
SELECT st, (SELECT count(*) FROM tc.audit24) AS audited FROM tc.o24a;
-- b. a CHECK through the owner's SQL function, whose body reads the
-- application's view
SET ROLE tc_app;
CREATE VIEW tc.gate24 AS SELECT tc.escalate() AS ok;
GRANT SELECT ON tc.gate24 TO tc_plain;
RESET ROLE;
CREATE FUNCTION tc.open24(k text) RETURNS boolean LANGUAGE sql STABLE
BEGIN ATOMIC SELECT bool_and(ok) FROM tc.gate24; END;
CREATE TABLE tc.o24b (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL,
	CHECK (st = 'pending' OR tc.open24(k)));
ALTER TABLE tc.o24b OWNER TO tc_plain;
INSERT INTO tc.o24b VALUES ('TC-24b', 'pending', 100);
SELECT paynotify_bind_orders('tc.o24b', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_24b', 'TC-24b') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_24b';
SELECT st FROM tc.o24b;
-- c. the owner's shipments reference the order's status ON UPDATE CASCADE;
-- the application may create triggers on them
CREATE TABLE tc.o24c (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, UNIQUE (k, st));
CREATE TABLE tc.ship24 (k text, st text, FOREIGN KEY (k, st) REFERENCES tc.o24c (k, st) ON UPDATE CASCADE);
GRANT TRIGGER ON tc.ship24 TO tc_app;
INSERT INTO tc.o24c VALUES ('TC-24c', 'pending', 100);
INSERT INTO tc.ship24 VALUES ('TC-24c', 'pending');
SELECT paynotify_bind_orders('tc.o24c', 'k', 'st', 'amount');
SET ROLE tc_app;
CREATE TRIGGER stamp BEFORE UPDATE ON tc.ship24 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
RESET ROLE;
SELECT tc.pay('evt_tc_24c', 'TC-24c') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_24c';
SELECT st, (SELECT st FROM tc.ship24) AS shipped FROM tc.o24c;
-- d. the application's table with no code but a default, which the
-- owner's trigger fills: refused as the trigger's INSERT starts (it wrote
-- the owner's name, and could have read any file)
CREATE TABLE tc.o24d (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o24d OWNER TO tc_plain;
SET ROLE tc_app;
CREATE TABLE tc.audit24d (k text, st text, who text DEFAULT current_user);
RESET ROLE;
CREATE FUNCTION tc.log24d() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO tc.audit24d (k, st) VALUES (NEW.k, NEW.st); RETURN NEW; END $f$;
CREATE TRIGGER log AFTER UPDATE ON tc.o24d FOR EACH ROW EXECUTE FUNCTION tc.log24d();
INSERT INTO tc.o24d VALUES ('TC-24d', 'pending', 100);
SELECT paynotify_bind_orders('tc.o24d', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_24d', 'TC-24d') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_24d';
SELECT st, (SELECT count(*) FROM tc.audit24d) AS audited FROM tc.o24d;
-- 25. The application's own moves (paynotify_transit) run the table's
-- code as the application, as its own UPDATE would: nothing its session
-- prepared runs as the owner.  The owner's trigger calls the
-- application's function; the application warms it in its transaction,
-- then moves orders.
CREATE ROLE tc_mover;
SELECT paynotify_grant('tc_mover', 'admin');
GRANT USAGE ON SCHEMA tc TO tc_mover;
CREATE TABLE tc.ran25 (who text);
GRANT INSERT ON tc.ran25 TO PUBLIC;
SET ROLE tc_app;
CREATE FUNCTION tc.mark25(k text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN INSERT INTO tc.ran25 VALUES (current_user); RETURN tc.escalate(); END $f$;
RESET ROLE;
CREATE FUNCTION tc.log25() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE ok boolean;
BEGIN ok := tc.mark25(NEW.k); RETURN NEW; END $f$;
CREATE TABLE tc.o25 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o25 OWNER TO tc_plain;
CREATE TRIGGER log AFTER UPDATE ON tc.o25 FOR EACH ROW EXECUTE FUNCTION tc.log25();
INSERT INTO tc.o25 VALUES ('TC-25a', 'pending', 100), ('TC-25b', 'pending', 100);
GRANT SELECT, UPDATE ON tc.o25 TO tc_mover;
SELECT paynotify_bind_orders('tc.o25', 'k', 'st', 'amount');
SET ROLE tc_mover;
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE tc.o25 SET st = st WHERE k = 'TC-25b';
SELECT pay.paynotify_transit('TC-25a', 'pending', 'paid');
COMMIT;
RESET ROLE;
SELECT k, st FROM tc.o25 ORDER BY k;
SELECT who, count(*) FROM tc.ran25 GROUP BY who;
-- a mover with UPDATE alone cannot read the order it would move: refused
REVOKE SELECT ON tc.o25 FROM tc_mover;
SET ROLE tc_mover;
SELECT pay.paynotify_transit('TC-25b', 'pending', 'paid');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT SELECT ON tc.o25 TO tc_mover;
-- 26. The same admin delivers a notification itself, signed with a key of
-- its own channel, in a transaction that warmed the owner's trigger: the
-- delivery runs the table's code as the owner, and the application's
-- function, prepared before, is refused as it starts.  Again in a new
-- session, where the warming UPDATE is what loads paynotify.  (The event's
-- body is the same at each delivery of one id, only its signature's time
-- is the clock's: a delivery again is a retry, never another payload.)
CREATE FUNCTION tc.deliver26(evt text, ord text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
	ts bigint := extract(epoch FROM clock_timestamp())::bigint;
	body text := jsonb_build_object('id', evt, 'object', 'event',
		'created', 1767300000, 'type', 'payment_intent.succeeded', 'livemode', false,
		'data', jsonb_build_object('object', jsonb_build_object('id', 'pi_' || evt,
			'object', 'payment_intent', 'amount', 100, 'amount_received', 100,
			'currency', 'usd', 'metadata', jsonb_build_object('order_id', ord))))::text;
	result text;
BEGIN
	SELECT outcome INTO result FROM pay.paynotify_handle('tc26', jsonb_build_object(
		'Content-Type', 'application/json; charset=utf-8',
		'Stripe-Signature', 't=' || ts || ',v1=' || t.hmac_sha256(convert_to('whsec_mover_26', 'UTF8'),
			convert_to(ts || '.' || body, 'UTF8'))), body);
	RETURN result;
END $f$;
GRANT USAGE ON SCHEMA t TO tc_mover;
INSERT INTO tc.o25 VALUES ('TC-26a', 'pending', 100), ('TC-26b', 'pending', 100);
TRUNCATE tc.ran25;
SET ROLE tc_mover;
SELECT pay.paynotify_add_channel('tc26', 'stripe', '{}');
SELECT pay.paynotify_add_key('tc26', 'k1', 'whsec_mover_26');
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE tc.o25 SET st = st WHERE k = 'TC-25b';
SELECT tc.deliver26('evt_tc_26a', 'TC-26a') AS outcome;
COMMIT;
RESET ROLE;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc26' AND notify_id = 'evt_tc_26a';
\c
SET search_path = pay, public;
SET ROLE tc_mover;
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
UPDATE tc.o25 SET st = st WHERE k = 'TC-25b';
SELECT tc.deliver26('evt_tc_26b', 'TC-26b') AS outcome;
COMMIT;
RESET ROLE;
\set VERBOSITY terse
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc26' AND notify_id = 'evt_tc_26b';
SELECT k, st FROM tc.o25 WHERE k LIKE 'TC-26%' ORDER BY k;
SELECT who, count(*) FROM tc.ran25 GROUP BY who ORDER BY who;
-- 27. The owner's PL/pgSQL trigger keeps a value in a variable of the
-- application's domain, whose CHECK calls built-in functions only (here it
-- writes a large object, owned by whoever runs it): nothing in the catalog
-- records that the trigger names the domain, and no guard at run time
-- tells those built-ins from the owner's own.  A table a superuser owns is
-- refused at binding; one a plain role owns is bound and runs the check
-- as that role; given to a superuser after the binding, its next payment
-- fails, runs nothing.
SET ROLE tc_app;
CREATE DOMAIN tc.ref27 AS text CHECK (VALUE IS NULL OR
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
RESET ROLE;
CREATE FUNCTION tc.log27() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE r tc.ref27;
BEGIN r := NEW.k; RETURN NEW; END $f$;
CREATE TABLE tc.o27 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TRIGGER log AFTER UPDATE ON tc.o27 FOR EACH ROW EXECUTE FUNCTION tc.log27();
INSERT INTO tc.o27 VALUES ('TC-27a', 'pending', 100), ('TC-27b', 'pending', 100);
SELECT paynotify_bind_orders('tc.o27', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
SELECT tc.pay('evt_tc_27x', 'TC-27a') AS outcome;
-- a SQL function in a CHECK, outside BEGIN ATOMIC or inside (its body
-- may read a superuser's table or view that reaches the domain, which no
-- catalog records of the function), and a built-in running SQL given as
-- text: the same.  A superuser's table runs C, internal and built-in
-- functions only.
CREATE FUNCTION tc.ok27(k text) RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT true $$;
CREATE TABLE tc.o27s (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, CHECK (tc.ok27(k)));
SELECT paynotify_bind_orders('tc.o27s', 'k', 'st', 'amount');
CREATE OR REPLACE FUNCTION tc.ok27(k text) RETURNS boolean LANGUAGE sql STABLE BEGIN ATOMIC SELECT true; END;
SELECT paynotify_bind_orders('tc.o27s', 'k', 'st', 'amount');
CREATE TABLE tc.o27q (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL,
	CHECK (st = 'pending' OR query_to_xml('SELECT ''x''::tc.ref27', false, false, '') IS NOT NULL));
SELECT paynotify_bind_orders('tc.o27q', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
-- a C function of another extension that runs SQL it builds from text
-- (refint's check_foreign_key, whose arguments name the application's
-- table with a column of its domain): the same.  Only built-in functions
-- and paynotify's and Citus's run for a superuser's table.
CREATE EXTENSION refint SCHEMA tc;
CREATE TABLE tc.x27 (k tc.ref27);
ALTER TABLE tc.x27 OWNER TO tc_app;
CREATE TABLE tc.o27r (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TRIGGER fk BEFORE DELETE OR UPDATE ON tc.o27r FOR EACH ROW
	EXECUTE FUNCTION tc.check_foreign_key(1, 'cascade', 'k', 'tc.x27', 'k');
SELECT paynotify_bind_orders('tc.o27r', 'k', 'st', 'amount');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE tc.o27r, tc.x27;
DROP EXTENSION refint;
-- given to a plain role: bound, and the check runs as that role
ALTER TABLE tc.o27 OWNER TO tc_plain;
SELECT paynotify_bind_orders('tc.o27', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_27a', 'TC-27a') AS outcome;
SELECT convert_from(lo_get(m.oid), 'UTF8') AS ran, m.lomowner::regrole AS lo_owner
FROM pg_largeobject_metadata m
WHERE m.lomowner IN ('tc_plain'::regrole, 'tc_app'::regrole, :'su'::regrole)
	AND convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %'
ORDER BY 1;
-- given to a superuser after the binding: the next payment fails
ALTER TABLE tc.o27 OWNER TO :"su";
SELECT tc.pay('evt_tc_27b', 'TC-27b') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_27b';
SELECT k, st FROM tc.o27 ORDER BY k;
SELECT count(lo_unlink(m.oid)) AS unlinked FROM pg_largeobject_metadata m WHERE m.lomowner = 'tc_plain'::regrole;
-- 28. Only a change of what the table's code reaches loads the
-- configuration again (each load walks that code): a temporary table's
-- row type does not; its amount domain given to the application does,
-- and the step fails with the reason.
CREATE DOMAIN tc.amt28 AS bigint;
CREATE TABLE tc.o28 (k text PRIMARY KEY, st text NOT NULL, amount tc.amt28 NOT NULL);
INSERT INTO tc.o28 VALUES ('TC-28a', 'pending', 100), ('TC-28b', 'pending', 100), ('TC-28c', 'pending', 100);
SELECT paynotify_bind_orders('tc.o28', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_28a', 'TC-28a') AS outcome;
SET log_temp_files = -1;
SET client_min_messages = debug1;
CREATE TEMP TABLE tc_tmp28 (a int);
SELECT tc.pay('evt_tc_28b', 'TC-28b') AS outcome;
ALTER DOMAIN tc.amt28 OWNER TO tc_app;
SELECT tc.pay('evt_tc_28c', 'TC-28c') AS outcome;
RESET client_min_messages;
RESET log_temp_files;
SELECT k, st FROM tc.o28 ORDER BY k;
-- 29. The same admin delivers from a session whose temporary schema holds
-- its own domain, named as the owner's: the owner's trigger pins its
-- search_path without pg_temp and names its domain unqualified, so
-- PostgreSQL would take the temporary one and run its CHECK as the owner.
-- Refused while such a type is there (failed, retried); after DISCARD
-- TEMP, paid, with the owner's domain.  The same with a temporary
-- sequence named as the owner's, which the trigger's nextval would take.
CREATE DOMAIN tc.note29 AS text CHECK (VALUE <> '');
ALTER DOMAIN tc.note29 OWNER TO tc_plain;
CREATE SEQUENCE tc.seq29;
ALTER SEQUENCE tc.seq29 OWNER TO tc_plain;
CREATE FUNCTION tc.log29() RETURNS trigger LANGUAGE plpgsql SET search_path = tc AS $f$
DECLARE n note29;
BEGIN n := NEW.k; PERFORM nextval('seq29'); RETURN NEW; END $f$;
CREATE TABLE tc.o29 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o29 OWNER TO tc_plain;
CREATE TRIGGER log AFTER UPDATE ON tc.o29 FOR EACH ROW EXECUTE FUNCTION tc.log29();
INSERT INTO tc.o29 VALUES ('TC-29a', 'pending', 100), ('TC-29b', 'pending', 100);
SELECT paynotify_bind_orders('tc.o29', 'k', 'st', 'amount');
SET ROLE tc_mover;
CREATE DOMAIN pg_temp.note29 AS text CHECK (VALUE IS NULL OR
	lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
SELECT tc.deliver26('evt_tc_29a', 'TC-29a') AS outcome;
RESET ROLE;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc26' AND notify_id = 'evt_tc_29a';
SET ROLE tc_mover;
DISCARD TEMP;
SELECT tc.deliver26('evt_tc_29a', 'TC-29a') AS outcome;
RESET ROLE;
-- (in a new session: the trigger's plan, made before, holds the owner's)
\c
SET search_path = pay, public;
SET ROLE tc_mover;
CREATE TEMP SEQUENCE seq29 START 1000;
GRANT USAGE ON SEQUENCE seq29 TO PUBLIC;
SELECT tc.deliver26('evt_tc_29b', 'TC-29b') AS outcome;
RESET ROLE;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc26' AND notify_id = 'evt_tc_29b';
SET ROLE tc_mover;
DISCARD TEMP;
SELECT tc.deliver26('evt_tc_29b', 'TC-29b') AS outcome;
RESET ROLE;
SELECT k, st FROM tc.o29 ORDER BY k;
SELECT last_value FROM tc.seq29;
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
-- 30. A hook runs as the role that registered it, in the delivering
-- session too.  The DBA's hook, registered as tc_hooks (a plain role with
-- the admin capacity: a superuser's hook may have no body kept as text),
-- pins its search_path without pg_temp and writes to its table
-- unqualified; the admin binds a table of its own (so the orders table's
-- code runs as the admin itself) and makes a temporary table of that
-- name, whose trigger would run as tc_hooks.  Refused as the hook starts
-- (failed, retried); after DISCARD TEMP, paid, and the hook writes where
-- the DBA meant.
CREATE ROLE tc_hooks;
SELECT paynotify_grant('tc_hooks', 'admin');
GRANT USAGE ON SCHEMA tc TO tc_hooks;
CREATE TABLE tc.paid30 (order_no text);
GRANT INSERT ON tc.paid30 TO tc_hooks;
CREATE FUNCTION tc.on_paid30(ev jsonb) RETURNS void LANGUAGE plpgsql SET search_path = tc AS $f$
BEGIN INSERT INTO paid30 VALUES (ev->'notice'->>'order_no'); END $f$;
SET ROLE tc_hooks;
SELECT paynotify_on('paid', 'tc.on_paid30(jsonb)');
RESET ROLE;
GRANT CREATE ON SCHEMA tc TO tc_mover;
SET ROLE tc_mover;
CREATE TABLE tc.o30 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
INSERT INTO tc.o30 VALUES ('TC-30a', 'pending', 100);
SELECT pay.paynotify_bind_orders('tc.o30', 'k', 'st', 'amount');
CREATE FUNCTION pg_temp.spy30() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')); RETURN NULL; END $f$;
CREATE TEMP TABLE paid30 (order_no text);
GRANT ALL ON paid30 TO PUBLIC;
CREATE TRIGGER spy BEFORE INSERT ON paid30 FOR EACH ROW EXECUTE FUNCTION pg_temp.spy30();
SELECT tc.deliver26('evt_tc_30a', 'TC-30a') AS outcome;
RESET ROLE;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc26' AND notify_id = 'evt_tc_30a';
SET ROLE tc_mover;
DISCARD TEMP;
SELECT tc.deliver26('evt_tc_30a', 'TC-30a') AS outcome;
RESET ROLE;
SELECT k, st FROM tc.o30;
SELECT order_no FROM tc.paid30;
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
DELETE FROM paynotify_hook WHERE handler = 'tc.on_paid30(jsonb)';
SELECT paynotify_revoke('tc_hooks', 'admin');
DROP OWNED BY tc_hooks;
DROP ROLE tc_hooks;
REVOKE CREATE ON SCHEMA tc FROM tc_mover;
-- 31. A composite type the code reaches may be given an attribute of a
-- domain later: its owner is judged like a domain's.  The application's
-- composite in a CHECK (jsonb_populate_record) is refused at binding; the
-- owner's own is bound, and when the owner gives it an attribute of the
-- application's domain, the configuration loads again and the next
-- payment fails with the reason, running nothing.
SET ROLE tc_app;
CREATE TYPE tc.meta31a AS (note text);
CREATE DOMAIN tc.evil31 AS text CHECK (lo_from_bytea(0, convert_to('ran as ' || current_user, 'UTF8')) > 0);
RESET ROLE;
CREATE TABLE tc.o31a (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL,
	info jsonb NOT NULL DEFAULT '{}', CHECK (jsonb_populate_record(NULL::tc.meta31a, info) IS DISTINCT FROM NULL));
SELECT paynotify_bind_orders('tc.o31a', 'k', 'st', 'amount');
CREATE TYPE tc.meta31 AS (note text);
ALTER TYPE tc.meta31 OWNER TO tc_plain;
CREATE TABLE tc.o31 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL,
	info jsonb NOT NULL DEFAULT '{}', CHECK (jsonb_populate_record(NULL::tc.meta31, info) IS DISTINCT FROM NULL));
ALTER TABLE tc.o31 OWNER TO tc_plain;
INSERT INTO tc.o31 (k, st, amount) VALUES ('TC-31a', 'pending', 100), ('TC-31b', 'pending', 100);
SELECT paynotify_bind_orders('tc.o31', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_31a', 'TC-31a') AS outcome;
ALTER TYPE tc.meta31 ADD ATTRIBUTE x tc.evil31;
SELECT tc.pay('evt_tc_31b', 'TC-31b') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_31b';
SELECT k, st FROM tc.o31 ORDER BY k;
SELECT count(*) AS ran FROM pg_largeobject_metadata m
WHERE convert_from(lo_get(m.oid), 'UTF8') LIKE 'ran as %';
DELETE FROM paynotify_channel WHERE name = 'tc26';
-- 32. A hook runs under the guards of the orders table's code: the
-- operator's hook writes to the application's table, which the
-- application gives a trigger after the registration.  Refused as the
-- hook's INSERT starts (failed, retried): the trigger never runs as the
-- operator.
SET ROLE tc_app;
CREATE TABLE tc.ship32 (order_no text);
GRANT INSERT ON tc.ship32 TO tc_mover;
RESET ROLE;
CREATE FUNCTION tc.on_paid32(ev jsonb) RETURNS void LANGUAGE sql BEGIN ATOMIC
	INSERT INTO tc.ship32 VALUES (ev->'notice'->>'order_no');
END;
SET ROLE tc_mover;
SELECT paynotify_on('paid', 'tc.on_paid32(jsonb)');
RESET ROLE;
SET ROLE tc_app;
CREATE TRIGGER stamp BEFORE INSERT ON tc.ship32 FOR EACH ROW EXECUTE FUNCTION tc.stamp();
RESET ROLE;
CREATE TABLE tc.o32 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o32 OWNER TO tc_plain;
INSERT INTO tc.o32 VALUES ('TC-32a', 'pending', 100);
SELECT paynotify_bind_orders('tc.o32', 'k', 'st', 'amount');
SELECT tc.pay('evt_tc_32a', 'TC-32a') AS outcome;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_32a';
SELECT st, (SELECT count(*) FROM tc.ship32) AS shipped FROM tc.o32;
SELECT rolsuper FROM pg_roles WHERE rolname = 'tc_app';
DELETE FROM paynotify_hook WHERE handler = 'tc.on_paid32(jsonb)';
SELECT paynotify_revoke('tc_mover', 'admin');
-- 33. What the delivering session set does not change the owner's code:
-- with plpgsql.check_asserts off there, the owner's ASSERT (an order on
-- hold is never paid) still holds (failed, retried).
CREATE FUNCTION tc.hold33() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN ASSERT NEW.k <> 'TC-33h' OR NEW.st = 'pending', 'order on hold'; RETURN NEW; END $f$;
CREATE TABLE tc.o33 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
ALTER TABLE tc.o33 OWNER TO tc_plain;
CREATE TRIGGER hold BEFORE UPDATE ON tc.o33 FOR EACH ROW EXECUTE FUNCTION tc.hold33();
INSERT INTO tc.o33 VALUES ('TC-33h', 'pending', 100);
SELECT paynotify_bind_orders('tc.o33', 'k', 'st', 'amount');
SET plpgsql.check_asserts = off;
SELECT tc.pay('evt_tc_33', 'TC-33h') AS outcome;
RESET plpgsql.check_asserts;
SELECT error_msg FROM payment_notify_log WHERE channel = 'tc' AND notify_id = 'evt_tc_33';
SELECT st FROM tc.o33;
-- the application's own table (case 4) still runs the application's code
SELECT paynotify_bind_orders('tc.o4', 'k', 'st', 'amount');
SET ROLE tc_app;
UPDATE tc.o4 SET st = 'pending';
RESET ROLE;
SELECT tc.pay('evt_tc_24e', 'TC-4') AS outcome;
-- none of it made the application a superuser
SELECT rolsuper FROM pg_roles WHERE rolname = 'tc_app';
-- what paynotify_table_authors says of tc.o1, the application's part
SELECT what, fn, owner FROM paynotify_table_authors('tc.o1') WHERE owner::text = 'tc_app';

SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');
DROP SCHEMA tc CASCADE;
DROP ROLE tc_app;
DROP ROLE tc_dba;
DROP ROLE tc_dev;
DROP ROLE tc_aud;
DROP ROLE tc_owner;
DROP ROLE tc_mover;
DROP ROLE tc_plain;
