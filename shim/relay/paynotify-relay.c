/*
 * paynotify-relay.c
 *	  Delivers paynotify's outbox events over HTTP in the Standard Webhooks
 *	  format (webhook-id, webhook-timestamp, webhook-signature), at least
 *	  once, to the endpoints of the table paynotify_endpoint.
 *
 * One loop, one database connection, one libcurl multi handle, and
 * PAYNOTIFY_RELAY_MAX_IN_FLIGHT slots for requests, kept full:
 *   1. when a slot is free: paynotify_relay_fanout() turns new outbox rows
 *      into deliveries, then paynotify_relay_lease(n, timeout) leases the
 *      due deliveries (FOR UPDATE SKIP LOCKED and committed at once, each
 *      one's next_attempt_at set to the lease's end, 2 * the request
 *      timeout + 10 s, with the claim's token): n at most the free slots
 *      and PAYNOTIFY_RELAY_BATCH, per endpoint at most its max_in_flight
 *      less its leases in flight (any relay's);
 *   2. every leased delivery is signed and POSTed at once, each bounded by
 *      the request timeout;
 *   3. as requests end, paynotify_relay_report() records their results
 *      (2xx: delivered; else a retry with backoff, or dead past the
 *      endpoint's horizon; all those that ended together in one call),
 *      only where the delivery still holds the lease, and the slots are
 *      filled again at once (an order's next event may be due now).
 *      A delivery whose row another transaction holds locked is skipped
 *      (the report waits for no row lock) and its result kept, reported
 *      again every 250 ms while its lease holds; the session's
 *      lock_timeout (a quarter of the request timeout, at most 1 s)
 *      bounds any other lock wait.  The calls are synchronous: while one
 *      runs, the requests in flight are not read (their timeouts run on),
 *      so a database that is slow for other reasons still delays them.
 *      Should the report fail, each result is recorded on its own, so that
 *      one the database refuses does not hold back the others; that one is
 *      logged and kept, its report tried again every second until its
 *      lease ends (an attempted request is never given back as not
 *      attempted), and the relay claims again only after a back-off.
 * Each call is its own short transaction.  A relay that dies, hangs or
 * loses its database for longer than a lease gives its claims back when
 * the leases end (deliveries it had made are made again: at least once).
 * Results that wait for a lost connection are reported once it is back.
 *
 * Waking up: after a request ends the relay claims at once; a claim that
 * found nothing waits PAYNOTIFY_RELAY_POLL_MIN ms, doubling up to
 * PAYNOTIFY_RELAY_POLL_MAX, and a NOTIFY on channel "paynotify" (when the
 * extension sends them) wakes it before that.
 *
 * SIGTERM / SIGINT: no new request starts (a delivery leased but not
 * started is given back, due at once); those in flight finish and are
 * reported; exit 0.  A database that cannot be reached then is tried
 * until the leases end.
 *
 * --once: claims until nothing is due and nothing is in flight, then exit.  Standard output has one
 * line per failed attempt (the delivery, its webhook-id, the endpoint and
 * the reason recorded in last_error) and, last, the summary "claimed N,
 * delivered N, failed N"; the exit status is 0 only when every claimed
 * delivery was delivered and no database error stopped it.
 *
 * This file is the loop; relay_opts.c the settings, relay_db.c the
 * database calls, relay_http.c the requests, relay_sign.c the signatures,
 * relay_stop.c the stop flag.
 */
#include "relay.h"

#include <stdlib.h>

/* The slots' counts: running, done and not yet recorded, free. */
static void
count_slots(relay_tally *tally, job *jobs, int nslots, int *running, int *unreported, int *free_slots)
{
	*running = *unreported = *free_slots = 0;
	for (int i = 0; i < nslots; i++)
	{
		job		   *j = &jobs[i];

		if (j->state == JOB_DONE && !j->counted)
		{
			count_job(j, tally);
			j->counted = true;
		}
		if (j->state == JOB_RUNNING)
			(*running)++;
		else if (j->state == JOB_DONE)
			(*unreported)++;
		else if (j->state == JOB_FREE)
			(*free_slots)++;
	}
}

