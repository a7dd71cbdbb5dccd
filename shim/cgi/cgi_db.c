/*
 * cgi_db.c
 *	  The shim's database session: connect from PAYNOTIFY_DSN with keyword
 *	  arrays, set the session up, and run the one statement.
 *
 * In CGI mode (reuse = false) a session connects once and runs the statement
 * with PQexecParams.  In FastCGI mode (reuse = true) each worker keeps its
 * session: the statement is prepared once per connection (unless
 * PAYNOTIFY_NO_PREPARE, for a transaction-pooling pgbouncer, where every
 * request sends it with PQexecParams like CGI mode), a lost connection
 * is noticed before the next request and replaced, and failed connection
 * attempts back off exponentially (100 ms doubling up to
 * PAYNOTIFY_RECONNECT_MAX) while requests are answered 503 at once.
 *
 * A server that does not accept writes (a standby, reached by a DSN without
 * target_session_attrs=read-write, or one that was demoted) is refused after
 * connecting and dropped on SQLSTATE 25006, with the reason logged, so that
 * requests get 503 and the next attempt looks for a primary again.
 *
 * The statement runs in autocommit, so a row coming back means its
 * transaction committed; any other outcome is PN_UNAVAILABLE.  The DSN is
 * never logged, and libpq's messages never contain the password.
 */
#include "cgi.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#define STMT_NAME "paynotify_handle"
#define BACKOFF_MIN_MS 100

/* Parameter types: channel text, headers jsonb, body bytea (binary). */
#define TEXTOID 25
#define JSONBOID 3802
#define BYTEAOID 17
static const Oid param_types[3] = {TEXTOID, JSONBOID, BYTEAOID};
static const int param_formats[3] = {0, 0, 1};

static bool db_ready(pn_db *db);
static bool db_connect(pn_db *db);
static bool db_setup(pn_db *db, PGconn *conn);
static bool db_writable(PGconn *conn);
static bool db_function(pn_db *db, PGconn *conn);
static bool db_idle_and_quiet(pn_db *db);
static void db_drop(pn_db *db);
static void db_after_error(pn_db *db, const PGresult *res);
static void log_result(const char *what, const PGresult *res, PGconn *conn);

/* PAYNOTIFY_FUNCTION, for the advice of log_result */
static const char *log_function;
static void notice_receiver(void *arg, const PGresult *res);

/* A closed session; nothing is connected until first needed. */
void
pn_db_init(pn_db *db, const pn_config *cfg, bool reuse)
{
	memset(db, 0, sizeof(*db));
	db->cfg = cfg;
	log_function = cfg->function;
	db->reuse = reuse;
}

/* Connects now if not yet connected (a FastCGI worker does so at start). */
bool
pn_db_open(pn_db *db)
{
	return db_ready(db);
}

/* Closes the session's connection, if any. */
void
pn_db_close(pn_db *db)
{
	db_drop(db);
}

/*
 * Runs the statement for req.  On PN_OK *result holds the tuples (the
 * caller clears it); on PN_UNAVAILABLE the reason has been logged, unless
 * the database is merely still backing off.
 */
pn_status
pn_db_call(pn_db *db, const pn_request *req, PGresult **result)
{
	const char *values[3];
	int			lengths[3];
	PGresult   *res;

	*result = NULL;
	if (!db_ready(db))
		return PN_UNAVAILABLE;
	values[0] = req->channel;
	values[1] = req->headers.data;
	values[2] = req->body.data ? req->body.data : "";
	lengths[0] = lengths[1] = 0;	/* ignored for text parameters */
	lengths[2] = (int) req->body.len;

	db->unreplicated = false;
	if (db->reuse && !db->cfg->no_prepare)
		res = PQexecPrepared(db->conn, STMT_NAME, 3, values, lengths,
							 param_formats, 0);
	else
		res = PQexecParams(db->conn, db->sql, 3, param_types, values,
						   lengths, param_formats, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		log_result("the call failed", res, db->conn);
		db_after_error(db, res);
		PQclear(res);
		return PN_UNAVAILABLE;
	}
	if (db->unreplicated)
	{
		/*
		 * The server committed but its wait for the synchronous standby was
		 * cancelled (pg_cancel_backend, a DBA's "cancel stuck sessions"): the
		 * commit may exist only on this primary, and a failover would lose a
		 * payment the gateway stopped retrying.  Answer "retry": the
		 * repeat's own commit waits for the standby again, and confirms this
		 * one with it (paynotify_handle keeps a repeat synchronous whenever
		 * synchronous standbys are configured).
		 */
		pn_log("the commit was not confirmed by the synchronous standby (its wait was cancelled); answering 503 so that the gateway retries");
		PQclear(res);
		return PN_UNAVAILABLE;
	}
	*result = res;
	return PN_OK;
}

