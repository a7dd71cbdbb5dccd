/*-------------------------------------------------------------------------
 *
 * pipeline.h
 *	  The pipeline after authentication: the per-backend configuration
 *	  generation (config.c) and its prepared plans (plans.c), the
 *	  notification log (log.c), the state machine (state.c), the business
 *	  step (apply.c) and its subtransaction (step.c), as handle.c runs
 *	  them.  Gateway modules never need this header.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_PIPELINE_H
#define PAYNOTIFY_PIPELINE_H

#include "access/xlogdefs.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

#include "paynotify.h"

typedef enum PnPlanId
{
	PLAN_LOG_GET,
	PLAN_LOG_ANY,
	PLAN_LOG_INSERT,
	PLAN_LOG_INSERT_QUERY,
	PLAN_LOG_SEEN,
	PLAN_LOG_RETRY,
	PLAN_PARKED_LIST,
	PLAN_PAYMENT_INSERT,
	PLAN_PAYMENT_INSERT_SUB,
	PLAN_PAYMENT_GET,
	PLAN_ORDER_TRADES,
	PLAN_REFUND_INSERT,
	PLAN_REFUND_SUM,
	PLAN_REFUND_GET,
	PLAN_REFUND_SUCCEED,
	PLAN_REFUND_FAIL,
	PLAN_REFUND_FAILED_COUNT,
	PLAN_DISPUTE_OPEN,
	PLAN_DISPUTE_CLOSE,
	PLAN_DISPUTE_CLOSE_FIRST,
	PLAN_DISPUTE_TALLY,
	PLAN_DISPUTE_FILL_AMOUNT,
	PLAN_EXPECTATION_SETTLE,
	PLAN_ORDER_REFUNDS_DOUBTFUL,
	PLAN_OUTBOX_INSERT,
	PLAN_OUTBOX_INSERT_DETAIL,
	PLAN_ORDER_SEQ_NEXT,
	PLAN_OUTBOX_INSERT_SEQ,
	PLAN_ANOMALY_INSERT,
	PLAN_ORDER_GET,
	PLAN_ORDER_MOVE,
	PLAN_ORDER_KEY_TEXT,
	PLAN_ORDER_PAY,
	PLAN_SHARD_COMMIT_LEVEL,
	PLAN_LOG_ANY_AT,
	PLAN_PAYMENT_GET_AT,
	PLAN_CROSS_SHARD,
	PLAN_PAYMENT_INSERT_AGREEMENT,
	PLAN_PARKED_AGREEMENT,
	PLAN_AGREEMENT_LOCK,
	PLAN_AGREEMENT_GET,
	PLAN_AGREEMENT_SIGN,
	PLAN_AGREEMENT_END,
	PLAN_AGREEMENT_END_UNSIGNED,
	PLAN_AGREEMENT_NOTE,
	PLAN_ORDER_MOVE_KEYED,
	PLAN_ORDER_PAY_KEYED,
	PN_NPLANS
} PnPlanId;

typedef struct PnHook
{
	char	   *event;
	char	   *handler;		/* as registered: schema.name(jsonb) */
	Oid			fn;				/* InvalidOid: the function no longer exists */
	uint32		hash;			/* of fn in the PROCOID syscache */
	Oid			role;			/* runs as this role (who registered it) */
} PnHook;

/* paynotify's state names and the orders table's values for them */
typedef struct PnStatusMap
{
	int			n;				/* 0: the table holds paynotify's names */
	char	  **names;
	char	  **values;			/* canonical text of the table's values */
} PnStatusMap;

