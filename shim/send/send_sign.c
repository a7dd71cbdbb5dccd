/*
 * send_sign.c
 *		Builds notifications the way each gateway does: key loading, the
 *		three body formats, WeChat's AES-256-GCM resource encryption, RSA
 *		(PKCS#1 v1.5, SHA-256) and HMAC-SHA256 signatures.  The only file of
 *		paynotify-send that includes OpenSSL headers.
 *
 *		What stays fixed and what changes between deliveries follows the
 *		gateways (see docs/GATEWAYS.md): a notification keeps its id
 *		and (WeChat, Stripe) its body across re-deliveries, each delivery is
 *		signed afresh with a new timestamp (and WeChat nonce); Alipay re-signs
 *		its retries with a new notify_time.
 *
 *		With --payload (send_payload.c) the content is a file's: WeChat's
 *		plaintext sealed in place of resource.plaintext, Alipay's parameters
 *		signed with sign appended, Stripe's event as it is; signing and
 *		headers are the same as for generated ones.
 *
 *		Thread safety: pn_build() may run on several threads at once, each
 *		with its own pn_signer; struct pn_conf is only read.
 */
#include "send.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

/* AEAD_AES_256_GCM's tag, appended to the ciphertext. */
#define GCM_TAG_LEN 16

/* Per-thread crypto state. */
struct pn_signer
{
	EVP_PKEY   *key;			/* the gateway's signing key (RSA gateways) */
	EVP_PKEY   *alt;			/* an unconfigured key, for --bad unknown-serial */
	EVP_MD_CTX *md;
	EVP_CIPHER_CTX *cc;
};

/* One form or JSON field of a notification being built. */
struct kv
{
	const char *k;
	char	   *v;
};

const char *const pn_bad_names[PN_BAD_COUNT] = {
	"none", "tampered", "stale", "probe", "unknown-serial"
};

static char *read_key_file(const char *dir, const char *name, size_t *len);
static void trim_right(char *s, size_t *len);
static int	cert_serial(const char *pem, char *out, size_t outsz);
static EVP_PKEY *load_private(const char *pem);
static char *generate_rsa_pem(void);
static void rsa_sign_b64(struct pn_signer *s, EVP_PKEY *key, const void *msg,
						 size_t n, struct pn_buf *out);
static void b64(const unsigned char *in, size_t n, struct pn_buf *out);
static _Noreturn void ssl_die(const char *what);
static void add_header(struct pn_req *r, const char *name, const char *value);
static struct pn_req *build_wx(const struct pn_conf *c, struct pn_signer *s,
							   struct pn_req *r, int bad, time_t now);
static struct pn_req *build_ali(const struct pn_conf *c, struct pn_signer *s,
								struct pn_req *r, int bad, time_t now);
static struct pn_req *build_ali_dut(const struct pn_conf *c, struct pn_signer *s,
									struct pn_req *r, int bad, time_t now);
static struct pn_req *ali_finish(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
								 int bad, struct kv *f, int n, int sign_at);
static struct pn_req *build_stripe(const struct pn_conf *c, struct pn_signer *s,
								   struct pn_req *r, int bad, time_t now);
static struct pn_req *build_wx_payload(const struct pn_conf *c, struct pn_signer *s,
									   struct pn_req *r, int bad, time_t now);
static struct pn_req *build_ali_payload(const struct pn_conf *c, struct pn_signer *s,
										struct pn_req *r, int bad);
static struct pn_req *build_stripe_payload(const struct pn_conf *c, struct pn_req *r,
										   int bad, time_t now);

/* --------------------------------------------------------------- keys */

/* A name with a '/' is a path; anything else is looked up in dir. */
static char *
read_key_file(const char *dir, const char *name, size_t *len)
{
	char		path[4096];
	FILE	   *f;
	struct pn_buf b;
	char		chunk[4096];
	size_t		n;

	if (strchr(name, '/') || !dir)
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "rb");
	if (!f)
	{
		pn_log("cannot read key file \"%s\": %s",
				path, strerror(errno));
		return NULL;
	}
	pn_buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len < (1 << 20))
		pn_buf_put(&b, chunk, n);
	fclose(f);
	*len = b.len;
	return pn_buf_steal(&b);
}

/* Drops trailing whitespace (a newline at the end of a secret file). */
static void
trim_right(char *s, size_t *len)
{
	while (*len > 0 && (s[*len - 1] == '\n' || s[*len - 1] == '\r' ||
						s[*len - 1] == ' ' || s[*len - 1] == '\t'))
		s[--(*len)] = '\0';
}

/* Serial of a PEM certificate as upper-case hex, like `openssl x509 -serial`. */
static int
cert_serial(const char *pem, char *out, size_t outsz)
{
	BIO		   *bio = BIO_new_mem_buf(pem, -1);
	X509	   *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	const ASN1_INTEGER *sn;
	int			n;

	BIO_free(bio);
	if (!x)
		return -1;
	sn = X509_get0_serialNumber(x);
	n = ASN1_STRING_length(sn);
	if (n <= 0 || (size_t) (2 * n + 1) > outsz)
	{
		X509_free(x);
		return -1;
	}
	pn_hex(ASN1_STRING_get0_data(sn), (size_t) n, out, PN_HEX_UPPER);
	X509_free(x);
	return 0;
}

static EVP_PKEY *
load_private(const char *pem)
{
	BIO		   *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY   *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;

	BIO_free(bio);
	return k;
}

/* A throw-away RSA-2048 key that no verifier trusts, as PEM. */
static char *
generate_rsa_pem(void)
{
	EVP_PKEY   *k = EVP_RSA_gen(2048);
	BIO		   *bio = BIO_new(BIO_s_mem());
	char	   *data;
	long		n;
	char	   *pem = NULL;

	if (k && bio && PEM_write_bio_PrivateKey(bio, k, NULL, NULL, 0, NULL, NULL))
	{
		n = BIO_get_mem_data(bio, &data);
		pem = pn_xmemdup(data, (size_t) n);
	}
	BIO_free(bio);
	EVP_PKEY_free(k);
	return pem;
}

/*
 * WeChat Pay's key material: the platform private key, the certificate's
 * serial (or --serial), the APIv3 key; and a serial that is not it, for
 * --bad unknown-serial.  0, or -1 after printing why.
 */
static int
load_wx_keys(struct pn_keys *k, const char *dir, const char *wx_key,
			 const char *wx_cert, const char *serial, const char *apiv3,
			 struct pn_rng *rng)
{
	size_t		len;
	char	   *txt;

	if (!(k->wx_key_pem = read_key_file(dir, wx_key, &len)))
		return -1;
	if (serial)
		snprintf(k->wx_serial, sizeof(k->wx_serial), "%s", serial);
	else
	{
		if (!(txt = read_key_file(dir, wx_cert, &len)))
			return -1;
		if (cert_serial(txt, k->wx_serial, sizeof(k->wx_serial)) != 0)
		{
			pn_log("\"%s\" is not a PEM certificate (give --serial)", wx_cert);
			free(txt);
			return -1;
		}
		free(txt);
	}
	if (!(txt = read_key_file(dir, apiv3, &len)))
		return -1;
	trim_right(txt, &len);
	if (len != 32)
	{
		pn_log("the APIv3 key \"%s\" must be exactly 32 bytes, not %zu",
				apiv3, len);
		free(txt);
		return -1;
	}
	memcpy(k->apiv3, txt, 32);
	free(txt);
	do
		pn_rng_chars(rng, k->alt_serial, 40, PN_HEX_UPPER);
	while (strcmp(k->alt_serial, k->wx_serial) == 0);
	return 0;
}

