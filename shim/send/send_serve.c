/*
 * send_serve.c
 *		--mode serve: the gateway in a box answers the APIs a merchant asks
 *		when a notification was lost, from its record of what it sold
 *		(--sales files, read again whenever one grew or changed):
 *
 *		WeChat Pay v3   GET /v3/pay/transactions/out-trade-no/{no}?mchid=
 *		                GET /v3/pay/partner/transactions/out-trade-no/{no}
 *		                    ?sp_mchid=&sub_mchid=
 *		                POST /v3/pay/transactions/out-trade-no/{no}/close
 *		                POST /v3/pay/partner/transactions/out-trade-no/{no}/close
 *		                    (204, the order CLOSED from then on; 400
 *		                    ORDERPAID when it was paid)
 *		                GET /v3/bill/tradebill?bill_date=&bill_type=ALL
 *		                    [&tar_type=GZIP]
 *		                GET /v3/billdownload/file?token=
 *		  every request signed by the merchant (Authorization
 *		  WECHATPAY2-SHA256-RSA2048, checked with --merchant-cert; 401
 *		  SIGN_ERROR, unsigned, when it does not verify); every answer but
 *		  the 401 and the bill file signed with the platform key
 *		  (Wechatpay-Timestamp, -Nonce, -Signature, -Serial).
 *		Alipay          GET or POST /gateway.do, method alipay.trade.query,
 *		                alipay.trade.close (the trade TRADE_CLOSED from then
 *		                on; ACQ.TRADE_STATUS_ERROR when it was paid) or
 *		                alipay.data.dataservice.bill.downloadurl.query; the
 *		                RSA2 sign checked with --app-public-key; the answer
 *		                {"<method>_response":{...},"sign":"..."} signed over
 *		                the response object's exact text with the Alipay key
 *		                GET /downloadBillFile.resource?...&token= (the zip)
 *		Stripe          GET /v1/payment_intents/search?query=metadata['order_id']:'X'
 *		                GET /v1/payment_intents/{id}
 *		                GET /v1/balance_transactions?created[gte]=&created[lt]=
 *		                    [&limit=][&starting_after=]
 *		  with Authorization: Bearer (or Basic) the key in --stripe-api-key.
 *
 *		An order's state comes from its sales: a payment recorded with a
 *		success time later than the server's clock (--now, else the real
 *		one) is not paid yet (NOTPAY, WAIT_BUYER_PAY,
 *		requires_payment_method); a recorded refund makes WeChat say REFUND
 *		and Alipay TRADE_CLOSED when it refunded everything.
 *
 *		--serve-bad signature|body breaks every signed answer after signing
 *		(one signature character, or one digit or letter of the body), for
 *		tests that a client refuses it.
 *
 *		libmicrohttpd runs the HTTP side on one internal thread, so the
 *		handlers never run concurrently; the main thread waits for SIGINT
 *		or SIGTERM.
 */
#include "send_run.h"
#include "send_payload.h"
#include "send_serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#define MAX_BODY	(64 * 1024)
#define MAX_PARAMS	64
#define MAX_HEADERS 10

/* An order the merchant closed (its close call), by gateway and merchant. */
struct closed
{
	enum pn_gateway gw;
	char		merchant[PN_ID_LEN];
	char		no[PN_ID_LEN];
};

struct srv
{
	const struct opts *o;
	const struct pn_conf *c;
	struct pn_sales sales;
	struct closed *closed;		/* kept across reloads of the sales */
	size_t		nclosed;
	struct pn_apikeys *keys;
	char		wx_serial[128];
	char	   *stripe_key;
	char		base[96];		/* http://host:port of the download URLs */
	struct pn_rng rng;			/* nonces and request ids */
	uint64_t	requests;
};

/* One request: its raw target (path?query, as sent) and body. */
struct rctx
{
	char	   *uri;
	struct pn_buf body;
	bool		too_big;
	bool		headers_seen;	/* the handler's first call (headers only) passed */
};

/* The answer being built. */
struct reply
{
	unsigned	status;
	struct pn_buf body;
	const char *ctype;
	int			nh;
	char	   *hn[MAX_HEADERS];
	char	   *hv[MAX_HEADERS];
};

/* Decoded name=value pairs of a query string or form body. */
struct params
{
	int			n;
	char	   *k[MAX_PARAMS];
	char	   *v[MAX_PARAMS];
};

/* ------------------------------------------------------------ parsing */

static time_t
srv_now(const struct srv *s)
{
	return s->c->now_fixed ? s->c->now_fixed : time(NULL);
}

static void
reply_header(struct reply *r, const char *name, const char *value)
{
	if (r->nh == MAX_HEADERS)
		return;
	r->hn[r->nh] = pn_xstrdup(name);
	r->hv[r->nh] = pn_xstrdup(value);
	r->nh++;
}

static void
reply_free(struct reply *r)
{
	for (int i = 0; i < r->nh; i++)
	{
		free(r->hn[i]);
		free(r->hv[i]);
	}
	pn_buf_free(&r->body);
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes s[0..n) ('+' is a space when plus); NULL on a bad escape or NUL. */
static char *
url_decode(const char *s, size_t n, bool plus)
{
	char	   *out = pn_xmalloc(n + 1);
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
	{
		if (s[i] == '%')
		{
			int			h,
						l;

			if (i + 2 >= n || (h = hexval(s[i + 1])) < 0 || (l = hexval(s[i + 2])) < 0 ||
				h * 16 + l == 0)
				goto bad;
			out[k++] = (char) (h * 16 + l);
			i += 2;
		}
		else if (s[i] == '+' && plus)
			out[k++] = ' ';
		else
			out[k++] = s[i];
	}
	out[k] = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

/* Adds the pairs of s[0..n) to p: 0, or -1 when they do not decode. */
static int
params_parse(struct params *p, const char *s, size_t n)
{
	const char *end = s + n;

	while (s < end)
	{
		const char *amp = memchr(s, '&', (size_t) (end - s));
		const char *stop = amp ? amp : end;
		const char *eq = memchr(s, '=', (size_t) (stop - s));
		char	   *k,
				   *v;

		if (stop == s)
		{
			s = stop + 1;
			continue;
		}
		if (p->n == MAX_PARAMS)
			return -1;
		k = url_decode(s, (size_t) ((eq ? eq : stop) - s), true);
		v = eq ? url_decode(eq + 1, (size_t) (stop - eq - 1), true) : pn_xstrdup("");
		if (!k || !v)
		{
			free(k);
			free(v);
			return -1;
		}
		p->k[p->n] = k;
		p->v[p->n++] = v;
		s = amp ? amp + 1 : end;
	}
	return 0;
}

static const char *
param(const struct params *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (strcmp(p->k[i], name) == 0)
			return p->v[i];
	return NULL;
}

static void
params_free(struct params *p)
{
	for (int i = 0; i < p->n; i++)
	{
		free(p->k[i]);
		free(p->v[i]);
	}
	p->n = 0;
}

static void
random_chars(struct srv *s, char *out, size_t n, const char *alphabet)
{
	pn_rng_chars(&s->rng, out, n, alphabet);
}

/* --serve-bad body: one digit or letter of the answer changes after signing. */
static void
tamper_body(struct pn_buf *b)
{
	static const char *const keys[] = {"\"total\":", "\"total_amount\":\"", "\"hash_value\":\"",
	"\"code\":\"", "\"amount\": ", "\"status\": \""};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
	{
		char	   *p = b->data ? strstr(b->data, keys[i]) : NULL;
		char	   *c;

		if (!p)
			continue;
		c = p + strlen(keys[i]);
		if (*c >= '0' && *c <= '9')
		{
			*c = *c == '9' ? '8' : (char) (*c + 1);
			return;
		}
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))
		{
			*c ^= 0x20;
			return;
		}
	}
}

/* --serve-bad signature: one character of the base64 changes. */
static void
tamper_sig(struct pn_buf *sig)
{
	if (sig->len > 0)
		sig->data[0] = sig->data[0] == 'A' ? 'B' : 'A';
}

