/*
 * cgi_accept.c
 *	  FastCGI mode's acceptor thread.  It alone accepts connections, holds
 *	  each one until its request has begun (a whole BEGIN_REQUEST record,
 *	  the 8-byte header and the 8-byte body, has arrived), and only then
 *	  queues it for a worker: a client that connects and says nothing, or
 *	  sends a few bytes and stalls, costs a descriptor and a place in a
 *	  table, never a worker.  It also cuts off a request that takes too
 *	  long to arrive once a worker has taken it.
 *
 * A connection the acceptor holds is silent (its request has not begun:
 * nothing seen yet, or part of a BEGIN_REQUEST record; polled) or waiting
 * (its request has begun but the queue for the workers is full: not
 * polled, so a full queue cannot make the acceptor spin, and never
 * closed).  It looks with recv(MSG_PEEK), consuming nothing: the worker
 * reads and checks the request from its first byte (cgi_fcgi.c).  First
 * bytes that are no BEGIN_REQUEST (pn_fcgi_scan_feed refuses them) count
 * as begun: the worker refuses and logs them.  A silent connection that
 * has sent part of a record stays readable, so poll watches it for a
 * hang-up only (then it is closed: its request can never begin), and an
 * edge-triggered epoll set, itself polled, reports its next bytes.
 * Waiting ones go to the queue in the order their request was seen to
 * begin, as soon as a worker makes room.  The acceptor closes only
 * connections whose request has not begun: before it closes a silent one,
 * for any reason, it looks whether its request began since the last poll,
 * and if so keeps it as waiting.  It looks at each new connection as soon
 * as it has accepted it, and holds it, whether its request has begun or
 * not: over PAYNOTIFY_MAX_PENDING a new connection displaces the oldest
 * silent one.  So silent connections, however many and however often
 * renewed, never hold a request back in the listen backlog, nor get one
 * closed: nginx writes its request just after its connect, and its
 * connection is displaced only if PAYNOTIFY_MAX_PENDING connections come
 * after it before its first 16 bytes do.
 *
 * Bounds, each a setting:
 *   PAYNOTIFY_IDLE_TIMEOUT  a connection still silent that long after it
 *                           was accepted is closed;
 *   PAYNOTIFY_MAX_PENDING   about that many connections are held without a
 *                           worker (silent, waiting or queued): over it the
 *                           oldest silent ones are closed (see above); when
 *                           those whose request has begun fill it, new
 *                           ones wait in the listen backlog.  Silent and
 *                           waiting together are never more than
 *                           PAYNOTIFY_MAX_PENDING + ACCEPT_BATCH (requests
 *                           that arrived on connections due to be closed):
 *                           new ones wait in the backlog then too;
 *   PAYNOTIFY_IO_TIMEOUT    a request must have arrived that long after its
 *                           worker took the connection, else reading it is
 *                           shut down (reads return end of file) and the
 *                           worker moves on.  Each read and write is bounded
 *                           by the same time (SO_RCVTIMEO, SO_SNDTIMEO), but a
 *                           client sending a byte now and then would renew
 *                           that bound forever: hence the deadline.  After
 *                           the stop, no deadline is later than that long
 *                           after it (pn_io_left: also for the wait after
 *                           the reply, cgi_fcgi.c).
 *
 * The acceptor polls the bell (a pipe), the non-blocking listening socket,
 * the epoll set and the silent connections.  A byte on the bell means: look at the stop
 * flags, or at the queue, which has room again.  Its poll never waits
 * longer than PAYNOTIFY_IO_TIMEOUT, so it wakes before any deadline set by
 * a worker while it slept (each is that long after it was set).  It also
 * logs the counts of refused requests that were not logged one by one
 * (cgi_refused.c) when no later line has carried them.
 *
 * At stop it closes the silent connections and accepts no more; those whose
 * request has begun, queued or waiting, are still served (the workers
 * return once there are none: `held'), and their deadlines are watched
 * until the last worker has returned.  None is waited for past the stop's
 * deadline, PAYNOTIFY_IO_TIMEOUT after it: one a worker takes later is cut
 * off at once, and is served only if its request had arrived whole.
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
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Connections accepted per round at most, so silent ones are not starved. */
#define ACCEPT_BATCH 64
/* Pause before accepting again when out of descriptors and none to close. */
#define ACCEPT_PAUSE_MS 100
/* A shortage of descriptors is logged once in that long, however often. */
#define SHORT_LOG_MS 10000

