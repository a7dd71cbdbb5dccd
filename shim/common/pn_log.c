/*
 * pn_log.c
 *	  One-line logging to stderr for every shim program: "program: text"
 *	  or "program[pid]: [worker N: ]text".
 */
#include "pn_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *log_program = "paynotify";
static bool log_with_pid;
static _Thread_local int log_worker;

/* Sets the program name of every line and whether its pid follows. */
void
pn_log_init(const char *program, bool with_pid)
{
	log_program = program;
	log_with_pid = with_pid;
}

/* Names the calling thread's worker in its log lines (0: none). */
void
pn_log_set_worker(int worker)
{
	log_worker = worker;
}

/*
 * Writes one line to stderr with a single write(), so lines of concurrent
 * threads never interleave.  Callers pass only text that is safe to log.
 */
void
pn_log(const char *fmt,...)
{
	char		line[1024];
	size_t		len;
	va_list		ap;

	if (!log_with_pid)
		snprintf(line, sizeof(line), "%s: ", log_program);
	else if (log_worker > 0)
		snprintf(line, sizeof(line), "%s[%d]: worker %d: ", log_program,
				 (int) getpid(), log_worker);
	else
		snprintf(line, sizeof(line), "%s[%d]: ", log_program, (int) getpid());
	len = strlen(line);
	va_start(ap, fmt);
	vsnprintf(line + len, sizeof(line) - len - 1, fmt, ap);
	va_end(ap);
	len = strlen(line);
	line[len++] = '\n';
	if (write(STDERR_FILENO, line, len) < 0)
	{
		/* nowhere left to report it */
	}
}

/*
 * Copies a message from a library or a peer into dst as one line: runs of
 * whitespace become one space, other control bytes '?', and the end is cut
 * to fit.
 */
void
pn_log_text(char *dst, size_t size, const char *src)
{
	size_t		n = 0;
	bool		space = false;

	for (; *src && n + 1 < size; src++)
	{
		unsigned char c = (unsigned char) *src;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
		{
			space = n > 0;
			continue;
		}
		if (space && n + 2 < size)
			dst[n++] = ' ';
		space = false;
		dst[n++] = (c < 0x20 || c == 0x7F) ? '?' : (char) c;
	}
	dst[n] = '\0';
}

/*
 * What to do when a connection was refused by the server's authentication
 * (msg: libpq's message), or NULL when msg is about something else.
 */
const char *
pn_connect_hint(const char *msg)
{
	if (msg == NULL)
		return NULL;
	if (strstr(msg, "Peer authentication failed") != NULL ||
		strstr(msg, "no pg_hba.conf entry") != NULL)
		return "pg_hba.conf must let this role in: a line for it above Debian's"
			" \"local all all peer\" (for peer authentication with a map from the"
			" system user in pg_ident.conf), then reload the server";
	if (strstr(msg, "password authentication failed") != NULL ||
		strstr(msg, "no password supplied") != NULL)
		return "the role's password goes in PGPASSFILE (host:port:database:user:password,"
			" mode 0600, owned by the service's user), or use peer authentication";
	return NULL;
}
