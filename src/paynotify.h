/*-------------------------------------------------------------------------
 *
 * paynotify.h
 *	  Declarations shared by the files of the paynotify extension.
 *
 * The pipeline (handle.c) knows no gateway by name: each gateway is one
 * PnGateway (verify_*.c) registered in gateway.c.  A gateway authenticates a
 * request and turns it into a PnNotice; everything after that (lock, dedup,
 * state machine, records, outbox, reply row) is gateway-agnostic.
 *
 * Only crypto.c includes OpenSSL headers; everything else sees key objects
 * as opaque pointers.  The request parsers that need neither PostgreSQL nor
 * OpenSSL (parse/: form, Stripe-Signature, scanners) are fuzzed on their
 * own and have their own headers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_H
#define PAYNOTIFY_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "fields.h"

#define PAYNOTIFY_EXTNAME "paynotify"

/* ---------- settings (paynotify.c) ---------- */
extern double paynotify_now;			/* paynotify.now: 0 = real clock */
extern int	paynotify_lock_timeout;		/* paynotify.lock_timeout, ms */
extern int	paynotify_max_body;			/* paynotify.max_body_size, bytes */
extern char *paynotify_secrets_directory;	/* paynotify.secrets_directory */
extern int	paynotify_notify;			/* paynotify.notify: PnNotifyMode */

/* paynotify.notify: how a committing payment wakes workers (apply.c). */
typedef enum PnNotifyMode
{
	PN_NOTIFY_OFF,				/* never: workers poll paynotify_outbox */
	PN_NOTIFY_COALESCED,		/* one wake-up NOTIFY per backend per interval */
	PN_NOTIFY_ON				/* NOTIFY with each event's payload */
} PnNotifyMode;

extern int	paynotify_notify_interval;	/* paynotify.notify_interval, ms */

/* The reply row's `outcome` column. */
typedef enum PnOutcome
{
	PN_PROCESSED,
	PN_DUPLICATE,
	PN_IGNORED,
	PN_PARKED,
	PN_FAILED,
	PN_BUSY,
	PN_REJECTED,
	PN_MALFORMED
} PnOutcome;

/*
 * Why a request was not authenticated.  Finer than the outcome: it chooses
 * the reply's message and status, never carries request or key bytes.
 */
typedef enum PnReason
{
	PN_OK = 0,
	PN_R_MALFORMED,				/* missing/unparsable header, field, encoding */
	PN_R_TOO_LARGE,				/* body over paynotify.max_body_size */
	PN_R_UNSUPPORTED,			/* signature or encryption algorithm */
	PN_R_STALE,					/* timestamp outside the channel's window */
	PN_R_UNKNOWN_KEY,			/* no active key with that id */
	PN_R_BAD_SIGNATURE,			/* signature does not verify */
	PN_R_DECRYPT,				/* AEAD tag mismatch */
	PN_R_MISMATCH,				/* authentic, but for another merchant/app */
	PN_R_NO_CHANNEL				/* unknown channel */
} PnReason;

/* What an authentic notification asks the order to do. */
typedef enum PnAction
{
	PN_ACT_NONE,				/* nothing: recorded and acknowledged (ignored) */
	PN_ACT_PAY,					/* the order was paid */
	PN_ACT_REFUND,				/* money went back to the payer */
	PN_ACT_REFUND_FAILED,		/* a refund did not happen (abnormal, closed) */
	PN_ACT_CLOSE,				/* the trade closed unpaid */
	PN_ACT_PAY_COMBINE,			/* each of the sub-orders was paid (WeChat
								 * combine payment) */
	PN_ACT_DISPUTE_OPENED,		/* the payer disputed the trade's payment */
	PN_ACT_DISPUTE_WON,			/* the dispute ended for the merchant */
	PN_ACT_DISPUTE_LOST,		/* the dispute ended for the payer */
	PN_ACT_PAYMENT_FAILED,		/* a payment attempt failed: the order stays */
	PN_ACT_AGREEMENT_SIGNED,	/* a recurring-payment agreement is in force */
	PN_ACT_AGREEMENT_ENDED		/* it ended, for good */
} PnAction;