/* The acceptor's clock (the unit test, shim/tests/accept_test.c, sets its own). */
#ifndef PN_ACCEPT_CLOCK
#define PN_ACCEPT_CLOCK pn_now_ms
#endif

/* A connection whose request has not begun yet. */
typedef struct silent_conn
{
	int			fd;
	long long	since_ms;		/* when it was accepted */
	bool		partial;		/* part of a BEGIN_REQUEST: in the epoll set */
} silent_conn;

/* What a look at a silent connection found. */
typedef enum peeked
{
	PEEK_SILENT,				/* nothing to read yet */
	PEEK_PARTIAL,				/* less than a whole BEGIN_REQUEST record */
	PEEK_BEGUN,					/* a whole one, or bytes that are no request */
	PEEK_GONE					/* it closed, or failed, without a byte */
} peeked;

typedef struct acceptor
{
	pn_server  *srv;
	int			cap;			/* PAYNOTIFY_MAX_PENDING */
	int			max_held;		/* nsilent + nwaiting, at most */
	silent_conn *silent;		/* oldest first */
	int			nsilent;
	int		   *waiting;		/* request begun, the queue full: oldest first */
	int			nwaiting;
	struct pollfd *fds;			/* the bell, the listening socket, ep, silent[] */
	int			ep;				/* epoll set of the partial ones, edge-triggered */
	bool		stopped;		/* silent ones closed, no more accepted */
	long long	resume_ms;		/* out of descriptors: no accept before */
	long long	short_logged_ms;	/* when it was last logged (one line a SHORT_LOG_MS) */
} acceptor;

static bool acceptor_init(acceptor *a, pn_server *srv);
static void acceptor_free(acceptor *a);
static bool step(acceptor *a);
static int	fill_pollfds(acceptor *a, long long now, long long *timeout);
static long long expire_silent(acceptor *a, long long now);
static long long cut_overdue(pn_server *srv, long long now);
static void take_silent(acceptor *a);
static int	accept_room(acceptor *a);
static void accept_new(acceptor *a, long long now);
static void accept_failed(acceptor *a, int err, long long now);
static bool admit(pn_server *srv, int fd, const struct sockaddr_storage *sa,
				  socklen_t len);
static bool hear_bell(acceptor *a);
static void stop_accepting(acceptor *a);
static peeked peek(int fd);
static bool hold_silent(acceptor *a, int fd, long long now, bool partial);
static bool watch_partial(acceptor *a, silent_conn *c);
static void unwatch(acceptor *a, silent_conn *c);
static int	drop_silent(acceptor *a, int n, int among);
static void queue_waiting(acceptor *a);
static int	queued(pn_server *srv);

