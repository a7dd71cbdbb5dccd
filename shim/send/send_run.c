/*
 * send_run.c
 *		The sources the engine (send_http.c) asks for what to send next,
 *		one per mode: the generator's requests in order (one, storm,
 *		distinct, bad) or re-deliveries on the gateway's schedule (retry);
 *		and the counting of every reply, the ledger and the progress line.
 */
#include "send_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* The gateway's own rule for "acknowledged" (docs/GATEWAYS.md 1.10, 2.9, 3.7). */
static bool
is_ack(enum pn_gateway gw, const struct pn_reply *rep)
{
	if (rep->curl_code != 0)
		return false;
	switch (gw)
	{
		case PN_WXPAY:
			return rep->status == 200 || rep->status == 204;
		case PN_ALIPAY:
			return rep->status >= 200 && rep->status < 300 &&
				rep->body_len == 7 && memcmp(rep->body, "success", 7) == 0;
		default:
			return rep->status >= 200 && rep->status < 300;
	}
}

static void
count(struct pn_stats *s, const struct pn_reply *rep, bool ack)
{
	s->deliveries++;
	if (rep->curl_code != 0)
	{
		s->transport_errors++;
		s->curlerr[rep->curl_code < PN_MAX_CURLERR ? rep->curl_code : PN_MAX_CURLERR - 1]++;
		return;
	}
	s->replies++;
	if (ack)
		s->acked++;
	s->status[rep->status >= 0 && rep->status < PN_MAX_STATUS ? rep->status : 0]++;
	pn_stats_outcome(s, rep->outcome);
	pn_stats_latency(s, rep->latency);
}

/*
 * Appends one line for a finished delivery to the ledger (tab-separated):
 * UTC time of the reply, channel, event, notification id, order number,
 * delivery number, HTTP status (0 = no reply), outcome (Paynotify-Outcome,
 * "none" when absent), 1 when the gateway counts the reply as an
 * acknowledgement else 0, the bad kind ("-" for a good request), and the
 * seconds from the request's start to its reply (the time it was sent is
 * the first column less this one).
 * Several senders may append to one file: each line is one write(2) on a
 * descriptor opened with O_APPEND.  A failed write fails the run.
 */
static void
ledger_line(struct run *run, const struct pn_req *req, const struct pn_reply *rep, bool ack)
{
	struct pn_buf b;
	struct timespec ts;
	struct tm	tm;
	char		when[32];
	ssize_t		w;

	if (run->ledger_fd < 0 || run->ledger_failed)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	pn_buf_init(&b);
	pn_buf_printf(&b, "%s.%06ldZ\t%s\t%s\t%s\t%s\t%u\t%ld\t%s\t%d\t%s\t%.6f\n", when,
				  ts.tv_nsec / 1000, run->channel, event_names[run->conf->event],
				  req->notify_id, req->order_no, req->attempt + 1,
				  rep->curl_code == 0 ? rep->status : 0L, rep->outcome ? rep->outcome : "none",
				  ack ? 1 : 0, req->bad == PN_BAD_NONE ? "-" : pn_bad_names[req->bad], rep->latency);
	w = write(run->ledger_fd, b.data, b.len);
	if (w < 0 || (size_t) w != b.len)
	{
		pn_log("cannot write the ledger \"%s\": %s", run->o->ledger,
				w < 0 ? strerror(errno) : "short write");
		run->ledger_failed = true;
	}
	pn_buf_free(&b);
}

/* Appends buf to a file opened with O_APPEND in one write(2); false if it failed. */
static bool
append_line(int fd, const struct pn_buf *b, const char *what, const char *path)
{
	ssize_t		w = write(fd, b->data, b->len);

	if (w >= 0 && (size_t) w == b->len)
		return true;
	pn_log("cannot write the %s \"%s\": %s", what, path, w < 0 ? strerror(errno) : "short write");
	return false;
}

/*
 * --sales and --drop for a request taken from the generator: the first
 * delivery of a notification appends its sale to --sales; returns true
 * when --drop loses the notification, which is then never delivered (the
 * ledger gets one line for it: status 0, outcome "dropped").  Deliberately
 * bad requests are not sales (the options refuse --mode bad).
 */
