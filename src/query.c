/*-------------------------------------------------------------------------
 *
 * query.c
 *	  Asking the gateway (1.4, docs/RECONCILIATION.md): the request that
 *	  looks up one order, built and signed here with the channel's keys
 *	  (paynotify_query_request), and the gateway's answer, verified here
 *	  and applied by the pipeline as a notification is
 *	  (paynotify_query_apply).  A daemon sends the one and hands back the
 *	  other; it never holds a key of its own.
 *
 * Each gateway builds its request and verifies its answer (PnGateway's
 * query_request and query_response, in verify_*.c, with the same key
 * store and verifiers as its notifications); what the answer says becomes
 * a PnNotice keyed by a query's notify_id (query:<trade or order>:<state>),
 * and from there on it is a notification like any other: lock, log row
 * (source 'query'), state machine, ledger, outbox, reply row.  A payment
 * found is applied once; an answer that the order was never paid closes it
 * once its expectation has expired (expires_at), and changes nothing
 * before.  An expired order the gateway says is not paid yet (WeChat Pay
 * NOTPAY, Alipay WAIT_BUYER_PAY) is closed at the gateway: its next
 * request is the gateway's close call (close_request), whose answer only
 * makes the order due for a query again; that query finds the trade closed
 * (or paid meanwhile) and is applied as any.  Every answer, refused ones
 * too, is written to the expectation's last_result.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "paynotify.h"
#include "pipeline.h"

PG_FUNCTION_INFO_V1(paynotify_query_request);
PG_FUNCTION_INFO_V1(paynotify_query_apply);

/*
 * The longest order number the gateways can be asked about: the same bound
 * as paynotify_expect's (paynotify--1.3--1.4.sql), below PN_MAX_ID_LEN so
 * that a query's notify id (query:<order or trade>:<state>) fits the log
 */
#define MAX_ORDER_NO_LEN 128
/* a query's notify id: query:, a trade or order number, :, the state */
#define MAX_QUERY_NOTIFY_ID_LEN (PN_MAX_ID_LEN + 64)
/* close calls of one expectation at most (each after a "not paid" answer) */
#define MAX_CLOSE_ATTEMPTS 3

/* ---------------------------------------------------------------------
 * What the gateways share
 * ---------------------------------------------------------------------
 */

/* s percent-encoded but for RFC 3986's unreserved characters. */
char *
pn_url_encode(const char *s)
{
	StringInfoData out;

	initStringInfo(&out);
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '.' || c == '_' || c == '~')
			appendStringInfoChar(&out, c);
		else
			appendStringInfo(&out, "%%%02X", c);
	}
	return out.data;
}

/*
 * A gateway's base URL setting, without a trailing '/': https, or http to
 * this machine only (a local simulator in tests); no query, fragment,
 * user information, blank or control character.
 */
char *
pn_setting_base_url(Jsonb *settings, const char *key, const char *dflt)
{
	char	   *url = pn_setting_text(settings, key, false);
	const char *host;
	size_t		len;
	bool		ok;

	if (url == NULL)
		return pstrdup(dflt);
	len = strlen(url);
	while (len > 0 && url[len - 1] == '/')
		url[--len] = '\0';
	if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		host = NULL;
	ok = host != NULL && host[0] != '\0' && len <= 512 &&
		strpbrk(url, "?#@\\\"' ") == NULL;
	for (const char *c = url; ok && *c; c++)
		ok = (unsigned char) *c > ' ' && *c != 0x7f;
	if (ok && url[4] == ':')	/* http: only this machine */
		ok = strncmp(host, "127.0.0.1", 9) == 0 || strncmp(host, "localhost", 9) == 0 ||
			strncmp(host, "[::1]", 5) == 0;
	if (ok && url[4] == ':')
	{
		char		next = host[host[0] == '[' ? 5 : 9];

		ok = next == '\0' || next == ':' || next == '/';
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" must be an https:// URL (http:// only to 127.0.0.1, localhost or [::1]) without query, fragment or user", key)));
	return url;
}

