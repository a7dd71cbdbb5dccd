/*
 * reconcile_stop.c
 *	  The stop flag that SIGTERM and SIGINT set and the nap that it cuts
 *	  short, which every part of paynotify-reconcile reads: the loop
 *	  (paynotify-reconcile.c) and the database rounds (reconcile_db.c),
 *	  which stop starting work once it is set.  (The clock is
 *	  shim/common's.)
 */
#include "reconcile.h"

#include <time.h>

volatile sig_atomic_t stop_requested;

/* The stop signals' handler: only sets the flag (async-signal-safe). */
void
on_stop_signal(int sig)
{
	(void) sig;
	stop_requested = 1;
}

/* Sleeps until when_ms (monotonic), returning early on a signal. */
void
nap_until(long long when_ms)
{
	long long	ms = when_ms - pn_now_ms();
	struct timespec ts;

	if (ms <= 0 || stop_requested)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000;
	nanosleep(&ts, NULL);
}
