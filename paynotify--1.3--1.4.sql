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
