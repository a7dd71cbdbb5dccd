/*
 * cgi_fcgi.c
 *	  FastCGI mode: one acceptor thread (cgi_accept.c) takes the connections
 *	  on the listening socket, reads each one's request, and hands it to one
 *	  of N worker threads once it has arrived whole (or failed a check, or
 *	  filled the acceptor's 64 KiB buffer: a large request); each worker has
 *	  its own pn_db (one connection, one prepared statement reused across
 *	  requests) and serves one request per connection, then closes it.
 *
 * No worker ever waits for a client whose request has not arrived whole,
 * but for the rest of a large one (at most half the workers at once, at
 * least one left for the others when there are two or more: cgi_accept.c),
 * and none waits longer than PAYNOTIFY_IO_TIMEOUT for it to arrive: silent
 * or slow clients, however many, cannot keep the shim from answering the
 * others.  No lock is held while a connection is read.
 *
 * libfcgi never reads from a client: it trusts what it reads (see
 * cgi_fcgi_check.c).  A worker starts from the bytes the acceptor read
 * (pn_conn), reads what lies beyond them itself, and checks the request's
 * start (BEGIN_REQUEST and the PARAMS stream, PN_FCGI_START_MAX bytes at
 * most); libfcgi gets only a start that passed, through a socket pair, and
 * parses the parameters from there; then its request writes to the client,
 * and the worker reads the STDIN stream itself, from the bytes in hand
 * first, checking each record.  A connection whose bytes fail a check is
 * logged (rate-limited, cgi_refused.c) and closed: at once when its start
 * failed, after a 400 when a record of its STDIN stream did.
 *
 * Shutdown: the main thread blocks SIGTERM and SIGINT in every thread and
 * waits for them with sigwait (the threaded form of "a flag set by a handler
 * without SA_RESTART": a handler would interrupt only one arbitrary thread).
 * On one it sets `stopping' and wakes the acceptor, which closes the
 * connections whose request has not begun and accepts no more, and the
 * workers, which serve the connections whose request has begun (queued,
 * or held by the acceptor while the queue is full), finish the one in hand
 * and return; no client is waited for longer than PAYNOTIFY_IO_TIMEOUT
 * after the signal (pn_io_left).  The listening socket is never shut down,
 * since under systemd it outlives this process.
 */
#include "cgi_fcgi.h"
#include "cgi_fcgi_check.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcgiapp.h>

typedef struct worker
{
	pn_server  *srv;
	int			id;				/* 1..workers; its watch is watches[id - 1] */
	pthread_t	thread;
	FCGX_Request req;
	pn_db		db;
	/* the connection being served */
	int			fd;
	unsigned char *in;			/* PN_FCGI_START_MAX bytes: what was read,
								 * first by the acceptor */
	size_t		in_len;			/* bytes in `in' */
	size_t		in_pos;			/* of which the STDIN reader has used */
	unsigned	request_id;
	size_t		content_left;	/* of the current STDIN record */
	size_t		padding_left;
	bool		stdin_done;		/* the empty STDIN record was read */
	bool		refused;		/* a record failed its check */
} worker;

static bool server_init(pn_server *srv, const pn_config *cfg, int listen_fd);
static void server_free(pn_server *srv);
static int	start_workers(pn_server *srv, worker *workers);
static void stop_threads(pn_server *srv, worker *workers, int started,
						 pthread_t acceptor);
static int	wait_for_signal(pn_server *srv);
static void *worker_main(void *arg);
static void serve_connection(worker *w, pn_conn conn);
static pn_fcgi_verdict read_start(worker *w, pn_fcgi_scan *scan);
static bool start_libfcgi(worker *w, size_t start_len);
static void refuse(worker *w, pn_fcgi_verdict v);
static bool fill(worker *w, size_t need);
/* What close_gently drops at once of what a client sent, at most. */
#define CLOSE_DRAIN_MAX (256 * 1024)
/* After the reply, a client silent that long is closed (close_gently). */
#define CLOSE_QUIET_MS 200

static void close_gently(int fd, long long timeout_ms);
static long fcgi_read(pn_io *io, char *buf, size_t n);
static int	fcgi_write(pn_io *io, const char *buf, size_t n);
static void fcgi_received(pn_io *io);

