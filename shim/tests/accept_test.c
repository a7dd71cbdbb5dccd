/*
 * accept_test.c
 *	  Unit test of shim/cgi/cgi_accept.c, the FastCGI acceptor: which
 *	  connections it holds, reads, queues for a worker (with the bytes it
 *	  read) and closes.  The file is
 *	  included whole, so the test drives the acceptor's steps itself, one at
 *	  a time, over a unix listening socket of its own (a connect() is in the
 *	  accept queue, and a send() in the peer's receive buffer, when the call
 *	  returns), on a clock of its own: the order of events is the test's,
 *	  never the machine's speed.  No worker thread: the test takes from the
 *	  queue itself.
 *
 * Built by shim/tests/cgi-test.sh with ASan and UBSan (when cc has them)
 * together with cgi_refused.c, cgi_fcgi_check.c and common/; prints
 * "accept_test: N checks, M failures" and exits 1 on a failure.
 */
#define PN_ACCEPT_CLOCK test_clock
#define PN_ACCEPT_SCAN test_scan
#include "../cgi/cgi_fcgi_check.h"
static long long test_clock(void);
static pn_fcgi_verdict test_scan(pn_fcgi_scan *s, const unsigned char *buf, size_t len);

#include "../cgi/cgi_accept.c"

#include <dirent.h>
#include <stdio.h>
#include <sys/un.h>

static int	checks;
static int	failures;

