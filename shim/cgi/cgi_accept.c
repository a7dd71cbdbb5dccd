/*
 * cgi_accept.c
 *	  FastCGI mode's acceptor thread.  It alone accepts connections, holds
 *	  each one until it has sent something, and only then queues it for a
 *	  worker: a client that connects and says nothing costs a descriptor and
 *	  a place in a table, never a worker.  It also cuts off a request that
 *	  takes too long to arrive once a worker has taken it.
 *
 * Bounds, each a setting:
 *   PAYNOTIFY_IDLE_TIMEOUT  a connection silent that long after it was
 *                           accepted is closed;
 *   PAYNOTIFY_MAX_PENDING   at most that many connections are held without
 *                           a worker (silent, or queued for one): a new one
 *                           closes the oldest silent one, and while all of
 *                           them are queued new ones wait in the listen
 *                           backlog;
 *   PAYNOTIFY_IO_TIMEOUT    a request must have arrived that long after its
 *                           worker took the connection, else reading it is
 *                           shut down (reads return end of file) and the
 *                           worker moves on.  Each read and write is bounded
 *                           by the same time (SO_RCVTIMEO, SO_SNDTIMEO), but a
 *                           client sending a byte now and then would renew
 *                           that bound forever: hence the deadline.
 *
 * The acceptor polls the bell (a pipe), the non-blocking listening socket
 * and the silent connections.  A byte on the bell means: look at the stop
 * flags, or at the queue, which has room again.  Its poll never waits
 * longer than PAYNOTIFY_IO_TIMEOUT, so it wakes before any deadline set by
 * a worker while it slept (each is that long after it was set).  It also
 * logs the counts of refused requests that were not logged one by one
 * (cgi_refused.c) when no later line has carried them.
 *
 * At stop it closes the silent connections and accepts no more; the queued
 * ones have sent their request and are still served, and their deadlines
 * are watched until the last worker has returned.
 */
#include "cgi_fcgi.h"
#include "cgi_fcgi_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Connections accepted per round at most, so silent ones are not starved. */
#define ACCEPT_BATCH 64
/* Pause before accepting again when out of descriptors and none to close. */
#define ACCEPT_PAUSE_MS 100

/* A connection that has sent nothing yet. */
typedef struct silent_conn
{
	int			fd;
	long long	since_ms;		/* when it was accepted */
} silent_conn;

typedef struct acceptor
{
	pn_server  *srv;
	int			cap;			/* PAYNOTIFY_MAX_PENDING */
	silent_conn *silent;		/* oldest first */
	int			nsilent;
	struct pollfd *fds;			/* the bell, the listening socket, silent[] */
	bool		stopped;		/* silent ones closed, no more accepted */
	long long	resume_ms;		/* out of descriptors: no accept before */
	bool		short_logged;	/* that was logged since the last accept */
} acceptor;

static bool acceptor_init(acceptor *a, pn_server *srv);
static void acceptor_free(acceptor *a);
static bool step(acceptor *a);
static int	fill_pollfds(acceptor *a, long long now, long long *timeout);
static long long expire_silent(acceptor *a, long long now);
static long long cut_overdue(pn_server *srv, long long now);
static void take_silent(acceptor *a);
static void accept_new(acceptor *a, long long now);
static void accept_failed(acceptor *a, int err, long long now);
static bool admit(pn_server *srv, int fd, const struct sockaddr_storage *sa,
				  socklen_t len);
static bool hear_bell(acceptor *a);
static void stop_accepting(acceptor *a);
static void drop_oldest(acceptor *a, int n);
static void queue_ready(pn_server *srv, int fd);
static int	queued(pn_server *srv);

/* The acceptor thread: runs until every worker has returned. */
void *
pn_accept_main(void *arg)
{
	acceptor	a;

	if (!acceptor_init(&a, arg))
	{
		pn_log("out of memory");
		pn_server_fail(a.srv);
	}
	else
		while (step(&a))
			;
	acceptor_free(&a);
	return NULL;
}

