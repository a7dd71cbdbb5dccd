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

/*
 * One slot for a request: free, leased (about to start), running, or done
 * and waiting for its result to be recorded.  The strings are the job's
 * own copies of the lease's row.
 */
typedef struct job
{
	enum
	{
		JOB_FREE, JOB_LEASED, JOB_RUNNING, JOB_DONE
	}			state;
	char	   *delivery_id;
	char	   *webhook_id;
	char	   *endpoint_id;
	char	   *url;
	char	   *body;
	char	   *lease;			/* the lease's token, shown to the report */
	int			body_len;
	unsigned char secret[SECRET_MAX];
	int			secret_len;		/* -1: the secret did not decode */
	bool		released;		/* not attempted: given back due at once */
	bool		locked;			/* its row was locked by another transaction */
	bool		refused;		/* the database refused its result (logged) */
	long long	lease_end;		/* pn_now_ms() past which its lease may have ended */
	long long	report_at;		/* not reported again before (pn_now_ms()) */
	bool		counted;		/* in the tally (once done) */
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
	long long	not_attempted;	/* claimed, released unstarted (stop) */
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
extern void start_job(CURLM *multi, job *j);
extern int	pump_jobs(CURLM *multi, long long wait_ms, int pg_sock, bool *pg_ready);

/* relay_db.c */
extern PGconn *connect_db(void);
extern int	drain_notifies(PGconn *conn);
extern int	fanout(PGconn *conn);	/* -2: a lock it waited for (lock_timeout) */
extern int	lease_jobs(PGconn *conn, job *jobs, int nslots, int limit);
extern void free_job(job *j);
extern void count_job(const job *j, relay_tally *tally);
extern int	report_jobs(PGconn *conn, job *jobs, int nslots, int *lost);
extern bool job_waits(const job *j, long long now);

#endif							/* PAYNOTIFY_RELAY_H */
