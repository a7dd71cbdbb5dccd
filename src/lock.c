/*-------------------------------------------------------------------------
 *
 * lock.c
 *	  Layer 2: a transaction-scoped advisory lock per (channel, notify_id).
 *
 * The lock lives in the advisory lock space with its own class (field4 =
 * PAYNOTIFY_LOCK_CLASS), so it never collides with the application's
 * pg_advisory_lock keys; pg_locks shows it as locktype "advisory" with
 * objsubid 3.  The key is a 64-bit hash: two notifications whose hashes
 * collide merely take turns, the unique log row still decides.
 *
 * An uncontended lock costs one non-blocking acquire.  Only when another
 * delivery holds it do we wait, at most paynotify.lock_timeout, inside an
 * internal subtransaction so the timeout error (or a deadlock, when the
 * caller's transaction holds other notifications' locks) can be caught and
 * answered "busy" rather than aborting the caller's transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/timeout.h"

#include "paynotify.h"
#include "pipeline.h"

#define PAYNOTIFY_LOCK_CLASS 3

static bool wait_for_lock(const LOCKTAG *tag);

/*
 * Take the notification's lock until the end of the transaction: at once
 * (PN_LOCK_FREE), after another delivery released it (PN_LOCK_WAITED), or
 * not, because that one kept it longer than paynotify.lock_timeout
 * (PN_LOCK_BUSY).
 */
/*
 * The advisory lock tag of a pair of names (a channel and a notification
 * or agreement id) in a lock class: a hash of both, a collision merely
 * taking turns.
 */
static void
pair_tag(const char *channel, const char *id, uint16 lock_class, LOCKTAG *tag)
{
	uint64		h;
	size_t		clen = strlen(channel);
	size_t		ilen = strlen(id);
	char	   *key = palloc(clen + 1 + ilen);

	memcpy(key, channel, clen);
	key[clen] = '\0';
	memcpy(key + clen + 1, id, ilen);
	h = hash_bytes_extended((const unsigned char *) key, clen + 1 + ilen, 0);
	pfree(key);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h, lock_class);
}

/*
 * Set while a delegated business step runs on its order's node
 * (paynotify_step_at): its caller waited for the notification's lock on
 * its own node already, so here it is only tried; a wait here could close
 * a circle across nodes.  Other lock waits keep paynotify.lock_timeout.
 */
bool		pn_notification_lock_nowait = false;

PnLockResult
pn_lock_notification(const char *channel, const char *notify_id)
{
	LOCKTAG		tag;

	pair_tag(channel, notify_id, PAYNOTIFY_LOCK_CLASS, &tag);
	if (LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL)
		return PN_LOCK_FREE;
	if (paynotify_lock_timeout <= 0 || pn_notification_lock_nowait)
		return PN_LOCK_BUSY;
	return wait_for_lock(&tag) ? PN_LOCK_WAITED : PN_LOCK_BUSY;
}

/*
 * Take the notification's lock if nobody holds it, without waiting: true
 * when it is now held (until the end of the transaction, or until
 * pn_unlock_notification gives this acquisition back).
 */
