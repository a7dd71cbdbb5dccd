/*
 * reconcile_db.c
 *	  paynotify-reconcile's database calls: the connection and one round
 *	  (claim the due queries; for each, the request the database builds
 *	  and signs, the request sent, the response applied; then the due
 *	  bills, each fetched step by step the same way).
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

/* What one exchange is: a query, or a step of a bill's fetch. */
typedef struct exchange_kind
{
	const char *noun;			/* "query", "bill" in the log */
	const char *request_sql;	/* ($1, $2) -> method, url, body, header key, value */
	const char *apply_sql;		/* ($1, $2, status, headers, body) -> outcome[, more] */
	long long  *max_response;
	const char *max_setting;
	long long  *timeout_ms;
} exchange_kind;

static const exchange_kind query_kind = {
	"query",
	/* one row per header (or one without any): the JSON object stays in the database */
	"SELECT r.method, r.url, r.body, h.key, h.value"
	" FROM %s.paynotify_query_request($1, $2) r"
	" LEFT JOIN LATERAL pg_catalog.jsonb_each_text(r.headers) h ON true",
	"SELECT a.outcome FROM %s.paynotify_query_apply($1, $2, $3::integer, $4::jsonb, $5::bytea) a",
	&cfg.max_response, "PAYNOTIFY_RECONCILE_MAX_RESPONSE", &cfg.timeout_ms
};

static const exchange_kind bill_kind = {
	"bill",
	"SELECT r.method, r.url, r.body, h.key, h.value"
	" FROM %s.paynotify_bill_request($1, $2::date) r"
	" LEFT JOIN LATERAL pg_catalog.jsonb_each_text(r.headers) h ON true",
	"SELECT a.outcome, a.more FROM %s.paynotify_bill_apply($1, $2::date, $3::integer, $4::jsonb, $5::bytea) a",
	&cfg.max_bill, "PAYNOTIFY_RECONCILE_MAX_BILL", &cfg.bill_timeout_ms
};

/* How an exchange ended. */
typedef enum
{
	EX_FAILED,					/* no request, no response, or not applied */
	EX_APPLIED,					/* the answer applied: outcome (and more) */
	EX_LOST						/* the connection broke */
} exchange_end;

/*
 * One exchange: the request built in the database, sent at the channel's
 * pace, its response applied, one log line (kind, channel, key, HTTP
 * status, outcome).  The outcome the database gave is copied to outcome;
 * more is the second column of a bill's apply (another step follows).
 */
