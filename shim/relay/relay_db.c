/*
 * relay_db.c
 *	  paynotify-relay's database calls: the connection, the fan-out, the
 *	  lease of due deliveries (into free job slots) and the report of the
 *	  finished ones.  Each is its own short transaction (autocommit).
 */
#include "relay.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
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
	char		lock_timeout[64];

	who.schema = cfg.schema;
	if ((conn = pn_pq_connect(cfg.dsn, &who)) == NULL)
		return NULL;
	/*
	 * The relay's own commits need not wait for the WAL flush: a fan-out is
	 * one transaction (outbox rows out, deliveries in), so a crash loses it
	 * whole and the outbox rows come back; a lost result means a delivery
	 * made again; a lost lease, a delivery due again at once.  Either way
	 * at least once, and each call is shorter.
	 */
	/*
	 * No call waits for a lock longer than a quarter of the request timeout
	 * (at most 1 s): the requests in flight are not read meanwhile, and
	 * their timeouts run on.  The report skips a row another transaction
	 * has locked (and reports it again later); a lease skips them too.
	 */
	snprintf(lock_timeout, sizeof(lock_timeout), "SET lock_timeout = %lld",
			 cfg.timeout_ms / 4 < 1000 ? cfg.timeout_ms / 4 : 1000);
	if (!pn_pq_command_ok(conn, "SET synchronous_commit = off") ||
		!pn_pq_command_ok(conn, lock_timeout) ||
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
 * Marks the jobs listed in idx whose delivery the report skipped because
 * another transaction held its row lock (locked: an array literal of ids).
 */
static void
mark_locked(job *jobs, const int *idx, int count, const char *locked)
{
	const char *p = locked;

	while (*p == '{' || *p == ',')
	{
		const char *end;
		size_t		len;

		p++;
		end = p + strcspn(p, ",}");
		len = (size_t) (end - p);
		for (int c = 0; len > 0 && c < count; c++)
		{
			job		   *j = &jobs[idx[c]];

			if (strlen(j->delivery_id) == len && strncmp(j->delivery_id, p, len) == 0)
				j->locked = true;
		}
		p = end;
	}
}

/*
 * paynotify_relay_report() of the jobs listed in idx: how many results
 * were recorded (those whose lease still held), or -1 when it failed
 * (logged when log_failure); those it skipped because their row was
 * locked are marked locked.
 */
static int
report_rows(PGconn *conn, job *jobs, const int *idx, int count, bool log_failure)
{
	pn_buf		arr[4];
	char		sql[256];
	const char *params[4];
	PGresult   *res;
	bool		ok = true;
	int			recorded = -1;

	for (int k = 0; k < 4; k++)
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
		/* status and error NULL: not attempted */
		array_element(&arr[2], good || j->released ? NULL : j->error);
		array_element(&arr[3], j->lease);
	}
	for (int k = 0; k < 4; k++)
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
				 "SELECT recorded, locked FROM %s.paynotify_relay_report($1::bigint[], $2::integer[], $3::text[], $4::bigint[])",
				 cfg.schema);
		res = PQexecParams(conn, sql, 4, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		{
			if (log_failure)
				pn_log("report failed: %s", pn_pq_message(conn));
		}
		else
		{
			recorded = atoi(PQgetvalue(res, 0, 0));
			mark_locked(jobs, idx, count, PQgetvalue(res, 0, 1));
		}
		PQclear(res);
	}
	for (int k = 0; k < 4; k++)
		pn_buf_free(&arr[k]);
	return recorded;
}

/*
 * Counts a finished (or released) job in *tally; with --once, prints a
 * failure on standard output with the reason recorded in last_error.
 */
void
count_job(const job *j, relay_tally *tally)
{
	if (j->released)
		tally->not_attempted++;
	else if (j->status >= 200 && j->status <= 299)
		tally->delivered++;
	else
	{
		tally->failed++;
		if (once)
		{
			printf("delivery %s (%s) to endpoint %s failed: %s\n",
				   j->delivery_id, j->webhook_id, j->endpoint_id, j->error);
			fflush(stdout);
		}
	}
}

/* Empties a slot: its copies freed, its secret wiped. */
void
free_job(job *j)
{
	OPENSSL_cleanse(j->secret, sizeof(j->secret));
	free(j->delivery_id);
	free(j->webhook_id);
	free(j->endpoint_id);
	free(j->url);
	free(j->body);
	free(j->lease);
	memset(j, 0, sizeof(*j));
	j->state = JOB_FREE;
}

/* A result whose row another transaction had locked: reported again after */
#define LOCKED_RETRY_MS 250

/*
 * Whether a done job waits to be reported again (not before report_at),
 * so is left out of this turn's report.
 */
