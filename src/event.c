/*-------------------------------------------------------------------------
 *
 * event.c
 *	  What others learn of an applied notification: its event ("paid",
 *	  "refunded", ...) as an outbox row, a NOTIFY as paynotify.notify says,
 *	  and the user's hooks registered for it.
 *
 * pn_emit runs inside the business step (apply.c), with SPI connected: the
 * outbox row and the NOTIFY commit with the step or not at all, and a hook
 * that raises fails the step, which is retried.  Hooks run as the role
 * that registered them, never as paynotify.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "paynotify.h"
#include "pipeline.h"

#define NOTIFY_CHANNEL "paynotify"

/*
 * PostgreSQL's own bound on a NOTIFY payload: NOTIFY_PAYLOAD_MAX_LENGTH of
 * commands/async.c, which no header exports.  Async_Notify raises for a
 * payload of this many bytes or more; a longer event is not announced
 * (its outbox row is still there for workers that poll).
 */
#define NOTIFY_PAYLOAD_MAX_LENGTH (BLCKSZ - NAMEDATALEN - 128)

/*
 * paynotify.notify = coalesced: pn_emit only notes that this transaction
 * applied an event; just before PreCommit_Notify (XACT_EVENT_PRE_COMMIT),
 * the transaction sends one payload-free NOTIFY if this backend has sent
 * none for paynotify.notify_interval.  The notification queue lock is then
 * taken by a few transactions, not by every paying one, and a worker that
 * polls at least as often as it is woken misses nothing: what was not
 * announced is found by its next poll.
 */
static bool wake_pending = false;	/* this transaction applied an event */
static bool wake_callback = false;	/* wake_xact_callback registered */
static TimestampTz wake_last = 0;	/* when this backend last sent one */

typedef struct HookCall
{
	const PnHook *hook;
	Datum		arg;
} HookCall;

static void wake_xact_callback(XactEvent event, void *arg);
static int64 outbox_insert(PnConfig *cfg, const char *event, const PnChannel *ch,
						   const PnNotice *n, int64 amount, Jsonb *detail);
static void announce(int64 id, const char *event, const PnChannel *ch, const PnNotice *n);
static void run_hook(HookCall *call);
static void hook_call(void *arg);
static Datum hook_argument(const char *event, const PnChannel *ch,
						   const PnNotice *n, int64 outbox_id, int64 amount, Jsonb *detail);

/*
 * Every event an outbox row, a hook or an endpoint may name: the list the
 * CHECKs of paynotify_hook.event and paynotify_endpoint.events hold too.
 */
const char *const pn_event_names[] = {
	"paid", "refunded", "refund_failed", "closed",
	"dispute_opened", "dispute_won", "dispute_lost", "payment_failed",
	"agreement_signed", "agreement_ended", "notification"
};
const int	pn_nevent_names = lengthof(pn_event_names);

/* Send the coalesced wake-up NOTIFY at pre-commit, at most once per interval. */
static void
wake_xact_callback(XactEvent event, void *arg)
{
	TimestampTz now;

	if (!wake_pending)
		return;
	wake_pending = false;
	if (event != XACT_EVENT_PRE_COMMIT)
		return;					/* abort, prepare, parallel worker: none */
	now = GetCurrentTimestamp();
	if (wake_last != 0 && now >= wake_last &&
		now - wake_last < paynotify_notify_interval * INT64CONST(1000))
		return;
	wake_last = now;
	Async_Notify(NOTIFY_CHANNEL, "{\"wake\": true}");
}

/*
 * Queue the event for after-commit work: an outbox row, a NOTIFY on channel
 * "paynotify" (delivered only if the transaction commits), and the user's
 * hooks for this event, which run here, inside the business step.  amount
 * below zero: none (NULL); detail: what the event carries besides, or NULL.
 * An event with detail is not queued on a schema older than 1.3, which has
 * no place for it (the notification is recorded, as it was then).
 */
void
pn_emit(PnConfig *cfg, const char *event, const PnChannel *ch, const PnNotice *n, int64 amount,
		Jsonb *detail)
{
	int64		id;

	if (detail != NULL && !cfg->schema_13)
		return;
	id = outbox_insert(cfg, event, ch, n, amount, detail);

	announce(id, event, ch, n);
	for (int i = 0; i < cfg->nhooks; i++)
	{
		HookCall	call;

		if (strcmp(cfg->hooks[i].event, event) != 0)
			continue;
		call.hook = &cfg->hooks[i];
		call.arg = hook_argument(event, ch, n, id, amount, detail);
		run_hook(&call);
	}
}

/*
 * Insert the event's outbox row (on Citus with its order's sequence value);
 * its id.  A notification that names no order is keyed by '' (PN_NO_ORDER),
 * as its log row is.
 */
