/*-------------------------------------------------------------------------
 *
 * handle.c
 *	  paynotify_handle: the four layers in one transaction, and the reply.
 *
 *	  1 authenticate  the channel's gateway module (verify_*.c)
 *	  2 lock          pn_lock_notification (lock.c)
 *	  3 dedup         payment_notify_log (log.c)
 *	  4 apply         pn_apply_step (step.c): pn_apply (apply.c) in a
 *	                  subtransaction, with the log row
 *
 * Success is answered only for what is committed with this transaction or
 * was committed before it: the lock makes a second delivery wait for the
 * first, and its next statement (READ COMMITTED) sees what the first
 * committed.  A failure of the business step is recorded on the log row and
 * answered with a retryable failure; the transaction still commits.
 *
 * The lock holds on one server.  On Citus, where paynotify_handle runs on
 * any node, two deliveries of one notification on two nodes both take their
 * own node's lock; what orders them is the log row's unique key on the one
 * node that holds the order's shard: the log row is written inside the
 * business step's subtransaction (INSERT ... ON CONFLICT DO NOTHING, or an
 * UPDATE of a row still "failed"), so the second waits there for the first
 * to end, finds the row taken, rolls its business step back and answers
 * from what the first committed (taken_delivery).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "paynotify.h"
#include "pipeline.h"
#include "history.h"

PG_FUNCTION_INFO_V1(paynotify_handle);

static PnOutcome dedup_and_apply(PnConfig *cfg, const PnChannel *ch, PnNotice *n);
static PnOutcome first_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
static PnOutcome repeat_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
								 const PnLogRow *ex);
static PnOutcome taken_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
static void log_seen(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *order_no);

/*
 * The call's memory context, and the order of a log row this call wrote
 * under another order than its notice's (the counter of a known id signed
 * with another order; see pn_shard_commit_level), or NULL.  Set at each call's
 * start.
 */
static MemoryContext call_cxt;
static char *other_order;
/* Unix seconds: paynotify.now when set, else the system clock. */
int64
pn_now(void)
{
	if (paynotify_now > 0)
		return (int64) paynotify_now;
	return (int64) time(NULL);
}

/*
 * paynotify_handle(channel text, headers jsonb, body bytea,
 *   OUT status int, OUT content_type text, OUT body text, OUT outcome text)
 */
Datum
paynotify_handle(PG_FUNCTION_ARGS)
{
	PnConfig   *cfg;
	const PnChannel *ch = NULL;
	PnRequest	req;
	PnNotice	notice;
	PnReason	reason;
	PnOutcome	outcome;
	bytea	   *body;

	pn_require_read_committed("paynotify_handle");
	/*
	 * Not from code paynotify runs inside a business step (a hook, a
	 * trigger of the orders table): a notification applied inside another's
	 * step would write the log row that step is about to write (a raw
	 * unique violation, retried forever) or move its order under it.
	 */
	if (pn_running_as())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("paynotify_handle cannot be called from a paynotify hook or a trigger of the orders table"),
				 errhint("Hand the work to the outbox (paynotify_outbox_claim) instead.")));
	cfg = pn_config(fcinfo->flinfo->fn_oid);
	if (!PG_ARGISNULL(0))
		ch = pn_channel_find(cfg, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	if (ch == NULL)
		return pn_reply_row(fcinfo, NULL, PN_REJECTED, PN_R_NO_CHANNEL);
	if (PG_ARGISNULL(2))
		return pn_reply_row(fcinfo, ch->gw, PN_MALFORMED, PN_R_MALFORMED);

	body = PG_GETARG_BYTEA_PP(2);
	if (VARSIZE_ANY_EXHDR(body) > (Size) paynotify_max_body)
		return pn_reply_row(fcinfo, ch->gw, PN_MALFORMED, PN_R_TOO_LARGE);

	memset(&req, 0, sizeof(req));
	memset(&notice, 0, sizeof(notice));
	notice.order_amount = notice.refund_amount = notice.refunded_total = -1;
	notice.dispute_amount = -1;
	req.channel = ch;
	req.headers = PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1);
	req.body = VARDATA_ANY(body);
	req.body_len = VARSIZE_ANY_EXHDR(body);
	req.now = pn_now();

	/* Layer 1 */
	reason = ch->gw->authenticate(&req, &notice);
	if (reason != PN_OK)
	{
		ereport(DEBUG1,
				(errmsg("paynotify: channel \"%s\" refused a notification: %s",
						ch->name, pn_reason_message(reason))));
		return pn_reply_row(fcinfo, ch->gw,
						 (reason == PN_R_MALFORMED || reason == PN_R_TOO_LARGE)
						 ? PN_MALFORMED : PN_REJECTED, reason);
	}
	if (notice.notify_id == NULL || notice.notify_id[0] == '\0')
		return pn_reply_row(fcinfo, ch->gw, PN_MALFORMED, PN_R_MALFORMED);

	/* the prefix of the notices queries make (query.c): never a gateway's */
	if (pn_notice_from_query(&notice))
		return pn_reply_row(fcinfo, ch->gw, PN_MALFORMED, PN_R_MALFORMED);

	outcome = pn_handle_notice(cfg, ch, &notice, req.headers);
	return pn_reply_row(fcinfo, ch->gw, outcome, PN_OK);
}

