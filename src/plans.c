/*-------------------------------------------------------------------------
 *
 * plans.c
 *	  Every SQL statement the pipeline runs, in one table (plan_specs), and
 *	  their prepared plans, built once per configuration generation (each
 *	  PnConfig holds its own; config.c frees them with it).
 *
 * A statement names the extension's schema and the bound orders table by
 * placeholders (@s, @o and its columns), expanded from the configuration
 * when the plan is first prepared.  Statements on the orders table run as
 * that table's owner (pn_orders_execute), never as paynotify.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "paynotify.h"
#include "pipeline.h"

/*
 * The log's and the payments' inserts end in ON CONFLICT DO NOTHING (every
 * unique index the arbiter): a row there already (another delivery's, on
 * Citus one that took the notification's lock on another node) is no
 * error.  Inside the business step on one server they run without it
 * (plain_table): the step is a subtransaction, and a unique violation on
 * the table rolls it back and is read as that conflict (step.c), which
 * spares each insert the look into the unique indexes before it; the
 * lookups before the step have nearly always found the keys free.
 */

/* SQL of each plan; @s = extension schema, @o.. = the bound orders table */
typedef struct PlanSpec
{
	const char *sql;
	int			nargs;
	Oid			argtypes[11];
	bool		needs_orders;
	/* an INSERT ... ON CONFLICT DO NOTHING with a plain variant: its table */
	const char *plain_table;
} PlanSpec;

#define ANY_CONFLICT " ON CONFLICT DO NOTHING"