/*
 * Loads what the configured gateway needs (and nothing else) from dir.
 * need_alt also prepares unconfigured key material for --bad.  Returns 0,
 * or -1 after printing why.
 */
int
pn_keys_load(struct pn_conf *c, const char *dir, const char *wx_key,
			 const char *wx_cert, const char *serial, const char *apiv3,
			 const char *ali_key, const char *stripe_secret, bool need_alt)
{
	struct pn_keys *k = &c->keys;
	size_t		len;
	char	   *txt;
	EVP_PKEY   *probe;
	struct pn_rng rng;

	memset(k, 0, sizeof(*k));
	pn_rng_seed(&rng, c->seed, 0x6b657973, 0, 0, 0);
	if (c->gateway == PN_WXPAY)
	{
		if (load_wx_keys(k, dir, wx_key, wx_cert, serial, apiv3, &rng) != 0)
			return -1;
	}
	else if (c->gateway == PN_ALIPAY)
	{
		if (!(k->ali_key_pem = read_key_file(dir, ali_key, &len)))
			return -1;
		if (need_alt && !(k->alt_key_pem = generate_rsa_pem()))
		{
			pn_log("cannot generate an RSA key");
			return -1;
		}
	}
	else
	{
		if (!(k->stripe_secret = read_key_file(dir, stripe_secret, &len)))
			return -1;
		trim_right(k->stripe_secret, &len);
		if (len == 0)
		{
			pn_log("the Stripe secret \"%s\" is empty", stripe_secret);
			return -1;
		}
		memcpy(k->alt_secret, "whsec_", 6);
		pn_rng_chars(&rng, k->alt_secret + 6, 32, PN_ALNUM);
	}
	/* fail now, not on a signing thread, when a key does not parse */
	txt = c->gateway == PN_WXPAY ? k->wx_key_pem : k->ali_key_pem;
	if (txt)
	{
		if (!(probe = load_private(txt)) || EVP_PKEY_get_base_id(probe) != EVP_PKEY_RSA)
		{
			pn_log("\"%s\" is not a PEM RSA private key",
					c->gateway == PN_WXPAY ? wx_key : ali_key);
			EVP_PKEY_free(probe);
			return -1;
		}
		EVP_PKEY_free(probe);
	}
	return 0;
}

void
pn_keys_free(struct pn_keys *k)
{
	free(k->wx_key_pem);
	free(k->ali_key_pem);
	free(k->alt_key_pem);
	if (k->stripe_secret)
		OPENSSL_cleanse(k->stripe_secret, strlen(k->stripe_secret));
	free(k->stripe_secret);
	OPENSSL_cleanse(k->apiv3, sizeof(k->apiv3));
	memset(k, 0, sizeof(*k));
}

/* Each signing thread parses its own copy of the keys. */
struct pn_signer *
pn_signer_new(const struct pn_conf *c)
{
	struct pn_signer *s = pn_xcalloc(1, sizeof(*s));
	const char *pem = c->gateway == PN_WXPAY ? c->keys.wx_key_pem : c->keys.ali_key_pem;

	if (pem && !(s->key = load_private(pem)))
		ssl_die("load private key");
	if (c->keys.alt_key_pem && !(s->alt = load_private(c->keys.alt_key_pem)))
		ssl_die("load generated key");
	if (!(s->md = EVP_MD_CTX_new()) || !(s->cc = EVP_CIPHER_CTX_new()))
		ssl_die("allocate contexts");
	return s;
}

void
pn_signer_free(struct pn_signer *s)
{
	if (!s)
		return;
	EVP_PKEY_free(s->key);
	EVP_PKEY_free(s->alt);
	EVP_MD_CTX_free(s->md);
	EVP_CIPHER_CTX_free(s->cc);
	free(s);
}

/* ---------------------------------------------------------- primitives */

/* Crypto failures with valid keys cannot happen; stop loudly if one does. */
static _Noreturn void
ssl_die(const char *what)
{
	pn_log("OpenSSL failed to %s", what);
	ERR_print_errors_fp(stderr);
	abort();
}

static void
b64(const unsigned char *in, size_t n, struct pn_buf *out)
{
	size_t		need = 4 * ((n + 2) / 3) + 1;
	unsigned char *tmp = pn_xmalloc(need);
	int			m = EVP_EncodeBlock(tmp, in, (int) n);

	pn_buf_put(out, tmp, (size_t) m);
	free(tmp);
}

/* Appends base64(RSASSA-PKCS1-v1_5(SHA-256, msg)). */
static void
rsa_sign_b64(struct pn_signer *s, EVP_PKEY *key, const void *msg, size_t n,
			 struct pn_buf *out)
{
	unsigned char sig[1024];
	size_t		siglen = sizeof(sig);

	if (EVP_DigestSignInit(s->md, NULL, EVP_sha256(), NULL, key) != 1 ||
		EVP_DigestSign(s->md, sig, &siglen, msg, n) != 1)
		ssl_die("sign");
	EVP_MD_CTX_reset(s->md);
	b64(sig, siglen, out);
}

/* base64(AES-256-GCM(key, nonce, aad, pt) || tag), as WeChat sends. */
static void
gcm_seal_b64(struct pn_signer *s, const unsigned char *key, const char *nonce,
			 const char *aad, const char *pt, size_t ptlen, struct pn_buf *out)
{
	unsigned char *ct = pn_xmalloc(ptlen + GCM_TAG_LEN);
	int			n = 0,
				m = 0;

	if (EVP_EncryptInit_ex(s->cc, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
		EVP_CIPHER_CTX_ctrl(s->cc, EVP_CTRL_GCM_SET_IVLEN, (int) strlen(nonce), NULL) != 1 ||
		EVP_EncryptInit_ex(s->cc, NULL, NULL, key, (const unsigned char *) nonce) != 1 ||
		(aad[0] && EVP_EncryptUpdate(s->cc, NULL, &n, (const unsigned char *) aad,
									 (int) strlen(aad)) != 1) ||
		EVP_EncryptUpdate(s->cc, ct, &n, (const unsigned char *) pt, (int) ptlen) != 1 ||
		EVP_EncryptFinal_ex(s->cc, ct + n, &m) != 1 ||
		EVP_CIPHER_CTX_ctrl(s->cc, EVP_CTRL_GCM_GET_TAG, GCM_TAG_LEN, ct + n + m) != 1)
		ssl_die("encrypt");
	EVP_CIPHER_CTX_reset(s->cc);
	b64(ct, (size_t) (n + m) + GCM_TAG_LEN, out);
	free(ct);
}

/* Lower-case hex HMAC-SHA256; out holds 65 bytes. */
static void
hmac_hex(const char *key, const char *msg, size_t n, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!HMAC(EVP_sha256(), key, (int) strlen(key), (const unsigned char *) msg, n, md, &mdlen))
		ssl_die("compute HMAC");
	pn_hex(md, mdlen, out, PN_HEX_LOWER);
}