/*
 * Layers 2 to 4 for an authentic notice, and the delivery's history: what
 * paynotify_handle does after authentication, and paynotify_query_apply
 * (query.c) after verifying a gateway's answer.  The notice is applied by
 * the same rules whichever way it came.
 */
PnOutcome
pn_handle_notice(PnConfig *cfg, const PnChannel *ch, PnNotice *notice, Jsonb *headers)
{
	XLogRecPtr	call_start = XactLastRecEnd;
	PnOutcome	outcome;

	call_cxt = CurrentMemoryContext;
	other_order = NULL;
	outcome = dedup_and_apply(cfg, ch, notice);
	pn_delivery_record(cfg, ch, notice, outcome, headers);
	pn_shard_commit_level(cfg, ch->name, notice->notify_id, pn_order_key(notice), other_order);
	pn_relaxed_call_ended(call_start);
	return outcome;
}

/*
 * Layers 2 to 4.  A notification already settled (any status but failed)
 * is answered from its committed log row without waiting for the lock:
 * nothing can change that answer.  Everything else holds the lock while it
 * reads the log row, which then shows whatever the previous holder
 * committed.
 *
 * When nobody holds the lock (the common case) it is taken first and the
 * row read once: a settled row gives the lock back at once, anything else
 * goes on holding it.  When another delivery holds it, the row is read
 * first (a settled one is answered without waiting), then the lock is
 * waited for and the row read again.
 */
static PnOutcome
dedup_and_apply(PnConfig *cfg, const PnChannel *ch, PnNotice *n)
{
	PnLogRow	ex;
	PnOutcome	outcome;
	PnLockResult lock;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (pn_try_lock_notification(ch->name, n->notify_id))
	{
		/*
		 * This statement's snapshot is taken after the lock was granted: it
		 * sees everything an earlier holder committed.  It is the look after
		 * the lock, so it also finds the id under another order (on Citus
		 * it reads every shard of the log).
		 */
		pn_log_get_any(cfg, ch->name, n, &ex);
		if (ex.found && ex.same_payload && strcmp(ex.status, "failed") != 0)
		{
			pn_unlock_notification(ch->name, n->notify_id);
			pn_relax_synchronous_commit();
		}
		else
			pn_force_synchronous_commit();
		outcome = ex.found ? repeat_delivery(cfg, ch, n, &ex) : first_delivery(cfg, ch, n);
		SPI_finish();
		return outcome;
	}

	pn_log_get(cfg, ch->name, n, &ex);
	if (ex.found && ex.same_payload && strcmp(ex.status, "failed") != 0)
	{
		pn_relax_synchronous_commit();
		outcome = repeat_delivery(cfg, ch, n, &ex);
		SPI_finish();
		return outcome;
	}

	pn_force_synchronous_commit();
	lock = pn_lock_notification(ch->name, n->notify_id);
	if (lock == PN_LOCK_BUSY)
	{
		SPI_finish();
		ereport(LOG,
				(errmsg("paynotify: channel \"%s\" notification \"%s\" is busy in another delivery",
						ch->name, n->notify_id)));
		return PN_BUSY;
	}
	/*
	 * Read the row again now that the lock is held: a delivery that held it
	 * (or committed in the instant between the first read and the lock) has
	 * committed whatever it wrote, and this statement's fresh snapshot sees
	 * it.  Never skip this read: without it that instant's race ends in a
	 * unique-key error instead of an answer.  It also finds the id under
	 * another order (other content: never applied).
	 */
	pn_log_get_any(cfg, ch->name, n, &ex);
	if (!ex.found)
		outcome = first_delivery(cfg, ch, n);
	else
		outcome = repeat_delivery(cfg, ch, n, &ex);
	SPI_finish();
	return outcome;
}

/*
 * Apply, and write the log row with how it went: inside the step when it
 * succeeded, after it was rolled back when it failed.
 */
static PnOutcome
first_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	PnApplied	res;
	char	   *error = NULL;
	PnStepResult step = pn_apply_step(cfg, ch, n, PN_STEP_LOG_INSERT, &res, &error);

	if (step == PN_STEP_BUSY)
		return PN_BUSY;			/* nothing written: the gateway retries */
	if (step == PN_STEP_TAKEN ||
		(step == PN_STEP_FAILED && !pn_step_log(cfg, ch, n, &res, error, PN_STEP_LOG_INSERT)))
		return taken_delivery(cfg, ch, n);
	return res.outcome;
}

