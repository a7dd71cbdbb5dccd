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
	-- a fresh installation, in this transaction only (the later scripts'
	-- upgrade steps read it; a value set outside can never be this xid)
	PERFORM pg_catalog.set_config('paynotify_install.fresh', pg_catalog.pg_current_xact_id()::text, true);
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
	currency_column name,
	status_values jsonb
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

-- The default transitions.  CREATE EXTENSION inserts them, so pg_dump dumps
-- only the rows that are not among them (the filter below), and the default
-- ones that were deleted are remembered in paynotify_transition_removed: a
-- restore re-creates the defaults, adds the rows added, and deletes again
-- those removed.  The list appears three times in this file (this INSERT,
-- the dump filter, paynotify_transition_is_default): keep them equal.
INSERT INTO @extschema@.paynotify_transition VALUES
	('pending', 'paid'), ('pending', 'cancelled'),
	('paid', 'shipped'), ('paid', 'refunding'),
	('shipped', 'received'),
	('received', 'refunding'), ('received', 'completed'),
	('refunding', 'refunded'), ('refunding', 'paid');

CREATE TABLE @extschema@.paynotify_transition_removed (
	from_state	text NOT NULL,
	to_state	text NOT NULL,
	PRIMARY KEY (from_state, to_state)
);
COMMENT ON TABLE @extschema@.paynotify_transition_removed IS
	'paynotify: default transitions deleted from paynotify_transition (kept up to date by triggers; restored by pg_restore)';

CREATE FUNCTION @extschema@.paynotify_transition_is_default(from_state text, to_state text)
	RETURNS boolean
	LANGUAGE sql IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT (from_state, to_state) IN (VALUES
		('pending', 'paid'), ('pending', 'cancelled'),
		('paid', 'shipped'), ('paid', 'refunding'),
		('shipped', 'received'),
		('received', 'refunding'), ('received', 'completed'),
		('refunding', 'refunded'), ('refunding', 'paid'))
$$;

-- Keeps paynotify_transition_removed true to paynotify_transition, and
-- applies it when pg_restore reloads it (after CREATE EXTENSION has put
-- every default back).
CREATE FUNCTION @extschema@.paynotify_transition_track() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF TG_TABLE_NAME = 'paynotify_transition_removed' THEN
		DELETE FROM @extschema@.paynotify_transition t
			WHERE t.from_state = NEW.from_state AND t.to_state = NEW.to_state;
		RETURN NULL;
	END IF;
	IF TG_OP = 'TRUNCATE' THEN
		INSERT INTO @extschema@.paynotify_transition_removed
			SELECT d.f, d.t FROM (VALUES
				('pending', 'paid'), ('pending', 'cancelled'),
				('paid', 'shipped'), ('paid', 'refunding'),
				('shipped', 'received'),
				('received', 'refunding'), ('received', 'completed'),
				('refunding', 'refunded'), ('refunding', 'paid')) d(f, t)
			ON CONFLICT DO NOTHING;
		RETURN NULL;
	END IF;
	IF (TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND
			(OLD.from_state, OLD.to_state) IS DISTINCT FROM (NEW.from_state, NEW.to_state)))
			AND @extschema@.paynotify_transition_is_default(OLD.from_state, OLD.to_state) THEN
		INSERT INTO @extschema@.paynotify_transition_removed VALUES (OLD.from_state, OLD.to_state)
			ON CONFLICT DO NOTHING;
	END IF;
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		DELETE FROM @extschema@.paynotify_transition_removed r
			WHERE r.from_state = NEW.from_state AND r.to_state = NEW.to_state;
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER paynotify_transition_track AFTER INSERT OR UPDATE OR DELETE
	ON @extschema@.paynotify_transition
	FOR EACH ROW EXECUTE FUNCTION @extschema@.paynotify_transition_track();
CREATE TRIGGER paynotify_transition_track_truncate AFTER TRUNCATE
	ON @extschema@.paynotify_transition
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.paynotify_transition_track();
CREATE TRIGGER paynotify_transition_removed_restore AFTER INSERT
	ON @extschema@.paynotify_transition_removed
	FOR EACH ROW EXECUTE FUNCTION @extschema@.paynotify_transition_track();

