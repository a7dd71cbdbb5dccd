/*-------------------------------------------------------------------------
 *
 * verify_wxpay.c
 *	  The WeChat Pay API v3 gateway, see docs/GATEWAYS.md §1.
 *
 * Order of checks (docs/GATEWAYS.md §0): required headers (no control character
 * in the newline-framed timestamp and nonce, nor in the serial) → signature type →
 * timestamp window → key by Wechatpay-Serial → signature probe → base64 →
 * RSA-SHA256 over "timestamp\nnonce\nbody\n" → envelope JSON →
 * resource.algorithm → AES-256-GCM with the APIv3 key → payload JSON →
 * merchant checks.  Nothing a request contains raises an error here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/json.h"

#include "paynotify.h"

#define SIGNATURE_TYPE "WECHATPAY2-SHA256-RSA2048"
#define PROBE_PREFIX "WECHATPAY/SIGNTEST/"
#define APIV3_KEY_LEN 32

/* The channel's parsed settings. */
typedef struct WxConf
{
	unsigned char apiv3_key[APIV3_KEY_LEN];
	char	   *mchid;			/* NULL: not checked */
	char	   *appid;			/* NULL: not checked */
	char	   *sp_mchid;		/* partner mode (§1.9): the service provider */
	char	   *sub_mchid;		/* its sub-merchant; NULL: any of its own */
	char	   *sp_appid;		/* NULL: not checked */
	char	   *sub_appid;		/* NULL: not checked */
	int			tolerance_s;
	char	   *merchant_private_key;	/* queries: the merchant's API key (PEM) */
	char	   *merchant_serial;	/* its certificate's serial */
	char	   *api_base;		/* https://api.mch.weixin.qq.com */
} WxConf;

/* The signed part of a request. */
typedef struct WxHeaders
{
	char	   *timestamp;
	char	   *nonce;
	char	   *signature;
	char	   *serial;
	char	   *type;
} WxHeaders;

static void *wx_load_settings(Jsonb *settings);
static void wx_free_settings(void *conf);
static void wx_check_key(const char *key_id, const char *material);
static PnReason wx_authenticate(const PnRequest *req, PnNotice *notice);

static PnReason read_headers(Jsonb *headers, WxHeaders *h);
static bool framing_safe(const char *s);
static PnReason check_signature(const PnRequest *req, const WxConf *conf, const WxHeaders *h);
/*
 * The envelope's fields paynotify reads: the envelope is read once and
 * never stored, so it is not built as jsonb (pn_json_fields).
 */
typedef enum
{
	ENV_ID,
	ENV_EVENT_TYPE,
	ENV_ALGORITHM,
	ENV_CIPHERTEXT,
	ENV_NONCE,
	ENV_AAD,
	ENV_ORIGINAL_TYPE,
	ENV_FIELDS
} EnvField;

static PnReason open_resource(const WxConf *conf, const PnJsonField *env, Jsonb **payload);
static PnReason extract(const WxConf *conf, const PnJsonField *env, PnNotice *n);
static PnReason extract_transaction(const WxConf *conf, PnNotice *n);
static PnReason extract_refund(PnNotice *n);
static PnReason extract_entrust(const WxConf *conf, PnNotice *n);
static PnReason extract_combine(const WxConf *conf, PnNotice *n);
static int	sub_order_cmp(const void *a, const void *b);
static bool partner_ours(const WxConf *conf, Jsonb *payload);
static bool app_ours(const WxConf *conf, Jsonb *payload, bool combine);
static bool is_original_type(const PnJsonField *env, const char *type);
static void wx_close_request(const PnChannel *ch, const char *order_no, int64 now,
							 PnQueryRequest *out);
static void wx_query_request(const PnChannel *ch, const char *order_no, int64 now,
							 PnQueryRequest *out);
static PnReason wx_close_response(const PnRequest *req, PnQueryAnswer *answer);
static void wx_bill_request(const PnChannel *ch, const PnBillStep *step, int64 now,
							PnQueryRequest *out);
static const char *wx_bill_response(const PnChannel *ch, const PnBillStep *step,
									const PnRequest *resp, int status, PnBillAnswer *answer);
static PnReason wx_query_response(const PnQueryResponse *resp, PnNotice *notice,
								  PnQueryAnswer *answer);

const PnGateway pn_gateway_wxpay = {
	.name = "wxpay",
	.public_keys = true,
	.load_settings = wx_load_settings,
	.free_settings = wx_free_settings,
	.check_key = wx_check_key,
	.authenticate = wx_authenticate,
	/* success is the status code; a failure is 4xx/5xx with FAIL (§1.10) */
	.content_type = "application/json",
	.ack_body = "{\"code\":\"SUCCESS\",\"message\":\"OK\"}",
	.fail_body = "{\"code\":\"FAIL\",\"message\":\"%s\"}",
	.query_request = wx_query_request,
	.query_response = wx_query_response,
	.close_request = wx_close_request,
	.bill_request = wx_bill_request,
	.bill_response = wx_bill_response,
};

/*
 * apiv3_key (exactly 32 bytes), tolerance_s, and the merchant: mchid and
 * appid (a direct merchant), or sp_mchid, sub_mchid, sp_appid and sub_appid
 * (a service provider's channel for its sub-merchant), all optional.
 */
