/*-------------------------------------------------------------------------
 *
 * verify_alipay.c
 *	  The Alipay gateway: asynchronous trade notifications (urlencoded form,
 *	  RSA2 signature over the sorted parameters), see docs/GATEWAYS.md §2.
 *
 * Order of checks (docs/GATEWAYS.md §0): form decode and charset → sign_type →
 * base64 of sign → RSA-SHA256 with every active key over the skip-empty
 * content, then over the keep-empty content when an empty value exists →
 * app_id / seller_id → fields of the notice.  From the signature on, only
 * the parameters it covers exist: the notice and the logged payload never
 * see an empty parameter that the skip-empty content left out.  Alipay
 * sends no key id and no timestamp: every key is tried and no freshness
 * window applies (§2.6).
 *
 * The signature covers the percent-decoded octets in the notification's own
 * charset; they are never transcoded for verification.  Only after the
 * signature holds are the values converted (GBK → database encoding) for
 * the log's payload and the notice.
 *
 * Nothing a request contains raises an error here: every failure is a
 * PnReason.  All memory is palloc'd in the caller's context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "catalog/namespace.h"
#include "utils/json.h"
#include "mb/pg_wchar.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "form.h"
#include "paynotify.h"

#define MAX_NOTIFY_ID_LEN 255

/* The channel's parsed settings. */
typedef struct AlipayConf
{
	char	   *app_id;
	char	   *seller_id;		/* NULL: not checked */
	char	   *app_private_key;	/* queries: the application's key (PEM) */
	char	   *api_base;		/* https://openapi.alipay.com */
} AlipayConf;

/* A decoded notification, its values in the database encoding. */
typedef struct AlipayForm
{
	PnForm	   *form;
	int			charset;		/* PG_UTF8 or PG_GBK: how the octets read */
	char	  **names;			/* converted, parallel to form->params */
	char	  **values;
	bool		keep_empty;		/* the signature covers empty values too */
} AlipayForm;

static void *alipay_load_settings(Jsonb *settings);
static void alipay_free_settings(void *conf);
static void alipay_close_request(const PnChannel *ch, const char *order_no, int64 now,
								 PnQueryRequest *out);
static void alipay_query_request(const PnChannel *ch, const char *order_no, int64 now,
								 PnQueryRequest *out);
static PnReason signed_response(const PnRequest *req, const char *key, Jsonb **obj,
							   char **code);
static PnReason alipay_close_response(const PnQueryResponse *resp, PnQueryAnswer *answer);
static bool alipay_download_ok(const AlipayConf *conf, const char *url);
static void alipay_bill_request(const PnChannel *ch, const PnBillStep *step, int64 now,
								PnQueryRequest *out);
static const char *alipay_bill_response(const PnChannel *ch, const PnBillStep *step,
										const PnRequest *resp, int status, PnBillAnswer *answer);
static PnReason alipay_query_response(const PnQueryResponse *resp, PnNotice *notice,
									  PnQueryAnswer *answer);
static PnReason alipay_authenticate(const PnRequest *req, PnNotice *notice);

static char *trim(char *s);
static int	charset_encoding(const char *name, size_t len);
static bool content_type_charset(const PnRequest *req, int *encoding);
static PnReason decode_form(const PnRequest *req, AlipayForm *af);
static PnReason check_sign_type(const PnForm *form);
static PnReason verify_signature(const PnRequest *req, const PnForm *form,
								 bool *keep_empty);
static PnReason verify_content(const PnRequest *req, const char *content,
							   size_t len, const unsigned char *sig,
							   int siglen);
static bool to_server(const char *s, size_t len, int from, char **out);
static bool convert_form(AlipayForm *af);
static bool is_signed(const AlipayForm *af, const PnFormParam *p);
static const char *field(const AlipayForm *af, const char *name);
static bool per_delivery(const PnFormParam *p);
static Jsonb *form_payload(const AlipayForm *af);
static PnReason check_merchant(const AlipayConf *conf, const AlipayForm *af);
static PnReason amount_field(const AlipayForm *af, const char *name,
							 int64 *fen);
static PnReason fill_notice(const AlipayForm *af, PnNotice *n);
static void choose_action(const AlipayForm *af, PnNotice *n);

const PnGateway pn_gateway_alipay = {
	.name = "alipay",
	.public_keys = true,
	.load_settings = alipay_load_settings,
	.free_settings = alipay_free_settings,
	.check_key = NULL,			/* the core's PEM and RSA >= 2048 checks suffice */
	.authenticate = alipay_authenticate,
	/* only the exact body "success" stops Alipay's retries (§2.9) */
	.content_type = "text/plain",
	.ack_body = "success",
	.fail_body = "fail",
	.query_request = alipay_query_request,
	.query_response = alipay_query_response,
	.close_request = alipay_close_request,
	.bill_request = alipay_bill_request,
	.bill_response = alipay_bill_response,
};

/* ---------------------------------------------------------------------
 * Settings
 * ---------------------------------------------------------------------
 */

