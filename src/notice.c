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
	[PN_ACT_PAY_COMBINE] = "pay_combine",
	[PN_ACT_DISPUTE_OPENED] = "dispute_opened",
	[PN_ACT_DISPUTE_WON] = "dispute_won",
	[PN_ACT_DISPUTE_LOST] = "dispute_lost",
	[PN_ACT_PAYMENT_FAILED] = "payment_failed",
	[PN_ACT_AGREEMENT_SIGNED] = "agreement_signed",
	[PN_ACT_AGREEMENT_ENDED] = "agreement_ended",
};

/*
 * The numbers rows written before names held, in the order PnAction had
 * then: keep this table as it is whatever becomes of the enum.
 */
static const PnAction legacy_actions[] = {
	PN_ACT_NONE, PN_ACT_PAY, PN_ACT_REFUND, PN_ACT_REFUND_FAILED, PN_ACT_CLOSE
};

static const char *action_name(PnAction action);
static bool action_from_jsonb(Jsonb *j, PnAction *action);

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
	if (n->sub_merchant != NULL)
		pn_jsonb_push_text(st, "sub_merchant", n->sub_merchant);
	pn_jsonb_push_text(st, "refund_id", n->refund_id);
	if (n->agreement_id != NULL)
		pn_jsonb_push_text(st, "agreement_id", n->agreement_id);
	pn_jsonb_push_int64(st, "order_amount", n->order_amount);
	pn_jsonb_push_int64(st, "refund_amount", n->refund_amount);
	pn_jsonb_push_int64(st, "refunded_total", n->refunded_total);
	if (n->nsubs > 0)
	{
		pn_jsonb_push_key(st, "sub_orders");
		(void) pushJsonbValue(st, WJB_BEGIN_ARRAY, NULL);
		for (int i = 0; i < n->nsubs; i++)
		{
			(void) pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
			pn_jsonb_push_text(st, "order_no", n->subs[i].order_no);
			pn_jsonb_push_text(st, "trade_no", n->subs[i].trade_no);
			pn_jsonb_push_int64(st, "amount", n->subs[i].amount);
			pn_jsonb_push_text(st, "currency", n->subs[i].currency);
			if (n->subs[i].sub_merchant != NULL)
				pn_jsonb_push_text(st, "sub_merchant", n->subs[i].sub_merchant);
			(void) pushJsonbValue(st, WJB_END_OBJECT, NULL);
		}
		(void) pushJsonbValue(st, WJB_END_ARRAY, NULL);
	}
	if (n->dispute_amount >= 0)
		pn_jsonb_push_int64(st, "dispute_amount", n->dispute_amount);
	if (n->detail != NULL)
		pn_jsonb_push_jsonb(st, "detail", n->detail);
	if (n->end_needs_no_sign)
		pn_jsonb_push_bool(st, "end_needs_no_sign", true);
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
static bool
action_from_jsonb(Jsonb *j, PnAction *action)
{
	char	   *name;
	int64		number;

	if (pn_json_string(j, "action", &name))
	{
		for (int i = 0; i < (int) lengthof(action_names); i++)
			if (strcmp(action_names[i], name) == 0)
			{
				*action = (PnAction) i;
				return true;
			}
	}
	else if (pn_json_int64(j, "action", &number) &&
			 number >= 0 && number < (int64) lengthof(legacy_actions))
	{
		*action = legacy_actions[number];
		return true;
	}
	return false;
}

/*
 * Why a stored notice is not one paynotify wrote (a hand-edited row), or
 * NULL: an object with a known action, text fields that are strings (or
 * null), amounts that are integers.
 */
