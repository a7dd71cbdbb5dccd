/*
 * paynotify-send.c
 *		A payment gateway in a box.  Signs (and for WeChat Pay encrypts)
 *		notifications exactly as WeChat Pay v3, Alipay and Stripe do, from a
 *		folder of keys, and delivers them by HTTP POST: once, as a storm of
 *		duplicates, as many distinct notifications, re-delivered on the
 *		gateway's retry schedule until acknowledged, or deliberately broken.
 *		It can also write the signed requests out instead of sending them
 *		(--dump-dir, --dump-sql) for replay by other tools, and keep a
 *		ledger of every delivery and its reply (--ledger).
 *
 *		Structure: signing threads (send_gen.c) build requests ahead into a
 *		bounded ring; the main thread runs the libcurl engine (send_http.c)
 *		with a "source" per mode that decides what to send next and counts
 *		what came back.  This file holds the options, the sources, the dumps
 *		and the reports.
 *
 *		Run with --help for every flag.
 */
#include "send.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <curl/curl.h>

#ifndef PAYNOTIFY_VERSION
#define PAYNOTIFY_VERSION	"unknown"
#endif
#define MAX_SCHEDULE	64
#define EXIT_USAGE		2

enum mode
{
	MODE_ONE,
	MODE_STORM,
	MODE_DISTINCT,
	MODE_RETRY,
	MODE_BAD
};

static const char *const mode_names[] = {"one", "storm", "distinct", "retry", "bad"};
static const char *const gateway_names[] = {"wxpay", "alipay", "stripe"};
static const char *const event_names[] = {"pay", "refund"};

/* Seconds between deliveries after a failed one (docs/GATEWAYS.md 1.10, 2.9, 3.7). */
static const double sched_wxpay[] = {15, 15, 30, 180, 600, 1200, 1800, 1800, 1800,
3600, 10800, 10800, 10800, 21600, 21600};
static const double sched_alipay[] = {240, 600, 600, 3600, 7200, 21600, 54000};
static const double sched_stripe[] = {60, 300, 1800, 3600, 7200, 14400, 28800,
43200, 43200, 43200, 43200};

/* Everything the command line decides. */
struct opts
{
	enum mode	mode;
	const char *url;
	long long	n;
	int			conc;
	long long	start;
	long		timeout_ms;
	double		time_scale;
	double		schedule[MAX_SCHEDULE];
	int			n_schedule;
	long long	extra;
	bool		same_signature;
	int			bad_kinds[PN_BAD_COUNT];
	int			n_bad_kinds;
	int			threads;
	long long	presign;
	bool		json;
	bool		quiet;
	bool		verbose;
	const char *dump_dir;
	const char *dump_sql;
	const char *channel;
	const char *ledger;
	char		order_fmt[128];
	const char *keys_dir;
	const char *wx_key;
	const char *wx_cert;
	const char *serial;
	const char *apiv3;
	const char *ali_key;
	const char *stripe_secret;
	bool		seed_given;
};

/* Mode-specific state of a run, and its counters. */
struct run
{
	struct opts *o;
	struct pn_conf *conf;
	struct pn_gen *gen;
	struct pn_signer *signer;	/* main thread's, for re-deliveries */
	struct pn_req *shared_req;	/* --same-signature */
	size_t		sent;			/* requests handed to the engine */
	size_t		planned;		/* total requests, when known up front */
	size_t		finished;
	struct pn_stats total;
	struct pn_stats kind[PN_BAD_COUNT];
	double		t0;
	double		t_end;
	double		next_progress;
	/* --ledger: one line per delivery, appended with one write(2) each */
	int			ledger_fd;
	bool		ledger_failed;
	char		channel[256];
	/* retry mode */
	size_t		n_notif;
	uint16_t   *deliveries;		/* per notification */
	uint16_t   *ack_at;			/* delivery that was acknowledged, 0 = none */
	uint16_t   *extra_left;
	bool	   *gave_up;
	struct sched_item *heap;
	size_t		heap_len;
	size_t		unacked;
	size_t		extra_sent;
	uint64_t	to_ack[MAX_SCHEDULE + 2];
	/* one mode */
	struct pn_buf one_headers;
	struct pn_buf one_body;
	long		one_status;
	char		one_outcome[32];
	char		one_error[256];
	double		one_latency;
	char		one_notify_id[PN_ID_LEN];
	char		one_order_no[PN_ID_LEN];
};

/* A scheduled re-delivery (retry mode). */
struct sched_item
{
	double		due;
	uint32_t	slot;
	uint32_t	attempt;
};

static volatile int stop_flag;

static void usage(FILE *f);

static void
on_signal(int sig)
{
	(void) sig;
	stop_flag = 1;
}