CREATE TABLE @extschema@.paynotify_hook (
	event		text NOT NULL CHECK (event IN ('paid', 'refunded', 'refund_failed', 'closed')),
	handler		text NOT NULL,
	registered_by regrole NOT NULL,		-- the hook runs as this role
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
-- only what differs from the defaults (see paynotify_transition above)
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_transition',
	'WHERE (from_state, to_state) NOT IN (VALUES'
	' (''pending'', ''paid''), (''pending'', ''cancelled''),'
	' (''paid'', ''shipped''), (''paid'', ''refunding''),'
	' (''shipped'', ''received''),'
	' (''received'', ''refunding''), (''received'', ''completed''),'
	' (''refunding'', ''refunded''), (''refunding'', ''paid''))');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_transition_removed', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_hook', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.payment_notify_log', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.payment_record', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_refund', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_outbox', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_anomaly', '');
-- their identity sequences too, or a restored database would hand out used ids
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('@extschema@.paynotify_outbox', 'id'), '');
SELECT pg_catalog.pg_extension_config_dump(
	pg_catalog.pg_get_serial_sequence('@extschema@.paynotify_anomaly', 'id'), '');

------------------------------------------------------------------------------
-- Cache invalidation: any change to configuration reaches every backend
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.paynotify_config_changed() RETURNS trigger
	AS 'MODULE_PATHNAME', 'paynotify_config_changed' LANGUAGE C;

-- The one list of configuration tables: the backend finds them by this
-- trigger (load_config_tables in src/config.c).
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
-- One channel per gateway account
------------------------------------------------------------------------------
-- Notification ids, payments and refunds are unique per channel, but the
-- orders table is shared: two channels that accept the same notifications
-- would let one captured on one channel be replayed to the other and take
-- effect twice.  Whatever writes the configuration (the functions below, a
-- direct INSERT/UPDATE, a restore), two channels may not share an account:
--   wxpay   the same mchid; or the same APIv3 key (the key that decrypts the
--           notifications) unless both check their own, different mchid;
--   alipay  the same app_id, unless both check their own, different seller_id;
--   stripe  the same signing secret trusted (not retired) by both.
-- appid is no account: one app may pay into several merchant accounts.

CREATE FUNCTION @extschema@.paynotify_check_account() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	s jsonb;
	gw text;
	other text;
	what text;
	hint text;
BEGIN
	IF pg_catalog.current_setting('paynotify.allow_shared_accounts', true) = 'on' THEN
		RETURN NEW;
	END IF;
	-- one configuration change at a time, so two cannot both pass the check
	PERFORM pg_catalog.pg_advisory_xact_lock(-3751950917148160981);
	IF TG_TABLE_NAME = 'paynotify_channel' THEN
		s := NEW.settings;
		IF NEW.gateway = 'wxpay' THEN
			SELECT c.name INTO other FROM @extschema@.paynotify_channel c
			WHERE c.gateway = 'wxpay' AND c.name <> NEW.name
			  AND (TG_OP = 'INSERT' OR c.name <> OLD.name)
			  AND c.settings->>'mchid' = s->>'mchid'
			ORDER BY c.name LIMIT 1;
			IF FOUND THEN
				what := pg_catalog.format('WeChat Pay merchant %s', s->>'mchid');
				hint := 'Use one channel per merchant account: route every notify URL of the account to it.';
			ELSE
				SELECT c.name INTO other FROM @extschema@.paynotify_channel c
				WHERE c.gateway = 'wxpay' AND c.name <> NEW.name
				  AND (TG_OP = 'INSERT' OR c.name <> OLD.name)
				  AND c.settings->>'apiv3_key' = s->>'apiv3_key'
				  AND (c.settings->>'mchid' IS NULL OR s->>'mchid' IS NULL)
				ORDER BY c.name LIMIT 1;
				IF FOUND THEN
					what := 'WeChat Pay notifications decrypted with the same APIv3 key';
					hint := 'Set mchid on both channels, each its own merchant number, or use one channel per merchant account.';
				END IF;
			END IF;
		ELSIF NEW.gateway = 'alipay' THEN
			SELECT c.name INTO other FROM @extschema@.paynotify_channel c
			WHERE c.gateway = 'alipay' AND c.name <> NEW.name
			  AND (TG_OP = 'INSERT' OR c.name <> OLD.name)
			  AND c.settings->>'app_id' = s->>'app_id'
			  AND (c.settings->>'seller_id' IS NULL OR s->>'seller_id' IS NULL
				   OR c.settings->>'seller_id' = s->>'seller_id')
			ORDER BY c.name LIMIT 1;
			IF FOUND THEN
				what := pg_catalog.format('Alipay app_id %s', s->>'app_id');
				hint := 'Use one channel per app_id; two channels may share one only when each checks its own seller_id.';
			END IF;
		END IF;
		IF other IS NOT NULL THEN
			RAISE EXCEPTION 'channel "%" would accept % like channel "%"', NEW.name, what, other
				USING ERRCODE = 'exclusion_violation',
					  DETAIL = 'A notification captured on one channel could be replayed to the other and take effect twice.',
					  HINT = hint;
		END IF;
	ELSIF NEW.retired_at IS NULL THEN	-- paynotify_key
		SELECT c.gateway INTO gw FROM @extschema@.paynotify_channel c WHERE c.name = NEW.channel;
		IF gw = 'stripe' THEN
			SELECT k.channel INTO other
			FROM @extschema@.paynotify_key k
			JOIN @extschema@.paynotify_channel c ON c.name = k.channel
			WHERE c.gateway = 'stripe' AND k.channel <> NEW.channel
			  AND k.retired_at IS NULL AND k.material = NEW.material
			ORDER BY k.channel LIMIT 1;
			IF FOUND THEN
				RAISE EXCEPTION 'key "%" of channel "%" is a signing secret channel "%" already trusts',
						NEW.key_id, NEW.channel, other
					USING ERRCODE = 'exclusion_violation',
						  DETAIL = 'An event captured on one channel could be replayed to the other and take effect twice.',
						  HINT = pg_catalog.format('Each Stripe webhook endpoint has its own signing secret: add this channel''s, or retire the key in channel "%s" first.', other);
			END IF;
		END IF;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_check_account() IS
	'trigger: refuses two channels for one gateway account (mchid, APIv3 key, app_id, Stripe secret)';