bool
run_take_sale(struct run *run, const struct pn_req *req)
{
	const struct opts *o = run->o;
	bool		dropped;
	bool		first = req->attempt == 0;

	if (req->bad != PN_BAD_NONE || req->shared_seen)
		return false;
	dropped = pn_is_dropped(run->conf, o->drop, req->order_index);
	if (first && run->sales_fd >= 0 && !run->sales_failed)
	{
		struct pn_sale sale;
		struct pn_buf b;

		pn_sale_of(run->conf, req, &sale);
		snprintf(sale.channel, sizeof(sale.channel), "%s", run->channel);
		sale.dropped = dropped;
		pn_buf_init(&b);
		pn_sale_line(&sale, &b);
		if (!append_line(run->sales_fd, &b, "sales file", o->sales))
			run->sales_failed = true;
		pn_buf_free(&b);
	}
	if (dropped && first)
	{
		struct pn_reply rep = {0};

		rep.outcome = "dropped";
		ledger_line(run, req, &rep, false);
		run->dropped++;
		if (o->verbose)
			fprintf(stderr, "%s %s: dropped (--drop), never delivered\n", req->order_no,
					req->notify_id);
	}
	return dropped;
}

/* Common bookkeeping for every finished request; returns the ack verdict. */
static bool
account(struct run *run, const struct pn_req *req, const struct pn_reply *rep)
{
	bool		ack = is_ack(run->conf->gateway, rep);

	ledger_line(run, req, rep, ack);
	count(&run->total, rep, ack);
	if (run->o->mode == MODE_BAD)
		count(&run->kind[req->bad], rep, ack);
	run->finished++;
	run->t_end = pn_mono_now();
	if (run->o->verbose)
		fprintf(stderr, "%s %s attempt %u: %ld %s %.2f ms%s%s\n",
				req->order_no, req->notify_id, req->attempt + 1, rep->status,
				rep->outcome, rep->latency * 1000.0, rep->curl_error ? " " : "",
				rep->curl_error ? rep->curl_error : "");
	return ack;
}

static void
progress(void *ctx, double now)
{
	struct run *run = ctx;
	double		el = now - run->t0;

	if (run->o->quiet || now < run->next_progress)
		return;
	run->next_progress += 2.0;
	if (run->o->mode == MODE_RETRY)
		fprintf(stderr, "[%7.1f s] %zu deliveries, %llu/%zu acknowledged, %zu waiting to retry, %llu transport errors\n",
				el, run->finished, (unsigned long long) (run->n_notif - run->unacked),
				run->n_notif, run->heap_len,
				(unsigned long long) run->total.transport_errors);
	else
		fprintf(stderr, "[%7.1f s] %zu/%zu done, %.0f req/s, %zu in flight, %llu transport errors\n",
				el, run->finished, run->planned, el > 0 ? run->finished / el : 0.0,
				run->sent - run->finished, (unsigned long long) run->total.transport_errors);
}

/* ------------------------------------------------- sources: one-shot modes */

/* one, storm, distinct, bad: the generator's requests, in order. */
static struct pn_req *
seq_next(void *ctx, double now, int active, double *wait)
{
	struct run *run = ctx;
	struct pn_req *r;
	bool		more;

	(void) now;
	if (run->shared_req)
	{
		if (run->sent == 0 && !run->shared_req->shared_seen)
		{
			run->shared_dropped = run_take_sale(run, run->shared_req);
			run->shared_req->shared_seen = true;
		}
		if (run->sent >= run->planned || run->shared_dropped)
		{
			*wait = -1;
			return NULL;
		}
		run->sent++;
		return run->shared_req;
	}
	for (;;)
	{
		r = pn_gen_take(run->gen, active == 0, &more);
		if (!r)
		{
			*wait = more ? 0.001 : -1;
			return NULL;
		}
		if (!run_take_sale(run, r))
			break;
		pn_req_free(r);			/* lost by the gateway: never sent */
	}
	run->sent++;
	return r;
}

