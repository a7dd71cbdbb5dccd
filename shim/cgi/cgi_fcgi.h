/*
 * cgi_fcgi.h
 *	  What the two halves of FastCGI mode share: cgi_fcgi.c (the process and
 *	  its worker threads) and cgi_accept.c (the acceptor thread, which alone
 *	  accepts connections, reads each one's request, and hands it to a
 *	  worker once it has arrived whole).
 *
 * Ownership: the acceptor owns the connections whose request has not
 * arrived whole yet, and those whose request has but found ready[] full
 * or, large, no large slot free (`held' of them); ready[] holds those
 * waiting for a worker; a worker owns the one it took, with the bytes read
 * so far.  `lock' guards ready[], held, large_busy, acceptor_stopped,
 * stop_deadline_ms and watches[]; the rest is set before the threads
 * start, or atomic.
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

/*
 * A connection handed from the acceptor to a worker, with what the
 * acceptor read of it: buf (PN_FCGI_START_MAX bytes, malloc'd, the
 * worker's to free; NULL when nothing was read) holds the request's first
 * len bytes; the socket holds the rest, if any.
 */
typedef struct pn_conn
{
	int			fd;				/* -1: none (pn_ready_take: no more) */
	unsigned char *buf;
	size_t		len;
	bool		large;			/* buf filled up before the request was whole:
								 * it holds a large slot (pn_large_done) */
	bool		whole;			/* buf holds the whole request, to the empty
								 * STDIN record: nothing more is due */
} pn_conn;

typedef struct pn_server
{
	const pn_config *cfg;
	int			listen_fd;		/* non-blocking; never shut down or closed here */
	const char *web_server_addrs;	/* FCGI_WEB_SERVER_ADDRS, or NULL */
	int			bell[2];		/* a byte written to [1] wakes the acceptor */
	pthread_mutex_t lock;
	pthread_cond_t ready_cv;	/* ready[] has a connection, or stopping */
	pn_conn    *ready;			/* ring of cfg->max_pending connections */
	int			ready_first;
	int			ready_count;
	int			held;			/* for the workers, not in ready[] yet */
	int			large_busy;		/* large ones in ready[] or being served */
	bool		room_wanted;	/* the acceptor left the listening socket out
								 * for want of room: a take rings the bell */
	bool		acceptor_stopped;	/* accepts no more, those whose request
									 * has not begun closed */
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
extern pn_conn pn_ready_take(pn_server *srv);
extern void pn_large_done(pn_server *srv);
extern int	pn_watch_begin(pn_server *srv, int slot, int fd);
extern void pn_watch_end(pn_server *srv, int slot);
extern long long pn_io_left(pn_server *srv);

#endif							/* PAYNOTIFY_CGI_FCGI_H */
