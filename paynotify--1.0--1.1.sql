/* paynotify--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.1'" to load this file. \quit

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
	FOR r IN SELECT l.channel, l.notify_id FROM @extschema@.payment_notify_log l
			 WHERE l.status = 'failed' AND l.last_seen < now() - older_than
			 ORDER BY l.last_seen, l.channel, l.notify_id LIMIT max_rows LOOP
		RETURN QUERY SELECT * FROM @extschema@.paynotify_retry(r.channel, r.notify_id, dry_run);
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_retry_failed(interval, integer, boolean) IS
	'paynotify_retry for up to max_rows failed notifications last delivered (or retried) longer than older_than ago, oldest first';

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
-- outbox_backlog: the rows in paynotify_outbox (not yet claimed).
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
			THEN round((l.deliveries - l.notifications)::numeric / l.deliveries, 4)
			ELSE 0 END AS duplicate_ratio,
		COALESCE(EXTRACT(epoch FROM now() - l.oldest_failed), 0)::bigint AS oldest_failed_seconds,
		COALESCE(EXTRACT(epoch FROM now() - l.oldest_parked), 0)::bigint AS oldest_parked_seconds,
		COALESCE(a.last_24h, 0) AS anomalies_24h,
		COALESCE(a.unresolved, 0) AS anomalies_unresolved,
		COALESCE(o.backlog, 0) AS outbox_backlog,
		COALESCE(EXTRACT(epoch FROM now() - o.oldest), 0)::bigint AS outbox_oldest_seconds
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
		SELECT z.channel, count(*) AS backlog, min(z.created_at) AS oldest
		FROM @extschema@.paynotify_outbox z GROUP BY z.channel) o ON o.channel = ch.name;
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

-- ===== relay (endpoints, deliveries) =====
