/*-------------------------------------------------------------------------
 *
 * security.c
 *	  Running code on someone's behalf with no more rights than that
 *	  someone has: hooks as the role that registered them, work on the
 *	  orders table as that table's owner, paynotify's own tables as the
 *	  extension's owner.
 *
 * The pattern is PostgreSQL's own for user code it runs on behalf of an
 * object's owner (REFRESH MATERIALIZED VIEW, CREATE INDEX, amcheck): switch
 * the user inside a security-restricted operation, open a GUC nest level
 * and pin search_path; close the nest level and restore the user after.
 * An error unwinds through the caller's (sub)transaction, which restores
 * both as well; the user is restored here first all the same.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"
#include "access/genam.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/heap.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/plancache.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "paynotify.h"

PG_FUNCTION_INFO_V1(paynotify_on);
PG_FUNCTION_INFO_V1(paynotify_bind_orders);
PG_FUNCTION_INFO_V1(paynotify_status_canonical);

/*
 * Run fn(arg) as role, in a security-restricted operation, with
 * search_path pinned to pg_catalog, pg_temp.  Settings fn changes do not
 * outlive it.
 */
static int	run_as_depth = 0;

/* The search_path code of other roles runs under. */
#define PINNED_SEARCH_PATH "pg_catalog, pg_temp"

/* How deep in pn_run_as_owner: the code of a table runs as its owner. */
static int	owner_depth = 0;
static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;
static ExecutorStart_hook_type prev_executor_start = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

/* Who runs the orders statements instead of the table's owner, if anyone. */
static Oid	orders_runner = InvalidOid;

/*
 * The transaction that loaded the library, until code first runs as an
 * owner in it: what ran in it before the load prepared its calls without
 * pn_needs_fmgr.
 */
static LocalTransactionId loaded_lxid = InvalidLocalTransactionId;

void
pn_run_as(Oid role, void (*fn) (void *arg), void *arg)
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(role, save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	run_as_depth++;
	PG_TRY();
	{
		save_nestlevel = NewGUCNestLevel();
		/*
		 * Pinned already (the SET clause of paynotify_handle and the other
		 * entry points): setting the same value again would change nothing
		 * but cost its save, its restore and the search path's recomputation
		 * at every statement on the orders table.  The nest level is new
		 * either way: what fn changes is undone below.
		 */
		if (namespace_search_path == NULL ||
			strcmp(namespace_search_path, PINNED_SEARCH_PATH) != 0)
			(void) set_config_option("search_path", PINNED_SEARCH_PATH,
									 PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
		fn(arg);
		AtEOXact_GUC(false, save_nestlevel);
	}
	PG_FINALLY();
	{
		run_as_depth--;
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
}

/*
 * Code of another role runs in the caller's session (the orders table's as
 * its owner, a hook's as the role that registered it), whose temporary
 * schema PostgreSQL searches first for relations and types wherever a
 * function's search_path does not name pg_temp: an unqualified name in
 * that code would take the caller's temporary table (and run its
 * triggers), sequence or domain (and run its CHECK), or a temporary
 * table's row type with such columns, with the rights of role.  So no
 * relation or type of that schema may belong to a role without role's
 * rights: code, a description of it ("the code of the orders table"), is
 * refused otherwise (42501).  The schema of a session that never made a
 * temporary object is not there, and nothing is read.
 */
void
pn_require_clean_temp(Oid role, const char *code)
{
	Oid			temp;
	Oid			temp_toast;
	static const struct
	{
		Oid			catalog;
		AttrNumber	nsp;
	}			where[] = {
		{RelationRelationId, Anum_pg_class_relnamespace},
		{TypeRelationId, Anum_pg_type_typnamespace},
	};

	GetTempNamespaceState(&temp, &temp_toast);
	if (!OidIsValid(temp))
		return;
	for (int w = 0; w < (int) lengthof(where); w++)
	{
		Relation	rel = table_open(where[w].catalog, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key, where[w].nsp, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(temp));
		scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
		while ((tup = systable_getnext(scan)) != NULL)
		{
			bool		is_class = where[w].catalog == RelationRelationId;
			Oid			owner = is_class ? ((Form_pg_class) GETSTRUCT(tup))->relowner
				: ((Form_pg_type) GETSTRUCT(tup))->typowner;

			if (has_privs_of_role(owner, role))
				continue;
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("this session's temporary %s %s of role %s may not be seen by %s, which runs as role %s",
							is_class ? "relation" : "type",
							quote_identifier(is_class ? NameStr(((Form_pg_class) GETSTRUCT(tup))->relname)
											 : NameStr(((Form_pg_type) GETSTRUCT(tup))->typname)),
							GetUserNameFromId(owner, false), code,
							GetUserNameFromId(role, false)),
					 errdetail("paynotify runs that code in this session, where a relation or type name it does not qualify finds the session's temporary ones first."),
					 errhint("Deliver from a session without temporary objects (DISCARD TEMP).")));
		}
		systable_endscan(scan);
		table_close(rel, AccessShareLock);
	}
}