static void *
wx_load_settings(Jsonb *settings)
{
	static const char *const allowed[] = {"apiv3_key", "mchid", "appid", "tolerance_s",
	"sp_mchid", "sub_mchid", "sp_appid", "sub_appid", "query_after_s",
	"merchant_private_key", "merchant_serial", "api_base", "fetch_bills", NULL};
	WxConf	   *conf = palloc0(sizeof(WxConf));
	char	   *key;
	size_t		keylen;

	pn_settings_only(settings, "wxpay", allowed);
	(void) pn_setting_int(settings, "query_after_s", 300, 5, 86400);
	(void) pn_setting_bool(settings, "fetch_bills");
	key = pn_setting_text(settings, "apiv3_key", true);
	keylen = strlen(key);
	if (keylen == APIV3_KEY_LEN)
		memcpy(conf->apiv3_key, key, APIV3_KEY_LEN);
	explicit_bzero(key, keylen);	/* the copy, on the error path too */
	if (keylen != APIV3_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"apiv3_key\" must be exactly 32 bytes, not %d",
						(int) keylen),
				 errhint("Use the APIv3 key from the merchant console as is: 32 characters, not hex or base64.")));
	conf->mchid = pn_setting_text(settings, "mchid", false);
	conf->appid = pn_setting_text(settings, "appid", false);
	conf->sp_mchid = pn_setting_text(settings, "sp_mchid", false);
	conf->sub_mchid = pn_setting_text(settings, "sub_mchid", false);
	conf->sp_appid = pn_setting_text(settings, "sp_appid", false);
	conf->sub_appid = pn_setting_text(settings, "sub_appid", false);
	if ((conf->mchid != NULL || conf->appid != NULL) &&
		(conf->sp_mchid != NULL || conf->sub_mchid != NULL ||
		 conf->sp_appid != NULL || conf->sub_appid != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings \"mchid\"/\"appid\" and \"sp_mchid\"/\"sub_mchid\"/\"sp_appid\"/\"sub_appid\" do not go together"),
				 errhint("A direct merchant's channel sets mchid (and appid); a service provider's channel for a sub-merchant sets sp_mchid and sub_mchid (and sp_appid, sub_appid).")));
	if (conf->sp_mchid == NULL &&
		(conf->sub_mchid != NULL || conf->sp_appid != NULL || conf->sub_appid != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"sp_mchid\" is required with \"sub_mchid\", \"sp_appid\" or \"sub_appid\""),
				 errhint("Set sp_mchid to the service provider's merchant id.")));
	conf->tolerance_s = pn_setting_int(settings, "tolerance_s", 300, 1, 86400);
	conf->api_base = pn_setting_base_url(settings, "api_base", "https://api.mch.weixin.qq.com");
	conf->merchant_serial = pn_setting_text(settings, "merchant_serial", false);
	if (conf->merchant_serial != NULL &&
		(strlen(conf->merchant_serial) > 64 || strspn(conf->merchant_serial,
													 "0123456789ABCDEFabcdef") != strlen(conf->merchant_serial)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"merchant_serial\" must be the hexadecimal serial number of the merchant's API certificate")));
	conf->merchant_private_key = pn_setting_private_key(settings, "merchant_private_key");
	if ((conf->merchant_private_key == NULL) != (conf->merchant_serial == NULL))
	{
		pn_wipe_string(conf->merchant_private_key);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings \"merchant_private_key\" and \"merchant_serial\" go together"),
				 errhint("A query is signed with the merchant's API private key and names its certificate's serial.")));
	}
	return conf;
}

/* Wipe the APIv3 key when the configuration generation is freed. */
static void
wx_free_settings(void *conf)
{
	if (conf != NULL)
	{
		explicit_bzero(((WxConf *) conf)->apiv3_key, APIV3_KEY_LEN);
		pn_wipe_string(((WxConf *) conf)->merchant_private_key);
	}
}

/*
 * A platform certificate must be filed under its own serial (the value
 * Wechatpay-Serial will carry); a bare public key under any id, typically
 * PUB_KEY_ID_....
 */
static void
wx_check_key(const char *key_id, const char *material)
{
	char	   *serial = pn_cert_serial(material, strlen(material));

	if (serial != NULL && strcmp(serial, key_id) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("certificate serial %s does not match key id \"%s\"", serial, key_id),
				 errhint("File a platform certificate under its serial number, as Wechatpay-Serial sends it.")));
}

/* Layer 1 for WeChat: authenticate, decrypt, extract. */
static PnReason
wx_authenticate(const PnRequest *req, PnNotice *notice)
{
	const WxConf *conf = req->channel->conf;
	WxHeaders	h;
	PnJsonField env[ENV_FIELDS] = {
		[ENV_ID] = {"id"},
		[ENV_EVENT_TYPE] = {"event_type"},
		[ENV_ALGORITHM] = {"resource.algorithm"},
		[ENV_CIPHERTEXT] = {"resource.ciphertext"},
		[ENV_NONCE] = {"resource.nonce"},
		[ENV_AAD] = {"resource.associated_data"},
		[ENV_ORIGINAL_TYPE] = {"resource.original_type"},
	};
	PnReason	r;

	if ((r = read_headers(req->headers, &h)) != PN_OK)
		return r;
	if ((r = check_signature(req, conf, &h)) != PN_OK)
		return r;
	if (!pn_json_fields(req->body, req->body_len, env, ENV_FIELDS))
		return PN_R_MALFORMED;
	if ((r = open_resource(conf, env, &notice->payload)) != PN_OK)
		return r;
	return extract(conf, env, notice);
}