/* The most sub-orders one combine payment may name. */
#define PN_MAX_SUB_ORDERS 50

/*
 * The longest id a notice may carry, in bytes: an order number, a trade,
 * refund, agreement or dispute id, a sub-merchant, the notification's own
 * id.  What the gateways allow for (WeChat Pay 32 to 64, Alipay 64; Stripe's
 * ids are about 30 today and Stripe asks its users to take up to 255), and
 * far below what a btree index row holds (about 2.7 kB), so that every key
 * they end in can be written.
 */
#define PN_MAX_ID_LEN 255

/* One paid sub-order of a combine payment: a payment of its own. */
typedef struct PnSubOrder
{
	char	   *order_no;
	char	   *trade_no;
	int64		amount;
	char	   *currency;
	char	   *sub_merchant;	/* WeChat partner: its sub_mchid, or NULL */
} PnSubOrder;

/*
 * An authenticated notification, as the gateway module extracted it.
 * Amounts are in the currency's minor unit (fen, cents); -1 = not given.
 */
typedef struct PnNotice
{
	char	   *notify_id;		/* dedup key: WeChat id, Alipay notify_id, evt_ */
	char	   *event_type;		/* gateway's event name */
	Jsonb	   *payload;		/* business payload (decrypted where encrypted) */
	PnAction	action;
	char	   *order_no;		/* merchant's order number */
	char	   *trade_no;		/* gateway's payment id */
	int64		order_amount;	/* order total as the gateway states it */
	char	   *currency;
	char	   *sub_merchant;	/* the sub-merchant paid (WeChat partner
								 * sub_mchid), kept with the payment; or NULL */
	char	   *refund_id;		/* gateway's (or merchant's) refund id */
	int64		refund_amount;	/* this refund alone */
	int64		refunded_total; /* everything refunded so far, this one included */
	const char *anomaly;		/* authentic but fails a business check: set to
								 * a short static code; recorded, acknowledged,
								 * not applied */
	int			nsubs;			/* PN_ACT_PAY_COMBINE: the sub-orders to pay, */
	PnSubOrder *subs;			/* in order_no order (the order of their locks) */
	int64		dispute_amount; /* PN_ACT_DISPUTE_*: the amount disputed, */
	Jsonb	   *detail;			/* and what its event carries besides (an object);
								 * PN_ACT_AGREEMENT_*: merchant_ref, plan_id,
								 * gateway_state, signed_at, ended_at (unix s) */
	char	   *agreement_id;	/* PN_ACT_AGREEMENT_*: the agreement; a payment:
								 * the agreement it was charged under, or NULL */
	bool		end_needs_no_sign;	/* PN_ACT_AGREEMENT_ENDED: an agreement that
									 * was never in force (it cannot be signed
									 * any more): recorded ended as it comes */
} PnNotice;

/* One key of a channel, parsed once per backend. */
typedef struct PnKey
{
	char	   *key_id;
	void	   *pkey;			/* EVP_PKEY * (public-key gateways) or NULL */
	void	   *verifier;		/* EVP_PKEY_CTX * set up once for RSA-SHA256 */
	char	   *secret;			/* shared secret bytes (HMAC gateways) or NULL */
	int			secret_len;
	int64		not_before;		/* unix seconds, 0 = unbounded */
	int64		not_after;		/* unix seconds, 0 = unbounded */
} PnKey;

struct PnGateway;

/*
 * A query's request as the daemon sends it: method, URL, headers, body
 * (NULL: none).  Built and signed in the database (query.c).
 */
#define PN_QUERY_MAX_HEADERS 6
typedef struct PnQueryRequest
{
	const char *method;
	char	   *url;
	int			nheaders;
	const char *header_names[PN_QUERY_MAX_HEADERS];
	char	   *header_values[PN_QUERY_MAX_HEADERS];
	char	   *body;
} PnQueryRequest;

