/*-------------------------------------------------------------------------
 *
 * config.c
 *	  The per-backend configuration cache (channels with parsed keys, the
 *	  orders binding, transitions, hooks), whose generations hold the plans
 *	  of plans.c.
 *
 * Loading: the first entry point called in a backend reads every
 * configuration table once, parses keys once, and prepares plans lazily.
 * Invalidation: a statement trigger on each configuration table sends a
 * relcache invalidation for that table; the callback only marks the cache
 * stale.  The next entry point builds a new generation; the old one may
 * still be in use further up the stack (a hook calling paynotify_transit),
 * so it is freed at the end of the transaction, never earlier.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "paynotify.h"
#include "pipeline.h"

PG_FUNCTION_INFO_V1(paynotify_config_changed);

static PnConfig *current = NULL;
static List *retired = NIL;		/* generations to free at transaction end */
static bool stale = true;

static void config_inval_callback(Datum arg, Oid relid);
static void proc_inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static void config_xact_callback(XactEvent event, void *arg);
static PnConfig *config_load(Oid nsp);
static void load_config_tables(PnConfig *cfg);
static void load_channels(PnConfig *cfg);
static void load_keys(PnConfig *cfg);
static void load_binding(PnConfig *cfg);
static void load_transitions(PnConfig *cfg);
static void load_hooks(PnConfig *cfg);
static void load_table_authors(PnConfig *cfg);
static void type_inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static void load_distribution(PnConfig *cfg);
static bool schema_has_13_columns(Oid nsp);
static void config_free(PnConfig *cfg);
static char *spi_text(int row, int col);
static void load_key(PnConfig *cfg, PnChannel *ch, PnKey *key,
					 const char *material, int64 not_before, int64 not_after);

