/*
 * pn_clock.c
 *	  The monotonic clock, in milliseconds, for timeouts and back-offs.
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
