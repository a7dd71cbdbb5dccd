/* paynotify--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.1'" to load this file. \quit

-- ===== operations (trace, history, retry, purge, stats, anomalies) =====

-- ===== relay (endpoints, deliveries) =====
--
-- paynotify-relay (shim/relay/) delivers outbox events over HTTP, in the
-- Standard Webhooks format, to the endpoints below.  The relay and a worker
-- of one's own (paynotify_outbox_claim) both consume paynotify_outbox: run
-- one or the other.
--
-- The flow: paynotify_relay_fanout() moves outbox rows into one
-- paynotify_delivery row per (event, matching enabled endpoint), so the
-- payment transaction itself does nothing more than before (its outbox
-- INSERT).  paynotify_relay_claim() locks due deliveries FOR UPDATE SKIP
-- LOCKED inside the relay's open transaction; the relay POSTs them and
-- records every result with paynotify_relay_report() before it commits.  A
-- claim is that row lock: a relay that dies, or loses its connection, rolls
-- back and its claims are due again at once; two relays never hold one
-- delivery.  A delivery waits while an earlier event of the same order for
-- the same endpoint is neither delivered nor dead, so each endpoint sees the
-- events of one order in order.

DO $$
BEGIN
	-- the relay's login role joins this group; it may only claim and report
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'paynotify_relay') THEN
		CREATE ROLE paynotify_relay NOLOGIN;
	END IF;
END
$$;

CREATE TABLE @extschema@.paynotify_endpoint (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	url			text NOT NULL CHECK (url ~ '^https?://[^[:space:]]+$'),
	events		text[] NOT NULL DEFAULT '{paid,refunded,refund_failed,closed}'
				CHECK (events <@ '{paid,refunded,refund_failed,closed}' AND cardinality(events) > 0),
	channels	text[],			-- NULL: every channel
	-- Standard Webhooks secret: "whsec_" + base64 of 24 to 64 random bytes
	secret		text NOT NULL
				CHECK (secret ~ '^whsec_([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'
					   AND length(secret) BETWEEN 6 + 32 AND 6 + 88),
	enabled		boolean NOT NULL DEFAULT true,
	max_in_flight integer NOT NULL DEFAULT 8 CHECK (max_in_flight BETWEEN 1 AND 256),
	retry_base	interval NOT NULL DEFAULT '5 seconds' CHECK (retry_base > '0'),
	retry_max	interval NOT NULL DEFAULT '1 hour' CHECK (retry_max > '0'),
	retry_horizon interval NOT NULL DEFAULT '3 days' CHECK (retry_horizon >= '0'),
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.paynotify_endpoint IS
	'paynotify: where paynotify-relay POSTs outbox events (Standard Webhooks); change with paynotify_add_endpoint / paynotify_alter_endpoint';

CREATE TABLE @extschema@.paynotify_delivery (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	endpoint_id	bigint NOT NULL REFERENCES @extschema@.paynotify_endpoint ON DELETE CASCADE,
	outbox_id	bigint NOT NULL,	-- the event; webhook-id is 'evt_' || outbox_id
	event		text NOT NULL,
	channel		text NOT NULL,
	order_no	text NOT NULL,
	body		text NOT NULL,		-- the exact JSON POSTed, the same on every attempt
	attempts	integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_attempt_at timestamptz,
	last_status	integer,			-- HTTP status of the last attempt; NULL: no response
	last_error	text,
	delivered_at timestamptz,
	dead_at		timestamptz,
	started_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),	-- the horizon counts from here
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (outbox_id, endpoint_id)
);
-- what the relay polls: the due deliveries
CREATE INDEX paynotify_delivery_due ON @extschema@.paynotify_delivery (next_attempt_at)
	WHERE delivered_at IS NULL AND dead_at IS NULL;
-- the per-order wait: an earlier pending event of the same order and endpoint
CREATE INDEX paynotify_delivery_order ON @extschema@.paynotify_delivery (endpoint_id, order_no, outbox_id)
	WHERE delivered_at IS NULL AND dead_at IS NULL;
CREATE INDEX paynotify_delivery_dead ON @extschema@.paynotify_delivery (endpoint_id)
	WHERE dead_at IS NOT NULL;
COMMENT ON TABLE @extschema@.paynotify_delivery IS
	'paynotify: one row per (outbox event, endpoint): attempts, next attempt, last error, delivered or dead';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_endpoint', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_delivery', '');
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('@extschema@.paynotify_endpoint', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('@extschema@.paynotify_delivery', 'id'), '');

-- Checks what paynotify_add_endpoint and paynotify_alter_endpoint are given;
-- the messages never contain the secret.
CREATE FUNCTION @extschema@.paynotify_check_endpoint(url text, secret text, events text[],
		channels text[])
	RETURNS void
	LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n integer;
BEGIN
	IF url IS NOT NULL AND url !~ '^https?://[^[:space:]]+$' THEN
		RAISE EXCEPTION 'endpoint url must start with http:// or https:// and contain no spaces'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF secret IS NOT NULL THEN
		IF secret !~ '^whsec_([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' THEN
			RAISE EXCEPTION 'endpoint secret must be "whsec_" followed by base64'
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Make one with: echo "whsec_$(openssl rand -base64 32)"';
		END IF;
		n := length(decode(substr(secret, 7), 'base64'));
		IF n < 24 OR n > 64 THEN
			RAISE EXCEPTION 'endpoint secret must encode 24 to 64 bytes, not %', n
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'Make one with: echo "whsec_$(openssl rand -base64 32)"';
		END IF;
	END IF;
	IF events IS NOT NULL AND (cardinality(events) = 0 OR array_position(events, NULL) IS NOT NULL
			OR NOT events <@ '{paid,refunded,refund_failed,closed}') THEN
		RAISE EXCEPTION 'endpoint events must be some of paid, refunded, refund_failed, closed'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF channels IS NOT NULL AND EXISTS (SELECT FROM unnest(channels) c
			WHERE c IS NULL OR c !~ '^[A-Za-z0-9_]{1,63}$') THEN
		RAISE EXCEPTION 'endpoint channels must be channel names'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;

CREATE FUNCTION @extschema@.paynotify_add_endpoint(url text, secret text,
		events text[] DEFAULT NULL, channels text[] DEFAULT NULL,
		retry_horizon interval DEFAULT NULL, max_in_flight integer DEFAULT NULL)
	RETURNS bigint
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	new_id bigint;
BEGIN
	IF url IS NULL OR secret IS NULL THEN
		RAISE EXCEPTION 'an endpoint needs a url and a secret' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM @extschema@.paynotify_check_endpoint(url, secret, events, channels);
	INSERT INTO @extschema@.paynotify_endpoint AS e (url, secret, events, channels, retry_horizon, max_in_flight)
		VALUES (url, secret, coalesce(events, '{paid,refunded,refund_failed,closed}'),
				nullif(channels, '{}'), coalesce(retry_horizon, '3 days'), coalesce(max_in_flight, 8))
		RETURNING e.id INTO new_id;
	RETURN new_id;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_add_endpoint(text, text, text[], text[], interval, integer) IS
	'adds a webhook endpoint for paynotify-relay; events default to all, channels NULL or {} to every channel; returns its id';

-- NULL leaves a setting as it is; channels => '{}' means every channel.
CREATE FUNCTION @extschema@.paynotify_alter_endpoint(id bigint, url text DEFAULT NULL,
		secret text DEFAULT NULL, events text[] DEFAULT NULL, channels text[] DEFAULT NULL,
		enabled boolean DEFAULT NULL, retry_horizon interval DEFAULT NULL,
		max_in_flight integer DEFAULT NULL, retry_base interval DEFAULT NULL,
		retry_max interval DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	PERFORM @extschema@.paynotify_check_endpoint(url, secret, events, channels);
	UPDATE @extschema@.paynotify_endpoint e SET
		url = coalesce($2, e.url),
		secret = coalesce($3, e.secret),
		events = coalesce($4, e.events),
		channels = CASE WHEN $5 IS NULL THEN e.channels ELSE nullif($5, '{}') END,
		enabled = coalesce($6, e.enabled),
		retry_horizon = coalesce($7, e.retry_horizon),
		max_in_flight = coalesce($8, e.max_in_flight),
		retry_base = coalesce($9, e.retry_base),
		retry_max = coalesce($10, e.retry_max)
	WHERE e.id = $1;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'endpoint % does not exist', $1 USING ERRCODE = 'undefined_object';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_alter_endpoint(bigint, text, text, text[], text[], boolean, interval, integer, interval, interval) IS
	'changes an endpoint (NULL: unchanged; channels => ''{}'': every channel); a disabled endpoint gets no new events and its pending ones wait';

CREATE FUNCTION @extschema@.paynotify_drop_endpoint(id bigint)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	DELETE FROM @extschema@.paynotify_endpoint e WHERE e.id = $1;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'endpoint % does not exist', $1 USING ERRCODE = 'undefined_object';
	END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_drop_endpoint(bigint) IS
	'deletes an endpoint and its deliveries';

-- Dead letters back into the queue: all of them, one endpoint's, or one.
CREATE FUNCTION @extschema@.paynotify_redeliver(endpoint_id bigint DEFAULT NULL,
		delivery_id bigint DEFAULT NULL)
	RETURNS bigint
	LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH again AS (
		UPDATE @extschema@.paynotify_delivery d
		SET dead_at = NULL, attempts = 0, next_attempt_at = pg_catalog.now(),
			started_at = pg_catalog.now()
		WHERE d.dead_at IS NOT NULL AND d.delivered_at IS NULL
		  AND ($1 IS NULL OR d.endpoint_id = $1) AND ($2 IS NULL OR d.id = $2)
		RETURNING 1)
	SELECT count(*) FROM again
$$;
COMMENT ON FUNCTION @extschema@.paynotify_redeliver(bigint, bigint) IS
	'puts dead-lettered deliveries (all, one endpoint''s, or one) back in the queue with a fresh horizon; returns how many';

CREATE FUNCTION @extschema@.paynotify_purge_deliveries(keep interval DEFAULT '7 days')
	RETURNS bigint
	LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	WITH gone AS (
		DELETE FROM @extschema@.paynotify_delivery d
		WHERE d.delivered_at < pg_catalog.now() - keep
		RETURNING 1)
	SELECT count(*) FROM gone
$$;
COMMENT ON FUNCTION @extschema@.paynotify_purge_deliveries(interval) IS
	'deletes deliveries delivered longer ago than keep; returns how many';

-- The relay's three calls.
CREATE FUNCTION @extschema@.paynotify_relay_fanout(max_rows integer DEFAULT 1000)
	RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	taken integer;
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
	WITH t AS (
		DELETE FROM @extschema@.paynotify_outbox o
		WHERE o.id IN (SELECT i.id FROM @extschema@.paynotify_outbox i
					   ORDER BY i.id LIMIT max_rows FOR UPDATE SKIP LOCKED)
		RETURNING o.*),
	d AS (
		INSERT INTO @extschema@.paynotify_delivery (endpoint_id, outbox_id, event, channel, order_no, body)
		SELECT e.id, t.id, t.event, t.channel, t.order_no,
			jsonb_build_object('id', 'evt_' || t.id, 'event', t.event, 'channel', t.channel,
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
COMMENT ON FUNCTION @extschema@.paynotify_relay_fanout(integer) IS
	'paynotify-relay: turns up to max_rows outbox events into deliveries for the enabled endpoints that want them; returns how many events it took';

CREATE FUNCTION @extschema@.paynotify_relay_claim(max_rows integer DEFAULT 100)
	RETURNS TABLE (delivery_id bigint, webhook_id text, endpoint_id bigint, url text,
				   secret text, max_in_flight integer, attempts integer, body text)
	LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT d.id, 'evt_' || d.outbox_id, d.endpoint_id, e.url, e.secret, e.max_in_flight,
		d.attempts, d.body
	FROM @extschema@.paynotify_delivery d
		JOIN @extschema@.paynotify_endpoint e ON e.id = d.endpoint_id
	WHERE d.delivered_at IS NULL AND d.dead_at IS NULL AND d.next_attempt_at <= pg_catalog.now()
	  AND e.enabled
	  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_delivery p
					  WHERE p.endpoint_id = d.endpoint_id AND p.order_no = d.order_no
						AND p.outbox_id < d.outbox_id
						AND p.delivered_at IS NULL AND p.dead_at IS NULL)
	ORDER BY d.next_attempt_at		-- the index's order: no sort of the backlog
	LIMIT max_rows
	FOR UPDATE OF d SKIP LOCKED
$$;
COMMENT ON FUNCTION @extschema@.paynotify_relay_claim(integer) IS
	'paynotify-relay: locks up to max_rows due deliveries until the caller''s transaction ends (with the endpoint and its secret)';

-- One result per claimed delivery: status is the HTTP status, NULL when
-- there was no response (timeout, refused, ...).  2xx: delivered; anything
-- else: retry after retry_base * 2^attempts (at most retry_max) with jitter,
-- never later than the horizon; a failure at or past the horizon is dead.
CREATE FUNCTION @extschema@.paynotify_relay_report(delivery_ids bigint[], statuses integer[],
		errors text[])
	RETURNS integer
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n integer;
BEGIN
	UPDATE @extschema@.paynotify_delivery d SET
		attempts = d.attempts + 1,
		last_attempt_at = r.at,
		last_status = r.status,
		last_error = CASE WHEN r.ok THEN NULL ELSE left(coalesce(r.error, 'HTTP ' || r.status), 500) END,
		delivered_at = CASE WHEN r.ok THEN r.at END,
		dead_at = CASE WHEN NOT r.ok AND r.at >= d.started_at + e.retry_horizon THEN r.at END,
		next_attempt_at = CASE WHEN r.ok THEN d.next_attempt_at
			ELSE least(r.at + least(e.retry_max, e.retry_base * power(2, least(d.attempts, 30)))
							  * (0.5 + 0.5 * random()),
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
COMMENT ON FUNCTION @extschema@.paynotify_relay_report(bigint[], integer[], text[]) IS
	'paynotify-relay: records the results of claimed deliveries (HTTP status or NULL, error text)';

REVOKE ALL ON @extschema@.paynotify_endpoint, @extschema@.paynotify_delivery FROM PUBLIC;
REVOKE ALL ON FUNCTION
	@extschema@.paynotify_check_endpoint(text, text, text[], text[]),
	@extschema@.paynotify_add_endpoint(text, text, text[], text[], interval, integer),
	@extschema@.paynotify_alter_endpoint(bigint, text, text, text[], text[], boolean, interval, integer, interval, interval),
	@extschema@.paynotify_drop_endpoint(bigint),
	@extschema@.paynotify_redeliver(bigint, bigint),
	@extschema@.paynotify_purge_deliveries(interval),
	@extschema@.paynotify_relay_fanout(integer),
	@extschema@.paynotify_relay_claim(integer),
	@extschema@.paynotify_relay_report(bigint[], integer[], text[])
	FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	@extschema@.paynotify_add_endpoint(text, text, text[], text[], interval, integer),
	@extschema@.paynotify_alter_endpoint(bigint, text, text, text[], text[], boolean, interval, integer, interval, interval),
	@extschema@.paynotify_drop_endpoint(bigint),
	@extschema@.paynotify_redeliver(bigint, bigint),
	@extschema@.paynotify_purge_deliveries(interval)
	TO paynotify_admin;
-- everything but the secret
GRANT SELECT (id, url, events, channels, enabled, max_in_flight, retry_base, retry_max,
			  retry_horizon, created_at)
	ON @extschema@.paynotify_endpoint TO paynotify_admin;
GRANT SELECT ON @extschema@.paynotify_delivery TO paynotify_admin;

GRANT EXECUTE ON FUNCTION
	@extschema@.paynotify_relay_fanout(integer),
	@extschema@.paynotify_relay_claim(integer),
	@extschema@.paynotify_relay_report(bigint[], integer[], text[])
	TO paynotify_relay;