#define CHECK(cond, ...) \
	do { \
		checks++; \
		if (!(cond)) \
		{ \
			failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

#define MAX_CLIENTS 400

static pn_config cfg;
static pn_server srv;
static acceptor acc;
static struct sockaddr_un addr;
static int	client[MAX_CLIENTS];	/* the test's ends, by number */
static int	nclients;
static long long now_ms;		/* the acceptor's clock */
static long long scanned;		/* bytes given to the acceptor's check anew */

static long long
test_clock(void)
{
	return now_ms;
}

/*
 * The acceptor's check, counting the bytes it is given past those it had
 * checked already: a check started again from the first byte at each read
 * would count them all again.
 */
static pn_fcgi_verdict
test_scan(pn_fcgi_scan *s, const unsigned char *buf, size_t len)
{
	size_t		done = s->end > s->pos ? s->end : s->pos;

	scanned += (long long) (len - done);
	return pn_fcgi_scan_request(s, buf, len);
}

/* The clock moves on ms (then silent ones accepted before may be displaced). */
static long long
later(long long ms)
{
	return now_ms += ms;
}

/* Descriptors open in this process. */
static int
open_fds(void)
{
	DIR		   *d = opendir("/proc/self/fd");
	int			n = 0;

	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 3;				/* ".", ".." and the directory's own */
}

/*
 * A server of `workers' workers and its acceptor, as pn_fcgi_run and
 * pn_accept_main set them up.
 */
static void
setup_workers(int cap, long long idle_ms, int workers)
{
	static int	serial;
	int			fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	now_ms = pn_now_ms();
	memset(&cfg, 0, sizeof(cfg));
	cfg.max_pending = cap;
	cfg.idle_timeout_ms = idle_ms;
	cfg.io_timeout_ms = 5000;
	cfg.workers = workers;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	/* abstract: nothing to remove */
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "pn-accept-test-%d-%d",
			 (int) getpid(), ++serial);
	if (fd < 0 || bind(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0 ||
		listen(fd, MAX_CLIENTS) != 0)
	{
		perror("listening socket");
		exit(2);
	}
	memset(&srv, 0, sizeof(srv));
	srv.cfg = &cfg;
	srv.listen_fd = fd;
	srv.nworkers = workers;
	atomic_init(&srv.stopping, false);
	atomic_init(&srv.workers_done, false);
	atomic_init(&srv.failed, false);
	pthread_mutex_init(&srv.lock, NULL);
	pthread_cond_init(&srv.ready_cv, NULL);
	srv.ready = calloc((size_t) cap, sizeof(pn_conn));
	srv.watches = calloc((size_t) workers, sizeof(pn_watch));
	if (srv.ready == NULL || srv.watches == NULL ||
		pipe2(srv.bell, O_NONBLOCK | O_CLOEXEC) != 0 || !acceptor_init(&acc, &srv))
	{
		perror("setup");
		exit(2);
	}
	for (int i = 0; i < workers; i++)
		srv.watches[i].fd = -1;
	nclients = 0;
}

/* A server of one worker. */
static void
setup(int cap, long long idle_ms)
{
	setup_workers(cap, idle_ms, 1);
}

/* Undoes setup, closing whatever is left on either side. */
static void
teardown(void)
{
	acceptor_free(&acc);
	while (srv.ready_count > 0)
	{
		close(srv.ready[srv.ready_first].fd);
		free(srv.ready[srv.ready_first].buf);
		srv.ready_first = (srv.ready_first + 1) % (int) cfg.max_pending;
		srv.ready_count--;
	}
	for (int i = 0; i < nclients; i++)
		if (client[i] >= 0)
			close(client[i]);
	close(srv.bell[0]);
	close(srv.bell[1]);
	close(srv.listen_fd);
	free(srv.ready);
	free(srv.watches);
	pthread_cond_destroy(&srv.ready_cv);
	pthread_mutex_destroy(&srv.lock);
}

/* Connects client number nclients; in the accept queue on return. */
static int
connect_one(void)
{
	int			fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0)
	{
		perror("connect");
		exit(2);
	}
	client[nclients] = fd;
	return nclients++;
}

/* Client i sends len bytes, in the server's buffer on return. */
static void
send_bytes(int i, const void *bytes, size_t len)
{
	if (send(client[i], bytes, len, MSG_NOSIGNAL) != (ssize_t) len)
	{
		perror("send");
		exit(2);
	}
}

/*
 * A record header of client i's request, whose request id, i + 1, names
 * it, with content bytes of content to come.
 */
static void
header(int i, int type, size_t content, unsigned char h[8])
{
	unsigned char r[8] = {1, (unsigned char) type, (unsigned char) ((i + 1) >> 8),
		(unsigned char) (i + 1), (unsigned char) (content >> 8), (unsigned char) content,
	0, 0};

	memcpy(h, r, 8);
}

/*
 * Client i's whole request, the shortest there is (all the acceptor waits
 * for): a BEGIN_REQUEST record (header and body), the empty PARAMS record,
 * the empty STDIN record.
 */
#define REQUEST_LEN 32
static void
request_bytes(int i, unsigned char rec[REQUEST_LEN])
{
	unsigned char body[8] = {0, PN_FCGI_RESPONDER};

	header(i, PN_FCGI_BEGIN_REQUEST, 8, rec);
	memcpy(rec + 8, body, 8);
	header(i, PN_FCGI_PARAMS, 0, rec + 16);
	header(i, PN_FCGI_STDIN, 0, rec + 24);
}

/* Client i sends its whole request. */
static void
send_request(int i)
{
	unsigned char rec[REQUEST_LEN];

	request_bytes(i, rec);
	send_bytes(i, rec, REQUEST_LEN);
}

/* Whether the server closed client i's connection (its end reads EOF). */
static bool
closed_by_server(int i)
{
	struct pollfd p = {.fd = client[i], .events = POLLIN};
	char		c;

	/* the server never writes: anything to read is the end */
	if (poll(&p, 1, 0) <= 0)
		return false;
	return recv(client[i], &c, 1, MSG_DONTWAIT | MSG_PEEK) <= 0;
}

/* Which client a queued connection belongs to (what it sent), or -1. */
static int
whose(pn_conn c)
{
	if (c.fd < 0 || c.buf == NULL || c.len < 4)
		return -1;
	return (c.buf[2] << 8 | c.buf[3]) - 1;
}

/* Closes a connection taken from the queue, as a worker does when done. */
static void
done_with(pn_conn c)
{
	if (c.fd >= 0)
		close(c.fd);
	free(c.buf);
}

static int
ready_count(void)
{
	return queued(&srv);
}

/*
 * One round of the acceptor's loop as its thread runs it, the bell rung
 * first so that its poll returns at once: with what has arrived by then.
 */
static void
round_trip(void)
{
	pn_server_ring(&srv);
	CHECK(step(&acc), "the acceptor goes on");
}

/* Whether the acceptor polls the listening socket (accepts) next round. */
static bool
accepting(void)
{
	long long	timeout = 1000;

	(void) fill_pollfds(&acc, now_ms, &timeout);
	return acc.fds[1].fd >= 0;
}

/* Takes the next queued connection as a worker does: whose it was. */
static int
take(void)
{
	pn_conn		c;
	int			who;

	if (ready_count() == 0 && !atomic_load(&srv.stopping))
		return -2;				/* pn_ready_take would wait */
	c = pn_ready_take(&srv);
	who = whose(c);
	if (c.fd >= 0 && c.large)
		pn_large_done(&srv);
	done_with(c);
	return who;
}

/*
 * The race of the valgrind run in cgi-test.sh: connections accepted in one
 * round send their request after that round's poll; the next round's poll
 * reports new connections only, and accept_new then over
 * PAYNOTIFY_MAX_PENDING must not close the old ones, which have sent
 * something: it queues them instead.
 */
static void
test_request_after_poll(void)
{
	int			first[4];

	setup(4, 60000);
	for (int i = 0; i < 4; i++)
		first[i] = connect_one();
	accept_new(&acc, now_ms);
	CHECK(acc.npartial == 4, "4 silent connections held, not %d", acc.npartial);
	/* their requests arrive after the poll, with 4 new connections */
	for (int i = 0; i < 4; i++)
		send_request(first[i]);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	accept_new(&acc, later(1));
	for (int i = 0; i < 4; i++)
		CHECK(!closed_by_server(first[i]),
			  "connection %d closed although it had sent its request", i + 1);
	CHECK(ready_count() == 4, "the 4 with a request queued, not %d", ready_count());
	for (int i = 0; i < 4 && ready_count() > 0; i++)
	{
		pn_conn		c = pn_ready_take(&srv);

		CHECK(whose(c) == first[i] && c.len == REQUEST_LEN,
			  "queued in their order, with what they sent: #%d is connection %d (%zu bytes)",
			  i + 1, whose(c) + 1, c.len);
		done_with(c);
	}
	for (int i = 4; i < 8; i++)
		CHECK(!closed_by_server(i), "the new connection %d is held", i + 1);
	teardown();
}

/*
 * The race of a later valgrind run in cgi-test.sh: with the workers busy
 * and requests queued, nginx's connection is accepted before nginx has
 * written its request, and the next connection, whose request has arrived,
 * is accepted in the round after.  Whole requests do not displace a
 * partial connection: only newer partial ones, over PAYNOTIFY_MAX_PENDING
 * of them, do (before, the second connection closed the first, and nginx
 * answered 502).
 */
static void
test_whole_do_not_displace(void)
{
	int			a,
				b;

	setup(4, 60000);
	for (int i = 0; i < 3; i++)
	{
		send_request(connect_one());
		round_trip();
	}
	CHECK(ready_count() == 3, "3 requests queued, the worker busy (%d)", ready_count());
	a = connect_one();
	(void) later(1);
	round_trip();
	CHECK(acc.npartial == 1, "nginx's connection held before its request (%d)", acc.npartial);
	b = connect_one();
	send_request(b);
	(void) later(1);
	round_trip();
	CHECK(!closed_by_server(a), "a whole request did not displace the connection before it");
	CHECK(ready_count() == 4, "the request queued (%d)", ready_count());
	send_request(a);
	(void) later(1);
	round_trip();
	for (int i = 0; i < 3; i++)
		CHECK(take() == i, "#%d taken in order", i + 1);
	CHECK(take() == b, "#4: the second connection");
	round_trip();
	CHECK(take() == a, "then nginx's connection, with its request");
	teardown();
}

/*
 * PAYNOTIFY_MAX_PENDING silent connections beside ACCEPT_BATCH whole
 * requests fill max_held while the queue still has room: the listening
 * socket is left out of the poll, and a worker's take must ring the bell,
 * or the acceptor sleeps until its next timeout with requests in the
 * backlog (PAYNOTIFY_IDLE_TIMEOUT, 5 s by default).
 */
static void
test_room_rings(void)
{
	int			cap = ACCEPT_BATCH + 16;
	char		drain[64];
	struct pollfd bell;

	setup(cap, 60000);
	for (int i = 0; i < cap; i++)
		(void) connect_one();
	while (acc.npartial < cap)
		accept_new(&acc, later(1));
	for (int i = 0; i < ACCEPT_BATCH; i++)
		send_request(connect_one());
	accept_new(&acc, later(1));
	CHECK(acc.npartial == cap && ready_count() == ACCEPT_BATCH,
		  "%d silent held (%d), %d queued (%d)", cap, acc.npartial, ACCEPT_BATCH, ready_count());
	CHECK(!accepting(), "no room: the listening socket left out");
	while (read(srv.bell[0], drain, sizeof(drain)) > 0)
		;
	CHECK(take() == cap, "a worker takes the first request");
	bell = (struct pollfd) {.fd = srv.bell[0], .events = POLLIN};
	CHECK(poll(&bell, 1, 0) == 1, "and rings the bell: room again");
	CHECK(accepting(), "the listening socket polled again");
	teardown();
}

/*
 * The queue full: connections that have sent something wait, unpolled
 * (no busy loop), never closed nor expired, and nothing more is accepted
 * (new connections stay in the backlog); as workers make room they are
 * handed on in the order their requests were seen.
 */
static void
test_queue_full(void)
{
	int			c8;
	long long	timeout = 1000;

	setup(4, 100);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	accept_new(&acc, now_ms);
	for (int i = 0; i < 4; i++)
		send_request(i);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	accept_new(&acc, later(1));
	CHECK(ready_count() == 4 && acc.npartial == 4, "4 queued (%d), 4 silent (%d)",
		  ready_count(), acc.npartial);
	/* the order their requests are seen in: 7, then 4 to 6 in one poll */
	send_request(7);
	round_trip();
	send_request(5);
	send_request(6);
	send_request(4);
	round_trip();
	CHECK(acc.nwaiting == 4 && acc.npartial == 0, "the 4 with a request wait (%d), none silent (%d)",
		  acc.nwaiting, acc.npartial);
	CHECK(fill_pollfds(&acc, now_ms, &timeout) == 2 && acc.fds[1].fd < 0,
		  "queue full: only the bell is polled");
	c8 = connect_one();
	round_trip();
	CHECK(acc.npartial == 0, "a new connection is left in the backlog");
	/* long past PAYNOTIFY_IDLE_TIMEOUT: the waiting ones are not expired */
	(void) expire_partial(&acc, now_ms + 60000);
	CHECK(acc.nwaiting == 4, "waiting ones never expire (%d left)", acc.nwaiting);
	for (int i = 0; i <= c8; i++)
		CHECK(!closed_by_server(i), "connection %d still open", i + 1);
	{
		int			order[8] = {0, 1, 2, 3, 7, 4, 5, 6};

		for (int i = 0; i < 8; i++)
		{
			int			who = take();

			CHECK(who == order[i], "#%d taken: connection %d, not %d", i + 1,
				  order[i] + 1, who + 1);
			round_trip();
		}
	}
	CHECK(acc.npartial == 1 && acc.nwaiting == 0 && ready_count() == 0,
		  "with room again the backlog's connection is accepted (%d silent)", acc.npartial);
	CHECK(!closed_by_server(c8), "and held");
	CHECK(accepting(), "and the listening socket polled again");
	teardown();
}

/*
 * Over PAYNOTIFY_MAX_PENDING only connections that have sent nothing are
 * closed, the oldest first; one that has sent something is queued
 * instead, one that hung up closed.
 */
static void
test_drop_only_silent(void)
{
	setup(4, 60000);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	accept_new(&acc, now_ms);
	send_request(1);
	for (int i = 0; i < 2; i++)
		(void) connect_one();
	accept_new(&acc, later(1));
	CHECK(closed_by_server(0), "the oldest silent connection closed");
	CHECK(!closed_by_server(1), "the second, which sent its request, kept");
	CHECK(closed_by_server(2), "the third (silent) closed in its place");
	for (int i = 3; i < 6; i++)
		CHECK(!closed_by_server(i), "connection %d kept", i + 1);
	CHECK(acc.npartial == 3 && ready_count() == 1, "3 silent (%d), 1 queued (%d)",
		  acc.npartial, ready_count());
	CHECK(take() == 1, "the queued one is the second");
	teardown();
}

/*
 * Over PAYNOTIFY_MAX_PENDING a new connection, silent too, displaces the
 * oldest silent one at once, however young: it is never closed itself (its
 * bytes may be on their way, as nginx's are just after its connect), and a
 * flood of silent connections renewed faster than any idle timeout closes
 * only the oldest of them.  One of the oldest whose request began since the
 * last poll is kept, and queued.
 */
static void
test_displace_oldest(void)
{
	setup(4, 60000);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	accept_new(&acc, now_ms);
	(void) connect_one();
	(void) connect_one();
	(void) later(1);
	round_trip();
	CHECK(closed_by_server(0) && closed_by_server(1), "the 2 oldest displaced, 1 ms old");
	for (int i = 2; i < 6; i++)
		CHECK(!closed_by_server(i), "connection %d held", i + 1);
	CHECK(acc.npartial == 4, "4 held (%d)", acc.npartial);
	/* the oldest held begins its request: queued, no other one displaced */
	send_request(2);
	(void) connect_one();
	round_trip();
	CHECK(!closed_by_server(2) && ready_count() == 1 && take() == 2,
		  "the oldest, its request begun, queued");
	CHECK(!closed_by_server(3), "the next oldest held: 4 silent ones");
	CHECK(!closed_by_server(6), "the new one held");
	/* one more silent one: the oldest silent one displaced, 1 ms old */
	(void) connect_one();
	(void) later(1);
	round_trip();
	CHECK(closed_by_server(3), "then the next oldest displaced");
	for (int i = 4; i < 8; i++)
		CHECK(!closed_by_server(i), "connection %d held", i + 1);
	CHECK(acc.npartial <= 4, "within PAYNOTIFY_MAX_PENDING: %d silent", acc.npartial);
	teardown();
}

/*
 * Silent connections, as many as PAYNOTIFY_MAX_PENDING and renewed as they
 * are displaced, never hold a request back: a new connection that has sent
 * its request is accepted and queued at once (displacing no one: whole
 * requests are bounded apart), and so is the next one, behind a renewed
 * silent one that displaces the oldest.
 */
static void
test_request_displaces_silent(void)
{
	int			req;

	setup(4, 60000);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	accept_new(&acc, now_ms);
	CHECK(acc.npartial == 4, "4 silent connections held, not %d", acc.npartial);
	(void) later(1);
	CHECK(accepting(), "the listening socket is polled beside silent ones");
	req = connect_one();
	send_request(req);
	round_trip();
	CHECK(ready_count() == 1 && take() == req, "the request queued at once");
	for (int i = 0; i < 4; i++)
		CHECK(!closed_by_server(i), "connection %d held", i + 1);
	/* a silent one renewed, then a request behind it in the backlog */
	(void) connect_one();
	req = connect_one();
	send_request(req);
	round_trip();
	CHECK(ready_count() == 1 && take() == req, "the next request queued at once too");
	CHECK(closed_by_server(0), "the oldest silent connection displaced by the renewed one");
	CHECK(acc.npartial <= 4, "within PAYNOTIFY_MAX_PENDING: %d silent", acc.npartial);
	teardown();
}

/*
 * A connection is queued only once its whole request has arrived.  One
 * that sent less stays with the acceptor, which reads what it sent (its
 * bytes do not keep the poll awake), is queued as soon as the rest
 * arrives, with all its bytes, closed when it hangs up first or at
 * PAYNOTIFY_IDLE_TIMEOUT; bytes that are no request are handed on at once,
 * for the worker to refuse.
 */
static void
test_partial(void)
{
	unsigned char rec[REQUEST_LEN];
	unsigned char v2[8] = {2, PN_FCGI_BEGIN_REQUEST, 0, 4, 0, 8, 0, 0};
	long long	timeout = 1000;
	int			nfds;

	setup(8, 1000);
	for (int i = 0; i < 4; i++)
		(void) connect_one();
	request_bytes(0, rec);
	send_bytes(0, rec, 1);		/* one byte */
	request_bytes(1, rec);
	send_bytes(1, rec, REQUEST_LEN - 1);	/* all but the last */
	request_bytes(2, rec);
	send_bytes(2, rec, 3);		/* three bytes, then it hangs up */
	(void) shutdown(client[2], SHUT_WR);
	send_bytes(3, v2, 8);		/* another FastCGI version: no request */
	round_trip();
	CHECK(ready_count() == 1 && take() == 3, "only the record of another version handed on");
	CHECK(acc.npartial == 2 && acc.partial[0].c.len == 1 &&
		  acc.partial[1].c.len == REQUEST_LEN - 1,
		  "the 2 partial ones held, what they sent read (%d)", acc.npartial);
	CHECK(closed_by_server(2), "the one that hung up mid-request closed");
	round_trip();
	CHECK(ready_count() == 0 && acc.npartial == 2, "the other 2 still held a round later");
	nfds = fill_pollfds(&acc, now_ms, &timeout);
	CHECK(poll(acc.fds, (nfds_t) nfds, 0) == 0, "their bytes do not keep the poll awake");
	request_bytes(1, rec);
	send_bytes(1, rec + REQUEST_LEN - 1, 1);
	nfds = fill_pollfds(&acc, now_ms, &timeout);
	CHECK(poll(acc.fds, (nfds_t) nfds, 0) == 1 && acc.fds[3].revents != 0,
		  "the rest of a request wakes the poll");
	round_trip();
	{
		pn_conn		c = ready_count() == 1 ? pn_ready_take(&srv) : (pn_conn) {.fd = -1};

		CHECK(whose(c) == 1 && c.len == REQUEST_LEN && memcmp(c.buf, rec, REQUEST_LEN) == 0,
			  "then its request is queued, with all its bytes (%zu)", c.len);
		done_with(c);
	}
	(void) later(cfg.idle_timeout_ms);
	round_trip();
	CHECK(closed_by_server(0) && acc.npartial == 0, "the one byte closed at the idle timeout");
	teardown();
}

/*
 * After a stop no request is waited for longer than PAYNOTIFY_IO_TIMEOUT
 * from the stop: a connection a worker takes then gets the stop's deadline,
 * and one taken later is cut off at once.  One whose request has begun but
 * not arrived whole is handed on at the stop with what it sent; what it
 * sends after is still read.
 */
static void
test_stop_deadline(void)
{
	long long	stop_ms;
	unsigned char rec[REQUEST_LEN];
	int			watch;
	pn_conn		c;
	char		buf[64];

	setup(4, 60000);
	for (int i = 0; i < 2; i++)
		(void) connect_one();
	send_request(0);
	request_bytes(1, rec);
	send_bytes(1, rec, 16);		/* BEGIN_REQUEST alone */
	round_trip();
	CHECK(ready_count() == 1 && acc.npartial == 1, "1 request queued (%d), 1 begun held (%d)",
		  ready_count(), acc.npartial);
	atomic_store(&srv.stopping, true);
	stop_ms = now_ms;
	round_trip();
	CHECK(ready_count() == 2 && acc.npartial == 0, "at the stop the begun one is queued too");
	(void) later(1000);
	c = pn_ready_take(&srv);
	watch = pn_watch_begin(&srv, 0, c.fd);
	CHECK(srv.watches[0].deadline_ms == stop_ms + cfg.io_timeout_ms,
		  "taken after the stop: the stop's deadline, %lld ms after it, not %lld",
		  cfg.io_timeout_ms, srv.watches[0].deadline_ms - stop_ms);
	CHECK(pn_io_left(&srv) == cfg.io_timeout_ms - 1000, "%lld ms left to wait for a client",
		  pn_io_left(&srv));
	pn_watch_end(&srv, 0);
	close(watch);
	done_with(c);
	(void) later(cfg.io_timeout_ms);
	send_bytes(1, rec + 16, REQUEST_LEN - 16);
	c = pn_ready_take(&srv);
	watch = pn_watch_begin(&srv, 0, c.fd);
	round_trip();
	CHECK(srv.watches[0].cut, "taken past the stop's deadline: cut off at once");
	CHECK(whose(c) == 1 && c.len == 16, "handed on with the 16 bytes it had sent (%zu)", c.len);
	CHECK(recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT) == REQUEST_LEN - 16 &&
		  recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT) == 0,
		  "what it sent since is read, then the end of file, no wait");
	CHECK(pn_io_left(&srv) == 0, "no time left to wait for a client");
	pn_watch_end(&srv, 0);
	close(watch);
	done_with(c);
	CHECK(pn_ready_take(&srv).fd == -1, "then the workers return");
	teardown();
}

