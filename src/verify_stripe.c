/*-------------------------------------------------------------------------
 *
 * verify_stripe.c
 *	  The Stripe gateway: webhook events signed with HMAC-SHA256 in the
 *	  Stripe-Signature header, see docs/GATEWAYS.md §3.
 *
 * Order of checks (docs/GATEWAYS.md §0): parse the header (parse/stripe_sig.c) → HMAC of
 * "t.body" with every active secret against every v1 → symmetric time
 * window → parse the event → object/id/type → livemode.  The key of the
 * HMAC is the whole secret string as its bytes, whsec_ prefix included
 * when it has one (§3.3); v0 never counts.
 * The window is symmetric (a future t is stale too), a documented
 * deviation from the SDKs, which only refuse old timestamps (§3.4).
 *
 * Nothing a request contains raises an error here: every failure is a
 * PnReason.  All memory is palloc'd in the caller's context; no secret or
 * computed MAC ever reaches a message.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "utils/jsonb.h"

#include "stripe_sig.h"
#include "paynotify.h"

#define DEFAULT_ORDER_REF_PATH "data.object.metadata.order_id"
/* an invoice's order: its own metadata (one order per period) */
#define DEFAULT_INVOICE_ORDER_PATH "metadata.order_id"
/* the invoice that created the subscription only: the subscription's metadata
 * copied onto it (API 2025-03-31.basil), else (older API versions) */
#define FIRST_INVOICE_ORDER_PATH_1 "parent.subscription_details.metadata.order_id"
#define FIRST_INVOICE_ORDER_PATH_2 "subscription_details.metadata.order_id"
#define MAX_SUBSCRIPTION_ITEMS 100
#define MAX_PATH_LEN 256
#define MAX_EVENT_ID_LEN 255
#define MAX_LISTED_REFUNDS 100	/* a charge lists 10 a page; more is refused */

/* The channel's parsed settings. */
typedef struct StripeConf
{
	int			tolerance_s;
	char	   *order_ref_path;
	char	   *invoice_order_path;	/* data.object.<setting>, or NULL: the defaults */
	int			livemode;		/* 1 live, 0 test, -1 not checked */
	char	   *secret_key;		/* queries: the restricted API key (rk_) */
	char	   *api_base;		/* https://api.stripe.com */
	bool		query_trusted;	/* apply what a query's answer says */
} StripeConf;

static void *stripe_load_settings(Jsonb *settings);
static void stripe_free_settings(void *conf);
static void stripe_query_request(const PnChannel *ch, const char *order_no, int64 now,
								 PnQueryRequest *out);
static void stripe_can_ask(const PnChannel *ch, const char *what);
static void stripe_bill_request(const PnChannel *ch, const PnBillStep *step, int64 now,
								PnQueryRequest *out);
static const char *stripe_bill_response(const PnChannel *ch, const PnBillStep *step,
										const PnRequest *resp, int status, PnBillAnswer *answer);
static PnReason stripe_query_response(const PnQueryResponse *resp, PnNotice *notice,
									  PnQueryAnswer *answer);
static void stripe_check_key(const char *key_id, const char *material);
static PnReason stripe_authenticate(const PnRequest *req, PnNotice *notice);

static void check_path(const char *path, const char *setting, const char *example);
static PnReason verify_hmac(const PnRequest *req, const PnStripeSig *sig);
static PnReason check_event(const StripeConf *conf, Jsonb *doc,
							PnNotice *n);
static char *json_text(Jsonb *doc, const char *path);
static char *newest_refund(Jsonb *doc);
static void fill_payment_intent(Jsonb *doc, PnNotice *n);
static void fill_checkout_session(Jsonb *doc, PnNotice *n);
static void fill_charge_refunded(Jsonb *doc, PnNotice *n);
static void fill_dispute(Jsonb *doc, PnNotice *n);
static void fill_refund_failed(Jsonb *doc, PnNotice *n);
static void fill_closed(Jsonb *doc, PnNotice *n);
static void fill_subscription(Jsonb *doc, PnNotice *n);
static void fill_invoice(const StripeConf *conf, Jsonb *doc, PnNotice *n);
static void fill_payment_failed(Jsonb *doc, PnNotice *n);
static PnReason fill_notice(const StripeConf *conf, Jsonb *doc, PnNotice *n);

const PnGateway pn_gateway_stripe = {
	.name = "stripe",
	.public_keys = false,
	/* a refund that failed after it succeeded has failed (refund.failed) */
	.refund_failure_final = true,
	.load_settings = stripe_load_settings,
	.free_settings = stripe_free_settings,
	.check_key = stripe_check_key,
	.authenticate = stripe_authenticate,
	/* any 2xx acknowledges; anything else is retried (§3.7) */
	.content_type = "application/json",
	.ack_body = "{\"received\":true}",
	.fail_body = "{\"error\":\"%s\"}",
	.query_request = stripe_query_request,
	.query_response = stripe_query_response,
	.bill_request = stripe_bill_request,
	.bill_response = stripe_bill_response,
};

/* ---------------------------------------------------------------------
 * Settings and keys
 * ---------------------------------------------------------------------
 */