/*
 * Another delivery of this notification wrote its log row while this one
 * ran its business step (which is rolled back): possible only when the two
 * took the notification's lock on two different Citus nodes.  This one
 * waited for the other to end; answer from what it committed, as any
 * repeat is answered, without applying anything again.
 */
static PnOutcome
taken_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	PnLogRow	ex;

	ereport(DEBUG1,
			(errmsg("paynotify: notification \"%s\" on channel \"%s\" was recorded by a concurrent delivery",
					n->notify_id, ch->name)));
	pn_log_get_any(cfg, ch->name, n, &ex);
	if (!ex.found)
		return PN_BUSY;			/* gone again (purged): the gateway retries */
	if (ex.same_payload && strcmp(ex.status, "failed") == 0)
	{
		/* the other one failed: so does this one, without a second attempt */
		log_seen(cfg, ch, n, ex.order_no);
		return PN_FAILED;
	}
	return repeat_delivery(cfg, ch, n, &ex);
}

/* A notification seen before: answer from what was committed. */
static PnOutcome
repeat_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const PnLogRow *ex)
{
	PnApplied	res;
	char	   *error = NULL;

	if (!ex->same_payload)
	{
		/*
		 * Same id, other content, valid signature: never apply it.  If the
		 * first one is settled, its effect stands and this is acknowledged;
		 * if it failed, acknowledging would end the gateway's retries of it,
		 * so this is refused (retryable) until someone looks.
		 */
		pn_anomaly(cfg, ch->name, n, "payload_differs_for_same_id");
		log_seen(cfg, ch, n, ex->order_no);
		return strcmp(ex->status, "failed") == 0 ? PN_FAILED : PN_IGNORED;
	}
	if (strcmp(ex->status, "failed") != 0)
	{
		ereport(DEBUG1,
				(errmsg("paynotify: duplicate delivery of notification \"%s\" on channel \"%s\"",
						n->notify_id, ch->name)));
		log_seen(cfg, ch, n, ex->order_no);
		return strcmp(ex->status, "parked") == 0 ? PN_PARKED : PN_DUPLICATE;
	}

	/* It failed before: run the business step again. */
	switch (pn_apply_step(cfg, ch, n, PN_STEP_LOG_RETRY, &res, &error))
	{
		case PN_STEP_OK:
			break;
		case PN_STEP_BUSY:
			return PN_BUSY;		/* the failed row stays: retried */
		case PN_STEP_FAILED:
			if (pn_step_log(cfg, ch, n, &res, error, PN_STEP_LOG_RETRY))
				break;
			/* FALLTHROUGH */
		case PN_STEP_TAKEN:
			/* another delivery retried it meanwhile; ex is stale */
			return taken_delivery(cfg, ch, n);
	}
	return res.outcome;
}

/*
 * Count a delivery on the log row under order_no, and remember that order
 * when it is not the notice's: the row is then on another shard than the
 * rest of the call's writes.
 */
static void
log_seen(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *order_no)
{
	pn_log_seen(cfg, ch->name, n->notify_id, order_no);
	if (other_order == NULL && strcmp(order_no, pn_order_key(n)) != 0)
		other_order = MemoryContextStrdup(call_cxt, order_no);
}

/*
 * The reply row: the gateway's HTTP reply plus the outcome (of
 * paynotify_handle, and of paynotify_query_apply: one reply builder).  Its row type
 * (the function's OUT parameters, which no CREATE OR REPLACE can change) is
 * built from the catalog once per backend and function, not per call: each
 * execution of the calling statement gets a fresh FmgrInfo, so fn_extra
 * would not keep it.
 */
Datum
pn_reply_row(FunctionCallInfo fcinfo, const PnGateway *gw, PnOutcome outcome, PnReason reason)
{
	static Oid	desc_fn = InvalidOid;
	static TupleDesc desc = NULL;
	PnReply		reply;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (desc == NULL || desc_fn != fcinfo->flinfo->fn_oid)
	{
		TupleDesc	built;
		MemoryContext oldcxt;

		if (get_call_result_type(fcinfo, NULL, &built) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "paynotify: return type must be a row type");
		oldcxt = MemoryContextSwitchTo(TopMemoryContext);
		built = BlessTupleDesc(CreateTupleDescCopy(built));
		MemoryContextSwitchTo(oldcxt);
		if (desc != NULL)
			FreeTupleDesc(desc);
		desc = built;
		desc_fn = fcinfo->flinfo->fn_oid;
	}
	pn_gateway_reply(gw, outcome, reason, &reply);
	values[0] = Int32GetDatum(reply.status);
	values[1] = reply.content_type ? CStringGetTextDatum(reply.content_type) : (Datum) 0;
	values[2] = reply.body ? CStringGetTextDatum(reply.body) : (Datum) 0;
	values[3] = CStringGetTextDatum(pn_outcome_name(outcome));
	nulls[1] = (reply.content_type == NULL);
	nulls[2] = (reply.body == NULL);
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}
