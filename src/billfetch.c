/*-------------------------------------------------------------------------
 *
 * billfetch.c
 *	  Fetching the daily bills (1.4, docs/RECONCILIATION.md, "Fetching the
 *	  bills"): the request of each step of a fetch, built and signed here
 *	  with the channel's keys (paynotify_bill_sign), and the gateway's
 *	  answer, verified here (paynotify_bill_read).  The state of a fetch
 *	  (paynotify_bill_fetch) is kept by the SQL functions of the
 *	  1.3--1.4 script, which call these two; a daemon carries the bytes and
 *	  holds no key.
 *
 * Each gateway builds its steps and reads its answers (PnGateway's
 * bill_request and bill_response, in verify_*.c, with the same signers and
 * verifiers as its queries).  What is shared is here: which URLs a step
 * may go to, and the check of a file against the hash the gateway stated.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"

#include "paynotify.h"
#include "pipeline.h"

PG_FUNCTION_INFO_V1(paynotify_bill_sign);
PG_FUNCTION_INFO_V1(paynotify_bill_read);

#define MAX_URL_LEN 2048

/*
 * A URL a step may send the daemon to: http:// or https://, a host, and
 * nothing that would end a header or a line (no blank, control character,
 * quote, backslash or fragment), at most MAX_URL_LEN bytes.
 */
bool
pn_url_safe(const char *url)
{
	const char *host;
	size_t		len = strlen(url);

	if (strncmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		return false;
	if (len > MAX_URL_LEN || host[0] == '\0' || host[0] == '/' || strpbrk(url, "#\\\"' <>") != NULL)
		return false;
	for (const char *c = url; *c; c++)
		if ((unsigned char) *c < ' ' || *c == 0x7f)
			return false;
	/* no user information: what follows the scheme up to the path is a host */
	for (const char *c = host; *c && *c != '/' && *c != '?'; c++)
		if (*c == '@')
			return false;
	return true;
}

/* The length of a URL's origin: scheme://host[:port], up to its path. */
static size_t
origin_len(const char *url)
{
	const char *p = strstr(url, "://");

	if (p == NULL)
		return 0;
	p += 3;
	while (*p && *p != '/' && *p != '?')
		p++;
	return p - url;
}

/*
 * The path and query of url ('/' and on) when url is on the origin of base
 * (the same scheme, host and port), else NULL.
 */
const char *
pn_url_path(const char *url, const char *base)
{
	size_t		n = origin_len(base);

	if (n == 0 || !pn_url_safe(url) || origin_len(url) != n ||
		pg_strncasecmp(url, base, n) != 0 || url[n] != '/')
		return NULL;
	return url + n;
}

/*
 * Whether a download URL is plain: no byte above 0x7f anywhere, and a path
 * (up to its query) with no dot segment ("." or "..", written with dots
 * or %2e), no encoded slash or backslash (%2f, %5c, in any case) and no
 * ';' or '@' (which some parsers would take for parameters or a user).  The
 * URL has passed pn_url_safe (no control character, blank, backslash).
 */
bool
pn_url_plain(const char *url)
{
	const char *p = strstr(url, "://");
	const char *seg;

	for (const char *c = url; *c; c++)
		if ((unsigned char) *c >= 0x80)
			return false;
	if (p == NULL)
		return false;
	p += 3;
	/* the host: letters, digits, '.' and '-', then a :port of digits */
	while (*p && *p != '/' && *p != '?' && *p != ':')
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
			return false;
		p++;
	}
	if (*p == ':')
		for (p++; *p && *p != '/' && *p != '?'; p++)
			if (*p < '0' || *p > '9')
				return false;
	seg = p;
	for (; *p && *p != '?'; p++)
	{
		if (*p == ';' || *p == '@')
			return false;
		if (*p == '%' && p[1] == '2' && (p[2] == 'f' || p[2] == 'F'))
			return false;
		if (*p == '%' && p[1] == '5' && (p[2] == 'c' || p[2] == 'C'))
			return false;
	}
	/* the segments between seg and p: none "." or ".." however written */
	while (seg < p)
	{
		const char *c = seg + 1;	/* past its '/' */
		int			dots = 0;
		bool		other = false;

		while (c < p && *c != '/')
		{
			if (*c == '.')
				c++;
			else if (*c == '%' && c + 2 < p && c[1] == '2' && (c[2] == 'e' || c[2] == 'E'))
				c += 3;
			else
			{
				other = true;
				c++;
				continue;
			}
			dots++;
		}
		if (!other && (dots == 1 || dots == 2))
			return false;
		seg = c;
	}
	return true;
}