/* What a verified answer of the gateway says of the order. */
typedef enum PnQueryVerdict
{
	PN_Q_PAID,					/* paid: the notice pays (PN_ACT_PAY) */
	PN_Q_UNPAID,				/* closed for good, never paid: the
								 * order closes once expired (PN_ACT_CLOSE) */
	PN_Q_OPEN,					/* not paid, not over (WeChat Pay NOTPAY,
								 * Alipay WAIT_BUYER_PAY) of the order asked
								 * about: once expired, the gateway is asked
								 * to close it (close_request) */
	PN_Q_PENDING				/* nothing settled yet, or nothing to act on */
} PnQueryVerdict;

typedef struct PnQueryAnswer
{
	PnQueryVerdict verdict;
	const char *state;			/* the gateway's word (SUCCESS, NOTPAY, ...) */
	bool		close_answer;	/* read as the answer to a close call */
	bool		closed;			/* an answer to a close call: the gateway
								 * closed the trade (else it refused) */
} PnQueryAnswer;

/*
 * Every notice a query makes is keyed by a notify_id with this prefix
 * (query:<trade or order>:<state>), which no gateway's own id has.
 */
#define PN_QUERY_ID_PREFIX "query:"
#define pn_notice_from_query(n) \
	(strncmp((n)->notify_id, PN_QUERY_ID_PREFIX, strlen(PN_QUERY_ID_PREFIX)) == 0)

/*
 * One step of fetching a day's bill (1.4, billfetch.c): what the state of
 * the fetch says the next request is, and what the gateway's answer to it
 * says.  Every string is checked before it is used (billfetch.c).
 */
typedef struct PnBillStep
{
	const char *step;			/* "list", "download" or "page" */
	const char *day;			/* YYYY-MM-DD, in the gateway's zone */
	int64		day_start;		/* unix seconds of the day's 00:00 there */
	const char *url;			/* download: the URL the list step gave */
	const char *hash;			/* download: its SHA-1 in hex, or NULL */
	const char *cursor;			/* page: the last id read, or NULL */
} PnBillStep;

typedef struct PnBillAnswer
{
	const char *result;			/* "next", "file", "page" or "not ready" */
	char	   *url;			/* next: where to download the bill */
	char	   *hash;			/* next: its SHA-1 (hex), or NULL */
	bool		has_more;		/* page: another page follows */
	char	   *cursor;			/* page: the last id of this one */
} PnBillAnswer;

/* A configured channel, cached per backend (config.c). */
typedef struct PnChannel
{
	char	   *name;
	const struct PnGateway *gw;
	void	   *conf;			/* the gateway's parsed settings */
	int			nkeys;
	PnKey	   *keys;			/* every non-retired key */
} PnChannel;

/* One request as it reached paynotify_handle. */
typedef struct PnRequest
{
	const PnChannel *channel;
	Jsonb	   *headers;
	const char *body;
	int			body_len;
	int64		now;			/* unix seconds (paynotify.now or the clock) */
} PnRequest;

/* A gateway's response to a query, as the daemon handed it back. */
typedef struct PnQueryResponse
{
	PnRequest	req;			/* its headers and body, the channel, now */
	int			status;			/* HTTP status: never signed, a hint only */
	const char *order_no;		/* the order asked about */
	bool		close;			/* a close call (close_request) was sent and
								 * not answered: the answer is read as its
								 * unless it is a query's */
} PnQueryResponse;

/* The HTTP part of the reply row. */
typedef struct PnReply
{
	int			status;
	const char *content_type;
	const char *body;
} PnReply;

/*
 * One gateway.  Adding a gateway = one verify_<name>.c defining a PnGateway,
 * plus one line in gateway.c.
 */