const char *
pn_notice_fault(Jsonb *j)
{
	static const char *const texts[] = {"notify_id", "event_type", "order_no", "trade_no",
	"currency", "sub_merchant", "refund_id", "agreement_id"};
	static const char *const amounts[] = {"order_amount", "refund_amount", "refunded_total",
	"dispute_amount"};
	PnAction	action;
	int64		v;
	char	   *str;
	bool		flag;

	if (!JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		return "it is not a JSON object";
	if (!action_from_jsonb(j, &action))
		return "its \"action\" is not one of paynotify's actions";
	for (size_t i = 0; i < lengthof(texts); i++)
	{
		JsonbValue	buf;
		JsonbValue *jv = getKeyJsonValueFromContainer(&j->root, texts[i],
												  strlen(texts[i]), &buf);

		if (jv != NULL && jv->type != jbvNull && !pn_json_string(j, texts[i], &str))
			return psprintf("its \"%s\" is not a string", texts[i]);
	}
	for (size_t i = 0; i < lengthof(amounts); i++)
		if (pn_json_present(j, amounts[i]) && !pn_json_int64(j, amounts[i], &v))
			return psprintf("its \"%s\" is not an integer", amounts[i]);
	if (pn_json_present(j, "detail"))
	{
		JsonbValue	buf;
		JsonbValue *jv = pn_json_value(j, "detail", &buf);

		if (jv == NULL || jv->type != jbvBinary || !JsonContainerIsObject(jv->val.binary.data))
			return "its \"detail\" is not a JSON object";
	}
	if (pn_json_present(j, "end_needs_no_sign") && !pn_json_bool(j, "end_needs_no_sign", &flag))
		return "its \"end_needs_no_sign\" is not a boolean";
	if (pn_json_present(j, "sub_orders") || action == PN_ACT_PAY_COMBINE)
	{
		Jsonb	  **subs;
		int			nsubs;

		if (!pn_json_objects(j, "sub_orders", PN_MAX_SUB_ORDERS, &subs, &nsubs) ||
			(action == PN_ACT_PAY_COMBINE && nsubs == 0))
			return "its \"sub_orders\" is not a list of sub-orders";
		for (int i = 0; i < nsubs; i++)
			if (!pn_json_string(subs[i], "order_no", &str) ||
				!pn_json_string(subs[i], "trade_no", &str) ||
				!pn_json_string(subs[i], "currency", &str) ||
				!pn_json_int64(subs[i], "amount", &v) ||
				(pn_json_present(subs[i], "sub_merchant") &&
				 !pn_json_string(subs[i], "sub_merchant", &str)))
				return "its \"sub_orders\" is not a list of sub-orders";
	}
	return NULL;
}

/* The inverse of pn_notice_to_jsonb. */
PnNotice *
pn_notice_from_jsonb(Jsonb *j, const char *notify_id)
{
	PnNotice   *n = palloc0(sizeof(PnNotice));
	const char *fault = pn_notice_fault(j);

	/*
	 * Never read a notice paynotify did not write as some other event (or
	 * as "nothing to do"): the notification stays failed or parked, visibly.
	 */
	if (fault != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("paynotify: the stored notice of notification \"%s\" is malformed: %s",
						notify_id, fault),
				 errhint("Its next delivery by the gateway applies it; or resend it from the gateway's merchant console.")));
	n->notify_id = pstrdup(notify_id);
	(void) action_from_jsonb(j, &n->action);
	(void) pn_json_string(j, "event_type", &n->event_type);
	(void) pn_json_string(j, "order_no", &n->order_no);
	(void) pn_json_string(j, "trade_no", &n->trade_no);
	(void) pn_json_string(j, "currency", &n->currency);
	(void) pn_json_string(j, "sub_merchant", &n->sub_merchant);
	(void) pn_json_string(j, "refund_id", &n->refund_id);
	(void) pn_json_string(j, "agreement_id", &n->agreement_id);
	if (!pn_json_int64(j, "order_amount", &n->order_amount))
		n->order_amount = -1;
	if (!pn_json_int64(j, "refund_amount", &n->refund_amount))
		n->refund_amount = -1;
	if (!pn_json_int64(j, "refunded_total", &n->refunded_total))
		n->refunded_total = -1;
	if (!pn_json_int64(j, "dispute_amount", &n->dispute_amount))
		n->dispute_amount = -1;
	if (!pn_json_bool(j, "end_needs_no_sign", &n->end_needs_no_sign))
		n->end_needs_no_sign = false;
	if (pn_json_present(j, "detail"))
	{
		JsonbValue	buf;
		JsonbValue *jv = pn_json_value(j, "detail", &buf);

		n->detail = JsonbValueToJsonb(jv);
	}
	if (pn_json_present(j, "sub_orders"))
	{
		Jsonb	  **subs;

		(void) pn_json_objects(j, "sub_orders", PN_MAX_SUB_ORDERS, &subs, &n->nsubs);
		n->subs = palloc0(sizeof(PnSubOrder) * Max(n->nsubs, 1));
		for (int i = 0; i < n->nsubs; i++)
		{
			(void) pn_json_string(subs[i], "order_no", &n->subs[i].order_no);
			(void) pn_json_string(subs[i], "trade_no", &n->subs[i].trade_no);
			(void) pn_json_string(subs[i], "currency", &n->subs[i].currency);
			(void) pn_json_int64(subs[i], "amount", &n->subs[i].amount);
			(void) pn_json_string(subs[i], "sub_merchant", &n->subs[i].sub_merchant);
		}
	}
	return n;
}