/* A dotted path of non-empty keys, printable ASCII, bounded length. */
static void
check_path(const char *path, const char *setting, const char *example)
{
	size_t		len = strlen(path);
	bool		ok = len > 0 && len <= MAX_PATH_LEN &&
		path[0] != '.' && path[len - 1] != '.' && strstr(path, "..") == NULL;

	for (size_t i = 0; ok && i < len; i++)
		ok = path[i] > ' ' && path[i] < 0x7f;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" must be a dotted path of object keys", setting),
				 errdetail("Example: \"%s\".", example)));
}

/* tolerance_s (1..86400, default 300), order_ref_path, livemode. */
static void *
stripe_load_settings(Jsonb *settings)
{
	static const char *const allowed[] = {"tolerance_s", "order_ref_path", "livemode", "query_after_s",
	"secret_key", "api_base", "query_trusted", "fetch_bills", "invoice_order_path", NULL};
	StripeConf *conf = palloc0(sizeof(StripeConf));

	pn_settings_only(settings, "stripe", allowed);
	(void) pn_setting_int(settings, "query_after_s", 300, 5, 86400);
	(void) pn_setting_bool(settings, "fetch_bills");
	conf->tolerance_s = pn_setting_int(settings, "tolerance_s", 300, 1, 86400);
	conf->order_ref_path = pn_setting_text(settings, "order_ref_path", false);
	if (conf->order_ref_path == NULL)
		conf->order_ref_path = pstrdup(DEFAULT_ORDER_REF_PATH);
	check_path(conf->order_ref_path, "order_ref_path", DEFAULT_ORDER_REF_PATH);
	conf->invoice_order_path = pn_setting_text(settings, "invoice_order_path", false);
	if (conf->invoice_order_path != NULL)
	{
		check_path(conf->invoice_order_path, "invoice_order_path", DEFAULT_INVOICE_ORDER_PATH);
		conf->invoice_order_path = psprintf("data.object.%s", conf->invoice_order_path);
	}
	conf->livemode = pn_setting_bool(settings, "livemode");
	conf->api_base = pn_setting_base_url(settings, "api_base", "https://api.stripe.com");
	conf->query_trusted = pn_setting_bool(settings, "query_trusted") == 1;
	conf->secret_key = pn_setting_text(settings, "secret_key", false);
	if (conf->secret_key != NULL)
	{
		/*
		 * a restricted key only: the relay capacity reads it in each
		 * request; the account's secret key (sk_) would give that role
		 * every right on the Stripe account, refunds included
		 */
		bool		ok = strncmp(conf->secret_key, "rk_", 3) == 0;

		for (const char *c = conf->secret_key; ok && *c; c++)
			ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
				(*c >= '0' && *c <= '9') || *c == '_';
		if (!ok)
		{
			pn_wipe_string(conf->secret_key);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("setting \"secret_key\" must be a restricted Stripe API key (rk_...)"),
					 errhint("The daemon's role reads the key in each request: create a restricted key that may only read PaymentIntents and give it from a file: {\"file\": \"<name>\"}.")));
		}
	}
	return conf;
}

/* Wipe the API key with the configuration generation. */
static void
stripe_free_settings(void *conf)
{
	if (conf != NULL)
		pn_wipe_string(((StripeConf *) conf)->secret_key);
}

/*
 * A signing secret is any non-empty string: the HMAC key is the whole string
 * as given (docs/GATEWAYS.md §3.3), and the SDKs take any string: stripe-dotnet's
 * own webhook fixture (src/StripeTests/Services/Events/EventUtilityTest.cs)
 * is signed with "webhook_secret" and its header tests use "test_secret",
 * while stripe-go's (webhook/client_test.go) uses "whsec_test_secret".
 * Refused: what is clearly an API key (sk_, rk_, pk_: a common
 * mix-up that would make every event fail), and control characters (a line
 * break copied from a file would make every HMAC differ).  The messages never
 * echo the material.
 */
static void
stripe_check_key(const char *key_id, const char *material)
{
	size_t		len = strlen(material);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stripe key \"%s\" is empty", key_id)));
	if (strncmp(material, "sk_", 3) == 0 || strncmp(material, "rk_", 3) == 0 ||
		strncmp(material, "pk_", 3) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stripe key \"%s\" is an API key, not a webhook signing secret", key_id),
				 errhint("Give the endpoint's signing secret (whsec_..., on the webhook endpoint's page in the Dashboard or printed by \"stripe listen\"); never an API key.")));
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) material[i] < ' ' || material[i] == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stripe key \"%s\" contains a control character or line break", key_id),
					 errhint("Give the secret exactly as Stripe shows it, without a trailing newline.")));
}

/* ---------------------------------------------------------------------
 * Authentication
 * ---------------------------------------------------------------------
 */

/*
 * HMAC-SHA256(secret, t "." body) of every active secret against every
 * usable v1, each comparison in constant time.  No v1 at all (only v0, or
 * none of the right shape) is a bad signature, and so is a MAC that OpenSSL
 * failed to compute (its buffer is never compared).
 */