/* The acceptor thread: runs until every worker has returned. */
void *
pn_accept_main(void *arg)
{
	acceptor	a;

	if (!acceptor_init(&a, arg))
	{
		pn_log("out of memory, or of descriptors");
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
	a->max_held = a->cap + ACCEPT_BATCH;
	a->silent = calloc((size_t) a->max_held, sizeof(silent_conn));
	a->waiting = calloc((size_t) a->max_held, sizeof(int));
	a->fds = calloc((size_t) a->max_held + 3, sizeof(struct pollfd));
	a->ep = epoll_create1(EPOLL_CLOEXEC);
	a->short_logged_ms = LLONG_MIN / 2;
	return a->silent != NULL && a->waiting != NULL && a->fds != NULL && a->ep >= 0;
}

/*
 * Closes what the acceptor still holds (the workers have returned, or
 * never started) and frees its tables; workers waiting for the held ones
 * are told there are none.
 */
static void
acceptor_free(acceptor *a)
{
	for (int i = 0; i < a->nsilent; i++)
		close(a->silent[i].fd);
	for (int i = 0; i < a->nwaiting; i++)
		close(a->waiting[i]);
	a->nsilent = a->nwaiting = 0;
	pthread_mutex_lock(&a->srv->lock);
	a->srv->held = 0;
	a->srv->acceptor_stopped = true;
	pthread_cond_broadcast(&a->srv->ready_cv);
	pthread_mutex_unlock(&a->srv->lock);
	free(a->silent);
	free(a->waiting);
	free(a->fds);
	if (a->ep >= 0)
		close(a->ep);
}

/* One round: expire, cut, poll, then take in what poll saw.  False: done. */
static bool
step(acceptor *a)
{
	long long	now = PN_ACCEPT_CLOCK();
	long long	timeout = a->srv->cfg->io_timeout_ms;
	long long	wait;
	int			nfds;

	/* room made by a worker since the last round (the bell rang too) */
	queue_waiting(a);
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
		accept_new(a, PN_ACCEPT_CLOCK());
	return a->fds[0].revents == 0 || hear_bell(a);
}

/*
 * The poll set: the bell, the listening socket (or -1, which poll skips,
 * when there is no room or accepting is paused), the epoll set of the
 * partial connections, then the silent connections in the order of
 * silent[]: for input, or for a hang-up only when partial (what they have
 * sent keeps them readable; the epoll set reports what they send next).
 * The waiting ones are not polled: their request has begun.  Returns the
 * count.
 */
static int
fill_pollfds(acceptor *a, long long now, long long *timeout)
{
	int			n = 3;

	a->fds[0] = (struct pollfd) {.fd = a->srv->bell[0], .events = POLLIN};
	a->fds[1] = (struct pollfd) {.fd = -1};
	if (a->stopped)
		;
	else if (now < a->resume_ms)
		*timeout = a->resume_ms - now < *timeout ? a->resume_ms - now : *timeout;
	else if (accept_room(a) > 0)
		a->fds[1] = (struct pollfd) {.fd = a->srv->listen_fd, .events = POLLIN};
	a->fds[2] = (struct pollfd) {.fd = a->ep, .events = POLLIN};
	for (int i = 0; i < a->nsilent; i++)
		a->fds[n++] = (struct pollfd) {.fd = a->silent[i].fd,
		.events = a->silent[i].partial ? POLLRDHUP : POLLIN | POLLRDHUP};
	return n;
}

/*
 * Closes the connections silent for PAYNOTIFY_IDLE_TIMEOUT (those whose
 * request has begun since the last poll wait for a worker instead); returns
 * the milliseconds until the next one is due (LLONG_MAX: none).  Waiting
 * ones never expire: their request has begun.
 */
static long long
expire_silent(acceptor *a, long long now)
{
	long long	idle = a->srv->cfg->idle_timeout_ms;
	int			n = 0;

	while (n < a->nsilent && a->silent[n].since_ms + idle <= now)
		n++;
	(void) drop_silent(a, n, n);
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
 * The silent connections that poll reported, and the partial ones when the
 * epoll set did: queued for a worker (or waiting for room) once their
 * request has begun, closed when they hung up first.
 */
static void
take_silent(acceptor *a)
{
	int			kept = 0;
	bool		more = false;

	if (a->fds[2].revents != 0)
	{
		struct epoll_event ev[64];

		/* what it reported: some partial one has sent more */
		while (epoll_wait(a->ep, ev, 64, 0) == 64)
			;
		more = true;
	}
	for (int i = 0; i < a->nsilent; i++)
	{
		silent_conn c = a->silent[i];
		short		rev = a->fds[i + 3].revents;

		if (rev == 0 && !(c.partial && more))
		{
			a->silent[kept++] = c;
			continue;
		}
		switch (peek(c.fd))
		{
			case PEEK_BEGUN:
				unwatch(a, &c);
				a->waiting[a->nwaiting++] = c.fd;
				break;
			case PEEK_PARTIAL:
				/* hung up before its request began: it never will */
				if ((rev & (POLLRDHUP | POLLHUP | POLLERR)) == 0 && watch_partial(a, &c))
				{
					a->silent[kept++] = c;
					break;
				}
				close(c.fd);
				break;
			case PEEK_SILENT:
				a->silent[kept++] = c;
				break;
			case PEEK_GONE:
				close(c.fd);
				break;
		}
	}
	a->nsilent = kept;
	queue_waiting(a);
}

/*
 * How many connections may be accepted now: PAYNOTIFY_MAX_PENDING less
 * those whose request has begun (queued, waiting), since a new one
 * displaces the oldest silent one; never more than ACCEPT_BATCH or than
 * the tables have room for.
 */
static int
accept_room(acceptor *a)
{
	int			room = a->cap - queued(a->srv) - a->nwaiting;

	if (room > ACCEPT_BATCH)
		room = ACCEPT_BATCH;
	if (room > a->max_held - a->nsilent - a->nwaiting)
		room = a->max_held - a->nsilent - a->nwaiting;
	return room;
}

/*
 * Accepts what the listening socket has, as long as there is room
 * (accept_room), and looks at once (peek) whether the request of each has
 * begun: one whose request has is queued (or waits), any other is held as
 * silent.  Over PAYNOTIFY_MAX_PENDING, the oldest silent ones held before
 * are closed (those whose request has begun since are queued instead, or
 * wait): never a new one, whose bytes may be on their way; it is among the
 * oldest after the next round's.
 */
static void
accept_new(acceptor *a, long long now)
{
	int			room = accept_room(a);
	int			before = a->nsilent;
	int			excess;

	for (int n = 0; n < room; n++)
	{
		struct sockaddr_storage sa;
		socklen_t	len = sizeof(sa);
		int			fd = accept4(a->srv->listen_fd, (struct sockaddr *) &sa,
								 &len, SOCK_CLOEXEC);
		peeked		peeked_at;

		if (fd < 0)
		{
			int			held = a->nsilent;

			accept_failed(a, errno, now);
			/* it may have closed (or moved) some, always the oldest */
			before -= held - a->nsilent;
			if (before < 0)
				before = 0;
			break;
		}
		if (!admit(a->srv, fd, &sa, len))
		{
			close(fd);
			continue;
		}
		switch (peeked_at = peek(fd))
		{
			case PEEK_BEGUN:
				a->waiting[a->nwaiting++] = fd;
				break;
			case PEEK_SILENT:
			case PEEK_PARTIAL:
				if (hold_silent(a, fd, now, peeked_at == PEEK_PARTIAL))
					break;
				/* FALLTHROUGH */
			case PEEK_GONE:
				close(fd);
				break;
		}
	}
	/* the new ones are not among: their bytes may be on their way */
	excess = a->nsilent + a->nwaiting + queued(a->srv) - a->cap;
	if (excess > 0)
		(void) drop_silent(a, excess, before);
	queue_waiting(a);
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
		if (drop_silent(a, 1, a->nsilent) == 0)
			a->resume_ms = now + ACCEPT_PAUSE_MS;
		if (now - a->short_logged_ms >= SHORT_LOG_MS)
		{
			pn_log("accepting: %s (PAYNOTIFY_MAX_PENDING is %d)",
				   strerror(err), a->cap);
			a->short_logged_ms = now;
		}
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
	if (atomic_load(&a->srv->stopping) && !a->stopped)
		stop_accepting(a);
	return true;
}

/*
 * No more accepting: the silent connections are closed, but for those
 * whose request has arrived since the last poll, which are served with the
 * waiting ones.
 */
static void
stop_accepting(acceptor *a)
{
	pthread_mutex_lock(&a->srv->lock);
	a->srv->stop_deadline_ms = PN_ACCEPT_CLOCK() + a->srv->cfg->io_timeout_ms;
	pthread_mutex_unlock(&a->srv->lock);
	(void) drop_silent(a, a->nsilent, a->nsilent);
	a->stopped = true;
	queue_waiting(a);			/* also tells the workers it stopped */
}

/*
 * Whether a silent connection's request has begun since it was polled: a
 * whole BEGIN_REQUEST record (its 8-byte header and 8-byte body) has
 * arrived, or bytes that pn_fcgi_scan_feed already refuses, which a worker
 * then refuses and logs (cgi_fcgi.c).  Nothing is consumed: the worker
 * reads it all.
 */
static peeked
peek(int fd)
{
	unsigned char buf[2 * PN_FCGI_HEADER_LEN];
	pn_fcgi_scan scan;
	ssize_t		got;

	do
		got = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return PEEK_SILENT;
	if (got <= 0)
		return PEEK_GONE;
	pn_fcgi_scan_init(&scan, PN_FCGI_START_MAX);
	if (pn_fcgi_scan_feed(&scan, buf, (size_t) got) != PN_FCGI_MORE ||
		got == (ssize_t) sizeof(buf))
		return PEEK_BEGUN;
	return PEEK_PARTIAL;
}

/* Holds a new connection as silent; false (not held) if it cannot be watched. */
static bool
hold_silent(acceptor *a, int fd, long long now, bool partial)
{
	silent_conn c = {.fd = fd, .since_ms = now};

	if (partial && !watch_partial(a, &c))
		return false;
	a->silent[a->nsilent++] = c;
	return true;
}

/*
 * A silent connection has sent part of a BEGIN_REQUEST record: what it
 * sends next is reported by the epoll set (edge-triggered, since what it
 * has sent keeps it readable).  False when it cannot be added.
 */
static bool
watch_partial(acceptor *a, silent_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = c->fd};

	if (!c->partial)
		c->partial = epoll_ctl(a->ep, EPOLL_CTL_ADD, c->fd, &ev) == 0;
	return c->partial;
}

/* A silent connection handed on: out of the epoll set. */
static void
unwatch(acceptor *a, silent_conn *c)
{
	if (c->partial)
		(void) epoll_ctl(a->ep, EPOLL_CTL_DEL, c->fd, NULL);
	c->partial = false;
}

/*
 * Closes up to n of the `among' oldest silent connections, oldest first,
 * those whose request has really not begun (or that hung up): one whose
 * request has begun since the last poll is moved to the waiting ones
 * instead, and queued when there is room.  Returns how many were closed.
 */
static int
drop_silent(acceptor *a, int n, int among)
{
	int			closed = 0;
	int			moved = 0;
	int			i;

	for (i = 0; i < among && closed < n; i++)
	{
		int			fd = a->silent[i].fd;

		if (peek(fd) == PEEK_BEGUN)
		{
			unwatch(a, &a->silent[i]);
			a->waiting[a->nwaiting++] = fd;
			moved++;
		}
		else
		{
			close(fd);
			closed++;
		}
	}
	/* i connections looked at, all gone from silent[] */
	memmove(a->silent, a->silent + i,
			(size_t) (a->nsilent - i) * sizeof(silent_conn));
	a->nsilent -= i;
	if (moved > 0)
		queue_waiting(a);
	return closed;
}

/*
 * Hands the waiting connections, oldest first, to the workers as long as
 * the queue has room (also at stop: they have sent their request), and
 * publishes how many are left (`held').
 */
static void
queue_waiting(acceptor *a)
{
	pn_server  *srv = a->srv;
	int			cap = (int) srv->cfg->max_pending;
	int			moved = 0;

	pthread_mutex_lock(&srv->lock);
	while (moved < a->nwaiting && srv->ready_count < cap)
	{
		srv->ready[(srv->ready_first + srv->ready_count++) % cap] = a->waiting[moved++];
		pthread_cond_signal(&srv->ready_cv);
	}
	if (srv->held != a->nwaiting - moved || srv->acceptor_stopped != a->stopped)
	{
		srv->held = a->nwaiting - moved;
		srv->acceptor_stopped = a->stopped;
		/* at stop, workers with nothing to take wait for these two */
		pthread_cond_broadcast(&srv->ready_cv);
	}
	pthread_mutex_unlock(&srv->lock);
	if (moved > 0)
	{
		a->nwaiting -= moved;
		memmove(a->waiting, a->waiting + moved, (size_t) a->nwaiting * sizeof(int));
	}
}

/* How many connections wait for a worker in the queue. */
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
 * For a worker: the next connection whose request has begun, waiting for
 * one; -1 once stopping and none is left, queued or held by the acceptor
 * (which has stopped accepting by then).  Taking from a full queue rings
 * the bell: the acceptor accepts no more, and holds the connections whose
 * request has begun, until there is room.
 */
int
pn_ready_take(pn_server *srv)
{
	int			cap = (int) srv->cfg->max_pending;
	int			fd = -1;
	bool		was_full;

	pthread_mutex_lock(&srv->lock);
	while (srv->ready_count == 0 &&
		   !(atomic_load(&srv->stopping) && srv->acceptor_stopped && srv->held == 0))
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
 * the PAYNOTIFY_IO_TIMEOUT deadline, or the stop's if that is earlier.
 * Returns the duplicate of fd that the worker must close once it has
 * called pn_watch_end, or -1 (logged).
 */
int
pn_watch_begin(pn_server *srv, int slot, int fd)
{
	pn_watch   *w = &srv->watches[slot];
	int			dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	bool		clamped;

	if (dup_fd < 0)
	{
		pn_log("cannot duplicate a connection: %s", strerror(errno));
		return -1;
	}
	pthread_mutex_lock(&srv->lock);
	w->fd = dup_fd;
	w->deadline_ms = PN_ACCEPT_CLOCK() + srv->cfg->io_timeout_ms;
	w->cut = false;
	clamped = srv->stop_deadline_ms != 0 && srv->stop_deadline_ms < w->deadline_ms;
	if (clamped)
		w->deadline_ms = srv->stop_deadline_ms;
	pthread_mutex_unlock(&srv->lock);
	/* the acceptor may sleep past the stop's deadline: wake it */
	if (clamped)
		pn_server_ring(srv);
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

/*
 * How long a worker may still wait for a client: PAYNOTIFY_IO_TIMEOUT, or
 * what is left of it after the stop (0 once that has passed).
 */
long long
pn_io_left(pn_server *srv)
{
	long long	left = srv->cfg->io_timeout_ms;

	pthread_mutex_lock(&srv->lock);
	if (srv->stop_deadline_ms != 0 && srv->stop_deadline_ms - PN_ACCEPT_CLOCK() < left)
		left = srv->stop_deadline_ms - PN_ACCEPT_CLOCK();
	pthread_mutex_unlock(&srv->lock);
	return left > 0 ? left : 0;
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

/*
 * Whether the process may open the descriptors FastCGI mode can hold at
 * once: the acceptor's (the bell, the listening socket, the epoll set, up
 * to PAYNOTIFY_MAX_PENDING + ACCEPT_BATCH connections), each worker's (its
 * connection and a duplicate, libfcgi's socket pair, the database's) and
 * a few more (the log, the standard ones).  The soft limit is raised to
 * that if the hard one allows; otherwise false, logged: with too few, the
 * workers could not take the requests the acceptor holds.
 */
bool
pn_accept_descriptors_ok(const pn_config *cfg)
{
	rlim_t		need = (rlim_t) cfg->max_pending + ACCEPT_BATCH + 4 +
		5 * (rlim_t) cfg->workers + 16;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
		rl.rlim_cur >= need)
		return true;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need)
	{
		rl.rlim_cur = need;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			return true;
	}
	pn_log("PAYNOTIFY_MAX_PENDING %lld and %lld workers need %llu descriptors, and the limit is %llu:"
		   " lower PAYNOTIFY_MAX_PENDING or raise the limit (LimitNOFILE=, ulimit -n)",
		   (long long) cfg->max_pending, (long long) cfg->workers,
		   (unsigned long long) need, (unsigned long long) rl.rlim_max);
	return false;
}