static const PlanSpec plan_specs[PN_NPLANS] = {
	[PLAN_LOG_GET] = {
		"SELECT status, payload = $3, notice FROM @s.payment_notify_log"
		" WHERE channel = $1 AND notify_id = $2 AND order_no = $4",
		4, {TEXTOID, TEXTOID, JSONBOID, TEXTOID}
	},
	/*
	 * the same id for its own order, else for another: the look after the
	 * lock (by the primary key's prefix), so that other content under a
	 * known id is never applied, whatever order it names.  On Citus it reads
	 * every shard.  When the lock is free it is the only read of the log;
	 * while another delivery holds it, PLAN_LOG_GET answers a settled
	 * duplicate without waiting.  Every row of the id (one, nearly always):
	 * log_read takes the one for $4, else the first seen, without a sort.
	 */
	[PLAN_LOG_ANY] = {
		"SELECT status, payload = $3, order_no, first_seen FROM @s.payment_notify_log"
		" WHERE channel = $1 AND notify_id = $2",
		4, {TEXTOID, TEXTOID, JSONBOID, TEXTOID}
	},
	[PLAN_LOG_INSERT] = {
		"INSERT INTO @s.payment_notify_log (channel, notify_id, order_no,"
		" event_type, payload, status, note, error_msg, notice, processed_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
		ANY_CONFLICT,
		10, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID,
		TIMESTAMPTZOID},
		.plain_table = "payment_notify_log"
	},
	/* the same for a notice a query made (1.4 schemas: the source column) */
	[PLAN_LOG_INSERT_QUERY] = {
		"INSERT INTO @s.payment_notify_log (channel, notify_id, order_no,"
		" event_type, payload, status, note, error_msg, notice, processed_at, source)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'query')"
		ANY_CONFLICT,
		10, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID,
		TIMESTAMPTZOID},
		.plain_table = "payment_notify_log"
	},
	[PLAN_LOG_SEEN] = {
		"UPDATE @s.payment_notify_log SET delivery_count = delivery_count + 1,"
		" last_seen = pg_catalog.now()"
		" WHERE channel = $1 AND notify_id = $2 AND order_no = $3",
		3, {TEXTOID, TEXTOID, TEXTOID}
	},
	[PLAN_LOG_RETRY] = {
		"UPDATE @s.payment_notify_log SET status = $3, note = $4, error_msg = $5,"
		" notice = $6, attempts = attempts + $7, delivery_count = delivery_count + $8,"
		" last_seen = pg_catalog.now(),"
		" processed_at = $11"
		" WHERE channel = $1 AND notify_id = $2 AND order_no = $9"
		" AND ($10 IS NULL OR status = $10)",
		11, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, INT4OID, TEXTOID, TEXTOID,
		TIMESTAMPTZOID}
	},
	[PLAN_PARKED_LIST] = {
		"SELECT channel, notify_id, notice FROM @s.payment_notify_log"
		" WHERE order_no = $1 AND status = 'parked'"
		" AND ($2 IS NULL OR notice->>'trade_no' = $2) ORDER BY first_seen, notify_id",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_PAYMENT_INSERT] = {
		"INSERT INTO @s.payment_record (channel, trade_no, order_no, amount,"
		" currency, notify_id) VALUES ($1, $2, $3, $4, $5, $6)"
		ANY_CONFLICT,
		6, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID},
		.plain_table = "payment_record"
	},
	/* the same with the sub-merchant paid (1.3 schemas) */
	[PLAN_PAYMENT_INSERT_SUB] = {
		"INSERT INTO @s.payment_record (channel, trade_no, order_no, amount,"
		" currency, notify_id, sub_merchant) VALUES ($1, $2, $3, $4, $5, $6, $7)"
		ANY_CONFLICT,
		7, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID},
		.plain_table = "payment_record"
	},
	/*
	 * by trade, whatever its order: the one read of a notification that does
	 * not name its order, because it is the check that a trade never pays
	 * two orders (trade_of_another_order).  On Citus it reads every shard
	 * (a read: still no two-phase commit).
	 */
	[PLAN_PAYMENT_GET] = {
		"SELECT order_no, amount, notify_id FROM @s.payment_record"
		" WHERE channel = $1 AND trade_no = $2",
		2, {TEXTOID, TEXTOID}
	},
	/* every trade of the order (any channel): paid and refunded */
	/*
	 * A join on the order, not a correlated subquery: inside a delegated
	 * call Citus could not always see that the subquery stayed on the
	 * call's shard ("cannot execute a distributed query from a query on a
	 * shard").
	 */
	[PLAN_ORDER_TRADES] = {
		"SELECT p.channel, p.trade_no, p.amount,"
		" COALESCE(pg_catalog.sum(r.amount) FILTER (WHERE r.status = 'succeeded'), 0)::bigint"
		" FROM @s.payment_record p LEFT JOIN @s.paynotify_refund r"
		"  ON r.order_no = $1 AND r.order_no = p.order_no AND r.channel = p.channel AND r.trade_no = p.trade_no"
		" WHERE p.order_no = $1 GROUP BY p.channel, p.trade_no, p.amount",
		1, {TEXTOID}
	},
	[PLAN_REFUND_INSERT] = {
		"INSERT INTO @s.paynotify_refund (channel, refund_id, order_no, trade_no,"
		" amount, status, notify_id) VALUES ($1, $2, $3, $4, $5, $6, $7)"
		" ON CONFLICT DO NOTHING",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID}
	},
	/* how many refunds of one trade failed */
	[PLAN_REFUND_FAILED_COUNT] = {
		"SELECT pg_catalog.count(*)"
		" FROM @s.paynotify_refund"
		" WHERE channel = $1 AND trade_no = $2 AND order_no = $3 AND status = 'failed'",
		3, {TEXTOID, TEXTOID, TEXTOID}
	},
	[PLAN_REFUND_SUM] = {
		"SELECT COALESCE(pg_catalog.sum(amount), 0)::bigint"
		" FROM @s.paynotify_refund"
		" WHERE channel = $1 AND trade_no = $2 AND order_no = $3 AND status = 'succeeded'",
		3, {TEXTOID, TEXTOID, TEXTOID}
	},
	[PLAN_REFUND_GET] = {
		"SELECT status FROM @s.paynotify_refund"
		" WHERE channel = $1 AND refund_id = $2 AND order_no = $3",
		3, {TEXTOID, TEXTOID, TEXTOID}
	},
	/* a failed refund that succeeded after all (never the other way) */
	[PLAN_REFUND_SUCCEED] = {
		"UPDATE @s.paynotify_refund SET status = 'succeeded', amount = $3, trade_no = $4,"
		" notify_id = $5 WHERE channel = $1 AND refund_id = $2 AND order_no = $6"
		" AND status = 'failed'",
		6, {TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID}
	},
	/* a succeeded refund failed after all (refund_failure_final gateways) */
	[PLAN_REFUND_FAIL] = {
		"UPDATE @s.paynotify_refund SET status = 'failed', notify_id = $3"
		" WHERE channel = $1 AND refund_id = $2 AND order_no = $4"
		" AND status = 'succeeded' RETURNING amount",
		4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	/* a dispute opened: recorded once (1.3 schemas) */
	[PLAN_DISPUTE_OPEN] = {
		"INSERT INTO @s.paynotify_dispute (channel, dispute_id, order_no, trade_no, amount,"
		" currency, status, opened_notify_id, opened_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, pg_catalog.now()) ON CONFLICT DO NOTHING",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID}
	},
	/* an open dispute closed (won or lost); never a closed one again */
	[PLAN_DISPUTE_CLOSE] = {
		"UPDATE @s.paynotify_dispute SET status = $4, amount = COALESCE($5, amount),"
		" closed_notify_id = $6, closed_at = pg_catalog.now()"
		" WHERE channel = $1 AND dispute_id = $2 AND order_no = $3 AND status = 'open'",
		6, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID}
	},
	/* a dispute whose close came before its open: recorded closed, once */
	[PLAN_DISPUTE_CLOSE_FIRST] = {
		"INSERT INTO @s.paynotify_dispute (channel, dispute_id, order_no, trade_no, amount,"
		" currency, status, closed_notify_id, closed_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, pg_catalog.now()) ON CONFLICT DO NOTHING",
		8, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID}
	},
	/* the order's disputes: how many are open, how many lost and their sum, all */
	[PLAN_DISPUTE_TALLY] = {
		"SELECT pg_catalog.count(*) FILTER (WHERE status = 'open'),"
		" pg_catalog.count(*) FILTER (WHERE status = 'lost'),"
		" COALESCE(pg_catalog.sum(amount) FILTER (WHERE status = 'lost'), 0)::bigint,"
		" pg_catalog.count(*)"
		" FROM @s.paynotify_dispute WHERE order_no = $1",
		1, {TEXTOID}
	},
	/*
	 * whether the refunds of the order are in doubt (a total on a trade with a
	 * failed refund: apply_refund moved nothing on it); rarely read
	 */
	[PLAN_ORDER_REFUNDS_DOUBTFUL] = {
		"SELECT EXISTS (SELECT FROM @s.paynotify_anomaly"
		" WHERE order_no = $1 AND kind = 'refund_total_after_failure')",
		1, {TEXTOID}
	},
	/* a dispute recorded without its amount (its close came first, without one) */
	[PLAN_DISPUTE_FILL_AMOUNT] = {
		"UPDATE @s.paynotify_dispute SET amount = $4"
		" WHERE channel = $1 AND dispute_id = $2 AND order_no = $3 AND amount IS NULL",
		4, {TEXTOID, TEXTOID, TEXTOID, INT8OID}
	},
	/*
	 * an expectation settled: by a payment of the order (on any channel: it
	 * is paid) or the close of its trade on this channel (1.4 schemas)
	 */
	[PLAN_EXPECTATION_SETTLE] = {
		"UPDATE @s.paynotify_expectation SET settled_at = pg_catalog.now(), settled_by = $2,"
		" settled_notify_id = $4"
		" WHERE order_no = $1 AND settled_at IS NULL AND ($3 IS NULL OR channel = $3)",
		4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	[PLAN_OUTBOX_INSERT] = {
		"INSERT INTO @s.paynotify_outbox (event, channel, order_no, notify_id, amount)"
		" VALUES ($1, $2, $3, $4, $5) RETURNING id",
		5, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID}
	},
	/* an event that carries more (notification, disputes: 1.3 schemas) */
	[PLAN_OUTBOX_INSERT_DETAIL] = {
		"INSERT INTO @s.paynotify_outbox (event, channel, order_no, notify_id, amount, order_seq, detail)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID, JSONBOID}
	},
	/*
	 * Citus only: the order's next sequence value, on its shard, under its
	 * lock (see paynotify_order_seq), and the outbox row that carries it
	 */
	[PLAN_ORDER_SEQ_NEXT] = {
		"INSERT INTO @s.paynotify_order_seq AS q (order_no, last) VALUES ($1, 1)"
		" ON CONFLICT (order_no) DO UPDATE SET last = q.last + 1 RETURNING last",
		1, {TEXTOID}
	},
	[PLAN_OUTBOX_INSERT_SEQ] = {
		"INSERT INTO @s.paynotify_outbox (event, channel, order_no, notify_id, amount, order_seq)"
		" VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
		6, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, INT8OID}
	},
	/*
	 * Citus only: synchronous_commit set in the transaction on the node that
	 * holds the log row's shard (a volatile function in the target list of
	 * a query routed there), where the transaction's writes commit
	 */
	[PLAN_SHARD_COMMIT_LEVEL] = {
		"SELECT pg_catalog.set_config('synchronous_commit', $4, true) FROM @s.payment_notify_log"
		" WHERE channel = $1 AND notify_id = $2 AND order_no = $3",
		4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	/*
	 * Inside a delegated step (pn_step_order): PLAN_LOG_ANY and
	 * PLAN_PAYMENT_GET under the step's order only; the caller read the
	 * other orders' rows before the call (PLAN_CROSS_SHARD).
	 */
	[PLAN_LOG_ANY_AT] = {
		"SELECT status, payload = $3, order_no, first_seen FROM @s.payment_notify_log"
		" WHERE channel = $1 AND notify_id = $2 AND order_no = $4",
		4, {TEXTOID, TEXTOID, JSONBOID, TEXTOID}
	},
	[PLAN_PAYMENT_GET_AT] = {
		"SELECT order_no, amount, notify_id FROM @s.payment_record"
		" WHERE channel = $1 AND trade_no = $2 AND order_no = $3",
		3, {TEXTOID, TEXTOID, TEXTOID}
	},
	/*
	 * Before a delegated step, the two reads of every shard as one: the id
	 * under another order, the trade recorded for another order.  A row
	 * keeps the notification on the caller's path, which reads them again
	 * and answers as it always did.  The distribution column in both
	 * branches' target lists lets Citus push the union down to each shard
	 * pair: one command per shard, not one per shard and table.
	 */
	[PLAN_CROSS_SHARD] = {
		"SELECT 1 FROM (SELECT order_no FROM @s.payment_notify_log"
		"  WHERE channel = $1 AND notify_id = $2 AND order_no <> $3"
		" UNION ALL"
		" SELECT order_no FROM @s.payment_record"
		"  WHERE channel = $1 AND trade_no = $4 AND order_no <> $3) u",
		4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	/* a payment with the agreement it was charged under (1.4 schemas) */
	[PLAN_PAYMENT_INSERT_AGREEMENT] = {
		"INSERT INTO @s.payment_record (channel, trade_no, order_no, amount,"
		" currency, notify_id, sub_merchant, agreement_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
		ANY_CONFLICT,
		8, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID},
		.plain_table = "payment_record"
	},
	/* the notices of an agreement parked until it is signed (keyed by no order) */
	[PLAN_PARKED_AGREEMENT] = {
		"SELECT channel, notify_id, notice FROM @s.payment_notify_log"
		" WHERE order_no = '' AND status = 'parked' AND channel = $1"
		" AND notice->>'agreement_id' = $2 ORDER BY first_seen, notify_id",
		2, {TEXTOID, TEXTOID}
	},
	/*
	 * agreements (1.4): read under the agreement's lock (pn_lock_agreement);
	 * the times computed here (agreement_time), as Citus takes no
	 * non-immutable function inside a COALESCE of a modification
	 */
	/*
	 * on Citus, the agreements' lock (pn_lock_agreement): Citus takes it on
	 * every node, in the nodes' order
	 */
	[PLAN_AGREEMENT_LOCK] = {
		"LOCK TABLE @s.paynotify_agreement IN SHARE ROW EXCLUSIVE MODE",
		0, {InvalidOid}
	},
	[PLAN_AGREEMENT_GET] = {
		"SELECT state FROM @s.paynotify_agreement WHERE channel = $1 AND agreement_id = $2",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_AGREEMENT_SIGN] = {
		"INSERT INTO @s.paynotify_agreement (channel, agreement_id, merchant_ref, plan_id,"
		" state, gateway_state, signed_at, notify_ids)"
		" VALUES ($1, $2, $3, $4, 'signed', $5, $6, ARRAY[$7])"
		" ON CONFLICT DO NOTHING",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
	},
	[PLAN_AGREEMENT_END] = {
		"UPDATE @s.paynotify_agreement SET state = 'ended', gateway_state = $5,"
		" ended_at = $6,"
		" merchant_ref = COALESCE(merchant_ref, $3), plan_id = COALESCE(plan_id, $4),"
		" notify_ids = notify_ids || $7, updated_at = pg_catalog.now()"
		" WHERE channel = $1 AND agreement_id = $2 AND state = 'signed'",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
	},
	/*
	 * an agreement never in force, recorded as it ends: no sign (the three
	 * plans above and this one take the same parameters: agreement_args)
	 */
	[PLAN_AGREEMENT_END_UNSIGNED] = {
		"INSERT INTO @s.paynotify_agreement (channel, agreement_id, merchant_ref, plan_id,"
		" state, gateway_state, ended_at, notify_ids)"
		" VALUES ($1, $2, $3, $4, 'ended', $5, $6, ARRAY[$7])"
		" ON CONFLICT DO NOTHING",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID}
	},
	/* a notice that restates the agreement: its gateway state while in force */
	[PLAN_AGREEMENT_NOTE] = {
		"UPDATE @s.paynotify_agreement SET"
		" gateway_state = CASE WHEN state = 'signed' AND $3 IS NOT NULL THEN $3 ELSE gateway_state END,"
		" notify_ids = notify_ids || $4, updated_at = pg_catalog.now()"
		" WHERE channel = $1 AND agreement_id = $2",
		4, {TEXTOID, TEXTOID, TEXTOID, TEXTOID}
	},
	[PLAN_ANOMALY_INSERT] = {
		"INSERT INTO @s.paynotify_anomaly (channel, notify_id, order_no, kind, detail)"
		" VALUES ($1, $2, $3, $4, $5)",
		5, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}
	},
