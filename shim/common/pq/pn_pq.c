/*
 * pn_pq.c
 *	  The daemons' database connection (see pn_pq.h).
 */
#include "pn_pq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The connection's last error as one line (libpq's messages end in a
 * newline, some have several).  A static buffer: the daemons have one thread.
 */
const char *
pn_pq_message(PGconn *conn)
{
	static char line[512];

	pn_log_text(line, sizeof(line), PQerrorMessage(conn));
	return line;
}

/* Runs a statement that returns no rows; false, logged, when it failed. */
bool
pn_pq_command_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	bool		ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		pn_log("\"%s\" failed: %s", sql, pn_pq_message(conn));
	PQclear(res);
	return ok;
}

/*
 * A connection string on the command line is readable by every local user
 * (ps, /proc/PID/cmdline): it must not hold a password.  True when dsn has
 * none (or does not parse: connecting will say what is wrong).
 */
bool
pn_pq_dsn_without_password(const char *dsn)
{
	char	   *err = NULL;
	PQconninfoOption *opts = PQconninfoParse(dsn, &err);
	bool		ok = true;

	if (opts == NULL)
	{
		PQfreemem(err);
		return true;
	}
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL && o->val[0] != '\0')
			ok = false;
	PQconninfoFree(opts);
	return ok;
}

/*
 * The password file libpq looked in (PGPASSFILE, else ~/.pgpass), and what
 * is wrong with it, for the log line of a connection that needed a password
 * and found none.
 */
static void
explain_no_password(PGconn *conn, const pn_pq_who *who)
{
	PQconninfoOption *opts = PQconninfo(conn);
	const char *file = NULL;
	const char *state;
	struct stat st;

	for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++)
		if (strcmp(o->keyword, "passfile") == 0 && o->val != NULL && o->val[0] != '\0')
			file = o->val;
	if (file == NULL)
		state = "and there is no home directory to find it in";
	else if (stat(file, &st) != 0)
		state = errno == ENOENT ? "which does not exist" : "which cannot be read";
	else if (!S_ISREG(st.st_mode))
		state = "which is not a plain file (libpq ignores it)";
	else if (access(file, R_OK) != 0)
		state = "which this user cannot read";
	else if (st.st_mode & (S_IRWXG | S_IRWXO))
		state = "which has group or world access (libpq ignores it: chmod 0600)";
	else
		state = "which has no line for this host, port, database and user";
	pn_log("the server asks user \"%s\" for a password and none was found: libpq reads it"
		   " from the file PGPASSFILE names (%s%s, %s), one line"
		   " host:port:database:user:password, mode 0600, owned by the user %s runs as",
		   PQuser(conn), getenv("PGPASSFILE") ? "PGPASSFILE=" : "PGPASSFILE is unset, so ~/.pgpass: ",
		   file ? file : "~/.pgpass", state, who->program);
	PQconninfoFree(opts);
}

/*
 * A connection to dsn (libpq's defaults and PG* variables fill the rest),
 * named who->program; NULL when it failed, logged with what to do about
 * a password or pg_hba.conf.
 */
PGconn *
pn_pq_connect(const char *dsn, const pn_pq_who *who)
{
	const char *keys[] = {"application_name", "connect_timeout", "dbname", NULL};
	const char *vals[] = {who->program, "5", dsn, NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		const char *hint;

		pn_log("cannot connect to the database: %s", pn_pq_message(conn));
		if (conn != NULL && PQconnectionNeedsPassword(conn))
			explain_no_password(conn, who);
		else if ((hint = pn_connect_hint(pn_pq_message(conn))) != NULL)
			pn_log("%s", hint);
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/*
 * What to do about an error of a paynotify function, when the cause is the
 * setup: no such function or schema (the schema setting does not name the
 * extension's schema in this database, or the extension is missing or too
 * old there: pg_extension says which), or no permission (the role lacks
 * the capacity).  Only outside a transaction block, where the lookup can
 * run.
 */
void
pn_pq_explain_error(PGconn *conn, const char *sqlstate, const pn_pq_who *who)
{
	PGresult   *res;

	if (sqlstate == NULL || PQtransactionStatus(conn) != PQTRANS_IDLE)
		return;
	if (strcmp(sqlstate, "42501") == 0)
	{
		pn_log("the role \"%s\" needs the %s capacity in database \"%s\": there, as the"
			   " extension's owner, SELECT %s.paynotify_grant('%s', '%s')",
			   PQuser(conn), who->capacity, PQdb(conn), who->schema, PQuser(conn), who->capacity);
		return;
	}
	if (strcmp(sqlstate, "42883") != 0 && strcmp(sqlstate, "3F000") != 0)
		return;
	res = PQexec(conn, "SELECT e.extnamespace::pg_catalog.regnamespace::text, e.extversion"
				 " FROM pg_catalog.pg_extension e WHERE e.extname = 'paynotify'");
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		pn_log("%s is \"%s\": set it to the schema of the paynotify extension",
			   who->schema_var, who->schema);
	else if (PQntuples(res) == 0)
		pn_log("database \"%s\" has no paynotify extension (%s is \"%s\"):"
			   " connect PAYNOTIFY_DSN to the database that has it", PQdb(conn),
			   who->schema_var, who->schema);
	else if (strcmp(PQgetvalue(res, 0, 0), who->schema) != 0)
		pn_log("%s is \"%s\", but the paynotify extension of database \"%s\""
			   " is in schema \"%s\": set %s=%s",
			   who->schema_var, who->schema, PQdb(conn), PQgetvalue(res, 0, 0),
			   who->schema_var, PQgetvalue(res, 0, 0));
	else
		pn_log("the paynotify extension of database \"%s\" (schema \"%s\") is version %s,"
			   " older than %s (%s): ALTER EXTENSION paynotify UPDATE",
			   PQdb(conn), who->schema, PQgetvalue(res, 0, 1), who->program, who->version);
	PQclear(res);
}