/* Register the invalidation and end-of-transaction callbacks. */
void
pn_config_init(void)
{
	CacheRegisterRelcacheCallback(config_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, proc_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(TYPEOID, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(CASTSOURCETARGET, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(OPEROID, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(CLAOID, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(OPFAMILYOID, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AMPROCNUM, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AMOPSTRATEGY, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, type_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, type_inval_callback, (Datum) 0);
	RegisterXactCallback(config_xact_callback, NULL);
}

/*
 * Any invalidation of one of our configuration tables (or of all) marks the
 * cache stale.  On Citus the configuration tables are reference tables: a
 * change is written to each node's shard of the table, whose copy of the
 * paynotify_config_changed trigger invalidates that shard; the shards are
 * in the list too (pn_config_table_oids), so every node's backends reload.
 */
static void
config_inval_callback(Datum arg, Oid relid)
{
	if (current == NULL ||
		pn_config_table_changed(relid, current->config_relids, current->nconfig_relids) ||
		list_member_oid(current->orders_relids, relid))
		stale = true;
}

/*
 * A type the orders table's code reaches, a cast, an operator, an
 * operator class or family or one of its members changed (a domain's
 * owner or check, a cast created, a default class given to a type): that
 * code may reach other functions, or other owners, now.  A role or a
 * membership changed (a superuser made an ordinary role, a member
 * revoked): the owners of that code may no longer have the table owner's
 * rights.  Rare, but for types: any session's temporary table makes a row
 * type, which that code cannot reach (nothing of it names a type made
 * after it without a change of its own), and loads nothing.
 */
static void
type_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (current == NULL || (!current->bound && current->binding_error == NULL))
		return;
	if (cacheid == TYPEOID && hashvalue != 0 && current->ntypes >= 0)
	{
		for (int i = 0; i < current->ntypes; i++)
			if (current->type_hashes[i] == hashvalue)
				stale = true;
		return;
	}
	stale = true;
}

/*
 * Whether an invalidation of relid (InvalidOid: of every relation) touches
 * one of the n configuration tables relids.
 */
bool
pn_config_table_changed(Oid relid, const Oid *relids, int n)
{
	if (relid == InvalidOid)
		return true;
	for (int i = 0; i < n; i++)
		if (relids[i] == relid)
			return true;
	return false;
}

/*
 * A hook function changed or was dropped: resolve the hooks again.  While a
 * hook's function is missing, any change of pg_proc may be its re-creation
 * (under a new oid): resolve again then too.
 */
static void
proc_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (current == NULL)
		return;
	for (int i = 0; i < current->nhooks; i++)
		if (hashvalue == 0 || hashvalue == current->hooks[i].hash ||
			!OidIsValid(current->hooks[i].fn))
			stale = true;
	for (int i = 0; i < current->nauthors; i++)
		if (hashvalue == 0 || hashvalue == current->author_hashes[i])
			stale = true;
}

/* Free the generations retired during the transaction. */
static void
config_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	foreach(lc, retired)
		config_free((PnConfig *) lfirst(lc));
	list_free(retired);
	retired = NIL;
}

/*
 * The configuration for the extension whose function fn_oid is, loaded or
 * reloaded as needed.  Valid until the end of the current transaction.
 */
PnConfig *
pn_config(Oid fn_oid)
{
	Oid			nsp = get_func_namespace(fn_oid);

	if (current != NULL && !stale && current->nsp == nsp)
		return current;
	if (current != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		retired = lappend(retired, current);
		MemoryContextSwitchTo(old);
		current = NULL;
	}
	stale = false;
	current = config_load(nsp);
	ereport(DEBUG1,
			(errmsg("paynotify: configuration of schema %s loaded", current->schema)));
	return current;
}

/* Read every configuration table into a new generation. */
static PnConfig *
config_load(Oid nsp)
{
	MemoryContext cxt = AllocSetContextCreate(TopMemoryContext,
											  "paynotify configuration",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext old;
	PnConfig   *cfg;

	cfg = MemoryContextAllocZero(cxt, sizeof(PnConfig));
	cfg->cxt = cxt;
	cfg->nsp = nsp;
	cfg->ntypes = -1;			/* until the walk says which */
	cfg->schema = MemoryContextStrdup(cxt, quote_identifier(get_namespace_name(nsp)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "paynotify: SPI_connect failed");
	PG_TRY();
	{
		load_config_tables(cfg);
		load_channels(cfg);
		load_keys(cfg);
		load_binding(cfg);
		load_table_authors(cfg);
		load_transitions(cfg);
		load_hooks(cfg);
		load_distribution(cfg);
		cfg->schema_13 = schema_has_13_columns(cfg->nsp);
		cfg->schema_14 = cfg->schema_13 &&
			OidIsValid(get_relname_relid("paynotify_expectation", cfg->nsp));
	}
	PG_CATCH();
	{
		/* keys parsed so far are on cfg; free them with the context */
		old = MemoryContextSwitchTo(TopMemoryContext);
		retired = lappend(retired, cfg);
		MemoryContextSwitchTo(old);
		current = NULL;
		stale = true;
		PG_RE_THROW();
	}
	PG_END_TRY();
	SPI_finish();
	return cfg;
}

/* A text column of the current SPI result as a palloc'd string (NULL for NULL). */
static char *
spi_text(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

/* Run a catalog query of the extension's own tables, read-only. */
static void
spi_query(PnConfig *cfg, const char *tmpl)
{
	if (SPI_execute(pn_expand_sql(cfg, tmpl), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: configuration query failed");
}

/*
 * The configuration tables: those the extension script gave a
 * paynotify_config_changed trigger (the one list of them), so that a
 * change to any of them makes every backend load a new generation.  On
 * Citus the list includes this node's shards of them (reference tables),
 * which carry a copy of the trigger.  SPI connected.
 */
int
pn_config_table_oids(Oid nsp, MemoryContext cxt, Oid **relids)
{
	char		sql[256];
	int			n;

	snprintf(sql, sizeof(sql),
			 "SELECT DISTINCT t.tgrelid FROM pg_catalog.pg_trigger t"
			 " JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid"
			 " WHERE p.proname = 'paynotify_config_changed' AND p.pronamespace = %u",
			 nsp);
	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: configuration query failed");
	n = SPI_processed;
	*relids = MemoryContextAlloc(cxt, sizeof(Oid) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		(*relids)[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
													  SPI_tuptable->tupdesc, 1, &isnull));
	}
	return n;
}

static void
load_config_tables(PnConfig *cfg)
{
	cfg->nconfig_relids = pn_config_table_oids(cfg->nsp, cfg->cxt, &cfg->config_relids);
}

/*
 * Whether the schema has what 1.3 added (the same update adds it all):
 * paynotify_outbox.detail, payment_record.sub_merchant and the table
 * paynotify_dispute.  A schema not yet updated to 1.3 has no place for
 * the events that carry a detail (notification, disputes), which the
 * pipeline then does not queue, nor for a dispute's record or a payment's
 * sub-merchant, which it then does not keep: as before.
 */
static bool
schema_has_13_columns(Oid nsp)
{
	Oid			outbox = get_relname_relid("paynotify_outbox", nsp);
	Oid			payments = get_relname_relid("payment_record", nsp);

	return OidIsValid(outbox) && get_attnum(outbox, "detail") != InvalidAttrNumber &&
		OidIsValid(payments) && get_attnum(payments, "sub_merchant") != InvalidAttrNumber &&
		OidIsValid(get_relname_relid("paynotify_dispute", nsp));
}

/*
 * Whether the outbox is distributed by Citus: then each event also takes its
 * order's next sequence value (PLAN_ORDER_SEQ_NEXT).  Read once per
 * generation; paynotify_distribute() makes the configuration tables
 * reference tables in the same call, which reloads every backend.  Without
 * Citus, nothing is read.
 */
static void
load_distribution(PnConfig *cfg)
{
	char		sql[256];
	Oid			outbox;
	int			rc;

	cfg->distributed = false;
	if (!OidIsValid(get_extension_oid("citus", true)))
		return;
	outbox = get_relname_relid("paynotify_outbox", cfg->nsp);
	if (!OidIsValid(outbox) || !OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)))
		return;
	snprintf(sql, sizeof(sql),
			 "SELECT 1 FROM pg_catalog.pg_dist_partition"
			 " WHERE logicalrelid = %u AND partmethod = 'h'", outbox);
	/* not read-only: a fresh snapshot (see pn_config_distributed) */
	rc = SPI_execute(sql, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "paynotify: configuration query failed (%d)", rc);
	cfg->distributed = (SPI_processed > 0);
}

/*
 * Whether the outbox is distributed, for what a call writes now.  The
 * generation in use may have gone stale since the call began: a call that
 * started with the configuration of one server and waited for the tables
 * paynotify_distribute() held goes on after it committed (the invalidation
 * arrives with the lock), and its event must take its order's sequence
 * value as every later one does (test/e2e/citus_distribute_live.sh).  The
 * distribution is then read again; on one server, nothing is read while the
 * generation is fresh.
 */
bool
pn_config_distributed(PnConfig *cfg)
{
	if (!cfg->distributed && stale && cfg == current)
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "paynotify: SPI_connect failed");
		load_distribution(cfg);
		SPI_finish();
	}
	return cfg->distributed;
}

/* Channels with their gateway and parsed settings. */
static void
load_channels(PnConfig *cfg)
{
	spi_query(cfg, "SELECT name, gateway, settings::text FROM @s.paynotify_channel ORDER BY name");
	cfg->nchannels = SPI_processed;
	cfg->channels = MemoryContextAllocZero(cfg->cxt,
										   sizeof(PnChannel) * Max(cfg->nchannels, 1));
	for (int i = 0; i < cfg->nchannels; i++)
	{
		PnChannel  *ch = &cfg->channels[i];
		char	   *gw = spi_text(i, 2);
		char	   *text;
		Jsonb	   *settings;
		MemoryContext old;

		ch->gw = pn_gateway_lookup(gw);
		if (ch->gw == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("channel \"%s\" has unknown gateway \"%s\"", spi_text(i, 1), gw)));
		text = spi_text(i, 3);
		settings = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
		old = MemoryContextSwitchTo(cfg->cxt);
		ch->name = pstrdup(spi_text(i, 1));
		ch->conf = ch->gw->load_settings(settings);
		MemoryContextSwitchTo(old);
		/* the settings may hold a secret (the APIv3 key): wipe our copies */
		explicit_bzero(text, strlen(text));
		explicit_bzero(settings, VARSIZE(settings));
	}
}

/* Every non-retired key, parsed once. */
static void
load_keys(PnConfig *cfg)
{
	spi_query(cfg,
			  "SELECT channel, key_id, material,"
			  " COALESCE(extract(epoch FROM not_before)::bigint, 0),"
			  " COALESCE(extract(epoch FROM not_after)::bigint, 0)"
			  " FROM @s.paynotify_key WHERE retired_at IS NULL ORDER BY channel, created_at, key_id");
	for (int c = 0; c < cfg->nchannels; c++)
	{
		PnChannel  *ch = &cfg->channels[c];
		int			n = 0;

		for (uint64 r = 0; r < SPI_processed; r++)
			if (strcmp(spi_text(r, 1), ch->name) == 0)
				n++;
		ch->keys = MemoryContextAllocZero(cfg->cxt, sizeof(PnKey) * Max(n, 1));
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			char	   *material;

			if (strcmp(spi_text(r, 1), ch->name) != 0)
				continue;
			ch->keys[ch->nkeys].key_id = MemoryContextStrdup(cfg->cxt, spi_text(r, 2));
			material = spi_text(r, 3);
			load_key(cfg, ch, &ch->keys[ch->nkeys], material,
					 strtoll(spi_text(r, 4), NULL, 10),
					 strtoll(spi_text(r, 5), NULL, 10));
			explicit_bzero(material, strlen(material));	/* a secret's copy */
			ch->nkeys++;
		}
	}
}

