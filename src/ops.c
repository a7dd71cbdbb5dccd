/*-------------------------------------------------------------------------
 *
 * ops.c
 *	  Operations (version 1.1): the history of orders' status changes, the
 *	  optional per-delivery history (paynotify.delivery_history), and
 *	  paynotify_retry, which runs a stored failed or parked notification
 *	  through the business step again as a redelivery would.
 *
 * Both histories are written only when their tables exist: a library of
 * version 1.1 may run against a database still at version 1.0 until
 * ALTER EXTENSION paynotify UPDATE, and must keep working there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "paynotify.h"
#include "pipeline.h"
#include "ops.h"

PG_FUNCTION_INFO_V1(paynotify_retry);

#define MAX_CLIENT_TEXT 200

/* paynotify.delivery_history */
enum
{
	DH_OFF,
	DH_FAILURES,
	DH_ALL
};

static const struct config_enum_entry delivery_history_options[] = {
	{"off", DH_OFF, false},
	{"failures", DH_FAILURES, false},
	{"all", DH_ALL, false},
	{NULL, 0, false}
};

static int	delivery_history = DH_OFF;

/* A move of paynotify's own is under way: the guard does not record it. */
static bool own_move = false;

/* The notification whose business step is running (for its moves). */
static char *cause_channel = NULL;
static char *cause_notify_id = NULL;

/* Saved plans, for the schema they were prepared in. */
static SPIPlanPtr history_plan = NULL;
static Oid	history_nsp = InvalidOid;
static SPIPlanPtr delivery_plan = NULL;
static Oid	delivery_nsp = InvalidOid;
static SPIPlanPtr delivery_plan_11 = NULL;	/* before 1.2: no order_no column */
static Oid	delivery_nsp_11 = InvalidOid;

static void ops_xact_callback(XactEvent event, void *arg);
static void ops_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								 SubTransactionId parentSubid, void *arg);
static SPIPlanPtr saved_plan(SPIPlanPtr *plan, Oid *plan_nsp, Oid nsp, const char *tmpl,
							 int nargs, Oid *argtypes);
static char *sha256_hex(Jsonb *payload);

void
pn_ops_init(void)
{
	DefineCustomEnumVariable("paynotify.delivery_history",
							 "Which deliveries paynotify_handle records in paynotify_delivery_history.",
							 "off: none; failures: those not acknowledged; all: every authenticated delivery.",
							 &delivery_history,
							 DH_OFF,
							 delivery_history_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	RegisterXactCallback(ops_xact_callback, NULL);
	RegisterSubXactCallback(ops_subxact_callback, NULL);
}

/* An error inside a move must not leave the flag set for later statements. */
static void
ops_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		own_move = false;
}

static void
ops_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		own_move = false;
}

void
pn_history_own_move(bool on)
{
	own_move = on;
}

/* The notification the following moves are made for (NULLs: none). */
void
pn_history_cause(const char *channel, const char *notify_id)
{
	if (cause_channel)
		pfree(cause_channel);
	if (cause_notify_id)
		pfree(cause_notify_id);
	cause_channel = channel ? MemoryContextStrdup(TopMemoryContext, channel) : NULL;
	cause_notify_id = notify_id ? MemoryContextStrdup(TopMemoryContext, notify_id) : NULL;
}

/* A plan of tmpl (%s: the schema) kept across calls; prepared again for another schema. */
static SPIPlanPtr
saved_plan(SPIPlanPtr *plan, Oid *plan_nsp, Oid nsp, const char *tmpl, int nargs, Oid *argtypes)
{
	SPIPlanPtr	p;

	if (*plan != NULL && *plan_nsp == nsp)
		return *plan;
	if (*plan != NULL)
	{
		SPI_freeplan(*plan);
		*plan = NULL;
	}
	p = SPI_prepare(psprintf(tmpl, quote_identifier(get_namespace_name(nsp))),
					  nargs, argtypes);
	if (p == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(p);
	*plan = p;
	*plan_nsp = nsp;
	return p;
}

/* Insert one history row; SPI connected, as a role that may write it. */
static void
history_insert(Oid nsp, const char *order_no, const char *from, const char *to,
			   const char *source, const char *channel, const char *notify_id)
{
	Oid			argtypes[6] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	SPIPlanPtr	plan;

	plan = saved_plan(&history_plan, &history_nsp, nsp,
					  "INSERT INTO %s.paynotify_order_history"
					  " (order_no, from_state, to_state, source, channel, notify_id)"
					  " VALUES ($1, $2, $3, $4, $5, $6)",
					  6, argtypes);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(from);
	args[2] = CStringGetTextDatum(to);
	args[3] = CStringGetTextDatum(source);
	args[4] = channel ? CStringGetTextDatum(channel) : (Datum) 0;
	args[5] = notify_id ? CStringGetTextDatum(notify_id) : (Datum) 0;
	nulls[4] = channel ? ' ' : 'n';
	nulls[5] = notify_id ? ' ' : 'n';
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "order history insert failed");
}

