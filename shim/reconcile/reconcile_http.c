/*
 * reconcile_http.c
 *	  One query's request, sent as the database built it (method, URL,
 *	  headers, body: nothing added but what HTTP needs, Host and
 *	  Content-Length), and its response kept as received: the status, the
 *	  headers of the final response as a JSON object (names as they came,
 *	  each once, the values of a repeated one joined with ", "), the body's
 *	  bytes.  The request's headers are never logged: they carry the
 *	  gateway's Authorization.
 */
#include "reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HEADERS 256

/* The headers of the response being received. */
typedef struct header_list
{
	pn_buf		names[MAX_HEADERS];
	pn_buf		values[MAX_HEADERS];
	int			n;
	bool		overflow;
} header_list;

/* What the callbacks fill. */
typedef struct receiving
{
	query_response *rs;
	header_list *hl;
	long long	max_response;
	bool		too_large;
} receiving;

void
response_init(query_response *rs)
{
	memset(rs, 0, sizeof(*rs));
	pn_buf_init(&rs->headers);
	pn_buf_init(&rs->body);
}

void
response_free(query_response *rs)
{
	pn_buf_free(&rs->headers);
	pn_buf_free(&rs->body);
}

static void
headers_clear(header_list *hl)
{
	for (int i = 0; i < hl->n; i++)
	{
		pn_buf_free(&hl->names[i]);
		pn_buf_free(&hl->values[i]);
	}
	hl->n = 0;
	hl->overflow = false;
}

static bool
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* One header line (no CRLF) of the response. */
static void
header_line(receiving *r, const char *line, size_t n)
{
	header_list *hl = r->hl;
	const char *colon;
	size_t		k;

	if (n >= 5 && memcmp(line, "HTTP/", 5) == 0)
	{
		/* a status line: the headers of an interim (1xx) response are dropped */
		headers_clear(hl);
		return;
	}
	if (n == 0)
		return;
	if (is_ows(line[0]))
	{
		/* an obsolete folded line continues the last value */
		while (n > 0 && is_ows(*line))
			line++, n--;
		if (hl->n > 0 && n > 0)
		{
			pn_buf_append(&hl->values[hl->n - 1], " ", 1);
			pn_buf_append(&hl->values[hl->n - 1], line, n);
		}
		return;
	}
	colon = memchr(line, ':', n);
	if (colon == NULL || colon == line)
		return;
	k = (size_t) (colon - line);
	line += k + 1, n -= k + 1;
	while (n > 0 && is_ows(*line))
		line++, n--;
	while (n > 0 && is_ows(line[n - 1]))
		n--;
	for (int i = 0; i < hl->n; i++)
	{
		if (hl->names[i].len == k && strncasecmp(hl->names[i].data, colon - k, k) == 0)
		{
			pn_buf_append(&hl->values[i], ", ", 2);
			pn_buf_append(&hl->values[i], line, n);
			return;
		}
	}
	if (hl->n == MAX_HEADERS)
	{
		hl->overflow = true;
		return;
	}
	pn_buf_init(&hl->names[hl->n]);
	pn_buf_init(&hl->values[hl->n]);
	pn_buf_append(&hl->names[hl->n], colon - k, k);
	pn_buf_append(&hl->values[hl->n], line, n);
	hl->n++;
}

static size_t
on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	receiving  *r = userdata;
	size_t		n = size * nmemb,
				len = n;

	while (len > 0 && (ptr[len - 1] == '\n' || ptr[len - 1] == '\r'))
		len--;
	header_line(r, ptr, len);
	return n;
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	receiving  *r = userdata;
	size_t		n = size * nmemb;

	if (r->rs->body.len + n > (size_t) r->max_response)
	{
		r->too_large = true;
		return 0;				/* libcurl stops: CURLE_WRITE_ERROR */
	}
	if (!pn_buf_append(&r->rs->body, ptr, n))
		return 0;
	return n;
}

/* The headers as one JSON object, and Retry-After (seconds) when given. */
static void
headers_json(header_list *hl, query_response *rs)
{
	pn_buf_reset(&rs->headers);
	pn_buf_append(&rs->headers, "{", 1);
	for (int i = 0; i < hl->n; i++)
	{
		long long	secs;

		if (i > 0)
			pn_buf_append(&rs->headers, ", ", 2);
		pn_json_escape(&rs->headers, hl->names[i].data, hl->names[i].len);
		pn_buf_append(&rs->headers, ": ", 2);
		pn_json_escape(&rs->headers, hl->values[i].data, hl->values[i].len);
		if (strcasecmp(hl->names[i].data, "retry-after") == 0 &&
			sscanf(hl->values[i].data, "%lld", &secs) == 1 && secs > 0 && secs < 86400 * 30)
			rs->retry_after_ms = secs * 1000;
	}
	pn_buf_append(&rs->headers, "}", 1);
}

/* A header name: an HTTP token. */
static bool
token_valid(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s >= 0x7F || strchr("\"(),/:;<=>?@[\\]{}", *s) != NULL)
			return false;
	return true;
}

