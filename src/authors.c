/*-------------------------------------------------------------------------
 *
 * authors.c
 *	  The functions a table can run when its rows are read, moved or
 *	  copied, the owners of the domains and relations that code
 *	  is made of, and the relations whose code that is: the walk of 1.3's
 *	  paynotify_table_authors, paynotify_table_owners and
 *	  paynotify_table_relations, done with syscache lookups and catalog
 *	  index scans.
 *
 * The SQL functions are a recursive query over a dozen catalogs; planning
 * it and warming the catalog caches for it cost 150-400 ms in a fresh
 * backend and 10-150 ms at every configuration load after that, which is
 * what a CGI request pays.  This is the same walk: the same relations, the
 * same starting objects with the same labels (format strings and output
 * functions of the SQL, under its search_path pg_catalog, pg_temp), the
 * same edges, and the same rows: each object once, under the first label
 * (as bytes) that reaches it, ordered by label and oid.  Both must agree:
 * the regression test table_authors compares them row for row.
 *
 * An object missing from the catalog (dropped while the walk runs, or a
 * dangling reference) is skipped, as the query's joins skip it.  All the
 * walk's memory is in a context of its own, deleted before returning.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/objectaddress.h"
#include "catalog/dependency.h"
#include "catalog/partition.h"
#include "catalog/pg_am.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_cast.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_policy.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_range.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "paynotify.h"

PG_FUNCTION_INFO_V1(paynotify_table_authors_c);
PG_FUNCTION_INFO_V1(paynotify_table_relations_c);
PG_FUNCTION_INFO_V1(paynotify_table_owners_c);

/* An object of the catalog: the walk's node. */
typedef struct WalkNode
{
	Oid			classid;
	Oid			objid;
} WalkNode;

/* A growing array of nodes. */
typedef struct NodeVec
{
	WalkNode   *v;
	int			n;
	int			cap;
} NodeVec;

/*
 * What the walk knows of a node: where it leads (read once, when the walk
 * leaves it), and whether a label's walk reached it.
 */
typedef struct WalkEntry
{
	WalkNode	key;
	bool		expanded;
	int			nedges;
	WalkNode   *edges;
	bool		claimed;		/* a label's walk reached it */
} WalkEntry;

/* Where the code starts: an object, named for a message. */
typedef struct WalkStart
{
	char	   *what;
	WalkNode	node;
} WalkStart;

/* A relation of paynotify_table_relations. */
typedef struct RelState
{
	Oid			relid;			/* hash key */
	bool		seen[2];		/* reached with by_rule false, true */
} RelState;

static void
vec_push(NodeVec *vec, Oid classid, Oid objid)
{
	if (vec->n == vec->cap)
	{
		vec->cap = vec->cap ? vec->cap * 2 : 16;
		vec->v = vec->v ? repalloc(vec->v, sizeof(WalkNode) * vec->cap)
			: palloc(sizeof(WalkNode) * vec->cap);
	}
	vec->v[vec->n].classid = classid;
	vec->v[vec->n].objid = objid;
	vec->n++;
}

/* The catalogs whose objects pg_depend leads the walk to. */
static bool
walked_class(Oid classid)
{
	return classid == TypeRelationId || classid == ProcedureRelationId ||
		classid == OperatorRelationId || classid == OperatorClassRelationId ||
		classid == OperatorFamilyRelationId;
}

/* A catalog scan by an index, with the current catalog snapshot. */
typedef struct CatScan
{
	Relation	rel;
	SysScanDesc scan;
} CatScan;

static void
cat_begin(CatScan *cs, Oid catalog, Oid index, int nkeys, ScanKey keys)
{
	cs->rel = table_open(catalog, AccessShareLock);
	cs->scan = systable_beginscan(cs->rel, index, true, NULL, nkeys, keys);
}

static HeapTuple
cat_next(CatScan *cs)
{
	return systable_getnext(cs->scan);
}

static void
cat_end(CatScan *cs)
{
	systable_endscan(cs->scan);
	table_close(cs->rel, AccessShareLock);
}

/* One oid key, equal. */
static void
oid_key(ScanKey key, AttrNumber attno, Oid value)
{
	ScanKeyInit(key, attno, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(value));
}

/* ---------------------------------------------------------------------
 * paynotify_table_relations
 * ---------------------------------------------------------------------
 */

/*
 * pg_partition_ancestors(relid): nothing for a relation that cannot be in
 * a partition tree (missing, or neither a partition nor partitioned), else
 * the relation itself and its ancestors.
 */
static List *
partition_ancestors(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		can;

	if (!HeapTupleIsValid(tup))
		return NIL;
	can = ((Form_pg_class) GETSTRUCT(tup))->relispartition ||
		RELKIND_HAS_PARTITIONS(((Form_pg_class) GETSTRUCT(tup))->relkind);
	ReleaseSysCache(tup);
	if (!can)
		return NIL;
	return lcons_oid(relid, get_partition_ancestors(relid));
}

typedef struct RelWalk
{
	HTAB	   *seen;
	Oid		   *qrel;			/* queue of (relid, by_rule) */
	bool	   *qrule;
	int			qn;
	int			qcap;
	int			qhead;
} RelWalk;

static void
rel_add(RelWalk *rw, Oid relid, bool by_rule)
{
	bool		found;
	RelState   *s = hash_search(rw->seen, &relid, HASH_ENTER, &found);

	if (!found)
		s->seen[0] = s->seen[1] = false;
	if (s->seen[by_rule])
		return;
	s->seen[by_rule] = true;
	if (rw->qn == rw->qcap)
	{
		rw->qcap *= 2;
		rw->qrel = repalloc(rw->qrel, sizeof(Oid) * rw->qcap);
		rw->qrule = repalloc(rw->qrule, sizeof(bool) * rw->qcap);
	}
	rw->qrel[rw->qn] = relid;
	rw->qrule[rw->qn] = by_rule;
	rw->qn++;
}

