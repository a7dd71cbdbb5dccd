/*
 * send_report.c
 *		The end of a run on stdout: counters, latencies and (mode one) the
 *		reply, as text or as one JSON object; and what a dump wrote.
 */
#include "send_run.h"

#include <stdlib.h>
#include <string.h>

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

/* What every JSON report starts with: the run's mode, gateway and event. */
static void
json_run_head(struct pn_json *j, struct pn_buf *b, const struct run *run)
{
	pn_buf_init(b);
	pn_json_init(j, b, false);
	pn_json_open(j, NULL, '{');
	pn_json_str(j, "mode", mode_names[run->o->mode]);
	pn_json_str(j, "gateway", gateway_names[run->conf->gateway]);
	pn_json_str(j, "event", event_names[run->conf->event]);
}

/* Closes a JSON report and prints it as one line. */
static void
json_run_print(struct pn_json *j, struct pn_buf *b)
{
	pn_json_close(j, '}');
	pn_buf_putc(b, '\n');
	fwrite(b->data, 1, b->len, stdout);
	pn_buf_free(b);
}

void
report_json(struct run *run, double elapsed, bool interrupted)
{
	const struct opts *o = run->o;
	struct pn_buf b;
	struct pn_json j;
	char		key[32];

	json_run_head(&j, &b, run);
	pn_json_str(&j, "url", o->url ? o->url : "");
	pn_json_int(&j, "seed", (long long) run->conf->seed);
	pn_json_int(&j, "created", (long long) run->conf->epoch);
	pn_json_int(&j, "concurrency", o->conc);
	pn_json_int(&j, "notifications", (long long) (o->mode == MODE_STORM ? 1 :
												  o->mode == MODE_ONE ? 1 :
												  o->mode == MODE_BAD ? o->n * o->n_bad_kinds : o->n));
	json_stats(&j, &run->total);
	pn_json_int(&j, "dropped", (long long) run->dropped);
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
		pn_json_int(&j, "acknowledged", (long long) (run->n_notif - run->unacked - run->dropped));
		pn_json_int(&j, "unacknowledged", (long long) run->unacked);
		pn_json_int(&j, "dropped", (long long) run->dropped);
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
	json_run_print(&j, &b);
}

void
report_text(struct run *run, double elapsed, bool interrupted)
{
	const struct opts *o = run->o;

	if (o->mode == MODE_ONE)
	{
		printf("> POST %s  (%s %s, order %s, notify id %s)\n", o->url,
			   gateway_names[run->conf->gateway], event_names[run->conf->event],
			   run->one_order_no, run->one_notify_id);
		if (run->dropped)
			printf("! dropped (--drop): never delivered\n");
		else if (run->one_error[0])
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
		printf("-- to deliver it again: --seed %llu --start %lld --event %s --created %lld\n",
			   (unsigned long long) run->conf->seed, o->start, event_names[run->conf->event],
			   (long long) run->conf->epoch);
		return;
	}
	printf("%s %s %s to %s: %llu deliveries, concurrency %d, seed %llu, created %lld%s\n",
		   mode_names[o->mode], gateway_names[run->conf->gateway], event_names[run->conf->event],
		   o->url, (unsigned long long) run->total.deliveries, o->conc,
		   (unsigned long long) run->conf->seed, (long long) run->conf->epoch,
		   interrupted ? " (interrupted)" : "");
	text_stats(stdout, "", &run->total);
	if (run->dropped || o->drop > 0)
		printf("dropped %zu notifications (--drop %g), never delivered\n", run->dropped, o->drop);
	printf("time    %.3f s, %.1f req/s\n", elapsed, elapsed > 0 ? run->total.deliveries / elapsed : 0.0);
	printf("latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", pn_stats_pct(&run->total, 50),
		   pn_stats_pct(&run->total, 99), pn_stats_pct(&run->total, 100));
	if (o->mode == MODE_RETRY)
	{
		printf("retry   %zu notifications: %zu acknowledged, %zu never acknowledged, %zu dropped, %zu extra deliveries\n",
			   run->n_notif, run->n_notif - run->unacked - run->dropped, run->unacked,
			   run->dropped, run->extra_sent);
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


void
report_dump(const struct run *run, const char *channel)
{
	const struct opts *o = run->o;

	if (o->json)
	{
		struct pn_buf b;
		struct pn_json j;

		json_run_head(&j, &b, run);
		pn_json_int(&j, "seed", (long long) run->conf->seed);
		pn_json_int(&j, "dumped", (long long) run->finished);
		pn_json_int(&j, "dropped", (long long) run->dropped);
		if (o->dump_dir)
			pn_json_str(&j, "dump_dir", o->dump_dir);
		if (o->dump_sql)
		{
			pn_json_str(&j, "dump_sql", o->dump_sql);
			pn_json_str(&j, "channel", channel);
		}
		json_run_print(&j, &b);
	}
	else if (!o->dump_sql || strcmp(o->dump_sql, "-") != 0)
		printf("wrote %zu requests (%s %s, seed %llu)%s%s%s%s\n", run->finished,
			   gateway_names[run->conf->gateway], event_names[run->conf->event],
			   (unsigned long long) run->conf->seed,
			   o->dump_dir ? " to " : "", o->dump_dir ? o->dump_dir : "",
			   o->dump_sql ? " and SQL to " : "", o->dump_sql ? o->dump_sql : "");
}