/* the rows the key column's own equality takes for the order's */
#define PN_SAME_KEY \
	" RETURNING (SELECT pg_catalog.count(*) FROM @o same WHERE same.@k = $1::@kt)"
	/*
	 * The order a notification names, exactly: the cast to the key's type
	 * finds the row by its index, and the key read back as text must be
	 * what the notification said.  A cast normalises (varchar(32) cuts a
	 * longer reference, char(n) pads, uuid lowers its letters, integers
	 * drop their zeros), and a reference that only normalises to a key is
	 * another order's, never this one's.  Compared byte for byte (COLLATE
	 * "C"): under the key column's own collation a case-insensitive one
	 * would take 'ORD-ABC' for 'ord-abc'.
	 */
	[PLAN_ORDER_GET] = {
		"SELECT @st::text, @am, @cu FROM @o WHERE @k = $1::@kt AND (@k::text COLLATE pg_catalog.\"C\") = $1 FOR UPDATE",
		1, {TEXTOID}, true
	},
	/*
	 * A move returns how many rows have the key (pn_orders_execute refuses
	 * more than one): a row in another status would not be moved, but
	 * would be the same order.  The _KEYED variants count nothing: they run
	 * only where a unique index makes the key one row (key_unique), and on
	 * that table ONLY (a child table created since the look would not be
	 * under its index).
	 */