static PnReason
verify_hmac(const PnRequest *req, const PnStripeSig *sig)
{
	const PnChannel *ch = req->channel;
	char	   *prefix;
	unsigned char mac[32];
	bool		match = false;
	bool		failed = false;
	int			usable = 0;

	if (sig->nv1 == 0)
		return PN_R_BAD_SIGNATURE;
	prefix = palloc(sig->t_len + 1);
	memcpy(prefix, sig->t, sig->t_len);
	prefix[sig->t_len] = '.';
	for (int k = 0; k < ch->nkeys && !match; k++)
	{
		const PnKey *key = &ch->keys[k];

		if (key->secret == NULL || !pn_key_active(key, req->now))
			continue;
		usable++;
		/* a MAC that could not be computed verifies nothing */
		if (!pn_hmac_sha256((const unsigned char *) key->secret, key->secret_len,
							(const unsigned char *) prefix, sig->t_len + 1,
							(const unsigned char *) req->body, req->body_len, mac))
		{
			failed = true;
			continue;
		}
		for (int i = 0; i < sig->nv1; i++)
			match |= pn_ct_equal(mac, sig->v1[i], sizeof(mac));
	}
	explicit_bzero(mac, sizeof(mac));
	if (failed)
		ereport(WARNING,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("paynotify: HMAC-SHA256 failed for a key of channel \"%s\"",
						ch->name),
				 errdetail("The signature was treated as invalid.")));
	if (match)
		return PN_OK;
	return usable ? PN_R_BAD_SIGNATURE : PN_R_UNKNOWN_KEY;
}

/*
 * The event envelope: object "event" (thin v2 events are another format),
 * an id (the dedup key), a type, and the configured livemode.
 */
static PnReason
check_event(const StripeConf *conf, Jsonb *doc, PnNotice *n)
{
	char	   *object;
	bool		livemode;

	/* a snapshot event, or a thin one ("v2.core.event", §3.5): both signed alike */
	if (!pn_json_string(doc, "object", &object) ||
		(strcmp(object, "event") != 0 && strcmp(object, "v2.core.event") != 0))
		return PN_R_MALFORMED;
	if (!pn_json_string(doc, "id", &n->notify_id) ||
		n->notify_id[0] == '\0' || strlen(n->notify_id) > MAX_EVENT_ID_LEN)
		return PN_R_MALFORMED;
	if (!pn_json_string(doc, "type", &n->event_type) || n->event_type[0] == '\0')
		return PN_R_MALFORMED;
	if (conf->livemode >= 0)
	{
		if (!pn_json_bool(doc, "livemode", &livemode))
			return PN_R_MALFORMED;
		if (livemode != (conf->livemode == 1))
			return PN_R_MISMATCH;
	}
	return PN_OK;
}

/* The gateway's authenticate: see the file header for the order. */
static PnReason
stripe_authenticate(const PnRequest *req, PnNotice *notice)
{
	const StripeConf *conf = (const StripeConf *) req->channel->conf;
	PnStripeSig sig;
	PnSigStatus st;
	char	   *hdr;
	Jsonb	   *doc;
	int64		skew;
	PnReason	r;

	if (pn_header(req->headers, "Stripe-Signature", &hdr) != 1)
		return PN_R_MALFORMED;
	st = pn_stripe_sig_parse(hdr, strlen(hdr), &sig);
	if (st != PN_SIG_OK)
	{
		elog(DEBUG1, "paynotify: stripe header refused: %s",
			 pn_sig_status_message(st));
		return PN_R_MALFORMED;
	}
	if ((r = verify_hmac(req, &sig)) != PN_OK)
		return r;
	skew = req->now - sig.t_value;
	if (skew > conf->tolerance_s || skew < -conf->tolerance_s)
		return PN_R_STALE;
	doc = pn_parse_json(req->body, req->body_len);
	if (doc == NULL)
		return PN_R_MALFORMED;
	if ((r = check_event(conf, doc, notice)) != PN_OK)
		return r;
	return fill_notice(conf, doc, notice);
}

/* ---------------------------------------------------------------------
 * The authenticated event
 * ---------------------------------------------------------------------
 */

/* A non-empty string at path, or NULL. */
static char *
json_text(Jsonb *doc, const char *path)
{
	char	   *s;

	return pn_json_string(doc, path, &s) && s[0] != '\0' ? s : NULL;
}

/* data.object.refunds.data[0].id (the newest refund), or NULL. */
static char *
newest_refund(Jsonb *doc)
{
	Jsonb	  **refunds;
	int			n;
	char	   *id;

	if (!pn_json_objects(doc, "data.object.refunds.data", MAX_LISTED_REFUNDS, &refunds, &n) ||
		n == 0 || !pn_json_string(refunds[0], "id", &id) || id[0] == '\0')
		return NULL;
	return id;
}

/*
 * The invoice a PaymentIntent or Charge was made for (API versions before
 * 2025-03-31.basil name it): the trade of every event of that money is the
 * invoice, as invoice.paid's and a subscription session's are.
 */
static char *
invoice_of(Jsonb *doc)
{
	char	   *invoice = json_text(doc, "data.object.invoice");

	return invoice != NULL && strncmp(invoice, "in_", 3) == 0 ? invoice : NULL;
}

/*
 * payment_intent.succeeded: the intent is the payment; the intent of an
 * invoice is the invoice's payment, and naming no order (an invoice's
 * intent carries none of the invoice's metadata) is handed on: the
 * invoice's invoice.paid pays its order.
 */
