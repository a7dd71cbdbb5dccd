/* paynotify--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.4'" to load this file. \quit

-- Version 1.4: reconciliation.  A notification that never arrives leaves a
-- paid order pending; the application says which orders it sent to a
-- gateway (paynotify_expect), and what no notification settled in time is
-- looked up at the gateway.

-- ===== A capacity grows: its holders get the new privilege too =====
--
-- An update that adds an object to a capacity (paynotify_grant) gives it
-- to the roles that hold the capacity already, found before the capacity
-- grows (paynotify_capacity_held compares a role's privileges with the
-- capacity's).  Runs as its caller: only who may grant on the extension's
-- objects can.
CREATE FUNCTION @extschema@.paynotify_capacity_extend(p_capacity text, p_fn regprocedure, p_rel regclass)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	holders name[];
	holder name;
	placement text;
	manual text;
	nested text;
	visible text;
BEGIN
	IF (p_fn IS NULL) OPERATOR(pg_catalog.=) (p_rel IS NULL) THEN
		RAISE EXCEPTION 'one of a function and a relation' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- On Citus (after paynotify_distribute) paynotify_capacity is a
	-- reference table, and ALTER EXTENSION paynotify UPDATE runs this script
	-- on the coordinator, then on each worker: a row naming an object the
	-- update creates cannot be written to every node from the coordinator
	-- (the workers do not have the object yet; a regclass or regprocedure is
	-- each node's own oid).  Each node writes its own placement instead, when
	-- it runs the script: the same rows everywhere once the update is done.
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_shard') IS NOT NULL THEN
		EXECUTE 'SELECT pg_catalog.format(''%I.%I'', n.nspname, c.relname OPERATOR(pg_catalog.||) ''_'' OPERATOR(pg_catalog.||) s.shardid)'
				' FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.logicalrelid'
				' JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace'
				' WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1'
			INTO placement USING '@extschema@.paynotify_capacity'::regclass;
	END IF;
	-- (on a worker, this script runs in the coordinator's command, where Citus
	-- takes no query of a reference table unless told: the node's own
	-- placements, read here, are the same rows as everywhere)
	IF placement IS NOT NULL THEN
		visible := pg_catalog.current_setting('citus.override_table_visibility', true);
		nested := pg_catalog.current_setting('citus.allow_nested_distributed_execution', true);
		PERFORM pg_catalog.set_config('citus.allow_nested_distributed_execution', 'on', true);
		-- (Citus hides its shards from queries of pg_class unless told)
		PERFORM pg_catalog.set_config('citus.override_table_visibility', 'off', true);
	END IF;
	-- The holders: on Citus every role the capacity was given to
	-- (paynotify_role), as paynotify_capacity_held cannot tell on a worker:
	-- Citus copied the coordinator's rows of paynotify_capacity to the
	-- workers' placements with the coordinator's oids of its functions
	holders := ARRAY(SELECT o.role FROM @extschema@.paynotify_role o
					 WHERE o.capacity OPERATOR(pg_catalog.=) p_capacity
					   AND (placement IS NOT NULL OR @extschema@.paynotify_capacity_held(o.role, o.capacity))
					   AND EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) o.role));
	IF placement IS NULL THEN
		INSERT INTO @extschema@.paynotify_capacity (capacity, privilege, fn, rel)
			VALUES (p_capacity, CASE WHEN p_fn IS NULL THEN 'SELECT' ELSE 'EXECUTE' END, p_fn, p_rel);
	ELSIF EXISTS (SELECT FROM pg_catalog.pg_class c
				  WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(placement)
					AND c.relkind OPERATOR(pg_catalog.=) 'r'
					AND c.relowner OPERATOR(pg_catalog.=) (SELECT l.relowner FROM pg_catalog.pg_class l
						WHERE l.oid OPERATOR(pg_catalog.=) '@extschema@.paynotify_capacity'::pg_catalog.regclass)) THEN
		-- (a node without a placement, a coordinator not in the metadata, has
		-- nothing to write; nor is a table of that name of another owner
		-- written, which a role that may create in the extension's schema
		-- could have made there, its triggers run by this superuser's update)
		manual := pg_catalog.current_setting('citus.enable_manual_changes_to_shards', true);
		PERFORM pg_catalog.set_config('citus.enable_manual_changes_to_shards', 'on', true);
		EXECUTE pg_catalog.format('INSERT INTO %s (capacity, privilege, fn, rel) VALUES ($1, $2, $3, $4)', placement)
			USING p_capacity, CASE WHEN p_fn IS NULL THEN 'SELECT' ELSE 'EXECUTE' END, p_fn, p_rel;
		PERFORM pg_catalog.set_config('citus.enable_manual_changes_to_shards', coalesce(manual, 'off'), true);
	END IF;
	IF placement IS NOT NULL THEN
		PERFORM pg_catalog.set_config('citus.override_table_visibility', coalesce(visible, 'on'), true);
		PERFORM pg_catalog.set_config('citus.allow_nested_distributed_execution', coalesce(nested, 'off'), true);
	END IF;
	FOREACH holder IN ARRAY holders LOOP
		IF p_fn IS NULL THEN
			EXECUTE pg_catalog.format('GRANT SELECT ON %s TO %I', p_rel, holder);
		ELSE
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', p_fn, holder);
		END IF;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_capacity_extend(text, regprocedure, regclass) FROM PUBLIC;

-- ===== Expectations: the orders sent to a gateway =====
--
-- The application calls paynotify_expect when it sends an order to a
-- gateway (a prepay order, a checkout session).  The expectation is
-- settled when a payment of the order is recorded (on any channel: the
-- order is paid) or the gateway's close of it on this channel; until then,
-- from next_query_at on, the gateway is asked (docs/RECONCILIATION.md).
-- One row per order and channel; on Citus, distributed by order_no with
-- the order's other records.
CREATE TABLE @extschema@.paynotify_expectation (
	order_no	text NOT NULL CHECK (order_no OPERATOR(pg_catalog.<>) ''),
	channel		text NOT NULL,
	expected_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	expires_at	timestamptz,
	next_query_at timestamptz,
	queries		integer NOT NULL DEFAULT 0,
	last_query_at timestamptz,
	last_result	text,
	settled_at	timestamptz,
	settled_by	text CHECK (settled_by OPERATOR(pg_catalog.=) ANY ('{payment,close}'::text[])),
	settled_notify_id text,
	-- an expired order the gateway says is not paid yet (WeChat Pay NOTPAY,
	-- Alipay WAIT_BUYER_PAY): its next request is the gateway's close call
	-- (close_requested_at), counted and stamped when it is built
	-- (close_attempts, close_sent_at; never cleared: a trade closed at the
	-- gateway cannot be paid, so such an expectation is not extended); an
	-- answer after it is read as the close's unless it is a query's
	-- (paynotify_query_apply)
	close_requested_at timestamptz,
	close_sent_at	timestamptz,
	close_attempts	integer NOT NULL DEFAULT 0,
	CHECK ((settled_at IS NULL) OPERATOR(pg_catalog.=) (settled_by IS NULL)),
	PRIMARY KEY (order_no, channel)
);
-- what is due: unsettled, oldest first
CREATE INDEX paynotify_expectation_due ON @extschema@.paynotify_expectation (next_query_at)
	WHERE settled_at IS NULL;
COMMENT ON TABLE @extschema@.paynotify_expectation IS
	'paynotify: orders the application sent to a gateway (paynotify_expect), until their payment or close is recorded';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_expectation', '');
REVOKE ALL ON @extschema@.paynotify_expectation FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, NULL::pg_catalog.regprocedure, '@extschema@.paynotify_expectation'::pg_catalog.regclass);

-- The application: this order was sent to this channel's gateway, and may
-- be paid until expires_at (NULL: no end known; else a finite time to
-- come).  Called again for an expectation not settled yet, it sets an
-- expires_at it had none of, or moves it later: never earlier (and a close
-- of the order requested at the gateway is withdrawn: it may be paid until
-- then).  An order whose payment is recorded already is settled at once
-- (its notification came first).  The order number is one the gateways
-- can be asked about: letters, digits and _-*|, at most 128.
-- Operators only (admin), and the roles the DBA grants EXECUTE on it: not
-- the handler capacity, which serves the internet.
CREATE FUNCTION @extschema@.paynotify_expect(channel text, order_no text, expires_at timestamptz DEFAULT NULL)
	RETURNS @extschema@.paynotify_expectation
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_channel text := $1;
	p_order_no text := $2;
	p_expires timestamptz := $3;
	after_s integer;
	paid_by text;
	r @extschema@.paynotify_expectation;
BEGIN
	IF p_channel IS NULL OR p_order_no IS NULL THEN
		RAISE EXCEPTION 'channel and order_no must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF p_order_no OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION 'order_no must not be empty' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT p_order_no OPERATOR(pg_catalog.~) '^[A-Za-z0-9_*|-]{1,128}$' THEN
		RAISE EXCEPTION 'order_no may hold only letters, digits and _-*|, at most 128'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_expires IS NOT NULL AND (NOT pg_catalog.isfinite(p_expires)
								   OR p_expires OPERATOR(pg_catalog.<=) pg_catalog.now()) THEN
		RAISE EXCEPTION 'expires_at must be a time to come'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT COALESCE((c.settings OPERATOR(pg_catalog.->>) 'query_after_s')::integer, 300) INTO after_s
	FROM @extschema@.paynotify_channel c WHERE c.name OPERATOR(pg_catalog.=) p_channel;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no channel "%"', p_channel USING ERRCODE = 'undefined_object';
	END IF;
	SELECT p.notify_id INTO paid_by FROM @extschema@.payment_record p
	WHERE p.order_no OPERATOR(pg_catalog.=) p_order_no
	ORDER BY p.created_at LIMIT 1;
	INSERT INTO @extschema@.paynotify_expectation AS e
			(order_no, channel, expires_at, next_query_at, settled_at, settled_by, settled_notify_id)
		VALUES (p_order_no, p_channel, p_expires,
				pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => after_s),
				CASE WHEN paid_by IS NOT NULL THEN pg_catalog.now() END,
				CASE WHEN paid_by IS NOT NULL THEN 'payment' END, paid_by)
	ON CONFLICT ON CONSTRAINT paynotify_expectation_pkey DO UPDATE
		SET expires_at = EXCLUDED.expires_at, close_requested_at = NULL
		WHERE e.settled_at IS NULL AND e.close_sent_at IS NULL
		  AND (e.expires_at IS NULL OR EXCLUDED.expires_at OPERATOR(pg_catalog.>) e.expires_at)
	RETURNING * INTO r;
	IF r IS NULL THEN
		SELECT * INTO r FROM @extschema@.paynotify_expectation e
		WHERE e.order_no OPERATOR(pg_catalog.=) p_order_no AND e.channel OPERATOR(pg_catalog.=) p_channel;
		-- a trade the gateway was asked to close cannot be paid: no later end
		IF (r.settled_at IS NULL OR r.settled_by OPERATOR(pg_catalog.=) 'close')
		   AND r.close_sent_at IS NOT NULL AND p_expires IS NOT NULL
		   AND (r.expires_at IS NULL OR p_expires OPERATOR(pg_catalog.>) r.expires_at) THEN
			RAISE EXCEPTION 'order "%" was asked to be closed at the gateway of channel "%"', p_order_no, p_channel
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  DETAIL = 'A trade closed at the gateway cannot be paid; its expires_at is not moved.',
					  HINT = 'Send the payment under a new order number and expect that one.';
		END IF;
	END IF;
	RETURN r;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_expect(text, text, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_expect(text, text, timestamptz) IS
	'the application sent this order to this channel''s gateway: look it up there if no payment or close of it is recorded in time';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_expect(text, text, timestamptz)'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);

-- ===== Queries: asking the gateway =====
--
-- What no notification settled in time is looked up at the gateway
-- (docs/RECONCILIATION.md, "Asking the gateway"): a daemon claims the due
-- expectations (paynotify_query_due), asks the database for each one's
-- signed request (paynotify_query_request), sends it and hands the raw
-- answer back (paynotify_query_apply), which is verified here and applied
-- by the pipeline as a notification is.  The daemon holds no key.

-- Where a notification's row came from: the gateway's notification, or a
-- query's answer (notify_id query:<trade or order>:<state>).
--
-- The changes of the tables that 1.3 had are made by EXECUTE and only where
-- not made yet.  On Citus (paynotify_distribute) the tables are distributed:
-- Citus sends a DDL statement on a distributed table to its shards and the
-- workers as its query text, which in an extension script is the whole
-- script (refused: "cannot insert multiple commands into a prepared
-- statement"), where EXECUTE makes it the statement's own; and ALTER
-- EXTENSION paynotify UPDATE runs this script again on each worker after
-- the coordinator, whose statements may have changed the worker's copy of
-- the table already.  (The check added on its own, by the name PostgreSQL
-- gives it: Citus takes no ADD COLUMN with an unnamed constraint.)
DO $$
BEGIN
	EXECUTE 'ALTER TABLE @extschema@.payment_notify_log
		ADD COLUMN IF NOT EXISTS source text NOT NULL DEFAULT ''notification''';
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint
				   WHERE conrelid OPERATOR(pg_catalog.=) '@extschema@.payment_notify_log'::regclass
					 AND conname OPERATOR(pg_catalog.=) 'payment_notify_log_source_check') THEN
		EXECUTE 'ALTER TABLE @extschema@.payment_notify_log
			ADD CONSTRAINT payment_notify_log_source_check
			CHECK (source OPERATOR(pg_catalog.=) ANY (''{notification,query}''::text[]))';
	END IF;
END
$$;
COMMENT ON COLUMN @extschema@.payment_notify_log.source IS
	'notification: delivered by the gateway; query: the gateway''s answer to paynotify_query_request';

-- The secrets a query needs come from files too, as apiv3_key does: the
-- WeChat Pay merchant's API private key, the Alipay application's private
-- key, the Stripe API key.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_settings_from_files(settings jsonb)
	RETURNS jsonb
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	k text;
	v jsonb;
	result jsonb := settings;
BEGIN
	IF settings IS NULL OR pg_catalog.jsonb_typeof(settings) OPERATOR(pg_catalog.<>) 'object' THEN
		RETURN settings;
	END IF;
	FOR k, v IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(settings) e LOOP
		IF pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'object' THEN
			IF NOT (v OPERATOR(pg_catalog.?) 'file')
					OR pg_catalog.jsonb_typeof(v OPERATOR(pg_catalog.->) 'file') OPERATOR(pg_catalog.<>) 'string'
					OR (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(v)) OPERATOR(pg_catalog.<>) 1 THEN
				RAISE EXCEPTION 'setting "%" must be a value or {"file": "<name>"}', k
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
			-- only a secret may come from a file: other settings are shown
			-- in messages (the mchid or app_id two channels share), so a
			-- file read into one would show the file to whoever called
			IF NOT k OPERATOR(pg_catalog.=) ANY ('{apiv3_key,merchant_private_key,app_private_key,secret_key}'::text[]) THEN
				RAISE EXCEPTION 'setting "%" cannot be read from a file', k
					USING ERRCODE = 'invalid_parameter_value',
						  HINT = 'Only the secret settings apiv3_key, merchant_private_key, app_private_key and secret_key are read from paynotify.secrets_directory; give the others as values.';
			END IF;
			result := result OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(k,
				@extschema@.paynotify_read_secret(v OPERATOR(pg_catalog.->>) 'file'));
		END IF;
	END LOOP;
	RETURN result;
END
$$;

-- The expectations due for a query, claimed: at most max_rows unsettled
-- ones whose next_query_at has come, oldest first, locked past any another
-- daemon holds (SKIP LOCKED), each counted (queries, last_query_at) and
-- put off (next_query_at) so that no other daemon asks about it meanwhile.
-- The rule (docs/RECONCILIATION.md):
--   * the n-th query of an expectation (n = queries before it) is followed
--     by the next one after the channel's query_after_s * 2^n seconds, at
--     most one hour;
--   * but never after expires_at when that is still ahead: one query is
--     always made at expires_at, the first that may close the order;
--   * an expectation is due until it is settled (a payment of the order
--     recorded, or its close on this channel: the gateway's definitive
--     answer through paynotify_query_apply, or its notification), and at
--     most until three days after expires_at (expected_at when it has
--     none): then it is left to a human (paynotify_expectation).
-- When an expectation claimed at "at" is due next: the channel's
-- query_after_s doubled with each query made, at most an hour, and never
-- past an expires_at still ahead (one query is made at expires_at).  A
-- function of its arguments alone (Citus calls no STABLE function with a
-- column in an UPDATE): the caller passes now().
CREATE FUNCTION @extschema@.paynotify_query_next(after_s integer, queries integer, expires_at timestamptz,
		at timestamptz)
	RETURNS timestamptz
	LANGUAGE sql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT CASE WHEN $3 OPERATOR(pg_catalog.>) $4 AND $3 OPERATOR(pg_catalog.<) x.n THEN $3 ELSE x.n END
FROM (SELECT $4 OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>
		LEAST($1::bigint OPERATOR(pg_catalog.*) (1::bigint OPERATOR(pg_catalog.<<) LEAST($2, 20)), 3600)::double precision) AS n) x
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_query_next(integer, integer, timestamptz, timestamptz) FROM PUBLIC;

CREATE FUNCTION @extschema@.paynotify_query_due(max_rows integer DEFAULT 10)
	RETURNS TABLE (channel text, order_no text)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	cand record;
BEGIN
	IF max_rows IS NULL OR max_rows OPERATOR(pg_catalog.<) 1 OR max_rows OPERATOR(pg_catalog.>) 1000 THEN
		RAISE EXCEPTION 'max_rows must be between 1 and 1000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_expectation'::pg_catalog.regclass) THEN
		RETURN QUERY
		WITH due AS (
			SELECT e.order_no, e.channel,
				COALESCE((c.settings OPERATOR(pg_catalog.->>) 'query_after_s')::integer, 300) AS after_s
			FROM @extschema@.paynotify_expectation e
			JOIN @extschema@.paynotify_channel c ON c.name OPERATOR(pg_catalog.=) e.channel
			WHERE e.settled_at IS NULL
			  AND e.next_query_at OPERATOR(pg_catalog.<=) pg_catalog.now()
			  AND pg_catalog.now() OPERATOR(pg_catalog.<=)
				  (COALESCE(e.expires_at, e.expected_at) OPERATOR(pg_catalog.+) '3 days'::interval)
			ORDER BY e.next_query_at, e.order_no, e.channel
			LIMIT max_rows
			FOR UPDATE OF e SKIP LOCKED)
		UPDATE @extschema@.paynotify_expectation e
			SET queries = e.queries OPERATOR(pg_catalog.+) 1,
				last_query_at = pg_catalog.now(),
				next_query_at = @extschema@.paynotify_query_next(d.after_s, e.queries, e.expires_at, pg_catalog.now())
		FROM due d
		WHERE e.order_no OPERATOR(pg_catalog.=) d.order_no AND e.channel OPERATOR(pg_catalog.=) d.channel
		RETURNING e.channel, e.order_no;
		RETURN;
	END IF;
	-- Citus refuses a multi-shard FOR UPDATE: the candidates are read across
	-- the shards without locks, then each is claimed on its own shard by
	-- order_no, skipped when another daemon holds it or claimed it since
	FOR cand IN
		SELECT e.order_no, e.channel,
			COALESCE((c.settings OPERATOR(pg_catalog.->>) 'query_after_s')::integer, 300) AS after_s
		FROM @extschema@.paynotify_expectation e
		JOIN @extschema@.paynotify_channel c ON c.name OPERATOR(pg_catalog.=) e.channel
		WHERE e.settled_at IS NULL
		  AND e.next_query_at OPERATOR(pg_catalog.<=) pg_catalog.now()
		  AND pg_catalog.now() OPERATOR(pg_catalog.<=)
			  (COALESCE(e.expires_at, e.expected_at) OPERATOR(pg_catalog.+) '3 days'::interval)
		ORDER BY e.next_query_at, e.order_no, e.channel
		LIMIT max_rows LOOP
		RETURN QUERY
		UPDATE @extschema@.paynotify_expectation e
			SET queries = e.queries OPERATOR(pg_catalog.+) 1,
				last_query_at = pg_catalog.now(),
				next_query_at = @extschema@.paynotify_query_next(cand.after_s, e.queries, e.expires_at, pg_catalog.now())
		WHERE e.order_no OPERATOR(pg_catalog.=) cand.order_no AND e.channel OPERATOR(pg_catalog.=) cand.channel
		  AND e.order_no IN (SELECT i.order_no FROM @extschema@.paynotify_expectation i
							 WHERE i.order_no OPERATOR(pg_catalog.=) cand.order_no
							   AND i.channel OPERATOR(pg_catalog.=) cand.channel
							   AND i.settled_at IS NULL
							   AND i.next_query_at OPERATOR(pg_catalog.<=) pg_catalog.now()
							 FOR UPDATE SKIP LOCKED)
		RETURNING e.channel, e.order_no;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_query_due(integer) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_query_due(integer) IS
	'claims the expectations due for a query (backoff from query_after_s doubling to 1 hour, one query at expires_at, none three days past it)';

-- The request that asks the channel's gateway about the order, built and
-- signed here: WeChat Pay's query by out_trade_no (RSA-SHA256 with the
-- merchant's API key), Alipay's alipay.trade.query (RSA2 with the app's
-- private key), Stripe's PaymentIntent search by the order's metadata
-- (Bearer the API key: the one secret that leaves the database as it is).
CREATE FUNCTION @extschema@.paynotify_query_request(channel text, order_no text,
		OUT method text, OUT url text, OUT headers jsonb, OUT body text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_query_request'
	LANGUAGE C VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off;
REVOKE ALL ON FUNCTION @extschema@.paynotify_query_request(text, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_query_request(text, text) IS
	'the signed HTTP request that asks the channel''s gateway about the order';

-- The gateway's answer, as the daemon received it: verified here with the
-- channel's keys (a wrong signature or another order's answer is refused
-- and changes nothing), then applied by the pipeline as the notification
-- of what it found: a payment once (a later notification of it is a
-- duplicate), a never-paid order closed once its expectation expired.
-- Every answer is written to the expectation's last_result.
CREATE FUNCTION @extschema@.paynotify_query_apply(channel text, order_no text, status integer,
		headers jsonb, body bytea,
		OUT status integer, OUT content_type text, OUT body text, OUT outcome text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_query_apply'
	LANGUAGE C VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off;
REVOKE ALL ON FUNCTION @extschema@.paynotify_query_apply(text, text, integer, jsonb, bytea) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_query_apply(text, text, integer, jsonb, bytea) IS
	'verifies the gateway''s answer to a query of the order and applies what it found, as a notification';

SELECT @extschema@.paynotify_capacity_extend(c, f::pg_catalog.regprocedure, NULL::pg_catalog.regclass)
FROM pg_catalog.unnest('{relay,admin}'::text[]) c,
	 pg_catalog.unnest(ARRAY['@extschema@.paynotify_query_due(integer)',
	 '@extschema@.paynotify_query_request(text, text)',
	 '@extschema@.paynotify_query_apply(text, text, integer, jsonb, bytea)']) f;

-- ===== Bills: the gateway's own ledger =====
--
-- Each gateway gives, for every day, a file of what it did for the
-- merchant account: WeChat Pay's trade bill, Alipay's zip of CSV files,
-- Stripe's balance transactions.  paynotify_import_bill reads one such
-- file into paynotify_bill (the day, and the totals the file states of
-- itself) and paynotify_bill_line (its lines); paynotify_reconciliation
-- lists where the gateway's ledger and ours differ (docs/RECONCILIATION.md,
-- "Daily bills").  On Citus paynotify_bill (no order_no) is a reference
-- table and paynotify_bill_line is distributed by order_no, with the
-- payments and refunds it is compared with.

-- One row per channel and day: the bill's own summary as the file states
-- it (NULL where the file states none: Stripe's exports have no summary).
CREATE TABLE @extschema@.paynotify_bill (
	channel		text NOT NULL,
	bill_date	date NOT NULL,
	format		text NOT NULL
				CHECK (format OPERATOR(pg_catalog.=) ANY ('{wxpay,wxpay_gzip,alipay,stripe_csv,stripe_json}'::text[])),
	imported_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	imported_by	name NOT NULL DEFAULT SESSION_USER,
	line_count	integer NOT NULL,
	row_count	bigint,				-- WeChat 总交易单数 (payments and refunds)
	payment_count bigint,			-- Alipay #交易合计
	refund_count bigint,			-- Alipay #退款合计
	paid_total	bigint,				-- WeChat 应结订单总金额, Alipay 商家实收 of trades
	refund_total bigint,			-- WeChat 退款总金额, Alipay 商家实收退款 (positive)
	fee_total	bigint,				-- WeChat 手续费总金额, Alipay 服务费 (positive: charged)
	summary		jsonb NOT NULL,
	PRIMARY KEY (channel, bill_date)
);
COMMENT ON TABLE @extschema@.paynotify_bill IS
	'paynotify: one imported gateway bill per channel and day, with the totals the bill states of itself';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_bill', '');
REVOKE ALL ON @extschema@.paynotify_bill FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, NULL::pg_catalog.regprocedure, '@extschema@.paynotify_bill'::pg_catalog.regclass);

-- The bill's lines, in the file's order.  Amounts in minor units; a
-- refund's amount is positive; fee positive when the gateway charged it.
-- order_no is the bill's (WeChat 商户订单号, Alipay 商户订单号); Stripe's
-- lines name no order: it is the order whose payment or refund is recorded
-- here for the line's trade or refund, '' when none is.
CREATE TABLE @extschema@.paynotify_bill_line (
	channel		text NOT NULL,
	bill_date	date NOT NULL,
	line_no		integer NOT NULL CHECK (line_no OPERATOR(pg_catalog.>) 0),
	kind		text NOT NULL
				CHECK (kind OPERATOR(pg_catalog.=) ANY ('{payment,refund,revoked,dispute,adjustment,fee,payout,other}'::text[])),
	trade_no	text,
	order_no	text NOT NULL DEFAULT '',
	refund_id	text,
	amount		bigint NOT NULL,
	settled		bigint,
	fee			bigint,
	currency	text,
	at			timestamptz NOT NULL,
	status		text,
	raw			jsonb NOT NULL,
	PRIMARY KEY (channel, bill_date, line_no, order_no)
);
CREATE INDEX paynotify_bill_line_trade ON @extschema@.paynotify_bill_line (channel, trade_no);
CREATE INDEX paynotify_bill_line_refund ON @extschema@.paynotify_bill_line (channel, refund_id)
	WHERE refund_id IS NOT NULL;
COMMENT ON TABLE @extschema@.paynotify_bill_line IS
	'paynotify: the lines of the imported gateway bills (amounts in minor units)';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_bill_line', '');
REVOKE ALL ON @extschema@.paynotify_bill_line FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, NULL::pg_catalog.regprocedure, '@extschema@.paynotify_bill_line'::pg_catalog.regclass);

-- The reader of the files (src/bill.c): the lines from 1, and line 0, kind
-- 'summary', whose raw is what the file states of itself.  Only
-- paynotify_import_bill calls it.
CREATE FUNCTION @extschema@.paynotify_bill_parse(gateway text, bill bytea,
		OUT line_no integer, OUT kind text, OUT trade_no text, OUT order_no text,
		OUT refund_id text, OUT amount bigint, OUT settled bigint, OUT fee bigint,
		OUT currency text, OUT at timestamptz, OUT status text, OUT raw jsonb)
	RETURNS SETOF record
	LANGUAGE C STABLE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'paynotify_bill_parse';
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_parse(text, bytea) FROM PUBLIC;

-- Import one day's bill of a channel: the day's lines are replaced whole,
-- in the caller's transaction (an error leaves the day as it was).  The
-- day is bill_date when given, else Alipay's own (#起始日期), else the
-- latest day of the lines (in the gateway's zone: Asia/Shanghai, Stripe
-- UTC).  Security definer: it writes tables its caller may only read;
-- it runs no code of the caller's and reads only the channel named.
CREATE FUNCTION @extschema@.paynotify_import_bill(channel text, bill bytea, bill_date date DEFAULT NULL)
	RETURNS @extschema@.paynotify_bill
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_channel text := $1;
	p_bill bytea := $2;
	p_day date := $3;
	gw text;
	tz text;
	day date;
	s jsonb;
	n integer;
	first_at timestamptz;
	last_at timestamptz;
	-- the clock as a value (Citus: no STABLE function in ON CONFLICT DO UPDATE)
	ts timestamptz := pg_catalog.now();
	own_day date;
	account text;
	seller text;
	r @extschema@.paynotify_bill;
BEGIN
	IF p_channel IS NULL OR p_bill IS NULL THEN
		RAISE EXCEPTION 'channel and bill must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- the lines name their orders by lookups no Citus plan takes yet
	IF @extschema@.paynotify_distributed('@extschema@.paynotify_bill_line'::pg_catalog.regclass) THEN
		RAISE EXCEPTION 'bills are not imported on a Citus cluster yet'
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Reconcile on one server; see docs/CITUS.md.';
	END IF;
	SELECT c.gateway INTO gw FROM @extschema@.paynotify_channel c
	WHERE c.name OPERATOR(pg_catalog.=) p_channel;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no channel "%"', p_channel USING ERRCODE = 'undefined_object';
	END IF;
	tz := CASE WHEN gw OPERATOR(pg_catalog.=) 'stripe' THEN 'UTC' ELSE 'Asia/Shanghai' END;
	day := p_day;
	-- a file that states its day (Alipay's #起始日期) is that day's bill
	-- only; one that states its account (Alipay's #账号: the seller's PID
	-- and four digits) is the bill of a channel whose seller_id it begins
	-- with, when the channel names one
	SELECT (l.raw OPERATOR(pg_catalog.->>) 'day')::date, l.raw OPERATOR(pg_catalog.->>) 'account'
		INTO own_day, account
	FROM @extschema@.paynotify_bill_parse(gw, p_bill) l WHERE l.line_no OPERATOR(pg_catalog.=) 0;
	IF day IS NOT NULL AND own_day IS NOT NULL AND own_day OPERATOR(pg_catalog.<>) day THEN
		RAISE EXCEPTION 'the bill is of %, not of %', own_day, day
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Import it as its own day''s bill, or fetch the bill of the day wanted.';
	END IF;
	SELECT c.settings OPERATOR(pg_catalog.->>) 'seller_id' INTO seller FROM @extschema@.paynotify_channel c
	WHERE c.name OPERATOR(pg_catalog.=) p_channel;
	IF gw OPERATOR(pg_catalog.=) 'alipay' AND seller IS NOT NULL
	   AND (account IS NULL OR pg_catalog.left(account, pg_catalog.length(seller)) OPERATOR(pg_catalog.<>) seller) THEN
		RAISE EXCEPTION 'the bill is of account %, not of channel "%"''s seller_id %',
			COALESCE(account, '(none stated)'), p_channel, seller
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF day IS NULL THEN
		SELECT COALESCE((pg_catalog.max(l.raw OPERATOR(pg_catalog.->>) 'day')
							FILTER (WHERE l.line_no OPERATOR(pg_catalog.=) 0))::date,
						pg_catalog.max(pg_catalog.timezone(tz, l.at)::date))
			INTO day
			FROM @extschema@.paynotify_bill_parse(gw, p_bill) l;
		IF day IS NULL THEN
			RAISE EXCEPTION 'the bill names no day' USING ERRCODE = 'invalid_parameter_value',
				HINT = 'Pass its day: paynotify_import_bill(channel, bill, bill_date).';
		END IF;
	END IF;

	-- one import of a channel's day at a time: the bill's row, locked
	INSERT INTO @extschema@.paynotify_bill AS b (channel, bill_date, format, line_count, summary)
		VALUES (p_channel, day, 'wxpay', 0, '{}')
	ON CONFLICT ON CONSTRAINT paynotify_bill_pkey DO UPDATE SET imported_at = ts;
	DELETE FROM @extschema@.paynotify_bill_line l
	WHERE l.channel OPERATOR(pg_catalog.=) p_channel AND l.bill_date OPERATOR(pg_catalog.=) day;

	-- Stripe's lines name a charge where a payment may be recorded by its
	-- payment intent: the intent whose notification named the charge
	WITH p AS (SELECT * FROM @extschema@.paynotify_bill_parse(gw, p_bill)),
	intent AS (
		SELECT DISTINCT ON (ch.charge) ch.charge, rec.trade_no, rec.order_no
		FROM @extschema@.payment_record rec
		JOIN @extschema@.payment_notify_log nl
			ON nl.channel OPERATOR(pg_catalog.=) rec.channel
			AND nl.notify_id OPERATOR(pg_catalog.=) rec.notify_id
			AND nl.order_no OPERATOR(pg_catalog.=) rec.order_no
		-- a notification's event, or the payment intent a query found
		CROSS JOIN LATERAL (SELECT COALESCE(nl.payload OPERATOR(pg_catalog.#>>) '{data,object,latest_charge}',
										   nl.payload OPERATOR(pg_catalog.#>>) '{data,object,charges,data,0,id}',
										   nl.payload OPERATOR(pg_catalog.#>>) '{latest_charge}',
										   nl.payload OPERATOR(pg_catalog.#>>) '{charges,data,0,id}') AS charge) ch
		WHERE gw OPERATOR(pg_catalog.=) 'stripe' AND rec.channel OPERATOR(pg_catalog.=) p_channel
		  AND ch.charge IS NOT NULL
		ORDER BY ch.charge, rec.created_at),
	ins AS (
		INSERT INTO @extschema@.paynotify_bill_line
			(channel, bill_date, line_no, kind, trade_no, order_no, refund_id, amount, settled, fee,
			 currency, at, status, raw)
		SELECT p_channel, day, p.line_no, p.kind, COALESCE(i.trade_no, p.trade_no),
			   COALESCE(p.order_no,
						i.order_no,
						(SELECT rec.order_no FROM @extschema@.payment_record rec
						 WHERE rec.channel OPERATOR(pg_catalog.=) p_channel
						   AND rec.trade_no OPERATOR(pg_catalog.=) p.trade_no),
						(SELECT f.order_no FROM @extschema@.paynotify_refund f
						 WHERE f.channel OPERATOR(pg_catalog.=) p_channel
						   AND f.refund_id OPERATOR(pg_catalog.=) p.refund_id
						 ORDER BY f.created_at LIMIT 1),
						''),
			   p.refund_id, p.amount, p.settled, p.fee, p.currency, p.at, p.status, p.raw
		FROM p LEFT JOIN intent i ON i.charge OPERATOR(pg_catalog.=) p.trade_no
		WHERE p.line_no OPERATOR(pg_catalog.>) 0
		RETURNING paynotify_bill_line.at)
	SELECT (SELECT p.raw FROM p WHERE p.line_no OPERATOR(pg_catalog.=) 0),
		   (SELECT pg_catalog.count(*) FROM ins),
		   (SELECT pg_catalog.min(ins.at) FROM ins),
		   (SELECT pg_catalog.max(ins.at) FROM ins)
		INTO s, n, first_at, last_at;

	-- a line after the day is no line of the day's bill; nor, for Stripe
	-- (whose file is any range of transactions), one before it, nor any
	-- payment before it (a payment is on the bill of the day it was made:
	-- another day's file is refused, whatever day it is handed in for).
	-- WeChat dates a refund when it was asked for, Alipay a refund's trade
	-- when it was created: those may be earlier.
	IF pg_catalog.timezone(tz, last_at)::date OPERATOR(pg_catalog.>) day
	   OR (gw OPERATOR(pg_catalog.=) 'stripe' AND pg_catalog.timezone(tz, first_at)::date OPERATOR(pg_catalog.<) day)
	   OR EXISTS (SELECT FROM @extschema@.paynotify_bill_line l
				  WHERE l.channel OPERATOR(pg_catalog.=) p_channel AND l.bill_date OPERATOR(pg_catalog.=) day
					AND l.kind OPERATOR(pg_catalog.=) 'payment'
					AND pg_catalog.timezone(tz, l.at)::date OPERATOR(pg_catalog.<) day) THEN
		RAISE EXCEPTION 'the bill has lines of other days than %', day
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = pg_catalog.format('Its lines are from %s to %s (%s).', pg_catalog.timezone(tz, first_at),
											 pg_catalog.timezone(tz, last_at), tz),
				  HINT = 'Import one day''s bill at a time.';
	END IF;

	UPDATE @extschema@.paynotify_bill b
	SET format = s OPERATOR(pg_catalog.->>) 'format',
		imported_at = pg_catalog.now(),
		imported_by = SESSION_USER,
		line_count = n,
		row_count = (s OPERATOR(pg_catalog.->>) 'row_count')::bigint,
		payment_count = (s OPERATOR(pg_catalog.->>) 'payment_count')::bigint,
		refund_count = (s OPERATOR(pg_catalog.->>) 'refund_count')::bigint,
		paid_total = (s OPERATOR(pg_catalog.->>) 'paid_total')::bigint,
		refund_total = (s OPERATOR(pg_catalog.->>) 'refund_total')::bigint,
		fee_total = (s OPERATOR(pg_catalog.->>) 'fee_total')::bigint,
		summary = s
	WHERE b.channel OPERATOR(pg_catalog.=) p_channel AND b.bill_date OPERATOR(pg_catalog.=) day
	RETURNING * INTO r;
	RETURN r;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_import_bill(text, bytea, date) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_import_bill(text, bytea, date) IS
	'read a gateway''s daily bill (WeChat Pay trade bill, Alipay zip, Stripe balance transactions) into paynotify_bill and paynotify_bill_line, replacing that day''s';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_import_bill(text, bytea, date)'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);

-- Every difference between the imported bills and our ledger
-- (payment_record, paynotify_refund), by channel and the gateway's day.
-- Payments match by (channel, trade_no), refunds by (channel, refund_id),
-- each with its order, whatever the day they were recorded here.  What the
-- bill has and we do not is reported on the bill's day.  What we have and
-- no imported bill of the channel has is reported on the gateway day of
-- the time we recorded it, when that day's bill is imported, and, within
-- an hour of the day's start, only once the previous day's bill is
-- imported too (a payment made just before midnight is recorded here just
-- after, and is in the previous day's bill).  A refund counts at the
-- gateway unless WeChat's bill says its 退款状态 is not SUCCESS.
CREATE VIEW @extschema@.paynotify_reconciliation AS
WITH ch AS (
	SELECT c.name AS channel, c.gateway,
		   CASE WHEN c.gateway OPERATOR(pg_catalog.=) 'stripe' THEN 'UTC' ELSE 'Asia/Shanghai' END AS tz,
		   '1 hour'::interval AS tolerance
	FROM @extschema@.paynotify_channel c
	WHERE EXISTS (SELECT FROM @extschema@.paynotify_bill b WHERE b.channel OPERATOR(pg_catalog.=) c.name)),
refunded AS (
	SELECT l.* FROM @extschema@.paynotify_bill_line l JOIN ch ON ch.channel OPERATOR(pg_catalog.=) l.channel
	WHERE l.kind OPERATOR(pg_catalog.=) 'refund'
	  AND (ch.gateway OPERATOR(pg_catalog.<>) 'wxpay' OR l.status OPERATOR(pg_catalog.=) 'SUCCESS')),
-- our records, on the gateway day they were recorded, if it is reported
ours AS (
	SELECT o.*, ch.tz,
		   pg_catalog.timezone(ch.tz, o.created_at)::date AS day,
		   ch.tolerance
	FROM (SELECT 'payment' AS what, p.channel, p.order_no, p.trade_no, NULL::text AS refund_id,
				 p.amount, p.currency, p.created_at
		  FROM @extschema@.payment_record p
		  UNION ALL
		  SELECT 'refund', f.channel, f.order_no, f.trade_no, f.refund_id, f.amount, NULL, f.created_at
		  FROM @extschema@.paynotify_refund f
		  WHERE f.status OPERATOR(pg_catalog.=) 'succeeded') o
	JOIN ch ON ch.channel OPERATOR(pg_catalog.=) o.channel),
ours_reported AS (
	SELECT o.* FROM ours o
	WHERE EXISTS (SELECT FROM @extschema@.paynotify_bill b
				  WHERE b.channel OPERATOR(pg_catalog.=) o.channel AND b.bill_date OPERATOR(pg_catalog.=) o.day)
	  AND (o.created_at OPERATOR(pg_catalog.>=)
			 (pg_catalog.timezone(o.tz, o.day::timestamp) OPERATOR(pg_catalog.+) o.tolerance)
		   OR EXISTS (SELECT FROM @extschema@.paynotify_bill b
					  WHERE b.channel OPERATOR(pg_catalog.=) o.channel
						AND b.bill_date OPERATOR(pg_catalog.=) (o.day OPERATOR(pg_catalog.-) 1))))
SELECT l.channel, l.bill_date AS day, 'gateway_only'::text AS discrepancy, l.order_no, l.trade_no,
	   NULL::text AS refund_id, l.amount AS bill_amount, NULL::bigint AS our_amount, l.currency,
	   l.line_no, l.at
FROM @extschema@.paynotify_bill_line l JOIN ch ON ch.channel OPERATOR(pg_catalog.=) l.channel
WHERE l.kind OPERATOR(pg_catalog.=) 'payment'
  AND NOT EXISTS (SELECT FROM @extschema@.payment_record p
				  WHERE p.channel OPERATOR(pg_catalog.=) l.channel AND p.trade_no OPERATOR(pg_catalog.=) l.trade_no
					AND p.order_no OPERATOR(pg_catalog.=) l.order_no)
UNION ALL
SELECT l.channel, l.bill_date, 'amount_differs', l.order_no, l.trade_no, NULL, l.amount, p.amount,
	   l.currency, l.line_no, l.at
FROM @extschema@.paynotify_bill_line l
JOIN ch ON ch.channel OPERATOR(pg_catalog.=) l.channel
JOIN @extschema@.payment_record p
	ON p.channel OPERATOR(pg_catalog.=) l.channel AND p.trade_no OPERATOR(pg_catalog.=) l.trade_no
	AND p.order_no OPERATOR(pg_catalog.=) l.order_no
WHERE l.kind OPERATOR(pg_catalog.=) 'payment'
  AND (p.amount OPERATOR(pg_catalog.<>) l.amount
	   OR pg_catalog.upper(p.currency) OPERATOR(pg_catalog.<>) pg_catalog.upper(l.currency))
UNION ALL
SELECT o.channel, o.day, 'ours_only', o.order_no, o.trade_no, NULL, NULL, o.amount, o.currency,
	   NULL, o.created_at
FROM ours_reported o
WHERE o.what OPERATOR(pg_catalog.=) 'payment'
  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_bill_line l
				  WHERE l.channel OPERATOR(pg_catalog.=) o.channel AND l.trade_no OPERATOR(pg_catalog.=) o.trade_no
					AND l.order_no OPERATOR(pg_catalog.=) o.order_no AND l.kind OPERATOR(pg_catalog.=) 'payment')
UNION ALL
SELECT l.channel, l.bill_date, 'refund_gateway_only', l.order_no, l.trade_no, l.refund_id, l.amount, NULL,
	   l.currency, l.line_no, l.at
FROM refunded l
WHERE NOT EXISTS (SELECT FROM @extschema@.paynotify_refund f
				  WHERE f.channel OPERATOR(pg_catalog.=) l.channel AND f.refund_id OPERATOR(pg_catalog.=) l.refund_id
					AND f.order_no OPERATOR(pg_catalog.=) l.order_no AND f.status OPERATOR(pg_catalog.=) 'succeeded')
UNION ALL
SELECT l.channel, l.bill_date, 'refund_amount_differs', l.order_no, l.trade_no, l.refund_id, l.amount, f.amount,
	   l.currency, l.line_no, l.at
FROM refunded l
JOIN @extschema@.paynotify_refund f
	ON f.channel OPERATOR(pg_catalog.=) l.channel AND f.refund_id OPERATOR(pg_catalog.=) l.refund_id
	AND f.order_no OPERATOR(pg_catalog.=) l.order_no AND f.status OPERATOR(pg_catalog.=) 'succeeded'
WHERE f.amount OPERATOR(pg_catalog.<>) l.amount
UNION ALL
SELECT o.channel, o.day, 'refund_ours_only', o.order_no, o.trade_no, o.refund_id, NULL, o.amount, NULL,
	   NULL, o.created_at
FROM ours_reported o
WHERE o.what OPERATOR(pg_catalog.=) 'refund'
  AND NOT EXISTS (SELECT FROM refunded l
				  WHERE l.channel OPERATOR(pg_catalog.=) o.channel AND l.refund_id OPERATOR(pg_catalog.=) o.refund_id
					AND l.order_no OPERATOR(pg_catalog.=) o.order_no);
COMMENT ON VIEW @extschema@.paynotify_reconciliation IS
	'paynotify: every difference between the imported gateway bills and the payments and refunds recorded here, by channel and gateway day';
REVOKE ALL ON @extschema@.paynotify_reconciliation FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, NULL::pg_catalog.regprocedure, '@extschema@.paynotify_reconciliation'::pg_catalog.regclass);

-- A day's bill in figures: what the bill states of itself (bill_summary),
-- what its lines add up to (bill_lines) and what our ledger has for the
-- same trades and refunds and the day's ours-only records (ours).
-- difference is ours - bill_lines where we have the figure, else
-- bill_summary - bill_lines: zero everywhere when all agree.
CREATE FUNCTION @extschema@.paynotify_reconcile_summary(channel text, day date)
	RETURNS TABLE (item text, bill_summary bigint, bill_lines bigint, ours bigint, difference bigint)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	p_channel text := $1;
	p_day date := $2;
	b @extschema@.paynotify_bill;
BEGIN
	SELECT * INTO b FROM @extschema@.paynotify_bill x
	WHERE x.channel OPERATOR(pg_catalog.=) p_channel AND x.bill_date OPERATOR(pg_catalog.=) p_day;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no bill of channel "%" for %', p_channel, p_day USING ERRCODE = 'no_data_found';
	END IF;
	RETURN QUERY
	WITH l AS (
		SELECT x.* FROM @extschema@.paynotify_bill_line x
		WHERE x.channel OPERATOR(pg_catalog.=) p_channel AND x.bill_date OPERATOR(pg_catalog.=) p_day),
	pay AS (
		SELECT l.amount, l.settled, p.amount AS our_amount FROM l
		LEFT JOIN @extschema@.payment_record p
			ON p.channel OPERATOR(pg_catalog.=) l.channel AND p.trade_no OPERATOR(pg_catalog.=) l.trade_no
			AND p.order_no OPERATOR(pg_catalog.=) l.order_no
		WHERE l.kind OPERATOR(pg_catalog.=) 'payment'),
	ref AS (
		SELECT l.amount, l.settled, f.amount AS our_amount FROM l
		LEFT JOIN @extschema@.paynotify_refund f
			ON f.channel OPERATOR(pg_catalog.=) l.channel AND f.refund_id OPERATOR(pg_catalog.=) l.refund_id
			AND f.order_no OPERATOR(pg_catalog.=) l.order_no AND f.status OPERATOR(pg_catalog.=) 'succeeded'
		WHERE l.kind OPERATOR(pg_catalog.=) 'refund'),
	extra AS (
		SELECT pg_catalog.count(*) FILTER (WHERE r.discrepancy OPERATOR(pg_catalog.=) 'ours_only') AS pays,
			   COALESCE(pg_catalog.sum(r.our_amount) FILTER (WHERE r.discrepancy OPERATOR(pg_catalog.=) 'ours_only'), 0) AS paid,
			   pg_catalog.count(*) FILTER (WHERE r.discrepancy OPERATOR(pg_catalog.=) 'refund_ours_only') AS refs,
			   COALESCE(pg_catalog.sum(r.our_amount) FILTER (WHERE r.discrepancy OPERATOR(pg_catalog.=) 'refund_ours_only'), 0) AS refunded
		FROM @extschema@.paynotify_reconciliation r
		WHERE r.channel OPERATOR(pg_catalog.=) p_channel AND r.day OPERATOR(pg_catalog.=) p_day),
	items (n, item, bill_summary, bill_lines, ours) AS (
		SELECT 1, 'rows', b.row_count, (SELECT pg_catalog.count(*) FROM l), NULL::bigint
		UNION ALL
		SELECT 2, 'payments', b.payment_count, (SELECT pg_catalog.count(*) FROM pay),
			   (SELECT pg_catalog.count(pay.our_amount) FROM pay) OPERATOR(pg_catalog.+) (SELECT extra.pays FROM extra)
		UNION ALL
		SELECT 3, 'refunds', b.refund_count, (SELECT pg_catalog.count(*) FROM ref),
			   (SELECT pg_catalog.count(ref.our_amount) FROM ref) OPERATOR(pg_catalog.+) (SELECT extra.refs FROM extra)
		UNION ALL
		SELECT 4, 'paid', b.paid_total, (SELECT COALESCE(pg_catalog.sum(pay.settled), 0)::bigint FROM pay), NULL
		UNION ALL
		SELECT 5, 'refunded', b.refund_total, (SELECT COALESCE(pg_catalog.sum(ref.settled), 0)::bigint FROM ref), NULL
		UNION ALL
		SELECT 6, 'fees', b.fee_total, (SELECT COALESCE(pg_catalog.sum(l.fee), 0)::bigint FROM l), NULL
		UNION ALL
		SELECT 7, 'payment_amount', NULL, (SELECT COALESCE(pg_catalog.sum(pay.amount), 0)::bigint FROM pay),
			   ((SELECT COALESCE(pg_catalog.sum(pay.our_amount), 0) FROM pay) OPERATOR(pg_catalog.+) (SELECT extra.paid FROM extra))::bigint
		UNION ALL
		SELECT 8, 'refund_amount', NULL, (SELECT COALESCE(pg_catalog.sum(ref.amount), 0)::bigint FROM ref),
			   ((SELECT COALESCE(pg_catalog.sum(ref.our_amount), 0) FROM ref) OPERATOR(pg_catalog.+) (SELECT extra.refunded FROM extra))::bigint)
	SELECT i.item, i.bill_summary, i.bill_lines, i.ours,
		   COALESCE(i.ours, i.bill_summary) OPERATOR(pg_catalog.-) i.bill_lines
	FROM items i ORDER BY i.n;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_reconcile_summary(text, date) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_reconcile_summary(text, date) IS
	'a day''s bill in figures: its own summary, the sum of its lines and our ledger';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_reconcile_summary(text, date)'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);

-- ===== Asking now: one order, by an operator =====
--
-- A payment the bill shows and the ledger lacks (gateway_only in
-- paynotify_reconciliation), or an order a customer calls about: the
-- operator has the daemon ask the gateway at its next round.  The order's
-- expectation on the channel is made due now (registered if there was
-- none); one settled by a close is opened again (the gateway may have been
-- paid after all); one settled by a payment is returned as it is (nothing
-- is left to ask).  The three days of queries count from now; an
-- expires_at already past is dropped, so that what the gateway answers now
-- pays the order or leaves it alone, and never closes it.
CREATE FUNCTION @extschema@.paynotify_query_order(channel text, order_no text)
	RETURNS @extschema@.paynotify_expectation
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_channel text := $1;
	p_order_no text := $2;
	r @extschema@.paynotify_expectation;
BEGIN
	SELECT * INTO r FROM @extschema@.paynotify_expect(p_channel, p_order_no);
	IF r.settled_by OPERATOR(pg_catalog.=) 'payment' THEN
		RETURN r;
	END IF;
	UPDATE @extschema@.paynotify_expectation e
		SET next_query_at = pg_catalog.now(), expected_at = pg_catalog.now(),
			expires_at = CASE WHEN e.expires_at OPERATOR(pg_catalog.>) pg_catalog.now() THEN e.expires_at END,
			settled_at = NULL, settled_by = NULL, settled_notify_id = NULL,
			close_requested_at = NULL
		WHERE e.order_no OPERATOR(pg_catalog.=) p_order_no AND e.channel OPERATOR(pg_catalog.=) p_channel
		RETURNING * INTO r;
	RETURN r;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_query_order(text, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_query_order(text, text) IS
	'has the daemon ask the channel''s gateway about the order at its next round (a payment only the bill shows, a customer''s call)';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_query_order(text, text)'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);

-- ===== Fetching the bills =====
--
-- The daily bills fetched as the queries are asked (docs/RECONCILIATION.md,
-- "Fetching the bills"): an operator, or pg_cron, plans a day's fetch of
-- every channel that can (paynotify_bill_plan); a daemon claims the due
-- fetches (paynotify_bill_due), asks for the signed request of each one's
-- step (paynotify_bill_request), sends it and hands the raw answer back
-- (paynotify_bill_apply), which is verified here and, once the file is
-- there, imported (paynotify_import_bill).  The daemon holds no key.  On
-- Citus paynotify_bill_fetch (no order_no) is a reference table, as
-- paynotify_bill is.

-- One row per channel and day.  step: list (ask where the bill is:
-- WeChat Pay, Alipay), download (fetch the file from download_url, whose
-- SHA-1 is hash_value for WeChat Pay), page (Stripe: the next page of the
-- day's balance transactions, after cursor; pages holds those read so
-- far), done (imported), failed (given up three days after planned_at).
CREATE TABLE @extschema@.paynotify_bill_fetch (
	channel		text NOT NULL,
	bill_date	date NOT NULL,
	step		text NOT NULL
				CHECK (step OPERATOR(pg_catalog.=) ANY ('{list,download,page,done,failed}'::text[])),
	download_url text,
	hash_value	text,
	cursor		text,
	pages		jsonb NOT NULL DEFAULT '[]',
	attempts	integer NOT NULL DEFAULT 0,
	planned_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	next_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_at		timestamptz,
	last_result	text,
	done_at		timestamptz,
	PRIMARY KEY (channel, bill_date)
);
-- what is due: unfinished, oldest first
CREATE INDEX paynotify_bill_fetch_due ON @extschema@.paynotify_bill_fetch (next_at)
	WHERE step OPERATOR(pg_catalog.<>) ALL ('{done,failed}'::text[]);
COMMENT ON TABLE @extschema@.paynotify_bill_fetch IS
	'paynotify: the fetches of the daily bills planned (paynotify_bill_plan), where each one is, and how it ended';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_bill_fetch', '');
REVOKE ALL ON @extschema@.paynotify_bill_fetch FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, NULL::pg_catalog.regprocedure, '@extschema@.paynotify_bill_fetch'::pg_catalog.regclass);

-- Whether a channel has what fetching its bills takes: WeChat Pay the
-- merchant's API key, its serial and the merchant (mchid, or sp_mchid);
-- Alipay the application's key; Stripe the API key.
CREATE FUNCTION @extschema@.paynotify_bill_fetchable(gateway text, settings jsonb)
	RETURNS boolean
	LANGUAGE sql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT CASE $1
	WHEN 'wxpay' THEN $2 OPERATOR(pg_catalog.?) 'merchant_private_key'
					  AND $2 OPERATOR(pg_catalog.?) 'merchant_serial'
					  AND ($2 OPERATOR(pg_catalog.?) 'mchid' OR $2 OPERATOR(pg_catalog.?) 'sp_mchid')
	WHEN 'alipay' THEN $2 OPERATOR(pg_catalog.?) 'app_private_key'
	WHEN 'stripe' THEN $2 OPERATOR(pg_catalog.?) 'secret_key'
	ELSE false END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_fetchable(text, jsonb) FROM PUBLIC;

-- A bill's day, checked: a finite date, not after today in the gateway's
-- zone (Asia/Shanghai; Stripe UTC).
CREATE FUNCTION @extschema@.paynotify_bill_day_check(gateway text, day date)
	RETURNS date
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF day IS NULL THEN
		RAISE EXCEPTION 'bill_date must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT pg_catalog.isfinite(day) OR day OPERATOR(pg_catalog.<) '2000-01-01'::date THEN
		RAISE EXCEPTION 'bill_date must be a finite date of this century' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF day OPERATOR(pg_catalog.>) pg_catalog.timezone(
			CASE WHEN gateway OPERATOR(pg_catalog.=) 'stripe' THEN 'UTC' ELSE 'Asia/Shanghai' END,
			pg_catalog.now())::date THEN
		RAISE EXCEPTION 'bill_date % is in the future', day USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN day;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_day_check(text, date) FROM PUBLIC;

-- Plan the fetch of a day's bill: every channel that can fetch one (but
-- those whose settings say "fetch_bills": false), or only the channel
-- named (an error when it cannot).  day NULL: yesterday in each gateway's
-- zone.  An unfinished fetch of the day is left as it is; a done or
-- failed one is planned again only when the day is given.  Returns how
-- many fetches were planned.
CREATE FUNCTION @extschema@.paynotify_bill_plan(day date DEFAULT NULL, channel text DEFAULT NULL)
	RETURNS integer
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_day date := $1;
	p_channel text := $2;
	c record;
	d date;
	planned integer := 0;
	-- the clock as a value: Citus takes no STABLE function in an
	-- ON CONFLICT ... DO UPDATE of a distributed or reference table
	ts timestamptz := pg_catalog.now();
BEGIN
	IF @extschema@.paynotify_distributed('@extschema@.paynotify_bill_line'::pg_catalog.regclass) THEN
		RAISE EXCEPTION 'bills are not imported on a Citus cluster yet'
			USING ERRCODE = 'feature_not_supported',
				  HINT = 'Reconcile on one server; see docs/CITUS.md.';
	END IF;
	IF p_channel IS NOT NULL THEN
		SELECT * INTO c FROM @extschema@.paynotify_channel x WHERE x.name OPERATOR(pg_catalog.=) p_channel;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'no channel "%"', p_channel USING ERRCODE = 'undefined_object';
		END IF;
		IF NOT @extschema@.paynotify_bill_fetchable(c.gateway, c.settings) THEN
			RAISE EXCEPTION 'channel "%" cannot fetch its bills', p_channel
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'WeChat Pay needs merchant_private_key, merchant_serial and mchid (or sp_mchid); Alipay app_private_key; Stripe secret_key.';
		END IF;
	END IF;
	FOR c IN SELECT x.name, x.gateway FROM @extschema@.paynotify_channel x
			 WHERE (p_channel IS NULL OR x.name OPERATOR(pg_catalog.=) p_channel)
			   AND @extschema@.paynotify_bill_fetchable(x.gateway, x.settings)
			   AND (p_channel IS NOT NULL
					OR pg_catalog.jsonb_typeof(x.settings OPERATOR(pg_catalog.->) 'fetch_bills') IS DISTINCT FROM 'boolean'
					OR (x.settings OPERATOR(pg_catalog.->) 'fetch_bills')::boolean)
			 ORDER BY x.name LOOP
		IF p_day IS NULL THEN
			d := pg_catalog.timezone(CASE WHEN c.gateway OPERATOR(pg_catalog.=) 'stripe' THEN 'UTC'
										  ELSE 'Asia/Shanghai' END, pg_catalog.now())::date
				 OPERATOR(pg_catalog.-) 1;
			-- the daily plan leaves a day whose bill is imported already (by
			-- hand, say) as it is: only a day given replaces it
			CONTINUE WHEN EXISTS (SELECT FROM @extschema@.paynotify_bill b
								  WHERE b.channel OPERATOR(pg_catalog.=) c.name
									AND b.bill_date OPERATOR(pg_catalog.=) d);
		ELSE
			d := @extschema@.paynotify_bill_day_check(c.gateway, p_day);
		END IF;
		INSERT INTO @extschema@.paynotify_bill_fetch AS f (channel, bill_date, step)
			VALUES (c.name, d, CASE WHEN c.gateway OPERATOR(pg_catalog.=) 'stripe' THEN 'page' ELSE 'list' END)
		ON CONFLICT ON CONSTRAINT paynotify_bill_fetch_pkey DO UPDATE
			SET step = EXCLUDED.step, download_url = NULL, hash_value = NULL, cursor = NULL,
				pages = '[]', attempts = 0, planned_at = ts, next_at = ts,
				last_at = NULL, last_result = NULL, done_at = NULL
			WHERE p_day IS NOT NULL AND f.step OPERATOR(pg_catalog.=) ANY ('{done,failed}'::text[]);
		IF FOUND THEN
			planned := planned OPERATOR(pg_catalog.+) 1;
		END IF;
	END LOOP;
	RETURN planned;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_plan(date, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_bill_plan(date, text) IS
	'plans the fetch of a day''s bill (default yesterday) of every channel that can fetch one, or of the channel named';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_bill_plan(date, text)'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);

-- The fetches due, claimed: first every unfinished one planned three days
-- ago or more is given up (step failed); then at most max_rows whose
-- next_at has come, oldest first, locked past any another daemon holds
-- (SKIP LOCKED: on Citus too, the table being a reference table), each
-- counted (attempts, last_at) and put off (next_at: 10 minutes doubling
-- with each attempt, at most 6 hours) so that no other daemon takes it
-- meanwhile and an answer that does not finish it leaves it due again then.
CREATE FUNCTION @extschema@.paynotify_bill_due(max_rows integer DEFAULT 10)
	RETURNS TABLE (channel text, bill_date date)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	cand record;
	-- the clock as a value: Citus takes no STABLE function (now(), and
	-- timestamptz + interval) beside a column in an UPDATE
	ts timestamptz := pg_catalog.now();
	nxt timestamptz;
BEGIN
	IF max_rows IS NULL OR max_rows OPERATOR(pg_catalog.<) 1 OR max_rows OPERATOR(pg_catalog.>) 1000 THEN
		RAISE EXCEPTION 'max_rows must be between 1 and 1000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR cand IN
		SELECT f.channel, f.bill_date FROM @extschema@.paynotify_bill_fetch f
		WHERE f.step OPERATOR(pg_catalog.<>) ALL ('{done,failed}'::text[])
		  AND f.planned_at OPERATOR(pg_catalog.<=) (pg_catalog.now() OPERATOR(pg_catalog.-) '3 days'::interval)
		ORDER BY f.channel, f.bill_date
		FOR UPDATE SKIP LOCKED LOOP
		UPDATE @extschema@.paynotify_bill_fetch f
			SET step = 'failed', last_result = pg_catalog.format('gave up after %s attempts: %s',
				f.attempts, COALESCE(f.last_result, 'no answer'))
			WHERE f.channel OPERATOR(pg_catalog.=) cand.channel AND f.bill_date OPERATOR(pg_catalog.=) cand.bill_date;
	END LOOP;
	FOR cand IN
		SELECT f.channel, f.bill_date, f.attempts FROM @extschema@.paynotify_bill_fetch f
		WHERE f.step OPERATOR(pg_catalog.<>) ALL ('{done,failed}'::text[])
		  AND f.next_at OPERATOR(pg_catalog.<=) pg_catalog.now()
		ORDER BY f.next_at, f.channel, f.bill_date
		LIMIT max_rows
		FOR UPDATE SKIP LOCKED LOOP
		-- the next time computed here, a value: the row is locked
		nxt := ts OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>
			LEAST(600::bigint OPERATOR(pg_catalog.*) (1::bigint OPERATOR(pg_catalog.<<) LEAST(cand.attempts, 20)),
				  21600)::double precision);
		RETURN QUERY
		UPDATE @extschema@.paynotify_bill_fetch f
			SET attempts = f.attempts OPERATOR(pg_catalog.+) 1,
				last_at = ts,
				next_at = nxt
			WHERE f.channel OPERATOR(pg_catalog.=) cand.channel AND f.bill_date OPERATOR(pg_catalog.=) cand.bill_date
			RETURNING f.channel, f.bill_date;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_due(integer) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_bill_due(integer) IS
	'claims the bill fetches due (backoff from 10 minutes doubling to 6 hours; given up three days after planned)';

-- The signer and the reader of a step (src/billfetch.c): only
-- paynotify_bill_request and paynotify_bill_apply call them.
CREATE FUNCTION @extschema@.paynotify_bill_sign(channel text, step text, bill_date date, url text,
		cursor text, OUT method text, OUT url text, OUT headers jsonb, OUT body text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_bill_sign'
	LANGUAGE C VOLATILE
	SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_sign(text, text, date, text, text) FROM PUBLIC;
CREATE FUNCTION @extschema@.paynotify_bill_read(channel text, step text, bill_date date, url text,
		hash text, status integer, headers jsonb, body bytea,
		OUT result text, OUT url text, OUT hash text, OUT has_more boolean, OUT cursor text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_bill_read'
	LANGUAGE C VOLATILE
	SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_read(text, text, date, text, text, integer, jsonb, bytea) FROM PUBLIC;

-- A fetch of the day's bill of the channel, for the daemon: an error when
-- there is none or it is over.
CREATE FUNCTION @extschema@.paynotify_bill_fetch_of(channel text, bill_date date)
	RETURNS @extschema@.paynotify_bill_fetch
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_channel text := $1;
	p_day date := $2;
	gw text;
	f @extschema@.paynotify_bill_fetch;
BEGIN
	IF p_channel IS NULL OR p_day IS NULL THEN
		RAISE EXCEPTION 'channel and bill_date must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT c.gateway INTO gw FROM @extschema@.paynotify_channel c WHERE c.name OPERATOR(pg_catalog.=) p_channel;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no channel "%"', p_channel USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM @extschema@.paynotify_bill_day_check(gw, p_day);
	SELECT * INTO f FROM @extschema@.paynotify_bill_fetch x
	WHERE x.channel OPERATOR(pg_catalog.=) p_channel AND x.bill_date OPERATOR(pg_catalog.=) p_day
	FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'no fetch of the bill of channel "%" for % is planned', p_channel, p_day
			USING ERRCODE = 'no_data_found', HINT = 'Plan it with paynotify_bill_plan.';
	END IF;
	IF f.step OPERATOR(pg_catalog.=) ANY ('{done,failed}'::text[]) THEN
		RAISE EXCEPTION 'the fetch of the bill of channel "%" for % is %', p_channel, p_day, f.step
			USING ERRCODE = 'object_not_in_prerequisite_state';
	END IF;
	RETURN f;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_fetch_of(text, date) FROM PUBLIC;

-- The signed request of the fetch's current step (docs/RECONCILIATION.md):
-- WeChat Pay's tradebill and its download, signed with the merchant's API
-- key; Alipay's bill.downloadurl.query signed with the app's key, and the
-- download from the URL it gave (unsigned: the URL carries Alipay's
-- token); Stripe's balance transactions, a page at a time, with the API
-- key as the bearer.
CREATE FUNCTION @extschema@.paynotify_bill_request(channel text, bill_date date,
		OUT method text, OUT url text, OUT headers jsonb, OUT body text)
	RETURNS record
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	f @extschema@.paynotify_bill_fetch := @extschema@.paynotify_bill_fetch_of($1, $2);
BEGIN
	SELECT s.method, s.url, s.headers, s.body INTO method, url, headers, body
	FROM @extschema@.paynotify_bill_sign(f.channel, f.step, f.bill_date, f.download_url, f.cursor) s;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_request(text, date) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_bill_request(text, date) IS
	'the signed HTTP request of the current step of fetching the channel''s bill of the day';

-- The gateway's answer to that request, as the daemon received it:
-- verified here; then the fetch goes on to its next step (outcome 'next',
-- more: ask for the next request at once), or the bill is imported
-- (paynotify_import_bill: 'imported'), or there is no bill yet ('not
-- ready'), or the answer is refused ('refused: <why>', nothing imported).
-- The last two leave the fetch due again at its next_at; a refused
-- download starts the fetch over from its list step (the gateways' download
-- URLs last minutes), a refused import of Stripe's pages from the first page.
-- A Stripe page that repeats a transaction read, or that would take the
-- day past 100000 transactions, is refused, the pages read kept.
CREATE FUNCTION @extschema@.paynotify_bill_apply(channel text, bill_date date, status integer,
		headers jsonb, body bytea, OUT outcome text, OUT more boolean)
	RETURNS record
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p_status integer := $3;
	p_headers jsonb := $4;
	p_body bytea := $5;
	f @extschema@.paynotify_bill_fetch := @extschema@.paynotify_bill_fetch_of($1, $2);
	a record;
	pg jsonb;
	acc jsonb;
	file bytea;
	n integer;
BEGIN
	more := false;
	BEGIN
		SELECT * INTO a FROM @extschema@.paynotify_bill_read(f.channel, f.step, f.bill_date, f.download_url,
			f.hash_value, p_status, p_headers, p_body) r;
	EXCEPTION WHEN program_limit_exceeded THEN
		-- a file that decompresses to more than a bill may hold
		SELECT 'refused: ' OPERATOR(pg_catalog.||) SQLERRM AS result INTO a;
	END;
	IF a.result OPERATOR(pg_catalog.=) 'next' THEN
		UPDATE @extschema@.paynotify_bill_fetch x
			SET step = 'download', download_url = a.url, hash_value = a.hash, last_result = 'list: next'
			WHERE x.channel OPERATOR(pg_catalog.=) f.channel AND x.bill_date OPERATOR(pg_catalog.=) f.bill_date;
		outcome := 'next';
		more := true;
		RETURN;
	ELSIF a.result OPERATOR(pg_catalog.=) 'not ready' THEN
		outcome := 'not ready';
	ELSIF a.result OPERATOR(pg_catalog.=) 'page' THEN
		-- a page that repeats one read (a daemon would loop on it, the bill
		-- count it twice), or more than a day's bill may hold: refused, and
		-- the pages read are kept as they were
		BEGIN
			pg := pg_catalog.convert_from(p_body, 'UTF8')::jsonb OPERATOR(pg_catalog.->) 'data';
			IF a.has_more AND a.cursor OPERATOR(pg_catalog.=) f.cursor THEN
				outcome := 'refused: the page does not go on from the last one read';
			ELSIF pg_catalog.jsonb_array_length(f.pages) OPERATOR(pg_catalog.+)
					pg_catalog.jsonb_array_length(pg) OPERATOR(pg_catalog.>) 100000 THEN
				outcome := 'refused: the day has more than 100000 transactions';
			ELSIF EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(pg) e
						  GROUP BY e OPERATOR(pg_catalog.->>) 'id'
						  HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1)
				OR EXISTS (SELECT FROM pg_catalog.jsonb_array_elements(f.pages) o
						   WHERE o OPERATOR(pg_catalog.->>) 'id' OPERATOR(pg_catalog.=) ANY
							   (SELECT e OPERATOR(pg_catalog.->>) 'id' FROM pg_catalog.jsonb_array_elements(pg) e)) THEN
				outcome := 'refused: the page repeats transactions already read';
			ELSE
				acc := f.pages OPERATOR(pg_catalog.||) pg;
				IF NOT a.has_more THEN
					file := pg_catalog.convert_to(pg_catalog.jsonb_build_object('object', 'list', 'data', acc,
						'has_more', false, 'url', '/v1/balance_transactions')::text, 'UTF8');
				END IF;
			END IF;
		EXCEPTION WHEN program_limit_exceeded THEN
			outcome := 'refused: the pages read are more than can be kept: ' OPERATOR(pg_catalog.||) SQLERRM;
			file := NULL;
		END;
		IF outcome IS NULL AND a.has_more THEN
			UPDATE @extschema@.paynotify_bill_fetch x
				SET pages = acc, cursor = a.cursor,
					last_result = pg_catalog.format('page: %s transactions so far', pg_catalog.jsonb_array_length(acc))
				WHERE x.channel OPERATOR(pg_catalog.=) f.channel AND x.bill_date OPERATOR(pg_catalog.=) f.bill_date;
			outcome := 'next';
			more := true;
			RETURN;
		END IF;
	ELSIF a.result OPERATOR(pg_catalog.=) 'file' THEN
		file := p_body;
	ELSE
		outcome := a.result;
	END IF;
	IF file IS NOT NULL THEN
		BEGIN
			SELECT b.line_count INTO n FROM @extschema@.paynotify_import_bill(f.channel, file, f.bill_date) b;
			outcome := 'imported';
		EXCEPTION WHEN data_exception OR invalid_parameter_value OR program_limit_exceeded THEN
			outcome := 'refused: the bill could not be imported: ' OPERATOR(pg_catalog.||) SQLERRM;
		END;
	END IF;
	IF outcome OPERATOR(pg_catalog.=) 'imported' THEN
		UPDATE @extschema@.paynotify_bill_fetch x
			SET step = 'done', done_at = pg_catalog.now(), pages = '[]', cursor = NULL,
				last_result = pg_catalog.format('imported: %s lines', n)
			WHERE x.channel OPERATOR(pg_catalog.=) f.channel AND x.bill_date OPERATOR(pg_catalog.=) f.bill_date;
	ELSE
		-- a download or an import refused starts over (list, first page)
		UPDATE @extschema@.paynotify_bill_fetch x
			SET step = CASE WHEN file IS NOT NULL OR x.step OPERATOR(pg_catalog.=) 'download'
							THEN CASE WHEN x.step OPERATOR(pg_catalog.=) 'page' THEN 'page' ELSE 'list' END
							ELSE x.step END,
				download_url = CASE WHEN x.step OPERATOR(pg_catalog.=) 'download' THEN NULL ELSE x.download_url END,
				hash_value = CASE WHEN x.step OPERATOR(pg_catalog.=) 'download' THEN NULL ELSE x.hash_value END,
				pages = CASE WHEN file IS NOT NULL THEN '[]'::jsonb ELSE x.pages END,
				cursor = CASE WHEN file IS NOT NULL THEN NULL ELSE x.cursor END,
				last_result = outcome
			WHERE x.channel OPERATOR(pg_catalog.=) f.channel AND x.bill_date OPERATOR(pg_catalog.=) f.bill_date;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_bill_apply(text, date, integer, jsonb, bytea) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_bill_apply(text, date, integer, jsonb, bytea) IS
	'verifies the gateway''s answer to paynotify_bill_request and goes on: the next step, or the bill imported';

SELECT @extschema@.paynotify_capacity_extend(c, f::pg_catalog.regprocedure, NULL::pg_catalog.regclass)
FROM pg_catalog.unnest('{relay,admin}'::text[]) c,
	 pg_catalog.unnest(ARRAY['@extschema@.paynotify_bill_due(integer)',
	 '@extschema@.paynotify_bill_request(text, date)',
	 '@extschema@.paynotify_bill_apply(text, date, integer, jsonb, bytea)']) f;

-- ===== The operator's functions on Citus =====
--
-- On a cluster (paynotify_distribute) the operator's functions run on the
-- coordinator, as on one server, with the same answers: what Citus does not
-- plan is read across the shards without locks and then done on each row's
-- own shard, by order_no (docs/CITUS.md).

-- paynotify's own move of an order, told to the node of the order's shard
-- (the guard there records the application's moves in the order history):
-- called by the library, as the extension's owner, only.
CREATE FUNCTION @extschema@.paynotify_own_move(order_no text, from_state text, to_state text)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'paynotify_own_move'
	LANGUAGE C VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION @extschema@.paynotify_own_move(text, text, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_own_move(text, text, text) IS
	'internal (Citus): the next move of the order in this transaction is paynotify''s own';

-- The statistics, read as the function's owner: Citus reads a view's
-- tables on the shards as the caller, who may not read the outbox.
CREATE FUNCTION @extschema@.paynotify_stats_rows()
	RETURNS TABLE (channel text, gateway text, notifications bigint, succeeded bigint, ignored bigint,
		anomaly bigint, parked bigint, failed bigint, deliveries bigint, duplicate_ratio numeric,
		oldest_failed_seconds bigint, oldest_parked_seconds bigint, anomalies_24h bigint,
		anomalies_unresolved bigint, outbox_backlog bigint, outbox_oldest_seconds bigint, outbox_dead bigint)
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT ch.name AS channel, ch.gateway,
		COALESCE(l.notifications, 0) AS notifications,
		COALESCE(l.succeeded, 0) AS succeeded,
		COALESCE(l.ignored, 0) AS ignored,
		COALESCE(l.anomaly, 0) AS anomaly,
		COALESCE(l.parked, 0) AS parked,
		COALESCE(l.failed, 0) AS failed,
		COALESCE(l.deliveries, 0) AS deliveries,
		CASE WHEN COALESCE(l.deliveries, 0) OPERATOR(pg_catalog.>) 0
			THEN pg_catalog.round((l.deliveries OPERATOR(pg_catalog.-) l.notifications)::numeric
								  OPERATOR(pg_catalog./) l.deliveries::numeric, 4)
			ELSE 0 END AS duplicate_ratio,
		COALESCE(pg_catalog.extract('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) l.oldest_failed), 0)::bigint
			AS oldest_failed_seconds,
		COALESCE(pg_catalog.extract('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) l.oldest_parked), 0)::bigint
			AS oldest_parked_seconds,
		COALESCE(a.last_24h, 0) AS anomalies_24h,
		COALESCE(a.unresolved, 0) AS anomalies_unresolved,
		COALESCE(o.backlog, 0) AS outbox_backlog,
		COALESCE(pg_catalog.extract('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) o.oldest), 0)::bigint
			AS outbox_oldest_seconds,
		COALESCE(o.dead, 0) AS outbox_dead
	FROM @extschema@.paynotify_channel ch
	LEFT JOIN (
		SELECT x.channel, pg_catalog.count(*) AS notifications,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'succeeded') AS succeeded,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'ignored') AS ignored,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'anomaly') AS anomaly,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'parked') AS parked,
			pg_catalog.count(*) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'failed') AS failed,
			pg_catalog.sum(x.delivery_count) AS deliveries,
			pg_catalog.min(x.first_seen) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'failed') AS oldest_failed,
			pg_catalog.min(x.first_seen) FILTER (WHERE x.status OPERATOR(pg_catalog.=) 'parked') AS oldest_parked
		FROM @extschema@.payment_notify_log x GROUP BY x.channel) l ON l.channel OPERATOR(pg_catalog.=) ch.name
	LEFT JOIN (
		SELECT y.channel,
			pg_catalog.count(*) FILTER (WHERE y.created_at OPERATOR(pg_catalog.>)
										(pg_catalog.now() OPERATOR(pg_catalog.-) '24 hours'::interval)) AS last_24h,
			pg_catalog.count(*) FILTER (WHERE y.resolved_at IS NULL) AS unresolved
		FROM @extschema@.paynotify_anomaly y GROUP BY y.channel) a ON a.channel OPERATOR(pg_catalog.=) ch.name
	LEFT JOIN (
		SELECT z.channel, pg_catalog.count(*) FILTER (WHERE NOT z.dead) AS backlog,
			pg_catalog.min(z.created_at) FILTER (WHERE NOT z.dead) AS oldest,
			pg_catalog.count(*) FILTER (WHERE z.dead) AS dead
		FROM (SELECT q.channel, q.created_at, false AS dead FROM @extschema@.paynotify_outbox q
			  UNION ALL
			  SELECT d.channel, d.created_at, d.dead_at IS NOT NULL
			  FROM @extschema@.paynotify_delivery d WHERE d.delivered_at IS NULL) z
		GROUP BY z.channel) o ON o.channel OPERATOR(pg_catalog.=) ch.name
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_stats_rows() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_stats_rows() IS
	'the rows of the view paynotify_stats (read as the extension''s owner)';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_stats_rows()'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);
CREATE OR REPLACE VIEW @extschema@.paynotify_stats AS
	SELECT s.channel, s.gateway, s.notifications, s.succeeded, s.ignored, s.anomaly, s.parked, s.failed,
		s.deliveries, s.duplicate_ratio, s.oldest_failed_seconds, s.oldest_parked_seconds, s.anomalies_24h,
		s.anomalies_unresolved, s.outbox_backlog, s.outbox_oldest_seconds, s.outbox_dead
	FROM @extschema@.paynotify_stats_rows() s;
-- A role that could read the view before the update (SELECT given by hand,
-- a monitoring role without the admin capacity) reads it after: EXECUTE on
-- the function to every grantee of SELECT on the view (PUBLIC too), its
-- owner aside; names from the catalogs, quoted by format.
DO $$
DECLARE
	v oid;
	f pg_catalog.regprocedure;
	g record;
BEGIN
	SELECT c.oid INTO v FROM pg_catalog.pg_class c, pg_catalog.pg_extension e
		WHERE e.extname OPERATOR(pg_catalog.=) 'paynotify' AND c.relnamespace OPERATOR(pg_catalog.=) e.extnamespace
		  AND c.relname OPERATOR(pg_catalog.=) 'paynotify_stats';
	SELECT p.oid INTO f FROM pg_catalog.pg_proc p WHERE p.pronamespace OPERATOR(pg_catalog.=)
		(SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'paynotify')
		AND p.proname OPERATOR(pg_catalog.=) 'paynotify_stats_rows' AND p.pronargs OPERATOR(pg_catalog.=) 0;
	FOR g IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
			 WHERE c.oid OPERATOR(pg_catalog.=) v AND a.privilege_type OPERATOR(pg_catalog.=) 'SELECT'
			   AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
			 ORDER BY a.grantee LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f,
								  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
									   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END);
	END LOOP;
END
$$;

-- Dead letters back into the queue.  On Citus each on its own shard (the
-- clock read once: Citus plans no now() beside columns in SET).
CREATE OR REPLACE FUNCTION @extschema@.paynotify_redeliver(endpoint_id bigint DEFAULT NULL,
		delivery_id bigint DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	v_now timestamptz := pg_catalog.now();
	n bigint := 0;
	k bigint;
	r record;
BEGIN
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		WITH again AS (
			UPDATE @extschema@.paynotify_delivery d
			SET dead_at = NULL, attempts = 0, next_attempt_at = v_now, started_at = v_now
			WHERE d.dead_at IS NOT NULL AND d.delivered_at IS NULL
			  AND ($1 IS NULL OR d.endpoint_id OPERATOR(pg_catalog.=) $1)
			  AND ($2 IS NULL OR d.id OPERATOR(pg_catalog.=) $2)
			RETURNING 1)
		SELECT pg_catalog.count(*) INTO n FROM again;
		RETURN n;
	END IF;
	FOR r IN SELECT d.order_no, d.id FROM @extschema@.paynotify_delivery d
			 WHERE d.dead_at IS NOT NULL AND d.delivered_at IS NULL
			   AND ($1 IS NULL OR d.endpoint_id OPERATOR(pg_catalog.=) $1)
			   AND ($2 IS NULL OR d.id OPERATOR(pg_catalog.=) $2) LOOP
		UPDATE @extschema@.paynotify_delivery d
			SET dead_at = NULL, attempts = 0, next_attempt_at = v_now, started_at = v_now
			WHERE d.order_no OPERATOR(pg_catalog.=) r.order_no AND d.id OPERATOR(pg_catalog.=) r.id
			  AND d.dead_at IS NOT NULL AND d.delivered_at IS NULL;
		GET DIAGNOSTICS k = ROW_COUNT;
		n := n OPERATOR(pg_catalog.+) k;
	END LOOP;
	RETURN n;
END
$$;

-- Marks an anomaly as looked at.  On Citus the anomaly is found across the
-- shards, then locked and written on its own (by order_no).
CREATE OR REPLACE FUNCTION @extschema@.paynotify_resolve_anomaly(id bigint, note text)
	RETURNS SETOF @extschema@.paynotify_anomaly
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	a @extschema@.paynotify_anomaly;
	v_order text;
	v_now timestamptz := pg_catalog.now();
	v_by text := session_user;
BEGIN
	IF $1 IS NULL OR $2 IS NULL THEN
		RAISE EXCEPTION 'id and note must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.btrim($2) OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION 'note must say what was done' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF @extschema@.paynotify_distributed('@extschema@.paynotify_anomaly'::pg_catalog.regclass) THEN
		SELECT x.order_no INTO v_order FROM @extschema@.paynotify_anomaly x WHERE x.id OPERATOR(pg_catalog.=) $1;
		SELECT * INTO a FROM @extschema@.paynotify_anomaly x
			WHERE x.order_no OPERATOR(pg_catalog.=) v_order AND x.id OPERATOR(pg_catalog.=) $1 FOR UPDATE;
	ELSE
		SELECT * INTO a FROM @extschema@.paynotify_anomaly x WHERE x.id OPERATOR(pg_catalog.=) $1 FOR UPDATE;
	END IF;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'anomaly % does not exist', $1 USING ERRCODE = 'no_data_found';
	END IF;
	IF a.resolved_at IS NOT NULL THEN
		RAISE EXCEPTION 'anomaly % was already resolved by %', $1, a.resolved_by
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = pg_catalog.format('Resolved at %s: %s', a.resolved_at, a.note);
	END IF;
	RETURN QUERY UPDATE @extschema@.paynotify_anomaly x
		SET resolved_at = v_now, resolved_by = v_by, note = $2
		WHERE x.order_no OPERATOR(pg_catalog.=) a.order_no AND x.id OPERATOR(pg_catalog.=) $1 RETURNING x.*;
END
$$;

-- Deletes settled notifications older than keep.  On one server as in 1.1;
-- on Citus, which takes no FOR UPDATE across shards and no anomaly looked
-- up by a notification's id beside the log: the channel's anomalies read
-- first, the candidates across the shards without locks, then each
-- notification locked (SKIP LOCKED) and deleted on its order's shard with
-- its delivery history; one found locked (or changed) is left out of the
-- next reads, which go on until one finds no candidate.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_purge(keep interval, max_rows integer DEFAULT 10000,
		batch_size integer DEFAULT 1000, only_channel text DEFAULT NULL)
	RETURNS TABLE (channel text, kept interval, notifications bigint, deliveries bigint)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	c record;
	cand record;
	floor_ interval;
	n bigint;
	d bigint;
	dsum bigint;
	batch bigint;
	budget bigint := max_rows;
	cutoff timestamptz;
	citus boolean := @extschema@.paynotify_distributed('@extschema@.payment_notify_log'::pg_catalog.regclass);
	flagged text[];
	skipped text[];
	seen bigint;
BEGIN
	IF keep IS NULL OR max_rows IS NULL OR batch_size IS NULL THEN
		RAISE EXCEPTION 'keep, max_rows and batch_size must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF max_rows OPERATOR(pg_catalog.<) 1 OR batch_size OPERATOR(pg_catalog.<) 1 THEN
		RAISE EXCEPTION 'max_rows and batch_size must be at least 1'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR c IN SELECT x.channel, ch.gateway
			 FROM (SELECT DISTINCT l.channel FROM @extschema@.payment_notify_log l
				   WHERE only_channel IS NULL OR l.channel OPERATOR(pg_catalog.=) only_channel) x
			 LEFT JOIN @extschema@.paynotify_channel ch ON ch.name OPERATOR(pg_catalog.=) x.channel
			 ORDER BY x.channel LOOP
		floor_ := @extschema@.paynotify_retention_floor(c.gateway);
		kept := greatest(keep, floor_);
		cutoff := pg_catalog.now() OPERATOR(pg_catalog.-) kept;
		IF keep OPERATOR(pg_catalog.<) floor_ THEN
			RAISE NOTICE 'channel "%" keeps notifications for %, not %', c.channel, floor_, keep
				USING DETAIL = pg_catalog.format('The %s gateway may redeliver a notification until its retry horizon has passed; a row deleted earlier would let that redelivery be applied twice.',
												 COALESCE(c.gateway, 'unknown')),
					  HINT = 'paynotify_retention_floor(gateway) gives the shortest keep of each gateway.';
		END IF;
		n := 0;
		dsum := 0;
		skipped := '{}';
		IF citus THEN
			flagged := ARRAY(SELECT DISTINCT a.notify_id FROM @extschema@.paynotify_anomaly a
							 WHERE a.channel OPERATOR(pg_catalog.=) c.channel AND a.notify_id IS NOT NULL);
		END IF;
		LOOP
			EXIT WHEN budget OPERATOR(pg_catalog.<=) 0;
			IF NOT citus THEN
				WITH victims AS (
					SELECT l.channel, l.notify_id FROM @extschema@.payment_notify_log l
					WHERE l.channel OPERATOR(pg_catalog.=) c.channel AND l.status IN ('succeeded', 'ignored')
					  AND l.last_seen OPERATOR(pg_catalog.<) cutoff
					  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_anomaly a
									  WHERE a.channel OPERATOR(pg_catalog.=) l.channel
										AND a.notify_id OPERATOR(pg_catalog.=) l.notify_id)
					LIMIT least(batch_size, budget)
					FOR UPDATE SKIP LOCKED
				), gone AS (
					DELETE FROM @extschema@.payment_notify_log l USING victims v
					WHERE l.channel OPERATOR(pg_catalog.=) v.channel AND l.notify_id OPERATOR(pg_catalog.=) v.notify_id
					RETURNING l.channel, l.notify_id
				), dgone AS (
					DELETE FROM @extschema@.paynotify_delivery_history dl USING gone g
					WHERE dl.channel OPERATOR(pg_catalog.=) g.channel AND dl.notify_id OPERATOR(pg_catalog.=) g.notify_id
					RETURNING 1
				)
				SELECT (SELECT pg_catalog.count(*) FROM gone), (SELECT pg_catalog.count(*) FROM dgone) INTO batch, d;
			ELSE
				batch := 0;
				d := 0;
				seen := 0;
				FOR cand IN SELECT l.order_no, l.notify_id FROM @extschema@.payment_notify_log l
						 WHERE l.channel OPERATOR(pg_catalog.=) c.channel AND l.status IN ('succeeded', 'ignored')
						   AND l.last_seen OPERATOR(pg_catalog.<) cutoff
						   AND l.notify_id OPERATOR(pg_catalog.<>) ALL (flagged)
						   AND l.notify_id OPERATOR(pg_catalog.<>) ALL (skipped)
						 LIMIT least(batch_size, budget) LOOP
					seen := seen OPERATOR(pg_catalog.+) 1;
					PERFORM FROM @extschema@.payment_notify_log l
						WHERE l.order_no OPERATOR(pg_catalog.=) cand.order_no AND l.channel OPERATOR(pg_catalog.=) c.channel
						  AND l.notify_id OPERATOR(pg_catalog.=) cand.notify_id AND l.status IN ('succeeded', 'ignored')
						  AND l.last_seen OPERATOR(pg_catalog.<) cutoff
						FOR UPDATE SKIP LOCKED;
					IF NOT FOUND THEN
						skipped := skipped OPERATOR(pg_catalog.||) cand.notify_id;
						CONTINUE;
					END IF;
					DELETE FROM @extschema@.payment_notify_log l
						WHERE l.order_no OPERATOR(pg_catalog.=) cand.order_no AND l.channel OPERATOR(pg_catalog.=) c.channel
						  AND l.notify_id OPERATOR(pg_catalog.=) cand.notify_id;
					batch := batch OPERATOR(pg_catalog.+) 1;
					WITH dgone AS (
						DELETE FROM @extschema@.paynotify_delivery_history dl
						WHERE dl.order_no OPERATOR(pg_catalog.=) cand.order_no AND dl.channel OPERATOR(pg_catalog.=) c.channel
						  AND dl.notify_id OPERATOR(pg_catalog.=) cand.notify_id
						RETURNING 1)
					SELECT d OPERATOR(pg_catalog.+) pg_catalog.count(*) INTO d FROM dgone;
				END LOOP;
			END IF;
			-- (Citus: on while a read found candidates, even all locked)
			EXIT WHEN batch OPERATOR(pg_catalog.=) 0 AND NOT (citus AND seen OPERATOR(pg_catalog.>) 0);
			n := n OPERATOR(pg_catalog.+) batch;
			dsum := dsum OPERATOR(pg_catalog.+) d;
			budget := budget OPERATOR(pg_catalog.-) batch;
		END LOOP;
		channel := c.channel;
		notifications := n;
		deliveries := dsum;
		RETURN NEXT;
	END LOOP;
END
$$;

-- A capacity's privileges given or taken.  On Citus, GRANT on a distributed
-- table runs on its shards in parallel, after which Citus refuses the next
-- GRANT on a reference table in the same transaction ("parallel DDL
-- access"): the statements run one connection at a time there (the mode
-- the caller had is put back).
CREATE OR REPLACE FUNCTION @extschema@.paynotify_capacity_acl(role regrole, capacity text, give boolean)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	p record;
	mode text := pg_catalog.current_setting('citus.multi_shard_modify_mode', true);
BEGIN
	IF mode IS NOT NULL AND mode OPERATOR(pg_catalog.<>) 'sequential' THEN
		PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
	END IF;
	FOR p IN SELECT c.privilege, c.fn, c.rel, c.columns FROM @extschema@.paynotify_capacity c
			 WHERE c.capacity OPERATOR(pg_catalog.=) paynotify_capacity_acl.capacity LOOP
		EXECUTE pg_catalog.format('%s %s%s ON %s %s %s %s',
			CASE WHEN give THEN 'GRANT' ELSE 'REVOKE' END,
			p.privilege,
			CASE WHEN p.columns IS NULL THEN ''
				 ELSE pg_catalog.format(' (%s)', (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(x), ', ')
												 FROM pg_catalog.unnest(p.columns) x)) END,
			CASE WHEN p.fn IS NOT NULL THEN 'FUNCTION' ELSE 'TABLE' END,
			coalesce(p.fn::text, p.rel::text),
			CASE WHEN give THEN 'TO' ELSE 'FROM' END,
			role);
	END LOOP;
	IF mode IS NOT NULL AND mode OPERATOR(pg_catalog.<>) 'sequential' THEN
		PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', mode, true);
	END IF;
END
$$;

-- ===== The relay's leases: requests kept in flight =====
--
-- Up to 1.3 a relay's claim was a row lock held by its open transaction,
-- so the relay worked in rounds: claim, POST every claimed delivery,
-- report, COMMIT, claim again; each round waited for its slowest request,
-- and one receiver that sometimes answers only at the request timeout held
-- back every event of its endpoint.  From 1.4 the claim is a
-- lease, committed at once: paynotify_relay_lease locks the due deliveries
-- FOR UPDATE SKIP LOCKED in its own short transaction (two claimers never
-- take the same row), sets each one's next_attempt_at to the lease's end,
-- so that no claim takes it again before then, and marks it with the
-- claim's token.  paynotify_relay_report(ids, statuses, errors, leases),
-- called as results come, records a result only where the delivery is
-- still undelivered and still holds that lease: a relay whose lease
-- expired (it hung, or lost its database for longer) and was taken by
-- another changes nothing.  A relay that dies gives its claims back when
-- their leases end (2 * its request timeout + 10 s), no longer at once.
-- An earlier delivery of an order that is leased is still undelivered, so
-- its later ones wait for it as before.  max_in_flight is now counted over
-- the leases of all relays: a claim takes at most an endpoint's
-- max_in_flight less its deliveries leased and in flight (two claims at
-- the same instant may each take the remainder).
-- paynotify_relay_claim(integer) and the three-argument report are kept
-- for a relay of 1.3 still running during an upgrade: its claims (row
-- locks) and the leases skip each other, and its report leaves a delivery
-- a live lease holds alone (below).  Existing rows have
-- no lease.
-- lease: the token of the claim that holds it; leased_until: its end
-- (next_attempt_at, while it holds).  By EXECUTE, where not made yet: on
-- Citus, see the log's source column.
DO $$
BEGIN
	EXECUTE 'ALTER TABLE @extschema@.paynotify_delivery
		ADD COLUMN IF NOT EXISTS lease bigint,
		ADD COLUMN IF NOT EXISTS leased_until timestamptz';
	EXECUTE 'CREATE INDEX IF NOT EXISTS paynotify_delivery_leased ON @extschema@.paynotify_delivery (endpoint_id, leased_until)
		WHERE leased_until IS NOT NULL AND delivered_at IS NULL AND dead_at IS NULL';
END
$$;

CREATE FUNCTION @extschema@.paynotify_relay_lease(max_rows integer, request_timeout_ms integer)
	RETURNS TABLE (delivery_id bigint, webhook_id text, endpoint_id bigint, url text,
				   secret text, max_in_flight integer, attempts integer, body text, lease bigint)
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	-- this claim's token: a report must show it to be recorded
	claim_token bigint := pg_catalog.floor(pg_catalog.random() * 9e18)::bigint OPERATOR(pg_catalog.+) 1;
	lease_end timestamptz;
	ep record;
	cand record;
	got record;
	busy jsonb;
	ids bigint[] := '{}';
	orders text[] := '{}';
	dues timestamptz[] := '{}';
BEGIN
	IF max_rows IS NULL OR max_rows OPERATOR(pg_catalog.<) 0 THEN
		RAISE EXCEPTION 'max_rows must be 0 or more' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF request_timeout_ms IS NULL OR request_timeout_ms OPERATOR(pg_catalog.<) 100
	   OR request_timeout_ms OPERATOR(pg_catalog.>) 600000 THEN
		RAISE EXCEPTION 'request_timeout_ms must be from 100 to 600000'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- longer than the relay's longest attempt (one request timeout), with
	-- room for the start and the report
	lease_end := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(
		secs => ((2 OPERATOR(pg_catalog.*) request_timeout_ms) OPERATOR(pg_catalog.+) 10000)
				OPERATOR(pg_catalog./) 1000.0);
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		RETURN QUERY
		WITH candidate AS MATERIALIZED (
			SELECT c.id
			FROM @extschema@.paynotify_endpoint e
				CROSS JOIN LATERAL (
					SELECT pg_catalog.count(*)::integer AS n
					FROM @extschema@.paynotify_delivery l
					WHERE l.endpoint_id OPERATOR(pg_catalog.=) e.id
					  AND l.leased_until OPERATOR(pg_catalog.>) pg_catalog.now()
					  AND l.delivered_at IS NULL AND l.dead_at IS NULL) f
				CROSS JOIN LATERAL (
					SELECT r.id, r.next_attempt_at
					FROM @extschema@.paynotify_delivery_ready r
					WHERE r.endpoint_id OPERATOR(pg_catalog.=) e.id
					ORDER BY r.next_attempt_at
					LIMIT pg_catalog.int4larger(e.max_in_flight OPERATOR(pg_catalog.-) f.n, 0)) c
			WHERE e.enabled
			ORDER BY c.next_attempt_at
			LIMIT max_rows),
		locked AS (
			SELECT d.id
			FROM @extschema@.paynotify_delivery d
			WHERE d.id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT candidate.id FROM candidate))
			  AND d.delivered_at IS NULL AND d.dead_at IS NULL
			  AND d.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now()
			FOR UPDATE OF d SKIP LOCKED),
		leased AS (
			UPDATE @extschema@.paynotify_delivery d
			SET next_attempt_at = lease_end, lease = claim_token, leased_until = lease_end
			FROM locked
			WHERE d.id OPERATOR(pg_catalog.=) locked.id
			RETURNING d.id, d.webhook_id, d.endpoint_id, d.attempts, d.body)
		SELECT l.id, l.webhook_id, l.endpoint_id, e.url, e.secret, e.max_in_flight,
			l.attempts, l.body, claim_token
		FROM leased l
			JOIN @extschema@.paynotify_endpoint e ON e.id OPERATOR(pg_catalog.=) l.endpoint_id
		ORDER BY l.id;
		RETURN;
	END IF;
	-- Citus: as paynotify_relay_claim (the candidates read across the shards
	-- without locks, an order's delivery also waiting for its earlier
	-- events still in the outbox), each locked on its own shard by order_no
	-- and id with SKIP LOCKED, then leased there: no statement waits for a
	-- lock another relay holds, so two relays cannot deadlock.
	SELECT pg_catalog.jsonb_object_agg(b.endpoint_id, b.n) INTO busy
	FROM (SELECT l.endpoint_id, pg_catalog.count(*) AS n
		  FROM @extschema@.paynotify_delivery l
		  WHERE l.leased_until OPERATOR(pg_catalog.>) pg_catalog.now()
			AND l.delivered_at IS NULL AND l.dead_at IS NULL
		  GROUP BY l.endpoint_id) b;
	FOR ep IN SELECT e.id, e.max_in_flight FROM @extschema@.paynotify_endpoint e WHERE e.enabled LOOP
		FOR cand IN
			SELECT r.id, r.order_no, r.next_attempt_at
			FROM @extschema@.paynotify_delivery_ready r
			WHERE r.endpoint_id OPERATOR(pg_catalog.=) ep.id
			  AND (r.order_no OPERATOR(pg_catalog.=) ''
				   OR NOT EXISTS (SELECT FROM @extschema@.paynotify_outbox o
								  WHERE o.order_no OPERATOR(pg_catalog.=) r.order_no
									AND coalesce(o.order_seq, o.id) OPERATOR(pg_catalog.<) r.order_seq))
			ORDER BY r.next_attempt_at
			LIMIT pg_catalog.int4larger(ep.max_in_flight OPERATOR(pg_catalog.-)
				coalesce((busy OPERATOR(pg_catalog.->>) ep.id::text)::integer, 0), 0) LOOP
			ids := ids OPERATOR(pg_catalog.||) cand.id;
			orders := orders OPERATOR(pg_catalog.||) cand.order_no;
			dues := dues OPERATOR(pg_catalog.||) cand.next_attempt_at;
		END LOOP;
	END LOOP;
	FOR cand IN SELECT u.id, u.order_no FROM unnest(ids, orders, dues) u(id, order_no, due)
				ORDER BY u.due LIMIT max_rows LOOP
		SELECT d.id, d.webhook_id, d.endpoint_id, e.url, e.secret, e.max_in_flight, d.attempts, d.body
		INTO got
		FROM @extschema@.paynotify_delivery d
			JOIN @extschema@.paynotify_endpoint e ON e.id OPERATOR(pg_catalog.=) d.endpoint_id
		WHERE d.order_no OPERATOR(pg_catalog.=) cand.order_no AND d.id OPERATOR(pg_catalog.=) cand.id
		  AND d.delivered_at IS NULL AND d.dead_at IS NULL
		  AND d.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now()
		  AND e.enabled
		FOR UPDATE OF d SKIP LOCKED;
		CONTINUE WHEN got.id IS NULL;
		UPDATE @extschema@.paynotify_delivery d
		SET next_attempt_at = lease_end, lease = claim_token, leased_until = lease_end
		WHERE d.order_no OPERATOR(pg_catalog.=) cand.order_no AND d.id OPERATOR(pg_catalog.=) cand.id;
		delivery_id := got.id;
		webhook_id := got.webhook_id;
		endpoint_id := got.endpoint_id;
		url := got.url;
		secret := got.secret;
		max_in_flight := got.max_in_flight;
		attempts := got.attempts;
		body := got.body;
		lease := claim_token;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_relay_lease(integer, integer) IS
	'paynotify-relay: leases up to max_rows due deliveries, at most an endpoint''s max_in_flight less its leases in flight, for 2 * request_timeout_ms + 10 s (with the endpoint and its secret, and the lease''s token to report with)';

-- The retry schedule of a delivery whose attempt at attempt_at failed, one
-- for both reports: dead (at attempt_at) once its retry horizon from
-- started_at has passed, else due again after retry_base * 2^attempts (at
-- most retry_max, in seconds: as an interval 2^30 times the base can
-- overflow), times a jitter in [0.5, 1), and never after the horizon.
CREATE FUNCTION @extschema@.paynotify_retry_schedule(attempt_at timestamptz, started_at timestamptz,
		attempts integer, retry_base interval, retry_max interval, retry_horizon interval,
		OUT dead_at timestamptz, OUT next_attempt_at timestamptz)
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT CASE WHEN attempt_at OPERATOR(pg_catalog.>=) (started_at OPERATOR(pg_catalog.+) retry_horizon)
				THEN attempt_at END,
		   least(attempt_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>
					least(pg_catalog.date_part('epoch', retry_max),
						  pg_catalog.date_part('epoch', retry_base)
						  OPERATOR(pg_catalog.*) pg_catalog.power(2::float8, pg_catalog.int4smaller(attempts, 30)::float8))
					OPERATOR(pg_catalog.*) (0.5 OPERATOR(pg_catalog.+) (0.5 OPERATOR(pg_catalog.*) pg_catalog.random()))),
				 started_at OPERATOR(pg_catalog.+) retry_horizon)
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_retry_schedule(timestamptz, timestamptz, integer, interval,
	interval, interval) FROM PUBLIC;

CREATE FUNCTION @extschema@.paynotify_relay_report(delivery_ids bigint[], statuses integer[],
		errors text[], leases bigint[])
	RETURNS TABLE (recorded integer, locked bigint[])
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	n integer;
	cids bigint[];
	corders text[];
	ctoks bigint[];
	got bigint[] := '{}';
	one bigint;
	attempt_at timestamptz := pg_catalog.clock_timestamp();
	ids bigint[];
	orders text[];
	toks bigint[];
	att integer[];
	lasts timestamptz[];
	st integer[];
	errs text[];
	done timestamptz[];
	dead timestamptz[];
	nexts timestamptz[];
BEGIN
	-- As the three-argument report (the new values read first, then
	-- written as they are, one way on one server and on Citus), for the
	-- deliveries that still hold the lease given.  A status and an error
	-- both NULL: the delivery was not attempted (the relay stopped before
	-- it started), given back due at once, its attempts unchanged.
	-- Each delivery is locked first, skipping one another transaction
	-- holds (an operator's, a trigger's): the report never waits for a row
	-- lock, and returns those it skipped (locked), for the relay to report
	-- again while its lease holds, with how many it recorded.
	SELECT pg_catalog.array_agg(d.id), pg_catalog.array_agg(d.order_no), pg_catalog.array_agg(d.lease)
	INTO cids, corders, ctoks
	FROM unnest(delivery_ids, leases) u(id, lease)
		JOIN @extschema@.paynotify_delivery d ON d.id OPERATOR(pg_catalog.=) u.id
	WHERE u.id IS NOT NULL AND u.lease IS NOT NULL
	  AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.lease OPERATOR(pg_catalog.=) u.lease;
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		SELECT coalesce(pg_catalog.array_agg(x.id), '{}') INTO got
		FROM (SELECT d.id
			  FROM unnest(cids, ctoks) c(id, lease)
				  JOIN @extschema@.paynotify_delivery d ON d.id OPERATOR(pg_catalog.=) c.id
			  WHERE d.lease OPERATOR(pg_catalog.=) c.lease
				AND d.delivered_at IS NULL AND d.dead_at IS NULL
			  FOR UPDATE OF d SKIP LOCKED) x;
	ELSE
		-- Citus: each on its own shard, by order_no and id
		FOR i IN 1 .. coalesce(pg_catalog.cardinality(cids), 0) LOOP
			one := NULL;
			SELECT d.id INTO one
			FROM @extschema@.paynotify_delivery d
			WHERE d.order_no OPERATOR(pg_catalog.=) corders[i] AND d.id OPERATOR(pg_catalog.=) cids[i]
			  AND d.lease OPERATOR(pg_catalog.=) ctoks[i]
			  AND d.delivered_at IS NULL AND d.dead_at IS NULL
			FOR UPDATE OF d SKIP LOCKED;
			IF one IS NOT NULL THEN
				got := got OPERATOR(pg_catalog.||) one;
			END IF;
		END LOOP;
	END IF;
	locked := ARRAY(SELECT c.id FROM unnest(cids) c(id)
					WHERE NOT c.id OPERATOR(pg_catalog.=) ANY (got) ORDER BY c.id);
	SELECT pg_catalog.array_agg(d.id), pg_catalog.array_agg(d.order_no), pg_catalog.array_agg(d.lease),
		pg_catalog.array_agg(CASE WHEN r.released THEN d.attempts
			ELSE pg_catalog.int4smaller(d.attempts, 2147483646) OPERATOR(pg_catalog.+) 1 END),
		pg_catalog.array_agg(CASE WHEN r.released THEN d.last_attempt_at ELSE attempt_at END),
		pg_catalog.array_agg(CASE WHEN r.released THEN d.last_status ELSE r.status END),
		pg_catalog.array_agg(CASE WHEN r.released THEN d.last_error WHEN r.ok THEN NULL
			ELSE pg_catalog.left(coalesce(r.error, 'HTTP ' OPERATOR(pg_catalog.||) r.status), 500) END),
		pg_catalog.array_agg(CASE WHEN r.ok THEN attempt_at END),
		pg_catalog.array_agg(CASE WHEN NOT r.ok AND NOT r.released THEN s.dead_at END),
		pg_catalog.array_agg(CASE WHEN r.released THEN attempt_at WHEN r.ok THEN d.next_attempt_at
			ELSE s.next_attempt_at END)
	INTO ids, orders, toks, att, lasts, st, errs, done, dead, nexts
	FROM (SELECT u.id, u.status, u.error, u.lease,
				 coalesce(u.status OPERATOR(pg_catalog.>=) 200 AND u.status OPERATOR(pg_catalog.<=) 299, false) AS ok,
				 u.status IS NULL AND u.error IS NULL AS released
		  FROM unnest(delivery_ids, statuses, errors, leases) u(id, status, error, lease)
		  WHERE u.id IS NOT NULL AND u.lease IS NOT NULL) r
		JOIN @extschema@.paynotify_delivery d ON d.id OPERATOR(pg_catalog.=) r.id
		JOIN @extschema@.paynotify_endpoint e ON e.id OPERATOR(pg_catalog.=) d.endpoint_id
		CROSS JOIN LATERAL @extschema@.paynotify_retry_schedule(attempt_at, d.started_at, d.attempts,
			e.retry_base, e.retry_max, e.retry_horizon) s
	WHERE d.delivered_at IS NULL AND d.dead_at IS NULL AND d.lease OPERATOR(pg_catalog.=) r.lease
	  AND d.id OPERATOR(pg_catalog.=) ANY (got);
	UPDATE @extschema@.paynotify_delivery d SET
		attempts = v.attempts,
		last_attempt_at = v.last_attempt_at,
		last_status = v.status,
		last_error = v.error,
		delivered_at = v.delivered_at,
		dead_at = v.dead_at,
		next_attempt_at = v.next_attempt_at,
		lease = NULL,
		leased_until = NULL
	FROM unnest(ids, orders, toks, att, lasts, st, errs, done, dead, nexts)
		v(id, order_no, lease, attempts, last_attempt_at, status, error, delivered_at, dead_at, next_attempt_at)
	WHERE d.order_no OPERATOR(pg_catalog.=) v.order_no AND d.id OPERATOR(pg_catalog.=) v.id
	  AND d.lease OPERATOR(pg_catalog.=) v.lease
	  AND d.delivered_at IS NULL AND d.dead_at IS NULL;
	GET DIAGNOSTICS n = ROW_COUNT;
	recorded := n;
	RETURN NEXT;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_relay_report(bigint[], integer[], text[], bigint[]) IS
	'paynotify-relay: records the results of leased deliveries (2xx delivered, else a retry with backoff or dead past the horizon; status and error NULL: not attempted, due again) where each still holds its lease; returns how many were recorded, and the deliveries skipped because another transaction held their row lock (to report again)';

REVOKE ALL ON FUNCTION @extschema@.paynotify_relay_lease(integer, integer),
	@extschema@.paynotify_relay_report(bigint[], integer[], text[], bigint[]) FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('relay'::pg_catalog.text, f::pg_catalog.regprocedure, NULL::pg_catalog.regclass)
FROM pg_catalog.unnest(ARRAY['@extschema@.paynotify_relay_lease(integer, integer)',
	 '@extschema@.paynotify_relay_report(bigint[], integer[], text[], bigint[])']) f;

-- The three-argument report (a relay of 1.3 during the upgrade: its claim
-- is a row lock held until it reports) records a result only for a
-- delivery no lease holds (none, or one that has ended), and clears the
-- ended lease: a 1.3 report could otherwise mark delivered a delivery a
-- 1.4 relay holds, and one it failed kept the lease's token (the holder's
-- later report still recorded) and counted against max_in_flight.  A 1.3
-- claim takes a delivery only once its lease has ended (next_attempt_at is
-- the lease's end), so its report is still recorded.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_report(delivery_ids bigint[], statuses integer[],
		errors text[])
	RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n integer;
	attempt_at timestamptz := pg_catalog.clock_timestamp();
	ids bigint[];
	orders text[];
	st integer[];
	errs text[];
	done timestamptz[];
	dead timestamptz[];
	nexts timestamptz[];
BEGIN
	-- The new values are read first, then written as they are (one way on
	-- one server and on Citus); the deliveries are the caller's claims,
	-- locked, and no live lease holds them.
	SELECT pg_catalog.array_agg(d.id), pg_catalog.array_agg(d.order_no), pg_catalog.array_agg(r.status),
		pg_catalog.array_agg(CASE WHEN r.ok THEN NULL
			ELSE pg_catalog.left(coalesce(r.error, 'HTTP ' OPERATOR(pg_catalog.||) r.status), 500) END),
		pg_catalog.array_agg(CASE WHEN r.ok THEN attempt_at END),
		pg_catalog.array_agg(CASE WHEN NOT r.ok THEN s.dead_at END),
		pg_catalog.array_agg(CASE WHEN r.ok THEN d.next_attempt_at ELSE s.next_attempt_at END)
	INTO ids, orders, st, errs, done, dead, nexts
	FROM (SELECT u.id, u.status, u.error,
				 coalesce(u.status OPERATOR(pg_catalog.>=) 200 AND u.status OPERATOR(pg_catalog.<=) 299, false) AS ok
		  FROM unnest(delivery_ids, statuses, errors) u(id, status, error)
		  WHERE u.id IS NOT NULL) r
		JOIN @extschema@.paynotify_delivery d ON d.id OPERATOR(pg_catalog.=) r.id
		JOIN @extschema@.paynotify_endpoint e ON e.id OPERATOR(pg_catalog.=) d.endpoint_id
		CROSS JOIN LATERAL @extschema@.paynotify_retry_schedule(attempt_at, d.started_at, d.attempts,
			e.retry_base, e.retry_max, e.retry_horizon) s
	WHERE d.delivered_at IS NULL AND d.dead_at IS NULL
	  AND (d.leased_until IS NULL OR d.leased_until OPERATOR(pg_catalog.<=) attempt_at);
	UPDATE @extschema@.paynotify_delivery d SET
		attempts = pg_catalog.int4smaller(d.attempts, 2147483646) OPERATOR(pg_catalog.+) 1,
		last_attempt_at = attempt_at,
		last_status = v.status,
		last_error = v.error,
		delivered_at = v.delivered_at,
		dead_at = v.dead_at,
		next_attempt_at = v.next_attempt_at,
		lease = NULL,
		leased_until = NULL
	FROM unnest(ids, orders, st, errs, done, dead, nexts)
		v(id, order_no, status, error, delivered_at, dead_at, next_attempt_at)
	WHERE d.order_no OPERATOR(pg_catalog.=) v.order_no AND d.id OPERATOR(pg_catalog.=) v.id
	  AND d.delivered_at IS NULL AND d.dead_at IS NULL
	  AND (d.leased_until IS NULL OR d.leased_until OPERATOR(pg_catalog.<=) attempt_at);
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

-- On Citus the lease and its report reach each node over one connection,
-- as the claim and the report of 1.3 (paynotify_relay_on_citus).
CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_on_citus()
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	SET citus.enable_ddl_propagation = off
	AS $$
BEGIN
	ALTER FUNCTION @extschema@.paynotify_relay_claim(integer)
		SET citus.max_adaptive_executor_pool_size = 1
		SET citus.force_max_query_parallelization = off;
	ALTER FUNCTION @extschema@.paynotify_relay_report(bigint[], integer[], text[])
		SET citus.max_adaptive_executor_pool_size = 1
		SET citus.force_max_query_parallelization = off;
	ALTER FUNCTION @extschema@.paynotify_relay_lease(integer, integer)
		SET citus.max_adaptive_executor_pool_size = 1
		SET citus.force_max_query_parallelization = off;
	ALTER FUNCTION @extschema@.paynotify_relay_report(bigint[], integer[], text[], bigint[])
		SET citus.max_adaptive_executor_pool_size = 1
		SET citus.force_max_query_parallelization = off;
END
$$;

-- The two claims as 1.1 and 1.3 wrote them called paynotify_distributed
-- with an untyped literal: paynotify_distributed(text), planted in the
-- extension's schema by a role that may create there, would have been the
-- better match and run as paynotify's owner.  They are written again with
-- the argument of its exact type, as every call of paynotify's own
-- functions now is (their text in 1.1--1.2 and 1.2--1.3 too); on Citus
-- paynotify_relay_on_citus below sets the claim's settings again.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_outbox_claim(max_rows integer DEFAULT 100)
	RETURNS SETOF @extschema@.paynotify_outbox
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	cand record;
	after bigint := -9223372036854775808;
	taken bigint := 0;
	want bigint;
	seen bigint;
	got bigint;
BEGIN
	-- one answer on both paths (the Citus loop would just return nothing)
	IF max_rows < 0 THEN
		RAISE EXCEPTION 'max_rows must not be negative' USING ERRCODE = 'invalid_row_count_in_limit_clause';
	END IF;
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_outbox'::pg_catalog.regclass) THEN
		RETURN QUERY
		DELETE FROM @extschema@.paynotify_outbox o
		WHERE o.id IN (SELECT i.id FROM @extschema@.paynotify_outbox i
					   ORDER BY i.id LIMIT max_rows FOR UPDATE SKIP LOCKED)
		RETURNING o.*;
		RETURN;
	END IF;
	LOOP
		want := coalesce(max_rows, 2147483647) - taken;
		EXIT WHEN want <= 0;
		seen := 0;
		FOR cand IN SELECT i.id, i.order_no FROM @extschema@.paynotify_outbox i
					WHERE i.id > after ORDER BY i.id LIMIT want LOOP
			seen := seen + 1;
			after := cand.id;
			RETURN QUERY
			DELETE FROM @extschema@.paynotify_outbox o
			WHERE o.order_no = cand.order_no AND o.id = cand.id
			  AND o.id IN (SELECT i.id FROM @extschema@.paynotify_outbox i
						   WHERE i.order_no = cand.order_no AND i.id = cand.id
						   FOR UPDATE SKIP LOCKED)
			RETURNING o.*;
			GET DIAGNOSTICS got = ROW_COUNT;
			taken := taken + got;
		END LOOP;
		EXIT WHEN seen < want;
	END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_claim(max_rows integer DEFAULT 100)
	RETURNS TABLE (delivery_id bigint, webhook_id text, endpoint_id bigint, url text,
				   secret text, max_in_flight integer, attempts integer, body text)
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	ep record;
	cand record;
	ids bigint[] := '{}';
	orders text[] := '{}';
	dues timestamptz[] := '{}';
BEGIN
	IF NOT @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		RETURN QUERY
		WITH candidate AS MATERIALIZED (
			SELECT c.id
			FROM @extschema@.paynotify_endpoint e
				CROSS JOIN LATERAL (
					SELECT r.id, r.next_attempt_at
					FROM @extschema@.paynotify_delivery_ready r
					WHERE r.endpoint_id = e.id
					ORDER BY r.next_attempt_at
					LIMIT e.max_in_flight) c
			WHERE e.enabled
			ORDER BY c.next_attempt_at
			LIMIT max_rows)
		SELECT d.id, d.webhook_id, d.endpoint_id, e.url, e.secret, e.max_in_flight,
			d.attempts, d.body
		FROM @extschema@.paynotify_delivery d
			JOIN @extschema@.paynotify_endpoint e ON e.id = d.endpoint_id
		WHERE d.id IN (SELECT candidate.id FROM candidate)
		  AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.next_attempt_at <= pg_catalog.now()
		  AND e.enabled
		ORDER BY d.next_attempt_at
		FOR UPDATE OF d SKIP LOCKED;
		RETURN;
	END IF;
	-- Citus: the candidates of each endpoint read across the shards without
	-- locks (Citus neither locks rows nor pushes a LIMIT per endpoint down
	-- across shards), then each locked on its own shard by order_no and id.
	-- A delivery also waits for an event of its order still in the outbox
	-- with a lower order_seq: fan-outs on two nodes run at once (each node
	-- has its own advisory lock), and one may take an order's later event
	-- before the other has made the deliveries of its earlier one.  The
	-- outbox rows and deliveries of an order are on one shard, read by one
	-- statement there: an event is in one or the other.  Events of no
	-- order (notifications that name none) wait for nothing.
	FOR ep IN SELECT e.id, e.max_in_flight FROM @extschema@.paynotify_endpoint e WHERE e.enabled LOOP
		FOR cand IN
			SELECT r.id, r.order_no, r.next_attempt_at
			FROM @extschema@.paynotify_delivery_ready r
			WHERE r.endpoint_id = ep.id
			  AND (r.order_no = ''
				   OR NOT EXISTS (SELECT FROM @extschema@.paynotify_outbox o
								  WHERE o.order_no = r.order_no
									AND coalesce(o.order_seq, o.id) < r.order_seq))
			ORDER BY r.next_attempt_at
			LIMIT ep.max_in_flight LOOP
			ids := ids || cand.id;
			orders := orders || cand.order_no;
			dues := dues || cand.next_attempt_at;
		END LOOP;
	END LOOP;
	FOR cand IN SELECT u.id, u.order_no FROM unnest(ids, orders, dues) u(id, order_no, due)
				ORDER BY u.due LIMIT max_rows LOOP
		RETURN QUERY
		SELECT d.id, d.webhook_id, d.endpoint_id, e.url, e.secret, e.max_in_flight,
			d.attempts, d.body
		FROM @extschema@.paynotify_delivery d
			JOIN @extschema@.paynotify_endpoint e ON e.id = d.endpoint_id
		WHERE d.order_no = cand.order_no AND d.id = cand.id
		  AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.next_attempt_at <= pg_catalog.now()
		  AND e.enabled
		FOR UPDATE OF d SKIP LOCKED;
	END LOOP;
END
$$;

DO $$
BEGIN
	IF @extschema@.paynotify_distributed('@extschema@.paynotify_delivery'::pg_catalog.regclass) THEN
		PERFORM @extschema@.paynotify_relay_on_citus();
	END IF;
END
$$;

-- The log's primary key leads with order_no, as payment_record's does
-- (1.3): the same three columns, so the same rows are unique, and the
-- order's notifications (paynotify_trace_order, the parked list) read by
-- its prefix, which makes payment_notify_log_order, an index every first
-- delivery also wrote, redundant.  The key still holds the distribution
-- column, as a Citus key must; (channel, notify_id) keeps its own unique
-- constraint (a plain index on Citus).
-- By EXECUTE, where not made yet: on Citus, see the log's source column.
DO $$
BEGIN
	-- (the comparison by OPERATOR(pg_catalog.=): IS DISTINCT FROM would
	-- look its operator up on the search_path)
	IF NOT coalesce((SELECT pg_catalog.array_agg(a.attname ORDER BY k.n)
		FROM pg_catalog.pg_constraint c,
			 LATERAL pg_catalog.unnest(c.conkey) WITH ORDINALITY k(attnum, n)
		JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) '@extschema@.payment_notify_log'::regclass
			AND a.attnum OPERATOR(pg_catalog.=) k.attnum
		WHERE c.conrelid OPERATOR(pg_catalog.=) '@extschema@.payment_notify_log'::regclass
		  AND c.conname OPERATOR(pg_catalog.=) 'payment_notify_log_pkey')
	   OPERATOR(pg_catalog.=) '{order_no,channel,notify_id}'::pg_catalog.name[], false) THEN
		-- (two statements: Citus takes no ADD CONSTRAINT beside another subcommand)
		EXECUTE 'ALTER TABLE @extschema@.payment_notify_log DROP CONSTRAINT payment_notify_log_pkey';
		EXECUTE 'ALTER TABLE @extschema@.payment_notify_log
			ADD CONSTRAINT payment_notify_log_pkey PRIMARY KEY (order_no, channel, notify_id)';
	END IF;
	EXECUTE 'DROP INDEX IF EXISTS @extschema@.payment_notify_log_order';
END
$$;


-- ===== The business step on the order's node (Citus) =====
--
-- paynotify_step_at runs an authentic notice's business step where it is
-- called: on Citus, paynotify_distribute() distributes it by its order_no
-- argument with force_delegation, so that paynotify_handle's call (its
-- arguments parameters the planner folds to constants) is sent to the node that holds the order's
-- shard, as one statement.  It trusts its notice as authentic: whoever
-- can call it can pay any order.  EXECUTE is revoked from PUBLIC and
-- granted to nobody (no capacity of paynotify_grant names it): only
-- paynotify's owner, inside paynotify_handle and paynotify_query_apply,
-- calls it.  On one server paynotify_handle runs the same code in process.
CREATE FUNCTION @extschema@.paynotify_step_at(order_no text, channel text, notify_id text,
		notice jsonb, payload jsonb, headers jsonb, lock_timeout_ms integer,
		commit_level text, delivery_history text,
		OUT outcome text, OUT error text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_step_at'
	LANGUAGE C VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off;
COMMENT ON FUNCTION @extschema@.paynotify_step_at(text, text, text, jsonb, jsonb, jsonb, integer, text, text) IS
	'internal: the business step of an authentic notice on its order''s node (Citus); callable by paynotify''s owner only';
REVOKE ALL ON FUNCTION @extschema@.paynotify_step_at(text, text, text, jsonb, jsonb, jsonb, integer, text, text) FROM PUBLIC;

-- paynotify_distribute() distributes it too (see above)
-- Whether a search_path value lists a schema before pg_catalog, read as
-- the server reads it: names separated by commas, white space around them
-- ignored, an unquoted name folded to lower case, a quoted one taken as
-- written.  pg_catalog not listed at all is searched first: false.
CREATE FUNCTION @extschema@.paynotify_search_path_late(sp text)
	RETURNS boolean
	LANGUAGE sql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT coalesce(pg_catalog.bool_or(u.i OPERATOR(pg_catalog.>) 1), false)
FROM pg_catalog.unnest(pg_catalog.string_to_array(sp, ',')) WITH ORDINALITY u(x, i)
WHERE CASE WHEN pg_catalog.btrim(u.x, E' \t\n\r\f\v') LIKE '"%"'
		   THEN pg_catalog.replace(pg_catalog.substr(pg_catalog.btrim(u.x, E' \t\n\r\f\v'), 2,
						pg_catalog.length(pg_catalog.btrim(u.x, E' \t\n\r\f\v')) OPERATOR(pg_catalog.-) 2),
						'""', '"')
		   ELSE pg_catalog.lower(pg_catalog.btrim(u.x, E' \t\n\r\f\v')) END
	  OPERATOR(pg_catalog.=) 'pg_catalog'
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_search_path_late(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_distribute()
	RETURNS TABLE (relation regclass, kind text, action text)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	step_at regprocedure := '@extschema@.paynotify_step_at(text, text, text, jsonb, jsonb, jsonb, integer, text, text)'::regprocedure;
	b record;
	orders regclass;
	key_type regtype;
	part record;
	orders_colocation integer;
	t record;
	u record;
	ext oid := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'paynotify');
	fk_rels regclass[];
	fk_names name[];
	fk_defs text[];
	orders_owner regrole;
	orders_code text;
	-- What each node needs of its own, run on every node (the same text;
	-- on the workers in a session of their own, whose search_path is the
	-- node's: the block pins it before anything else).
	-- Each node's identity sequences of the notification tables get their
	-- own range: node group g hands out ids (g << 48) + 1 .. (g + 1) << 48
	-- (the coordinator, group 0, from 1), as Citus does for the tables it
	-- creates itself.  CREATE EXTENSION made every node's copy start at 1,
	-- and ids are taken on the node that runs paynotify_handle: without
	-- this, two nodes would hand out the same outbox id (webhook-id
	-- "evt_<id>") or anomaly id.  And the relay's claim and report reach
	-- each node over one connection (paynotify_relay_on_citus).
	ranges constant text := $do$
DO $r$
DECLARE
	g bigint;
	lo bigint;
	hi bigint;
	q record;
BEGIN
	-- first of all: what follows is parsed now, and resolves nothing in a
	-- schema of the node's search_path (public, with operators of someone
	-- else's: "=" for oid and regclass is an exact match there, a better
	-- one than pg_catalog's); each name and operator is qualified as well
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
	g := (SELECT l.groupid FROM pg_catalog.pg_dist_local_group l);
	lo := (g OPERATOR(pg_catalog.<<) 48) OPERATOR(pg_catalog.+) 1;
	hi := (g OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.<<) 48;
	FOR q IN SELECT d.objid::pg_catalog.regclass AS seq, s.min_value, s.last_value
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_depend e
				ON e.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
				AND e.objid OPERATOR(pg_catalog.=) d.refobjid AND e.deptype OPERATOR(pg_catalog.=) 'e'
				AND e.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass::pg_catalog.oid
				AND e.refobjid OPERATOR(pg_catalog.=) (SELECT x.oid FROM pg_catalog.pg_extension x
													   WHERE x.extname OPERATOR(pg_catalog.=) 'paynotify')
			 JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
			 JOIN pg_catalog.pg_sequences s
				ON s.schemaname OPERATOR(pg_catalog.=) c.relnamespace::pg_catalog.regnamespace::pg_catalog.name
				AND s.sequencename OPERATOR(pg_catalog.=) c.relname
			 WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
			   AND d.deptype OPERATOR(pg_catalog.=) 'i'
			   AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
			   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
						   WHERE a.attrelid OPERATOR(pg_catalog.=) d.refobjid
							 AND a.attname OPERATOR(pg_catalog.=) 'order_no' AND NOT a.attisdropped) LOOP
		IF q.min_value OPERATOR(pg_catalog.<>) lo THEN
			EXECUTE pg_catalog.format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START %s RESTART %s',
				q.seq, lo, hi, lo, greatest(lo, coalesce(q.last_value OPERATOR(pg_catalog.+) 1, lo)));
		END IF;
	END LOOP;
	PERFORM @extschema@.paynotify_relay_on_citus();
END
$r$
$do$;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RAISE EXCEPTION 'paynotify_distribute needs the citus extension in this database'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'On the Citus coordinator: CREATE EXTENSION citus, add the workers, CREATE EXTENSION paynotify, paynotify_bind_orders, then SELECT * FROM paynotify_distribute().';
	END IF;
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
			AND current_user::regrole <> (SELECT e.extowner::regrole FROM pg_catalog.pg_extension e
										  WHERE e.extname = 'paynotify') THEN
		RAISE EXCEPTION 'only a superuser or the owner of extension paynotify may distribute its tables'
			USING ERRCODE = 'insufficient_privilege';
	END IF;
	-- Citus's connections between the nodes (a notification's statements,
	-- the delegated step) run as paynotify's owner with each node's own
	-- settings, and name pg_catalog's types, operators and functions
	-- unqualified: a search_path there that lists another schema before
	-- pg_catalog would resolve them in that schema first, as that role.
	-- Refused on every node before anything is changed.
	-- The values that apply to the extension's owner in this database on
	-- each node: what this session would reset to, and every setting of
	-- the database or of the owner (ALTER DATABASE / ALTER ROLE ... SET).
	FOR t IN SELECT 'the coordinator'::text AS node, v.sp, true AS checked
			 FROM (SELECT s.reset_val AS sp FROM pg_catalog.pg_settings s WHERE s.name = 'search_path'
				   UNION ALL
				   SELECT pg_catalog.substr(c, 13)
				   FROM pg_catalog.pg_db_role_setting d, pg_catalog.unnest(d.setconfig) c
				   WHERE d.setdatabase IN (0, (SELECT b.oid FROM pg_catalog.pg_database b
											   WHERE b.datname = pg_catalog.current_database()))
					 AND d.setrole IN (0, (SELECT e.extowner FROM pg_catalog.pg_extension e
										  WHERE e.extname = 'paynotify'))
					 AND pg_catalog.starts_with(c, 'search_path=')) v
			 WHERE @extschema@.paynotify_search_path_late(v.sp)
			 UNION ALL
			 SELECT pg_catalog.format('worker %s:%s', w.nodename, w.nodeport), w.result, w.success
			 FROM pg_catalog.run_command_on_workers(pg_catalog.format($w$
				SELECT pg_catalog.string_agg(v.sp, ' / ')
				FROM (SELECT s.reset_val AS sp FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'search_path'
					  UNION ALL
					  SELECT pg_catalog.substr(c, 13)
					  FROM pg_catalog.pg_db_role_setting d, pg_catalog.unnest(d.setconfig) c
					  WHERE d.setdatabase OPERATOR(pg_catalog.=) ANY (ARRAY[0, (SELECT b.oid FROM pg_catalog.pg_database b
											   WHERE b.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())]::pg_catalog.oid[])
						AND d.setrole OPERATOR(pg_catalog.=) ANY (ARRAY[0, (SELECT e.extowner FROM pg_catalog.pg_extension e
											 WHERE e.extname OPERATOR(pg_catalog.=) 'paynotify')]::pg_catalog.oid[])
						AND pg_catalog.starts_with(c, 'search_path=')) v
				WHERE %s.paynotify_search_path_late(v.sp)$w$, '@extschema@')) w
			 WHERE NOT w.success OR w.result OPERATOR(pg_catalog.<>) '' LOOP
		-- a worker whose settings could not be read is not a worker checked
		IF NOT t.checked THEN
			RAISE EXCEPTION 'the search_path of % could not be checked: %', t.node, t.sp
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'Make the node reachable with paynotify installed in this database, then call paynotify_distribute() again.';
		END IF;
		RAISE EXCEPTION 'the search_path of % lists another schema before pg_catalog: %', t.node, t.sp
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Citus''s connections between the nodes run as paynotify''s owner with the node''s settings and name pg_catalog''s types and operators unqualified: they would be looked up in that schema first.',
				  HINT = 'Reset it on that node (ALTER DATABASE ... RESET search_path, or ALTER ROLE ... IN DATABASE ... RESET search_path), then call paynotify_distribute() again.  Each node''s database owner is trusted like a superuser (docs/CITUS.md).';
	END LOOP;
	SELECT * INTO b FROM @extschema@.paynotify_binding;
	orders := pg_catalog.to_regclass(b.orders);
	IF orders IS NULL THEN
		RAISE EXCEPTION 'no orders table is bound'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Call paynotify_bind_orders first: the notification tables are co-located with the orders table.';
	END IF;
	SELECT a.atttypid::regtype INTO key_type FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = orders AND a.attname = b.key_column AND NOT a.attisdropped;
	IF key_type IS DISTINCT FROM 'text'::regtype THEN
		RAISE EXCEPTION 'the key column "%" of the orders table % is %, not text', b.key_column, orders, key_type
			USING ERRCODE = 'datatype_mismatch',
				  DETAIL = 'Citus co-locates only tables whose distribution columns have the same type; paynotify''s order numbers are text.',
				  HINT = pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I TYPE text (before the orders table is distributed), then call paynotify_distribute() again.', orders, b.key_column);
	END IF;
	-- Copying a table's rows into its shards runs the table's code (its
	-- triggers, constraints, index expressions, its columns' types and
	-- domains) with the rights of the role that distributes it, here the
	-- caller's, and on the workers over the caller's connections.  No table
	-- is distributed here whose owner could have put code there that must
	-- not run with those rights: the owner of a table still to be
	-- distributed has the caller's privileges (is the caller, a superuser,
	-- or a member of the caller's role), and the orders table runs no code
	-- of a role without them (paynotify_table_authors) and is owned by a
	-- role with them.  Checked before anything is changed.
	SELECT c.oid::regclass AS rel, c.relowner::regrole AS owner INTO u
		FROM pg_catalog.pg_depend d
		JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
		WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
		  AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
		  AND NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = c.oid)
		  AND NOT pg_catalog.pg_has_role(c.relowner, current_user, 'USAGE')
		ORDER BY c.relname LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'table % of extension paynotify is owned by role "%", whose code may not run as role "%"',
				u.rel, u.owner, current_user
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Distributing a table copies its rows into its shards, which runs its triggers with the rights of the role that distributes it.',
				  HINT = pg_catalog.format('Call paynotify_distribute() as role "%s".', u.owner);
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = orders) THEN
		-- the table (and its partitions) held until the copy: no trigger,
		-- rule, policy or column is given to it meanwhile, so what is
		-- judged below (the code it runs, its TRIGGER grantees, its owner)
		-- is what the copy runs
		EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', orders);
		SELECT c.relowner::regrole INTO orders_owner FROM pg_catalog.pg_class c WHERE c.oid = orders;
		SELECT a.what OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) a.object
			   OPERATOR(pg_catalog.||) ' of role ' OPERATOR(pg_catalog.||)
			   CASE WHEN a.owner OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.owner::pg_catalog.regrole::text END
			INTO orders_code
			FROM (SELECT f.what, 'function ' OPERATOR(pg_catalog.||) f.fn::text AS object, f.owner::oid AS owner
				  FROM @extschema@.paynotify_table_authors(orders) f
				  UNION ALL
				  SELECT o.what, o.object, o.owner::oid FROM @extschema@.paynotify_table_owners(orders) o) a
			WHERE CASE WHEN a.owner OPERATOR(pg_catalog.=) 0 THEN true
					   ELSE NOT pg_catalog.pg_has_role(a.owner, current_user, 'USAGE') END
			  -- (the owner's own row is judged below; the roles it granted
			  -- TRIGGER on the table, and PUBLIC, here)
			  AND NOT (a.what OPERATOR(pg_catalog.=) pg_catalog.format('the code of %s', orders)
					   AND a.owner OPERATOR(pg_catalog.=) orders_owner::pg_catalog.oid)
			ORDER BY a.what LIMIT 1;
		IF orders_code IS NOT NULL THEN
			RAISE EXCEPTION 'the orders table % runs code of a role whose rights role "%" has and it has not',
					orders, current_user
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = pg_catalog.format('Distributing it copies its rows into its shards, which runs %s with the rights of the role that distributes it.', orders_code),
					  HINT = pg_catalog.format('Have its owner, %s, distribute it (SET citus.enable_unsafe_triggers = on first if it has triggers; paynotify''s guard needs EXECUTE on paynotify_guard_transition() for the owner on every node): SELECT create_distributed_table(%L, %L); then call paynotify_distribute() again.',
											   orders_owner, orders, b.key_column);
		END IF;
		-- Its owner's own code (its constraints, defaults, index
		-- expressions, triggers' conditions) runs in the copy too, and may
		-- run SQL it holds as text through a function no one would
		-- suspect (query_to_xml('SELECT ...'), owned by the bootstrap
		-- superuser): an orders table whose owner lacks the caller's
		-- rights is distributed by its owner, never here.
		IF NOT pg_catalog.pg_has_role(orders_owner, current_user, 'USAGE') THEN
			RAISE EXCEPTION 'the orders table % is owned by role "%", whose code may not run as role "%"',
					orders, orders_owner, current_user
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = 'Distributing it copies its rows into its shards, which runs its code (constraints, defaults, index expressions, triggers; any of it may run SQL it holds as text) with the rights of the role that distributes it.',
					  HINT = pg_catalog.format('Have its owner, %s, distribute it (SET citus.enable_unsafe_triggers = on first if it has triggers; paynotify''s guard needs EXECUTE on paynotify_guard_transition() for the owner on every node): SELECT create_distributed_table(%L, %L); then call paynotify_distribute() again.',
											   orders_owner, orders, b.key_column);
		END IF;
	END IF;
	-- Citus refuses to distribute tables with triggers unless told that it
	-- may: the configuration tables' triggers only touch configuration
	-- tables (reference tables, the same rows on every node)
	PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
	-- foreign keys to reference tables are added in the same transaction as
	-- the distribution, which Citus allows one shard at a time only
	PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);

	-- The foreign keys between the extension's tables (a key's channel, a
	-- delivery's endpoint) are taken off while their tables are not all
	-- distributed, and put back at the end: Citus would otherwise turn the
	-- referencing table into a local table of its own when the referenced
	-- one becomes a reference table.
	SELECT pg_catalog.array_agg(f.conrelid::regclass ORDER BY f.conname),
		   pg_catalog.array_agg(f.conname ORDER BY f.conname),
		   pg_catalog.array_agg(pg_catalog.pg_get_constraintdef(f.oid) ORDER BY f.conname)
		INTO fk_rels, fk_names, fk_defs
		FROM pg_catalog.pg_constraint f
		JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass
			AND d.objid = f.conrelid AND d.deptype = 'e'
			AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
		WHERE f.contype = 'f'
		  AND NOT (EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = f.conrelid)
				   AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = f.confrelid));
	FOR i IN 1 .. coalesce(pg_catalog.array_length(fk_names, 1), 0) LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', fk_rels[i], fk_names[i]);
		-- the workers' copies of the table (CREATE EXTENSION made them) too:
		-- Citus puts the key back on them when it is added below.  Not in
		-- this transaction: if this function fails later, a second call
		-- finds them gone already and adds them back.
		IF EXISTS (SELECT FROM pg_catalog.run_command_on_workers(
					   pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT IF EXISTS %I', fk_rels[i], fk_names[i])) w
				   WHERE NOT w.success) THEN
			RAISE EXCEPTION 'could not drop foreign key % of % on every worker', fk_names[i], fk_rels[i]
				USING ERRCODE = 'connection_failure',
					  HINT = 'Check that every worker is up (citus_check_cluster_node_health()), then call paynotify_distribute() again.';
		END IF;
	END LOOP;

	-- configuration: reference tables
	FOR t IN SELECT c.oid::regclass AS rel, p.partmethod
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
			 LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
			   AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
			   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
							   AND a.attname = 'order_no' AND NOT a.attisdropped)
			 ORDER BY c.relname LOOP
		relation := t.rel;
		kind := 'reference';
		IF t.partmethod IS NULL THEN
			PERFORM pg_catalog.create_reference_table(t.rel);
			action := 'created';
		ELSIF t.partmethod = 'n' AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
				WHERE p.logicalrelid = t.rel AND p.repmodel = 't') THEN
			action := 'already';
		ELSE
			RAISE EXCEPTION 'table % is already distributed, not a reference table', t.rel
				USING ERRCODE = 'invalid_table_definition',
					  HINT = pg_catalog.format('SELECT undistribute_table(%L), then call paynotify_distribute() again.', t.rel);
		END IF;
		RETURN NEXT;
	END LOOP;

	-- the orders table, by its key column
	SELECT p.partmethod, p.colocationid,
		   CASE WHEN p.partmethod = 'h' THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END AS col
		INTO part FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = orders;
	relation := orders;
	kind := 'orders';
	IF NOT FOUND THEN
		PERFORM pg_catalog.create_distributed_table(orders, b.key_column::text);
		action := 'created';
	ELSIF part.partmethod = 'h' AND part.col = b.key_column THEN
		action := 'already';
	ELSE
		RAISE EXCEPTION 'the orders table % is distributed otherwise than by its key column "%"%', orders, b.key_column,
				CASE WHEN part.col IS NOT NULL THEN pg_catalog.format(' (by "%s")', part.col)
					 ELSE ' (a reference or local table)' END
			USING ERRCODE = 'invalid_table_definition',
				  DETAIL = 'Every notification is routed to the node of its order: the orders table must be hash-distributed by the column that holds the order number.',
				  HINT = pg_catalog.format('SELECT undistribute_table(%L), then call paynotify_distribute() again (it distributes it by %I).', orders, b.key_column);
	END IF;
	RETURN NEXT;
	SELECT p.colocationid INTO orders_colocation FROM pg_catalog.pg_dist_partition p
		WHERE p.logicalrelid = orders;

	-- notification data: by order_no, co-located with the orders table
	FOR t IN SELECT c.oid::regclass AS rel, p.partmethod, p.colocationid
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
			 LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
			   AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext
			   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
						   AND a.attname = 'order_no' AND NOT a.attisdropped)
			 ORDER BY c.relname LOOP
		relation := t.rel;
		kind := 'distributed';
		IF t.partmethod IS NULL THEN
			-- a unique key without order_no (payment_notify_log_notify,
			-- payment_record_trade: see above) cannot exist on Citus: a
			-- plain index of the same name and columns takes its place
			FOR u IN SELECT con.conname,
						 (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY k.i)
						  FROM pg_catalog.unnest(con.conkey) WITH ORDINALITY k(n, i)
						  JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n) AS cols
					 FROM pg_catalog.pg_constraint con
					 WHERE con.conrelid = t.rel AND con.contype = 'u'
					   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a
									   WHERE a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey)
										 AND a.attname = 'order_no') LOOP
				EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', t.rel, u.conname);
				EXECUTE pg_catalog.format('CREATE INDEX %I ON %s (%s)', u.conname, t.rel, u.cols);
			END LOOP;
			PERFORM pg_catalog.create_distributed_table(t.rel, 'order_no', colocate_with => orders::text);
			action := 'created';
		ELSIF t.colocationid = orders_colocation THEN
			action := 'already';
		ELSE
			RAISE EXCEPTION 'table % is already distributed, not by order_no with the orders table %', t.rel, orders
				USING ERRCODE = 'invalid_table_definition',
					  HINT = pg_catalog.format('SELECT undistribute_table(%L), then call paynotify_distribute() again.', t.rel);
		END IF;
		RETURN NEXT;
	END LOOP;

	FOR i IN 1 .. coalesce(pg_catalog.array_length(fk_names, 1), 0) LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk_rels[i], fk_names[i], fk_defs[i]);
	END LOOP;

	-- each order's sequence (paynotify_order_seq) continues above every
	-- event recorded for it before: on one server the outbox id was its
	-- sequence (idempotent: a value is never lowered)
	INSERT INTO @extschema@.paynotify_order_seq AS q (order_no, last)
		SELECT s.order_no, pg_catalog.max(s.seq)
		FROM (SELECT o.order_no, coalesce(o.order_seq, o.id) AS seq FROM @extschema@.paynotify_outbox o
			  UNION ALL
			  SELECT d.order_no, d.order_seq FROM @extschema@.paynotify_delivery d) s
		GROUP BY s.order_no
		ON CONFLICT (order_no) DO UPDATE SET last = greatest(q.last, excluded.last);
	relation := '@extschema@.paynotify_order_seq'::regclass;
	kind := 'order sequences';
	action := 'continued above the events recorded before';
	RETURN NEXT;

	-- the identity ranges (see ranges above), here and on every worker
	EXECUTE ranges;
	IF EXISTS (SELECT FROM pg_catalog.run_command_on_workers(ranges) w WHERE NOT w.success) THEN
		RAISE EXCEPTION 'could not give the identity sequences of every worker their range'
			USING ERRCODE = 'connection_failure',
				  HINT = 'Check that every worker is up (citus_check_cluster_node_health()), then call paynotify_distribute() again.';
	END IF;
	relation := NULL;
	kind := 'identity ranges';
	action := 'node group g: ids (g << 48) + 1 .. (g + 1) << 48';
	RETURN NEXT;

	-- the business step (1.4): delegated to the node of its order's shard
	-- (its order_no argument, co-located with the orders table), so that a
	-- first delivery's statements run there as one call
	relation := NULL;
	kind := 'delegated function';
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_object o
			   WHERE o.classid = 'pg_catalog.pg_proc'::regclass
				 AND o.objid = step_at
				 AND o.distribution_argument_index = 0
				 AND o.colocationid = orders_colocation
				 AND o.force_delegation) THEN
		action := pg_catalog.format('already: %s', step_at);
	ELSE
		PERFORM pg_catalog.create_distributed_function(step_at, 'order_no',
			colocate_with => orders::text, force_delegation => true);
		action := pg_catalog.format('created: %s', step_at);
	END IF;
	RETURN NEXT;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_distribute() IS
	'Citus: makes the configuration tables reference tables, distributes the orders table and every notification table by order number, co-located, and the business step (paynotify_step_at) by its order; idempotent';



-- ===== Agreements (subscriptions) =====
--
-- A recurring-payment agreement (WeChat Pay's entrust contract, Alipay's
-- deduction agreement, a Stripe subscription) is a row: signed once, ended
-- once, for good (docs/GATEWAYS.md, "Agreements").  Written by the
-- business step only; the notifications that moved or restated it are
-- listed in applied order (notify_ids).  On Citus a reference table: the
-- notices of an agreement name no order, and run on the coordinator
-- (docs/SCALING.md).
CREATE TABLE @extschema@.paynotify_agreement (
	channel		text NOT NULL,
	agreement_id text NOT NULL CHECK (agreement_id OPERATOR(pg_catalog.<>) ''),
	merchant_ref text,
	plan_id		text,
	state		text NOT NULL CHECK (state OPERATOR(pg_catalog.=) ANY ('{signed,ended}'::text[])),
	gateway_state text,
	signed_at	timestamptz,
	ended_at	timestamptz,
	notify_ids	text[] NOT NULL DEFAULT '{}',
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	CHECK ((state OPERATOR(pg_catalog.=) 'ended') OPERATOR(pg_catalog.=) (ended_at IS NOT NULL)),
	PRIMARY KEY (channel, agreement_id)
);
-- a notification's agreement (paynotify_trace)
CREATE INDEX paynotify_agreement_notify_ids ON @extschema@.paynotify_agreement USING gin (notify_ids);
COMMENT ON TABLE @extschema@.paynotify_agreement IS
	'paynotify: recurring-payment agreements (WeChat Pay contracts, Alipay agreements, Stripe subscriptions) as their notifications left them';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_agreement', '');
REVOKE ALL ON @extschema@.paynotify_agreement FROM PUBLIC;
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, NULL::pg_catalog.regprocedure, '@extschema@.paynotify_agreement'::pg_catalog.regclass);

-- The agreement a charge was made under, where its notification names one
-- (made as the 1.3 tables' changes above are: by EXECUTE, where not yet).
DO $$
BEGIN
	EXECUTE 'ALTER TABLE @extschema@.payment_record ADD COLUMN IF NOT EXISTS agreement_id text';
	-- an agreement's charges (paynotify_trace_agreement)
	EXECUTE 'CREATE INDEX IF NOT EXISTS payment_record_agreement ON @extschema@.payment_record
		(channel, agreement_id) WHERE agreement_id IS NOT NULL';
END
$$;
COMMENT ON COLUMN @extschema@.payment_record.agreement_id IS
	'the agreement (paynotify_agreement) the charge was made under, where the notification names one; NULL otherwise';

-- The events 1.4 adds, for hooks and endpoints.
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint
				   WHERE conrelid OPERATOR(pg_catalog.=) '@extschema@.paynotify_hook'::regclass
					 AND conname OPERATOR(pg_catalog.=) 'paynotify_hook_event_check'
					 AND pg_catalog.pg_get_constraintdef(oid) OPERATOR(pg_catalog.~) 'agreement_ended') THEN
		-- two statements: Citus runs no ADD CONSTRAINT beside another
		-- subcommand on a distributed or reference table
		EXECUTE 'ALTER TABLE @extschema@.paynotify_hook DROP CONSTRAINT paynotify_hook_event_check';
		EXECUTE 'ALTER TABLE @extschema@.paynotify_hook
			ADD CONSTRAINT paynotify_hook_event_check
				CHECK (event OPERATOR(pg_catalog.=) ANY (''{paid,refunded,refund_failed,closed,dispute_opened,dispute_won,dispute_lost,payment_failed,agreement_signed,agreement_ended,notification}''::text[]))';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint
				   WHERE conrelid OPERATOR(pg_catalog.=) '@extschema@.paynotify_endpoint'::regclass
					 AND conname OPERATOR(pg_catalog.=) 'paynotify_endpoint_events_check'
					 AND pg_catalog.pg_get_constraintdef(oid) OPERATOR(pg_catalog.~) 'agreement_ended') THEN
		-- two statements: Citus runs no ADD CONSTRAINT beside another
		-- subcommand on a distributed or reference table
		EXECUTE 'ALTER TABLE @extschema@.paynotify_endpoint DROP CONSTRAINT paynotify_endpoint_events_check';
		EXECUTE 'ALTER TABLE @extschema@.paynotify_endpoint
			ADD CONSTRAINT paynotify_endpoint_events_check
				CHECK (events OPERATOR(pg_catalog.<@) ''{paid,refunded,refund_failed,closed,dispute_opened,dispute_won,dispute_lost,payment_failed,agreement_signed,agreement_ended,notification}''::text[]
					   AND pg_catalog.cardinality(events) OPERATOR(pg_catalog.>) 0)';
	END IF;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_check_endpoint(url text, secret text, events text[],
		channels text[])
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n integer;
BEGIN
	IF url IS NOT NULL AND url OPERATOR(pg_catalog.!~) '^https?://[^[:space:]]+$' THEN
		RAISE EXCEPTION 'endpoint url must start with http:// or https:// and contain no spaces'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF secret IS NOT NULL THEN
		IF secret OPERATOR(pg_catalog.!~) '^whsec_([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' THEN
			RAISE EXCEPTION 'endpoint secret must be "whsec_" followed by base64'
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Make one with: echo "whsec_$(openssl rand -base64 32)"';
		END IF;
		n := pg_catalog.length(pg_catalog.decode(pg_catalog.substr(secret, 7), 'base64'));
		IF n OPERATOR(pg_catalog.<) 24 OR n OPERATOR(pg_catalog.>) 64 THEN
			RAISE EXCEPTION 'endpoint secret must encode 24 to 64 bytes, not %', n
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Make one with: echo "whsec_$(openssl rand -base64 32)"';
		END IF;
	END IF;
	IF events IS NOT NULL AND (pg_catalog.cardinality(events) OPERATOR(pg_catalog.=) 0 OR pg_catalog.array_position(events, NULL) IS NOT NULL
			OR NOT events OPERATOR(pg_catalog.<@) '{paid,refunded,refund_failed,closed,dispute_opened,dispute_won,dispute_lost,payment_failed,agreement_signed,agreement_ended,notification}'::pg_catalog.text[]) THEN
		RAISE EXCEPTION 'endpoint events must be some of paid, refunded, refund_failed, closed, dispute_opened, dispute_won, dispute_lost, payment_failed, agreement_signed, agreement_ended, notification'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF channels IS NOT NULL AND EXISTS (SELECT FROM pg_catalog.unnest(channels) c
			WHERE c IS NULL OR c OPERATOR(pg_catalog.!~) '^[A-Za-z0-9_]{1,63}$') THEN
		RAISE EXCEPTION 'endpoint channels must be channel names'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;

-- A notification's trace shows the agreement it moved or restated (kind
-- agreement), as it is now.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_trace(channel text, notify_id text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
SELECT t.at, t.kind, t.channel, t.notify_id, t.detail
FROM (SELECT r.at, r.kind, r.channel, r.notify_id, r.detail, 0 AS src, r.n
	  FROM @extschema@.paynotify_trace_rows($1, $2, NULL, false)
		   WITH ORDINALITY r(at, kind, channel, notify_id, detail, n)
	  UNION ALL
	  SELECT d.at, d.kind, d.channel, d.notify_id, d.detail, 1, 0
	  FROM @extschema@.paynotify_trace_disputes($1, $2, NULL) d
	  UNION ALL
	  SELECT a.updated_at, 'agreement', a.channel, $2,
		  pg_catalog.jsonb_build_object('agreement_id', a.agreement_id, 'state', a.state,
			  'gateway_state', a.gateway_state, 'merchant_ref', a.merchant_ref,
			  'plan_id', a.plan_id, 'signed_at', a.signed_at, 'ended_at', a.ended_at,
			  'notify_ids', a.notify_ids), 2, 0
	  FROM @extschema@.paynotify_agreement a
	  WHERE a.channel OPERATOR(pg_catalog.=) $1
		AND a.notify_ids OPERATOR(pg_catalog.@>) ARRAY[$2]) t
ORDER BY t.at, t.src, t.n, t.channel, t.notify_id, t.detail::text
$$;

-- An agreement's story: its row, then every notification that moved or
-- restated it (and those parked for it), each as paynotify_trace shows it,
-- and the charges made under it.
CREATE FUNCTION @extschema@.paynotify_trace_agreement(agreement_channel text, agreement_id text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE plpgsql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
	p_channel text := $1;
	p_agreement_id text := $2;
BEGIN
	IF p_channel IS NULL OR p_agreement_id IS NULL THEN
		RAISE EXCEPTION 'agreement_channel and agreement_id must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	RETURN QUERY
	WITH ids AS (
		SELECT DISTINCT i.notify_id
		FROM (SELECT pg_catalog.unnest(a.notify_ids) AS notify_id
			  FROM @extschema@.paynotify_agreement a
			  WHERE a.channel OPERATOR(pg_catalog.=) p_channel
				AND a.agreement_id OPERATOR(pg_catalog.=) p_agreement_id
			  UNION ALL
			  SELECT l.notify_id FROM @extschema@.payment_notify_log l
			  WHERE l.order_no OPERATOR(pg_catalog.=) '' AND l.channel OPERATOR(pg_catalog.=) p_channel
				AND l.status OPERATOR(pg_catalog.=) 'parked'
				AND l.notice OPERATOR(pg_catalog.->>) 'agreement_id' OPERATOR(pg_catalog.=) p_agreement_id
			  UNION ALL
			  SELECT p.notify_id FROM @extschema@.payment_record p
			  WHERE p.channel OPERATOR(pg_catalog.=) p_channel
				AND p.agreement_id OPERATOR(pg_catalog.=) p_agreement_id) i
	)
	SELECT t.at, t.kind, t.channel, t.notify_id, t.detail
	FROM (SELECT a.updated_at AS at, 'agreement'::text AS kind, a.channel, NULL::text AS notify_id,
				 pg_catalog.jsonb_build_object('agreement_id', a.agreement_id, 'state', a.state,
					'gateway_state', a.gateway_state, 'merchant_ref', a.merchant_ref,
					'plan_id', a.plan_id, 'signed_at', a.signed_at, 'ended_at', a.ended_at,
					'notify_ids', a.notify_ids) AS detail, 1 AS src
		  FROM @extschema@.paynotify_agreement a
		  WHERE a.channel OPERATOR(pg_catalog.=) p_channel
			AND a.agreement_id OPERATOR(pg_catalog.=) p_agreement_id
		  UNION ALL
		  SELECT r.at, r.kind, r.channel, r.notify_id, r.detail, 0
		  FROM ids, LATERAL @extschema@.paynotify_trace(p_channel, ids.notify_id) r
		  WHERE r.kind OPERATOR(pg_catalog.<>) 'agreement') t
	ORDER BY t.at, t.src, t.channel, t.notify_id, t.kind, t.detail::text;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_trace_agreement(text, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_trace_agreement(text, text) IS
	'everything that happened to one agreement (its row, the notifications that moved it or wait for it, the charges made under it), in time order';
SELECT @extschema@.paynotify_capacity_extend('admin'::pg_catalog.text, '@extschema@.paynotify_trace_agreement(text, text)'::pg_catalog.regprocedure, NULL::pg_catalog.regclass);

-- paynotify_revoke: an operator's hooks go with its admin capacity: the
-- rows that run as it (a row from another cluster runs as the role of its
-- registrant's name, whatever oid it carries: pn_hook_role) and the rows
-- it registered here; not a row from another cluster whose oid is its
CREATE OR REPLACE FUNCTION @extschema@.paynotify_revoke(role regrole, capacity text)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	usage boolean;
	others text[];
	other text;
	hooks text;
	rolname name := (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role);
	sysid bigint := (SELECT s.system_identifier FROM pg_catalog.pg_control_system() s);
BEGIN
	PERFORM @extschema@.paynotify_capacity_check(role, capacity);
	-- what the role holds besides (by the catalog: a row of a dropped role
	-- of this name gives nothing back)
	others := ARRAY(SELECT r.capacity FROM @extschema@.paynotify_role r
					WHERE r.role OPERATOR(pg_catalog.=) rolname
					  AND r.capacity OPERATOR(pg_catalog.<>) paynotify_revoke.capacity
					  AND @extschema@.paynotify_capacity_held(rolname, r.capacity));
	DELETE FROM @extschema@.paynotify_role r
		WHERE r.role OPERATOR(pg_catalog.=) rolname
		  AND (r.capacity OPERATOR(pg_catalog.=) paynotify_revoke.capacity
			   OR r.capacity OPERATOR(pg_catalog.<>) ALL (others))
		RETURNING r.schema_usage INTO usage;
	-- its privileges, then again those of what the role still holds (the
	-- capacities share some: paynotify_handle)
	PERFORM @extschema@.paynotify_capacity_acl(role, capacity, false);
	FOREACH other IN ARRAY others LOOP
		PERFORM @extschema@.paynotify_capacity_acl(role, other, true);
	END LOOP;
	IF usage THEN
		IF pg_catalog.cardinality(others) OPERATOR(pg_catalog.>) 0 THEN
			-- the schema stays usable for what the role still holds
			UPDATE @extschema@.paynotify_role r SET schema_usage = true
				WHERE r.role OPERATOR(pg_catalog.=) rolname
				  AND r.capacity OPERATOR(pg_catalog.=) others[1];
		ELSE
			EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %s FROM %s', '@extschema@'::regnamespace, role);
		END IF;
	END IF;
	-- an operator no more: the hooks it registered stop with its capacity
	IF capacity OPERATOR(pg_catalog.=) 'admin' AND 'admin' OPERATOR(pg_catalog.<>) ALL (others) THEN
		WITH gone AS (
			DELETE FROM @extschema@.paynotify_hook h
			-- those that run as it (pn_hook_role), and those it registered
			-- on this cluster (or not known to be elsewhere), renamed since
			WHERE (h.registrant OPERATOR(pg_catalog.=) rolname
				   AND (h.registered_by OPERATOR(pg_catalog.=) role
						OR h.registered_on IS DISTINCT FROM sysid))
			   OR (h.registered_by OPERATOR(pg_catalog.=) role
				   AND (h.registered_on IS NULL OR h.registered_on OPERATOR(pg_catalog.=) sysid))
			RETURNING h.event OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) h.handler::text AS hook)
		SELECT pg_catalog.string_agg(g.hook, ', ') INTO hooks FROM gone g;
		IF hooks IS NOT NULL THEN
			RAISE WARNING 'the hooks % registered by % are deleted with its admin capacity', hooks, role
				USING HINT = 'An operator registers them again with paynotify_on.';
		END IF;
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_revoke(regrole, text) IS
	'takes a capacity (admin, handler or relay) in this database from a role; with admin, the hooks it registered here or that run as it';

-- ===== Citus: the functions that write secrets keep them out of its logs =====
--
-- On Citus the configuration tables are reference tables: a statement that
-- writes one is sent to every node with its values written in, and Citus
-- shows it to the session that asks (citus.log_remote_commands,
-- citus.log_local_commands, client_min_messages down to debug4).  The
-- operator who may configure channels, keys and endpoints may not read
-- their key material or settings (docs/SECURITY.md): the functions that
-- write them run with those logs off and no message below a notice.  (On
-- one server the settings name nothing: a setting of a module not loaded
-- is only kept.)
ALTER FUNCTION @extschema@.paynotify_add_channel(text, text, jsonb)
	SET citus.log_remote_commands = off SET citus.log_local_commands = off SET client_min_messages = notice;
ALTER FUNCTION @extschema@.paynotify_alter_channel(text, jsonb)
	SET citus.log_remote_commands = off SET citus.log_local_commands = off SET client_min_messages = notice;
ALTER FUNCTION @extschema@.paynotify_add_key(text, text, text, timestamptz, timestamptz)
	SET citus.log_remote_commands = off SET citus.log_local_commands = off SET client_min_messages = notice;
ALTER FUNCTION @extschema@.paynotify_add_endpoint(text, text, text[], text[], interval, integer)
	SET citus.log_remote_commands = off SET citus.log_local_commands = off SET client_min_messages = notice;
ALTER FUNCTION @extschema@.paynotify_alter_endpoint(bigint, text, text, text[], text[], boolean, interval, integer, interval, interval)
	SET citus.log_remote_commands = off SET citus.log_local_commands = off SET client_min_messages = notice;
