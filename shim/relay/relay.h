/*
 * relay.h
 *	  paynotify-relay's parts: settings (relay_opts.c), Standard Webhooks
 *	  signing (relay_sign.c), the stop flag (relay_stop.c),
 *	  HTTP delivery with libcurl (relay_http.c), the database calls
 *	  (relay_db.c) and the loop (paynotify-relay.c, where the whole design
 *	  is described).
 */
#ifndef PAYNOTIFY_RELAY_H
#define PAYNOTIFY_RELAY_H

#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include <curl/curl.h>
#include <libpq-fe.h>

#include "pn_common.h"
#include "pn_curl.h"
#include "pn_pq.h"

#define PN_PROGRAM "paynotify-relay"
#ifndef PAYNOTIFY_VERSION
#define PAYNOTIFY_VERSION "unknown"
#endif

#define SECRET_MAX 64			/* Standard Webhooks: 24 to 64 bytes */
#define ERROR_MAX 200

typedef struct relay_config
{
	const char *dsn;
	const char *schema;
	long long	batch;
	long long	fanout_batch;
	long long	max_in_flight;
	long long	timeout_ms;
	long long	connect_timeout_ms;
	long long	poll_min_ms;
	long long	poll_max_ms;
	long long	listen;
	long long	reconnect_max_ms;
	long long	allow_private;
	long long	verbose;
} relay_config;

/* One claimed delivery. */
typedef struct job
{
	const char *delivery_id;	/* text from the claim (points into res) */
	const char *webhook_id;
	const char *endpoint_id;
	const char *url;
	const char *body;
	int			body_len;
	int			max_in_flight;
	int		   *in_flight;		/* shared by the jobs of one endpoint */
	unsigned char secret[SECRET_MAX];
	int			secret_len;		/* -1: the secret did not decode */
	enum
	{
		JOB_WAITING, JOB_RUNNING, JOB_DONE
	}			state;
	long		status;			/* HTTP status, 0: none */
	bool		blocked;		/* an address refused by allow_private */
	char		error[ERROR_MAX];
	char		curl_error[CURL_ERROR_SIZE];
	CURL	   *easy;
	struct curl_slist *headers;
	struct timespec started;
} job;

/* What one run did, for --once's summary (counted in every mode). */
typedef struct relay_tally
{
	long long	claimed;		/* deliveries claimed */
	long long	delivered;		/* answered 2xx */
	long long	failed;			/* attempted, not 2xx: retried later, or dead */
	long long	not_attempted;	/* claimed, released unstarted (stop, deadline) */
} relay_tally;

extern relay_config cfg;
extern bool once;

/* relay_stop.c */
extern volatile sig_atomic_t stop_requested;
extern void on_stop_signal(int sig);

/* relay_opts.c: -1 to go on, else the exit status */
extern int	load_config(int argc, char **argv);

/* relay_sign.c */
extern int	decode_secret(const char *s, unsigned char *out);
extern bool sign(const job *j, long long ts, char *out, size_t outsz);

/* relay_http.c */
extern void run_jobs(CURLM *multi, job *jobs, int n);

/* relay_db.c */
extern PGconn *connect_db(void);
extern int	round_once(PGconn *conn, CURLM *multi, relay_tally *tally, int *lost);
extern bool wait_for_work(PGconn *conn, long long ms);

#endif							/* PAYNOTIFY_RELAY_H */
