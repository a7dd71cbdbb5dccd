/*
 * cgi_fcgi.c
 *	  FastCGI mode: N worker threads accept requests on one listening socket
 *	  with FCGX_Accept_r, each with its own pn_db (one connection, one
 *	  prepared statement reused across requests).
 *
 * Shutdown: the main thread blocks SIGTERM and SIGINT in every thread and
 * waits for them with sigwait (the threaded form of "a flag set by a handler
 * without SA_RESTART": a handler would interrupt only one arbitrary thread).
 * On one it sets `stopping' and closes the write end of a pipe; workers wait
 * in poll() on the listening socket and that pipe, so idle ones return at
 * once and busy ones finish their current request first.  The listening
 * socket is made non-blocking, so a worker that loses the race for a
 * connection gets EAGAIN instead of blocking in accept() where the pipe
 * could not wake it; it is never shut down, since under systemd it outlives
 * this process.  FCGX_Accept_r itself runs under a mutex, as in libfcgi's
 * threaded example, because the library does not promise that concurrent
 * accepts are safe.
 */
#include "cgi.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcgiapp.h>

typedef struct server
{
	const pn_config *cfg;
	int			listen_fd;
	int			wake[2];		/* closing wake[1] stops every worker */
	pthread_mutex_t accept_lock;	/* one FCGX_Accept_r at a time */
	atomic_bool stopping;
	atomic_bool failed;			/* a worker hit an error it cannot survive */
} server;

typedef struct worker
{
	server	   *srv;
	int			id;
	pthread_t	thread;
} worker;

static void *worker_main(void *arg);
static int	accept_next(server *srv, FCGX_Request *req);
static long fcgi_read(pn_io *io, char *buf, size_t n);
static int	fcgi_write(pn_io *io, const char *buf, size_t n);
static int	wait_for_signal(server *srv);

/*
 * Serves FastCGI requests on listen_fd until SIGTERM or SIGINT.  Returns the
 * process exit status: 0 after a clean stop, 1 when the server failed.
 */
int
pn_fcgi_run(const pn_config *cfg, int listen_fd)
{
	server		srv = {.cfg = cfg, .listen_fd = listen_fd,
	.accept_lock = PTHREAD_MUTEX_INITIALIZER};
	worker	   *workers;
	sigset_t	stop_signals;
	int			started = 0;
	int			status = 1;
	int			flags;

	atomic_init(&srv.stopping, false);
	atomic_init(&srv.failed, false);
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	signal(SIGPIPE, SIG_IGN);

	/* cleanup ladder: each step undone in reverse below */
	if (FCGX_Init() != 0)
	{
		pn_log("FCGX_Init failed");
		goto fail_init;
	}
	flags = fcntl(listen_fd, F_GETFL);
	if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) < 0)
	{
		pn_log("cannot use the listening socket: %s", strerror(errno));
		goto fail_init;
	}
	if (pipe(srv.wake) != 0)
	{
		pn_log("pipe: %s", strerror(errno));
		goto fail_init;
	}
	workers = calloc((size_t) cfg->workers, sizeof(worker));
	if (workers == NULL)
	{
		pn_log("out of memory");
		goto fail_workers;
	}
	/* workers inherit the mask: only wait_for_signal takes these signals */
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	for (; started < cfg->workers; started++)
	{
		workers[started].srv = &srv;
		workers[started].id = started + 1;
		if (pthread_create(&workers[started].thread, NULL, worker_main,
						   &workers[started]) != 0)
		{
			pn_log("cannot start worker %d", started + 1);
			atomic_store(&srv.failed, true);
			break;
		}
	}
	if (started == cfg->workers)
		status = wait_for_signal(&srv);

	atomic_store(&srv.stopping, true);
	close(srv.wake[1]);
	srv.wake[1] = -1;
	for (int i = 0; i < started; i++)
		pthread_join(workers[i].thread, NULL);
	if (atomic_load(&srv.failed))
		status = 1;
	free(workers);
fail_workers:
	if (srv.wake[1] >= 0)
		close(srv.wake[1]);
	close(srv.wake[0]);
fail_init:
	return status;
}

/* Waits for SIGTERM/SIGINT; 0 for a stop request, 1 if a worker failed. */
static int
wait_for_signal(server *srv)
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

/* One worker: its own session and request, serving until stopped. */
static void *
worker_main(void *arg)
{
	worker	   *w = arg;
	const pn_config *cfg = w->srv->cfg;
	FCGX_Request req;
	pn_db		db;

	pn_log_set_worker(w->id);
	pn_db_init(&db, cfg, true);
	(void) pn_db_open(&db);		/* a failure is logged and retried later */
	if (FCGX_InitRequest(&req, w->srv->listen_fd, 0) != 0)
	{
		pn_log("FCGX_InitRequest failed");
		atomic_store(&w->srv->failed, true);
		kill(getpid(), SIGTERM);
		pn_db_close(&db);
		return NULL;
	}
	while (accept_next(w->srv, &req) == 0)
	{
		pn_io		io = {.read = fcgi_read, .write = fcgi_write, .handle = &req};

		(void) pn_serve(&io, req.envp, cfg, &db);
		FCGX_Finish_r(&req);
		/*
		 * A web server that asked to keep the connection open (nginx's
		 * fastcgi_keep_conn) would pin this worker to it; close it, so that
		 * workers only ever wait on the listening socket.
		 */
		if (req.ipcFd >= 0)
			FCGX_Free(&req, 1);
	}
	FCGX_Free(&req, 1);
	pn_db_close(&db);
	return NULL;
}

/*
 * Waits for the next request.  0 with req accepted; -1 when the server is
 * stopping (or has failed, which also stops it).
 */
static int
accept_next(server *srv, FCGX_Request *req)
{
	while (!atomic_load(&srv->stopping))
	{
		struct pollfd fds[2] = {
			{.fd = srv->listen_fd, .events = POLLIN},
			{.fd = srv->wake[0], .events = POLLIN},
		};
		int			rc;

		if (poll(fds, 2, -1) < 0)
		{
			if (errno == EINTR)
				continue;
			pn_log("poll: %s", strerror(errno));
			break;
		}
		if (fds[1].revents != 0)
			return -1;
		if (fds[0].revents & (POLLERR | POLLNVAL))
		{
			pn_log("the listening socket failed");
			break;
		}
		pthread_mutex_lock(&srv->accept_lock);
		rc = FCGX_Accept_r(req);
		pthread_mutex_unlock(&srv->accept_lock);
		if (rc == 0)
			return 0;
		/* another worker took the connection, or it went away */
		if (rc == -EAGAIN || rc == -EWOULDBLOCK || rc == -EINTR ||
			rc == -ECONNABORTED)
			continue;
		pn_log("accepting a connection failed: %s",
			   rc < 0 && rc > -4096 ? strerror(-rc) : "FastCGI library error");
		break;
	}
	if (!atomic_load(&srv->stopping))
	{
		atomic_store(&srv->failed, true);
		kill(getpid(), SIGTERM);
	}
	return -1;
}

/* pn_io over the FastCGI request's stdin stream. */
static long
fcgi_read(pn_io *io, char *buf, size_t n)
{
	FCGX_Request *req = io->handle;
	int			got;

	if (n > 1 << 30)
		n = 1 << 30;
	got = FCGX_GetStr(buf, (int) n, req->in);
	if (got < 0 || (got == 0 && FCGX_GetError(req->in) != 0))
		return -1;
	return got;
}

/* pn_io over the FastCGI request's stdout stream. */
static int
fcgi_write(pn_io *io, const char *buf, size_t n)
{
	FCGX_Request *req = io->handle;

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