/* The four required headers (and the optional signature type). */
static PnReason
read_headers(Jsonb *headers, WxHeaders *h)
{
	static const char *const names[5] = {"Wechatpay-Timestamp", "Wechatpay-Nonce",
	"Wechatpay-Signature", "Wechatpay-Serial", "Wechatpay-Signature-Type"};
	char	   *values[5];
	int			found[5];
	int64		ts;

	/* one pass over the headers for the five */
	pn_headers(headers, names, 5, values, found);
	if (found[0] != 1 || found[1] != 1 || found[2] != 1 || found[3] != 1 || found[4] < 0)
		return PN_R_MALFORMED;
	h->timestamp = values[0];
	h->nonce = values[1];
	h->signature = values[2];
	h->serial = values[3];
	h->type = values[4];
	if (h->type != NULL && strcmp(h->type, SIGNATURE_TYPE) != 0)
		return PN_R_UNSUPPORTED;
	/* digits only, so never a line break either */
	if (!pn_parse_int64(h->timestamp, strlen(h->timestamp), &ts))
		return PN_R_MALFORMED;
	if (!framing_safe(h->nonce) || !framing_safe(h->serial))
		return PN_R_MALFORMED;
	return PN_OK;
}

/*
 * The signed message is "timestamp\nnonce\nbody\n" (docs/GATEWAYS.md §1.3): a
 * line break inside the nonce would move bytes between the nonce and the
 * body under one signature, so a value that is part of the framing may hold
 * no control character at all (WeChat's nonces are 32 letters and digits).
 * The serial is not signed, but it selects the key: held to the same rule.
 */
static bool
framing_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s < ' ' || *s == 0x7f)
			return false;
	return true;
}

/* Window, key by serial, probe, then RSA-SHA256 over the exact bytes. */
static PnReason
check_signature(const PnRequest *req, const WxConf *conf, const WxHeaders *h)
{
	const PnKey *key;
	int64		ts;
	unsigned char *sig;
	int			siglen;
	StringInfoData msg;
	bool		ok;

	(void) pn_parse_int64(h->timestamp, strlen(h->timestamp), &ts);
	if (ts > req->now + conf->tolerance_s || ts < req->now - conf->tolerance_s)
		return PN_R_STALE;
	key = pn_channel_key(req->channel, h->serial, req->now);
	if (key == NULL || key->pkey == NULL)
		return PN_R_UNKNOWN_KEY;
	if (strncmp(h->signature, PROBE_PREFIX, strlen(PROBE_PREFIX)) == 0)
		return PN_R_BAD_SIGNATURE;	/* WeChat's verification probe */
	if (!pn_base64_decode(h->signature, strlen(h->signature), &sig, &siglen))
		return PN_R_MALFORMED;

	initStringInfo(&msg);
	appendStringInfo(&msg, "%s\n%s\n", h->timestamp, h->nonce);
	appendBinaryStringInfo(&msg, req->body, req->body_len);
	appendStringInfoChar(&msg, '\n');
	ok = pn_key_verify(key, (unsigned char *) msg.data, msg.len, sig, siglen);
	pfree(msg.data);
	return ok ? PN_OK : PN_R_BAD_SIGNATURE;
}

/* AEAD_AES_256_GCM of resource with the APIv3 key; the payload is JSON. */
static PnReason
open_resource(const WxConf *conf, const PnJsonField *env, Jsonb **payload)
{
	const char *algorithm = env[ENV_ALGORITHM].value,
			   *ciphertext = env[ENV_CIPHERTEXT].value,
			   *nonce = env[ENV_NONCE].value,
			   *aad = "";
	unsigned char *ct,
			   *plain;
	int			ctlen,
				plainlen;

	if (env[ENV_ALGORITHM].found != 1 || env[ENV_CIPHERTEXT].found != 1 || env[ENV_NONCE].found != 1)
		return PN_R_MALFORMED;
	if (strcmp(algorithm, "AEAD_AES_256_GCM") != 0)
		return PN_R_UNSUPPORTED;
	/* absent, or a string */
	if (env[ENV_AAD].found < 0)
		return PN_R_MALFORMED;
	if (env[ENV_AAD].found == 1)
		aad = env[ENV_AAD].value;
	if (!pn_base64_decode(ciphertext, strlen(ciphertext), &ct, &ctlen) || ctlen < PN_GCM_TAG_LEN ||
		nonce[0] == '\0')
		return PN_R_MALFORMED;
	if (!pn_aead_open(conf->apiv3_key, APIV3_KEY_LEN,
					  (unsigned char *) nonce, strlen(nonce),
					  (unsigned char *) aad, strlen(aad),
					  ct, ctlen, &plain, &plainlen))
		return PN_R_DECRYPT;
	*payload = pn_parse_json((char *) plain, plainlen);
	if (*payload == NULL || !JB_ROOT_IS_OBJECT(*payload))
		return PN_R_MALFORMED;
	return PN_OK;
}

/*
 * Whether the envelope's resource.original_type is type, or absent (the
 * envelope of every documented notice has it; older ones may not).
 */
static bool
is_original_type(const PnJsonField *env, const char *type)
{
	const PnJsonField *original = &env[ENV_ORIGINAL_TYPE];

	return original->found == 0 ||
		(original->found == 1 && strcmp(original->value, type) == 0);
}

/*
 * Whether a partner channel's notice is its own: sp_mchid (combine_mchid
 * for a combine payment, whose sub-orders are judged one by one) is the
 * service provider's, and sub_mchid the sub-merchant's when configured.
 */
