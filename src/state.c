/*-------------------------------------------------------------------------
 *
 * state.c
 *	  The order state machine: legal transitions come from the editable
 *	  paynotify_transition table (cached per backend), moves are conditional
 *	  updates, and a trigger guards the orders table against illegal moves
 *	  from any code path.
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
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "paynotify.h"
#include "pnconfig.h"
#include "ops.h"

PG_FUNCTION_INFO_V1(paynotify_transit);
PG_FUNCTION_INFO_V1(paynotify_guard_transition);

/* Nothing to set up: transitions are part of the configuration cache. */
void
pn_state_init(void)
{
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

	if (!pn_transition_allowed(cfg, from, to))
		illegal_transition(from, to);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(pn_status_value(&cfg->status_map, from));
	args[2] = CStringGetTextDatum(pn_status_value(&cfg->status_map, to));
	pn_history_own_move(true);
	if (pn_orders_execute(cfg, PLAN_ORDER_MOVE, args, NULL, 0) != SPI_OK_UPDATE)
		elog(ERROR, "order update failed");
	pn_history_own_move(false);
	if (SPI_processed != 1)
		return false;
	pn_history_move(cfg, order_no, from, to);
	return true;
}

typedef struct TransitCall
{
	Oid			fn_oid;
	Oid			caller;
	char	   *order_no;
	char	   *from;
	char	   *to;
	bool		moved;
} TransitCall;

/* The body of paynotify_transit, as the extension's owner. */
static void
transit_call(void *arg)
{
	TransitCall *c = (TransitCall *) arg;
	PnConfig   *cfg = pn_config(c->fn_oid);

	if (cfg->bound && OidIsValid(pn_relation_owner(cfg->orders_oid)) &&
		!pg_class_ownercheck(cfg->orders_oid, c->caller) &&
		pg_class_aclcheck(cfg->orders_oid, c->caller, ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", cfg->orders),
				 errdetail("paynotify_transit moves orders of the bound table for roles that own it or may UPDATE it.")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	c->moved = pn_transit(cfg, c->order_no, c->from, c->to);
	if (c->moved)
		pn_apply_parked(cfg, c->order_no);
	SPI_finish();
}

/*
 * paynotify_transit(order_no text, from_state text, to_state text)
 *   returns boolean
 *
 * A successful move also applies the notifications parked for this order.
 * Not SECURITY DEFINER: the caller must own the orders table or hold UPDATE
 * on it; paynotify's own tables are then used as the extension's owner, the
 * orders table as its owner, hooks as the roles that registered them.
 */
Datum
paynotify_transit(PG_FUNCTION_ARGS)
{
	TransitCall c;

	pn_require_read_committed("paynotify_transit");
	c.fn_oid = fcinfo->flinfo->fn_oid;
	c.caller = GetUserId();
	c.order_no = text_to_cstring(PG_GETARG_TEXT_PP(0));
	c.from = text_to_cstring(PG_GETARG_TEXT_PP(1));
	c.to = text_to_cstring(PG_GETARG_TEXT_PP(2));
	c.moved = false;
	pn_history_cause(NULL, NULL);
	pn_run_as(pn_function_owner(c.fn_oid), transit_call, &c);
	PG_RETURN_BOOL(c.moved);
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
	PnGuardConfig *cfg;
	TupleDesc	desc;
	const char *column;
	int			attnum;
	char	   *from,
			   *to;
	const char *from_state,
			   *to_state;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_UPDATE(td->tg_event) ||
		!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("paynotify_guard_transition must be a BEFORE UPDATE FOR EACH ROW trigger")));

	cfg = pn_guard_config(fcinfo->flinfo->fn_oid);
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
	if (RelationGetRelid(td->tg_relation) == cfg->orders_oid &&
		strcmp(column, cfg->status_col_name) == 0)
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
	if (RelationGetRelid(td->tg_relation) == cfg->orders_oid &&
		strcmp(column, cfg->status_col_name) == 0)
		pn_history_guard(fcinfo->flinfo->fn_oid, td, from_state, to_state);
	return PointerGetDatum(td->tg_newtuple);
}
