/*
 * cgi_request.c
 *	  The request path: read one request's environment once into a
 *	  pn_request (method, channel, CONTENT_LENGTH, headers as JSON), read its
 *	  body under the cap, call the database, and write the reply.
 *
 * The same code serves CGI (environ, stdin, stdout) and FastCGI (an
 * FCGX_Request's params and streams); only the pn_io differs.  Header values
 * and the body are never logged: they may carry signatures.
 */
#include "cgi.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/*
 * True when s[0..n) is well-formed UTF-8 (pn_utf8_len) without NUL: what
 * jsonb accepts, as it rejects invalid UTF-8 and cannot hold \u0000.  The
 * caller refuses the request otherwise rather than altering a header.
 */
static bool
utf8_valid(const char *s, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		size_t		k = pn_utf8_len(s + i, n - i);

		if (k == 0 || s[i] == '\0')
			return false;
		i += k;
	}
	return true;
}

/* The environment variables a request is read from, found in one pass. */
typedef struct request_env
{
	const char *method;
	const char *path_info;
	const char *script_name;
	const char *request_uri;
	const char *content_length;
	const char *content_type;
	const char *remote_addr;
} request_env;

/* One header on its way into the JSON object. */
typedef struct header
{
	pn_buf		name;			/* lower case, '_' turned into '-' */
	pn_buf		value;			/* repeated headers joined with ", " */
} header;

typedef struct header_list
{
	header	   *items;
	size_t		n;
	size_t		cap;
} header_list;

/* Where each CGI meta-variable we use lands in request_env. */
static const struct
{
	const char *name;
	size_t		offset;
}			env_fields[] = {
	{"REQUEST_METHOD", offsetof(request_env, method)},
	{"PATH_INFO", offsetof(request_env, path_info)},
	{"SCRIPT_NAME", offsetof(request_env, script_name)},
	{"REQUEST_URI", offsetof(request_env, request_uri)},
	{"CONTENT_LENGTH", offsetof(request_env, content_length)},
	{"CONTENT_TYPE", offsetof(request_env, content_type)},
	{"REMOTE_ADDR", offsetof(request_env, remote_addr)},
};

#define HTTP_PREFIX "HTTP_"
#define BODY_CHUNK 65536
/* most that is read and thrown away after a refusal (see drain_body) */
#define DRAIN_MAX (16ULL * 1024 * 1024)

static void read_env(request_env *env, char **envp);
static void find_channel(pn_request *req, const request_env *env);
static void parse_length(pn_request *req, const char *value);
static pn_status collect_headers(pn_request *req, const request_env *env,
								 char **envp);
static pn_status header_add(header_list *list, const char *name,
							size_t name_len, const char *value, bool replace);
static void headers_free(header_list *list);
static void drain_body(pn_request *req, pn_io *io);

/*
 * Fills req from the request's environment and returns the first reason to
 * refuse it before reading the body (404, 405, 400, 413), or PN_OK.  req
 * must be released with pn_request_free whatever this returns.
 */
pn_status
pn_request_init(pn_request *req, char **envp)
{
	request_env env;

	memset(req, 0, sizeof(*req));
	read_env(&env, envp);
	req->method = env.method ? env.method : "";
	pn_refused_client(req->client, sizeof(req->client), env.remote_addr);
	find_channel(req, &env);
	parse_length(req, env.content_length);
	req->header_status = collect_headers(req, &env, envp);

	if (req->channel[0] == '\0')
		return PN_NOT_FOUND;
	if (strcmp(req->method, "POST") != 0)
		return PN_METHOD;
	if (req->length_status != PN_OK)
		return req->length_status;
	return req->header_status;
}

/* Releases everything pn_request_init and pn_request_read_body allocated. */
void
pn_request_free(pn_request *req)
{
	pn_buf_free(&req->body);
	pn_buf_free(&req->headers);
}

/*
 * Reads the body: exactly CONTENT_LENGTH bytes when it is given, else up to
 * the end of input.  Refuses with 413 as soon as the declared or the actual
 * size exceeds max, without reading on; a body shorter than declared is 400.
 */
pn_status
pn_request_read_body(pn_request *req, pn_io *io, unsigned long long max)
{
	unsigned long long want;

	if (req->has_length && req->content_length > max)
		return PN_TOO_LARGE;
	/* without a length, read one byte past the cap to see if there is more */
	want = req->has_length ? req->content_length : max + 1;
	if (!pn_buf_reserve(&req->body, req->has_length ? (size_t) want : 0))
		return PN_UNAVAILABLE;
	while (req->body.len < want)
	{
		size_t		chunk = BODY_CHUNK;
		long		got;

		if (want - req->body.len < chunk)
			chunk = (size_t) (want - req->body.len);
		if (!pn_buf_reserve(&req->body, chunk))
			return PN_UNAVAILABLE;
		got = io->read(io, req->body.data + req->body.len, chunk);
		if (got < 0)
		{
			pn_log("reading the request body failed");
			return PN_BAD_REQUEST;
		}
		if (got == 0)
			break;
		req->body.len += (size_t) got;
	}
	if (req->body.len > max)
		return PN_TOO_LARGE;
	if (req->has_length && req->body.len < want)
		return PN_BAD_REQUEST;
	return PN_OK;
}