static int64
outbox_insert(PnConfig *cfg, const char *event, const PnChannel *ch, const PnNotice *n,
			  int64 amount, Jsonb *detail)
{
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', 'n', 'n'};
	bool		isnull;
	PnPlanId	plan = detail != NULL ? PLAN_OUTBOX_INSERT_DETAIL : PLAN_OUTBOX_INSERT;

	args[0] = CStringGetTextDatum(event);
	args[1] = CStringGetTextDatum(ch->name);
	args[2] = CStringGetTextDatum(pn_order_key(n));
	args[3] = CStringGetTextDatum(n->notify_id);
	args[4] = Int64GetDatum(amount);
	if (amount < 0)
		nulls[4] = 'n';
	if (detail != NULL)
	{
		args[6] = JsonbPGetDatum(detail);
		nulls[6] = ' ';
	}
	if (pn_order_key(n)[0] != '\0' && pn_config_distributed(cfg))
	{
		/*
		 * Citus: the order's next sequence value (see paynotify_order_seq).
		 * Events of no order wait for no other (the claim), and take none:
		 * one sequence row for all of them would serialize them.
		 */
		if (SPI_execute_plan(pn_plan(cfg, PLAN_ORDER_SEQ_NEXT), &args[2], NULL, false, 1) != SPI_OK_INSERT_RETURNING ||
			SPI_processed != 1)
			elog(ERROR, "paynotify: order sequence update failed");
		args[5] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		nulls[5] = ' ';
		if (detail == NULL)
			plan = PLAN_OUTBOX_INSERT_SEQ;
	}
	if (SPI_execute_plan(pn_plan(cfg, plan), args, nulls, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "paynotify: outbox insert failed");
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Tell listeners as paynotify.notify says: a coalesced wake-up at
 * pre-commit, or a NOTIFY with the event's payload.
 */
static void
announce(int64 id, const char *event, const PnChannel *ch, const PnNotice *n)
{
	StringInfoData msg;

	if (paynotify_notify == PN_NOTIFY_COALESCED)
	{
		if (!wake_callback)
		{
			RegisterXactCallback(wake_xact_callback, NULL);
			wake_callback = true;
		}
		wake_pending = true;
	}
	else if (paynotify_notify == PN_NOTIFY_ON)
	{
		initStringInfo(&msg);
		appendStringInfo(&msg, "{\"id\": " INT64_FORMAT ", \"event\": \"%s\", \"channel\": \"%s\", \"order_no\": ",
						 id, event, ch->name);
		if (n->order_no != NULL)
			escape_json(&msg, n->order_no);
		else
			appendStringInfoString(&msg, "null");
		appendStringInfoChar(&msg, '}');
		if (msg.len < NOTIFY_PAYLOAD_MAX_LENGTH)
			Async_Notify(NOTIFY_CHANNEL, msg.data);
	}
}

/*
 * A hook's one jsonb argument: {"event", "channel", "outbox_id", "amount",
 * "notice": {...}} (the notice as pn_notice_to_jsonb has it), and "detail"
 * when the event carries one (the outbox row's).
 */
static Datum
hook_argument(const char *event, const PnChannel *ch, const PnNotice *n,
			  int64 outbox_id, int64 amount, Jsonb *detail)
{
	JsonbParseState *st = NULL;

	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	pn_jsonb_push_text(&st, "event", event);
	pn_jsonb_push_text(&st, "channel", ch->name);
	pn_jsonb_push_int64(&st, "outbox_id", outbox_id);
	if (amount >= 0)
		pn_jsonb_push_int64(&st, "amount", amount);
	else
		pn_jsonb_push_text(&st, "amount", NULL);
	if (detail != NULL)
		pn_jsonb_push_jsonb(&st, "detail", detail);
	pn_jsonb_push_key(&st, "notice");
	(void) pn_notice_push(&st, n);
	return JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL)));
}

/*
 * Run one hook as the role that registered it, in a security-restricted
 * operation with search_path pinned.  A hook whose function or role is gone,
 * or whose role may no longer execute it, or whose role is a superuser
 * (registered before 1.3, or made a superuser since), fails the business
 * step (which is retried): it is never skipped.  Any return type; the
 * result, NULL included, is ignored.
 */
static void
run_hook(HookCall *call)
{
	const PnHook *hook = call->hook;

	if (!OidIsValid(hook->fn))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("paynotify hook %s no longer exists", hook->handler),
				 errhint("Create the function again, or delete the hook from paynotify_hook.")));
	if (get_func_prokind(hook->fn) != PROKIND_FUNCTION || get_func_retset(hook->fn))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("paynotify hook %s is no longer a plain function", hook->handler),
				 errhint("Hooks must be functions returning one value (of any type, or void).")));
	if (!OidIsValid(hook->role) ||
		!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(hook->role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("the role that registered paynotify hook %s no longer exists",
						hook->handler),
				 errhint("Register the hook again with paynotify_on.")));
	if (pg_proc_aclcheck(hook->fn, hook->role, ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" that registered paynotify hook %s may no longer execute it",
						GetUserNameFromId(hook->role, false), hook->handler)));
	if (!pn_hook_owner_ok(hook->fn, hook->role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("paynotify hook %s is owned by role \"%s\", whose code may not run as \"%s\"",
						hook->handler, GetUserNameFromId(pn_function_owner(hook->fn), false),
						GetUserNameFromId(hook->role, false)),
				 errhint("Register the hook again as the function's owner.")));
	if (superuser_arg(hook->role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("paynotify hook %s is registered by superuser \"%s\", and no hook runs as a superuser",
						hook->handler, GetUserNameFromId(hook->role, false)),
				 errdetail("A hook runs as the role that registered it; a superuser would run with every right whatever the code it reaches, a domain's CHECK or a table's trigger of another role included."),
				 errhint("Register the hook again as a plain role with the rights it needs (SET ROLE that role; SELECT paynotify_on(...)).")));
	pn_run_guarded(hook->role, psprintf("hook %s", hook->handler), hook_call, call);
}

static void
hook_call(void *arg)
{
	HookCall   *call = (HookCall *) arg;
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 1);

	fmgr_info(call->hook->fn, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = call->arg;
	fcinfo->args[0].isnull = false;
	(void) FunctionCallInvoke(fcinfo);
}