/* ------------------------------------------------------------- orders */

/* What the record says about one order of one gateway. */
struct order
{
	const struct pn_sale *pay;	/* the last payment recorded, or NULL */
	const struct pn_sale *refund;	/* the last refund recorded, or NULL */
	const struct pn_sale *any;	/* pay, else refund */
	bool		paid;			/* the payment happened by the server's clock */
	bool		closed;			/* not paid, and closed by the merchant */
};

static bool
is_closed(const struct srv *s, enum pn_gateway gw, const char *merchant, const char *no)
{
	for (size_t i = 0; i < s->nclosed; i++)
		if (s->closed[i].gw == gw && strcmp(s->closed[i].merchant, merchant) == 0 &&
			strcmp(s->closed[i].no, no) == 0)
			return true;
	return false;
}

/* Records the merchant's close of an order (once). */
static void
close_order(struct srv *s, enum pn_gateway gw, const char *merchant, const char *no)
{
	struct closed *c;

	if (is_closed(s, gw, merchant, no))
		return;
	s->closed = pn_xrealloc(s->closed, (s->nclosed + 1) * sizeof(*s->closed));
	c = &s->closed[s->nclosed++];
	memset(c, 0, sizeof(*c));
	c->gw = gw;
	snprintf(c->merchant, sizeof(c->merchant), "%s", merchant);
	snprintf(c->no, sizeof(c->no), "%s", no);
}

/*
 * Finds an order by its number (or, with by_trade, its trade number) among
 * the sales of gw; merchant NULL matches any merchant.  false when unknown.
 */
static bool
find_order(const struct srv *s, enum pn_gateway gw, const char *merchant, const char *no,
		   bool by_trade, struct order *o)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < s->sales.n; i++)
	{
		const struct pn_sale *v = &s->sales.v[i];

		if (v->gateway != gw || (merchant && strcmp(v->merchant, merchant) != 0) ||
			strcmp(by_trade ? v->trade_no : v->order_no, no) != 0)
			continue;
		if (v->event == PN_EV_PAY)
			o->pay = v;
		else
			o->refund = v;
	}
	o->any = o->pay ? o->pay : o->refund;
	if (!o->any)
		return false;
	o->paid = o->refund != NULL || o->pay->time <= (long long) srv_now(s);
	o->closed = !o->paid && is_closed(s, gw, o->any->merchant, o->any->order_no);
	return true;
}

/* ------------------------------------------------------------- WeChat */

static void biz_string(const char *biz, const char *key, char *out, size_t outsz);
static void wx_close(struct srv *s, const char *no_enc, const struct rctx *rc,
					 const char *auth_mchid, bool partner, struct reply *r);

static void
wx_error(struct reply *r, unsigned status, const char *code, const char *message)
{
	struct pn_json j;

	r->status = status;
	pn_buf_reset(&r->body);
	pn_json_init(&j, &r->body, false);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "code", code);
	pn_json_str(&j, "message", message);
	pn_json_close(&j, '}');
}

/* Signs the answer as WeChat Pay does: "ts\nnonce\nbody\n" with the platform key. */
static void
wx_sign_reply(struct srv *s, struct reply *r)
{
	char		ts[32],
				nonce[40],
				reqid[48];
	struct pn_buf msg,
				sig;

	snprintf(ts, sizeof(ts), "%lld", (long long) srv_now(s));
	random_chars(s, nonce, 32, PN_HEX_LOWER);
	memcpy(reqid, "08", 2);
	random_chars(s, reqid + 2, 40, PN_HEX_UPPER);
	pn_buf_init(&msg);
	pn_buf_init(&sig);
	pn_buf_printf(&msg, "%s\n%s\n", ts, nonce);
	pn_buf_put(&msg, r->body.data, r->body.len);
	pn_buf_putc(&msg, '\n');
	if (pn_api_sign(s->keys, PN_KEY_WECHAT, msg.data, msg.len, &sig))
	{
		if (s->o->serve_bad && strcmp(s->o->serve_bad, "signature") == 0)
			tamper_sig(&sig);
		reply_header(r, "Request-ID", reqid);
		reply_header(r, "Wechatpay-Nonce", nonce);
		reply_header(r, "Wechatpay-Signature", sig.data);
		reply_header(r, "Wechatpay-Timestamp", ts);
		reply_header(r, "Wechatpay-Serial", s->wx_serial);
		reply_header(r, "Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048");
	}
	if (s->o->serve_bad && strcmp(s->o->serve_bad, "body") == 0)
		tamper_body(&r->body);
	pn_buf_free(&msg);
	pn_buf_free(&sig);
}

/* Copies the value of k="v" in a WeChat Authorization token. */
static bool
auth_item(const char *token, const char *key, char *out, size_t outsz)
{
	size_t		klen = strlen(key);

	for (const char *p = token; *p;)
	{
		const char *q;

		while (*p == ' ' || *p == ',')
			p++;
		if (strncmp(p, key, klen) == 0 && p[klen] == '=' && p[klen + 1] == '"')
		{
			p += klen + 2;
			q = strchr(p, '"');
			if (!q || (size_t) (q - p) >= outsz)
				return false;
			memcpy(out, p, (size_t) (q - p));
			out[q - p] = '\0';
			return true;
		}
		q = strchr(p, '"');		/* skip name="value" */
		if (!q || !(q = strchr(q + 1, '"')))
			return false;
		p = q + 1;
	}
	return false;
}

/*
 * Checks the merchant's signature of this request: true with its mchid,
 * else the 401 WeChat answers (unsigned).
 */
static bool
wx_auth(struct srv *s, struct MHD_Connection *conn, const char *method, const struct rctx *rc,
		char *mchid, size_t mchidsz, struct reply *r)
{
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	static const char scheme[] = "WECHATPAY2-SHA256-RSA2048 ";
	char		nonce[128],
				sig[1024],
				ts[32],
				serial[128];
	long long	t;
	struct pn_buf msg;
	bool		ok;

	if (!pn_apikeys_has(s->keys, PN_KEY_WECHAT))
	{
		wx_error(r, 401, "SIGN_ERROR", "商户未配置 API 证书 (--merchant-cert)");
		return false;
	}
	if (!auth || strncmp(auth, scheme, sizeof(scheme) - 1) != 0 ||
		!auth_item(auth + sizeof(scheme) - 1, "mchid", mchid, mchidsz) ||
		!auth_item(auth + sizeof(scheme) - 1, "nonce_str", nonce, sizeof(nonce)) ||
		!auth_item(auth + sizeof(scheme) - 1, "signature", sig, sizeof(sig)) ||
		!auth_item(auth + sizeof(scheme) - 1, "timestamp", ts, sizeof(ts)) ||
		!auth_item(auth + sizeof(scheme) - 1, "serial_no", serial, sizeof(serial)))
	{
		wx_error(r, 401, "SIGN_ERROR", "Http头Authorization值格式错误，请参考《微信支付商户REST API签名规则》");
		return false;
	}
	if (!pn_parse_ll(ts, 0, 253402300799LL, &t) || llabs(t - (long long) srv_now(s)) > 300)
	{
		wx_error(r, 401, "SIGN_ERROR", "请求的时间戳与当前时间相差超过5分钟");
		return false;
	}
	pn_buf_init(&msg);
	pn_buf_printf(&msg, "%s\n%s\n%s\n%s\n", method, rc->uri, ts, nonce);
	pn_buf_put(&msg, rc->body.data, rc->body.len);
	pn_buf_putc(&msg, '\n');
	ok = pn_api_verify(s->keys, PN_KEY_WECHAT, msg.data, msg.len, sig);
	pn_buf_free(&msg);
	if (!ok)
		wx_error(r, 401, "SIGN_ERROR", "错误的签名，验签失败");
	return ok;
}

/* The transaction as the query answers it (keys in WeChat's sorted order). */
static void
wx_transaction(const struct srv *s, const struct order *o, const char *sp_mchid,
			   struct pn_buf *out)
{
	const struct pn_sale *v = o->any;
	struct pn_json j;
	char		t[40];
	bool		partner = sp_mchid != NULL;
	long long	pay_time = o->pay ? o->pay->time : v->time;

