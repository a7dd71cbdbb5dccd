/*
 * cgi_refused.c
 *	  A log line for each refused request, so that an operator sees forged
 *	  and probing requests in the shim's log without the web server's.  A
 *	  refusal is any 4xx reply: the shim's own (400, 404, 405, 413, outcome
 *	  "refused") and the database's (outcome "rejected": not authentic, an
 *	  unknown key or channel, a stale timestamp; "malformed").  The line
 *	  names the channel, the outcome, the status and the client (REMOTE_ADDR
 *	  as the web server gives it), never a header or the body:
 *
 *	    refused: channel wxpay, outcome rejected, HTTP 401, client 198.51.100.7
 *
 * The database writes nothing for such a request (a write per
 * unauthenticated request would let anyone make it write), so this line
 * is where they are counted.
 *
 * Rate: at most one line a second for each kind (outcome and status).  The
 * refusals of that kind in between are counted and not logged; the count
 * goes on the next line of that kind ("(and N more such since the last
 * line, not logged)"), or on a line of its own once two seconds have
 * passed since the last one (the FastCGI acceptor calls pn_refused_flush),
 * or at stop.  A flood of forged requests costs a line a second per kind,
 * each with one of its clients.  In CGI mode each process serves one
 * request: every refusal has its line.
 *
 * In FastCGI mode a connection can also be refused before it is a request:
 * from an address FCGI_WEB_SERVER_ADDRS does not let in, or with bytes that
 * are not a FastCGI request as nginx sends one (cgi_fcgi_check.c).  It is
 * closed, and logged on the same terms (two kinds: address, records):
 *
 *	  refused: a FastCGI connection from 127.0.0.1: a name-value pair longer
 *	  than the PARAMS stream
 */
#include "cgi.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* kinds kept apart; any more share the last slot */
#define KINDS 16
#define OUTCOME_MAX 32
#define INTERVAL_MS 1000
/* a count not carried by a line of its kind is logged alone this late */
#define FLUSH_MS (2 * INTERVAL_MS)

typedef struct kind
{
	char		outcome[OUTCOME_MAX + 1];	/* "" while the slot is free */
	int			status;
	long long	last_ms;		/* when its last line was written */
	long long	suppressed;		/* refused since then, not logged */
} kind;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kind kinds[KINDS];

/* The slot of (outcome, status): its own, a free one, else the last. */
static kind *
find_kind(const char *outcome, int status)
{
	for (int i = 0; i < KINDS; i++)
	{
		kind	   *k = &kinds[i];

		if (k->outcome[0] == '\0')
		{
			snprintf(k->outcome, sizeof(k->outcome), "%s", outcome);
			k->status = status;
			k->last_ms = LLONG_MIN / 2;
			return k;
		}
		if (k->status == status && strcmp(k->outcome, outcome) == 0)
			return k;
	}
	return &kinds[KINDS - 1];
}

/* The count of a kind, on a line of its own; the caller holds the lock. */
static void
log_suppressed(kind *k, long long now)
{
	if (k->suppressed == 0)
		return;
	if (k == &kinds[KINDS - 1])
		pn_log("refused: %lld more of this and other kinds since the last line, not logged",
			   k->suppressed);
	else if (k->status == 0)
		pn_log("refused: %lld more FastCGI connections (%s) since the last line, not logged",
			   k->suppressed, k->outcome);
	else
		pn_log("refused: %lld more with outcome %s, HTTP %d since the last line, not logged",
			   k->suppressed, k->outcome, k->status);
	k->suppressed = 0;
	k->last_ms = now;
}

/*
 * Records a refused request: logged, or counted when its kind had a line
 * less than a second ago.  channel is [A-Za-z0-9_]* ("" when the path had
 * none), outcome [a-z_]+, client a checked address or "".
 */
void
pn_refused(const char *channel, const char *outcome, int status, const char *client)
{
	long long	now = pn_now_ms();
	kind	   *k;

	pthread_mutex_lock(&lock);
	k = find_kind(outcome, status);
	if (now - k->last_ms < INTERVAL_MS)
		k->suppressed++;
	else
	{
		char		more[96] = "";

		if (k->suppressed > 0)
			snprintf(more, sizeof(more), " (and %lld more such since the last line, not logged)",
					 k->suppressed);
		pn_log("refused: channel %s, outcome %s, HTTP %d, client %s%s",
			   channel[0] ? channel : "(none)", outcome, status, client[0] ? client : "(unknown)",
			   more);
		k->suppressed = 0;
		k->last_ms = now;
	}
	pthread_mutex_unlock(&lock);
}

/*
 * Records a FastCGI connection refused before it was a request: kind is
 * "address" or "records", reason says why, client is the peer's address
 * (pn_refused_peer).  Logged, or counted, as pn_refused.
 */
void
pn_refused_connection(const char *kind_name, const char *reason, const char *client)
{
	long long	now = pn_now_ms();
	kind	   *k;

	pthread_mutex_lock(&lock);
	k = find_kind(kind_name, 0);
	if (now - k->last_ms < INTERVAL_MS)
		k->suppressed++;
	else
	{
		char		more[96] = "";

		if (k->suppressed > 0)
			snprintf(more, sizeof(more), " (and %lld more such since the last line, not logged)",
					 k->suppressed);
		pn_log("refused: a FastCGI connection from %s: %s%s", client, reason, more);
		k->suppressed = 0;
		k->last_ms = now;
	}
	pthread_mutex_unlock(&lock);
}

/* The address of sa (len bytes) for the log: IPv4, IPv6, or "local". */
void
pn_refused_peer(const struct sockaddr *sa, socklen_t len, char *dst, size_t size)
{
	char		text[INET6_ADDRSTRLEN] = "";

	if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in))
		(void) inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, text, sizeof(text));
	else if (sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6))
		(void) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, text, sizeof(text));
	snprintf(dst, size, "%s", text[0] ? text : sa->sa_family == AF_UNIX ? "local" : "(unknown)");
}

/*
 * Logs the counts that no line of their kind has carried for FLUSH_MS
 * (all of them when all is set, at stop).  Returns the milliseconds until
 * the next one is due, or LLONG_MAX when none is waiting.
 */
long long
pn_refused_flush(long long now, bool all)
{
	long long	wait = LLONG_MAX;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < KINDS; i++)
	{
		kind	   *k = &kinds[i];

		if (k->suppressed == 0)
			continue;
		if (all || now - k->last_ms >= FLUSH_MS)
			log_suppressed(k, now);
		else if (k->last_ms + FLUSH_MS - now < wait)
			wait = k->last_ms + FLUSH_MS - now;
	}
	pthread_mutex_unlock(&lock);
	return wait;
}

/*
 * REMOTE_ADDR as it may appear in the log: an address's characters
 * (letters, digits, '.', ':', '%', '-', '_', '[', ']'), at most size - 1 of
 * them; anything else makes it "(unusable)".
 */
void
pn_refused_client(char *dst, size_t size, const char *remote_addr)
{
	size_t		n = 0;

	dst[0] = '\0';
	if (remote_addr == NULL)
		return;
	for (; remote_addr[n]; n++)
	{
		char		c = remote_addr[n];

		if (n + 1 >= size ||
			!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '.' || c == ':' || c == '%' || c == '-' || c == '_' || c == '[' || c == ']'))
		{
			snprintf(dst, size, "(unusable)");
			return;
		}
		dst[n] = c;
	}
	dst[n] = '\0';
}
