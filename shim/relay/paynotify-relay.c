/*
 * paynotify-relay.c
 *	  Delivers paynotify's outbox events over HTTP in the Standard Webhooks
 *	  format (webhook-id, webhook-timestamp, webhook-signature), at least
 *	  once, to the endpoints of the table paynotify_endpoint.
 *
 * One loop, one database connection, one libcurl multi handle:
 *   1. paynotify_relay_fanout() turns new outbox rows into deliveries (its
 *      own short transaction);
 *   2. BEGIN; paynotify_relay_claim(n) locks the due deliveries (FOR
 *      UPDATE SKIP LOCKED), at most the endpoint's max_in_flight per
 *      endpoint and n = min(PAYNOTIFY_RELAY_BATCH,
 *      PAYNOTIFY_RELAY_MAX_IN_FLIGHT) in all: the claim is the row lock,
 *      held by this open transaction;
 *   3. every claimed delivery is signed and POSTed at once, each bounded by
 *      the request timeout (so a receiver that hangs holds the others of
 *      the round for one timeout at most, and its backlog never fills the
 *      batch); no request starts later than two timeouts after the claim;
 *   4. paynotify_relay_report() records each result (2xx: delivered; else a
 *      retry with backoff, or dead past the endpoint's horizon); COMMIT.
 *      Should the report fail, each result is recorded on its own, so that
 *      one the database refuses does not undo the others; the relay then
 *      backs off as after a database error.
 * A relay that dies, or whose database connection breaks, rolls back: its
 * claims are due again at once for any relay (deliveries it had made are
 * made again: at least once).  The session's
 * idle_in_transaction_session_timeout ends a relay that hangs.
 *
 * Waking up: after a batch with work the loop goes on at once; when idle it
 * polls the due-deliveries index every PAYNOTIFY_RELAY_POLL_MIN ms, doubling
 * up to PAYNOTIFY_RELAY_POLL_MAX, and a NOTIFY on channel "paynotify" (when
 * the extension sends them) wakes it before that.
 *
 * SIGTERM / SIGINT: no new request starts; those in flight finish and are
 * reported; the claimed rest is released by the COMMIT; exit 0.
 *
 * --once: rounds until nothing is due, then exit.  Standard output has one
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

#include <string.h>
#include <time.h>

/* Sleeps up to ms, returning early on a signal. */
static void
nap(long long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	if (!stop_requested)
		nanosleep(&ts, NULL);
}

/* The reconnect back-off: sleeps, then doubles it up to its cap. */
static void
back_off(long long *backoff_ms)
{
	nap(*backoff_ms);
	*backoff_ms = *backoff_ms * 2 > cfg.reconnect_max_ms ? cfg.reconnect_max_ms : *backoff_ms * 2;
}

/*
 * Rounds until SIGTERM (with --once: until nothing is due).  0, or 1 when
 * --once met a database error.
 */
static int
relay_loop(CURLM *multi, relay_tally *tally)
{
	PGconn	   *conn = NULL;
	long long	idle_ms = cfg.poll_min_ms,
				backoff_ms = 100;
	int			rc = 0;

	while (!stop_requested)
	{
		int			got = -1,
					lost = 0;

		if (conn != NULL || (conn = connect_db()) != NULL)
			got = round_once(conn, multi, tally, &lost);
		if (got < 0)
		{
			/* no connection, a broken one or a failing statement: start afresh, slowly */
			PQfinish(conn);
			conn = NULL;
			if (once)
			{
				rc = 1;
				break;
			}
			back_off(&backoff_ms);
			continue;
		}
		if (lost > 0)
		{
			/* a result the database refuses: its delivery is due again at once */
			if (once)
			{
				rc = 1;
				break;
			}
			back_off(&backoff_ms);
			continue;
		}
		backoff_ms = 100;
		if (got > 0)
		{
			idle_ms = cfg.poll_min_ms;
			continue;
		}
		if (once)
			break;
		if (!wait_for_work(conn, idle_ms))
		{
			PQfinish(conn);
			conn = NULL;
			continue;
		}
		idle_ms = idle_ms * 2 > cfg.poll_max_ms ? cfg.poll_max_ms : idle_ms * 2;
	}
	PQfinish(conn);
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
