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
 * from what the first committed (taken_delivery).  (On one server that
 * insert is plain: its unique violation fails the step, and the insert of
 * the failed row after it finds the row taken: the same answer.)
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
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"

#include "paynotify.h"
#include "pipeline.h"
#include "history.h"

PG_FUNCTION_INFO_V1(paynotify_handle);
PG_FUNCTION_INFO_V1(paynotify_step_at);

static PnOutcome dedup_and_apply(PnConfig *cfg, const PnChannel *ch, PnNotice *n);
static PnOutcome first_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
static PnOutcome repeat_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
								 const PnLogRow *ex);
static PnOutcome taken_delivery(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
static void log_seen(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *order_no);
static bool delegable(PnConfig *cfg, const PnNotice *n);
static bool delegate(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, Jsonb *headers,
					 PnOutcome *outcome);

const char *pn_step_order = NULL;

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
static Datum handle_body(PG_FUNCTION_ARGS);

Datum
paynotify_handle(PG_FUNCTION_ARGS)
{
	return pn_entry(fcinfo, "paynotify_handle",
					"Hand the work to the outbox (paynotify_outbox_claim) instead.", handle_body, false);
}

static Datum
handle_body(PG_FUNCTION_ARGS)
{
	PnConfig   *cfg;
	const PnChannel *ch = NULL;
	PnRequest	req;
	PnNotice	notice;
	PnReason	reason;
	PnOutcome	outcome;
	bytea	   *body;

	pn_require_read_committed("paynotify_handle");
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
	/* the log's key holds it: no gateway issues one this long */
	if (strlen(notice.notify_id) > PN_MAX_ID_LEN)
	{
		ereport(LOG,
				(errmsg("paynotify: channel \"%s\" refused a notification whose id is %zu bytes long, more than %d",
						ch->name, strlen(notice.notify_id), PN_MAX_ID_LEN)));
		return pn_reply_row(fcinfo, ch->gw, PN_MALFORMED, PN_R_MALFORMED);
	}

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
	pn_notice_bound(notice);
	if (delegable(cfg, notice) && delegate(cfg, ch, notice, headers, &outcome))
	{
		pn_relaxed_call_ended(call_start);
		return outcome;
	}
	outcome = dedup_and_apply(cfg, ch, notice);
	pn_delivery_record(cfg, ch, notice, outcome, headers);
	pn_shard_commit_level(cfg, ch->name, notice->notify_id, pn_order_key(notice), other_order);
	pn_relaxed_call_ended(call_start);
	return outcome;
}

/*
 * On Citus, whether the notice's business step can run on its order's node
 * as one delegated call (paynotify_step_at): everything it writes is under
 * its one order (not a combine payment, whose log row is under the combine
 * number; not a dispute or another event keyed by a trade, whose records
 * go under the order the trade paid; not a charge of an agreement, which
 * reads the agreements, a reference table), no hook is registered (a hook's
 * function may write tables of another co-location group, which Citus
 * refuses inside the call: hooks keep today's path), and the schema has
 * the function (1.4); not an anomaly, which the notice sent there does not
 * carry.  The caller then takes only the notification's lock
 * and the read of the other orders' rows here (delegate).
 */
static bool
delegable(PnConfig *cfg, const PnNotice *n)
{
	return cfg->schema_14 && cfg->nhooks == 0 && pn_config_distributed(cfg) &&
		n->anomaly == NULL && n->order_no != NULL && n->order_no[0] != '\0' && n->agreement_id == NULL &&
		(n->action == PN_ACT_PAY || n->action == PN_ACT_REFUND ||
		 n->action == PN_ACT_REFUND_FAILED || n->action == PN_ACT_CLOSE ||
		 n->action == PN_ACT_NONE);
}

/*
 * The request's headers as the order's node needs them: only the client
 * its delivery is recorded under (pn_delivery_record), as it is recorded,
 * so that nothing else the request carried (a proxy's cookies or tokens)
 * is written into the statement sent there, where its activity and its
 * log would show it.  NULL without a client.
 */
static Jsonb *
client_headers_jsonb(Jsonb *headers)
{
	char	   *client = pn_client_header(headers);
	StringInfoData j;

	if (client == NULL)
		return NULL;
	initStringInfo(&j);
	appendStringInfoChar(&j, '{');
	escape_json(&j, PN_CLIENT_HEADER);
	appendStringInfoString(&j, ": ");
	escape_json(&j, client);
	appendStringInfoChar(&j, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(j.data)));
}