#define ORDER_MOVE_SET \
	" SET @st = $3::@stt WHERE @k = $1::@kt AND (@k::text COLLATE pg_catalog.\"C\") = $1 AND @st = $2::@stt"
#define ORDER_PAY_SET ORDER_MOVE_SET \
	" AND ($4 IS NULL OR @am = $4)" \
	" AND ($5 IS NULL OR @cu IS NULL OR pg_catalog.upper(@cu) = pg_catalog.upper($5))"
	[PLAN_ORDER_MOVE] = {
		"UPDATE @o" ORDER_MOVE_SET PN_SAME_KEY,
		3, {TEXTOID, TEXTOID, TEXTOID}, true
	},
	[PLAN_ORDER_MOVE_KEYED] = {
		"UPDATE ONLY @o" ORDER_MOVE_SET,
		3, {TEXTOID, TEXTOID, TEXTOID}, true
	},
	/*
	 * why a reference is not found: the key its own comparison (the key
	 * column's collation) finds for it, else what the cast reads it as
	 */
	[PLAN_ORDER_KEY_TEXT] = {
		"SELECT COALESCE((SELECT @k::text FROM @o WHERE @k = $1::@kt LIMIT 1), $1::@kt::text)",
		1, {TEXTOID}, true
	},
	[PLAN_ORDER_PAY] = {
		"UPDATE @o" ORDER_PAY_SET PN_SAME_KEY,
		5, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID}, true
	},
	[PLAN_ORDER_PAY_KEYED] = {
		"UPDATE ONLY @o" ORDER_PAY_SET,
		5, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID}, true
	},
};

