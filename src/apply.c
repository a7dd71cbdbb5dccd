/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  Layer 4, the business step, and the ledger's rules (docs/LEDGER.md):
 *	  move the order through the state machine, record the payment or
 *	  refund (the records: ledger.c), emit the event (its outbox row,
 *	  NOTIFY and hooks: event.c); park what arrives before the order is
 *	  ready for it, and apply it when the order gets there.
 *
 * The caller (step.c) runs pn_apply inside a subtransaction with SPI
 * connected: any error here rolls back everything this file did.  The
 * order row is locked (FOR UPDATE, or by the conditional UPDATE itself)
 * before anything is decided, so two different notifications about one
 * order take turns and the second sees what the first committed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "paynotify.h"
#include "pipeline.h"
#include "history.h"

PG_FUNCTION_INFO_V1(paynotify_transit);

static void apply_pay(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_refund(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_refund_failed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_close(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_combine(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_none(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static bool order_has_disputes(PnConfig *cfg, const char *order_no);
static bool disputes_took_all(PnConfig *cfg, const char *order_no);
static bool is_dispute(PnAction action);
static void apply_dispute(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void dispute_move(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						 const PnOrderRow *row);
static bool payment_mismatch(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							 const PnOrderRow *row, PnApplied *res);
static Jsonb *notification_detail(const PnChannel *ch, const PnNotice *n);
static void set_result(PnApplied *res, PnOutcome outcome, const char *status, const char *note);
static void anomaly_result(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						   PnApplied *res, const char *kind);
static void apply_parked(PnConfig *cfg, const char *order_no);
static void apply_parked_trade(PnConfig *cfg, const char *order_no,
							   const char *trade_no);
static void apply_parked_agreement(PnConfig *cfg, const char *channel,
								   const char *agreement_id);
static void apply_parked_listed(PnConfig *cfg, const char *order_no, const char *key);
static void apply_agreement(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_payment_failed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
								 PnApplied *res);
static bool agreement_ended(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);

/*
 * A payment or refund that names no order, of a trade recorded already: its
 * order is the one that trade paid (a Stripe PaymentIntent or Charge carries
 * none of its session's or invoice's metadata): it is applied as a notice
 * naming that order (*copy, returned); else n as it is, and a notice
 * naming no order is the anomaly no_order_number.
 */
const PnNotice *
pn_notice_order_by_trade(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnNotice *copy)
{
	char	   *order_no;

	if (n->anomaly != NULL || n->order_no != NULL || n->trade_no == NULL ||
		(n->action != PN_ACT_PAY && n->action != PN_ACT_REFUND &&
		 n->action != PN_ACT_REFUND_FAILED))
		return n;
	order_no = pn_payment_order(cfg, ch->name, n->trade_no);
	if (order_no == NULL)
		return n;
	*copy = *n;
	copy->order_no = order_no;
	return copy;
}

/* Apply one authentic notification; res says how it went. */
void
pn_apply(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	set_result(res, PN_PROCESSED, "succeeded", NULL);
	pn_history_cause(ch->name, n->notify_id);
	if (n->anomaly != NULL)
	{
		anomaly_result(cfg, ch, n, res, n->anomaly);
		return;
	}
	if (n->action != PN_ACT_NONE && n->order_no == NULL && !is_dispute(n->action) &&
		n->action != PN_ACT_PAYMENT_FAILED && n->action != PN_ACT_AGREEMENT_SIGNED &&
		n->action != PN_ACT_AGREEMENT_ENDED)
	{
		anomaly_result(cfg, ch, n, res, "no_order_number");
		return;
	}
	switch (n->action)
	{
		case PN_ACT_NONE:
			apply_none(cfg, ch, n, res);
			break;
		case PN_ACT_PAY:
			apply_pay(cfg, ch, n, res);
			break;
		case PN_ACT_REFUND:
			apply_refund(cfg, ch, n, res);
			break;
		case PN_ACT_REFUND_FAILED:
			apply_refund_failed(cfg, ch, n, res);
			break;
		case PN_ACT_CLOSE:
			apply_close(cfg, ch, n, res);
			break;
		case PN_ACT_PAY_COMBINE:
			apply_combine(cfg, ch, n, res);
			break;
		case PN_ACT_DISPUTE_OPENED:
		case PN_ACT_DISPUTE_WON:
		case PN_ACT_DISPUTE_LOST:
			apply_dispute(cfg, ch, n, res);
			break;
		case PN_ACT_PAYMENT_FAILED:
			apply_payment_failed(cfg, ch, n, res);
			break;
		case PN_ACT_AGREEMENT_SIGNED:
		case PN_ACT_AGREEMENT_ENDED:
			apply_agreement(cfg, ch, n, res);
			break;
	}
}

/*
 * A notification not applied: handed on (docs/LEDGER.md, "Not applied"),
 * for the order it names, else for the order whose payment recorded the
 * trade it names (a Stripe dispute's other events), locked like any order
 * an event is queued for, else for none.  A schema not yet at 1.3 has no
 * place for the event: recorded only.
 */
static void
apply_none(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	PnNotice	d = *n;

	if (!cfg->schema_13)
	{
		set_result(res, PN_IGNORED, "ignored", "event not applied");
		return;
	}
	if (d.agreement_id != NULL && cfg->schema_14 && d.detail != NULL)
	{
		/*
		 * a snapshot of an agreement in a state that moves nothing (a
		 * Stripe subscription past_due, unpaid, paused, incomplete): its
		 * gateway state kept while the agreement is in force (a payment
		 * not made that names its agreement carries no such detail)
		 */
		char	   *gateway_state = NULL;

		if (pn_json_string(d.detail, "gateway_state", &gateway_state))
		{
			pn_lock_agreement(cfg, ch->name, d.agreement_id);
			if (pn_agreement_get(cfg, ch->name, d.agreement_id) != NULL)
				pn_agreement_note(cfg, ch, &d, gateway_state);
		}
	}
	if (d.order_no == NULL && d.trade_no != NULL)
	{
		d.order_no = pn_payment_order(cfg, ch->name, d.trade_no);
		/* an order gone from the table (its payment kept): of no order */
		if (d.order_no != NULL && !pn_order_lock(cfg, d.order_no))
			d.order_no = NULL;
	}
	pn_emit(cfg, "notification", ch, &d, -1, notification_detail(ch, n));
	set_result(res, PN_IGNORED, "ignored", "not applied: handed on");
}

/* Whether lost disputes took all the order kept of its payments. */
static bool
disputes_took_all(PnConfig *cfg, const char *order_no)
{
	int64		open;
	int64		lost;
	int64		lost_amount;

	return cfg->schema_13 && pn_dispute_tally(cfg, order_no, &open, &lost, &lost_amount) > 0 &&
		lost > 0 && lost_amount >= pn_order_kept(cfg, order_no);
}

/* Whether the order has disputes recorded (never on a schema before 1.3). */
static bool
order_has_disputes(PnConfig *cfg, const char *order_no)
{
	int64		open;
	int64		lost;
	int64		lost_amount;

	return cfg->schema_13 && pn_dispute_tally(cfg, order_no, &open, &lost, &lost_amount) > 0;
}

static bool
is_dispute(PnAction action)
{
	return action == PN_ACT_DISPUTE_OPENED || action == PN_ACT_DISPUTE_WON ||
		action == PN_ACT_DISPUTE_LOST;
}

/*
 * A dispute of a trade (docs/LEDGER.md, "Disputes"): its event, with the
 * amount disputed, for the order the trade's payment record names.  No
 * trade or no record of it (no_trade_number, dispute_unmatched), a record
 * of another order than the event's metadata names
 * (trade_of_another_order), or no dispute id (no_dispute_id), is an
 * anomaly, and the event is queued all the same, for the recorded order
 * or none, with nothing recorded.  Otherwise the dispute is recorded once
 * (paynotify_dispute), and the order's state follows from all its
 * disputes (dispute_move).  Stripe sends a dispute's events in any order:
 * an open or a close of a dispute recorded already (a close that came
 * first, a second close) moves nothing and is handed on as a
 * notification.  Nothing of the ledger changes: a lost dispute is no
 * refund record.  A schema not yet at 1.3 has no place for the event: the
 * notification is recorded only, as before.
 */
static void
apply_dispute(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	const char *event = n->action == PN_ACT_DISPUTE_OPENED ? "dispute_opened" :
		n->action == PN_ACT_DISPUTE_WON ? "dispute_won" : "dispute_lost";
	PnNotice	d = *n;
	char	   *recorded;
	char	   *dispute_id = NULL;
	PnOrderRow	row;
	bool		recorded_now;

	if (!cfg->schema_13)
	{
		set_result(res, PN_IGNORED, "ignored", "event not applied");
		return;
	}
	recorded = n->trade_no ? pn_payment_order(cfg, ch->name, n->trade_no) : NULL;
	d.order_no = recorded;
	if (!pn_json_string(n->detail, "dispute_id", &dispute_id) || dispute_id[0] == '\0')
		dispute_id = NULL;
	if (recorded == NULL || (n->order_no != NULL && strcmp(n->order_no, recorded) != 0) ||
		dispute_id == NULL)
	{
		pn_emit(cfg, event, ch, &d, n->dispute_amount, n->detail);
		anomaly_result(cfg, ch, n, res, n->trade_no == NULL ? "no_trade_number" :
					   recorded == NULL ? "dispute_unmatched" :
					   dispute_id == NULL ? "no_dispute_id" : "trade_of_another_order");
		return;
	}
	pn_order_get(cfg, recorded, &row);
	recorded_now = n->action == PN_ACT_DISPUTE_OPENED ?
		pn_dispute_open(cfg, ch, &d, dispute_id) :
		pn_dispute_close(cfg, ch, &d, dispute_id,
						 n->action == PN_ACT_DISPUTE_WON ? "won" : "lost");
	if (!recorded_now)
	{
		/* what it says of the amount counts, if the record had none */
		if (pn_dispute_fill_amount(cfg, ch, &d, dispute_id))
			dispute_move(cfg, ch, &d, &row);
		pn_emit(cfg, "notification", ch, &d, -1, notification_detail(ch, n));
		set_result(res, PN_IGNORED, "ignored", "dispute already recorded: handed on");
		return;
	}
	dispute_move(cfg, ch, &d, &row);
	pn_emit(cfg, event, ch, &d, n->dispute_amount, n->detail);
}

/*
 * The order's state from all its disputes and refunds (docs/LEDGER.md,
 * "Disputes"), after a dispute notification, and after a refund of an
 * order with disputes.  A refunded or cancelled order stays.  While a
 * dispute is open the order is "disputed", where it may go there and come
 * back (none by default: then an open dispute holds nothing).  Else: if
 * refunds and lost disputes together took all it was paid, "refunded":
 * from "disputed"; else through "disputed" when a dispute was lost and
 * the state machine has the way, else the refunds' way (refunding), as a
 * refund does; refunds alone whose total is in doubt (the refund rule moved
 * nothing on them: refund_total_after_failure) do not.  Where it cannot
 * get there, an anomaly
 * (dispute_lost_not_refunded; refund_in_unrefundable_state for a refund
 * with no dispute lost).  Else back to the state it left for "disputed"
 * (disputed_order_not_restored where it cannot: moved there by hand),
 * and dispute_lost_in_part where a loss took part of it (not again for
 * an open: it changes no loss).  Each step is
 * decided from the records alone, so the end state does not depend on the
 * order the notifications came in.
 */
static void
dispute_move(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const PnOrderRow *row)
{
	const char *status = row->status;
	int64		open;
	int64		lost;
	int64		lost_amount;
	bool		disputed = strcmp(status, "disputed") == 0;

	if (strcmp(status, "refunded") == 0 || strcmp(status, "cancelled") == 0)
		return;
	(void) pn_dispute_tally(cfg, n->order_no, &open, &lost, &lost_amount);
	if (open > 0 && (disputed || (pn_transition_allowed(cfg, status, "disputed") &&
								  pn_transition_allowed(cfg, "disputed", status))))
	{
		if (!disputed)
			(void) pn_transit(cfg, n->order_no, status, "disputed");
		return;
	}
	if (lost_amount >= pn_order_kept(cfg, n->order_no) &&
		(lost > 0 || !pn_order_refunds_doubtful(cfg, n->order_no)))
	{
		bool		via_disputed = !disputed &&
			pn_transition_allowed(cfg, status, "disputed") &&
			pn_transition_allowed(cfg, "disputed", "refunded");
		bool		via_refunding = !disputed &&
			(strcmp(status, "refunding") == 0 ||
			 (pn_transition_allowed(cfg, status, "refunding") &&
			  pn_transition_allowed(cfg, "refunding", "refunded")));

		if (via_disputed && (lost > 0 || !via_refunding))
			disputed = pn_transit(cfg, n->order_no, status, "disputed");
		else if (via_refunding)
		{
			if (strcmp(status, "refunding") != 0)
				(void) pn_transit(cfg, n->order_no, status, "refunding");
			(void) pn_transit(cfg, n->order_no, "refunding", "refunded");
			return;
		}
		if (disputed && pn_transition_allowed(cfg, "disputed", "refunded"))
		{
			(void) pn_transit(cfg, n->order_no, "disputed", "refunded");
			return;
		}
		if (lost > 0)
			pn_anomaly(cfg, ch->name, n, "dispute_lost_not_refunded");
		else if (n->action == PN_ACT_REFUND)
			pn_anomaly(cfg, ch->name, n, "refund_in_unrefundable_state");
	}
	else if (lost > 0 && n->action != PN_ACT_DISPUTE_OPENED)
		pn_anomaly(cfg, ch->name, n, "dispute_lost_in_part");
	if (disputed)
	{
		char	   *before = pn_history_before(cfg, n->order_no, "disputed");

		if (before != NULL && pn_transition_allowed(cfg, "disputed", before))
			(void) pn_transit(cfg, n->order_no, "disputed", before);
		else
			pn_anomaly(cfg, ch->name, n, "disputed_order_not_restored");
	}
}

/*
 * What a notification event carries: the gateway, its event type and the
 * verified payload (decrypted for WeChat Pay), for the application to act
 * on what paynotify does not apply itself.  Without the bearer values the
 * gateways say are never to be passed on, as the event leaves the database
 * to hooks and endpoints: Stripe's client_secret of a PaymentIntent,
 * SetupIntent or Source (the key), and any string holding one (a
 * next_action's redirect URL carries it as payment_intent_client_secret=
 * pi_..._secret_...), replaced by "redacted".
 */
static Jsonb *
notification_detail(const PnChannel *ch, const PnNotice *n)
{
	static const char *const bearer[] = {"client_secret"};
	static const char *const marks[] = {"_secret_"};
	JsonbParseState *st = NULL;

	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	pn_jsonb_push_text(&st, "gateway", ch->gw->name);
	pn_jsonb_push_text(&st, "event_type", n->event_type);
	if (n->payload != NULL)
		pn_jsonb_push_jsonb(&st, "payload",
							pn_jsonb_redacted(n->payload, bearer, lengthof(bearer),
											  marks, lengthof(marks)));
	else
		pn_jsonb_push_text(&st, "payload", NULL);
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/*
 * A combine payment: each sub-order is a payment of its own order, applied
 * as one (apply_pay), all in this step: all or none.  The sub-orders come
 * sorted by order number, so two steps lock shared orders in one order.
 * Processed when one of them paid; else how the first went, every
 * sub-order's note kept.
 */
static void
apply_combine(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	StringInfoData notes;
	bool		paid = false;
	bool		anomaly = false;

	initStringInfo(&notes);
	for (int i = 0; i < n->nsubs; i++)
	{
		PnNotice	sub = *n;
		PnApplied	r;

		sub.action = PN_ACT_PAY;
		sub.order_no = n->subs[i].order_no;
		sub.trade_no = n->subs[i].trade_no;
		sub.order_amount = n->subs[i].amount;
		sub.currency = n->subs[i].currency;
		sub.sub_merchant = n->subs[i].sub_merchant;
		sub.nsubs = 0;
		sub.subs = NULL;
		set_result(&r, PN_PROCESSED, "succeeded", NULL);
		apply_pay(cfg, ch, &sub, &r);
		if (r.outcome == PN_PROCESSED && r.note == NULL)
		{
			paid = true;
			continue;
		}
		paid |= (r.outcome == PN_PROCESSED);
		anomaly |= (strcmp(r.log_status, "anomaly") == 0);
		appendStringInfo(&notes, "%s%s: %s", notes.len > 0 ? "; " : "", sub.order_no,
						 r.note ? r.note : r.log_status);
	}
	if (paid)
		set_result(res, PN_PROCESSED, "succeeded", notes.len > 0 ? notes.data : NULL);
	else
		set_result(res, PN_IGNORED, anomaly ? "anomaly" : "ignored", notes.data);
}

/*
 * A payment of trade T: the order's first payment record is its payment
 * (pending → paid here, or already moved by the application); a later one
 * of another trade is a double payment, one for a cancelled order is paid
 * after cancel.  Every read below runs after the order row is locked and
 * with a fresh snapshot (read_only = false).
 */
static void
apply_pay(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	Datum		args[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	PnOrderRow	row;
	int64		amount;
	bool		all_refunded;
	bool		paid;
	char	   *note;
	char	   *recorded;

	if (n->trade_no == NULL)
	{
		anomaly_result(cfg, ch, n, res, "no_trade_number");
		return;
	}
	if (!pn_transition_allowed(cfg, "pending", "paid"))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the state machine has no transition from \"pending\" to \"paid\"")));

	/*
	 * A trade recorded before never pays again, not even another order (a
	 * Stripe payment intent whose metadata was changed): the record names
	 * its order.
	 */
	recorded = pn_payment_order(cfg, ch->name, n->trade_no);
	if (recorded != NULL && strcmp(recorded, n->order_no) != 0)
	{
		pn_order_get(cfg, n->order_no, &row);
		anomaly_result(cfg, ch, n, res, "trade_of_another_order");
		return;
	}

	/* The common case in one statement: pending, right amount and currency → paid. */
	args[0] = CStringGetTextDatum(n->order_no);
	args[1] = CStringGetTextDatum(pn_status_value(&cfg->status_map, "pending"));
	args[2] = CStringGetTextDatum(pn_status_value(&cfg->status_map, "paid"));
	args[3] = Int64GetDatum(n->order_amount);
	args[4] = n->currency ? CStringGetTextDatum(n->currency) : (Datum) 0;
	if (!cfg->has_amount)
		nulls[3] = 'n';
	if (n->currency == NULL)
		nulls[4] = 'n';
	pn_history_own_move_of(cfg, n->order_no, "pending", "paid");
	if (pn_orders_execute(cfg, PLAN_ORDER_PAY, args, nulls, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: order update failed");
	paid = (SPI_processed == 1);
	pn_history_own_move_done(cfg, n->order_no, paid);
	if (paid)
	{
		pn_history_move(cfg, n->order_no, "pending", "paid");
		pn_payment_insert(cfg, ch, n);
		if (agreement_ended(cfg, ch, n))
			pn_anomaly(cfg, ch->name, n, "charge_after_agreement_ended");
		pn_emit(cfg, "paid", ch, n, n->order_amount, NULL);
		apply_parked(cfg, n->order_no);
		return;
	}

	/* Not moved: find out why, holding the row. */
	pn_order_get(cfg, n->order_no, &row);
	if (strcmp(row.status, "pending") == 0)
	{
		if (!payment_mismatch(cfg, ch, n, &row, res))
			elog(ERROR, "paynotify: order \"%s\" is pending but could not be paid", n->order_no);
		return;
	}
	if (pn_payment_get(cfg, ch->name, n->trade_no, &amount, NULL))
	{
		/*
		 * The same payment, found by a query (docs/RECONCILIATION.md) before
		 * its notification came, or found again by one: the gateway's word
		 * once more, a duplicate.  Otherwise another notification of a
		 * recorded payment (TRADE_FINISHED after TRADE_SUCCESS): ignored.
		 */
		if (pn_notice_from_query(n))
			set_result(res, PN_DUPLICATE, "ignored", "payment already recorded");
		else if (pn_payment_by_query(cfg, ch->name, n->trade_no))
			set_result(res, PN_DUPLICATE, "ignored", "payment recorded by a query");
		else
			set_result(res, PN_IGNORED, "ignored", "payment already recorded");
		return;
	}
	if (pn_order_trades(cfg, n->order_no, &all_refunded) == 0 &&
		strcmp(row.status, "cancelled") != 0 && strcmp(row.status, "refunded") != 0)
	{
		/*
		 * moved by the application (its own UPDATE, paynotify_transit): still
		 * its payment, if it is the order's amount and currency (the
		 * application may have trusted a forged synchronous return)
		 */
		if (payment_mismatch(cfg, ch, n, &row, res))
			return;
		pn_payment_insert(cfg, ch, n);
		if (agreement_ended(cfg, ch, n))
			pn_anomaly(cfg, ch->name, n, "charge_after_agreement_ended");
		pn_emit(cfg, "paid", ch, n, n->order_amount, NULL);
		apply_parked(cfg, n->order_no);
		note = psprintf("order was already %s", row.status);
		set_result(res, PN_PROCESSED, "succeeded", note);
		return;
	}
	/* Another payment: the money is real, someone must act. */
	pn_payment_insert(cfg, ch, n);
	anomaly_result(cfg, ch, n, res,
				   strcmp(row.status, "cancelled") == 0 ? "paid_after_cancel" : "double_payment");
	apply_parked_trade(cfg, n->order_no, n->trade_no);
}

/*
 * Money went back on one trade: record it once per refund id (a failed
 * refund may still succeed); the order is refunded when all its trades are.
 */
static void
apply_refund(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	PnOrderRow	row;
	const char *trade_no = n->trade_no;
	const char *refund_id = n->refund_id ? n->refund_id : n->notify_id;
	char	   *existing;
	char	   *recorded;
	int64		paid,
				before,
				amount;
	bool		all_refunded;
	bool		doubtful = false;

	pn_order_get(cfg, n->order_no, &row);
	if (trade_no == NULL)
	{
		/* the gateway named no trade: the order's only one, if it has one */
		if (pn_order_trades(cfg, n->order_no, &all_refunded) == 1)
			trade_no = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	}
	if (trade_no == NULL || !pn_payment_get(cfg, ch->name, trade_no, &paid, &recorded))
	{
		set_result(res, PN_PARKED, "parked", "waiting for the payment");
		return;
	}
	if (recorded == NULL || strcmp(recorded, n->order_no) != 0)
	{
		/* the trade paid another order, whose row is not locked here */
		anomaly_result(cfg, ch, n, res, "trade_of_another_order");
		return;
	}
	existing = pn_refund_get(cfg, ch->name, refund_id, n->order_no);
	if (existing != NULL && strcmp(existing, "succeeded") == 0)
	{
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	if (existing != NULL && ch->gw->refund_failure_final)
	{
		/* this gateway's failed refund stays failed: an older success */
		set_result(res, PN_IGNORED, "ignored", "refund already failed");
		return;
	}
	if (n->refund_amount < 0 && n->refunded_total < 0)
	{
		/*
		 * Neither this refund's amount nor the trade's refunded total could
		 * be read: nothing to record, and not "already recorded" either
		 */
		anomaly_result(cfg, ch, n, res, "refund_amount_unknown");
		return;
	}
	before = pn_refunded_sum(cfg, ch->name, trade_no, n->order_no);
	amount = n->refund_amount >= 0 ? n->refund_amount : n->refunded_total - before;
	if (amount <= 0)
	{
		/* an older cumulative total arriving late */
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	if (existing != NULL ? !pn_refund_succeed(cfg, ch, n, trade_no, amount)
		: !pn_refund_insert(cfg, ch, n, trade_no, amount, "succeeded"))
	{
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	if (before + amount > paid)
		pn_anomaly(cfg, ch->name, n, "refunded_more_than_paid");
	if (n->refund_amount < 0 && ch->gw->refund_failure_final &&
		pn_refund_failed_count(cfg, ch->name, trade_no, n->order_no) > 0)
	{
		/*
		 * A cumulative total on a trade where a refund failed: a snapshot
		 * taken before the failure still counts the failed refund, one
		 * taken after it does not, and this code does not tell them apart.
		 * The amount may be off: someone must look, and the order does not
		 * move on it.
		 */
		pn_anomaly(cfg, ch->name, n, "refund_total_after_failure");
		doubtful = true;
	}

	/*
	 * The order's status follows from all its trades, and from its
	 * disputes where it has any (1.3 schemas): what lost disputes took and
	 * what was refunded together, and no move while one is open.
	 */
	if (!doubtful && order_has_disputes(cfg, n->order_no))
		dispute_move(cfg, ch, n, &row);
	else if (!doubtful &&
		pn_order_trades(cfg, n->order_no, &all_refunded) > 0 && all_refunded &&
		strcmp(row.status, "refunded") != 0 && strcmp(row.status, "cancelled") != 0)
	{
		if (strcmp(row.status, "refunding") == 0 ||
			(pn_transition_allowed(cfg, row.status, "refunding") &&
			 pn_transition_allowed(cfg, "refunding", "refunded") &&
			 pn_transit(cfg, n->order_no, row.status, "refunding")))
			(void) pn_transit(cfg, n->order_no, "refunding", "refunded");
		else
			pn_anomaly(cfg, ch->name, n, "refund_in_unrefundable_state");
	}
	pn_emit(cfg, "refunded", ch, n, amount, NULL);
}

/*
 * A refund did not happen: record it once; a refunding order is paid again.
 * A succeeded refund goes back only where the gateway's failure is final
 * (Stripe's refund.failed): the ledger as if it had not succeeded, and a
 * refunded order is paid again where the state machine allows.
 */
static void
apply_refund_failed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	PnOrderRow	row;
	const char *refund_id = n->refund_id ? n->refund_id : n->notify_id;
	char	   *existing;
	int64		amount = Max(n->refund_amount, 0);

	pn_order_get(cfg, n->order_no, &row);
	if (n->trade_no != NULL)
	{
		char	   *recorded = pn_payment_order(cfg, ch->name, n->trade_no);

		if (recorded != NULL && strcmp(recorded, n->order_no) != 0)
		{
			/* the trade paid another order, whose row is not locked here */
			anomaly_result(cfg, ch, n, res, "trade_of_another_order");
			return;
		}
	}
	existing = pn_refund_get(cfg, ch->name, refund_id, n->order_no);
	if (existing != NULL && strcmp(existing, "succeeded") == 0 &&
		ch->gw->refund_failure_final)
	{
		if (!pn_refund_fail(cfg, ch, n, refund_id, &amount))
		{
			set_result(res, PN_IGNORED, "ignored", "refund already recorded");
			return;
		}

		/*
		 * The trade's refunds were recorded from cumulative totals: one
		 * taken after this refund, recorded before its failure came, was
		 * computed on it, and this row may hold more than the refund (it
		 * absorbed an older one).  Undone as recorded; someone must look.
		 */
		pn_anomaly(cfg, ch->name, n, "refund_failed_after_total");
		/* lost disputes may have taken what the refund gave back */
		if (strcmp(row.status, "refunded") == 0 && !disputes_took_all(cfg, n->order_no))
		{
			if (pn_transition_allowed(cfg, "refunded", "paid"))
				(void) pn_transit(cfg, n->order_no, "refunded", "paid");
			else
				pn_anomaly(cfg, ch->name, n, "refund_failed_after_refunded");
		}
	}
	else if (existing != NULL ||
			 !pn_refund_insert(cfg, ch, n, n->trade_no, amount, "failed"))
	{
		/* a succeeded refund never goes back here; a failed one is recorded once */
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	else if (ch->gw->refund_failure_final && n->trade_no != NULL &&
			 pn_refunded_sum(cfg, ch->name, n->trade_no, n->order_no) > 0)
	{
		/*
		 * The trade has succeeded refunds, none under this refund's id: a
		 * Stripe charge.refunded that did not carry its refunds' ids (API
		 * versions since 2022-11-15) recorded it under the event's id, and
		 * the ledger may still count it.  Someone must look.
		 */
		pn_anomaly(cfg, ch->name, n, "refund_failed_unmatched");
	}
	if (strcmp(row.status, "refunding") == 0)
		(void) pn_transit(cfg, n->order_no, "refunding", "paid");
	pn_emit(cfg, "refund_failed", ch, n, amount, NULL);
}

/* The trade closed unpaid: a pending order is cancelled. */
static void
apply_close(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	PnOrderRow	row;

	pn_order_get(cfg, n->order_no, &row);
	/* nothing more comes of the trade on this channel */
	pn_expectation_settle(cfg, n->order_no, "close", ch->name, n->notify_id);
	if (strcmp(row.status, "pending") != 0)
	{
		set_result(res, PN_IGNORED, "ignored", "order is not pending");
		return;
	}
	(void) pn_transit(cfg, n->order_no, "pending", "cancelled");
	pn_emit(cfg, "closed", ch, n, 0, NULL);
}

/*
 * A payment whose amount or currency is not the order's: record the anomaly
 * (res says so) and return true.
 */
static bool
payment_mismatch(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const PnOrderRow *row,
				 PnApplied *res)
{
	if (cfg->has_amount && (!row->has_amount || row->amount != n->order_amount))
		anomaly_result(cfg, ch, n, res, "amount_mismatch");
	else if (row->currency != NULL && n->currency != NULL &&
			 pg_strcasecmp(row->currency, n->currency) != 0)
		anomaly_result(cfg, ch, n, res, "currency_mismatch");
	else
		return false;
	return true;
}

static void
set_result(PnApplied *res, PnOutcome outcome, const char *status, const char *note)
{
	res->outcome = outcome;
	res->log_status = status;
	res->note = note;
}

/* Authentic but not applied: record the anomaly, acknowledge, move on. */
static void
anomaly_result(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res,
			   const char *kind)
{
	pn_anomaly(cfg, ch->name, n, kind);
	set_result(res, PN_IGNORED, "anomaly", kind);
}

/*
 * Apply every notification parked for this order, oldest first, now that
 * the order moved.  Runs inside the caller's business step: if one fails,
 * the move that released it fails too and is retried with it.
 */
static void
apply_parked(PnConfig *cfg, const char *order_no)
{
	apply_parked_trade(cfg, order_no, NULL);
}

/*
 * The order whose parked notifications this backend is applying: a hook
 * run by one of them may move the order with paynotify_transit, which
 * would apply the same list again (the one being applied included) from
 * inside the loop; that nested call leaves them to the loop.
 */
static const char *applying_order = NULL;

/* The same, for the notifications parked for one trade of the order only. */
static void
apply_parked_trade(PnConfig *cfg, const char *order_no, const char *trade_no)
{
	Datum		args[2];
	char		nulls[2] = {' ', ' '};

	if (applying_order != NULL && strcmp(applying_order, order_no) == 0)
		return;
	if (pn_log_none_parked(cfg, order_no))
		return;
	args[0] = CStringGetTextDatum(order_no);
	args[1] = trade_no ? CStringGetTextDatum(trade_no) : (Datum) 0;
	if (trade_no == NULL)
		nulls[1] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_PARKED_LIST), args, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: parked lookup failed");
	apply_parked_listed(cfg, order_no, order_no);
}

/*
 * The notifications parked for an agreement (an end that came before its
 * sign), now that it is signed: keyed by no order, as their log rows are.
 */
static void
apply_parked_agreement(PnConfig *cfg, const char *channel, const char *agreement_id)
{
	Datum		args[2];
	char	   *key = psprintf("agreement %s %s", channel, agreement_id);

	if (applying_order != NULL && strcmp(applying_order, key) == 0)
		return;
	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(agreement_id);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_PARKED_AGREEMENT), args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: parked lookup failed");
	apply_parked_listed(cfg, PN_NO_ORDER, key);
}

/*
 * Apply the parked notifications the last query listed (channel,
 * notify_id, notice), oldest first, and update their log rows (keyed by
 * order_no); key names what is being applied (applying_order).
 */
static void
apply_parked_listed(PnConfig *cfg, const char *order_no, const char *key)
{
	int			nparked;
	char	  **channels;
	char	  **ids;
	Jsonb	  **notices;
	const char *outer = applying_order;

	nparked = SPI_processed;
	if (nparked == 0)
		return;
	channels = palloc(sizeof(char *) * nparked);
	ids = palloc(sizeof(char *) * nparked);
	notices = palloc(sizeof(Jsonb *) * nparked);
	for (int i = 0; i < nparked; i++)
	{
		bool		isnull;
		Datum		d;

		channels[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		ids[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull);
		notices[i] = isnull ? NULL : DatumGetJsonbPCopy(d);
	}
	PG_TRY();
	{
		applying_order = key;
		for (int i = 0; i < nparked; i++)
		{
			const PnChannel *ch = pn_channel_find(cfg, channels[i]);
			PnNotice   *n;
			PnApplied	res;

			if (ch == NULL || notices[i] == NULL)
				continue;		/* channel removed: leave it parked, visibly */
			n = pn_notice_from_jsonb(notices[i], ids[i]);
			pn_apply(cfg, ch, n, &res);
			pn_log_update(cfg, channels[i], ids[i], order_no, notices[i], &res, NULL, false, NULL);
		}
	}
	PG_FINALLY();
	{
		applying_order = outer;
	}
	PG_END_TRY();
}

/*
 * Whether the payment names an agreement recorded as ended (1.4 schemas):
 * the charge still pays (the money moved), and someone must look.
 */
static bool
agreement_ended(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	char	   *state;

	if (n->agreement_id == NULL || !cfg->schema_14)
		return false;
	state = pn_agreement_get(cfg, ch->name, n->agreement_id);
	return state != NULL && strcmp(state, "ended") == 0;
}

/*
 * An agreement signed or ended (docs/GATEWAYS.md, "Agreements"), under
 * its lock.  A sign records it, queues agreement_signed and applies the
 * notices parked for it; a sign of a recorded agreement moves nothing
 * (its gateway state kept while signed).  An end of a signed agreement
 * ends it for good and queues agreement_ended; an end of an agreement not
 * recorded yet is parked until its sign comes, unless the gateway says it
 * needs none (end_needs_no_sign: it was never in force): then it is
 * recorded ended, unsigned, with no event, and the ends parked for it are
 * applied (they end nothing more); anything of an ended one is recorded
 * with it and moves nothing.  A schema not yet at 1.4 has no
 * place for it: recorded only.
 */
static void
apply_agreement(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	const char *event = n->action == PN_ACT_AGREEMENT_SIGNED ? "agreement_signed" :
		"agreement_ended";
	char	   *state;
	char	   *gateway_state = NULL;

	if (!cfg->schema_14)
	{
		set_result(res, PN_IGNORED, "ignored", "event not applied");
		return;
	}
	if (n->agreement_id == NULL)
	{
		anomaly_result(cfg, ch, n, res, "no_agreement_id");
		return;
	}
	if (n->detail != NULL)
		(void) pn_json_string(n->detail, "gateway_state", &gateway_state);
	pn_lock_agreement(cfg, ch->name, n->agreement_id);
	state = pn_agreement_get(cfg, ch->name, n->agreement_id);
	if (state != NULL && strcmp(state, "ended") == 0)
	{
		pn_agreement_note(cfg, ch, n, NULL);
		set_result(res, PN_IGNORED, "ignored", "agreement already ended");
		return;
	}
	if (n->action == PN_ACT_AGREEMENT_SIGNED)
	{
		if (state != NULL)
		{
			pn_agreement_note(cfg, ch, n, gateway_state);
			set_result(res, PN_IGNORED, "ignored", "agreement already signed");
			return;
		}
		pn_agreement_sign(cfg, ch, n);
		pn_emit(cfg, event, ch, n, -1, n->detail);
		apply_parked_agreement(cfg, ch->name, n->agreement_id);
		return;
	}
	if (state == NULL && n->end_needs_no_sign)
	{
		/*
		 * never in force, and never will be: recorded ended at once, with
		 * no event (nothing was signed; the failed payment had its own);
		 * an end parked for it ends nothing more
		 */
		pn_agreement_end_unsigned(cfg, ch, n);
		set_result(res, PN_IGNORED, "ignored", "agreement ended unsigned: recorded, no event");
		apply_parked_agreement(cfg, ch->name, n->agreement_id);
		return;
	}
	if (state == NULL)
	{
		set_result(res, PN_PARKED, "parked", "waiting for the agreement to be signed");
		return;
	}
	if (!pn_agreement_end(cfg, ch, n))
		elog(ERROR, "paynotify: agreement \"%s\" could not be ended", n->agreement_id);
	pn_emit(cfg, event, ch, n, -1, n->detail);
}

/*
 * A payment attempt failed (Stripe payment_intent.payment_failed,
 * invoice.payment_failed): the order stays as it is (the notification is
 * acknowledged as ignored: nothing applied), and payment_failed is queued
 * for it (locked like any order an event is queued for; none when
 * it names none or it is gone), with what notification events carry.
 */
static void
apply_payment_failed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	PnNotice	d = *n;

	if (!cfg->schema_14)
	{
		apply_none(cfg, ch, n, res);
		return;
	}
	if (d.order_no != NULL && !pn_order_lock(cfg, d.order_no))
		d.order_no = NULL;
	pn_emit(cfg, "payment_failed", ch, &d, n->order_amount, notification_detail(ch, n));
	set_result(res, PN_IGNORED, "ignored", "payment failed: handed on");
}

/* ---------------------------------------------------------------------
 * paynotify_transit: a move by the application
 * ---------------------------------------------------------------------
 */

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

	if (cfg->bound && OidIsValid(pn_relation_owner(cfg->orders_oid)))
	{
		pn_require_orders_update(cfg->orders_oid, c->caller,
								 "paynotify_transit moves orders of the bound table for roles that own it or may SELECT and UPDATE it.");
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	c->moved = pn_transit(cfg, c->order_no, c->from, c->to);
	if (c->moved)
		apply_parked(cfg, c->order_no);
	SPI_finish();
}

/*
 * paynotify_transit(order_no text, from_state text, to_state text)
 *   returns boolean
 *
 * A successful move also applies the notifications parked for this order.
 * Not SECURITY DEFINER: the caller must own the orders table or hold UPDATE
 * on it; paynotify's own tables are then used as the extension's owner, the
 * orders table as the caller (its code runs as the caller's own UPDATE
 * would run it), hooks as the roles that registered them.
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
	pn_run_orders_as_caller(c.caller, pn_function_owner(c.fn_oid), transit_call, &c);
	PG_RETURN_BOOL(c.moved);
}