/*
 * The relations other than r that the objects objids (rules or policies
 * of r, of catalog classid) name: their code runs with the rule's or the
 * policy's (by_rule).
 */
static void
rel_add_named(RelWalk *rw, Oid r, Oid classid, List *objids)
{
	ListCell   *lc;

	foreach(lc, objids)
	{
		ScanKeyData key[2];
		CatScan		cs;
		HeapTuple	tup;

		oid_key(&key[0], Anum_pg_depend_classid, classid);
		oid_key(&key[1], Anum_pg_depend_objid, lfirst_oid(lc));
		cat_begin(&cs, DependRelationId, DependDependerIndexId, 2, key);
		while (HeapTupleIsValid(tup = cat_next(&cs)))
		{
			Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

			if (d->refclassid == RelationRelationId && d->refobjid != r)
				rel_add(rw, d->refobjid, true);
		}
		cat_end(&cs);
	}
}

static int
oid_cmp_asc(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return (x > y) - (x < y);
}

/*
 * The relations whose code rel runs when its rows are read or moved, as
 * paynotify_table_relations: rel, the partitioned tables it is a partition
 * of, its partitions and child tables, and every relation a rule or a
 * policy of any of them names (by_rule, and so on from there).  *n of them, ordered by oid,
 * in the current memory context.
 */
static void
walk_relations(Oid rel, int *n, Oid **relids, bool **by_rule)
{
	RelWalk		rw;
	HASHCTL		ctl;
	ListCell   *lc;
	List	   *anc;
	HASH_SEQ_STATUS hs;
	RelState   *s;
	int			i;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(RelState);
	ctl.hcxt = CurrentMemoryContext;
	rw.seen = hash_create("paynotify table relations", 16, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	rw.qcap = 16;
	rw.qn = rw.qhead = 0;
	rw.qrel = palloc(sizeof(Oid) * rw.qcap);
	rw.qrule = palloc(sizeof(bool) * rw.qcap);

	/* a relation that is not there has no code (nor has oid 0) */
	if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(rel)))
	{
		rel_add(&rw, rel, false);
		foreach(lc, partition_ancestors(rel))
			rel_add(&rw, lfirst_oid(lc), false);
	}
	while (rw.qhead < rw.qn)
	{
		Oid			r = rw.qrel[rw.qhead];
		bool		br = rw.qrule[rw.qhead];
		ScanKeyData key[2];
		CatScan		cs;
		HeapTuple	tup;
		List	   *rules = NIL;
		List	   *policies = NIL;

		rw.qhead++;
		CHECK_FOR_INTERRUPTS();

		/* its partitions and child tables */
		oid_key(&key[0], Anum_pg_inherits_inhparent, r);
		cat_begin(&cs, InheritsRelationId, InheritsParentIndexId, 1, key);
		while (HeapTupleIsValid(tup = cat_next(&cs)))
			rel_add(&rw, ((Form_pg_inherits) GETSTRUCT(tup))->inhrelid, br);
		cat_end(&cs);

		/* the partitioned tables it is a partition of */
		anc = partition_ancestors(r);
		foreach(lc, anc)
			if (lfirst_oid(lc) != r)
				rel_add(&rw, lfirst_oid(lc), br);

		/* the relations its rules name */
		oid_key(&key[0], Anum_pg_rewrite_ev_class, r);
		cat_begin(&cs, RewriteRelationId, RewriteRelRulenameIndexId, 1, key);
		while (HeapTupleIsValid(tup = cat_next(&cs)))
			rules = lappend_oid(rules, ((Form_pg_rewrite) GETSTRUCT(tup))->oid);
		cat_end(&cs);
		rel_add_named(&rw, r, RewriteRelationId, rules);

		/* the relations its policies read */
		oid_key(&key[0], Anum_pg_policy_polrelid, r);
		cat_begin(&cs, PolicyRelationId, PolicyPolrelidPolnameIndexId, 1, key);
		while (HeapTupleIsValid(tup = cat_next(&cs)))
			policies = lappend_oid(policies, ((Form_pg_policy) GETSTRUCT(tup))->oid);
		cat_end(&cs);
		rel_add_named(&rw, r, PolicyRelationId, policies);
	}

	*n = (int) hash_get_num_entries(rw.seen);
	*relids = palloc(sizeof(Oid) * Max(*n, 1));
	i = 0;
	hash_seq_init(&hs, rw.seen);
	while ((s = hash_seq_search(&hs)) != NULL)
		(*relids)[i++] = s->relid;
	qsort(*relids, *n, sizeof(Oid), oid_cmp_asc);
	*by_rule = palloc(sizeof(bool) * Max(*n, 1));
	for (i = 0; i < *n; i++)
	{
		s = hash_search(rw.seen, &(*relids)[i], HASH_FIND, NULL);
		(*by_rule)[i] = s->seen[1];
	}
}

/* ---------------------------------------------------------------------
 * Where the code starts
 * ---------------------------------------------------------------------
 */

typedef struct StartVec
{
	WalkStart  *v;
	int			n;
	int			cap;
} StartVec;

static void
start_push(StartVec *sv, char *what, Oid classid, Oid objid)
{
	if (sv->n == sv->cap)
	{
		sv->cap = sv->cap ? sv->cap * 2 : 64;
		sv->v = sv->v ? repalloc(sv->v, sizeof(WalkStart) * sv->cap)
			: palloc(sizeof(WalkStart) * sv->cap);
	}
	sv->v[sv->n].what = what;
	sv->v[sv->n].node.classid = classid;
	sv->v[sv->n].node.objid = objid;
	sv->n++;
}

