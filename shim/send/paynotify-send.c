/*
 * paynotify-send.c
 *		A payment gateway in a box.  Signs (and for WeChat Pay encrypts)
 *		notifications exactly as WeChat Pay v3, Alipay and Stripe do, from a
 *		folder of keys, and delivers them by HTTP POST: once, as a storm of
 *		duplicates, as many distinct notifications, re-delivered on the
 *		gateway's retry schedule until acknowledged, or deliberately broken.
 *		It can also write the signed requests out instead of sending them
 *		(--dump-dir, --dump-sql) for replay by other tools, and keep a
 *		ledger of every delivery and its reply (--ledger).  With --payload
 *		the notification is a file's instead of a generated one.  It keeps
 *		a record of what it sold (--sales), can lose a fraction of the
 *		notifications (--drop), and answers the gateways' query and bill
 *		APIs from that record (--mode serve, send_serve.c).
 *
 *		Structure: signing threads (send_gen.c) build requests ahead into a
 *		bounded ring; the main thread runs the libcurl engine (send_http.c)
 *		with a "source" per mode that decides what to send next and counts
 *		what came back (send_run.c).  Options are in send_opts.c, dumps in
 *		send_dump.c, reports in send_report.c; this file starts a run.
 *
 *		Run with --help for every flag.
 */
#include "send_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

volatile int stop_flag;

static void
on_signal(int sig)
{
	(void) sig;
	stop_flag = 1;
}

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
	run->sales_fd = -1;
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
	if (run->sales_fd >= 0)
		close(run->sales_fd);
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
	run->gen = pn_gen_start(run->conf, &plan, run->planned, (size_t) o->presign, o->threads,
							(double) o->resign_after);
}

static int
run_send(struct run *run)
{
	struct opts *o = run->o;
	struct pn_engine_opts eo = {o->url, o->conc, o->timeout_ms, o->mode == MODE_ONE, &stop_flag};
	struct pn_source src;
	double		elapsed;
	int			rc;

	run_source(run, &src);
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
	if (stop_flag || run->ledger_failed || run->sales_failed)
		return 1;
	if (o->mode == MODE_RETRY && run->unacked > 0)
		return 1;
	if (o->mode == MODE_ONE && run->total.replies == 0 && run->dropped == 0)
		return 1;
	return 0;
}


int
main(int argc, char **argv)
{
	struct opts o;
	struct pn_conf c;
	struct run run;
	struct pn_payload payload;
	char		channel[256];
	bool		need_alt = false;
	int			rc;

	pn_log_init("paynotify-send", false);
	opts_defaults(&o, &c);
	rc = parse_args(argc, argv, &o, &c);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if ((rc = finish_opts(&o, &c)) != 0)
		return rc;
	if (o.mode == MODE_SERVE)
	{
		pn_on_stop_signals(on_signal);
		return run_serve(&o, &c);
	}
	if (!o.seed_given)
		c.seed = ((uint64_t) time(NULL) << 20) ^ (uint64_t) getpid() ^
			(uint64_t) (pn_mono_now() * 1e9);
	if (c.epoch == 0)
		c.epoch = c.now_fixed ? c.now_fixed : time(NULL);
	for (int k = 0; k < o.n_bad_kinds; k++)
		need_alt |= o.bad_kinds[k] == PN_BAD_UNKNOWN_KEY;
	memset(&payload, 0, sizeof(payload));
	if (o.payload)
	{
		if (pn_payload_load(&payload, c.gateway, o.payload) != 0)
			return EXIT_USAGE;
		c.payload = &payload;
	}
	if (pn_keys_load(&c, o.keys_dir, o.wx_key, o.wx_cert, o.serial, o.apiv3, o.ali_key,
					 o.stripe_secret, need_alt) != 0)
	{
		pn_keys_free(&c.keys);
		pn_payload_free(&payload);
		return EXIT_USAGE;
	}
	channel_name(&o, &c, channel, sizeof(channel));

	pn_on_stop_signals(on_signal);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
	{
		pn_log("cannot initialise libcurl");
		pn_keys_free(&c.keys);
		pn_payload_free(&payload);
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
		pn_payload_free(&payload);
		curl_global_cleanup();
		return 1;
	}
	if (o.sales &&
		(run.sales_fd = open(o.sales, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
	{
		pn_log("cannot open the sales file \"%s\": %s", o.sales, strerror(errno));
		run_free(&run);
		pn_keys_free(&c.keys);
		pn_payload_free(&payload);
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
	pn_payload_free(&payload);
	curl_global_cleanup();
	return rc;
}