/* ------------------------------------------------------------ requests */

static void
add_header(struct pn_req *r, const char *name, const char *value)
{
	if (r->nh == PN_MAX_HDR)
		abort();
	r->hname[r->nh] = pn_xstrdup(name);
	r->hval[r->nh] = pn_xstrdup(value);
	r->nh++;
}

void
pn_req_free(struct pn_req *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->nh; i++)
	{
		free(r->hname[i]);
		free(r->hval[i]);
	}
	free(r->body);
	free(r);
}

/* The order number for an index; the format was validated at start-up. */
void
pn_order_no(const struct pn_conf *c, long long index, char *out, size_t outsz)
{
	snprintf(out, outsz, c->order_fmt, index);
}

/*
 * Characters (digits, or letters and digits) derived from the order number
 * alone, so that every notification about one order (payment, refund, any
 * run) names the same trade.
 */
void
pn_order_chars(const char *order_no, const char *salt, int n, const char *alphabet,
			   char *out)
{
	struct pn_rng r;
	char		key[PN_ID_LEN * 2];

	snprintf(key, sizeof(key), "%s/%s", salt, order_no);
	pn_rng_seed(&r, pn_hash64(key), 0, 0, 0, 0);
	pn_rng_chars(&r, out, (size_t) n, alphabet);
}

/*
 * The agreement an agreement event (and a charge under it) names: the
 * gateway's id (WeChat contract_id, Alipay agreement_no, Stripe sub_...)
 * and the merchant's reference (WeChat out_contract_code, Alipay
 * external_agreement_no; Stripe's is metadata.order_id, the order number),
 * --agreement-id / --agreement-ref, else derived from the order number as
 * the trade ids are, so that signing, charges and the end of one agreement
 * name the same one in every run.
 */
void
pn_agreement(const struct pn_conf *c, const char *order_no, char *id, size_t idsz,
			 char *ref, size_t refsz)
{
	char		d[PN_ID_LEN];

	memset(d, 0, sizeof(d));
	switch (c->gateway)
	{
		case PN_WXPAY:
			memcpy(d, "2026", 4);
			pn_order_chars(order_no, "wx-contract", 14, PN_DIGITS, d + 4);
			break;
		case PN_ALIPAY:
			memcpy(d, "2026", 4);
			pn_order_chars(order_no, "ali-agreement", 16, PN_DIGITS, d + 4);
			break;
		default:
			memcpy(d, "sub_", 4);
			pn_order_chars(order_no, "stripe-sub", 24, PN_ALNUM, d + 4);
			break;
	}
	snprintf(id, idsz, "%s", c->agreement_id ? c->agreement_id : d);
	if (c->agreement_ref)
		snprintf(ref, refsz, "%s", c->agreement_ref);
	else if (c->gateway == PN_STRIPE)
		snprintf(ref, refsz, "%s", order_no);
	else
		snprintf(ref, refsz, "AG%s", order_no);
}

/* Random streams: one per notification, one per delivery of it. */
static void
rng_for(const struct pn_conf *c, struct pn_rng *r, long long index, int bad,
		uint64_t delivery)
{
	uint64_t	sel = ((uint64_t) c->gateway << 16) | ((uint64_t) c->event << 8) | (uint64_t) bad;

	pn_rng_seed(r, c->seed, sel, (uint64_t) index, delivery, 0x706e);
}

/*
 * Builds delivery `attempt` (0 = first) of the notification for order
 * `order_index`; `bad` selects a deliberately broken variant.
 */
struct pn_req *
pn_build(const struct pn_conf *c, struct pn_signer *s, long long order_index,
		 uint32_t attempt, int bad)
{
	struct pn_req *r = pn_xcalloc(1, sizeof(*r));
	time_t		now = c->now_fixed ? c->now_fixed : time(NULL);

	r->order_index = order_index;
	r->attempt = attempt;
	r->bad = bad;
	pn_order_no(c, order_index, r->order_no, sizeof(r->order_no));
	if (bad == PN_BAD_STALE)
		now -= 3600;
	if (c->payload)
	{
		snprintf(r->notify_id, sizeof(r->notify_id), "%s", c->payload->notify_id);
		snprintf(r->order_no, sizeof(r->order_no), "%s", c->payload->order_no);
		switch (c->gateway)
		{
			case PN_WXPAY:
				return build_wx_payload(c, s, r, bad, now);
			case PN_ALIPAY:
				return build_ali_payload(c, s, r, bad);
			default:
				return build_stripe_payload(c, r, bad, now);
		}
	}
	switch (c->gateway)
	{
		case PN_WXPAY:
			return build_wx(c, s, r, bad, now);
		case PN_ALIPAY:
			if (c->event == PN_EV_SIGN || c->event == PN_EV_TERMINATE)
				return build_ali_dut(c, s, r, bad, now);
			return build_ali(c, s, r, bad, now);
		default:
			return build_stripe(c, s, r, bad, now);
	}
}

/* ---------------------------------------------------------------- WeChat */

/* The decrypted resource: a Transaction or a Refund, compact JSON. */
static void
wx_plaintext(const struct pn_conf *c, const struct pn_req *r, struct pn_buf *out)
{
	struct pn_json j;
	char		txid[40],
				refund_id[40],
				openid[32],
				t[40],
				refund_no[PN_ID_LEN + 4];
	bool		pay = c->event != PN_EV_REFUND;
	char		contract[PN_ID_LEN],
				ref[PN_ID_LEN];

	memcpy(txid, "4200000000", 10);
	pn_order_chars(r->order_no, "wx-transaction", 18, PN_DIGITS, txid + 10);
	memcpy(openid, "oTEST", 5);
	pn_order_chars(r->order_no, "wx-openid", 22, PN_ALNUM, openid + 5);
	pn_fmt_beijing(pay ? c->epoch - 1 : c->epoch, "%Y-%m-%dT%H:%M:%S+08:00", t, sizeof(t));
	pn_json_init(&j, out, false);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "mchid", c->mchid);
	if (pay)
		pn_json_str(&j, "appid", c->appid);
	pn_json_str(&j, "out_trade_no", r->order_no);
	pn_json_str(&j, "transaction_id", txid);
	if (pay)
	{
		pn_json_str(&j, "trade_type", c->event == PN_EV_CHARGE ? "PAP" : "JSAPI");
		if (c->event == PN_EV_CHARGE)
		{
			pn_agreement(c, r->order_no, contract, sizeof(contract), ref, sizeof(ref));
			pn_json_str(&j, "contract_id", contract);
		}
		pn_json_str(&j, "trade_state", "SUCCESS");
		pn_json_str(&j, "trade_state_desc", "支付成功");
		pn_json_str(&j, "bank_type", "OTHERS");
		pn_json_str(&j, "attach", "");
		pn_json_str(&j, "success_time", t);
		pn_json_open(&j, "payer", '{');
		pn_json_str(&j, "openid", openid);
		pn_json_close(&j, '}');
		pn_json_open(&j, "amount", '{');
		pn_json_int(&j, "total", c->amount);
		pn_json_int(&j, "payer_total", c->amount);
		pn_json_str(&j, "currency", c->currency);
		pn_json_str(&j, "payer_currency", c->currency);
		pn_json_close(&j, '}');
	}
	else
	{
		memcpy(refund_id, "50300000002", 11);
		pn_order_chars(r->order_no, "wx-refund", 18, PN_DIGITS, refund_id + 11);
		snprintf(refund_no, sizeof(refund_no), "RF%s", r->order_no);
		pn_json_str(&j, "out_refund_no", refund_no);
		pn_json_str(&j, "refund_id", refund_id);
		pn_json_str(&j, "refund_status", "SUCCESS");
		pn_json_str(&j, "success_time", t);
		pn_json_str(&j, "user_received_account", "支付用户零钱");
		pn_json_open(&j, "amount", '{');
		pn_json_int(&j, "total", c->amount);
		pn_json_int(&j, "refund", c->refund_amount);
		pn_json_int(&j, "payer_total", c->amount);
		pn_json_int(&j, "payer_refund", c->refund_amount);
		pn_json_close(&j, '}');
	}
	pn_json_close(&j, '}');
}