/* The request's header lines; NULL (rs->error set) when one is not valid. */
static struct curl_slist *
request_headers(const query_request *rq, query_response *rs)
{
	struct curl_slist *h = NULL,
			   *t;
	bool		has_type = false,
				has_accept = false;
	pn_buf		line;

	pn_buf_init(&line);
	for (int i = 0; i < rq->n_headers; i++)
	{
		const char *name = rq->header_names[i],
				   *value = rq->header_values[i];

		if (!token_valid(name) || strpbrk(value, "\r\n") != NULL)
		{
			snprintf(rs->error, sizeof(rs->error), "a request header the database built is not valid");
			goto fail;
		}
		has_type = has_type || strcasecmp(name, "Content-Type") == 0;
		has_accept = has_accept || strcasecmp(name, "Accept") == 0;
		pn_buf_reset(&line);
		/* "Name;" is libcurl's way to send a header with an empty value */
		pn_buf_appendf(&line, value[0] ? "%s: %s" : "%s;", name, value);
		if (line.failed || (t = curl_slist_append(h, line.data)) == NULL)
			goto oom;
		h = t;
	}
	/* nothing of libcurl's own: no Accept, no form Content-Type, no Expect */
	if (!has_accept)
	{
		if ((t = curl_slist_append(h, "Accept:")) == NULL)
			goto oom;
		h = t;
	}
	if (!has_type)
	{
		if ((t = curl_slist_append(h, "Content-Type:")) == NULL)
			goto oom;
		h = t;
	}
	if ((t = curl_slist_append(h, "Expect:")) == NULL)
		goto oom;
	pn_buf_free(&line);
	return t;
oom:
	snprintf(rs->error, sizeof(rs->error), "out of memory");
fail:
	pn_buf_free(&line);
	curl_slist_free_all(h);
	return NULL;
}

/* The method: upper-case letters (GET, POST, ...). */
static bool
method_valid(const char *m)
{
	if (*m == '\0' || strlen(m) > 16)
		return false;
	for (; *m; m++)
		if (*m < 'A' || *m > 'Z')
			return false;
	return true;
}

/*
 * Sends rq with easy (reset first; its connections are kept for the next
 * request) and fills rs: true when a response came (rs->status), false
 * with rs->error a coarse class (which may be logged) when none did.
 */
bool
http_send(CURL *easy, const query_request *rq, query_response *rs)
{
	header_list *hl = calloc(1, sizeof(header_list));
	receiving	r = {rs, hl, rq->max_response, false};
	struct curl_slist *h;
	char		curl_error[CURL_ERROR_SIZE] = "";
	bool		blocked = false;
	CURLcode	rc;

	rs->status = 0;
	if (hl == NULL)
	{
		snprintf(rs->error, sizeof(rs->error), "out of memory");
		return false;
	}
	if (!method_valid(rq->method))
	{
		snprintf(rs->error, sizeof(rs->error), "the method the database built is not valid");
		free(hl);
		return false;
	}
	if ((h = request_headers(rq, rs)) == NULL)
	{
		free(hl);
		return false;
	}
	curl_easy_reset(easy);
	curl_easy_setopt(easy, CURLOPT_URL, rq->url);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
	if (strcmp(rq->method, "GET") == 0 && rq->body == NULL)
		curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
	else
	{
		curl_easy_setopt(easy, CURLOPT_POST, 1L);
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long) (rq->body ? rq->body_len : 0));
		if (strcmp(rq->method, "POST") != 0)
			curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, rq->method);
	}
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long) rq->timeout_ms);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long) cfg.connect_timeout_ms);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, &r);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, curl_error);
	pn_curl_guard(easy, cfg.allow_private, &blocked);
	rc = curl_easy_perform(easy);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(h);
	if (rc == CURLE_OK)
	{
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &rs->status);
		headers_json(hl, rs);
		if (hl->overflow || rs->headers.failed || rs->body.failed)
		{
			rs->status = 0;
			snprintf(rs->error, sizeof(rs->error), hl->overflow ? "too many response headers"
					 : "out of memory");
		}
	}
	else if (blocked)
		snprintf(rs->error, sizeof(rs->error),
				 "address not allowed (not public; see PAYNOTIFY_RECONCILE_ALLOW_PRIVATE)");
	else if (r.too_large)
		snprintf(rs->error, sizeof(rs->error), "response larger than %lld bytes (%s)", rq->max_response,
				 rq->max_setting);
	else
	{
		char		detail[CURL_ERROR_SIZE];

		/* libcurl's text names the host and port, never the request's headers */
		pn_log_text(detail, sizeof(detail), curl_error);
		snprintf(rs->error, sizeof(rs->error), "%s%s%s", pn_curl_error_class(rc),
				 detail[0] ? ": " : "", detail);
	}
	headers_clear(hl);
	free(hl);
	return rs->status > 0;
}
