/*
 * pn_clock.c
 *	  The monotonic clock (not the time of day), for timeouts, back-offs
 *	  and measured durations.
 */
#include "pn_common.h"

#include <time.h>

/* Milliseconds on the monotonic clock (not the time of day). */
long long
pn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Seconds on the monotonic clock, to the nanosecond. */
double
pn_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}
