-- The configuration and paynotify_bind_orders walk the orders table's code
-- in C (src/authors.c): the same walk as the 1.3 SQL functions
-- paynotify_table_authors, paynotify_table_owners and
-- paynotify_table_relations, without a query to plan.  Here the two are
-- compared row for row, and in order: over
-- every table, view and foreign table of the regression database (the
-- system catalogs included), over tables built for each edge of the walk,
-- and over a catalog that names objects that are not there.
\set VERBOSITY terse
SET search_path = pay, public;
CREATE SCHEMA ta;
-- the C walk's entry points, for this comparison only (not in the
-- extension's scripts)
CREATE FUNCTION ta.authors_c(rel regclass)
	RETURNS TABLE (what text, fn regprocedure, owner regrole)
	AS '$libdir/paynotify', 'paynotify_table_authors_c' LANGUAGE C STABLE STRICT;
CREATE FUNCTION ta.owners_c(rel regclass)
	RETURNS TABLE (what text, object text, owner regrole)
	AS '$libdir/paynotify', 'paynotify_table_owners_c' LANGUAGE C STABLE STRICT;
CREATE FUNCTION ta.relations_c(rel regclass)
	RETURNS TABLE (relid oid, by_rule boolean)
	AS '$libdir/paynotify', 'paynotify_table_relations_c' LANGUAGE C STABLE STRICT;
-- the rows one side has and the other has not, with their position
CREATE FUNCTION ta.authors_diff(rel regclass)
	RETURNS TABLE (side text, what text, fn regprocedure, owner regrole, n bigint)
	LANGUAGE sql AS $$
	(SELECT 'sql only', s.* FROM paynotify_table_authors(rel) WITH ORDINALITY s(what, fn, owner, n)
	 EXCEPT ALL SELECT 'sql only', c.* FROM ta.authors_c(rel) WITH ORDINALITY c(what, fn, owner, n))
	UNION ALL
	(SELECT 'c only', c.* FROM ta.authors_c(rel) WITH ORDINALITY c(what, fn, owner, n)
	 EXCEPT ALL SELECT 'c only', s.* FROM paynotify_table_authors(rel) WITH ORDINALITY s(what, fn, owner, n))
$$;
CREATE FUNCTION ta.owners_diff(rel regclass)
	RETURNS TABLE (side text, what text, object text, owner regrole, n bigint)
	LANGUAGE sql AS $$
	(SELECT 'sql only', s.* FROM paynotify_table_owners(rel) WITH ORDINALITY s(what, object, owner, n)
	 EXCEPT ALL SELECT 'sql only', c.* FROM ta.owners_c(rel) WITH ORDINALITY c(what, object, owner, n))
	UNION ALL
	(SELECT 'c only', c.* FROM ta.owners_c(rel) WITH ORDINALITY c(what, object, owner, n)
	 EXCEPT ALL SELECT 'c only', s.* FROM paynotify_table_owners(rel) WITH ORDINALITY s(what, object, owner, n))
$$;
CREATE FUNCTION ta.relations_diff(rel regclass)
	RETURNS TABLE (side text, relid oid, by_rule boolean, n bigint)
	LANGUAGE sql AS $$
	(SELECT 'sql only', s.* FROM paynotify_table_relations(rel) WITH ORDINALITY s(relid, by_rule, n)
	 EXCEPT ALL SELECT 'sql only', c.* FROM ta.relations_c(rel) WITH ORDINALITY c(relid, by_rule, n))
	UNION ALL
	(SELECT 'c only', c.* FROM ta.relations_c(rel) WITH ORDINALITY c(relid, by_rule, n)
	 EXCEPT ALL SELECT 'c only', s.* FROM paynotify_table_relations(rel) WITH ORDINALITY s(relid, by_rule, n))
$$;

