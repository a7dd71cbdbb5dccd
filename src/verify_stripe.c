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
#define MAX_PATH_LEN 256
#define MAX_EVENT_ID_LEN 255
#define MAX_LISTED_REFUNDS 100	/* a charge lists 10 a page; more is refused */

/* The channel's parsed settings. */
typedef struct StripeConf
{
	int			tolerance_s;
	char	   *order_ref_path;
	int			livemode;		/* 1 live, 0 test, -1 not checked */
} StripeConf;

static void *stripe_load_settings(Jsonb *settings);
static void stripe_check_key(const char *key_id, const char *material);
static PnReason stripe_authenticate(const PnRequest *req, PnNotice *notice);

static void check_path(const char *path);
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
static PnReason fill_notice(const StripeConf *conf, Jsonb *doc, PnNotice *n);

const PnGateway pn_gateway_stripe = {
	.name = "stripe",
	.public_keys = false,
	/* a refund that failed after it succeeded has failed (refund.failed) */
	.refund_failure_final = true,
	.load_settings = stripe_load_settings,
	.check_key = stripe_check_key,
	.authenticate = stripe_authenticate,
	/* any 2xx acknowledges; anything else is retried (§3.7) */
	.content_type = "application/json",
	.ack_body = "{\"received\":true}",
	.fail_body = "{\"error\":\"%s\"}",
};

/* ---------------------------------------------------------------------
 * Settings and keys
 * ---------------------------------------------------------------------
 */

/* A dotted path of non-empty keys, printable ASCII, bounded length. */
static void
check_path(const char *path)
{
	size_t		len = strlen(path);
	bool		ok = len > 0 && len <= MAX_PATH_LEN &&
		path[0] != '.' && path[len - 1] != '.' && strstr(path, "..") == NULL;

	for (size_t i = 0; ok && i < len; i++)
		ok = path[i] > ' ' && path[i] < 0x7f;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"order_ref_path\" must be a dotted path of object keys"),
				 errdetail("Example: \"%s\".", DEFAULT_ORDER_REF_PATH)));
}

/* tolerance_s (1..86400, default 300), order_ref_path, livemode. */
static void *
stripe_load_settings(Jsonb *settings)
{
	static const char *const allowed[] = {"tolerance_s", "order_ref_path", "livemode", "query_after_s", NULL};
	StripeConf *conf = palloc0(sizeof(StripeConf));

	pn_settings_only(settings, "stripe", allowed);
	(void) pn_setting_int(settings, "query_after_s", 300, 30, 86400);
	conf->tolerance_s = pn_setting_int(settings, "tolerance_s", 300, 1, 86400);
	conf->order_ref_path = pn_setting_text(settings, "order_ref_path", false);
	if (conf->order_ref_path == NULL)
		conf->order_ref_path = pstrdup(DEFAULT_ORDER_REF_PATH);
	check_path(conf->order_ref_path);
	conf->livemode = pn_setting_bool(settings, "livemode");
	return conf;
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

/* payment_intent.succeeded: the intent is the payment. */
static void
fill_payment_intent(Jsonb *doc, PnNotice *n)
{
	n->action = PN_ACT_PAY;
	n->trade_no = json_text(doc, "data.object.id");
	if (!pn_json_int64(doc, "data.object.amount_received", &n->order_amount) &&
		!pn_json_int64(doc, "data.object.amount", &n->order_amount))
		n->order_amount = -1;
}

/* checkout.session.completed / async_payment_succeeded, once paid. */
static void
fill_checkout_session(Jsonb *doc, PnNotice *n)
{
	char	   *paid = json_text(doc, "data.object.payment_status");

	if (paid == NULL || strcmp(paid, "paid") != 0)
		return;					/* unpaid async methods settle later */
	n->action = PN_ACT_PAY;
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
 * when the charge lists its refunds (API versions before 2022-11-15).
 */
static void
fill_charge_refunded(Jsonb *doc, PnNotice *n)
{
	n->action = PN_ACT_REFUND;
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
 * Fill the notice by event type; every other type is handed on (an event
 * "notification", apply.c).  A
 * payment or refund that names no order (nothing at order_ref_path) keeps
 * its action: the pipeline records it as the anomaly "no_order_number",
 * acknowledged (a retry would carry the same event) but never applied.
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
	return PN_OK;
}