static char *
regclass_text(Oid relid)
{
	return DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)));
}

static char *
regtype_text(Oid typid)
{
	return DatumGetCString(DirectFunctionCall1(regtypeout, ObjectIdGetDatum(typid)));
}

/*
 * The objects whose code relation relid runs, each named as the SQL's objs
 * names it; owner is the orders table's owner.  Called with search_path
 * pinned as the SQL function pins it.
 */
static void
relation_starts(StartVec *sv, Oid relid, bool by_rule, Oid owner)
{
	char	   *relname = regclass_text(relid);
	ScanKeyData key[3];
	CatScan		cs;
	HeapTuple	tup;
	char	   *what;
	bool		rls = false;

	/* its partition key: what the relation itself depends on */
	what = psprintf("the partition key of %s", relname);
	oid_key(&key[0], Anum_pg_depend_classid, RelationRelationId);
	oid_key(&key[1], Anum_pg_depend_objid, relid);
	ScanKeyInit(&key[2], Anum_pg_depend_objsubid, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(0));
	cat_begin(&cs, DependRelationId, DependDependerIndexId, 3, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

		if (walked_class(d->refclassid))
			start_push(sv, what, d->refclassid, d->refobjid);
	}
	cat_end(&cs);

	/* its columns' types */
	oid_key(&key[0], Anum_pg_attribute_attrelid, relid);
	ScanKeyInit(&key[1], Anum_pg_attribute_attnum, BTGreaterStrategyNumber, F_INT2GT,
				Int16GetDatum(0));
	cat_begin(&cs, AttributeRelationId, AttributeRelidNumIndexId, 2, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_attribute a = (Form_pg_attribute) GETSTRUCT(tup);

		if (a->attnum <= 0 || a->attisdropped)
			continue;
		start_push(sv, psprintf("the type %s of column \"%s\" of %s",
								regtype_text(a->atttypid), NameStr(a->attname), relname),
				   TypeRelationId, a->atttypid);
	}
	cat_end(&cs);

	/* its triggers */
	oid_key(&key[0], Anum_pg_trigger_tgrelid, relid);
	cat_begin(&cs, TriggerRelationId, TriggerRelidNameIndexId, 1, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_trigger t = (Form_pg_trigger) GETSTRUCT(tup);

		if (t->tgisinternal)
			continue;
		start_push(sv, psprintf("trigger \"%s\" of %s", NameStr(t->tgname), relname),
				   TriggerRelationId, t->oid);
	}
	cat_end(&cs);

	/* its constraints */
	oid_key(&key[0], Anum_pg_constraint_conrelid, relid);
	cat_begin(&cs, ConstraintRelationId, ConstraintRelidTypidNameIndexId, 1, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_constraint c = (Form_pg_constraint) GETSTRUCT(tup);

		start_push(sv, psprintf("constraint \"%s\" of %s", NameStr(c->conname), relname),
				   ConstraintRelationId, c->oid);
	}
	cat_end(&cs);

	/*
	 * its generated columns; its defaults, when a rule inserts into it (the
	 * table's own defaults run only for an INSERT, which paynotify never
	 * makes, and a copy sends every column)
	 */
	oid_key(&key[0], Anum_pg_attrdef_adrelid, relid);
	cat_begin(&cs, AttrDefaultRelationId, AttrDefaultIndexId, 1, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_attrdef d = (Form_pg_attrdef) GETSTRUCT(tup);
		HeapTuple	att = SearchSysCache2(ATTNUM, ObjectIdGetDatum(d->adrelid),
										  Int16GetDatum(d->adnum));
		Form_pg_attribute a;

		if (!HeapTupleIsValid(att))
			continue;
		a = (Form_pg_attribute) GETSTRUCT(att);
		if (a->attgenerated != '\0' || by_rule)
			start_push(sv, psprintf(a->attgenerated != '\0' ? "the generated column \"%s\" of %s"
									: "the default of column \"%s\" of %s",
									NameStr(a->attname), relname),
					   AttrDefaultRelationId, d->oid);
		ReleaseSysCache(att);
	}
	cat_end(&cs);

	/* its indexes */
	oid_key(&key[0], Anum_pg_index_indrelid, relid);
	cat_begin(&cs, IndexRelationId, IndexIndrelidIndexId, 1, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Oid			index = ((Form_pg_index) GETSTRUCT(tup))->indexrelid;

		start_push(sv, psprintf("index %s", regclass_text(index)), RelationRelationId, index);
	}
	cat_end(&cs);

	/* its rules */
	oid_key(&key[0], Anum_pg_rewrite_ev_class, relid);
	cat_begin(&cs, RewriteRelationId, RewriteRelRulenameIndexId, 1, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_rewrite w = (Form_pg_rewrite) GETSTRUCT(tup);

		start_push(sv, psprintf("rule \"%s\" of %s", NameStr(w->rulename), relname),
				   RewriteRelationId, w->oid);
	}
	cat_end(&cs);

	/*
	 * the policies the orders table's owner is held to (a superuser reads
	 * past them): those of a relation whose row security is forced, and
	 * those of every relation another role owns (one a rule writes to or
	 * reads)
	 */
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_class c = (Form_pg_class) GETSTRUCT(tup);

		rls = c->relrowsecurity && (c->relforcerowsecurity || c->relowner != owner);
		ReleaseSysCache(tup);
	}
	if (rls)
	{
		oid_key(&key[0], Anum_pg_policy_polrelid, relid);
		cat_begin(&cs, PolicyRelationId, PolicyPolrelidPolnameIndexId, 1, key);
		while (HeapTupleIsValid(tup = cat_next(&cs)))
		{
			Form_pg_policy p = (Form_pg_policy) GETSTRUCT(tup);

			start_push(sv, psprintf("policy \"%s\" of %s", NameStr(p->polname), relname),
					   PolicyRelationId, p->oid);
		}
		cat_end(&cs);
	}
}