/*
 * True when the session can take a statement now, connecting if needed.
 * FastCGI sessions honour the back-off so that, while the database is down,
 * requests are refused at once instead of each waiting for a connect.
 */
static bool
db_ready(pn_db *db)
{
	if (db->conn != NULL && db_idle_and_quiet(db))
		return true;
	if (db->conn != NULL)
	{
		pn_log("the database closed the connection; reconnecting");
		db_drop(db);
	}
	if (db->reuse && pn_now_ms() < db->retry_at_ms)
		return false;
	if (db_connect(db))
	{
		db->backoff_ms = 0;
		return true;
	}
	if (db->backoff_ms == 0)
		db->backoff_ms = BACKOFF_MIN_MS;
	else if (db->backoff_ms < db->cfg->reconnect_max_ms)
		db->backoff_ms *= 2;
	if (db->backoff_ms > db->cfg->reconnect_max_ms)
		db->backoff_ms = db->cfg->reconnect_max_ms;
	db->retry_at_ms = pn_now_ms() + db->backoff_ms;
	return false;
}

/*
 * An idle connection has nothing to say until asked.  Anything readable
 * (in practice the FATAL message of a server shutting down, then EOF) means
 * it is going away: report it false so it is replaced before a request is
 * lost on it.
 */
static bool
db_idle_and_quiet(pn_db *db)
{
	struct pollfd pfd = {.fd = PQsocket(db->conn), .events = POLLIN};

	if (PQstatus(db->conn) != CONNECTION_OK ||
		PQtransactionStatus(db->conn) != PQTRANS_IDLE || pfd.fd < 0)
		return false;
	if (poll(&pfd, 1, 0) == 0)
		return true;
	/* let libpq read it, so the server's reason reaches the log */
	if (PQconsumeInput(db->conn))
		(void) PQisBusy(db->conn);
	return false;
}

/*
 * Connects with keyword arrays: connect_timeout and application_name first,
 * so the DSN (expanded from dbname) may override them, then client_encoding
 * last, because headers are sent as UTF-8 whatever the DSN says.
 */
static bool
db_connect(pn_db *db)
{
	char		timeout[24];
	const char *keys[] = {"connect_timeout", "application_name", "dbname",
	"client_encoding", NULL};
	const char *values[] = {timeout, PN_PROGRAM, db->cfg->dsn, "UTF8", NULL};
	PGconn	   *conn;

	snprintf(timeout, sizeof(timeout), "%lld", db->cfg->connect_timeout_s);
	conn = PQconnectdbParams(keys, values, 1);
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		char		msg[512];

		const char *hint;

		pn_log_text(msg, sizeof(msg), conn ? PQerrorMessage(conn) : "out of memory");
		pn_log("cannot connect to the database: %s", msg);
		if ((hint = pn_connect_hint(msg)) != NULL)
			pn_log("%s", hint);
		PQfinish(conn);
		return false;
	}
	PQsetNoticeReceiver(conn, notice_receiver, db);
	if (!db_setup(db, conn))
	{
		PQfinish(conn);
		return false;
	}
	db->conn = conn;
	return true;
}

/* Session settings (READ COMMITTED, statement_timeout), then (FastCGI) the prepared statement. */
static bool
db_setup(pn_db *db, PGconn *conn)
{
	PGresult   *res;

	/*
	 * paynotify_handle refuses REPEATABLE READ and SERIALIZABLE: a second
	 * delivery must see what the first committed while it waited for the
	 * lock.  Pin READ COMMITTED whatever the role or database default says.
	 */
	res = PQexec(conn, "SET default_transaction_isolation = 'read committed'");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		log_result("setting the isolation level failed", res, conn);
		PQclear(res);
		return false;
	}
	PQclear(res);
	if (db->cfg->statement_timeout_ms > 0)
	{
		char		ms[24];
		const char *values[1] = {ms};

		snprintf(ms, sizeof(ms), "%lld", db->cfg->statement_timeout_ms);
		res = PQexecParams(conn,
						   "SELECT pg_catalog.set_config('statement_timeout', $1, false)",
						   1, NULL, values, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			log_result("setting statement_timeout failed", res, conn);
			PQclear(res);
			return false;
		}
		PQclear(res);
	}
	if (!db_writable(conn) || !db_function(db, conn))
		return false;
	if (!db->reuse || db->cfg->no_prepare)
		return true;
	res = PQprepare(conn, STMT_NAME, db->sql, 3, param_types);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		log_result("preparing the call failed", res, conn);
		PQclear(res);
		return false;
	}
	PQclear(res);
	return true;
}

