/*
 * relay_http.c
 *	  The POSTs of one batch with one libcurl multi handle: each signed
 *	  delivery started as the limits allow, its result kept in its job.
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

static bool
start_job(CURLM *multi, job *j)
{
	char		line[256];
	char		sig[128];
	long long	ts = (long long) time(NULL);
	struct curl_slist *h = NULL,
			   *t;

	j->state = JOB_DONE;
	if (j->secret_len < 0)
	{
		snprintf(j->error, sizeof(j->error), "endpoint secret is not whsec_ base64");
		return false;
	}
	if (!sign(j, ts, sig, sizeof(sig)))
	{
		snprintf(j->error, sizeof(j->error), "signing failed");
		return false;
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
	return true;
oom:
	curl_slist_free_all(h);
	j->headers = NULL;
	snprintf(j->error, sizeof(j->error), "out of memory");
	return false;
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

/*
 * POSTs the jobs: starts what the limits allow, until every job is done or
 * may no longer start (deadline, SIGTERM) and none is running.
 */
void
run_jobs(CURLM *multi, job *jobs, int n)
{
	long long	deadline = pn_now_ms() + 2 * cfg.timeout_ms;
	int			running = 0;

	for (;;)
	{
		bool		may_start = !stop_requested && pn_now_ms() < deadline;
		int			still,
					left;
		CURLMsg    *msg;

		for (int i = 0; may_start && i < n && running < cfg.max_in_flight; i++)
		{
			if (jobs[i].state != JOB_WAITING || *jobs[i].in_flight >= jobs[i].max_in_flight)
				continue;
			if (start_job(multi, &jobs[i]))
			{
				running++;
				(*jobs[i].in_flight)++;
			}
		}
		if (running == 0)
			break;
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
			running--;
			(*j->in_flight)--;
		}
		if (running > 0)
			curl_multi_poll(multi, NULL, 0, 50, NULL);
	}
}