static void
fill_payment_intent(Jsonb *doc, PnNotice *n)
{
	char	   *invoice = invoice_of(doc);

	n->action = invoice != NULL && n->order_no == NULL ? PN_ACT_NONE : PN_ACT_PAY;
	n->trade_no = invoice != NULL ? invoice : json_text(doc, "data.object.id");
	if (!pn_json_int64(doc, "data.object.amount_received", &n->order_amount) &&
		!pn_json_int64(doc, "data.object.amount", &n->order_amount))
		n->order_amount = -1;
}

/*
 * checkout.session.completed / async_payment_succeeded, once paid.  The
 * trade is the money moved: the PaymentIntent; in mode subscription the
 * subscription's first invoice (the session names no PaymentIntent), so
 * that the session and that invoice's invoice.paid are one payment, and
 * the subscription is the agreement charged; else the session.
 */
static void
fill_checkout_session(Jsonb *doc, PnNotice *n)
{
	char	   *paid = json_text(doc, "data.object.payment_status");
	char	   *mode = json_text(doc, "data.object.mode");

	if (paid == NULL || strcmp(paid, "paid") != 0)
		return;					/* unpaid async methods settle later */
	n->action = PN_ACT_PAY;
	n->trade_no = NULL;
	if (mode != NULL && strcmp(mode, "subscription") == 0)
	{
		n->trade_no = json_text(doc, "data.object.invoice");
		if (n->trade_no != NULL)
			n->agreement_id = json_text(doc, "data.object.subscription");
	}
	if (n->trade_no == NULL)
		n->trade_no = json_text(doc, "data.object.payment_intent");
	if (n->trade_no == NULL)
		n->trade_no = json_text(doc, "data.object.id");
	if (!pn_json_int64(doc, "data.object.amount_total", &n->order_amount))
		n->order_amount = -1;
}

/*
 * charge.refunded, also sent for partial refunds (§3.6): amount_refunded
 * is the cumulative total, this refund alone is not stated (the listed
 * refunds' amounts are no safer: the newest may be another event's, and
 * one event may list them while another does not); the newest refund's id
 * when the charge lists its refunds (API versions before 2022-11-15).  The
 * trade: the charge's invoice where it names one (invoice_of), else its
 * PaymentIntent.
 */
static void
fill_charge_refunded(Jsonb *doc, PnNotice *n)
{
	n->action = PN_ACT_REFUND;
	n->trade_no = invoice_of(doc);
	if (n->trade_no == NULL)
		n->trade_no = json_text(doc, "data.object.payment_intent");
	if (n->trade_no == NULL)
		n->trade_no = json_text(doc, "data.object.id");
	if (!pn_json_int64(doc, "data.object.amount", &n->order_amount))
		n->order_amount = -1;
	if (!pn_json_int64(doc, "data.object.amount_refunded", &n->refunded_total))
		n->refunded_total = -1;
	n->refund_id = newest_refund(doc);
	if (n->refund_id == NULL)
		n->refund_id = pstrdup(n->notify_id);
}

/*
 * refund.failed, and refund.updated / charge.refund.updated whose refund
 * now says failed: data.object is the refund.  The refund failed even if
 * it had been recorded as succeeded (refund_failure_final).
 */
static void
fill_refund_failed(Jsonb *doc, PnNotice *n)
{
	char	   *status = json_text(doc, "data.object.status");

	if (status == NULL || strcmp(status, "failed") != 0)
		return;
	n->refund_id = json_text(doc, "data.object.id");
	if (n->refund_id == NULL)
		return;					/* names no refund: nothing to fail */
	n->action = PN_ACT_REFUND_FAILED;
	n->trade_no = json_text(doc, "data.object.payment_intent");
	if (n->trade_no == NULL)
		n->trade_no = json_text(doc, "data.object.charge");
	if (!pn_json_int64(doc, "data.object.amount", &n->refund_amount) ||
		n->refund_amount < 0)
		n->refund_amount = -1;
}

/*
 * payment_intent.canceled, checkout.session.expired: the payment will not
 * happen, and a pending order closes.
 */
static void
fill_closed(Jsonb *doc, PnNotice *n)
{
	char	   *reason = json_text(doc, "data.object.cancellation_reason");

	/* canceled as a duplicate: the merchant pays the order by another intent */
	if (reason != NULL && strcmp(reason, "duplicate") == 0)
		return;
	n->action = PN_ACT_CLOSE;
	n->trade_no = json_text(doc, "data.object.id");
}

/*
 * charge.dispute.created opens a dispute; charge.dispute.closed ends it,
 * won (or an inquiry closed as warning_closed: no money moved) or lost.
 * Other statuses on a close, and the dispute's other events (updated,
 * funds_withdrawn, funds_reinstated), are handed on as notifications, of
 * the order of the trade too.  A dispute names its charge and payment
 * intent, not the order: the trade (payment intent, else charge) finds
 * the order its payment recorded.
 */