CREATE TRIGGER paynotify_channel_account BEFORE INSERT OR UPDATE ON @extschema@.paynotify_channel
	FOR EACH ROW EXECUTE FUNCTION @extschema@.paynotify_check_account();
CREATE TRIGGER paynotify_key_account BEFORE INSERT OR UPDATE ON @extschema@.paynotify_key
	FOR EACH ROW EXECUTE FUNCTION @extschema@.paynotify_check_account();

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

CREATE FUNCTION @extschema@.paynotify_read_secret(filename text)
	RETURNS text
	AS 'MODULE_PATHNAME', 'paynotify_read_secret'
	LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION @extschema@.paynotify_read_secret(text) IS
	'the contents of a file in paynotify.secrets_directory (superuser only; used by the configuration functions)';

-- Settings written {"file": "<name>"} take their value from that file in
-- paynotify.secrets_directory, so that secrets never appear in statement text.
CREATE FUNCTION @extschema@.paynotify_settings_from_files(settings jsonb)
	RETURNS jsonb
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	k text;
	v jsonb;
	result jsonb := settings;
BEGIN
	IF settings IS NULL OR jsonb_typeof(settings) <> 'object' THEN
		RETURN settings;
	END IF;
	FOR k, v IN SELECT e.key, e.value FROM jsonb_each(settings) e LOOP
		IF jsonb_typeof(v) = 'object' THEN
			IF NOT (v ? 'file') OR jsonb_typeof(v->'file') <> 'string'
					OR (SELECT count(*) FROM jsonb_object_keys(v)) <> 1 THEN
				RAISE EXCEPTION 'setting "%" must be a value or {"file": "<name>"}', k
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
			-- only a secret may come from a file: other settings are shown
			-- in messages (the mchid or app_id two channels share), so a
			-- file read into one would show the file to whoever called
			IF k <> 'apiv3_key' THEN
				RAISE EXCEPTION 'setting "%" cannot be read from a file', k
					USING ERRCODE = 'invalid_parameter_value',
						  HINT = 'Only the secret setting apiv3_key is read from paynotify.secrets_directory; give the others as values.';
			END IF;
			result := result || jsonb_build_object(k, @extschema@.paynotify_read_secret(v->>'file'));
		END IF;
	END LOOP;
	RETURN result;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_settings_from_files(jsonb) IS
	'settings with every {"file": "<name>"} value replaced by that file''s contents';

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
	-- before any secret is read: a NULL would pass paynotify_check_settings
	-- (STRICT) and fail the INSERT with the whole row, secrets included, in
	-- the message
	IF gateway IS NULL THEN
		RAISE EXCEPTION 'gateway must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	settings := @extschema@.paynotify_settings_from_files(coalesce(settings, '{}'));
	PERFORM @extschema@.paynotify_check_settings(gateway, settings);
	INSERT INTO @extschema@.paynotify_channel (name, gateway, settings)
		VALUES (name, gateway, settings);