/* ---------------------------------------------------------------------
 * Where code leads
 * ---------------------------------------------------------------------
 */

static void
push_nonzero(NodeVec *out, Oid classid, Oid objid)
{
	if (OidIsValid(objid))
		vec_push(out, classid, objid);
}

/* A cast's function, if the cast exists and has one. */
static void
push_cast(NodeVec *out, Oid source, Oid target)
{
	HeapTuple	tup = SearchSysCache2(CASTSOURCETARGET, ObjectIdGetDatum(source),
									  ObjectIdGetDatum(target));

	if (!HeapTupleIsValid(tup))
		return;
	push_nonzero(out, ProcedureRelationId, ((Form_pg_cast) GETSTRUCT(tup))->castfunc);
	ReleaseSysCache(tup);
}

/* The default operator classes of method am for exactly type typid. */
static void
push_default_opclasses(NodeVec *out, Oid am, Oid typid)
{
	CatCList   *list = SearchSysCacheList1(CLAAMNAMENSP, ObjectIdGetDatum(am));

	for (int i = 0; i < list->n_members; i++)
	{
		Form_pg_opclass oc = (Form_pg_opclass) GETSTRUCT(&list->members[i]->tuple);

		if (oc->opcintype == typid && oc->opcdefault)
			vec_push(out, OperatorClassRelationId, oc->oid);
	}
	ReleaseSysCacheList(list);
}

/* An int2[] column of a catalog tuple, as an array (NULL: none). */
static int16 *
int2_array(int cacheid, HeapTuple tup, AttrNumber attno, int *n)
{
	bool		isnull;
	Datum		d = SysCacheGetAttr(cacheid, tup, attno, &isnull);
	Datum	   *elems;
	bool	   *nulls;
	int16	   *out;

	*n = 0;
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), INT2OID, sizeof(int16), true,
					  TYPALIGN_SHORT, &elems, &nulls, n);
	out = palloc(sizeof(int16) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = nulls[i] ? InvalidAttrNumber : DatumGetInt16(elems[i]);
	return out;
}

/* An attribute's type, or InvalidOid. */
static Oid
att_type(Oid relid, int16 attnum)
{
	HeapTuple	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(attnum));
	Oid			typid;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	typid = ((Form_pg_attribute) GETSTRUCT(tup))->atttypid;
	ReleaseSysCache(tup);
	return typid;
}