/*
 * Serves FastCGI requests on listen_fd until SIGTERM or SIGINT.  Returns the
 * process exit status: 0 after a clean stop, 1 when the server failed.
 */
int
pn_fcgi_run(const pn_config *cfg, int listen_fd)
{
	pn_server	srv;
	worker	   *workers = NULL;
	pthread_t	acceptor;
	sigset_t	stop_signals;
	int			status = 1;

	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	if (server_init(&srv, cfg, listen_fd) &&
		(workers = calloc((size_t) cfg->workers, sizeof(worker))) == NULL)
		pn_log("out of memory");
	if (workers != NULL)
	{
		/* threads inherit the mask: only wait_for_signal takes these signals */
		pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
		if (pthread_create(&acceptor, NULL, pn_accept_main, &srv) != 0)
			pn_log("cannot start the acceptor thread");
		else
		{
			int			started = start_workers(&srv, workers);

			if (started == cfg->workers)
				status = wait_for_signal(&srv);
			stop_threads(&srv, workers, started, acceptor);
			(void) pn_refused_flush(pn_now_ms(), true);
			if (atomic_load(&srv.failed))
				status = 1;
		}
	}
	free(workers);
	server_free(&srv);
	return status;
}

/* Everything but the threads; false (logged) when something is missing. */
static bool
server_init(pn_server *srv, const pn_config *cfg, int listen_fd)
{
	int			flags;

	memset(srv, 0, sizeof(*srv));
	srv->cfg = cfg;
	srv->listen_fd = listen_fd;
	srv->web_server_addrs = getenv("FCGI_WEB_SERVER_ADDRS");
	srv->bell[0] = srv->bell[1] = -1;
	srv->nworkers = (int) cfg->workers;
	atomic_init(&srv->stopping, false);
	atomic_init(&srv->workers_done, false);
	atomic_init(&srv->failed, false);
	pthread_mutex_init(&srv->lock, NULL);
	pthread_cond_init(&srv->ready_cv, NULL);
	if (FCGX_Init() != 0)
	{
		pn_log("FCGX_Init failed");
		return false;
	}
	flags = fcntl(listen_fd, F_GETFL);
	if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
		pipe2(srv->bell, O_NONBLOCK | O_CLOEXEC) != 0)
	{
		pn_log("cannot use the listening socket: %s", strerror(errno));
		return false;
	}
	srv->ready = calloc((size_t) cfg->max_pending, sizeof(pn_conn));
	srv->watches = calloc((size_t) cfg->workers, sizeof(pn_watch));
	if (srv->ready == NULL || srv->watches == NULL)
	{
		pn_log("out of memory");
		return false;
	}
	for (int i = 0; i < srv->nworkers; i++)
		srv->watches[i].fd = -1;
	return true;
}

/* Undoes server_init, also a partial one; closes what is still queued. */
static void
server_free(pn_server *srv)
{
	int			cap = (int) srv->cfg->max_pending;

	for (; srv->ready_count > 0; srv->ready_count--)
	{
		close(srv->ready[srv->ready_first].fd);
		free(srv->ready[srv->ready_first].buf);
		srv->ready_first = (srv->ready_first + 1) % cap;
	}
	for (int i = 0; i < 2; i++)
		if (srv->bell[i] >= 0)
			close(srv->bell[i]);
	free(srv->ready);
	free(srv->watches);
	pthread_cond_destroy(&srv->ready_cv);
	pthread_mutex_destroy(&srv->lock);
}

/* Starts the workers; returns how many started (all, unless logged). */
static int
start_workers(pn_server *srv, worker *workers)
{
	int			started;

	for (started = 0; started < srv->nworkers; started++)
	{
		workers[started].srv = srv;
		workers[started].id = started + 1;
		if (pthread_create(&workers[started].thread, NULL, worker_main,
						   &workers[started]) != 0)
		{
			pn_log("cannot start worker %d", started + 1);
			atomic_store(&srv->failed, true);
			break;
		}
	}
	return started;
}

/*
 * Stops accepting, lets the workers empty the queue and return, then ends
 * the acceptor, which watches their deadlines until then.
 */
