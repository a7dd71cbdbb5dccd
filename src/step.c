/*-------------------------------------------------------------------------
 *
 * step.c
 *	  The business step as a delivery runs it: pn_apply (apply.c) in an
 *	  internal subtransaction, and the log row that records how it went.
 *
 * A first delivery writes its log row inside the step (INSERT ... ON
 * CONFLICT DO NOTHING on Citus; on one server a plain INSERT, whose unique
 * violation fails the step quietly, and the caller's ON CONFLICT insert
 * after it then finds the row taken), a failed one run again updates it
 * there (UPDATE ... WHERE status = 'failed'): either finds the row taken
 * when another delivery wrote it first (on Citus, one that took the
 * notification's lock on another node), and then rolls the whole step
 * back.  A step that raised is rolled back and its log row written after
 * it, by the caller.
 * paynotify_handle (handle.c), paynotify_query_apply (query.c, through
 * it), paynotify_step_at (handle.c) and paynotify_retry (ops.c) run the
 * step through here; SPI is connected and the notification's lock held.
 * Each of them enters through pn_entry, the entries' guard, below.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/lsyscache.h"

#include "paynotify.h"
#include "pipeline.h"

#define MAX_ERROR_TEXT 1000

/* Raised inside the step to roll it back when the log row was taken; never reaches a client. */
#define ERRCODE_PN_TAKEN MAKE_SQLSTATE('P','N','T','K','N')

typedef struct ApplyCall
{
	PnConfig   *cfg;
	const PnChannel *ch;
	const PnNotice *n;
	PnStepLog	how;
	PnApplied  *res;
} ApplyCall;

static void apply_call(void *arg);

/*
 * How many of the entries that deliver or apply a notification
 * (paynotify_handle, paynotify_query_apply, paynotify_retry,
 * paynotify_step_at) are running in this backend, and whether the running
 * one is calling paynotify_step_at for its own notification here
 * (delegate, handle.c): the only nesting of them there is.
 */
static int	entry_depth = 0;
bool		pn_delegating = false;

/*
 * Run body as the entry name (delegable: paynotify_step_at, which
 * delegate() may call inside another entry).  Refused from a hook, a
 * trigger of the orders table or inside a business step (a trigger the
 * step fires on paynotify's own tables), and inside another entry (a
 * trigger on paynotify's tables fired by the writes outside the step,
 * such as a failed delivery's log row): a notification applied inside
 * another's step would write the log row that step is about to write or
 * move its order under it; a retry of one being delivered would record it
 * under the delivery's feet; a trigger retrying the failed rows it is
 * fired by would recurse until the stack runs out.
 */
Datum
pn_entry(FunctionCallInfo fcinfo, const char *name, const char *hint, PGFunction body,
		 bool delegable)
{
	int			saved_depth = entry_depth;
	bool		delegated = pn_delegating;
	volatile Datum result = (Datum) 0;

	pn_delegating = false;
	if (pn_running_as() || pn_in_step)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s cannot be called from a paynotify hook, a trigger of the orders table or inside a business step",
						name),
				 hint != NULL ? errhint("%s", hint) : 0));
	if (entry_depth > 0 && !(delegated && delegable))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s cannot be called while a paynotify delivery, retry or query is running in this session",
						name),
				 errdetail("It was called from code that the running one set off, such as a trigger on paynotify's tables."),
				 hint != NULL ? errhint("%s", hint) : 0));
	pn_quiet_citus(delegable);
	entry_depth++;
	PG_TRY();
	{
		result = body(fcinfo);
	}
	PG_FINALLY();
	{
		entry_depth = saved_depth;
		pn_delegating = false;
	}
	PG_END_TRY();
	return result;
}

/*
 * An error's message as paynotify keeps or passes it on: at most
 * MAX_ERROR_TEXT bytes (a trigger's message may be of any length).
 */
char *
pn_clip_error(const char *message)
{
	return pn_clip_text(message, MAX_ERROR_TEXT);
}

/* pn_clip_error of a caught error's message, "error" when it has none */
char *
pn_error_text(const ErrorData *edata)
{
	return pn_clip_error(edata->message ? edata->message : "error");
}

/* Write the log row of a step; false when another delivery had written it. */
bool
pn_step_log(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const PnApplied *res,
			const char *error, PnStepLog how)
{
	if (how == PN_STEP_LOG_INSERT)
		return pn_log_insert(cfg, ch->name, n, res, error);
	return pn_log_update(cfg, ch->name, n->notify_id, pn_order_key(n),
						 res->outcome == PN_PARKED || res->outcome == PN_FAILED ? pn_notice_to_jsonb(n) : NULL,
						 res, error, true, "failed");
}

/*
 * Whether an error of the step is the conflict of its plain insert into
 * the extension's table (plans.c): raised while that insert ran, a unique
 * violation on that table (the index's table and schema, as the server
 * reports them), not one a trigger or a hook raised on another.
 */
