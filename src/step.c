/*-------------------------------------------------------------------------
 *
 * step.c
 *	  The business step as a delivery runs it: pn_apply (apply.c) in an
 *	  internal subtransaction, and the log row that records how it went.
 *
 * A first delivery writes its log row inside the step (INSERT ... ON
 * CONFLICT DO NOTHING), a failed one run again updates it there (UPDATE
 * ... WHERE status = 'failed'): either finds the row taken when another
 * delivery wrote it first (on Citus, one that took the notification's lock
 * on another node), and then rolls the whole step back.  A step that
 * raised is rolled back and its log row written after it, by the caller.
 * paynotify_handle (handle.c) and paynotify_retry (ops.c) run the step
 * through here; SPI is connected and the notification's lock held.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/guc.h"

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

/* The step itself, inside the subtransaction: apply, then write the log row. */
static void
apply_call(void *arg)
{
	ApplyCall  *c = (ApplyCall *) arg;
	int			nestlevel = NewGUCNestLevel();
	PnNotice	copy;
	const PnNotice *n = c->n;

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
	AtEOXact_GUC(true, nestlevel);
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
	ErrorData  *edata = pn_subxact_run(apply_call, &call);

	if (edata == NULL)
		return PN_STEP_OK;
	if (edata->sqlerrcode == ERRCODE_PN_TAKEN)
	{
		FreeErrorData(edata);
		return PN_STEP_TAKEN;
	}
	*error = pnstrdup(edata->message ? edata->message : "error", MAX_ERROR_TEXT);
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
	ereport(WARNING,
			(errmsg("paynotify: business step failed for notification \"%s\" on channel \"%s\"",
					n->notify_id, ch->name),
			 errdetail("%s", *error)));
	FreeErrorData(edata);
	return PN_STEP_FAILED;
}