-- ===== the objects of table_code: the application's code on each path =====
CREATE ROLE ta_app;
GRANT CREATE, USAGE ON SCHEMA ta TO ta_app;
SET ROLE ta_app;
CREATE FUNCTION ta.escalate() RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN RETURN true; END $f$;
CREATE FUNCTION ta.stamp() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM ta.escalate(); RETURN NEW; END $f$;
CREATE DOMAIN ta.ref AS text CHECK (ta.escalate());
CREATE FUNCTION ta.bucket(k text) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM ta.escalate(); RETURN 0; END $f$;
CREATE FUNCTION ta.diff(a int4, b int4) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM ta.escalate(); RETURN a - b; END $f$;
CREATE TYPE ta.slot AS RANGE (subtype = int4, subtype_diff = ta.diff);
CREATE TABLE ta.audit (k text, st text);
CREATE TRIGGER stamp BEFORE INSERT ON ta.audit FOR EACH ROW EXECUTE FUNCTION ta.stamp();
CREATE FUNCTION ta.yes(a text, b text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN RETURN ta.escalate(); END $f$;
CREATE OPERATOR ta.=?= (LEFTARG = text, RIGHTARG = text, FUNCTION = ta.yes);
CREATE DOMAIN ta.st9 AS text CHECK (VALUE OPERATOR(ta.=?=) 'x');
CREATE TABLE ta.audit11 (k text, st text, by_default boolean DEFAULT ta.escalate());
CREATE TYPE ta.code13 AS ENUM ('one', 'two');
CREATE FUNCTION ta.code_int(c ta.code13) RETURNS int4 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM ta.escalate(); RETURN 1; END $f$;
CREATE CAST (ta.code13 AS int4) WITH FUNCTION ta.code_int(ta.code13) AS IMPLICIT;
CREATE TABLE ta.ref13 (i int4 PRIMARY KEY);
CREATE TYPE ta.color14 AS ENUM ('red', 'green');
CREATE FUNCTION ta.cmp14(a ta.color14, b ta.color14) RETURNS int4 LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM ta.escalate(); RETURN pg_catalog.enum_cmp(a, b); END $f$;
CREATE FUNCTION ta.bucket15(k text) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN PERFORM ta.escalate(); RETURN pg_catalog.length(k) - 5; END $f$;
CREATE TABLE ta.audit15 (k text, st text) PARTITION BY LIST (ta.bucket15(k));
CREATE TABLE ta.audit15_0 PARTITION OF ta.audit15 FOR VALUES IN (0);
CREATE TABLE ta.audit15b (k text, st text);
ALTER TABLE ta.audit15 ATTACH PARTITION ta.audit15b FOR VALUES IN (1);
RESET ROLE;
CREATE OPERATOR CLASS ta.color14_ops DEFAULT FOR TYPE ta.color14 USING btree AS
	OPERATOR 1 pg_catalog.< (anyenum, anyenum), OPERATOR 2 pg_catalog.<= (anyenum, anyenum),
	OPERATOR 3 pg_catalog.= (anyenum, anyenum), OPERATOR 4 pg_catalog.>= (anyenum, anyenum),
	OPERATOR 5 pg_catalog.> (anyenum, anyenum), FUNCTION 1 ta.cmp14(ta.color14, ta.color14);
CREATE TABLE ta.o1 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TRIGGER stamp BEFORE UPDATE ON ta.o1 FOR EACH ROW EXECUTE FUNCTION ta.stamp();
CREATE TABLE ta.o2 (k ta.ref PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE TABLE ta.o5 (k text NOT NULL, st text NOT NULL, amount bigint NOT NULL)
	PARTITION BY LIST (ta.bucket(k));
CREATE TABLE ta.o5_0 PARTITION OF ta.o5 FOR VALUES IN (0);
CREATE TABLE ta.o6 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, s ta.slot);
CREATE INDEX ON ta.o6 USING gist (s);
CREATE TABLE ta.o7 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO ta.o7 DO ALSO INSERT INTO ta.audit VALUES (new.k, new.st);
CREATE TABLE ta.o9 (k text PRIMARY KEY, st ta.st9 NOT NULL, amount bigint NOT NULL);
CREATE TABLE ta.o10 (k text PRIMARY KEY, st text NOT NULL CHECK ((st || '-')::ta.ref IS NOT NULL),
	amount bigint NOT NULL);
CREATE TABLE ta.o10b (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE INDEX ON ta.o10b (((st || '-')::ta.ref));
CREATE TABLE ta.o11 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO ta.o11 DO ALSO INSERT INTO ta.audit11 (k, st) VALUES (new.k, new.st);
CREATE TABLE ta.o12 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, s ta.slot_multirange);
CREATE TABLE ta.o13 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL,
	c ta.code13 REFERENCES ta.ref13 (i));