	(void) s;
	pn_fmt_beijing((time_t) pay_time, "%Y-%m-%dT%H:%M:%S+08:00", t, sizeof(t));
	pn_json_init(&j, out, false);
	pn_json_open(&j, NULL, '{');
	pn_json_open(&j, "amount", '{');
	if (o->paid)
		pn_json_str(&j, "currency", v->currency);
	pn_json_str(&j, "payer_currency", v->currency);
	if (o->paid)
		pn_json_int(&j, "payer_total", v->amount);
	pn_json_int(&j, "total", v->amount);
	pn_json_close(&j, '}');
	if (!partner)
		pn_json_str(&j, "appid", v->app);
	if (o->paid)
	{
		pn_json_str(&j, "attach", "");
		pn_json_str(&j, "bank_type", "OTHERS");
	}
	if (!partner)
		pn_json_str(&j, "mchid", v->merchant);
	pn_json_str(&j, "out_trade_no", v->order_no);
	if (o->paid)
	{
		pn_json_open(&j, "payer", '{');
		pn_json_str(&j, partner ? "sp_openid" : "openid", v->payer);
		pn_json_close(&j, '}');
	}
	pn_json_open(&j, "promotion_detail", '[');
	pn_json_close(&j, ']');
	if (!o->paid)
	{
		pn_json_open(&j, "scene_info", '{');
		pn_json_str(&j, "device_id", "");
		pn_json_close(&j, '}');
	}
	if (partner)
	{
		pn_json_str(&j, "sp_appid", v->app);
		pn_json_str(&j, "sp_mchid", sp_mchid);
		pn_json_str(&j, "sub_mchid", v->merchant);
	}
	if (o->paid)
		pn_json_str(&j, "success_time", t);
	pn_json_str(&j, "trade_state", o->closed ? "CLOSED" : !o->paid ? "NOTPAY" :
				o->refund ? "REFUND" : "SUCCESS");
	pn_json_str(&j, "trade_state_desc", o->closed ? "订单已关闭" : !o->paid ? "订单未支付" :
				o->refund ? "转入退款" : "支付成功");
	if (o->paid)
	{
		pn_json_str(&j, "trade_type", "JSAPI");
		pn_json_str(&j, "transaction_id", v->trade_no);
	}
	pn_json_close(&j, '}');
}

/* GET .../out-trade-no/{no}: 200 with the transaction, or 404 ORDER_NOT_EXIST. */
static void
wx_query(struct srv *s, const char *no_enc, const struct params *q, const char *auth_mchid,
		 bool partner, struct reply *r)
{
	const char *mchid = param(q, partner ? "sub_mchid" : "mchid");
	const char *sp = partner ? param(q, "sp_mchid") : NULL;
	char	   *no = url_decode(no_enc, strlen(no_enc), false);
	struct order o;

	if (!no || !*no || !mchid || (partner && !sp))
		wx_error(r, 400, "PARAM_ERROR", partner ? "sp_mchid、sub_mchid 与 out_trade_no 是必填参数" :
				 "mchid 与 out_trade_no 是必填参数");
	else if (strcmp(partner ? sp : mchid, auth_mchid) != 0)
		wx_error(r, 400, "INVALID_REQUEST", "请求头中的商户号与参数中的商户号不一致");
	else if (!find_order(s, PN_WXPAY, mchid, no, false, &o))
		wx_error(r, 404, "ORDER_NOT_EXIST", "订单不存在");
	else
	{
		r->status = 200;
		wx_transaction(s, &o, sp, &r->body);
	}
	free(no);
}

static void
hexstr(const char *in, char *out, size_t outsz)
{
	size_t		n = strlen(in);

	if (2 * n + 1 > outsz)
		n = (outsz - 1) / 2;
	pn_hex((const unsigned char *) in, n, out, PN_HEX_LOWER);
}

/* A download token back to its text: "mchid|YYYY-MM-DD|GZIP" and the like. */
static bool
unhex(const char *in, char *out, size_t outsz)
{
	size_t		n = strlen(in);

	if (n % 2 || n / 2 >= outsz)
		return false;
	for (size_t i = 0; i < n; i += 2)
	{
		int			h = hexval(in[i]),
					l = hexval(in[i + 1]);

		if (h < 0 || l < 0 || h * 16 + l == 0)
			return false;
		out[i / 2] = (char) (h * 16 + l);
	}
	out[n / 2] = '\0';
	return true;
}

/* GET /v3/bill/tradebill: where to download the bill, and its SHA-1. */
static void
wx_tradebill(struct srv *s, const struct params *q, const char *mchid, struct reply *r)
{
	const char *date = param(q, "bill_date");
	const char *type = param(q, "bill_type");
	const char *tar = param(q, "tar_type");
	struct pn_bill_day d = {&s->sales, mchid, 0, srv_now(s)};
	struct pn_buf csv;
	struct pn_json j;
	char		tok[256],
				hex[520],
				sha[48],
				url[700];

	if (!date || !pn_parse_day(date, 8 * 3600, &d.day_start))
	{
		wx_error(r, 400, "PARAM_ERROR", "bill_date 格式错误，应为 YYYY-MM-DD");
		return;
	}
	if (type && strcmp(type, "ALL") != 0)
	{
		wx_error(r, 400, "PARAM_ERROR", "bill_type 仅支持 ALL");
		return;
	}
	if (tar && strcmp(tar, "GZIP") != 0)
	{
		wx_error(r, 400, "PARAM_ERROR", "tar_type 仅支持 GZIP");
		return;
	}
	if (pn_bill_rows(&d, PN_WXPAY) == 0)
	{
		wx_error(r, 400, "NO_STATEMENT_EXIST", "当前商户号没有已成交的订单，不生成对账单");
		return;
	}
	pn_buf_init(&csv);
	pn_bill_wechat(&d, &csv);
	pn_sha1_hex(csv.data, csv.len, sha);
	pn_buf_free(&csv);
	snprintf(tok, sizeof(tok), "%s|%s|%s", mchid, date, tar ? "GZIP" : "RAW");
	hexstr(tok, hex, sizeof(hex));
	snprintf(url, sizeof(url), "%s/v3/billdownload/file?token=%s", s->base, hex);
	r->status = 200;
	pn_json_init(&j, &r->body, false);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "download_url", url);
	pn_json_str(&j, "hash_type", "SHA1");
	pn_json_str(&j, "hash_value", sha);
	pn_json_close(&j, '}');
}

/* GET /v3/billdownload/file?token=: the bill (gzip when asked), unsigned. */
static bool
wx_billfile(struct srv *s, const struct params *q, const char *mchid, struct reply *r)
{
	const char *hex = param(q, "token");
	char		tok[256],
				date[16];
	char	   *bar1,
			   *bar2;
	struct pn_bill_day d = {&s->sales, mchid, 0, srv_now(s)};
	struct pn_buf csv;

	if (!hex || !unhex(hex, tok, sizeof(tok)) || !(bar1 = strchr(tok, '|')) ||
		!(bar2 = strchr(bar1 + 1, '|')) || (size_t) (bar2 - bar1 - 1) >= sizeof(date))
	{
		wx_error(r, 400, "PARAM_ERROR", "token 无效");
		return true;
	}
	*bar1 = *bar2 = '\0';
	snprintf(date, sizeof(date), "%s", bar1 + 1);
	if (strcmp(tok, mchid) != 0 || !pn_parse_day(date, 8 * 3600, &d.day_start))
	{
		wx_error(r, 400, "PARAM_ERROR", "token 无效");
		return true;
	}
	pn_buf_init(&csv);
	pn_bill_wechat(&d, &csv);
	r->status = 200;
	r->ctype = "application/octet-stream";
	if (strcmp(bar2 + 1, "GZIP") == 0)
	{
		if (pn_gzip(csv.data, csv.len, &r->body) != 0)
			wx_error(r, 500, "SYSTEM_ERROR", "系统错误");
	}
	else
		pn_buf_put(&r->body, csv.data, csv.len);
	pn_buf_free(&csv);
	return false;
}