/*
 * Run fn(arg) as the owner of a table whose code it runs (pn_run_as), with
 * every function that code calls checked as it starts: a function whose
 * owner has not the rights of the role it would run as (the table's owner,
 * or the owner of a SECURITY DEFINER function on the way) is refused with
 * an error before it runs (pn_fmgr_guard).  The walk of the table's code
 * (authors.c) refuses such code at binding and at each configuration load;
 * this refuses it too when it comes in between (a trigger created while a
 * delivery waited for a lock) or where no walk of the catalog sees it (a
 * PL/pgSQL body of the owner that writes to a table whose trigger is
 * another role's).
 */
void
pn_run_as_owner(Oid owner, void (*fn) (void *arg), void *arg)
{
	pn_run_guarded(owner, "the code of the orders table", fn, arg);
}

/*
 * Run fn(arg), code described by `code', as role (pn_run_as) with the
 * guards of pn_run_as_owner: the session's temporary objects checked
 * (pn_require_clean_temp), every function called and every relation a
 * statement uses checked as it starts.  For the orders table's code and
 * for hooks, which the role that registered them may have pointed at
 * another role's table (whose triggers that role may change).
 */
typedef struct GuardedCall
{
	void		(*fn) (void *arg);
	void	   *arg;
} GuardedCall;

/*
 * The settings that decide what the owner's PL/pgSQL checks, at their
 * defaults whatever the delivering session set: with plpgsql.check_asserts
 * off the shim's role had an owner's ASSERT (an order on hold may not be
 * paid) skipped.  (plpgsql.variable_conflict, which changes what a name
 * means, only a superuser may set.)  pn_run_as's nest level restores them.
 */
static void
guarded_call(void *arg)
{
	GuardedCall *g = (GuardedCall *) arg;
	static const char *const defaults[][2] = {
		{"plpgsql.check_asserts", "on"},
	};

	for (int i = 0; i < (int) lengthof(defaults); i++)
		(void) set_config_option(defaults[i][0], defaults[i][1],
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	g->fn(g->arg);
}

void
pn_run_guarded(Oid role, const char *code, void (*fn) (void *arg), void *arg)
{
	GuardedCall g = {fn, arg};

	pn_require_clean_temp(role, code);
	/*
	 * Calls prepared before the library was loaded, in this transaction
	 * (PL/pgSQL keeps a simple expression's for the transaction), bypass
	 * pn_fmgr_guard: every cached plan is made again, and with it those.
	 */
	if (loaded_lxid != InvalidLocalTransactionId && loaded_lxid == MyProc->lxid)
		ResetPlanCache();
	loaded_lxid = InvalidLocalTransactionId;
	owner_depth++;
	PG_TRY();
	{
		pn_run_as(role, guarded_call, &g);
	}
	PG_FINALLY();
	{
		owner_depth--;
	}
	PG_END_TRY();
}

/*
 * Run fn(arg) as role (pn_run_as), with the orders statements it makes run
 * as caller, not as the orders table's owner: for the application's own
 * moves (paynotify_transit) and the binding's casts, made in the caller's
 * session by a caller who may update the table itself.  The table's code
 * then runs with the caller's rights, as the caller's own UPDATE would run
 * it: nothing the caller's session prepared (a cached plan, a PL/pgSQL
 * function's expressions) ever runs as the owner.
 */
void
pn_run_orders_as_caller(Oid caller, Oid role, void (*fn) (void *arg), void *arg)
{
	Oid			outer = orders_runner;

	orders_runner = caller;
	PG_TRY();
	{
		pn_run_as(role, fn, arg);
	}
	PG_FINALLY();
	{
		orders_runner = outer;
	}
	PG_END_TRY();
}

/*
 * Run fn(arg) as the role the orders statements run as: the caller under
 * pn_run_orders_as_caller, else the table's owner (pn_run_as_owner).
 */
void
pn_run_orders(Oid owner, void (*fn) (void *arg), void *arg)
{
	if (OidIsValid(orders_runner))
		pn_run_as(orders_runner, fn, arg);
	else
		pn_run_as_owner(owner, fn, arg);
}

/*
 * Under pn_run_as_owner, every statement (the orders statements and those
 * their code makes: a trigger's INSERT, a SQL function's SELECT) may use
 * only relations whose owner has the rights of the current user: a table
 * another role owns has defaults, rules and triggers of that role's, a
 * view its query, which would run with the current user's rights and may
 * call nothing but built-in functions, which pn_fmgr_guard lets pass.
 */
static void
executor_relation_check(Oid relid, Oid user)
{
	Oid			owner = pn_relation_owner(relid);

	if (OidIsValid(owner) && owner != user && !has_privs_of_role(owner, user))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("relation %s of role %s may not be used as role %s",
						quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid)),
						GetUserNameFromId(owner, false),
						GetUserNameFromId(user, false)),
				 errdetail("paynotify runs the orders table's code as the table's owner, and a hook as the role that registered it, and that role's rights are more than the relation's owner has: its code would run with them."),
				 errhint("Give the relation to a role with the table owner's rights, or keep it out of the table's code.")));
}