static bool
partner_ours(const WxConf *conf, Jsonb *payload)
{
	char	   *sp,
			   *sub;

	if (pn_json_present(payload, "combine_out_trade_no"))
		return pn_json_string(payload, "combine_mchid", &sp) &&
			strcmp(sp, conf->sp_mchid) == 0;
	if (!pn_json_string(payload, "sp_mchid", &sp) || strcmp(sp, conf->sp_mchid) != 0)
		return false;
	return conf->sub_mchid == NULL ||
		(pn_json_string(payload, "sub_mchid", &sub) && strcmp(sub, conf->sub_mchid) == 0);
}

/* Envelope id and type, merchant check, then what the event asks for. */
static PnReason
extract(const WxConf *conf, const PnJsonField *env, PnNotice *n)
{
	char	   *mchid = NULL;

	if (env[ENV_ID].found != 1 || env[ENV_EVENT_TYPE].found != 1)
		return PN_R_MALFORMED;
	n->notify_id = env[ENV_ID].value;
	n->event_type = env[ENV_EVENT_TYPE].value;
	if (n->notify_id[0] == '\0' || strlen(n->notify_id) > 255)
		return PN_R_MALFORMED;

	if (conf->mchid != NULL &&
		!((pn_json_string(n->payload, "mchid", &mchid) ||
		   pn_json_string(n->payload, "sp_mchid", &mchid) ||
		   pn_json_string(n->payload, "combine_mchid", &mchid)) &&
		  strcmp(mchid, conf->mchid) == 0))
		n->anomaly = "merchant_mismatch";
	if (conf->sp_mchid != NULL && !partner_ours(conf, n->payload))
		n->anomaly = "merchant_mismatch";

	/*
	 * What the resource is, as well as what the event says (§1.9): WeChat
	 * may send a profit-sharing resource under TRANSACTION.SUCCESS; only a
	 * transaction resource pays, only a refund resource refunds.  The
	 * envelope's original_type is signed with the body.
	 */
	if (strcmp(n->event_type, "TRANSACTION.SUCCESS") == 0 && is_original_type(env, "transaction"))
		return pn_json_present(n->payload, "combine_out_trade_no") ?
			extract_combine(conf, n) : extract_transaction(conf, n);
	if (strncmp(n->event_type, "REFUND.", 7) == 0 && is_original_type(env, "refund"))
		return extract_refund(n);
	if (strcmp(n->event_type, "ENTRUST.SIGN") == 0 ||
		strcmp(n->event_type, "ENTRUST.TERMINATE") == 0 ||
		(strncmp(n->event_type, "ENTRUST.", 8) == 0 &&
		 pn_json_present(n->payload, "contract_state")))
		return extract_entrust(conf, n);
	n->action = PN_ACT_NONE;
	(void) pn_json_string(n->payload, "out_trade_no", &n->order_no);
	return PN_OK;
}

/* A payment: out_trade_no, transaction_id, amount.total (fen). */
static PnReason
extract_transaction(const WxConf *conf, PnNotice *n)
{
	char	   *state;

	if (!pn_json_string(n->payload, "out_trade_no", &n->order_no) ||
		!pn_json_string(n->payload, "transaction_id", &n->trade_no) ||
		!pn_json_string(n->payload, "trade_state", &state) ||
		!pn_json_int64(n->payload, "amount.total", &n->order_amount) ||
		n->order_amount < 0)
		return PN_R_MALFORMED;
	if (!pn_json_string(n->payload, "amount.currency", &n->currency))
		n->currency = "CNY";
	if (n->anomaly == NULL && !app_ours(conf, n->payload, false))
		n->anomaly = "app_mismatch";
	if (pn_json_present(n->payload, "sp_mchid"))
		(void) pn_json_string(n->payload, "sub_mchid", &n->sub_merchant);
	/* a deduction under a contract (PAP) names it */
	if (pn_json_string(n->payload, "contract_id", &n->agreement_id) && n->agreement_id[0] == '\0')
		n->agreement_id = NULL;
	n->action = strcmp(state, "SUCCESS") == 0 ? PN_ACT_PAY : PN_ACT_NONE;
	return PN_OK;
}

/* A non-empty string, or a whole number as text, at path; else NULL. */
static char *
payload_text(Jsonb *payload, const char *path)
{
	char	   *s;
	int64		v;

	if (pn_json_string(payload, path, &s))
		return s[0] != '\0' ? s : NULL;
	if (pn_json_int64(payload, path, &v))
		return psprintf(INT64_FORMAT, v);
	return NULL;
}

/* A time (RFC 3339, as WeChat Pay writes it) at path, or -1. */
static int64
payload_time(Jsonb *payload, const char *path)
{
	char	   *s;
	int64		t;

	return pn_json_string(payload, path, &s) && pn_parse_time(s, 8 * 3600, &t) ? t : -1;
}

/*
 * An entrust (PAP contract) notification, ENTRUST.SIGN / ENTRUST.TERMINATE
 * (original_type "entrust", not required): contract_state SIGNED signs the
 * agreement contract_id, TERMINATED ends it (docs/GATEWAYS.md,
 * "Agreements"); any other state (SIGN_FAILED, TO_BE_RENEWED, ...) is
 * handed on.  The merchant's reference is out_contract_code; the app is
 * checked as a payment's is.  The end's time: contract_terminated_time, at
 * the top or in contract_terminate_info (as the contract's query answer
 * carries it), else operate_time.
 */