/*
 * A private key setting (a secret: {"file": "<name>"} reads it from
 * paynotify.secrets_directory), checked to be an RSA key of 2048 bits or
 * more; NULL when absent.  The message of a bad one never quotes it, and
 * the copy is wiped before it is raised.
 */
char *
pn_setting_private_key(Jsonb *settings, const char *key)
{
	char	   *material = pn_setting_text(settings, key, false);
	const char *err;

	if (material == NULL)
		return NULL;
	err = pn_private_key_check(material);
	if (err != NULL)
	{
		pn_wipe_string(material);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" is not usable: %s", key, err),
				 errhint("Give the RSA private key in PEM (-----BEGIN PRIVATE KEY-----), preferably from a file: {\"file\": \"<name>\"}.")));
	}
	return material;
}

/* Wipe a secret string in place (NULL is fine). */
void
pn_wipe_string(char *s)
{
	if (s != NULL)
		explicit_bzero(s, strlen(s));
}

/* 32 random upper-case hexadecimal digits, as WeChat Pay's SDKs make them. */
char *
pn_query_nonce(void)
{
	uint8		raw[16];
	char	   *out = palloc(33);

	if (!pg_strong_random(raw, sizeof(raw)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("paynotify: could not generate a random nonce")));
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02X", raw[i]);
	return out;
}

/* Add a header to a request. */
void
pn_query_header(PnQueryRequest *out, const char *name, char *value)
{
	if (out->nheaders >= PN_QUERY_MAX_HEADERS)
		elog(ERROR, "paynotify: too many query headers");
	out->header_names[out->nheaders] = name;
	out->header_values[out->nheaders] = value;
	out->nheaders++;
}

/* query:<key>:<state>, the notify_id of what a query found. */
char *
pn_query_notify_id(const char *key, const char *state)
{
	return psprintf(PN_QUERY_ID_PREFIX "%s:%s", key, state);
}

/*
 * A request as the row (method text, url text, headers jsonb, body text)
 * the daemon sends as it is: paynotify_query_request's and
 * paynotify_bill_request's (billfetch.c).
 */
Datum
pn_query_request_row(FunctionCallInfo fcinfo, const PnQueryRequest *req)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	JsonbParseState *st = NULL;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "paynotify: return type must be a row type");
	desc = BlessTupleDesc(desc);
	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < req->nheaders; i++)
		pn_jsonb_push_text(&st, req->header_names[i], req->header_values[i]);
	values[0] = CStringGetTextDatum(req->method);
	values[1] = CStringGetTextDatum(req->url);
	values[2] = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL)));
	values[3] = req->body ? CStringGetTextDatum(req->body) : (Datum) 0;
	nulls[3] = req->body == NULL;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/* The channel of a query, or an error: queries are called by a daemon. */
static const PnChannel *
query_channel(FunctionCallInfo fcinfo, PnConfig *cfg, char **order_no)
{
	const PnChannel *ch;
	char	   *name;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("channel and order_no must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	*order_no = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if ((*order_no)[0] == '\0' || strlen(*order_no) > MAX_ORDER_NO_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("order_no must be 1 to %d bytes", MAX_ORDER_NO_LEN)));
	/*
	 * What the gateways allow in a merchant's order number (WeChat Pay:
	 * letters, digits, _-*|; Alipay: letters, digits, _): nothing that
	 * would end a field of what is signed (&, = in Alipay's sign content,
	 * / ? in WeChat Pay's path, a quote in Stripe's search query)
	 */
	for (const char *c = *order_no; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'A' && *c <= 'Z') ||
			  (*c >= 'a' && *c <= 'z') || *c == '_' || *c == '-' || *c == '*' || *c == '|'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("order_no may hold only letters, digits and _-*| to be asked about")));
	ch = pn_channel_find(cfg, name);
	if (ch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no channel \"%s\"", name)));
	if (ch->gw->query_request == NULL || ch->gw->query_response == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("channel \"%s\": gateway %s cannot be queried", name, ch->gw->name)));
	return ch;
}