/* Parse one key into the cache: an EVP_PKEY, or the secret's bytes. */
static void
load_key(PnConfig *cfg, PnChannel *ch, PnKey *key, const char *material,
		 int64 not_before, int64 not_after)
{
	key->not_before = not_before;
	key->not_after = not_after;
	if (ch->gw->public_keys)
	{
		const char *err;

		key->pkey = pn_pkey_load(material, strlen(material), &err);
		if (key->pkey == NULL)
		{
			/* refused at paynotify_add_key; only a hand-edited row gets here */
			ereport(WARNING,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("paynotify: key \"%s\" of channel \"%s\" is unusable: %s",
							key->key_id, ch->name, err)));
			key->not_before = key->not_after = 1;	/* never active */
			return;
		}
		{
			MemoryContext old = MemoryContextSwitchTo(cfg->cxt);

			key->verifier = pn_rsa_verifier_new(key->pkey);
			cfg->pkeys = lappend(cfg->pkeys, key);
			MemoryContextSwitchTo(old);
		}
	}
	else
	{
		key->secret_len = strlen(material);
		key->secret = MemoryContextAlloc(cfg->cxt, key->secret_len + 1);
		memcpy(key->secret, material, key->secret_len + 1);
	}
}

/*
 * The orders table the business step acts on, if bound.  A binding that no
 * longer matches the table (renamed or dropped, a bound column renamed or
 * dropped) leaves the configuration unbound with the reason in
 * binding_error: every business step then fails with it, and is retried.
 */