static PnReason
extract_entrust(const WxConf *conf, PnNotice *n)
{
	char	   *state = NULL;
	int64		signed_at;
	int64		ended_at;

	n->action = PN_ACT_NONE;
	if (!pn_json_string(n->payload, "contract_state", &state))
		return PN_OK;
	if (strcmp(state, "SIGNED") == 0)
		n->action = PN_ACT_AGREEMENT_SIGNED;
	else if (strcmp(state, "TERMINATED") == 0)
		n->action = PN_ACT_AGREEMENT_ENDED;
	else
		return PN_OK;
	if (n->anomaly == NULL && !app_ours(conf, n->payload, false))
		n->anomaly = "app_mismatch";
	n->agreement_id = payload_text(n->payload, "contract_id");
	signed_at = payload_time(n->payload, "contract_signed_time");
	ended_at = payload_time(n->payload, "contract_terminated_time");
	if (ended_at < 0)
		ended_at = payload_time(n->payload, "contract_terminate_info.contract_terminated_time");
	if (n->action == PN_ACT_AGREEMENT_SIGNED && signed_at < 0)
		signed_at = payload_time(n->payload, "operate_time");
	if (n->action == PN_ACT_AGREEMENT_ENDED && ended_at < 0)
		ended_at = payload_time(n->payload, "operate_time");
	n->detail = pn_agreement_detail(n->agreement_id, payload_text(n->payload, "out_contract_code"),
									payload_text(n->payload, "plan_id"), state, signed_at,
									n->action == PN_ACT_AGREEMENT_ENDED ? ended_at : -1);
	return PN_OK;
}

/*
 * Whether the payment's app is the channel's: appid (sp_appid too, as
 * before partner settings), or sp_appid and sub_appid as set.  A combine
 * payment names one app, combine_appid, for the whole.
 */
static bool
app_ours(const WxConf *conf, Jsonb *payload, bool combine)
{
	char	   *appid;

	if (combine)
	{
		const char *want = conf->appid ? conf->appid : conf->sp_appid;

		return want == NULL ||
			(pn_json_string(payload, "combine_appid", &appid) && strcmp(appid, want) == 0);
	}
	if (conf->appid != NULL &&
		!((pn_json_string(payload, "appid", &appid) ||
		   pn_json_string(payload, "sp_appid", &appid)) &&
		  strcmp(appid, conf->appid) == 0))
		return false;
	if (conf->sp_appid != NULL &&
		!(pn_json_string(payload, "sp_appid", &appid) && strcmp(appid, conf->sp_appid) == 0))
		return false;
	if (conf->sub_appid != NULL &&
		!(pn_json_string(payload, "sub_appid", &appid) && strcmp(appid, conf->sub_appid) == 0))
		return false;
	return true;
}

static int
sub_order_cmp(const void *a, const void *b)
{
	return strcmp(((const PnSubOrder *) a)->order_no, ((const PnSubOrder *) b)->order_no);
}

/*
 * A combine payment (合单支付, §1.9): combine_out_trade_no names the whole,
 * and each of sub_orders[] is a payment of its own order (out_trade_no,
 * transaction_id, amount.total_amount).  Only the sub-orders of the
 * channel's merchant (mchid, when configured) that say SUCCESS are paid;
 * the others stay in the payload, unapplied.  The log row is keyed by
 * combine_out_trade_no.
 */
static PnReason
extract_combine(const WxConf *conf, PnNotice *n)
{
	Jsonb	  **subs;
	int			nsubs;

	if (!pn_json_string(n->payload, "combine_out_trade_no", &n->order_no) ||
		n->order_no[0] == '\0' ||
		!pn_json_objects(n->payload, "sub_orders", PN_MAX_SUB_ORDERS, &subs, &nsubs) ||
		nsubs == 0)
		return PN_R_MALFORMED;
	if (n->anomaly == NULL && !app_ours(conf, n->payload, true))
		n->anomaly = "app_mismatch";
	n->subs = palloc0(sizeof(PnSubOrder) * nsubs);
	n->nsubs = 0;
	for (int i = 0; i < nsubs; i++)
	{
		PnSubOrder *s = &n->subs[n->nsubs];
		char	   *mchid,
				   *sub_mchid,
				   *state;

		if (!pn_json_string(subs[i], "trade_state", &state) ||
			!pn_json_string(subs[i], "mchid", &mchid))
			return PN_R_MALFORMED;
		if (strcmp(state, "SUCCESS") != 0)
			continue;			/* unpaid: it may name no transaction yet */
		if ((conf->mchid != NULL && strcmp(mchid, conf->mchid) != 0) ||
			(conf->sp_mchid != NULL && strcmp(mchid, conf->sp_mchid) != 0) ||
			(conf->sub_mchid != NULL &&
			 !(pn_json_string(subs[i], "sub_mchid", &sub_mchid) &&
			   strcmp(sub_mchid, conf->sub_mchid) == 0)))
			continue;			/* another (sub-)merchant's */
		if (!pn_json_string(subs[i], "out_trade_no", &s->order_no) || s->order_no[0] == '\0' ||
			!pn_json_string(subs[i], "transaction_id", &s->trade_no) || s->trade_no[0] == '\0' ||
			!pn_json_int64(subs[i], "amount.total_amount", &s->amount) || s->amount < 0)
			return PN_R_MALFORMED;
		if (!pn_json_string(subs[i], "amount.currency", &s->currency))
			s->currency = "CNY";
		s->sub_merchant = NULL;
		(void) pn_json_string(subs[i], "sub_mchid", &s->sub_merchant);
		n->nsubs++;
	}
	qsort(n->subs, n->nsubs, sizeof(PnSubOrder), sub_order_cmp);
	n->currency = "CNY";
	n->action = n->nsubs > 0 ? PN_ACT_PAY_COMBINE : PN_ACT_NONE;
	return PN_OK;
}

