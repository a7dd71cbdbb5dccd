/*
 * paynotify-reconcile.c
 *	  Asks the payment gateways for the orders whose notification did not
 *	  come (paynotify_expectation), so that a lost notification is applied
 *	  all the same.  The database builds and signs every request and
 *	  verifies and applies every response: this program holds no gateway
 *	  key; it only carries bytes between the two.
 *
 * One loop, one database connection (autocommit), one libcurl handle:
 *   1. paynotify_query_due(n) claims the due queries (the database moves
 *      their next_query_at on, so a claim is never held: a daemon that
 *      dies leaves them due again later, for any daemon);
 *   2. for each, paynotify_query_request(channel, order_no) builds the
 *      signed request (method, URL, headers, body); it is sent as it is,
 *      with TLS verification, the request timeout and, per channel, at
 *      most --rate requests a second; after no response, a 5xx or a 429
 *      the channel backs off (1 s doubling to --backoff-max, or its
 *      Retry-After) while the other channels go on;
 *   3. paynotify_query_apply(channel, order_no, status, headers, body)
 *      gets the raw status, the response headers as a JSON object and the
 *      body's bytes; the database verifies and applies them and says the
 *      outcome, which is logged: one line per query (channel, order, HTTP
 *      status, outcome), never a request header (the Authorization).
 *   Without a response nothing is applied: the query is due again at the
 *   database's next_query_at.
 *   4. paynotify_bill_due(n) claims the planned daily bills that are due
 *      (paynotify_bill_plan plans them, scheduled by pg_cron or by hand);
 *      each is fetched in steps, each step a request built by
 *      paynotify_bill_request(channel, day) and its response handed to
 *      paynotify_bill_apply, which says whether another step follows (a
 *      WeChat Pay bill's download after its address, Stripe's next page)
 *      and imports the bill at the last; bill requests have their own
 *      size bound (--max-bill) and timeout (--bill-timeout) and keep each
 *      channel's pace.
 * When nothing was due the loop sleeps --interval; a broken connection is
 * made again with back-off (100 ms doubling to --reconnect-max).
 *
 * SIGTERM / SIGINT: the query or bill step under way finishes (sent,
 * applied), no other starts; exit 0.
 *
 * --once: one round, then exit.  Standard output has the summary
 * "claimed N, applied N, failed N" (and "; bills: claimed N, imported N,
 * failed N" when bills were due); the exit status is 0 only when every
 * claimed query was answered and its answer applied, and every claimed
 * bill imported.  Exit status 2: a bad
 * option or setting.
 *
 * This file is the loop; reconcile_opts.c the settings, reconcile_db.c
 * the database calls, reconcile_http.c the request, reconcile_pace.c the
 * pace of each channel, reconcile_stop.c the stop flag and the nap.
 */
#include "reconcile.h"

#include <stdio.h>

/*
 * Rounds until SIGTERM (with --once: one round).  0, or 1 when --once met
 * a database error.
 */
static int
reconcile_loop(CURL *easy, reconcile_tally *tally)
{
	PGconn	   *conn = NULL;
	long long	backoff_ms = 100;

	while (!stop_requested)
	{
		int			got = -1;

		if (conn != NULL || (conn = connect_db()) != NULL)
			got = round_once(conn, easy, tally);
		if (got < 0)
		{
			/* no connection, a broken one or a failed claim: start afresh, slowly */
			PQfinish(conn);
			conn = NULL;
			if (once)
				return 1;
			nap_until(pn_now_ms() + backoff_ms);
			backoff_ms = backoff_ms * 2 > cfg.reconnect_max_ms ? cfg.reconnect_max_ms : backoff_ms * 2;
			continue;
		}
		backoff_ms = 100;
		if (once)
			break;
		if (got == 0)
			nap_until(pn_now_ms() + cfg.interval_ms);
	}
	PQfinish(conn);
	return 0;
}

int
main(int argc, char **argv)
{
	int			rc;
	CURL	   *easy;
	reconcile_tally tally = {0};

	pn_log_init(PN_PROGRAM, false);
	rc = load_config(argc, argv);
	if (rc >= 0)
		return rc;
	pn_on_stop_signals(on_stop_signal);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (easy = curl_easy_init()) == NULL)
	{
		pn_log("libcurl initialisation failed");
		return 1;
	}
	pn_log("started (version %s, schema %s, %lld requests/s per channel)", PAYNOTIFY_VERSION,
		   cfg.schema, cfg.rate);
	rc = reconcile_loop(easy, &tally);
	curl_easy_cleanup(easy);
	curl_global_cleanup();
	pn_log("stopped");
	if (once)
	{
		printf("claimed %lld, applied %lld, failed %lld", tally.claimed, tally.applied, tally.failed);
		if (tally.left > 0)
			printf(", left %lld (due again later)", tally.left);
		if (tally.bills_claimed > 0)
			printf("; bills: claimed %lld, imported %lld, failed %lld", tally.bills_claimed,
				   tally.bills_imported, tally.bills_failed);
		printf("%s\n", rc != 0 ? "; stopped early by a database error (logged)" : "");
		if (tally.failed > 0 || tally.left > 0 || tally.bills_failed > 0)
			rc = 1;
	}
	return rc;
}