/* The idle timeout closes silent ones only: a request arrived since is queued. */
static void
test_expire(void)
{
	long long	t0 = now_ms;

	setup(4, 100);
	(void) connect_one();
	(void) connect_one();
	accept_new(&acc, t0);
	send_request(0);
	CHECK(expire_partial(&acc, t0 + 99) == 1, "due in 1 ms");
	(void) expire_partial(&acc, t0 + 100);
	CHECK(!closed_by_server(0) && ready_count() == 1, "the one with a request queued");
	CHECK(closed_by_server(1) && acc.npartial == 0, "the silent one closed");
	CHECK(take() == 0, "the queued one is the first");
	teardown();
}

/*
 * A flood of connections, silent ones and some whose requests arrive in
 * the race of test_request_after_poll, and workers that take only a few:
 * every table stays within its bound, no connection with a request is
 * ever closed, and in the end every request is handed on exactly once.
 */
static void
test_flood(void)
{
	static bool sent[MAX_CLIENTS];
	static bool served[MAX_CLIENTS];
	int			nsent = 0;
	int			nserved = 0;
	int			peak = 0;
	bool		bounded = true;
	bool		none_lost = true;

	memset(sent, 0, sizeof(sent));
	memset(served, 0, sizeof(served));
	setup(8, 60000);
	for (int r = 0; r < 18; r++)
	{
		/* 20 new ones, every third with its request at once */
		for (int k = 0; k < 20; k++)
		{
			int			i = connect_one();

			if (i % 3 == 0)
			{
				send_request(i);
				sent[i] = true;
				nsent++;
			}
		}
		/* older ones, still open, send theirs after the poll */
		for (int i = 0; i < nclients - 20; i++)
			if (!sent[i] && !closed_by_server(i) && (i * 7 + r) % 2 == 0)
			{
				send_request(i);
				sent[i] = true;
				nsent++;
			}
		accept_new(&acc, later(1));
		round_trip();
		if (acc.npartial + acc.nwaiting + ready_count() > peak)
			peak = acc.npartial + acc.nwaiting + ready_count();
		if (acc.npartial + acc.nwaiting > 8 + ACCEPT_BATCH || ready_count() > 8 ||
			acc.npartial + acc.nwaiting + ready_count() > 8 + ACCEPT_BATCH)
			bounded = false;
		/* workers slower than the flood: 1 a round */
		for (int k = 0; k < 1 && ready_count() > 0; k++)
		{
			int			who = take();

			CHECK(who >= 0 && sent[who] && !served[who], "a request taken once: %d", who);
			if (who >= 0)
				served[who] = true;
			nserved++;
		}
	}
	/* then the workers catch up: everything in the backlog is taken in */
	for (int r = 0; r < 200 && nserved < nsent; r++)
	{
		(void) later(1);
		round_trip();
		while (ready_count() > 0)
		{
			int			who = take();

			CHECK(who >= 0 && sent[who] && !served[who], "a request taken once: %d", who);
			if (who >= 0)
				served[who] = true;
			nserved++;
		}
	}
	for (int i = 0; i < nclients; i++)
		if (sent[i] && !served[i])
		{
			none_lost = false;
			fprintf(stderr, "connection %d: %s\n", i + 1,
					closed_by_server(i) ? "closed" : "never handed on");
		}
	CHECK(bounded, "partial + waiting + queued (each with its buffer) <= "
		  "PAYNOTIFY_MAX_PENDING + ACCEPT_BATCH, queue <= cap");
	CHECK(none_lost && nserved == nsent, "every request handed on (%d of %d)", nserved, nsent);
	CHECK(acc.npartial <= 8, "what is left is silent ones within the cap (%d)", acc.npartial);
	printf("# flood: %d connections, %d requests, at most %d held without a worker\n",
		   nclients, nsent, peak);
	teardown();
}

