/*
 * cgi_accept.c
 *	  FastCGI mode's acceptor thread.  It alone accepts connections, reads
 *	  each one's request itself, without blocking, until it has arrived
 *	  whole (BEGIN_REQUEST, the PARAMS stream to its empty record, the STDIN
 *	  stream to its empty record), and only then queues it for a worker,
 *	  with the bytes read: a client that connects and says nothing, or sends
 *	  part of a request and stalls, however far into it, costs a descriptor,
 *	  a place in a table and at most a buffer, never a worker.  It also cuts
 *	  off a request that takes too long to arrive once a worker has taken
 *	  it.
 *
 * A connection the acceptor holds is partial (its request has not arrived
 * whole) or waiting (it has, or its bytes failed a check, and the queue for
 * the workers is full).  A partial one is polled and read as its bytes
 * come, into a buffer of PN_FCGI_START_MAX (64 KiB) allocated when its
 * first byte arrives, each read fed to pn_fcgi_scan_request
 * (cgi_fcgi_check.c), which resumes where it stopped: a client trickling a
 * byte at a time costs each byte one look, never a scan from the first
 * again.  A partial one is queued (waiting first if the queue is full)
 * when its whole request is in the buffer, or its bytes fail a check (the
 * worker refuses and logs them: cgi_fcgi.c), and closed when it hangs up
 * first.  One whose buffer fills up before the request is whole (over
 * 64 KiB: a large request, a body of some size) is no longer read nor
 * polled: it waits for a large slot.  Large ones hold at most large_max
 * workers at once (half of them, rounded down, at least one: with two
 * workers or more, at least one is always left for the others), counted
 * from when one is queued until its worker is done with it (pn_large_done);
 * the worker reads the rest of it from the socket.  So a request that
 * arrives whole, every gateway's notification as nginx sends it, always
 * finds a worker, whatever stalled clients do; with one worker, a large
 * request may hold it for PAYNOTIFY_IO_TIMEOUT.
 *
 * Waiting ones go to the queue in the order they became whole, as soon as
 * a worker makes room, before any large one.  The acceptor never closes a
 * waiting one; before it closes a partial one, for any reason, it reads
 * what has arrived since the last poll, and if that makes the request
 * whole, keeps it as waiting.  It reads each new connection as soon as it
 * has accepted it, and holds it whatever it found: over
 * PAYNOTIFY_MAX_PENDING partial ones a new connection displaces the oldest
 * partial one (a large one too: its request has not arrived whole either);
 * whole requests displace none.  So partial connections, however many and
 * however often renewed, never get a request closed, and hold none back in
 * the listen backlog beyond the ACCEPT_BATCH whole ones always queued
 * beside them (a worker's take makes room, and rings the bell): nginx
 * writes its request just after its connect, and its connection is
 * displaced only if PAYNOTIFY_MAX_PENDING partial connections come after
 * it before its whole request does, however many whole ones do.
 *
 * Bounds, each a setting:
 *   PAYNOTIFY_IDLE_TIMEOUT  a connection whose request has not arrived
 *                           whole that long after it was accepted is
 *                           closed (not a large one: it waits for the
 *                           shim, not for its client);
 *   PAYNOTIFY_MAX_PENDING   at most that many partial connections are held
 *                           after each round: over it the oldest are closed
 *                           (see above); when whole ones (waiting or queued)
 *                           fill it, or fill what partial ones leave of
 *                           max_held (ACCEPT_BATCH at least), new ones wait
 *                           in the listen backlog until a worker takes
 *                           one.  Partial, waiting and queued together
 *                           are never more than PAYNOTIFY_MAX_PENDING +
 *                           ACCEPT_BATCH (requests that arrived whole on
 *                           connections due to be closed): new ones wait in
 *                           the backlog then too.  So the buffers are
 *                           never more than that many times 64 KiB (20 MiB
 *                           with the default 256), and one per worker;
 *   PAYNOTIFY_IO_TIMEOUT    what a worker reads from the socket (the rest of
 *                           a large request; after the stop, of one that
 *                           had begun) must have arrived that long after it
 *                           took the connection, else reading is shut down
 *                           (reads return end of file) and the worker moves
 *                           on.  Each read and write is bounded by the same
 *                           time (SO_RCVTIMEO, SO_SNDTIMEO), but a client
 *                           sending a byte now and then would renew that
 *                           bound forever: hence the deadline.  After the
 *                           stop, no deadline is later than that long after
 *                           it (pn_io_left: also for the wait after the
 *                           reply, cgi_fcgi.c).
 *
 * The acceptor polls the bell (a pipe), the non-blocking listening socket
 * and the partial connections that are not large.  A byte on the bell
 * means: look at the stop flags, or at the queue, which has room again, or
 * at the large slots, one of which is free again.  Its poll never waits
 * longer than PAYNOTIFY_IO_TIMEOUT, so it wakes before any deadline set by
 * a worker while it slept (each is that long after it was set).  It also
 * logs the counts of refused requests that were not logged one by one
 * (cgi_refused.c) when no later line has carried them.
 *
 * At stop it accepts no more, reads each partial connection once more, and
 * closes those whose request has not begun (no whole BEGIN_REQUEST record);
 * those whose request has begun, waiting, queued, large or not whole yet,
 * are still served (the workers read the rest; they return once there are
 * none: `held'), and their deadlines are watched until the last worker has
 * returned.  None is waited for past the stop's deadline,
 * PAYNOTIFY_IO_TIMEOUT after it: one a worker takes later is cut off at
 * once, and is served only if its request had arrived whole.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Connections accepted per round at most, so partial ones are not starved. */