/* Where the walk goes from node n: the edges of the SQL's walk. */
static void
node_edges(WalkNode n, NodeVec *out)
{
	ScanKeyData key[2];
	CatScan		cs;
	HeapTuple	tup;

	/* what it depends on */
	oid_key(&key[0], Anum_pg_depend_classid, n.classid);
	oid_key(&key[1], Anum_pg_depend_objid, n.objid);
	cat_begin(&cs, DependRelationId, DependDependerIndexId, 2, key);
	while (HeapTupleIsValid(tup = cat_next(&cs)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

		if (walked_class(d->refclassid))
			vec_push(out, d->refclassid, d->refobjid);
	}
	cat_end(&cs);

	switch (n.classid)
	{
		case ConstraintRelationId:
			{
				Form_pg_constraint c;
				int16	   *conkey,
						   *confkey;
				int			nk,
							nf;

				tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(n.objid));
				if (!HeapTupleIsValid(tup))
					break;
				c = (Form_pg_constraint) GETSTRUCT(tup);
				if (c->contype != CONSTRAINT_FOREIGN)
				{
					ReleaseSysCache(tup);
					break;
				}
				/* the table a foreign key references (its columns' types compare) */
				vec_push(out, RelationRelationId, c->confrelid);

				/*
				 * the casts from its columns' types to the types of the
				 * columns it references (an implicit one is applied to
				 * compare an updated row's key)
				 */
				conkey = int2_array(CONSTROID, tup, Anum_pg_constraint_conkey, &nk);
				confkey = int2_array(CONSTROID, tup, Anum_pg_constraint_confkey, &nf);
				for (int i = 0; i < Min(nk, nf); i++)
				{
					Oid			x,
								y;

					if (conkey[i] == InvalidAttrNumber || confkey[i] == InvalidAttrNumber)
						continue;
					x = att_type(c->conrelid, conkey[i]);
					y = att_type(c->confrelid, confkey[i]);
					if (OidIsValid(x) && OidIsValid(y))
						push_cast(out, x, y);
				}
				ReleaseSysCache(tup);
				break;
			}
		case TypeRelationId:
			{
				Form_pg_type t;
				Form_pg_range g;

				/* its functions, the types it is made of */
				tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(n.objid));
				if (HeapTupleIsValid(tup))
				{
					t = (Form_pg_type) GETSTRUCT(tup);
					push_nonzero(out, ProcedureRelationId, t->typinput);
					push_nonzero(out, ProcedureRelationId, t->typoutput);
					push_nonzero(out, ProcedureRelationId, t->typreceive);
					push_nonzero(out, ProcedureRelationId, t->typsend);
					push_nonzero(out, ProcedureRelationId, t->typmodin);
					push_nonzero(out, ProcedureRelationId, t->typmodout);
					push_nonzero(out, ProcedureRelationId, t->typsubscript);
					push_nonzero(out, TypeRelationId, t->typbasetype);
					push_nonzero(out, TypeRelationId, t->typelem);
					push_nonzero(out, RelationRelationId, t->typrelid);
					ReleaseSysCache(tup);
				}

				/* its domain's constraints */
				oid_key(&key[0], Anum_pg_constraint_contypid, n.objid);
				cat_begin(&cs, ConstraintRelationId, ConstraintTypidIndexId, 1, key);
				while (HeapTupleIsValid(tup = cat_next(&cs)))
					vec_push(out, ConstraintRelationId, ((Form_pg_constraint) GETSTRUCT(tup))->oid);
				cat_end(&cs);

				/* its default btree and hash operator classes */
				push_default_opclasses(out, BTREE_AM_OID, n.objid);
				push_default_opclasses(out, HASH_AM_OID, n.objid);

				/* a range: its subtype, functions, subtype's operator class */
				tup = SearchSysCache1(RANGETYPE, ObjectIdGetDatum(n.objid));
				if (HeapTupleIsValid(tup))
				{
					g = (Form_pg_range) GETSTRUCT(tup);
					push_nonzero(out, TypeRelationId, g->rngsubtype);
					push_nonzero(out, ProcedureRelationId, g->rngcanonical);
					push_nonzero(out, ProcedureRelationId, g->rngsubdiff);
					push_nonzero(out, OperatorClassRelationId, g->rngsubopc);
					ReleaseSysCache(tup);
				}
				/* a multirange: its range */
				tup = SearchSysCache1(RANGEMULTIRANGE, ObjectIdGetDatum(n.objid));
				if (HeapTupleIsValid(tup))
				{
					vec_push(out, TypeRelationId, ((Form_pg_range) GETSTRUCT(tup))->rngtypid);
					ReleaseSysCache(tup);
				}

				/*
				 * the casts paynotify's statements make: text to a column's
				 * type (an order number, a status value), a column's type to
				 * text or bigint (a key, a status or a currency read back,
				 * an amount)
				 */
				push_cast(out, TEXTOID, n.objid);
				push_cast(out, n.objid, TEXTOID);
				push_cast(out, n.objid, INT8OID);
				break;
			}
		case OperatorClassRelationId:
			/* its family */
			tup = SearchSysCache1(CLAOID, ObjectIdGetDatum(n.objid));
			if (HeapTupleIsValid(tup))
			{
				vec_push(out, OperatorFamilyRelationId, ((Form_pg_opclass) GETSTRUCT(tup))->opcfamily);
				ReleaseSysCache(tup);
			}
			break;
		case OperatorFamilyRelationId:
			{
				/* its support functions and operators */
				CatCList   *list = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(n.objid));

				for (int i = 0; i < list->n_members; i++)
					vec_push(out, ProcedureRelationId,
							 ((Form_pg_amproc) GETSTRUCT(&list->members[i]->tuple))->amproc);
				ReleaseSysCacheList(list);
				list = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(n.objid));
				for (int i = 0; i < list->n_members; i++)
					vec_push(out, OperatorRelationId,
							 ((Form_pg_amop) GETSTRUCT(&list->members[i]->tuple))->amopopr);
				ReleaseSysCacheList(list);
				break;
			}
		case TriggerRelationId:
			/* its function */
			oid_key(&key[0], Anum_pg_trigger_oid, n.objid);
			cat_begin(&cs, TriggerRelationId, TriggerOidIndexId, 1, key);
			if (HeapTupleIsValid(tup = cat_next(&cs)))
				vec_push(out, ProcedureRelationId, ((Form_pg_trigger) GETSTRUCT(tup))->tgfoid);
			cat_end(&cs);
			break;
		case OperatorRelationId:
			/* its function and estimators */
			tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(n.objid));
			if (HeapTupleIsValid(tup))
			{
				Form_pg_operator op = (Form_pg_operator) GETSTRUCT(tup);

				push_nonzero(out, ProcedureRelationId, op->oprcode);
				push_nonzero(out, ProcedureRelationId, op->oprrest);
				push_nonzero(out, ProcedureRelationId, op->oprjoin);
				ReleaseSysCache(tup);
			}
			break;
		default:
			break;
	}
}

/* ---------------------------------------------------------------------
 * The walk
 * ---------------------------------------------------------------------
 */

/*
 * At most this many relations, starting objects and reached objects: a
 * table with more code than that (thousands of partitions of hundreds of
 * columns) is not checked, and not used: its binding fails with
 * program_limit_exceeded, and a bound one fails every step until it is
 * smaller.
 */
#define PN_WALK_LIMIT 200000

static int
start_cmp_bytes(const void *a, const void *b)
{
	return strcmp(((const WalkStart *) a)->what, ((const WalkStart *) b)->what);
}

/*
 * The rows' order: label, then object oid.  The labels compare as bytes
 * (collation "C"), whatever the database's collation, as the SQL orders
 * them (COLLATE "C").
 */
static int
author_cmp(const void *a, const void *b)
{
	const PnAuthor *x = (const PnAuthor *) a;
	const PnAuthor *y = (const PnAuthor *) b;
	int			c = strcmp(x->what, y->what);

	if (c != 0)
		return c;
	if (x->classid != y->classid)
		return (x->classid > y->classid) - (x->classid < y->classid);
	return (x->objid > y->objid) - (x->objid < y->objid);
}

static WalkEntry *
entry_get(HTAB *nodes, WalkNode n)
{
	bool		found;
	WalkEntry  *e = hash_search(nodes, &n, HASH_ENTER, &found);

	if (!found)
	{
		e->expanded = false;
		e->nedges = 0;
		e->edges = NULL;
		e->claimed = false;
	}
	return e;
}