/*
 * At stop the silent connections are closed, except one whose request has
 * arrived since the last poll; the workers are given everything that has
 * sent something, queued or waiting, and only then told to return.
 */
static void
test_stop(void)
{
	int			order[7] = {0, 1, 2, 3, 4, 5, 7};

	setup(4, 60000);
	for (int i = 0; i < 8; i++)
		(void) connect_one();
	accept_new(&acc, now_ms);	/* 0 to 3 */
	for (int i = 0; i < 4; i++)
		send_request(i);
	accept_new(&acc, later(1));	/* 4 to 7; 0 to 3 queued */
	send_request(4);
	send_request(5);
	round_trip();				/* 4, 5 wait */
	send_request(7);			/* after the poll */
	(void) connect_one();		/* 8, in the backlog */
	atomic_store(&srv.stopping, true);
	round_trip();
	CHECK(acc.stopped && !accepting(), "stopped: no more accepting");
	CHECK(closed_by_server(6), "the silent connection closed");
	CHECK(!closed_by_server(7), "the one whose request arrived since the poll kept");
	CHECK(!closed_by_server(8), "one in the backlog left there");
	CHECK(srv.held == 3 && srv.acceptor_stopped, "3 held for the workers (%d)", srv.held);
	for (int i = 0; i < 7; i++)
	{
		CHECK(take() == order[i], "#%d taken at stop: connection %d", i + 1, order[i] + 1);
		round_trip();
	}
	CHECK(srv.held == 0 && pn_ready_take(&srv).fd == -1, "then the workers return");
	teardown();
}