/*
 * An entrusted-payment (委托代扣) agreement's resource, signed or ended:
 * compact JSON, the fields of WeChat's 签约、解约结果通知.
 */
static void
wx_entrust_plaintext(const struct pn_conf *c, const struct pn_req *r, struct pn_buf *out)
{
	struct pn_json j;
	char		contract[PN_ID_LEN],
				ref[PN_ID_LEN],
				openid[32],
				signed_at[40],
				ended_at[40];
	bool		end = c->event == PN_EV_TERMINATE;

	pn_agreement(c, r->order_no, contract, sizeof(contract), ref, sizeof(ref));
	memcpy(openid, "oTEST", 5);
	pn_order_chars(r->order_no, "wx-openid", 22, PN_ALNUM, openid + 5);
	pn_fmt_beijing(end ? c->epoch - 86400 : c->epoch - 1, "%Y-%m-%dT%H:%M:%S+08:00",
				   signed_at, sizeof(signed_at));
	pn_fmt_beijing(c->epoch - 1, "%Y-%m-%dT%H:%M:%S+08:00", ended_at, sizeof(ended_at));
	pn_json_init(&j, out, false);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "mchid", c->mchid);
	pn_json_str(&j, "appid", c->appid);
	pn_json_str(&j, "contract_id", contract);
	pn_json_str(&j, "out_contract_code", ref);
	pn_json_int(&j, "plan_id", 12535);
	pn_json_str(&j, "openid", openid);
	pn_json_str(&j, "contract_state", end ? "TERMINATED" : "SIGNED");
	pn_json_str(&j, "contract_signed_time", signed_at);
	if (end)
	{
		pn_json_open(&j, "contract_terminate_info", '{');
		pn_json_str(&j, "contract_terminated_time", ended_at);
		pn_json_str(&j, "contract_termination_mode", "USER_TERMINATE");
		pn_json_close(&j, '}');
	}
	pn_json_close(&j, '}');
}

/* A WeChat event's event_type, summary and resource type (= associated data). */
struct wx_kind
{
	const char *event_type;
	const char *summary;
	const char *original_type;
};

static const struct wx_kind wx_kinds[PN_EV_COUNT] = {
	[PN_EV_PAY] = {"TRANSACTION.SUCCESS", "支付成功", "transaction"},
	[PN_EV_REFUND] = {"REFUND.SUCCESS", "退款成功", "refund"},
	[PN_EV_SIGN] = {"ENTRUST.SIGN", "签约成功", "entrust"},
	[PN_EV_TERMINATE] = {"ENTRUST.TERMINATE", "解约成功", "entrust"},
	[PN_EV_CHARGE] = {"TRANSACTION.SUCCESS", "支付成功", "transaction"},
};

/* The notification's envelope around the sealed resource. */
static void
wx_envelope(struct pn_buf *body, const struct wx_kind *kind, const char *uuid, const char *created,
			const char *ciphertext, const char *aad, const char *gnonce)
{
	struct pn_json j;

	pn_json_init(&j, body, false);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "id", uuid);
	pn_json_str(&j, "create_time", created);
	pn_json_str(&j, "resource_type", "encrypt-resource");
	pn_json_str(&j, "event_type", kind->event_type);
	pn_json_str(&j, "summary", kind->summary);
	pn_json_open(&j, "resource", '{');
	pn_json_str(&j, "original_type", kind->original_type);
	pn_json_str(&j, "algorithm", "AEAD_AES_256_GCM");
	pn_json_str(&j, "ciphertext", ciphertext);
	pn_json_str(&j, "associated_data", aad);
	pn_json_str(&j, "nonce", gnonce);
	pn_json_close(&j, '}');
	pn_json_close(&j, '}');
}

/*
 * Signs delivery r->attempt of a WeChat body over "ts\nnonce\nbody\n" and
 * sets the headers; takes the body.
 */
static struct pn_req *
wx_finish(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
		  int bad, time_t now, struct pn_buf *body)
{
	struct pn_rng dr;
	char		hnonce[40],
				reqid[40],
				ts[32];
	struct pn_buf msg,
				sig;
	char	   *p;

	rng_for(c, &dr, r->order_index, bad, (uint64_t) r->attempt + 1);
	pn_rng_chars(&dr, hnonce, 32, PN_ALNUM);
	memcpy(reqid, "08", 2);
	pn_rng_chars(&dr, reqid + 2, 30, PN_HEX_UPPER);
	snprintf(ts, sizeof(ts), "%lld", (long long) now);
	pn_buf_init(&msg);
	pn_buf_init(&sig);
	pn_buf_printf(&msg, "%s\n%s\n", ts, hnonce);
	pn_buf_put(&msg, body->data, body->len);
	pn_buf_putc(&msg, '\n');
	if (bad == PN_BAD_PROBE)
		pn_buf_puts(&sig, "WECHATPAY/SIGNTEST/");
	rsa_sign_b64(s, s->key, msg.data, msg.len, &sig);
	/* tampered: one field changes after signing (+08:00 -> +09:00) */
	if (bad == PN_BAD_TAMPERED && (p = strstr(body->data, "+08:00")) != NULL)
		p[2] = '9';

	add_header(r, "Content-Type", "application/json");
	add_header(r, "Request-ID", reqid);
	add_header(r, "Wechatpay-Nonce", hnonce);
	add_header(r, "Wechatpay-Serial",
			   bad == PN_BAD_UNKNOWN_KEY ? c->keys.alt_serial : c->keys.wx_serial);
	add_header(r, "Wechatpay-Signature", sig.data);
	add_header(r, "Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048");
	add_header(r, "Wechatpay-Timestamp", ts);
	r->body_len = body->len;
	r->body = pn_buf_steal(body);
	pn_buf_free(&msg);
	pn_buf_free(&sig);
	return r;
}