static void
stop_threads(pn_server *srv, worker *workers, int started, pthread_t acceptor)
{
	atomic_store(&srv->stopping, true);
	pn_server_ring(srv);
	pthread_mutex_lock(&srv->lock);
	pthread_cond_broadcast(&srv->ready_cv);
	pthread_mutex_unlock(&srv->lock);
	for (int i = 0; i < started; i++)
		pthread_join(workers[i].thread, NULL);
	atomic_store(&srv->workers_done, true);
	pn_server_ring(srv);
	pthread_join(acceptor, NULL);
}

/* Waits for SIGTERM/SIGINT; 0 for a stop request, 1 if the server failed. */
static int
wait_for_signal(pn_server *srv)
{
	sigset_t	set;
	int			sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	while (sigwait(&set, &sig) != 0)
		;
	return atomic_load(&srv->failed) ? 1 : 0;
}

/* One worker: its own session, serving connections until stopped. */
static void *
worker_main(void *arg)
{
	worker	   *w = arg;
	pn_conn		conn;

	pn_log_set_worker(w->id);
	pn_db_init(&w->db, w->srv->cfg, true);
	(void) pn_db_open(&w->db);	/* a failure is logged and retried later */
	while ((conn = pn_ready_take(w->srv)).fd >= 0)
		serve_connection(w, conn);
	pn_db_close(&w->db);
	return NULL;
}

/*
 * Serves the request of a connection the acceptor handed on, then closes
 * the connection; conn.buf, the bytes the acceptor read, is this worker's
 * w->in until then (freed here).
 *
 * The request's start is checked here, read past conn.buf if need be
 * (read_start), then parsed by libfcgi from a socket pair (start_libfcgi);
 * the reply goes through libfcgi's request, whose descriptor is then the
 * connection.  Detached, libfcgi closes its descriptor at once, without
 * waiting for the client; the duplicate `watch' keeps the connection for
 * close_gently.
 */
static void
serve_connection(worker *w, pn_conn conn)
{
	FCGX_Request *req = &w->req;
	pn_io		io = {.read = fcgi_read, .write = fcgi_write,
	.received = fcgi_received, .handle = w};
	int			fd = conn.fd;
	int			watch = -1;
	pn_fcgi_scan scan;
	pn_fcgi_verdict v;
	bool		served = false;

	w->in = conn.buf != NULL ? conn.buf : malloc(PN_FCGI_START_MAX);
	if (w->in == NULL)
		pn_log("out of memory: a connection closed");
	else
		watch = pn_watch_begin(w->srv, w->id - 1, fd);
	if (watch < 0)
	{
		close(fd);
		free(w->in);
		if (conn.large)
			pn_large_done(w->srv);
		return;
	}
	w->fd = fd;
	w->in_len = conn.buf != NULL ? conn.len : 0;
	w->in_pos = 0;
	w->content_left = w->padding_left = 0;
	w->stdin_done = w->refused = false;
	v = read_start(w, &scan);
	if (v != PN_FCGI_DONE)
	{
		/* MORE: the client closed, or was cut off at the deadline */
		if (v != PN_FCGI_MORE)
			refuse(w, v);
		close(fd);
	}
	else if (!start_libfcgi(w, scan.pos))
		close(fd);
	else
	{
		w->request_id = scan.request_id;
		w->in_pos = scan.pos;
		(void) pn_serve(&io, req->envp, w->srv->cfg, &w->db);
		FCGX_Finish_r(req);
		served = true;
		/*
		 * Still open when the web server asked to keep it (nginx's
		 * fastcgi_keep_conn), which would pin this worker to it: closed
		 * all the same, so that workers only ever take new connections,
		 * and nothing the client sent after this request is parsed.
		 */
		if (req->ipcFd >= 0)
			FCGX_Free(req, 1);
	}
	pn_watch_end(w->srv, w->id - 1);
	/*
	 * After a request that arrived whole nothing more is due: whatever the
	 * client sends after it is not waited for (a client sending a byte now
	 * and then would hold this worker for PAYNOTIFY_IO_TIMEOUT).
	 */
	if (served)
		close_gently(watch, w->stdin_done || conn.whole ? 0 : pn_io_left(w->srv));
	else
		close(watch);
	free(w->in);
	w->in = NULL;
	if (conn.large)
		pn_large_done(w->srv);
}