typedef struct PnConfig
{
	MemoryContext cxt;			/* everything below lives here */
	Oid			nsp;			/* extension schema */
	char	   *schema;			/* its quoted name */
	int			nconfig_relids;
	Oid		   *config_relids;	/* tables whose change reloads this */

	int			nchannels;
	PnChannel  *channels;
	List	   *pkeys;			/* PnKey * with an EVP_PKEY to free */

	bool		bound;			/* an orders table is bound */
	char	   *binding_error;	/* why not, when a binding is broken */
	char	   *orders;			/* quoted qualified name */
	Oid			orders_oid;		/* its oid: work on it runs as its owner */
	char	   *key_col;
	char	   *key_col_name;	/* unquoted */
	char	   *key_type;		/* @kt: the key column's type when the generation was loaded */
	Oid			key_typid;		/* ... its oid, typmod and the column's collation */
	int32		key_typmod;
	Oid			key_collid;
	char	   *status_col;
	char	   *status_col_name;
	char	   *status_type;
	char	   *amount_expr;	/* "amount"::bigint or NULL::bigint */
	bool		has_amount;		/* an amount column is bound */
	PnStatusMap status_map;		/* status_values of the binding */
	char	   *currency_expr;	/* "currency"::text or NULL::text */

	int			ntransitions;
	char	  **transitions;	/* from, to pairs */

	int			nhooks;
	PnHook	   *hooks;

	/*
	 * the functions the orders table can run (paynotify_table_authors), by
	 * their PROCOID hash, and the table with its partitions: a change to
	 * any of them loads a new generation, which checks them again
	 */
	int			nauthors;
	uint32	   *author_hashes;
	List	   *orders_relids;

	/*
	 * the types that code reaches, by their TYPEOID hash (-1: unknown, the
	 * walk stopped short): a change of another type (a temporary table's
	 * row type made) reaches nothing of it and loads nothing
	 */
	int			ntypes;
	uint32	   *type_hashes;

	bool		distributed;	/* Citus: the outbox is a distributed table */
	bool		schema_13;		/* the schema has 1.3's columns (outbox.detail,
								 * payment_record.sub_merchant) */
	bool		schema_14;		/* the schema has 1.4's paynotify_expectation */

	SPIPlanPtr	plans[PN_NPLANS];
	SPIPlanPtr	plans_plain[PN_NPLANS];	/* an INSERT's without ON CONFLICT (plans.c) */
	/* key_unique (plans.c): the orders table by its name, the unique index on its key */
	RangeVar   *orders_rv;
	Oid			key_rel;
	AttrNumber	key_attnum;
	Oid			key_index;
} PnConfig;

/* config.c: the configuration generation, and its loaders the guard shares */
extern PnConfig *pn_config(Oid fn_oid);
extern bool pn_config_distributed(PnConfig *cfg);
extern void pn_lock_agreement(PnConfig *cfg, const char *channel, const char *agreement_id);
extern const PnChannel *pn_channel_find(PnConfig *cfg, const char *name);
extern const char *pn_status_value(const PnStatusMap *map, const char *state);
extern const char *pn_status_name(const PnStatusMap *map, const char *value);
extern int	pn_config_table_oids(Oid nsp, MemoryContext cxt, Oid **relids);
extern bool pn_config_table_changed(Oid relid, const Oid *relids, int n);
extern char **pn_transition_pairs_load(MemoryContext cxt, const char *schema, int *n);
extern void pn_status_map_load(MemoryContext cxt, const char *schema, PnStatusMap *map);

/* plans.c: every statement the pipeline runs, prepared per generation */
extern SPIPlanPtr pn_plan(PnConfig *cfg, PnPlanId id);
extern SPIPlanPtr pn_plan_plain(PnConfig *cfg, PnPlanId id);
extern const char *pn_plan_plain_table(PnPlanId id);
extern int	pn_orders_execute(PnConfig *cfg, PnPlanId id, Datum *args,
							  const char *nulls, long count);
extern char *pn_expand_sql(const PnConfig *cfg, const char *tmpl);
extern void pn_plans_free(PnConfig *cfg);

/* commit.c; REPEATABLE READ and SERIALIZABLE are refused with this SQLSTATE */
#define ERRCODE_PN_ISOLATION MAKE_SQLSTATE('2','5','P','N','1')
extern void pn_require_read_committed(const char *function);
extern void pn_force_synchronous_commit(void);
extern void pn_relax_synchronous_commit(void);
extern void pn_relaxed_call_ended(XLogRecPtr call_start);
extern void pn_shard_commit_level(PnConfig *cfg, const char *channel, const char *notify_id,
								  const char *order_no, const char *other_order);
extern void pn_shard_commit_level_kept(PnConfig *cfg, const char *channel, const char *notify_id,
									   const char *order_no);