/* Envelope, then headers signed over "ts\nnonce\nbody\n". */
static struct pn_req *
build_wx(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
		 int bad, time_t now)
{
	struct pn_rng nr;
	char		uuid[40],
				gnonce[16],
				created[40];
	struct pn_buf pt,
				ct,
				body;
	const struct wx_kind *kind = &wx_kinds[c->event];
	const char *aad = kind->original_type;

	rng_for(c, &nr, r->order_index, bad, 0);
	pn_rng_chars(&nr, uuid, 36, PN_HEX_LOWER);
	uuid[8] = uuid[13] = uuid[18] = uuid[23] = '-';
	uuid[14] = '4';
	uuid[19] = '8';
	pn_rng_chars(&nr, gnonce, 12, PN_ALNUM);
	pn_fmt_beijing(c->epoch, "%Y-%m-%dT%H:%M:%S+08:00", created, sizeof(created));
	snprintf(r->notify_id, sizeof(r->notify_id), "%s", uuid);

	pn_buf_init(&pt);
	pn_buf_init(&ct);
	pn_buf_init(&body);
	if (c->event == PN_EV_SIGN || c->event == PN_EV_TERMINATE)
		wx_entrust_plaintext(c, r, &pt);
	else
		wx_plaintext(c, r, &pt);
	gcm_seal_b64(s, c->keys.apiv3, gnonce, aad, pt.data, pt.len, &ct);
	wx_envelope(&body, kind, uuid, created, ct.data, aad, gnonce);
	pn_buf_free(&pt);
	pn_buf_free(&ct);
	return wx_finish(c, s, r, bad, now, &body);
}

/*
 * --payload: the file's envelope with its plaintext sealed into
 * "ciphertext" in place (nonce and associated_data as the file says).
 */
static struct pn_req *
build_wx_payload(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
				 int bad, time_t now)
{
	const struct pn_payload *pl = c->payload;
	struct pn_buf ct,
				body;

	pn_buf_init(&ct);
	pn_buf_init(&body);
	gcm_seal_b64(s, c->keys.apiv3, pl->nonce, pl->aad, pl->plaintext, pl->plaintext_len, &ct);
	pn_buf_put(&body, pl->head, pl->head_len);
	pn_buf_puts(&body, "\"ciphertext\":\"");
	pn_buf_put(&body, ct.data, ct.len);
	pn_buf_putc(&body, '"');
	pn_buf_put(&body, pl->tail, pl->tail_len);
	pn_buf_free(&ct);
	return wx_finish(c, s, r, bad, now, &body);
}

/* ---------------------------------------------------------------- Alipay */

static int
kv_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kv *) a)->k, ((const struct kv *) b)->k);
}

