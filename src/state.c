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

#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "paynotify.h"
#include "pnconfig.h"

PG_FUNCTION_INFO_V1(paynotify_transit);
PG_FUNCTION_INFO_V1(paynotify_guard_transition);

/* Nothing to set up: transitions are part of the configuration cache. */
void
pn_state_init(void)
{
}

/* Whether from → to is in the transitions table. */
bool
pn_transition_allowed(PnConfig *cfg, const char *from, const char *to)
{
	for (int i = 0; i < cfg->ntransitions; i++)
		if (strcmp(cfg->transitions[2 * i], from) == 0 &&
			strcmp(cfg->transitions[2 * i + 1], to) == 0)
			return true;
	return false;
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
 * this call made the move.  SPI must be connected.
 */
bool
pn_transit(PnConfig *cfg, const char *order_no, const char *from, const char *to)
{
	Datum		args[3];

	if (!pn_transition_allowed(cfg, from, to))
		illegal_transition(from, to);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(from);
	args[2] = CStringGetTextDatum(to);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_ORDER_MOVE), args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "order update failed");
	return SPI_processed == 1;
}

/*
 * paynotify_transit(order_no text, from_state text, to_state text)
 *   returns boolean
 *
 * A successful move also applies the notifications parked for this order.
 */
Datum
paynotify_transit(PG_FUNCTION_ARGS)
{
	PnConfig   *cfg;
	char	   *order_no = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *from = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *to = text_to_cstring(PG_GETARG_TEXT_PP(2));
	bool		moved;

	pn_require_read_committed("paynotify_transit");
	cfg = pn_config(fcinfo->flinfo->fn_oid);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	moved = pn_transit(cfg, order_no, from, to);
	if (moved)
		pn_apply_parked(cfg, order_no);
	SPI_finish();
	PG_RETURN_BOOL(moved);
}

/*
 * paynotify_guard_transition() BEFORE UPDATE row trigger.
 *
 * The status column is the trigger's first argument, else the bound status
 * column, else "status".  Any change of it must be a legal transition.
 */
Datum
paynotify_guard_transition(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	PnConfig   *cfg;
	TupleDesc	desc;
	const char *column;
	int			attnum;
	char	   *from,
			   *to;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_UPDATE(td->tg_event) ||
		!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("paynotify_guard_transition must be a BEFORE UPDATE FOR EACH ROW trigger")));

	cfg = pn_config(fcinfo->flinfo->fn_oid);
	if (td->tg_trigger->tgnargs > 0)
		column = td->tg_trigger->tgargs[0];
	else
		column = cfg->bound ? cfg->status_col_name : "status";
	desc = RelationGetDescr(td->tg_relation);
	attnum = SPI_fnumber(desc, column);
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", column,
						RelationGetRelationName(td->tg_relation))));

	from = SPI_getvalue(td->tg_trigtuple, desc, attnum);
	to = SPI_getvalue(td->tg_newtuple, desc, attnum);
	if (from != NULL && to != NULL && strcmp(from, to) != 0 &&
		!pn_transition_allowed(cfg, from, to))
		illegal_transition(from, to);
	if (from != NULL && to == NULL)
		illegal_transition(from, "NULL");
	return PointerGetDatum(td->tg_newtuple);
}
