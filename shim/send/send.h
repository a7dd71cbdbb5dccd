/*
 * send.h
 *		Declarations shared by the files of paynotify-send, the "gateway in
 *		a box": send_util.c (allocation, PRNG, JSON writer, statistics),
 *		send_sign.c (keys and the per-gateway notification builders, the
 *		only file that includes OpenSSL headers), send_gen.c (signing
 *		threads), send_http.c (the libcurl multi engine) and send_payload.c
 *		(--payload files).  The run itself (options, modes, dumps, reports)
 *		is in send_run.h.
 *
 *		Threads: builders run on several signing threads at once.  Everything
 *		reachable from a const struct pn_conf is read-only after start-up;
 *		each thread owns its struct pn_signer.
 */
#ifndef PAYNOTIFY_SEND_H
#define PAYNOTIFY_SEND_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "pn_common.h"

#define PN_MAX_HDR		8
#define PN_ID_LEN		64

/* ---------------------------------------------------------------- util */

void	   *pn_xmalloc(size_t n);
void	   *pn_xcalloc(size_t n, size_t size);
void	   *pn_xrealloc(void *p, size_t n);
char	   *pn_xstrdup(const char *s);
char	   *pn_xmemdup(const void *p, size_t n);

/* pn_buf (common/) appends that end the program when memory runs out */
void		pn_buf_put(struct pn_buf *b, const void *p, size_t n);
void		pn_buf_puts(struct pn_buf *b, const char *s);
void		pn_buf_putc(struct pn_buf *b, char c);
void		pn_buf_printf(struct pn_buf *b, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));

/* xoshiro256** seeded through splitmix64: fast, reproducible, not crypto. */
struct pn_rng
{
	uint64_t	s[4];
};

void		pn_rng_seed(struct pn_rng *r, uint64_t seed, uint64_t a, uint64_t b,
						uint64_t c, uint64_t d);
uint64_t	pn_rng_next(struct pn_rng *r);
uint64_t	pn_rng_below(struct pn_rng *r, uint64_t n);
void		pn_rng_chars(struct pn_rng *r, char *out, size_t n, const char *alphabet);
uint64_t	pn_hash64(const char *s);

extern const char PN_ALNUM[];
extern const char PN_DIGITS[];
extern const char PN_HEX_LOWER[];
extern const char PN_HEX_UPPER[];

/* Minimal JSON writer; pretty mode matches Python's json.dumps(indent=2). */
struct pn_json
{
	struct pn_buf *b;
	bool		pretty;
	int			depth;
	int			count[32];
};

void		pn_json_init(struct pn_json *j, struct pn_buf *b, bool pretty);
void		pn_json_open(struct pn_json *j, const char *key, char bracket);
void		pn_json_close(struct pn_json *j, char bracket);
void		pn_json_str(struct pn_json *j, const char *key, const char *val);
void		pn_json_strn(struct pn_json *j, const char *key, const char *val, size_t n);
void		pn_json_int(struct pn_json *j, const char *key, long long val);
void		pn_json_num(struct pn_json *j, const char *key, double val);
void		pn_json_bool(struct pn_json *j, const char *key, bool val);
void		pn_json_null(struct pn_json *j, const char *key);

bool		pn_parse_ll(const char *s, long long lo, long long hi, long long *out);
bool		pn_parse_double(const char *s, double lo, double hi, double *out);
void		pn_hex(const unsigned char *in, size_t n, char *out, const char *alphabet);
void		pn_fmt_beijing(time_t t, const char *fmt, char *out, size_t outsz);
void		pn_fmt_yuan(long long minor, char *out, size_t outsz);

/* Counters of one run (or one part of a run). */
#define PN_MAX_STATUS	600
#define PN_MAX_OUTCOMES	16
#define PN_MAX_CURLERR	128

struct pn_stats
{
	uint64_t	deliveries;		/* requests whose transfer finished */
	uint64_t	replies;		/* ... that got an HTTP reply */
	uint64_t	transport_errors;	/* ... that did not */
	uint64_t	acked;			/* replies that the gateway counts as an ack */
	uint64_t	status[PN_MAX_STATUS];
	int			n_outcomes;
	char		outcome_name[PN_MAX_OUTCOMES][32];
	uint64_t	outcome_count[PN_MAX_OUTCOMES];
	uint64_t	outcome_other;
	uint64_t	curlerr[PN_MAX_CURLERR];
	uint32_t   *lat_us;			/* latencies, NULL when not kept */
	size_t		n_lat;
	size_t		cap_lat;
};