/*
 * A relation and, if it is partitioned, its partitions: rows an INSERT (or
 * an UPDATE moving them, or COPY FROM) routes to a partition meet that
 * partition's own constraints, defaults and triggers, and no plan lists it.
 */
static void
relation_tree_check(Oid relid, char relkind, Oid user)
{
	executor_relation_check(relid, user);
	if (relkind == RELKIND_PARTITIONED_TABLE)
	{
		ListCell   *pc;

		foreach(pc, find_all_inheritors(relid, NoLock, NULL))
			executor_relation_check(lfirst_oid(pc), user);
	}
}

static void
pn_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (owner_depth > 0 && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0)
	{
		ListCell   *lc;
		Oid			user = GetUserId();

		foreach(lc, queryDesc->plannedstmt->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_RELATION)
				relation_tree_check(rte->relid, rte->relkind, user);
		}
	}
	if (prev_executor_start != NULL)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/*
 * COPY FROM and TRUNCATE write relations without starting an executor:
 * they are judged as a statement's relations are (a hook copying rows
 * into, or truncating, a table of another role would run that role's
 * CHECK or TRUNCATE trigger with the hook's rights).
 * The name is looked up as COPY will look it up, under the same
 * search_path; COPY TO a query starts an executor.
 */
static void
pn_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	if (owner_depth > 0 && IsA(pstmt->utilityStmt, CopyStmt))
	{
		CopyStmt   *copy = (CopyStmt *) pstmt->utilityStmt;

		if (copy->is_from && copy->relation != NULL)
		{
			Oid			relid = RangeVarGetRelid(copy->relation, NoLock, true);

			if (OidIsValid(relid))
				relation_tree_check(relid, get_rel_relkind(relid), GetUserId());
		}
	}
	else if (owner_depth > 0 && IsA(pstmt->utilityStmt, TruncateStmt))
	{
		/*
		 * TRUNCATE fires its relations' TRUNCATE triggers without an
		 * executor: each relation named, its children, and with CASCADE
		 * the tables whose foreign keys reach them, as ExecuteTruncate
		 * finds them.
		 */
		TruncateStmt *trunc = (TruncateStmt *) pstmt->utilityStmt;
		List	   *rels = NIL;
		ListCell   *lc;
		Oid			user = GetUserId();

		foreach(lc, trunc->relations)
		{
			RangeVar   *rv = lfirst_node(RangeVar, lc);
			Oid			relid = RangeVarGetRelid(rv, NoLock, true);

			if (!OidIsValid(relid))
				continue;
			if (rv->inh)
				rels = list_concat_unique_oid(rels, find_all_inheritors(relid, NoLock, NULL));
			else
				rels = list_append_unique_oid(rels, relid);
		}
		if (trunc->behavior == DROP_CASCADE)
		{
			List	   *more = rels;

			while (more != NIL)
			{
				List	   *found = heap_truncate_find_FKs(more);

				more = NIL;
				foreach(lc, found)
					if (!list_member_oid(rels, lfirst_oid(lc)))
					{
						rels = lappend_oid(rels, lfirst_oid(lc));
						more = lappend_oid(more, lfirst_oid(lc));
					}
			}
		}
		foreach(lc, rels)
			executor_relation_check(lfirst_oid(lc), user);
	}
	if (prev_process_utility != NULL)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * Whether calls of fn_oid go through pn_fmgr_guard: those of a function no
 * superuser owns (a superuser's has every role's rights), wherever the
 * call is prepared.  The answer is kept with the call's FmgrInfo, which a
 * session may prepare before it runs code as an owner and use there (a
 * PL/pgSQL expression's, for the rest of the transaction); outside
 * pn_run_as_owner the guard lets every call pass.  Such a call costs one
 * more function call, and PostgreSQL inlines no such SQL function, in a
 * session that has loaded paynotify.
 */
static bool
pn_needs_fmgr(Oid fn_oid)
{
	Oid			owner;

	if (prev_needs_fmgr_hook != NULL && prev_needs_fmgr_hook(fn_oid))
		return true;
	owner = pn_proc_owner(fn_oid);
	return OidIsValid(owner) && !superuser_arg(owner);
}

static void
pn_fmgr_guard(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (event == FHET_START && owner_depth > 0)
	{
		Oid			owner = pn_proc_owner(flinfo->fn_oid);

		if (OidIsValid(owner) && !has_privs_of_role(owner, GetUserId()))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("function %s of role %s may not run as role %s",
							format_procedure(flinfo->fn_oid),
							GetUserNameFromId(owner, false),
							GetUserNameFromId(GetUserId(), false)),
					 errdetail("paynotify runs the orders table's code as the table's owner, and a hook as the role that registered it, and that role's rights are more than the function's owner has."),
					 errhint("Give the function to a role with the table owner's rights, or keep it out of the table's code.")));
	}
	if (prev_fmgr_hook != NULL)
		prev_fmgr_hook(event, flinfo, private);
}

/* Install the function guard, after any hook already there. */
void
pn_security_init(void)
{
	prev_needs_fmgr_hook = needs_fmgr_hook;
	needs_fmgr_hook = pn_needs_fmgr;
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = pn_fmgr_guard;
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = pn_executor_start;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = pn_process_utility;
	if (MyProc != NULL)
		loaded_lxid = MyProc->lxid;
}

