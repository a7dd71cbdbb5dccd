-- Run by an attacker role that may CREATE in schema :"schema": plants there
-- an exact-type shadow of every function, aggregate and operator of
-- pg_catalog that paynotify's scripts and C code name, for every
-- combination of common argument types where pg_catalog has no exact match
-- of its own (so that the shadow, not pg_catalog's, would be the best match
-- of an unqualified call).  Each shadow counts its calls in the sequence
-- planted_calls (non-transactional: a call counts even when its
-- transaction is rolled back), then does what pg_catalog's would.
--   psql -v schema=public -v names="{cardinality,substr,...}" -v ops="{=,<@,...}" -f plant.sql
SET search_path = pg_catalog;
SELECT set_config('planted.schema', :'schema', false),
	   set_config('planted.names', :'names', false),
	   set_config('planted.ops', :'ops', false);
DO $plant$
DECLARE
	nsp text := current_setting('planted.schema');
	names text[] := current_setting('planted.names')::text[];
	ops text[] := current_setting('planted.ops')::text[];
	types regtype[] := ARRAY['text', 'varchar', 'name', 'bpchar', 'smallint', 'integer', 'bigint',
		'numeric', 'double precision', 'boolean', 'bytea', 'json', 'jsonb', 'timestamptz',
		'timestamp', 'interval', 'date', 'uuid', 'oid', 'regclass', 'regrole', 'regtype', 'regprocedure',
		'text[]', 'varchar[]', 'name[]', 'integer[]', 'bigint[]', 'jsonb[]', 'timestamptz[]',
		'boolean[]', 'double precision[]']::regtype[];
	n integer := 0;
	op text;
	fn text;
	l regtype;
	r regtype;
	rt text;
	p record;
	args regtype[];
	sig text;
	call text;