/* Percent-encoding of Python's quote_plus(safe=""): space becomes '+'. */
static void
form_escape(struct pn_buf *b, const char *s)
{
	for (; *s; s++)
	{
		unsigned char ch = (unsigned char) *s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			(ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-' || ch == '~')
			pn_buf_putc(b, (char) ch);
		else if (ch == ' ')
			pn_buf_putc(b, '+');
		else
			pn_buf_printf(b, "%%%02X", ch);
	}
}

static void
kv_add(struct kv *f, int *n, const char *k, const char *v)
{
	f[*n].k = k;
	f[*n].v = pn_xstrdup(v);
	(*n)++;
}

/* A refund's fields (gmt_close too when it closes the trade). */
static void
ali_refund_fields(const struct pn_conf *c, const struct pn_req *r, struct pn_rng *nr,
				  bool closed, struct kv *f, int *n)
{
	char		gmt_refund[40],
				refund_yuan[32],
				refund_no[PN_ID_LEN + 4];

	pn_fmt_yuan(c->refund_amount, refund_yuan, sizeof(refund_yuan));
	pn_fmt_beijing(c->epoch, "%Y-%m-%d %H:%M:%S", gmt_refund, sizeof(gmt_refund));
	if (closed)
		kv_add(f, n, "gmt_close", gmt_refund);
	snprintf(gmt_refund + strlen(gmt_refund), sizeof(gmt_refund) - strlen(gmt_refund),
			 ".%03d", (int) pn_rng_below(nr, 1000));
	snprintf(refund_no, sizeof(refund_no), "RF%s", r->order_no);
	kv_add(f, n, "refund_fee", refund_yuan);
	kv_add(f, n, "out_biz_no", refund_no);
	kv_add(f, n, "gmt_refund", gmt_refund);
}

/* The content Alipay signs: sorted k=v without sign, sign_type, empty values. */
static void
ali_content(const struct kv *f, int n, struct pn_buf *content)
{
	struct kv	sorted[40];

	memcpy(sorted, f, sizeof(struct kv) * (size_t) n);
	qsort(sorted, (size_t) n, sizeof(struct kv), kv_cmp);
	pn_buf_init(content);
	for (int i = 0; i < n; i++)
	{
		if (!strcmp(sorted[i].k, "sign") || !strcmp(sorted[i].k, "sign_type") || !sorted[i].v[0])
			continue;
		if (content->len)
			pn_buf_putc(content, '&');
		pn_buf_printf(content, "%s=%s", sorted[i].k, sorted[i].v);
	}
}

/*
 * The wire form in field order; tampered: the amount grows by one fen (an
 * agreement notice, which has none: its agreement_no gains a digit).
 */
static void
ali_form(const struct pn_conf *c, const struct kv *f, int n, int bad, struct pn_buf *body)
{
	char		yuan[32];

	pn_buf_init(body);
	for (int i = 0; i < n; i++)
	{
		if (i)
			pn_buf_putc(body, '&');
		pn_buf_printf(body, "%s=", f[i].k);
		if (bad == PN_BAD_TAMPERED && !strcmp(f[i].k, "total_amount"))
		{
			pn_fmt_yuan(c->amount + 1, yuan, sizeof(yuan));
			form_escape(body, yuan);
		}
		else if (bad == PN_BAD_TAMPERED && !strcmp(f[i].k, "agreement_no"))
		{
			form_escape(body, f[i].v);
			pn_buf_putc(body, '0');
		}
		else
			form_escape(body, f[i].v);
	}
}

/*
 * Form fields in Alipay's (unsorted) wire order; the signature covers the
 * sorted k=v pairs without sign, sign_type and empty values.
 */
static struct pn_req *
build_ali(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
		  int bad, time_t now)
{
	struct kv	f[40];
	int			n = 0,
				sign_at;
	struct pn_rng nr;
	char		gmt_create[32],
				gmt_payment[32],
				notify_time[32],
				nid[40],
				trade_no[40],
				buyer[24],
				yuan[32],
				fund[96];
	bool		pay = c->event != PN_EV_REFUND;
	bool		closed = !pay && c->refund_amount >= c->amount;

	rng_for(c, &nr, r->order_index, bad, 0);
	pn_rng_chars(&nr, nid, 34, PN_DIGITS);
	snprintf(r->notify_id, sizeof(r->notify_id), "%s", nid);
	memcpy(trade_no, "2026010122001", 13);
	pn_order_chars(r->order_no, "ali-trade", 15, PN_DIGITS, trade_no + 13);
	memcpy(buyer, "2088", 4);
	pn_order_chars(r->order_no, "ali-buyer", 12, PN_DIGITS, buyer + 4);
	pn_fmt_beijing(c->epoch - 6, "%Y-%m-%d %H:%M:%S", gmt_create, sizeof(gmt_create));
	pn_fmt_beijing(c->epoch - 1, "%Y-%m-%d %H:%M:%S", gmt_payment, sizeof(gmt_payment));
	pn_fmt_beijing(now, "%Y-%m-%d %H:%M:%S", notify_time, sizeof(notify_time));
	pn_fmt_yuan(c->amount, yuan, sizeof(yuan));
	snprintf(fund, sizeof(fund), "[{\"amount\":\"%s\",\"fundChannel\":\"ALIPAYACCOUNT\"}]", yuan);

	kv_add(f, &n, "gmt_create", gmt_create);
	kv_add(f, &n, "charset", "utf-8");
	kv_add(f, &n, "gmt_payment", gmt_payment);
	kv_add(f, &n, "notify_time", notify_time);
	kv_add(f, &n, "subject", "paynotify 测试商品 A+B 100%");
	sign_at = n;
	kv_add(f, &n, "sign", "");
	kv_add(f, &n, "buyer_id", buyer);
	kv_add(f, &n, "invoice_amount", yuan);
	kv_add(f, &n, "version", "1.0");
	kv_add(f, &n, "notify_id", nid);
	kv_add(f, &n, "fund_bill_list", fund);
	kv_add(f, &n, "notify_type", "trade_status_sync");
	kv_add(f, &n, "out_trade_no", r->order_no);
	kv_add(f, &n, "total_amount", yuan);
	kv_add(f, &n, "trade_status", closed ? "TRADE_CLOSED" : "TRADE_SUCCESS");
	kv_add(f, &n, "trade_no", trade_no);
	kv_add(f, &n, "auth_app_id", c->ali_app_id);
	kv_add(f, &n, "receipt_amount", yuan);
	kv_add(f, &n, "point_amount", "0.00");
	kv_add(f, &n, "app_id", c->ali_app_id);
	kv_add(f, &n, "buyer_pay_amount", yuan);
	kv_add(f, &n, "sign_type", "RSA2");
	kv_add(f, &n, "seller_id", c->seller_id);
	if (!pay)
		ali_refund_fields(c, r, &nr, closed, f, &n);

	/* signed, then the wire form; tampered: the amount grows by one fen */
	return ali_finish(c, s, r, bad, f, n, sign_at);
}

/* Signs fields f (sign at sign_at) as Alipay does and sets r's body and headers. */
static struct pn_req *
ali_finish(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r, int bad,
		   struct kv *f, int n, int sign_at)
{
	struct pn_buf content,
				sig,
				body;

	ali_content(f, n, &content);
	pn_buf_init(&sig);
	rsa_sign_b64(s, bad == PN_BAD_UNKNOWN_KEY ? s->alt : s->key, content.data, content.len, &sig);
	free(f[sign_at].v);
	f[sign_at].v = pn_buf_steal(&sig);
	ali_form(c, f, n, bad, &body);
	add_header(r, "Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
	r->body_len = body.len;
	r->body = pn_buf_steal(&body);
	for (int i = 0; i < n; i++)
		free(f[i].v);
	pn_buf_free(&content);
	return r;
}

/*
 * An agreement notice of 商家扣款 / 周期扣款: dut_user_sign (status NORMAL)
 * or dut_user_unsign (status UNSIGN), fields in the order Alipay sends
 * them, signed like a trade notice.
 */
static struct pn_req *
build_ali_dut(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
			  int bad, time_t now)
{
	struct kv	f[40];
	int			n = 0,
				sign_at;
	struct pn_rng nr;
	char		nid[40],
				user[24],
				agreement[PN_ID_LEN],
				ref[PN_ID_LEN],
				notify_time[32],
				signed_at[32],
				ended_at[32];
	bool		end = c->event == PN_EV_TERMINATE;

	rng_for(c, &nr, r->order_index, bad, 0);
	pn_rng_chars(&nr, nid, 34, PN_DIGITS);
	snprintf(r->notify_id, sizeof(r->notify_id), "%s", nid);
	memcpy(user, "2088", 4);
	pn_order_chars(r->order_no, "ali-buyer", 12, PN_DIGITS, user + 4);
	pn_agreement(c, r->order_no, agreement, sizeof(agreement), ref, sizeof(ref));
	pn_fmt_beijing(now, "%Y-%m-%d %H:%M:%S", notify_time, sizeof(notify_time));
	pn_fmt_beijing(end ? c->epoch - 86400 : c->epoch - 1, "%Y-%m-%d %H:%M:%S", signed_at, sizeof(signed_at));
	pn_fmt_beijing(c->epoch - 1, "%Y-%m-%d %H:%M:%S", ended_at, sizeof(ended_at));

	kv_add(f, &n, "charset", "utf-8");
	kv_add(f, &n, "notify_time", notify_time);
	if (end)
		kv_add(f, &n, "unsign_time", ended_at);
	kv_add(f, &n, "alipay_user_id", user);
	sign_at = n;
	kv_add(f, &n, "sign", "");
	kv_add(f, &n, "external_agreement_no", ref);
	kv_add(f, &n, "version", "1.0");
	if (!end)
		kv_add(f, &n, "sign_time", signed_at);
	kv_add(f, &n, "notify_id", nid);
	kv_add(f, &n, "notify_type", end ? "dut_user_unsign" : "dut_user_sign");
	kv_add(f, &n, "agreement_no", agreement);
	if (!end)
		kv_add(f, &n, "invalid_time", "2115-02-01 00:00:00");
	kv_add(f, &n, "auth_app_id", c->ali_app_id);
	kv_add(f, &n, "personal_product_code", "CYCLE_PAY_AUTH_P");
	if (!end)
		kv_add(f, &n, "valid_time", signed_at);
	kv_add(f, &n, "app_id", c->ali_app_id);
	kv_add(f, &n, "sign_type", "RSA2");
	kv_add(f, &n, "sign_scene", "INDUSTRY|SOCIALIZATION");
	kv_add(f, &n, "status", end ? "UNSIGN" : "NORMAL");
	kv_add(f, &n, "alipay_logon_id", "138******00");
	return ali_finish(c, s, r, bad, f, n, sign_at);
}

/*
 * --payload: the file's parameters in its order (values already in its
 * charset), sign appended; notify_time is the file's.
 */
static struct pn_req *
build_ali_payload(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
				  int bad)
{
	const struct pn_payload *pl = c->payload;
	struct kv	f[PN_MAX_PARAMS + 1];
	int			n = 0;
	struct pn_buf content,
				sig,
				body;

	for (int i = 0; i < pl->n_params; i++)
		kv_add(f, &n, pl->pkey[i], pl->pval[i]);
	ali_content(f, n, &content);
	pn_buf_init(&sig);
	rsa_sign_b64(s, bad == PN_BAD_UNKNOWN_KEY ? s->alt : s->key, content.data, content.len, &sig);
	f[n].k = "sign";
	f[n++].v = pn_buf_steal(&sig);
	ali_form(c, f, n, PN_BAD_NONE, &body);
	add_header(r, "Content-Type", pl->content_type);
	r->body_len = body.len;
	r->body = pn_buf_steal(&body);
	for (int i = 0; i < n; i++)
		free(f[i].v);
	pn_buf_free(&content);
	return r;
}

/* ---------------------------------------------------------------- Stripe */

/* An event's envelope up to its data.object's members (2-space indentation). */
static void
stripe_open(struct pn_json *j, const struct pn_conf *c, const char *evt, struct pn_buf *out)
{
	pn_json_init(j, out, true);
	pn_json_open(j, NULL, '{');
	pn_json_str(j, "id", evt);
	pn_json_str(j, "object", "event");
	pn_json_str(j, "api_version", "2025-03-31.basil");
	pn_json_int(j, "created", (long long) c->epoch);
	pn_json_open(j, "data", '{');
	pn_json_open(j, "object", '{');
}

/* Closes data.object (the caller adds previous_attributes), then the envelope. */
static void
stripe_close(struct pn_json *j, const struct pn_conf *c, const char *type)
{
	pn_json_close(j, '}');
	pn_json_bool(j, "livemode", c->livemode);
	pn_json_int(j, "pending_webhooks", 1);
	pn_json_open(j, "request", '{');
	pn_json_null(j, "id");
	pn_json_null(j, "idempotency_key");
	pn_json_close(j, '}');
	pn_json_str(j, "type", type);
	pn_json_close(j, '}');
}

/* A payment intent (pay) or a refunded charge (refund), as Stripe sends it. */
static void
stripe_body(const struct pn_conf *c, const struct pn_req *r, const char *evt,
			long long delta, struct pn_buf *out)
{
	struct pn_json j;
	char		pi[32],
				ch[32];
	bool		pay = c->event == PN_EV_PAY;

	memcpy(pi, "pi_", 3);
	pn_order_chars(r->order_no, "stripe-pi", 24, PN_ALNUM, pi + 3);
	memcpy(ch, "ch_", 3);
	pn_order_chars(r->order_no, "stripe-ch", 24, PN_ALNUM, ch + 3);
	stripe_open(&j, c, evt, out);
	pn_json_str(&j, "id", pay ? pi : ch);
	pn_json_str(&j, "object", pay ? "payment_intent" : "charge");
	pn_json_int(&j, "amount", c->amount + delta);
	if (pay)
		pn_json_int(&j, "amount_received", c->amount + delta);
	else
		pn_json_int(&j, "amount_refunded", c->refund_amount);
	pn_json_str(&j, "currency", c->currency);
	if (pay)
		pn_json_str(&j, "latest_charge", ch);
	pn_json_bool(&j, "livemode", c->livemode);
	pn_json_open(&j, "metadata", '{');
	pn_json_str(&j, "order_id", r->order_no);
	pn_json_close(&j, '}');
	if (!pay)
	{
		pn_json_str(&j, "payment_intent", pi);
		pn_json_bool(&j, "refunded", c->refund_amount >= c->amount);
	}
	pn_json_str(&j, "status", "succeeded");
	pn_json_close(&j, '}');
	if (!pay)
	{
		pn_json_open(&j, "previous_attributes", '{');
		pn_json_int(&j, "amount_refunded", 0);
		pn_json_close(&j, '}');
	}
	stripe_close(&j, c, pay ? "payment_intent.succeeded" : "charge.refunded");
}

/*
 * A subscription (the agreement) made active or canceled:
 * customer.subscription.created or customer.subscription.deleted.  Its
 * metadata.order_id is the order number; tampered moves "created".
 */
static void
stripe_subscription_body(const struct pn_conf *c, const struct pn_req *r, const char *evt,
						 long long delta, struct pn_buf *out)
{
	struct pn_json j;
	char		sub[PN_ID_LEN],
				ref[PN_ID_LEN],
				cus[32];
	bool		end = c->event == PN_EV_TERMINATE;

	pn_agreement(c, r->order_no, sub, sizeof(sub), ref, sizeof(ref));
	memcpy(cus, "cus_", 4);
	pn_order_chars(r->order_no, "stripe-cus", 14, PN_ALNUM, cus + 4);
	stripe_open(&j, c, evt, out);
	pn_json_str(&j, "id", sub);
	pn_json_str(&j, "object", "subscription");
	if (end)
	{
		pn_json_int(&j, "canceled_at", (long long) c->epoch - 1);
		pn_json_open(&j, "cancellation_details", '{');
		pn_json_null(&j, "comment");
		pn_json_null(&j, "feedback");
		pn_json_str(&j, "reason", "cancellation_requested");
		pn_json_close(&j, '}');
	}
	else
		pn_json_null(&j, "canceled_at");
	pn_json_bool(&j, "cancel_at_period_end", false);
	pn_json_str(&j, "collection_method", "charge_automatically");
	pn_json_int(&j, "created", (long long) c->epoch - (end ? 86400 : 1) + delta);
	pn_json_str(&j, "currency", c->currency);
	pn_json_str(&j, "customer", cus);
	if (end)
		pn_json_int(&j, "ended_at", (long long) c->epoch - 1);
	else
		pn_json_null(&j, "ended_at");
	pn_json_null(&j, "latest_invoice");
	pn_json_bool(&j, "livemode", c->livemode);
	pn_json_open(&j, "metadata", '{');
	pn_json_str(&j, "order_id", ref);
	pn_json_close(&j, '}');
	pn_json_int(&j, "start_date", (long long) c->epoch - (end ? 86400 : 1));
	pn_json_str(&j, "status", end ? "canceled" : "active");
	pn_json_close(&j, '}');
	stripe_close(&j, c, end ? "customer.subscription.deleted" : "customer.subscription.created");
}

/*
 * A subscription cycle's invoice (a renewal), paid (invoice.paid) or not
 * (invoice.payment_failed), in the 2025-03-31.basil shape: no
 * payment_intent, the order in the invoice's own metadata (order_id, as
 * the merchant sets it on the period's draft), the subscription and its
 * metadata (order_id: the agreement's reference) under
 * parent.subscription_details.  Tampered adds one to the amounts.
 */
static void
stripe_invoice_body(const struct pn_conf *c, const struct pn_req *r, const char *evt,
					long long delta, struct pn_buf *out)
{
	struct pn_json j;
	char		inv[32],
				cus[32],
				sub[PN_ID_LEN],
				ref[PN_ID_LEN];
	bool		paid = c->event == PN_EV_CHARGE;
	long long	amount = c->amount + delta;

	pn_agreement(c, r->order_no, sub, sizeof(sub), ref, sizeof(ref));
	memcpy(inv, "in_", 3);
	pn_order_chars(r->order_no, "stripe-in", 24, PN_ALNUM, inv + 3);
	memcpy(cus, "cus_", 4);
	pn_order_chars(r->order_no, "stripe-cus", 14, PN_ALNUM, cus + 4);
	stripe_open(&j, c, evt, out);
	pn_json_str(&j, "id", inv);
	pn_json_str(&j, "object", "invoice");
	pn_json_int(&j, "amount_due", amount);
	pn_json_int(&j, "amount_paid", paid ? amount : 0);
	pn_json_int(&j, "amount_remaining", paid ? 0 : amount);
	pn_json_int(&j, "attempt_count", 1);
	pn_json_bool(&j, "attempted", true);
	pn_json_str(&j, "billing_reason", "subscription_cycle");
	pn_json_str(&j, "collection_method", "charge_automatically");
	pn_json_int(&j, "created", (long long) c->epoch - 1);
	pn_json_str(&j, "currency", c->currency);
	pn_json_str(&j, "customer", cus);
	pn_json_bool(&j, "livemode", c->livemode);
	pn_json_open(&j, "metadata", '{');
	pn_json_str(&j, "order_id", r->order_no);
	pn_json_close(&j, '}');
	if (paid)
		pn_json_null(&j, "next_payment_attempt");
	else
		pn_json_int(&j, "next_payment_attempt", (long long) c->epoch + 86400);
	pn_json_open(&j, "parent", '{');
	pn_json_null(&j, "quote_details");
	pn_json_open(&j, "subscription_details", '{');
	pn_json_open(&j, "metadata", '{');
	pn_json_str(&j, "order_id", ref);
	pn_json_close(&j, '}');
	pn_json_str(&j, "subscription", sub);
	pn_json_close(&j, '}');
	pn_json_str(&j, "type", "subscription_details");
	pn_json_close(&j, '}');
	pn_json_str(&j, "status", paid ? "paid" : "open");
	pn_json_open(&j, "status_transitions", '{');
	pn_json_int(&j, "finalized_at", (long long) c->epoch - 1);
	pn_json_null(&j, "marked_uncollectible_at");
	if (paid)
		pn_json_int(&j, "paid_at", (long long) c->epoch - 1);
	else
		pn_json_null(&j, "paid_at");
	pn_json_null(&j, "voided_at");
	pn_json_close(&j, '}');
	pn_json_int(&j, "total", amount);
	pn_json_close(&j, '}');
	stripe_close(&j, c, paid ? "invoice.paid" : "invoice.payment_failed");
}

/* The body of the chosen event; delta = 1 for a tampered copy. */
static void
stripe_event(const struct pn_conf *c, const struct pn_req *r, const char *evt,
			 long long delta, struct pn_buf *out)
{
	switch (c->event)
	{
		case PN_EV_SIGN:
		case PN_EV_TERMINATE:
			stripe_subscription_body(c, r, evt, delta, out);
			break;
		case PN_EV_CHARGE:
		case PN_EV_CHARGE_FAILED:
			stripe_invoice_body(c, r, evt, delta, out);
			break;
		default:
			stripe_body(c, r, evt, delta, out);
			break;
	}
}

/* Stripe-Signature: t=<ts>,v1=hex(HMAC-SHA256(whole whsec_ secret, "t.body")). */
static void
stripe_sign(const struct pn_conf *c, struct pn_req *r, int bad, time_t now,
			const char *body, size_t len)
{
	char		mac[80],
				hdr[128];
	struct pn_buf msg;

	pn_buf_init(&msg);
	pn_buf_printf(&msg, "%lld.", (long long) now);
	pn_buf_put(&msg, body, len);
	hmac_hex(bad == PN_BAD_UNKNOWN_KEY ? c->keys.alt_secret : c->keys.stripe_secret,
			 msg.data, msg.len, mac);
	snprintf(hdr, sizeof(hdr), "t=%lld,v1=%s", (long long) now, mac);
	add_header(r, "Content-Type", "application/json; charset=utf-8");
	add_header(r, "Stripe-Signature", hdr);
	pn_buf_free(&msg);
}

static struct pn_req *
build_stripe(const struct pn_conf *c, struct pn_signer *s, struct pn_req *r,
			 int bad, time_t now)
{
	struct pn_rng nr;
	char		evt[40];
	struct pn_buf body;

	(void) s;
	rng_for(c, &nr, r->order_index, bad, 0);
	memcpy(evt, "evt_", 4);
	pn_rng_chars(&nr, evt + 4, 24, PN_ALNUM);
	snprintf(r->notify_id, sizeof(r->notify_id), "%s", evt);
	pn_buf_init(&body);
	stripe_event(c, r, evt, 0, &body);
	stripe_sign(c, r, bad, now, body.data, body.len);
	if (bad == PN_BAD_TAMPERED)
	{
		pn_buf_reset(&body);
		stripe_event(c, r, evt, 1, &body);
	}
	r->body_len = body.len;
	r->body = pn_buf_steal(&body);
	return r;
}

/* --payload: the file's event, byte for byte. */
static struct pn_req *
build_stripe_payload(const struct pn_conf *c, struct pn_req *r, int bad, time_t now)
{
	const struct pn_payload *pl = c->payload;

	stripe_sign(c, r, bad, now, pl->body, pl->body_len);
	r->body = pn_xmemdup(pl->body, pl->body_len);
	r->body_len = pl->body_len;
	return r;
}

/* ------------------------------------------------------------ --sales */

/*
 * What the notification for r says was sold, from the derivations the
 * builders above sign: the same ids, amounts and success time.
 */
void
pn_sale_of(const struct pn_conf *c, const struct pn_req *r, struct pn_sale *out)
{
	bool		pay = c->event == PN_EV_PAY;

	memset(out, 0, sizeof(*out));
	out->gateway = c->gateway;
	out->event = c->event;
	snprintf(out->order_no, sizeof(out->order_no), "%s", r->order_no);
	snprintf(out->notify_id, sizeof(out->notify_id), "%s", r->notify_id);
	snprintf(out->currency, sizeof(out->currency), "%s", c->currency);
	out->amount = c->amount;
	out->refund_amount = pay ? 0 : c->refund_amount;
	strcpy(out->refund_id, "-");
	strcpy(out->out_refund_no, "-");
	strcpy(out->merchant, "-");
	strcpy(out->app, "-");
	if (!pay)
		snprintf(out->out_refund_no, sizeof(out->out_refund_no), "RF%.60s", r->order_no);
	switch (c->gateway)
	{
		case PN_WXPAY:
			memcpy(out->trade_no, "4200000000", 10);
			pn_order_chars(r->order_no, "wx-transaction", 18, PN_DIGITS, out->trade_no + 10);
			memcpy(out->payer, "oTEST", 5);
			pn_order_chars(r->order_no, "wx-openid", 22, PN_ALNUM, out->payer + 5);
			if (!pay)
			{
				memcpy(out->refund_id, "50300000002", 11);
				pn_order_chars(r->order_no, "wx-refund", 18, PN_DIGITS, out->refund_id + 11);
			}
			snprintf(out->merchant, sizeof(out->merchant), "%s", c->mchid);
			snprintf(out->app, sizeof(out->app), "%s", c->appid);
			out->time = (long long) (pay ? c->epoch - 1 : c->epoch);
			break;
		case PN_ALIPAY:
			memcpy(out->trade_no, "2026010122001", 13);
			pn_order_chars(r->order_no, "ali-trade", 15, PN_DIGITS, out->trade_no + 13);
			memcpy(out->payer, "2088", 4);
			pn_order_chars(r->order_no, "ali-buyer", 12, PN_DIGITS, out->payer + 4);
			if (!pay)
				snprintf(out->refund_id, sizeof(out->refund_id), "%s", out->out_refund_no);
			snprintf(out->merchant, sizeof(out->merchant), "%s", c->seller_id);
			snprintf(out->app, sizeof(out->app), "%s", c->ali_app_id);
			out->time = (long long) (pay ? c->epoch - 1 : c->epoch);
			break;
		default:
			memcpy(out->trade_no, "pi_", 3);
			pn_order_chars(r->order_no, "stripe-pi", 24, PN_ALNUM, out->trade_no + 3);
			memcpy(out->payer, "ch_", 3);
			pn_order_chars(r->order_no, "stripe-ch", 24, PN_ALNUM, out->payer + 3);
			if (!pay)
			{
				memcpy(out->refund_id, "re_", 3);
				pn_order_chars(r->order_no, "stripe-re", 24, PN_ALNUM, out->refund_id + 3);
				strcpy(out->out_refund_no, "-");
			}
			out->time = (long long) c->epoch;
			break;
	}
}