/*
 * Run sql on the order's expectation on the channel ($1 order_no, $2
 * channel, $3 a text when given); the first column of its row as a bool
 * (false without a row, or NULL).
 */
static bool
expectation_exec(const char *sql, int expect_rc, const char *order_no, const char *channel,
				 const char *arg)
{
	Datum		args[3];
	bool		result = false;

	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(channel);
	args[2] = arg ? CStringGetTextDatum(arg) : (Datum) 0;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute_with_args(sql, arg ? 3 : 2, (Oid[]) {TEXTOID, TEXTOID, TEXTOID}, args, NULL,
							  false, 0) != expect_rc)
		elog(ERROR, "paynotify: expectation statement failed");
	if (SPI_processed >= 1 && SPI_tuptable != NULL)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		result = !isnull && DatumGetBool(d);
	}
	SPI_finish();
	return result;
}

/*
 * Whether the order's next request on the channel is the gateway's close
 * call: its expectation, unsettled, has a close requested (a "not paid"
 * answer after expires_at, paynotify_query_apply), fewer than
 * MAX_CLOSE_ATTEMPTS were sent, and the gateway has one.  Then the call is
 * counted and stamped (close_attempts, close_sent_at) as it is built, so
 * that no caller gets more signed close calls than the bound; at the bound
 * the close is no longer requested and a query is built.
 */
static bool
expectation_close_send(PnConfig *cfg, const PnChannel *ch, const char *order_no)
{
	if (!cfg->schema_14 || ch->gw->close_request == NULL)
		return false;
	if (expectation_exec(psprintf("UPDATE %s.paynotify_expectation e"
								  " SET close_sent_at = pg_catalog.now(),"
								  " close_attempts = e.close_attempts OPERATOR(pg_catalog.+) 1"
								  " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
								  " AND e.channel OPERATOR(pg_catalog.=) $2"
								  " AND e.settled_at IS NULL AND e.close_requested_at IS NOT NULL"
								  " AND e.close_attempts OPERATOR(pg_catalog.<) %d"
								  " RETURNING true", cfg->schema, MAX_CLOSE_ATTEMPTS),
						 SPI_OK_UPDATE_RETURNING, order_no, ch->name, NULL))
		return true;
	(void) expectation_exec(psprintf("UPDATE %s.paynotify_expectation e SET close_requested_at = NULL,"
									 " last_result = 'close not sent: %d close calls made already; a query instead'"
									 " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
									 " AND e.channel OPERATOR(pg_catalog.=) $2"
									 " AND e.close_requested_at IS NOT NULL", cfg->schema, MAX_CLOSE_ATTEMPTS),
							SPI_OK_UPDATE, order_no, ch->name, NULL);
	return false;
}

/*
 * Whether a close call of the order was sent on the channel and not
 * answered yet: an answer is then read as the close's, unless it is a
 * query's (the gateway tells them apart: query_response).
 */
static bool
expectation_close_outstanding(PnConfig *cfg, const PnChannel *ch, const char *order_no)
{
	if (!cfg->schema_14 || ch->gw->close_request == NULL)
		return false;
	return expectation_exec(psprintf("SELECT e.close_sent_at OPERATOR(pg_catalog.>=) e.close_requested_at"
									 " FROM %s.paynotify_expectation e"
									 " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
									 " AND e.channel OPERATOR(pg_catalog.=) $2"
									 " AND e.settled_at IS NULL", cfg->schema),
							SPI_OK_SELECT, order_no, ch->name, NULL);
}

/* ---------------------------------------------------------------------
 * paynotify_query_request
 * ---------------------------------------------------------------------
 */

/*
 * paynotify_query_request(channel text, order_no text,
 *   OUT method text, OUT url text, OUT headers jsonb, OUT body text)
 *
 * The request that asks the channel's gateway about the order, signed now
 * (paynotify.now in tests).  Its Authorization header is the only place a
 * secret of the channel leaves the database: a signature for WeChat Pay
 * and Alipay, the API key itself for Stripe (docs/SECURITY.md).
 */