/* app_id (required) and seller_id (optional), both non-empty text. */
static bool
alipay_id_ok(const char *v)
{
	bool		ok = v[0] != '\0' && strlen(v) <= 32;

	for (const char *c = v; ok && *c; c++)
		ok = (*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z');
	return ok;
}

static void *
alipay_load_settings(Jsonb *settings)
{
	static const char *const allowed[] = {"app_id", "seller_id", "query_after_s",
	"app_private_key", "api_base", "fetch_bills", NULL};
	AlipayConf *conf = palloc0(sizeof(AlipayConf));

	pn_settings_only(settings, "alipay", allowed);
	(void) pn_setting_int(settings, "query_after_s", 300, 5, 86400);
	(void) pn_setting_bool(settings, "fetch_bills");
	conf->app_id = pn_setting_text(settings, "app_id", true);
	conf->seller_id = pn_setting_text(settings, "seller_id", false);
	conf->api_base = pn_setting_base_url(settings, "api_base", "https://openapi.alipay.com");
	conf->app_private_key = pn_setting_private_key(settings, "app_private_key");
	/*
	 * a channel that signs queries: its app_id letters and digits
	 * (Alipay's are digits), as it is part of what the app's key signs,
	 * where a & or = would make it sign another request.  Checked only
	 * then: a channel of 1.3 with another app_id still loads, and no one
	 * channel may stop the others' loading
	 */
	if (conf->app_private_key != NULL &&
		(!alipay_id_ok(conf->app_id) || (conf->seller_id != NULL && !alipay_id_ok(conf->seller_id))))
	{
		pn_wipe_string(conf->app_private_key);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings \"app_id\" and \"seller_id\" must be 1 to 32 letters or digits on a channel that signs queries")));
	}
	return conf;
}

/* Wipe the application's private key with the configuration generation. */
static void
alipay_free_settings(void *conf)
{
	if (conf != NULL)
		pn_wipe_string(((AlipayConf *) conf)->app_private_key);
}

/* ---------------------------------------------------------------------
 * Authentication
 * ---------------------------------------------------------------------
 */

/* PG_UTF8 or PG_GBK for an Alipay charset name (any case), else -1. */
static int
charset_encoding(const char *name, size_t len)
{
	if (len == 5 && pg_strncasecmp(name, "utf-8", 5) == 0)
		return PG_UTF8;
	/* GBK is a superset of GB2312, so one decoder serves both */
	if ((len == 3 && pg_strncasecmp(name, "gbk", 3) == 0) ||
		(len == 6 && pg_strncasecmp(name, "gb2312", 6) == 0))
		return PG_GBK;
	return -1;
}

