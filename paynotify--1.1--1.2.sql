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
-- so a key that includes it is as strong as one without it.
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
	ADD PRIMARY KEY (channel, notify_id, order_no);

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

	-- configuration: reference tables, referenced ones first
	FOR t IN SELECT c.oid::regclass AS rel, p.partmethod
			 FROM pg_catalog.pg_depend d
			 JOIN pg_catalog.pg_class c ON c.oid = d.objid AND c.relkind = 'r'
			 LEFT JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = c.oid
			 WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'e'
			   AND d.refclassid = 'pg_catalog.pg_extension'::regclass
			   AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'paynotify')
			   AND NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
							   AND a.attname = 'order_no' AND NOT a.attisdropped)
			 ORDER BY EXISTS (SELECT FROM pg_catalog.pg_constraint f WHERE f.conrelid = c.oid AND f.contype = 'f'),
					  c.relname LOOP
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
			   AND d.refclassid = 'pg_catalog.pg_extension'::regclass
			   AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'paynotify')
			   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid
						   AND a.attname = 'order_no' AND NOT a.attisdropped)
			 ORDER BY c.relname LOOP
		relation := t.rel;
		kind := 'distributed';
		IF t.partmethod IS NULL THEN
			-- the one unique key without order_no (see payment_record above)
			IF t.rel = '@extschema@.payment_record'::regclass THEN
				ALTER TABLE @extschema@.payment_record DROP CONSTRAINT IF EXISTS payment_record_trade;
				CREATE INDEX IF NOT EXISTS payment_record_trade
					ON @extschema@.payment_record (channel, trade_no);
			END IF;
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
END
$$;
COMMENT ON FUNCTION @extschema@.paynotify_distribute() IS
	'Citus: makes the configuration tables reference tables and distributes the orders table and every notification table by order number, co-located; idempotent';

REVOKE ALL ON FUNCTION @extschema@.paynotify_distribute() FROM PUBLIC;
