/*
 * send_gen.c
 *		Signing threads for paynotify-send.  RSA signing is the expensive
 *		part of making a notification, so requests 0..total-1 of a run are
 *		built by several threads into a bounded ring, and the sending thread
 *		takes them in order.  When the whole run fits into the ring, every
 *		request is signed before the clock starts; otherwise signing keeps
 *		pace with sending.
 *
 *		Request k is a pure function of k, the plan and the configuration
 *		(see pn_build), so which thread builds it does not change a byte.
 *		Locking: one mutex guards the ring and its counters; building
 *		happens outside it, with a pn_signer owned by each thread.
 */
#include "send.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct pn_gen
{
	const struct pn_conf *conf;
	struct pn_plan plan;
	size_t		total;
	size_t		cap;
	struct pn_req **ring;
	size_t		next_build;		/* next request to hand to a thread */
	size_t		consumed;		/* requests taken by the sender */
	size_t		built;
	bool		abort;
	pthread_mutex_t mu;
	pthread_cond_t space;		/* a slot was freed */
	pthread_cond_t ready;		/* a request was built */
	int			nthreads;
	pthread_t  *th;
	struct pn_signer *resigner; /* the sending thread's, made when needed */
	double		resign_after;	/* seconds; see pn_gen_take */
};

static void *worker(void *arg);

/* What request k is: order, delivery number, bad kind, notification slot. */
static void
plan_job(const struct pn_plan *p, size_t k, long long *index, uint32_t *attempt,
		 int *bad, uint32_t *slot)
{
	*attempt = 0;
	*bad = PN_BAD_NONE;
	*slot = (uint32_t) k;
	*index = p->start + (long long) k;
	if (p->storm)
	{
		*index = p->start;
		*attempt = (uint32_t) k;
		*slot = 0;
	}
	else if (p->n_kinds > 0)
	{
		*bad = p->kinds[k / p->per_kind];
		*index = p->start + (long long) (k % p->per_kind);
	}
}

static void *
worker(void *arg)
{
	struct pn_gen *g = arg;
	struct pn_signer *s = pn_signer_new(g->conf);

	for (;;)
	{
		size_t		k;
		long long	index;
		uint32_t	attempt,
					slot;
		int			bad;
		struct pn_req *r;

		pthread_mutex_lock(&g->mu);
		while (!g->abort && g->next_build < g->total && g->next_build >= g->consumed + g->cap)
			pthread_cond_wait(&g->space, &g->mu);
		if (g->abort || g->next_build >= g->total)
		{
			pthread_mutex_unlock(&g->mu);
			break;
		}
		k = g->next_build++;
		pthread_mutex_unlock(&g->mu);

		plan_job(&g->plan, k, &index, &attempt, &bad, &slot);
		r = pn_build(g->conf, s, index, attempt, bad);
		r->slot = slot;
		r->t_built = pn_mono_now();

		pthread_mutex_lock(&g->mu);
		g->ring[k % g->cap] = r;
		g->built++;
		pthread_cond_broadcast(&g->ready);
		pthread_mutex_unlock(&g->mu);
	}
	pn_signer_free(s);
	return NULL;
}

/* Starts `threads` signing threads for `total` requests, `cap` ahead. */
struct pn_gen *
pn_gen_start(const struct pn_conf *c, const struct pn_plan *p, size_t total,
			 size_t cap, int threads, double resign_after)
{
	struct pn_gen *g = pn_xcalloc(1, sizeof(*g));

	g->resign_after = resign_after;
	g->conf = c;
	g->plan = *p;
	g->total = total;
	g->cap = total < cap ? total : cap;
	if (g->cap == 0)
		g->cap = 1;
	g->ring = pn_xcalloc(g->cap, sizeof(struct pn_req *));
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->space, NULL);
	pthread_cond_init(&g->ready, NULL);
	g->nthreads = (size_t) threads > total ? (int) (total ? total : 1) : threads;
	g->th = pn_xcalloc((size_t) g->nthreads, sizeof(pthread_t));
	for (int i = 0; i < g->nthreads; i++)
	{
		if (pthread_create(&g->th[i], NULL, worker, g) != 0)
		{
			pn_log("cannot start a signing thread");
			exit(1);
		}
	}
	return g;
}

/*
 * Takes the next request in order.  Returns NULL when all were taken
 * (*more = false) or, with block = false, when it is not built yet.  A
 * request taken more than resign_after seconds after it was signed is
 * signed again here (the gateways' signatures carry their time, and a
 * receiver refuses one older than 5 minutes: a long run on a slow machine
 * must not turn into stale signatures).  Called by the sending thread only.
 */
struct pn_req *
pn_gen_take(struct pn_gen *g, bool block, bool *more)
{
	struct pn_req *r = NULL;
	size_t		k;

	pthread_mutex_lock(&g->mu);
	*more = g->consumed < g->total;
	if (*more)
	{
		size_t		at = g->consumed % g->cap;

		while (block && !g->ring[at])
			pthread_cond_wait(&g->ready, &g->mu);
		if ((r = g->ring[at]) != NULL)
		{
			g->ring[at] = NULL;
			g->consumed++;
			pthread_cond_signal(&g->space);
		}
	}
	k = g->consumed - 1;
	pthread_mutex_unlock(&g->mu);
	if (r != NULL && !r->shared && g->conf->now_fixed == 0 &&
		pn_mono_now() - r->t_built > g->resign_after)
	{
		long long	index;
		uint32_t	attempt,
					slot;
		int			bad;
		struct pn_req *fresh;

		if (g->resigner == NULL)
			g->resigner = pn_signer_new(g->conf);
		plan_job(&g->plan, k, &index, &attempt, &bad, &slot);
		fresh = pn_build(g->conf, g->resigner, index, attempt, bad);
		fresh->slot = slot;
		fresh->t_built = pn_mono_now();
		pn_req_free(r);
		r = fresh;
	}
	return r;
}

/*
 * Waits until the ring is full (or everything is built), printing progress
 * to stderr every 2 s unless quiet; returns early once *stop is set.
 */
void
pn_gen_prefill(struct pn_gen *g, bool quiet, volatile int *stop)
{
	size_t		want = g->total < g->cap ? g->total : g->cap;
	double		t0 = pn_mono_now(),
				next = t0 + 2.0;

	pthread_mutex_lock(&g->mu);
	while (g->built < want && !*stop)
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L)
		{
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->ready, &g->mu, &ts);
		if (!quiet && pn_mono_now() >= next)
		{
			fprintf(stderr, "[%7.1f s] signing %zu/%zu\n", pn_mono_now() - t0, g->built, want);
			next += 2.0;
		}
	}
	pthread_mutex_unlock(&g->mu);
}

/* Stops the threads and frees every request not taken. */
void
pn_gen_stop(struct pn_gen *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->abort = true;
	pthread_cond_broadcast(&g->space);
	pthread_mutex_unlock(&g->mu);
	for (int i = 0; i < g->nthreads; i++)
		pthread_join(g->th[i], NULL);
	for (size_t i = 0; i < g->cap; i++)
		pn_req_free(g->ring[i]);
	pn_signer_free(g->resigner);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->space);
	pthread_cond_destroy(&g->ready);
	free(g->ring);
	free(g->th);
	free(g);
}