/* The acceptor's tables; false when out of memory (acceptor_free all the same). */
static bool
acceptor_init(acceptor *a, pn_server *srv)
{
	memset(a, 0, sizeof(*a));
	a->srv = srv;
	a->cap = (int) srv->cfg->max_pending;
	a->silent = calloc((size_t) a->cap + ACCEPT_BATCH, sizeof(silent_conn));
	a->fds = calloc((size_t) a->cap + ACCEPT_BATCH + 2, sizeof(struct pollfd));
	return a->silent != NULL && a->fds != NULL;
}

/* Closes what the acceptor still holds and frees its tables. */
static void
acceptor_free(acceptor *a)
{
	drop_oldest(a, a->nsilent);
	free(a->silent);
	free(a->fds);
}

/* One round: expire, cut, poll, then take in what poll saw.  False: done. */
static bool
step(acceptor *a)
{
	long long	now = pn_now_ms();
	long long	timeout = a->srv->cfg->io_timeout_ms;
	long long	wait;
	int			nfds;

	if ((wait = expire_silent(a, now)) < timeout)
		timeout = wait;
	if ((wait = cut_overdue(a->srv, now)) < timeout)
		timeout = wait;
	/* refusals counted and not logged yet (cgi_refused.c) */
	if ((wait = pn_refused_flush(now, false)) < timeout)
		timeout = wait;
	nfds = fill_pollfds(a, now, &timeout);
	if (poll(a->fds, (nfds_t) nfds, (int) timeout) < 0)
	{
		if (errno == EINTR)
			return true;
		pn_log("poll: %s", strerror(errno));
		pn_server_fail(a->srv);
		return false;
	}
	take_silent(a);
	if (a->fds[1].revents & (POLLERR | POLLNVAL))
	{
		pn_log("the listening socket failed");
		pn_server_fail(a->srv);
		stop_accepting(a);
	}
	else if (a->fds[1].revents != 0)
		accept_new(a, pn_now_ms());
	return a->fds[0].revents == 0 || hear_bell(a);
}

/*
 * The poll set: the bell, the listening socket (or -1, which poll skips,
 * when there is no room or accepting is paused), then the silent
 * connections in the order of silent[].  Returns the count.
 */
static int
fill_pollfds(acceptor *a, long long now, long long *timeout)
{
	int			n = 2;

	a->fds[0] = (struct pollfd) {.fd = a->srv->bell[0], .events = POLLIN};
	a->fds[1] = (struct pollfd) {.fd = -1};
	if (a->stopped)
		;
	else if (now < a->resume_ms)
		*timeout = a->resume_ms - now < *timeout ? a->resume_ms - now : *timeout;
	else if (queued(a->srv) < a->cap)
		a->fds[1] = (struct pollfd) {.fd = a->srv->listen_fd, .events = POLLIN};
	for (int i = 0; i < a->nsilent; i++)
		a->fds[n++] = (struct pollfd) {.fd = a->silent[i].fd, .events = POLLIN};
	return n;
}

/*
 * Closes the connections silent for PAYNOTIFY_IDLE_TIMEOUT; returns the
 * milliseconds until the next one is due (LLONG_MAX: none).
 */
static long long
expire_silent(acceptor *a, long long now)
{
	long long	idle = a->srv->cfg->idle_timeout_ms;
	int			n = 0;

	while (n < a->nsilent && a->silent[n].since_ms + idle <= now)
		n++;
	drop_oldest(a, n);
	return a->nsilent > 0 ? a->silent[0].since_ms + idle - now : LLONG_MAX;
}

/*
 * Shuts reading down on every request past its deadline; returns the
 * milliseconds until the next deadline (LLONG_MAX: none).
 */
static long long
cut_overdue(pn_server *srv, long long now)
{
	long long	next = LLONG_MAX;
	int			cut = 0;

	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < srv->nworkers; i++)
	{
		pn_watch   *w = &srv->watches[i];

		if (w->fd < 0 || w->cut)
			continue;
		if (w->deadline_ms <= now)
		{
			(void) shutdown(w->fd, SHUT_RD);
			w->cut = true;
			cut++;
		}
		else if (w->deadline_ms - now < next)
			next = w->deadline_ms - now;
	}
	pthread_mutex_unlock(&srv->lock);
	if (cut > 0)
		pn_log("%d connection%s cut off: the request had not arrived within "
			   "PAYNOTIFY_IO_TIMEOUT (%lld ms)", cut, cut == 1 ? "" : "s",
			   srv->cfg->io_timeout_ms);
	return next;
}