Datum
paynotify_query_request(PG_FUNCTION_ARGS)
{
	PnConfig   *cfg = pn_config(fcinfo->flinfo->fn_oid);
	char	   *order_no;
	const PnChannel *ch = query_channel(fcinfo, cfg, &order_no);
	PnQueryRequest req;

	memset(&req, 0, sizeof(req));
	if (expectation_close_send(cfg, ch, order_no))
		ch->gw->close_request(ch, order_no, pn_now(), &req);
	else
		ch->gw->query_request(ch, order_no, pn_now(), &req);
	return pn_query_request_row(fcinfo, &req);
}

/* ---------------------------------------------------------------------
 * paynotify_query_apply
 * ---------------------------------------------------------------------
 */

/*
 * Whether the order's expectation on the channel has expired at now (its
 * expires_at passed; no expectation, or none with an end: never), and
 * whether the order is still expected on another channel: then a close of
 * this channel's trade closes that expectation only, not the order.
 */
typedef enum
{
	PN_EXP_NOT,					/* not expired */
	PN_EXP_ALONE,				/* expired, expected nowhere else */
	PN_EXP_ELSEWHERE			/* expired, still expected on another channel */
} PnExpiry;

static PnExpiry
expectation_expired(PnConfig *cfg, const char *channel, const char *order_no, int64 now)
{
	Datum		args[3];
	char	   *sql;
	PnExpiry	expired = PN_EXP_NOT;

	if (!cfg->schema_14)
		return false;
	sql = psprintf("SELECT e.expires_at OPERATOR(pg_catalog.<=) pg_catalog.to_timestamp($3),"
				   " EXISTS (SELECT FROM %s.paynotify_expectation o"
				   "  WHERE o.order_no OPERATOR(pg_catalog.=) $1"
				   "  AND o.channel OPERATOR(pg_catalog.<>) $2 AND o.settled_at IS NULL)"
				   " FROM %s.paynotify_expectation e"
				   " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
				   " AND e.channel OPERATOR(pg_catalog.=) $2", cfg->schema, cfg->schema);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(channel);
	args[2] = Float8GetDatum((double) now);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute_with_args(sql, 3, (Oid[]) {TEXTOID, TEXTOID, FLOAT8OID}, args, NULL,
							  false, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: expectation lookup failed");
	if (SPI_processed == 1)
	{
		bool		isnull,
					elsewhere_null;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		Datum		elsewhere = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
											  &elsewhere_null);

		if (!isnull && DatumGetBool(d))
			expired = DatumGetBool(elsewhere) ? PN_EXP_ELSEWHERE : PN_EXP_ALONE;
	}
	SPI_finish();
	return expired;
}