static exchange_end
exchange(PGconn *conn, CURL *easy, const exchange_kind *kind, const char *channel,
		 const char *key, char *outcome, size_t outcome_size, bool *more)
{
	const char *params[5] = {channel, key};
	int			lengths[5] = {0};
	int			formats[5] = {0};
	char		chan_log[64],
				key_log[96],
				status[16];
	query_request rq = {0};
	query_response rs;
	PGresult   *req,
			   *applied;
	long long	started;
	bool		answered;
	exchange_end end;

	*more = false;
	outcome[0] = '\0';
	pn_log_text(chan_log, sizeof(chan_log), channel);
	pn_log_text(key_log, sizeof(key_log), key);
	req = call(conn, "building the request", kind->request_sql, 2, params, NULL, NULL);
	if (req == NULL || PQntuples(req) == 0 || PQgetisnull(req, 0, 0) || PQgetisnull(req, 0, 1))
	{
		if (req != NULL)
			pn_log("%s %s %s: the database built no request", kind->noun, chan_log, key_log);
		PQclear(req);
		return connection_lost(conn) ? EX_LOST : EX_FAILED;
	}
	rq.method = PQgetvalue(req, 0, 0);
	rq.url = PQgetvalue(req, 0, 1);
	rq.body = PQgetisnull(req, 0, 2) ? NULL : PQgetvalue(req, 0, 2);
	rq.body_len = PQgetlength(req, 0, 2);
	rq.max_response = *kind->max_response;
	rq.max_setting = kind->max_setting;
	rq.timeout_ms = *kind->timeout_ms;
	rq.header_names = calloc(PQntuples(req), sizeof(char *));
	rq.header_values = calloc(PQntuples(req), sizeof(char *));
	if (rq.header_names == NULL || rq.header_values == NULL)
	{
		pn_log("out of memory");
		free(rq.header_names);
		free(rq.header_values);
		PQclear(req);
		return EX_FAILED;
	}
	for (int i = 0; i < PQntuples(req); i++)
		if (!PQgetisnull(req, i, 3))
		{
			rq.header_names[rq.n_headers] = PQgetvalue(req, i, 3);
			rq.header_values[rq.n_headers++] = PQgetisnull(req, i, 4) ? "" : PQgetvalue(req, i, 4);
		}

	response_init(&rs);
	nap_until(pace_ready_at(channel));
	started = pn_now_ms();
	answered = http_send(easy, &rq, &rs);
	free(rq.header_names);
	free(rq.header_values);
	PQclear(req);
	pace_result(channel, started, !answered || rs.status == 429 || rs.status >= 500,
				rs.retry_after_ms);
	if (!answered)
	{
		/* no response: nothing to apply; the database's next time brings it back */
		pn_log("%s %s %s: no response (%s)", kind->noun, chan_log, key_log, rs.error);
		response_free(&rs);
		return EX_FAILED;
	}

	snprintf(status, sizeof(status), "%ld", rs.status);
	params[2] = status;
	params[3] = rs.headers.data;
	params[4] = rs.body.data;
	lengths[4] = (int) rs.body.len;
	formats[4] = 1;				/* the body as bytes, whatever they are */
	applied = call(conn, "applying the response", kind->apply_sql, 5, params, lengths, formats);
	if (applied == NULL || PQntuples(applied) == 0)
	{
		pn_log("%s %s %s: HTTP %ld, not applied", kind->noun, chan_log, key_log, rs.status);
		end = EX_FAILED;
	}
	else
	{
		pn_log_text(outcome, outcome_size,
					PQgetisnull(applied, 0, 0) ? "(none)" : PQgetvalue(applied, 0, 0));
		*more = PQnfields(applied) > 1 && !PQgetisnull(applied, 0, 1) &&
			strcmp(PQgetvalue(applied, 0, 1), "t") == 0;
		pn_log("%s %s %s: HTTP %ld, outcome %s", kind->noun, chan_log, key_log, rs.status, outcome);
		end = EX_APPLIED;
	}
	PQclear(applied);
	response_free(&rs);
	return connection_lost(conn) ? EX_LOST : end;
}

/* One query, tallied.  False when the connection broke. */
static bool
run_query(PGconn *conn, CURL *easy, const char *channel, const char *order_no,
		  reconcile_tally *tally)
{
	char		outcome[96];
	bool		more;
	exchange_end end = exchange(conn, easy, &query_kind, channel, order_no,
								outcome, sizeof(outcome), &more);

	if (end == EX_APPLIED)
		tally->applied++;
	else
		tally->failed++;
	return end != EX_LOST;
}

/*
 * One bill's fetch: its steps one after another while the database says
 * another follows (a WeChat Pay bill's download after its address, each
 * page of Stripe's list), at most BILL_MAX_STEPS; done when the database
 * imported it.  Anything else leaves it to the database's next time (a
 * bill not ready yet, a refused answer, no response).  False when the
 * connection broke.
 */
#define BILL_MAX_STEPS 10000
static bool
run_bill(PGconn *conn, CURL *easy, const char *channel, const char *day, reconcile_tally *tally)
{
	char		outcome[96] = "";
	bool		more = true;
	exchange_end end = EX_APPLIED;

	for (int step = 0; more && step < BILL_MAX_STEPS && !stop_requested; step++)
	{
		end = exchange(conn, easy, &bill_kind, channel, day, outcome, sizeof(outcome), &more);
		if (end != EX_APPLIED)
			break;
	}
	if (end == EX_APPLIED && !more && strcmp(outcome, "imported") == 0)
		tally->bills_imported++;
	else
		tally->bills_failed++;
	return end != EX_LOST;
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
	if (!ok)
		return -1;
	if (stop_requested)
		return n;

	/* then the bills due, one after another (each a few requests) */
	res = call(conn, "claiming the due bills",
			   "SELECT d.channel, d.bill_date FROM %s.paynotify_bill_due($1::integer) d",
			   1, params, NULL, NULL);
	if (res == NULL)
		return -1;
	tally->bills_claimed += PQntuples(res);
	for (int i = 0; i < PQntuples(res) && ok; i++)
	{
		if (stop_requested)
		{
			tally->bills_failed += PQntuples(res) - i;
			pn_log("stopping: %d claimed bills left for later", PQntuples(res) - i);
			break;
		}
		ok = run_bill(conn, easy, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), tally);
	}
	n += PQntuples(res);
	PQclear(res);
	return ok ? n : -1;
}