/*
 * Whether code runs under pn_run_as: a hook, the orders table's triggers,
 * defaults and index expressions, or paynotify's own work on someone's
 * behalf.  paynotify_handle refuses to run there.
 */
bool
pn_running_as(void)
{
	return run_as_depth > 0;
}

/* The owner of a function (for paynotify's own, the extension's owner); it must exist. */
Oid
pn_function_owner(Oid fn_oid)
{
	Oid			owner = pn_proc_owner(fn_oid);

	if (!OidIsValid(owner))
		elog(ERROR, "paynotify: cache lookup failed for function %u", fn_oid);
	return owner;
}

/*
 * Whether a hook function's code may run as role: the function's owner has
 * role's privileges already (it is role, a member of it, or a superuser).
 * Otherwise its owner, or anyone who may act as the owner, could change its
 * code (CREATE OR REPLACE, or drop it and create it again) and have it run
 * with rights the owner does not have.
 */
bool
pn_hook_owner_ok(Oid fn_oid, Oid role)
{
	return has_privs_of_role(pn_function_owner(fn_oid), role);
}

/* ---------------------------------------------------------------------
 * Registration: checked as the caller, written as the extension's owner.
 * These functions are not SECURITY DEFINER, so that they know who calls.
 * ---------------------------------------------------------------------
 */

typedef struct SpiWrite
{
	const char *sql;
	int			nargs;
	Oid		   *argtypes;
	Datum	   *values;
	char	   *nulls;
	uint64		processed;		/* set by spi_write */
} SpiWrite;

static void
spi_write(void *arg)
{
	SpiWrite   *w = (SpiWrite *) arg;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute_with_args(w->sql, w->nargs, w->argtypes, w->values, w->nulls,
							  false, 0) < 0)
		elog(ERROR, "paynotify: configuration write failed");
	w->processed = SPI_processed;
	SPI_finish();
}

static const char *
own_schema(FunctionCallInfo fcinfo)
{
	return quote_identifier(get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid)));
}

/* The bound orders table, read as the extension's owner: spi_bound_orders. */
typedef struct BoundOrders
{
	const char *schema;
	Oid			relid;			/* InvalidOid: none bound, or gone */
} BoundOrders;

static void
spi_bound_orders(void *arg)
{
	BoundOrders *b = (BoundOrders *) arg;
	bool		isnull = true;
	Datum		d;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute(psprintf("SELECT pg_catalog.to_regclass(b.orders)::pg_catalog.oid"
							 " FROM %s.paynotify_binding b", b->schema), true, 1) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: reading the binding failed");
	if (SPI_processed == 1)
	{
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			b->relid = DatumGetObjectId(d);
	}
	SPI_finish();
}

/*
 * The relations of the triggers a CREATE TRIGGER made (the one named: the
 * clones it makes on partitions are not listed, and need no look of their
 * own, a partitioned table's partitions being reached with it), from the
 * commands the event trigger is given
 * (pg_event_trigger_ddl_commands).  Read as the current user (pg_trigger
 * is readable by all), in a new snapshot: the statement's own predates the
 * trigger's row.
 */
