/*
 * reconcile_db.c
 *	  paynotify-reconcile's database calls: the connection and one round
 *	  (claim the due queries; for each, the request the database builds
 *	  and signs, the request sent, the response applied).
 */
#include "reconcile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The words of the log lines that say what to do about the setup. */
static const pn_pq_who reconcile_who = {PN_PROGRAM, NULL, "PAYNOTIFY_RECONCILE_SCHEMA", "relay",
PAYNOTIFY_VERSION};

PGconn *
connect_db(void)
{
	pn_pq_who	who = reconcile_who;

	who.schema = cfg.schema;
	return pn_pq_connect(cfg.dsn, &who);
}

/*
 * A statement's result, or NULL (logged as what failed, with what to do
 * when the cause is the setup) on an error.
 */
static PGresult *
call(PGconn *conn, const char *what, const char *sql_fmt, int nparams, const char *const *values,
	 const int *lengths, const int *formats)
{
	char		sql[512];
	PGresult   *res;

	snprintf(sql, sizeof(sql), sql_fmt, cfg.schema);
	res = PQexecParams(conn, sql, nparams, NULL, values, lengths, formats, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		char		sqlstate[6] = "";
		pn_pq_who	who = reconcile_who;

		if (state != NULL)
			snprintf(sqlstate, sizeof(sqlstate), "%s", state);
		pn_log("%s failed: %s", what, pn_pq_message(conn));
		PQclear(res);
		who.schema = cfg.schema;
		pn_pq_explain_error(conn, sqlstate, &who);
		return NULL;
	}
	return res;
}

/* The connection broke (the caller reconnects), as opposed to one statement failing. */
static bool
connection_lost(PGconn *conn)
{
	return PQstatus(conn) != CONNECTION_OK;
}

/*
 * One query: the request built in the database, sent, its response
 * applied, one log line.  False when the connection broke.
 */
static bool
run_query(PGconn *conn, CURL *easy, const char *channel, const char *order_no,
		  reconcile_tally *tally)
{
	const char *params[5] = {channel, order_no};
	int			lengths[5] = {0};
	int			formats[5] = {0};
	char		chan_log[64],
				order_log[96],
				status[16];
	query_request rq = {0};
	query_response rs;
	PGresult   *req,
			   *applied;
	long long	started;
	bool		answered;

	pn_log_text(chan_log, sizeof(chan_log), channel);
	pn_log_text(order_log, sizeof(order_log), order_no);
	/* one row per header (or one without any): the JSON object stays in the database */
	req = call(conn, "building the request", "SELECT r.method, r.url, r.body, h.key, h.value"
			   " FROM %s.paynotify_query_request($1, $2) r"
			   " LEFT JOIN LATERAL pg_catalog.jsonb_each_text(r.headers) h ON true",
			   2, params, NULL, NULL);
	if (req == NULL || PQntuples(req) == 0 || PQgetisnull(req, 0, 0) || PQgetisnull(req, 0, 1))
	{
		if (req != NULL)
			pn_log("query %s %s: the database built no request", chan_log, order_log);
		PQclear(req);
		tally->failed++;
		return !connection_lost(conn);
	}
	rq.method = PQgetvalue(req, 0, 0);
	rq.url = PQgetvalue(req, 0, 1);
	rq.body = PQgetisnull(req, 0, 2) ? NULL : PQgetvalue(req, 0, 2);
	rq.body_len = PQgetlength(req, 0, 2);
	rq.header_names = calloc(PQntuples(req), sizeof(char *));
	rq.header_values = calloc(PQntuples(req), sizeof(char *));
	if (rq.header_names == NULL || rq.header_values == NULL)
	{
		pn_log("out of memory");
		free(rq.header_names);
		free(rq.header_values);
		PQclear(req);
		tally->failed++;
		return true;
	}
	for (int i = 0; i < PQntuples(req); i++)
		if (!PQgetisnull(req, i, 3))
		{
			rq.header_names[rq.n_headers] = PQgetvalue(req, i, 3);
			rq.header_values[rq.n_headers++] = PQgetisnull(req, i, 4) ? "" : PQgetvalue(req, i, 4);
		}

	response_init(&rs);
	started = pn_now_ms();
	answered = http_send(easy, &rq, &rs);
	free(rq.header_names);
	free(rq.header_values);
	PQclear(req);
	pace_result(channel, started, !answered || rs.status == 429 || rs.status >= 500,
				rs.retry_after_ms);
	if (!answered)
	{
		/* no response: nothing to apply; the database's next_query_at brings it back */
		pn_log("query %s %s: no response (%s)", chan_log, order_log, rs.error);
		response_free(&rs);
		tally->failed++;
		return true;
	}

	snprintf(status, sizeof(status), "%ld", rs.status);
	params[2] = status;
	params[3] = rs.headers.data;
	params[4] = rs.body.data;
	lengths[4] = (int) rs.body.len;
	formats[4] = 1;				/* the body as bytes, whatever they are */
	applied = call(conn, "applying the response",
				   "SELECT a.outcome FROM %s.paynotify_query_apply($1, $2, $3::integer, $4::jsonb, $5::bytea) a",
				   5, params, lengths, formats);
	if (applied == NULL || PQntuples(applied) == 0)
	{
		pn_log("query %s %s: HTTP %ld, not applied", chan_log, order_log, rs.status);
		tally->failed++;
	}
	else
	{
		char		outcome[96];

		pn_log_text(outcome, sizeof(outcome),
					PQgetisnull(applied, 0, 0) ? "(none)" : PQgetvalue(applied, 0, 0));
		pn_log("query %s %s: HTTP %ld, outcome %s", chan_log, order_log, rs.status, outcome);
		tally->applied++;
	}
	PQclear(applied);
	response_free(&rs);
	return !connection_lost(conn);
}