static void orders_call(void *arg);

/*
 * Replace @s, @o, @k, @kt, @st, @stt, @am and @cu in a template (a plan's, or
 * a configuration query's) with the schema and the binding of cfg.
 */
char *
pn_expand_sql(const PnConfig *cfg, const char *tmpl)
{
	StringInfoData s;
	static const struct
	{
		const char *tok;
		int			field;
	}			toks[] = {
		/* longest first: @stt before @st, @kt before @k */
		{"@stt", 5}, {"@st", 4}, {"@kt", 3}, {"@k", 2}, {"@am", 6}, {"@cu", 7}, {"@s", 0}, {"@o", 1}
	};

	initStringInfo(&s);
	for (const char *p = tmpl; *p;)
	{
		bool		done = false;

		if (*p == '@')
		{
			for (int i = 0; i < (int) lengthof(toks) && !done; i++)
			{
				size_t		len = strlen(toks[i].tok);
				const char *val = NULL;

				if (strncmp(p, toks[i].tok, len) != 0)
					continue;
				switch (toks[i].field)
				{
					case 0: val = cfg->schema; break;
					case 1: val = cfg->orders; break;
					case 2: val = cfg->key_col; break;
					case 3: val = cfg->key_type; break;
					case 4: val = cfg->status_col; break;
					case 5: val = cfg->status_type; break;
					case 6: val = cfg->amount_expr; break;
					case 7: val = cfg->currency_expr; break;
				}
				appendStringInfoString(&s, val);
				p += len;
				done = true;
			}
		}
		if (!done)
			appendStringInfoChar(&s, *p++);
	}
	return s.data;
}