/* A refund result: SUCCESS refunds, ABNORMAL and CLOSED did not. */
static PnReason
extract_refund(PnNotice *n)
{
	if (!pn_json_string(n->payload, "out_trade_no", &n->order_no) ||
		!pn_json_string(n->payload, "refund_id", &n->refund_id) ||
		!pn_json_int64(n->payload, "amount.refund", &n->refund_amount) ||
		n->refund_amount < 0)
		return PN_R_MALFORMED;
	(void) pn_json_string(n->payload, "transaction_id", &n->trade_no);
	if (!pn_json_int64(n->payload, "amount.total", &n->order_amount))
		n->order_amount = -1;
	n->currency = "CNY";
	if (strcmp(n->event_type, "REFUND.SUCCESS") == 0)
		n->action = PN_ACT_REFUND;
	else if (strcmp(n->event_type, "REFUND.ABNORMAL") == 0 ||
			 strcmp(n->event_type, "REFUND.CLOSED") == 0)
		n->action = PN_ACT_REFUND_FAILED;
	else
		n->action = PN_ACT_NONE;
	return PN_OK;
}

/* ---------------------------------------------------------------------
 * Queries (1.4): 查询订单 by out_trade_no
 * ---------------------------------------------------------------------
 */

/*
 * The merchant a request of the channel is made for: the mchid, or a
 * service provider's sp_mchid with its sub_mchid (required: a service
 * provider asks about its sub-merchant's orders).  ereport when the
 * channel cannot sign (no private key, no merchant).
 */
static const char *
wx_request_merchant(const PnChannel *ch, const char *what)
{
	const WxConf *conf = ch->conf;

	if (conf->merchant_private_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("channel \"%s\" cannot %s WeChat Pay: it has no merchant_private_key", ch->name, what),
				 errhint("Set merchant_private_key (from a file: {\"file\": \"<name>\"}) and merchant_serial with paynotify_alter_channel.")));
	if (conf->sp_mchid != NULL)
	{
		if (conf->sub_mchid == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("channel \"%s\" cannot %s WeChat Pay: a service provider's request names its sub_mchid", ch->name, what)));
		return conf->sp_mchid;
	}
	if (conf->mchid == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("channel \"%s\" cannot %s WeChat Pay: it has no mchid", ch->name, what)));
	return conf->mchid;
}

/*
 * A request to WeChat Pay's API v3, signed as it asks: RSA-SHA256 with the
 * merchant's API private key over "method\npath\ntimestamp\nnonce\nbody\n"
 * (the URL's path and query; the body empty for a GET), a fresh nonce, in
 * the header Authorization: WECHATPAY2-SHA256-RSA2048 mchid="",nonce_str="",
 * signature="",timestamp="",serial_no="".  The one signer of the queries,
 * the close calls and the bills' requests.
 */
static void
wx_signed_request(const PnChannel *ch, const char *mchid, const char *method,
				  const char *path, const char *body, int64 now, PnQueryRequest *out)
{
	const WxConf *conf = ch->conf;
	char	   *nonce = pn_query_nonce();
	StringInfoData msg;
	char	   *sig;
	const char *err;

	initStringInfo(&msg);
	appendStringInfo(&msg, "%s\n%s\n" INT64_FORMAT "\n%s\n%s\n", method, path, now, nonce,
					 body ? body : "");
	sig = pn_rsa_sign(conf->merchant_private_key, (unsigned char *) msg.data, msg.len, &err);
	pfree(msg.data);
	if (sig == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("channel \"%s\": signing the request failed: %s", ch->name, err)));
	out->method = method;
	out->url = psprintf("%s%s", conf->api_base, path);
	out->body = body ? pstrdup(body) : NULL;
	pn_query_header(out, "Accept", pstrdup("application/json"));
	if (body != NULL)
		pn_query_header(out, "Content-Type", pstrdup("application/json"));
	pn_query_header(out, "Authorization",
					psprintf(SIGNATURE_TYPE " mchid=\"%s\",nonce_str=\"%s\",signature=\"%s\","
							 "timestamp=\"" INT64_FORMAT "\",serial_no=\"%s\"",
							 mchid, nonce, sig, now, conf->merchant_serial));
}

/*
 * GET /v3/pay/transactions/out-trade-no/{no}?mchid= (a service provider's
 * channel: /v3/pay/partner/transactions/out-trade-no/{no}?sp_mchid=&sub_mchid=),
 * signed by wx_signed_request.
 */
static void
wx_query_request(const PnChannel *ch, const char *order_no, int64 now, PnQueryRequest *out)
{
	const WxConf *conf = ch->conf;
	const char *mchid = wx_request_merchant(ch, "query");
	char	   *path;

	if (conf->sp_mchid != NULL)
		path = psprintf("/v3/pay/partner/transactions/out-trade-no/%s?sp_mchid=%s&sub_mchid=%s",
						pn_url_encode(order_no), pn_url_encode(conf->sp_mchid),
						pn_url_encode(conf->sub_mchid));
	else
		path = psprintf("/v3/pay/transactions/out-trade-no/%s?mchid=%s",
						pn_url_encode(order_no), pn_url_encode(conf->mchid));
	wx_signed_request(ch, mchid, "GET", path, NULL, now, out);
}

