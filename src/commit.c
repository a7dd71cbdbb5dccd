/*-------------------------------------------------------------------------
 *
 * commit.c
 *	  The commit a delivery needs: synchronous (forced, or relaxed for a
 *	  repeat that wrote only its counter), on one server and, on Citus, on
 *	  the node that holds the order's shard; and the isolation level every
 *	  entry point requires.
 *
 * paynotify_handle, paynotify_retry and paynotify_transit call these; the
 * transaction callback here makes the commit keep what they set, whatever
 * the caller does after them in the same transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "paynotify.h"
#include "pipeline.h"

static void set_shard_level(PnConfig *cfg, const char *channel, const char *notify_id,
							const char *order_no, bool keep);
static void shard_commit_level_again(void);
static void relax_xact_callback(XactEvent event, void *arg);
static void register_xact_callback(void);

/*
 * A repeat relaxed this transaction's synchronous_commit (relaxed_from: the
 * caller's level), and relaxed_upto is where this transaction's WAL ended
 * when the last paynotify_handle call since then ended: what is written
 * after it is someone else's (see pn_relax_synchronous_commit).
 */
static bool relaxed = false;
static bool forced = false;		/* pn_force_synchronous_commit ran in this transaction */

/*
 * A log row whose shard pn_shard_commit_level set the commit level on, kept in
 * TopTransactionContext until the transaction ends (shard_levels), to set it
 * again at commit (shard_commit_level_again).
 */
typedef struct ShardLevel
{
	PnConfig   *cfg;			/* valid until the transaction ends */
	Oid			userid;			/* who ran it (paynotify_handle's owner) */
	char	   *channel;
	char	   *notify_id;
	char	   *order_no;
} ShardLevel;
static List *shard_levels = NIL;
static int	relaxed_from;
static XLogRecPtr relaxed_upto = InvalidXLogRecPtr;

static const char *const commit_level[] = {
	[SYNCHRONOUS_COMMIT_OFF] = "off",
	[SYNCHRONOUS_COMMIT_LOCAL_FLUSH] = "local",
	[SYNCHRONOUS_COMMIT_REMOTE_WRITE] = "remote_write",
	[SYNCHRONOUS_COMMIT_REMOTE_FLUSH] = "on",
	[SYNCHRONOUS_COMMIT_REMOTE_APPLY] = "remote_apply",
};


/*
 * paynotify needs READ COMMITTED: after waiting for the lock, a second
 * delivery's next statement must see what the first one committed.  Under
 * REPEATABLE READ or SERIALIZABLE the transaction's snapshot predates that
 * commit, and concurrent deliveries would end in serialization failures and
 * duplicate-key errors instead of a "duplicate" reply.  Refuse them with one
 * clear error (SQLSTATE 25PN1) before anything is read or written.
 */
void
pn_require_read_committed(const char *function)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_PN_ISOLATION),
				 errmsg("paynotify: %s needs READ COMMITTED, not %s", function,
						IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errdetail("A second delivery of a notification must see what the first one committed while it waited for the lock."),
				 errhint("Call it in a READ COMMITTED transaction: ALTER ROLE <role> SET default_transaction_isolation = 'read committed' for the role that calls it, or BEGIN ISOLATION LEVEL READ COMMITTED.")));
}

/*
 * paynotify's transactions commit synchronously whatever the server default:
 * an acknowledged notification must survive a crash, and a failover to a
 * synchronous standby ('local' does not wait for it; without synchronous
 * standbys it means 'on').  SET LOCAL semantics: it holds until this
 * transaction ends, and the commit raises it again when the caller lowered
 * it after the call (relax_xact_callback).
 */
void
pn_force_synchronous_commit(void)
{
	register_xact_callback();
	forced = true;
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_WRITE)
		(void) set_config_option("synchronous_commit",
								 relaxed && relaxed_from > SYNCHRONOUS_COMMIT_REMOTE_FLUSH &&
								 relaxed_from <= SYNCHRONOUS_COMMIT_REMOTE_APPLY
								 ? commit_level[relaxed_from] : "on",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
}

/*
 * A repeat of a settled notification writes only its delivery counter, which
 * no acknowledgement depends on: when paynotify owns the transaction (no
 * explicit transaction block around the call) and nothing has been written
 * in it yet (no transaction id: not by an earlier paynotify_handle call in
 * the same statement, nor by anything else), it need not wait for the WAL
 * flush.  This keeps storms of duplicates from queueing behind fsyncs on the
 * log row.  A later call in the same transaction that writes more than a
 * counter sets synchronous_commit back (pn_force_synchronous_commit).  So does
 * the commit when anything else wrote in the transaction after the repeat:
 * without a transaction block, the statements of one pipeline (extended
 * protocol, one Sync) are still one transaction, and the caller's own
 * writes after the repeat commit as the caller asked (relax_xact_callback).
 *
 * Never with synchronous standbys: the first delivery's commit may be on
 * this primary alone (its wait for the standby cancelled, or its connection
 * terminated while waiting), and the repeat's commit, which follows it in
 * the WAL, waiting for the standby is what makes acknowledging the repeat
 * safe across a failover.  So the repeat is then made synchronous as any
 * other call: a caller's 'off' or 'local' would not wait for the standby.
 *
 * Never where Citus is loaded either: a transaction that wrote on two nodes
 * (the repeat's counter on the order's node, the caller's row on another)
 * records its commit decision on this node (pg_dist_transaction) in Citus's
 * own pre-commit callback, which runs after relax_xact_callback and writes
 * nothing it can see; that record must be flushed before the prepared
 * transactions are committed on the nodes, or a crash in between loses it
 * and Citus's recovery rolls back what is committed on another node.  And
 * the repeat's commit is made on the order's node, whose synchronous
 * standbys this node cannot see: the repeat is made synchronous there as
 * with standbys here (a caller's 'off' or 'local' raised to 'on', set on
 * that node by pn_shard_commit_level).
 */