typedef struct PnGateway
{
	const char *name;			/* as given to paynotify_add_channel */
	bool		public_keys;	/* keys are PEM public keys, else secrets */
	bool		refund_failure_final;	/* a refund's failure is its last word:
										 * it undoes a recorded success, and no
										 * later success undoes it (Stripe) */

	/*
	 * Parse and validate the channel's settings into an object allocated in
	 * the current memory context.  ereport(ERROR) with a precise SQLSTATE on
	 * bad settings; never puts a secret value into the message.
	 */
	void	   *(*load_settings) (Jsonb *settings);

	/*
	 * Wipe whatever secret the parsed settings hold, just before their
	 * memory is freed with the configuration generation.  NULL when the
	 * settings hold no secret; must accept a NULL conf (a generation whose
	 * loading failed part-way).
	 */
	void		(*free_settings) (void *conf);

	/*
	 * Check one key's id and material at configuration time (after the
	 * generic PEM or secret checks); ereport on bad input.  May be NULL.
	 */
	void		(*check_key) (const char *key_id, const char *material);

	/*
	 * Authenticate the request and fill *notice.  Returns PN_OK or why not.
	 * Must not raise for anything a request can contain.
	 */
	PnReason	(*authenticate) (const PnRequest *req, PnNotice *notice);

	/*
	 * How this gateway reads a reply (pn_gateway_reply builds it): every
	 * reply has this content type; an acknowledgement is 200 with ack_body;
	 * a failure has the status failure_status (gateway.c) chooses and
	 * fail_body, where %s, if present, becomes the fixed message
	 * failure_message chooses.
	 */
	const char *content_type;
	const char *ack_body;
	const char *fail_body;

	/*
	 * Queries (1.4, query.c): build and sign the request that asks the
	 * gateway about one order (ereport on a channel that cannot ask: no
	 * key, no merchant), and verify a response to it and say what it
	 * found (a PnReason as authenticate does, never raising for anything a
	 * response contains).  NULL: the gateway cannot be asked.
	 */
	void		(*query_request) (const PnChannel *ch, const char *order_no, int64 now,
								  PnQueryRequest *out);
	PnReason	(*query_response) (const PnQueryResponse *resp, PnNotice *notice,
								   PnQueryAnswer *answer);

	/*
	 * The gateway's close call for an expired order a query found not paid
	 * (PN_Q_OPEN), built and signed as query_request; its answer goes to
	 * query_response with resp->close set, which says in answer->closed
	 * whether the trade was closed (notice untouched).  NULL: the gateway
	 * has none (Stripe: the application cancels its PaymentIntent).
	 */
	void		(*close_request) (const PnChannel *ch, const char *order_no, int64 now,
								  PnQueryRequest *out);

	/*
	 * Bills (1.4, billfetch.c): build and sign the request of one step of
	 * fetching a day's bill (ereport on a channel that cannot), and read
	 * the answer to it: NULL and *answer filled, or why it is refused (a
	 * fixed text; never raising for anything an answer contains).  NULL:
	 * the gateway's bills cannot be fetched.
	 */
	void		(*bill_request) (const PnChannel *ch, const PnBillStep *step, int64 now,
								 PnQueryRequest *out);
	const char *(*bill_response) (const PnChannel *ch, const PnBillStep *step,
								  const PnRequest *resp, int status, PnBillAnswer *answer);
} PnGateway;

/* ---------- event.c: the events an outbox row, hook or endpoint may name ---------- */
extern const char *const pn_event_names[];
extern const int pn_nevent_names;

/* ---------- gateway.c ---------- */
extern const PnGateway *pn_gateway_lookup(const char *name);
extern const char *pn_gateway_names(void);
extern const char *pn_outcome_name(PnOutcome outcome);
extern const char *pn_reason_message(PnReason reason);
extern int	pn_reason_status(PnReason reason);
/* The one reply builder (gw NULL: no channel, a plain-text reply). */
extern bool pn_outcome_acknowledges(PnOutcome outcome);
extern void pn_gateway_reply(const PnGateway *gw, PnOutcome outcome, PnReason reason,
							 PnReply *reply);