static List *
created_trigger_relations(void)
{
	List	   *relids = NIL;
	MemoryContext outer = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute("SELECT t.tgrelid FROM pg_catalog.pg_event_trigger_ddl_commands() d"
					" JOIN pg_catalog.pg_trigger t ON t.oid OPERATOR(pg_catalog.=) d.objid"
					" WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass",
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: reading the commands of the event trigger failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContext old;

		if (isnull)
			continue;
		old = MemoryContextSwitchTo(outer);
		relids = lappend_oid(relids, DatumGetObjectId(d));
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return relids;
}

/*
 * paynotify_trigger_created() returns event_trigger, fired at the end of
 * each CREATE TRIGGER.
 *
 * A role granted TRIGGER on a relation creates triggers there that run as
 * whoever writes it: on a relation whose code the bound orders table runs
 * (the table, its partitions, the tables its rules write to), as the
 * table's owner.  The walk of that code (authors.c) refuses such grants
 * when the configuration loads, but a delivery already past its load would
 * fire a trigger created meanwhile: a built-in trigger function and a WHEN
 * condition of built-in functions (query_to_xml of any SQL) pass the
 * guards at run time.  So such a trigger is refused as it is made, by a
 * role without the rights of the relation's owner, whenever that is.
 */
PG_FUNCTION_INFO_V1(paynotify_trigger_created);

Datum
paynotify_trigger_created(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	CreateTrigStmt *stmt;
	List	   *relids;
	ListCell   *lc;
	BoundOrders b = {NULL, InvalidOid};
	List	   *reached = NIL;
	bool		too_large = false;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("paynotify_trigger_created: not fired by an event trigger")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (trigdata->parsetree == NULL || !IsA(trigdata->parsetree, CreateTrigStmt))
		PG_RETURN_VOID();
	stmt = (CreateTrigStmt *) trigdata->parsetree;

	/*
	 * The relations of the triggers made, as the command recorded them: not
	 * the name again (this function's search_path is not the statement's).
	 */
	relids = created_trigger_relations();
	if (relids == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("paynotify: the relation of trigger \"%s\" was not found", stmt->trigname)));
	foreach(lc, relids)
	{
		Oid			relid = lfirst_oid(lc);
		Oid			owner = pn_relation_owner(relid);

		if (!OidIsValid(owner) || has_privs_of_role(GetUserId(), owner))
			continue;
		if (!OidIsValid(b.relid))
		{
			b.schema = own_schema(fcinfo);
			pn_run_as(pn_function_owner(fcinfo->flinfo->fn_oid), spi_bound_orders, &b);
			if (!OidIsValid(b.relid))
				PG_RETURN_VOID();
			reached = list_make1_oid(b.relid);
			reached = list_concat_unique_oid(reached, find_all_inheritors(b.relid, NoLock, NULL));
			{
				Oid		   *walked = NULL;
				int			nwalked = 0;
				int			n;

				(void) pn_table_authors(b.relid, &n, &walked, &nwalked, NULL, NULL);
				for (int i = 0; i < nwalked; i++)
					reached = list_append_unique_oid(reached, walked[i]);
				/* too much code to walk: the configuration refuses the table anyway */
				too_large = n < 0;
			}
		}
		if (too_large || list_member_oid(reached, relid))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("role \"%s\" may not create trigger \"%s\" on %s, whose code the bound orders table runs as role \"%s\"",
							GetUserNameFromId(GetUserId(), false), stmt->trigname,
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													   get_rel_name(relid)),
							GetUserNameFromId(owner, false)),
					 errdetail("paynotify runs the orders table's code as the table's owner; a trigger, its WHEN condition included, would run with that role's rights."),
					 errhint("The relation's owner (or a role with its rights) creates the trigger.")));
	}
	PG_RETURN_VOID();
}

/*
 * The role a hook's row runs as: registered_by while that role still has
 * the name registrant (so a role renamed, or dropped and made again, is
 * not the registrant); on another cluster than the one it was registered
 * on (registered_on another system identifier, or none: a Citus worker,
 * whose copy of the row holds the coordinator's oid; a restore elsewhere)
 * the role of exactly that name there; else none.  A row without a
 * registrant (its role was gone when the update to 1.3 named them; one
 * written by hand) has none: a dangling registered_by restored where that
 * oid is another role's would run the hook as that role.  The one rule for
 * the hook's run (load_hooks) and for who may register it again
 * (paynotify_on).
 */
Oid
pn_hook_role(Oid registered_by, const char *registrant, bool on_known, int64 registered_on)
{
	HeapTuple	tup;

	if (registrant == NULL)
		return InvalidOid;
	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(registered_by));
	if (HeapTupleIsValid(tup))
	{
		bool		same = strcmp(NameStr(((Form_pg_authid) GETSTRUCT(tup))->rolname),
								  registrant) == 0;

		ReleaseSysCache(tup);
		if (same)
			return registered_by;
	}
	if (!on_known || registered_on != (int64) GetSystemIdentifier())
		return get_role_oid(registrant, true);
	return InvalidOid;
}

/*
 * A hook's row written as the extension's owner (paynotify_on): the row of
 * (event, handler) locked and read first; one that runs as a role
 * (pn_hook_role: the same rule as its run) whose rights the caller does
 * not have, or, unless it comes from another cluster, whose registered_by
 * is such a role (renamed since: the hook runs as no one until it
 * registers it again), is left alone (refused), else it is taken over; no
 * row: inserted, and when a concurrent registration inserted it first,
 * read again.  Whose rights the caller has is decided here, on the node
 * that runs paynotify_on, not in the statement: on Citus the table is a
 * reference table, and a condition in it would be evaluated on every node
 * against that node's role oids (and Citus refuses its subquery).
 */
typedef struct HookWrite
{
	const char *schema;
	Oid			caller;
	Datum	   *values;			/* event, handler, caller, its name, system id */
	char	   *nulls;
	bool		refused;		/* set by hook_write */
} HookWrite;

