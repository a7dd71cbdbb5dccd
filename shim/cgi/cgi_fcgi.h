/*
 * cgi_fcgi.h
 *	  What the two halves of FastCGI mode share: cgi_fcgi.c (the process and
 *	  its worker threads) and cgi_accept.c (the acceptor thread, which alone
 *	  accepts connections and hands each to a worker once its request has
 *	  begun).
 *
 * Ownership: the acceptor owns the connections whose request has not begun
 * yet, and those whose request has but found ready[] full (`held' of them); ready[]
 * holds those waiting for a worker; a worker owns the one it took.  `lock'
 * guards ready[], held, acceptor_stopped, stop_deadline_ms and watches[];
 * the rest is set before the threads start, or atomic.
 */
#ifndef PAYNOTIFY_CGI_FCGI_H
#define PAYNOTIFY_CGI_FCGI_H

#include <pthread.h>
#include <stdatomic.h>

#include "cgi.h"

/*
 * The request a worker is reading.  Past the deadline the acceptor shuts
 * reading down on fd, a duplicate of the connection that the worker keeps
 * open until it has ended the watch, so the number cannot be reused by
 * another connection in between.
 */
typedef struct pn_watch
{
	int			fd;				/* -1: the worker is not reading a request */
	long long	deadline_ms;	/* monotonic */
	bool		cut;			/* reading was shut down at the deadline */
} pn_watch;

typedef struct pn_server
{
	const pn_config *cfg;
	int			listen_fd;		/* non-blocking; never shut down or closed here */
	const char *web_server_addrs;	/* FCGI_WEB_SERVER_ADDRS, or NULL */
	int			bell[2];		/* a byte written to [1] wakes the acceptor */
	pthread_mutex_t lock;
	pthread_cond_t ready_cv;	/* ready[] has a connection, or stopping */
	int		   *ready;			/* ring of cfg->max_pending descriptors */
	int			ready_first;
	int			ready_count;
	int			held;			/* sent something, not in ready[] yet */
	bool		acceptor_stopped;	/* accepts no more, silent ones closed */
	long long	stop_deadline_ms;	/* once stopped: no request is waited
									 * for past it (0: not stopped) */
	pn_watch   *watches;		/* watches[i]: worker i + 1 */
	int			nworkers;
	atomic_bool stopping;		/* accept no more; workers empty ready[], and
								 * return once held is 0 and the acceptor
								 * has stopped */
	atomic_bool workers_done;	/* every worker has returned */
	atomic_bool failed;			/* an error the server cannot survive */
} pn_server;

/* cgi_accept.c: the acceptor, and what workers and acceptor both call */
extern void *pn_accept_main(void *arg);
extern void pn_server_ring(pn_server *srv);
extern void pn_server_fail(pn_server *srv);
extern int	pn_ready_take(pn_server *srv);
extern int	pn_watch_begin(pn_server *srv, int slot, int fd);
extern void pn_watch_end(pn_server *srv, int slot);
extern long long pn_io_left(pn_server *srv);

#endif							/* PAYNOTIFY_CGI_FCGI_H */
