/*
 * send_http.c
 *		The delivery engine of paynotify-send: one thread, one libcurl multi
 *		handle, at most `concurrency` transfers in flight.  Requests are
 *		pulled from a pn_source when a transfer slot is free and the source
 *		has something due; every finished transfer is handed back to the
 *		source with its status, Paynotify-Outcome header, body and latency.
 *
 *		Easy handles are reused, so connections are kept alive between
 *		deliveries (through the multi handle's connection cache).
 */
#include "send.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#define MAX_REPLY_BODY	(1 << 20)

/* One transfer slot. */
struct xfer
{
	CURL	   *h;
	struct curl_slist *hl;
	struct pn_req *req;
	struct pn_buf body;
	struct pn_buf hdrs;
	char		outcome[32];
	bool		capture;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud);
static size_t on_header(char *p, size_t size, size_t n, void *ud);
static int	xfer_setup(struct xfer *x, const struct pn_engine_opts *o);
static int	xfer_start(CURLM *m, struct xfer *x, struct pn_req *req);
static int	drain(CURLM *m, struct pn_source *src, struct xfer **freelist, int *nfree);

const char *
pn_curl_strerror(int code)
{
	return curl_easy_strerror((CURLcode) code);
}

/* Keeps at most MAX_REPLY_BODY bytes but consumes everything. */
static size_t
on_body(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t		len = size * n;

	if (x->body.len < MAX_REPLY_BODY)
		pn_buf_put(&x->body, p, len);
	return len;
}

/*
 * Picks Paynotify-Outcome out of the reply headers.  A new status line
 * (interim 1xx reply) starts the header block over.
 */
static size_t
on_header(char *p, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t		len = size * n;
	static const char name[] = "Paynotify-Outcome:";
	size_t		nl = sizeof(name) - 1;

	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0)
	{
		x->outcome[0] = '\0';
		if (x->capture)
			pn_buf_reset(&x->hdrs);
	}
	if (x->capture && x->hdrs.len < MAX_REPLY_BODY)
		pn_buf_put(&x->hdrs, p, len);
	if (len > nl && strncasecmp(p, name, nl) == 0)
	{
		size_t		i = nl,
					k = 0;

		while (i < len && (p[i] == ' ' || p[i] == '\t'))
			i++;
		while (i < len && p[i] != '\r' && p[i] != '\n' && k < sizeof(x->outcome) - 1)
		{
			char		c = p[i++];

			/* keep labels printable and free of JSON/shell metacharacters */
			x->outcome[k++] = (c > ' ' && c < 0x7f && c != '"' && c != '\\') ? c : '_';
		}
		while (k > 0 && x->outcome[k - 1] == '_')
			k--;
		x->outcome[k] = '\0';
	}
	return len;
}

/* Options that stay the same for every request of the run. */
static int
xfer_setup(struct xfer *x, const struct pn_engine_opts *o)
{
	if (!(x->h = curl_easy_init()))
		return -1;
	pn_buf_init(&x->body);
	pn_buf_init(&x->hdrs);
	x->capture = o->capture_headers;
	curl_easy_setopt(x->h, CURLOPT_URL, o->url);
	curl_easy_setopt(x->h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->h, CURLOPT_POST, 1L);
	curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(x->h, CURLOPT_USERAGENT, "paynotify-send/" PAYNOTIFY_VERSION);
	curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
	return 0;
}

static int
xfer_start(CURLM *m, struct xfer *x, struct pn_req *req)
{
	char		line[8192];

	x->req = req;
	x->outcome[0] = '\0';
	pn_buf_reset(&x->body);
	pn_buf_reset(&x->hdrs);
	x->hl = NULL;
	for (int i = 0; i < req->nh; i++)
	{
		snprintf(line, sizeof(line), "%s: %s", req->hname[i], req->hval[i]);
		x->hl = curl_slist_append(x->hl, line);
	}
	/* no "Expect: 100-continue" round trip; gateways send the body at once */
	x->hl = curl_slist_append(x->hl, "Expect:");
	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hl);
	curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, req->body);
	curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) req->body_len);
	req->t_start = pn_mono_now();
	if (curl_multi_add_handle(m, x->h) != CURLM_OK)
		return -1;
	return 0;
}

