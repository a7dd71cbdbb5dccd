/*
 * relay_http.c
 *	  The POSTs, with one libcurl multi handle: each leased delivery is
 *	  signed and started at once, its result kept in its job until the
 *	  loop has it recorded.
 */
#include "relay.h"

#include <stdio.h>
#include <string.h>

static size_t
discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	(void) ptr;
	(void) userdata;
	return size * nmemb;
}

/*
 * What is recorded in last_error, which operators (admin) read: a coarse
 * class, never libcurl's text (which names addresses, ports and what
 * answered there).  The relay's own log has the details (--verbose=1).
 */
static const char *
error_class(const job *j, CURLcode rc)
{
	if (j->blocked)
		return "address not allowed (not public; see PAYNOTIFY_RELAY_ALLOW_PRIVATE)";
	return pn_curl_error_class(rc);
}

/*
 * Starts the POST of a leased delivery: JOB_RUNNING, or JOB_DONE with the
 * reason when it could not start (a failed attempt).
 */
void
start_job(CURLM *multi, job *j)
{
	char		line[256];
	char		sig[128];
	long long	ts = (long long) time(NULL);
	struct curl_slist *h = NULL,
			   *t;

	j->state = JOB_DONE;
	j->released = false;
	j->status = 0;
	j->error[0] = '\0';
	if (j->secret_len < 0)
	{
		snprintf(j->error, sizeof(j->error), "endpoint secret is not whsec_ base64");
		return;
	}
	if (!sign(j, ts, sig, sizeof(sig)))
	{
		snprintf(j->error, sizeof(j->error), "signing failed");
		return;
	}
#define ADD(...) do { snprintf(line, sizeof(line), __VA_ARGS__); \
		t = curl_slist_append(h, line); if (t == NULL) goto oom; h = t; } while (0)
	ADD("Content-Type: application/json");
	ADD("webhook-id: %s", j->webhook_id);
	ADD("webhook-timestamp: %lld", ts);
	ADD("webhook-signature: %s", sig);
	ADD("User-Agent: %s/%s", PN_PROGRAM, PAYNOTIFY_VERSION);
	ADD("Expect:");
#undef ADD
	j->easy = curl_easy_init();
	if (j->easy == NULL)
		goto oom;
	j->headers = h;
	j->curl_error[0] = '\0';
	curl_easy_setopt(j->easy, CURLOPT_URL, j->url);
	curl_easy_setopt(j->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(j->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDSIZE, (long) j->body_len);
	curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, (long) cfg.timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) cfg.connect_timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(j->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->curl_error);
	curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
	/* every connection is checked (unless allow_private); no proxy */
	pn_curl_guard(j->easy, cfg.allow_private, &j->blocked);
	if (curl_multi_add_handle(multi, j->easy) != CURLM_OK)
	{
		curl_easy_cleanup(j->easy);
		j->easy = NULL;
		goto oom;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->started);
	j->state = JOB_RUNNING;
	return;
oom:
	curl_slist_free_all(h);
	j->headers = NULL;
	snprintf(j->error, sizeof(j->error), "out of memory");
}

static void
finish_job(CURLM *multi, job *j, CURLcode rc)
{
	long		code = 0;

	curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
	if (rc == CURLE_OK)
	{
		j->status = code;
		if (code < 200 || code > 299)
			snprintf(j->error, sizeof(j->error), "HTTP %ld", code);
	}
	else
		snprintf(j->error, sizeof(j->error), "%s", error_class(j, rc));
	curl_multi_remove_handle(multi, j->easy);
	curl_easy_cleanup(j->easy);
	curl_slist_free_all(j->headers);
	j->easy = NULL;
	j->headers = NULL;
	j->state = JOB_DONE;
	if (cfg.verbose >= 2 || (cfg.verbose >= 1 && (j->status < 200 || j->status > 299)))
		pn_log("delivery %s (%s) to endpoint %s: %s%s%.190s", j->delivery_id, j->webhook_id,
			   j->endpoint_id, j->status >= 200 && j->status <= 299 ? "delivered" : j->error,
			   rc != CURLE_OK && j->curl_error[0] ? ": " : "", rc != CURLE_OK ? j->curl_error : "");
}

/* The finished requests: each one's job JOB_DONE.  How many. */
static int
collect(CURLM *multi)
{
	CURLMsg    *msg;
	int			left,
				still,
				finished = 0;

	curl_multi_perform(multi, &still);
	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
	{
		job		   *j = NULL;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &j);
		if (j == NULL)
			continue;
		finish_job(multi, j, msg->data.result);
		finished++;
	}
	return finished;
}

/*
 * Moves the running requests on: the number that finished (their jobs
 * JOB_DONE).  When none has, waits up to wait_ms for one to, or for the
 * database connection's socket pg_sock (-1: none) to be readable, which
 * sets *pg_ready.  A signal ends the wait early.
 */
int
pump_jobs(CURLM *multi, long long wait_ms, int pg_sock, bool *pg_ready)
{
	struct curl_waitfd pg = {0};
	int			finished = collect(multi),
				nfds = 0;

	*pg_ready = false;
	if (finished > 0 || wait_ms <= 0 || stop_requested)
		return finished;
	if (pg_sock >= 0)
	{
		pg.fd = pg_sock;
		pg.events = CURL_WAIT_POLLIN;
		nfds = 1;
	}
	curl_multi_poll(multi, nfds ? &pg : NULL, nfds, wait_ms > 1000 ? 1000 : (int) wait_ms, NULL);
	*pg_ready = nfds && (pg.revents & CURL_WAIT_POLLIN);
	return collect(multi);
}