BEGIN
	EXECUTE format('CREATE SEQUENCE %I.planted_calls', nsp);
	EXECUTE format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE %I.planted_calls TO PUBLIC', nsp);
	-- binary operators
	FOREACH op IN ARRAY ops LOOP
		FOREACH l IN ARRAY types LOOP
			FOREACH r IN ARRAY types LOOP
				CONTINUE WHEN EXISTS (SELECT FROM pg_operator o WHERE o.oprname = op
									  AND o.oprnamespace = 'pg_catalog'::regnamespace
									  AND o.oprleft = l AND o.oprright = r);
				BEGIN
					EXECUTE format('SELECT pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)::text', l, op, r)
						INTO rt;
				EXCEPTION WHEN OTHERS THEN
					CONTINUE;
				END;
				n := n + 1;
				EXECUTE format($f$CREATE FUNCTION %I.planted_op_%s(%s, %s) RETURNS %s LANGUAGE sql IMMUTABLE
					AS $b$ SELECT pg_catalog.nextval(%L); SELECT $1 OPERATOR(pg_catalog.%s) $2 $b$$f$,
					nsp, n, l, r, rt, format('%I.planted_calls', nsp), op);
				EXECUTE format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.planted_op_%s)',
					nsp, op, l, r, nsp, n);
			END LOOP;
		END LOOP;
	END LOOP;
	-- functions and aggregates: each pg_catalog one of those names, with
	-- each argument either its own type, a type that converts to it
	-- implicitly, or (polymorphic, "any") any of the types above
	FOREACH fn IN ARRAY names LOOP
		FOR p IN SELECT pr.oid, pr.proargtypes::regtype[] AS argt, pr.prokind, pr.pronargs
				 FROM pg_proc pr WHERE pr.proname = fn AND pr.pronamespace = 'pg_catalog'::regnamespace
				   AND pr.pronargs BETWEEN 1 AND 3 AND pr.prokind IN ('f', 'a') LOOP
			-- the candidates of each position, then their product
			FOR args IN
				WITH RECURSIVE pos(i, t) AS (
					SELECT a.i, c.t FROM unnest(p.argt) WITH ORDINALITY a(t0, i)
					CROSS JOIN LATERAL unnest(types) c(t)
					WHERE c.t = a.t0
					   OR EXISTS (SELECT FROM pg_cast k WHERE k.castsource = c.t AND k.casttarget = a.t0
								  AND k.castcontext = 'i')
					   OR a.t0::text IN ('anyelement', 'anyarray', 'anynonarray', 'anycompatible',
										 'anycompatiblearray', 'anycompatiblenonarray', '"any"')
					   OR (a.t0 = 'text'::regtype AND c.t IN ('varchar'::regtype, 'name'::regtype, 'bpchar'::regtype))),
				prod(depth, arr) AS (
					SELECT 1, ARRAY[pos.t] FROM pos WHERE pos.i = 1
					UNION ALL
					SELECT prod.depth + 1, prod.arr || pos.t FROM prod JOIN pos ON pos.i = prod.depth + 1)
				SELECT prod.arr FROM prod WHERE prod.depth = p.pronargs
			LOOP
				CONTINUE WHEN EXISTS (SELECT FROM pg_proc q WHERE q.proname = fn
									  AND q.pronamespace = 'pg_catalog'::regnamespace
									  AND q.proargtypes::regtype[] = args);
				sig := (SELECT string_agg(a::text, ', ') FROM unnest(args) a);
				CONTINUE WHEN to_regprocedure(format('%I.%I(%s)', nsp, fn, sig)) IS NOT NULL;
				call := (SELECT string_agg(format('NULL::%s', a), ', ') FROM unnest(args) a);
				BEGIN
					EXECUTE format('SELECT pg_typeof(pg_catalog.%I(%s))::text', fn, call) INTO rt;
				EXCEPTION WHEN OTHERS THEN
					CONTINUE;
				END;
				CONTINUE WHEN rt IN ('record', 'unknown');
				n := n + 1;
				IF p.prokind = 'f' THEN
					call := (SELECT string_agg(format('$%s', i), ', ') FROM generate_series(1, p.pronargs) i);
					BEGIN
						EXECUTE format($f$CREATE FUNCTION %I.%I(%s) RETURNS %s%s LANGUAGE sql IMMUTABLE
							AS $b$ SELECT pg_catalog.nextval(%L); SELECT pg_catalog.%I(%s) $b$$f$,
							nsp, fn, sig, CASE WHEN (SELECT proretset FROM pg_proc WHERE oid = p.oid) THEN 'SETOF ' ELSE '' END,
							rt, format('%I.planted_calls', nsp), fn, call);
					EXCEPTION WHEN OTHERS THEN
						n := n - 1;
					END;
				ELSE
					-- an aggregate whose every row counts a call (its result
					-- is not pg_catalog's: the count is what the test reads)
					BEGIN
						EXECUTE format($f$CREATE FUNCTION %I.planted_agg_%s(bigint, %s) RETURNS bigint LANGUAGE sql IMMUTABLE
							AS $b$ SELECT pg_catalog.nextval(%L) $b$$f$, nsp, n, sig, format('%I.planted_calls', nsp));
						EXECUTE format($f$CREATE FUNCTION %I.planted_final_%s(bigint) RETURNS %s LANGUAGE sql IMMUTABLE
							AS $b$ SELECT NULL::%s $b$$f$, nsp, n, rt, rt);
						EXECUTE format('CREATE AGGREGATE %I.%I(%s) (SFUNC = %I.planted_agg_%s, STYPE = bigint,'
									   ' INITCOND = 0, FINALFUNC = %I.planted_final_%s)',
							nsp, fn, sig, nsp, n, nsp, n);
					EXCEPTION WHEN OTHERS THEN
						n := n - 1;
					END;
				END IF;
			END LOOP;
		END LOOP;
	END LOOP;
	RAISE NOTICE 'planted % shadows in schema %', n, nsp;
END
$plant$;