/*
 * The close call: POST /v3/pay/transactions/out-trade-no/{no}/close with
 * {"mchid": ...} (a service provider's channel:
 * /v3/pay/partner/transactions/out-trade-no/{no}/close with {"sp_mchid":
 * ..., "sub_mchid": ...}), signed by wx_signed_request over the body.
 */
static void
wx_close_request(const PnChannel *ch, const char *order_no, int64 now, PnQueryRequest *out)
{
	const WxConf *conf = ch->conf;
	const char *mchid = wx_request_merchant(ch, "close an order at");
	StringInfoData body;
	char	   *path;

	initStringInfo(&body);
	if (conf->sp_mchid != NULL)
	{
		path = psprintf("/v3/pay/partner/transactions/out-trade-no/%s/close", pn_url_encode(order_no));
		appendStringInfoString(&body, "{\"sp_mchid\":");
		escape_json(&body, conf->sp_mchid);
		appendStringInfoString(&body, ",\"sub_mchid\":");
		escape_json(&body, conf->sub_mchid);
		appendStringInfoChar(&body, '}');
	}
	else
	{
		path = psprintf("/v3/pay/transactions/out-trade-no/%s/close", pn_url_encode(order_no));
		appendStringInfoString(&body, "{\"mchid\":");
		escape_json(&body, conf->mchid);
		appendStringInfoChar(&body, '}');
	}
	wx_signed_request(ch, mchid, "POST", path, body.data, now, out);
}

/*
 * The answer to a close call, its signature checked (check_signature: the
 * same headers, key store and window as a query's, over
 * "timestamp\nnonce\nbody\n").  204 with an empty body: closed.  An error
 * is signed JSON with its code (ORDERPAID: paid meanwhile; SYSTEM_ERROR,
 * ...): not closed.  Anything else is malformed.  The empty answer names
 * no order: handed back for another order's close, it closes nothing
 * either (the query that follows each close answer decides).
 */
static PnReason
wx_close_response(const PnRequest *req, PnQueryAnswer *answer)
{
	Jsonb	   *doc;
	char	   *code;

	answer->close_answer = true;
	answer->verdict = PN_Q_PENDING;
	if (req->body_len == 0)
	{
		answer->closed = true;
		answer->state = "closed";
		return PN_OK;
	}
	doc = pn_parse_json(req->body, req->body_len);
	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc) ||
		!pn_json_string(doc, "code", &code) || code[0] == '\0' || strlen(code) > 64)
		return PN_R_MALFORMED;
	answer->closed = false;
	answer->state = code;
	return PN_OK;
}

/*
 * A response to the query: signed by WeChat Pay as its notifications are
 * (Wechatpay-Timestamp, -Nonce, -Signature, -Serial over
 * "timestamp\nnonce\nbody\n", the same key store and window,
 * check_signature), its 4xx answers too.  The body is a transaction
 * (trade_state) of the order asked about, or an error (code): ORDER_NOT_EXIST
 * says the order never reached WeChat Pay.  SUCCESS and REFUND were paid
 * (REFUND: paid, then refunded); NOTPAY, CLOSED, REVOKED, PAYERROR never
 * paid; USERPAYING and any other error settle nothing.
 */
static PnReason
wx_query_response(const PnQueryResponse *resp, PnNotice *n, PnQueryAnswer *answer)
{
	const PnRequest *req = &resp->req;
	const WxConf *conf = req->channel->conf;
	WxHeaders	h;
	Jsonb	   *doc;
	char	   *state;
	char	   *order_no;
	PnReason	r;

	if ((r = read_headers(req->headers, &h)) != PN_OK)
		return r;
	if ((r = check_signature(req, conf, &h)) != PN_OK)
		return r;
	doc = req->body_len > 0 ? pn_parse_json(req->body, req->body_len) : NULL;
	/* after a close call, its answer: unless it is a transaction's (a query's) */
	if (resp->close && (doc == NULL || !JB_ROOT_IS_OBJECT(doc) ||
						!pn_json_string(doc, "trade_state", &state)))
		return wx_close_response(req, answer);
	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc))
		return PN_R_MALFORMED;
	n->payload = doc;
	n->order_no = pstrdup(resp->order_no);
	n->action = PN_ACT_NONE;
	answer->verdict = PN_Q_PENDING;
	if (!pn_json_string(doc, "trade_state", &state))
	{
		/* an error: which one is in the signed body, not the status */
		if (!pn_json_string(doc, "code", &state) || state[0] == '\0')
			return PN_R_MALFORMED;
		/*
		 * ORDER_NOT_EXIST closes nothing: the signed body names no order
		 * (the answer to a query of one order reads as the answer for any
		 * other), and the order may be paid yet
		 */
		answer->state = state;
		n->event_type = psprintf("query.%s", state);
		n->notify_id = pn_query_notify_id(resp->order_no, state);
		return PN_OK;
	}
	answer->state = state;
	n->event_type = psprintf("query.%s", state);
	/* the merchant's, of the order asked about: else never applied */
	if (!pn_json_string(doc, "out_trade_no", &order_no) || strcmp(order_no, resp->order_no) != 0)
		return PN_R_MISMATCH;
	if ((conf->mchid != NULL || conf->sp_mchid != NULL) &&
		(conf->sp_mchid != NULL ? !partner_ours(conf, doc) :
		 !(pn_json_string(doc, "mchid", &order_no) && strcmp(order_no, conf->mchid) == 0)))
		return PN_R_MISMATCH;
	if (strcmp(state, "SUCCESS") == 0 || strcmp(state, "REFUND") == 0)
	{
		if ((r = extract_transaction(conf, n)) != PN_OK)
			return r;
		if (n->trade_no[0] == '\0')
			return PN_R_MALFORMED;
		n->action = PN_ACT_PAY;
		n->notify_id = pn_query_notify_id(n->trade_no, state);
		answer->verdict = PN_Q_PAID;
		return PN_OK;
	}
	/*
	 * closed for good, unpaid: the trade can no longer be paid.  NOTPAY and
	 * PAYERROR are no end (the customer may pay yet), and an old one
	 * replayed would say so after the payment
	 */
	/* REVOKED may follow a payment (refunded by the reversal): no end */
	if (strcmp(state, "CLOSED") == 0)
		answer->verdict = PN_Q_UNPAID;
	/* not paid yet: once expired, the order is closed at the gateway */
	else if (strcmp(state, "NOTPAY") == 0)
		answer->verdict = PN_Q_OPEN;
	(void) pn_json_string(doc, "transaction_id", &n->trade_no);
	n->notify_id = pn_query_notify_id(resp->order_no, state);
	return PN_OK;
}