/*
 * Run the business step on the order's node: first the notification's
 * lock on this node, then the two reads of every shard as one (the id under another order, the trade recorded for
 * another order); a row there keeps the notification on today's path
 * (false: the caller goes on with dedup_and_apply, which reads them again
 * and answers as always).  Else one call, SELECT outcome, error FROM
 * paynotify_step_at($1, ...), every argument a parameter that SPI gives
 * the planner as a constant: Citus sends
 * it to the node that holds the order's shard (force_delegation), which
 * takes the notification's lock, deduplicates, applies, records the
 * delivery and sets the commit level in its transaction; it returns the
 * outcome and, for an error it caught outside the business step, its
 * message: then its writes there are rolled back, and false sends the
 * caller on today's path, in its own transaction.  Only where paynotify is
 * distributed (delegable): one server runs the same code in process, with
 * no call.
 */
static bool
delegate(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, Jsonb *headers,
		 PnOutcome *outcome)
{
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	StringInfoData q;
	const char *name;
	char	   *error;
	MemoryContext outer_cxt;
	MemoryContext mcxt;
	char	   *outer_other;
	Oid			ctypes[9] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, JSONBOID, INT4OID, TEXTOID, TEXTOID};
	Datum		cargs[9];
	char		cnulls[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Jsonb	   *notice;
	Jsonb	   *client;
	const char *history;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");

	/*
	 * The notification's lock here first, held to the end of the
	 * transaction, as on today's path: two deliveries of one id reaching
	 * this node are taken one after the other, and the second's read below
	 * (a snapshot taken after the lock) sees the first's log row under its
	 * order, whichever order each names.  The step takes the lock again on
	 * the order's node (the same lock when that is this node) without
	 * waiting (pn_notification_lock_nowait; its other lock waits, the
	 * order's row, keep paynotify.lock_timeout): a delivery from another
	 * node holding it there is answered busy.  The waiting is done here only.  A wait there, while
	 * this node's lock is held, could close a circle: one id signed for two
	 * orders, each delivered at once to the other order's node, each
	 * holding its own node's lock and waiting for the other's (Citus
	 * cancels one as a distributed deadlock: an error, not busy).
	 */
	if (pn_lock_notification(ch->name, n->notify_id) == PN_LOCK_BUSY)
	{
		SPI_finish();
		ereport(LOG,
				(errmsg("paynotify: channel \"%s\" notification \"%s\" is busy in another delivery",
						ch->name, n->notify_id)));
		*outcome = PN_BUSY;
		return true;
	}
	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->notify_id);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = n->trade_no ? CStringGetTextDatum(n->trade_no) : (Datum) 0;
	nulls[3] = n->trade_no ? ' ' : 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_CROSS_SHARD), args, nulls, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: cross-shard read failed");
	if (SPI_processed > 0)
	{
		SPI_finish();
		return false;
	}
	pn_force_synchronous_commit();
	initStringInfo(&q);
	/*
	 * Every argument a parameter of its exact type: a function of the same
	 * name planted in the extension's schema (public, where others may
	 * create) is never the better match, and the statement's text, which
	 * SPI gives as the context of every message raised while it runs
	 * (a warning relayed from the order's node, an error), holds nothing of
	 * the notice or its payload.  Citus plans the call with the values as
	 * constants (SPI passes them as such) and sends it to the order's node
	 * with them written in.
	 */
	appendStringInfo(&q, "SELECT outcome, error FROM %s.paynotify_step_at($1, $2, $3, $4, $5, $6, $7, $8, $9)",
					 cfg->schema);
	cargs[0] = CStringGetTextDatum(n->order_no);
	cargs[1] = CStringGetTextDatum(ch->name);
	cargs[2] = CStringGetTextDatum(n->notify_id);
	notice = pn_notice_to_jsonb(n);
	cargs[3] = notice ? JsonbPGetDatum(notice) : (Datum) 0;
	cnulls[3] = notice ? ' ' : 'n';
	cargs[4] = n->payload ? JsonbPGetDatum(n->payload) : (Datum) 0;
	cnulls[4] = n->payload ? ' ' : 'n';
	client = client_headers_jsonb(headers);
	cargs[5] = client ? JsonbPGetDatum(client) : (Datum) 0;
	cnulls[5] = client ? ' ' : 'n';
	cargs[6] = Int32GetDatum(paynotify_lock_timeout);
	cargs[7] = CStringGetTextDatum(GetConfigOption("synchronous_commit", false, false));
	history = GetConfigOption("paynotify.delivery_history", true, false);
	cargs[8] = history ? CStringGetTextDatum(history) : (Datum) 0;
	cnulls[8] = history ? ' ' : 'n';
	/*
	 * Where the order's shard is on this node, Citus runs the call in this
	 * backend: its paynotify_step_at is let through by pn_entry, and sets
	 * this call's memory context and other order for itself (its executor's
	 * memory is gone after the call).  Both are this call's again after it.
	 */
	outer_cxt = call_cxt;
	outer_other = other_order;
	pn_delegating = true;
	mcxt = CurrentMemoryContext;
	PG_TRY();
	{
		if (SPI_execute_with_args(q.data, 9, ctypes, cargs, cnulls, false, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "paynotify: the delegated business step returned no row");
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		pn_delegating = false;
		call_cxt = outer_cxt;
		other_order = outer_other;
		/*
		 * An error the call did not catch (a cancel, a timeout) is passed on
		 * with a context of its own: none of the layers below it (the
		 * order's node's, Citus's) is to show the session that made the
		 * delivery (the shim's role) anything of the notice or its payload.
		 */
		MemoryContextSwitchTo(mcxt);
		edata = CopyErrorData();
		FlushErrorState();
		edata->context = pstrdup("paynotify's business step, delegated to the node of the order");
		edata->internalquery = NULL;
		edata->internalpos = 0;
		ReThrowError(edata);
	}
	PG_END_TRY();
	pn_delegating = false;
	call_cxt = outer_cxt;
	other_order = outer_other;
	name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	error = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	*outcome = PN_FAILED;
	for (int o = PN_PROCESSED; o <= PN_MALFORMED; o++)
		if (name != NULL && strcmp(name, pn_outcome_name((PnOutcome) o)) == 0)
			*outcome = (PnOutcome) o;
	if (error != NULL)
	{
		/*
		 * An error the call caught there: its subtransaction there is rolled
		 * back, nothing of it is left.  Today's path runs the step instead,
		 * in this transaction (this node's lock still held), and answers.
		 */
		ereport(WARNING,
				(errmsg("paynotify: business step failed on the node of order \"%s\" for notification \"%s\" on channel \"%s\"",
						n->order_no, n->notify_id, ch->name),
				 errdetail("%s", pn_clip_error(error)),
				 errhint("The step runs again on the routed path.")));
		SPI_finish();
		return false;
	}
	/* where Citus propagates SET LOCAL: the level set there again at commit */
	if (*outcome != PN_BUSY)
		pn_shard_commit_level_kept(cfg, ch->name, n->notify_id, n->order_no);
	SPI_finish();
	return true;
}

