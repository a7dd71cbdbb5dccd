/*
 * cgi_reply.c
 *	  Everything the shim writes back: the reply built from the function's
 *	  row, and the one error-response function for every refusal and
 *	  failure, both through one writer that emits the CGI header block.
 *
 * Header values that come from the database are checked before they are
 * written, so a stray CR or LF can never split the reply; a row that cannot
 * be relayed safely is answered 503, which every gateway retries.
 */
#include "cgi.h"

#include <stdio.h>
#include <string.h>

/* Each pn_status that is not PN_OK, as a reply. */
static const struct
{
	pn_status	status;
	int			http;
	const char *outcome;
	const char *extra_header;
	const char *body;
}			errors[] = {
	{PN_BAD_REQUEST, 400, "refused", NULL,
	"{\"code\":\"FAIL\",\"message\":\"bad request\"}"},
	{PN_NOT_FOUND, 404, "refused", NULL,
	"{\"code\":\"FAIL\",\"message\":\"not found\"}"},
	{PN_METHOD, 405, "refused", "Allow: POST",
	"{\"code\":\"FAIL\",\"message\":\"method not allowed\"}"},
	{PN_TOO_LARGE, 413, "refused", NULL,
	"{\"code\":\"FAIL\",\"message\":\"request body too large\"}"},
	{PN_UNAVAILABLE, 503, "unavailable", NULL,
	"{\"code\":\"FAIL\",\"message\":\"service unavailable\"}"},
};

/* Reason phrases for the status line; other codes are sent without one. */
static const struct
{
	int			code;
	const char *reason;
}			reasons[] = {
	{200, "OK"}, {201, "Created"}, {202, "Accepted"}, {204, "No Content"},
	{400, "Bad Request"}, {401, "Unauthorized"}, {403, "Forbidden"},
	{404, "Not Found"}, {405, "Method Not Allowed"}, {409, "Conflict"},
	{413, "Content Too Large"}, {415, "Unsupported Media Type"},
	{422, "Unprocessable Content"}, {429, "Too Many Requests"},
	{500, "Internal Server Error"}, {502, "Bad Gateway"},
	{503, "Service Unavailable"}, {504, "Gateway Timeout"},
};

#define COL_STATUS 0
#define COL_CONTENT_TYPE 1
#define COL_BODY 2
#define COL_OUTCOME 3
#define NCOLS 4
#define MAX_HEADER_VALUE 255

static int	write_response(pn_io *io, const pn_response *r);
static bool header_value_safe(const char *s);
static bool outcome_safe(const char *s);

/* Writes the reply for a refusal or failure (status is never PN_OK). */
int
pn_reply_error(pn_io *io, pn_status status)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
	{
		if (errors[i].status == status)
		{
			pn_response r = {
				.status = errors[i].http,
				.content_type = "application/json",
				.extra_header = errors[i].extra_header,
				.outcome = errors[i].outcome,
				.body = errors[i].body,
				.body_len = strlen(errors[i].body),
			};

			return write_response(io, &r);
		}
	}
	return pn_reply_error(io, PN_UNAVAILABLE);
}

/*
 * Relays the function's row.  The row must have the four columns, a status
 * from 100 to 599 and a content type without control characters; otherwise
 * the answer is 503, never a success the row did not give.
 */
int
pn_reply_row(pn_io *io, const PGresult *res)
{
	pn_response r = {0};
	long long	status;
	const char *outcome;

	if (PQntuples(res) != 1 || PQnfields(res) != NCOLS ||
		PQgetisnull(res, 0, COL_STATUS) ||
		pn_parse_number(PQgetvalue(res, 0, COL_STATUS), 100, 599,
						&status) != PN_NUMBER_OK)
	{
		pn_log("the function returned %d rows of %d columns without a usable status",
			   PQntuples(res), PQnfields(res));
		return pn_reply_error(io, PN_UNAVAILABLE);
	}
	r.status = (int) status;
	if (!PQgetisnull(res, 0, COL_CONTENT_TYPE) &&
		PQgetvalue(res, 0, COL_CONTENT_TYPE)[0] != '\0')
	{
		r.content_type = PQgetvalue(res, 0, COL_CONTENT_TYPE);
		if (!header_value_safe(r.content_type))
		{
			pn_log("the function returned a content type that cannot be sent");
			return pn_reply_error(io, PN_UNAVAILABLE);
		}
	}
	outcome = PQgetisnull(res, 0, COL_OUTCOME) ? "" : PQgetvalue(res, 0, COL_OUTCOME);
	if (!outcome_safe(outcome))
	{
		pn_log("the function returned an unexpected outcome; sent as \"unknown\"");
		outcome = "unknown";
	}
	r.outcome = outcome;
	if (!PQgetisnull(res, 0, COL_BODY))
	{
		r.body = PQgetvalue(res, 0, COL_BODY);
		r.body_len = (size_t) PQgetlength(res, 0, COL_BODY);
	}
	return write_response(io, &r);
}

/* A value that may follow "Name: ": printable ASCII or tab, not too long. */
static bool
header_value_safe(const char *s)
{
	size_t		n = 0;

	for (; s[n]; n++)
		if ((s[n] < 0x20 && s[n] != '\t') || s[n] == 0x7F || (s[n] & 0x80))
			return false;
	return n <= MAX_HEADER_VALUE;
}

/* An outcome is a short word: [a-z_]{1,32}. */
static bool
outcome_safe(const char *s)
{
	size_t		n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || s[n] == '_'))
			return false;
	return n >= 1 && n <= 32;
}

/*
 * The one writer: Status, Content-Type, the extra header, Paynotify-Outcome,
 * Content-Length, then the body.  1xx, 204 and 304 replies carry no body.
 */
static int
write_response(pn_io *io, const pn_response *r)
{
	char		head[1024];
	const char *reason = NULL;
	bool		no_body = r->status < 200 || r->status == 204 || r->status == 304;
	int			len;

	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].code == r->status)
			reason = reasons[i].reason;
	len = snprintf(head, sizeof(head), "Status: %d%s%s\r\n", r->status,
				   reason ? " " : "", reason ? reason : "");
	if (r->content_type)
		len += snprintf(head + len, sizeof(head) - (size_t) len,
						"Content-Type: %s\r\n", r->content_type);
	if (r->extra_header)
		len += snprintf(head + len, sizeof(head) - (size_t) len,
						"%s\r\n", r->extra_header);
	len += snprintf(head + len, sizeof(head) - (size_t) len,
					"Paynotify-Outcome: %s\r\n", r->outcome);
	if (!no_body)
		len += snprintf(head + len, sizeof(head) - (size_t) len,
						"Content-Length: %zu\r\n", r->body_len);
	len += snprintf(head + len, sizeof(head) - (size_t) len, "\r\n");

	io->sent_status = r->status;
	io->sent_outcome = r->outcome;
	if (io->write(io, head, (size_t) len) != 0 ||
		(!no_body && r->body_len > 0 && io->write(io, r->body, r->body_len) != 0))
	{
		pn_log("writing the reply failed (status %d)", r->status);
		return -1;
	}
	return 0;
}
