-- test/e2e/hostile.sh: the requests, and the checks of what paynotify made
-- of them.  Runs after test/fixture.sql (schemas pay and t).
--
-- h.cases      hand-written hostile requests, each with its documented outcome
-- h.run_case   delivers one and returns "PASS ..." or "FAIL ...: why"
-- h.mut        mutated vector requests (mutate.py), each marked allowed when
--              its signed bytes are still a genuine gateway's
-- h.run_mutations  delivers them, one transaction each, into h.mut_result

CREATE SCHEMA h;

CREATE TABLE h.cases (
	n				serial,
	name			text PRIMARY KEY,
	channel			text,
	headers			jsonb,
	body			bytea,
	now				bigint NOT NULL,
	max_body		text,				-- paynotify.max_body_size for it, NULL: default
	want_outcome	text NOT NULL,
	want_status		int NOT NULL,
	want_anomaly	text,				-- the anomaly kind it must record, if any
	note			text
);

-- What paynotify's tables and the application's hold, seen from outside:
-- for every table of schemas pay and public (the orders table included,
-- listed in h.fp_tables), the md5 of its rows in order, each row named by
-- its version (ctid, xmin).  Any write of a row, insert, update or delete,
-- even one that writes back what was there, makes a new row version, so
-- equal before and after = nothing written.  (Hashing the rows' text instead
-- costs 250 ms a call once the hostile cases have stored their 10 MiB
-- payloads: 25,000 mutations would take hours.)  h.fp() is generated once
-- from the catalog, so that it is one plain SQL statement.
CREATE TABLE h.fp_tables AS
	SELECT c.oid::regclass AS tab
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('r', 'p') AND n.nspname IN ('pay', 'public')
	ORDER BY 1::text;