static void
load_binding(PnConfig *cfg)
{
	spi_query(cfg,
			  "SELECT b.orders, b.key_column, b.status_column, b.amount_column,"
			  " pg_catalog.format_type(k.atttypid, k.atttypmod),"
			  " pg_catalog.format_type(s.atttypid, s.atttypmod),"
			  " pg_catalog.to_regclass(b.orders)::oid,"
			  " b.amount_column IS NULL OR a.attnum IS NOT NULL,"
			  " b.currency_column,"
			  " b.currency_column IS NULL OR c.attnum IS NOT NULL,"
			  " k.atttypid, k.atttypmod, k.attcollation"
			  " FROM @s.paynotify_binding b"
			  " LEFT JOIN pg_catalog.pg_attribute k ON k.attrelid = pg_catalog.to_regclass(b.orders)"
			  "  AND k.attname = b.key_column AND NOT k.attisdropped"
			  " LEFT JOIN pg_catalog.pg_attribute s ON s.attrelid = pg_catalog.to_regclass(b.orders)"
			  "  AND s.attname = b.status_column AND NOT s.attisdropped"
			  " LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = pg_catalog.to_regclass(b.orders)"
			  "  AND a.attname = b.amount_column AND NOT a.attisdropped"
			  " LEFT JOIN pg_catalog.pg_attribute c ON c.attrelid = pg_catalog.to_regclass(b.orders)"
			  "  AND c.attname = b.currency_column AND NOT c.attisdropped");
	if (SPI_processed == 0)
		return;
	if (spi_text(0, 7) == NULL || spi_text(0, 5) == NULL ||
		spi_text(0, 6) == NULL || strcmp(spi_text(0, 8), "t") != 0 ||
		strcmp(spi_text(0, 10), "t") != 0)
	{
		const char *what;

		if (spi_text(0, 7) == NULL)
			what = psprintf("the bound orders table %s no longer exists", spi_text(0, 1));
		else if (spi_text(0, 5) == NULL)
			what = psprintf("the bound orders table %s no longer has its key column \"%s\"",
							spi_text(0, 1), spi_text(0, 2));
		else if (spi_text(0, 6) == NULL)
			what = psprintf("the bound orders table %s no longer has its status column \"%s\"",
							spi_text(0, 1), spi_text(0, 3));
		else if (strcmp(spi_text(0, 8), "t") != 0)
			what = psprintf("the bound orders table %s no longer has its amount column \"%s\"",
							spi_text(0, 1), spi_text(0, 4));
		else
			what = psprintf("the bound orders table %s no longer has its currency column \"%s\"",
							spi_text(0, 1), spi_text(0, 9));
		cfg->binding_error = MemoryContextStrdup(cfg->cxt, what);
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("paynotify: %s", what),
				 errhint("Call paynotify_bind_orders again.")));
	}
	else
	{
		MemoryContext old = MemoryContextSwitchTo(cfg->cxt);
		char	   *amount = spi_text(0, 4);
		char	   *currency = spi_text(0, 9);

		cfg->bound = true;
		cfg->orders = pstrdup(spi_text(0, 1));
		cfg->key_col = pstrdup(quote_identifier(spi_text(0, 2)));
		cfg->key_col_name = pstrdup(spi_text(0, 2));
		cfg->status_col = pstrdup(quote_identifier(spi_text(0, 3)));
		cfg->status_col_name = pstrdup(spi_text(0, 3));
		cfg->has_amount = (amount != NULL);
		cfg->amount_expr = amount ? psprintf("%s::bigint", quote_identifier(amount))
			: pstrdup("NULL::bigint");
		cfg->currency_expr = currency ? psprintf("%s::text", quote_identifier(currency))
			: pstrdup("NULL::text");
		cfg->key_type = pstrdup(spi_text(0, 5));
		cfg->status_type = pstrdup(spi_text(0, 6));
		cfg->orders_oid = atooid(spi_text(0, 7));
		cfg->key_typid = atooid(spi_text(0, 11));
		cfg->key_typmod = atoi(spi_text(0, 12));
		cfg->key_collid = atooid(spi_text(0, 13));
		MemoryContextSwitchTo(old);
		pn_status_map_load(cfg->cxt, cfg->schema, &cfg->status_map);
	}
}

