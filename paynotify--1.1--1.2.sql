/* paynotify--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.2'" to load this file. \quit

-- ==== relay ====

-- webhook-id: 'evt_' || the installation's id || '_' || the outbox id.  The
-- outbox id alone repeats across databases and across a re-created
-- extension, and receivers drop an id they already have.  The
-- installation's id (16 random hex digits) is made by the first fan-out
-- and kept by pg_dump; each delivery stores its webhook-id, so an event
-- keeps it on every attempt and for every endpoint, and deliveries made
-- before 1.2 keep 'evt_' || outbox id.
CREATE TABLE @extschema@.paynotify_installation (
	one			boolean PRIMARY KEY DEFAULT true CHECK (one),
	id			text NOT NULL DEFAULT substr(replace(pg_catalog.gen_random_uuid()::text, '-', ''), 17, 16)
				CHECK (id ~ '^[0-9a-f]{1,32}$'),
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.paynotify_installation IS
	'paynotify: this installation''s id, part of every webhook-id paynotify-relay sends (made by the first fan-out)';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_installation', '');
REVOKE ALL ON @extschema@.paynotify_installation FROM PUBLIC;
GRANT SELECT ON @extschema@.paynotify_installation TO paynotify_admin;

ALTER TABLE @extschema@.paynotify_delivery ADD COLUMN webhook_id text;
UPDATE @extschema@.paynotify_delivery SET webhook_id = 'evt_' || outbox_id;
ALTER TABLE @extschema@.paynotify_delivery ALTER COLUMN webhook_id SET NOT NULL;

-- The claim takes, for each enabled endpoint, at most its max_in_flight
-- oldest due deliveries, from the index (endpoint_id, next_attempt_at), so
-- that one endpoint's backlog (a receiver that hangs, an endpoint disabled
-- with deliveries pending) neither fills a relay's batch nor is walked by
-- every claim.  The candidates are chosen without locks, then locked FOR
-- UPDATE SKIP LOCKED: candidates another relay holds are skipped, not
-- replaced by later deliveries of the same endpoint.
CREATE INDEX paynotify_delivery_endpoint_due
	ON @extschema@.paynotify_delivery (endpoint_id, next_attempt_at)
	WHERE delivered_at IS NULL AND dead_at IS NULL;
DROP INDEX @extschema@.paynotify_delivery_due;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_claim(max_rows integer DEFAULT 100)
	RETURNS TABLE (delivery_id bigint, webhook_id text, endpoint_id bigint, url text,
				   secret text, max_in_flight integer, attempts integer, body text)
	LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH candidate AS MATERIALIZED (
		SELECT c.id
		FROM @extschema@.paynotify_endpoint e
			CROSS JOIN LATERAL (
				SELECT d.id, d.next_attempt_at
				FROM @extschema@.paynotify_delivery d
				WHERE d.endpoint_id = e.id
				  AND d.delivered_at IS NULL AND d.dead_at IS NULL
				  AND d.next_attempt_at <= pg_catalog.now()
				  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_delivery p
								  WHERE p.endpoint_id = d.endpoint_id AND p.order_no = d.order_no
									AND p.outbox_id < d.outbox_id
									AND p.delivered_at IS NULL AND p.dead_at IS NULL)
				ORDER BY d.next_attempt_at
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
	FOR UPDATE OF d SKIP LOCKED
$$;
COMMENT ON FUNCTION @extschema@.paynotify_relay_claim(integer) IS
	'paynotify-relay: locks up to max_rows due deliveries, at most max_in_flight per endpoint, until the caller''s transaction ends (with the endpoint and its secret)';

-- A retry at least a second after the last attempt: a base or a cap of a
-- millisecond made the relay POST one failing delivery in a busy loop (and
-- could run attempts up to its limit).  Endpoints set lower get 1 second.
UPDATE @extschema@.paynotify_endpoint SET retry_base = interval '1 second'
	WHERE retry_base < interval '1 second';
UPDATE @extschema@.paynotify_endpoint SET retry_max = interval '1 second'
	WHERE retry_max < interval '1 second';
ALTER TABLE @extschema@.paynotify_endpoint
	DROP CONSTRAINT paynotify_endpoint_retry_base_check,
	ADD CONSTRAINT paynotify_endpoint_retry_base_check
		CHECK (retry_base >= '1 second' AND retry_base <= '1 day'),
	DROP CONSTRAINT paynotify_endpoint_retry_max_check,
	ADD CONSTRAINT paynotify_endpoint_retry_max_check
		CHECK (retry_max >= '1 second' AND retry_max <= '30 days');

-- attempts saturates at the integer's maximum: an overflow failed the whole
-- report, so every delivery of the batch, also those other endpoints had
-- acknowledged, was POSTed again, round after round.
CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_report(delivery_ids bigint[], statuses integer[],
		errors text[])
	RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n integer;
BEGIN
	UPDATE @extschema@.paynotify_delivery d SET
		attempts = least(d.attempts, 2147483646) + 1,
		last_attempt_at = r.at,
		last_status = r.status,
		last_error = CASE WHEN r.ok THEN NULL ELSE left(coalesce(r.error, 'HTTP ' || r.status), 500) END,
		delivered_at = CASE WHEN r.ok THEN r.at END,
		dead_at = CASE WHEN NOT r.ok AND r.at >= d.started_at + e.retry_horizon THEN r.at END,
		-- in seconds: retry_base * 2^30 as an interval can overflow, and a
		-- failing report would give the whole batch back again and again
		next_attempt_at = CASE WHEN r.ok THEN d.next_attempt_at
			ELSE least(r.at + pg_catalog.make_interval(secs =>
							least(extract(epoch FROM e.retry_max)::float8,
								  extract(epoch FROM e.retry_base)::float8 * power(2, least(d.attempts, 30)))
							* (0.5 + 0.5 * random())),
					   d.started_at + e.retry_horizon) END
	FROM (SELECT u.id, u.status, u.error, coalesce(u.status BETWEEN 200 AND 299, false) AS ok,
				 clock_timestamp() AS at
		  FROM unnest(delivery_ids, statuses, errors) u(id, status, error)) r,
		 @extschema@.paynotify_endpoint e
	WHERE d.id = r.id AND e.id = d.endpoint_id
	  AND d.delivered_at IS NULL AND d.dead_at IS NULL;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n;
END
$$;

-- Endpoint secrets from files in paynotify.secrets_directory, as channel
-- keys (paynotify_add_key_file): a secret given as a literal is part of the
-- statement's text, so of the server log (a failing statement is logged
-- with log_min_error_statement = error, every one with log_statement =
-- all) and of pg_stat_activity; a file name is not.
CREATE FUNCTION @extschema@.paynotify_add_endpoint_file(url text, secret_file text,
		events text[] DEFAULT NULL, channels text[] DEFAULT NULL,
		retry_horizon interval DEFAULT NULL, max_in_flight integer DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF secret_file IS NULL THEN
		RAISE EXCEPTION 'secret_file must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	RETURN @extschema@.paynotify_add_endpoint(url, @extschema@.paynotify_read_secret(secret_file),
		events, channels, retry_horizon, max_in_flight);
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_add_endpoint_file(text, text, text[], text[], interval, integer) IS
	'paynotify_add_endpoint with the whsec_ secret read from a file in paynotify.secrets_directory';

CREATE FUNCTION @extschema@.paynotify_alter_endpoint_file(id bigint, secret_file text)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF secret_file IS NULL THEN
		RAISE EXCEPTION 'secret_file must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM @extschema@.paynotify_alter_endpoint(id,
		secret => @extschema@.paynotify_read_secret(secret_file));
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_alter_endpoint_file(bigint, text) IS
	'replaces an endpoint''s secret with the whsec_ secret read from a file in paynotify.secrets_directory';

REVOKE ALL ON FUNCTION
	@extschema@.paynotify_add_endpoint_file(text, text, text[], text[], interval, integer),
	@extschema@.paynotify_alter_endpoint_file(bigint, text)
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	@extschema@.paynotify_add_endpoint_file(text, text, text[], text[], interval, integer),
	@extschema@.paynotify_alter_endpoint_file(bigint, text)
	TO paynotify_admin;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_relay_fanout(max_rows integer DEFAULT 1000)
	RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	taken integer;
	prefix text;
BEGIN
	-- no endpoint yet: leave the outbox alone
	IF NOT EXISTS (SELECT FROM @extschema@.paynotify_endpoint e WHERE e.enabled) THEN
		RETURN 0;
	END IF;
	-- one relay at a time, so that the deliveries of one order are created
	-- in the order of its events
	IF NOT pg_try_advisory_xact_lock(1886284396, 1701736302) THEN
		RETURN 0;
	END IF;
	SELECT 'evt_' || i.id || '_' INTO prefix FROM @extschema@.paynotify_installation i;
	IF NOT FOUND THEN
		INSERT INTO @extschema@.paynotify_installation DEFAULT VALUES ON CONFLICT DO NOTHING;
		SELECT 'evt_' || i.id || '_' INTO STRICT prefix FROM @extschema@.paynotify_installation i;
	END IF;
	-- the events are taken the way any outbox worker takes them
	WITH t AS (
		SELECT * FROM @extschema@.paynotify_outbox_claim(max_rows)),
	d AS (
		INSERT INTO @extschema@.paynotify_delivery (endpoint_id, outbox_id, webhook_id, event, channel,
			order_no, body)
		SELECT e.id, t.id, prefix || t.id, t.event, t.channel, t.order_no,
			jsonb_build_object('id', prefix || t.id, 'event', t.event, 'channel', t.channel,
				'order_no', t.order_no, 'amount', t.amount, 'notify_id', t.notify_id,
				'occurred_at', to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
		FROM t JOIN @extschema@.paynotify_endpoint e
			ON e.enabled AND t.event = ANY (e.events)
			   AND (e.channels IS NULL OR t.channel = ANY (e.channels))
		ORDER BY t.id, e.id
		RETURNING 1)
	SELECT count(*) INTO taken FROM t;
	RETURN taken;
END
$$;