void
pn_relax_synchronous_commit(void)
{
	if ((SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0') ||
		GetConfigOption("citus.shard_count", true, false) != NULL)
	{
		pn_force_synchronous_commit();
		return;
	}
	if (!IsTransactionBlock() && GetTopTransactionIdIfAny() == InvalidTransactionId &&
		synchronous_commit != SYNCHRONOUS_COMMIT_OFF)
	{
		register_xact_callback();
		relaxed_from = synchronous_commit;
		(void) set_config_option("synchronous_commit", "off",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		relaxed = true;
		relaxed_upto = XactLastRecEnd;
	}
}

/*
 * On Citus the notification's writes are on the node that holds its order's
 * shard.  When that is another node, and they are all there (no two-phase
 * commit, whose PREPARE and COMMIT PREPARED are always flushed), that node
 * commits them with the synchronous_commit of its own session (Citus's
 * connection: that server's, database's or role's default), not with this
 * transaction's: a first delivery acknowledged here was committed
 * asynchronously there where that default is 'off' (test/e2e/citus_commit.sh).
 * So the level this transaction commits with (pn_force_synchronous_commit) is
 * set in the transaction there too, by a query routed to the log row's
 * shard, after the call's last write.  Nothing when the level is 'off' (a
 * repeat the caller commits so): that node's own default stays.
 *
 * A known id signed with another order (payload_differs_for_same_id)
 * counts the delivery on the first order's log row and records the anomaly
 * under its own order, where no log row of it is: the level is set through
 * the first order's row too (other_order: the order of the log row a
 * call counted the delivery on, when it is not its notice's).  Where the two shards are on
 * one node, that node committed the acknowledged "ignored" with its own
 * default (test/e2e/citus_commit.sh); on two nodes it is a two-phase commit.
 */
void
pn_shard_commit_level(PnConfig *cfg, const char *channel, const char *notify_id,
					  const char *order_no, const char *other_order)
{
	if (synchronous_commit == SYNCHRONOUS_COMMIT_OFF || !pn_config_distributed(cfg))
		return;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	set_shard_level(cfg, channel, notify_id, order_no, true);
	if (other_order != NULL)
		set_shard_level(cfg, channel, notify_id, other_order, true);
	SPI_finish();
}

/*
 * The query of shard_commit_level for one log row (SPI connected), with
 * this transaction's level now; when keep, the row kept for
 * shard_commit_level_again.
 */
static void
set_shard_level(PnConfig *cfg, const char *channel, const char *notify_id, const char *order_no,
				bool keep)
{
	Datum		args[4];

	args[0] = CStringGetTextDatum(channel);
	args[1] = CStringGetTextDatum(notify_id);
	args[2] = CStringGetTextDatum(order_no);
	args[3] = CStringGetTextDatum(GetConfigOption("synchronous_commit", false, false));
	if (SPI_execute_plan(pn_plan(cfg, PLAN_SHARD_COMMIT_LEVEL), args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: commit level query failed");
	if (keep)
		pn_shard_commit_level_kept(cfg, channel, notify_id, order_no);
}

/*
 * Keep a log row for shard_commit_level_again, without a query now: a
 * delegated step (paynotify_step_at) set the level in its own transaction
 * on the order's node, passed to it.
 */
void
pn_shard_commit_level_kept(PnConfig *cfg, const char *channel, const char *notify_id,
						   const char *order_no)
{
	MemoryContext old;
	ShardLevel *sl;

	register_xact_callback();
	/* the same row as the last one kept (a batch's repeats): once */
	if (shard_levels != NIL)
	{
		sl = (ShardLevel *) llast(shard_levels);
		if (sl->cfg == cfg && sl->userid == GetUserId() && strcmp(sl->channel, channel) == 0 &&
			strcmp(sl->notify_id, notify_id) == 0 && strcmp(sl->order_no, order_no) == 0)
			return;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	sl = palloc(sizeof(ShardLevel));
	sl->cfg = cfg;
	sl->userid = GetUserId();
	sl->channel = pstrdup(channel);
	sl->notify_id = pstrdup(notify_id);
	sl->order_no = pstrdup(order_no);
	shard_levels = lappend(shard_levels, sl);
	MemoryContextSwitchTo(old);
}

/*
 * On Citus, what an entry sends to the shards' nodes carries the notice
 * and its payload (for WeChat Pay the decrypted resource) as literals: the
 * delegated call's text, the routed statements' shard queries.  Citus
 * shows them to the session as messages where it asks for them
 * (citus.log_remote_commands and citus.log_local_commands, NOTICE;
 * client_min_messages down to DEBUG4, its rebuilt queries): the shim's
 * role would read what it has no key to decrypt.  So for a session user
 * who is not a superuser (who may read all of it anyway) both are off and
 * client_min_messages no lower than NOTICE while the entry runs; its SET
 * clause's setting level restores the session's at its end.  Always in
 * paynotify_step_at (always): on the order's node it runs as the role
 * Citus connected as, paynotify's owner, with the settings a caller's SET
 * LOCAL may have sent there (citus.propagate_set_commands = local), and
 * Citus passes that node's notices back to the caller.  The server's
 * log, a superuser's to read, still gets what the settings send there.
 */
void
pn_quiet_citus(bool always)
{
	static const char *const logs[] = {"citus.log_remote_commands", "citus.log_local_commands"};

	if (GetConfigOption("citus.shard_count", true, false) == NULL ||
		(!always && superuser_arg(GetSessionUserId())))
		return;
	for (size_t i = 0; i < lengthof(logs); i++)
	{
		const char *v = GetConfigOption(logs[i], true, false);

		if (v != NULL && strcmp(v, "off") != 0)
			(void) set_config_option(logs[i], "off", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
	}
	if (client_min_messages < NOTICE)
		(void) set_config_option("client_min_messages", "notice", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * At commit, after pn_shard_commit_level ran in this transaction: where Citus
 * sends the SET LOCAL commands of a transaction to the nodes in it
 * (citus.propagate_set_commands = local), a caller's SET LOCAL
 * synchronous_commit = off after the call lowered it on the order's node
 * too, and that node committed the notification asynchronously
 * (test/e2e/citus_commit.sh: in a transaction block, a DO block, a
 * procedure that commits).
 * The level this transaction commits with is then set there again by the
 * same queries, after the caller's last statement, as the user that ran
 * them in the call (paynotify_handle's owner).  Nothing is sent where
 * Citus does not propagate SET LOCAL.  The configuration generations are
 * freed at the transaction's end, after this.
 */
static void
shard_commit_level_again(void)
{
	const char *propagate = GetConfigOption("citus.propagate_set_commands", true, false);
	ListCell   *lc;
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;

	if (propagate == NULL || pg_strcasecmp(propagate, "local") != 0)
		return;
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	/*
	 * No function's SET clause holds here: the caller's search_path is in
	 * effect, and the plan would be made again under it (a caller's
	 * "public, pg_catalog" puts a planted operator before pg_catalog's).
	 * Pin it, as the function did.
	 */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/* its statements name the notification and its order: as in the call */
	pn_quiet_citus(false);
	/* no statement is running: the queries need a snapshot of their own */
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	foreach(lc, shard_levels)
	{
		ShardLevel *sl = (ShardLevel *) lfirst(lc);

		/* as the call ran it (an error's abort restores the user) */
		SetUserIdAndSecContext(sl->userid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		set_shard_level(sl->cfg, sl->channel, sl->notify_id, sl->order_no, false);
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	SPI_finish();
	PopActiveSnapshot();
	AtEOXact_GUC(false, nestlevel);
}

/*
 * A paynotify_handle call ended: when nothing but paynotify_handle calls
 * has written since the repeat relaxed the commit, what they wrote is
 * covered by the relaxation.
 */
void
pn_relaxed_call_ended(XLogRecPtr call_start)
{
	if (relaxed && call_start <= relaxed_upto)
		relaxed_upto = XactLastRecEnd;
}

static void
register_xact_callback(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(relax_xact_callback, NULL);
		registered = true;
	}
}

/*
 * At commit: synchronous again when a call made it so and the caller
 * lowered it afterwards in the same transaction (SET LOCAL
 * synchronous_commit = off after a first delivery: that delivery is
 * acknowledged when this commit returns); else the caller's
 * synchronous_commit back when something was written after the last
 * paynotify_handle call the relaxation covers.
 */
static void
relax_xact_callback(XactEvent event, void *arg)
{
	if (!relaxed && !forced && shard_levels == NIL)
		return;
	if (event == XACT_EVENT_PRE_COMMIT)
	{
		if (forced)
		{
			pn_force_synchronous_commit();
			if (shard_levels != NIL)
				shard_commit_level_again();
		}
		else if (XactLastRecEnd != relaxed_upto && synchronous_commit == SYNCHRONOUS_COMMIT_OFF &&
			relaxed_from > SYNCHRONOUS_COMMIT_OFF && relaxed_from <= SYNCHRONOUS_COMMIT_REMOTE_APPLY)
			(void) set_config_option("synchronous_commit", commit_level[relaxed_from],
									 PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_LOCAL, true, 0, false);
		return;
	}
	relaxed = false;
	forced = false;
	shard_levels = NIL;			/* freed with TopTransactionContext */
	relaxed_upto = InvalidXLogRecPtr;
}