static void
fill_dispute(Jsonb *doc, PnNotice *n)
{
	char	   *status = json_text(doc, "data.object.status");
	char	   *id = json_text(doc, "data.object.id");
	char	   *charge = json_text(doc, "data.object.charge");
	char	   *reason = json_text(doc, "data.object.reason");
	JsonbParseState *st = NULL;

	/* the trade, for the other events too: handed on for its order */
	n->trade_no = json_text(doc, "data.object.payment_intent");
	if (n->trade_no == NULL)
		n->trade_no = charge;
	if (strcmp(n->event_type, "charge.dispute.created") == 0)
		n->action = PN_ACT_DISPUTE_OPENED;
	else if (strcmp(n->event_type, "charge.dispute.closed") != 0)
		return;
	else if (status != NULL && (strcmp(status, "won") == 0 || strcmp(status, "warning_closed") == 0))
		n->action = PN_ACT_DISPUTE_WON;
	else if (status != NULL && strcmp(status, "lost") == 0)
		n->action = PN_ACT_DISPUTE_LOST;
	else
		return;
	if (!pn_json_int64(doc, "data.object.amount", &n->dispute_amount) || n->dispute_amount < 0)
		n->dispute_amount = -1;
	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	pn_jsonb_push_text(&st, "dispute_id", id);
	pn_jsonb_push_text(&st, "status", status);
	pn_jsonb_push_text(&st, "reason", reason);
	pn_jsonb_push_text(&st, "charge", charge);
	pn_jsonb_push_text(&st, "currency", n->currency);
	n->detail = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/*
 * customer.subscription.created / .updated / .deleted: the subscription is
 * the agreement (docs/GATEWAYS.md, "Agreements").  Active or trialing:
 * signed; canceled, incomplete_expired, or deleted: ended, incomplete_expired
 * needing no sign (the first payment failed: the subscription was never in
 * force, and its end is recorded even when no sign was); any other
 * status (past_due, unpaid, paused, incomplete) moves nothing, its gateway
 * state kept with a signed agreement.  The merchant's reference is what
 * the channel's order_ref_path finds in it (the subscription's metadata),
 * and names no order: the notice has none.
 */
static void
fill_subscription(Jsonb *doc, PnNotice *n)
{
	char	   *status = json_text(doc, "data.object.status");
	char	   *plan_id = NULL;
	Jsonb	  **items;
	int			nitems;
	int64		signed_at;
	int64		ended_at;

	bool		expired = status != NULL && strcmp(status, "incomplete_expired") == 0;

	if (strcmp(n->event_type, "customer.subscription.deleted") == 0 || expired ||
		(status != NULL && strcmp(status, "canceled") == 0))
		n->action = PN_ACT_AGREEMENT_ENDED;
	else if (status != NULL && (strcmp(status, "active") == 0 || strcmp(status, "trialing") == 0))
		n->action = PN_ACT_AGREEMENT_SIGNED;
	/* its first payment never came: it was never in force, nor will be */
	n->end_needs_no_sign = expired;
	n->agreement_id = json_text(doc, "data.object.id");
	if (n->agreement_id != NULL && strncmp(n->agreement_id, "sub_", 4) != 0)
		n->agreement_id = NULL;
	if (pn_json_objects(doc, "data.object.items.data", MAX_SUBSCRIPTION_ITEMS, &items, &nitems) &&
		nitems > 0 && pn_json_string(items[0], "price.id", &plan_id) && plan_id[0] == '\0')
		plan_id = NULL;
	if (!pn_json_int64(doc, "data.object.start_date", &signed_at) || signed_at < 0)
		signed_at = -1;
	if ((!pn_json_int64(doc, "data.object.ended_at", &ended_at) &&
		 !pn_json_int64(doc, "data.object.canceled_at", &ended_at)) || ended_at < 0)
		ended_at = -1;
	n->detail = pn_agreement_detail(n->agreement_id, n->order_no, plan_id, status,
									signed_at, ended_at);
	n->order_no = NULL;
	n->currency = NULL;
}

/*
 * invoice.paid pays its order; invoice.payment_failed is a failed payment
 * of it.  The trade is the invoice: a subscription session's and (API
 * versions before 2025-03-31.basil, which name the invoice in them) its
 * PaymentIntent's and Charge's are too, one payment whatever event comes
 * first.  Amount:
 * amount_paid in the invoice's currency (amount_due when failed).  The
 * order is at the channel's invoice_order_path in the invoice; without the
 * setting at the invoice's own metadata.order_id (the merchant sets it on
 * the draft, one order per period), and only for the invoice that created
 * the subscription (billing_reason subscription_create) at the
 * subscription's metadata copied onto it: a renewal naming no order of its
 * own names none (the anomaly no_order_number), never the first period's.
 * The subscription charged: parent.subscription_details.subscription
 * (basil), else subscription (older API versions).
 */
static void
fill_invoice(const StripeConf *conf, Jsonb *doc, PnNotice *n)
{
	bool		paid = strcmp(n->event_type, "invoice.paid") == 0;
	char	   *reason = json_text(doc, "data.object.billing_reason");

	n->action = paid ? PN_ACT_PAY : PN_ACT_PAYMENT_FAILED;
	n->trade_no = json_text(doc, "data.object.id");
	if (conf->invoice_order_path != NULL)
		n->order_no = json_text(doc, conf->invoice_order_path);
	else
	{
		n->order_no = json_text(doc, "data.object." DEFAULT_INVOICE_ORDER_PATH);
		if (n->order_no == NULL && reason != NULL && strcmp(reason, "subscription_create") == 0)
		{
			n->order_no = json_text(doc, "data.object." FIRST_INVOICE_ORDER_PATH_1);
			if (n->order_no == NULL)
				n->order_no = json_text(doc, "data.object." FIRST_INVOICE_ORDER_PATH_2);
		}
	}
	if (!pn_json_int64(doc, paid ? "data.object.amount_paid" : "data.object.amount_due",
					   &n->order_amount) || n->order_amount < 0)
		n->order_amount = -1;
	n->agreement_id = json_text(doc, "data.object.parent.subscription_details.subscription");
	if (n->agreement_id == NULL)
		n->agreement_id = json_text(doc, "data.object.subscription");
}

/* payment_intent.payment_failed: the order stays, payment_failed is queued. */
static void
fill_payment_failed(Jsonb *doc, PnNotice *n)
{
	n->action = PN_ACT_PAYMENT_FAILED;
	n->trade_no = json_text(doc, "data.object.id");
	if (!pn_json_int64(doc, "data.object.amount", &n->order_amount) || n->order_amount < 0)
		n->order_amount = -1;
}

/*
 * Fill the notice by event type; every other type is handed on (an event
 * "notification", apply.c).  A payment or refund that names no order
 * (nothing at order_ref_path) keeps its action: the business step applies
 * it to the order its trade paid when that trade is recorded
 * (pn_notice_order_by_trade), else records it as the anomaly
 * "no_order_number", acknowledged (a retry would carry the same event).
 */
static PnReason
fill_notice(const StripeConf *conf, Jsonb *doc, PnNotice *n)
{
	const char *type = n->event_type;
	char	   *currency = json_text(doc, "data.object.currency");
	char	   *object;

	/*
	 * pending_webhooks counts the endpoints still waiting for this event, so
	 * it changes between deliveries of one event: it is no part of what the
	 * event says, and a repeat must compare equal to the first delivery.
	 */
	n->payload = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete, JsonbPGetDatum(doc),
													CStringGetTextDatum("pending_webhooks")));
	n->action = PN_ACT_NONE;
	n->order_no = json_text(doc, conf->order_ref_path);
	n->trade_no = NULL;
	n->order_amount = -1;
	n->refund_id = NULL;
	n->refund_amount = -1;
	n->refunded_total = -1;
	n->dispute_amount = -1;
	n->detail = NULL;
	n->anomaly = NULL;
	n->agreement_id = NULL;
	n->end_needs_no_sign = false;
	if (currency != NULL)
	{
		/* Stripe writes ISO 4217 codes in lower case */
		for (char *c = currency; *c; c++)
			*c = pg_ascii_toupper((unsigned char) *c);
	}
	n->currency = currency;

	if (pn_json_string(doc, "object", &object) && strcmp(object, "v2.core.event") == 0)
		return PN_OK;			/* a thin event names, never carries: handed on */
	if (strcmp(type, "payment_intent.succeeded") == 0)
		fill_payment_intent(doc, n);
	else if (strcmp(type, "checkout.session.completed") == 0 ||
			 strcmp(type, "checkout.session.async_payment_succeeded") == 0)
		fill_checkout_session(doc, n);
	else if (strcmp(type, "charge.refunded") == 0)
		fill_charge_refunded(doc, n);
	else if (strcmp(type, "refund.failed") == 0 ||
			 strcmp(type, "refund.updated") == 0 ||
			 strcmp(type, "charge.refund.updated") == 0)
		fill_refund_failed(doc, n);
	else if (strcmp(type, "payment_intent.canceled") == 0 ||
			 strcmp(type, "checkout.session.expired") == 0)
		fill_closed(doc, n);
	else if (strncmp(type, "charge.dispute.", strlen("charge.dispute.")) == 0)
		fill_dispute(doc, n);
	else if (strcmp(type, "payment_intent.payment_failed") == 0)
		fill_payment_failed(doc, n);
	else if (strcmp(type, "customer.subscription.created") == 0 ||
			 strcmp(type, "customer.subscription.updated") == 0 ||
			 strcmp(type, "customer.subscription.deleted") == 0)
		fill_subscription(doc, n);
	else if (strcmp(type, "invoice.paid") == 0 || strcmp(type, "invoice.payment_failed") == 0)
		fill_invoice(conf, doc, n);
	return PN_OK;
}