void		pn_stats_init(struct pn_stats *s, bool keep_latency);
void		pn_stats_free(struct pn_stats *s);
void		pn_stats_outcome(struct pn_stats *s, const char *outcome);
void		pn_stats_latency(struct pn_stats *s, double seconds);
double		pn_stats_pct(struct pn_stats *s, double pct);	/* ms; sorts */

/* ---------------------------------------------------------------- build */

enum pn_gateway
{
	PN_WXPAY,
	PN_ALIPAY,
	PN_STRIPE
};

/* What a notification reports (--event); event_names[] in this order. */
enum pn_event
{
	PN_EV_PAY,
	PN_EV_REFUND,
	PN_EV_SIGN,					/* an agreement signed */
	PN_EV_TERMINATE,			/* an agreement ended */
	PN_EV_CHARGE,				/* a payment under an agreement */
	PN_EV_CHARGE_FAILED,		/* a failed one (Stripe only) */
	PN_EV_COUNT
};

/* Deliberately bad requests (--bad); PN_BAD_NONE for a good one. */
enum pn_bad
{
	PN_BAD_NONE,
	PN_BAD_TAMPERED,
	PN_BAD_STALE,
	PN_BAD_PROBE,
	PN_BAD_UNKNOWN_KEY,
	PN_BAD_COUNT
};

extern const char *const pn_bad_names[PN_BAD_COUNT];

/* Key material, loaded once and read-only afterwards. */
struct pn_keys
{
	char	   *wx_key_pem;		/* WeChat platform (or public-key) private key */
	char		wx_serial[128]; /* Wechatpay-Serial to send */
	unsigned char apiv3[32];	/* APIv3 key, 32 ASCII bytes */
	char	   *ali_key_pem;	/* Alipay private key */
	char	   *stripe_secret;	/* whsec_... */
	char	   *alt_key_pem;	/* unconfigured RSA key, for --bad unknown-serial */
	char		alt_secret[64]; /* unconfigured Stripe secret, likewise */
	char		alt_serial[48]; /* unconfigured WeChat serial, likewise */
};

struct pn_payload;

/* What every notification of a run is built from. */
struct pn_conf
{
	enum pn_gateway gateway;
	enum pn_event event;
	const char *order_fmt;		/* validated, converted to take long long */
	long long	amount;			/* minor units */
	long long	refund_amount;	/* minor units */
	const char *currency;
	const char *mchid;
	const char *appid;
	const char *ali_app_id;
	const char *seller_id;
	bool		livemode;
	const char *agreement_id;	/* --agreement-id, NULL = derived from the order */
	const char *agreement_ref;	/* --agreement-ref, NULL = derived likewise */
	uint64_t	seed;
	time_t		epoch;			/* notification creation time */
	time_t		now_fixed;		/* 0 = real clock for signing */
	struct pn_keys keys;
	const struct pn_payload *payload;	/* --payload, else NULL */
};

/*
 * --payload: a notification's content from a file (send_payload.c), signed
 * and sent instead of a generated one.
 */
#define PN_MAX_PARAMS	39		/* Alipay parameters besides sign */

struct pn_payload
{
	/* wxpay: body = head "ciphertext":"<sealed plaintext>" tail */
	char	   *head;
	size_t		head_len;
	char	   *tail;
	size_t		tail_len;
	char	   *plaintext;		/* compact JSON, encrypted as it is */
	size_t		plaintext_len;
	char		nonce[64];
	char		aad[128];
	/* alipay: parameters in file order, values in the file's charset */
	int			n_params;
	char	   *pkey[PN_MAX_PARAMS];
	char	   *pval[PN_MAX_PARAMS];
	char		content_type[128];
	/* stripe: the body as read */
	char	   *body;
	size_t		body_len;
	/* for reports, "" when the file does not say */
	char		notify_id[PN_ID_LEN];
	char		order_no[PN_ID_LEN];
};

int			pn_payload_load(struct pn_payload *pl, enum pn_gateway gw, const char *path);
void		pn_payload_free(struct pn_payload *pl);

/* One HTTP request, ready to send or dump. */
struct pn_req
{
	char	   *body;
	size_t		body_len;
	int			nh;
	char	   *hname[PN_MAX_HDR];
	char	   *hval[PN_MAX_HDR];
	char		notify_id[PN_ID_LEN];
	char		order_no[PN_ID_LEN];
	long long	order_index;
	uint32_t	slot;			/* notification number within the run */
	uint32_t	attempt;		/* 0 = first delivery */
	int			bad;			/* enum pn_bad */
	bool		shared;			/* not freed after sending (--same-signature) */
	bool		shared_seen;	/* its sale was taken (--sales, --drop) */
	double		t_start;		/* monotonic, set when the transfer starts */
	double		t_built;		/* monotonic, when it was signed (send_gen.c) */
};

