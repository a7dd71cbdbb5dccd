/*-------------------------------------------------------------------------
 *
 * subxact.c
 *	  The one place that runs a piece of work in an internal subtransaction
 *	  and catches its error (the pattern of PL/pgSQL's exception blocks).
 *
 * Used where an error must be answered rather than abort the caller's
 * transaction: the business step (a failure is recorded and retried) and
 * the bounded lock wait (a timeout is answered "busy").
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "paynotify.h"

/*
 * Run fn(arg) in an internal subtransaction.  On success the subtransaction
 * is released (its effects and locks join the caller's transaction) and NULL
 * is returned.  On error it is rolled back and the error is returned, copied
 * into the caller's memory context.  Cancellation, termination and shutdown
 * are re-thrown, never returned.
 */
ErrorData *
pn_subxact_run(void (*fn) (void *arg), void *arg)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_CRASH_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_IN_FAILED_SQL_TRANSACTION)
			ReThrowError(edata);
	}
	PG_END_TRY();
	return edata;
}
