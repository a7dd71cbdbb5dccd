/*
 * relay_stop.c
 *	  The stop flag that SIGTERM and SIGINT set, which every part of
 *	  paynotify-relay reads: below the loop (paynotify-relay.c), the
 *	  database calls (relay_db.c) and the requests (relay_http.c), which all
 *	  stop starting work once it is set.  (The clock is shim/common's.)
 */
#include "relay.h"

volatile sig_atomic_t stop_requested;

/* The stop signals' handler: only sets the flag (async-signal-safe). */
void
on_stop_signal(int sig)
{
	(void) sig;
	stop_requested = 1;
}
