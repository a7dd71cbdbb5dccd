/*
 * pn_signal.c
 *	  The stop signals of the shim's long-running programs.
 */
#include "pn_common.h"

#include <signal.h>
#include <string.h>

/*
 * SIGTERM and SIGINT call handler (without SA_RESTART, so that a blocking
 * call returns EINTR and the program sees the request); SIGPIPE is ignored
 * (a peer that hangs up is an error return, not the end of the program).
 */
void
pn_on_stop_signals(void (*handler) (int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}
