-- Run by a superuser in a database holding paynotify (no shadows there),
-- after each version it passes through: records the signatures of the
-- extension's functions in planted_sigs, and their shadows in
-- planted_shadows (both created if missing).
--   psql -f own.sql                (record)
--   psql -v emit=1 -At -f own.sql  (record, then print the shadows' CREATE statements)
-- (with planted.warn = 1 set, each shadow warns and returns nothing instead
-- of raising: to list every call that meets one in a run)
--
-- The shadows: for each function of the extension with arguments, and each
-- of its input arguments, a function of the same name, argument names,
-- results and other argument types in the extension's schema, with that
-- one argument of another common type.  A call of the extension's own
-- function whose argument there is of that type (or an unknown literal or
-- NULL, for text) and not of the exact type declared would resolve to the
-- shadow, the better match, which counts its call in planted_calls (no
-- rollback undoes it) and raises.  No shadow repeats a signature of any
-- version (the extension's CREATE FUNCTION would fail on it).
SET search_path = pg_catalog;
CREATE TABLE IF NOT EXISTS public.planted_sigs (
	name	text NOT NULL,
	args	text NOT NULL,		-- the input types, format_type, comma-separated
	PRIMARY KEY (name, args)
);
CREATE TABLE IF NOT EXISTS public.planted_shadows (
	name	text NOT NULL,
	args	text NOT NULL,		-- the shadow's input types, as above
	ddl		text NOT NULL,		-- its CREATE FUNCTION
	PRIMARY KEY (name, args)
);
DO $own$
DECLARE
	types regtype[] := ARRAY['text', 'varchar', 'name', 'bpchar', 'smallint', 'integer', 'bigint',
		'numeric', 'boolean', 'bytea', 'json', 'jsonb', 'timestamptz', 'timestamp', 'interval',
		'date', 'oid', 'regclass', 'regrole', 'regtype', 'regprocedure', 'text[]', 'name[]',
		'integer[]', 'bigint[]']::regtype[];
	p record;
	k integer;
	t regtype;
	intypes oid[];
	params text[];
BEGIN
	FOR p IN
		SELECT f.proname::text AS name, f.proallargtypes,
			   -- (an oidvector counts from 0: as an array from 1)
			   (SELECT array_agg(x ORDER BY o) FROM unnest(f.proargtypes::oid[]) WITH ORDINALITY u(x, o)) AS intypes,
			   f.proargmodes, f.proargnames, pg_get_function_result(f.oid) AS result, n.nspname
		FROM pg_proc f
		JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype = 'e'
		JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'paynotify'
		JOIN pg_namespace n ON n.oid = f.pronamespace
		WHERE f.prokind = 'f' AND f.pronargs > 0 AND f.provariadic = 0
		  AND f.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
	LOOP
		INSERT INTO public.planted_sigs
			VALUES (p.name, (SELECT string_agg(format_type(x, NULL), ',' ORDER BY o)
							 FROM unnest(p.intypes) WITH ORDINALITY u(x, o)))
			ON CONFLICT DO NOTHING;
		FOR i IN 1 .. cardinality(p.intypes) LOOP
			FOREACH t IN ARRAY types LOOP
				CONTINUE WHEN t::oid = p.intypes[i];
				intypes := p.intypes;
				intypes[i] := t::oid;
				-- the argument list: the inputs (one retyped), OUT and INOUT
				params := '{}';
				k := 0;
				IF p.proallargtypes IS NULL THEN
					FOR j IN 1 .. cardinality(intypes) LOOP
						params := params || concat_ws(' ', quote_ident(nullif(p.proargnames[j], '')),
													  format_type(intypes[j], NULL));
					END LOOP;
				ELSE
					FOR j IN 1 .. cardinality(p.proallargtypes) LOOP
						IF p.proargmodes[j] IN ('i', 'b') THEN
							k := k + 1;
							params := params || concat_ws(' ', CASE p.proargmodes[j] WHEN 'b' THEN 'INOUT' END,
														  quote_ident(nullif(p.proargnames[j], '')),
														  format_type(intypes[k], NULL));
						ELSIF p.proargmodes[j] = 'o' THEN
							params := params || concat_ws(' ', 'OUT', quote_ident(nullif(p.proargnames[j], '')),
														  format_type(p.proallargtypes[j], NULL));
						END IF;
					END LOOP;
				END IF;
				INSERT INTO public.planted_shadows VALUES (p.name,
					(SELECT string_agg(format_type(x, NULL), ',' ORDER BY o)
					 FROM unnest(intypes) WITH ORDINALITY u(x, o)),
					format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql AS $s$BEGIN '
						   'PERFORM pg_catalog.nextval(%L); RAISE %s %L; %s END$s$;',
						   p.nspname, p.name, array_to_string(params, ', '), p.result,
						   quote_ident(p.nspname) || '.planted_calls',
						   'EXCEPTION',
						   'planted shadow of ' || p.name || '(' || format_type(t, NULL) || ' at ' || i || ') ran',
						   CASE WHEN p.result ~ '^(SETOF|TABLE|void$)' OR 'o' = ANY (p.proargmodes) THEN 'RETURN;'
								ELSE 'RETURN NULL;' END))
					ON CONFLICT DO NOTHING;
			END LOOP;
		END LOOP;
	END LOOP;
END
$own$;
-- the shadows whose signature is none of the extension's in any version
-- recorded
\if :{?emit}
SELECT CASE WHEN current_setting('planted.warn', true) = '1'
			THEN replace(s.ddl, 'RAISE EXCEPTION', 'RAISE WARNING') ELSE s.ddl END
FROM public.planted_shadows s
WHERE NOT EXISTS (SELECT FROM public.planted_sigs r WHERE r.name = s.name AND r.args = s.args)
ORDER BY s.name, s.args;
\endif
