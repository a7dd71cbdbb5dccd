/* paynotify--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.1'" to load this file. \quit

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
				CHECK (events OPERATOR(pg_catalog.<@) '{paid,refunded,refund_failed,closed}'
					   AND pg_catalog.cardinality(events) > 0),
	channels	text[],			-- NULL: every channel
	-- Standard Webhooks secret: "whsec_" + base64 of 24 to 64 random bytes
	secret		text NOT NULL
				CHECK (secret ~ '^whsec_([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'
					   AND length(secret) BETWEEN 6 + 32 AND 6 + 88),
	enabled		boolean NOT NULL DEFAULT true,
	max_in_flight integer NOT NULL DEFAULT 8 CHECK (max_in_flight BETWEEN 1 AND 256),
	-- bounded so that no backoff or horizon leaves the range of timestamptz
	retry_base	interval NOT NULL DEFAULT '5 seconds' CHECK (retry_base > '0' AND retry_base <= '1 day'),
	retry_max	interval NOT NULL DEFAULT '1 hour' CHECK (retry_max > '0' AND retry_max <= '30 days'),
	retry_horizon interval NOT NULL DEFAULT '3 days'
				CHECK (retry_horizon >= '0' AND retry_horizon <= '1 year'),
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
	c text;
	st text;
BEGIN
	IF url IS NULL OR secret IS NULL THEN
		RAISE EXCEPTION 'an endpoint needs a url and a secret' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM @extschema@.paynotify_check_endpoint(url, secret, events, channels);
	BEGIN
		INSERT INTO @extschema@.paynotify_endpoint AS e (url, secret, events, channels, retry_horizon, max_in_flight)
			VALUES (url, secret, coalesce(events, '{paid,refunded,refund_failed,closed}'),
					nullif(channels, '{}'), coalesce(retry_horizon, '3 days'), coalesce(max_in_flight, 8))
			RETURNING e.id INTO new_id;
	EXCEPTION WHEN integrity_constraint_violation THEN
		-- the error's "Failing row contains" detail would show the secret
		GET STACKED DIAGNOSTICS c = CONSTRAINT_NAME, st = RETURNED_SQLSTATE;
		RAISE EXCEPTION 'endpoint setting out of range (constraint "%")', c USING ERRCODE = st;
	END;
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
DECLARE
	c text;
	st text;
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
EXCEPTION WHEN integrity_constraint_violation THEN
	-- the error's "Failing row contains" detail would show the secret
	GET STACKED DIAGNOSTICS c = CONSTRAINT_NAME, st = RETURNED_SQLSTATE;
	RAISE EXCEPTION 'endpoint setting out of range (constraint "%")', c USING ERRCODE = st;
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
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	n bigint;
BEGIN
	IF keep IS NULL OR keep < interval '0' THEN
		RAISE EXCEPTION 'keep must be a positive interval, not %', coalesce(keep::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	WITH gone AS (
		DELETE FROM @extschema@.paynotify_delivery d
		WHERE d.delivered_at < pg_catalog.now() - keep
		RETURNING 1)
	SELECT count(*) INTO n FROM gone;
	RETURN n;
END
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
	-- the events are taken the way any outbox worker takes them
	WITH t AS (
		SELECT * FROM @extschema@.paynotify_outbox_claim(max_rows)),
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

-- ===== operations (trace, history, retry, purge, stats, anomalies) =====

-- Every move of an order's status: paynotify's own (state machine moves of
-- the business step and paynotify_transit), and, where the guard trigger is
-- attached to the orders table, the application's.
CREATE TABLE @extschema@.paynotify_order_history (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	order_no	text NOT NULL,
	from_state	text NOT NULL,
	to_state	text NOT NULL,
	source		text NOT NULL CHECK (source IN ('paynotify', 'application')),
	channel		text,
	notify_id	text,
	by_role		text NOT NULL DEFAULT pg_catalog.session_user(),
	at			timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
CREATE INDEX paynotify_order_history_order ON @extschema@.paynotify_order_history (order_no);
COMMENT ON TABLE @extschema@.paynotify_order_history IS
	'paynotify: status changes of orders (paynotify''s, and the application''s where the guard trigger is attached)';

-- One row per authenticated delivery when paynotify.delivery_history is
-- "all" (or per delivery not acknowledged when it is "failures").
CREATE TABLE @extschema@.paynotify_delivery_history (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	channel		text NOT NULL,
	notify_id	text NOT NULL,
	at			timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	outcome		text NOT NULL,
	http_status	integer NOT NULL,
	payload_sha256 text,
	client		text
);
CREATE INDEX paynotify_delivery_history_notification ON @extschema@.paynotify_delivery_history (channel, notify_id);
COMMENT ON TABLE @extschema@.paynotify_delivery_history IS
	'paynotify: per-delivery history (paynotify.delivery_history): time, outcome, HTTP status, payload hash, client';

-- the notifications of an order, for paynotify_trace_order
CREATE INDEX payment_notify_log_order ON @extschema@.payment_notify_log (order_no);

ALTER TABLE @extschema@.paynotify_anomaly
	ADD COLUMN resolved_at timestamptz,
	ADD COLUMN resolved_by text,
	ADD COLUMN note text;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_order_history', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_delivery_history', '');
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('@extschema@.paynotify_order_history', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('@extschema@.paynotify_delivery_history', 'id'), '');

-- The shortest time a settled notification is kept: its gateway's retry
-- horizon (WeChat Pay 24 h 4 min, documented about 24 h 15 m; Alipay 25 h;
-- Stripe 3 days live) plus a day of margin.  Deleting a notification's row
-- earlier would let a redelivery of it be applied twice.
CREATE FUNCTION @extschema@.paynotify_retention_floor(gateway text)
	RETURNS interval
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT CASE gateway
		WHEN 'wxpay' THEN interval '24 hours 15 minutes'
		WHEN 'alipay' THEN interval '25 hours'
		WHEN 'stripe' THEN interval '3 days'
		ELSE interval '7 days' END + interval '1 day'
$$;
COMMENT ON FUNCTION @extschema@.paynotify_retention_floor(text) IS
	'the shortest keep paynotify_purge accepts for a gateway: its retry horizon plus a day';

-- Everything that happened to notifications, orders, in time order.
CREATE FUNCTION @extschema@.paynotify_trace_rows(p_channel text, p_notify_id text, p_order_no text, p_by_order boolean)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
BEGIN
	IF p_by_order AND p_order_no IS NULL THEN
		RAISE EXCEPTION 'order_no must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT p_by_order AND (p_channel IS NULL OR p_notify_id IS NULL) THEN
		RAISE EXCEPTION 'channel and notify_id must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	RETURN QUERY
	WITH n AS (
		SELECT l.* FROM @extschema@.payment_notify_log l
		WHERE (p_order_no IS NULL AND l.channel = p_channel AND l.notify_id = p_notify_id)
		   OR (p_order_no IS NOT NULL AND l.order_no = p_order_no)
	), ids AS (
		SELECT n.channel, n.notify_id FROM n
		UNION
		SELECT p_channel, p_notify_id WHERE p_order_no IS NULL
	), ev AS (
		SELECT n.first_seen AS at, 0 AS ord, 'notification' AS kind, n.channel, n.notify_id,
			jsonb_build_object('status', n.status, 'note', n.note, 'order_no', n.order_no,
				'event_type', n.event_type, 'first_delivery', n.first_seen,
				'last_delivery', n.last_seen, 'deliveries', n.delivery_count,
				'attempts', n.attempts, 'processed_at', n.processed_at,
				'last_error', n.error_msg,
				'payload_sha256', encode(sha256(convert_to(n.payload::text, 'UTF8')), 'hex'),
				'payload', n.payload) AS detail
		FROM n
		UNION ALL
		SELECT n.last_seen, 9, 'last_delivery', n.channel, n.notify_id,
			jsonb_build_object('deliveries', n.delivery_count, 'status', n.status)
		FROM n WHERE n.delivery_count > 1
		UNION ALL
		SELECT d.at, 1, 'delivery', d.channel, d.notify_id,
			jsonb_build_object('outcome', d.outcome, 'http_status', d.http_status,
				'payload_sha256', d.payload_sha256, 'client', d.client)
		FROM @extschema@.paynotify_delivery_history d JOIN ids USING (channel, notify_id)
		UNION ALL
		SELECT a.created_at, 3, 'anomaly', a.channel, a.notify_id,
			jsonb_build_object('id', a.id, 'kind', a.kind, 'order_no', a.order_no,
				'resolved_at', a.resolved_at, 'resolved_by', a.resolved_by,
				'note', a.note, 'notice', a.detail)
		FROM @extschema@.paynotify_anomaly a
		WHERE (p_order_no IS NULL AND a.channel = p_channel AND a.notify_id = p_notify_id)
		   OR (p_order_no IS NOT NULL AND a.order_no = p_order_no)
		UNION ALL
		SELECT p.created_at, 2, 'payment', p.channel, p.notify_id,
			jsonb_build_object('trade_no', p.trade_no, 'order_no', p.order_no,
				'amount', p.amount, 'currency', p.currency)
		FROM @extschema@.payment_record p
		WHERE (p_order_no IS NULL AND p.channel = p_channel AND p.notify_id = p_notify_id)
		   OR (p_order_no IS NOT NULL AND p.order_no = p_order_no)
		UNION ALL
		SELECT r.created_at, 2, 'refund', r.channel, r.notify_id,
			jsonb_build_object('refund_id', r.refund_id, 'trade_no', r.trade_no,
				'order_no', r.order_no, 'amount', r.amount, 'status', r.status)
		FROM @extschema@.paynotify_refund r
		WHERE (p_order_no IS NULL AND r.channel = p_channel AND r.notify_id = p_notify_id)
		   OR (p_order_no IS NOT NULL AND r.order_no = p_order_no)
		UNION ALL
		SELECT h.at, 4, 'state', h.channel, h.notify_id,
			jsonb_build_object('order_no', h.order_no, 'from', h.from_state, 'to', h.to_state,
				'source', h.source, 'by', h.by_role)
		FROM @extschema@.paynotify_order_history h
		WHERE (p_order_no IS NULL AND h.channel = p_channel AND h.notify_id = p_notify_id)
		   OR (p_order_no IS NOT NULL AND h.order_no = p_order_no)
		UNION ALL
		-- outbox rows are there until a worker claims them
		SELECT o.created_at, 5, 'outbox', o.channel, o.notify_id,
			jsonb_build_object('id', o.id, 'event', o.event, 'order_no', o.order_no,
				'amount', o.amount, 'state', 'queued')
		FROM @extschema@.paynotify_outbox o
		WHERE (p_order_no IS NULL AND o.channel = p_channel AND o.notify_id = p_notify_id)
		   OR (p_order_no IS NOT NULL AND o.order_no = p_order_no)
		UNION ALL
		-- once paynotify-relay took an event, its deliveries to each endpoint
		SELECT d.created_at, 5, 'outbox', d.channel, d.body::jsonb ->> 'notify_id',
			jsonb_build_object('id', d.outbox_id, 'event', d.event, 'order_no', d.order_no,
				'amount', d.body::jsonb -> 'amount', 'endpoint_id', d.endpoint_id,
				'state', CASE WHEN d.delivered_at IS NOT NULL THEN 'delivered'
							  WHEN d.dead_at IS NOT NULL THEN 'dead' ELSE 'pending' END,
				'attempts', d.attempts, 'last_status', d.last_status, 'last_error', d.last_error,
				'delivered_at', d.delivered_at, 'dead_at', d.dead_at)
		FROM @extschema@.paynotify_delivery d
		WHERE (p_order_no IS NULL AND d.channel = p_channel
			   AND d.body::jsonb ->> 'notify_id' = p_notify_id)
		   OR (p_order_no IS NOT NULL AND d.order_no = p_order_no)
	)
	SELECT ev.at, ev.kind, ev.channel, ev.notify_id, ev.detail FROM ev
	ORDER BY ev.at, ev.ord, ev.channel, ev.notify_id, ev.detail::text;
END
$$;

CREATE FUNCTION @extschema@.paynotify_trace(channel text, notify_id text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT * FROM @extschema@.paynotify_trace_rows($1, $2, NULL, false) $$;
COMMENT ON FUNCTION @extschema@.paynotify_trace(text, text) IS
	'everything that happened to one notification, in time order';

CREATE FUNCTION @extschema@.paynotify_trace_order(order_no text)
	RETURNS TABLE (at timestamptz, kind text, channel text, notify_id text, detail jsonb)
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT * FROM @extschema@.paynotify_trace_rows(NULL, NULL, $1, true) $$;
COMMENT ON FUNCTION @extschema@.paynotify_trace_order(text) IS
	'everything that happened to one order (notifications, deliveries, payments, refunds, anomalies, status changes, outbox), in time order';

-- Runs a stored failed or parked notification through the business step
-- again, as a redelivery would: the notification's lock, the same rules,
-- hooks as their registrants, the orders table as its owner.  dry_run:
-- the same, rolled back; says what would happen.
CREATE FUNCTION @extschema@.paynotify_retry(channel text, notify_id text,
		dry_run boolean DEFAULT false,
		OUT channel text, OUT notify_id text, OUT status_before text,
		OUT outcome text, OUT status text, OUT error text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_retry'
	LANGUAGE C VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off;
COMMENT ON FUNCTION @extschema@.paynotify_retry(text, text, boolean) IS
	'runs a stored failed or parked notification through the business step again (dry_run: and rolls it back)';

-- Not SECURITY DEFINER: reads the log as its caller (paynotify_admin may)
-- and calls paynotify_retry for each row.
CREATE FUNCTION @extschema@.paynotify_retry_failed(older_than interval,
		max_rows integer DEFAULT 100, dry_run boolean DEFAULT false)
	RETURNS TABLE (channel text, notify_id text, status_before text,
		outcome text, status text, error text)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	r record;
BEGIN
	IF older_than IS NULL OR max_rows IS NULL OR dry_run IS NULL THEN
		RAISE EXCEPTION 'older_than, max_rows and dry_run must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF older_than < interval '0' THEN
		RAISE EXCEPTION 'older_than must not be negative' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF max_rows < 1 THEN
		RAISE EXCEPTION 'max_rows must be at least 1' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- a failure of a library older than 1.1 has no notice to retry
	FOR r IN SELECT l.channel, l.notify_id FROM @extschema@.payment_notify_log l
			 WHERE l.status = 'failed' AND l.last_seen < now() - older_than
			   AND l.notice IS NOT NULL
			 ORDER BY l.last_seen, l.channel, l.notify_id LIMIT max_rows LOOP
		BEGIN
			RETURN QUERY SELECT * FROM @extschema@.paynotify_retry(r.channel, r.notify_id, dry_run);
		EXCEPTION WHEN data_corrupted THEN
			-- a notice changed by hand: say so, and go on with the others
			RAISE WARNING '%', SQLERRM;
		END;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_retry_failed(interval, integer, boolean) IS
	'paynotify_retry for up to max_rows failed notifications with a stored notice last delivered (or retried) longer than older_than ago, oldest first; a malformed notice is a warning';

-- Deletes settled notifications (succeeded, ignored) last seen longer than
-- keep ago, never sooner than paynotify_retention_floor of the channel's
-- gateway; never failed, parked or anomaly rows, nor a notification with an
-- anomaly; never payments or refunds.  Small batches, SKIP LOCKED.
CREATE FUNCTION @extschema@.paynotify_purge(keep interval, max_rows integer DEFAULT 10000,
		batch_size integer DEFAULT 1000, only_channel text DEFAULT NULL)
	RETURNS TABLE (channel text, kept interval, notifications bigint, deliveries bigint)
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	c record;
	floor_ interval;
	n bigint;
	d bigint;
	dsum bigint;
	batch bigint;
	budget bigint := max_rows;
BEGIN
	IF keep IS NULL OR max_rows IS NULL OR batch_size IS NULL THEN
		RAISE EXCEPTION 'keep, max_rows and batch_size must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF max_rows < 1 OR batch_size < 1 THEN
		RAISE EXCEPTION 'max_rows and batch_size must be at least 1'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR c IN SELECT x.channel, ch.gateway
			 FROM (SELECT DISTINCT l.channel FROM @extschema@.payment_notify_log l
				   WHERE only_channel IS NULL OR l.channel = only_channel) x
			 LEFT JOIN @extschema@.paynotify_channel ch ON ch.name = x.channel
			 ORDER BY x.channel LOOP
		floor_ := @extschema@.paynotify_retention_floor(c.gateway);
		kept := greatest(keep, floor_);
		IF keep < floor_ THEN
			RAISE NOTICE 'channel "%" keeps notifications for %, not %', c.channel, floor_, keep
				USING DETAIL = pg_catalog.format('The %s gateway may redeliver a notification until its retry horizon has passed; a row deleted earlier would let that redelivery be applied twice.',
												 COALESCE(c.gateway, 'unknown')),
					  HINT = 'paynotify_retention_floor(gateway) gives the shortest keep of each gateway.';
		END IF;
		n := 0;
		dsum := 0;
		LOOP
			EXIT WHEN budget <= 0;
			WITH victims AS (
				SELECT l.channel, l.notify_id FROM @extschema@.payment_notify_log l
				WHERE l.channel = c.channel AND l.status IN ('succeeded', 'ignored')
				  AND l.last_seen < now() - kept
				  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_anomaly a
								  WHERE a.channel = l.channel AND a.notify_id = l.notify_id)
				LIMIT least(batch_size, budget)
				FOR UPDATE SKIP LOCKED
			), gone AS (
				DELETE FROM @extschema@.payment_notify_log l USING victims v
				WHERE l.channel = v.channel AND l.notify_id = v.notify_id
				RETURNING l.channel, l.notify_id
			), dgone AS (
				DELETE FROM @extschema@.paynotify_delivery_history dl USING gone g
				WHERE dl.channel = g.channel AND dl.notify_id = g.notify_id
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM dgone) INTO batch, d;
			EXIT WHEN batch = 0;
			n := n + batch;
			dsum := dsum + d;
			budget := budget - batch;
		END LOOP;
		channel := c.channel;
		notifications := n;
		deliveries := dsum;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_purge(interval, integer, integer, text) IS
	'deletes settled notifications older than keep (never sooner than the gateway''s retry horizon plus a day), at most max_rows in batches, of one channel or all; returns what it removed per channel';

-- Marks an anomaly as looked at.
CREATE FUNCTION @extschema@.paynotify_resolve_anomaly(id bigint, note text)
	RETURNS SETOF @extschema@.paynotify_anomaly
	LANGUAGE plpgsql VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	a @extschema@.paynotify_anomaly;
BEGIN
	IF $1 IS NULL OR $2 IS NULL THEN
		RAISE EXCEPTION 'id and note must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF btrim($2) = '' THEN
		RAISE EXCEPTION 'note must say what was done' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT * INTO a FROM @extschema@.paynotify_anomaly x WHERE x.id = $1 FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'anomaly % does not exist', $1 USING ERRCODE = 'no_data_found';
	END IF;
	IF a.resolved_at IS NOT NULL THEN
		RAISE EXCEPTION 'anomaly % was already resolved by %', $1, a.resolved_by
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = pg_catalog.format('Resolved at %s: %s', a.resolved_at, a.note);
	END IF;
	RETURN QUERY UPDATE @extschema@.paynotify_anomaly x
		SET resolved_at = pg_catalog.now(), resolved_by = session_user, note = $2
		WHERE x.id = $1 RETURNING x.*;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_resolve_anomaly(bigint, text) IS
	'marks an anomaly resolved, with a note of what was done';

-- One row per channel; read as the view's owner (granted to paynotify_admin).
-- outbox_backlog: events not yet delivered: rows in paynotify_outbox (not yet
-- claimed or fanned out) and paynotify-relay's deliveries neither delivered nor
-- dead; outbox_dead: the relay's dead letters (paynotify_redeliver replays them).
CREATE VIEW @extschema@.paynotify_stats AS
	SELECT ch.name AS channel, ch.gateway,
		COALESCE(l.notifications, 0) AS notifications,
		COALESCE(l.succeeded, 0) AS succeeded,
		COALESCE(l.ignored, 0) AS ignored,
		COALESCE(l.anomaly, 0) AS anomaly,
		COALESCE(l.parked, 0) AS parked,
		COALESCE(l.failed, 0) AS failed,
		COALESCE(l.deliveries, 0) AS deliveries,
		CASE WHEN COALESCE(l.deliveries, 0) > 0
			THEN round((l.deliveries - l.notifications)::numeric OPERATOR(pg_catalog./) l.deliveries::numeric, 4)
			ELSE 0 END AS duplicate_ratio,
		COALESCE(EXTRACT(epoch FROM now() - l.oldest_failed), 0)::bigint AS oldest_failed_seconds,
		COALESCE(EXTRACT(epoch FROM now() - l.oldest_parked), 0)::bigint AS oldest_parked_seconds,
		COALESCE(a.last_24h, 0) AS anomalies_24h,
		COALESCE(a.unresolved, 0) AS anomalies_unresolved,
		COALESCE(o.backlog, 0) AS outbox_backlog,
		COALESCE(EXTRACT(epoch FROM now() - o.oldest), 0)::bigint AS outbox_oldest_seconds,
		COALESCE(o.dead, 0) AS outbox_dead
	FROM @extschema@.paynotify_channel ch
	LEFT JOIN (
		SELECT x.channel, count(*) AS notifications,
			count(*) FILTER (WHERE x.status = 'succeeded') AS succeeded,
			count(*) FILTER (WHERE x.status = 'ignored') AS ignored,
			count(*) FILTER (WHERE x.status = 'anomaly') AS anomaly,
			count(*) FILTER (WHERE x.status = 'parked') AS parked,
			count(*) FILTER (WHERE x.status = 'failed') AS failed,
			sum(x.delivery_count) AS deliveries,
			min(x.first_seen) FILTER (WHERE x.status = 'failed') AS oldest_failed,
			min(x.first_seen) FILTER (WHERE x.status = 'parked') AS oldest_parked
		FROM @extschema@.payment_notify_log x GROUP BY x.channel) l ON l.channel = ch.name
	LEFT JOIN (
		SELECT y.channel,
			count(*) FILTER (WHERE y.created_at > now() - interval '24 hours') AS last_24h,
			count(*) FILTER (WHERE y.resolved_at IS NULL) AS unresolved
		FROM @extschema@.paynotify_anomaly y GROUP BY y.channel) a ON a.channel = ch.name
	LEFT JOIN (
		SELECT z.channel, count(*) FILTER (WHERE NOT z.dead) AS backlog,
			min(z.created_at) FILTER (WHERE NOT z.dead) AS oldest,
			count(*) FILTER (WHERE z.dead) AS dead
		FROM (SELECT q.channel, q.created_at, false AS dead FROM @extschema@.paynotify_outbox q
			  UNION ALL
			  SELECT d.channel, d.created_at, d.dead_at IS NOT NULL
			  FROM @extschema@.paynotify_delivery d WHERE d.delivered_at IS NULL) z
		GROUP BY z.channel) o ON o.channel = ch.name;
COMMENT ON VIEW @extschema@.paynotify_stats IS
	'paynotify: per channel, notifications by status, deliveries, duplicate ratio, failed and parked now and their oldest age, anomalies, outbox backlog';

REVOKE ALL ON @extschema@.paynotify_order_history, @extschema@.paynotify_delivery_history,
	@extschema@.paynotify_stats FROM PUBLIC;
REVOKE ALL ON FUNCTION
	@extschema@.paynotify_retention_floor(text),
	@extschema@.paynotify_trace_rows(text, text, text, boolean),
	@extschema@.paynotify_trace(text, text),
	@extschema@.paynotify_trace_order(text),
	@extschema@.paynotify_retry(text, text, boolean),
	@extschema@.paynotify_retry_failed(interval, integer, boolean),
	@extschema@.paynotify_purge(interval, integer, integer, text),
	@extschema@.paynotify_resolve_anomaly(bigint, text)
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	@extschema@.paynotify_retention_floor(text),
	@extschema@.paynotify_trace(text, text),
	@extschema@.paynotify_trace_order(text),
	@extschema@.paynotify_retry(text, text, boolean),
	@extschema@.paynotify_retry_failed(interval, integer, boolean),
	@extschema@.paynotify_purge(interval, integer, integer, text),
	@extschema@.paynotify_resolve_anomaly(bigint, text)
	TO paynotify_admin;
GRANT SELECT ON @extschema@.paynotify_order_history, @extschema@.paynotify_delivery_history,
	@extschema@.paynotify_stats
	TO paynotify_admin;