/* Every /v3/ request: signed by the merchant, answered signed. */
static void
wechat(struct srv *s, struct MHD_Connection *conn, const char *method, const struct rctx *rc,
	   const char *path, const struct params *q, struct reply *r)
{
	static const char direct[] = "/v3/pay/transactions/out-trade-no/";
	static const char partner[] = "/v3/pay/partner/transactions/out-trade-no/";
	char		mchid[64];
	bool		sign = true;
	const char *close_no = NULL;
	bool		close_partner = false;
	char	   *no_enc = NULL;

	r->ctype = "application/json; charset=utf-8";
	if (!wx_auth(s, conn, method, rc, mchid, sizeof(mchid), r))
		return;					/* 401: unsigned */
	/* .../out-trade-no/{no}/close */
	if (strncmp(path, direct, sizeof(direct) - 1) == 0)
		close_no = path + sizeof(direct) - 1;
	else if (strncmp(path, partner, sizeof(partner) - 1) == 0)
	{
		close_no = path + sizeof(partner) - 1;
		close_partner = true;
	}
	if (close_no)
	{
		const char *slash = strchr(close_no, '/');

		if (slash && slash > close_no && strcmp(slash, "/close") == 0)
			no_enc = pn_xmemdup(close_no, (size_t) (slash - close_no));
	}
	if (no_enc)
	{
		if (strcmp(method, "POST") != 0)
			wx_error(r, 405, "METHOD_NOT_ALLOWED", "不支持的请求方法");
		else
			wx_close(s, no_enc, rc, mchid, close_partner, r);
		free(no_enc);
	}
	else if (strcmp(method, "GET") != 0)
		wx_error(r, 405, "METHOD_NOT_ALLOWED", "不支持的请求方法");
	else if (strncmp(path, direct, sizeof(direct) - 1) == 0 && !strchr(path + sizeof(direct) - 1, '/'))
		wx_query(s, path + sizeof(direct) - 1, q, mchid, false, r);
	else if (strncmp(path, partner, sizeof(partner) - 1) == 0 && !strchr(path + sizeof(partner) - 1, '/'))
		wx_query(s, path + sizeof(partner) - 1, q, mchid, true, r);
	else if (strcmp(path, "/v3/bill/tradebill") == 0)
		wx_tradebill(s, q, mchid, r);
	else if (strcmp(path, "/v3/billdownload/file") == 0)
		sign = wx_billfile(s, q, mchid, r);
	else
		wx_error(r, 404, "NOT_FOUND", "请求的资源不存在");
	if (sign)
		wx_sign_reply(s, r);
}

/*
 * POST .../out-trade-no/{no}/close with {"mchid"} (partner: {"sp_mchid",
 * "sub_mchid"}): 204 with an empty body (signed), the order CLOSED from
 * then on; 400 ORDERPAID when it was paid; 404 ORDER_NOT_EXIST.
 */
static void
wx_close(struct srv *s, const char *no_enc, const struct rctx *rc, const char *auth_mchid,
		 bool partner, struct reply *r)
{
	char	   *no = url_decode(no_enc, strlen(no_enc), false);
	char	   *body = rc->body.len ? pn_xmemdup(rc->body.data, rc->body.len) : pn_xstrdup("");
	char		mchid[PN_ID_LEN],
				sp[PN_ID_LEN];
	struct order o;

	biz_string(body, partner ? "sub_mchid" : "mchid", mchid, sizeof(mchid));
	biz_string(body, "sp_mchid", sp, sizeof(sp));
	if (!no || !*no || !mchid[0] || (partner && !sp[0]))
		wx_error(r, 400, "PARAM_ERROR", partner ? "sp_mchid、sub_mchid 与 out_trade_no 是必填参数" :
				 "mchid 与 out_trade_no 是必填参数");
	else if (strcmp(partner ? sp : mchid, auth_mchid) != 0)
		wx_error(r, 400, "INVALID_REQUEST", "请求头中的商户号与参数中的商户号不一致");
	else if (!find_order(s, PN_WXPAY, mchid, no, false, &o))
		wx_error(r, 404, "ORDER_NOT_EXIST", "订单不存在");
	else if (o.paid)
		wx_error(r, 400, "ORDERPAID", "订单已支付");
	else
	{
		close_order(s, PN_WXPAY, mchid, no);
		r->status = 204;
		r->ctype = NULL;
		pn_buf_reset(&r->body);
	}
	free(body);
	free(no);
}

/* ------------------------------------------------------------- Alipay */

static int
cmp_idx(const void *a, const void *b, void *arg)
{
	const struct params *p = arg;

	return strcmp(p->k[*(const int *) a], p->k[*(const int *) b]);
}

/* The signed content: sorted k=v of every non-empty parameter but sign. */
static void
ali_sign_content(const struct params *p, struct pn_buf *out)
{
	int			idx[MAX_PARAMS],
				n = 0;

	for (int i = 0; i < p->n; i++)
		if (strcmp(p->k[i], "sign") != 0 && p->v[i][0])
			idx[n++] = i;
	qsort_r(idx, (size_t) n, sizeof(int), cmp_idx, (void *) p);
	for (int i = 0; i < n; i++)
		pn_buf_printf(out, "%s%s=%s", i ? "&" : "", p->k[idx[i]], p->v[idx[i]]);
}

/*
 * Wraps the response object as Alipay does: '/' written "\/", the node
 * named after the method, then the signature over the object's exact text.
 */
static void
ali_finish(struct srv *s, const char *method, const struct pn_buf *obj, bool sign,
		   struct reply *r)
{
	struct pn_buf text,
				sig;
	char		node[128];

	pn_buf_init(&text);
	pn_buf_init(&sig);
	for (size_t i = 0; i < obj->len; i++)
	{
		if (obj->data[i] == '/')
			pn_buf_putc(&text, '\\');
		pn_buf_putc(&text, obj->data[i]);
	}
	snprintf(node, sizeof(node), "%s", method);
	for (char *p = node; *p; p++)
		if (*p == '.')
			*p = '_';
	r->status = 200;
	r->ctype = "text/html;charset=utf-8";
	pn_buf_printf(&r->body, "{\"%s_response\":", node);
	if (sign && !pn_api_sign(s->keys, PN_KEY_ALIPAY, text.data, text.len, &sig))
		sign = false;
	if (sign && s->o->serve_bad && strcmp(s->o->serve_bad, "signature") == 0)
		tamper_sig(&sig);
	if (sign && s->o->serve_bad && strcmp(s->o->serve_bad, "body") == 0)
		tamper_body(&text);
	pn_buf_put(&r->body, text.data, text.len);
	if (sign)
		pn_buf_printf(&r->body, ",\"sign\":\"%s\"", sig.data);
	pn_buf_putc(&r->body, '}');
	pn_buf_free(&text);
	pn_buf_free(&sig);
}

static void
ali_fail(struct pn_json *j, const char *code, const char *msg, const char *sub_code,
		 const char *sub_msg)
{
	pn_json_str(j, "code", code);
	pn_json_str(j, "msg", msg);
	pn_json_str(j, "sub_code", sub_code);
	pn_json_str(j, "sub_msg", sub_msg);
}

/* A string member of the biz_content JSON, "" when absent. */
static void
biz_string(const char *biz, const char *key, char *out, size_t outsz)
{
	struct pn_buf c;
	size_t		at;
	struct pn_span top,
				m,
				v;

	out[0] = '\0';
	pn_buf_init(&c);
	if (biz && pn_json_check(biz, strlen(biz), &c, &at) == NULL && c.len > 1 && c.data[0] == '{')
	{
		top.a = 0;
		top.b = c.len;
		if (pn_json_member(c.data, top, key, &m, &v) == 0 && c.data[v.a] == '"' &&
			v.b - v.a - 2 < outsz && !memchr(c.data + v.a, '\\', v.b - v.a))
		{
			memcpy(out, c.data + v.a + 1, v.b - v.a - 2);
			out[v.b - v.a - 2] = '\0';
		}
	}
	pn_buf_free(&c);
}