#define ACCEPT_BATCH 64
/* Pause before accepting again when out of descriptors and none to close. */
#define ACCEPT_PAUSE_MS 100
/* A shortage of descriptors is logged once in that long, however often. */
#define SHORT_LOG_MS 10000

/* The acceptor's clock (the unit test, shim/tests/accept_test.c, sets its own). */
#ifndef PN_ACCEPT_CLOCK
#define PN_ACCEPT_CLOCK pn_now_ms
#endif
/* Its check of the bytes read (the unit test counts the bytes it is fed). */
#ifndef PN_ACCEPT_SCAN
#define PN_ACCEPT_SCAN pn_fcgi_scan_request
#endif

/* A connection whose request has not arrived whole. */
typedef struct partial_conn
{
	pn_conn		c;				/* the descriptor and the bytes read so far;
								 * c.large: the buffer is full */
	long long	since_ms;		/* when it was accepted */
	pn_fcgi_scan scan;			/* over c.buf[0..c.len) */
} partial_conn;

/* What reading a partial connection found. */
typedef enum arrival
{
	ARRIVING,					/* the request is not whole yet */
	ARRIVED,					/* it is whole, or its bytes failed a check */
	ARRIVED_LARGE,				/* the buffer is full, the request not whole */
	ARRIVAL_GONE				/* it hung up, or failed, before it was whole */
} arrival;

typedef struct acceptor
{
	pn_server  *srv;
	int			cap;			/* PAYNOTIFY_MAX_PENDING */
	int			max_held;		/* npartial + nwaiting + queued, at most */
	int			large_max;		/* large ones in ready[] or served, at most */
	partial_conn *partial;		/* oldest first */
	int			npartial;
	pn_conn    *waiting;		/* whole, the queue full: oldest first */
	int			nwaiting;
	struct pollfd *fds;			/* the bell, the listening socket, partial[] */
	bool		stopped;		/* no more accepted, those not begun closed */
	long long	resume_ms;		/* out of descriptors: no accept before */
	long long	short_logged_ms;	/* when it was last logged (one line a SHORT_LOG_MS) */
} acceptor;