struct pn_signer;

int			pn_keys_load(struct pn_conf *c, const char *dir, const char *wx_key,
						 const char *wx_cert, const char *serial, const char *apiv3,
						 const char *ali_key, const char *stripe_secret, bool need_alt);
void		pn_keys_free(struct pn_keys *k);
struct pn_signer *pn_signer_new(const struct pn_conf *c);
void		pn_signer_free(struct pn_signer *s);
struct pn_req *pn_build(const struct pn_conf *c, struct pn_signer *s,
						long long order_index, uint32_t attempt, int bad);
void		pn_req_free(struct pn_req *r);
void		pn_order_no(const struct pn_conf *c, long long index, char *out, size_t outsz);
void		pn_order_chars(const char *order_no, const char *salt, int n,
						   const char *alphabet, char *out);
void		pn_agreement(const struct pn_conf *c, const char *order_no, char *id, size_t idsz,
						 char *ref, size_t refsz);

/*
 * What a generated notification says it sold (--sales, send_sales.c), from
 * the same derivations pn_build signs: one line of the sales file.
 */
struct pn_sale
{
	enum pn_gateway gateway;
	enum pn_event event;
	char		channel[256];
	char		order_no[PN_ID_LEN];
	char		trade_no[PN_ID_LEN];	/* transaction_id, trade_no, pi_... */
	long long	amount;			/* minor units */
	char		currency[16];
	char		refund_id[PN_ID_LEN];	/* refund_id, out_biz_no, re_...; "-" */
	char		out_refund_no[PN_ID_LEN];	/* "-" for a payment */
	long long	refund_amount;	/* 0 for a payment */
	long long	time;			/* unix seconds of the success time signed */
	bool		dropped;
	char		notify_id[PN_ID_LEN];
	char		merchant[PN_ID_LEN];	/* mchid, seller_id, "-" */
	char		app[PN_ID_LEN];	/* appid, app_id, "-" */
	char		payer[PN_ID_LEN];	/* openid, buyer_id, latest charge ch_... */
};

void		pn_sale_of(const struct pn_conf *c, const struct pn_req *r, struct pn_sale *out);
bool		pn_is_dropped(const struct pn_conf *c, double drop, long long order_index);
void		pn_sale_line(const struct pn_sale *s, struct pn_buf *out);
int			pn_sale_parse(char *line, struct pn_sale *out);

/* ---------------------------------------------------------------- gen */

/* Which requests a run is made of; request k is derived from k alone. */
struct pn_plan
{
	long long	start;			/* first order index */
	size_t		per_kind;		/* requests per bad kind (bad runs) */
	bool		storm;			/* request k = delivery k of order `start` */
	int			kinds[PN_BAD_COUNT];	/* bad kinds; none for good runs */
	int			n_kinds;
};

struct pn_gen;

struct pn_gen *pn_gen_start(const struct pn_conf *c, const struct pn_plan *p,
							size_t total, size_t cap, int threads,
							double resign_after);
struct pn_req *pn_gen_take(struct pn_gen *g, bool block, bool *more);
void		pn_gen_prefill(struct pn_gen *g, bool quiet, volatile int *stop);
void		pn_gen_stop(struct pn_gen *g);

/* ---------------------------------------------------------------- http */

/* What came back for one request. */
struct pn_reply
{
	long		status;			/* 0 when no HTTP reply */
	int			curl_code;		/* CURLcode, 0 = ok */
	const char *curl_error;
	const char *outcome;		/* Paynotify-Outcome, "none" when absent */
	const char *body;
	size_t		body_len;
	const char *headers;		/* raw reply header block (one mode only) */
	double		latency;		/* seconds */
};

/*
 * The engine pulls requests from a source and reports every finished
 * transfer back to it.  next() is told how many transfers are in flight;
 * it returns NULL with *wait_s set to how long it may be until something
 * is ready, or to a negative value when the source is exhausted for good.
 */
struct pn_source
{
	void	   *ctx;
	struct pn_req *(*next) (void *ctx, double now, int active, double *wait_s);
	void		(*done) (void *ctx, struct pn_req *req, const struct pn_reply *rep);
	void		(*progress) (void *ctx, double now);
};

struct pn_engine_opts
{
	const char *url;
	int			concurrency;
	long		timeout_ms;
	bool		capture_headers;
	volatile int *stop;			/* set by a signal handler */
};

int			pn_engine_run(const struct pn_engine_opts *o, struct pn_source *src);
const char *pn_curl_strerror(int code);

#endif							/* PAYNOTIFY_SEND_H */
