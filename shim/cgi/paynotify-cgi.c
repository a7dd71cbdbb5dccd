/*
 * paynotify-cgi.c
 *	  Entry point of the paynotify shim: parses the command line, decides
 *	  between CGI mode (serve the one request in the environment and on
 *	  stdin, then exit) and FastCGI mode (serve requests on a listening
 *	  socket until SIGTERM), and provides the one-line logger.
 *
 * Modes are chosen in this order: --listen ADDR opens its own socket;
 * systemd socket activation (LISTEN_PID/LISTEN_FDS) uses fd 3; a set
 * GATEWAY_INTERFACE means CGI; a listening socket on stdin (spawn-fcgi,
 * systemd StandardInput=socket) means FastCGI on fd 0.  Anything else is a
 * usage error, so the program does nothing surprising when run by hand.
 */
#include "cgi.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcgiapp.h>

#ifndef PAYNOTIFY_VERSION
#define PAYNOTIFY_VERSION "unknown"
#endif

#define LISTEN_BACKLOG 1024
#define SD_LISTEN_FDS_START 3

/* What the command line asked for. */
typedef struct options
{
	const char *listen;			/* --listen ADDR, or NULL */
	const char *workers;		/* --workers N, or NULL */
	bool		no_prepare;		/* --no-prepare */
} options;

static int	parse_options(int argc, char **argv, options *opts);
static void usage(FILE *out);
static int	run_cgi(void);
static int	run_fcgi(const options *opts);
static int	open_listen_socket(const options *opts, bool *is_path);
static bool stdin_is_listening(void);
static long cgi_read(pn_io *io, char *buf, size_t n);
static int	cgi_write(pn_io *io, const char *buf, size_t n);

int
main(int argc, char **argv)
{
	options		opts = {0};
	int			rc;

	pn_log_init(PN_PROGRAM, true);
	rc = parse_options(argc, argv, &opts);

	if (rc >= 0)
		return rc;
	if (opts.listen == NULL && getenv("LISTEN_FDS") == NULL &&
		getenv("GATEWAY_INTERFACE") != NULL)
		return run_cgi();
	if (opts.listen != NULL || getenv("LISTEN_FDS") != NULL || stdin_is_listening())
		return run_fcgi(&opts);
	fprintf(stderr, "%s: not started as CGI (GATEWAY_INTERFACE is unset) nor as "
			"FastCGI (stdin is not a listening socket and --listen is not given)\n"
			"Try '%s --help'.\n", PN_PROGRAM, PN_PROGRAM);
	return 2;
}

/*
 * Reads the options.  Returns -1 to go on, else the exit status for --help,
 * --version or a usage error.
 */
static int
parse_options(int argc, char **argv, options *opts)
{
	static const struct option longopts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"workers", required_argument, NULL, 'w'},
		{"no-prepare", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0}
	};
	int			c;

	while ((c = getopt_long(argc, argv, "l:w:hV", longopts, NULL)) != -1)
	{
		switch (c)
		{
			case 'l':
				opts->listen = optarg;
				break;
			case 'w':
				opts->workers = optarg;
				break;
			case 'P':
				opts->no_prepare = true;
				break;
			case 'h':
				usage(stdout);
				return 0;
			case 'V':
				printf("%s %s\n", PN_PROGRAM, PAYNOTIFY_VERSION);
				return 0;
			default:
				usage(stderr);
				return 2;
		}
	}
	if (optind < argc)
	{
		fprintf(stderr, "%s: unexpected argument \"%s\"\n", PN_PROGRAM, argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: %s [--listen ADDR] [--workers N] [--no-prepare]\n"
			"       %s --help | --version\n"
			"\n"
			"Answers payment-gateway notifications, POST .../notify/<channel>, by calling\n"
			"paynotify_handle(channel, headers, body) in PostgreSQL and sending back the\n"
			"status, content type and body it returns, plus a Paynotify-Outcome header.\n"
			"\n"
			"Modes:\n"
			"  CGI      run by a web server or fcgiwrap with GATEWAY_INTERFACE set: serves\n"
			"           the one request in the environment and on stdin, then exits.\n"
			"  FastCGI  stdin is a listening socket (spawn-fcgi), or systemd socket\n"
			"           activation (LISTEN_FDS=1), or --listen ADDR: N worker threads,\n"
			"           each keeping one connection and one prepared statement\n"
			"           (none with --no-prepare). A connection reaches a worker once\n"
			"           its whole request has arrived, or 64 KiB of a larger one\n"
			"           (see PAYNOTIFY_IDLE_TIMEOUT and PAYNOTIFY_IO_TIMEOUT below).\n"
			"           SIGTERM or SIGINT: finish requests in flight, exit 0.\n"
			"\n"
			"Options:\n"
			"  -l, --listen ADDR   FastCGI on ADDR: HOST:PORT, :PORT (all addresses), or\n"
			"                      an absolute unix socket path (created with the umask,\n"
			"                      removed at exit)\n"
			"  -w, --workers N     FastCGI worker threads (overrides PAYNOTIFY_WORKERS)\n"
			"      --no-prepare    no named prepared statement: each request sends the\n"
			"                      statement (PQexecParams), as a transaction-pooling\n"
			"                      pgbouncer needs (same as PAYNOTIFY_NO_PREPARE=1)\n"
			"  -h, --help          show this help and exit\n"
			"  -V, --version       show the version and exit\n"
			"\n"
			"Environment (read once at start):\n",
			PN_PROGRAM, PN_PROGRAM);
	if (out == stdout)
		pn_config_help();
	else
		fprintf(out, "  (the settings: %s --help)\n", PN_PROGRAM);
	fprintf(out,
			"\n"
			"Replies: the function's status and body, or 503 {\"code\":\"FAIL\",...} with\n"
			"Paynotify-Outcome: unavailable when the database cannot be reached or the\n"
			"call fails; 404 (bad channel), 405 (not POST), 413 (body too large) and 400\n"
			"(unreadable length, short body, header not UTF-8) with outcome \"refused\".\n"
			"\n"
			"Log (stderr): one line per error; one per refused request (any 4xx: the\n"
			"database's rejected or malformed, the shim's refused) with channel, outcome,\n"
			"status and client (REMOTE_ADDR), never headers or body, at most one a second\n"
			"per kind, the others counted on the next line.\n");
}