/*
 * The silent connections that poll reported: queued for a worker once they
 * have sent something, closed when they hung up first.
 */
static void
take_silent(acceptor *a)
{
	int			kept = 0;

	for (int i = 0; i < a->nsilent; i++)
	{
		int			fd = a->silent[i].fd;
		char		c;
		ssize_t		got;

		if (a->fds[i + 2].revents == 0)
		{
			a->silent[kept++] = a->silent[i];
			continue;
		}
		got = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
		if (got > 0)
			queue_ready(a->srv, fd);
		else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			a->silent[kept++] = a->silent[i];
		else
			close(fd);
	}
	a->nsilent = kept;
}

/*
 * Accepts what the listening socket has, as silent connections, as long as
 * the queue leaves room; over PAYNOTIFY_MAX_PENDING the oldest silent ones
 * are closed.
 */
static void
accept_new(acceptor *a, long long now)
{
	int			room = a->cap - queued(a->srv);
	int			excess;

	if (room > ACCEPT_BATCH)
		room = ACCEPT_BATCH;
	for (int n = 0; n < room; n++)
	{
		struct sockaddr_storage sa;
		socklen_t	len = sizeof(sa);
		int			fd = accept4(a->srv->listen_fd, (struct sockaddr *) &sa,
								 &len, SOCK_CLOEXEC);

		if (fd < 0)
		{
			accept_failed(a, errno, now);
			break;
		}
		a->short_logged = false;
		if (admit(a->srv, fd, &sa, len))
			a->silent[a->nsilent++] = (silent_conn) {.fd = fd, .since_ms = now};
		else
			close(fd);
	}
	excess = a->nsilent + queued(a->srv) - a->cap;
	if (excess > 0)
		drop_oldest(a, excess);
}

/* What to do when accept4 failed with err. */
static void
accept_failed(acceptor *a, int err, long long now)
{
	/* nothing left, or a connection that went away before it was taken */
	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
		err == ECONNABORTED || err == EPROTO || err == EPERM ||
		err == ENETDOWN || err == ENOPROTOOPT || err == EHOSTDOWN ||
		err == ENONET || err == EHOSTUNREACH || err == EOPNOTSUPP ||
		err == ENETUNREACH)
		return;
	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
	{
		if (a->nsilent > 0)
			drop_oldest(a, 1);
		else
			a->resume_ms = now + ACCEPT_PAUSE_MS;
		if (!a->short_logged)
			pn_log("accepting: %s (PAYNOTIFY_MAX_PENDING is %d)",
				   strerror(err), a->cap);
		a->short_logged = true;
		return;
	}
	pn_log("accepting a connection failed: %s", strerror(err));
	pn_server_fail(a->srv);
	stop_accepting(a);
}

/*
 * Sets up an accepted connection: Nagle off on TCP, the read and write
 * timeouts.  False (logged, rate-limited) when FCGI_WEB_SERVER_ADDRS lists
 * the web servers' IPv4 addresses (as libfcgi reads it) and the connection
 * comes from another, IPv4 or mapped into IPv6, or from a native IPv6
 * address (cgi_fcgi_check.c).
 */