/* s without leading and trailing blanks (in place). */
static char *
trim(char *s)
{
	char	   *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

/*
 * Check Content-Type, when given: the media type must be
 * application/x-www-form-urlencoded; *encoding is its charset parameter's
 * encoding, or -1 when it has none.  False when unacceptable.
 */
static bool
content_type_charset(const PnRequest *req, int *encoding)
{
	static const char form_type[] = "application/x-www-form-urlencoded";
	char	   *ct;
	char	   *param;
	int			found = pn_header(req->headers, "Content-Type", &ct);

	*encoding = -1;
	if (found == 0)
		return true;
	if (found < 0)
		return false;
	param = strchr(ct, ';');
	if (param)
		*param++ = '\0';
	if (pg_strcasecmp(trim(ct), form_type) != 0)
		return false;
	while (param != NULL)
	{
		char	   *next = strchr(param, ';');
		char	   *val;
		size_t		vlen;

		if (next)
			*next++ = '\0';
		param = trim(param);
		if (pg_strncasecmp(param, "charset=", 8) == 0)
		{
			val = param + 8;
			vlen = strlen(val);
			if (vlen >= 2 && val[0] == '"' && val[vlen - 1] == '"')
				val++, vlen -= 2;
			*encoding = charset_encoding(val, vlen);
			if (*encoding < 0)
				return false;
		}
		param = next;
	}
	return true;
}

/*
 * Decode the body and settle its charset: the signed `charset` parameter,
 * else Content-Type's, else UTF-8.  Both given and different: malformed.
 */
static PnReason
decode_form(const PnRequest *req, AlipayForm *af)
{
	const PnFormParam *cs;
	char	   *buf;
	int			header_enc;
	PnFormStatus st;

	if (!content_type_charset(req, &header_enc))
		return PN_R_MALFORMED;
	if (req->body_len <= 0)
		return PN_R_MALFORMED;
	af->form = palloc(sizeof(PnForm));
	buf = palloc(PN_FORM_BUFSIZE(req->body_len));
	st = pn_form_decode(req->body, req->body_len, af->form, buf,
						PN_FORM_BUFSIZE(req->body_len));
	if (st != PN_FORM_OK)
	{
		elog(DEBUG1, "paynotify: alipay form refused: %s",
			 pn_form_status_message(st));
		return PN_R_MALFORMED;
	}
	cs = pn_form_get(af->form, "charset");
	af->charset = cs ? charset_encoding(cs->value, cs->value_len) :
		(header_enc >= 0 ? header_enc : PG_UTF8);
	if (af->charset < 0 || (header_enc >= 0 && header_enc != af->charset))
		return PN_R_MALFORMED;
	return PN_OK;
}

/* RSA2 is the only algorithm taken; legacy RSA (SHA-1) is unsupported. */
static PnReason
check_sign_type(const PnForm *form)
{
	const PnFormParam *st = pn_form_get(form, "sign_type");

	if (st == NULL || st->value_len == 0)
		return PN_R_MALFORMED;
	if (strcmp(st->value, "RSA2") != 0)
		return PN_R_UNSUPPORTED;
	return PN_OK;
}

/*
 * Verify content with every active key of the channel.  PN_R_UNKNOWN_KEY
 * when the channel has no active key at all.
 */
static PnReason
verify_content(const PnRequest *req, const char *content, size_t len,
			   const unsigned char *sig, int siglen)
{
	const PnChannel *ch = req->channel;
	int			usable = 0;

	for (int i = 0; i < ch->nkeys; i++)
	{
		const PnKey *key = &ch->keys[i];

		if (key->pkey == NULL || !pn_key_active(key, req->now))
			continue;
		usable++;
		if (pn_key_verify(key, (const unsigned char *) content, len, sig, siglen))
			return PN_OK;
	}
	return usable ? PN_R_BAD_SIGNATURE : PN_R_UNKNOWN_KEY;
}

/*
 * sign must be strict base64 (a raw '+' turned into a space is not), and
 * must verify over the skip-empty content or, only when some value is
 * empty, over the keep-empty content (the SDKs disagree, §2.3).  Those are
 * the only two canonical forms accepted:
 *
 *	- skip-empty: alipay-sdk-java-all's AlipaySignature.rsaCheckV1 through
 *	  getSignCheckContentV1 (src/main/java/com/alipay/api/internal/util/
 *	  AlipaySignature.java): remove "sign" and "sign_type", sort the names,
 *	  append "key=value" only where StringUtils.areNotEmpty(key, value);
 *	  the same file's getSignContent, which signs requests, skips them too;
 *	- keep-empty: older releases of that same getSignCheckContentV1 append
 *	  every remaining pair, "name=" for an empty value, as alipay-easysdk's
 *	  Signer.verifyParams does (docs/GATEWAYS.md §2.3 [A2]); vectors
 *	  ali_empty_param_skipped_valid and ali_empty_param_included_valid.
 *
 * *keep_empty says which one verified: with skip-empty, empty-valued
 * parameters are outside the signature (anyone may add "x=" to a captured
 * notification), so nothing downstream may see them (is_signed).
 */
static PnReason
verify_signature(const PnRequest *req, const PnForm *form, bool *keep_empty)
{
	const PnFormParam *sign = pn_form_get(form, "sign");
	unsigned char *sig;
	int			siglen;
	char	   *content;
	size_t		len;
	PnReason	r;

	if (sign == NULL ||
		!pn_base64_decode(sign->value, (int) sign->value_len, &sig, &siglen))
		return PN_R_MALFORMED;

	/* the content is never longer than the body (form.h) */
	content = palloc(req->body_len + 1);
	len = pn_form_canonical(form, false, content, req->body_len + 1);
	if (len == (size_t) -1)
		return PN_R_MALFORMED;	/* cannot happen, see above */
	*keep_empty = false;
	r = verify_content(req, content, len, sig, siglen);
	if (r != PN_R_BAD_SIGNATURE || !pn_form_has_empty(form))
		return r;
	len = pn_form_canonical(form, true, content, req->body_len + 1);
	if (len == (size_t) -1)
		return PN_R_MALFORMED;
	*keep_empty = true;
	return verify_content(req, content, len, sig, siglen);
}

/* The gateway's authenticate: see the file header for the order. */
static PnReason
alipay_authenticate(const PnRequest *req, PnNotice *notice)
{
	const AlipayConf *conf = (const AlipayConf *) req->channel->conf;
	AlipayForm	af;
	PnReason	r;

	memset(&af, 0, sizeof(af));
	if ((r = decode_form(req, &af)) != PN_OK)
		return r;
	if ((r = check_sign_type(af.form)) != PN_OK)
		return r;
	if ((r = verify_signature(req, af.form, &af.keep_empty)) != PN_OK)
		return r;

	/* authentic from here on */
	if (!convert_form(&af))
		return PN_R_MALFORMED;
	if ((r = check_merchant(conf, &af)) != PN_OK)
		return r;
	return fill_notice(&af, notice);
}

/* ---------------------------------------------------------------------
 * The authenticated notification
 * ---------------------------------------------------------------------
 */

/*
 * s (len bytes, no NUL) in encoding from, as a NUL-terminated string in the
 * database encoding.  False when it is not valid in from or has no
 * equivalent in the database encoding; never raises.
 */
static bool
to_server(const char *s, size_t len, int from, char **out)
{
	int			to = GetDatabaseEncoding();
	bool		ascii = true;
	Oid			proc;
	int			dstlen;

	for (size_t i = 0; i < len && ascii; i++)
		ascii = !IS_HIGHBIT_SET(s[i]);
	if (ascii || to == PG_SQL_ASCII)
	{
		*out = pnstrdup(s, len);
		return true;
	}
	if (from == to)
	{
		if (!pg_verify_mbstr(to, s, (int) len, true))
			return false;
		*out = pnstrdup(s, len);
		return true;
	}
	proc = FindDefaultConversionProc(from, to);
	if (!OidIsValid(proc) || len > (MaxAllocSize - 1) / MAX_CONVERSION_GROWTH)
		return false;
	dstlen = (int) len * MAX_CONVERSION_GROWTH + 1;
	*out = palloc(dstlen);
	/* with noError, the conversion stops short at the first bad character */
	return pg_do_encoding_conversion_buf(proc, from, to,
										 (unsigned char *) s, (int) len,
										 (unsigned char *) *out, dstlen,
										 true) == (int) len;
}

/* Convert every name and value into the database encoding. */
static bool
convert_form(AlipayForm *af)
{
	const PnForm *form = af->form;

	af->names = palloc(sizeof(char *) * form->nparams);
	af->values = palloc(sizeof(char *) * form->nparams);
	for (int i = 0; i < form->nparams; i++)
	{
		const PnFormParam *p = &form->params[i];

		if (!to_server(p->name, p->name_len, af->charset, &af->names[i]) ||
			!to_server(p->value, p->value_len, af->charset, &af->values[i]))
			return false;
	}
	return true;
}

/*
 * Whether the signature that verified covers p: never sign and sign_type
 * (§2.3 step 2), and an empty value only when the keep-empty content
 * verified (see verify_signature).
 */
static bool
is_signed(const AlipayForm *af, const PnFormParam *p)
{
	if (strcmp(p->name, "sign") == 0 || strcmp(p->name, "sign_type") == 0)
		return false;
	return p->value_len > 0 || af->keep_empty;
}

/*
 * A converted value by name, or NULL when absent or not covered by the
 * signature: an unsigned parameter is as good as absent.
 */
static const char *
field(const AlipayForm *af, const char *name)
{
	const PnFormParam *p = pn_form_get(af->form, name);

	return p && is_signed(af, p) ? af->values[p - af->form->params] : NULL;
}

/*
 * Whether a parameter describes the delivery rather than the notification:
 * a re-delivery of the same notify_id carries a new notify_time and so a new
 * sign (or one from a rotated key).  They stay out of the payload, which
 * the pipeline compares across deliveries of one id.
 */
static bool
per_delivery(const PnFormParam *p)
{
	return strcmp(p->name, "sign") == 0 || strcmp(p->name, "sign_type") == 0 ||
		strcmp(p->name, "notify_time") == 0;
}

/*
 * Every signed parameter but the per-delivery ones, as a jsonb object of
 * strings: exactly what the signature covers (less notify_time), so that a
 * copy with unsigned parameters added compares equal to the original and
 * nothing unsigned is stored as if authentic.
 */
static Jsonb *
form_payload(const AlipayForm *af)
{
	JsonbParseState *state = NULL;
	JsonbValue	k,
				v;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < af->form->nparams; i++)
	{
		if (per_delivery(&af->form->params[i]) ||
			!is_signed(af, &af->form->params[i]))
			continue;
		k.type = jbvString;
		k.val.string.val = af->names[i];
		k.val.string.len = strlen(af->names[i]);
		pushJsonbValue(&state, WJB_KEY, &k);
		v.type = jbvString;
		v.val.string.val = af->values[i];
		v.val.string.len = strlen(af->values[i]);
		pushJsonbValue(&state, WJB_VALUE, &v);
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/* Whether the notification is of an agreement (dut_user_sign, dut_user_unsign). */
static bool
is_agreement(const AlipayForm *af)
{
	const char *type = field(af, "notify_type");

	return type != NULL && (strcmp(type, "dut_user_sign") == 0 ||
							strcmp(type, "dut_user_unsign") == 0);
}

/*
 * app_id must be ours, and seller_id too when configured (§2.7).  An
 * agreement's notification names no seller but may name the merchant by
 * partner_id (its PID, the seller_id setting): a partner_id given must be
 * the channel's seller_id when that is set, and a notification without
 * app_id is ours only by its partner_id, so only on a channel with
 * seller_id set (a key may be shared by several apps and merchants).
 */
static PnReason
check_merchant(const AlipayConf *conf, const AlipayForm *af)
{
	const char *app_id = field(af, "app_id");
	const char *seller_id = field(af, "seller_id");
	const char *partner_id = field(af, "partner_id");

	if (is_agreement(af))
	{
		if (app_id != NULL && strcmp(app_id, conf->app_id) != 0)
			return PN_R_MISMATCH;
		if (partner_id != NULL && conf->seller_id != NULL &&
			strcmp(partner_id, conf->seller_id) != 0)
			return PN_R_MISMATCH;
		if (app_id == NULL &&
			(partner_id == NULL || conf->seller_id == NULL))
			return PN_R_MISMATCH;
		return PN_OK;
	}
	if (app_id == NULL || strcmp(app_id, conf->app_id) != 0)
		return PN_R_MISMATCH;
	if (conf->seller_id != NULL &&
		(seller_id == NULL || strcmp(seller_id, conf->seller_id) != 0))
		return PN_R_MISMATCH;
	return PN_OK;
}

/* A yuan amount field in fen: -1 when absent, malformed when not exact. */
static PnReason
amount_field(const AlipayForm *af, const char *name, int64 *fen)
{
	const char *s = field(af, name);

	*fen = -1;
	if (s == NULL)
		return PN_OK;
	return pn_parse_decimal(s, strlen(s), 2, fen) ? PN_OK : PN_R_MALFORMED;
}

/*
 * Whether the notice carries a refund (§2.8): a refund_fee above zero, with
 * the refund's own evidence, gmt_refund or out_biz_no.  Alipay's payment
 * notices carry refund_fee=0.00 too (its documented sample does): that is
 * no refund.
 */
static bool
carries_refund(const AlipayForm *af, int64 refund_fee)
{
	const char *gmt_refund = field(af, "gmt_refund");
	const char *refund_id = field(af, "out_biz_no");

	return refund_fee > 0 &&
		((gmt_refund != NULL && *gmt_refund != '\0') ||
		 (refund_id != NULL && *refund_id != '\0'));
}

/*
 * What the notification asks (§2.8): TRADE_SUCCESS / TRADE_FINISHED pay,
 * unless it carries a refund (partial: TRADE_SUCCESS, full: TRADE_CLOSED);
 * TRADE_CLOSED without one closes; anything else is handed on.  A
 * second "paid" (TRADE_FINISHED after TRADE_SUCCESS) is harmless: the state
 * machine and payment_record's unique trade_no absorb it.  A signed
 * notification without out_trade_no / trade_no is left to the pipeline,
 * which records it as an anomaly instead of applying it.
 */
static void
choose_action(const AlipayForm *af, PnNotice *n)
{
	const char *status = field(af, "trade_status");
	const char *refund_id = field(af, "out_biz_no");
	bool		refund = carries_refund(af, n->refunded_total);

	n->action = PN_ACT_NONE;
	if (!refund)
		n->refunded_total = -1;
	if (status == NULL)
		return;
	if (refund && (strcmp(status, "TRADE_SUCCESS") == 0 ||
				   strcmp(status, "TRADE_CLOSED") == 0))
	{
		n->action = PN_ACT_REFUND;
		/* refund_fee is cumulative; this refund alone is not stated */
		n->refund_amount = -1;
		n->refund_id = pstrdup(refund_id && *refund_id ? refund_id : n->notify_id);
	}
	else if (strcmp(status, "TRADE_SUCCESS") == 0 ||
			 strcmp(status, "TRADE_FINISHED") == 0)
		n->action = PN_ACT_PAY;
	else if (strcmp(status, "TRADE_CLOSED") == 0)
		n->action = PN_ACT_CLOSE;
}

/* A non-empty field, or NULL. */
static char *
field_text(const AlipayForm *af, const char *name)
{
	const char *v = field(af, name);

	return v != NULL && *v != '\0' ? pstrdup(v) : NULL;
}

/* A field holding Alipay's time (Beijing, yyyy-MM-dd HH:mm:ss), or -1. */
static int64
field_time(const AlipayForm *af, const char *name)
{
	int64		t;

	return pn_parse_time(field(af, name), 8 * 3600, &t) ? t : -1;
}

/*
 * dut_user_sign with status NORMAL signs the agreement agreement_no;
 * dut_user_unsign with status UNSIGN ends it (docs/GATEWAYS.md,
 * "Agreements"); any other status is handed on.  The merchant's reference
 * is external_agreement_no, the plan personal_product_code.
 */
static void
fill_agreement(const AlipayForm *af, PnNotice *n)
{
	const char *type = field(af, "notify_type");
	const char *status = field(af, "status");
	int64		ended_at = field_time(af, "unsign_time");

	n->action = PN_ACT_NONE;
	n->order_no = NULL;
	n->trade_no = NULL;
	n->order_amount = -1;
	n->refunded_total = -1;
	n->currency = NULL;
	if (status != NULL && strcmp(type, "dut_user_sign") == 0 && strcmp(status, "NORMAL") == 0)
		n->action = PN_ACT_AGREEMENT_SIGNED;
	else if (status != NULL && strcmp(type, "dut_user_unsign") == 0 && strcmp(status, "UNSIGN") == 0)
		n->action = PN_ACT_AGREEMENT_ENDED;
	else
		return;
	if (ended_at < 0)
		ended_at = field_time(af, "invalid_time");
	n->agreement_id = field_text(af, "agreement_no");
	n->detail = pn_agreement_detail(n->agreement_id, field_text(af, "external_agreement_no"),
									field_text(af, "personal_product_code"), status,
									field_time(af, "sign_time"),
									n->action == PN_ACT_AGREEMENT_ENDED ? ended_at : -1);
}

/* Fill the notice from the converted form. */
static PnReason
fill_notice(const AlipayForm *af, PnNotice *n)
{
	const char *notify_id = field(af, "notify_id");
	const char *status = field(af, "trade_status");
	const char *type = field(af, "notify_type");
	const char *order_no = field(af, "out_trade_no");
	const char *trade_no = field(af, "trade_no");
	PnReason	r;

	if (notify_id == NULL || *notify_id == '\0' ||
		strlen(notify_id) > MAX_NOTIFY_ID_LEN)
		return PN_R_MALFORMED;
	n->notify_id = pstrdup(notify_id);
	n->event_type = pstrdup(status && *status ? status :
							(type && *type ? type : "unknown"));
	n->order_no = order_no && *order_no ? pstrdup(order_no) : NULL;
	n->trade_no = trade_no && *trade_no ? pstrdup(trade_no) : NULL;
	n->currency = pstrdup("CNY");
	n->refund_id = NULL;
	n->refund_amount = -1;
	n->anomaly = NULL;
	if ((r = amount_field(af, "total_amount", &n->order_amount)) != PN_OK)
		return r;
	if ((r = amount_field(af, "refund_fee", &n->refunded_total)) != PN_OK)
		return r;
	choose_action(af, n);
	/* a deduction under an agreement names it */
	n->agreement_id = field_text(af, "agreement_no");
	if (is_agreement(af))
		fill_agreement(af, n);
	n->payload = form_payload(af);
	return PN_OK;
}

/* ---------------------------------------------------------------------
 * Queries (1.4): alipay.trade.query
 * ---------------------------------------------------------------------
 */

#define QUERY_METHOD "alipay.trade.query"
#define RESPONSE_KEY "alipay_trade_query_response"
#define CLOSE_METHOD "alipay.trade.close"
#define CLOSE_RESPONSE_KEY "alipay_trade_close_response"

/* Whether the channel can sign a request: else an error saying why not. */
static void
alipay_can_sign(const PnChannel *ch, const char *what)
{
	const AlipayConf *conf = ch->conf;

	if (conf->app_private_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("channel \"%s\" cannot %s Alipay: it has no app_private_key", ch->name, what),
				 errhint("Set app_private_key (from a file: {\"file\": \"<name>\"}) with paynotify_alter_channel.")));
}

/*
 * POST {api_base}/gateway.do with the common parameters in the URL and
 * biz_content biz (JSON text the caller built with escape_json) in the
 * form body, as Alipay's SDKs send it; signed RSA2 with the application's
 * private key over every parameter but sign, sorted by name, "k=v" joined
 * by '&' (sign_type included: the request rule, not the notifications');
 * timestamp in Beijing time (UTC+8, no daylight saving).  The one signer
 * of Alipay requests: queries (alipay.trade.query), close calls
 * (alipay.trade.close), bills (alipay.data.dataservice.bill.downloadurl.query).
 */
static void
alipay_signed_call(const PnChannel *ch, const char *method, const char *biz, int64 now,
				   PnQueryRequest *out)
{
	const AlipayConf *conf = ch->conf;
	StringInfoData content;
	char		timestamp[32];
	time_t		beijing = (time_t) (now + 8 * 3600);
	struct tm	tm;
	char	   *sig;
	const char *err;

	if (gmtime_r(&beijing, &tm) == NULL ||
		strftime(timestamp, sizeof(timestamp), "%Y-%m-%d %H:%M:%S", &tm) == 0)
		elog(ERROR, "paynotify: could not format the time");
	initStringInfo(&content);
	appendStringInfo(&content, "app_id=%s&biz_content=%s&charset=utf-8&format=JSON&method=%s"
					 "&sign_type=RSA2&timestamp=%s&version=1.0", conf->app_id, biz, method, timestamp);
	sig = pn_rsa_sign(conf->app_private_key, (unsigned char *) content.data, content.len, &err);
	pfree(content.data);
	if (sig == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("channel \"%s\": signing the request failed: %s", ch->name, err)));
	out->method = "POST";
	out->url = psprintf("%s/gateway.do?app_id=%s&charset=utf-8&format=JSON&method=%s"
						"&sign=%s&sign_type=RSA2&timestamp=%s&version=1.0",
						conf->api_base, pn_url_encode(conf->app_id), pn_url_encode(method),
						pn_url_encode(sig), pn_url_encode(timestamp));
	out->body = psprintf("biz_content=%s", pn_url_encode(biz));
	pn_query_header(out, "Content-Type", pstrdup("application/x-www-form-urlencoded;charset=utf-8"));
	pn_query_header(out, "Accept", pstrdup("application/json"));
}