static void
hook_write(void *arg)
{
	HookWrite  *h = (HookWrite *) arg;
	Oid			types[5] = {TEXTOID, OIDOID, OIDOID, TEXTOID, INT8OID};
	const char *where = "WHERE event OPERATOR(pg_catalog.=) $1"
		" AND handler OPERATOR(pg_catalog.=) $2::pg_catalog.regprocedure::pg_catalog.text";

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	h->refused = false;
	for (int attempt = 0; attempt < 2; attempt++)
	{
		bool		isnull;
		Oid			old;

		if (SPI_execute_with_args(psprintf("SELECT registered_by::pg_catalog.oid, registrant::pg_catalog.text,"
										   " registered_on FROM %s.paynotify_hook %s FOR UPDATE",
										   h->schema, where),
								  2, types, h->values, h->nulls, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "paynotify: hook read failed");
		if (SPI_processed > 0)
		{
			HeapTuple	row = SPI_tuptable->vals[0];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		on_null;
			Datum		by = SPI_getbinval(row, desc, 1, &isnull);
			Datum		on = SPI_getbinval(row, desc, 3, &on_null);

			/*
			 * Whom the hook runs as now, by the rule its run follows; and,
			 * unless the row is known to come from another cluster (where
			 * its oid names no one here), the role that registered it,
			 * renamed since or not: the caller needs the rights of both
			 */
			Oid			by_oid = isnull ? InvalidOid : DatumGetObjectId(by);
			bool		elsewhere = !on_null &&
				DatumGetInt64(on) != (int64) GetSystemIdentifier();

			old = pn_hook_role(by_oid, SPI_getvalue(row, desc, 2), !on_null,
							   on_null ? 0 : DatumGetInt64(on));
			if ((OidIsValid(old) && !has_privs_of_role(h->caller, old)) ||
				(!elsewhere && OidIsValid(by_oid) &&
				 SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(by_oid)) &&
				 !has_privs_of_role(h->caller, by_oid)))
			{
				h->refused = true;
				break;
			}
			if (SPI_execute_with_args(psprintf("UPDATE %s.paynotify_hook SET registered_by = $3::pg_catalog.regrole,"
											   " registrant = $4::pg_catalog.name, registered_on = $5 %s",
											   h->schema, where),
									  5, types, h->values, h->nulls, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "paynotify: hook write failed");
			break;
		}
		if (SPI_execute_with_args(psprintf("INSERT INTO %s.paynotify_hook (event, handler, registered_by, registrant, registered_on)"
										   " VALUES ($1, $2::pg_catalog.regprocedure::pg_catalog.text,"
										   " $3::pg_catalog.regrole, $4::pg_catalog.name, $5)"
										   " ON CONFLICT (event, handler) DO NOTHING", h->schema),
								  5, types, h->values, h->nulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "paynotify: hook write failed");
		if (SPI_processed > 0)
			break;
		if (attempt == 1)
			elog(ERROR, "paynotify: hook row neither inserted nor found");
	}
	SPI_finish();
}

/*
 * paynotify_on(event text, handler regprocedure) returns void
 *
 * The hook runs as the role that calls this, which must own the function or
 * be allowed to EXECUTE it.  Only plain functions taking one jsonb argument
 * and returning one value (any type, void included) can be hooks.  No
 * superuser may register one: it would run as a superuser whatever the code
 * it reaches.  A hook registered by another role may be registered again
 * (run as the caller from then on) only by a role with that role's rights.
 */
Datum
paynotify_on(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	char	   *event = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	bool		known = false;
	Oid			fn;
	HeapTuple	tup;
	Form_pg_proc proc;
	char	   *name;
	SpiWrite	w;
	Oid			argtypes[5] = {TEXTOID, OIDOID, OIDOID, TEXTOID, INT8OID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	for (int i = 0; event != NULL && i < pn_nevent_names; i++)
		if (strcmp(event, pn_event_names[i]) == 0)
			known = true;
	if (!known)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown event \"%s\"", event ? event : "NULL"),
				 errhint("Events are paid, refunded, refund_failed, closed, dispute_opened, dispute_won, dispute_lost, payment_failed, agreement_signed, agreement_ended and notification.")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handler must not be null")));
	fn = PG_GETARG_OID(1);
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function with OID %u does not exist", fn)));
	proc = (Form_pg_proc) GETSTRUCT(tup);
	name = format_procedure(fn);
	if (proc->pronargs != 1 || proc->proargtypes.values[0] != JSONBOID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("handler %s must take exactly one jsonb argument", name)));
	if (proc->prokind != PROKIND_FUNCTION || proc->proretset ||
		proc->prorettype == TRIGGEROID || proc->prorettype == EVENT_TRIGGEROID)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("handler %s is %s", name,
						proc->prokind == PROKIND_PROCEDURE ? "a procedure" :
						proc->prokind == PROKIND_AGGREGATE ? "an aggregate function" :
						proc->prokind == PROKIND_WINDOW ? "a window function" :
						proc->proretset ? "a set-returning function" : "a trigger function"),
				 errhint("A hook is a plain function returning one value of any type, or void.")));
	if (isAnyTempNamespace(proc->pronamespace))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FUNCTION_DEFINITION),
				 errmsg("handler %s is a temporary function", name)));
	ReleaseSysCache(tup);
	if (!pg_proc_ownercheck(fn, caller) &&
		pg_proc_aclcheck(fn, caller, ACL_EXECUTE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function %s", name),
				 errdetail("A hook runs as the role that registers it, which must own the function or have EXECUTE on it.")));
	if (!pn_hook_owner_ok(fn, caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("handler %s is owned by role \"%s\", whose code may not run as \"%s\"",
						name, GetUserNameFromId(pn_function_owner(fn), false),
						GetUserNameFromId(caller, false)),
				 errdetail("A hook runs as the role that registers it; the function's owner could change its code."),
				 errhint("Register it as its owner, or give the function to a role that has the registering role's privileges.")));
	if (superuser_arg(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a hook may not be registered by superuser \"%s\"",
						GetUserNameFromId(caller, false)),
				 errdetail("A hook runs as the role that registers it; a superuser would run with every right whatever the code it reaches, a domain's CHECK or a table's trigger of another role included."),
				 errhint("Register it as a plain role with the rights it needs: SET ROLE that role; SELECT paynotify_on(...).")));

	values[0] = CStringGetTextDatum(event);
	values[1] = ObjectIdGetDatum(fn);
	values[2] = ObjectIdGetDatum(caller);
	values[3] = CStringGetTextDatum(GetUserNameFromId(caller, false));
	values[4] = Int64GetDatum((int64) GetSystemIdentifier());
	if (pn_schema_at_13(get_func_namespace(fcinfo->flinfo->fn_oid)))
	{
		HookWrite	h;

		h.schema = own_schema(fcinfo);
		h.caller = caller;
		h.values = values;
		h.nulls = nulls;
		pn_run_as(pn_function_owner(fcinfo->flinfo->fn_oid), hook_write, &h);
		w.processed = h.refused ? 0 : 1;
	}
	else
	{
		/* a database not updated to 1.3 yet: the row as 1.2 wrote it */
		w.sql = psprintf("INSERT INTO %s.paynotify_hook (event, handler, registered_by)"
						 " VALUES ($1, $2::pg_catalog.regprocedure::pg_catalog.text,"
						 " $3::pg_catalog.regrole)"
						 " ON CONFLICT (event, handler)"
						 " DO UPDATE SET registered_by = excluded.registered_by"
						 " WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_roles r"
						 " WHERE r.oid OPERATOR(pg_catalog.=) %s.paynotify_hook.registered_by::pg_catalog.oid)"
						 " OR pg_catalog.pg_has_role($3, %s.paynotify_hook.registered_by::pg_catalog.oid, 'USAGE')",
						 own_schema(fcinfo), own_schema(fcinfo), own_schema(fcinfo));
		w.nargs = 3;
		w.argtypes = argtypes;
		w.values = values;
		w.nulls = nulls;
		pn_run_as(pn_function_owner(fcinfo->flinfo->fn_oid), spi_write, &w);
	}
	if (w.processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("hook %s for event \"%s\" is registered by a role whose rights \"%s\" does not have",
						name, event, GetUserNameFromId(caller, false)),
				 errdetail("Registering it again would make it run as \"%s\" instead.",
						   GetUserNameFromId(caller, false)),
				 errhint("Register it again as that role or one with its rights, or delete it from paynotify_hook first.")));
	PG_RETURN_VOID();
}