static void
ali_trade_query(struct srv *s, const char *biz, struct pn_json *j)
{
	char		no[PN_ID_LEN],
				trade[PN_ID_LEN],
				y[40],
				t[32],
				logon[32];
	struct order o;
	bool		found;

	biz_string(biz, "out_trade_no", no, sizeof(no));
	biz_string(biz, "trade_no", trade, sizeof(trade));
	if (!no[0] && !trade[0])
	{
		ali_fail(j, "40002", "Invalid Arguments", "isv.missing-biz-param",
				 "缺少业务参数 out_trade_no 或 trade_no");
		return;
	}
	found = no[0] ? find_order(s, PN_ALIPAY, s->c->seller_id, no, false, &o)
		: find_order(s, PN_ALIPAY, s->c->seller_id, trade, true, &o);
	if (!found || (no[0] && trade[0] && strcmp(o.any->trade_no, trade) != 0))
	{
		ali_fail(j, "40004", "Business Failed", "ACQ.TRADE_NOT_EXIST", "交易不存在");
		pn_json_str(j, "buyer_pay_amount", "0.00");
		pn_json_str(j, "invoice_amount", "0.00");
		if (no[0])
			pn_json_str(j, "out_trade_no", no);
		pn_json_str(j, "point_amount", "0.00");
		pn_json_str(j, "receipt_amount", "0.00");
		return;
	}
	pn_fmt_yuan(o.any->amount, y, sizeof(y));
	pn_fmt_beijing((time_t) (o.pay ? o.pay->time : o.any->time), "%Y-%m-%d %H:%M:%S", t, sizeof(t));
	{
		size_t		n = strlen(o.any->payer);

		snprintf(logon, sizeof(logon), "138****%s", n >= 4 ? o.any->payer + n - 4 : "0000");
	}
	pn_json_str(j, "code", "10000");
	pn_json_str(j, "msg", "Success");
	pn_json_str(j, "buyer_logon_id", logon);
	pn_json_str(j, "buyer_pay_amount", o.paid ? y : "0.00");
	pn_json_str(j, "buyer_user_id", o.any->payer);
	if (o.paid)
	{
		pn_json_open(j, "fund_bill_list", '[');
		pn_json_open(j, NULL, '{');
		pn_json_str(j, "amount", y);
		pn_json_str(j, "fund_channel", "ALIPAYACCOUNT");
		pn_json_close(j, '}');
		pn_json_close(j, ']');
	}
	pn_json_str(j, "invoice_amount", o.paid ? y : "0.00");
	pn_json_str(j, "out_trade_no", o.any->order_no);
	pn_json_str(j, "point_amount", "0.00");
	pn_json_str(j, "receipt_amount", o.paid ? y : "0.00");
	if (o.paid)
		pn_json_str(j, "send_pay_date", t);
	pn_json_str(j, "total_amount", y);
	pn_json_str(j, "trade_no", o.any->trade_no);
	pn_json_str(j, "trade_status", o.closed ? "TRADE_CLOSED" : !o.paid ? "WAIT_BUYER_PAY" :
				o.refund && o.refund->refund_amount >= o.any->amount ? "TRADE_CLOSED" : "TRADE_SUCCESS");
}

/*
 * alipay.trade.close by out_trade_no (or trade_no): 10000 and the trade
 * TRADE_CLOSED from then on; paid: 40004 ACQ.TRADE_STATUS_ERROR; unknown:
 * 40004 ACQ.TRADE_NOT_EXIST.
 */