static void
seq_done(void *ctx, struct pn_req *req, const struct pn_reply *rep)
{
	struct run *run = ctx;

	account(run, req, rep);
	if (run->o->mode != MODE_ONE)
		return;
	run->one_status = rep->status;
	run->one_latency = rep->latency;
	snprintf(run->one_outcome, sizeof(run->one_outcome), "%s", rep->outcome);
	snprintf(run->one_error, sizeof(run->one_error), "%s", rep->curl_error ? rep->curl_error : "");
	snprintf(run->one_notify_id, sizeof(run->one_notify_id), "%s", req->notify_id);
	snprintf(run->one_order_no, sizeof(run->one_order_no), "%s", req->order_no);
	if (rep->headers)
		pn_buf_put(&run->one_headers, rep->headers, strlen(rep->headers));
	pn_buf_put(&run->one_body, rep->body, rep->body_len);
}

/* ------------------------------------------------------ source: retry mode */

static void
heap_push(struct run *run, double due, uint32_t slot, uint32_t attempt)
{
	size_t		i = run->heap_len++;

	while (i > 0)
	{
		size_t		parent = (i - 1) / 2;

		if (run->heap[parent].due <= due)
			break;
		run->heap[i] = run->heap[parent];
		i = parent;
	}
	run->heap[i].due = due;
	run->heap[i].slot = slot;
	run->heap[i].attempt = attempt;
}

static struct sched_item
heap_pop(struct run *run)
{
	struct sched_item top = run->heap[0],
				last = run->heap[--run->heap_len];
	size_t		i = 0;

	for (;;)
	{
		size_t		c = 2 * i + 1;

		if (c >= run->heap_len)
			break;
		if (c + 1 < run->heap_len && run->heap[c + 1].due < run->heap[c].due)
			c++;
		if (last.due <= run->heap[c].due)
			break;
		run->heap[i] = run->heap[c];
		i = c;
	}
	if (run->heap_len > 0)
		run->heap[i] = last;
	return top;
}

/* Due re-deliveries first (signed here, freshly), then first deliveries. */
static struct pn_req *
retry_next(void *ctx, double now, int active, double *wait)
{
	struct run *run = ctx;
	struct pn_req *r;
	bool		more;

	if (run->heap_len > 0 && run->heap[0].due <= now)
	{
		struct sched_item it = heap_pop(run);

		r = pn_build(run->conf, run->signer, run->o->start + it.slot, it.attempt, PN_BAD_NONE);
		r->slot = it.slot;
		run->sent++;
		return r;
	}
	while ((r = pn_gen_take(run->gen, active == 0 && run->heap_len == 0, &more)) != NULL)
	{
		if (!run_take_sale(run, r))
		{
			run->sent++;
			return r;
		}
		run->unacked--;			/* lost by the gateway: never sent */
		pn_req_free(r);
	}
	if (more)
		*wait = 0.001;
	else if (run->heap_len > 0)
		*wait = run->heap[0].due - now;
	else
		*wait = active > 0 ? 1.0 : -1;
	return NULL;
}

static void
retry_done(void *ctx, struct pn_req *req, const struct pn_reply *rep)
{
	struct run *run = ctx;
	const struct opts *o = run->o;
	uint32_t	s = req->slot;
	bool		ack = account(run, req, rep);
	double		now = pn_mono_now();

	run->deliveries[s]++;
	if (run->ack_at[s])
	{
		/* an extra (at-least-once) duplicate after the acknowledgement */
		run->extra_sent++;
		if (--run->extra_left[s] > 0)
			heap_push(run, now + o->schedule[0] * o->time_scale, s, req->attempt + 1);
		return;
	}
	if (ack)
	{
		run->ack_at[s] = run->deliveries[s];
		run->to_ack[run->deliveries[s] <= MAX_SCHEDULE + 1 ? run->deliveries[s] : MAX_SCHEDULE + 1]++;
		run->unacked--;
		run->extra_left[s] = (uint16_t) o->extra;
		if (o->extra > 0)
			heap_push(run, now + o->schedule[0] * o->time_scale, s, req->attempt + 1);
	}
	else if (req->attempt < (uint32_t) o->n_schedule)
		heap_push(run, now + o->schedule[req->attempt] * o->time_scale, s, req->attempt + 1);
	else
		run->gave_up[s] = true;
}


/* The source of the run's mode. */
void
run_source(struct run *run, struct pn_source *src)
{
	src->ctx = run;
	src->next = run->o->mode == MODE_RETRY ? retry_next : seq_next;
	src->done = run->o->mode == MODE_RETRY ? retry_done : seq_done;
	src->progress = progress;
}
