/*-------------------------------------------------------------------------
 *
 * state.c
 *	  The order state machine: legal transitions come from the editable
 *	  paynotify_transition table (cached per backend), moves are conditional
 *	  updates, and a trigger guards the orders table against illegal moves
 *	  from any code path.  (paynotify_transit, a move that also applies the
 *	  parked notifications, is in apply.c.)
 *
 * The trigger fires for whoever updates the orders table, in any session,
 * so it keeps its own small cache (the transitions and the binding's status
 * column and values, read as the extension's owner), apart from the
 * pipeline's configuration and invalidated by the same changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "paynotify.h"
#include "pipeline.h"
#include "history.h"

PG_FUNCTION_INFO_V1(paynotify_guard_transition);

/*
 * What the guard trigger needs, loaded apart from the configuration (no
 * channel, no key) and cached in this backend until a configuration table
 * changes.
 */
typedef struct GuardConfig
{
	MemoryContext cxt;
	Oid			nsp;
	Oid			orders_oid;		/* bound table, or InvalidOid */
	char	   *status_col_name;	/* bound status column, or NULL */
	char	   *key_col_name;	/* bound key column, or NULL */
	int			ntransitions;
	char	  **transitions;	/* from, to pairs */
	PnStatusMap map;
	int			nconfig_relids;	/* the configuration tables (and their Citus shards) */
	Oid		   *config_relids;
} GuardConfig;

typedef struct GuardLoad
{
	Oid			nsp;
	GuardConfig *g;
} GuardLoad;

static GuardConfig *guard = NULL;	/* the guard trigger's own cache */
static bool guard_stale = true;

static void guard_inval_callback(Datum arg, Oid relid);
static void guard_load(void *arg);
static GuardConfig *guard_config(Oid fn_oid);

/* Register the invalidation callback of the guard's cache. */
void
pn_state_init(void)
{
	CacheRegisterRelcacheCallback(guard_inval_callback, (Datum) 0);
}

/*
 * A change of a configuration table (or of all relations) marks the guard's
 * cache stale, as it does the configuration's (config.c).
 */
static void
guard_inval_callback(Datum arg, Oid relid)
{
	if (guard == NULL ||
		pn_config_table_changed(relid, guard->config_relids, guard->nconfig_relids))
		guard_stale = true;
}

/* Whether from → to is one of n (from, to) pairs. */
static bool
transition_in(int n, char **transitions, const char *from, const char *to)
{
	for (int i = 0; i < n; i++)
		if (strcmp(transitions[2 * i], from) == 0 &&
			strcmp(transitions[2 * i + 1], to) == 0)
			return true;
	return false;
}

/* Whether from → to is in the transitions table. */
bool
pn_transition_allowed(PnConfig *cfg, const char *from, const char *to)
{
	return transition_in(cfg->ntransitions, cfg->transitions, from, to);
}

/* Drop trailing blanks in place. */
static void
rtrim_blanks(char *s)
{
	size_t		len;

	if (s == NULL)
		return;
	len = strlen(s);
	while (len > 0 && s[len - 1] == ' ')
		s[--len] = '\0';
}

/* Raise the error for an illegal transition, naming both states. */
static void
illegal_transition(const char *from, const char *to)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("illegal order status transition from \"%s\" to \"%s\"", from, to),
			 errhint("Legal transitions are listed in paynotify_transition.")));
}

/*
 * Move one order from → to if legal and if it is in from now; true when
 * this call made the move.  States are paynotify's names; the table gets
 * its own values for them.  Runs as the orders table's owner.  SPI must be
 * connected.
 */