bool
pn_try_lock_notification(const char *channel, const char *notify_id)
{
	LOCKTAG		tag;

	pair_tag(channel, notify_id, PAYNOTIFY_LOCK_CLASS, &tag);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * Give back one acquisition by pn_try_lock_notification before the end of
 * the transaction; an earlier acquisition in the same transaction (another
 * delivery of the same notification) still holds it.
 */
void
pn_unlock_notification(const char *channel, const char *notify_id)
{
	LOCKTAG		tag;

	pair_tag(channel, notify_id, PAYNOTIFY_LOCK_CLASS, &tag);
	(void) LockRelease(&tag, ExclusiveLock, false);
}

/*
 * Until the caller's GUC nest level ends, wait for any lock at most
 * paynotify.lock_timeout (lock_timeout, unless the session's is shorter):
 * the notification's lock, and in the business step the order's row that
 * the application holds (SELECT ... FOR UPDATE in a long transaction), so
 * that no delivery, and no shim worker, waits on it without end.  Both
 * callers run inside pn_subxact_run, whose subtransaction is that level:
 * its end, committed or rolled back, restores the session's lock_timeout
 * (a saved setting is restored at the end of its level either way), so
 * they open no level of their own.
 */
void
pn_bound_lock_waits(void)
{
	char		buf[32];

	if (paynotify_lock_timeout <= 0 ||
		(LockTimeout > 0 && LockTimeout <= paynotify_lock_timeout))
		return;
	snprintf(buf, sizeof(buf), "%d", paynotify_lock_timeout);
	(void) set_config_option("lock_timeout", buf, PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/* Wait for the lock, at most paynotify.lock_timeout (in wait_for_lock's subtransaction). */
static void
acquire_waiting(void *arg)
{
	pn_bound_lock_waits();
	(void) LockAcquire((const LOCKTAG *) arg, ExclusiveLock, false, false);
}

/* The timed wait, in a subtransaction so that its timeout can be caught. */
static bool
wait_for_lock(const LOCKTAG *tag)
{
	ErrorData  *edata = pn_subxact_run(acquire_waiting, (void *) tag);

	if (edata == NULL)
		return true;
	/*
	 * A deadlock is possible only when the caller's transaction holds other
	 * notifications' locks (several deliveries in one transaction): this
	 * delivery gives up its wait as after a timeout, and the transaction,
	 * with what it applied so far, stays usable.
	 */
	if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE &&
		edata->sqlerrcode != ERRCODE_T_R_DEADLOCK_DETECTED)
		ReThrowError(edata);
	FreeErrorData(edata);
	return false;
}

/*
 * The lock of an agreement (1.4), taken by the business step of each of
 * its notices before it reads the agreement: a sign and an end of one
 * agreement take turns, so an end never parks for a sign that is being
 * recorded at that moment.  On one server: its own class, a hash of the
 * channel and the agreement id (a collision merely takes turns); waited
 * for as any lock of the step, at most paynotify.lock_timeout (the step is
 * then busy).
 *
 * On Citus (paynotify_distribute() made paynotify_agreement a reference
 * table) a sign and an end may run on two nodes, and a node's own lock
 * would not make them take turns.  There the lock is LOCK TABLE
 * paynotify_agreement IN SHARE ROW EXCLUSIVE MODE, which Citus takes on
 * every node with metadata, one after the other in the nodes' order (so
 * two notices never wait for each other in a circle), held until each
 * node's part of the transaction commits: a notice that got it on every
 * node sees on every node what the one before it wrote.  It does not
 * block plain reads (a charge reads the agreement).  Citus counts the
 * connections that took it as written: a notice that writes on one node
 * commits in two phases, as every write of the reference table does.
 * The waits on other nodes do not see this session's lock_timeout: a
 * timer of paynotify.lock_timeout bounds the whole statement, and its
 * cancel is answered as a lock timeout (the step is busy).
 */
#define PAYNOTIFY_AGREEMENT_LOCK_CLASS 4

static int	agreement_timeout = -1;

static void
agreement_timeout_handler(void)
{
	kill(MyProcPid, SIGINT);
}

/* The agreements' lock on Citus (SPI connected), its wait bounded. */
static void
lock_agreements_distributed(PnConfig *cfg)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			ms = paynotify_lock_timeout;

	if (LockTimeout > 0 && LockTimeout < ms)
		ms = LockTimeout;
	if (agreement_timeout < 0)
		agreement_timeout = RegisterTimeout(USER_TIMEOUT, agreement_timeout_handler);
	if (ms > 0)
		enable_timeout_after(agreement_timeout, ms);
	PG_TRY();
	{
		if (SPI_execute_plan(pn_plan(cfg, PLAN_AGREEMENT_LOCK), NULL, NULL, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "paynotify: agreement lock failed");
		disable_timeout(agreement_timeout, true);

		/*
		 * the timer fired as the lock was granted: its cancel is for the
		 * wait that is over, never for what the step does next
		 */
		if (get_timeout_indicator(agreement_timeout, true))
			QueryCancelPending = false;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		disable_timeout(agreement_timeout, true);
		if (!get_timeout_indicator(agreement_timeout, true))
			PG_RE_THROW();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
			PG_RE_THROW();
		FlushErrorState();
		FreeErrorData(edata);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("paynotify: canceling the wait for the agreements' lock after paynotify.lock_timeout")));
	}
	PG_END_TRY();
}

void
pn_lock_agreement(PnConfig *cfg, const char *channel, const char *agreement_id)
{
	LOCKTAG		tag;

	if (pn_config_distributed(cfg))
	{
		lock_agreements_distributed(cfg);
		return;
	}
	pair_tag(channel, agreement_id, PAYNOTIFY_AGREEMENT_LOCK_CLASS, &tag);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}