typedef struct AuthorsCheck
{
	Oid			relid;
} AuthorsCheck;

/*
 * role may have paynotify read and move any row of the orders table relid
 * (deliveries do as the table's owner, and say what they found: whether
 * an order is there, its amount): role owns the table, or may SELECT and
 * UPDATE it and no row-level security restricts which rows (a policy that
 * lets it update some rows only would be bypassed by the owner's
 * statements).  Otherwise 42501, with detail.
 */
void
pn_require_orders_update(Oid relid, Oid role, const char *detail)
{
	char	   *name;

	if (pg_class_ownercheck(relid, role))
		return;
	name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
	if (pg_class_aclcheck(relid, role, ACL_UPDATE) != ACLCHECK_OK ||
		pg_class_aclcheck(relid, role, ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", name),
				 errdetail("%s", detail)));
	if (check_enable_rls(relid, role, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", name),
				 errdetail("Row-level security limits the rows of it you may update, and paynotify moves orders as the table's owner."),
				 errhint("Have the table's owner, or a role with BYPASSRLS, do it.")));
}

/*
 * Whether the extension's schema nsp is at 1.3 or later: it has
 * paynotify_table_authors, and everything else the update to 1.3 made
 * (paynotify_hook's registrant, ...).  The library of 1.3 also serves a
 * database not updated yet.
 */
bool
pn_schema_at_13(Oid nsp)
{
	Oid			regclass_arg[1] = {REGCLASSOID};

	return OidIsValid(GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid,
									  CStringGetDatum("paynotify_table_authors"),
									  PointerGetDatum(buildoidvector(regclass_arg, 1)),
									  ObjectIdGetDatum(nsp)));
}

/*
 * The orders table must run no code whose owner lacks the rights of the
 * table's owner, as which paynotify reads and moves orders (and casts
 * status values when binding): pn_table_authors lists the owners of every
 * function, type and operator its code reaches and of every relation
 * whose code it runs, and the roles that may give those relations
 * triggers.  The one named is the first by label in the database's
 * collation (of several under one label, the first in the walk's order).
 * Run as the extension's owner; nothing on a database not yet at 1.3.
 */
