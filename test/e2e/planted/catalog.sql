-- What paynotify's objects resolve to, from the catalog: one line per
-- violation, none when all is well.
--   dependency: an object of the extension (a table's constraint, default,
--     index, trigger or view rule; a function) depends on a function,
--     operator, type, collation or relation that is neither in pg_catalog
--     nor a member of the extension (nor one of its tables' own indexes and
--     row types);
--   search_path: a function of the extension without a pinned search_path.
-- Run it with search_path = pg_catalog: its own calls must not meet what a
-- test planted.
WITH ext AS (SELECT e.oid FROM pg_extension e WHERE e.extname = 'paynotify'),
members AS (
	SELECT d.classid, d.objid FROM pg_depend d, ext
	WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
rels AS (SELECT m.objid AS relid FROM members m WHERE m.classid = 'pg_class'::regclass),
objs AS (
	SELECT m.classid, m.objid FROM members m
	UNION SELECT 'pg_constraint'::regclass, c.oid FROM pg_constraint c WHERE c.conrelid IN (SELECT relid FROM rels)
	UNION SELECT 'pg_attrdef'::regclass, a.oid FROM pg_attrdef a WHERE a.adrelid IN (SELECT relid FROM rels)
	UNION SELECT 'pg_trigger'::regclass, t.oid FROM pg_trigger t WHERE t.tgrelid IN (SELECT relid FROM rels)
	UNION SELECT 'pg_rewrite'::regclass, r.oid FROM pg_rewrite r WHERE r.ev_class IN (SELECT relid FROM rels)
	UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i WHERE i.indrelid IN (SELECT relid FROM rels)),
refs AS (
	SELECT d.classid, d.objid, d.objsubid, d.refclassid, d.refobjid,
		CASE d.refclassid
			WHEN 'pg_proc'::regclass THEN (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = d.refobjid)
			WHEN 'pg_operator'::regclass THEN (SELECT o.oprnamespace FROM pg_operator o WHERE o.oid = d.refobjid)
			WHEN 'pg_type'::regclass THEN (SELECT t.typnamespace FROM pg_type t WHERE t.oid = d.refobjid)
			WHEN 'pg_collation'::regclass THEN (SELECT c.collnamespace FROM pg_collation c WHERE c.oid = d.refobjid)
			WHEN 'pg_class'::regclass THEN (SELECT c.relnamespace FROM pg_class c WHERE c.oid = d.refobjid)
		END AS refnsp
	FROM pg_depend d JOIN objs o ON o.classid = d.classid AND o.objid = d.objid
	WHERE d.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass, 'pg_type'::regclass,
						   'pg_collation'::regclass, 'pg_class'::regclass))
SELECT 'dependency: ' || pg_describe_object(r.classid, r.objid, r.objsubid)
	   || ' -> ' || pg_describe_object(r.refclassid, r.refobjid, 0) AS violation
FROM refs r
WHERE r.refnsp <> 'pg_catalog'::regnamespace
  AND NOT EXISTS (SELECT FROM members m WHERE m.classid = r.refclassid AND m.objid = r.refobjid)
  AND NOT (r.refclassid = 'pg_type'::regclass
		   AND EXISTS (SELECT FROM pg_type t WHERE t.oid = r.refobjid AND t.typrelid IN (SELECT relid FROM rels)))
  AND NOT (r.refclassid = 'pg_class'::regclass
		   AND r.refobjid IN (SELECT i.indexrelid FROM pg_index i WHERE i.indrelid IN (SELECT relid FROM rels)))
UNION ALL
SELECT 'search_path: ' || p.oid::regprocedure::text
FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
WHERE NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')
ORDER BY 1;