/*
 * A prepared plan, built once per configuration generation: plain = the
 * variant of an INSERT without its ON CONFLICT clause (plain_table).
 */
static SPIPlanPtr
plan_get(PnConfig *cfg, PnPlanId id, bool plain)
{
	const PlanSpec *spec = &plan_specs[id];
	SPIPlanPtr *slot = plain ? &cfg->plans_plain[id] : &cfg->plans[id];
	char	   *sql;

	if (*slot != NULL)
		return *slot;
	if (spec->needs_orders && !cfg->bound)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s", cfg->binding_error ? cfg->binding_error : "no orders table is bound"),
				 errhint("Call paynotify_bind_orders first.")));
	sql = pn_expand_sql(cfg, spec->sql);
	if (plain)
	{
		/* without the ANY_CONFLICT that ends it */
		size_t		len = strlen(sql) - strlen(ANY_CONFLICT);

		Assert(spec->plain_table != NULL && strcmp(sql + len, ANY_CONFLICT) == 0);
		sql = pnstrdup(sql, len);
	}
	*slot = SPI_prepare(sql, spec->nargs, (Oid *) spec->argtypes);
	if (*slot == NULL)
		elog(ERROR, "paynotify: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(*slot);
	return *slot;
}

/* A prepared plan (an INSERT's with every unique index its arbiter). */
SPIPlanPtr
pn_plan(PnConfig *cfg, PnPlanId id)
{
	return plan_get(cfg, id, false);
}

