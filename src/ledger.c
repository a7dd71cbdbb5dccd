/*-------------------------------------------------------------------------
 *
 * ledger.c
 *	  The records a business step reads and writes: the order row (locked
 *	  before anything is decided), payment_record (one row per trade),
 *	  paynotify_refund (one row per refund id) and paynotify_anomaly.
 *	  Payments and refunds are accounted per trade; the rules that read and
 *	  write them are apply.c's (docs/LEDGER.md).
 *
 * Every function here runs inside the business step, with SPI connected.
 * Each read takes a fresh snapshot (read_only = false): it sees what
 * committed before it, and what this step wrote.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "paynotify.h"
#include "pipeline.h"

static void order_not_found(PnConfig *cfg, const char *order_no) pg_attribute_noreturn();

/*
 * No order has the key a notification names: an error (retried later).
 * When the key's type reads the reference as another text (a varchar(n)
 * cuts it, a char(n) pads it, uuid lowers it), say so: that other key is
 * another order, never this notification's.
 */
static void
order_not_found(PnConfig *cfg, const char *order_no)
{
	Datum		arg = CStringGetTextDatum(order_no);
	char	   *as_key = NULL;

	if (pn_orders_execute(cfg, PLAN_ORDER_KEY_TEXT, &arg, NULL, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
		as_key = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (as_key != NULL && strcmp(as_key, order_no) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("order \"%s\" not found (the orders table's key column reads it as \"%s\", which is not the same reference)",
						order_no, as_key),
				 errdetail("A notification is applied only to the order whose key is exactly the reference it names.")));
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA_FOUND),
			 errmsg("order \"%s\" not found", order_no)));
}

/* Lock and read the order; a missing order is an error (retried later). */
void
pn_order_get(PnConfig *cfg, const char *order_no, PnOrderRow *row)
{
	Datum		arg = CStringGetTextDatum(order_no);
	bool		isnull;
	char	   *status;

	if (pn_orders_execute(cfg, PLAN_ORDER_GET, &arg, NULL, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: order lookup failed");
	if (SPI_processed == 0)
		order_not_found(cfg, order_no);
	status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	row->status = status ? (char *) pn_status_name(&cfg->status_map, status) : "";
	row->amount = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 2, &isnull));
	row->has_amount = !isnull;
	row->currency = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
}

/* Lock the order's row, if there is one: whether there is. */
bool
pn_order_lock(PnConfig *cfg, const char *order_no)
{
	Datum		arg = CStringGetTextDatum(order_no);

	if (pn_orders_execute(cfg, PLAN_ORDER_GET, &arg, NULL, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: order lookup failed");
	return SPI_processed > 0;
}

/*
 * Read a trade's payment record (SPI_tuptable: order_no, amount,
 * notify_id): under any order, or inside a delegated step under its order
 * only (pn_step_order; the caller looked under the others before).
 */
static bool
payment_read(PnConfig *cfg, const char *channel, const char *trade_no)
{
	Datum		args[3];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(trade_no);
	if (pn_step_order != NULL)
	{
		args[2] = CStringGetTextDatum(pn_step_order);
		return SPI_execute_plan(pn_plan(cfg, PLAN_PAYMENT_GET_AT), args, NULL, false, 1) == SPI_OK_SELECT;
	}
	return SPI_execute_plan(pn_plan(cfg, PLAN_PAYMENT_GET), args, NULL, false, 1) == SPI_OK_SELECT;
}

/* The order a trade was recorded for, or NULL. */
char *
pn_payment_order(PnConfig *cfg, const char *channel, const char *trade_no)
{
	static const char *const cols[] = {"channel", "trade_no"};
	const char *values[] = {channel, trade_no};

	/* a first payment's trade, nearly always: not there */
	if (pn_probe_absent(cfg, "payment_record", "payment_record_trade", 2, cols, values, NULL))
		return NULL;
	if (!payment_read(cfg, channel, trade_no))
		elog(ERROR, "paynotify: payment lookup failed");
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * The payment record of a trade: true, its amount and (order_no not NULL)
 * the order it paid, when there is one; both from the one row read.
 */
bool
pn_payment_get(PnConfig *cfg, const char *channel, const char *trade_no, int64 *amount,
			   char **order_no)
{
	bool		isnull;

	if (!payment_read(cfg, channel, trade_no))
		elog(ERROR, "paynotify: payment lookup failed");
	if (SPI_processed == 0)
		return false;
	*amount = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (order_no != NULL)
		*order_no = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	return true;
}

/*
 * Whether the payment record of a trade was made by a query (its notify_id
 * is a query's, PN_QUERY_ID_PREFIX): the gateway's own notification of it
 * came later, or never.
 */
bool
pn_payment_by_query(PnConfig *cfg, const char *channel, const char *trade_no)
{
	char	   *notify_id;

	if (!payment_read(cfg, channel, trade_no))
		elog(ERROR, "paynotify: payment lookup failed");
	if (SPI_processed == 0)
		return false;
	notify_id = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	return notify_id != NULL &&
		strncmp(notify_id, PN_QUERY_ID_PREFIX, strlen(PN_QUERY_ID_PREFIX)) == 0;
}

/*
 * How many trades (payment records, any channel) the order has; all_refunded
 * says whether each of them is refunded in full.  The rows stay in
 * SPI_tuptable (channel, trade_no, paid, refunded) until the next query.
 */
int
pn_order_trades(PnConfig *cfg, const char *order_no, bool *all_refunded)
{
	Datum		arg = CStringGetTextDatum(order_no);

	if (SPI_execute_plan(pn_plan(cfg, PLAN_ORDER_TRADES), &arg, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: payment lookup failed");
	*all_refunded = true;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int64		paid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc, 3, &isnull));
		int64		refunded = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 4, &isnull));

		if (refunded < paid)
			*all_refunded = false;
	}
	return (int) Min(SPI_processed, INT_MAX);
}