/*
 * Client i's request with a PARAMS stream of `params' bytes in one record
 * (a pair HTTP_X_PAD=ppp...; at least 15, under 64 KiB), then, when whole,
 * the empty STDIN record, in req_buf; returns its length.
 */
static unsigned char req_buf[65536 + 64];

static size_t
build_request(int i, size_t params, bool whole)
{
	unsigned char body[8] = {0, PN_FCGI_RESPONDER};
	size_t		value = params - 15;
	size_t		n;

	header(i, PN_FCGI_BEGIN_REQUEST, 8, req_buf);
	memcpy(req_buf + 8, body, 8);
	header(i, PN_FCGI_PARAMS, params, req_buf + 16);
	n = 24;
	req_buf[n++] = 10;
	req_buf[n++] = (unsigned char) (0x80 | (value >> 24));
	req_buf[n++] = (unsigned char) (value >> 16);
	req_buf[n++] = (unsigned char) (value >> 8);
	req_buf[n++] = (unsigned char) value;
	memcpy(req_buf + n, "HTTP_X_PAD", 10);
	n += 10;
	memset(req_buf + n, 'p', value);
	n += value;
	header(i, PN_FCGI_PARAMS, 0, req_buf + n);
	n += 8;
	if (whole)
	{
		header(i, PN_FCGI_STDIN, 0, req_buf + n);
		n += 8;
	}
	return n;
}