/* the gateways */
extern const PnGateway pn_gateway_wxpay;
extern const PnGateway pn_gateway_alipay;
extern const PnGateway pn_gateway_stripe;

/* ---------- keys.c: a channel's keys at a request's time ---------- */
extern const PnKey *pn_channel_key(const PnChannel *ch, const char *key_id,
								   int64 now);
extern bool pn_key_active(const PnKey *key, int64 now);

/* ---------- json.c: request and payload access (never raise on input) ---------- */
#define PAYNOTIFY_MAX_JSON_DEPTH 64

/* the header a shim names its client with, kept in the delivery history */
#define PN_CLIENT_HEADER "X-Paynotify-Client"
/* Returns 1 found (value set, NUL-terminated palloc'd copy), 0 absent, -1 not a single string. */
extern int	pn_header(Jsonb *headers, const char *name, char **value);
extern void pn_headers(Jsonb *headers, const char *const *names, int n, char **values, int *found);
/* A palloc'd copy of s, at most max bytes, not cut inside a character. */
extern char *pn_clip_text(const char *s, int max);
extern char *pn_clip_len(const char *s, int len, int max);
/* Parse UTF-8 JSON text into jsonb; NULL when invalid, too deep or not UTF-8. */
extern Jsonb *pn_parse_json(const char *text, int len);
extern Jsonb *pn_parse_json_max(const char *text, int len, int64 max_values);
/* string fields of JSON text that is never stored (json.c, parse/fields.c) */
extern bool pn_json_fields(const char *text, int len, PnJsonField *fields, int n);
/* Dotted-path lookups; false when absent or of another type. */
extern JsonbValue *pn_json_value(Jsonb *doc, const char *path, JsonbValue *buf);
extern bool pn_json_string(Jsonb *doc, const char *path, char **value);
extern bool pn_json_int64(Jsonb *doc, const char *path, int64 *value);
extern bool pn_json_bool(Jsonb *doc, const char *path, bool *value);
extern bool pn_json_present(Jsonb *doc, const char *path);
extern bool pn_json_objects(Jsonb *doc, const char *path, int max, Jsonb ***elems, int *n);
/* Strict unsigned decimal parse; false on anything else or overflow. */
extern bool pn_parse_int64(const char *s, int len, int64 *value);
/* Exact "123", "123.4", "123.45" (scale digits at most) to minor units. */
extern bool pn_parse_decimal(const char *s, int len, int scale, int64 *value);
/* "YYYY-MM-DD[T ]HH:MM:SS" with "Z", "+HH:MM" or none (then offset_s east of UTC). */
extern bool pn_parse_time(const char *s, int offset_s, int64 *unix_s);
/* Building an object with pushJsonbValue: a key, a key and its value. */
extern void pn_jsonb_push_key(JsonbParseState **st, const char *key);
extern void pn_jsonb_push_text(JsonbParseState **st, const char *key,
							   const char *val);	/* NULL: null */
extern void pn_jsonb_push_int64(JsonbParseState **st, const char *key, int64 val);
extern void pn_jsonb_push_bool(JsonbParseState **st, const char *key, bool val);
extern void pn_jsonb_push_jsonb(JsonbParseState **st, const char *key, Jsonb *val);
extern Jsonb *pn_jsonb_redacted(Jsonb *doc, const char *const *keys, int nkeys,
							   const char *const *marks, int nmarks);

/* ---------- notice.c: a notice as stored (parked, anomalies, hooks) ---------- */
extern JsonbValue *pn_notice_push(JsonbParseState **st, const PnNotice *n);
extern Jsonb *pn_notice_to_jsonb(const PnNotice *n);
extern PnNotice *pn_notice_from_jsonb(Jsonb *j, const char *notify_id);
extern const char *pn_notice_fault(Jsonb *j);
extern void pn_notice_bound(PnNotice *n);
extern Jsonb *pn_agreement_detail(const char *agreement_id, const char *merchant_ref,
								  const char *plan_id, const char *gateway_state,
								  int64 signed_at, int64 ended_at);