static bool acceptor_init(acceptor *a, pn_server *srv);
static void acceptor_free(acceptor *a);
static bool step(acceptor *a);
static int	fill_pollfds(acceptor *a, long long now, long long *timeout);
static long long expire_partial(acceptor *a, long long now);
static long long cut_overdue(pn_server *srv, long long now);
static void take_partial(acceptor *a);
static int	accept_room(acceptor *a);
static void accept_new(acceptor *a, long long now);
static void accept_failed(acceptor *a, int err, long long now);
static bool admit(pn_server *srv, int fd, const struct sockaddr_storage *sa,
				  socklen_t len);
static bool hear_bell(acceptor *a);
static void stop_accepting(acceptor *a);
static arrival read_partial(partial_conn *p);
static bool settle(acceptor *a, partial_conn *p, arrival r);
static void close_conn(pn_conn *c);
static int	drop_partial(acceptor *a, int n, int among);
static void queue_waiting(acceptor *a);
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
	a->max_held = a->cap + ACCEPT_BATCH;
	/* half the workers, at least one: one is left for whole requests */
	a->large_max = srv->nworkers / 2 > 0 ? srv->nworkers / 2 : 1;
	a->partial = calloc((size_t) a->max_held, sizeof(partial_conn));
	a->waiting = calloc((size_t) a->max_held, sizeof(pn_conn));
	a->fds = calloc((size_t) a->max_held + 2, sizeof(struct pollfd));
	a->short_logged_ms = LLONG_MIN / 2;
	return a->partial != NULL && a->waiting != NULL && a->fds != NULL;
}

/*
 * Closes what the acceptor still holds (the workers have returned, or
 * never started) and frees its tables; workers waiting for the held ones
 * are told there are none.
 */
static void
acceptor_free(acceptor *a)
{
	for (int i = 0; i < a->npartial; i++)
		close_conn(&a->partial[i].c);
	for (int i = 0; i < a->nwaiting; i++)
		close_conn(&a->waiting[i]);
	a->npartial = a->nwaiting = 0;
	pthread_mutex_lock(&a->srv->lock);
	a->srv->held = 0;
	a->srv->acceptor_stopped = true;
	pthread_cond_broadcast(&a->srv->ready_cv);
	pthread_mutex_unlock(&a->srv->lock);
	free(a->partial);
	free(a->waiting);
	free(a->fds);
}

/* One round: expire, cut, poll, then take in what poll saw.  False: done. */
static bool
step(acceptor *a)
{
	long long	now = PN_ACCEPT_CLOCK();
	long long	timeout = a->srv->cfg->io_timeout_ms;
	long long	wait;
	int			nfds;

	/* room made, or a large slot freed, by a worker since the last round */
	queue_waiting(a);
	if ((wait = expire_partial(a, now)) < timeout)
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
	take_partial(a);
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
 * when there is no room or accepting is paused), then the partial
 * connections in the order of partial[], for input (a large one as -1: it
 * is not read).  What they sent has been read: only new bytes, or the
 * end, wake the poll.  The waiting ones are not polled: their request has
 * arrived.  Returns the count.
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
	else if (accept_room(a) > 0)
		a->fds[1] = (struct pollfd) {.fd = a->srv->listen_fd, .events = POLLIN};
	else
	{
		/*
		 * No room: whole requests fill the queue, or partial ones beside
		 * them fill max_held.  Either way a worker's take makes room, and
		 * rings the bell: accepting must not wait for a timeout.
		 */
		pthread_mutex_lock(&a->srv->lock);
		a->srv->room_wanted = true;
		pthread_mutex_unlock(&a->srv->lock);
		/* a take between the check and the flag rang nothing: look again */
		if (accept_room(a) > 0)
			a->fds[1] = (struct pollfd) {.fd = a->srv->listen_fd, .events = POLLIN};
	}
	for (int i = 0; i < a->npartial; i++)
		a->fds[n++] = (struct pollfd) {.fd = a->partial[i].c.large ? -1 : a->partial[i].c.fd,
		.events = POLLIN};
	return n;
}

/*
 * Closes the connections whose request has not arrived whole
 * PAYNOTIFY_IDLE_TIMEOUT after they were accepted (those whose request has
 * since wait for a worker instead); returns the milliseconds until the
 * next one is due (LLONG_MAX: none).  Large ones and waiting ones never
 * expire: they wait for the shim, not for their client.
 */