CREATE TABLE ta.o14 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL, tags ta.color14[]);
CREATE UNIQUE INDEX ON ta.o14 (tags, st);
CREATE TABLE ta.o15 (k text PRIMARY KEY, st text NOT NULL, amount bigint NOT NULL);
CREATE RULE audit AS ON UPDATE TO ta.o15 DO ALSO INSERT INTO ta.audit15_0 VALUES (new.k, new.st);

-- ===== more of each edge =====
SET ROLE ta_app;
-- casts paynotify's statements make: text to the type, the type to text and bigint
CREATE TYPE ta.money2 AS (units bigint, cents int2);
CREATE FUNCTION ta.m_from_text(t text) RETURNS ta.money2 LANGUAGE sql IMMUTABLE
	AS $$ SELECT ROW(split_part(t, '.', 1)::bigint, split_part(t, '.', 2)::int2)::ta.money2 $$;
CREATE FUNCTION ta.m_to_text(m ta.money2) RETURNS text LANGUAGE sql IMMUTABLE
	AS $$ SELECT m.units || '.' || m.cents $$;
CREATE FUNCTION ta.m_to_int8(m ta.money2) RETURNS bigint LANGUAGE sql IMMUTABLE
	AS $$ SELECT m.units * 100 + m.cents $$;
