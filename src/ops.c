/*-------------------------------------------------------------------------
 *
 * ops.c
 *	  Operations (version 1.1): paynotify_retry, which runs a stored failed
 *	  or parked notification through the business step again as a
 *	  redelivery would.  (The histories it and the pipeline write are in
 *	  history.c.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "paynotify.h"
#include "pipeline.h"

PG_FUNCTION_INFO_V1(paynotify_retry);

/* ---------------------------------------------------------------------
 * paynotify_retry
 * ---------------------------------------------------------------------
 */

/* Raised at the end of a dry run to roll it back; never reaches a client. */
#define ERRCODE_PN_DRY_RUN MAKE_SQLSTATE('P','N','D','R','Y')

typedef struct RetryCall
{
	PnConfig   *cfg;
	const PnChannel *ch;
	PnNotice   *n;
	Jsonb	   *notice;
	MemoryContext result_cxt;
	bool		dry_run;
	/* results, in result_cxt */
	char	   *outcome;
	char	   *status;
	char	   *error;
} RetryCall;

/* The business step, as a redelivery of a failed notification runs it. */
static void
retry_step(void *arg)
{
	RetryCall  *c = (RetryCall *) arg;
	PnApplied	res;
	char	   *error = NULL;
	MemoryContext old;

	(void) pn_apply_step(c->cfg, c->ch, c->n, PN_STEP_LOG_NONE, &res, &error);
	pn_log_update(c->cfg, c->ch->name, c->n->notify_id, pn_order_key(c->n), c->notice, &res,
				  error, false, NULL);
	old = MemoryContextSwitchTo(c->result_cxt);
	c->outcome = pstrdup(pn_outcome_name(res.outcome));
	c->status = pstrdup(res.log_status);
	c->error = error ? pstrdup(error) : NULL;
	MemoryContextSwitchTo(old);
	if (c->dry_run)
		ereport(ERROR,
				(errcode(ERRCODE_PN_DRY_RUN),
				 errmsg("paynotify_retry dry run")));
}

/*
 * paynotify_retry(channel text, notify_id text, dry_run boolean,
 *   OUT channel, OUT notify_id, OUT status_before, OUT outcome, OUT status,
 *   OUT error)
 *
 * SECURITY DEFINER like paynotify_handle: paynotify's tables as the
 * extension's owner, the orders table as its owner, hooks as the roles
 * that registered them, through the same pipeline functions.
 */
static Datum retry_body(PG_FUNCTION_ARGS);

Datum
paynotify_retry(PG_FUNCTION_ARGS)
{
	return pn_entry(fcinfo, "paynotify_retry", "Retry from a transaction of its own, after the delivery's.",
					retry_body, false);
}

static Datum
retry_body(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	char	   *channel;
	char	   *notify_id;
	RetryCall	c;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	char	   *status_before;
	char	   *order_key;
	bool		isnull;
	Datum		d;
	const char *fault;

	pn_require_read_committed("paynotify_retry");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("channel, notify_id and dry_run must not be null")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	channel = text_to_cstring(PG_GETARG_TEXT_PP(0));
	notify_id = text_to_cstring(PG_GETARG_TEXT_PP(1));
	memset(&c, 0, sizeof(c));
	c.dry_run = PG_GETARG_BOOL(2);
	c.result_cxt = CurrentMemoryContext;
	c.cfg = pn_config(fcinfo->flinfo->fn_oid);
	c.ch = pn_channel_find(c.cfg, channel);
	if (c.ch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("channel \"%s\" does not exist", channel)));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	/* the notification's lock first, then its row as the last holder left it */
	if (pn_lock_notification(channel, notify_id) == PN_LOCK_BUSY)
		c.outcome = "busy";
	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(notify_id);
	if (SPI_execute_with_args(psprintf("SELECT status, notice, payload FROM %s.payment_notify_log"
									   " WHERE channel = $1 AND notify_id = $2",
									   c.cfg->schema),
							  2, argtypes, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "notification log lookup failed");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("notification \"%s\" of channel \"%s\" is not in the log",
						notify_id, channel)));
	status_before = MemoryContextStrdup(c.result_cxt,
										SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (c.outcome == NULL)
	{
		if (strcmp(status_before, "failed") != 0 && strcmp(status_before, "parked") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("notification \"%s\" of channel \"%s\" is %s: only failed or parked notifications are retried",
							notify_id, channel, status_before)));
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("notification \"%s\" of channel \"%s\" has no stored notice",
							notify_id, channel),
					 errdetail("It failed under a paynotify library older than 1.1, which kept no notice of failed notifications."),
					 errhint("Its next delivery by the gateway applies it; or resend it from the gateway's merchant console.")));
		c.notice = DatumGetJsonbPCopy(d);
		if ((fault = pn_notice_fault(c.notice)) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("notification \"%s\" of channel \"%s\" has a malformed stored notice",
							notify_id, channel),
					 errdetail("The notice in payment_notify_log was changed: %s.", fault),
					 errhint("Its next delivery by the gateway applies it; or resend it from the gateway's merchant console.")));
		c.n = pn_notice_from_jsonb(c.notice, notify_id);
		/* the verified payload, which a notification event carries */
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		if (!isnull)
			c.n->payload = DatumGetJsonbPCopy(d);
		if (c.dry_run)
		{
			ErrorData  *edata = pn_subxact_run(retry_step, &c);

			if (edata == NULL || edata->sqlerrcode != ERRCODE_PN_DRY_RUN)
			{
				if (edata != NULL)
					ReThrowError(edata);
				elog(ERROR, "paynotify_retry dry run was not rolled back");
			}
			FreeErrorData(edata);
		}
		else
		{
			/*
			 * Durable as a delivery's: the gateway's next delivery of it is
			 * acknowledged as a duplicate of what this commits.
			 */
			pn_force_synchronous_commit();
			retry_step(&c);
		}
	}
	/* the notice lives in SPI's memory, which SPI_finish frees */
	order_key = c.n != NULL ? MemoryContextStrdup(c.result_cxt, pn_order_key(c.n)) : NULL;
	SPI_finish();
	if (!c.dry_run && order_key != NULL)
		pn_shard_commit_level(c.cfg, channel, notify_id, order_key, NULL);

	values[0] = CStringGetTextDatum(channel);
	values[1] = CStringGetTextDatum(notify_id);
	values[2] = CStringGetTextDatum(status_before);
	values[3] = CStringGetTextDatum(c.outcome);
	if (c.status)
		values[4] = CStringGetTextDatum(c.status);
	else
		values[4] = CStringGetTextDatum(status_before);
	if (c.error)
		values[5] = CStringGetTextDatum(c.error);
	else
		nulls[5] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