/* The owner of a table, or InvalidOid when it no longer exists. */
Oid
pn_relation_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* The owner of function fn_oid, or InvalidOid if there is none. */
Oid
pn_proc_owner(Oid fn_oid)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * The owner of a function, a domain or a composite type the walk reached,
 * and whether it is one.  A domain's owner may add a check or a default,
 * code in SQL that no function holds (and that may hide SQL in text); a
 * composite type's owner may give it an attribute of such a domain (ALTER
 * TYPE ... ADD ATTRIBUTE, or ADD COLUMN for a table's row type); what
 * other objects' owners may add is a function (a cast, an operator's
 * estimator), whose owner is judged as the walk reaches it and as it
 * starts.
 */
static bool
node_owner(WalkNode n, Oid *owner)
{
	HeapTuple	tup;

	switch (n.classid)
	{
		case ProcedureRelationId:
			*owner = pn_proc_owner(n.objid);
			return OidIsValid(*owner);
		case TypeRelationId:
			tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(n.objid));
			if (!HeapTupleIsValid(tup))
				return false;
			if (((Form_pg_type) GETSTRUCT(tup))->typtype != TYPTYPE_DOMAIN &&
				((Form_pg_type) GETSTRUCT(tup))->typtype != TYPTYPE_COMPOSITE)
			{
				ReleaseSysCache(tup);
				return false;
			}
			*owner = ((Form_pg_type) GETSTRUCT(tup))->typowner;
			break;
		default:
			return false;
	}
	ReleaseSysCache(tup);
	return true;
}

/* The rows being built. */
typedef struct RowVec
{
	PnAuthor   *v;
	int			n;
	int			cap;
} RowVec;

static void
row_push(RowVec *rv, const char *what, Oid classid, Oid objid, Oid owner, char *object)
{
	if (rv->n == rv->cap)
	{
		rv->cap = rv->cap ? rv->cap * 2 : 64;
		rv->v = rv->v ? repalloc(rv->v, sizeof(PnAuthor) * rv->cap)
			: palloc(sizeof(PnAuthor) * rv->cap);
	}
	rv->v[rv->n].what = (char *) what;
	rv->v[rv->n].classid = classid;
	rv->v[rv->n].objid = objid;
	rv->v[rv->n].owner = owner;
	rv->v[rv->n].object = object;
	rv->n++;
}

/*
 * The relation relid itself: its owner, who may give it any code (a
 * trigger, a policy, a rule, a check), and the roles other than its owner
 * granted TRIGGER on it, who may give it triggers.  PUBLIC is owner
 * InvalidOid.
 */
static void
relation_rows(RowVec *rv, Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			relowner;
	char	   *what;
	char	   *desc;
	bool		isnull;
	Datum		acl;

	if (!HeapTupleIsValid(tup))
		return;
	relowner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	what = psprintf("the code of %s", regclass_text(relid));
	desc = getObjectDescriptionOids(RelationRelationId, relid);
	row_push(rv, what, RelationRelationId, relid, relowner, desc);
	acl = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	if (!isnull)
	{
		Acl		   *a = DatumGetAclPCopy(acl);

		/* an acl has no nulls: its items follow the header (ACL_DAT) */
		AclItem    *items = (AclItem *) (((char *) a) + ARR_OVERHEAD_NONULLS(ARR_NDIM(a)));
		int			nitems = ARR_NDIM(a) == 1 && !ARR_HASNULL(a) ? ACL_NUM(a) : 0;
		List	   *grantees = NIL;

		for (int i = 0; i < nitems; i++)
		{
			Oid			g = items[i].ai_grantee;

			if ((ACLITEM_GET_PRIVS(items[i]) & ACL_TRIGGER) != 0 && g != relowner &&
				!list_member_oid(grantees, g))
				grantees = lappend_oid(grantees, g);
		}
		list_sort(grantees, list_oid_cmp);
		if (grantees != NIL)
		{
			char	   *object = psprintf("the right to create triggers on %s", desc);
			ListCell   *lc;

			foreach(lc, grantees)
				row_push(rv, what, InvalidOid, relid, lfirst_oid(lc), object);
		}
	}
	ReleaseSysCache(tup);
}

/*
 * pn_table_authors: the owners of everything table rel's code is made of
 * and of everything that can give it code (paynotify_table_authors and
 * paynotify_table_owners), *n rows in the current memory context, ordered
 * by label and object; with the relations whose code that is
 * (paynotify_table_relations) in *relids, *nrelids of them, when relids is
 * not NULL.  The rows: every function the table can run, type and
 * operator its code reaches, each once, with the first label (as bytes)
 * under which it is reached; every relation whose code it runs, and every
 * role granted TRIGGER on one.  NULL and *n = -1 when there is more than
 * PN_WALK_LIMIT of it (the relations are still returned).  With the types
 * the walk reached in *types, *ntypes of them, when types is not NULL
 * (-1: the walk stopped short, any type may be one).
 */