-- a domain over a domain, its CHECK through a function and an operator
CREATE FUNCTION ta.positive(v bigint) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT v > 0 $$;
CREATE DOMAIN ta.amount AS bigint CHECK (ta.positive(VALUE));
CREATE DOMAIN ta.small_amount AS ta.amount CHECK (VALUE < 1000000) DEFAULT 1;
-- a range with a canonical-less discrete subtype, its own subtype class
CREATE FUNCTION ta.i8cmp(a int8, b int8) RETURNS int4 LANGUAGE sql IMMUTABLE AS $$ SELECT btint8cmp(a, b) $$;
CREATE FUNCTION ta.hash_text(t text) RETURNS int4 LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext(t) $$;
-- generated columns, defaults, triggers with WHEN, constraint triggers
CREATE FUNCTION ta.twice(v bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$ SELECT v * 2 $$;
CREATE FUNCTION ta.changed(a text, b text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT a IS DISTINCT FROM b $$;
CREATE FUNCTION ta.deferred() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$;
CREATE FUNCTION ta.stmt() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RETURN NULL; END $f$;
-- policies
CREATE FUNCTION ta.visible(k text) RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT k <> '' $$;
-- a rule's condition and action
CREATE FUNCTION ta.logged(k text) RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT true $$;
CREATE TABLE ta.rule_target (k text, at timestamptz DEFAULT now(), n bigint GENERATED ALWAYS AS (length(k)) STORED,
	who text DEFAULT current_user CHECK (ta.changed(who, '')));
CREATE TRIGGER rt BEFORE INSERT ON ta.rule_target FOR EACH ROW
	WHEN (ta.changed(NEW.k, 'x')) EXECUTE FUNCTION ta.stamp();
-- an exclusion constraint's operators
CREATE FUNCTION ta.overlaps(a ta.slot, b ta.slot) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT a && b $$;
RESET ROLE;
CREATE CAST (text AS ta.money2) WITH FUNCTION ta.m_from_text(text);
CREATE CAST (ta.money2 AS text) WITH FUNCTION ta.m_to_text(ta.money2);
CREATE CAST (ta.money2 AS int8) WITH FUNCTION ta.m_to_int8(ta.money2);
-- a cast without a function, and one through input and output: no function of their own
CREATE TYPE ta.tag AS ENUM ('a', 'b');
CREATE CAST (ta.tag AS text) WITH INOUT;
CREATE DOMAIN ta.textish AS text;
-- the default btree and hash classes of a type, another family's members
CREATE TYPE ta.mood AS ENUM ('sad', 'ok', 'happy');
CREATE FUNCTION ta.mood_cmp(a ta.mood, b ta.mood) RETURNS int4 LANGUAGE sql IMMUTABLE AS $$ SELECT enum_cmp(a, b) $$;
CREATE FUNCTION ta.mood_hash(a ta.mood) RETURNS int4 LANGUAGE sql IMMUTABLE AS $$ SELECT hashenum(a) $$;
CREATE FUNCTION ta.mood_eq(a ta.mood, b ta.mood) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT enum_eq(a, b) $$;
CREATE OPERATOR ta.= (LEFTARG = ta.mood, RIGHTARG = ta.mood, FUNCTION = ta.mood_eq,
	RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR CLASS ta.mood_btree DEFAULT FOR TYPE ta.mood USING btree AS
	OPERATOR 1 pg_catalog.< (anyenum, anyenum), OPERATOR 2 pg_catalog.<= (anyenum, anyenum),
	OPERATOR 3 ta.= (ta.mood, ta.mood), OPERATOR 4 pg_catalog.>= (anyenum, anyenum),
	OPERATOR 5 pg_catalog.> (anyenum, anyenum), FUNCTION 1 ta.mood_cmp(ta.mood, ta.mood);
CREATE OPERATOR CLASS ta.mood_hash DEFAULT FOR TYPE ta.mood USING hash AS
	OPERATOR 1 ta.= (ta.mood, ta.mood), FUNCTION 1 ta.mood_hash(ta.mood);
-- a non-default class: not reached from the type
CREATE OPERATOR CLASS ta.text_hash2 FOR TYPE text USING hash AS
	OPERATOR 1 pg_catalog.= (text, text), FUNCTION 1 ta.hash_text(text);
-- a range whose subtype class is named, over a btree class of our own
CREATE OPERATOR CLASS ta.i8_ops2 FOR TYPE int8 USING btree AS
	OPERATOR 1 pg_catalog.< (int8, int8), OPERATOR 2 pg_catalog.<= (int8, int8),
	OPERATOR 3 pg_catalog.= (int8, int8), OPERATOR 4 pg_catalog.>= (int8, int8),
	OPERATOR 5 pg_catalog.> (int8, int8), FUNCTION 1 ta.i8cmp(int8, int8);
CREATE TYPE ta.span AS RANGE (subtype = int8, subtype_opclass = ta.i8_ops2,
	multirange_type_name = ta.spans);

CREATE TABLE ta.e1 (
	k text PRIMARY KEY,
	st ta.mood NOT NULL,
	amount ta.small_amount NOT NULL,
	m ta.money2,
	tag ta.tag,
	t ta.textish,
	twice bigint GENERATED ALWAYS AS (ta.twice(amount)) STORED,
	sp ta.span,
	sps ta.spans,
	moods ta.mood[],
	s ta.slot,
	note text DEFAULT 'x' COLLATE "C",
	EXCLUDE USING gist (s WITH &&) WHERE (ta.overlaps(s, '[1,2)'))
);
ALTER TABLE ta.e1 ADD COLUMN gone int;
ALTER TABLE ta.e1 DROP COLUMN gone;
CREATE INDEX e1_expr ON ta.e1 (ta.twice(amount)) WHERE ta.positive(amount);
CREATE INDEX e1_hash ON ta.e1 USING hash (st);
CREATE INDEX e1_op ON ta.e1 USING hash (k ta.text_hash2) WHERE false;
CREATE TRIGGER e1_when BEFORE UPDATE ON ta.e1 FOR EACH ROW
	WHEN (ta.changed(OLD.k, NEW.k)) EXECUTE FUNCTION ta.stamp();
CREATE TRIGGER e1_stmt AFTER UPDATE ON ta.e1 FOR EACH STATEMENT EXECUTE FUNCTION ta.stmt();
CREATE CONSTRAINT TRIGGER e1_deferred AFTER UPDATE ON ta.e1 DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION ta.deferred();
ALTER TABLE ta.e1 ADD CONSTRAINT e1_check CHECK (ta.changed(k, note)) NOT VALID;
-- a forced policy, and one on a table that does not force them
ALTER TABLE ta.e1 ENABLE ROW LEVEL SECURITY;
ALTER TABLE ta.e1 FORCE ROW LEVEL SECURITY;
CREATE POLICY e1_see ON ta.e1 USING (ta.visible(k));
CREATE TABLE ta.e2 (k text);
ALTER TABLE ta.e2 ENABLE ROW LEVEL SECURITY;
CREATE POLICY e2_see ON ta.e2 USING (ta.visible(k));
-- the policy of a table another role owns, which a rule writes to: it
-- holds the owner whether forced or not
CREATE ROLE ta_other;
CREATE TABLE ta.other_target (k text);
ALTER TABLE ta.other_target ENABLE ROW LEVEL SECURITY;
CREATE POLICY ot_see ON ta.other_target USING (ta.visible(k));
ALTER TABLE ta.other_target OWNER TO ta_other;
CREATE RULE e1_other AS ON UPDATE TO ta.e1 DO ALSO INSERT INTO ta.other_target VALUES (new.k);
-- rules: a condition, an action into a table with defaults, triggers,
-- generated columns and checks, and INSTEAD
CREATE RULE e1_log AS ON UPDATE TO ta.e1 WHERE ta.logged(new.k)
	DO ALSO INSERT INTO ta.rule_target (k) VALUES (new.k);
CREATE RULE e2_none AS ON DELETE TO ta.e2 DO INSTEAD NOTHING;
-- foreign keys: an implicit cast, a multi-column key of domains, to itself
CREATE TABLE ta.parent (a ta.amount, b text, i int4 UNIQUE, PRIMARY KEY (a, b));
CREATE TABLE ta.fk (k text PRIMARY KEY, a bigint, b ta.textish, c ta.code13, up text,
	FOREIGN KEY (a, b) REFERENCES ta.parent (a, b),
	FOREIGN KEY (c) REFERENCES ta.parent (i),
	FOREIGN KEY (up) REFERENCES ta.fk (k));
-- partitions: two levels, a partition with its own trigger and index, a
-- default partition, a hash-partitioned level
CREATE TABLE ta.pt (k text NOT NULL, st ta.mood NOT NULL, amount bigint NOT NULL)
	PARTITION BY LIST (st);
CREATE TABLE ta.pt_sad PARTITION OF ta.pt FOR VALUES IN ('sad') PARTITION BY HASH (ta.twice(amount));
CREATE TABLE ta.pt_sad_0 PARTITION OF ta.pt_sad FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE ta.pt_sad_1 PARTITION OF ta.pt_sad FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE ta.pt_rest PARTITION OF ta.pt DEFAULT;
CREATE TRIGGER pt_rest BEFORE UPDATE ON ta.pt_rest FOR EACH ROW EXECUTE FUNCTION ta.stamp();
CREATE INDEX ON ta.pt (ta.twice(amount));
-- plain inheritance (not partitions)
CREATE TABLE ta.base (k text, n ta.amount);
CREATE TABLE ta.child (extra ta.mood) INHERITS (ta.base);
CREATE TABLE ta.grandchild () INHERITS (ta.child);
CREATE TRIGGER gc BEFORE UPDATE ON ta.grandchild FOR EACH ROW EXECUTE FUNCTION ta.stamp();
-- a typed table, a composite column whose type is a table's row
CREATE TYPE ta.pair AS (a ta.mood, b ta.money2);
CREATE TABLE ta.typed OF ta.pair;
CREATE TABLE ta.nest (k text, p ta.pair, row_of ta.e2, ps ta.pair[]);
-- a view with a rule of its own, a materialized view, a view a rule writes through
CREATE VIEW ta.v AS SELECT k, ta.twice(amount) AS t FROM ta.e1;
CREATE MATERIALIZED VIEW ta.mv AS SELECT k FROM ta.e2 WITH NO DATA;
CREATE TABLE ta.via_view (k text PRIMARY KEY);
CREATE RULE via AS ON UPDATE TO ta.via_view DO ALSO UPDATE ta.pt SET amount = 0 WHERE k = new.k;
-- a generated column whose function nothing else reaches
SET ROLE ta_app;
CREATE FUNCTION ta.gen_only(v bigint) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$ SELECT v + 1 $$;
RESET ROLE;
CREATE TABLE ta.g1 (a bigint, g bigint GENERATED ALWAYS AS (ta.gen_only(a)) STORED);
-- a forced policy that reads a view and a table, whose policy reads
-- another; the right to create triggers granted to a role and to PUBLIC
CREATE TABLE ta.t3 (k text);
ALTER TABLE ta.t3 ENABLE ROW LEVEL SECURITY;
ALTER TABLE ta.t3 OWNER TO ta_other;
CREATE TABLE ta.t3b (k text);
CREATE POLICY t3_see ON ta.t3 USING (EXISTS (SELECT 1 FROM ta.t3b WHERE ta.visible(t3b.k)));
CREATE VIEW ta.v3 AS SELECT ta.logged(k) AS ok FROM ta.e2;
CREATE TABLE ta.e3 (k text PRIMARY KEY, st text, amount bigint);
ALTER TABLE ta.e3 ENABLE ROW LEVEL SECURITY;
ALTER TABLE ta.e3 FORCE ROW LEVEL SECURITY;
CREATE POLICY e3_see ON ta.e3 USING (EXISTS (SELECT 1 FROM ta.v3) AND EXISTS (SELECT 1 FROM ta.t3));
GRANT TRIGGER ON ta.e3 TO ta_app;
GRANT TRIGGER ON ta.t3 TO PUBLIC;
GRANT TRIGGER ON ta.t3 TO ta_app WITH GRANT OPTION;
-- names that must be quoted, a temporary table (labels name it as the SQL names it)
CREATE TABLE ta."Odd ""Name""" ("we""ird" ta.mood, "Upper" ta.money2 DEFAULT NULL);
CREATE RULE "Odd Rule" AS ON UPDATE TO ta."Odd ""Name""" DO ALSO INSERT INTO ta.rule_target (k) VALUES ('x');
CREATE TEMP TABLE ta_temp (k text PRIMARY KEY, st ta.mood, m ta.money2);
CREATE TRIGGER t BEFORE UPDATE ON ta_temp FOR EACH ROW EXECUTE FUNCTION ta.stamp();
-- a table named like a catalog, in the temporary schema: qualified in labels
CREATE TEMP TABLE pg_class (k text);
CREATE TABLE public.pg_type (k ta.mood);

-- ===== the comparison =====
-- every table, view, materialized view and foreign table: rows that
-- differ (none), and how much was compared
CREATE TEMP TABLE rels AS
SELECT c.oid::regclass AS rel, c.relnamespace = 'pg_catalog'::regnamespace AS catalog
FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f');
CREATE TEMP TABLE sql_rows AS
SELECT r.rel, s.* FROM rels r, paynotify_table_authors(r.rel) WITH ORDINALITY s(what, fn, owner, n);
CREATE TEMP TABLE c_rows AS
SELECT r.rel, c.* FROM rels r, ta.authors_c(r.rel) WITH ORDINALITY c(what, fn, owner, n);
CREATE TEMP TABLE sql_owners AS
SELECT r.rel, s.* FROM rels r, paynotify_table_owners(r.rel) WITH ORDINALITY s(what, object, owner, n);
CREATE TEMP TABLE c_owners AS
SELECT r.rel, c.* FROM rels r, ta.owners_c(r.rel) WITH ORDINALITY c(what, object, owner, n);
CREATE TEMP TABLE sql_relations AS
SELECT r.rel, s.* FROM rels r, paynotify_table_relations(r.rel) WITH ORDINALITY s(relid, by_rule, n);
CREATE TEMP TABLE c_relations AS
SELECT r.rel, c.* FROM rels r, ta.relations_c(r.rel) WITH ORDINALITY c(relid, by_rule, n);
(SELECT 'sql only' AS side, * FROM sql_rows EXCEPT ALL SELECT 'sql only', * FROM c_rows)
UNION ALL
(SELECT 'c only', * FROM c_rows EXCEPT ALL SELECT 'c only', * FROM sql_rows);
(SELECT 'sql only' AS side, * FROM sql_owners EXCEPT ALL SELECT 'sql only', * FROM c_owners)
UNION ALL
(SELECT 'c only', * FROM c_owners EXCEPT ALL SELECT 'c only', * FROM sql_owners);
(SELECT 'sql only' AS side, * FROM sql_relations EXCEPT ALL SELECT 'sql only', * FROM c_relations)
UNION ALL
(SELECT 'c only', * FROM c_relations EXCEPT ALL SELECT 'c only', * FROM sql_relations);
SELECT count(*) > 200 AS many_relations, count(*) FILTER (WHERE catalog) > 60 AS catalogs,
	   count(*) FILTER (WHERE rel::text LIKE 'ta.%') AS built_here,
	   (SELECT count(*) FROM sql_rows) > 20000 AS many_rows,
	   (SELECT count(DISTINCT what) FROM sql_rows) > 500 AS many_labels,
	   (SELECT count(*) FROM sql_relations WHERE by_rule) > 50 AS many_by_rule,
	   (SELECT count(*) FROM sql_owners) > 400 AS many_owners,
	   (SELECT count(DISTINCT object) FILTER (WHERE object LIKE 'the right%') FROM sql_owners) AS trigger_rights
FROM rels;
-- each kind of start the walk has, reached in the tables built here
SELECT DISTINCT regexp_replace(a.what, '^(the partition key|the type|trigger|constraint|the generated column|the default|index|rule|policy).*', '\1') AS start
FROM c_rows a WHERE a.rel::text LIKE 'ta.%' OR a.rel::text = 'ta_temp'
ORDER BY 1;
-- the application's functions each table built here runs, by the C walk
SELECT a.rel, string_agg(DISTINCT a.fn::text, ', ' ORDER BY a.fn::text) AS application_code
FROM c_rows a WHERE a.owner = 'ta_app'::regrole AND (a.rel::text LIKE 'ta.%' OR a.rel::text = 'ta_temp')
GROUP BY a.rel ORDER BY a.rel::text;
-- some labels as they are named
SELECT DISTINCT what FROM ta.authors_c('ta."Odd ""Name"""') WHERE what LIKE '%we"ird%'
UNION SELECT DISTINCT what FROM ta.authors_c('ta_temp') WHERE what LIKE 'trigger%'
UNION SELECT DISTINCT what FROM ta.authors_c('public.pg_type') WHERE what LIKE 'the type%'
ORDER BY 1;
-- what owns the code of ta.e3, besides the superuser: the relations its
-- policy reads, and the rights to create triggers
SELECT what, object, owner FROM ta.owners_c('ta.e3') WHERE owner::text <> current_user OR object LIKE 'view%';
SELECT relid::regclass, by_rule FROM ta.relations_c('ta.e3') ORDER BY relid::regclass::text;
-- the relations of a rule through a view's rule, of a partition two levels down
SELECT relid::regclass, by_rule FROM ta.relations_c('ta.via_view') ORDER BY relid::regclass::text;
SELECT relid::regclass, by_rule FROM ta.relations_c('ta.pt_sad_1') ORDER BY relid::regclass::text;
SELECT relid::regclass, by_rule FROM ta.relations_c('ta.child') ORDER BY relid::regclass::text;

DROP TABLE pg_temp.pg_class;

-- ===== a catalog that names what is not there =====
-- pg_depend, pg_type, pg_range, pg_cast, pg_trigger, pg_operator,
-- pg_constraint and pg_amproc rows pointing at objects that do not exist
-- (as after a drop the walk has not seen yet): both skip them, the C walk
-- without an error
BEGIN;
SET LOCAL allow_system_table_mods = on;
INSERT INTO pg_depend VALUES
	('pg_catalog.pg_class'::regclass, 'ta.e1'::regclass, 0, 'pg_type'::regclass, 4000000001, 0, 'n'),
	('pg_catalog.pg_class'::regclass, 'ta.e1'::regclass, 0, 'pg_proc'::regclass, 4000000002, 0, 'n'),
	('pg_catalog.pg_class'::regclass, 'ta.e1'::regclass, 0, 'pg_operator'::regclass, 4000000003, 0, 'n'),
	('pg_catalog.pg_class'::regclass, 'ta.e1'::regclass, 0, 'pg_opclass'::regclass, 4000000004, 0, 'n'),
	('pg_catalog.pg_class'::regclass, 'ta.e1'::regclass, 0, 'pg_opfamily'::regclass, 4000000005, 0, 'n'),
	('pg_catalog.pg_class'::regclass, 4000000006, 0, 'pg_type'::regclass, 'ta.mood'::regtype, 0, 'n');
UPDATE pg_type SET typreceive = 4000000007, typelem = 4000000008 WHERE oid = 'ta.money2'::regtype;
UPDATE pg_range SET rngsubopc = 4000000009, rngsubdiff = 4000000010 WHERE rngtypid = 'ta.slot'::regtype;
UPDATE pg_cast SET castfunc = 4000000011 WHERE castsource = 'ta.money2'::regtype AND casttarget = 'int8'::regtype;
UPDATE pg_trigger SET tgfoid = 4000000012 WHERE tgname = 'e1_stmt';
UPDATE pg_operator SET oprcode = 4000000013, oprrest = 4000000014 WHERE oid = 'ta.=(ta.mood, ta.mood)'::regoperator;
UPDATE pg_constraint SET confrelid = 4000000015 WHERE conrelid = 'ta.fk'::regclass AND conkey = '{5}';
UPDATE pg_constraint SET conkey = '{2,99}' WHERE conrelid = 'ta.fk'::regclass AND conkey = '{2,3}';
UPDATE pg_amproc SET amproc = 4000000016 WHERE amproc = 'ta.mood_hash(ta.mood)'::regprocedure;
UPDATE pg_opclass SET opcfamily = 4000000017 WHERE oid = (SELECT oid FROM pg_opclass WHERE opcname = 'mood_btree');
SELECT rel, count(d.*) AS differ
FROM unnest(ARRAY['ta.e1', 'ta.fk', 'ta.nest', 'ta.typed', 'ta.o6', 'ta.pt']::regclass[]) rel
LEFT JOIN LATERAL ta.authors_diff(rel) d ON true GROUP BY rel ORDER BY rel::text;
SELECT rel, count(d.*) AS owners_differ
FROM unnest(ARRAY['ta.e1', 'ta.fk', 'ta.nest', 'ta.typed', 'ta.o6', 'ta.pt']::regclass[]) rel
LEFT JOIN LATERAL ta.owners_diff(rel) d ON true GROUP BY rel ORDER BY rel::text;
SELECT count(*) FROM ta.authors_diff(4000000006::oid::regclass);
SELECT count(*) FROM ta.owners_diff(4000000006::oid::regclass);
SELECT count(*) FROM ta.relations_diff(4000000006::oid::regclass);
-- the walk saw them: fewer functions than before
SELECT (SELECT count(*) FROM ta.authors_c('ta.e1')) < (SELECT count(*) FROM c_rows WHERE rel = 'ta.e1'::regclass) AS fewer;
SELECT DISTINCT what FROM ta.authors_c(4000000006::oid::regclass);
ROLLBACK;

-- ===== the configuration and the binding use the C walk =====
-- the same refusal as table_code, named by the C walk
SELECT paynotify_bind_orders('ta.o1', 'k', 'st', 'amount');
SELECT paynotify_bind_orders('ta.o15', 'k', 'st', 'amount');
SELECT paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen');

DROP TABLE public.pg_type;
-- no relation, no code: oid 0 (a domain's constraint has conrelid 0) and
-- an oid no relation has, in SQL and in C
SELECT (SELECT count(*) FROM paynotify_table_authors(0)) AS authors,
	(SELECT count(*) FROM paynotify_table_owners(0)) AS owners,
	(SELECT count(*) FROM paynotify_table_relations(0)) AS relations,
	(SELECT count(*) FROM ta.authors_c(0)) AS authors_c,
	(SELECT count(*) FROM ta.owners_c(0)) AS owners_c,
	(SELECT count(*) FROM ta.relations_c(0)) AS relations_c,
	(SELECT count(*) FROM ta.authors_c(4000000000)) AS authors_c_none;
DROP SCHEMA ta CASCADE;
DROP ROLE ta_app;
DROP ROLE ta_other;