/* The status of a recorded refund ("succeeded", "failed"), or NULL. */
char *
pn_refund_get(PnConfig *cfg, const char *channel, const char *refund_id, const char *order_no)
{
	Datum		args[3];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(refund_id);
	args[2] = CStringGetTextDatum(order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_GET), args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: refund lookup failed");
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * Record the payment.  The order's lock keeps other notifications of this
 * order out, and the trade was looked up: only a notification of the same
 * trade for another order, at the same time, can have recorded it since.
 * That fails the step (retried, then answered trade_of_another_order).
 */
void
pn_payment_insert(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	Datum		args[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		sub = n->sub_merchant != NULL && cfg->schema_13;
	bool		agreement = n->agreement_id != NULL && cfg->schema_14;
	PnPlanId	plan = agreement ? PLAN_PAYMENT_INSERT_AGREEMENT :
		sub ? PLAN_PAYMENT_INSERT_SUB : PLAN_PAYMENT_INSERT;

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->trade_no);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = Int64GetDatum(Max(n->order_amount, 0));
	args[4] = n->currency ? CStringGetTextDatum(n->currency) : (Datum) 0;
	args[5] = CStringGetTextDatum(n->notify_id);
	args[6] = sub ? CStringGetTextDatum(n->sub_merchant) : (Datum) 0;
	args[7] = agreement ? CStringGetTextDatum(n->agreement_id) : (Datum) 0;
	if (n->currency == NULL)
		nulls[4] = 'n';
	if (!sub)
		nulls[6] = 'n';
	if (!agreement)
		nulls[7] = 'n';
	if (pn_insert_execute(cfg, plan, n->trade_no, args, nulls) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: payment insert failed");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("trade \"%s\" was recorded for another order at the same time",
						n->trade_no)));
	pn_expectation_settle(cfg, n->order_no, "payment", NULL, n->notify_id);
}

/*
 * Whether paynotify_expectation holds no row at all, in any state, now: its
 * relation has no block (never written, or truncated), which a row of any
 * transaction, committed or not, would need.  Where paynotify_expect is
 * never called, this spares every payment the settling UPDATE;
 * its snapshot, taken a moment later, could only see rows committed in that
 * moment by a paynotify_expect that took no lock the payment holds, which
 * is as if it had committed just after.  The lock is the UPDATE's
 * (RowExclusiveLock), so it waits for, and conflicts with, what that would.
 * Never where Citus is loaded: a distributed or reference table's rows are
 * in its shards, not in the relation here.
 */
