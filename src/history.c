/*-------------------------------------------------------------------------
 *
 * history.c
 *	  What happened (version 1.1): the history of orders' status changes,
 *	  paynotify's own moves and the application's (through the guard
 *	  trigger), and the optional per-delivery history
 *	  (paynotify.delivery_history).
 *
 * Both histories are written only when their tables exist: a library of
 * version 1.1 may run against a database still at version 1.0 until
 * ALTER EXTENSION paynotify UPDATE, and must keep working there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "paynotify.h"
#include "pipeline.h"
#include "history.h"

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

static void history_xact_callback(XactEvent event, void *arg);
static void history_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									 SubTransactionId parentSubid, void *arg);
static SPIPlanPtr saved_plan(SPIPlanPtr *plan, Oid *plan_nsp, Oid nsp, const char *tmpl,
							 int nargs, Oid *argtypes);
static void history_insert(Oid nsp, const char *order_no, const char *from, const char *to,
						   const char *source, const char *channel, const char *notify_id);
static void guard_record(void *arg);
static char *sha256_hex(Jsonb *payload);

/* Define paynotify.delivery_history; register the callbacks that reset own_move. */
void
pn_history_init(void)
{
	DefineCustomEnumVariable("paynotify.delivery_history",
							 "Which deliveries paynotify_handle records in paynotify_delivery_history.",
							 "off: none; failures: those not acknowledged; all: every authenticated delivery.",
							 &delivery_history,
							 DH_OFF,
							 delivery_history_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	RegisterXactCallback(history_xact_callback, NULL);
	RegisterSubXactCallback(history_subxact_callback, NULL);
}

/* An error inside a move must not leave the flag set for later statements. */
static void
history_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		own_move = false;
}

static void
history_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
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

/*
 * The state the order was in before its last move to state, or NULL when
 * its history has none.  SPI connected, as the extension's owner.
 */
char *
pn_history_before(PnConfig *cfg, const char *order_no, const char *state)
{
	static SPIPlanPtr before_plan = NULL;
	static Oid	before_nsp = InvalidOid;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2];
	SPIPlanPtr	plan;

	if (!OidIsValid(get_relname_relid("paynotify_order_history", cfg->nsp)))
		return NULL;
	plan = saved_plan(&before_plan, &before_nsp, cfg->nsp,
					  "SELECT from_state FROM %s.paynotify_order_history"
					  " WHERE order_no = $1 AND to_state = $2 ORDER BY at DESC, id DESC LIMIT 1",
					  2, argtypes);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(state);
	if (SPI_execute_plan(plan, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "order history lookup failed");
	if (SPI_processed != 1)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
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