bool
job_waits(const job *j, long long now)
{
	return j->state == JOB_DONE && j->report_at > now;
}

/*
 * Records the results of the done jobs (JOB_DONE) and frees their slots:
 * the number recorded, or -1 on a database error (the done jobs are kept,
 * to be reported once the connection is back).  When the report of them
 * all fails, each is reported on its own, so that one result the database
 * refuses does not hold back the others; that one is logged (once),
 * counted in *lost and kept, to be reported again after a back-off until
 * its lease ends: an attempted request is never given back as not
 * attempted (it would be sent again and again, its attempts never
 * growing).  A result whose row another transaction holds locked (an
 * operator's, say) is skipped by the report and kept, reported again
 * after LOCKED_RETRY_MS until its lease ends: it holds back neither the
 * other results nor new leases.  A result whose lease has ended (taken by
 * another relay) is not recorded: logged.
 */
int
report_jobs(PGconn *conn, job *jobs, int nslots, int *lost)
{
	int		   *idx = malloc(sizeof(int) * (nslots > 0 ? nslots : 1));
	int			done = 0,
				refused = 0,
				locked = 0,
				recorded;
	long long	now = pn_now_ms();

	if (idx == NULL)
	{
		pn_log("out of memory");
		return -1;
	}
	for (int i = 0; i < nslots; i++)
	{
		job		   *j = &jobs[i];

		if (j->state != JOB_DONE || job_waits(j, now))
			continue;
		if (j->lease_end > 0 && now >= j->lease_end)
		{
			/* another relay may hold it by now: nothing to record */
			pn_log("the result of delivery %s to endpoint %s was not recorded before its lease ended (due again)",
				   j->delivery_id, j->endpoint_id);
			free_job(j);
			continue;
		}
		idx[done++] = i;
	}
	if (done == 0)
	{
		free(idx);
		return 0;
	}
	for (int c = 0; c < done; c++)
		jobs[idx[c]].locked = false;
	recorded = report_rows(conn, jobs, idx, done, true);
	if (recorded < 0)
	{
		if (PQstatus(conn) != CONNECTION_OK)
		{
			free(idx);
			return -1;
		}
		recorded = 0;
		for (int c = 0; c < done; c++)
		{
			job		   *j = &jobs[idx[c]];
			int			one = report_rows(conn, jobs, &idx[c], 1, false);

			if (one < 0 && PQstatus(conn) != CONNECTION_OK)
			{
				/* those reported on their own are freed; the rest wait */
				free(idx);
				return -1;
			}
			if (one < 0)
			{
				if (!j->refused)
					pn_log("could not record the result of delivery %s to endpoint %s (reported again until its lease ends): %s",
						   j->delivery_id, j->endpoint_id, pn_pq_message(conn));
				refused++;
				if (j->released)
				{
					/* not attempted: due again when its lease ends */
					free_job(j);
					continue;
				}
				j->refused = true;
				j->report_at = pn_now_ms() + 1000;
				continue;
			}
			recorded += one;
			if (j->locked)
			{
				locked++;
				j->report_at = pn_now_ms() + LOCKED_RETRY_MS;
			}
			else
				free_job(j);
		}
	}
	else
	{
		for (int c = 0; c < done; c++)
		{
			job		   *j = &jobs[idx[c]];

			if (j->locked)
			{
				/* another transaction holds its row: again next turn */
				locked++;
				j->report_at = pn_now_ms() + LOCKED_RETRY_MS;
			}
			else
				free_job(j);
		}
	}
	if (recorded < done - refused - locked)
		pn_log("%d of %d results not recorded: their lease had ended (due again, or taken by another relay)",
			   done - refused - locked - recorded, done);
	*lost += refused;
	free(idx);
	return recorded;
}

/* The last failed call waited for a lock past lock_timeout (55P03). */
static bool last_lock_timeout = false;

/* What to do about an error whose cause is the setup (see pn_pq_explain_error). */
static void
explain_error(PGconn *conn, const char *sqlstate)
{
	pn_pq_who	who = relay_who;

	who.schema = cfg.schema;
	pn_pq_explain_error(conn, sqlstate, &who);
}

/*
 * SELECT schema.function($1::integer[, $2::integer]) with limit as $1 and
 * the request timeout as $2; NULL (logged as what failed) on an error.
 */