/* Hands every finished transfer back to the source; returns how many. */
static int
drain(CURLM *m, struct pn_source *src, struct xfer **freelist, int *nfree)
{
	CURLMsg    *msg;
	int			q,
				done = 0;

	while ((msg = curl_multi_info_read(m, &q)) != NULL)
	{
		struct xfer *x;
		struct pn_reply rep;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &x);
		memset(&rep, 0, sizeof(rep));
		rep.curl_code = (int) msg->data.result;
		rep.latency = pn_mono_now() - x->req->t_start;
		if (rep.curl_code == CURLE_OK)
			curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &rep.status);
		else
			rep.curl_error = curl_easy_strerror(msg->data.result);
		rep.outcome = x->outcome[0] ? x->outcome : "none";
		rep.body = x->body.data;
		rep.body_len = x->body.len;
		rep.headers = x->hdrs.data;
		curl_multi_remove_handle(m, x->h);
		src->done(src->ctx, x->req, &rep);
		if (!x->req->shared)
			pn_req_free(x->req);
		x->req = NULL;
		curl_slist_free_all(x->hl);
		x->hl = NULL;
		freelist[(*nfree)++] = x;
		done++;
	}
	return done;
}

/*
 * Starts transfers on the free handles while the source has requests due:
 * 0, or -1 when a transfer cannot start.  *exhausted when the source has
 * nothing more to send at all.
 */
static int
engine_fill(CURLM *m, const struct pn_engine_opts *o, struct pn_source *src,
			struct xfer **freelist, int *nfree, double now, double *wait,
			bool *exhausted)
{
	while (!*o->stop && *nfree > 0)
	{
		struct pn_req *req = src->next(src->ctx, now, o->concurrency - *nfree, wait);

		if (!req)
		{
			*exhausted = *wait < 0;
			return 0;
		}
		if (xfer_start(m, freelist[*nfree - 1], req) != 0)
		{
			pn_log("cannot start a transfer");
			if (!req->shared)
				pn_req_free(req);
			return -1;
		}
		(*nfree)--;
	}
	return 0;
}

/* Ends every transfer still running and frees the handles. */
static void
engine_free(CURLM *m, struct xfer *xs, int conc)
{
	for (int i = 0; i < conc; i++)
	{
		if (xs[i].req)
		{
			curl_multi_remove_handle(m, xs[i].h);
			if (!xs[i].req->shared)
				pn_req_free(xs[i].req);
		}
		curl_slist_free_all(xs[i].hl);
		if (xs[i].h)
		{
			curl_easy_cleanup(xs[i].h);
			pn_buf_free(&xs[i].body);
			pn_buf_free(&xs[i].hdrs);
		}
	}
	if (m)
		curl_multi_cleanup(m);
	free(xs);
}

/*
 * Runs until the source is exhausted and nothing is in flight, or until
 * *o->stop is set (then in-flight transfers are finished, nothing new is
 * started).  Returns 0, or -1 when libcurl could not be set up.
 */
int
pn_engine_run(const struct pn_engine_opts *o, struct pn_source *src)
{
	CURLM	   *m = curl_multi_init();
	int			conc = o->concurrency;
	struct xfer *xs = pn_xcalloc((size_t) conc, sizeof(struct xfer));
	struct xfer **freelist = pn_xcalloc((size_t) conc, sizeof(struct xfer *));
	int			nfree = 0,
				rc = 0,
				running = 0;

	if (!m)
		rc = -1;
	for (int i = 0; rc == 0 && i < conc; i++)
	{
		if (xfer_setup(&xs[i], o) != 0)
			rc = -1;
		else
			freelist[nfree++] = &xs[i];
	}
	if (m)
		curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long) conc + 8);

	while (rc == 0)
	{
		double		now = pn_mono_now(),
					wait = 1.0;
		bool		exhausted = false;
		long		to;

		rc = engine_fill(m, o, src, freelist, &nfree, now, &wait, &exhausted);
		if (*o->stop)
			exhausted = true;
		if (rc != 0 || (exhausted && nfree == conc))
			break;
		curl_multi_perform(m, &running);
		if (drain(m, src, freelist, &nfree) > 0 && !exhausted && !*o->stop)
		{
			if (src->progress)
				src->progress(src->ctx, pn_mono_now());
			continue;
		}
		if (src->progress)
			src->progress(src->ctx, now);
		to = 200;
		if (!exhausted && nfree > 0 && wait >= 0 && wait * 1000.0 < to)
			to = (long) (wait * 1000.0 + 0.999);
		curl_multi_poll(m, NULL, 0, (int) to, NULL);
	}

	engine_free(m, xs, conc);
	free(freelist);
	return rc;
}