static bool
admit(pn_server *srv, int fd, const struct sockaddr_storage *sa, socklen_t len)
{
	long long	ms = srv->cfg->io_timeout_ms;
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	int			one = 1;

	if (!pn_fcgi_peer_allowed(srv->web_server_addrs, (const struct sockaddr *) sa, len))
	{
		char		client[64];

		pn_refused_peer((const struct sockaddr *) sa, len, client, sizeof(client));
		pn_refused_connection("address", "not an address of FCGI_WEB_SERVER_ADDRS", client);
		return false;
	}
	if (sa->ss_family == AF_INET || sa->ss_family == AF_INET6)
		(void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return true;
}

/* The bell rang: stop accepting, or end.  False when every worker is done. */
static bool
hear_bell(acceptor *a)
{
	char		buf[64];

	while (read(a->srv->bell[0], buf, sizeof(buf)) > 0)
		;
	if (atomic_load(&a->srv->workers_done))
		return false;
	if (atomic_load(&a->srv->stopping))
		stop_accepting(a);
	return true;
}

/* No more accepting: the silent connections are closed. */
static void
stop_accepting(acceptor *a)
{
	drop_oldest(a, a->nsilent);
	a->stopped = true;
}

/* Closes the n oldest silent connections. */
static void
drop_oldest(acceptor *a, int n)
{
	if (n <= 0)
		return;
	for (int i = 0; i < n; i++)
		close(a->silent[i].fd);
	a->nsilent -= n;
	memmove(a->silent, a->silent + n, (size_t) a->nsilent * sizeof(silent_conn));
}

/* Hands a connection that has sent something to the workers. */
static void
queue_ready(pn_server *srv, int fd)
{
	int			cap = (int) srv->cfg->max_pending;

	pthread_mutex_lock(&srv->lock);
	if (!atomic_load(&srv->stopping) && srv->ready_count < cap)
	{
		srv->ready[(srv->ready_first + srv->ready_count++) % cap] = fd;
		fd = -1;
		pthread_cond_signal(&srv->ready_cv);
	}
	pthread_mutex_unlock(&srv->lock);
	if (fd >= 0)
		close(fd);
}

/* How many connections wait for a worker. */
static int
queued(pn_server *srv)
{
	int			n;

	pthread_mutex_lock(&srv->lock);
	n = srv->ready_count;
	pthread_mutex_unlock(&srv->lock);
	return n;
}

/*
 * For a worker: the next connection that has sent something, waiting for
 * one; -1 once stopping and none is left.  Taking from a full queue rings
 * the bell, since the acceptor stopped accepting until there is room.
 */
int
pn_ready_take(pn_server *srv)
{
	int			cap = (int) srv->cfg->max_pending;
	int			fd = -1;
	bool		was_full;

	pthread_mutex_lock(&srv->lock);
	while (srv->ready_count == 0 && !atomic_load(&srv->stopping))
		pthread_cond_wait(&srv->ready_cv, &srv->lock);
	was_full = srv->ready_count == cap;
	if (srv->ready_count > 0)
	{
		fd = srv->ready[srv->ready_first];
		srv->ready_first = (srv->ready_first + 1) % cap;
		srv->ready_count--;
	}
	pthread_mutex_unlock(&srv->lock);
	if (was_full)
		pn_server_ring(srv);
	return fd;
}

/*
 * For a worker (slot: its index) about to read the request on fd: starts
 * the PAYNOTIFY_IO_TIMEOUT deadline.  Returns the duplicate of fd that the
 * worker must close once it has called pn_watch_end, or -1 (logged).
 */
int
pn_watch_begin(pn_server *srv, int slot, int fd)
{
	pn_watch   *w = &srv->watches[slot];
	int			dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (dup_fd < 0)
	{
		pn_log("cannot duplicate a connection: %s", strerror(errno));
		return -1;
	}
	pthread_mutex_lock(&srv->lock);
	w->fd = dup_fd;
	w->deadline_ms = pn_now_ms() + srv->cfg->io_timeout_ms;
	w->cut = false;
	pthread_mutex_unlock(&srv->lock);
	return dup_fd;
}

/* The worker's request has arrived (or failed): no deadline any more. */
void
pn_watch_end(pn_server *srv, int slot)
{
	pthread_mutex_lock(&srv->lock);
	srv->watches[slot].fd = -1;
	pthread_mutex_unlock(&srv->lock);
}

/* Wakes the acceptor (a full pipe already does). */
void
pn_server_ring(pn_server *srv)
{
	if (write(srv->bell[1], "", 1) < 0)
	{
		/* EAGAIN: the bell is ringing already */
	}
}

/* An error the server cannot survive: stop, with exit status 1. */
void
pn_server_fail(pn_server *srv)
{
	atomic_store(&srv->failed, true);
	kill(getpid(), SIGTERM);
}