/* The plain variant of an INSERT plan (see plain_table). */
SPIPlanPtr
pn_plan_plain(PnConfig *cfg, PnPlanId id)
{
	Assert(plan_specs[id].plain_table != NULL);
	return plan_get(cfg, id, true);
}

/* The table whose unique violation the plain variant of a plan raises, or NULL. */
const char *
pn_plan_plain_table(PnPlanId id)
{
	return plan_specs[id].plain_table;
}

typedef struct OrdersCall
{
	PnConfig   *cfg;
	PnPlanId	id;
	Datum	   *args;
	const char *nulls;
	long		count;
	int			rc;
} OrdersCall;

static void
orders_call(void *arg)
{
	OrdersCall *c = (OrdersCall *) arg;

	c->rc = SPI_execute_plan(pn_plan(c->cfg, c->id), c->args, c->nulls, false, c->count);
}

/* Whether type is one of pg_catalog's. */
static bool
type_builtin(Oid type)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	bool		builtin;

	if (!HeapTupleIsValid(tup))
		return false;
	builtin = ((Form_pg_type) GETSTRUCT(tup))->typnamespace == PG_CATALOG_NAMESPACE;
	ReleaseSysCache(tup);
	return builtin;
}

/*
 * Whether index makes the orders table's key one row for the key's own
 * equality (the "=" of the plans, @k = $1::@kt): unique, checked at once
 * (a deferred key may hold two rows until commit), valid, on the key alone
 * without expressions or a predicate, in the column's collation, with the
 * default btree operator class of a built-in type (whose equality is the
 * "=" that pg_catalog resolves).  full: the index's definition too, which
 * never changes for an index (ALTER COLUMN TYPE makes new ones), else only
 * what can (valid, ready, live).
 */
static bool
key_index(PnConfig *cfg, Oid index, bool full)
{
	HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index));
	Form_pg_index ix;
	bool		ok;

	if (!HeapTupleIsValid(tup))
		return false;
	ix = (Form_pg_index) GETSTRUCT(tup);
	ok = ix->indrelid == cfg->key_rel && ix->indisvalid && ix->indisready && ix->indislive;
	if (ok && full)
	{
		bool		isnull;
		oidvector  *coll;
		oidvector  *opclass;

		coll = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup,
															 Anum_pg_index_indcollation, &isnull));
		ok = !isnull && coll->dim1 >= 1 && coll->values[0] == cfg->key_collid;
		opclass = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup,
																Anum_pg_index_indclass, &isnull));
		ok = ok && !isnull && opclass->dim1 >= 1 &&
			ix->indisunique && ix->indimmediate && ix->indnkeyatts == 1 &&
			ix->indkey.values[0] == cfg->key_attnum &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			type_builtin(cfg->key_typid) &&
			opclass->values[0] == GetDefaultOpClass(cfg->key_typid, BTREE_AM_OID);
	}
	ReleaseSysCache(tup);
	return ok;
}

/*
 * Whether the orders table the plans name holds one row at most per key,
 * so that a move need not count the rows with its key (PN_SAME_KEY).  The
 * table is found by the name the plans use and locked as the UPDATE locks
 * it (RowExclusiveLock): no other table can take that name, and no index
 * be dropped, between this look and the statement.  A plain table without
 * children (the UPDATE and the count would reach those), the key column as
 * bound, a unique index as key_index says.  Never where Citus is loaded
 * (the rows are in shards).  The index found is remembered for the
 * generation and looked at again each time.
 */
