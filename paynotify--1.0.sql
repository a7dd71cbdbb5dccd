/* paynotify--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION paynotify" to load this file. \quit

DO $$
BEGIN
	IF pg_catalog.current_setting('server_encoding') <> 'UTF8' THEN
		RAISE EXCEPTION 'paynotify needs a UTF8 database, not %',
			pg_catalog.current_setting('server_encoding')
			USING ERRCODE = 'feature_not_supported';
	END IF;
	-- Cluster-wide group roles, created once: the shim's login role joins
	-- paynotify_handler; configuration can be delegated to paynotify_admin.
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'paynotify_handler') THEN
		CREATE ROLE paynotify_handler NOLOGIN;
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'paynotify_admin') THEN
		CREATE ROLE paynotify_admin NOLOGIN;
	END IF;
END
$$;

------------------------------------------------------------------------------
-- Configuration tables (DBA only; read by paynotify_handle as their owner)
------------------------------------------------------------------------------

CREATE TABLE @extschema@.paynotify_channel (
	name		text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_]{1,63}$'),
	gateway		text NOT NULL,
	settings	jsonb NOT NULL DEFAULT '{}',
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.paynotify_channel IS
	'paynotify: one row per merchant account at a gateway; settings may hold secrets';

CREATE TABLE @extschema@.paynotify_key (
	channel		text NOT NULL REFERENCES @extschema@.paynotify_channel ON DELETE CASCADE,
	key_id		text NOT NULL CHECK (key_id <> ''),
	material	text NOT NULL,
	not_before	timestamptz,
	not_after	timestamptz,
	retired_at	timestamptz,
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (channel, key_id),
	CHECK (not_before IS NULL OR not_after IS NULL OR not_before < not_after)
);
COMMENT ON TABLE @extschema@.paynotify_key IS
	'paynotify: gateway public keys, certificates and signing secrets per channel';

CREATE TABLE @extschema@.paynotify_binding (
	singleton	boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	orders		text NOT NULL,
	key_column	name NOT NULL,
	status_column name NOT NULL,
	amount_column name,
	currency_column name
);
COMMENT ON TABLE @extschema@.paynotify_binding IS
	'paynotify: the orders table notifications act on (set by paynotify_bind_orders)';

CREATE TABLE @extschema@.paynotify_transition (
	from_state	text NOT NULL,
	to_state	text NOT NULL,
	PRIMARY KEY (from_state, to_state),
	CHECK (from_state <> to_state)
);
COMMENT ON TABLE @extschema@.paynotify_transition IS
	'paynotify: the order state machine''s legal transitions; edit to change it';

INSERT INTO @extschema@.paynotify_transition VALUES
	('pending', 'paid'), ('pending', 'cancelled'),
	('paid', 'shipped'), ('paid', 'refunding'),
	('shipped', 'received'),
	('received', 'refunding'), ('received', 'completed'),
	('refunding', 'refunded'), ('refunding', 'paid');

CREATE TABLE @extschema@.paynotify_hook (
	event		text NOT NULL CHECK (event IN ('paid', 'refunded', 'refund_failed', 'closed')),
	handler		text NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (event, handler)
);
COMMENT ON TABLE @extschema@.paynotify_hook IS
	'paynotify: functions run inside the business step of each applied event';

------------------------------------------------------------------------------
-- Data tables
------------------------------------------------------------------------------

CREATE TABLE @extschema@.payment_notify_log (
	channel		text NOT NULL,
	notify_id	text NOT NULL,
	order_no	text,
	event_type	text,
	payload		jsonb,
	status		text NOT NULL
		CHECK (status IN ('succeeded', 'failed', 'ignored', 'parked', 'anomaly')),
	note		text,
	delivery_count integer NOT NULL DEFAULT 1,
	attempts	integer NOT NULL DEFAULT 1,
	error_msg	text,
	notice		jsonb,
	first_seen	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_seen	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	processed_at timestamptz,
	PRIMARY KEY (channel, notify_id)
);
CREATE INDEX payment_notify_log_parked ON @extschema@.payment_notify_log (order_no)
	WHERE status = 'parked';
CREATE INDEX payment_notify_log_failed ON @extschema@.payment_notify_log (last_seen)
	WHERE status = 'failed';
COMMENT ON TABLE @extschema@.payment_notify_log IS
	'paynotify: one row per authentic notification (the dedup record)';

CREATE TABLE @extschema@.payment_record (
	channel		text NOT NULL,
	trade_no	text NOT NULL,
	order_no	text NOT NULL,
	amount		bigint NOT NULL,
	currency	text,
	notify_id	text NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (channel, trade_no)
);
-- the per-order reads of the business step (the order's trades)
CREATE INDEX payment_record_order ON @extschema@.payment_record (order_no);
COMMENT ON TABLE @extschema@.payment_record IS
	'paynotify: one row per payment received (amount in minor units)';

CREATE TABLE @extschema@.paynotify_refund (
	channel		text NOT NULL,
	refund_id	text NOT NULL,
	order_no	text NOT NULL,
	trade_no	text,
	amount		bigint NOT NULL,
	status		text NOT NULL CHECK (status IN ('succeeded', 'failed')),
	notify_id	text NOT NULL,
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (channel, refund_id)
);
CREATE INDEX paynotify_refund_order ON @extschema@.paynotify_refund (order_no);
-- the per-trade sums of the business step
CREATE INDEX paynotify_refund_trade ON @extschema@.paynotify_refund (channel, trade_no);
COMMENT ON TABLE @extschema@.paynotify_refund IS
	'paynotify: one row per gateway refund (amount in minor units)';

CREATE TABLE @extschema@.paynotify_outbox (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event		text NOT NULL,
	channel		text NOT NULL,
	order_no	text NOT NULL,
	notify_id	text NOT NULL,
	amount		bigint,
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.paynotify_outbox IS
	'paynotify: after-commit work (shipping, ERP); take rows with paynotify_outbox_claim';

CREATE TABLE @extschema@.paynotify_anomaly (
	id			bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	channel		text NOT NULL,
	notify_id	text,
	order_no	text,
	kind		text NOT NULL,
	detail		jsonb,
	created_at	timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@.paynotify_anomaly IS
	'paynotify: authentic notifications that were not applied because something is off';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_channel', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_key', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_binding', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_transition', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_hook', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.payment_notify_log', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.payment_record', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_refund', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_outbox', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_anomaly', '');

------------------------------------------------------------------------------
-- Cache invalidation: any change to configuration reaches every backend
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.paynotify_config_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'paynotify_config_changed' LANGUAGE C;

DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['paynotify_channel', 'paynotify_key', 'paynotify_binding',
							 'paynotify_transition', 'paynotify_hook'] LOOP
		EXECUTE pg_catalog.format(
			'CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.%I'
			' FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.paynotify_config_changed()',
			t || '_changed', t);
	END LOOP;
END
$$;

------------------------------------------------------------------------------
-- Primitives
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.paynotify_rsa_verify(public_key text, message bytea,
		signature text, digest text DEFAULT 'sha256')
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'paynotify_rsa_verify'
	LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.paynotify_rsa_verify(text, bytea, text, text) IS
	'RSASSA-PKCS1-v1_5 verification of a base64 signature with a PEM public key or certificate';

CREATE FUNCTION @extschema@.paynotify_aead_decrypt(key bytea, nonce bytea, aad bytea,
		ciphertext text)
	RETURNS bytea
	AS 'MODULE_PATHNAME', 'paynotify_aead_decrypt'
	LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.paynotify_aead_decrypt(bytea, bytea, bytea, text) IS
	'AES-GCM decryption of base64(ciphertext || 16-byte tag); a wrong tag raises an error';

------------------------------------------------------------------------------
-- Configuration functions
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.paynotify_check_settings(gateway text, settings jsonb)
	RETURNS void
	AS 'MODULE_PATHNAME', 'paynotify_check_settings'
	LANGUAGE C STRICT STABLE;
COMMENT ON FUNCTION @extschema@.paynotify_check_settings(text, jsonb) IS
	'raises an error unless settings are valid for the gateway';

CREATE FUNCTION @extschema@.paynotify_check_key(gateway text, key_id text, material text)
	RETURNS text
	AS 'MODULE_PATHNAME', 'paynotify_check_key'
	LANGUAGE C STRICT STABLE
	SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.paynotify_check_key(text, text, text) IS
	'raises an error unless material is a usable key for the gateway; returns it normalised';

CREATE FUNCTION @extschema@.paynotify_add_channel(name text, gateway text,
		settings jsonb DEFAULT '{}')
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF name IS NULL OR name !~ '^[A-Za-z0-9_]{1,63}$' THEN
		RAISE EXCEPTION 'invalid channel name "%"', name
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Use 1 to 63 letters, digits or underscores; the name appears in the notify URL.';
	END IF;
	PERFORM @extschema@.paynotify_check_settings(gateway, coalesce(settings, '{}'));
	INSERT INTO @extschema@.paynotify_channel (name, gateway, settings)
		VALUES (name, gateway, coalesce(settings, '{}'));
EXCEPTION WHEN unique_violation THEN
	RAISE EXCEPTION 'channel "%" already exists', name
		USING ERRCODE = 'duplicate_object',
			  HINT = 'Use paynotify_alter_channel to change its settings.';
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_add_channel(text, text, jsonb) IS
	'adds a channel: a merchant account at wxpay, alipay or stripe';

CREATE FUNCTION @extschema@.paynotify_alter_channel(name text, settings jsonb)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	gw text;
BEGIN
	SELECT c.gateway INTO gw FROM @extschema@.paynotify_channel c WHERE c.name = $1 FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'channel "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM @extschema@.paynotify_check_settings(gw, settings);
	UPDATE @extschema@.paynotify_channel c SET settings = $2 WHERE c.name = $1;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_alter_channel(text, jsonb) IS
	'replaces a channel''s settings';

CREATE FUNCTION @extschema@.paynotify_add_key(channel text, key_id text, material text,
		not_before timestamptz DEFAULT NULL, not_after timestamptz DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	gw text;
	normalised text;
BEGIN
	SELECT c.gateway INTO gw FROM @extschema@.paynotify_channel c WHERE c.name = $1;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'channel "%" does not exist', channel USING ERRCODE = 'undefined_object';
	END IF;
	normalised := @extschema@.paynotify_check_key(gw, key_id, material);
	IF not_before IS NOT NULL AND not_after IS NOT NULL AND not_before >= not_after THEN
		RAISE EXCEPTION 'not_before must be earlier than not_after'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	INSERT INTO @extschema@.paynotify_key (channel, key_id, material, not_before, not_after)
		VALUES (channel, key_id, normalised, not_before, not_after);
EXCEPTION WHEN unique_violation THEN
	RAISE EXCEPTION 'key "%" already exists for channel "%"', key_id, channel
		USING ERRCODE = 'duplicate_object',
			  HINT = 'Retire it first with paynotify_retire_key, or use another key id.';
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_add_key(text, text, text, timestamptz, timestamptz) IS
	'trusts a key for a channel: WeChat serial or PUB_KEY_ID_ with PEM, Alipay PEM, Stripe whsec_ secret';

CREATE FUNCTION @extschema@.paynotify_retire_key(channel text, key_id text)
	RETURNS boolean
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	UPDATE @extschema@.paynotify_key k SET retired_at = pg_catalog.now()
		WHERE k.channel = $1 AND k.key_id = $2 AND k.retired_at IS NULL;
	IF FOUND THEN
		RETURN true;
	END IF;
	IF NOT EXISTS (SELECT FROM @extschema@.paynotify_key k WHERE k.channel = $1 AND k.key_id = $2) THEN
		RAISE EXCEPTION 'key "%" does not exist for channel "%"', key_id, channel
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN false;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_retire_key(text, text) IS
	'stops trusting a key (kept for the record); false when it was already retired';

CREATE FUNCTION @extschema@.paynotify_bind_orders(orders regclass,
		key_column name DEFAULT 'order_no', status_column name DEFAULT 'status',
		amount_column name DEFAULT NULL, currency_column name DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	col name;
	qualified text;
BEGIN
	IF orders IS NULL OR key_column IS NULL OR status_column IS NULL THEN
		RAISE EXCEPTION 'orders, key_column and status_column must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	FOREACH col IN ARRAY ARRAY[key_column, status_column, amount_column, currency_column] LOOP
		IF col IS NOT NULL AND NOT EXISTS (
				SELECT FROM pg_catalog.pg_attribute a
				WHERE a.attrelid = orders AND a.attname = col
				  AND a.attnum > 0 AND NOT a.attisdropped) THEN
			RAISE EXCEPTION 'column "%" of relation % does not exist', col, orders
				USING ERRCODE = 'undefined_column';
		END IF;
	END LOOP;
	SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) INTO qualified
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = orders AND c.relkind IN ('r', 'p');
	IF qualified IS NULL THEN
		RAISE EXCEPTION '% is not a table', orders USING ERRCODE = 'wrong_object_type';
	END IF;
	IF amount_column IS NULL THEN
		RAISE WARNING 'orders table % is bound without an amount column: payment amounts are not checked', qualified
			USING HINT = 'Give amount_column (the order total in minor units) to have every payment checked against it.';
	END IF;
	INSERT INTO @extschema@.paynotify_binding (orders, key_column, status_column, amount_column,
			currency_column)
		VALUES (qualified, key_column, status_column, amount_column, currency_column)
		ON CONFLICT (singleton) DO UPDATE SET orders = excluded.orders,
			key_column = excluded.key_column, status_column = excluded.status_column,
			amount_column = excluded.amount_column, currency_column = excluded.currency_column;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_bind_orders(regclass, name, name, name, name) IS
	'names the orders table (and its key, status, amount and currency columns) notifications act on';

CREATE FUNCTION @extschema@.paynotify_on(event text, handler regprocedure)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF event IS NULL OR event NOT IN ('paid', 'refunded', 'refund_failed', 'closed') THEN
		RAISE EXCEPTION 'unknown event "%"', event
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Events are paid, refunded, refund_failed and closed.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.oid = handler
			AND p.pronargs = 1 AND p.proargtypes[0] = 'jsonb'::regtype) THEN
		RAISE EXCEPTION 'handler % must take exactly one jsonb argument', handler
			USING ERRCODE = 'invalid_function_definition';
	END IF;
	INSERT INTO @extschema@.paynotify_hook (event, handler)
		VALUES (event, handler::text) ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_on(text, regprocedure) IS
	'runs handler(event jsonb) inside the business step of every applied event of that kind';

CREATE FUNCTION @extschema@.paynotify_outbox_claim(max_rows integer DEFAULT 100)
	RETURNS SETOF @extschema@.paynotify_outbox
	LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
	DELETE FROM @extschema@.paynotify_outbox o
	WHERE o.id IN (SELECT i.id FROM @extschema@.paynotify_outbox i
				   ORDER BY i.id LIMIT max_rows FOR UPDATE SKIP LOCKED)
	RETURNING o.*
$$;
COMMENT ON FUNCTION @extschema@.paynotify_outbox_claim(integer) IS
	'takes up to max_rows outbox events; they are gone when the caller commits, back if it rolls back';

------------------------------------------------------------------------------
-- State machine
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.paynotify_transit(order_no text, from_state text, to_state text)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'paynotify_transit'
	LANGUAGE C STRICT VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off;
COMMENT ON FUNCTION @extschema@.paynotify_transit(text, text, text) IS
	'moves an order from one state to another if that is legal and it is in from_state; true when this call made the move';

CREATE FUNCTION @extschema@.paynotify_guard_transition() RETURNS trigger
	AS 'MODULE_PATHNAME', 'paynotify_guard_transition'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.paynotify_guard_transition() IS
	'BEFORE UPDATE trigger for the orders table: rejects status changes the state machine does not allow';

------------------------------------------------------------------------------
-- Entry point
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.paynotify_handle(channel text, headers jsonb, body bytea,
		OUT status integer, OUT content_type text, OUT body text, OUT outcome text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'paynotify_handle'
	LANGUAGE C VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	-- every query inside is a keyed lookup: never let a plan cached while a
	-- table was empty (fresh install, just truncated) scan it once it is
	-- large, and never spend time compiling such small statements
	SET enable_seqscan = off
	SET jit = off;
COMMENT ON FUNCTION @extschema@.paynotify_handle(text, jsonb, bytea) IS
	'applies one gateway notification exactly once and returns the HTTP reply';

CREATE FUNCTION @extschema@.paynotify_handle(channel text, headers jsonb, body text,
		OUT status integer, OUT content_type text, OUT body text, OUT outcome text)
	RETURNS record
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT * FROM @extschema@.paynotify_handle($1, $2, pg_catalog.convert_to($3, 'UTF8')) $$;
COMMENT ON FUNCTION @extschema@.paynotify_handle(text, jsonb, text) IS
	'paynotify_handle for a body given as text (signed as its UTF-8 bytes)';

------------------------------------------------------------------------------
-- Privileges: nothing for PUBLIC; the shim's role may only call the entry point
------------------------------------------------------------------------------

REVOKE ALL ON ALL TABLES IN SCHEMA @extschema@ FROM PUBLIC;
REVOKE ALL ON FUNCTION
	@extschema@.paynotify_config_changed(),
	@extschema@.paynotify_rsa_verify(text, bytea, text, text),
	@extschema@.paynotify_aead_decrypt(bytea, bytea, bytea, text),
	@extschema@.paynotify_check_settings(text, jsonb),
	@extschema@.paynotify_check_key(text, text, text),
	@extschema@.paynotify_add_channel(text, text, jsonb),
	@extschema@.paynotify_alter_channel(text, jsonb),
	@extschema@.paynotify_add_key(text, text, text, timestamptz, timestamptz),
	@extschema@.paynotify_retire_key(text, text),
	@extschema@.paynotify_bind_orders(regclass, name, name, name, name),
	@extschema@.paynotify_on(text, regprocedure),
	@extschema@.paynotify_outbox_claim(integer),
	@extschema@.paynotify_transit(text, text, text),
	@extschema@.paynotify_guard_transition(),
	@extschema@.paynotify_handle(text, jsonb, bytea),
	@extschema@.paynotify_handle(text, jsonb, text)
	FROM PUBLIC;

GRANT EXECUTE ON FUNCTION
	@extschema@.paynotify_handle(text, jsonb, bytea),
	@extschema@.paynotify_handle(text, jsonb, text)
	TO paynotify_handler;

GRANT EXECUTE ON FUNCTION
	@extschema@.paynotify_rsa_verify(text, bytea, text, text),
	@extschema@.paynotify_aead_decrypt(bytea, bytea, bytea, text),
	@extschema@.paynotify_add_channel(text, text, jsonb),
	@extschema@.paynotify_alter_channel(text, jsonb),
	@extschema@.paynotify_add_key(text, text, text, timestamptz, timestamptz),
	@extschema@.paynotify_retire_key(text, text),
	@extschema@.paynotify_bind_orders(regclass, name, name, name, name),
	@extschema@.paynotify_on(text, regprocedure),
	@extschema@.paynotify_outbox_claim(integer),
	@extschema@.paynotify_transit(text, text, text),
	@extschema@.paynotify_handle(text, jsonb, bytea),
	@extschema@.paynotify_handle(text, jsonb, text)
	TO paynotify_admin;
GRANT SELECT ON
	@extschema@.payment_notify_log, @extschema@.payment_record,
	@extschema@.paynotify_refund, @extschema@.paynotify_anomaly,
	@extschema@.paynotify_transition
	TO paynotify_admin;