/* ---------------------------------------------------------------------
 * Queries (1.4): the PaymentIntents of the order
 * ---------------------------------------------------------------------
 */

#define METADATA_PREFIX "data.object.metadata."
#define MAX_INTENTS 100

/*
 * The metadata key the channel's notifications name their order by
 * (order_ref_path data.object.metadata.<key>), which the search looks the
 * order up by; an error when the order is found otherwise.
 */
static const char *
metadata_key(const PnChannel *ch)
{
	const StripeConf *conf = ch->conf;
	const char *key = conf->order_ref_path + strlen(METADATA_PREFIX);

	if (strncmp(conf->order_ref_path, METADATA_PREFIX, strlen(METADATA_PREFIX)) != 0 ||
		strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(key))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("channel \"%s\" cannot query Stripe: its order_ref_path is not a PaymentIntent's metadata key", ch->name),
				 errhint("Queries search PaymentIntents by metadata: order_ref_path must be data.object.metadata.<key>.")));
	return key;
}

/*
 * GET {api_base}/v1/payment_intents/search?query=metadata['<key>']:'<order>'
 * with the API key as the bearer: Stripe's requests are not signed, the key
 * itself goes to the daemon (docs/SECURITY.md: give a restricted key that
 * may only read PaymentIntents).  In the search query a quote or backslash
 * of the order number is escaped with a backslash.
 */