EXCEPTION WHEN unique_violation THEN
	RAISE EXCEPTION 'channel "%" already exists', name
		USING ERRCODE = 'duplicate_object',
			  HINT = 'Use paynotify_alter_channel to change its settings.';
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_add_channel(text, text, jsonb) IS
	'adds a channel: a merchant account at wxpay, alipay or stripe; a setting {"file": "<name>"} is read from paynotify.secrets_directory';

CREATE FUNCTION @extschema@.paynotify_alter_channel(name text, settings jsonb)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	gw text;
	merged jsonb;
BEGIN
	IF settings IS NULL OR jsonb_typeof(settings) <> 'object' THEN
		RAISE EXCEPTION 'settings must be a JSON object'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT c.gateway, c.settings INTO gw, merged
		FROM @extschema@.paynotify_channel c WHERE c.name = $1 FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'channel "%" does not exist', name USING ERRCODE = 'undefined_object';
	END IF;
	-- only the settings named change; a JSON null removes one
	merged := (merged || @extschema@.paynotify_settings_from_files($2))
		- ARRAY(SELECT e.key FROM jsonb_each($2) e WHERE e.value = 'null'::jsonb);
	PERFORM @extschema@.paynotify_check_settings(gw, merged);
	UPDATE @extschema@.paynotify_channel c SET settings = merged WHERE c.name = $1;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_alter_channel(text, jsonb) IS
	'changes the settings named (a JSON null removes one, {"file": "<name>"} reads one from paynotify.secrets_directory); the result is validated';

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

CREATE FUNCTION @extschema@.paynotify_add_key_file(channel text, key_id text, filename text,
		not_before timestamptz DEFAULT NULL, not_after timestamptz DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	IF filename IS NULL THEN
		RAISE EXCEPTION 'filename must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM @extschema@.paynotify_add_key(channel, key_id,
		@extschema@.paynotify_read_secret(filename), not_before, not_after);
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_add_key_file(text, text, text, timestamptz, timestamptz) IS
	'paynotify_add_key with the material read from a file in paynotify.secrets_directory';

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