static bool
expectations_none(PnConfig *cfg)
{
	Oid			relid;
	Relation	rel;
	bool		none;

	if (GetConfigOption("citus.shard_count", true, false) != NULL)
		return false;
	relid = get_relname_relid("paynotify_expectation", cfg->nsp);
	if (!OidIsValid(relid))
		return false;
	rel = table_open(relid, RowExclusiveLock);
	none = rel->rd_rel->relkind == RELKIND_RELATION && RelationGetNumberOfBlocks(rel) == 0;
	table_close(rel, NoLock);
	return none;
}

/*
 * What the application expected of the order is settled (1.4 schemas): a
 * payment settles its expectations on every channel (channel NULL), a close
 * those on its channel.  Nothing to run when there is no expectation at all.
 */
void
pn_expectation_settle(PnConfig *cfg, const char *order_no, const char *how,
					  const char *channel, const char *notify_id)
{
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	if (!cfg->schema_14 || expectations_none(cfg))
		return;
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(how);
	args[2] = channel ? CStringGetTextDatum(channel) : (Datum) 0;
	args[3] = CStringGetTextDatum(notify_id);
	if (channel == NULL)
		nulls[2] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_EXPECTATION_SETTLE), args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: expectation update failed");
}

/* Record a refund; false when this refund id was recorded before. */
bool
pn_refund_insert(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *trade_no,
				 int64 amount, const char *status)
{
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->refund_id ? n->refund_id : n->notify_id);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = trade_no ? CStringGetTextDatum(trade_no) : (Datum) 0;
	args[4] = Int64GetDatum(amount);
	args[5] = CStringGetTextDatum(status);
	args[6] = CStringGetTextDatum(n->notify_id);
	if (trade_no == NULL)
		nulls[3] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_INSERT), args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: refund insert failed");
	return SPI_processed == 1;
}

/* A failed refund succeeded after all; false unless it was failed. */
bool
pn_refund_succeed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *trade_no,
				  int64 amount)
{
	Datum		args[6];

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->refund_id ? n->refund_id : n->notify_id);
	args[2] = Int64GetDatum(amount);
	args[3] = CStringGetTextDatum(trade_no);
	args[4] = CStringGetTextDatum(n->notify_id);
	args[5] = CStringGetTextDatum(n->order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_SUCCEED), args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: refund update failed");
	return SPI_processed == 1;
}

/*
 * A succeeded refund failed after all: false unless it had succeeded;
 * *amount is the amount it had been recorded with.
 */
bool
pn_refund_fail(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *refund_id,
			   int64 *amount)
{
	Datum		args[4];
	bool		isnull;

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(refund_id);
	args[2] = CStringGetTextDatum(n->notify_id);
	args[3] = CStringGetTextDatum(n->order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_FAIL), args, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "paynotify: refund update failed");
	if (SPI_processed != 1)
		return false;
	*amount = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return true;
}