static long long
expire_partial(acceptor *a, long long now)
{
	long long	idle = a->srv->cfg->idle_timeout_ms;
	long long	next = LLONG_MAX;
	int			kept = 0;
	int			moved = 0;

	for (int i = 0; i < a->npartial; i++)
	{
		partial_conn *p = &a->partial[i];

		if (!p->c.large && p->since_ms + idle <= now)
		{
			arrival		r = read_partial(p);

			if (r == ARRIVED)
			{
				moved++;
				(void) settle(a, p, r);
			}
			else
				close_conn(&p->c);
			continue;
		}
		if (!p->c.large && p->since_ms + idle - now < next)
			next = p->since_ms + idle - now;
		a->partial[kept++] = *p;
	}
	a->npartial = kept;
	if (moved > 0)
		queue_waiting(a);
	return next;
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
 * Reads the partial connections that poll reported: each is queued for a
 * worker (or waits for room) once its request has arrived whole or failed
 * a check, waits for a large slot once its buffer is full, is closed when
 * it hung up first.
 */
static void
take_partial(acceptor *a)
{
	int			kept = 0;

	for (int i = 0; i < a->npartial; i++)
	{
		partial_conn p = a->partial[i];

		if (a->fds[i + 2].revents == 0 || p.c.large ||
			settle(a, &p, read_partial(&p)))
			a->partial[kept++] = p;
	}
	a->npartial = kept;
	queue_waiting(a);
}

/*
 * How many connections may be accepted now: PAYNOTIFY_MAX_PENDING less
 * those whose request has arrived whole (queued, waiting), since a new one
 * may displace the oldest partial one; never more than ACCEPT_BATCH or
 * than leaves partial, waiting and queued together within max_held.
 */
static int
accept_room(acceptor *a)
{
	int			in_queue = queued(a->srv);
	int			room = a->cap - in_queue - a->nwaiting;

	if (room > ACCEPT_BATCH)
		room = ACCEPT_BATCH;
	if (room > a->max_held - a->npartial - a->nwaiting - in_queue)
		room = a->max_held - a->npartial - a->nwaiting - in_queue;
	return room;
}

/*
 * Accepts what the listening socket has, as long as there is room
 * (accept_room), and reads each new connection at once: one whose request
 * has arrived whole is queued (or waits), any other is held as partial.
 * Over PAYNOTIFY_MAX_PENDING partial ones, the oldest held before are
 * closed (those whose request has arrived whole since are queued instead,
 * or wait): never a new one, whose bytes may be on their way; it is among
 * the oldest after the next round's.
 */
static void
accept_new(acceptor *a, long long now)
{
	int			room = accept_room(a);
	int			before = a->npartial;
	int			excess;

	for (int n = 0; n < room; n++)
	{
		struct sockaddr_storage sa;
		socklen_t	len = sizeof(sa);
		int			fd = accept4(a->srv->listen_fd, (struct sockaddr *) &sa,
								 &len, SOCK_CLOEXEC);
		partial_conn *p;

		if (fd < 0)
		{
			int			held = a->npartial;

			accept_failed(a, errno, now);
			/* it may have closed (or moved) some, always the oldest */
			before -= held - a->npartial;
			if (before < 0)
				before = 0;
			break;
		}
		if (!admit(a->srv, fd, &sa, len))
		{
			close(fd);
			continue;
		}
		p = &a->partial[a->npartial];
		memset(p, 0, sizeof(*p));
		p->c.fd = fd;
		p->since_ms = now;
		pn_fcgi_scan_init(&p->scan, PN_FCGI_START_MAX);
		if (settle(a, p, read_partial(p)))
			a->npartial++;
	}
	/*
	 * Partial ones displace partial ones only: whole ones do not (they are
	 * bounded by accept_room), else with the queue nearly full one new
	 * connection would close one accepted just before it.  The new ones
	 * are not among: their bytes may be on their way.
	 */
	excess = a->npartial - a->cap;
	if (excess > 0)
		(void) drop_partial(a, excess, before);
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
		if (drop_partial(a, 1, a->npartial) == 0)
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
 * No more accepting: each partial connection is read once more, and
 * closed unless its request has begun (a whole BEGIN_REQUEST record);
 * those whose request has arrived whole since the last poll, or has begun,
 * are served with the waiting ones (the workers read the rest, within the
 * stop's deadline), large ones as a large slot frees.
 */
static void
stop_accepting(acceptor *a)
{
	int			kept = 0;

	pthread_mutex_lock(&a->srv->lock);
	a->srv->stop_deadline_ms = PN_ACCEPT_CLOCK() + a->srv->cfg->io_timeout_ms;
	pthread_mutex_unlock(&a->srv->lock);
	for (int i = 0; i < a->npartial; i++)
	{
		partial_conn p = a->partial[i];
		arrival		r = p.c.large ? ARRIVED_LARGE : read_partial(&p);

		if (r == ARRIVING && p.scan.request_id != 0)
			r = ARRIVED;		/* begun: a worker reads the rest */
		else if (r == ARRIVING)
			r = ARRIVAL_GONE;
		if (settle(a, &p, r))
			a->partial[kept++] = p;
	}
	a->npartial = kept;
	a->stopped = true;
	queue_waiting(a);			/* also tells the workers it stopped */
}

/*
 * Reads what a partial connection has sent since it was last read, without
 * waiting, into its buffer (allocated when the first byte is there), and
 * checks it from where the last check stopped.
 */
static arrival
read_partial(partial_conn *p)
{
	for (;;)
	{
		ssize_t		got;
		unsigned char first;

		if (p->c.buf == NULL)
		{
			/* nothing allocated for a connection that has sent nothing */
			do
				got = recv(p->c.fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
			while (got < 0 && errno == EINTR);
			if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return ARRIVING;
			if (got <= 0)
				return ARRIVAL_GONE;
			if ((p->c.buf = malloc(PN_FCGI_START_MAX)) == NULL)
			{
				pn_log("out of memory: a connection closed");
				return ARRIVAL_GONE;
			}
		}
		got = recv(p->c.fd, p->c.buf + p->c.len, PN_FCGI_START_MAX - p->c.len,
				   MSG_DONTWAIT);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return ARRIVING;
		if (got <= 0)
			return ARRIVAL_GONE;
		p->c.len += (size_t) got;
		if (PN_ACCEPT_SCAN(&p->scan, p->c.buf, p->c.len) != PN_FCGI_MORE)
			return ARRIVED;
		if (p->c.len == PN_FCGI_START_MAX)
			return ARRIVED_LARGE;
	}
}

/*
 * Acts on what reading a partial connection found: true when it stays
 * partial (a large one too); otherwise it now waits for a worker, or has
 * been closed.
 */
static bool
settle(acceptor *a, partial_conn *p, arrival r)
{
	switch (r)
	{
		case ARRIVING:
			return true;
		case ARRIVED_LARGE:
			p->c.large = true;
			return true;
		case ARRIVED:
			p->c.large = false;
			p->c.whole = p->scan.whole == PN_FCGI_WHOLE;
			a->waiting[a->nwaiting++] = p->c;
			return false;
		case ARRIVAL_GONE:
			break;
	}
	close_conn(&p->c);
	return false;
}

/* Closes a connection the acceptor holds, and frees its buffer. */
static void
close_conn(pn_conn *c)
{
	close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
}

/*
 * Closes up to n of the `among' oldest partial connections, oldest first,
 * large ones too: one whose request has arrived whole since the last poll
 * is moved to the waiting ones instead, and queued when there is room.
 * Returns how many were closed.
 */
static int
drop_partial(acceptor *a, int n, int among)
{
	int			closed = 0;
	int			moved = 0;
	int			i;

	for (i = 0; i < among && closed < n; i++)
	{
		partial_conn *p = &a->partial[i];

		if (!p->c.large && read_partial(p) == ARRIVED)
		{
			(void) settle(a, p, ARRIVED);
			moved++;
		}
		else
		{
			close_conn(&p->c);
			closed++;
		}
	}
	/* i connections looked at, all gone from partial[] */
	memmove(a->partial, a->partial + i,
			(size_t) (a->npartial - i) * sizeof(partial_conn));
	a->npartial -= i;
	if (moved > 0)
		queue_waiting(a);
	return closed;
}

/*
 * Hands the waiting connections, oldest first, to the workers as long as
 * the queue has room (also at stop: they have sent their request), then
 * the large ones, oldest first, as long as it has room and a large slot is
 * free; publishes how many are left (`held').
 */
static void
queue_waiting(acceptor *a)
{
	pn_server  *srv = a->srv;
	int			cap = (int) srv->cfg->max_pending;
	int			moved = 0;
	int			kept = 0;
	int			large = 0;

	pthread_mutex_lock(&srv->lock);
	while (moved < a->nwaiting && srv->ready_count < cap)
	{
		srv->ready[(srv->ready_first + srv->ready_count++) % cap] = a->waiting[moved++];
		pthread_cond_signal(&srv->ready_cv);
	}
	for (int i = 0; i < a->npartial; i++)
	{
		partial_conn *p = &a->partial[i];

		if (p->c.large && srv->ready_count < cap && srv->large_busy < a->large_max)
		{
			srv->ready[(srv->ready_first + srv->ready_count++) % cap] = p->c;
			srv->large_busy++;
			pthread_cond_signal(&srv->ready_cv);
			continue;
		}
		large += p->c.large;
		if (kept != i)
			a->partial[kept] = *p;
		kept++;
	}
	a->npartial = kept;
	if (srv->held != a->nwaiting - moved + large || srv->acceptor_stopped != a->stopped)
	{
		srv->held = a->nwaiting - moved + large;
		srv->acceptor_stopped = a->stopped;
		/* at stop, workers with nothing to take wait for these two */
		pthread_cond_broadcast(&srv->ready_cv);
	}
	pthread_mutex_unlock(&srv->lock);
	if (moved > 0)
	{
		a->nwaiting -= moved;
		memmove(a->waiting, a->waiting + moved, (size_t) a->nwaiting * sizeof(pn_conn));
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
 * For a worker: the next connection whose request has arrived (or, after
 * the stop, begun), waiting for one; fd -1 once stopping and none is left,
 * queued or held by the acceptor (which has stopped accepting by then).
 * Taking from a full queue, or while the acceptor has left the listening
 * socket out for want of room (room_wanted), rings the bell: it accepts no
 * more, and holds the connections whose request has arrived, until there
 * is room.
 */
pn_conn
pn_ready_take(pn_server *srv)
{
	int			cap = (int) srv->cfg->max_pending;
	pn_conn		c = {.fd = -1};
	bool		ring;

	pthread_mutex_lock(&srv->lock);
	while (srv->ready_count == 0 &&
		   !(atomic_load(&srv->stopping) && srv->acceptor_stopped && srv->held == 0))
		pthread_cond_wait(&srv->ready_cv, &srv->lock);
	ring = srv->ready_count == cap || srv->room_wanted;
	srv->room_wanted = false;
	if (srv->ready_count > 0)
	{
		c = srv->ready[srv->ready_first];
		srv->ready_first = (srv->ready_first + 1) % cap;
		srv->ready_count--;
	}
	pthread_mutex_unlock(&srv->lock);
	if (ring)
		pn_server_ring(srv);
	return c;
}

/*
 * For a worker done with a large request: its slot is free, and the
 * acceptor is woken to queue the next one.
 */
void
pn_large_done(pn_server *srv)
{
	pthread_mutex_lock(&srv->lock);
	srv->large_busy--;
	pthread_mutex_unlock(&srv->lock);
	pn_server_ring(srv);
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
 * once: the acceptor's (the bell, the listening socket, up to
 * PAYNOTIFY_MAX_PENDING + ACCEPT_BATCH connections), each worker's (its
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
