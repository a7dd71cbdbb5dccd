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
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

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

/*
 * Citus: paynotify's own move of an order, told to the backend that holds
 * the order's shard (paynotify_own_move, called there by a statement
 * routed by the order's number just before the move): the guard on the
 * shard does not record it as the application's.  Kept until the move, or
 * the end of the transaction.
 */
static char *mark_order = NULL;
static char *mark_from = NULL;
static char *mark_to = NULL;
static SubTransactionId mark_subid = InvalidSubTransactionId;	/* where it was set */

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
static void mark_clear(void);
static void mark_send(PnConfig *cfg, const char *order_no, const char *from, const char *to);
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
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
		mark_clear();
}

static void
mark_clear(void)
{
	if (mark_order)
		pfree(mark_order);
	if (mark_from)
		pfree(mark_from);
	if (mark_to)
		pfree(mark_to);
	mark_order = mark_from = mark_to = NULL;
	mark_subid = InvalidSubTransactionId;
}

PG_FUNCTION_INFO_V1(paynotify_own_move);

/*
 * paynotify_own_move(order_no, from_state, to_state): the next move of the
 * order from → to in this backend's transaction is paynotify's own (see
 * mark_order); ('', '') for the states clears the mark (paynotify's move
 * changed nothing).  Not for PUBLIC: the extension's owner calls it, on
 * the node of the order's shard (pn_history_own_move_of,
 * pn_history_own_move_done).
 */