/*
 * True when the server takes writes: not in recovery and not read-only by
 * default.  A standby would refuse the call anyway (25006); checking here
 * says why in the log once per connection attempt, and the back-off then
 * keeps the worker from hammering it.
 */
/*
 * The statement to call PAYNOTIFY_FUNCTION with.  A schema-qualified name
 * is the operator's own choice and is called as written.  A bare name is
 * looked up in this session's search_path, where a role that may CREATE in
 * a schema listed before paynotify's could have planted a function of that
 * name and signature: it must be the paynotify extension's, and is then
 * called by its schema-qualified name, so that nothing created later can
 * take its place.  False (logged) when it is not.
 */
static bool
db_function(pn_db *db, PGconn *conn)
{
	const char *values[1] = {db->cfg->function};
	PGresult   *res;
	bool		ok = false;

	if (strchr(db->cfg->function, '.') != NULL)
	{
		snprintf(db->sql, sizeof(db->sql), "%s", db->cfg->sql);
		return true;
	}
	res = PQexecParams(conn,
					   "SELECT pg_catalog.quote_ident(n.nspname), p.oid::pg_catalog.regprocedure,"
					   " EXISTS (SELECT FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e"
					   " ON e.oid OPERATOR(pg_catalog.=) d.refobjid"
					   " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass"
					   " AND d.objid OPERATOR(pg_catalog.=) p.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'"
					   " AND e.extname OPERATOR(pg_catalog.=) 'paynotify')"
					   " FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
					   " ON n.oid OPERATOR(pg_catalog.=) p.pronamespace"
					   " WHERE p.oid OPERATOR(pg_catalog.=)"
					   " pg_catalog.to_regprocedure($1 OPERATOR(pg_catalog.||) '(text, jsonb, bytea)')",
					   1, NULL, values, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		log_result("looking up PAYNOTIFY_FUNCTION failed", res, conn);
	else if (PQntuples(res) != 1)
		pn_log("PAYNOTIFY_FUNCTION=%s: no function %s(text, jsonb, bytea) in this role's search_path"
			   " (set PAYNOTIFY_FUNCTION=<schema>.paynotify_handle, and give the role the"
			   " handler capacity: SELECT paynotify_grant('<role>'::regrole, 'handler'))",
			   db->cfg->function, db->cfg->function);
	else if (strcmp(PQgetvalue(res, 0, 2), "t") != 0)
		pn_log("PAYNOTIFY_FUNCTION=%s: the search_path finds %s, which is not the paynotify"
			   " extension's; refusing to call it (set PAYNOTIFY_FUNCTION=<schema>.paynotify_handle"
			   " with the extension's schema)",
			   db->cfg->function, PQgetvalue(res, 0, 1));
	else
	{
		snprintf(db->sql, sizeof(db->sql),
				 "SELECT status, content_type, body, outcome FROM %s.%s($1, $2::jsonb, $3)",
				 PQgetvalue(res, 0, 0), db->cfg->function);
		ok = true;
	}
	PQclear(res);
	return ok;
}

static bool
db_writable(PGconn *conn)
{
	PGresult   *res;
	bool		writable;

	res = PQexec(conn, "SELECT pg_catalog.pg_is_in_recovery(), "
				 "pg_catalog.current_setting('transaction_read_only')");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		log_result("checking that the server accepts writes failed", res, conn);
		PQclear(res);
		return false;
	}
	writable = strcmp(PQgetvalue(res, 0, 0), "f") == 0 &&
		strcmp(PQgetvalue(res, 0, 1), "off") == 0;
	if (!writable)
		pn_log("the server does not accept writes (%s): refusing it; "
			   "list every host in PAYNOTIFY_DSN with target_session_attrs=read-write",
			   strcmp(PQgetvalue(res, 0, 0), "f") != 0 ?
			   "it is a standby in recovery" : "transaction_read_only is on");
	PQclear(res);
	return writable;
}