/* How many refunds of one trade failed (fresh snapshot). */
int64
pn_refund_failed_count(PnConfig *cfg, const char *channel, const char *trade_no,
					   const char *order_no)
{
	Datum		args[3];
	bool		isnull;

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(trade_no);
	args[2] = CStringGetTextDatum(order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_FAILED_COUNT), args, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "paynotify: refund count query failed");
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* What succeeded refunds of one trade add up to (fresh snapshot). */
int64
pn_refunded_sum(PnConfig *cfg, const char *channel, const char *trade_no, const char *order_no)
{
	Datum		args[3];
	bool		isnull;

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(trade_no);
	args[2] = CStringGetTextDatum(order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_SUM), args, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "paynotify: refund sum query failed");
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* Insert a paynotify_anomaly row and say so in the server log. */
void
pn_anomaly(PnConfig *cfg, const char *channel, const PnNotice *n, const char *kind)
{
	Datum		args[5];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(n->notify_id);
	args[2] = CStringGetTextDatum(pn_order_key(n));
	args[3] = CStringGetTextDatum(kind);
	args[4] = JsonbPGetDatum(pn_notice_to_jsonb(n));
	if (SPI_execute_plan(pn_plan(cfg, PLAN_ANOMALY_INSERT), args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: anomaly insert failed");
	ereport(WARNING,
			(errmsg("paynotify: anomaly \"%s\" on channel \"%s\", notification \"%s\"",
					kind, channel, n->notify_id)));
}

/*
 * Dispute records (paynotify_dispute, 1.3 schemas): one row per dispute of
 * the order n->order_no (the order its trade's payment recorded), whose
 * row the step has locked.  The amount is NULL when the notice had none.
 */
static void
dispute_args(const PnChannel *ch, const PnNotice *n, const char *dispute_id,
			 Datum *args, char *nulls)
{
	nulls[0] = nulls[1] = nulls[2] = ' ';
	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(dispute_id);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = n->trade_no ? CStringGetTextDatum(n->trade_no) : (Datum) 0;
	nulls[3] = n->trade_no ? ' ' : 'n';
	args[4] = Int64GetDatum(Max(n->dispute_amount, 0));
	nulls[4] = n->dispute_amount >= 0 ? ' ' : 'n';
	args[5] = n->currency ? CStringGetTextDatum(n->currency) : (Datum) 0;
	nulls[5] = n->currency ? ' ' : 'n';
}

/* A dispute opened; false when it is recorded already (open or closed). */
bool
pn_dispute_open(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *dispute_id)
{
	Datum		args[7];
	char		nulls[7];

	dispute_args(ch, n, dispute_id, args, nulls);
	args[6] = CStringGetTextDatum(n->notify_id);
	nulls[6] = ' ';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_DISPUTE_OPEN), args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: dispute insert failed");
	return SPI_processed == 1;
}

/*
 * A dispute closed ("won" or "lost"): an open one is closed, an unknown one
 * recorded closed (its open, when it comes, finds it); false when it is
 * closed already.
 */
bool
pn_dispute_close(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *dispute_id,
				 const char *status)
{
	Datum		args[8];
	char		nulls[8];
	Datum		upd[6];
	char		updnulls[6];

	dispute_args(ch, n, dispute_id, args, nulls);
	memcpy(upd, args, 3 * sizeof(Datum));
	memset(updnulls, ' ', sizeof(updnulls));
	upd[3] = CStringGetTextDatum(status);
	upd[4] = args[4];
	updnulls[4] = nulls[4];
	upd[5] = CStringGetTextDatum(n->notify_id);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_DISPUTE_CLOSE), upd, updnulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: dispute update failed");
	if (SPI_processed == 1)
		return true;
	args[6] = CStringGetTextDatum(status);
	args[7] = CStringGetTextDatum(n->notify_id);
	nulls[6] = nulls[7] = ' ';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_DISPUTE_CLOSE_FIRST), args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: dispute insert failed");
	return SPI_processed == 1;
}

/*
 * The order's disputes: how many are open, how many lost, the sum lost;
 * returns how many it has.
 */
int64
pn_dispute_tally(PnConfig *cfg, const char *order_no, int64 *open, int64 *lost,
				 int64 *lost_amount)
{
	Datum		arg = CStringGetTextDatum(order_no);
	bool		isnull;

	if (SPI_execute_plan(pn_plan(cfg, PLAN_DISPUTE_TALLY), &arg, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "paynotify: dispute lookup failed");
	*open = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*lost = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	*lost_amount = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
}

/*
 * A dispute recorded without its amount gets the one this notice carries;
 * false when it had one (or this notice has none).
 */
bool
pn_dispute_fill_amount(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
					   const char *dispute_id)
{
	Datum		args[4];

	if (n->dispute_amount < 0)
		return false;
	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(dispute_id);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = Int64GetDatum(n->dispute_amount);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_DISPUTE_FILL_AMOUNT), args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: dispute update failed");
	return SPI_processed == 1;
}

/*
 * Whether the order's refunds are in doubt: a total recorded on a trade
 * with a failed refund (refund_total_after_failure), on which the refund
 * rule moved nothing.
 */
bool
pn_order_refunds_doubtful(PnConfig *cfg, const char *order_no)
{
	Datum		arg = CStringGetTextDatum(order_no);
	bool		isnull;

	if (SPI_execute_plan(pn_plan(cfg, PLAN_ORDER_REFUNDS_DOUBTFUL), &arg, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "paynotify: anomaly lookup failed");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* What the order kept of its payments: paid less refunded, over its trades. */
int64
pn_order_kept(PnConfig *cfg, const char *order_no)
{
	bool		all_refunded;
	int64		kept = 0;
	int			n = pn_order_trades(cfg, order_no, &all_refunded);

	for (int i = 0; i < n; i++)
	{
		bool		isnull;
		int64		paid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc, 3, &isnull));
		int64		refunded = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 4, &isnull));

		if (refunded < paid)
			kept += paid - refunded;
	}
	return kept;
}

