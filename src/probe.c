/*-------------------------------------------------------------------------
 *
 * probe.c
 *	  Whether a key is absent from one of the extension's tables, read
 *	  straight from its btree index: one descent, where the statement that
 *	  would find nothing starts an executor.  A first delivery reads three
 *	  keys that are nearly always absent (its id in the log, its trade in the
 *	  payments, its order's parked notifications); each is probed here first,
 *	  and only a key that may be there is read by the statement, as before.
 *
 * The probe only ever answers "absent" when the statement would: it takes
 * the snapshot the statement would (a new one under READ COMMITTED, the
 * transaction's under REPEATABLE READ), and it is used only where the
 * index is exactly what the extension created (a valid btree on the same
 * text columns, text's default operator class, the columns' collations)
 * on a plain table with no children, which a statement would read through
 * that index or find no more in.  (A child table created by the table's
 * owner in the instant before the probe's snapshot, whose invalidation has
 * not arrived yet, is missed by the probe as by the statement's planning,
 * which also learns of children from the same cache after the same lock.)
 * Anything else, and wherever Citus is loaded (the rows are in shards, not
 * in the relation here), answers "maybe", and the caller runs its
 * statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "paynotify.h"
#include "pipeline.h"

/*
 * Whether index is a valid, ready btree of heap on exactly the columns cols
 * (in that order), each of text's default btree operator class (text_ops)
 * in its column's own collation, with no expressions; its predicate, if
 * any, is for the caller to judge.  heap is a plain table with no children
 * (a statement on it would also read theirs).
 */
static bool
text_index(Relation heap, Relation index, int ncols, const char *const *cols)
{
	/* (a relation of another kind has no btree access method either) */
	if (heap->rd_rel->relkind != RELKIND_RELATION || heap->rd_rel->relhassubclass ||
		index->rd_rel->relkind != RELKIND_INDEX ||
		index->rd_rel->relam != BTREE_AM_OID ||
		index->rd_index->indrelid != RelationGetRelid(heap) ||
		!index->rd_index->indisvalid || !index->rd_index->indisready ||
		!index->rd_index->indislive || index->rd_index->indcheckxmin ||
		index->rd_index->indnkeyatts != ncols ||
		RelationGetIndexExpressions(index) != NIL)
		return false;
	for (int i = 0; i < ncols; i++)
	{
		AttrNumber	att = get_attnum(RelationGetRelid(heap), cols[i]);

		/*
		 * text_ops (text's family, not text_pattern_ops'): the probe
		 * compares as the statement's "=" does
		 */
		if (att == InvalidAttrNumber ||
			index->rd_index->indkey.values[i] != att ||
			index->rd_opcintype[i] != TEXTOID ||
			index->rd_opfamily[i] != TEXT_BTREE_FAM_OID ||
			TupleDescAttr(RelationGetDescr(heap), att - 1)->atttypid != TEXTOID ||
			index->rd_indcollation[i] != TupleDescAttr(RelationGetDescr(heap), att - 1)->attcollation)
			return false;
	}
	return true;
}

/* Whether index_oid is an index of heap_oid, from the catalog's cache. */
static bool
index_of(Oid index_oid, Oid heap_oid)
{
	HeapTuple	tup;
	bool		of;

	if (!OidIsValid(index_oid))
		return false;
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index_oid));
	if (!HeapTupleIsValid(tup))
		return false;
	of = ((Form_pg_index) GETSTRUCT(tup))->indrelid == heap_oid;
	ReleaseSysCache(tup);
	return of;
}

/*
 * Whether a row of the table the key values (one per column of the index)
 * is visible to a statement run now: one descent of the index.
 */
static bool
probe_found(Relation heap, Relation index, int nkeys, const char *const *values)
{
	Snapshot	snap;
	ScanKeyData keys[PN_PROBE_MAX_KEYS];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found;

	/*
	 * As SPI does before a statement: what this transaction wrote in the
	 * current command (the last statement of an earlier call in the same
	 * query, say) becomes visible to the snapshot taken next.
	 */
	CommandCounterIncrement();
	snap = RegisterSnapshot(GetTransactionSnapshot());
	slot = table_slot_create(heap, NULL);

	/* compared as the index orders its keys: its collations */
	for (int i = 0; i < nkeys; i++)
		ScanKeyEntryInitialize(&keys[i], 0, i + 1, BTEqualStrategyNumber, InvalidOid,
							   index->rd_indcollation[i], F_TEXTEQ,
							   CStringGetTextDatum(values[i]));
	scan = index_beginscan(heap, index, snap, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snap);
	return found;
}

/*
 * True only when no row of the extension's table with the key values
 * (values[i] for column cols[i]) is visible to a statement run now, read
 * from the index index_name, which must be on exactly those columns (text_index) and pass check (NULL: have no
 * predicate).  False means "maybe there": the caller reads it with its
 * statement.
 */
bool
pn_probe_absent(PnConfig *cfg, const char *table, const char *index_name, int nkeys,
				const char *const *cols, const char *const *values, PnIndexCheck check)
{
	Oid			heap_oid;
	Oid			index_oid;
	Relation	heap;
	Relation	index;
	bool		absent = false;

	Assert(nkeys > 0 && nkeys <= PN_PROBE_MAX_KEYS);
	if (GetConfigOption("citus.shard_count", true, false) != NULL)
		return false;
	heap_oid = get_relname_relid(table, cfg->nsp);
	if (!OidIsValid(heap_oid))
		return false;
	/* whatever has the names now (text_index judges its kind), if anything */
	heap = try_relation_open(heap_oid, AccessShareLock);
	if (heap == NULL)
		return false;
	/*
	 * The name looked up again now that the lock brought the catalog's
	 * changes in: a table renamed into its place meanwhile is the one the
	 * statement would read, not this one.
	 */
	if (get_relname_relid(table, cfg->nsp) != heap_oid)
	{
		relation_close(heap, NoLock);
		return false;
	}
	/*
	 * Only an index of this table is locked: another relation by the
	 * index's name (one created where the extension's key was dropped) is
	 * never waited for.  text_index checks again once it is locked.
	 */
	index_oid = get_relname_relid(index_name, cfg->nsp);
	index = index_of(index_oid, heap_oid) ? try_relation_open(index_oid, AccessShareLock) : NULL;
	if (index == NULL)
	{
		relation_close(heap, NoLock);
		return false;
	}
	if (text_index(heap, index, nkeys, cols) &&
		(check ? check(heap, index) : RelationGetIndexPredicate(index) == NIL))
		absent = !probe_found(heap, index, nkeys, values);
	relation_close(index, NoLock);
	relation_close(heap, NoLock);
	return absent;
}