-- The entry point checks that its caller owns the table or may UPDATE it,
-- then calls paynotify_bind_orders_internal with the same arguments as the
-- extension's owner; nobody else may call the internal one.
CREATE FUNCTION @extschema@.paynotify_bind_orders(orders regclass,
		key_column name DEFAULT 'order_no', status_column name DEFAULT 'status',
		amount_column name DEFAULT NULL, currency_column name DEFAULT NULL,
		status_values jsonb DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'paynotify_bind_orders'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.paynotify_bind_orders(regclass, name, name, name, name, jsonb) IS
	'names the orders table (its key, status, amount and currency columns, and the status values for paynotify''s states) notifications act on';

CREATE FUNCTION @extschema@.paynotify_status_canonical(orders regclass, status_column name,
		value text)
	RETURNS text
	AS 'MODULE_PATHNAME', 'paynotify_status_canonical'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.paynotify_status_canonical(regclass, name, text) IS
	'a status value cast to the status column''s type and back, as the table''s owner (for paynotify_bind_orders_internal)';

CREATE FUNCTION @extschema@.paynotify_bind_orders_internal(orders regclass,
		key_column name, status_column name, amount_column name, currency_column name,
		status_values jsonb)
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	col name;
	qualified text;
	status_type text;
	v record;
	canonical text;
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
	-- another session's, and gone with it (the binding would then follow the
	-- name to whichever session next gets that temporary schema)
	IF (SELECT c.relpersistence = 't' FROM pg_catalog.pg_class c WHERE c.oid = orders) THEN
		RAISE EXCEPTION '% is a temporary table', orders USING ERRCODE = 'wrong_object_type';
	END IF;
	-- status_values: {"paynotify state": table value, ...}; each value must be
	-- a value of the status column written as the column prints it
	IF status_values = '{}' THEN
		status_values := NULL;
	END IF;
	IF status_values IS NOT NULL THEN
		IF pg_catalog.jsonb_typeof(status_values) <> 'object' THEN
			RAISE EXCEPTION 'status_values must be a JSON object mapping paynotify''s states to the status column''s values'
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO status_type
			FROM pg_catalog.pg_attribute a
			WHERE a.attrelid = orders AND a.attname = status_column;
		FOR v IN SELECT e.key, e.value, e.value #>> '{}' AS val
				 FROM pg_catalog.jsonb_each(status_values) e LOOP
			IF pg_catalog.jsonb_typeof(v.value) NOT IN ('string', 'number') THEN
				RAISE EXCEPTION 'status value for "%" must be a string or a number', v.key
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
			BEGIN
				-- as the table's owner: the cast may run its code
				canonical := @extschema@.paynotify_status_canonical(orders, status_column, v.val);
			EXCEPTION WHEN data_exception OR invalid_text_representation OR check_violation
					OR not_null_violation THEN
				RAISE EXCEPTION 'status value % for "%" is not a valid %', v.value, v.key, status_type
					USING ERRCODE = 'invalid_parameter_value';
			END;
			IF canonical IS DISTINCT FROM v.val THEN
				RAISE EXCEPTION 'status value % for "%" must be written as the column prints it: %',
						v.value, v.key, canonical
					USING ERRCODE = 'invalid_parameter_value';
			END IF;
		END LOOP;
		IF (SELECT pg_catalog.count(DISTINCT e.value #>> '{}') <> pg_catalog.count(*)
			FROM pg_catalog.jsonb_each(status_values) e) THEN
			RAISE EXCEPTION 'status_values gives two states the same value'
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
	END IF;
	IF amount_column IS NULL THEN
		RAISE WARNING 'paynotify: orders table % is bound without an amount column: payment amounts are not checked', qualified
			USING HINT = 'Give amount_column (the order total in minor units) to have every payment checked against it.';
	END IF;
	INSERT INTO @extschema@.paynotify_binding (orders, key_column, status_column, amount_column,
			currency_column, status_values)
		VALUES (qualified, key_column, status_column, amount_column, currency_column, status_values)
		ON CONFLICT (singleton) DO UPDATE SET orders = excluded.orders,
			key_column = excluded.key_column, status_column = excluded.status_column,
			amount_column = excluded.amount_column, currency_column = excluded.currency_column,
			status_values = excluded.status_values;
END
$$;

-- Not SECURITY DEFINER: it checks that its caller owns or may EXECUTE the
-- handler, records the caller as the role the hook runs as, and writes the
-- row as the extension's owner.
CREATE FUNCTION @extschema@.paynotify_on(event text, handler regprocedure)
	RETURNS void
	AS 'MODULE_PATHNAME', 'paynotify_on'
	LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.paynotify_on(text, regprocedure) IS
	'runs handler(event jsonb) inside the business step of every applied event of that kind, as the calling role';

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
	LANGUAGE C STRICT VOLATILE
	SET search_path = pg_catalog, pg_temp
	SET enable_seqscan = off
	SET jit = off;
-- Not SECURITY DEFINER: it checks that its caller owns the orders table or
-- may UPDATE it, then switches to the extension's owner itself.
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

REVOKE ALL ON @extschema@.paynotify_channel, @extschema@.paynotify_key,
	@extschema@.paynotify_binding, @extschema@.paynotify_transition,
	@extschema@.paynotify_transition_removed, @extschema@.paynotify_hook,
	@extschema@.payment_notify_log, @extschema@.payment_record, @extschema@.paynotify_refund,
	@extschema@.paynotify_outbox, @extschema@.paynotify_anomaly
	FROM PUBLIC;
REVOKE ALL ON FUNCTION
	@extschema@.paynotify_config_changed(),
	@extschema@.paynotify_transition_track(),
	@extschema@.paynotify_transition_is_default(text, text),
	@extschema@.paynotify_check_account(),
	@extschema@.paynotify_rsa_verify(text, bytea, text, text),
	@extschema@.paynotify_aead_decrypt(bytea, bytea, bytea, text),
	@extschema@.paynotify_check_settings(text, jsonb),
	@extschema@.paynotify_check_key(text, text, text),
	@extschema@.paynotify_add_channel(text, text, jsonb),
	@extschema@.paynotify_alter_channel(text, jsonb),
	@extschema@.paynotify_add_key(text, text, text, timestamptz, timestamptz),
	@extschema@.paynotify_add_key_file(text, text, text, timestamptz, timestamptz),
	@extschema@.paynotify_read_secret(text),
	@extschema@.paynotify_settings_from_files(jsonb),
	@extschema@.paynotify_retire_key(text, text),
	@extschema@.paynotify_bind_orders(regclass, name, name, name, name, jsonb),
	@extschema@.paynotify_bind_orders_internal(regclass, name, name, name, name, jsonb),
	@extschema@.paynotify_status_canonical(regclass, name, text),
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
	@extschema@.paynotify_add_key_file(text, text, text, timestamptz, timestamptz),
	@extschema@.paynotify_retire_key(text, text),
	@extschema@.paynotify_bind_orders(regclass, name, name, name, name, jsonb),
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