static bool
key_unique(PnConfig *cfg)
{
	Oid			relid;
	Relation	rel;
	Form_pg_attribute att;
	List	   *indexes;
	ListCell   *lc;
	bool		plain;

	if (GetConfigOption("citus.shard_count", true, false) != NULL)
		return false;
	if (cfg->orders_rv == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(cfg->cxt);

		cfg->orders_rv = makeRangeVarFromNameList(stringToQualifiedNameList(cfg->orders));
		MemoryContextSwitchTo(old);
	}
	relid = RangeVarGetRelid(cfg->orders_rv, RowExclusiveLock, true);
	if (!OidIsValid(relid))
		return false;
	rel = relation_open(relid, NoLock);
	plain = rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relhassubclass;
	if (relid != cfg->key_rel)
	{
		cfg->key_rel = relid;
		cfg->key_attnum = get_attnum(relid, cfg->key_col_name);
		cfg->key_index = InvalidOid;
	}
	att = cfg->key_attnum > 0 && cfg->key_attnum <= RelationGetDescr(rel)->natts
		? TupleDescAttr(RelationGetDescr(rel), cfg->key_attnum - 1) : NULL;
	if (!plain || att == NULL || att->attisdropped || strcmp(NameStr(att->attname), cfg->key_col_name) != 0)
	{
		relation_close(rel, NoLock);
		cfg->key_rel = InvalidOid;
		return false;
	}
	if (att->atttypid != cfg->key_typid || att->atttypmod != cfg->key_typmod ||
		att->attcollation != cfg->key_collid)
	{
		/*
		 * the column is no longer what the plans' @kt was made from (its
		 * type changed since this generation was loaded, while this call
		 * waited for the table): their "=" may not be the index's
		 */
		relation_close(rel, NoLock);
		return false;
	}
	if (OidIsValid(cfg->key_index) && key_index(cfg, cfg->key_index, false))
	{
		relation_close(rel, NoLock);
		return true;
	}
	cfg->key_index = InvalidOid;
	indexes = RelationGetIndexList(rel);
	relation_close(rel, NoLock);
	foreach(lc, indexes)
	{
		if (key_index(cfg, lfirst_oid(lc), true))
		{
			cfg->key_index = lfirst_oid(lc);
			break;
		}
	}
	list_free(indexes);
	return OidIsValid(cfg->key_index);
}

/*
 * Execute one of the plans on the orders table as that table's owner, in a
 * security-restricted operation: its triggers, defaults, constraints and
 * index expressions run with its owner's rights, never paynotify's.
 * Returns SPI_execute_plan's result.  SPI must be connected.
 */
int
pn_orders_execute(PnConfig *cfg, PnPlanId id, Datum *args, const char *nulls, long count)
{
	OrdersCall	c = {cfg, id, args, nulls, count, 0};
	Oid			owner;

	Assert(plan_specs[id].needs_orders);
	if (!cfg->bound)
		(void) pn_plan(cfg, id);	/* raises "no orders table is bound" */
	if ((id == PLAN_ORDER_MOVE || id == PLAN_ORDER_PAY) && key_unique(cfg))
		c.id = id == PLAN_ORDER_MOVE ? PLAN_ORDER_MOVE_KEYED : PLAN_ORDER_PAY_KEYED;
	owner = pn_relation_owner(cfg->orders_oid);
	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the bound orders table %s no longer exists", cfg->orders),
				 errhint("Call paynotify_bind_orders again.")));
	pn_run_orders(owner, orders_call, &c);

	/*
	 * One reference, one order.  A key that is not unique (a table
	 * partitioned by month whose primary key is (order_no, month) may hold
	 * the same order_no twice) would have one notification pay or move
	 * every row with it, or the one row of several in the status it
	 * expects: an error instead, which undoes the statement (failed,
	 * retried, with the reason) until the key is unique.  A move returns
	 * how many rows have its key.
	 */
	if (c.rc == SPI_OK_UPDATE_RETURNING)
	{
		bool		isnull = true;
		int64		same = SPI_processed == 1
			? DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull))
			: 0;

		c.rc = SPI_OK_UPDATE;
		if (!isnull && same > 1)
			SPI_processed = 2;
	}
	if (SPI_processed > 1)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("the orders table %s has more than one row with key \"%s\"",
						cfg->orders, TextDatumGetCString(args[0])),
				 errdetail("paynotify applies a notification to exactly one order."),
				 errhint("Make the key column unique: a primary key or unique index on it alone.")));
	return c.rc;
}

/* Free the plans a configuration generation prepared. */
void
pn_plans_free(PnConfig *cfg)
{
	for (int i = 0; i < PN_NPLANS; i++)
	{
		if (cfg->plans[i] != NULL)
			SPI_freeplan(cfg->plans[i]);
		if (cfg->plans_plain[i] != NULL)
			SPI_freeplan(cfg->plans_plain[i]);
	}
}