/* method with biz_content {"out_trade_no": order_no}: a query, a close. */
static void
alipay_order_call(const PnChannel *ch, const char *method, const char *what,
				  const char *order_no, int64 now, PnQueryRequest *out)
{
	StringInfoData biz;

	alipay_can_sign(ch, what);
	initStringInfo(&biz);
	appendStringInfoString(&biz, "{\"out_trade_no\":");
	escape_json(&biz, order_no);
	appendStringInfoChar(&biz, '}');
	alipay_signed_call(ch, method, biz.data, now, out);
}

static void
alipay_query_request(const PnChannel *ch, const char *order_no, int64 now, PnQueryRequest *out)
{
	alipay_order_call(ch, QUERY_METHOD, "query", order_no, now, out);
}

/* alipay.trade.close of the order, as the query. */
static void
alipay_close_request(const PnChannel *ch, const char *order_no, int64 now, PnQueryRequest *out)
{
	alipay_order_call(ch, CLOSE_METHOD, "close an order at", order_no, now, out);
}

/* Past white space. */
static const char *
skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* Past a JSON string starting at its quote; NULL when unterminated. */
static const char *
skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++)
	{
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* Past one JSON value (of text already parsed as JSON); NULL when cut short. */
static const char *
skip_value(const char *p, const char *end)
{
	int			depth = 0;

	if (p >= end)
		return NULL;
	if (*p == '"')
		return skip_string(p, end);
	if (*p != '{' && *p != '[')
	{
		while (p < end && *p != ',' && *p != '}' && *p != ']' &&
			   *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			p++;
		return p;
	}
	while (p < end)
	{
		if (*p == '"')
		{
			if ((p = skip_string(p, end)) == NULL)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/*
 * The exact text of the value of the top-level member name in a JSON
 * object (text pn_parse_json accepted), as Alipay signs it: false when it
 * is absent, or there more than once, or its name is written with escapes
 * (never by Alipay: refused rather than matched).
 */
static bool
member_text(const char *text, int len, const char *name, const char **value, int *vlen)
{
	const char *p = text;
	const char *end = text + len;
	size_t		namelen = strlen(name);
	int			found = 0;

	p = skip_ws(p, end);
	if (p >= end || *p != '{')
		return false;
	p = skip_ws(p + 1, end);
	while (p < end && *p != '}')
	{
		const char *key = p;
		const char *keyend = skip_string(p, end);
		const char *v;

		if (*p != '"' || keyend == NULL)
			return false;
		p = skip_ws(keyend, end);
		if (p >= end || *p != ':')
			return false;
		v = skip_ws(p + 1, end);
		p = skip_value(v, end);
		if (p == NULL)
			return false;
		if ((size_t) (keyend - key - 2) == namelen && memcmp(key + 1, name, namelen) == 0)
		{
			*value = v;
			*vlen = (int) (p - v);
			found++;
		}
		else if (memchr(key + 1, '\\', keyend - key - 2) != NULL &&
				 (size_t) (keyend - key - 2) >= namelen)
			return false;		/* an escaped name that might read as ours */
		p = skip_ws(p, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
	}
	return found == 1;
}

/*
 * An answer of Alipay's API: {"<key>": {...}, "sign": "..."} (and
 * alipay_cert_sn in certificate mode), the sign RSA2 over the exact text
 * of the response object, by any active key of the channel (the Alipay
 * public key its notifications are verified with).  *obj is that signed
 * object, and *code its code.  An unsigned answer (a gateway error:
 * error_response) is malformed.  The answers to the queries and to the
 * close calls are verified here.
 */
static PnReason
signed_response(const PnRequest *req, const char *key, Jsonb **obj, char **code)
{
	Jsonb	   *doc = pn_parse_json(req->body, req->body_len);
	const char *text;
	int			textlen;
	char	   *sign;
	unsigned char *sig;
	int			siglen;
	PnReason	r;

	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc) ||
		!member_text(req->body, req->body_len, key, &text, &textlen) ||
		!pn_json_string(doc, "sign", &sign) ||
		!pn_base64_decode(sign, strlen(sign), &sig, &siglen))
		return PN_R_MALFORMED;
	if ((r = verify_content(req, text, textlen, sig, siglen)) != PN_OK)
		return r;
	*obj = pn_parse_json(text, textlen);
	if (*obj == NULL || !JB_ROOT_IS_OBJECT(*obj) || !pn_json_string(*obj, "code", code))
		return PN_R_MALFORMED;
	return PN_OK;
}

/*
 * An answer to alipay.trade.close, verified as a query's
 * (signed_response, alipay_trade_close_response): code 10000 of the order
 * asked about (out_trade_no) closed the trade; another code did not
 * (ACQ.TRADE_STATUS_ERROR: paid meanwhile, or closed already; its sub_code
 * is the state).  A 10000 about another order is refused.
 */
static PnReason
alipay_close_response(const PnQueryResponse *resp, PnQueryAnswer *answer)
{
	Jsonb	   *obj;
	char	   *code = NULL;
	char	   *sub_code = NULL;
	char	   *order_no = NULL;
	PnReason	r;

	answer->close_answer = true;
	if ((r = signed_response(&resp->req, CLOSE_RESPONSE_KEY, &obj, &code)) != PN_OK)
		return r;
	answer->verdict = PN_Q_PENDING;
	if (strcmp(code, "10000") == 0)
	{
		if (!pn_json_string(obj, "out_trade_no", &order_no) ||
			strcmp(order_no, resp->order_no) != 0)
			return PN_R_MISMATCH;
		answer->closed = true;
		answer->state = "closed";
		return PN_OK;
	}
	/* a refusal names the order when it names one: another's is no answer */
	if (pn_json_string(obj, "out_trade_no", &order_no) && strcmp(order_no, resp->order_no) != 0)
		return PN_R_MISMATCH;
	(void) pn_json_string(obj, "sub_code", &sub_code);
	answer->closed = false;
	answer->state = sub_code != NULL && sub_code[0] != '\0' ? sub_code : code;
	if (strlen(answer->state) > 64)
		return PN_R_MALFORMED;
	return PN_OK;
}

/*
 * An answer to alipay.trade.query: {"alipay_trade_query_response": {...},
 * "sign": "..."} (and alipay_cert_sn in certificate mode), the sign RSA2
 * over the exact text of the response object, by any active key of the
 * channel (the Alipay public key its notifications are verified with).
 * Its fields are read from that same signed text.  Code 10000 with
 * TRADE_SUCCESS or TRADE_FINISHED was paid; WAIT_BUYER_PAY, TRADE_CLOSED
 * and 40004 ACQ.TRADE_NOT_EXIST were not; anything else settles nothing.
 * An answer about another order is refused: Alipay's answers carry no
 * time, so only out_trade_no ties one to the query.  An unsigned answer (a
 * gateway error: error_response) is refused as malformed.
 */
static PnReason
alipay_query_response(const PnQueryResponse *resp, PnNotice *n, PnQueryAnswer *answer)
{
	const PnRequest *req = &resp->req;
	Jsonb	   *obj;
	char	   *code = NULL;
	char	   *sub_code = NULL;
	char	   *status = NULL;
	char	   *order_no = NULL;
	char	   *trade_no = NULL;
	char	   *amount = NULL;
	const char *text;
	int			textlen;
	PnReason	r;

	/* after a close call, its answer: unless it is a query's (its own key) */
	if (resp->close &&
		!member_text(req->body, req->body_len, RESPONSE_KEY, &text, &textlen))
		return alipay_close_response(resp, answer);
	if ((r = signed_response(req, RESPONSE_KEY, &obj, &code)) != PN_OK)
		return r;
	(void) pn_json_string(obj, "sub_code", &sub_code);
	(void) pn_json_string(obj, "trade_status", &status);
	(void) pn_json_string(obj, "out_trade_no", &order_no);
	(void) pn_json_string(obj, "trade_no", &trade_no);
	(void) pn_json_string(obj, "total_amount", &amount);

	n->payload = obj;
	n->order_no = pstrdup(resp->order_no);
	n->currency = pstrdup("CNY");
	n->action = PN_ACT_NONE;
	answer->verdict = PN_Q_PENDING;
	if (strcmp(code, "10000") == 0 && status != NULL)
	{
		answer->state = status;
		if (strcmp(status, "TRADE_SUCCESS") == 0 || strcmp(status, "TRADE_FINISHED") == 0)
			answer->verdict = PN_Q_PAID;
		/*
		 * closed for good.  WAIT_BUYER_PAY is no end, and an Alipay answer
		 * carries no time: an old one replayed would say so after the
		 * payment
		 */
		else if (strcmp(status, "WAIT_BUYER_PAY") == 0)
			answer->verdict = PN_Q_OPEN;	/* once expired: closed at Alipay */
		else if (strcmp(status, "TRADE_CLOSED") == 0)
		{
			/*
			 * TRADE_CLOSED is also a paid trade refunded in full: with a
			 * payment date or money received it closes nothing (its
			 * payment and refund are the notifications' and the bill's)
			 */
			char	   *paid_at = NULL;
			char	   *received = NULL;
			int64		fen = 0;

			(void) pn_json_string(obj, "send_pay_date", &paid_at);
			if (!pn_json_string(obj, "receipt_amount", &received))
				(void) pn_json_string(obj, "buyer_pay_amount", &received);
			if ((paid_at != NULL && paid_at[0] != '\0') ||
				(received != NULL &&
				 (!pn_parse_decimal(received, strlen(received), 2, &fen) || fen != 0)))
				answer->state = "TRADE_CLOSED after a payment";
			else
				answer->verdict = PN_Q_UNPAID;
		}
	}
	else if (sub_code != NULL && strcmp(sub_code, "ACQ.TRADE_NOT_EXIST") == 0)
		answer->state = sub_code;	/* no trade yet: the customer may pay */
	else
		answer->state = sub_code ? sub_code : code;
	n->event_type = psprintf("query.%s", answer->state);
	if (answer->verdict != PN_Q_PENDING &&
		(order_no == NULL || strcmp(order_no, resp->order_no) != 0))
		return PN_R_MISMATCH;
	if (trade_no != NULL && trade_no[0] != '\0')
		n->trade_no = trade_no;
	if (answer->verdict == PN_Q_PAID)
	{
		if (n->trade_no == NULL || amount == NULL ||
			!pn_parse_decimal(amount, strlen(amount), 2, &n->order_amount))
			return PN_R_MALFORMED;
		n->action = PN_ACT_PAY;
		n->notify_id = pn_query_notify_id(n->trade_no, answer->state);
	}
	else
		n->notify_id = pn_query_notify_id(resp->order_no, answer->state);
	return PN_OK;
}

/* ---------------------------------------------------------------------
 * Bills (1.4): alipay.data.dataservice.bill.downloadurl.query, then the
 * download
 * ---------------------------------------------------------------------
 */

#define BILL_METHOD "alipay.data.dataservice.bill.downloadurl.query"
#define BILL_RESPONSE_KEY "alipay_data_dataservice_bill_downloadurl_query_response"

/*
 * list: the method with biz_content {"bill_type":"trade","bill_date":day},
 * signed as queries are; download: GET the bill_download_url, unsigned
 * (the URL carries Alipay's own token).
 */
static void
alipay_bill_request(const PnChannel *ch, const PnBillStep *step, int64 now, PnQueryRequest *out)
{
	const AlipayConf *conf = ch->conf;
	StringInfoData biz;

	alipay_can_sign(ch, "fetch the bills of");
	if (strcmp(step->step, "list") == 0)
	{
		initStringInfo(&biz);
		appendStringInfoString(&biz, "{\"bill_type\":\"trade\",\"bill_date\":");
		escape_json(&biz, step->day);
		appendStringInfoChar(&biz, '}');
		alipay_signed_call(ch, BILL_METHOD, biz.data, now, out);
		return;
	}
	if (strcmp(step->step, "download") != 0 || step->url == NULL ||
		!alipay_download_ok(conf, step->url))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("channel \"%s\": no Alipay bill request for step \"%s\"", ch->name, step->step)));
	out->method = "GET";
	out->url = pstrdup(step->url);
	out->body = NULL;
}

/*
 * Whether the host of an https URL is domain or under it (a dot before the
 * suffix: evilalipay.com is not under alipay.com).
 */
static bool
alipay_host_under(const char *url, const char *domain)
{
	const char *host = url + 8;
	size_t		n = strcspn(host, ":/?");
	size_t		d = strlen(domain);

	if (n == d)
		return pg_strncasecmp(host, domain, d) == 0;
	return n > d && host[n - d - 1] == '.' && pg_strncasecmp(host + n - d, domain, d) == 0;
}

/*
 * Where an Alipay bill may be downloaded from: https on a host under
 * alipay.com or alipayobjects.com; http on the host of an http api_base
 * (which is this machine: a simulator); or http://dwbillcenter.alipay.com,
 * where Alipay itself hands out http URLs.  Always a plain URL
 * (pn_url_plain: no dot segment, encoded slash or byte above 0x7f).  A
 * file fetched over http is only compared with our ledger, never applied
 * (docs/SECURITY.md).
 */
static bool
alipay_download_ok(const AlipayConf *conf, const char *url)
{
	if (!pn_url_safe(url) || !pn_url_plain(url))
		return false;
	if (strncmp(url, "https://", 8) == 0)
		return alipay_host_under(url, "alipay.com") || alipay_host_under(url, "alipayobjects.com");
	if (strncmp(url, "http://dwbillcenter.alipay.com/", 31) == 0)
		return true;
	return strncmp(conf->api_base, "http://", 7) == 0 && pn_url_path(url, conf->api_base) != NULL;
}

/*
 * list: the answer verified as a query's (signed_response, over the exact
 * text of its response object); code 10000 gives bill_download_url,
 * sub_code isp.bill_not_exist says there is no bill yet.  download: the
 * zip as it came (its reading is the import's).
 */
static const char *
alipay_bill_response(const PnChannel *ch, const PnBillStep *step, const PnRequest *req,
					 int status, PnBillAnswer *answer)
{
	const AlipayConf *conf = ch->conf;
	Jsonb	   *obj;
	char	   *code;
	char	   *sub_code;
	PnReason	r;

	/* the zip is unsigned and Alipay states no hash of it: as it came */
	if (strcmp(step->step, "download") == 0)
		return pn_bill_download_answer(step, req, status, false, answer);
	if (strcmp(step->step, "list") != 0)
		return "no such step of an Alipay bill";
	if ((r = signed_response(req, BILL_RESPONSE_KEY, &obj, &code)) != PN_OK)
		return pn_reason_message(r);
	if (strcmp(code, "10000") != 0)
	{
		if (pn_json_string(obj, "sub_code", &sub_code) && strcmp(sub_code, "isp.bill_not_exist") == 0)
		{
			answer->result = "not ready";
			return NULL;
		}
		return "the gateway answered an error";
	}
	if (!pn_json_string(obj, "bill_download_url", &answer->url))
		return "malformed answer";
	if (!alipay_download_ok(conf, answer->url))
		return "bill_download_url is not on a host of Alipay nor a URL allowed";
	answer->result = "next";
	return NULL;
}