typedef struct StepAt
{
	Oid			fn_oid;
	PnConfig   *cfg;
	const char *order_no;
	const char *channel;
	const char *notify_id;
	Jsonb	   *notice;
	Jsonb	   *payload;
	Jsonb	   *headers;
	PnOutcome	outcome;
} StepAt;

/* paynotify_step_at's work, in its subtransaction */
static void
step_at_run(void *arg)
{
	StepAt	   *sa = (StepAt *) arg;
	const PnChannel *ch;
	PnNotice   *n;

	/* here, where an error (this node's configuration unreadable) is caught */
	sa->cfg = pn_config(sa->fn_oid);
	ch = pn_channel_find(sa->cfg, sa->channel);
	if (ch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("paynotify: no channel \"%s\" on this node", sa->channel)));
	n = pn_notice_from_jsonb(sa->notice, sa->notify_id);
	n->payload = sa->payload;
	if (n->order_no == NULL || strcmp(n->order_no, sa->order_no) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("paynotify: the notice is not of order \"%s\"", sa->order_no)));
	call_cxt = CurrentMemoryContext;
	other_order = NULL;
	pn_step_order = sa->order_no;
	pn_notification_lock_nowait = true;
	PG_TRY();
	{
		sa->outcome = dedup_and_apply(sa->cfg, ch, n);
		pn_delivery_record(sa->cfg, ch, n, sa->outcome, sa->headers);
	}
	PG_FINALLY();
	{
		pn_step_order = NULL;
		pn_notification_lock_nowait = false;
	}
	PG_END_TRY();
}

