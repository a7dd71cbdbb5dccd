/*
 * reconcile.h
 *	  paynotify-reconcile's parts: settings (reconcile_opts.c), the pace of
 *	  each channel (reconcile_pace.c), one HTTP request with libcurl
 *	  (reconcile_http.c), the database calls (reconcile_db.c) and the loop
 *	  (paynotify-reconcile.c, where the whole design is described).
 */
#ifndef PAYNOTIFY_RECONCILE_H
#define PAYNOTIFY_RECONCILE_H

#include <signal.h>
#include <stdbool.h>

#include <curl/curl.h>
#include <libpq-fe.h>

#include "pn_common.h"
#include "pn_curl.h"
#include "pn_pq.h"

#define PN_PROGRAM "paynotify-reconcile"
#ifndef PAYNOTIFY_VERSION
#define PAYNOTIFY_VERSION "unknown"
#endif

#define BACKOFF_MIN_MS 1000		/* a channel's first back-off */

typedef struct reconcile_config
{
	const char *dsn;
	const char *schema;
	long long	batch;
	long long	rate;
	long long	interval_ms;
	long long	timeout_ms;
	long long	connect_timeout_ms;
	long long	backoff_max_ms;
	long long	reconnect_max_ms;
	long long	max_response;
	long long	max_bill;
	long long	bill_timeout_ms;
	long long	allow_private;
} reconcile_config;

/*
 * One request as the database built it (the strings point into its result),
 * a query's or a step of a bill's fetch.
 */
typedef struct query_request
{
	const char *method;
	const char *url;
	const char *body;			/* NULL: none */
	int			body_len;
	const char **header_names;	/* n_headers of each */
	const char **header_values;
	int			n_headers;
	long long	max_response;	/* largest body accepted, in bytes */
	const char *max_setting;	/* the setting that says so, for the log */
	long long	timeout_ms;		/* whole-request timeout */
} query_request;

/* What came back: a response (status > 0), or why none did. */
typedef struct query_response
{
	long		status;			/* 0: no response */
	pn_buf		headers;		/* a JSON object, each name once (values joined) */
	pn_buf		body;			/* the bytes as received */
	long long	retry_after_ms; /* Retry-After in seconds, as ms; 0: none */
	char		error[384];		/* when status is 0: why (a class, libcurl's words) */
} query_response;

/* What one run did, for --once's summary (counted in every mode). */
typedef struct reconcile_tally
{
	long long	claimed;		/* due queries claimed */
	long long	applied;		/* answered, and the answer applied */
	long long	failed;			/* no request, no response, or not applied */
	long long	left;			/* claimed, not sent (stop): due again later */
	long long	bills_claimed;	/* due bill fetches claimed */
	long long	bills_imported; /* fetched to the end and imported */
	long long	bills_failed;	/* no request, no response, refused or not ready */
} reconcile_tally;

extern reconcile_config cfg;
extern bool once;

/* reconcile_stop.c */
extern volatile sig_atomic_t stop_requested;
extern void on_stop_signal(int sig);
extern void nap_until(long long when_ms);

/* reconcile_opts.c: -1 to go on, else the exit status */
extern int	load_config(int argc, char **argv);

/* reconcile_pace.c */
extern long long pace_ready_at(const char *channel);
extern void pace_result(const char *channel, long long started_ms, bool trouble,
						long long retry_after_ms);

/* reconcile_http.c */
extern void response_init(query_response *rs);
extern void response_free(query_response *rs);
extern bool http_send(CURL *easy, const query_request *rq, query_response *rs);

/* reconcile_db.c */
extern PGconn *connect_db(void);
extern int	round_once(PGconn *conn, CURL *easy, reconcile_tally *tally);

#endif							/* PAYNOTIFY_RECONCILE_H */
