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
	holders name[] := ARRAY(SELECT o.role FROM @extschema@.paynotify_role o
							WHERE o.capacity OPERATOR(pg_catalog.=) p_capacity
							  AND @extschema@.paynotify_capacity_held(o.role, o.capacity));
	holder name;
BEGIN
	IF (p_fn IS NULL) OPERATOR(pg_catalog.=) (p_rel IS NULL) THEN
		RAISE EXCEPTION 'one of a function and a relation' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	INSERT INTO @extschema@.paynotify_capacity (capacity, privilege, fn, rel)
		VALUES (p_capacity, CASE WHEN p_fn IS NULL THEN 'SELECT' ELSE 'EXECUTE' END, p_fn, p_rel);
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
SELECT @extschema@.paynotify_capacity_extend('admin', NULL, '@extschema@.paynotify_expectation'::regclass);

-- The application: this order was sent to this channel's gateway, and may
-- be paid until expires_at (NULL: no end known).  Called again, it moves
-- expires_at of an expectation not settled yet.  An order whose payment is
-- recorded already is settled at once (its notification came first).
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
		SET expires_at = EXCLUDED.expires_at
		WHERE e.settled_at IS NULL
	RETURNING * INTO r;
	IF r IS NULL THEN
		SELECT * INTO r FROM @extschema@.paynotify_expectation e
		WHERE e.order_no OPERATOR(pg_catalog.=) p_order_no AND e.channel OPERATOR(pg_catalog.=) p_channel;
	END IF;
	RETURN r;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_expect(text, text, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.paynotify_expect(text, text, timestamptz) IS
	'the application sent this order to this channel''s gateway: look it up there if no payment or close of it is recorded in time';
SELECT @extschema@.paynotify_capacity_extend('admin', '@extschema@.paynotify_expect(text, text, timestamptz)'::regprocedure, NULL);
SELECT @extschema@.paynotify_capacity_extend('handler', '@extschema@.paynotify_expect(text, text, timestamptz)'::regprocedure, NULL);

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
ALTER TABLE @extschema@.payment_notify_log
	ADD COLUMN source text NOT NULL DEFAULT 'notification'
	CHECK (source OPERATOR(pg_catalog.=) ANY ('{notification,query}'::text[]));
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
CREATE FUNCTION @extschema@.paynotify_query_due(max_rows integer DEFAULT 10)
	RETURNS TABLE (channel text, order_no text)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
BEGIN
	IF max_rows IS NULL OR max_rows OPERATOR(pg_catalog.<) 1 OR max_rows OPERATOR(pg_catalog.>) 1000 THEN
		RAISE EXCEPTION 'max_rows must be between 1 and 1000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
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
		FOR UPDATE OF e SKIP LOCKED
	), backoff AS (
		SELECT d.order_no, d.channel,
			pg_catalog.now() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs =>
				LEAST(d.after_s::bigint OPERATOR(pg_catalog.*)
					  (1::bigint OPERATOR(pg_catalog.<<) LEAST(e.queries, 20)), 3600)::double precision) AS next_at,
			e.expires_at
		FROM due d JOIN @extschema@.paynotify_expectation e
			ON e.order_no OPERATOR(pg_catalog.=) d.order_no AND e.channel OPERATOR(pg_catalog.=) d.channel
	)
	UPDATE @extschema@.paynotify_expectation e
		SET queries = e.queries OPERATOR(pg_catalog.+) 1,
			last_query_at = pg_catalog.now(),
			next_query_at = CASE WHEN b.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()
									  AND b.expires_at OPERATOR(pg_catalog.<) b.next_at
								 THEN b.expires_at ELSE b.next_at END
	FROM backoff b
	WHERE e.order_no OPERATOR(pg_catalog.=) b.order_no AND e.channel OPERATOR(pg_catalog.=) b.channel
	RETURNING e.channel, e.order_no;
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

SELECT @extschema@.paynotify_capacity_extend(c, f::regprocedure, NULL)
FROM pg_catalog.unnest('{relay,admin}'::text[]) c,
	 pg_catalog.unnest(ARRAY['@extschema@.paynotify_query_due(integer)',
	 '@extschema@.paynotify_query_request(text, text)',
	 '@extschema@.paynotify_query_apply(text, text, integer, jsonb, bytea)']) f;