/*
 * Checks the bytes in w->in (what the acceptor read), and reads the
 * connection into w->in after them while needed, until the request's
 * start is complete (PN_FCGI_DONE: scan->pos is its length; w->in may hold
 * STDIN bytes past it) or refused; PN_FCGI_MORE when the client closed
 * first, a read timed out or the acceptor cut reading off at the deadline.
 */
static pn_fcgi_verdict
read_start(worker *w, pn_fcgi_scan *scan)
{
	pn_fcgi_verdict v;

	pn_fcgi_scan_init(scan, PN_FCGI_START_MAX);
	while ((v = pn_fcgi_scan_feed(scan, w->in, w->in_len)) == PN_FCGI_MORE &&
		   w->in_len < PN_FCGI_START_MAX)
	{
		ssize_t		got = recv(w->fd, w->in + w->in_len,
							   PN_FCGI_START_MAX - w->in_len, 0);

		if (got > 0)
			w->in_len += (size_t) got;
		else if (got == 0 || errno != EINTR)
			break;
	}
	return v;
}

/*
 * Hands the checked start of a request (w->in[0..start_len)) to libfcgi:
 * written whole into a socket pair whose other end is the request's
 * descriptor while FCGX_Accept_r parses it, then the request's descriptor
 * becomes the connection, for the reply.  False (logged if it is not the
 * client's doing) when the request is not to be served.
 *
 * libfcgi has no call that takes a connection accepted elsewhere, but
 * FCGX_Accept_r reads the one in ipcFd when there is one (that is how it
 * reads the next request of a kept connection), and the FCGX_Finish_r it
 * begins with leaves it open while keepConnection is set.  Without a
 * listening socket (-1) it cannot accept one of its own: when the start
 * brings no request, it closes the descriptor and returns an error.
 */
static bool
start_libfcgi(worker *w, size_t start_len)
{
	FCGX_Request *req = &w->req;
	int			pair[2];
	int			size = 2 * PN_FCGI_START_MAX;
	bool		ok;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
	{
		pn_log("cannot make a socket pair: %s", strerror(errno));
		return false;
	}
	(void) setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	if (send(pair[0], w->in, start_len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) start_len)
	{
		pn_log("cannot pass a request to libfcgi: %s", strerror(errno));
		close(pair[0]);
		close(pair[1]);
		return false;
	}
	/* libfcgi reads the start and no further: an end of file, never a wait */
	(void) shutdown(pair[0], SHUT_WR);
	(void) FCGX_InitRequest(req, -1, 0);
	req->ipcFd = pair[1];
	req->keepConnection = 1;
	(void) FCGX_Detach(req);
	ok = FCGX_Accept_r(req) == 0;
	close(pair[0]);
	if (ok)
	{
		close(pair[1]);
		req->ipcFd = w->fd;
	}
	else
		pn_log("libfcgi refused a request that passed the checks");
	return ok;
}

/* Logs a connection refused for v (rate-limited) and stops reading it. */
static void
refuse(worker *w, pn_fcgi_verdict v)
{
	struct sockaddr_storage sa;
	socklen_t	len = sizeof(sa);
	char		client[64] = "(unknown)";

	if (getpeername(w->fd, (struct sockaddr *) &sa, &len) == 0)
		pn_refused_peer((struct sockaddr *) &sa, len, client, sizeof(client));
	pn_refused_connection("records", pn_fcgi_verdict_text(v), client);
	w->refused = true;
}

/*
 * Makes w->in hold at least need unused bytes (need <= PN_FCGI_START_MAX),
 * reading as needed.  False when the client closed first, or on a read
 * error or timeout.
 */
static bool
fill(worker *w, size_t need)
{
	if (w->in_len - w->in_pos >= need)
		return true;
	memmove(w->in, w->in + w->in_pos, w->in_len - w->in_pos);
	w->in_len -= w->in_pos;
	w->in_pos = 0;
	while (w->in_len < need)
	{
		ssize_t		got = recv(w->fd, w->in + w->in_len,
							   PN_FCGI_START_MAX - w->in_len, 0);

		if (got > 0)
			w->in_len += (size_t) got;
		else if (got == 0 || errno != EINTR)
			return false;
	}
	return true;
}