/*
 * paynotify moved an order (states are paynotify's names).  SPI connected,
 * as the extension's owner.
 */
void
pn_history_move(PnConfig *cfg, const char *order_no, const char *from, const char *to)
{
	if (!OidIsValid(get_relname_relid("paynotify_order_history", cfg->nsp)))
		return;
	history_insert(cfg->nsp, order_no, from, to, "paynotify", cause_channel, cause_notify_id);
}

typedef struct GuardRecord
{
	Oid			nsp;
	const char *order_no;
	const char *from;
	const char *to;
} GuardRecord;

static void
guard_record(void *arg)
{
	GuardRecord *g = (GuardRecord *) arg;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	history_insert(g->nsp, g->order_no, g->from, g->to, "application", NULL, NULL);
	SPI_finish();
}

/*
 * The guard trigger let a status change of order order_no of the bound
 * orders table through: unless paynotify itself is making it (and records
 * it), record it as the application's, as the extension's owner.
 */
void
pn_history_guard(Oid fn_oid, const char *order_no, const char *from, const char *to)
{
	GuardRecord g;

	if (own_move)
		return;
	g.nsp = get_func_namespace(fn_oid);
	if (!OidIsValid(get_relname_relid("paynotify_order_history", g.nsp)))
		return;
	g.order_no = order_no;
	g.from = from;
	g.to = to;
	pn_run_as(pn_function_owner(fn_oid), guard_record, &g);
}

/* Hex SHA-256 of a payload as jsonb prints it (payload::text), or NULL. */
static char *
sha256_hex(Jsonb *payload)
{
	unsigned char digest[32];
	char	   *text;
	char	   *hex;

	if (payload == NULL)
		return NULL;
	text = JsonbToCString(NULL, &payload->root, VARSIZE(payload));
	pn_sha256((const unsigned char *) text, strlen(text), digest);
	hex = palloc(65);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	return hex;
}

/*
 * One authenticated delivery was answered: record it when
 * paynotify.delivery_history asks for it.  The client address is what the
 * shim passed in the X-Paynotify-Client header, if anything.
 */
void
pn_delivery_record(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
				   PnOutcome outcome, Jsonb *headers)
{
	Oid			argtypes[7] = {TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	PnReply		reply;
	char	   *client = NULL;
	char	   *hash;
	SPIPlanPtr	plan;
	Oid			relid;

	if (delivery_history == DH_OFF ||
		(delivery_history == DH_FAILURES && pn_outcome_acknowledges(outcome)))
		return;
	relid = get_relname_relid("paynotify_delivery_history", cfg->nsp);
	if (!OidIsValid(relid))
		return;
	pn_gateway_reply(ch->gw, outcome, PN_OK, &reply);
	if (pn_header(headers, "X-Paynotify-Client", &client) != 1)
		client = NULL;
	else if (strlen(client) > MAX_CLIENT_TEXT)
		client[pg_mbcliplen(client, strlen(client), MAX_CLIENT_TEXT)] = '\0';
	hash = sha256_hex(n->payload);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	/* keyed by the notification's order (1.2), as its log row */
	if (get_attnum(relid, "order_no") != InvalidAttrNumber)
		plan = saved_plan(&delivery_plan, &delivery_nsp, cfg->nsp,
						  "INSERT INTO %s.paynotify_delivery_history"
						  " (channel, notify_id, outcome, http_status, payload_sha256, client, order_no)"
						  " VALUES ($1, $2, $3, $4, $5, $6, $7)",
						  7, argtypes);
	else
		plan = saved_plan(&delivery_plan_11, &delivery_nsp_11, cfg->nsp,
						  "INSERT INTO %s.paynotify_delivery_history"
						  " (channel, notify_id, outcome, http_status, payload_sha256, client)"
						  " VALUES ($1, $2, $3, $4, $5, $6)",
						  6, argtypes);
	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->notify_id);
	args[2] = CStringGetTextDatum(pn_outcome_name(outcome));
	args[3] = Int32GetDatum(reply.status);
	args[4] = hash ? CStringGetTextDatum(hash) : (Datum) 0;
	args[5] = client ? CStringGetTextDatum(client) : (Datum) 0;
	nulls[4] = hash ? ' ' : 'n';
	nulls[5] = client ? ' ' : 'n';
	args[6] = CStringGetTextDatum(pn_order_key(n));
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "delivery history insert failed");
	SPI_finish();
}

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
Datum
paynotify_retry(PG_FUNCTION_ARGS)
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
	if (SPI_execute_with_args(psprintf("SELECT status, notice FROM %s.payment_notify_log"
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
	SPI_finish();
	if (!c.dry_run && c.n != NULL)
		pn_shard_commit_level(c.cfg, channel, notify_id, pn_order_key(c.n), NULL);

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