/*
 * paynotify_step_at(order_no text, channel text, notify_id text, notice
 *   jsonb, payload jsonb, headers jsonb, lock_timeout_ms integer,
 *   commit_level text, delivery_history text,
 *   OUT outcome text, OUT error text)
 *
 * (headers: the request's X-Paynotify-Client alone, or NULL.)
 *
 * The business step of an authentic notice, on the node that holds its
 * order's shard (distributed by order_no with force_delegation): the
 * notice rebuilt from jsonb as a retry rebuilds a parked one, the
 * notification's lock tried here (the caller waited for it on its node),
 * other lock waits (the order's row) bounded by the caller's
 * paynotify.lock_timeout, the log row read under the order, the step in its subtransaction, the
 * delivery recorded, and the caller's synchronous_commit set in this
 * transaction (the caller's settings do not reach this node).  An error
 * inside the business step is the step's (outcome "failed", error NULL,
 * the log row failed); any other error of the step's run here, the
 * delivery's record and this node's configuration included, is caught with
 * everything the run wrote and returned as outcome "failed" with its
 * message, and the caller runs the step on today's path instead.  Errors
 * before that run (the arguments) and a cancel are not caught: they end
 * the caller's transaction.  It trusts its notice: EXECUTE is revoked from
 * PUBLIC and granted to nobody; only paynotify_handle and paynotify_query_apply (as paynotify's
 * owner) call it.
 */
static Datum step_at_body(PG_FUNCTION_ARGS);

Datum
paynotify_step_at(PG_FUNCTION_ARGS)
{
	return pn_entry(fcinfo, "paynotify_step_at", NULL, step_at_body, true);
}

static Datum
step_at_body(PG_FUNCTION_ARGS)
{
	StepAt		sa;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, true};
	ErrorData  *edata;
	int			nestlevel;
	char		buf[32];

	for (int i = 0; i <= 6; i++)
		if (PG_ARGISNULL(i) && i != 5)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("paynotify_step_at: argument %d is null", i + 1)));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "paynotify: return type must be a row type");
	desc = BlessTupleDesc(desc);
	pn_require_read_committed("paynotify_step_at");
	memset(&sa, 0, sizeof(sa));
	sa.fn_oid = fcinfo->flinfo->fn_oid;
	sa.order_no = text_to_cstring(PG_GETARG_TEXT_PP(0));
	sa.channel = text_to_cstring(PG_GETARG_TEXT_PP(1));
	sa.notify_id = text_to_cstring(PG_GETARG_TEXT_PP(2));
	sa.notice = PG_GETARG_JSONB_P(3);
	sa.payload = PG_GETARG_JSONB_P(4);
	sa.headers = PG_ARGISNULL(5) ? NULL : PG_GETARG_JSONB_P(5);
	sa.outcome = PN_FAILED;

	/* the caller's settings, for this call */
	nestlevel = NewGUCNestLevel();
	snprintf(buf, sizeof(buf), "%d", Max(PG_GETARG_INT32(6), 0));
	(void) set_config_option("paynotify.lock_timeout", buf, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (!PG_ARGISNULL(8))
		(void) set_config_option("paynotify.delivery_history", text_to_cstring(PG_GETARG_TEXT_PP(8)),
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	edata = pn_subxact_run(step_at_run, &sa);
	AtEOXact_GUC(true, nestlevel);
	if (edata != NULL)
	{
		char	   *message = pn_error_text(edata);

		sa.outcome = PN_FAILED;
		values[1] = CStringGetTextDatum(message);
		nulls[1] = false;
		ereport(WARNING,
				(errmsg("paynotify: delegated business step failed for notification \"%s\" on channel \"%s\"",
						sa.notify_id, sa.channel),
				 errdetail("%s", message)));
		FreeErrorData(edata);
	}
	/* the commit level of the caller's transaction, in this one */
	if (!PG_ARGISNULL(7) && sa.outcome != PN_BUSY)
		(void) set_config_option("synchronous_commit", text_to_cstring(PG_GETARG_TEXT_PP(7)),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	values[0] = CStringGetTextDatum(pn_outcome_name(sa.outcome));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
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
	PnStepResult step;

	/*
	 * Never inside a step (pn_entry refuses every way in there): the failed
	 * row's insert below must take its ON CONFLICT form.
	 */
	Assert(!pn_in_step);
	step = pn_apply_step(cfg, ch, n, PN_STEP_LOG_INSERT, &res, &error);
	if (step == PN_STEP_BUSY)
		return PN_BUSY;			/* nothing written: the gateway retries */
	if (step == PN_STEP_TAKEN ||
		((step == PN_STEP_FAILED || step == PN_STEP_CONFLICT) &&
		 !pn_step_log(cfg, ch, n, &res, error, PN_STEP_LOG_INSERT)))
		return taken_delivery(cfg, ch, n);
	/* the key its log insert found was not the log row's: a failure */
	if (step == PN_STEP_CONFLICT)
		pn_step_warn(ch, n, error);
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
		case PN_STEP_CONFLICT:
			/* (a retry's log write is an UPDATE: never one of these) */
			pn_step_warn(ch, n, error);
			/* FALLTHROUGH */
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