/*
 * handle.c: the order a delegated business step runs under on its order's
 * node (paynotify_step_at), or NULL.  While set, the reads that would look
 * under any order (the id under another order, the trade of another order:
 * made before the call by the caller) look under this one only: Citus
 * refuses any other statement inside a delegated call.
 */
extern const char *pn_step_order;

/* state.c */
extern bool pn_transition_allowed(PnConfig *cfg, const char *from, const char *to);
extern bool pn_transit(PnConfig *cfg, const char *order_no, const char *from,
					   const char *to);

/* log.c */
typedef struct PnLogRow
{
	bool		found;
	char	   *status;
	bool		same_payload;	/* the stored payload equals this one */
	const char *order_no;		/* the row's order_no (another's: see pn_log_get_any) */
	int			index;			/* its row in SPI_tuptable, until the next query */
} PnLogRow;

/*
 * The order number a notification's rows are keyed by: its own, or '' for a
 * notification whose order is unknown (never NULL: on Citus it is the
 * distribution column, and every statement names it).
 */
#define PN_NO_ORDER ""
#define pn_order_key(n) ((n)->order_no != NULL ? (n)->order_no : PN_NO_ORDER)

/* probe.c: whether a key is absent, from the index (true only when sure) */
#define PN_PROBE_MAX_KEYS 2
typedef bool (*PnIndexCheck) (Relation heap, Relation index);
extern bool pn_probe_absent(PnConfig *cfg, const char *table, const char *index_name, int nkeys,
							const char *const *cols, const char *const *values,
							PnIndexCheck check);

extern void pn_log_get(PnConfig *cfg, const char *channel, const PnNotice *n, PnLogRow *row);
extern void pn_log_get_any(PnConfig *cfg, const char *channel, const PnNotice *n,
						   PnLogRow *row);
extern void pn_log_seen(PnConfig *cfg, const char *channel, const char *notify_id,
						const char *order_no);
extern bool pn_log_none_parked(PnConfig *cfg, const char *order_no);
extern bool pn_log_insert(PnConfig *cfg, const char *channel, const PnNotice *n,
						  const PnApplied *res, const char *error);
extern bool pn_log_update(PnConfig *cfg, const char *channel, const char *notify_id,
						  const char *order_no, Jsonb *notice, const PnApplied *res,
						  const char *error, bool delivered, const char *only_if);

/* event.c: the event of an applied notification (outbox, NOTIFY, hooks) */
extern void pn_emit(PnConfig *cfg, const char *event, const PnChannel *ch,
					const PnNotice *n, int64 amount, Jsonb *detail);

/* ledger.c: the records of a business step */
typedef struct PnOrderRow
{
	char	   *status;			/* paynotify's name of the order's state */
	bool		has_amount;
	int64		amount;
	char	   *currency;		/* NULL: not bound, or NULL in the row */
} PnOrderRow;

extern void pn_order_get(PnConfig *cfg, const char *order_no, PnOrderRow *row);
extern bool pn_order_lock(PnConfig *cfg, const char *order_no);
extern char *pn_payment_order(PnConfig *cfg, const char *channel, const char *trade_no);
extern bool pn_payment_get(PnConfig *cfg, const char *channel, const char *trade_no,
						   int64 *amount, char **order_no);
extern bool pn_payment_by_query(PnConfig *cfg, const char *channel, const char *trade_no);
extern int	pn_order_trades(PnConfig *cfg, const char *order_no, bool *all_refunded);
extern char *pn_refund_get(PnConfig *cfg, const char *channel, const char *refund_id,
						   const char *order_no);