/*
 * Client i sends such a request (build_request), or its first `upto'
 * bytes (0: all); returns the whole request's length.
 */
static size_t
request_with_params(int i, size_t params, bool whole, size_t upto)
{
	size_t		n = build_request(i, params, whole);

	send_bytes(i, req_buf, upto == 0 || upto > n ? n : upto);
	return n;
}

/*
 * Stalled clients, twice as many as the workers, each having sent a
 * request's start and then nothing more, mid-PARAMS or with the PARAMS
 * stream whole and no STDIN: none is queued, and a whole request sent
 * after them is queued at once.  At stop those whose request has begun are
 * handed on, with what they sent; one that sent part of a BEGIN_REQUEST is
 * closed.
 */
static void
test_stalled(void)
{
	int			workers = 4;
	int			stalled = 2 * workers;
	int			req,
				early;
	unsigned char rec[REQUEST_LEN];

	setup_workers(16, 60000, workers);
	for (int i = 0; i < stalled; i++)
	{
		(void) connect_one();
		if (i % 2 == 0)
			(void) request_with_params(i, 200, false, 100);	/* mid-PARAMS */
		else
			(void) request_with_params(i, 200, false, 0);	/* no STDIN */
	}
	early = connect_one();
	request_bytes(early, rec);
	send_bytes(early, rec, 5);	/* part of a BEGIN_REQUEST */
	round_trip();
	CHECK(ready_count() == 0 && acc.npartial == stalled + 1,
		  "%d stalled requests: none queued (%d), all held (%d)", stalled,
		  ready_count(), acc.npartial);
	req = connect_one();
	send_request(req);
	round_trip();
	CHECK(ready_count() == 1 && take() == req, "a whole request after them: queued at once");
	(void) later(1000);
	round_trip();
	CHECK(ready_count() == 0, "the stalled ones are not queued later either");
	for (int i = 0; i <= early; i++)
		CHECK(!closed_by_server(i), "stalled connection %d held", i + 1);
	atomic_store(&srv.stopping, true);
	round_trip();
	CHECK(closed_by_server(early), "at stop, the one without a whole BEGIN_REQUEST closed");
	CHECK(ready_count() == stalled && acc.npartial == 0,
		  "at stop the %d begun ones are handed on (%d)", stalled, ready_count());
	for (int i = 0; i < stalled; i++)
	{
		pn_conn		c = pn_ready_take(&srv);

		CHECK(whose(c) == i && c.len == (i % 2 == 0 ? 100 : 24 + 200 + 8),
			  "#%d: connection %d, with the %zu bytes it sent", i + 1, whose(c) + 1, c.len);
		done_with(c);
	}
	CHECK(pn_ready_take(&srv).fd == -1, "then the workers return");
	teardown();
}

