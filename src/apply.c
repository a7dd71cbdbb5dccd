/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  Layer 4, the business step: move the order through the state
 *	  machine, record the payment or refund, emit the event (its outbox
 *	  row, NOTIFY and hooks: event.c); park what arrives before the order
 *	  is ready for it, and apply it when the order gets there.
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

typedef struct OrderRow
{
	char	   *status;
	bool		has_amount;
	int64		amount;
	char	   *currency;		/* NULL: not bound, or NULL in the row */
} OrderRow;

static void apply_pay(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_refund(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_refund_failed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void apply_close(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res);
static void order_get(PnConfig *cfg, const char *order_no, OrderRow *row);
static void order_not_found(PnConfig *cfg, const char *order_no) pg_attribute_noreturn();
static bool payment_mismatch(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							 const OrderRow *row, PnApplied *res);
static bool payment_get(PnConfig *cfg, const char *channel, const char *trade_no, int64 *amount);
static char *payment_order(PnConfig *cfg, const char *channel, const char *trade_no);
static int	order_trades(PnConfig *cfg, const char *order_no, bool *all_refunded);
static char *refund_get(PnConfig *cfg, const char *channel, const char *refund_id,
						const char *order_no);
static void insert_payment(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
static bool insert_refund(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						  const char *trade_no, int64 amount, const char *status);
static bool refund_succeed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						   const char *trade_no, int64 amount);
static int64 refunded_sum(PnConfig *cfg, const char *channel, const char *trade_no,
						  const char *order_no);
static void set_result(PnApplied *res, PnOutcome outcome, const char *status, const char *note);
static void anomaly_result(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						   PnApplied *res, const char *kind);
static void apply_parked(PnConfig *cfg, const char *order_no);
static void apply_parked_trade(PnConfig *cfg, const char *order_no,
							   const char *trade_no);

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
	if (n->action != PN_ACT_NONE && n->order_no == NULL)
	{
		anomaly_result(cfg, ch, n, res, "no_order_number");
		return;
	}
	switch (n->action)
	{
		case PN_ACT_NONE:
			set_result(res, PN_IGNORED, "ignored", "event not applied");
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
	}
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
	OrderRow	row;
	int64		amount;
	bool		all_refunded;
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
	recorded = payment_order(cfg, ch->name, n->trade_no);
	if (recorded != NULL && strcmp(recorded, n->order_no) != 0)
	{
		order_get(cfg, n->order_no, &row);
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
	pn_history_own_move(true);
	if (pn_orders_execute(cfg, PLAN_ORDER_PAY, args, nulls, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: order update failed");
	pn_history_own_move(false);
	if (SPI_processed == 1)
	{
		pn_history_move(cfg, n->order_no, "pending", "paid");
		insert_payment(cfg, ch, n);
		pn_emit(cfg, "paid", ch, n, n->order_amount);
		apply_parked(cfg, n->order_no);
		return;
	}

	/* Not moved: find out why, holding the row. */
	order_get(cfg, n->order_no, &row);
	if (strcmp(row.status, "pending") == 0)
	{
		if (!payment_mismatch(cfg, ch, n, &row, res))
			elog(ERROR, "paynotify: order \"%s\" is pending but could not be paid", n->order_no);
		return;
	}
	if (payment_get(cfg, ch->name, n->trade_no, &amount))
	{
		set_result(res, PN_IGNORED, "ignored", "payment already recorded");
		return;
	}
	if (order_trades(cfg, n->order_no, &all_refunded) == 0 &&
		strcmp(row.status, "cancelled") != 0 && strcmp(row.status, "refunded") != 0)
	{
		/*
		 * moved by the application (its own UPDATE, paynotify_transit): still
		 * its payment, if it is the order's amount and currency (the
		 * application may have trusted a forged synchronous return)
		 */
		if (payment_mismatch(cfg, ch, n, &row, res))
			return;
		insert_payment(cfg, ch, n);
		pn_emit(cfg, "paid", ch, n, n->order_amount);
		apply_parked(cfg, n->order_no);
		note = psprintf("order was already %s", row.status);
		set_result(res, PN_PROCESSED, "succeeded", note);
		return;
	}
	/* Another payment: the money is real, someone must act. */
	insert_payment(cfg, ch, n);
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
	OrderRow	row;
	const char *trade_no = n->trade_no;
	const char *refund_id = n->refund_id ? n->refund_id : n->notify_id;
	char	   *existing;
	int64		paid,
				before,
				amount;
	bool		all_refunded;

	order_get(cfg, n->order_no, &row);
	if (trade_no == NULL)
	{
		/* the gateway named no trade: the order's only one, if it has one */
		if (order_trades(cfg, n->order_no, &all_refunded) == 1)
			trade_no = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	}
	if (trade_no == NULL || !payment_get(cfg, ch->name, trade_no, &paid))
	{
		set_result(res, PN_PARKED, "parked", "waiting for the payment");
		return;
	}
	if (strcmp(payment_order(cfg, ch->name, trade_no), n->order_no) != 0)
	{
		/* the trade paid another order, whose row is not locked here */
		anomaly_result(cfg, ch, n, res, "trade_of_another_order");
		return;
	}
	existing = refund_get(cfg, ch->name, refund_id, n->order_no);
	if (existing != NULL && strcmp(existing, "succeeded") == 0)
	{
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	before = refunded_sum(cfg, ch->name, trade_no, n->order_no);
	amount = n->refund_amount >= 0 ? n->refund_amount : n->refunded_total - before;
	if (amount <= 0)
	{
		/* an older cumulative total arriving late */
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	if (existing != NULL ? !refund_succeed(cfg, ch, n, trade_no, amount)
		: !insert_refund(cfg, ch, n, trade_no, amount, "succeeded"))
	{
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	if (before + amount > paid)
		pn_anomaly(cfg, ch->name, n, "refunded_more_than_paid");

	/* The order's status follows from all its trades. */
	if (order_trades(cfg, n->order_no, &all_refunded) > 0 && all_refunded &&
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
	pn_emit(cfg, "refunded", ch, n, amount);
}

/* A refund did not happen: record it once; a refunding order is paid again. */
static void
apply_refund_failed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	OrderRow	row;
	const char *refund_id = n->refund_id ? n->refund_id : n->notify_id;

	order_get(cfg, n->order_no, &row);
	/* a succeeded refund never goes back; a failed one is recorded once */
	if (refund_get(cfg, ch->name, refund_id, n->order_no) != NULL ||
		!insert_refund(cfg, ch, n, n->trade_no, Max(n->refund_amount, 0), "failed"))
	{
		set_result(res, PN_IGNORED, "ignored", "refund already recorded");
		return;
	}
	if (strcmp(row.status, "refunding") == 0)
		(void) pn_transit(cfg, n->order_no, "refunding", "paid");
	pn_emit(cfg, "refund_failed", ch, n, Max(n->refund_amount, 0));
}

/* The trade closed unpaid: a pending order is cancelled. */
static void
apply_close(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, PnApplied *res)
{
	OrderRow	row;

	order_get(cfg, n->order_no, &row);
	if (strcmp(row.status, "pending") != 0)
	{
		set_result(res, PN_IGNORED, "ignored", "order is not pending");
		return;
	}
	(void) pn_transit(cfg, n->order_no, "pending", "cancelled");
	pn_emit(cfg, "closed", ch, n, 0);
}

/*
 * A payment whose amount or currency is not the order's: record the anomaly
 * (res says so) and return true.
 */
static bool
payment_mismatch(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const OrderRow *row,
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

/*
 * No order has the key a notification names: an error (retried later).
 * When the key's type reads the reference as another text (a varchar(n)
 * cuts it, a char(n) pads it, uuid lowers it), say so: that other key is
 * another order, never this notification's.
 */
static void
order_not_found(PnConfig *cfg, const char *order_no)
{
	Datum		arg = CStringGetTextDatum(order_no);
	char	   *as_key = NULL;

	if (pn_orders_execute(cfg, PLAN_ORDER_KEY_TEXT, &arg, NULL, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
		as_key = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (as_key != NULL && strcmp(as_key, order_no) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("order \"%s\" not found (the orders table's key column reads it as \"%s\", which is not the same reference)",
						order_no, as_key),
				 errdetail("A notification is applied only to the order whose key is exactly the reference it names.")));
	ereport(ERROR,
			(errcode(ERRCODE_NO_DATA_FOUND),
			 errmsg("order \"%s\" not found", order_no)));
}

/* Lock and read the order; a missing order is an error (retried later). */
static void
order_get(PnConfig *cfg, const char *order_no, OrderRow *row)
{
	Datum		arg = CStringGetTextDatum(order_no);
	bool		isnull;
	char	   *status;

	if (pn_orders_execute(cfg, PLAN_ORDER_GET, &arg, NULL, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: order lookup failed");
	if (SPI_processed == 0)
		order_not_found(cfg, order_no);
	status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	row->status = status ? (char *) pn_status_name(&cfg->status_map, status) : "";
	row->amount = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 2, &isnull));
	row->has_amount = !isnull;
	row->currency = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
}

/* The order a trade was recorded for, or NULL. */
static char *
payment_order(PnConfig *cfg, const char *channel, const char *trade_no)
{
	Datum		args[2];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(trade_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_PAYMENT_GET), args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: payment lookup failed");
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/* The payment record of a trade: true and its amount when there is one. */
static bool
payment_get(PnConfig *cfg, const char *channel, const char *trade_no, int64 *amount)
{
	Datum		args[2];
	bool		isnull;

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(trade_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_PAYMENT_GET), args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: payment lookup failed");
	if (SPI_processed == 0)
		return false;
	*amount = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return true;
}

/*
 * How many trades (payment records, any channel) the order has; all_refunded
 * says whether each of them is refunded in full.  The rows stay in
 * SPI_tuptable (channel, trade_no, paid, refunded) until the next query.
 */
static int
order_trades(PnConfig *cfg, const char *order_no, bool *all_refunded)
{
	Datum		arg = CStringGetTextDatum(order_no);

	if (SPI_execute_plan(pn_plan(cfg, PLAN_ORDER_TRADES), &arg, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: payment lookup failed");
	*all_refunded = true;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int64		paid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
													   SPI_tuptable->tupdesc, 3, &isnull));
		int64		refunded = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 4, &isnull));

		if (refunded < paid)
			*all_refunded = false;
	}
	return (int) Min(SPI_processed, INT_MAX);
}

/* The status of a recorded refund ("succeeded", "failed"), or NULL. */
static char *
refund_get(PnConfig *cfg, const char *channel, const char *refund_id, const char *order_no)
{
	Datum		args[3];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(refund_id);
	args[2] = CStringGetTextDatum(order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_GET), args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: refund lookup failed");
	if (SPI_processed == 0)
		return NULL;
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * Record the payment.  The order's lock keeps other notifications of this
 * order out, and the trade was looked up: only a notification of the same
 * trade for another order, at the same time, can have recorded it since.
 * That fails the step (retried, then answered trade_of_another_order).
 */
static void
insert_payment(PnConfig *cfg, const PnChannel *ch, const PnNotice *n)
{
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->trade_no);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = Int64GetDatum(Max(n->order_amount, 0));
	args[4] = n->currency ? CStringGetTextDatum(n->currency) : (Datum) 0;
	args[5] = CStringGetTextDatum(n->notify_id);
	if (n->currency == NULL)
		nulls[4] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_PAYMENT_INSERT), args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: payment insert failed");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("trade \"%s\" was recorded for another order at the same time",
						n->trade_no)));
}

/* Record a refund; false when this refund id was recorded before. */
static bool
insert_refund(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *trade_no,
			  int64 amount, const char *status)
{
	Datum		args[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->refund_id ? n->refund_id : n->notify_id);
	args[2] = CStringGetTextDatum(n->order_no);
	args[3] = trade_no ? CStringGetTextDatum(trade_no) : (Datum) 0;
	args[4] = Int64GetDatum(amount);
	args[5] = CStringGetTextDatum(status);
	args[6] = CStringGetTextDatum(n->notify_id);
	if (trade_no == NULL)
		nulls[3] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_INSERT), args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: refund insert failed");
	return SPI_processed == 1;
}

/* A failed refund succeeded after all; false unless it was failed. */
static bool
refund_succeed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n, const char *trade_no,
			   int64 amount)
{
	Datum		args[6];

	args[0] = CStringGetTextDatum(ch->name);
	args[1] = CStringGetTextDatum(n->refund_id ? n->refund_id : n->notify_id);
	args[2] = Int64GetDatum(amount);
	args[3] = CStringGetTextDatum(trade_no);
	args[4] = CStringGetTextDatum(n->notify_id);
	args[5] = CStringGetTextDatum(n->order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_SUCCEED), args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: refund update failed");
	return SPI_processed == 1;
}

/* What succeeded refunds of one trade add up to (fresh snapshot). */
static int64
refunded_sum(PnConfig *cfg, const char *channel, const char *trade_no, const char *order_no)
{
	Datum		args[3];
	bool		isnull;

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(trade_no);
	args[2] = CStringGetTextDatum(order_no);
	if (SPI_execute_plan(pn_plan(cfg, PLAN_REFUND_SUM), args, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "paynotify: refund sum query failed");
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
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

/* Insert a paynotify_anomaly row and say so in the server log. */
void
pn_anomaly(PnConfig *cfg, const char *channel, const PnNotice *n, const char *kind)
{
	Datum		args[5];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(n->notify_id);
	args[2] = CStringGetTextDatum(pn_order_key(n));
	args[3] = CStringGetTextDatum(kind);
	args[4] = JsonbPGetDatum(pn_notice_to_jsonb(n));
	if (SPI_execute_plan(pn_plan(cfg, PLAN_ANOMALY_INSERT), args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "paynotify: anomaly insert failed");
	ereport(WARNING,
			(errmsg("paynotify: anomaly \"%s\" on channel \"%s\", notification \"%s\"",
					kind, channel, n->notify_id)));
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
	int			nparked;
	char	  **channels;
	char	  **ids;
	Jsonb	  **notices;
	const char *outer = applying_order;

	if (applying_order != NULL && strcmp(applying_order, order_no) == 0)
		return;
	args[0] = CStringGetTextDatum(order_no);
	args[1] = trade_no ? CStringGetTextDatum(trade_no) : (Datum) 0;
	if (trade_no == NULL)
		nulls[1] = 'n';
	if (SPI_execute_plan(pn_plan(cfg, PLAN_PARKED_LIST), args, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: parked lookup failed");
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
		applying_order = order_no;
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

	if (cfg->bound && OidIsValid(pn_relation_owner(cfg->orders_oid)) &&
		!pg_class_ownercheck(cfg->orders_oid, c->caller) &&
		pg_class_aclcheck(cfg->orders_oid, c->caller, ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", cfg->orders),
				 errdetail("paynotify_transit moves orders of the bound table for roles that own it or may UPDATE it.")));
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