/*
 * The answer to a step 'download': the file, when it came whole (200, not
 * empty) and, with want_hash, its SHA-1 is the one the signed list answer
 * stated (pn_bill_check_sha1).  NULL and answer->result "file", or why not.
 */
const char *
pn_bill_download_answer(const PnBillStep *step, const PnRequest *req, int status,
						bool want_hash, PnBillAnswer *answer)
{
	const char *why;

	if (status != 200)
		return "the download failed";
	if (req->body_len == 0)
		return "the file is empty";
	if (want_hash && (why = pn_bill_check_sha1(req->body, req->body_len, step->hash)) != NULL)
		return why;
	answer->result = "file";
	return NULL;
}

/*
 * Whether a bill file is the one whose SHA-1 the gateway stated (hash, 40
 * hexadecimal digits): the hash of the bill as the gateway hashed it, its
 * plain text, so a gzip file is decompressed first.  NULL when it is, else
 * why not.  Compared in constant time.
 */
const char *
pn_bill_check_sha1(const char *data, size_t len, const char *hash)
{
	unsigned char want[20];
	unsigned char got[20];
	StringInfoData plain;
	char	   *err;
	bool		hashed;

	if (hash == NULL || strlen(hash) != 40 || strspn(hash, "0123456789abcdefABCDEF") != 40)
		return "the stated hash is no SHA-1";
	for (int i = 0; i < 20; i++)
	{
		char		pair[3] = {hash[2 * i], hash[2 * i + 1], '\0'};

		want[i] = (unsigned char) strtoul(pair, NULL, 16);
	}
	initStringInfo(&plain);
	if (len >= 2 && (unsigned char) data[0] == 0x1f && (unsigned char) data[1] == 0x8b)
	{
		if (!pn_gunzip(data, len, &plain, &err))
		{
			pfree(plain.data);
			return "the file is no readable gzip";
		}
		data = plain.data;
		len = plain.len;
	}
	hashed = pn_sha1((const unsigned char *) data, len, got);
	/* the import decompresses the file again: free this copy at once */
	pfree(plain.data);
	if (!hashed)
		return "the file's hash could not be computed";
	if (!pn_ct_equal(want, got, sizeof(got)))
		return "the file's SHA-1 is not the one stated";
	return NULL;
}

/* A date argument as YYYY-MM-DD, and its 00:00 UTC in unix seconds. */
static char *
day_text(DateADT d, int64 *day_start)
{
	int			y,
				m,
				dd;

	if (DATE_NOT_FINITE(d))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_DATETIME_FORMAT),
				 errmsg("bill_date must be a finite date")));
	j2date(d + POSTGRES_EPOCH_JDATE, &y, &m, &dd);
	if (y < 2000 || y > 9999)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bill_date must be a day of this century")));
	*day_start = ((int64) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) * SECS_PER_DAY;
	return psprintf("%04d-%02d-%02d", y, m, dd);
}