bool
pn_transit(PnConfig *cfg, const char *order_no, const char *from, const char *to)
{
	Datum		args[3];
	bool		moved;

	if (!pn_transition_allowed(cfg, from, to))
		illegal_transition(from, to);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(pn_status_value(&cfg->status_map, from));
	args[2] = CStringGetTextDatum(pn_status_value(&cfg->status_map, to));
	pn_history_own_move_of(cfg, order_no, from, to);
	if (pn_orders_execute(cfg, PLAN_ORDER_MOVE, args, NULL, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: order update failed");
	moved = (SPI_processed == 1);
	pn_history_own_move_done(cfg, order_no, moved);
	if (!moved)
		return false;
	pn_history_move(cfg, order_no, from, to);
	return true;
}

/*
 * Whether rel is the bound orders table, or on Citus one of its shards
 * (named after it with "_<shard id>", in its schema), where the trigger
 * fires when the distributed table is updated.
 */
static bool
is_orders(Relation rel, Oid orders_oid)
{
	char	   *orders_name;
	const char *name = RelationGetRelationName(rel);
	size_t		len;

	if (RelationGetRelid(rel) == orders_oid)
		return true;
	if (!OidIsValid(orders_oid) || RelationGetNamespace(rel) != get_rel_namespace(orders_oid))
		return false;
	orders_name = get_rel_name(orders_oid);
	if (orders_name == NULL)
		return false;
	len = strlen(orders_name);
	if (strncmp(name, orders_name, len) != 0 || name[len] != '_' || name[len + 1] == '\0')
		return false;
	for (const char *p = name + len + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/* Read the transitions and the binding for the guard (as the extension's owner). */
static void
guard_load(void *arg)
{
	GuardLoad  *l = (GuardLoad *) arg;
	GuardConfig *g = l->g;
	const char *schema = quote_identifier(get_namespace_name(l->nsp));
	char	   *sql;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	g->nconfig_relids = pn_config_table_oids(l->nsp, g->cxt, &g->config_relids);
	g->transitions = pn_transition_pairs_load(g->cxt, schema, &g->ntransitions);
	sql = psprintf("SELECT pg_catalog.to_regclass(orders)::oid, status_column, key_column"
				   " FROM %s.paynotify_binding", schema);
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: configuration query failed");
	if (SPI_processed == 1)
	{
		HeapTuple	row = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *oid = SPI_getvalue(row, desc, 1);

		g->orders_oid = oid ? atooid(oid) : InvalidOid;
		g->status_col_name = MemoryContextStrdup(g->cxt, SPI_getvalue(row, desc, 2));
		g->key_col_name = MemoryContextStrdup(g->cxt, SPI_getvalue(row, desc, 3));
		pn_status_map_load(g->cxt, schema, &g->map);
	}
	SPI_finish();
}

/*
 * The guard trigger's configuration: the transitions and the binding's
 * status column and status_values, nothing else (no channel, no key).  It
 * is read as the extension's owner with search_path pinned, whoever updates
 * the orders table, and cached until a configuration table changes.
 */
static GuardConfig *
guard_config(Oid fn_oid)
{
	Oid			nsp = get_func_namespace(fn_oid);
	MemoryContext cxt;
	GuardLoad	l;

	if (guard != NULL && !guard_stale && guard->nsp == nsp)
		return guard;
	guard_stale = false;
	/* a child of the current context until complete: an error frees it */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "paynotify guard configuration",
								ALLOCSET_SMALL_SIZES);
	l.nsp = nsp;
	l.g = MemoryContextAllocZero(cxt, sizeof(GuardConfig));
	l.g->cxt = cxt;
	l.g->nsp = nsp;
	PG_TRY();
	{
		pn_run_as(pn_function_owner(fn_oid), guard_load, &l);
	}
	PG_CATCH();
	{
		guard_stale = true;
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSetParent(cxt, TopMemoryContext);
	if (guard != NULL)
		MemoryContextDelete(guard->cxt);
	guard = l.g;
	return guard;
}

/*
 * paynotify_guard_transition() BEFORE UPDATE row trigger.
 *
 * The status column is the trigger's first argument, else the bound status
 * column, else "status".  Any change of it must be a legal transition.  On
 * the bound table, values are translated to paynotify's states through the
 * binding's status_values first; a value the mapping does not name is
 * checked under its own text (so a change to or from it is refused unless
 * paynotify_transition lists that text).  Reads only the transitions and
 * the binding, as the extension's owner: any role that may update the
 * table may fire it.
 */
Datum
paynotify_guard_transition(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	GuardConfig *cfg;
	TupleDesc	desc;
	const char *column;
	int			attnum;
	char	   *from,
			   *to;
	const char *from_state,
			   *to_state;
	bool		bound;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_UPDATE(td->tg_event) ||
		!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("paynotify_guard_transition must be a BEFORE UPDATE FOR EACH ROW trigger")));

	cfg = guard_config(fcinfo->flinfo->fn_oid);
	if (td->tg_trigger->tgnargs > 0)
		column = td->tg_trigger->tgargs[0];
	else
		column = cfg->status_col_name ? cfg->status_col_name : "status";
	desc = RelationGetDescr(td->tg_relation);
	attnum = SPI_fnumber(desc, column);
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", column,
						RelationGetRelationName(td->tg_relation))));

	from = SPI_getvalue(td->tg_trigtuple, desc, attnum);
	to = SPI_getvalue(td->tg_newtuple, desc, attnum);
	if (getBaseType(TupleDescAttr(desc, attnum - 1)->atttypid) == BPCHAROID)
	{
		/* char(n): compare as its text, without the padding (as ::text does) */
		rtrim_blanks(from);
		rtrim_blanks(to);
	}
	if (from == NULL || to == NULL || strcmp(from, to) == 0)
	{
		if (from != NULL && to == NULL)
			illegal_transition(from, "NULL");
		return PointerGetDatum(td->tg_newtuple);
	}
	from_state = from;
	to_state = to;
	bound = is_orders(td->tg_relation, cfg->orders_oid) &&
		strcmp(column, cfg->status_col_name) == 0;
	if (bound)
	{
		from_state = pn_status_name(&cfg->map, from);
		to_state = pn_status_name(&cfg->map, to);
	}
	if (!transition_in(cfg->ntransitions, cfg->transitions, from_state, to_state))
	{
		if (from_state == from && to_state == to)
			illegal_transition(from_state, to_state);
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("illegal order status transition from \"%s\" to \"%s\"",
						from_state, to_state),
				 errdetail("Column \"%s\" changed from %s to %s.", column, from, to),
				 errhint("Legal transitions are listed in paynotify_transition.")));
	}
	/*
	 * The application's move, in the order history.  On a Citus shard the
	 * trigger runs in the backend of the statement Citus sent to the
	 * shard's node: paynotify's own moves are told to it (mark), and the
	 * history is written to the co-located shard (pn_history_guard_shard).
	 */
	if (bound)
	{
		int			keyno = SPI_fnumber(RelationGetDescr(td->tg_relation), cfg->key_col_name);
		char	   *order_no = keyno > 0 ? SPI_getvalue(td->tg_newtuple,
														RelationGetDescr(td->tg_relation),
														keyno) : NULL;

		if (order_no == NULL)
			;
		else if (RelationGetRelid(td->tg_relation) == cfg->orders_oid)
			pn_history_guard(fcinfo->flinfo->fn_oid, order_no, from_state, to_state);
		else
			pn_history_guard_shard(fcinfo->flinfo->fn_oid, td->tg_relation, cfg->orders_oid,
								   order_no, from_state, to_state);
	}
	return PointerGetDatum(td->tg_newtuple);
}