static void
ali_trade_close(struct srv *s, const char *biz, struct pn_json *j)
{
	char		no[PN_ID_LEN],
				trade[PN_ID_LEN];
	struct order o;
	bool		found;

	biz_string(biz, "out_trade_no", no, sizeof(no));
	biz_string(biz, "trade_no", trade, sizeof(trade));
	if (!no[0] && !trade[0])
	{
		ali_fail(j, "40002", "Invalid Arguments", "isv.missing-biz-param",
				 "缺少业务参数 out_trade_no 或 trade_no");
		return;
	}
	found = no[0] ? find_order(s, PN_ALIPAY, s->c->seller_id, no, false, &o)
		: find_order(s, PN_ALIPAY, s->c->seller_id, trade, true, &o);
	if (!found || (no[0] && trade[0] && strcmp(o.any->trade_no, trade) != 0))
		ali_fail(j, "40004", "Business Failed", "ACQ.TRADE_NOT_EXIST", "交易不存在");
	else if (o.paid)
		ali_fail(j, "40004", "Business Failed", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法");
	else
	{
		close_order(s, PN_ALIPAY, o.any->merchant, o.any->order_no);
		pn_json_str(j, "code", "10000");
		pn_json_str(j, "msg", "Success");
		pn_json_str(j, "out_trade_no", o.any->order_no);
		pn_json_str(j, "trade_no", o.any->trade_no);
	}
}

static void
ali_bill_url(struct srv *s, const char *biz, struct pn_json *j)
{
	char		type[32],
				date[32],
				day[16],
				tok[128],
				hex[300],
				url[1024];
	struct pn_bill_day d = {&s->sales, s->c->seller_id, 0, srv_now(s)};

	biz_string(biz, "bill_type", type, sizeof(type));
	biz_string(biz, "bill_date", date, sizeof(date));
	if (strcmp(type, "trade") != 0)
	{
		ali_fail(j, "40004", "Business Failed", "isp.bill_type_not_support", "账单类型仅支持 trade");
		return;
	}
	if (!pn_parse_day(date, 8 * 3600, &d.day_start))
	{
		ali_fail(j, "40004", "Business Failed", "isv.invalid-bill-date", "账单日期格式不正确");
		return;
	}
	if (pn_bill_rows(&d, PN_ALIPAY) == 0)
	{
		ali_fail(j, "40004", "Business Failed", "isp.bill_not_exist", "账单不存在");
		return;
	}
	pn_fmt_beijing((time_t) d.day_start, "%Y%m%d", day, sizeof(day));
	snprintf(tok, sizeof(tok), "%s|%s", s->c->seller_id, date);
	hexstr(tok, hex, sizeof(hex));
	snprintf(url, sizeof(url),
			 "%s/downloadBillFile.resource?bizType=trade&userId=%s0156&fileType=csv.zip"
			 "&bizDates=%s&downloadFileName=%s0156_%s.csv.zip&fileId=%%2Ftrade%%2F%s0156%%2F%s.csv.zip"
			 "&timestamp=%lld&token=%s", s->base, s->c->seller_id, day, s->c->seller_id, day,
			 s->c->seller_id, day, (long long) srv_now(s), hex);
	pn_json_str(j, "code", "10000");
	pn_json_str(j, "msg", "Success");
	pn_json_str(j, "bill_download_url", url);
}

/* POST (or GET) /gateway.do */
static void
alipay(struct srv *s, struct MHD_Connection *conn, const struct rctx *rc, struct params *q,
	   struct reply *r)
{
	const char *ctype = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	const char *method,
			   *sign,
			   *app_id;
	struct pn_buf content,
				obj;
	struct pn_json j;
	bool		signed_reply = true;

	pn_buf_init(&obj);
	pn_json_init(&j, &obj, false);
	pn_json_open(&j, NULL, '{');
	if (rc->body.len && (!ctype || strncasecmp(ctype, "application/x-www-form-urlencoded", 33) == 0) &&
		params_parse(q, rc->body.data, rc->body.len) != 0)
		params_free(q);
	method = param(q, "method");
	sign = param(q, "sign");
	app_id = param(q, "app_id");
	if (!method || (strcmp(method, "alipay.trade.query") != 0 &&
					strcmp(method, "alipay.trade.close") != 0 &&
					strcmp(method, "alipay.data.dataservice.bill.downloadurl.query") != 0))
	{
		ali_fail(&j, "40002", "Invalid Arguments", "isv.invalid-method", "不存在的方法名");
		signed_reply = false;
		method = "error";
	}
	else if (!app_id || strcmp(app_id, s->c->ali_app_id) != 0 || !pn_apikeys_has(s->keys, PN_KEY_ALIPAY))
	{
		ali_fail(&j, "40002", "Invalid Arguments", "isv.invalid-app-id", "无效的AppID参数");
		signed_reply = false;
	}
	else if (!sign || !param(q, "sign_type") || strcmp(param(q, "sign_type"), "RSA2") != 0)
		ali_fail(&j, "40001", "Missing Required Arguments", "isv.missing-signature", "缺少签名参数");
	else
	{
		pn_buf_init(&content);
		ali_sign_content(q, &content);
		if (!pn_api_verify(s->keys, PN_KEY_ALIPAY, content.data, content.len, sign))
			ali_fail(&j, "40002", "Invalid Arguments", "isv.invalid-signature",
					 "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配");
		else if (strcmp(method, "alipay.trade.query") == 0)
			ali_trade_query(s, param(q, "biz_content"), &j);
		else if (strcmp(method, "alipay.trade.close") == 0)
			ali_trade_close(s, param(q, "biz_content"), &j);
		else
			ali_bill_url(s, param(q, "biz_content"), &j);
		pn_buf_free(&content);
	}
	pn_json_close(&j, '}');
	ali_finish(s, method, &obj, signed_reply, r);
	pn_buf_free(&obj);
}

/* GET /downloadBillFile.resource?...&token=: the bill zip */
static void
alipay_billfile(struct srv *s, const struct params *q, struct reply *r)
{
	const char *hex = param(q, "token");
	char		tok[128],
				name[16],
				cd[200],
				*bar;
	struct pn_bill_day d = {&s->sales, NULL, 0, srv_now(s)};

	if (!hex || !unhex(hex, tok, sizeof(tok)) || !(bar = strchr(tok, '|')))
	{
		r->status = 404;
		r->ctype = "text/plain; charset=utf-8";
		pn_buf_puts(&r->body, "下载链接无效\n");
		return;
	}
	*bar = '\0';
	d.merchant = tok;
	if (!pn_parse_day(bar + 1, 8 * 3600, &d.day_start) || pn_bill_alipay_zip(&d, &r->body) != 0)
	{
		pn_buf_reset(&r->body);
		r->status = 404;
		r->ctype = "text/plain; charset=utf-8";
		pn_buf_puts(&r->body, "下载链接无效\n");
		return;
	}
	r->status = 200;
	r->ctype = "application/oct-stream";
	pn_fmt_beijing((time_t) d.day_start, "%Y%m%d", name, sizeof(name));
	snprintf(cd, sizeof(cd), "attachment; filename=%.64s0156_%s.csv.zip", tok, name);
	reply_header(r, "Content-Disposition", cd);
}

/* ------------------------------------------------------------- Stripe */

static void
stripe_error(struct reply *r, unsigned status, const char *type, const char *code,
			 const char *message)
{
	struct pn_json j;

	r->status = status;
	pn_buf_reset(&r->body);
	pn_json_init(&j, &r->body, true);
	pn_json_open(&j, NULL, '{');
	pn_json_open(&j, "error", '{');
	if (code)
		pn_json_str(&j, "code", code);
	if (code)
	{
		char		url[160];

		snprintf(url, sizeof(url), "https://stripe.com/docs/error-codes/%s", code);
		for (char *p = url + 34; *p; p++)
			if (*p == '_')
				*p = '-';
		pn_json_str(&j, "doc_url", url);
	}
	pn_json_str(&j, "message", message);
	pn_json_str(&j, "type", type);
	pn_json_close(&j, '}');
	pn_json_close(&j, '}');
	pn_buf_putc(&r->body, '\n');
}

/* The secret key of Authorization: Bearer KEY, or Basic base64(KEY:). */
static bool
stripe_auth(struct srv *s, struct MHD_Connection *conn, struct reply *r)
{
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	char	   *key = NULL;
	bool		ok;
	char		msg[160];

	if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
		key = pn_xstrdup(auth + 7);
	else if (auth && strncasecmp(auth, "Basic ", 6) == 0)
	{
		unsigned char *raw;
		size_t		len;

		if (pn_b64_decode(auth + 6, &raw, &len) == 0)
		{
			key = pn_xmemdup(raw, len);
			free(raw);
			if (strchr(key, ':'))
				*strchr(key, ':') = '\0';
		}
	}
	if (!key || !*key)
	{
		free(key);
		stripe_error(r, 401, "invalid_request_error", NULL,
					 "You did not provide an API key. You need to provide your API key in the "
					 "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').");
		return false;
	}
	ok = s->stripe_key && strcmp(key, s->stripe_key) == 0;
	if (!ok)
	{
		size_t		n = strlen(key);

		snprintf(msg, sizeof(msg), "Invalid API Key provided: %.8s****%s",
				 key, n > 12 ? key + n - 4 : "");
		stripe_error(r, 401, "invalid_request_error", NULL, msg);
	}
	free(key);
	return ok;
}

static void
stripe_intent(const struct srv *s, const struct order *o, struct pn_json *j)
{
	const struct pn_sale *v = o->any;
	char		secret[PN_ID_LEN + 40],
				pm[40],
				tail[32];

	pn_order_chars(v->order_no, "stripe-secret", 24, PN_ALNUM, tail);
	snprintf(secret, sizeof(secret), "%s_secret_%s", v->trade_no, tail);
	memcpy(pm, "pm_", 3);
	pn_order_chars(v->order_no, "stripe-pm", 24, PN_ALNUM, pm + 3);
	(void) s;
	pn_json_open(j, NULL, '{');
	pn_json_int(j, "amount", v->amount);
	pn_json_int(j, "amount_capturable", 0);
	pn_json_open(j, "amount_details", '{');
	pn_json_open(j, "tip", '{');
	pn_json_close(j, '}');
	pn_json_close(j, '}');
	pn_json_int(j, "amount_received", o->paid ? v->amount : 0);
	pn_json_null(j, "application");
	pn_json_null(j, "application_fee_amount");
	pn_json_null(j, "automatic_payment_methods");
	pn_json_null(j, "canceled_at");
	pn_json_null(j, "cancellation_reason");
	pn_json_str(j, "capture_method", "automatic");
	pn_json_str(j, "client_secret", secret);
	pn_json_str(j, "confirmation_method", "automatic");
	pn_json_int(j, "created", (o->pay ? o->pay->time : v->time) - 3);
	pn_json_str(j, "currency", v->currency);
	pn_json_null(j, "customer");
	pn_json_null(j, "description");
	pn_json_str(j, "id", v->trade_no);
	pn_json_null(j, "invoice");
	pn_json_null(j, "last_payment_error");
	if (o->paid)
		pn_json_str(j, "latest_charge", v->payer);
	else
		pn_json_null(j, "latest_charge");
	pn_json_bool(j, "livemode", false);
	pn_json_open(j, "metadata", '{');
	pn_json_str(j, "order_id", v->order_no);
	pn_json_close(j, '}');
	pn_json_null(j, "next_action");
	pn_json_str(j, "object", "payment_intent");
	pn_json_null(j, "on_behalf_of");
	if (o->paid)
		pn_json_str(j, "payment_method", pm);
	else
		pn_json_null(j, "payment_method");
	pn_json_open(j, "payment_method_options", '{');
	pn_json_close(j, '}');
	pn_json_open(j, "payment_method_types", '[');
	pn_json_str(j, NULL, "card");
	pn_json_close(j, ']');
	pn_json_null(j, "processing");
	pn_json_null(j, "receipt_email");
	pn_json_null(j, "review");
	pn_json_null(j, "setup_future_usage");
	pn_json_null(j, "shipping");
	pn_json_null(j, "source");
	pn_json_null(j, "statement_descriptor");
	pn_json_null(j, "statement_descriptor_suffix");
	pn_json_str(j, "status", o->paid ? "succeeded" : "requires_payment_method");
	pn_json_null(j, "transfer_data");
	pn_json_null(j, "transfer_group");
	pn_json_close(j, '}');
}

/* metadata['order_id']:'X' (or double quotes): X, else NULL. */
static char *
search_order(const char *query)
{
	static const char *const prefixes[] = {"metadata['order_id']:", "metadata[\"order_id\"]:"};

	for (int i = 0; query && i < 2; i++)
	{
		size_t		n = strlen(prefixes[i]);
		const char *v = query + n;
		size_t		len;

		if (strncmp(query, prefixes[i], n) != 0 || (*v != '\'' && *v != '"'))
			continue;
		len = strlen(v);
		if (len < 2 || v[len - 1] != *v || memchr(v + 1, *v, len - 2))
			return NULL;
		return pn_xmemdup(v + 1, len - 2);
	}
	return NULL;
}

/* One balance transaction of a sale: a charge for a payment, a refund for a refund. */
struct btxn
{
	const struct pn_sale *s;
	char		id[40];
	long long	created;
};

static int
btxn_cmp(const void *a, const void *b)
{
	const struct btxn *x = a,
			   *y = b;

	if (x->created != y->created)
		return x->created > y->created ? -1 : 1;	/* newest first */
	return -strcmp(x->id, y->id);
}

static void
btxn_json(const struct btxn *t, time_t now, struct pn_json *j)
{
	const struct pn_sale *s = t->s;
	bool		pay = s->event == PN_EV_PAY;
	long long	amount = pay ? s->amount : -s->refund_amount;
	long long	fee = pay ? (s->amount * 29 + 500) / 1000 + 30 : 0;
	long long	avail = (t->created / 86400 + 2) * 86400;
	char		desc[PN_ID_LEN + 40];

	if (pay)
		snprintf(desc, sizeof(desc), "Order %s", s->order_no);
	else
		snprintf(desc, sizeof(desc), "REFUND FOR CHARGE (Order %s)", s->order_no);
	pn_json_open(j, NULL, '{');
	pn_json_str(j, "id", t->id);
	pn_json_str(j, "object", "balance_transaction");
	pn_json_int(j, "amount", amount);
	pn_json_int(j, "available_on", avail);
	pn_json_int(j, "created", t->created);
	pn_json_str(j, "currency", s->currency);
	pn_json_str(j, "description", desc);
	pn_json_null(j, "exchange_rate");
	pn_json_int(j, "fee", fee);
	pn_json_open(j, "fee_details", '[');
	if (fee)
	{
		pn_json_open(j, NULL, '{');
		pn_json_int(j, "amount", fee);
		pn_json_null(j, "application");
		pn_json_str(j, "currency", s->currency);
		pn_json_str(j, "description", "Stripe processing fees");
		pn_json_str(j, "type", "stripe_fee");
		pn_json_close(j, '}');
	}
	pn_json_close(j, ']');
	pn_json_int(j, "net", amount - fee);
	pn_json_str(j, "reporting_category", pay ? "charge" : "refund");
	pn_json_str(j, "source", pay ? s->payer : s->refund_id);
	pn_json_str(j, "status", avail <= (long long) now ? "available" : "pending");
	pn_json_str(j, "type", pay ? "charge" : "refund");
	pn_json_close(j, '}');
}

static void
stripe_balance(struct srv *s, const struct params *q, struct reply *r)
{
	long long	gte = 0,
				lt = 253402300799LL,
				limit = 10;
	const char *after = param(q, "starting_after");
	struct btxn *v = pn_xcalloc(s->sales.n ? s->sales.n : 1, sizeof(*v));
	size_t		n = 0,
				from = 0,
				k;
	struct pn_json j;

	if ((param(q, "created[gte]") && !pn_parse_ll(param(q, "created[gte]"), 0, lt, &gte)) ||
		(param(q, "created[lt]") && !pn_parse_ll(param(q, "created[lt]"), 0, 253402300799LL, &lt)) ||
		(param(q, "limit") && !pn_parse_ll(param(q, "limit"), 1, 100, &limit)))
	{
		stripe_error(r, 400, "invalid_request_error", "parameter_invalid_integer",
					 "Invalid integer: created[gte], created[lt] and limit take integers (limit 1..100)");
		free(v);
		return;
	}
	for (size_t i = 0; i < s->sales.n; i++)
	{
		const struct pn_sale *e = &s->sales.v[i];
		bool		dup = false;

		if (e->gateway != PN_STRIPE || e->time < gte || e->time >= lt)
			continue;
		memcpy(v[n].id, "txn_", 4);
		pn_order_chars(e->order_no, e->event == PN_EV_PAY ? "stripe-txn-ch" : "stripe-txn-re",
					   24, PN_ALNUM, v[n].id + 4);
		for (k = 0; k < n && !dup; k++)
			dup = strcmp(v[k].id, v[n].id) == 0;
		if (dup)
			continue;
		v[n].s = e;
		v[n].created = e->time;
		n++;
	}
	qsort(v, n, sizeof(*v), btxn_cmp);
	if (after)
	{
		for (k = 0; k < n && strcmp(v[k].id, after) != 0; k++)
			;
		if (k == n)
		{
			char		msg[160];

			snprintf(msg, sizeof(msg), "No such balance transaction: '%.60s'", after);
			stripe_error(r, 400, "invalid_request_error", "resource_missing", msg);
			free(v);
			return;
		}
		from = k + 1;
	}
	r->status = 200;
	pn_json_init(&j, &r->body, true);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "object", "list");
	pn_json_open(&j, "data", '[');
	for (k = from; k < n && k < from + (size_t) limit; k++)
		btxn_json(&v[k], srv_now(s), &j);
	pn_json_close(&j, ']');
	pn_json_bool(&j, "has_more", k < n);
	pn_json_str(&j, "url", "/v1/balance_transactions");
	pn_json_close(&j, '}');
	pn_buf_putc(&r->body, '\n');
	free(v);
}