static void
stripe_query_request(const PnChannel *ch, const char *order_no, int64 now, PnQueryRequest *out)
{
	const StripeConf *conf = ch->conf;
	const char *key = metadata_key(ch);
	StringInfoData q;

	stripe_can_ask(ch, "query");
	initStringInfo(&q);
	appendStringInfo(&q, "metadata['%s']:'", key);
	for (const char *c = order_no; *c; c++)
	{
		if (*c == '\'' || *c == '\\')
			appendStringInfoChar(&q, '\\');
		appendStringInfoChar(&q, *c);
	}
	appendStringInfoChar(&q, '\'');
	out->method = "GET";
	out->url = psprintf("%s/v1/payment_intents/search?query=%s&limit=%d",
						conf->api_base, pn_url_encode(q.data), MAX_INTENTS);
	out->body = NULL;
	pn_query_header(out, "Authorization", psprintf("Bearer %s", conf->secret_key));
}

/* Whether the channel has the API key to ask with: else an error. */
static void
stripe_can_ask(const PnChannel *ch, const char *what)
{
	const StripeConf *conf = ch->conf;

	if (conf->secret_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("channel \"%s\" cannot %s Stripe: it has no secret_key", ch->name,
						strcmp(what, "query") == 0 ? "query" : "fetch the bills of"),
				 errhint("Set secret_key (a restricted rk_ key, from a file: {\"file\": \"<name>\"}) with paynotify_alter_channel.")));
}

/*
 * An answer to the search: {"object": "search_result", "data": [...]}, each
 * a PaymentIntent of the order (its metadata names it; livemode as
 * configured).  Unsigned: Stripe signs no API response, only TLS and the
 * daemon vouch for it.  So it is applied only on a channel that says
 * query_trusted; elsewhere a payment it finds is recorded as the anomaly
 * query_unverified for someone to look at, and a never-paid answer closes
 * nothing.  One succeeded intent was paid (the first listed); else one
 * processing or waiting for its customer or capture settles nothing; else
 * (canceled, requires_payment_method, or none at all) never paid.  An
 * error answer settles nothing.
 */
static PnReason
stripe_query_response(const PnQueryResponse *resp, PnNotice *n, PnQueryAnswer *answer)
{
	const PnRequest *req = &resp->req;
	const StripeConf *conf = req->channel->conf;
	char		path[MAX_PATH_LEN + 16];
	Jsonb	   *doc = pn_parse_json(req->body, req->body_len);
	Jsonb	  **intents;
	int			nintents;
	char	   *object;
	Jsonb	   *paid = NULL;
	const char *seen = "not_found";	/* the most advanced state seen */
	bool		canceled = false;
	bool		more;

	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc))
		return PN_R_MALFORMED;
	n->payload = doc;
	n->order_no = pstrdup(resp->order_no);
	n->action = PN_ACT_NONE;
	answer->verdict = PN_Q_PENDING;
	if (pn_json_present(doc, "error"))
	{
		char	   *code = NULL;
		bool		has_code = pn_json_string(doc, "error.code", &code);

		if (has_code && strlen(code) > 64)
			return PN_R_MALFORMED;	/* as the other gateways' codes: no code is longer */
		answer->state = has_code && code[0] != '\0' ? psprintf("error %s", code) : "error";
		n->notify_id = pn_query_notify_id(resp->order_no, "error");
		return PN_OK;
	}
	if (!pn_json_string(doc, "object", &object) || strcmp(object, "search_result") != 0 ||
		!pn_json_objects(doc, "data", MAX_INTENTS, &intents, &nintents))
		return PN_R_MALFORMED;
	snprintf(path, sizeof(path), "metadata.%s", conf->order_ref_path + strlen(METADATA_PREFIX));
	for (int i = 0; i < nintents; i++)
	{
		char	   *order_no;
		char	   *status;
		bool		livemode;

		if (!pn_json_string(intents[i], "object", &object) ||
			strcmp(object, "payment_intent") != 0 ||
			!pn_json_string(intents[i], "status", &status))
			return PN_R_MALFORMED;
		if (!pn_json_string(intents[i], path, &order_no) || strcmp(order_no, resp->order_no) != 0)
			return PN_R_MISMATCH;
		if (conf->livemode >= 0 &&
			(!pn_json_bool(intents[i], "livemode", &livemode) || livemode != (conf->livemode == 1)))
			return PN_R_MISMATCH;
		if (strcmp(status, "succeeded") == 0)
		{
			if (paid == NULL)
				paid = intents[i];
		}
		/* canceled is for good; the others may be paid yet */
		else if (strcmp(status, "canceled") == 0)
			canceled = true;
		else
			seen = status;
	}
	if (paid != NULL)
	{
		char	   *currency;

		if (!pn_json_string(paid, "id", &n->trade_no) || n->trade_no[0] == '\0')
			return PN_R_MALFORMED;
		if (!pn_json_int64(paid, "amount_received", &n->order_amount) &&
			!pn_json_int64(paid, "amount", &n->order_amount))
			n->order_amount = -1;
		if (pn_json_string(paid, "currency", &currency))
		{
			for (char *c = currency; *c; c++)
				*c = pg_ascii_toupper((unsigned char) *c);
			n->currency = currency;
		}
		n->payload = paid;
		n->action = PN_ACT_PAY;
		n->event_type = "query.succeeded";
		n->notify_id = pn_query_notify_id(n->trade_no, "succeeded");
		answer->state = "succeeded";
		answer->verdict = PN_Q_PAID;
		if (!conf->query_trusted)
			n->anomaly = "query_unverified";
		return PN_OK;
	}
	/*
	 * closed for good only when every intent of the order is canceled: no
	 * intent found (Stripe's search lags), one that may be paid yet, or
	 * more intents than the page holds (has_more) closes nothing
	 */
	if (canceled && strcmp(seen, "not_found") == 0 &&
		!(pn_json_bool(doc, "has_more", &more) && more))
		seen = "canceled";
	else
		canceled = false;
	answer->state = seen;
	n->event_type = psprintf("query.%s", answer->state);
	n->notify_id = pn_query_notify_id(resp->order_no, answer->state);
	if (canceled)
		answer->verdict = conf->query_trusted ? PN_Q_UNPAID : PN_Q_PENDING;
	if (canceled && !conf->query_trusted)
		answer->state = "canceled, unverified";
	return PN_OK;
}