/* ------------------------------------------------------------ counting */

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
 * acknowledgement else 0, and the bad kind ("-" for a good request).
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
	pn_buf_printf(&b, "%s.%06ldZ\t%s\t%s\t%s\t%s\t%u\t%ld\t%s\t%d\t%s\n", when,
				  ts.tv_nsec / 1000, run->channel, event_names[run->conf->event],
				  req->notify_id, req->order_no, req->attempt + 1,
				  rep->curl_code == 0 ? rep->status : 0L, rep->outcome ? rep->outcome : "none",
				  ack ? 1 : 0, req->bad == PN_BAD_NONE ? "-" : pn_bad_names[req->bad]);
	w = write(run->ledger_fd, b.data, b.len);
	if (w < 0 || (size_t) w != b.len)
	{
		pn_log("cannot write the ledger \"%s\": %s", run->o->ledger,
				w < 0 ? strerror(errno) : "short write");
		run->ledger_failed = true;
	}
	pn_buf_free(&b);
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
		if (run->sent >= run->planned)
		{
			*wait = -1;
			return NULL;
		}
		run->sent++;
		return run->shared_req;
	}
	r = pn_gen_take(run->gen, active == 0, &more);
	if (!r)
	{
		*wait = more ? 0.001 : -1;
		return NULL;
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
	r = pn_gen_take(run->gen, active == 0 && run->heap_len == 0, &more);
	if (r)
	{
		run->sent++;
		return r;
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

/* ---------------------------------------------------------------- dumps */

static int
mkdir_p(const char *path)
{
	char		tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
	{
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int
write_file(const char *path, const void *p, size_t n)
{
	FILE	   *f = fopen(path, "wb");

	if (!f)
		return -1;
	if (fwrite(p, 1, n, f) != n)
	{
		fclose(f);
		return -1;
	}
	return fclose(f);
}

/* Appends text as a SQL string literal ('' doubling; standard strings). */
static void
sql_literal(struct pn_buf *b, const char *s, size_t n)
{
	pn_buf_putc(b, '\'');
	for (size_t i = 0; i < n; i++)
	{
		if (s[i] == '\'')
			pn_buf_putc(b, '\'');
		pn_buf_putc(b, s[i]);
	}
	pn_buf_putc(b, '\'');
}

/* One line: SELECT outcome FROM paynotify_handle('<ch>', '<json>'::jsonb, '\x..'::bytea); */
static void
sql_line(struct pn_buf *b, const char *channel, const struct pn_req *r)
{
	struct pn_buf js;
	struct pn_json j;
	char		hx[3];

	pn_buf_init(&js);
	pn_json_init(&j, &js, false);
	pn_json_open(&j, NULL, '{');
	for (int i = 0; i < r->nh; i++)
		pn_json_str(&j, r->hname[i], r->hval[i]);
	pn_json_close(&j, '}');
	pn_buf_puts(b, "SELECT outcome FROM paynotify_handle(");
	sql_literal(b, channel, strlen(channel));
	pn_buf_puts(b, ", ");
	sql_literal(b, js.data, js.len);
	pn_buf_puts(b, "::jsonb, '\\x");
	for (size_t i = 0; i < r->body_len; i++)
	{
		pn_hex((const unsigned char *) r->body + i, 1, hx, PN_HEX_LOWER);
		pn_buf_put(b, hx, 2);
	}
	pn_buf_puts(b, "'::bytea);\n");
	pn_buf_free(&js);
}

/* headers.txt + body.json|body.form in DIR/NNNNNN/, one index.tsv line. */
static int
dump_dir_one(const struct run *run, size_t seq, const struct pn_req *r, FILE *index)
{
	char		dir[4096],
				path[4200];
	struct pn_buf h;
	int			rc;

	snprintf(dir, sizeof(dir), "%s/%06zu", run->o->dump_dir, seq);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return -1;
	pn_buf_init(&h);
	for (int i = 0; i < r->nh; i++)
		pn_buf_printf(&h, "%s: %s\n", r->hname[i], r->hval[i]);
	snprintf(path, sizeof(path), "%s/headers.txt", dir);
	rc = write_file(path, h.data, h.len);
	pn_buf_free(&h);
	snprintf(path, sizeof(path), "%s/%s", dir,
			 run->conf->gateway == PN_ALIPAY ? "body.form" : "body.json");
	if (rc == 0)
		rc = write_file(path, r->body, r->body_len);
	fprintf(index, "%06zu\t%s\t%s\t%s\t%s\t%s\t%u\n", seq, gateway_names[run->conf->gateway],
			event_names[run->conf->event], pn_bad_names[r->bad], r->order_no,
			r->notify_id, r->attempt + 1);
	return rc;
}

/* Writes every request the generator makes; sends nothing. */
static int
run_dump(struct run *run, const char *channel)
{
	const struct opts *o = run->o;
	FILE	   *index = NULL,
			   *sql = NULL;
	struct pn_buf line;
	struct pn_req *r;
	bool		more;
	size_t		seq = 0;
	int			rc = 0;
	char		path[4200];

	if (o->dump_dir)
	{
		snprintf(path, sizeof(path), "%s/index.tsv", o->dump_dir);
		if (mkdir_p(o->dump_dir) != 0 || !(index = fopen(path, "w")))
		{
			pn_log("cannot write to \"%s\": %s", o->dump_dir, strerror(errno));
			return 1;
		}
		fputs("seq\tgateway\tevent\tbad\torder_no\tnotify_id\tdelivery\n", index);
	}
	if (o->dump_sql)
	{
		sql = strcmp(o->dump_sql, "-") == 0 ? stdout : fopen(o->dump_sql, "w");
		if (!sql)
		{
			pn_log("cannot write \"%s\": %s", o->dump_sql, strerror(errno));
			if (index)
				fclose(index);
			return 1;
		}
	}
	pn_buf_init(&line);
	while (rc == 0 && !stop_flag && (r = run->shared_req ? (seq < run->planned ? run->shared_req : NULL)
									 : pn_gen_take(run->gen, true, &more)) != NULL)
	{
		seq++;
		if (index && dump_dir_one(run, seq, r, index) != 0)
		{
			pn_log("cannot write under \"%s\": %s", o->dump_dir, strerror(errno));
			rc = 1;
		}
		if (sql)
		{
			pn_buf_reset(&line);
			sql_line(&line, channel, r);
			if (fwrite(line.data, 1, line.len, sql) != line.len)
				rc = 1;
		}
		if (!r->shared)
			pn_req_free(r);
		if (!o->quiet && seq % 10000 == 0)
			fprintf(stderr, "[dump] %zu/%zu written\n", seq, run->planned);
	}
	pn_buf_free(&line);
	if (index && fclose(index) != 0)
		rc = 1;
	if (sql == stdout)
		fflush(stdout);
	else if (sql && fclose(sql) != 0)
		rc = 1;
	run->finished = seq;
	return rc ? 1 : (stop_flag ? 1 : 0);
}

/* ---------------------------------------------------------------- report */

static void
json_stats(struct pn_json *j, const struct pn_stats *s)
{
	char		key[32];

	pn_json_int(j, "deliveries", (long long) s->deliveries);
	pn_json_int(j, "replies", (long long) s->replies);
	pn_json_int(j, "transport_errors", (long long) s->transport_errors);
	pn_json_int(j, "acked", (long long) s->acked);
	pn_json_open(j, "status", '{');
	for (int i = 0; i < PN_MAX_STATUS; i++)
	{
		if (!s->status[i])
			continue;
		snprintf(key, sizeof(key), "%d", i);
		pn_json_int(j, key, (long long) s->status[i]);
	}
	pn_json_close(j, '}');
	pn_json_open(j, "outcome", '{');
	for (int i = 0; i < s->n_outcomes; i++)
		pn_json_int(j, s->outcome_name[i], (long long) s->outcome_count[i]);
	if (s->outcome_other)
		pn_json_int(j, "other", (long long) s->outcome_other);
	pn_json_close(j, '}');
	pn_json_open(j, "errors", '{');
	for (int i = 0; i < PN_MAX_CURLERR; i++)
		if (s->curlerr[i])
			pn_json_int(j, pn_curl_strerror(i), (long long) s->curlerr[i]);
	pn_json_close(j, '}');
}

static void
text_stats(FILE *f, const char *indent, const struct pn_stats *s)
{
	const char *sep = "";

	fprintf(f, "%sreplies %llu, transport errors %llu, acknowledged %llu\n", indent,
			(unsigned long long) s->replies, (unsigned long long) s->transport_errors,
			(unsigned long long) s->acked);
	fprintf(f, "%sstatus  ", indent);
	for (int i = 0; i < PN_MAX_STATUS; i++)
		if (s->status[i])
		{
			fprintf(f, "%s%d: %llu", sep, i, (unsigned long long) s->status[i]);
			sep = ", ";
		}
	fprintf(f, "%s\n%soutcome ", *sep ? "" : "-", indent);
	sep = "";
	for (int i = 0; i < s->n_outcomes; i++)
	{
		fprintf(f, "%s%s: %llu", sep, s->outcome_name[i], (unsigned long long) s->outcome_count[i]);
		sep = ", ";
	}
	if (s->outcome_other)
		fprintf(f, "%sother: %llu", sep, (unsigned long long) s->outcome_other);
	fprintf(f, "%s\n", *sep ? "" : "-");
	for (int i = 0; i < PN_MAX_CURLERR; i++)
		if (s->curlerr[i])
			fprintf(f, "%serror   %s: %llu\n", indent, pn_curl_strerror(i),
					(unsigned long long) s->curlerr[i]);
}

/* Splits a raw reply header block into [name, value] pairs. */
static void
json_reply_headers(struct pn_json *j, const char *raw)
{
	const char *p = raw;

	pn_json_open(j, "headers", '[');
	while (p && *p)
	{
		const char *eol = strpbrk(p, "\r\n"),
				   *colon;
		size_t		len = eol ? (size_t) (eol - p) : strlen(p);

		colon = memchr(p, ':', len);
		if (colon && strncmp(p, "HTTP/", 5) != 0)
		{
			const char *v = colon + 1;

			while (v < p + len && (*v == ' ' || *v == '\t'))
				v++;
			pn_json_open(j, NULL, '[');
			pn_json_strn(j, NULL, p, (size_t) (colon - p));
			pn_json_strn(j, NULL, v, (size_t) (p + len - v));
			pn_json_close(j, ']');
		}
		p += len;
		while (*p == '\r' || *p == '\n')
			p++;
	}
	pn_json_close(j, ']');
}

static void
report_json(struct run *run, double elapsed, bool interrupted)
{
	const struct opts *o = run->o;
	struct pn_buf b;
	struct pn_json j;
	char		key[32];

	pn_buf_init(&b);
	pn_json_init(&j, &b, false);
	pn_json_open(&j, NULL, '{');
	pn_json_str(&j, "mode", mode_names[o->mode]);
	pn_json_str(&j, "gateway", gateway_names[run->conf->gateway]);
	pn_json_str(&j, "event", event_names[run->conf->event]);
	pn_json_str(&j, "url", o->url ? o->url : "");
	pn_json_int(&j, "seed", (long long) run->conf->seed);
	pn_json_int(&j, "concurrency", o->conc);
	pn_json_int(&j, "notifications", (long long) (o->mode == MODE_STORM ? 1 :
												  o->mode == MODE_ONE ? 1 :
												  o->mode == MODE_BAD ? o->n * o->n_bad_kinds : o->n));
	json_stats(&j, &run->total);
	pn_json_num(&j, "elapsed_s", elapsed);
	pn_json_num(&j, "rps", elapsed > 0 ? run->total.deliveries / elapsed : 0.0);
	pn_json_open(&j, "latency_ms", '{');
	pn_json_num(&j, "p50", pn_stats_pct(&run->total, 50));
	pn_json_num(&j, "p99", pn_stats_pct(&run->total, 99));
	pn_json_num(&j, "max", pn_stats_pct(&run->total, 100));
	pn_json_close(&j, '}');
	pn_json_bool(&j, "interrupted", interrupted);
	if (o->mode == MODE_RETRY)
	{
		pn_json_open(&j, "retry", '{');
		pn_json_int(&j, "notifications", (long long) run->n_notif);
		pn_json_int(&j, "acknowledged", (long long) (run->n_notif - run->unacked));
		pn_json_int(&j, "unacknowledged", (long long) run->unacked);
		pn_json_int(&j, "extra_deliveries", (long long) run->extra_sent);
		pn_json_num(&j, "time_scale", o->time_scale);
		pn_json_open(&j, "deliveries_to_ack", '{');
		for (int i = 1; i <= MAX_SCHEDULE + 1; i++)
			if (run->to_ack[i])
			{
				snprintf(key, sizeof(key), "%d", i);
				pn_json_int(&j, key, (long long) run->to_ack[i]);
			}
		pn_json_close(&j, '}');
		pn_json_close(&j, '}');
	}
	if (o->mode == MODE_BAD)
	{
		pn_json_open(&j, "by_kind", '{');
		for (int k = 0; k < o->n_bad_kinds; k++)
		{
			pn_json_open(&j, pn_bad_names[o->bad_kinds[k]], '{');
			json_stats(&j, &run->kind[o->bad_kinds[k]]);
			pn_json_close(&j, '}');
		}
		pn_json_close(&j, '}');
	}
	if (o->mode == MODE_ONE)
	{
		pn_json_str(&j, "notify_id", run->one_notify_id);
		pn_json_str(&j, "order_no", run->one_order_no);
		pn_json_open(&j, "reply", '{');
		pn_json_int(&j, "status", run->one_status);
		pn_json_str(&j, "outcome", run->one_outcome);
		pn_json_bool(&j, "acked", run->total.acked > 0);
		pn_json_str(&j, "error", run->one_error);
		json_reply_headers(&j, run->one_headers.data);
		pn_json_strn(&j, "body", run->one_body.data, run->one_body.len);
		pn_json_close(&j, '}');
	}
	pn_json_close(&j, '}');
	pn_buf_putc(&b, '\n');
	fwrite(b.data, 1, b.len, stdout);
	pn_buf_free(&b);
}

static void
report_text(struct run *run, double elapsed, bool interrupted)
{
	const struct opts *o = run->o;

	if (o->mode == MODE_ONE)
	{
		printf("> POST %s  (%s %s, order %s, notify id %s)\n", o->url,
			   gateway_names[run->conf->gateway], event_names[run->conf->event],
			   run->one_order_no, run->one_notify_id);
		if (run->one_error[0])
			printf("! no reply: %s\n", run->one_error);
		else
		{
			fwrite(run->one_headers.data, 1, run->one_headers.len, stdout);
			fwrite(run->one_body.data, 1, run->one_body.len, stdout);
			if (run->one_body.len && run->one_body.data[run->one_body.len - 1] != '\n')
				putchar('\n');
			printf("-- status %ld, outcome %s, %s, %.2f ms\n", run->one_status, run->one_outcome,
				   run->total.acked ? "acknowledged" : "not acknowledged", run->one_latency * 1000.0);
		}
		return;
	}
	printf("%s %s %s to %s: %llu deliveries, concurrency %d, seed %llu%s\n",
		   mode_names[o->mode], gateway_names[run->conf->gateway], event_names[run->conf->event],
		   o->url, (unsigned long long) run->total.deliveries, o->conc,
		   (unsigned long long) run->conf->seed, interrupted ? " (interrupted)" : "");
	text_stats(stdout, "", &run->total);
	printf("time    %.3f s, %.1f req/s\n", elapsed, elapsed > 0 ? run->total.deliveries / elapsed : 0.0);
	printf("latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", pn_stats_pct(&run->total, 50),
		   pn_stats_pct(&run->total, 99), pn_stats_pct(&run->total, 100));
	if (o->mode == MODE_RETRY)
	{
		printf("retry   %zu notifications: %zu acknowledged, %zu never acknowledged, %zu extra deliveries\n",
			   run->n_notif, run->n_notif - run->unacked, run->unacked, run->extra_sent);
		printf("        deliveries until acknowledged:");
		for (int i = 1; i <= MAX_SCHEDULE + 1; i++)
			if (run->to_ack[i])
				printf(" %d: %llu", i, (unsigned long long) run->to_ack[i]);
		printf("\n");
	}
	if (o->mode == MODE_BAD)
		for (int k = 0; k < o->n_bad_kinds; k++)
		{
			printf("[%s]\n", pn_bad_names[o->bad_kinds[k]]);
			text_stats(stdout, "  ", &run->kind[o->bad_kinds[k]]);
		}
}

/* ------------------------------------------------------------- options */

static const char *const help_lines[] = {
	"Usage: paynotify-send --gateway wxpay|alipay|stripe --url URL [options]\n",
	"       paynotify-send --gateway G (--dump-dir DIR | --dump-sql FILE) [options]\n",
	"\n",
	"A payment gateway in a box: signs (and for WeChat Pay encrypts) notifications\n",
	"exactly as WeChat Pay v3, Alipay and Stripe do, and POSTs them to URL, e.g.\n",
	"http://127.0.0.1:8080/notify/wxpay (the channel name in the URL is yours).\n",
	"\n",
	"Modes (--mode M, default one):\n",
	"  one        one notification; prints the reply's status line, headers and body\n",
	"  storm      -n deliveries of ONE notification (order --start), -c at a time; each\n",
	"             delivery keeps the id and body and is signed afresh (new timestamp,\n",
	"             nonce, signature), as a gateway's re-delivery is\n",
	"  distinct   -n notifications for -n orders (--start, --start+1, ...), -c at a time\n",
	"  retry      -n notifications (as distinct), each re-delivered on its gateway's\n",
	"             schedule until acknowledged; gives up when the schedule ends\n",
	"  bad        -n deliberately bad requests of each kind chosen by --bad\n",
	"\n",
	"Notification content:\n",
	"  --gateway G         wxpay, alipay or stripe (required)\n",
	"  --event E           pay (default): WeChat TRANSACTION.SUCCESS, Alipay TRADE_SUCCESS,\n",
	"                      Stripe payment_intent.succeeded; refund: WeChat REFUND.SUCCESS\n",
	"                      (refund_id, out_refund_no, amount.refund), Alipay refund_fee/\n",
	"                      out_biz_no/gmt_refund (TRADE_SUCCESS for a partial refund,\n",
	"                      TRADE_CLOSED for a full one), Stripe charge.refunded\n",
	"                      (amount_refunded; refunded=true only when full)\n",
	"  --start I           index of the first order (default 1)\n",
	"  --order-format F    order number from the index, printf style with exactly one\n",
	"                      integer conversion (default PN%08d -> PN00000001)\n",
	"  --amount A          order amount in minor units, fen/cents (default 8888;\n",
	"                      Alipay sends it as decimal yuan, 88.88)\n",
	"  --refund-amount R   refunded amount in minor units, 1..A (default 1000, or A if less)\n",
	"  --currency C        WeChat amount.currency (default CNY), Stripe currency (default usd)\n",
	"  --mchid ID          WeChat mchid (default 1900000109)\n",
	"  --appid ID          WeChat appid (default wx0000000000test01)\n",
	"  --app-id ID         Alipay app_id and auth_app_id (default 2021000000000001)\n",
	"  --seller-id ID      Alipay seller_id (default 2088000000000002)\n",
	"  --livemode          Stripe events say \"livemode\": true (default false)\n",
	"  --seed N            seed of the PRNG behind ids and nonces (default: from the\n",
	"                      clock; the report prints it). Notification ids depend on the\n",
	"                      seed, the gateway, the event, the bad kind and the order index\n",
	"  --now UNIX          sign with this clock instead of the real one: WeChat\n",
	"                      Wechatpay-Timestamp and create_time, Alipay notify_time and\n",
	"                      gmt_*, Stripe t and created. With --seed the output is then\n",
	"                      byte-for-byte reproducible (except --bad unknown-serial for\n",
	"                      Alipay, whose key is generated per run). A verifier replaying\n",
	"                      such requests later must use the same clock (paynotify.now)\n",
	"\n",
	"Keys (--keys DIR; a file name containing '/' is taken as a path as it is):\n",
	"  --keys DIR          key folder (default .), laid out like shared/vectors/keys:\n",
	"                        wechat_platform_1.key.pem   WeChat platform private key\n",
	"                        wechat_platform_1.cert.pem  its certificate (serial)\n",
	"                        wechat_apiv3.key            APIv3 key, 32 ASCII bytes\n",
	"                        alipay_1.key.pem            Alipay private key\n",
	"                        stripe_secret_1.txt         Stripe endpoint secret whsec_...\n",
	"                      only the chosen gateway's files are read\n",
	"  --wx-key FILE       WeChat signing key (default wechat_platform_1.key.pem)\n",
	"  --wx-cert FILE      certificate whose serial (upper-case hex) is sent as\n",
	"                      Wechatpay-Serial (default wechat_platform_1.cert.pem)\n",
	"  --serial S          send this Wechatpay-Serial instead of reading the certificate,\n",
	"                      e.g. a PUB_KEY_ID_... with --wx-key wechat_pubkey_3.key.pem\n",
	"  --apiv3-key FILE    APIv3 key file (default wechat_apiv3.key)\n",
	"  --alipay-key FILE   Alipay signing key (default alipay_1.key.pem)\n",
	"  --stripe-secret F   Stripe secret file (default stripe_secret_1.txt); the HMAC key\n",
	"                      is the whole whsec_ string\n",
	"\n",
	"Delivery:\n",
	"  --url URL           where to POST (http or https); not needed with --dump-*\n",
	"  -n N                storm: deliveries; distinct, retry: notifications; bad:\n",
	"                      requests per kind (default 1000; bad 1; one is always 1)\n",
	"  -c C                transfers in flight at once (default 50; one: 1)\n",
	"  --timeout S         per-request timeout in seconds (default 5, WeChat's limit);\n",
	"                      a timeout counts as a failed delivery\n",
	"  --same-signature    storm: sign once and send the identical bytes N times\n",
	"  --bad KIND          tampered, stale, probe, unknown-serial or all (default all):\n",
	"                        tampered        body changed after signing (WeChat\n",
	"                                        create_time, Alipay total_amount +0.01,\n",
	"                                        Stripe amount +1)\n",
	"                        stale           timestamp 1 h old (WeChat, Stripe); Alipay has\n",
	"                                        no freshness field: notify_time 1 h old, which\n",
	"                                        a verifier is expected to accept\n",
	"                        probe           WeChat only: Wechatpay-Signature prefixed\n",
	"                                        WECHATPAY/SIGNTEST/\n",
	"                        unknown-serial  WeChat: a serial nobody configured; Alipay:\n",
	"                                        signed by a freshly generated RSA key; Stripe:\n",
	"                                        HMAC with a random secret\n",
	"                      all = every kind that applies to the gateway\n",
	"\n",
	"Retry mode:\n",
	"  Acknowledged means: WeChat HTTP 200 or 204; Alipay a 2xx whose body is exactly\n",
	"  \"success\"; Stripe any 2xx. Anything else, or no reply, is retried after the\n",
	"  next interval of the schedule (counted from the failed reply); each re-delivery\n",
	"  keeps the id (and, but for Alipay's notify_time, the body) and is signed afresh.\n",
	"  Default schedules, seconds between deliveries:\n",
	"    wxpay   15 15 30 180 600 1200 1800 1800 1800 3600 10800 10800 10800 21600\n",
	"            21600 (16 deliveries in 24 h 4 min)\n",
	"    alipay  240 600 600 3600 7200 21600 54000 (8 deliveries in about 25 h)\n",
	"    stripe  60 300 1800 3600 7200 14400 28800 43200 43200 43200 43200 (Stripe only\n",
	"            says \"exponential back-off for up to 3 days\"; this is an approximation)\n",
	"  --time-scale F      multiply every interval by F (default 1; 0.001 turns WeChat's\n",
	"                      15 s into 15 ms)\n",
	"  --schedule LIST     comma-separated intervals in seconds replacing the default\n",
	"  --extra-deliveries K  after the acknowledgement deliver K more duplicates, each the\n",
	"                      first interval of the schedule after the previous one, as\n",
	"                      at-least-once gateways do\n",
	"  Exit status 1 when any notification was never acknowledged.\n",
	"\n",
	"Signing:\n",
	"  --threads T         signing threads (default: online CPUs)\n",
	"  --presign N         requests built ahead of sending (default 50000); when the run\n",
	"                      fits, all are signed before the clock starts\n",
	"\n",
	"Output:\n",
	"  Counts by HTTP status and by outcome (reply header Paynotify-Outcome, \"none\"\n",
	"  when absent; only replies are counted there), transport errors by libcurl error,\n",
	"  acknowledgements, requests/s and latency p50/p99/max. Progress goes to stderr\n",
	"  every 2 s on longer runs.\n",
	"  --json              print one JSON object on stdout instead: mode, gateway, event,\n",
	"                      url, seed, concurrency, notifications, deliveries, replies,\n",
	"                      transport_errors, acked, status{code:n}, outcome{label:n},\n",
	"                      errors{message:n}, elapsed_s, rps, latency_ms{p50,p99,max},\n",
	"                      interrupted; retry adds retry{notifications, acknowledged,\n",
	"                      unacknowledged, extra_deliveries, time_scale,\n",
	"                      deliveries_to_ack{k:n}}; bad adds by_kind{kind:{...counts}};\n",
	"                      one adds notify_id, order_no, reply{status, outcome, acked,\n",
	"                      error, headers[[name,value]], body}\n",
	"  --quiet             no progress lines\n",
	"  --verbose           one line per reply on stderr\n",
	"  --dump-dir DIR      send nothing; write each request the mode would send first to\n",
	"                      DIR/NNNNNN/headers.txt (Name: value per line) and body.json or\n",
	"                      body.form, plus DIR/index.tsv (seq, gateway, event, bad,\n",
	"                      order_no, notify_id, delivery). retry dumps first deliveries\n",
	"  --dump-sql FILE     send nothing; write one line per request (FILE - = stdout):\n",
	"                      SELECT outcome FROM paynotify_handle('<channel>',\n",
	"                      '<headers json>'::jsonb, '\\x<hex body>'::bytea);\n",
	"                      (standard_conforming_strings = on). Use --now to sign at a\n",
	"                      fixed time and replay with SET paynotify.now to that time\n",
	"  --channel NAME      channel for --dump-sql and --ledger (default: last path\n",
	"                      segment of --url, else the gateway name)\n",
	"  --ledger FILE       append one line per delivery, in every sending mode, to FILE\n",
	"                      (created if missing; several runs may share it: each line is\n",
	"                      one O_APPEND write), tab-separated: UTC time of the reply\n",
	"                      (2026-01-01T00:00:00.000000Z), channel, event (pay|refund),\n",
	"                      notification id, order number, delivery number (1 = first),\n",
	"                      HTTP status (0 = no reply), outcome (Paynotify-Outcome, none\n",
	"                      when absent), acknowledged by the gateway's rule (1|0), bad\n",
	"                      kind (- for a good request). A failed write ends in exit 1\n",
	"  -h, --help          this text;  --version  the version\n",
	"\n",
	"Exit status: 0 when the run completed (whatever the replies were), 1 when it\n",
	"could not complete (interrupted, write error, no reply in mode one) or, in\n",
	"retry mode, when a notification was never acknowledged, 2 on usage or key errors.\n",
	NULL
};

static void
usage(FILE *f)
{
	for (int i = 0; help_lines[i]; i++)
		fputs(help_lines[i], f);
}

static int
bad_usage(const char *fmt, const char *arg)
{
	fputs("paynotify-send: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry paynotify-send --help.\n", stderr);
	return EXIT_USAGE;
}

/*
 * Accepts a printf format with exactly one %d/%i/%u conversion (flags and
 * width allowed) and rewrites it to take a long long.
 */
static bool
parse_order_format(const char *in, char *out, size_t outsz)
{
	size_t		k = 0;
	int			conv = 0;

	for (const char *p = in; *p; p++)
	{
		if (k + 8 >= outsz)
			return false;
		out[k++] = *p;
		if (*p != '%')
			continue;
		if (p[1] == '%')
		{
			out[k++] = *++p;
			continue;
		}
		while (strchr("-+ 0#", p[1]) && p[1])
			out[k++] = *++p;
		while (p[1] >= '0' && p[1] <= '9' && k + 8 < outsz)
			out[k++] = *++p;
		if (p[1] != 'd' && p[1] != 'i' && p[1] != 'u')
			return false;
		p++;
		out[k++] = 'l';
		out[k++] = 'l';
		out[k++] = 'd';
		conv++;
	}
	out[k] = '\0';
	return conv == 1;
}

static bool
parse_schedule(const char *s, struct opts *o)
{
	char		tmp[1024],
			   *save = NULL;

	snprintf(tmp, sizeof(tmp), "%s", s);
	o->n_schedule = 0;
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save))
	{
		if (o->n_schedule == MAX_SCHEDULE ||
			!pn_parse_double(t, 0, 1e7, &o->schedule[o->n_schedule]))
			return false;
		o->n_schedule++;
	}
	return o->n_schedule > 0;
}

static bool
parse_bad(const char *s, enum pn_gateway gw, struct opts *o)
{
	o->n_bad_kinds = 0;
	if (strcmp(s, "all") == 0)
	{
		for (int k = PN_BAD_TAMPERED; k < PN_BAD_COUNT; k++)
			if (k != PN_BAD_PROBE || gw == PN_WXPAY)
				o->bad_kinds[o->n_bad_kinds++] = k;
		return true;
	}
	for (int k = PN_BAD_TAMPERED; k < PN_BAD_COUNT; k++)
		if (strcmp(s, pn_bad_names[k]) == 0)
		{
			if (k == PN_BAD_PROBE && gw != PN_WXPAY)
				return false;
			o->bad_kinds[o->n_bad_kinds++] = k;
			return true;
		}
	return false;
}

enum
{
	OPT_GATEWAY = 256, OPT_URL, OPT_MODE, OPT_EVENT, OPT_START, OPT_ORDER_FORMAT,
	OPT_AMOUNT, OPT_REFUND_AMOUNT, OPT_CURRENCY, OPT_MCHID, OPT_APPID, OPT_APP_ID,
	OPT_SELLER_ID, OPT_LIVEMODE, OPT_SEED, OPT_NOW, OPT_KEYS, OPT_WX_KEY, OPT_WX_CERT,
	OPT_SERIAL, OPT_APIV3, OPT_ALI_KEY, OPT_STRIPE_SECRET, OPT_TIMEOUT, OPT_SAME_SIG,
	OPT_BAD, OPT_TIME_SCALE, OPT_SCHEDULE, OPT_EXTRA, OPT_THREADS, OPT_PRESIGN,
	OPT_JSON, OPT_QUIET, OPT_VERBOSE, OPT_DUMP_DIR, OPT_DUMP_SQL, OPT_CHANNEL, OPT_VERSION,
	OPT_LEDGER
};

static const struct option long_opts[] = {
	{"gateway", required_argument, NULL, OPT_GATEWAY},
	{"url", required_argument, NULL, OPT_URL},
	{"mode", required_argument, NULL, OPT_MODE},
	{"event", required_argument, NULL, OPT_EVENT},
	{"start", required_argument, NULL, OPT_START},
	{"order-format", required_argument, NULL, OPT_ORDER_FORMAT},
	{"amount", required_argument, NULL, OPT_AMOUNT},
	{"refund-amount", required_argument, NULL, OPT_REFUND_AMOUNT},
	{"currency", required_argument, NULL, OPT_CURRENCY},
	{"mchid", required_argument, NULL, OPT_MCHID},
	{"appid", required_argument, NULL, OPT_APPID},
	{"app-id", required_argument, NULL, OPT_APP_ID},
	{"seller-id", required_argument, NULL, OPT_SELLER_ID},
	{"livemode", no_argument, NULL, OPT_LIVEMODE},
	{"seed", required_argument, NULL, OPT_SEED},
	{"now", required_argument, NULL, OPT_NOW},
	{"keys", required_argument, NULL, OPT_KEYS},
	{"wx-key", required_argument, NULL, OPT_WX_KEY},
	{"wx-cert", required_argument, NULL, OPT_WX_CERT},
	{"serial", required_argument, NULL, OPT_SERIAL},
	{"apiv3-key", required_argument, NULL, OPT_APIV3},
	{"alipay-key", required_argument, NULL, OPT_ALI_KEY},
	{"stripe-secret", required_argument, NULL, OPT_STRIPE_SECRET},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"same-signature", no_argument, NULL, OPT_SAME_SIG},
	{"bad", required_argument, NULL, OPT_BAD},
	{"time-scale", required_argument, NULL, OPT_TIME_SCALE},
	{"schedule", required_argument, NULL, OPT_SCHEDULE},
	{"extra-deliveries", required_argument, NULL, OPT_EXTRA},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"presign", required_argument, NULL, OPT_PRESIGN},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"verbose", no_argument, NULL, OPT_VERBOSE},
	{"dump-dir", required_argument, NULL, OPT_DUMP_DIR},
	{"dump-sql", required_argument, NULL, OPT_DUMP_SQL},
	{"channel", required_argument, NULL, OPT_CHANNEL},
	{"ledger", required_argument, NULL, OPT_LEDGER},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0}
};