/*
 * Serves one request on io: refuse it, or call the database and relay the
 * row.  Returns 0 when a reply was written, -1 when writing failed.
 */
int
pn_serve(pn_io *io, char **envp, const pn_config *cfg, pn_db *db)
{
	pn_request	req;
	PGresult   *res = NULL;
	pn_status	status;
	int			rc;

	status = pn_request_init(&req, envp);
	if (status == PN_OK)
		status = pn_request_read_body(&req, io,
									  (unsigned long long) cfg->max_body);
	if (io->received != NULL)
		io->received(io);
	if (status == PN_OK)
		status = pn_db_call(db, &req, &res);
	io->sent_status = 0;
	rc = (status == PN_OK) ? pn_reply_row(io, res) : pn_reply_error(io, status);
	/* a refused request (4xx) has its log line; forged ones are seen there */
	if (io->sent_status >= 400 && io->sent_status <= 499)
		pn_refused(req.channel, io->sent_outcome, io->sent_status, req.client);
	if (status != PN_OK && io->drain)
		drain_body(&req, io);
	PQclear(res);
	pn_request_free(&req);
	return rc;
}

/*
 * After a refusal that left the body unread, reads and discards the rest of
 * it (what CONTENT_LENGTH still promises, else up to the end of input; at
 * most DRAIN_MAX bytes).  The reply is already written: this only lets a CGI
 * wrapper such as fcgiwrap, which feeds the whole body to stdin before it
 * reads the reply, finish instead of failing with EPIPE and answering 502.
 * FastCGI needs none of this: libfcgi drains the connection as it closes it.
 */
static void
drain_body(pn_request *req, pn_io *io)
{
	char		buf[8192];
	unsigned long long left = DRAIN_MAX;

	if (req->has_length && req->body.len <= req->content_length &&
		req->content_length - req->body.len < left)
		left = req->content_length - req->body.len;
	while (left > 0)
	{
		long		got = io->read(io, buf, left < sizeof(buf) ? (size_t) left : sizeof(buf));

		if (got <= 0)
			break;
		left -= (unsigned long long) got;
	}
}

/* Picks the meta-variables we use out of envp ("NAME=value" strings). */
static void
read_env(request_env *env, char **envp)
{
	memset(env, 0, sizeof(*env));
	for (char **p = envp; p && *p; p++)
	{
		for (size_t i = 0; i < sizeof(env_fields) / sizeof(env_fields[0]); i++)
		{
			size_t		len = strlen(env_fields[i].name);

			if (strncmp(*p, env_fields[i].name, len) == 0 && (*p)[len] == '=')
			{
				const char **slot = (const char **) ((char *) env + env_fields[i].offset);

				/* the first occurrence wins, as with getenv() */
				if (*slot == NULL)
					*slot = *p + len + 1;
			}
		}
	}
}

/* True for the bytes a channel name may contain: [A-Za-z0-9_]. */
static bool
channel_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '_';
}

/*
 * The channel is the last segment of the request path: PATH_INFO, else
 * SCRIPT_NAME, else REQUEST_URI without its query.  It must match
 * ^[A-Za-z0-9_]{1,63}$; otherwise req->channel stays empty (404).
 */
static void
find_channel(pn_request *req, const request_env *env)
{
	const char *path;
	size_t		len;
	size_t		start;

	if (env->path_info && env->path_info[0])
		path = env->path_info;
	else if (env->script_name && env->script_name[0])
		path = env->script_name;
	else if (env->request_uri)
		path = env->request_uri;
	else
		return;
	len = strcspn(path, "?#");
	start = len;
	while (start > 0 && path[start - 1] != '/')
		start--;
	if (len - start < 1 || len - start > PN_CHANNEL_MAX)
		return;
	for (size_t i = start; i < len; i++)
		if (!channel_char(path[i]))
			return;
	memcpy(req->channel, path + start, len - start);
	req->channel[len - start] = '\0';
}

/*
 * CONTENT_LENGTH: unset or empty means "read to the end of input"; digits
 * only, else 400; a number too large for any type is simply too large (413).
 */
static void
parse_length(pn_request *req, const char *value)
{
	req->length_status = PN_OK;
	if (value == NULL || value[0] == '\0')
		return;
	switch (pn_parse_unsigned(value, ULLONG_MAX, &req->content_length))
	{
		case PN_NUMBER_OK:
			req->has_length = true;
			break;
		case PN_NUMBER_RANGE:
			req->length_status = PN_TOO_LARGE;
			break;
		case PN_NUMBER_INVALID:
			req->length_status = PN_BAD_REQUEST;
			break;
	}
}