/* ---------------------------------------------------------------------
 * Agreements (1.4): one row per agreement, under pn_lock_agreement
 * ---------------------------------------------------------------------
 */

/* The agreement's state ("signed", "ended"), or NULL when none is recorded. */
char *
pn_agreement_get(PnConfig *cfg, const char *channel, const char *agreement_id)
{
	Datum		args[2];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(agreement_id);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_AGREEMENT_GET), args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: agreement lookup failed");
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/* A text of the notice's agreement detail, or NULL. */
static Datum
agreement_text(const PnNotice *n, const char *key, char *null)
{
	char	   *s;

	if (n->detail != NULL && pn_json_string(n->detail, key, &s))
	{
		*null = ' ';
		return CStringGetTextDatum(s);
	}
	*null = 'n';
	return (Datum) 0;
}

/* The last second a timestamptz holds comfortably: 9999-12-31 23:59:59 UTC. */
#define MAX_AGREEMENT_TIME INT64CONST(253402300799)

/*
 * A time (unix seconds) of the notice's agreement detail, else the time it
 * is recorded (the transaction's, as now()): also for one no timestamptz
 * could hold.
 */
static Datum
agreement_time(const PnNotice *n, const char *key)
{
	int64		v;

	if (n->detail != NULL && pn_json_int64(n->detail, key, &v) &&
		v >= 0 && v <= MAX_AGREEMENT_TIME)
		return TimestampTzGetDatum(time_t_to_timestamptz((pg_time_t) v));
	return TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
}

/*
 * The parameters of an agreement's sign or end (their plans take the
 * same): channel, agreement id, merchant's reference, plan, gateway state,
 * the time at time_key, the notice.
 */
static void
agreement_args(const PnChannel *ch, const PnNotice *n, const char *time_key,
			   Datum *args, char *nulls)
{
	memset(nulls, ' ', 7);
	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->agreement_id);
	args[2] = agreement_text(n, "merchant_ref", &nulls[2]);
	args[3] = agreement_text(n, "plan_id", &nulls[3]);
	args[4] = agreement_text(n, "gateway_state", &nulls[4]);
	args[5] = agreement_time(n, time_key);
	args[6] = CStringGetTextDatum(n->notify_id);
}

/*
 * Run an agreement's sign or end plan with the notice's arguments, the time
 * at time_key; its rows, or an error when the plan did not run as rc says.
 */
static uint64
agreement_exec(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnPlanId plan,
			   const char *time_key, int rc)
{
	Datum		args[7];
	char		nulls[7];

	agreement_args(ch, n, time_key, args, nulls);
	if (SPI_execute_plan(pn_plan(cfg, plan), args, nulls, false, 0) != rc)
		elog(ERROR, "paynotify: agreement \"%s\" could not be written", n->agreement_id);
	return SPI_processed;
}

/* Record a new agreement, signed, by this notice. */
void
pn_agreement_sign(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	if (agreement_exec(cfg, ch, n, PLAN_AGREEMENT_SIGN, "signed_at", SPI_OK_INSERT) != 1)
		elog(ERROR, "paynotify: agreement insert failed");
}

/* End a signed agreement by this notice; false when it was not signed. */
bool
pn_agreement_end(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	return agreement_exec(cfg, ch, n, PLAN_AGREEMENT_END, "ended_at", SPI_OK_UPDATE) == 1;
}

/*
 * Record an agreement that was never in force as ended by this notice: no
 * sign, signed_at NULL (a Stripe subscription whose first payment never
 * came, incomplete_expired).
 */
void
pn_agreement_end_unsigned(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	if (agreement_exec(cfg, ch, n, PLAN_AGREEMENT_END_UNSIGNED, "ended_at", SPI_OK_INSERT) != 1)
		elog(ERROR, "paynotify: agreement insert failed");
}

/*
 * A notice that moves nothing of a recorded agreement: listed with it, and
 * its gateway state (NULL: none) kept while the agreement is in force.
 */
void
pn_agreement_note(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
				  const char *gateway_state)
{
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->agreement_id);
	args[2] = gateway_state ? CStringGetTextDatum(gateway_state) : (Datum) 0;
	if (gateway_state == NULL)
		nulls[2] = 'n';
	args[3] = CStringGetTextDatum(n->notify_id);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_AGREEMENT_NOTE), args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: agreement update failed");
}