static void
stripe(struct srv *s, struct MHD_Connection *conn, const char *method, const char *path,
	   const struct params *q, struct reply *r)
{
	static const char pi[] = "/v1/payment_intents/";
	struct order o;
	struct pn_json j;

	r->ctype = "application/json";
	if (!stripe_auth(s, conn, r))
		return;
	if (strcmp(method, "GET") != 0)
	{
		stripe_error(r, 405, "invalid_request_error", NULL, "Only GET is served here.");
		return;
	}
	if (strcmp(path, "/v1/payment_intents/search") == 0)
	{
		char	   *no = search_order(param(q, "query"));

		if (!no)
		{
			stripe_error(r, 400, "invalid_request_error", "parameter_invalid_string",
						 "Only query=metadata['order_id']:'VALUE' is supported here.");
			return;
		}
		r->status = 200;
		pn_json_init(&j, &r->body, true);
		pn_json_open(&j, NULL, '{');
		pn_json_str(&j, "object", "search_result");
		pn_json_str(&j, "url", "/v1/payment_intents/search");
		pn_json_bool(&j, "has_more", false);
		pn_json_open(&j, "data", '[');
		if (find_order(s, PN_STRIPE, NULL, no, false, &o))
			stripe_intent(s, &o, &j);
		pn_json_close(&j, ']');
		pn_json_null(&j, "next_page");
		pn_json_close(&j, '}');
		pn_buf_putc(&r->body, '\n');
		free(no);
	}
	else if (strncmp(path, pi, sizeof(pi) - 1) == 0 && !strchr(path + sizeof(pi) - 1, '/'))
	{
		char	   *id = url_decode(path + sizeof(pi) - 1, strlen(path + sizeof(pi) - 1), false);

		if (id && find_order(s, PN_STRIPE, NULL, id, true, &o))
		{
			r->status = 200;
			pn_json_init(&j, &r->body, true);
			stripe_intent(s, &o, &j);
			pn_buf_putc(&r->body, '\n');
		}
		else
		{
			char		msg[160];

			snprintf(msg, sizeof(msg), "No such payment_intent: '%.80s'", id ? id : "");
			stripe_error(r, 404, "invalid_request_error", "resource_missing", msg);
		}
		free(id);
	}
	else if (strcmp(path, "/v1/balance_transactions") == 0)
		stripe_balance(s, q, r);
	else
		stripe_error(r, 404, "invalid_request_error", NULL, "Unrecognized request URL.");
	if (s->o->serve_bad && strcmp(s->o->serve_bad, "body") == 0)
		tamper_body(&r->body);
}