DO $$
BEGIN
	EXECUTE (SELECT format('CREATE FUNCTION h.fp() RETURNS text[] LANGUAGE sql AS %L',
		'SELECT ARRAY[' || string_agg(format(
			'(SELECT md5(COALESCE(string_agg(x.ctid::text || x.xmin::text, '','' ORDER BY x.ctid), '''')) FROM %s x)',
			tab), ', ' ORDER BY tab::text) || ']')
		FROM h.fp_tables);
END $$;

-- The documented replies: every outcome with the statuses it may carry.
CREATE TABLE h.documented (outcome text, status int);
INSERT INTO h.documented VALUES
	('processed', 200), ('duplicate', 200), ('ignored', 200), ('parked', 200),
	('failed', 500), ('busy', 503),
	('rejected', 400), ('rejected', 401), ('rejected', 404),
	('malformed', 400), ('malformed', 413);

-- The reply's content type by gateway (no channel: text/plain).
CREATE FUNCTION h.content_type(chan text) RETURNS text LANGUAGE sql AS $$
	SELECT COALESCE((SELECT CASE gateway WHEN 'alipay' THEN 'text/plain'
									ELSE 'application/json' END
					 FROM pay.paynotify_channel WHERE name = chan), 'text/plain')
$$;

-- Deliver a request; never raises: an error comes back in err.
CREATE FUNCTION h.deliver(chan text, headers jsonb, body bytea, now bigint,
		max_body text, OUT status int, OUT content_type text, OUT reply text,
		OUT outcome text, OUT err text, OUT wrote boolean, OUT anomaly text)
	LANGUAGE plpgsql AS $$
DECLARE
	before text[] := h.fp();
	after text[];
	anomalies bigint := (SELECT count(*) FROM pay.paynotify_anomaly);
BEGIN
	PERFORM set_config('paynotify.now', now::text, true);
	IF max_body IS NOT NULL THEN
		PERFORM set_config('paynotify.max_body_size', max_body, true);
	END IF;
	BEGIN
		SELECT r.status, r.content_type, r.body, r.outcome
			INTO status, content_type, reply, outcome
			FROM pay.paynotify_handle(chan, headers, body) r;
	EXCEPTION WHEN OTHERS THEN
		err := SQLSTATE || ': ' || SQLERRM;
	END;
	PERFORM set_config('paynotify.now', '0', true);
	PERFORM set_config('paynotify.max_body_size', '1MB', true);
	after := h.fp();
	wrote := after IS DISTINCT FROM before;
	IF (SELECT count(*) FROM pay.paynotify_anomaly) > anomalies THEN
		SELECT kind INTO anomaly FROM pay.paynotify_anomaly ORDER BY id DESC LIMIT 1;
	END IF;
END
$$;

-- Deliver case cname and check it: its outcome and status, a documented
-- reply of the gateway's content type, nothing written unless authentic,
-- the anomaly it must record (and none when it must not).
CREATE FUNCTION h.run_case(cname text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c h.cases;
	d record;
	why text[] := '{}';
BEGIN
	SELECT * INTO STRICT c FROM h.cases WHERE name = cname;
	SELECT * INTO d FROM h.deliver(c.channel, c.headers, c.body, c.now, c.max_body);
	IF d.err IS NOT NULL THEN
		why := why || ('raised ' || d.err);
	ELSE
		IF d.outcome IS DISTINCT FROM c.want_outcome OR d.status IS DISTINCT FROM c.want_status THEN
			why := why || format('got %s %s, want %s %s', d.outcome, d.status,
								 c.want_outcome, c.want_status);
		END IF;
		IF NOT EXISTS (SELECT FROM h.documented WHERE outcome = d.outcome AND status = d.status) THEN
			why := why || format('undocumented reply %s %s', d.outcome, d.status);
		END IF;
		IF d.content_type IS DISTINCT FROM h.content_type(c.channel) THEN
			why := why || format('content type %s', d.content_type);
		END IF;
		IF d.outcome IN ('rejected', 'malformed') AND d.wrote THEN
			why := why || 'wrote rows although not authentic'::text;
		END IF;
		IF d.anomaly IS DISTINCT FROM c.want_anomaly THEN
			why := why || format('anomaly %s, want %s', COALESCE(d.anomaly, 'none'),
								 COALESCE(c.want_anomaly, 'none'));
		END IF;
	END IF;
	IF cardinality(why) = 0 THEN
		RETURN format('PASS %s: %s %s%s', cname, d.outcome, d.status,
					  COALESCE(' (' || d.anomaly || ')', ''));
	END IF;
	RETURN format('FAIL %s: %s', cname, array_to_string(why, '; '));
END
$$;

-- ---------------------------------------------------------------------------
-- The mutation fuzzer
-- ---------------------------------------------------------------------------

CREATE TABLE h.mut (
	id			int PRIMARY KEY,
	base		text NOT NULL,		-- the vector it was made from
	channel		text NOT NULL,
	headers		jsonb,
	body		bytea,
	now			bigint NOT NULL,
	allowed		boolean NOT NULL,	-- its signed bytes are a genuine gateway's
	ops			text NOT NULL		-- the mutations applied
);
CREATE TABLE h.mut_result (
	id			int PRIMARY KEY,
	status		int,
	outcome		text,
	err			text,
	wrote		boolean,
	anomaly		text
);

-- Every vector once on its own channel, as the regression test does, so that
-- mutated copies of the valid ones meet a notification already recorded.
-- (originals before the re-deliveries that name them)
CREATE TABLE h.baseline AS
	SELECT name, (t.replay(name, 'm_')).* FROM t.manifest ORDER BY c ? 'duplicate_of', name;

-- Deliver the mutated requests after last_id, one transaction each, until
-- none is left or the deadline passes.
CREATE PROCEDURE h.run_mutations() LANGUAGE plpgsql AS $$
DECLARE
	m record;
	d record;
BEGIN
	FOR m IN SELECT * FROM h.mut
			 WHERE id > COALESCE((SELECT max(id) FROM h.mut_result), 0) ORDER BY id LOOP
		SELECT * INTO d FROM h.deliver(m.channel, m.headers, m.body, m.now, NULL);
		INSERT INTO h.mut_result VALUES (m.id, d.status, d.outcome, d.err, d.wrote, d.anomaly);
		COMMIT;
	END LOOP;
END
$$;

-- Every way a mutated delivery can be wrong, one row each.
CREATE VIEW h.mut_failures AS
	SELECT m.id, m.base, m.ops, r.outcome, r.status, r.err,
		CASE
			WHEN r.err IS NOT NULL THEN 'raised an error'
			WHEN NOT EXISTS (SELECT FROM h.documented x
							 WHERE x.outcome = r.outcome AND x.status = r.status)
				THEN 'undocumented reply'
			WHEN r.outcome NOT IN ('rejected', 'malformed') AND NOT m.allowed
				THEN 'FORGED REQUEST AUTHENTICATED'
			WHEN r.outcome IN ('rejected', 'malformed') AND r.wrote
				THEN 'wrote rows although not authentic'
		END AS problem
	FROM h.mut m JOIN h.mut_result r USING (id)
	WHERE r.err IS NOT NULL
	   OR NOT EXISTS (SELECT FROM h.documented x WHERE x.outcome = r.outcome AND x.status = r.status)
	   OR (r.outcome NOT IN ('rejected', 'malformed') AND NOT m.allowed)
	   OR (r.outcome IN ('rejected', 'malformed') AND r.wrote);