/* Sets the defaults that do not depend on other options. */
static void
opts_defaults(struct opts *o, struct pn_conf *c)
{
	long		ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	memset(c, 0, sizeof(*c));
	o->mode = MODE_ONE;
	o->n = -1;
	o->conc = -1;
	o->start = 1;
	o->timeout_ms = 5000;
	o->time_scale = 1.0;
	o->threads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int) ncpu;
	o->presign = 50000;
	o->keys_dir = ".";
	o->wx_key = "wechat_platform_1.key.pem";
	o->wx_cert = "wechat_platform_1.cert.pem";
	o->apiv3 = "wechat_apiv3.key";
	o->ali_key = "alipay_1.key.pem";
	o->stripe_secret = "stripe_secret_1.txt";
	snprintf(o->order_fmt, sizeof(o->order_fmt), "PN%%08lld");
	c->gateway = (enum pn_gateway) -1;
	c->amount = 8888;
	c->refund_amount = -1;
	c->mchid = "1900000109";
	c->appid = "wx0000000000test01";
	c->ali_app_id = "2021000000000001";
	c->seller_id = "2088000000000002";
}

static int
lookup(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

/* Parses argv; returns 0, EXIT_USAGE, or -1 for --help/--version (exit 0). */
static int
parse_args(int argc, char **argv, struct opts *o, struct pn_conf *c, const char **bad_arg)
{
	int			ch;
	long long	v;
	double		d;

	while ((ch = getopt_long(argc, argv, "hn:c:", long_opts, NULL)) != -1)
	{
		switch (ch)
		{
			case 'h':
				usage(stdout);
				return -1;
			case OPT_VERSION:
				printf("paynotify-send %s (%s)\n", PAYNOTIFY_VERSION, curl_version());
				return -1;
			case OPT_GATEWAY:
				if ((v = lookup(optarg, gateway_names, 3)) < 0)
					return bad_usage("unknown gateway \"%s\" (wxpay, alipay, stripe)", optarg);
				c->gateway = (enum pn_gateway) v;
				break;
			case OPT_URL:
				o->url = optarg;
				break;
			case OPT_MODE:
				if ((v = lookup(optarg, mode_names, 5)) < 0)
					return bad_usage("unknown mode \"%s\" (one, storm, distinct, retry, bad)", optarg);
				o->mode = (enum mode) v;
				break;
			case OPT_EVENT:
				if ((v = lookup(optarg, event_names, 2)) < 0)
					return bad_usage("unknown event \"%s\" (pay, refund)", optarg);
				c->event = (enum pn_event) v;
				break;
			case 'n':
				if (!pn_parse_ll(optarg, 1, 100000000, &o->n))
					return bad_usage("-n wants an integer 1..100000000, not \"%s\"", optarg);
				break;
			case 'c':
				if (!pn_parse_ll(optarg, 1, 10000, &v))
					return bad_usage("-c wants an integer 1..10000, not \"%s\"", optarg);
				o->conc = (int) v;
				break;
			case OPT_START:
				if (!pn_parse_ll(optarg, 0, 999999999999LL, &o->start))
					return bad_usage("--start wants an integer 0..999999999999, not \"%s\"", optarg);
				break;
			case OPT_ORDER_FORMAT:
				if (!parse_order_format(optarg, o->order_fmt, sizeof(o->order_fmt)))
					return bad_usage("--order-format needs exactly one %%d conversion: \"%s\"", optarg);
				break;
			case OPT_AMOUNT:
				if (!pn_parse_ll(optarg, 1, 100000000000LL, &c->amount))
					return bad_usage("--amount wants minor units 1..100000000000, not \"%s\"", optarg);
				break;
			case OPT_REFUND_AMOUNT:
				if (!pn_parse_ll(optarg, 1, 100000000000LL, &c->refund_amount))
					return bad_usage("--refund-amount wants minor units 1..100000000000, not \"%s\"", optarg);
				break;
			case OPT_CURRENCY:
				c->currency = optarg;
				break;
			case OPT_MCHID:
				c->mchid = optarg;
				break;
			case OPT_APPID:
				c->appid = optarg;
				break;
			case OPT_APP_ID:
				c->ali_app_id = optarg;
				break;
			case OPT_SELLER_ID:
				c->seller_id = optarg;
				break;
			case OPT_LIVEMODE:
				c->livemode = true;
				break;
			case OPT_SEED:
				if (!pn_parse_ll(optarg, 0, INT64_MAX, &v))
					return bad_usage("--seed wants a non-negative integer, not \"%s\"", optarg);
				c->seed = (uint64_t) v;
				o->seed_given = true;
				break;
			case OPT_NOW:
				if (!pn_parse_ll(optarg, 1, 253402300799LL, &v))
					return bad_usage("--now wants unix seconds, not \"%s\"", optarg);
				c->now_fixed = (time_t) v;
				break;
			case OPT_KEYS:
				o->keys_dir = optarg;
				break;
			case OPT_WX_KEY:
				o->wx_key = optarg;
				break;
			case OPT_WX_CERT:
				o->wx_cert = optarg;
				break;
			case OPT_SERIAL:
				o->serial = optarg;
				break;
			case OPT_APIV3:
				o->apiv3 = optarg;
				break;
			case OPT_ALI_KEY:
				o->ali_key = optarg;
				break;
			case OPT_STRIPE_SECRET:
				o->stripe_secret = optarg;
				break;
			case OPT_TIMEOUT:
				if (!pn_parse_double(optarg, 0.001, 3600, &d))
					return bad_usage("--timeout wants seconds 0.001..3600, not \"%s\"", optarg);
				o->timeout_ms = (long) (d * 1000.0 + 0.5);
				break;
			case OPT_SAME_SIG:
				o->same_signature = true;
				break;
			case OPT_BAD:
				*bad_arg = optarg;
				break;
			case OPT_TIME_SCALE:
				if (!pn_parse_double(optarg, 1e-9, 1000, &o->time_scale))
					return bad_usage("--time-scale wants a factor 1e-9..1000, not \"%s\"", optarg);
				break;
			case OPT_SCHEDULE:
				if (!parse_schedule(optarg, o))
					return bad_usage("--schedule wants up to 64 comma-separated seconds, not \"%s\"", optarg);
				break;
			case OPT_EXTRA:
				if (!pn_parse_ll(optarg, 0, 1000, &o->extra))
					return bad_usage("--extra-deliveries wants 0..1000, not \"%s\"", optarg);
				break;
			case OPT_THREADS:
				if (!pn_parse_ll(optarg, 1, 256, &v))
					return bad_usage("--threads wants 1..256, not \"%s\"", optarg);
				o->threads = (int) v;
				break;
			case OPT_PRESIGN:
				if (!pn_parse_ll(optarg, 1, 100000000, &o->presign))
					return bad_usage("--presign wants 1..100000000, not \"%s\"", optarg);
				break;
			case OPT_JSON:
				o->json = true;
				break;
			case OPT_QUIET:
				o->quiet = true;
				break;
			case OPT_VERBOSE:
				o->verbose = true;
				break;
			case OPT_DUMP_DIR:
				o->dump_dir = optarg;
				break;
			case OPT_DUMP_SQL:
				o->dump_sql = optarg;
				break;
			case OPT_CHANNEL:
				o->channel = optarg;
				break;
			case OPT_LEDGER:
				o->ledger = optarg;
				break;
			default:
				fputs("Try paynotify-send --help.\n", stderr);
				return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument \"%s\"", argv[optind]);
	return 0;
}

/* Cross-option checks and defaults that depend on other options. */
static int
finish_opts(struct opts *o, struct pn_conf *c, const char *bad_arg)
{
	const double *sched;
	int			nsched;
	char		probe[256];
	long long	last;

	if ((int) c->gateway < 0)
		return bad_usage("%s", "--gateway is required");
	if (!o->url && !o->dump_dir && !o->dump_sql)
		return bad_usage("%s", "--url is required (or --dump-dir / --dump-sql)");
	if (o->ledger && (o->dump_dir || o->dump_sql))
		return bad_usage("%s", "--ledger records deliveries; --dump-dir and --dump-sql deliver nothing");
	if (bad_arg && o->mode != MODE_BAD)
		return bad_usage("%s", "--bad needs --mode bad");
	if (o->mode == MODE_BAD && !parse_bad(bad_arg ? bad_arg : "all", c->gateway, o))
		return bad_usage("--bad: \"%s\" is not tampered, stale, probe (wxpay only), unknown-serial or all",
						 bad_arg);
	if (o->same_signature && o->mode != MODE_STORM)
		return bad_usage("%s", "--same-signature needs --mode storm");
	if (o->mode == MODE_ONE)
		o->n = 1;
	else if (o->n < 0)
		o->n = o->mode == MODE_BAD ? 1 : 1000;
	if (o->conc < 0)
		o->conc = o->mode == MODE_ONE ? 1 : 50;
	if (c->refund_amount < 0)
		c->refund_amount = c->amount < 1000 ? c->amount : 1000;
	if (c->refund_amount > c->amount)
		return bad_usage("%s", "--refund-amount cannot exceed --amount");
	if (!c->currency)
		c->currency = c->gateway == PN_STRIPE ? "usd" : "CNY";
	last = o->start + o->n - 1;
	snprintf(probe, sizeof(probe), o->order_fmt, last);
	if (strlen(probe) >= PN_ID_LEN - 4)
		return bad_usage("order numbers from --order-format are too long: \"%s\"", probe);
	if (o->n_schedule == 0)
	{
		sched = c->gateway == PN_WXPAY ? sched_wxpay : c->gateway == PN_ALIPAY ? sched_alipay : sched_stripe;
		nsched = c->gateway == PN_WXPAY ? (int) (sizeof(sched_wxpay) / sizeof(double)) :
			c->gateway == PN_ALIPAY ? (int) (sizeof(sched_alipay) / sizeof(double)) :
			(int) (sizeof(sched_stripe) / sizeof(double));
		memcpy(o->schedule, sched, sizeof(double) * (size_t) nsched);
		o->n_schedule = nsched;
	}
	if (o->mode == MODE_RETRY && o->n > 10000000)
		return bad_usage("%s", "retry mode takes at most 10000000 notifications");
	c->order_fmt = o->order_fmt;
	return 0;
}

/* Channel for --dump-sql: --channel, else the URL's last path segment. */
static void
channel_name(const struct opts *o, const struct pn_conf *c, char *out, size_t outsz)
{
	const char *s,
			   *e;

	if (o->channel)
	{
		snprintf(out, outsz, "%s", o->channel);
		return;
	}
	snprintf(out, outsz, "%s", gateway_names[c->gateway]);
	if (!o->url || !(s = strstr(o->url, "://")) || !(s = strchr(s + 3, '/')))
		return;
	e = s + strcspn(s, "?#");
	while (e > s && e[-1] == '/')
		e--;
	for (const char *p = s; p < e; p++)
		if (*p == '/')
			s = p + 1;
	if (e > s)
		snprintf(out, outsz, "%.*s", (int) (e - s), s);
}

/* ---------------------------------------------------------------- main */

static void
run_init(struct run *run, struct opts *o, struct pn_conf *c)
{
	memset(run, 0, sizeof(*run));
	run->o = o;
	run->conf = c;
	pn_stats_init(&run->total, true);
	for (int k = 0; k < PN_BAD_COUNT; k++)
		pn_stats_init(&run->kind[k], false);
	pn_buf_init(&run->one_headers);
	pn_buf_init(&run->one_body);
	run->ledger_fd = -1;
	run->planned = (size_t) (o->mode == MODE_BAD ? o->n * o->n_bad_kinds : o->n);
	if (o->mode == MODE_RETRY)
	{
		run->n_notif = (size_t) o->n;
		run->unacked = run->n_notif;
		run->deliveries = pn_xcalloc(run->n_notif, sizeof(uint16_t));
		run->ack_at = pn_xcalloc(run->n_notif, sizeof(uint16_t));
		run->extra_left = pn_xcalloc(run->n_notif, sizeof(uint16_t));
		run->gave_up = pn_xcalloc(run->n_notif, sizeof(bool));
		run->heap = pn_xcalloc(run->n_notif, sizeof(struct sched_item));
		run->signer = pn_signer_new(c);
	}
}

static void
run_free(struct run *run)
{
	pn_gen_stop(run->gen);
	pn_req_free(run->shared_req);
	pn_signer_free(run->signer);
	pn_stats_free(&run->total);
	for (int k = 0; k < PN_BAD_COUNT; k++)
		pn_stats_free(&run->kind[k]);
	pn_buf_free(&run->one_headers);
	pn_buf_free(&run->one_body);
	if (run->ledger_fd >= 0)
		close(run->ledger_fd);
	free(run->deliveries);
	free(run->ack_at);
	free(run->extra_left);
	free(run->gave_up);
	free(run->heap);
}

/* Builds what to send and starts the signing threads. */
static void
run_prepare(struct run *run)
{
	struct opts *o = run->o;
	struct pn_plan plan;

	if (o->same_signature)
	{
		struct pn_signer *s = pn_signer_new(run->conf);

		run->shared_req = pn_build(run->conf, s, o->start, 0, PN_BAD_NONE);
		run->shared_req->shared = true;
		pn_signer_free(s);
		return;
	}
	plan.start = o->start;
	plan.per_kind = (size_t) o->n;
	plan.storm = o->mode == MODE_STORM;
	plan.n_kinds = o->mode == MODE_BAD ? o->n_bad_kinds : 0;
	memcpy(plan.kinds, o->bad_kinds, sizeof(plan.kinds));
	run->gen = pn_gen_start(run->conf, &plan, run->planned, (size_t) o->presign, o->threads);
}

static int
run_send(struct run *run)
{
	struct opts *o = run->o;
	struct pn_engine_opts eo = {o->url, o->conc, o->timeout_ms, o->mode == MODE_ONE, &stop_flag};
	struct pn_source src = {run, seq_next, seq_done, progress};
	double		elapsed;
	int			rc;

	if (o->mode == MODE_RETRY)
	{
		src.next = retry_next;
		src.done = retry_done;
	}
	if (run->gen)
		pn_gen_prefill(run->gen, o->quiet, &stop_flag);
	run->t0 = run->t_end = pn_mono_now();
	run->next_progress = run->t0 + 2.0;
	rc = pn_engine_run(&eo, &src);
	elapsed = run->t_end - run->t0;
	if (rc != 0)
		return 1;
	if (o->json)
		report_json(run, elapsed, stop_flag != 0);
	else
		report_text(run, elapsed, stop_flag != 0);
	fflush(stdout);
	if (stop_flag || run->ledger_failed)
		return 1;
	if (o->mode == MODE_RETRY && run->unacked > 0)
		return 1;
	if (o->mode == MODE_ONE && run->total.replies == 0)
		return 1;
	return 0;
}

static void
report_dump(const struct run *run, const char *channel)
{
	const struct opts *o = run->o;

	if (o->json)
	{
		struct pn_buf b;
		struct pn_json j;

		pn_buf_init(&b);
		pn_json_init(&j, &b, false);
		pn_json_open(&j, NULL, '{');
		pn_json_str(&j, "mode", mode_names[o->mode]);
		pn_json_str(&j, "gateway", gateway_names[run->conf->gateway]);
		pn_json_str(&j, "event", event_names[run->conf->event]);
		pn_json_int(&j, "seed", (long long) run->conf->seed);
		pn_json_int(&j, "dumped", (long long) run->finished);
		if (o->dump_dir)
			pn_json_str(&j, "dump_dir", o->dump_dir);
		if (o->dump_sql)
		{
			pn_json_str(&j, "dump_sql", o->dump_sql);
			pn_json_str(&j, "channel", channel);
		}
		pn_json_close(&j, '}');
		pn_buf_putc(&b, '\n');
		fwrite(b.data, 1, b.len, stdout);
		pn_buf_free(&b);
	}
	else if (!o->dump_sql || strcmp(o->dump_sql, "-") != 0)
		printf("wrote %zu requests (%s %s, seed %llu)%s%s%s%s\n", run->finished,
			   gateway_names[run->conf->gateway], event_names[run->conf->event],
			   (unsigned long long) run->conf->seed,
			   o->dump_dir ? " to " : "", o->dump_dir ? o->dump_dir : "",
			   o->dump_sql ? " and SQL to " : "", o->dump_sql ? o->dump_sql : "");
}

int
main(int argc, char **argv)
{
	struct opts o;
	struct pn_conf c;
	struct run run;
	const char *bad_arg = NULL;
	char		channel[256];
	struct sigaction sa;
	bool		need_alt = false;
	int			rc;

	pn_log_init("paynotify-send", false);
	opts_defaults(&o, &c);
	rc = parse_args(argc, argv, &o, &c, &bad_arg);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if ((rc = finish_opts(&o, &c, bad_arg)) != 0)
		return rc;
	if (!o.seed_given)
		c.seed = ((uint64_t) time(NULL) << 20) ^ (uint64_t) getpid() ^
			(uint64_t) (pn_mono_now() * 1e9);
	c.epoch = c.now_fixed ? c.now_fixed : time(NULL);
	for (int k = 0; k < o.n_bad_kinds; k++)
		need_alt |= o.bad_kinds[k] == PN_BAD_UNKNOWN_KEY;
	if (pn_keys_load(&c, o.keys_dir, o.wx_key, o.wx_cert, o.serial, o.apiv3, o.ali_key,
					 o.stripe_secret, need_alt) != 0)
		return EXIT_USAGE;
	channel_name(&o, &c, channel, sizeof(channel));

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
	{
		fputs("paynotify-send: cannot initialise libcurl\n", stderr);
		pn_keys_free(&c.keys);
		return 1;
	}

	run_init(&run, &o, &c);
	snprintf(run.channel, sizeof(run.channel), "%s", channel);
	if (o.ledger &&
		(run.ledger_fd = open(o.ledger, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
	{
		pn_log("cannot open the ledger \"%s\": %s", o.ledger, strerror(errno));
		run_free(&run);
		pn_keys_free(&c.keys);
		curl_global_cleanup();
		return 1;
	}
	run_prepare(&run);
	if (o.dump_dir || o.dump_sql)
	{
		rc = run_dump(&run, channel);
		if (rc == 0)
			report_dump(&run, channel);
	}
	else
		rc = run_send(&run);
	run_free(&run);
	pn_keys_free(&c.keys);
	curl_global_cleanup();
	return rc;
}