/*
 * What an agreement notice carries besides its action (PnNotice.detail):
 * the agreement, the merchant's reference of it, the plan, the gateway's
 * word for its state, and when it was signed or ended (unix seconds; -1
 * not stated).  NULL strings are left out.
 */
Jsonb *
pn_agreement_detail(const char *agreement_id, const char *merchant_ref, const char *plan_id,
					const char *gateway_state, int64 signed_at, int64 ended_at)
{
	JsonbParseState *st = NULL;

	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	pn_jsonb_push_text(&st, "agreement_id", agreement_id);
	pn_jsonb_push_text(&st, "merchant_ref", merchant_ref);
	pn_jsonb_push_text(&st, "plan_id", plan_id);
	pn_jsonb_push_text(&st, "gateway_state", gateway_state);
	if (signed_at >= 0)
		pn_jsonb_push_int64(&st, "signed_at", signed_at);
	if (ended_at >= 0)
		pn_jsonb_push_int64(&st, "ended_at", ended_at);
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/* longer than a notice's id may be */
static bool
id_too_long(const char *id)
{
	return id != NULL && strlen(id) > PN_MAX_ID_LEN;
}

/*
 * Bound the ids an authentic notice carries (PN_MAX_ID_LEN), once, before
 * anything is written: the first one longer is the notice's anomaly
 * ("<field>_too_long"), recorded and acknowledged, never applied.  An
 * order number too long is dropped from the notice, so that the log row
 * and the anomaly are written under no order (their keys hold it); the
 * payload keeps it.  The notify id is bounded by the caller, which
 * refuses it.
 */
void
pn_notice_bound(PnNotice *n)
{
	const char *kind = NULL;
	char	   *dispute_id = NULL;

	if (n->anomaly != NULL)
		return;
	if (id_too_long(n->order_no))
		kind = "order_no_too_long";
	else if (id_too_long(n->trade_no))
		kind = "trade_no_too_long";
	else if (id_too_long(n->refund_id))
		kind = "refund_id_too_long";
	else if (id_too_long(n->agreement_id))
		kind = "agreement_id_too_long";
	else if (id_too_long(n->sub_merchant))
		kind = "sub_merchant_too_long";
	else if (n->detail != NULL && pn_json_string(n->detail, "dispute_id", &dispute_id) &&
			 id_too_long(dispute_id))
		kind = "dispute_id_too_long";
	for (int i = 0; kind == NULL && i < n->nsubs; i++)
	{
		if (id_too_long(n->subs[i].order_no))
			kind = "order_no_too_long";
		else if (id_too_long(n->subs[i].trade_no))
			kind = "trade_no_too_long";
		else if (id_too_long(n->subs[i].sub_merchant))
			kind = "sub_merchant_too_long";
	}
	if (kind == NULL)
		return;
	n->anomaly = kind;
	if (id_too_long(n->order_no))
		n->order_no = NULL;
}
