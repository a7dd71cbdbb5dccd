/*
 * send_run.h
 *		One run of paynotify-send: what the command line decided (struct
 *		opts) and the state of the run (struct run), shared by the files of
 *		the program beside the signer and the engine declared in send.h:
 *		send_opts.c (options), send_run.c (what each mode sends next, and
 *		counting the replies), send_dump.c (--dump-dir, --dump-sql),
 *		send_report.c (text and JSON reports) and paynotify-send.c (main).
 */
#ifndef PAYNOTIFY_SEND_RUN_H
#define PAYNOTIFY_SEND_RUN_H

#include <stdio.h>

#include "send.h"

#define MAX_SCHEDULE	64
#define EXIT_USAGE		2

enum mode
{
	MODE_ONE,
	MODE_STORM,
	MODE_DISTINCT,
	MODE_RETRY,
	MODE_BAD,
	MODE_SERVE
};


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
	const char *bad;			/* --bad, checked once --gateway is known */
	int			bad_kinds[PN_BAD_COUNT];
	int			n_bad_kinds;
	int			threads;
	long long	presign;
	long long	resign_after;	/* seconds; a request older is signed again */
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
	const char *payload;		/* --payload FILE */
	bool		seed_given;
	const char *sales;			/* --sales FILE (serve: FILE[,FILE...]) */
	double		drop;			/* --drop F, 0..1 */
	/* --mode serve */
	const char *listen;			/* --listen HOST:PORT */
	const char *merchant_cert;	/* WeChat merchant certificate or public key */
	const char *app_public_key;	/* Alipay app public key */
	const char *stripe_api_key; /* file holding the sk_test_... key */
	const char *serve_bad;		/* --serve-bad signature|body */
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
	/* --sales: one line per notification, likewise; --drop */
	int			sales_fd;
	bool		sales_failed;
	size_t		dropped;		/* notifications never delivered (--drop) */
	bool		shared_dropped; /* --same-signature: the one notification */
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

extern const char *const mode_names[];
extern const char *const gateway_names[];
extern const char *const event_names[];

/* Set by SIGINT/SIGTERM: stop starting new requests. */
extern volatile int stop_flag;

/* send_opts.c */
void		opts_defaults(struct opts *o, struct pn_conf *c);
int			parse_args(int argc, char **argv, struct opts *o, struct pn_conf *c);
int			finish_opts(struct opts *o, struct pn_conf *c);
void		channel_name(const struct opts *o, const struct pn_conf *c, char *out,
						 size_t outsz);

/* send_run.c */
void		run_source(struct run *run, struct pn_source *src);

/* send_dump.c */
int			run_dump(struct run *run, const char *channel);

/* send_run.c: --sales and --drop for a request taken from the generator */
bool		run_take_sale(struct run *run, const struct pn_req *req);

/* send_serve.c */
int			run_serve(struct opts *o, struct pn_conf *c);

/* send_report.c */
void		report_json(struct run *run, double elapsed, bool interrupted);
void		report_text(struct run *run, double elapsed, bool interrupted);
void		report_dump(const struct run *run, const char *channel);

#endif							/* PAYNOTIFY_SEND_RUN_H */