/* CGI mode: one request from environ and stdin, reply on stdout. */
static int
run_cgi(void)
{
	pn_io		io = {.read = cgi_read, .write = cgi_write, .drain = true};
	pn_config	cfg;
	pn_db		db;
	int			rc;

	signal(SIGPIPE, SIG_IGN);
	if (!pn_config_load(&cfg))
	{
		pn_reply_error(&io, PN_UNAVAILABLE);
		return 2;
	}
	pn_db_init(&db, &cfg, false);
	rc = pn_serve(&io, environ, &cfg, &db);
	pn_db_close(&db);
	return rc == 0 ? 0 : 1;
}

/* FastCGI mode: settings, socket, then the workers until a signal. */
static int
run_fcgi(const options *opts)
{
	pn_config	cfg;
	bool		is_path = false;
	int			fd;
	int			rc;

	if (!pn_config_load(&cfg))
		return 2;
	if (opts->workers != NULL &&
		pn_parse_number(opts->workers, 1, 256, &cfg.workers) != PN_NUMBER_OK)
	{
		pn_log("--workers must be a whole number from 1 to 256");
		return 2;
	}
	if (opts->no_prepare)
		cfg.no_prepare = 1;
	if (!pn_accept_descriptors_ok(&cfg))
		return 2;
	fd = open_listen_socket(opts, &is_path);
	if (fd < 0)
		return 2;
	rc = pn_fcgi_run(&cfg, fd);
	if (opts->listen != NULL)
	{
		close(fd);
		if (is_path)
			unlink(opts->listen);
	}
	return rc;
}

/*
 * The listening socket: our own for --listen, fd 3 under systemd socket
 * activation, else stdin.  -1 (logged) when there is none to use.
 */

/*
 * Whether a --listen that is not a path is HOST:PORT or :PORT as libfcgi
 * reads it: one colon, no brackets (libfcgi would take "[::]:9000" for the
 * name of a unix socket), a port of 1 to 65535.
 */
static bool
listen_port_ok(const char *listen)
{
	const char *colon = strchr(listen, ':');
	long		port = 0;

	if (colon == NULL || strchr(colon + 1, ':') != NULL || strpbrk(listen, "[]") != NULL ||
		colon[1] == '\0')
		return false;
	for (const char *p = colon + 1; *p; p++)
	{
		if (*p < '0' || *p > '9' || port > 65535)
			return false;
		port = port * 10 + (*p - '0');
	}
	return port >= 1 && port <= 65535;
}
static int
open_listen_socket(const options *opts, bool *is_path)
{
	const char *fds = getenv("LISTEN_FDS");
	const char *pid = getenv("LISTEN_PID");
	long long	n;
	long long	for_pid;

	if (opts->listen != NULL)
	{
		int			fd;

		*is_path = opts->listen[0] == '/';
		if ((*is_path && strchr(opts->listen, ':') != NULL) ||
			(!*is_path && !listen_port_ok(opts->listen)))
		{
			pn_log("--listen takes HOST:PORT (an IPv4 address or a name), :PORT or an absolute socket path"
				   " (for IPv6, a socket of systemd's)");
			return -1;
		}
		/* libfcgi exits with a message of its own if it cannot bind */
		if (FCGX_Init() != 0 || (fd = FCGX_OpenSocket(opts->listen, LISTEN_BACKLOG)) < 0)
		{
			pn_log("cannot listen on %s", opts->listen);
			return -1;
		}
		return fd;
	}
	if (fds != NULL)
	{
		if (pn_parse_number(fds, 1, 1, &n) != PN_NUMBER_OK ||
			pid == NULL || pn_parse_number(pid, 1, 1LL << 30, &for_pid) != PN_NUMBER_OK ||
			for_pid != (long long) getpid())
		{
			pn_log("socket activation must pass exactly one socket to this process");
			return -1;
		}
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		return SD_LISTEN_FDS_START;
	}
	return 0;
}

/* True when fd 0 is a socket in the listening state. */
static bool
stdin_is_listening(void)
{
	int			listening = 0;
	socklen_t	len = sizeof(listening);

	return getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
		listening != 0;
}

/* pn_io over stdin, for CGI mode. */
static long
cgi_read(pn_io *io, char *buf, size_t n)
{
	ssize_t		got;

	(void) io;
	do
		got = read(STDIN_FILENO, buf, n);
	while (got < 0 && errno == EINTR);
	return (long) got;
}

/* pn_io over stdout, for CGI mode. */
static int
cgi_write(pn_io *io, const char *buf, size_t n)
{
	(void) io;
	while (n > 0)
	{
		ssize_t		put = write(STDOUT_FILENO, buf, n);

		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return -1;
		buf += put;
		n -= (size_t) put;
	}
	return 0;
}