Datum
paynotify_own_move(PG_FUNCTION_ARGS)
{
	char	   *from = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *to = text_to_cstring(PG_GETARG_TEXT_PP(2));

	mark_clear();
	if (from[0] == '\0' && to[0] == '\0')
		PG_RETURN_BOOL(true);
	mark_subid = GetCurrentSubTransactionId();
	mark_order = MemoryContextStrdup(TopMemoryContext, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	mark_from = MemoryContextStrdup(TopMemoryContext, from);
	mark_to = MemoryContextStrdup(TopMemoryContext, to);
	PG_RETURN_BOOL(true);
}

/*
 * paynotify is about to move order_no from → to (states are the table's
 * values): own_move set, and on Citus the move also told to the node that
 * holds the order's shard, where the guard runs in another backend (a
 * statement routed by the order's number over the connection the move
 * then takes, when the orders table and paynotify's tables have one owner).
 * SPI connected, as the extension's owner.
 */
void
pn_history_own_move_of(PnConfig *cfg, const char *order_no, const char *from, const char *to)
{
	own_move = true;
	mark_send(cfg, order_no, from, to);
}

/*
 * paynotify's move of order_no (pn_history_own_move_of) is over: own_move
 * reset, and when it changed nothing (moved false), on Citus the mark
 * cleared where it was set, over the same route, so that it cannot hide a
 * later move of the application's.  SPI connected, as the extension's
 * owner.
 */
void
pn_history_own_move_done(PnConfig *cfg, const char *order_no, bool moved)
{
	own_move = false;
	if (!moved)
		mark_send(cfg, order_no, "", "");
}

/* paynotify_own_move(order_no, from, to) on the node of the order's shard (Citus). */
static void
mark_send(PnConfig *cfg, const char *order_no, const char *from, const char *to)
{
	static SPIPlanPtr mark_plan = NULL;
	static Oid	mark_nsp = InvalidOid;
	static SPIPlanPtr begin_plan = NULL;
	static Oid	begin_nsp = InvalidOid;
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	List	   *fname;

	if (!pn_config_distributed(cfg))
		return;
	fname = list_make2(makeString(get_namespace_name(cfg->nsp)), makeString("paynotify_own_move"));
	if (!OidIsValid(LookupFuncName(fname, 3, argtypes, true)) ||
		!OidIsValid(get_relname_relid("paynotify_order_seq", cfg->nsp)))
		return;					/* a schema before 1.4 */
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(from);
	args[2] = CStringGetTextDatum(to);
	/*
	 * First a write that changes nothing, so that Citus has begun the
	 * transaction on the shard's node (a read alone may run there in a
	 * transaction of its own, before, and the mark end with it); then the
	 * mark, over the same connection: one row whatever the shard holds,
	 * Citus sends it whole to the shard.
	 */
	if (SPI_execute_plan(saved_plan(&begin_plan, &begin_nsp, cfg->nsp,
									"UPDATE %s.paynotify_order_seq s SET last = s.last"
									" WHERE s.order_no = $1 AND s.last < 0",
									1, argtypes),
						 args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: own move mark failed");
	if (SPI_execute_plan(saved_plan(&mark_plan, &mark_nsp, cfg->nsp,
									"SELECT pg_catalog.count(*), %1$s.paynotify_own_move($1, $2, $3)"
									" FROM %1$s.paynotify_order_seq s WHERE s.order_no = $1",
									3, argtypes),
						 args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: own move mark failed");
}

static void
history_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		own_move = false;
	/*
	 * The mark belongs to the subtransaction that set it: rolled back with
	 * it (the move it announced is undone or never made), handed to the
	 * parent when released.
	 */
	if (mark_order != NULL && mark_subid == mySubid)
	{
		if (event == SUBXACT_EVENT_ABORT_SUB)
			mark_clear();
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			mark_subid = parentSubid;
	}
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
	const char *shard_id;		/* Citus: the orders shard's id */
	Oid			orders_oid;
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
 * Whether nsp holds a plain table named name owned by the owner of its
 * table logical (a shard placement and its distributed table): read from
 * the syscache, which Citus does not filter.
 */
static bool
placement_owned_as(Oid nsp, const char *name, const char *logical)
{
	Oid			rel = get_relname_relid(name, nsp);
	Oid			of = get_relname_relid(logical, nsp);
	HeapTuple	a,
				b;
	bool		ok;

	if (!OidIsValid(rel) || !OidIsValid(of))
		return false;
	a = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
	if (!HeapTupleIsValid(a))
		return false;
	b = SearchSysCache1(RELOID, ObjectIdGetDatum(of));
	if (!HeapTupleIsValid(b))
	{
		ReleaseSysCache(a);
		return false;
	}
	ok = ((Form_pg_class) GETSTRUCT(a))->relkind == RELKIND_RELATION &&
		((Form_pg_class) GETSTRUCT(a))->relowner == ((Form_pg_class) GETSTRUCT(b))->relowner;
	ReleaseSysCache(a);
	ReleaseSysCache(b);
	return ok;
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

static void
guard_record_shard(void *arg)
{
	GuardRecord *g = (GuardRecord *) arg;
	const char *nsp = quote_identifier(get_namespace_name(g->nsp));
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[4];
	Oid			inargtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	char	   *shard;
	char	   *seq;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	args[0] = CStringGetTextDatum(g->order_no);
	/* (a table named as a shard, but none: nothing recorded, as before 1.4) */
	/* (the table's name as a literal: quoted, then quoted again as a string) */
	if (SPI_execute_with_args(psprintf("SELECT pg_catalog.get_shard_id_for_distribution_column("
									   "%1$s::pg_catalog.regclass, $1)::text,"
									   " pg_catalog.pg_get_serial_sequence(%1$s, 'id')"
									   " FROM pg_catalog.pg_dist_shard s WHERE s.shardid OPERATOR(pg_catalog.=) %2$s"
									   " AND s.logicalrelid OPERATOR(pg_catalog.=) %3$u::pg_catalog.oid"
									   " AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p"
									   "  WHERE p.logicalrelid OPERATOR(pg_catalog.=)"
									   "  %1$s::pg_catalog.regclass)",
									   quote_literal_cstr(psprintf("%s.paynotify_order_history", nsp)),
									   g->shard_id, g->orders_oid),
							  1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: the order history's shard of order \"%s\" not found", g->order_no);
	if (SPI_processed != 1)
	{
		SPI_finish();
		return;
	}
	shard = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	seq = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	if (shard == NULL || seq == NULL)
		elog(ERROR, "paynotify: the order history's shard of order \"%s\" not found", g->order_no);
	/*
	 * Only this node's placement of that shard: a table of its name owned
	 * by paynotify's owner, as Citus makes it.  One of that name created by
	 * a role that may create in the extension's schema (on a node without
	 * the placement) would run its triggers as paynotify's owner.  (Read
	 * from the catalog's cache: Citus hides its shards from queries of
	 * pg_class.)
	 */
	if (!placement_owned_as(g->nsp, psprintf("paynotify_order_history_%s", shard), "paynotify_order_history"))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("paynotify: the order history's shard \"paynotify_order_history_%s\" on this node is not paynotify's owner's",
						shard),
				 errdetail("A move of order \"%s\" is recorded only in the placement Citus made.", g->order_no)));
	args[1] = CStringGetTextDatum(g->from);
	args[2] = CStringGetTextDatum(g->to);
	args[3] = CStringGetTextDatum(seq);
	/*
	 * The shard on this node, written directly: the guard runs inside the
	 * statement Citus sent to the orders shard, where no distributed
	 * statement may run; its id from this node's range of the identity
	 * (paynotify_distribute), its other columns as their defaults are
	 */
	if (SPI_execute_with_args(psprintf("INSERT INTO %s.%s (id, order_no, from_state, to_state, source, by_role, at)"
									   " VALUES (pg_catalog.nextval($4::pg_catalog.regclass), $1, $2, $3,"
									   " 'application', pg_catalog.session_user(), pg_catalog.clock_timestamp())",
									   nsp, quote_identifier(psprintf("paynotify_order_history_%s", shard))),
							  4, inargtypes, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: order history insert failed");
	SPI_finish();
}

/*
 * Citus: the guard let a status change of order order_no through on a
 * shard of the bound orders table (the trigger runs on the node that holds
 * it, in the backend of the statement Citus sent there): unless paynotify
 * is making it (own_move, here when the shard is local, else the mark its
 * node was given), recorded as the application's in the co-located shard
 * of the order history, as the extension's owner.
 */
void
pn_history_guard_shard(Oid fn_oid, Relation shard, Oid orders_oid,
					   const char *order_no, const char *from, const char *to)
{
	GuardRecord g;
	const char *name = RelationGetRelationName(shard);
	const char *id = strrchr(name, '_');

	/*
	 * The mark first: when the shard is on this node, own_move is set too,
	 * and the mark, set here by the same move (Citus's local execution),
	 * must not outlive it.
	 */
	if (mark_order != NULL && strcmp(mark_order, order_no) == 0 &&
		strcmp(mark_from, from) == 0 && strcmp(mark_to, to) == 0)
	{
		mark_clear();
		return;
	}
	if (own_move)
		return;
	g.nsp = get_func_namespace(fn_oid);
	/* (is_orders: the name is the table's, '_' and digits) */
	if (id == NULL || !OidIsValid(get_relname_relid("paynotify_order_history", g.nsp)) ||
		!OidIsValid(get_relname_relid("pg_dist_shard", PG_CATALOG_NAMESPACE)))
		return;
	g.shard_id = id + 1;
	g.orders_oid = orders_oid;
	g.order_no = order_no;
	g.from = from;
	g.to = to;
	pn_run_as(pn_function_owner(fn_oid), guard_record_shard, &g);
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
 * The client the shim named in the X-Paynotify-Client header, as the
 * delivery history keeps it (at most MAX_CLIENT_TEXT bytes, not cut inside
 * a character), or NULL when absent or not one string.
 */
char *
pn_client_header(Jsonb *headers)
{
	char	   *client;

	if (pn_header(headers, PN_CLIENT_HEADER, &client) != 1)
		return NULL;
	return pn_clip_text(client, MAX_CLIENT_TEXT);
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
	char	   *client;
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
	client = pn_client_header(headers);
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
