/*-------------------------------------------------------------------------
 *
 * log.c
 *	  Layer 3: payment_notify_log, the one row per authentic notification
 *	  (unique on channel, notify_id) that makes repeats recognisable and
 *	  keeps each notification's story: payload, status, deliveries, attempts,
 *	  last error.
 *
 * Callers hold the notification's lock (lock.c) for every write but the
 * delivery counter, and have SPI connected.  The lock is per server: on
 * Citus the row's key (channel, notify_id, order_no) is what orders two
 * deliveries on two nodes (pn_log_insert, pn_log_update's only_if).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "paynotify.h"
#include "pipeline.h"

static Datum text_or_null(const char *s, char *null);
static Datum processed_at(const PnApplied *res, char *null);

/* Parked and failed rows keep the notice, to be applied again later. */
#define keeps_notice(res) ((res)->outcome == PN_PARKED || (res)->outcome == PN_FAILED)

/* A text argument, or NULL (marking it so in null). */
static Datum
text_or_null(const char *s, char *null)
{
	*null = s ? ' ' : 'n';
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

/*
 * processed_at of a row with this result: now() once it is settled, NULL
 * while failed or parked.  Computed here rather than in the statement: Citus
 * refuses a CASE with now() in a statement on a distributed table.
 */
static Datum
processed_at(const PnApplied *res, char *null)
{
	bool		settled = strcmp(res->log_status, "failed") != 0 &&
		strcmp(res->log_status, "parked") != 0;

	*null = settled ? ' ' : 'n';
	return settled ? TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()) : (Datum) 0;
}

static void log_read(PnConfig *cfg, PnPlanId plan, const char *channel, const PnNotice *n,
					 PnLogRow *row);

/* Read the log row of this notification (its id for its order), if any. */
void
pn_log_get(PnConfig *cfg, const char *channel, const PnNotice *n, PnLogRow *row)
{
	log_read(cfg, PLAN_LOG_GET, channel, n, row);
	if (row->found)
		row->order_no = pn_order_key(n);
}

/*
 * The row of this notification id for its order, else for another order:
 * other content under a known id (same_payload false), never applied.
 */
void
pn_log_get_any(PnConfig *cfg, const char *channel, const PnNotice *n, PnLogRow *row)
{
	static const char *const cols[] = {"channel", "notify_id"};
	const char *values[] = {channel, n->notify_id};

	/* a first delivery's id, nearly always: not there */
	if (pn_probe_absent(cfg, "payment_notify_log", "payment_notify_log_notify", 2, cols, values, NULL))
	{
		row->found = false;
		return;
	}
	log_read(cfg, pn_step_order != NULL ? PLAN_LOG_ANY_AT : PLAN_LOG_ANY, channel, n, row);
	if (row->found)
	{
		row->order_no = SPI_getvalue(SPI_tuptable->vals[row->index], SPI_tuptable->tupdesc, 3);
		/*
		 * NULL only in a row 1.1 wrote, read by this library before
		 * ALTER EXTENSION paynotify UPDATE: refuse (retryable) until then.
		 */
		if (row->order_no == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("paynotify: notification \"%s\" of channel \"%s\" was recorded without an order number by an earlier version",
							n->notify_id, channel),
					 errhint("Run ALTER EXTENSION paynotify UPDATE.")));
		if (strcmp(row->order_no, pn_order_key(n)) != 0)
			row->same_payload = false;
	}
}

/*
 * Of the rows PLAN_LOG_ANY read (every row of the id), the one for the
 * notice's own order, else the first seen (the earliest first_seen; of
 * equal ones, the first read).
 */
static int
log_pick(const PnNotice *n)
{
	const char *own = pn_order_key(n);
	int			best = 0;
	TimestampTz best_seen = 0;

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		bool		isnull;
		char	   *order_no = SPI_getvalue(tup, SPI_tuptable->tupdesc, 3);
		TimestampTz seen = DatumGetTimestampTz(SPI_getbinval(tup, SPI_tuptable->tupdesc, 4, &isnull));

		if (order_no != NULL && strcmp(order_no, own) == 0)
			return (int) i;
		if (i == 0 || seen < best_seen)
		{
			best = (int) i;
			best_seen = seen;
		}
	}
	return best;
}

static void
log_read(PnConfig *cfg, PnPlanId plan, const char *channel, const PnNotice *n, PnLogRow *row)
{
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	bool		isnull;
	Datum		same;

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(n->notify_id);
	args[3] = CStringGetTextDatum(pn_order_key(n));
	args[2] = n->payload ? JsonbPGetDatum(n->payload) : (Datum) 0;
	if (n->payload == NULL)
		nulls[2] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, plan), args, nulls, false, plan == PLAN_LOG_ANY ? 0 : 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: notification log lookup failed");
	row->found = (SPI_processed > 0);
	if (!row->found)
		return;
	row->index = plan == PLAN_LOG_ANY ? log_pick(n) : 0;
	row->status = SPI_getvalue(SPI_tuptable->vals[row->index], SPI_tuptable->tupdesc, 1);
	same = SPI_getbinval(SPI_tuptable->vals[row->index], SPI_tuptable->tupdesc, 2, &isnull);
	/* both payloads absent counts as the same */
	row->same_payload = isnull ? (n->payload == NULL) : DatumGetBool(same);
}