/*
 * Closes a connection after its reply.  Our end is shut for writing, then
 * whatever the client still sends (the end of the request, the rest of a
 * body refused unread) is read and dropped until it closes its end, for
 * timeout_ms at most: closing with unread data would reset the connection,
 * and the client could lose the reply.  A client that sends nothing for
 * CLOSE_QUIET_MS has sent all it meant to (nginx sends its whole request
 * before it reads the reply): then it is closed, so that one that keeps
 * its end open holds no worker for long.  With timeout_ms 0 (the request
 * was read to its end: nothing more is due) only what is there already is
 * dropped, up to CLOSE_DRAIN_MAX bytes (it once took 4 KiB of it: the
 * rest reset the connection).
 */
static void
close_gently(int fd, long long timeout_ms)
{
	long long	end = pn_now_ms() + timeout_ms;
	char		trash[4096];
	long long	left;

	if (shutdown(fd, SHUT_WR) == 0)
		for (bool first = true;; first = false)
		{
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			ssize_t		got;

			left = end - pn_now_ms();
			if (left <= 0 && !first)
				break;
			if (left > CLOSE_QUIET_MS)
				left = CLOSE_QUIET_MS;
			if (poll(&pfd, 1, left > 0 ? (int) left : 0) <= 0)
				break;
			got = recv(fd, trash, sizeof(trash), MSG_DONTWAIT);
			if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
				break;
			/* what is there already, all of it (up to a bound), now */
			for (size_t n = 0; got > 0 && n < CLOSE_DRAIN_MAX;)
			{
				n += (size_t) got;
				got = recv(fd, trash, sizeof(trash), MSG_DONTWAIT);
			}
		}
	close(fd);
}

/*
 * pn_io over the request's STDIN stream, read from the connection record by
 * record (w->in first holds what was read past the request's start).  A
 * record other than the request's STDIN is refused: -1 (the request is
 * then answered 400, as a body cut short), and nothing more is read.
 */
static long
fcgi_read(pn_io *io, char *buf, size_t n)
{
	worker	   *w = io->handle;

	for (;;)
	{
		size_t		content,
					padding;
		pn_fcgi_verdict v;

		if (w->refused)
			return -1;
		if (w->content_left > 0 || n == 0)
		{
			size_t		want = n < w->content_left ? n : w->content_left;
			ssize_t		got;

			if (want == 0)
				return 0;
			if (w->in_pos < w->in_len)
			{
				got = (ssize_t) (w->in_len - w->in_pos < want ? w->in_len - w->in_pos : want);
				memcpy(buf, w->in + w->in_pos, (size_t) got);
				w->in_pos += (size_t) got;
			}
			else if ((got = recv(w->fd, buf, want, 0)) <= 0)
			{
				if (got < 0 && errno == EINTR)
					continue;
				return -1;
			}
			w->content_left -= (size_t) got;
			return (long) got;
		}
		if (w->padding_left > 0)
		{
			size_t		skip;

			if (!fill(w, 1))
				return -1;
			skip = w->in_len - w->in_pos < w->padding_left ?
				w->in_len - w->in_pos : w->padding_left;
			w->in_pos += skip;
			w->padding_left -= skip;
			continue;
		}
		if (w->stdin_done)
			return 0;
		if (!fill(w, PN_FCGI_HEADER_LEN))
			return -1;
		v = pn_fcgi_check_stdin(w->in + w->in_pos, w->request_id, &content, &padding);
		w->in_pos += PN_FCGI_HEADER_LEN;
		if (v != PN_FCGI_OK)
		{
			refuse(w, v);
			return -1;
		}
		/* the empty record ends the stream; its padding is never read */
		w->stdin_done = content == 0;
		w->content_left = content;
		w->padding_left = w->stdin_done ? 0 : padding;
	}
}

/* pn_io over the FastCGI request's stdout stream. */
static int
fcgi_write(pn_io *io, const char *buf, size_t n)
{
	FCGX_Request *req = &((worker *) io->handle)->req;

	while (n > 0)
	{
		int			chunk = n > 1 << 30 ? 1 << 30 : (int) n;

		if (FCGX_PutStr(buf, chunk, req->out) != chunk)
			return -1;
		buf += chunk;
		n -= (size_t) chunk;
	}
	return 0;
}

/* The request has arrived: the call may take its own time. */
static void
fcgi_received(pn_io *io)
{
	worker	   *w = io->handle;

	pn_watch_end(w->srv, w->id - 1);
}
