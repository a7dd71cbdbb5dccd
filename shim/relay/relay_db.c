/*
 * relay_db.c
 *	  paynotify-relay's database calls: the connection, one round (fan-out,
 *	  claim, deliver, report) and waiting for a NOTIFY.
 */
#include "relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#include <openssl/crypto.h>

/* The words of the log lines that say what to do about the setup. */
static const pn_pq_who relay_who = {PN_PROGRAM, NULL, "PAYNOTIFY_RELAY_SCHEMA", "relay", PAYNOTIFY_VERSION};

PGconn *
connect_db(void)
{
	pn_pq_who	who = relay_who;
	PGconn	   *conn;
	char		sql[128];

	who.schema = cfg.schema;
	if ((conn = pn_pq_connect(cfg.dsn, &who)) == NULL)
		return NULL;
	/* a relay that hangs inside a batch gives its claims back */
	snprintf(sql, sizeof(sql), "SET idle_in_transaction_session_timeout = %lld",
			 3 * cfg.timeout_ms + 30000);
	/*
	 * The relay's own commits need not wait for the WAL flush: a fan-out is
	 * one transaction (outbox rows out, deliveries in), so a crash loses it
	 * whole and the outbox rows come back; a lost result means a delivery
	 * made again.  Either way at least once, and the round is shorter.
	 */
	if (!pn_pq_command_ok(conn, sql) ||
		!pn_pq_command_ok(conn, "SET synchronous_commit = off") ||
		(cfg.listen && !pn_pq_command_ok(conn, "LISTEN paynotify")))
	{
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* s as a double-quoted element of an array literal, or NULL for s == NULL. */
static void
array_element(pn_buf *b, const char *s)
{
	if (b->len > 1)
		pn_buf_append(b, ",", 1);
	if (s == NULL)
	{
		pn_buf_append(b, "NULL", 4);
		return;
	}
	pn_buf_append(b, "\"", 1);
	for (; *s; s++)
	{
		if (*s == '"' || *s == '\\')
			pn_buf_append(b, "\\", 1);
		pn_buf_append(b, s, 1);
	}
	pn_buf_append(b, "\"", 1);
}

/*
 * paynotify_relay_report() of the jobs listed in idx; false when it failed
 * (logged when log_failure).
 */
static bool
report_rows(PGconn *conn, job *jobs, const int *idx, int count, bool log_failure)
{
	pn_buf		arr[3];
	char		sql[256];
	const char *params[3];
	PGresult   *res;
	bool		ok = true;

	for (int k = 0; k < 3; k++)
	{
		pn_buf_init(&arr[k]);
		pn_buf_append(&arr[k], "{", 1);
	}
	for (int c = 0; c < count; c++)
	{
		job		   *j = &jobs[idx[c]];
		char		status[16];
		bool		good = j->status >= 200 && j->status <= 299;

		snprintf(status, sizeof(status), "%ld", j->status);
		array_element(&arr[0], j->delivery_id);
		array_element(&arr[1], j->status ? status : NULL);
		array_element(&arr[2], good ? NULL : j->error);
	}
	for (int k = 0; k < 3; k++)
	{
		pn_buf_append(&arr[k], "}", 1);
		ok = ok && !arr[k].failed;
		params[k] = arr[k].data;
	}
	if (!ok)
		pn_log("out of memory");
	else
	{
		snprintf(sql, sizeof(sql),
				 "SELECT %s.paynotify_relay_report($1::bigint[], $2::integer[], $3::text[])",
				 cfg.schema);
		res = PQexecParams(conn, sql, 3, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			if (log_failure)
				pn_log("report failed: %s", pn_pq_message(conn));
			ok = false;
		}
		PQclear(res);
	}
	for (int k = 0; k < 3; k++)
		pn_buf_free(&arr[k]);
	return ok;
}

/*
 * Counts the jobs of a batch in *tally; with --once, prints each failure
 * on standard output with the reason recorded in last_error.
 */
static void
count_jobs(const job *jobs, int n, relay_tally *tally)
{
	for (int i = 0; i < n; i++)
	{
		const job  *j = &jobs[i];

		tally->claimed++;
		if (j->state != JOB_DONE)
			tally->not_attempted++;
		else if (j->status >= 200 && j->status <= 299)
			tally->delivered++;
		else
		{
			tally->failed++;
			if (once)
				printf("delivery %s (%s) to endpoint %s failed: %s\n",
					   j->delivery_id, j->webhook_id, j->endpoint_id, j->error);
		}
	}
	if (once)
		fflush(stdout);
}

/*
 * Records the done jobs; false on a database error.  When the report of
 * the batch fails, each result is recorded on its own (a savepoint each),
 * so that one result the database refuses does not give back the others
 * (deliveries made, to be made again); that one is logged, left as it was
 * (due again) and counted in *lost.
 */
static bool
report(PGconn *conn, job *jobs, int n, int *lost)
{
	int		   *idx = malloc(sizeof(int) * (n > 0 ? n : 1));
	int			done = 0;
	bool		ok = true;

	if (idx == NULL)
	{
		pn_log("out of memory");
		return false;
	}
	for (int i = 0; i < n; i++)
	{
		if (jobs[i].state == JOB_DONE)
			idx[done++] = i;
	}
	if (done > 0)
	{
		ok = pn_pq_command_ok(conn, "SAVEPOINT report");
		if (ok && !report_rows(conn, jobs, idx, done, true))
		{
			ok = pn_pq_command_ok(conn, "ROLLBACK TO SAVEPOINT report");
			for (int c = 0; ok && c < done; c++)
			{
				job		   *j = &jobs[idx[c]];

				if (!pn_pq_command_ok(conn, "SAVEPOINT one"))
					ok = false;
				else if (report_rows(conn, jobs, &idx[c], 1, false))
					ok = pn_pq_command_ok(conn, "RELEASE SAVEPOINT one");
				else
				{
					pn_log("could not record the result of delivery %s to endpoint %s: %s",
						   j->delivery_id, j->endpoint_id, pn_pq_message(conn));
					(*lost)++;
					ok = pn_pq_command_ok(conn, "ROLLBACK TO SAVEPOINT one");
				}
			}
		}
	}
	free(idx);
	return ok;
}

/* What to do about an error whose cause is the setup (see pn_pq_explain_error). */
static void
explain_error(PGconn *conn, const char *sqlstate)
{
	pn_pq_who	who = relay_who;

	who.schema = cfg.schema;
	pn_pq_explain_error(conn, sqlstate, &who);
}

/*
 * SELECT schema.function($1::integer) with limit as $1; NULL (logged as
 * what failed) on an error.
 */
static PGresult *
call_with_limit(PGconn *conn, const char *what, const char *sql_fmt, long long limit)
{
	char		sql[256];
	char		value[24];
	const char *params[1] = {value};
	PGresult   *res;

	snprintf(value, sizeof(value), "%lld", limit);
	snprintf(sql, sizeof(sql), sql_fmt, cfg.schema);
	res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		char		sqlstate[6] = "";

		if (state != NULL)
			snprintf(sqlstate, sizeof(sqlstate), "%s", state);
		pn_log("%s failed: %s", what, pn_pq_message(conn));
		PQclear(res);
		explain_error(conn, sqlstate);
		return NULL;
	}
	return res;
}

/* The new outbox events turned into deliveries: how many, or -1. */
static int
fanout(PGconn *conn)
{
	PGresult   *res = call_with_limit(conn, "fan-out",
									  "SELECT %s.paynotify_relay_fanout($1::integer)",
									  cfg.fanout_batch);
	int			taken;

	if (res == NULL)
		return -1;
	taken = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return taken;
}

/* Job i from row i of the claim; jobs[0 .. i-1] are filled. */
static void
job_from_row(PGresult *res, int i, job *jobs, int *counts)
{
	job		   *j = &jobs[i];

	j->delivery_id = PQgetvalue(res, i, 0);
	j->webhook_id = PQgetvalue(res, i, 1);
	j->endpoint_id = PQgetvalue(res, i, 2);
	j->url = PQgetvalue(res, i, 3);
	j->secret_len = decode_secret(PQgetvalue(res, i, 4), j->secret);
	j->max_in_flight = atoi(PQgetvalue(res, i, 5));
	if (j->max_in_flight < 1)
		j->max_in_flight = 1;
	j->body = PQgetvalue(res, i, 6);
	j->body_len = PQgetlength(res, i, 6);
	j->state = JOB_WAITING;
	/* the counter of the first job of the same endpoint (rows are few) */
	j->in_flight = &counts[i];
	for (int k = 0; k < i; k++)
		if (strcmp(jobs[k].endpoint_id, j->endpoint_id) == 0)
		{
			j->in_flight = jobs[k].in_flight;
			break;
		}
}

/* Wipes the decoded secrets (jobs may be NULL) and the whsec_ texts of the claim. */
static void
cleanse_secrets(PGresult *res, job *jobs, int n)
{
	for (int i = 0; i < n; i++)
	{
		if (jobs != NULL)
			OPENSSL_cleanse(jobs[i].secret, sizeof(jobs[i].secret));
		OPENSSL_cleanse(PQgetvalue(res, i, 4), (size_t) PQgetlength(res, i, 4));
	}
}

/*
 * Delivers the claimed rows of res, reports the results and commits: the
 * number of deliveries, or -1 on a database error; *lost counts the
 * results that could not be recorded.
 */
static int
deliver_claimed(PGconn *conn, CURLM *multi, PGresult *res, relay_tally *tally, int *lost)
{
	int			n = PQntuples(res);
	job		   *jobs = calloc(n, sizeof(job));
	int		   *counts = calloc(n, sizeof(int));
	bool		ok;

	if (jobs == NULL || counts == NULL)
	{
		pn_log("out of memory");
		free(jobs);
		free(counts);
		cleanse_secrets(res, NULL, n);
		return -1;
	}
	for (int i = 0; i < n; i++)
		job_from_row(res, i, jobs, counts);
	run_jobs(multi, jobs, n);
	count_jobs(jobs, n, tally);
	ok = report(conn, jobs, n, lost) && pn_pq_command_ok(conn, "COMMIT");
	cleanse_secrets(res, jobs, n);
	free(jobs);
	free(counts);
	return ok ? n : -1;
}

/*
 * Frees the NOTIFYs libpq has queued (every statement's result may bring
 * some): called every round, so that a relay that is never idle does not
 * keep them all.  False when the connection is broken.
 */
static bool
drain_notifies(PGconn *conn)
{
	PGnotify   *note;

	if (!PQconsumeInput(conn))
	{
		pn_log("database connection lost: %s", pn_pq_message(conn));
		return false;
	}
	while ((note = PQnotifies(conn)) != NULL)
		PQfreemem(note);
	return true;
}

/*
 * One round: fan out, claim, deliver, report.  Returns the number of
 * outbox events and deliveries handled (0: nothing to do), -1 on a
 * database error (the caller reconnects).  *lost is set to the number of
 * results the database refused (the caller backs off).
 */
int
round_once(PGconn *conn, CURLM *multi, relay_tally *tally, int *lost)
{
	int			taken,
				n;
	PGresult   *res;

	*lost = 0;
	if (!drain_notifies(conn))
		return -1;
	taken = fanout(conn);
	if (taken < 0 || !pn_pq_command_ok(conn, "BEGIN"))
		return -1;
	/*
	 * No more than can be in flight at once: the claim gives each endpoint
	 * at most its max_in_flight, so every claimed delivery starts at once
	 * and none waits, claimed but unstarted, behind a slow receiver.
	 */
	res = call_with_limit(conn, "claim",
						  "SELECT delivery_id, webhook_id, endpoint_id, url, secret, max_in_flight, body"
						  " FROM %s.paynotify_relay_claim($1::integer)",
						  cfg.batch < cfg.max_in_flight ? cfg.batch : cfg.max_in_flight);
	if (res == NULL)
		return -1;
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return pn_pq_command_ok(conn, "COMMIT") ? taken : -1;
	}
	n = deliver_claimed(conn, multi, res, tally, lost);
	PQclear(res);
	return n < 0 ? -1 : taken + n;
}

/*
 * Waits up to ms for a NOTIFY (or just sleeps when not listening).
 * Returns false when the connection is broken.
 */
bool
wait_for_work(PGconn *conn, long long ms)
{
	int			sock = PQsocket(conn);
	fd_set		rd;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	if (sock < 0)
		return false;
	if (stop_requested)
		return true;
	FD_ZERO(&rd);
	FD_SET(sock, &rd);
	if (select(sock + 1, &rd, NULL, NULL, &tv) < 0 && errno != EINTR)
		return false;
	return drain_notifies(conn);
}