PnAuthor *
pn_table_authors(Oid rel, int *n, Oid **relids, int *nrelids, Oid **types, int *ntypes)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "paynotify table authors",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			nrels;
	Oid		   *rels;
	bool	   *by_rule;
	StartVec	sv = {0};
	int			save_nestlevel;
	HASHCTL		ctl;
	HTAB	   *nodes;
	NodeVec		queue = {0};
	RowVec		rows = {0};
	PnAuthor   *result = NULL;
	Oid			owner;
	bool		too_large;

	walk_relations(rel, &nrels, &rels, &by_rule);
	owner = pn_relation_owner(rel);
	too_large = nrels > PN_WALK_LIMIT;

	/* the labels and objects named as under the SQL functions' search_path */
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	for (int i = 0; i < nrels && !too_large; i++)
	{
		relation_starts(&sv, rels[i], by_rule[i], owner);
		relation_rows(&rows, rels[i]);
		too_large = sv.n > PN_WALK_LIMIT;
	}

	/*
	 * The walk, label by label in order: each object is reached once, by
	 * the first label whose code reaches it (all that an object reaches,
	 * the label that reached it first reached too).
	 */
	qsort(sv.v, sv.n, sizeof(WalkStart), start_cmp_bytes);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(WalkNode);
	ctl.entrysize = sizeof(WalkEntry);
	ctl.hcxt = cxt;
	nodes = hash_create("paynotify table authors", 256, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int s = 0; s < sv.n && !too_large;)
	{
		const char *what = sv.v[s].what;
		int			qhead = 0;

		queue.n = 0;
		for (; s < sv.n && strcmp(sv.v[s].what, what) == 0; s++)
		{
			WalkEntry  *e = entry_get(nodes, sv.v[s].node);

			if (!e->claimed)
			{
				e->claimed = true;
				vec_push(&queue, e->key.classid, e->key.objid);
			}
		}
		while (qhead < queue.n)
		{
			WalkEntry  *e = entry_get(nodes, queue.v[qhead++]);
			Oid			objowner;

			CHECK_FOR_INTERRUPTS();
			if (!e->expanded)
			{
				NodeVec		edges = {0};

				node_edges(e->key, &edges);
				e->edges = edges.v;
				e->nedges = edges.n;
				e->expanded = true;
			}
			if (node_owner(e->key, &objowner))
				row_push(&rows, what, e->key.classid, e->key.objid, objowner,
						 e->key.classid == ProcedureRelationId ? NULL
						 : getObjectDescriptionOids(e->key.classid, e->key.objid));
			for (int i = 0; i < e->nedges; i++)
			{
				/* the entry may move no node: dynahash keeps them in place */
				WalkEntry  *to = entry_get(nodes, e->edges[i]);

				if (!to->claimed)
				{
					to->claimed = true;
					vec_push(&queue, to->key.classid, to->key.objid);
				}
			}
		}
		too_large = hash_get_num_entries(nodes) > PN_WALK_LIMIT;
	}
	AtEOXact_GUC(true, save_nestlevel);
	if (!too_large)
		qsort(rows.v, rows.n, sizeof(PnAuthor), author_cmp);

	/* the rows and relations into the caller's context; the rest freed */
	MemoryContextSwitchTo(caller);
	*n = too_large ? -1 : rows.n;
	if (!too_large)
	{
		result = palloc(sizeof(PnAuthor) * Max(rows.n, 1));
		for (int i = 0; i < rows.n; i++)
		{
			result[i] = rows.v[i];
			result[i].what = (i > 0 && rows.v[i].what == rows.v[i - 1].what)
				? result[i - 1].what : pstrdup(rows.v[i].what);
			result[i].object = rows.v[i].object == NULL ? NULL
				: (i > 0 && rows.v[i].object == rows.v[i - 1].object)
				? result[i - 1].object : pstrdup(rows.v[i].object);
		}
	}
	if (relids != NULL)
	{
		*relids = palloc(sizeof(Oid) * Max(nrels, 1));
		memcpy(*relids, rels, sizeof(Oid) * nrels);
		*nrelids = nrels;
	}
	if (types != NULL)
	{
		HASH_SEQ_STATUS seq;
		WalkEntry  *e;

		*ntypes = too_large ? -1 : 0;
		*types = palloc(sizeof(Oid) * (too_large ? 1 : Max(hash_get_num_entries(nodes), 1)));
		hash_seq_init(&seq, nodes);
		while ((e = hash_seq_search(&seq)) != NULL)
			if (!too_large && e->key.classid == TypeRelationId)
				(*types)[(*ntypes)++] = e->key.objid;
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return result;
}

/*
 * Built-in functions that run SQL they are given as text (or all of a
 * table's, a schema's, a database's rows, views' queries included): what
 * that SQL names is recorded nowhere either.  (A type's input function
 * given a type at run time, domain_in of to_regtype, is one the walk
 * cannot tell from a column type's own input function: not refused.)
 */
static const char *const sql_runners[] = {
	"query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
	"table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema",
	"schema_to_xml", "schema_to_xmlschema", "schema_to_xml_and_xmlschema",
	"database_to_xml", "database_to_xmlschema", "database_to_xml_and_xmlschema",
	"cursor_to_xml", "cursor_to_xmlschema", "ts_stat", "ts_rewrite"
};

/*
 * Why function fn may not run as a superuser for paynotify, or NULL: all
 * but built-in ones (fixed code) and those of paynotify and Citus (its
 * trigger on distributed tables).  A function in SQL or a procedural
 * language may reach what no catalog records (a text body names anything;
 * even a body in BEGIN ATOMIC reaches a table whose column has another
 * role's domain, whose CHECK would then run with every right); so may a C
 * function (refint's triggers, dblink and tablefunc run SQL they build
 * from text), and a built-in that runs SQL given as text.  The reason is
 * the function's language, the extension it belongs to, or "a built-in
 * function that runs SQL given as text".
 */
char *
pn_superuser_unfit(Oid fn)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	char	   *why = NULL;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		return NULL;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (fn < FirstNormalObjectId)
	{
		for (int i = 0; i < (int) lengthof(sql_runners); i++)
			if (strcmp(NameStr(proc->proname), sql_runners[i]) == 0)
				why = pstrdup("a built-in function that runs SQL given as text");
	}
	else
	{
		Oid			ext = getExtensionOfObject(ProcedureRelationId, fn);

		if (!OidIsValid(ext))
			why = get_language_name(proc->prolang, false);
		else if (ext != get_extension_oid("paynotify", true) &&
				 ext != get_extension_oid("citus", true))
			why = psprintf("a function of extension %s", get_extension_name(ext));
	}
	ReleaseSysCache(tup);
	return why;
}