/* The database failed: the connection dropped, tried again after the back-off. */
static void
db_failed(PGconn **conn, long long now, long long *retry_at, long long *backoff_ms)
{
	PQfinish(*conn);
	*conn = NULL;
	*retry_at = now + *backoff_ms;
	*backoff_ms = *backoff_ms * 2 > cfg.reconnect_max_ms ? cfg.reconnect_max_ms : *backoff_ms * 2;
}

/*
 * Starts the leased jobs, or, once a stop is asked for, gives them back
 * unattempted.
 */
static void
start_leased(CURLM *multi, job *jobs, int nslots)
{
	for (int i = 0; i < nslots; i++)
	{
		if (jobs[i].state != JOB_LEASED)
			continue;
		if (stop_requested)
		{
			jobs[i].state = JOB_DONE;
			jobs[i].released = true;
		}
		else
			start_job(multi, &jobs[i]);
	}
}

/*
 * Keeps up to max_in_flight requests in flight until SIGTERM (with
 * --once: until nothing is due): each finished request's result is
 * recorded and its slot filled again at once.  0, or 1 when --once met a
 * database error.
 */
static int
relay_loop(CURLM *multi, relay_tally *tally)
{
	int			nslots = (int) cfg.max_in_flight;
	job		   *jobs = calloc((size_t) nslots, sizeof(job));
	PGconn	   *conn = NULL;
	long long	idle_ms = cfg.poll_min_ms,
				backoff_ms = 100,
				next_claim_at = 0,
				db_retry_at = 0,
				give_up_at = -1;
	bool		db_error = false;
	int			rc = 0;

	if (jobs == NULL)
	{
		pn_log("out of memory");
		return 1;
	}
	for (;;)
	{
		long long	now = pn_now_ms(),
					wait;
		int			running,
					unreported,
					free_slots,
					lost = 0,
					finished;
		bool		stopping = stop_requested || (once && db_error),
					pg_ready;

		count_slots(tally, jobs, nslots, &running, &unreported, &free_slots);
		if (stopping && running == 0 && unreported == 0)
			break;
		if (stopping && give_up_at < 0)
			/* no result is worth recording after its lease has ended */
			give_up_at = now + (once && db_error ? cfg.reconnect_max_ms : 2 * cfg.timeout_ms + 10000);
		if (stopping && running == 0 && now >= give_up_at)
		{
			pn_log("the results of %d deliveries could not be recorded: they are due again when their leases end",
				   unreported);
			if (once)
				rc = 1;
			break;
		}

		/* the database: the results first, then a claim when there is room */
		if (conn == NULL && now >= db_retry_at && (unreported > 0 || !stopping))
		{
			if ((conn = connect_db()) == NULL)
			{
				db_failed(&conn, now, &db_retry_at, &backoff_ms);
				db_error = true;
			}
		}
		if (conn != NULL && unreported > 0)
		{
			int			woken = -1;

			if (report_jobs(conn, jobs, nslots, &lost) < 0 || (woken = drain_notifies(conn)) < 0)
			{
				db_failed(&conn, now, &db_retry_at, &backoff_ms);
				db_error = true;
			}
			else if (lost > 0)
			{
				/* a result the database refuses: claim again slowly */
				next_claim_at = now + backoff_ms;
				backoff_ms = backoff_ms * 2 > cfg.reconnect_max_ms ? cfg.reconnect_max_ms : backoff_ms * 2;
				db_error = true;
			}
			else if (woken > 0)
				next_claim_at = now;	/* a NOTIFY read meanwhile */
			count_slots(tally, jobs, nslots, &running, &unreported, &free_slots);
		}
		stopping = stop_requested || (once && db_error);
		if (conn != NULL && !stopping && free_slots > 0 && now >= next_claim_at)
		{
			int			limit = free_slots < cfg.batch ? free_slots : (int) cfg.batch,
						taken = -1,
						got = -1,
						woken = -1;

			if (drain_notifies(conn) >= 0 && (taken = fanout(conn)) == -2)
				taken = 0;		/* a lock it waited for: lease what is due */
			if (taken >= 0)
				got = lease_jobs(conn, jobs, nslots, limit);
			if (got >= 0)
			{
				tally->claimed += got;
				start_leased(multi, jobs, nslots);
				/* a NOTIFY that came meanwhile may announce what the claim missed */
				woken = drain_notifies(conn);
			}
			if (woken < 0)
			{
				db_failed(&conn, now, &db_retry_at, &backoff_ms);
				db_error = true;
				continue;
			}
			if (!db_error || !once)
				backoff_ms = 100;
			if (got == 0 && taken == 0 && woken == 0)
			{
				if (once && running == 0 && unreported == 0)
					break;		/* nothing is due */
				next_claim_at = now + idle_ms;
				idle_ms = idle_ms * 2 > cfg.poll_max_ms ? cfg.poll_max_ms : idle_ms * 2;
			}
			else
			{
				/* full: again as soon as a slot frees; else soon */
				next_claim_at = got == limit ? now : now + cfg.poll_min_ms;
				idle_ms = cfg.poll_min_ms;
			}
			continue;
		}

		/* the requests: until one finishes, a NOTIFY, or the next claim */
		wait = 1000;
		if (conn != NULL && !stopping && free_slots > 0)
			wait = next_claim_at - now;
		if (conn == NULL && (unreported > 0 || !stopping))
			wait = db_retry_at - now;
		if (stopping && running == 0)
			wait = (conn != NULL || give_up_at < db_retry_at ? give_up_at : db_retry_at) - now;
		if (conn != NULL && unreported > 0)
		{
			/* results kept to be reported again (see report_jobs) */
			for (int i = 0; i < nslots; i++)
			{
				if (job_waits(&jobs[i], now) && jobs[i].report_at - now < wait)
					wait = jobs[i].report_at - now;
			}
		}
		if (wait > 1000)
			wait = 1000;
		if (wait < 0)
			wait = 0;
		finished = pump_jobs(multi, wait, conn != NULL ? PQsocket(conn) : -1, &pg_ready);
		if (finished > 0)
		{
			/* a slot is free, and an order's next event may be due */
			next_claim_at = pn_now_ms();
			idle_ms = cfg.poll_min_ms;
		}
		if (pg_ready && conn != NULL)
		{
			if (drain_notifies(conn) < 0)
				db_failed(&conn, pn_now_ms(), &db_retry_at, &backoff_ms);
			else
				next_claim_at = pn_now_ms();
		}
	}
	PQfinish(conn);
	for (int i = 0; i < nslots; i++)
		free_job(&jobs[i]);
	free(jobs);
	if (once && db_error)
		rc = 1;
	return rc;
}

int
main(int argc, char **argv)
{
	int			rc;
	CURLM	   *multi;
	relay_tally tally = {0};

	pn_log_init(PN_PROGRAM, false);
	rc = load_config(argc, argv);
	if (rc >= 0)
		return rc;
	pn_on_stop_signals(on_stop_signal);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (multi = curl_multi_init()) == NULL)
	{
		pn_log("libcurl initialisation failed");
		return 1;
	}
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) cfg.max_in_flight);
	pn_log("started (version %s, schema %s)", PAYNOTIFY_VERSION, cfg.schema);
	rc = relay_loop(multi, &tally);
	curl_multi_cleanup(multi);
	curl_global_cleanup();
	pn_log("stopped");
	if (once)
	{
		/* the summary, last: each failure has had its line */
		printf("claimed %lld, delivered %lld, failed %lld", tally.claimed, tally.delivered,
			   tally.failed);
		if (tally.not_attempted > 0)
			printf(", not attempted %lld (released, due again)", tally.not_attempted);
		printf("%s\n", rc != 0 ? "; stopped early by a database error (logged)" : "");
		if (tally.failed > 0 || tally.not_attempted > 0)
			rc = 1;
	}
	return rc;
}