/* ---------- settings.c: gateway settings (ereport on wrong type) ---------- */
extern char *pn_setting_text(Jsonb *settings, const char *key, bool required);
extern int	pn_setting_int(Jsonb *settings, const char *key, int dflt,
						   int min, int max);
extern int	pn_setting_bool(Jsonb *settings, const char *key);	/* -1 absent */
extern void pn_settings_only(Jsonb *settings, const char *gateway,
							 const char *const *allowed);

/* ---------- crypto.c: the only OpenSSL user ---------- */
/* Strict standard base64 (padded); false when not base64. palloc'd result. */
extern bool pn_base64_decode(const char *in, int inlen, unsigned char **out,
							 int *outlen);
/* PEM public key or X.509 certificate; NULL and *err on failure. */
extern void *pn_pkey_load(const char *pem, int len, const char **err);
extern void pn_pkey_free(void *pkey);
/* Serial of a PEM certificate as upper-case hex, or NULL when not a cert. */
extern char *pn_cert_serial(const char *pem, int len);
/* Returns 1 verified, 0 not, -1 unusable digest name. */
extern int	pn_rsa_verify(void *pkey, const char *digest,
						  const unsigned char *msg, size_t msglen,
						  const unsigned char *sig, size_t siglen);
/* AES-GCM's tag: the last PN_GCM_TAG_LEN bytes of a ciphertext. */
#define PN_GCM_TAG_LEN 16
/* AES-GCM (size by key length) with its tag at the end of ct. */
extern bool pn_aead_open(const unsigned char *key, int keylen,
						 const unsigned char *nonce, int noncelen,
						 const unsigned char *aad, int aadlen,
						 const unsigned char *ct, int ctlen,
						 unsigned char **plain, int *plainlen);
/* RSA-SHA256 (PKCS#1 v1.5) with a key's cached verifier: true when valid. */
extern void *pn_rsa_verifier_new(void *pkey);
extern void pn_rsa_verifier_free(void *verifier);
extern bool pn_key_verify(const PnKey *key, const unsigned char *msg, size_t msglen,
						  const unsigned char *sig, size_t siglen);
/* False when OpenSSL fails: the caller must treat that as "not verified". */
extern bool pn_hmac_sha256(const unsigned char *key, int keylen,
						   const unsigned char *msg1, size_t len1,
						   const unsigned char *msg2, size_t len2,
						   unsigned char out[32]);
extern void pn_sha256(const unsigned char *msg, size_t len, unsigned char out[32]);
/* RSA private keys (query requests): NULL when usable, else why not. */
extern const char *pn_private_key_check(const char *material);
/* RSA-SHA256 (PKCS#1 v1.5) signature in base64, or NULL and *err. */
extern char *pn_rsa_sign(const char *material, const unsigned char *msg, size_t msglen,
						 const char **err);
extern bool pn_ct_equal(const void *a, const void *b, size_t len);
/* SHA-1 (a bill's hash, as WeChat Pay states it): false when OpenSSL fails. */
extern bool pn_sha1(const unsigned char *msg, size_t len, unsigned char out[20]);
extern void pn_crypto_init(void);

/* ---------- apply.c: layer 4 ---------- */
typedef struct PnApplied
{
	PnOutcome	outcome;		/* processed, ignored, parked */
	const char *log_status;		/* succeeded, ignored, parked, anomaly */
	const char *note;			/* why ignored / which anomaly (static) */
} PnApplied;

/* ---------- subxact.c ---------- */
extern ErrorData *pn_subxact_run(void (*fn) (void *arg), void *arg);