/* pn_superuser_unfit of author a, if it is a function; else NULL. */
static char *
author_unfit(const PnAuthor *a)
{
	return a->classid == ProcedureRelationId ? pn_superuser_unfit(a->objid) : NULL;
}

/*
 * Whether author a has the rights of role owner, and, if owner is a
 * superuser, is no function pn_superuser_unfit refuses.  A table a plain
 * role owns runs any code with that role's rights only.
 */
bool
pn_author_trusted(const PnAuthor *a, Oid owner)
{
	return OidIsValid(a->owner) && has_privs_of_role(a->owner, owner) &&
		!(superuser_arg(owner) && author_unfit(a) != NULL);
}

/*
 * Why table relid (named table, "the orders table t") may not be used:
 * author a has not the rights of its owner; or (a NULL) it has too much
 * code to check.
 */
char *
pn_author_offence(const char *table, Oid relid, const PnAuthor *a)
{
	Oid			owner = pn_relation_owner(relid);
	char	   *why;

	if (a == NULL)
		return psprintf("%s has more code than paynotify checks: more than %d relations, objects of its code or objects they reach",
						table, PN_WALK_LIMIT);
	if (OidIsValid(a->owner) && has_privs_of_role(a->owner, owner) &&
		(why = author_unfit(a)) != NULL)
		return psprintf("%s is owned by superuser %s and runs %s, function %s (%s): a superuser's table may run only built-in functions and paynotify's and Citus's, since what another function reaches (another role's domain, whose CHECK would run as a superuser) is not all recorded",
						table, GetUserNameFromId(owner, false), a->what,
						DatumGetCString(DirectFunctionCall1(regprocedureout,
															ObjectIdGetDatum(a->objid))),
						why);
	return psprintf("%s runs %s, %s of role %s, which does not have the rights of the table's owner %s",
					table, a->what,
					a->object != NULL ? a->object
					: psprintf("function %s", DatumGetCString(DirectFunctionCall1(regprocedureout,
																					ObjectIdGetDatum(a->objid)))),
					OidIsValid(a->owner) ? GetUserNameFromId(a->owner, false) : "PUBLIC",
					GetUserNameFromId(owner, false));
}

/*
 * The rows of pn_table_authors for the SQL-callable walks: the functions
 * (functions true), or the rest ordered by label, object and owner.
 */
static int
owner_row_cmp(const void *a, const void *b)
{
	const PnAuthor *x = (const PnAuthor *) a;
	const PnAuthor *y = (const PnAuthor *) b;
	int			c = strcmp(x->what, y->what);

	if (c == 0)
		c = strcmp(x->object, y->object);
	if (c != 0)
		return c;
	return (x->owner > y->owner) - (x->owner < y->owner);
}

static void
authors_srf(FunctionCallInfo fcinfo, bool functions)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt;
	MemoryContext old;
	PnAuthor   *rows;
	PnAuthor   *keep;
	int			n,
				nkeep = 0;

	InitMaterializedSRF(fcinfo, 0);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "paynotify table authors rows",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	rows = pn_table_authors(PG_GETARG_OID(0), &n, NULL, NULL, NULL, NULL);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s", pn_author_offence(psprintf("table %s", get_rel_name(PG_GETARG_OID(0))),
												PG_GETARG_OID(0), NULL))));
	keep = palloc(sizeof(PnAuthor) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if ((rows[i].classid == ProcedureRelationId) == functions)
			keep[nkeep++] = rows[i];
	if (!functions)
		qsort(keep, nkeep, sizeof(PnAuthor), owner_row_cmp);
	for (int i = 0; i < nkeep; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(keep[i].what);
		values[1] = functions ? ObjectIdGetDatum(keep[i].objid) : CStringGetTextDatum(keep[i].object);
		values[2] = ObjectIdGetDatum(keep[i].owner);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * paynotify_table_relations_c(rel regclass)
 *   RETURNS TABLE (relid oid, by_rule boolean)
 *
 * The relation walk alone, as paynotify_table_relations returns it: for
 * tests comparing the two (not in the extension's scripts).
 */
Datum
paynotify_table_relations_c(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt;
	MemoryContext old;
	int			n;
	Oid		   *relids;
	bool	   *by_rule;

	InitMaterializedSRF(fcinfo, 0);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "paynotify table relations",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	walk_relations(PG_GETARG_OID(0), &n, &relids, &by_rule);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < n; i++)
	{
		Datum		values[2] = {ObjectIdGetDatum(relids[i]), BoolGetDatum(by_rule[i])};
		bool		nulls[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextDelete(cxt);
	return (Datum) 0;
}

/*
 * paynotify_table_authors_c(rel regclass)
 *   RETURNS TABLE (what text, fn regprocedure, owner regrole)
 * paynotify_table_owners_c(rel regclass)
 *   RETURNS TABLE (what text, object text, owner regrole)
 *
 * The C walk as paynotify_table_authors and paynotify_table_owners return
 * it: for tests comparing the two (not in the extension's scripts).
 */
Datum
paynotify_table_authors_c(PG_FUNCTION_ARGS)
{
	authors_srf(fcinfo, true);
	return (Datum) 0;
}

Datum
paynotify_table_owners_c(PG_FUNCTION_ARGS)
{
	authors_srf(fcinfo, false);
	return (Datum) 0;
}
