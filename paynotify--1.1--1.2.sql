/* paynotify--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION paynotify UPDATE TO '1.2'" to load this file. \quit

-- ===== every notification table keyed by order number (Citus) =====
--
-- Every table a notification writes has order_no in its primary key (and in
-- every unique key but one, below), so that on Citus each of them can be
-- distributed by order_no, co-located with the orders table: a notification
-- then reads and writes one shard of each table, on one node, and commits
-- without two-phase commit.  The order number is inside the signed payload,
-- so a key that includes it is as strong as one without it for the
-- deliveries of one signed content; one id signed with two orders and
-- delivered on two Citus nodes at once is caught by neither key (see the
-- README's Scale-out on Citus).
--
-- A notification whose order is unknown (no order number in the payload, an
-- event type paynotify does not apply) is recorded with order_no '' (the
-- empty string): never NULL, which Citus refuses as a distribution value.
--
-- Per table (what a notification writes, and why the key is what it is):
--   payment_notify_log        (channel, notify_id, order_no): the dedup row;
--                             a delivery looks it up by all three, after
--                             verification (the order number is in the
--                             signed, for WeChat Pay decrypted, payload).
--                             The unique key (channel, notify_id) stays on
--                             one node, as payment_record's below.
--   payment_record            (order_no, channel, trade_no), which also
--                             serves the order's trades (the index
--                             payment_record_order is gone).  The unique key
--                             (channel, trade_no) stays on one node: it is
--                             what makes a trade notified for two orders at
--                             the same moment pay only one of them.  Citus
--                             cannot have it (it does not include the
--                             distribution column): paynotify_distribute()
--                             replaces it with a plain index, and a trade of
--                             another order is then caught by reading (the
--                             sequential case), not by the key.
--   paynotify_refund          (channel, refund_id, order_no); a refund's
--                             trade is checked to belong to its order first.
--   paynotify_outbox,         (id, order_no): the id keeps its own index
--   paynotify_anomaly,        order (the outbox is claimed in id order);
--   paynotify_order_history,  order_no is NOT NULL ('' as above in the
--   paynotify_delivery_history anomaly table).  paynotify_delivery_history
--                             gets an order_no column (the notification's),
--                             so that a delivery's history row goes to the
--                             same shard as its log row.
--   paynotify_delivery        (id, order_no) and (outbox_id, endpoint_id,
--                             order_no): written by the relay, not by a
--                             notification; keyed the same way so that it
--                             can be co-located with the outbox it is made
--                             from.

UPDATE @extschema@.payment_notify_log SET order_no = '' WHERE order_no IS NULL;
ALTER TABLE @extschema@.payment_notify_log
	ALTER COLUMN order_no SET NOT NULL,
	DROP CONSTRAINT payment_notify_log_pkey,
	ADD PRIMARY KEY (channel, notify_id, order_no),
	ADD CONSTRAINT payment_notify_log_notify UNIQUE (channel, notify_id);

ALTER TABLE @extschema@.payment_record
	DROP CONSTRAINT payment_record_pkey,
	ADD PRIMARY KEY (order_no, channel, trade_no),
	ADD CONSTRAINT payment_record_trade UNIQUE (channel, trade_no);
DROP INDEX @extschema@.payment_record_order;

ALTER TABLE @extschema@.paynotify_refund
	DROP CONSTRAINT paynotify_refund_pkey,
	ADD PRIMARY KEY (channel, refund_id, order_no);

ALTER TABLE @extschema@.paynotify_outbox
	DROP CONSTRAINT paynotify_outbox_pkey,
	ADD PRIMARY KEY (id, order_no);

UPDATE @extschema@.paynotify_anomaly SET order_no = '' WHERE order_no IS NULL;
ALTER TABLE @extschema@.paynotify_anomaly
	ALTER COLUMN order_no SET NOT NULL,
	DROP CONSTRAINT paynotify_anomaly_pkey,
	ADD PRIMARY KEY (id, order_no);

ALTER TABLE @extschema@.paynotify_order_history
	DROP CONSTRAINT paynotify_order_history_pkey,
	ADD PRIMARY KEY (id, order_no);

ALTER TABLE @extschema@.paynotify_delivery_history ADD COLUMN order_no text NOT NULL DEFAULT '';
UPDATE @extschema@.paynotify_delivery_history d SET order_no = l.order_no
	FROM @extschema@.payment_notify_log l
	WHERE l.channel = d.channel AND l.notify_id = d.notify_id;
ALTER TABLE @extschema@.paynotify_delivery_history
	ALTER COLUMN order_no DROP DEFAULT,
	DROP CONSTRAINT paynotify_delivery_history_pkey,
	ADD PRIMARY KEY (id, order_no);

ALTER TABLE @extschema@.paynotify_delivery
	DROP CONSTRAINT paynotify_delivery_pkey,
	ADD PRIMARY KEY (id, order_no),
	DROP CONSTRAINT paynotify_delivery_outbox_id_endpoint_id_key,
	ADD CONSTRAINT paynotify_delivery_outbox_id_endpoint_id_key UNIQUE (outbox_id, endpoint_id, order_no);

-- ===== paynotify_distribute: the tables on Citus =====
--
-- Which table is which is read from the tables themselves (one place): an
-- extension table with an order_no column is notification data and is
-- distributed by it, co-located with the orders table; every other one is
-- configuration and becomes a reference table (a copy on every node, so that
-- paynotify_handle can run on any of them).
CREATE FUNCTION @extschema@.paynotify_distribute()
	RETURNS TABLE (relation regclass, kind text, action text)
	LANGUAGE plpgsql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
#variable_conflict use_column
DECLARE
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
	-- Each node's identity sequences of the notification tables get their
	-- own range: node group g hands out ids (g << 48) + 1 .. (g + 1) << 48
	-- (the coordinator, group 0, from 1), as Citus does for the tables it
	-- creates itself.  CREATE EXTENSION made every node's copy start at 1,
	-- and ids are taken on the node that runs paynotify_handle: without
	-- this, two nodes would hand out the same outbox id (webhook-id
	-- "evt_<id>") or anomaly id.  Run on every node (the same text).
	ranges constant text := $do$
DO $r$
DECLARE
	g bigint := (SELECT l.groupid FROM pg_catalog.pg_dist_local_group l);
	lo bigint;
	hi bigint;
	q record;
BEGIN
	lo := (g << 48) + 1;
	hi := (g + 1) << 48;
	PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
	FOR q IN SELECT d.objid::regclass AS seq, s.min_value, s.last_value
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_depend e ON e.classid = 'pg_catalog.pg_class'::regclass
				AND e.objid = d.refobjid AND e.deptype = 'e'
				AND e.refclassid = 'pg_catalog.pg_extension'::regclass
				AND e.refobjid = (SELECT x.oid FROM pg_catalog.pg_extension x WHERE x.extname = 'paynotify')
			 JOIN pg_catalog.pg_class c ON c.oid = d.objid
			 JOIN pg_catalog.pg_sequences s ON s.schemaname = c.relnamespace::regnamespace::name
				AND s.sequencename = c.relname
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'i'
			   AND d.refclassid = 'pg_catalog.pg_class'::regclass
			   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.refobjid
						   AND a.attname = 'order_no' AND NOT a.attisdropped) LOOP
		IF q.min_value <> lo THEN
			EXECUTE pg_catalog.format('ALTER SEQUENCE %s MINVALUE %s MAXVALUE %s START %s RESTART %s',
				q.seq, lo, hi, lo, greatest(lo, coalesce(q.last_value + 1, lo)));
		END IF;
	END LOOP;
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
		SELECT s.order_no, max(s.seq)
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
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_distribute() IS
	'Citus: makes the configuration tables reference tables and distributes the orders table and every notification table by order number, co-located; idempotent';

REVOKE ALL ON FUNCTION @extschema@.paynotify_distribute() FROM PUBLIC;

-- ===== the configuration triggers on Citus =====
--
-- On Citus the configuration tables are reference tables: a change is
-- written to every node's shard of the table (paynotify_channel_102008 ...),
-- and the triggers fire there, once per node, each inside the distributed
-- statement.  They must then act on the same node's shards of the other
-- configuration tables (a distributed statement from inside one is refused,
-- and would write each change once per node): paynotify_sibling names them.
-- On one server TG_TABLE_NAME is the table's own name and they act on the
-- tables themselves, as before.  While paynotify_distribute() copies the
-- rows of one table into its new shards, the others may have none yet:
-- paynotify_sibling is then NULL and the triggers do nothing (the rows
-- copied are the tables' state already, checked when they were written).
CREATE FUNCTION @extschema@.paynotify_sibling(want text, fired_on name)
	RETURNS text
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	shard text;
BEGIN
	IF fired_on !~ '_[0-9]+$' THEN
		RETURN pg_catalog.format('@extschema@.%I', want);
	END IF;
	-- a shard of a reference table: the one shard of the wanted table,
	-- schema-qualified (shard_name leaves a shard in public unqualified,
	-- which the pinned search_path would not find)
	EXECUTE 'SELECT CASE WHEN n.nspname = ''public'' THEN ''public.'' ELSE '''' END'
			' || pg_catalog.shard_name(s.logicalrelid, s.shardid)'
			' FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid'
			' JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace'
			' WHERE s.logicalrelid = $1::regclass'
		INTO shard USING pg_catalog.format('@extschema@.%I', want);
	RETURN shard;
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_sibling(text, name) IS
	'the configuration table want, or on a Citus shard (fired_on: a trigger''s TG_TABLE_NAME) this node''s shard of it, NULL while it has none';

CREATE OR REPLACE FUNCTION @extschema@.paynotify_transition_track() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	transition text := @extschema@.paynotify_sibling('paynotify_transition', TG_TABLE_NAME);
	removed text := @extschema@.paynotify_sibling('paynotify_transition_removed', TG_TABLE_NAME);
BEGIN
	IF transition IS NULL OR removed IS NULL THEN
		RETURN NULL;			-- being distributed (see paynotify_sibling)
	END IF;
	IF pg_catalog.regexp_replace(TG_TABLE_NAME, '_[0-9]+$', '') = 'paynotify_transition_removed' THEN
		EXECUTE pg_catalog.format('DELETE FROM %s t WHERE t.from_state = $1 AND t.to_state = $2', transition)
			USING NEW.from_state, NEW.to_state;
		RETURN NULL;
	END IF;
	IF TG_OP = 'TRUNCATE' THEN
		EXECUTE pg_catalog.format('INSERT INTO %s
			SELECT d.f, d.t FROM (VALUES
				(''pending'', ''paid''), (''pending'', ''cancelled''),
				(''paid'', ''shipped''), (''paid'', ''refunding''),
				(''shipped'', ''received''),
				(''received'', ''refunding''), (''received'', ''completed''),
				(''refunding'', ''refunded''), (''refunding'', ''paid'')) d(f, t)
			ON CONFLICT DO NOTHING', removed);
		RETURN NULL;
	END IF;
	IF (TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND
			(OLD.from_state, OLD.to_state) IS DISTINCT FROM (NEW.from_state, NEW.to_state)))
			AND @extschema@.paynotify_transition_is_default(OLD.from_state, OLD.to_state) THEN
		EXECUTE pg_catalog.format('INSERT INTO %s VALUES ($1, $2) ON CONFLICT DO NOTHING', removed)
			USING OLD.from_state, OLD.to_state;
	END IF;
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		EXECUTE pg_catalog.format('DELETE FROM %s r WHERE r.from_state = $1 AND r.to_state = $2', removed)
			USING NEW.from_state, NEW.to_state;
	END IF;
	RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.paynotify_check_account() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	s jsonb;
	gw text;
	other text;
	what text;
	hint text;
	-- this node's shards of them on Citus (paynotify_sibling)
	channels text := @extschema@.paynotify_sibling('paynotify_channel', TG_TABLE_NAME);
	keys text := @extschema@.paynotify_sibling('paynotify_key', TG_TABLE_NAME);
BEGIN
	IF pg_catalog.current_setting('paynotify.allow_shared_accounts', true) = 'on'
			OR channels IS NULL OR keys IS NULL THEN	-- being distributed (paynotify_sibling)
		RETURN NEW;
	END IF;
	-- one configuration change at a time, so two cannot both pass the check
	PERFORM pg_catalog.pg_advisory_xact_lock(-3751950917148160981);
	IF pg_catalog.regexp_replace(TG_TABLE_NAME, '_[0-9]+$', '') = 'paynotify_channel' THEN
		s := NEW.settings;
		IF NEW.gateway = 'wxpay' THEN
			EXECUTE pg_catalog.format('SELECT c.name FROM %s c
			WHERE c.gateway = ''wxpay'' AND c.name <> $1
			  AND ($2 = ''INSERT'' OR c.name <> $3)
			  AND c.settings->>''mchid'' = $4->>''mchid''
			ORDER BY c.name LIMIT 1', channels) INTO other USING NEW.name, TG_OP, OLD.name, s;
			IF other IS NOT NULL THEN
				what := pg_catalog.format('WeChat Pay merchant %s', s->>'mchid');
				hint := 'Use one channel per merchant account: route every notify URL of the account to it.';
			ELSE
				EXECUTE pg_catalog.format('SELECT c.name FROM %s c
				WHERE c.gateway = ''wxpay'' AND c.name <> $1
				  AND ($2 = ''INSERT'' OR c.name <> $3)
				  AND c.settings->>''apiv3_key'' = $4->>''apiv3_key''
				  AND (c.settings->>''mchid'' IS NULL OR $4->>''mchid'' IS NULL)
				ORDER BY c.name LIMIT 1', channels) INTO other USING NEW.name, TG_OP, OLD.name, s;
				IF other IS NOT NULL THEN
					what := 'WeChat Pay notifications decrypted with the same APIv3 key';
					hint := 'Set mchid on both channels, each its own merchant number, or use one channel per merchant account.';
				END IF;
			END IF;
		ELSIF NEW.gateway = 'alipay' THEN
			EXECUTE pg_catalog.format('SELECT c.name FROM %s c
			WHERE c.gateway = ''alipay'' AND c.name <> $1
			  AND ($2 = ''INSERT'' OR c.name <> $3)
			  AND c.settings->>''app_id'' = $4->>''app_id''
			  AND (c.settings->>''seller_id'' IS NULL OR $4->>''seller_id'' IS NULL
				   OR c.settings->>''seller_id'' = $4->>''seller_id'')
			ORDER BY c.name LIMIT 1', channels) INTO other USING NEW.name, TG_OP, OLD.name, s;
			IF other IS NOT NULL THEN
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
		EXECUTE pg_catalog.format('SELECT c.gateway FROM %s c WHERE c.name = $1', channels)
			INTO gw USING NEW.channel;
		IF gw = 'stripe' THEN
			EXECUTE pg_catalog.format('SELECT k.channel
			FROM %s k
			JOIN %s c ON c.name = k.channel
			WHERE c.gateway = ''stripe'' AND k.channel <> $1
			  AND k.retired_at IS NULL AND k.material = $2
			ORDER BY k.channel LIMIT 1', keys, channels) INTO other USING NEW.channel, NEW.material;
			IF other IS NOT NULL THEN
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

REVOKE ALL ON FUNCTION @extschema@.paynotify_sibling(text, name) FROM PUBLIC;

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

-- ===== the relay on Citus: each order's events in order =====
--
-- The relay delivers an order's events to an endpoint in their order: a
-- delivery waits while an earlier one of the same order and endpoint is
-- neither delivered nor dead.  "Earlier" is order_seq: on one server the
-- outbox id (an order's events are applied under its row lock, so their ids
-- are in commit order), copied to the delivery by the fan-out; nothing more
-- is written per event.  On Citus outbox ids come from the range of the node
-- that ran paynotify_handle, so an order's refund handled on the coordinator
-- can have a lower id than its payment handled on a worker: there
-- paynotify_handle takes the next value of paynotify_order_seq for the order
-- (one row per order, on the order's shard, under the order's lock, so in
-- commit order) and stores it in the outbox row.  paynotify_distribute()
-- starts each order's value above every event recorded before (the outbox
-- ids of one server).
CREATE TABLE @extschema@.paynotify_order_seq (
	order_no	text PRIMARY KEY,
	last		bigint NOT NULL		-- the order_seq of the order's last event
);
COMMENT ON TABLE @extschema@.paynotify_order_seq IS
	'paynotify on Citus: the last per-order sequence value of each order''s events (order_seq of paynotify_outbox); empty on one server';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.paynotify_order_seq', '');
REVOKE ALL ON @extschema@.paynotify_order_seq FROM PUBLIC;

-- NULL on one server: the outbox id is the order's sequence there
ALTER TABLE @extschema@.paynotify_outbox ADD COLUMN order_seq bigint;
ALTER TABLE @extschema@.paynotify_delivery ADD COLUMN order_seq bigint;
UPDATE @extschema@.paynotify_delivery SET order_seq = outbox_id;
ALTER TABLE @extschema@.paynotify_delivery ALTER COLUMN order_seq SET NOT NULL;
-- the per-order wait: an earlier pending event of the same order and endpoint
DROP INDEX @extschema@.paynotify_delivery_order;
CREATE INDEX paynotify_delivery_order ON @extschema@.paynotify_delivery (endpoint_id, order_no, order_seq)
	WHERE delivered_at IS NULL AND dead_at IS NULL;

-- A delivery the relay may send now: due, and no earlier event of its order
-- (by order_seq) pending for its endpoint.  The one definition both ways of
-- paynotify_relay_claim read (one server, Citus).
CREATE VIEW @extschema@.paynotify_delivery_ready AS
	SELECT d.id, d.endpoint_id, d.order_no, d.order_seq, d.next_attempt_at
	FROM @extschema@.paynotify_delivery d
	WHERE d.delivered_at IS NULL AND d.dead_at IS NULL
	  AND d.next_attempt_at <= pg_catalog.now()
	  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_delivery p
					  WHERE p.endpoint_id = d.endpoint_id AND p.order_no = d.order_no
						AND p.order_seq < d.order_seq
						AND p.delivered_at IS NULL AND p.dead_at IS NULL);
COMMENT ON VIEW @extschema@.paynotify_delivery_ready IS
	'paynotify-relay: deliveries due whose order has no earlier delivery pending for their endpoint';
REVOKE ALL ON @extschema@.paynotify_delivery_ready FROM PUBLIC;

-- Whether a table is distributed by Citus (hash): the claims take another
-- way there.  pg_dist_partition exists only with Citus, so it is read by
-- name.
CREATE FUNCTION @extschema@.paynotify_distributed(rel regclass)
	RETURNS boolean
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $$
DECLARE
	dist boolean := false;
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
		EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
				' WHERE p.logicalrelid = $1 AND p.partmethod = ''h'')'
			INTO dist USING rel;
	END IF;
	RETURN dist;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.paynotify_distributed(regclass) FROM PUBLIC;

-- Outbox events taken oldest id first, skipping those another worker
-- holds: on one server in one statement; on Citus, which refuses a
-- multi-shard FOR UPDATE, the candidates are read across the shards without
-- locks, then each is taken on its own shard by order_no and id (skipped
-- when another worker holds it, and then replaced by the next candidates).
-- A claim whose events are on several nodes commits with two-phase commit.
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
	-- statement there: an event is in one or the other.
	FOR ep IN SELECT e.id, e.max_in_flight FROM @extschema@.paynotify_endpoint e WHERE e.enabled LOOP
		FOR cand IN
			SELECT r.id, r.order_no, r.next_attempt_at
			FROM @extschema@.paynotify_delivery_ready r
			WHERE r.endpoint_id = ep.id
			  AND NOT EXISTS (SELECT FROM @extschema@.paynotify_outbox o
							  WHERE o.order_no = r.order_no
								AND coalesce(o.order_seq, o.id) < r.order_seq)
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
	attempt_at timestamptz := clock_timestamp();
	jitters float8[] := ARRAY(SELECT 0.5 + 0.5 * random()
							  FROM generate_series(1, coalesce(cardinality(delivery_ids), 0)));
	ids bigint[];
	orders text[];
	st integer[];
	errs text[];
	done timestamptz[];
	dead timestamptz[];
	nexts timestamptz[];
BEGIN
	-- The new values are read first, then written as they are (one way on
	-- one server and on Citus, which refuses random() and clock_timestamp()
	-- in an UPDATE of a distributed table, and time arithmetic on its
	-- columns there); the deliveries are the caller's claims, locked.
	SELECT array_agg(d.id), array_agg(d.order_no), array_agg(r.status),
		array_agg(CASE WHEN r.ok THEN NULL ELSE left(coalesce(r.error, 'HTTP ' || r.status), 500) END),
		array_agg(CASE WHEN r.ok THEN attempt_at END),
		array_agg(CASE WHEN NOT r.ok AND attempt_at >= d.started_at + e.retry_horizon THEN attempt_at END),
		-- in seconds: retry_base * 2^30 as an interval can overflow, and a
		-- failing report would give the whole batch back again and again
		array_agg(CASE WHEN r.ok THEN d.next_attempt_at
			ELSE least(attempt_at + pg_catalog.make_interval(secs =>
							least(extract(epoch FROM e.retry_max)::float8,
								  extract(epoch FROM e.retry_base)::float8 * power(2, least(d.attempts, 30)))
							* r.jitter),
					   d.started_at + e.retry_horizon) END)
	INTO ids, orders, st, errs, done, dead, nexts
	FROM (SELECT u.id, u.status, u.error, coalesce(u.status BETWEEN 200 AND 299, false) AS ok, u.jitter
		  FROM unnest(delivery_ids, statuses, errors, jitters) u(id, status, error, jitter)
		  WHERE u.id IS NOT NULL) r
		JOIN @extschema@.paynotify_delivery d ON d.id = r.id
		JOIN @extschema@.paynotify_endpoint e ON e.id = d.endpoint_id
	WHERE d.delivered_at IS NULL AND d.dead_at IS NULL;
	UPDATE @extschema@.paynotify_delivery d SET
		attempts = least(d.attempts, 2147483646) + 1,
		last_attempt_at = attempt_at,
		last_status = v.status,
		last_error = v.error,
		delivered_at = v.delivered_at,
		dead_at = v.dead_at,
		next_attempt_at = v.next_attempt_at
	FROM unnest(ids, orders, st, errs, done, dead, nexts)
		v(id, order_no, status, error, delivered_at, dead_at, next_attempt_at)
	WHERE d.order_no = v.order_no AND d.id = v.id
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
	-- in the order of its events.  On Citus the lock is this node's only:
	-- fan-outs on two nodes run at once, and the claim makes a delivery
	-- wait for the order's earlier events still in the outbox as well
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
			order_no, order_seq, body)
		SELECT e.id, t.id, prefix || t.id, t.event, t.channel, t.order_no, coalesce(t.order_seq, t.id),
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