static void
authors_check(void *arg)
{
	AuthorsCheck *a = (AuthorsCheck *) arg;
	Oid			owner = pn_relation_owner(a->relid);
	PnAuthor   *authors;
	PnAuthor   *first = NULL;
	int			n;
	char	   *table = psprintf("the orders table %s", get_rel_name(a->relid));

	authors = pn_table_authors(a->relid, &n, NULL, NULL, NULL, NULL);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s", pn_author_offence(table, a->relid, NULL)),
				 errhint("Bind a table with fewer partitions, or fewer tables that its rules and policies reach.")));
	for (int i = 0; i < n; i++)
		if (!pn_author_trusted(&authors[i], owner) &&
			(first == NULL ||
			 varstr_cmp(authors[i].what, strlen(authors[i].what),
						first->what, strlen(first->what), DEFAULT_COLLATION_OID) < 0))
			first = &authors[i];
	if (first != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s", pn_author_offence(table, a->relid, first)),
				 errdetail("paynotify reads and moves orders as the table's owner, and that code would run with the owner's rights."),
				 errhint("Give the table to a role whose rights the code's owners have (ALTER TABLE ... OWNER TO), or the code to the table's owner.")));
}

/*
 * paynotify_bind_orders(orders regclass, ...) returns void
 *
 * The caller must own the table or hold UPDATE on it.  The binding itself
 * is checked and written by paynotify_bind_orders_internal, called with
 * the same arguments as the extension's owner.  Work on the table later
 * runs as the table's owner, whoever bound it.
 */
Datum
paynotify_bind_orders(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	Oid		   *argtypes;
	int			nargs;
	StringInfoData sql;
	SpiWrite	w;

	if (!PG_ARGISNULL(0))
	{
		Oid			relid = PG_GETARG_OID(0);

		/* a system catalog (or any relation initdb made) is nobody's orders */
		if (relid < FirstNormalObjectId &&
			SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("relation %s is a system relation, not an orders table",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													   get_rel_name(relid)))));
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			pn_require_orders_update(relid, caller,
									 "Binding an orders table needs its ownership, or SELECT and UPDATE on it.");
	}
	if (!PG_ARGISNULL(0) && SearchSysCacheExists1(RELOID, ObjectIdGetDatum(PG_GETARG_OID(0))))
	{
		AuthorsCheck a = {PG_GETARG_OID(0)};

		pn_run_as(pn_function_owner(fcinfo->flinfo->fn_oid), authors_check, &a);
	}
	(void) get_func_signature(fcinfo->flinfo->fn_oid, &argtypes, &nargs);
	if (nargs != PG_NARGS())
		elog(ERROR, "paynotify: paynotify_bind_orders called with %d arguments, declared with %d",
			 PG_NARGS(), nargs);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s.paynotify_bind_orders_internal(", own_schema(fcinfo));
	w.values = palloc(sizeof(Datum) * Max(nargs, 1));
	w.nulls = palloc(Max(nargs, 1));
	for (int i = 0; i < nargs; i++)
	{
		appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
		w.values[i] = PG_GETARG_DATUM(i);
		w.nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	appendStringInfoChar(&sql, ')');
	w.sql = sql.data;
	w.nargs = nargs;
	w.argtypes = argtypes;
	pn_run_orders_as_caller(caller, pn_function_owner(fcinfo->flinfo->fn_oid), spi_write, &w);
	PG_RETURN_VOID();
}

typedef struct StatusCast
{
	Oid			relid;
	AttrNumber	attnum;
	text	   *value;
	text	   *result;
} StatusCast;

static void
status_cast(void *arg)
{
	StatusCast *c = (StatusCast *) arg;
	Oid			typid;
	int32		typmod;
	Oid			collid;
	Oid			argtype = TEXTOID;
	Datum		value = PointerGetDatum(c->value);
	bool		isnull;
	char	   *sql;

	/* the type's name as seen under the pinned search_path: qualified */
	get_atttypetypmodcoll(c->relid, c->attnum, &typid, &typmod, &collid);
	sql = psprintf("SELECT ($1)::%s::pg_catalog.text",
				   format_type_with_typemod(typid, typmod));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	if (SPI_execute_with_args(sql, 1, &argtype, &value, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "paynotify: status value cast failed");
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	c->result = isnull ? NULL : (text *) SPI_datumTransfer(value, false, -1);
	SPI_finish();
}

/*
 * paynotify_status_canonical(orders regclass, status_column name, value text)
 *   returns text
 *
 * value cast to the status column's type and back to text, as the table's
 * owner in a security-restricted operation: the cast may run code of the
 * table's owner (a domain's CHECK, a CREATE CAST on an enum), which must
 * never run as paynotify_bind_orders_internal's caller, the extension's
 * owner.  Only that function calls it.
 */
Datum
paynotify_status_canonical(PG_FUNCTION_ARGS)
{
	StatusCast	c;
	Oid			owner;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	c.relid = PG_GETARG_OID(0);
	c.attnum = get_attnum(c.relid, NameStr(*PG_GETARG_NAME(1)));
	owner = pn_relation_owner(c.relid);
	if (c.attnum <= 0 || !OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation with OID %u does not exist",
						NameStr(*PG_GETARG_NAME(1)), c.relid)));
	if (PG_ARGISNULL(2))
		PG_RETURN_NULL();
	c.value = PG_GETARG_TEXT_PP(2);
	c.result = NULL;
	pn_run_orders(owner, status_cast, &c);
	if (c.result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(c.result);
}
