/*
 * pn_pq.h
 *	  What the shim's daemons (paynotify-relay, paynotify-reconcile) share
 *	  about their database connection: connecting with the log lines that
 *	  say what to do when it fails, one-line error messages, and the
 *	  explanation of errors whose cause is the setup.  Needs libpq.
 */
#ifndef PAYNOTIFY_SHIM_PQ_H
#define PAYNOTIFY_SHIM_PQ_H

#include <stdbool.h>

#include <libpq-fe.h>

#include "pn_common.h"

/* Who is connecting: the words of the log lines that tell what to do. */
typedef struct pn_pq_who
{
	const char *program;		/* application_name, e.g. "paynotify-relay" */
	const char *schema;			/* the extension's schema the program uses */
	const char *schema_var;		/* its setting, e.g. "PAYNOTIFY_RELAY_SCHEMA" */
	const char *capacity;		/* paynotify_grant's capacity, e.g. "relay" */
	const char *version;		/* the program's version */
} pn_pq_who;

extern const char *pn_pq_message(PGconn *conn);
extern bool pn_pq_dsn_without_password(const char *dsn);
extern PGconn *pn_pq_connect(const char *dsn, const pn_pq_who *who);
extern bool pn_pq_command_ok(PGconn *conn, const char *sql);
extern void pn_pq_explain_error(PGconn *conn, const char *sqlstate, const pn_pq_who *who);

#endif							/* PAYNOTIFY_SHIM_PQ_H */