/* What the last query of the order on the channel found. */
static void
expectation_result(PnConfig *cfg, const char *channel, const char *order_no, const char *result)
{
	Datum		args[3];
	char	   *sql;

	if (!cfg->schema_14)
		return;
	sql = psprintf("UPDATE %s.paynotify_expectation e SET last_result = $3"
				   " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
				   " AND e.channel OPERATOR(pg_catalog.=) $2", cfg->schema);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(channel);
	args[2] = CStringGetTextDatum(result);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute_with_args(sql, 3, (Oid[]) {TEXTOID, TEXTOID, TEXTOID}, args, NULL,
							  false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: expectation update failed");
	SPI_finish();
}

/* This channel's expectation of the order settled by its trade's close. */
static void
expectation_closed_here(PnConfig *cfg, const char *channel, const char *order_no,
						const char *notify_id)
{
	Datum		args[3];
	char	   *sql;

	sql = psprintf("UPDATE %s.paynotify_expectation e SET settled_at = pg_catalog.now(),"
				   " settled_by = 'close', settled_notify_id = $3"
				   " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
				   " AND e.channel OPERATOR(pg_catalog.=) $2 AND e.settled_at IS NULL", cfg->schema);
	args[0] = CStringGetTextDatum(order_no);
	args[1] = CStringGetTextDatum(channel);
	args[2] = CStringGetTextDatum(notify_id ? notify_id : "");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute_with_args(sql, 3, (Oid[]) {TEXTOID, TEXTOID, TEXTOID}, args, NULL,
							  false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "paynotify: expectation update failed");
	SPI_finish();
}

/*
 * A "not paid" answer (PN_Q_OPEN) of an expired order: its next request is
 * the gateway's close call, due now; none once MAX_CLOSE_ATTEMPTS were
 * sent, and none while one is requested.  Whether one was requested.
 */
static bool
expectation_request_close(PnConfig *cfg, const char *channel, const char *order_no)
{
	return expectation_exec(psprintf("UPDATE %s.paynotify_expectation e"
									 " SET close_requested_at = pg_catalog.now(),"
									 " next_query_at = pg_catalog.now()"
									 " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
									 " AND e.channel OPERATOR(pg_catalog.=) $2"
									 " AND e.settled_at IS NULL AND e.close_requested_at IS NULL"
									 " AND e.close_attempts OPERATOR(pg_catalog.<) %d"
									 " RETURNING true", cfg->schema, MAX_CLOSE_ATTEMPTS),
							SPI_OK_UPDATE_RETURNING, order_no, channel, NULL);
}

/*
 * The gateway answered the close call (closed, or refused it: paid
 * meanwhile, an error): the close is no longer requested, and the order is
 * queried now.  Nothing is closed here: the query that follows finds the
 * trade closed (or paid) and applies that.
 */
static void
expectation_close_answered(PnConfig *cfg, const char *channel, const char *order_no,
						   const char *result)
{
	(void) expectation_exec(psprintf("UPDATE %s.paynotify_expectation e"
									 " SET close_requested_at = NULL, next_query_at = pg_catalog.now(),"
									 " last_result = $3"
									 " WHERE e.order_no OPERATOR(pg_catalog.=) $1"
									 " AND e.channel OPERATOR(pg_catalog.=) $2", cfg->schema),
							SPI_OK_UPDATE, order_no, channel, result);
}

/*
 * paynotify_query_apply(channel text, order_no text, status integer,
 *   headers jsonb, body bytea,
 *   OUT status int, OUT content_type text, OUT body text, OUT outcome text)
 *
 * The gateway's answer to paynotify_query_request for the order, as the
 * daemon received it.  Refused (rejected or malformed, the reason's status
 * and message) unless it verifies and is about that order; then:
 *
 *	- paid: applied as the payment's notification would be, keyed
 *	  query:<trade>:<state> (processed, or duplicate when recorded before,
 *	  by a query or by the notification);
 *	- never paid: once the order's expectation has expired, applied as a
 *	  close (query:<order>:<state>); before, nothing but last_result
 *	  (ignored);
 *	- not paid yet: once expired, the gateway's close call is requested
 *	  (at most MAX_CLOSE_ATTEMPTS times; ignored);
 *	- the answer to a close call (the expectation had one requested):
 *	  closed or not, the close is no longer requested and the order is
 *	  queried again now (ignored);
 *	- anything else (paying, an error): nothing but last_result (ignored).
 */
static Datum query_apply_body(PG_FUNCTION_ARGS);

Datum
paynotify_query_apply(PG_FUNCTION_ARGS)
{
	return pn_entry(fcinfo, "paynotify_query_apply", NULL, query_apply_body, false);
}

static Datum
query_apply_body(PG_FUNCTION_ARGS)
{
	PnConfig   *cfg;
	char	   *order_no;
	const PnChannel *ch;
	PnQueryResponse resp;
	PnQueryAnswer answer;
	PnNotice	notice;
	PnReason	reason;
	PnOutcome	outcome;
	bytea	   *body;
	char	   *result;
	PnExpiry	expiry;

	pn_require_read_committed("paynotify_query_apply");
	cfg = pn_config(fcinfo->flinfo->fn_oid);
	ch = query_channel(fcinfo, cfg, &order_no);

	memset(&resp, 0, sizeof(resp));
	memset(&notice, 0, sizeof(notice));
	memset(&answer, 0, sizeof(answer));
	notice.order_amount = notice.refund_amount = notice.refunded_total = -1;
	notice.dispute_amount = -1;
	resp.req.channel = ch;
	resp.req.headers = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);
	resp.req.now = pn_now();
	resp.status = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);
	resp.order_no = order_no;
	resp.close = expectation_close_outstanding(cfg, ch, order_no);
	if (PG_ARGISNULL(4))
		reason = PN_R_MALFORMED;
	else
	{
		body = PG_GETARG_BYTEA_PP(4);
		resp.req.body = VARDATA_ANY(body);
		resp.req.body_len = VARSIZE_ANY_EXHDR(body);
		if (resp.req.body_len > paynotify_max_body)
			reason = PN_R_TOO_LARGE;
		else
			reason = ch->gw->query_response(&resp, &notice, &answer);
	}
	if (reason == PN_OK && !answer.close_answer &&
		(notice.notify_id == NULL || strlen(notice.notify_id) > MAX_QUERY_NOTIFY_ID_LEN))
		reason = PN_R_MALFORMED;
	if (reason != PN_OK)
	{
		ereport(DEBUG1,
				(errmsg("paynotify: channel \"%s\" refused the answer to a %s of order \"%s\": %s",
						ch->name, answer.close_answer ? "close" : "query", order_no,
						pn_reason_message(reason))));
		expectation_result(cfg, ch->name, order_no,
						   psprintf("%srefused: %s", answer.close_answer ? "close " : "",
									pn_reason_message(reason)));
		return pn_reply_row(fcinfo, ch->gw,
							reason == PN_R_MALFORMED || reason == PN_R_TOO_LARGE ?
							PN_MALFORMED : PN_REJECTED, reason);
	}

	if (answer.close_answer)
	{
		/* the close call's answer: query again now, whatever it says */
		expectation_close_answered(cfg, ch->name, order_no,
								   answer.closed ? "close: closed, query again" :
								   psprintf("close: %s: not closed, query again", answer.state));
		return pn_reply_row(fcinfo, ch->gw, PN_IGNORED, PN_OK);
	}

	expiry = answer.verdict == PN_Q_UNPAID || answer.verdict == PN_Q_OPEN ?
		expectation_expired(cfg, ch->name, order_no, resp.req.now) : PN_EXP_NOT;
	if (answer.verdict == PN_Q_OPEN)
	{
		/*
		 * not paid yet: no end, however long expired (an old answer handed
		 * back after the payment would still say so).  Once expired, the
		 * gateway is asked to close the trade: its next answer then ends it
		 */
		outcome = PN_IGNORED;
		if (expiry == PN_EXP_NOT)
			result = psprintf("%s: pending", answer.state);
		else if (ch->gw->close_request != NULL &&
				 expectation_request_close(cfg, ch->name, order_no))
			result = psprintf("%s: expired, close requested", answer.state);
		else
			result = psprintf("%s: expired, pending", answer.state);
		expectation_result(cfg, ch->name, order_no, result);
		return pn_reply_row(fcinfo, ch->gw, outcome, PN_OK);
	}
	if (answer.verdict == PN_Q_PAID || expiry == PN_EXP_ALONE)
	{
		if (answer.verdict == PN_Q_UNPAID)
			notice.action = PN_ACT_CLOSE;
		outcome = pn_handle_notice(cfg, ch, &notice, resp.req.headers);
		result = psprintf("%s: %s", answer.state, pn_outcome_name(outcome));
	}
	else if (expiry == PN_EXP_ELSEWHERE)
	{
		/* this trade is over; the order may be paid on another channel */
		outcome = PN_IGNORED;
		result = psprintf("%s: closed here, expected on another channel", answer.state);
		expectation_closed_here(cfg, ch->name, order_no, notice.notify_id);
	}
	else
	{
		outcome = PN_IGNORED;
		result = psprintf("%s: %s", answer.state,
						  answer.verdict == PN_Q_UNPAID ? "not paid, not expired" : "pending");
	}
	expectation_result(cfg, ch->name, order_no, result);
	return pn_reply_row(fcinfo, ch->gw, outcome, PN_OK);
}