static PGresult *
call_with_limit(PGconn *conn, const char *what, const char *sql_fmt, long long limit)
{
	char		sql[256];
	char		value[24],
				timeout[24];
	const char *params[2] = {value, timeout};
	PGresult   *res;

	snprintf(value, sizeof(value), "%lld", limit);
	snprintf(timeout, sizeof(timeout), "%lld", cfg.timeout_ms);
	snprintf(sql, sizeof(sql), sql_fmt, cfg.schema);
	res = PQexecParams(conn, sql, strstr(sql_fmt, "$2") ? 2 : 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		char		sqlstate[6] = "";

		if (state != NULL)
			snprintf(sqlstate, sizeof(sqlstate), "%s", state);
		last_lock_timeout = strcmp(sqlstate, "55P03") == 0;
		pn_log("%s failed: %s", what, pn_pq_message(conn));
		PQclear(res);
		explain_error(conn, sqlstate);
		return NULL;
	}
	return res;
}

/*
 * The new outbox events turned into deliveries: how many, -2 when it
 * waited for a lock past lock_timeout (a row an operator holds: the
 * connection is fine, the claim goes on), or -1.
 */
int
fanout(PGconn *conn)
{
	PGresult   *res = call_with_limit(conn, "fan-out",
									  "SELECT %s.paynotify_relay_fanout($1::integer)",
									  cfg.fanout_batch);
	int			taken;

	if (res == NULL)
		return PQstatus(conn) == CONNECTION_OK && last_lock_timeout ? -2 : -1;
	taken = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return taken;
}

/* A copy of a value of res, or NULL (out of memory). */
static char *
copy_value(PGresult *res, int row, int col)
{
	return strdup(PQgetvalue(res, row, col));
}

/*
 * Leases up to limit due deliveries into the free slots of jobs (limit is
 * at most their number): how many, or -1 on a database error.  Each leased
 * job is JOB_LEASED, for the caller to start (or give back).
 */
int
lease_jobs(PGconn *conn, job *jobs, int nslots, int limit)
{
	PGresult   *res = call_with_limit(conn, "claim",
									  "SELECT delivery_id, webhook_id, endpoint_id, url, secret, body, lease"
									  " FROM %s.paynotify_relay_lease($1::integer, $2::integer)",
									  limit);
	int			n,
				slot = 0;

	if (res == NULL)
		return -1;
	n = PQntuples(res);
	for (int i = 0; i < n; i++)
	{
		job		   *j;

		while (slot < nslots && jobs[slot].state != JOB_FREE)
			slot++;
		if (slot == nslots)
		{
			/* cannot be (limit <= free slots): the rest's leases end */
			pn_log("claim returned more rows than asked for");
			break;
		}
		j = &jobs[slot];
		j->delivery_id = copy_value(res, i, 0);
		j->webhook_id = copy_value(res, i, 1);
		j->endpoint_id = copy_value(res, i, 2);
		j->url = copy_value(res, i, 3);
		j->secret_len = decode_secret(PQgetvalue(res, i, 4), j->secret);
		j->body_len = PQgetlength(res, i, 5);
		j->body = malloc((size_t) j->body_len + 1);
		if (j->body != NULL)
			memcpy(j->body, PQgetvalue(res, i, 5), (size_t) j->body_len + 1);
		j->lease = copy_value(res, i, 6);
		/* the lease's end (2 * timeout + 10 s from the claim), less a margin */
		j->lease_end = pn_now_ms() + 2 * cfg.timeout_ms + 10000 - 2000;
		j->state = JOB_LEASED;
		if (j->delivery_id == NULL || j->webhook_id == NULL || j->endpoint_id == NULL ||
			j->url == NULL || j->body == NULL || j->lease == NULL)
		{
			/* given back at once if it can be reported, else when its lease ends */
			pn_log("out of memory");
			j->state = JOB_DONE;
			j->released = true;
			if (j->delivery_id == NULL || j->lease == NULL)
				free_job(j);
		}
	}
	for (int i = 0; i < n; i++)
		OPENSSL_cleanse(PQgetvalue(res, i, 4), (size_t) PQgetlength(res, i, 4));
	PQclear(res);
	return n;
}

/*
 * Frees the NOTIFYs libpq has queued (every statement's result may bring
 * some): called before each claim, after each report and whenever the
 * connection has something to read, so that a relay that is never idle
 * does not keep them.  A flood of them (one statement may bring thousands)
 * is given back to the system: the jobs allocated meanwhile would
 * otherwise pin the heap they grew.  How many there were (a NOTIFY that
 * came during a statement may announce an event it did not see), or -1
 * when the connection is broken.
 */
int
drain_notifies(PGconn *conn)
{
	PGnotify   *note;
	long		freed = 0;

	if (!PQconsumeInput(conn))
	{
		pn_log("database connection lost: %s", pn_pq_message(conn));
		return -1;
	}
	while ((note = PQnotifies(conn)) != NULL)
	{
		PQfreemem(note);
		freed++;
	}
	if (freed >= 1000)
		malloc_trim(0);
	return freed > INT_MAX ? INT_MAX : (int) freed;
}