/* ---------------------------------------------------------------------
 * Bills (1.4): 申请交易账单, then its download
 * ---------------------------------------------------------------------
 */

/*
 * The path and query of a bill's download_url: on api_base's origin, the
 * path /v3/billdownload/file and a query, and plain (pn_url_plain); else
 * NULL.
 */
static const char *
wx_download_path(const char *url, const char *api_base)
{
	const char *path = pn_url_path(url, api_base);

	if (path == NULL || strncmp(path, "/v3/billdownload/file?", 22) != 0 || !pn_url_plain(url))
		return NULL;
	return path;
}

/*
 * list: GET /v3/bill/tradebill?bill_date=&bill_type=ALL&tar_type=GZIP (a
 * service provider's channel adds &sub_mchid=, as WeChat Pay documents
 * it for service providers); download: GET the download_url its answer
 * gave, on api_base's origin.  Both signed by the merchant as queries are.
 */
static void
wx_bill_request(const PnChannel *ch, const PnBillStep *step, int64 now, PnQueryRequest *out)
{
	const WxConf *conf = ch->conf;
	const char *mchid = wx_request_merchant(ch, "fetch the bills of");
	const char *path;

	if (strcmp(step->step, "list") == 0)
	{
		if (conf->sp_mchid != NULL && conf->sub_mchid != NULL)
			path = psprintf("/v3/bill/tradebill?bill_date=%s&bill_type=ALL&tar_type=GZIP&sub_mchid=%s",
							pn_url_encode(step->day), pn_url_encode(conf->sub_mchid));
		else
			path = psprintf("/v3/bill/tradebill?bill_date=%s&bill_type=ALL&tar_type=GZIP",
							pn_url_encode(step->day));
	}
	else if (strcmp(step->step, "download") == 0 && step->url != NULL &&
			 (path = wx_download_path(step->url, conf->api_base)) != NULL)
		 /* path set */ ;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("channel \"%s\": no WeChat Pay bill request for step \"%s\"", ch->name, step->step)));
	wx_signed_request(ch, mchid, "GET", path, NULL, now, out);
}

/*
 * list: the answer is signed as a query's (check_signature);
 * {download_url, hash_type "SHA1", hash_value}, the URL on api_base's
 * origin; 400 NO_STATEMENT_EXIST or STATEMENT_CREATING: no bill yet.
 * download: the file is unsigned; it is the bill when its SHA-1 (of the
 * plain text, gunzipped) is the one the signed list answer stated.
 */
static const char *
wx_bill_response(const PnChannel *ch, const PnBillStep *step, const PnRequest *req, int status,
				 PnBillAnswer *answer)
{
	const WxConf *conf = ch->conf;
	WxHeaders	h;
	Jsonb	   *doc;
	char	   *code;
	char	   *type;
	PnReason	r;

	if (strcmp(step->step, "download") == 0)
		return pn_bill_download_answer(step, req, status, true, answer);
	if (strcmp(step->step, "list") != 0)
		return "no such step of a WeChat Pay bill";
	if ((r = read_headers(req->headers, &h)) != PN_OK)
		return pn_reason_message(r);
	if ((r = check_signature(req, conf, &h)) != PN_OK)
		return pn_reason_message(r);
	doc = pn_parse_json(req->body, req->body_len);
	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc))
		return "malformed answer";
	if (pn_json_string(doc, "code", &code))
	{
		if (strcmp(code, "NO_STATEMENT_EXIST") == 0 || strcmp(code, "STATEMENT_CREATING") == 0)
		{
			answer->result = "not ready";
			return NULL;
		}
		return "the gateway answered an error";
	}
	if (status != 200 ||
		!pn_json_string(doc, "download_url", &answer->url) ||
		!pn_json_string(doc, "hash_type", &type) ||
		!pn_json_string(doc, "hash_value", &answer->hash))
		return "malformed answer";
	if (pg_strcasecmp(type, "SHA1") != 0 || strlen(answer->hash) != 40 ||
		strspn(answer->hash, "0123456789abcdefABCDEF") != 40)
		return "the bill's hash is no SHA-1";
	if (wx_download_path(answer->url, conf->api_base) == NULL)
		return "download_url is not /v3/billdownload/file? on the origin of api_base";
	answer->result = "next";
	return NULL;
}