/*
 * The functions the bound orders table can run (paynotify_table_authors:
 * its triggers, constraints, generated columns, indexes, partition keys,
 * rules and the tables they write to, policies, the types of its columns
 * and the casts to and from them), walked in C (authors.c) with no query
 * to plan.  paynotify runs the
 * table's statements as the table's owner, so each function's owner must
 * have the rights of the table's owner, as a hook's owner must have its
 * registrant's: otherwise the binding is unusable, with the reason in
 * binding_error, and every business step fails with it (retried) until the
 * table or its code is given to the right roles.  A database still at 1.2
 * is checked the same way: the walk is the library's, and the library
 * runs the table's code as its owner whatever the schema's version.
 */
static void
load_table_authors(PnConfig *cfg)
{
	Oid			owner;
	MemoryContext walk;
	MemoryContext old;
	PnAuthor   *authors;
	int			nauthors;
	Oid		   *relids;
	int			nrelids;
	Oid		   *types;
	int			ntypes;
	char	   *offence = NULL;
	char	   *table;

	if (!cfg->bound)
		return;
	owner = pn_relation_owner(cfg->orders_oid);
	walk = AllocSetContextCreate(CurrentMemoryContext, "paynotify table authors",
								 ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(walk);
	authors = pn_table_authors(cfg->orders_oid, &nauthors, &relids, &nrelids, &types, &ntypes);
	MemoryContextSwitchTo(old);
	table = psprintf("the bound orders table %s", cfg->orders);
	if (nauthors < 0)
		offence = pn_author_offence(table, cfg->orders_oid, NULL);
	cfg->nauthors = 0;
	cfg->author_hashes = MemoryContextAlloc(cfg->cxt, sizeof(uint32) * Max(nauthors, 1));
	cfg->ntypes = ntypes;
	cfg->type_hashes = MemoryContextAlloc(cfg->cxt, sizeof(uint32) * Max(ntypes, 1));
	for (int i = 0; i < ntypes; i++)
		cfg->type_hashes[i] = GetSysCacheHashValue1(TYPEOID, ObjectIdGetDatum(types[i]));
	for (int i = 0; i < nauthors; i++)
	{
		if (authors[i].classid == ProcedureRelationId)
			cfg->author_hashes[cfg->nauthors++] =
				GetSysCacheHashValue1(PROCOID, ObjectIdGetDatum(authors[i].objid));
		if (offence == NULL && !pn_author_trusted(&authors[i], owner))
			offence = pn_author_offence(table, cfg->orders_oid, &authors[i]);
	}
	/*
	 * A change of any relation whose code the table runs (a trigger given
	 * to the table a rule writes to, a partition attached) loads the
	 * configuration again: config_inval_callback watches orders_relids.
	 */
	old = MemoryContextSwitchTo(cfg->cxt);
	for (int i = 0; i < nrelids; i++)
		cfg->orders_relids = lappend_oid(cfg->orders_relids, relids[i]);
	/*
	 * And so does a change of the relation of a composite type the code
	 * reaches: an attribute (a column of a table's row type) added, of a
	 * domain, changes no pg_type row the walk reached.
	 */
	for (int i = 0; i < ntypes; i++)
	{
		Oid			typrelid = get_typ_typrelid(types[i]);

		if (OidIsValid(typrelid))
			cfg->orders_relids = lappend_oid(cfg->orders_relids, typrelid);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(walk);
	if (offence == NULL)
		return;
	cfg->bound = false;
	cfg->binding_error = MemoryContextStrdup(cfg->cxt, offence);
	ereport(WARNING,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("paynotify: %s", offence),
			 errdetail("paynotify reads and moves orders as the table's owner, and that code would run with the owner's rights."),
			 errhint("Give the table to a role whose rights the code's owners have (ALTER TABLE ... OWNER TO), or the code to the table's owner.")));
}

/*
 * The binding's status_values: paynotify's state names → the table's
 * values, in cxt.  For the configuration and for the guard's own cache.
 * SPI connected.
 */
void
pn_status_map_load(MemoryContext cxt, const char *schema, PnStatusMap *map)
{
	char	   *sql = psprintf("SELECT v.key, v.value OPERATOR(pg_catalog.#>>) '{}'"
							   " FROM %s.paynotify_binding b,"
							   " pg_catalog.jsonb_each(b.status_values) v ORDER BY 1",
							   schema);

	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: configuration query failed");
	map->n = SPI_processed;
	map->names = MemoryContextAlloc(cxt, sizeof(char *) * Max(map->n, 1));
	map->values = MemoryContextAlloc(cxt, sizeof(char *) * Max(map->n, 1));
	for (int i = 0; i < map->n; i++)
	{
		char	   *v = spi_text(i, 2);

		map->names[i] = MemoryContextStrdup(cxt, spi_text(i, 1));
		map->values[i] = MemoryContextStrdup(cxt, v ? v : "");
	}
}

/*
 * The orders table's value for one of paynotify's states: the state itself
 * when there is no status_values mapping, an error when the mapping leaves
 * the state out.
 */
const char *
pn_status_value(const PnStatusMap *map, const char *state)
{
	if (map->n == 0)
		return state;
	for (int i = 0; i < map->n; i++)
		if (strcmp(map->names[i], state) == 0)
			return map->values[i];
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("order state \"%s\" has no value in the binding's status_values", state),
			 errhint("Call paynotify_bind_orders again with a value for it.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * paynotify's state for a value of the orders table's status column: the
 * value's own text when no mapping names it.
 */
const char *
pn_status_name(const PnStatusMap *map, const char *value)
{
	for (int i = 0; i < map->n; i++)
		if (strcmp(map->values[i], value) == 0)
			return map->names[i];
	return value;
}

/* The state machine's legal transitions. */
static void
load_transitions(PnConfig *cfg)
{
	cfg->transitions = pn_transition_pairs_load(cfg->cxt, cfg->schema, &cfg->ntransitions);
}

/*
 * The rows of paynotify_transition in schema, as (from, to) pairs in cxt;
 * *n of them.  For the configuration and for the guard's own cache.  SPI
 * connected.
 */
char	  **
pn_transition_pairs_load(MemoryContext cxt, const char *schema, int *n)
{
	char	   *sql = psprintf("SELECT from_state, to_state FROM %s.paynotify_transition", schema);
	char	  **pairs;

	if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify: configuration query failed");
	*n = SPI_processed;
	pairs = MemoryContextAlloc(cxt, sizeof(char *) * 2 * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		pairs[2 * i] = MemoryContextStrdup(cxt, spi_text(i, 1));
		pairs[2 * i + 1] = MemoryContextStrdup(cxt, spi_text(i, 2));
	}
	return pairs;
}

/*
 * User hooks, resolved by signature at each load (a function dropped and
 * created again is found under its new oid), with the role each runs as
 * (pn_hook_role; a database not updated to 1.3 yet: registered_by).
 * A hook whose function is missing stays in the list: running it fails the
 * business step (apply.c), which is retried, never silently skipped.
 */
static void
load_hooks(PnConfig *cfg)
{
	/* a database not updated to 1.3 yet has no registrant */
	bool		at_13 = pn_schema_at_13(cfg->nsp);

	spi_query(cfg,
			  psprintf("SELECT h.event, h.handler, pg_catalog.to_regprocedure(h.handler)::oid,"
					   " h.registered_by::oid, %s"
					   " FROM @s.paynotify_hook h ORDER BY h.event, h.created_at, h.handler",
					   at_13 ? "h.registrant::text, h.registered_on" : "NULL::text, NULL::bigint"));
	cfg->nhooks = SPI_processed;
	cfg->hooks = MemoryContextAllocZero(cfg->cxt, sizeof(PnHook) * Max(cfg->nhooks, 1));
	for (int i = 0; i < cfg->nhooks; i++)
	{
		char	   *fn = spi_text(i, 3);
		char	   *by = spi_text(i, 4);
		bool		on_null;
		Datum		on = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 6, &on_null);
		Oid			role = by ? atooid(by) : InvalidOid;

		if (at_13)
			role = pn_hook_role(role, spi_text(i, 5), !on_null,
								on_null ? 0 : DatumGetInt64(on));
		cfg->hooks[i].event = MemoryContextStrdup(cfg->cxt, spi_text(i, 1));
		cfg->hooks[i].handler = MemoryContextStrdup(cfg->cxt, spi_text(i, 2));
		cfg->hooks[i].fn = fn ? atooid(fn) : InvalidOid;
		cfg->hooks[i].hash = GetSysCacheHashValue1(PROCOID,
												   ObjectIdGetDatum(cfg->hooks[i].fn));
		cfg->hooks[i].role = role;
	}
}

/* Free a generation: OpenSSL keys, plans, wiped secrets, then the memory. */
static void
config_free(PnConfig *cfg)
{
	ListCell   *lc;

	foreach(lc, cfg->pkeys)
	{
		pn_rsa_verifier_free(((PnKey *) lfirst(lc))->verifier);
		pn_pkey_free(((PnKey *) lfirst(lc))->pkey);
	}
	pn_plans_free(cfg);
	for (int c = 0; c < cfg->nchannels; c++)
	{
		const PnChannel *ch = &cfg->channels[c];

		for (int k = 0; k < ch->nkeys; k++)
			if (ch->keys[k].secret)
				explicit_bzero(ch->keys[k].secret, ch->keys[k].secret_len);
		if (ch->gw != NULL && ch->gw->free_settings != NULL)
			ch->gw->free_settings(ch->conf);
	}
	MemoryContextDelete(cfg->cxt);
}

/* The configured channel called name, or NULL. */
const PnChannel *
pn_channel_find(PnConfig *cfg, const char *name)
{
	for (int i = 0; i < cfg->nchannels; i++)
		if (strcmp(cfg->channels[i].name, name) == 0)
			return &cfg->channels[i];
	return NULL;
}

/* ---------------------------------------------------------------------
 * SQL-callable
 * ---------------------------------------------------------------------
 */

/* paynotify_config_changed() trigger: tell every backend to reload. */
Datum
paynotify_config_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "paynotify: paynotify_config_changed: not called by trigger manager");
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}
