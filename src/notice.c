/*-------------------------------------------------------------------------
 *
 * notice.c
 *	  A notice (what a gateway extracted from an authentic notification,
 *	  PnNotice) as jsonb and back: kept with a parked notification in
 *	  payment_notify_log.notice, recorded as an anomaly's detail, and passed
 *	  to hooks.
 *
 * The action is stored by name ("pay", "refund", ...), never as the
 * PnAction's number, so stored rows do not depend on the enum's order.
 * Rows written before names were stored hold the number; reading accepts
 * both.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/jsonb.h"

#include "paynotify.h"

/* The stored names of the actions, indexed by PnAction. */
static const char *const action_names[] = {
	[PN_ACT_NONE] = "none",
	[PN_ACT_PAY] = "pay",
	[PN_ACT_REFUND] = "refund",
	[PN_ACT_REFUND_FAILED] = "refund_failed",
	[PN_ACT_CLOSE] = "close",
};

/*
 * The numbers rows written before names held, in the order PnAction had
 * then: keep this table as it is whatever becomes of the enum.
 */
static const PnAction legacy_actions[] = {
	PN_ACT_NONE, PN_ACT_PAY, PN_ACT_REFUND, PN_ACT_REFUND_FAILED, PN_ACT_CLOSE
};

static const char *action_name(PnAction action);
static PnAction action_from_jsonb(Jsonb *j);

/* The stored name of an action. */
static const char *
action_name(PnAction action)
{
	if ((int) action >= 0 && (int) action < (int) lengthof(action_names))
		return action_names[action];
	return action_names[PN_ACT_NONE];
}

/*
 * Push the notice's extracted fields (not its payload) as one object: the
 * whole value when *st is NULL, else the value of the key just pushed.
 */
JsonbValue *
pn_notice_push(JsonbParseState **st, const PnNotice *n)
{
	(void) pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
	pn_jsonb_push_text(st, "action", action_name(n->action));
	pn_jsonb_push_text(st, "notify_id", n->notify_id);
	pn_jsonb_push_text(st, "event_type", n->event_type);
	pn_jsonb_push_text(st, "order_no", n->order_no);
	pn_jsonb_push_text(st, "trade_no", n->trade_no);
	pn_jsonb_push_text(st, "currency", n->currency);
	pn_jsonb_push_text(st, "refund_id", n->refund_id);
	pn_jsonb_push_int64(st, "order_amount", n->order_amount);
	pn_jsonb_push_int64(st, "refund_amount", n->refund_amount);
	pn_jsonb_push_int64(st, "refunded_total", n->refunded_total);
	return pushJsonbValue(st, WJB_END_OBJECT, NULL);
}

/* The extracted fields of a notice (not its payload) as jsonb. */
Jsonb *
pn_notice_to_jsonb(const PnNotice *n)
{
	JsonbParseState *st = NULL;

	return JsonbValueToJsonb(pn_notice_push(&st, n));
}

/* The action of a stored notice: its name, or a number of old rows. */
static PnAction
action_from_jsonb(Jsonb *j)
{
	char	   *name;
	int64		number;

	if (pn_json_string(j, "action", &name))
	{
		for (int i = 0; i < (int) lengthof(action_names); i++)
			if (strcmp(action_names[i], name) == 0)
				return (PnAction) i;
	}
	else if (pn_json_int64(j, "action", &number) &&
			 number >= 0 && number < (int64) lengthof(legacy_actions))
		return legacy_actions[number];
	return PN_ACT_NONE;
}

/* The inverse of pn_notice_to_jsonb. */
PnNotice *
pn_notice_from_jsonb(Jsonb *j, const char *notify_id)
{
	PnNotice   *n = palloc0(sizeof(PnNotice));

	n->notify_id = pstrdup(notify_id);
	n->action = action_from_jsonb(j);
	(void) pn_json_string(j, "event_type", &n->event_type);
	(void) pn_json_string(j, "order_no", &n->order_no);
	(void) pn_json_string(j, "trade_no", &n->trade_no);
	(void) pn_json_string(j, "currency", &n->currency);
	(void) pn_json_string(j, "refund_id", &n->refund_id);
	if (!pn_json_int64(j, "order_amount", &n->order_amount))
		n->order_amount = -1;
	if (!pn_json_int64(j, "refund_amount", &n->refund_amount))
		n->refund_amount = -1;
	if (!pn_json_int64(j, "refunded_total", &n->refunded_total))
		n->refunded_total = -1;
	return n;
}