/* ---------- security.c ---------- */
extern void pn_run_as(Oid role, void (*fn) (void *arg), void *arg);
extern void pn_run_as_owner(Oid owner, void (*fn) (void *arg), void *arg);
extern void pn_run_orders(Oid owner, void (*fn) (void *arg), void *arg);
extern void pn_run_orders_as_caller(Oid caller, Oid role, void (*fn) (void *arg), void *arg);
extern void pn_security_init(void);
extern bool pn_running_as(void);
extern bool pn_hook_owner_ok(Oid fn_oid, Oid role);
extern Oid	pn_hook_role(Oid registered_by, const char *registrant, bool on_known,
						 int64 registered_on);
extern Oid	pn_function_owner(Oid fn_oid);
extern void pn_require_clean_temp(Oid role, const char *code);
extern void pn_run_guarded(Oid role, const char *code, void (*fn) (void *arg), void *arg);
extern void pn_require_orders_update(Oid relid, Oid role, const char *detail);
extern bool pn_schema_at_13(Oid nsp);

/* ---------- authors.c ---------- */
/*
 * An owner of a table's code: what runs it (or whose code it is), the
 * object (a function, a type, an operator, a relation: classid and objid;
 * classid InvalidOid for the right to create triggers on relation objid),
 * the role that owns it or holds the right (InvalidOid: PUBLIC), and the
 * object named (NULL for a function).
 */
typedef struct PnAuthor
{
	char	   *what;
	Oid			classid;
	Oid			objid;
	Oid			owner;
	char	   *object;
} PnAuthor;

extern PnAuthor *pn_table_authors(Oid rel, int *n, Oid **relids, int *nrelids,
								   Oid **types, int *ntypes);
extern bool pn_author_trusted(const PnAuthor *a, Oid owner);
extern char *pn_author_offence(const char *table, Oid relid, const PnAuthor *a);
extern char *pn_superuser_unfit(Oid fn);
extern Oid	pn_relation_owner(Oid relid);
extern Oid	pn_proc_owner(Oid fn_oid);

/* ---------- lock.c ---------- */
typedef enum PnLockResult
{
	PN_LOCK_BUSY,
	PN_LOCK_FREE,
	PN_LOCK_WAITED
} PnLockResult;

extern bool pn_notification_lock_nowait;
extern PnLockResult pn_lock_notification(const char *channel, const char *notify_id);
extern bool pn_try_lock_notification(const char *channel, const char *notify_id);
extern void pn_unlock_notification(const char *channel, const char *notify_id);
extern void pn_bound_lock_waits(void);

/* ---------- config.c ---------- */
extern void pn_config_init(void);

/* ---------- state.c ---------- */
extern void pn_state_init(void);

/* ---------- handle.c ---------- */
extern int64 pn_now(void);

/* ---------- query.c: what the gateways' queries share ---------- */
extern char *pn_url_encode(const char *s);
extern char *pn_setting_base_url(Jsonb *settings, const char *key, const char *dflt);
extern char *pn_setting_private_key(Jsonb *settings, const char *key);
extern void pn_wipe_string(char *s);
extern char *pn_query_nonce(void);
extern void pn_query_header(PnQueryRequest *out, const char *name, char *value);
extern Datum pn_query_request_row(FunctionCallInfo fcinfo, const PnQueryRequest *req);
extern char *pn_query_notify_id(const char *key, const char *state);

/* ---------- billfetch.c / bill.c: what the gateways' bill fetches share ---------- */
extern bool pn_url_safe(const char *url);
extern const char *pn_url_path(const char *url, const char *base);
extern bool pn_url_plain(const char *url);
extern bool pn_gunzip(const char *data, size_t len, StringInfo out, char **err);
extern const char *pn_bill_check_sha1(const char *data, size_t len, const char *hash);
extern const char *pn_bill_download_answer(const PnBillStep *step, const PnRequest *req, int status,
										   bool want_hash, PnBillAnswer *answer);

#endif							/* PAYNOTIFY_H */
