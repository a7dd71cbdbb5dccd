/*
 * reconcile_pace.c
 *	  The pace of each channel: at most --rate requests a second, and a
 *	  back-off after a gateway's trouble (no response, 5xx, 429), doubling
 *	  from one second up to --backoff-max, or as long as its Retry-After
 *	  asks (within the same cap).  Kept for the life of the process: the
 *	  database's own next_query_at back-off applies besides.
 */
#include "reconcile.h"

#include <stdlib.h>
#include <string.h>

typedef struct channel_pace
{
	char	   *name;
	long long	ready_at_ms;	/* no request starts before */
	long long	backoff_ms;		/* 0: none */
} channel_pace;

static channel_pace *paces;
static int	n_paces;

/* The pace of channel, made when first seen; NULL when out of memory. */
static channel_pace *
find(const char *channel)
{
	channel_pace *grown;

	for (int i = 0; i < n_paces; i++)
		if (strcmp(paces[i].name, channel) == 0)
			return &paces[i];
	grown = realloc(paces, sizeof(channel_pace) * (n_paces + 1));
	if (grown == NULL)
		return NULL;
	paces = grown;
	paces[n_paces].name = strdup(channel);
	if (paces[n_paces].name == NULL)
		return NULL;
	paces[n_paces].ready_at_ms = 0;
	paces[n_paces].backoff_ms = 0;
	return &paces[n_paces++];
}

/* When the next request of channel may start (monotonic ms). */
long long
pace_ready_at(const char *channel)
{
	channel_pace *p = find(channel);

	return p != NULL ? p->ready_at_ms : 0;
}

/*
 * A request of channel that started at started_ms is done: the next starts
 * no sooner than 1/rate s after it, and, after trouble, not before the
 * back-off has passed from now.
 */
void
pace_result(const char *channel, long long started_ms, bool trouble, long long retry_after_ms)
{
	channel_pace *p = find(channel);
	long long	wait;

	if (p == NULL)
		return;
	p->ready_at_ms = started_ms + (1000 + cfg.rate - 1) / cfg.rate;
	if (!trouble)
	{
		p->backoff_ms = 0;
		return;
	}
	p->backoff_ms = p->backoff_ms == 0 ? BACKOFF_MIN_MS : p->backoff_ms * 2;
	if (p->backoff_ms > cfg.backoff_max_ms)
		p->backoff_ms = cfg.backoff_max_ms;
	wait = retry_after_ms > p->backoff_ms ? retry_after_ms : p->backoff_ms;
	if (wait > cfg.backoff_max_ms)
		wait = cfg.backoff_max_ms;
	if (pn_now_ms() + wait > p->ready_at_ms)
		p->ready_at_ms = pn_now_ms() + wait;
}