/*
 * A client trickling its request a byte at a time: each byte is read and
 * checked once, from where the check stopped (a check from the first byte
 * again at each read would be given n * n / 2 bytes), and the request is
 * queued when its last byte is there, whole.
 */
static void
test_trickle(void)
{
	size_t		len;
	int			c;
	bool		early = false;
	pn_conn		got;

	setup(4, 600000);
	c = connect_one();
	round_trip();
	len = build_request(c, 2000, true);
	scanned = 0;
	for (size_t i = 0; i < len; i++)
	{
		send_bytes(c, req_buf + i, 1);
		round_trip();
		if (i + 1 < len && ready_count() != 0)
			early = true;
	}
	CHECK(!early, "not queued before its last byte");
	CHECK(ready_count() == 1, "queued at its last byte");
	got = ready_count() == 1 ? pn_ready_take(&srv) : (pn_conn) {.fd = -1};
	CHECK(whose(got) == c && got.len == len && memcmp(got.buf, req_buf, len) == 0,
		  "whole, with its %zu bytes (%zu)", len, got.len);
	done_with(got);
	CHECK(scanned >= (long long) len && scanned <= 2 * (long long) len,
		  "each byte checked once (%lld bytes given to the check for %zu; "
		  "from the first byte each time: %zu)", scanned, len, len * (len + 1) / 2);
	printf("# trickle: %zu bytes one at a time, %lld given to the check\n", len, scanned);
	teardown();
}