/* The channel and the step of a fetch, from the arguments. */
static const PnChannel *
bill_step(FunctionCallInfo fcinfo, PnBillStep *step)
{
	PnConfig   *cfg = pn_config(fcinfo->flinfo->fn_oid);
	const PnChannel *ch;
	char	   *name;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("channel, step and bill_date must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	memset(step, 0, sizeof(*step));
	step->step = text_to_cstring(PG_GETARG_TEXT_PP(1));
	step->day = day_text(PG_GETARG_DATEADT(2), &step->day_start);
	step->url = PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (strcmp(step->step, "list") != 0 && strcmp(step->step, "download") != 0 &&
		strcmp(step->step, "page") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a bill fetch has no step \"%s\"", step->step)));
	ch = pn_channel_find(cfg, name);
	if (ch == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no channel \"%s\"", name)));
	if (ch->gw->bill_request == NULL || ch->gw->bill_response == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("channel \"%s\": the bills of gateway %s cannot be fetched", name, ch->gw->name)));
	return ch;
}

/*
 * paynotify_bill_sign(channel text, step text, bill_date date, url text,
 *   cursor text, OUT method text, OUT url text, OUT headers jsonb,
 *   OUT body text)
 *
 * The request of the step, signed now (paynotify.now in tests).  Called by
 * paynotify_bill_request only, with the state of the fetch.
 */
Datum
paynotify_bill_sign(PG_FUNCTION_ARGS)
{
	PnBillStep	step;
	const PnChannel *ch = bill_step(fcinfo, &step);
	PnQueryRequest req;

	step.cursor = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	memset(&req, 0, sizeof(req));
	ch->gw->bill_request(ch, &step, pn_now(), &req);
	return pn_query_request_row(fcinfo, &req);
}

/*
 * paynotify_bill_read(channel text, step text, bill_date date, url text,
 *   hash text, status integer, headers jsonb, body bytea,
 *   OUT result text, OUT url text, OUT hash text, OUT has_more boolean,
 *   OUT cursor text)
 *
 * The gateway's answer to the step's request, verified: result 'next'
 * (url and hash: where the bill is), 'file' (the body is the bill, checked
 * against the stated hash), 'page' (Stripe: has_more, cursor), 'not ready',
 * or 'refused: <why>'.  Called by paynotify_bill_apply only, which keeps
 * the state and imports the file.  Nothing an answer contains raises.
 */
Datum
paynotify_bill_read(PG_FUNCTION_ARGS)
{
	PnBillStep	step;
	const PnChannel *ch = bill_step(fcinfo, &step);
	PnRequest	resp;
	PnBillAnswer answer;
	const char *refused;
	TupleDesc	desc;
	Datum		values[5];
	bool		nulls[5] = {false, true, true, true, true};
	int			status = PG_ARGISNULL(5) ? 0 : PG_GETARG_INT32(5);

	step.hash = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	memset(&resp, 0, sizeof(resp));
	memset(&answer, 0, sizeof(answer));
	resp.channel = ch;
	resp.headers = PG_ARGISNULL(6) ? NULL : PG_GETARG_JSONB_P(6);
	resp.now = pn_now();
	if (PG_ARGISNULL(7))
		refused = "no answer";
	else
	{
		bytea	   *body = PG_GETARG_BYTEA_PP(7);

		resp.body = VARDATA_ANY(body);
		resp.body_len = VARSIZE_ANY_EXHDR(body);
		refused = ch->gw->bill_response(ch, &step, &resp, status, &answer);
	}
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "paynotify: return type must be a row type");
	desc = BlessTupleDesc(desc);
	if (refused != NULL)
		values[0] = CStringGetTextDatum(psprintf("refused: %s", refused));
	else
	{
		values[0] = CStringGetTextDatum(answer.result);
		if (answer.url != NULL)
		{
			values[1] = CStringGetTextDatum(answer.url);
			nulls[1] = false;
		}
		if (answer.hash != NULL)
		{
			values[2] = CStringGetTextDatum(answer.hash);
			nulls[2] = false;
		}
		if (strcmp(answer.result, "page") == 0)
		{
			values[3] = BoolGetDatum(answer.has_more);
			nulls[3] = false;
		}
		if (answer.cursor != NULL)
		{
			values[4] = CStringGetTextDatum(answer.cursor);
			nulls[4] = false;
		}
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