/* ------------------------------------------------------------- HTTP */

static void
route(struct srv *s, struct MHD_Connection *conn, const char *method, struct rctx *rc,
	  struct reply *r)
{
	const char *qm = strchr(rc->uri, '?');
	char	   *path = qm ? pn_xmemdup(rc->uri, (size_t) (qm - rc->uri)) : pn_xstrdup(rc->uri);
	struct params q = {0};

	if (qm && params_parse(&q, qm + 1, strlen(qm + 1)) != 0)
		params_free(&q);
	if (pn_sales_refresh(&s->sales) != 0)
	{
		r->status = 500;
		r->ctype = "text/plain; charset=utf-8";
		pn_buf_puts(&r->body, "cannot read the sales record\n");
	}
	else if (rc->too_big)
	{
		r->status = 413;
		r->ctype = "text/plain; charset=utf-8";
		pn_buf_puts(&r->body, "request body too large\n");
	}
	else if (strncmp(path, "/v3/", 4) == 0)
		wechat(s, conn, method, rc, path, &q, r);
	else if (strcmp(path, "/gateway.do") == 0)
		alipay(s, conn, rc, &q, r);
	else if (strcmp(path, "/downloadBillFile.resource") == 0)
		alipay_billfile(s, &q, r);
	else if (strncmp(path, "/v1/", 4) == 0)
		stripe(s, conn, method, path, &q, r);
	else
	{
		r->status = 404;
		r->ctype = "text/plain; charset=utf-8";
		pn_buf_puts(&r->body, "not a gateway API\n");
	}
	params_free(&q);
	free(path);
}

static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct rctx *rc = pn_xcalloc(1, sizeof(*rc));

	(void) cls;
	(void) conn;
	rc->uri = pn_xstrdup(uri ? uri : "/");
	pn_buf_init(&rc->body);
	return rc;
}

static void
on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
		enum MHD_RequestTerminationCode toe)
{
	struct rctx *rc = *con_cls;

	(void) cls;
	(void) conn;
	(void) toe;
	if (!rc)
		return;
	free(rc->uri);
	pn_buf_free(&rc->body);
	free(rc);
	*con_cls = NULL;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
		   const char *version, const char *upload_data, size_t *upload_data_size,
		   void **con_cls)
{
	struct srv *s = cls;
	struct rctx *rc = *con_cls;
	struct reply r;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	(void) url;
	(void) version;
	if (!rc)
		return MHD_NO;
	if (!rc->headers_seen)
	{
		rc->headers_seen = true;	/* the body, if any, comes next */
		return MHD_YES;
	}
	if (*upload_data_size > 0)
	{
		if (rc->body.len + *upload_data_size > MAX_BODY)
			rc->too_big = true;
		else
			pn_buf_put(&rc->body, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	memset(&r, 0, sizeof(r));
	pn_buf_init(&r.body);
	s->requests++;
	route(s, conn, method, rc, &r);
	if (s->o->verbose)
		fprintf(stderr, "%s %s -> %u (%zu bytes)\n", method, rc->uri, r.status, r.body.len);
	resp = MHD_create_response_from_buffer(r.body.len, r.body.data, MHD_RESPMEM_MUST_COPY);
	if (!resp)
	{
		reply_free(&r);
		return MHD_NO;
	}
	if (r.ctype)
		MHD_add_response_header(resp, "Content-Type", r.ctype);
	MHD_add_response_header(resp, "Server", "paynotify-send");
	for (int i = 0; i < r.nh; i++)
		MHD_add_response_header(resp, r.hn[i], r.hv[i]);
	ret = MHD_queue_response(conn, r.status ? r.status : 500, resp);
	MHD_destroy_response(resp);
	reply_free(&r);
	return ret;
}

/* "127.0.0.1:8080" (IPv4 only): 0, or -1 when it is not one. */
static int
parse_listen(const char *s, struct sockaddr_in *sa)
{
	const char *colon = strrchr(s, ':');
	char		host[64];
	long long	port;

	if (!colon || (size_t) (colon - s) >= sizeof(host) || !pn_parse_ll(colon + 1, 0, 65535, &port))
		return -1;
	memcpy(host, s, (size_t) (colon - s));
	host[colon - s] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t) port);
	return inet_pton(AF_INET, host[0] ? host : "127.0.0.1", &sa->sin_addr) == 1 ? 0 : -1;
}

static char *
read_api_key(const char *dir, const char *name)
{
	char		path[4096];
	FILE	   *f;
	char		buf[512];
	size_t		n;

	if (strchr(name, '/') || !dir)
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "r")))
	{
		pn_log("cannot read the Stripe API key \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	if (n == 0)
	{
		pn_log("the Stripe API key \"%s\" is empty", path);
		return NULL;
	}
	return pn_xstrdup(buf);
}

int
run_serve(struct opts *o, struct pn_conf *c)
{
	struct srv	s;
	struct sockaddr_in sa;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	struct pn_serve_keys keys = {o->keys_dir, o->merchant_cert, o->wx_key, o->wx_cert,
	o->serial, o->app_public_key, o->ali_key};
	char		host[INET_ADDRSTRLEN];
	int			rc = 0;

	memset(&s, 0, sizeof(s));
	s.o = o;
	s.c = c;
	if (parse_listen(o->listen, &sa) != 0)
	{
		pn_log("--listen wants IPv4-ADDRESS:PORT, not \"%s\"", o->listen);
		return EXIT_USAGE;
	}
	if (!(s.keys = pn_apikeys_load(&keys, s.wx_serial, sizeof(s.wx_serial))))
		return EXIT_USAGE;
	if (o->stripe_api_key && !(s.stripe_key = read_api_key(o->keys_dir, o->stripe_api_key)))
	{
		pn_apikeys_free(s.keys);
		return EXIT_USAGE;
	}
	pn_sales_init(&s.sales, o->sales);
	pn_rng_seed(&s.rng, c->seed ? c->seed : ((uint64_t) time(NULL) << 20) ^ (uint64_t) getpid(),
				0x7365727665, 0, 0, 0);
	if (pn_sales_refresh(&s.sales) != 0)
		rc = 1;
	d = rc ? NULL : MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
									 NULL, NULL, on_request, &s,
									 MHD_OPTION_SOCK_ADDR, (struct sockaddr *) &sa,
									 MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
									 MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
									 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) 30,
									 MHD_OPTION_END);
	if (!rc && !d)
	{
		pn_log("cannot listen on %s: %s", o->listen, strerror(errno));
		rc = 1;
	}
	if (d)
	{
		info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
		inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host));
		snprintf(s.base, sizeof(s.base), "http://%s:%u", host,
				 info ? (unsigned) info->port : (unsigned) ntohs(sa.sin_port));
		if (!o->quiet)
			printf("paynotify-send: serving %s from %zu sales (%s)%s%s\n", s.base, s.sales.n,
				   o->sales, o->serve_bad ? ", --serve-bad " : "",
				   o->serve_bad ? o->serve_bad : "");
		fflush(stdout);
		while (!stop_flag)
		{
			struct timespec ts = {0, 100 * 1000 * 1000};

			nanosleep(&ts, NULL);
		}
		MHD_stop_daemon(d);
	}
	pn_sales_free(&s.sales);
	free(s.closed);
	pn_apikeys_free(s.keys);
	if (s.stripe_key)
		memset(s.stripe_key, 0, strlen(s.stripe_key));
	free(s.stripe_key);
	return rc;
}