/* Closes the connection; the next request connects anew. */
static void
db_drop(pn_db *db)
{
	PQfinish(db->conn);
	db->conn = NULL;
}

/*
 * After a failed call: a server that refuses writes (25006), a broken
 * connection, one left inside a transaction, or a prepared statement the
 * server no longer accepts (26000 gone, 0A000 "cached plan must not change
 * result type") is dropped, so the next
 * request reconnects and prepares afresh.  Other SQL errors keep it.
 */
static void
db_after_error(pn_db *db, const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	if (state && strcmp(state, "25006") == 0)
	{
		pn_log("the server does not accept writes (standby or read-only); "
			   "reconnecting to look for a primary");
		db_drop(db);
		return;
	}
	if (PQstatus(db->conn) != CONNECTION_OK ||
		PQtransactionStatus(db->conn) != PQTRANS_IDLE ||
		(state && (strcmp(state, "26000") == 0 || strcmp(state, "0A000") == 0)))
		db_drop(db);
}

/*
 * Logs a failed result in one line: SQLSTATE and the primary message only.
 * Detail and context are left out, as they may quote the request.
 */
static void
log_result(const char *what, const PGresult *res, PGconn *conn)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	char		msg[256];

	if (primary == NULL)
		primary = PQerrorMessage(conn);
	pn_log_text(msg, sizeof(msg), primary);
	pn_log("%s: %s%s%s", what, state ? state : "", state ? " " : "", msg);
	if (state != NULL && strcmp(state, "42501") == 0 && conn != NULL)
	{
		const char *fn = log_function ? log_function : "";
		const char *dot = strchr(fn, '.');

		const char *user = PQuser(conn);
		const char *name = user ? user : "";
		size_t		len = strlen(name);
		char		lit[2 * 64 + 8];
		char		shown[sizeof(lit)];
		size_t		k = 0;

		/*
		 * the role as a regrole literal: '"name"', its " and ' doubled, so
		 * that the command names this role whatever its case
		 */
		lit[k++] = '\'';
		lit[k++] = '"';
		/* as the server keeps a name: at most 63 bytes, whole characters */
		if (len > 63)
		{
			len = 63;
			while (len > 0 && ((unsigned char) name[len] & 0xC0) == 0x80)
				len--;
		}
		for (size_t i = 0; i < len; i++)
		{
			if (name[i] == '"' || name[i] == '\'')
				lit[k++] = name[i];
			lit[k++] = name[i];
		}
		lit[k++] = '"';
		lit[k++] = '\'';
		lit[k] = '\0';
		/* (a control byte in a role's name would break the log's line) */
		pn_log_text(shown, sizeof(shown), lit);
		pn_log("the role \"%s\" needs the handler capacity in database \"%s\": there, as the"
			   " extension's owner, SELECT %.*s%spaynotify_grant(%s::regrole, 'handler')",
			   user, PQdb(conn), dot ? (int) (dot - fn) : 0,
			   fn, dot ? "." : "", shown);
	}
}

/*
 * Server messages outside a statement's result: warnings and worse are
 * logged in one line, notices are dropped (libpq would print them raw).
 */
static void
notice_receiver(void *arg, const PGresult *res)
{
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *routine = PQresultErrorField(res, PG_DIAG_SOURCE_FUNCTION);
	pn_db	   *db = arg;
	char		msg[256];

	/*
	 * The server warns from SyncRepWaitForLSN when a commit's wait for the
	 * synchronous standby is cancelled; the routine's name, unlike the
	 * message, does not depend on the server's lc_messages.
	 */
	if (db != NULL && routine != NULL && strcmp(routine, "SyncRepWaitForLSN") == 0)
		db->unreplicated = true;
	if (severity == NULL || primary == NULL ||
		strcmp(severity, "NOTICE") == 0 || strcmp(severity, "INFO") == 0 ||
		strcmp(severity, "LOG") == 0 || strcmp(severity, "DEBUG") == 0)
		return;
	pn_log_text(msg, sizeof(msg), primary);
	pn_log("server %s: %s", severity, msg);
}