/*
 * Requests over 64 KiB: read until the acceptor's buffer is full, then
 * queued only while fewer than half the workers (at least one) hold one,
 * so whole requests always find a worker; the worker gets the 64 KiB and
 * reads the rest from the socket.  Large ones do not expire, but are
 * displaced like partial ones.
 */
static void
test_large(void)
{
	static unsigned char big[70000];
	int			workers = 4;
	int			lg[3],
				req;
	pn_conn		c[2];

	/* a large slot never takes the last worker */
	for (int n = 1; n <= 9; n++)
	{
		setup_workers(4, 1000, n);
		CHECK(acc.large_max >= 1 && (n == 1 || acc.large_max <= n - 1) &&
			  acc.large_max == (n / 2 > 0 ? n / 2 : 1),
			  "%d workers: %d for large requests", n, acc.large_max);
		teardown();
	}
	setup_workers(8, 1000, workers);
	for (int i = 0; i < 3; i++)
	{
		lg[i] = connect_one();
		(void) request_with_params(lg[i], 100, false, 0);
		memset(big, '{', sizeof(big));
		header(lg[i], PN_FCGI_STDIN, 65535, big);
		send_bytes(lg[i], big, 65535 + 8);
	}
	round_trip();
	CHECK(ready_count() == 2 && srv.large_busy == 2, "2 large ones queued (%d), half the workers",
		  ready_count());
	CHECK(acc.npartial == 1 && acc.partial[0].c.large && srv.held == 1,
		  "the third waits for a slot (%d)", srv.held);
	for (int i = 0; i < 2; i++)
	{
		char		rest[65536];

		c[i] = pn_ready_take(&srv);
		CHECK(whose(c[i]) == lg[i] && c[i].large && c[i].len == PN_FCGI_START_MAX &&
			  recv(c[i].fd, rest, sizeof(rest), MSG_DONTWAIT) ==
			  (ssize_t) (24 + 100 + 8 + 65535 + 8 - PN_FCGI_START_MAX),
			  "large #%d: 64 KiB handed on, the rest in the socket", i + 1);
	}
	/* the two being served: whole requests still go through, large ones wait */
	for (int k = 0; k < 3; k++)
	{
		req = connect_one();
		send_request(req);
		(void) later(2000);		/* past PAYNOTIFY_IDLE_TIMEOUT */
		round_trip();
		CHECK(ready_count() == 1 && take() == req,
			  "2 workers on large requests: a whole one queued at once (%d)", k + 1);
	}
	CHECK(acc.npartial == 1 && acc.partial[0].c.large && !closed_by_server(lg[2]),
		  "the large one waiting never expires");
	pn_large_done(&srv);
	done_with(c[0]);
	round_trip();
	CHECK(ready_count() == 1 && srv.large_busy == 2 && srv.held == 0,
		  "a slot freed: the third queued");
	CHECK(take() == lg[2], "and taken");
	pn_large_done(&srv);
	done_with(c[1]);
	CHECK(srv.large_busy == 0, "no slot held");
	/* over PAYNOTIFY_MAX_PENDING, a large one is displaced as a partial one */
	for (int i = 0; i < 3; i++)
	{
		lg[i] = connect_one();
		(void) request_with_params(lg[i], 100, false, 0);
		header(lg[i], PN_FCGI_STDIN, 65535, big);
		send_bytes(lg[i], big, 65535 + 8);
	}
	round_trip();				/* 2 queued, the third waits */
	CHECK(ready_count() == 2 && acc.npartial == 1 && acc.partial[0].c.large,
		  "again 2 large ones queued, 1 waiting");
	c[0] = ready_count() == 2 ? pn_ready_take(&srv) : (pn_conn) {.fd = -1};
	c[1] = ready_count() == 1 ? pn_ready_take(&srv) : (pn_conn) {.fd = -1};
	for (int i = 0; i < 8; i++)
		(void) connect_one();
	(void) later(1);
	round_trip();
	CHECK(closed_by_server(lg[2]), "a large one waiting, the oldest, displaced");
	CHECK(acc.npartial == 8, "the 8 new ones held (%d)", acc.npartial);
	for (int i = 0; i < 2; i++)
	{
		pn_large_done(&srv);
		done_with(c[i]);
	}
	teardown();
}

int
main(void)
{
	int			fds = open_fds();

	pn_log_init("accept_test", false);
	test_request_after_poll();
	test_whole_do_not_displace();
	test_room_rings();
	test_queue_full();
	test_drop_only_silent();
	test_displace_oldest();
	test_request_displaces_silent();
	test_partial();
	test_stop_deadline();
	test_expire();
	test_flood();
	test_stop();
	test_stalled();
	test_trickle();
	test_large();
	CHECK(open_fds() == fds, "no descriptor left open: %d before, %d after", fds, open_fds());
	printf("accept_test: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