/*
 * One round: claims the due queries and runs them, each channel at its
 * pace (the next query is the first whose channel may go now, or the one
 * that may go soonest).  Returns the number claimed (0: nothing due), -1
 * when the connection broke or the claim failed (the caller reconnects).
 * On SIGTERM the query under way finishes; the rest are left claimed
 * (the database made them due again later).
 */
int
round_once(PGconn *conn, CURL *easy, reconcile_tally *tally)
{
	char		limit[24];
	const char *params[1] = {limit};
	PGresult   *res;
	int			n;
	bool	   *done;
	bool		ok = true;

	snprintf(limit, sizeof(limit), "%lld", cfg.batch);
	res = call(conn, "claiming the due queries",
			   "SELECT d.channel, d.order_no FROM %s.paynotify_query_due($1::integer) d",
			   1, params, NULL, NULL);
	if (res == NULL)
		return -1;
	n = PQntuples(res);
	tally->claimed += n;
	if ((done = calloc(n > 0 ? n : 1, sizeof(bool))) == NULL)
	{
		pn_log("out of memory");
		PQclear(res);
		return -1;
	}
	for (int left = n; left > 0 && ok && !stop_requested; left--)
	{
		int			next = -1;
		long long	soonest = 0;

		for (int i = 0; i < n; i++)
		{
			long long	at;

			if (done[i])
				continue;
			at = pace_ready_at(PQgetvalue(res, i, 0));
			if (next < 0 || at < soonest)
				next = i, soonest = at;
		}
		nap_until(soonest);
		if (stop_requested)
			break;
		done[next] = true;
		ok = run_query(conn, easy, PQgetvalue(res, next, 0), PQgetvalue(res, next, 1), tally);
	}
	for (int i = 0; i < n; i++)
		if (!done[i])
			tally->left++;
	if (stop_requested && tally->left > 0)
		pn_log("stopping: %lld claimed queries left for later", tally->left);
	free(done);
	PQclear(res);
	return ok ? n : -1;
}