/* ---------------------------------------------------------------------
 * Bills (1.4): the day's balance transactions, page by page
 * ---------------------------------------------------------------------
 */

#define BILL_PAGE 100

/* A Stripe object id: letters, digits and _, at most 255. */
static bool
stripe_id_ok(const char *id)
{
	size_t		n = strlen(id);

	return n > 0 && n <= 255 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

/*
 * page: GET {api_base}/v1/balance_transactions?created[gte]=<the day's
 * 00:00 UTC>&created[lt]=<+86400>&limit=100, after the first page
 * &starting_after=<the last id read>; with the API key as the bearer,
 * as queries are.
 */
static void
stripe_bill_request(const PnChannel *ch, const PnBillStep *step, int64 now, PnQueryRequest *out)
{
	const StripeConf *conf = ch->conf;
	StringInfoData url;

	stripe_can_ask(ch, "bill");
	if (strcmp(step->step, "page") != 0 || (step->cursor != NULL && !stripe_id_ok(step->cursor)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("channel \"%s\": no Stripe bill request for step \"%s\"", ch->name, step->step)));
	initStringInfo(&url);
	appendStringInfo(&url, "%s/v1/balance_transactions?created%%5Bgte%%5D=" INT64_FORMAT
					 "&created%%5Blt%%5D=" INT64_FORMAT "&limit=%d",
					 conf->api_base, step->day_start, step->day_start + 86400, BILL_PAGE);
	if (step->cursor != NULL)
		appendStringInfo(&url, "&starting_after=%s", pn_url_encode(step->cursor));
	out->method = "GET";
	out->url = url.data;
	out->body = NULL;
	pn_query_header(out, "Authorization", psprintf("Bearer %s", conf->secret_key));
}

/*
 * A page: {"object": "list", "data": [...], "has_more": ...}, each a
 * balance transaction with its id, created on the day asked for (the
 * pages already read are checked by paynotify_bill_apply).  Unsigned, as every Stripe answer:
 * read only on a channel that says query_trusted, else refused.
 */
static const char *
stripe_bill_response(const PnChannel *ch, const PnBillStep *step, const PnRequest *req,
					 int status, PnBillAnswer *answer)
{
	const StripeConf *conf = ch->conf;
	Jsonb	   *doc;
	Jsonb	  **txns;
	int			ntxns;
	char	   *object;

	if (!conf->query_trusted)
		return "Stripe's answers are unsigned: the channel does not set query_trusted";
	if (strcmp(step->step, "page") != 0)
		return "no such step of a Stripe bill";
	if (status != 200)
		return "the gateway answered an error";
	doc = pn_parse_json(req->body, req->body_len);
	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc) ||
		!pn_json_string(doc, "object", &object) || strcmp(object, "list") != 0 ||
		!pn_json_bool(doc, "has_more", &answer->has_more) ||
		!pn_json_objects(doc, "data", BILL_PAGE, &txns, &ntxns))
		return "malformed answer";
	for (int i = 0; i < ntxns; i++)
	{
		int64		created;

		if (!pn_json_string(txns[i], "object", &object) ||
			strcmp(object, "balance_transaction") != 0 ||
			!pn_json_string(txns[i], "id", &answer->cursor) || !stripe_id_ok(answer->cursor) ||
			!pn_json_int64(txns[i], "created", &created))
			return "malformed answer";
		if (created < step->day_start || created >= step->day_start + 86400)
			return "a transaction was not created on the day asked for";
	}
	if (answer->has_more && ntxns == 0)
		return "malformed answer";
	if (ntxns == 0)
		answer->cursor = NULL;
	answer->result = "page";
	return NULL;
}