/* Count one more delivery of a known notification. */
void
pn_log_seen(PnConfig *cfg, const char *channel, const char *notify_id, const char *order_no)
{
	Datum		args[3];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(notify_id);
	args[2] = CStringGetTextDatum(order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_LOG_SEEN), args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: notification log update failed");
}

/*
 * The first delivery's row, written after its business step with how that
 * went (error: the failure's message, or NULL).  A parked or failed
 * notification keeps its extracted notice, to be applied later without its
 * body (when its order moves, or by paynotify_retry).
 *
 * False when the row is there already: another delivery of the same
 * notification wrote it and committed (it waited for that one to end).  The
 * notification's lock keeps a second delivery out on this server; the
 * unique key is what orders two deliveries handled on two Citus nodes.
 * Inside the business step on one server the insert raises a unique
 * violation instead (pn_insert_execute), read by step.c as the same.
 */
bool
pn_log_insert(PnConfig *cfg, const char *channel, const PnNotice *n,
			  const PnApplied *res, const char *error)
{
	Datum		args[10];
	char		nulls[10];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(n->notify_id);
	args[2] = CStringGetTextDatum(pn_order_key(n));
	args[3] = text_or_null(n->event_type, &nulls[3]);
	args[4] = n->payload ? JsonbPGetDatum(n->payload) : (Datum) 0;
	nulls[4] = n->payload ? ' ' : 'n';
	args[5] = CStringGetTextDatum(res->log_status);
	args[6] = text_or_null(res->note, &nulls[6]);
	args[7] = text_or_null(error, &nulls[7]);
	args[8] = keeps_notice(res) ? JsonbPGetDatum(pn_notice_to_jsonb(n)) : (Datum) 0;
	nulls[8] = keeps_notice(res) ? ' ' : 'n';
	args[9] = processed_at(res, &nulls[9]);
	if (pn_insert_execute(cfg, cfg->schema_14 && pn_notice_from_query(n) ?
						  PLAN_LOG_INSERT_QUERY : PLAN_LOG_INSERT, NULL, args, nulls) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: notification log insert failed");
	return SPI_processed == 1;
}

/*
 * A later run of the business step (a retried failure, or a parked
 * notification now applied): its result, one more attempt, and one more
 * delivery when a delivery caused it.  only_if: update only a row in that
 * status (NULL: any); false when there was none to update.
 */
bool
pn_log_update(PnConfig *cfg, const char *channel, const char *notify_id, const char *order_no,
			  Jsonb *notice, const PnApplied *res, const char *error, bool delivered,
			  const char *only_if)
{
	Datum		args[11];
	char		nulls[11];

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(notify_id);
	args[2] = CStringGetTextDatum(res->log_status);
	args[3] = text_or_null(res->note, &nulls[3]);
	args[4] = text_or_null(error, &nulls[4]);
	args[5] = keeps_notice(res) && notice ? JsonbPGetDatum(notice) : (Datum) 0;
	nulls[5] = keeps_notice(res) && notice ? ' ' : 'n';
	args[6] = Int32GetDatum(1);
	args[7] = Int32GetDatum(delivered ? 1 : 0);
	args[8] = CStringGetTextDatum(order_no);
	args[9] = text_or_null(only_if, &nulls[9]);
	args[10] = processed_at(res, &nulls[10]);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_LOG_RETRY), args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: notification log update failed");
	return SPI_processed == 1;
}

/*
 * Whether the index's predicate is payment_notify_log_parked's as the
 * extension creates it: status = 'parked' (text's "=") and nothing else.
 * One rebuilt by hand with another predicate could miss a parked row that
 * the list would find.
 */
static bool
parked_predicate(Relation heap, Relation index)
{
	AttrNumber	status_att = get_attnum(RelationGetRelid(heap), "status");
	List	   *pred = RelationGetIndexPredicate(index);
	OpExpr	   *op;
	Var		   *var;
	Const	   *val;

	if (status_att == InvalidAttrNumber ||
		list_length(pred) != 1 || !IsA(linitial(pred), OpExpr))
		return false;
	op = linitial_node(OpExpr, pred);
	if (op->opno != TextEqualOperator || list_length(op->args) != 2 ||
		!IsA(linitial(op->args), Var) || !IsA(lsecond(op->args), Const))
		return false;
	var = linitial_node(Var, op->args);
	val = lsecond_node(Const, op->args);
	return var->varattno == status_att && val->consttype == TEXTOID && !val->constisnull &&
		strcmp(TextDatumGetCString(val->constvalue), "parked") == 0;
}

/*
 * Whether the order has no parked notification, seen as a statement run
 * now would see it: one probe of the partial index payment_notify_log_parked
 * (order_no, WHERE status = 'parked'), where the list of them
 * (PLAN_PARKED_LIST) would start an executor with a sort each time a
 * payment is applied.  A row there is parked in the row version the index
 * points to (a change of status is never a HOT update, the predicate's
 * column being indexed), so a visible one means a parked row.  False, to
 * have the list read, when the index is not as created, and wherever
 * Citus is loaded (probe.c).
 */
bool
pn_log_none_parked(PnConfig *cfg, const char *order_no)
{
	static const char *const cols[] = {"order_no"};

	return pn_probe_absent(cfg, "payment_notify_log", "payment_notify_log_parked", 1,
						   cols, &order_no, parked_predicate);
}
