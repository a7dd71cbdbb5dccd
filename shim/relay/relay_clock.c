/*
 * relay_clock.c
 *	  The two things every part of paynotify-relay reads: the monotonic
 *	  clock and the stop flag that SIGTERM and SIGINT set.  Below the loop
 *	  (paynotify-relay.c), the database calls (relay_db.c) and the requests
 *	  (relay_http.c), which all stop starting work once it is set.
 */
#include "relay.h"

#include <time.h>

volatile sig_atomic_t stop_requested;

/* The stop signals' handler: only sets the flag (async-signal-safe). */
void
on_stop_signal(int sig)
{
	(void) sig;
	stop_requested = 1;
}

/* Milliseconds on the monotonic clock. */
long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