/* Whether an HTTP_* name (without the prefix) is X_PAYNOTIFY_CLIENT, as header_add names it. */
static bool
is_client_header(const char *name, size_t len)
{
	static const char own[] = "x-paynotify-client";

	if (len != sizeof(own) - 1)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		char		c = name[i];

		c = (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : (c == '_' ? '-' : c);
		if (c != own[i])
			return false;
	}
	return true;
}

/*
 * Builds the headers JSON object: every HTTP_* variable, named in lower case
 * with '_' as '-', plus CONTENT_TYPE as "content-type" when not empty, and
 * REMOTE_ADDR as "x-paynotify-client" (any the client sent is dropped, also
 * when there is no REMOTE_ADDR) for paynotify.delivery_history.
 * Values keep their case and bytes.  Returns 400 when a name or value is not
 * valid UTF-8 (jsonb could not hold it, and changing it would be worse).
 */
static pn_status
collect_headers(pn_request *req, const request_env *env, char **envp)
{
	header_list list = {0};
	pn_status	status = PN_OK;
	pn_buf	   *out = &req->headers;

	for (char **p = envp; p && *p && status == PN_OK; p++)
	{
		const char *eq = strchr(*p, '=');
		size_t		prefix = strlen(HTTP_PREFIX);

		if (eq == NULL || strncmp(*p, HTTP_PREFIX, prefix) != 0 ||
			eq - *p <= (long) prefix)
			continue;
		/* the shim's own header: never the client's, even without REMOTE_ADDR */
		if (is_client_header(*p + prefix, (size_t) (eq - *p) - prefix))
			continue;
		status = header_add(&list, *p + prefix, (size_t) (eq - *p) - prefix,
							eq + 1, false);
	}
	if (status == PN_OK && env->content_type && env->content_type[0])
		status = header_add(&list, "CONTENT_TYPE", strlen("CONTENT_TYPE"),
							env->content_type, true);
	if (status == PN_OK && env->remote_addr && env->remote_addr[0])
		status = header_add(&list, "X_PAYNOTIFY_CLIENT", strlen("X_PAYNOTIFY_CLIENT"),
							env->remote_addr, true);

	pn_buf_append(out, "{", 1);
	for (size_t i = 0; i < list.n && status == PN_OK; i++)
	{
		if (i > 0)
			pn_buf_append(out, ",", 1);
		pn_json_escape(out, list.items[i].name.data, list.items[i].name.len);
		pn_buf_append(out, ":", 1);
		pn_json_escape(out, list.items[i].value.data, list.items[i].value.len);
	}
	pn_buf_append(out, "}", 1);
	if (status == PN_OK && out->failed)
		status = PN_UNAVAILABLE;
	headers_free(&list);
	return status;
}

/*
 * Adds one header to the list.  A repeated name is joined to the earlier
 * value with ", " (RFC 9110 5.3), or replaces it when replace is set.
 */
static pn_status
header_add(header_list *list, const char *name, size_t name_len,
		   const char *value, bool replace)
{
	pn_buf		lname = {0};
	size_t		value_len = strlen(value);
	header	   *h = NULL;

	if (!utf8_valid(name, name_len) || !utf8_valid(value, value_len))
		return PN_BAD_REQUEST;
	if (!pn_buf_reserve(&lname, name_len))
		return PN_UNAVAILABLE;
	for (size_t i = 0; i < name_len; i++)
	{
		char		c = name[i];

		c = (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : (c == '_' ? '-' : c);
		pn_buf_append(&lname, &c, 1);
	}
	for (size_t i = 0; i < list->n && h == NULL; i++)
		if (strcmp(list->items[i].name.data, lname.data) == 0)
			h = &list->items[i];
	if (h != NULL)
	{
		pn_buf_free(&lname);
		if (replace)
			h->value.len = 0;
		else
			pn_buf_append(&h->value, ", ", 2);
		pn_buf_append(&h->value, value, value_len);
		return h->value.failed ? PN_UNAVAILABLE : PN_OK;
	}
	if (list->n == list->cap)
	{
		size_t		cap = list->cap ? list->cap * 2 : 32;
		header	   *items = realloc(list->items, cap * sizeof(header));

		if (items == NULL)
		{
			pn_buf_free(&lname);
			return PN_UNAVAILABLE;
		}
		list->items = items;
		list->cap = cap;
	}
	h = &list->items[list->n++];
	h->name = lname;
	memset(&h->value, 0, sizeof(h->value));
	pn_buf_append(&h->value, value, value_len);
	return h->value.failed ? PN_UNAVAILABLE : PN_OK;
}

/* Frees the list built by header_add. */
static void
headers_free(header_list *list)
{
	for (size_t i = 0; i < list->n; i++)
	{
		pn_buf_free(&list->items[i].name);
		pn_buf_free(&list->items[i].value);
	}
	free(list->items);
}
