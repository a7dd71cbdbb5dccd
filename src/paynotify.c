/*-------------------------------------------------------------------------
 *
 * paynotify.c
 *	  Module magic, _PG_init and every paynotify.* setting.
 *
 * paynotify needs no shared_preload_libraries: the library loads on the
 * first call of any of its functions, and each subsystem initialises its
 * per-backend caches from here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "paynotify.h"
#include "history.h"

PG_MODULE_MAGIC;

double		paynotify_now = 0;
int			paynotify_lock_timeout = 3000;
int			paynotify_max_body = 1024 * 1024;
int			paynotify_notify = PN_NOTIFY_COALESCED;
int			paynotify_notify_interval = 1000;
char	   *paynotify_secrets_directory = NULL;
static bool paynotify_allow_shared_accounts = false;	/* read by SQL */

void		_PG_init(void);

/* the boolean spellings stay accepted, as for the former boolean setting */
static const struct config_enum_entry notify_options[] = {
	{"coalesced", PN_NOTIFY_COALESCED, false},
	{"on", PN_NOTIFY_ON, false},
	{"off", PN_NOTIFY_OFF, false},
	{"true", PN_NOTIFY_ON, true},
	{"false", PN_NOTIFY_OFF, true},
	{"yes", PN_NOTIFY_ON, true},
	{"no", PN_NOTIFY_OFF, true},
	{"1", PN_NOTIFY_ON, true},
	{"0", PN_NOTIFY_OFF, true},
	{NULL, 0, false}
};

/* Define the settings, then let each subsystem register its callbacks. */
void
_PG_init(void)
{
	DefineCustomRealVariable("paynotify.now",
							 "Unix time paynotify uses as \"now\"; 0 means the real clock.",
							 "Lets tests replay signed notifications at the moment they were signed.",
							 &paynotify_now,
							 0, 0, 253402300799.0,	/* up to 9999-12-31 */
							 PGC_SUSET, GUC_UNIT_S | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("paynotify.lock_timeout",
							"How long a delivery waits for another delivery of the same notification.",
							"On timeout the reply is \"busy\" and asks the gateway to retry; 0 means do not wait.",
							&paynotify_lock_timeout,
							3000, 0, 60 * 1000,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("paynotify.max_body_size",
							"Largest notification body paynotify_handle accepts.",
							NULL,
							&paynotify_max_body,
							1024 * 1024, 1024, 64 * 1024 * 1024,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("paynotify.notify",
							 "How a committing transaction that applied events wakes workers: coalesced, on or off.",
							 "on: NOTIFY paynotify with each event's payload; every such transaction "
							 "takes the server-wide notification queue lock through its commit, so "
							 "concurrent commits stop sharing WAL flushes.  coalesced: a payload-free "
							 "wake-up NOTIFY at most once per backend per paynotify.notify_interval, "
							 "so few transactions take the lock.  off: none; workers poll "
							 "paynotify_outbox.",
							 &paynotify_notify,
							 PN_NOTIFY_COALESCED,
							 notify_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("paynotify.notify_interval",
							"With paynotify.notify = coalesced, the least time between two wake-ups one backend sends.",
							NULL,
							&paynotify_notify_interval,
							1000, 1, 60 * 60 * 1000,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("paynotify.secrets_directory",
							   "Directory the *_file configuration functions read secrets from.",
							   "An absolute path; each database reads from the directory named after it "
							   "inside it, plain file names only. Empty: reading secrets from files is off.",
							   &paynotify_secrets_directory,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);
	DefineCustomBoolVariable("paynotify.allow_shared_accounts",
							 "Let two channels share one gateway account.",
							 "Only for replaying one set of signed test notifications on several "
							 "channels: with it on, a notification captured on one channel can be "
							 "replayed to the other and take effect twice.",
							 &paynotify_allow_shared_accounts,
							 false,
							 PGC_SUSET, GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	pn_history_init();			/* defines paynotify.delivery_history */
	MarkGUCPrefixReserved("paynotify");

	pn_crypto_init();
	pn_config_init();
	pn_security_init();
	pn_state_init();
}
