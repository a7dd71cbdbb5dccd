/*
 * cgi.h
 *	  Declarations shared by the files of paynotify-cgi, the CGI/FastCGI shim
 *	  that turns POST .../notify/<channel> into one call of
 *	  paynotify_handle(channel, headers, body) and relays the reply row.
 *
 * Ownership: one pn_config is filled from the environment at start and is
 * read-only afterwards, so every worker thread may read it.  Each worker owns
 * one pn_db (one connection, one prepared statement) and serves one
 * pn_request at a time; nothing else is shared between workers.
 */
#ifndef PAYNOTIFY_CGI_H
#define PAYNOTIFY_CGI_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <libpq-fe.h>

#include "pn_common.h"

#define PN_PROGRAM "paynotify-cgi"

/* Longest channel name: ^[A-Za-z0-9_]{1,63}$, like a PostgreSQL identifier. */
#define PN_CHANNEL_MAX 63

/* Every way a request can end; each non-OK value maps to one reply. */
typedef enum pn_status
{
	PN_OK = 0,
	PN_BAD_REQUEST,				/* 400: bad CONTENT_LENGTH, short body, header
								 * not UTF-8 */
	PN_NOT_FOUND,				/* 404: no valid channel in the path */
	PN_METHOD,					/* 405: not POST */
	PN_TOO_LARGE,				/* 413: body over PAYNOTIFY_MAX_BODY */
	PN_UNAVAILABLE				/* 503: database down, SQL error, bad row */
} pn_status;

/* Settings, read once from the environment (see cgi_config.c). */
typedef struct pn_config
{
	const char *dsn;			/* PAYNOTIFY_DSN; "" means libpq defaults */
	const char *function;		/* PAYNOTIFY_FUNCTION, a checked identifier */
	long long	max_body;		/* PAYNOTIFY_MAX_BODY, bytes */
	long long	workers;		/* PAYNOTIFY_WORKERS, FastCGI threads */
	long long	statement_timeout_ms;	/* PAYNOTIFY_STATEMENT_TIMEOUT, 0 = off */
	long long	connect_timeout_s;	/* PAYNOTIFY_CONNECT_TIMEOUT */
	long long	reconnect_max_ms;	/* PAYNOTIFY_RECONNECT_MAX */
	long long	no_prepare;		/* PAYNOTIFY_NO_PREPARE: 1 = no named statement */
	long long	idle_timeout_ms;	/* PAYNOTIFY_IDLE_TIMEOUT: a silent connection */
	long long	io_timeout_ms;	/* PAYNOTIFY_IO_TIMEOUT: a request's arrival */
	long long	max_pending;	/* PAYNOTIFY_MAX_PENDING: connections not served */
	char		sql[256];		/* the statement, built from function */
} pn_config;

/* Result of a checked number conversion. */
typedef enum pn_number
{
	PN_NUMBER_OK,
	PN_NUMBER_INVALID,			/* empty, sign, space or other non-digit */
	PN_NUMBER_RANGE				/* digits only, but outside [min, max] */
} pn_number;

/*
 * Where a request comes from and its reply goes to: stdin/stdout in CGI
 * mode, an FCGX_Request's streams in FastCGI mode.
 */
typedef struct pn_io
{
	/* Reads up to n bytes: the count, 0 at the end of the body, -1 on error. */
	long		(*read) (struct pn_io *io, char *buf, size_t n);
	/* Writes all n bytes: 0, or -1 on error. */
	int			(*write) (struct pn_io *io, const char *buf, size_t n);
	/* Called once the request has been read, before the call (may be NULL). */
	void		(*received) (struct pn_io *io);
	void	   *handle;
	bool		drain;			/* CGI: read the rest of a refused body */
	int			sent_status;	/* the reply written (0: none yet) ... */
	const char *sent_outcome;	/* ... and its Paynotify-Outcome */
} pn_io;

/* One request, read from its environment once (see cgi_request.c). */
typedef struct pn_request
{
	const char *method;			/* REQUEST_METHOD, "" if unset */
	char		channel[PN_CHANNEL_MAX + 1];	/* "" if the path has none */
	pn_status	length_status;	/* CONTENT_LENGTH: OK, BAD_REQUEST, TOO_LARGE */
	bool		has_length;		/* CONTENT_LENGTH was set and not empty */
	unsigned long long content_length;
	pn_status	header_status;	/* OK, or BAD_REQUEST for a non-UTF-8 value */
	char		client[64];		/* REMOTE_ADDR for the log, "" if unset */
	pn_buf		headers;		/* the JSON object passed as $2 */
	pn_buf		body;			/* the exact body bytes passed as $3 */
} pn_request;

/* One worker's database session (see cgi_db.c). */
typedef struct pn_db
{
	const pn_config *cfg;
	bool		reuse;			/* FastCGI: keep connection, prepare once */
	PGconn	   *conn;			/* NULL while down */
	long long	backoff_ms;		/* 0 while healthy */
	long long	retry_at_ms;	/* monotonic time of the next connect attempt */
	bool		unreplicated;	/* the call's commit did not wait for the synchronous standby */
	char		sql[256];		/* the statement, with the function's schema */
} pn_db;

/* A reply about to be written (see cgi_reply.c). */
typedef struct pn_response
{
	int			status;
	const char *content_type;	/* NULL: no Content-Type header */
	const char *extra_header;	/* one "Name: value" line, or NULL */
	const char *outcome;		/* the Paynotify-Outcome header */
	const char *body;
	size_t		body_len;
} pn_response;

/* cgi_config.c */
extern bool pn_config_load(pn_config *cfg);
extern void pn_config_help(void);
extern pn_number pn_parse_number(const char *s, long long min, long long max,
								 long long *out);
extern pn_number pn_parse_unsigned(const char *s, unsigned long long max,
								   unsigned long long *out);

/* cgi_request.c */
extern pn_status pn_request_init(pn_request *req, char **envp);
extern pn_status pn_request_read_body(pn_request *req, pn_io *io,
									  unsigned long long max);
extern void pn_request_free(pn_request *req);
extern int	pn_serve(pn_io *io, char **envp, const pn_config *cfg, pn_db *db);

/* cgi_reply.c */
extern int	pn_reply_error(pn_io *io, pn_status status);
extern int	pn_reply_row(pn_io *io, const PGresult *res);

/* cgi_db.c */
extern void pn_db_init(pn_db *db, const pn_config *cfg, bool reuse);
extern bool pn_db_open(pn_db *db);
extern pn_status pn_db_call(pn_db *db, const pn_request *req,
							PGresult **result);
extern void pn_db_close(pn_db *db);

/* cgi_refused.c */
extern void pn_refused(const char *channel, const char *outcome, int status,
					   const char *client);
extern long long pn_refused_flush(long long now, bool all);
extern void pn_refused_client(char *dst, size_t size, const char *remote_addr);
extern void pn_refused_connection(const char *kind_name, const char *reason,
								  const char *client);
extern void pn_refused_peer(const struct sockaddr *sa, socklen_t len,
							char *dst, size_t size);

/* cgi_fcgi.c */
extern int	pn_fcgi_run(const pn_config *cfg, int listen_fd);
extern bool pn_accept_descriptors_ok(const pn_config *cfg);

#endif							/* PAYNOTIFY_CGI_H */