static bool
unique_violation_on(PnConfig *cfg, const ErrorData *edata, const PnPlainInsert *plain,
					const char *table)
{
	const char *schema;

	if (plain->table == NULL || strcmp(plain->table, table) != 0 ||
		edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION ||
		edata->table_name == NULL || edata->schema_name == NULL ||
		strcmp(edata->table_name, table) != 0)
		return false;
	schema = get_namespace_name(cfg->nsp);
	return schema != NULL && strcmp(edata->schema_name, schema) == 0;
}

/* The step itself, inside the subtransaction: apply, then write the log row. */
static void
apply_call(void *arg)
{
	ApplyCall  *c = (ApplyCall *) arg;
	PnNotice	copy;
	const PnNotice *n = c->n;

	pn_in_step = true;
	pn_bound_lock_waits();
	/*
	 * a notice naming no order: applied to the order its trade paid, if
	 * any; its log row stays keyed as the notice is (no order), where
	 * every delivery of it finds the row
	 */
	n = pn_notice_order_by_trade(c->cfg, c->ch, c->n, &copy);
	pn_apply(c->cfg, c->ch, n, c->res);
	if (c->how != PN_STEP_LOG_NONE && !pn_step_log(c->cfg, c->ch, c->n, c->res, NULL, c->how))
		ereport(ERROR,
				(errcode(ERRCODE_PN_TAKEN),
				 errmsg("paynotify: notification was recorded by another delivery")));
}

/* The warning of a business step that failed. */
void
pn_step_warn(const PnChannel *ch, const PnNotice *n, const char *error)
{
	ereport(WARNING,
			(errmsg("paynotify: business step failed for notification \"%s\" on channel \"%s\"",
					n->notify_id, ch->name),
			 errdetail("%s", error)));
}

/*
 * Run pn_apply in a subtransaction, and write the log row in it as how
 * says.  On error everything it did is rolled back: PN_STEP_TAKEN when the
 * log row had been written by another delivery, PN_STEP_BUSY when it
 * waited longer than paynotify.lock_timeout for a lock (the order's row
 * held by the application), else PN_STEP_FAILED; with either of the last
 * two *error is the message and res says failed (the log row, if any, is
 * then the caller's).
 */
PnStepResult
pn_apply_step(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
			  PnStepLog how, PnApplied *res, char **error)
{
	ApplyCall	call = {cfg, ch, n, how, res};
	ErrorData  *edata = NULL;
	PnPlainInsert plain;
	bool		quiet;
	bool		outer_in_step = pn_in_step;
	PnPlainInsert outer_plain = pn_plain_insert;

	/*
	 * The flags are this step's while it runs, and the caller's again after
	 * it, however it ends (an error it does not catch, a cancel, included).
	 * No step runs inside another (pn_entry refuses every way in there):
	 * the restore is kept for the errors and cancels that end a step.
	 */
	pn_plain_insert.table = NULL;
	pn_in_step = false;
	PG_TRY();
	{
		edata = pn_subxact_run(apply_call, &call);
		plain = pn_plain_insert;
	}
	PG_FINALLY();
	{
		pn_in_step = outer_in_step;
		pn_plain_insert = outer_plain;
	}
	PG_END_TRY();
	if (edata == NULL)
		return PN_STEP_OK;
	if (edata->sqlerrcode == ERRCODE_PN_TAKEN)
	{
		FreeErrorData(edata);
		return PN_STEP_TAKEN;
	}
	/*
	 * The log row's plain insert found a row with its key: the caller's
	 * insert after the step (ON CONFLICT DO NOTHING) then finds the row
	 * taken and answers from it, or, were it something else's key (a
	 * trigger's), records the failure, and warns of it then.
	 */
	quiet = unique_violation_on(cfg, edata, &plain, "payment_notify_log");
	/* a trade recorded meanwhile (for another order: else no insert) */
	if (unique_violation_on(cfg, edata, &plain, "payment_record") &&
		edata->constraint_name != NULL &&
		(strcmp(edata->constraint_name, "payment_record_trade") == 0 ||
		 strcmp(edata->constraint_name, "payment_record_pkey") == 0))
		*error = psprintf("trade \"%s\" was recorded for another order at the same time",
						  plain.trade_no);
	else
		*error = pn_error_text(edata);
	res->outcome = PN_FAILED;
	res->log_status = "failed";
	res->note = NULL;
	if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
	{
		/* the order's row (or another lock) held by someone else: retried */
		ereport(LOG,
				(errmsg("paynotify: channel \"%s\" notification \"%s\" waited longer than paynotify.lock_timeout for a lock",
						ch->name, n->notify_id),
				 errdetail("%s", *error)));
		FreeErrorData(edata);
		return PN_STEP_BUSY;
	}
	FreeErrorData(edata);
	if (quiet)
		return PN_STEP_CONFLICT;
	pn_step_warn(ch, n, *error);
	return PN_STEP_FAILED;
}