extern void pn_payment_insert(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
extern void pn_expectation_settle(PnConfig *cfg, const char *order_no, const char *how,
								  const char *channel, const char *notify_id);
extern bool pn_refund_insert(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							 const char *trade_no, int64 amount, const char *status);
extern int64 pn_refund_failed_count(PnConfig *cfg, const char *channel, const char *trade_no,
									 const char *order_no);
extern bool pn_refund_fail(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						   const char *refund_id, int64 *amount);
extern bool pn_dispute_open(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							const char *dispute_id);
extern bool pn_dispute_close(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							 const char *dispute_id, const char *status);
extern int64 pn_dispute_tally(PnConfig *cfg, const char *order_no, int64 *open,
							  int64 *lost, int64 *lost_amount);
extern bool pn_dispute_fill_amount(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
								   const char *dispute_id);
extern int64 pn_order_kept(PnConfig *cfg, const char *order_no);
extern bool pn_order_refunds_doubtful(PnConfig *cfg, const char *order_no);
extern bool pn_refund_succeed(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							  const char *trade_no, int64 amount);
extern int64 pn_refunded_sum(PnConfig *cfg, const char *channel, const char *trade_no,
							 const char *order_no);
extern void pn_anomaly(PnConfig *cfg, const char *channel, const PnNotice *n,
					   const char *kind);
extern const PnNotice *pn_notice_order_by_trade(PnConfig *cfg, const PnChannel *ch,
												const PnNotice *n, PnNotice *copy);
extern char *pn_agreement_get(PnConfig *cfg, const char *channel, const char *agreement_id);
extern void pn_agreement_sign(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
extern bool pn_agreement_end(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
extern void pn_agreement_end_unsigned(PnConfig *cfg, const PnChannel *ch, const PnNotice *n);
extern void pn_agreement_note(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							  const char *gateway_state);

/* apply.c */
extern void pn_apply(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
					 PnApplied *res);

/* step.c: the business step in its subtransaction, and its log row */
typedef enum PnStepLog
{
	PN_STEP_LOG_NONE,			/* the caller writes it (paynotify_retry) */
	PN_STEP_LOG_INSERT,			/* a first delivery: INSERT ... ON CONFLICT DO NOTHING */
	PN_STEP_LOG_RETRY			/* a failed one again: UPDATE ... WHERE status = 'failed' */
} PnStepLog;

typedef enum PnStepResult
{
	PN_STEP_OK,
	PN_STEP_FAILED,				/* rolled back; *error says why */
	PN_STEP_TAKEN,				/* rolled back: another delivery wrote the log row first */
	PN_STEP_BUSY,				/* rolled back: a lock was held longer than
								 * paynotify.lock_timeout; res and *error as
								 * for PN_STEP_FAILED */
	PN_STEP_CONFLICT			/* rolled back: its plain log insert found a
								 * row with the key (one server), not yet
								 * warned of; res and *error as for
								 * PN_STEP_FAILED (pn_step_log tells) */
} PnStepResult;

extern void pn_step_warn(const PnChannel *ch, const PnNotice *n, const char *error);
extern PnStepResult pn_apply_step(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
								  PnStepLog how, PnApplied *res, char **error);
/* the plain insert inside a step running now (step.c, plans.c) */
typedef struct PnPlainInsert
{
	const char *table;
	char		trade_no[256];	/* a payment's (at most 255 bytes of it), copied:
								 * the notice may be gone with the step's memory */
} PnPlainInsert;
/* insert.c */
extern bool pn_in_step;
extern PnPlainInsert pn_plain_insert;
extern int	pn_insert_execute(PnConfig *cfg, PnPlanId id, const char *trade_no, Datum *args,
							  const char *nulls);
/* the entries' guard (step.c), and delegate()'s own call of paynotify_step_at */
extern bool pn_delegating;
extern Datum pn_entry(FunctionCallInfo fcinfo, const char *name, const char *hint,
					  PGFunction body, bool delegable);
extern bool pn_step_log(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
						const PnApplied *res, const char *error, PnStepLog how);
/* Citus's messages of the statements it sends kept from the session (commit.c) */
extern void pn_quiet_citus(bool always);
/* an error's message as paynotify keeps or passes it on (step.c) */
extern char *pn_clip_error(const char *message);
extern char *pn_error_text(const ErrorData *edata);

/* handle.c: layers 2 to 4 of an authentic notice, and the reply row */
extern PnOutcome pn_handle_notice(PnConfig *cfg, const PnChannel *ch, PnNotice *notice,
								  Jsonb *headers);
extern Datum pn_reply_row(FunctionCallInfo fcinfo, const PnGateway *gw, PnOutcome outcome,
						  PnReason reason);

#endif							/* PAYNOTIFY_PIPELINE_H */
