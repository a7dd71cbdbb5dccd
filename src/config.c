/*-------------------------------------------------------------------------
 *
 * config.c
 *	  The per-backend configuration cache (channels with parsed keys, the
 *	  orders binding, transitions, hooks), the SPI plans built from it, and
 *	  the configuration checkers called by the SQL configuration functions.
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

#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "paynotify.h"
#include "pnconfig.h"

PG_FUNCTION_INFO_V1(paynotify_config_changed);
PG_FUNCTION_INFO_V1(paynotify_check_settings);
PG_FUNCTION_INFO_V1(paynotify_check_key);

/* SQL of each plan; @s = extension schema, @o.. = the bound orders table */
typedef struct PlanSpec
{
	const char *sql;
	int			nargs;
	Oid			argtypes[9];
	bool		needs_orders;
} PlanSpec;

static const PlanSpec plan_specs[PN_NPLANS] = {
	[PLAN_LOG_GET] = {
		"SELECT status, payload = $3, notice FROM @s.payment_notify_log"
		" WHERE channel = $1 AND notify_id = $2",
		3, {TEXTOID, TEXTOID, JSONBOID}
	},
	[PLAN_LOG_INSERT] = {
		"INSERT INTO @s.payment_notify_log (channel, notify_id, order_no,"
		" event_type, payload, status, note, error_msg, notice, processed_at)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
		" CASE WHEN $6 <> 'failed' AND $6 <> 'parked' THEN pg_catalog.now() END)",
		9, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}
	},
	[PLAN_LOG_SEEN] = {
		"UPDATE @s.payment_notify_log SET delivery_count = delivery_count + 1,"
		" last_seen = pg_catalog.now() WHERE channel = $1 AND notify_id = $2",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_LOG_RETRY] = {
		"UPDATE @s.payment_notify_log SET status = $3, note = $4, error_msg = $5,"
		" notice = $6, attempts = attempts + $7, delivery_count = delivery_count + $8,"
		" last_seen = pg_catalog.now(),"
		" processed_at = CASE WHEN $3 <> 'failed' AND $3 <> 'parked' THEN pg_catalog.now() END"
		" WHERE channel = $1 AND notify_id = $2",
		8, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, INT4OID}
	},
	[PLAN_PARKED_LIST] = {
		"SELECT channel, notify_id, notice FROM @s.payment_notify_log"
		" WHERE order_no = $1 AND status = 'parked'"
		" AND ($2 IS NULL OR notice->>'trade_no' = $2) ORDER BY first_seen, notify_id",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_PAYMENT_INSERT] = {
		"INSERT INTO @s.payment_record (channel, trade_no, order_no, amount,"
		" currency, notify_id) VALUES ($1, $2, $3, $4, $5, $6)"
		" ON CONFLICT DO NOTHING",
		6, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID}
	},
	[PLAN_PAYMENT_GET] = {
		"SELECT order_no, amount FROM @s.payment_record"
		" WHERE channel = $1 AND trade_no = $2",
		2, {TEXTOID, TEXTOID}
	},
	/* every trade of the order (any channel): paid and refunded */
	[PLAN_ORDER_TRADES] = {
		"SELECT p.channel, p.trade_no, p.amount,"
		" (SELECT COALESCE(pg_catalog.sum(r.amount), 0)::bigint FROM @s.paynotify_refund r"
		"  WHERE r.channel = p.channel AND r.trade_no = p.trade_no AND r.status = 'succeeded')"
		" FROM @s.payment_record p WHERE p.order_no = $1",
		1, {TEXTOID}
	},
	[PLAN_REFUND_INSERT] = {
		"INSERT INTO @s.paynotify_refund (channel, refund_id, order_no, trade_no,"
		" amount, status, notify_id) VALUES ($1, $2, $3, $4, $5, $6, $7)"
		" ON CONFLICT DO NOTHING",
		7, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID}
	},
	[PLAN_REFUND_SUM] = {
		"SELECT COALESCE(pg_catalog.sum(amount), 0)::bigint"
		" FROM @s.paynotify_refund"
		" WHERE channel = $1 AND trade_no = $2 AND status = 'succeeded'",
		2, {TEXTOID, TEXTOID}
	},
	[PLAN_REFUND_GET] = {
		"SELECT status FROM @s.paynotify_refund WHERE channel = $1 AND refund_id = $2",
		2, {TEXTOID, TEXTOID}
	},
	/* a failed refund that succeeded after all (never the other way) */
	[PLAN_REFUND_SUCCEED] = {
		"UPDATE @s.paynotify_refund SET status = 'succeeded', amount = $3, trade_no = $4,"
		" notify_id = $5 WHERE channel = $1 AND refund_id = $2 AND status = 'failed'",
		5, {TEXTOID, TEXTOID, INT8OID, TEXTOID, TEXTOID}
	},
	[PLAN_OUTBOX_INSERT] = {
		"INSERT INTO @s.paynotify_outbox (event, channel, order_no, notify_id, amount)"
		" VALUES ($1, $2, $3, $4, $5) RETURNING id",
		5, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID}
	},
	[PLAN_ANOMALY_INSERT] = {
		"INSERT INTO @s.paynotify_anomaly (channel, notify_id, order_no, kind, detail)"
		" VALUES ($1, $2, $3, $4, $5)",
		5, {TEXTOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}
	},
	[PLAN_ORDER_GET] = {
		"SELECT @st::text, @am, @cu FROM @o WHERE @k = $1::@kt FOR UPDATE",
		1, {TEXTOID}, true
	},
	[PLAN_ORDER_MOVE] = {
		"UPDATE @o SET @st = $3::@stt WHERE @k = $1::@kt AND @st = $2::@stt",
		3, {TEXTOID, TEXTOID, TEXTOID}, true
	},
	[PLAN_ORDER_PAY] = {
		"UPDATE @o SET @st = $3::@stt WHERE @k = $1::@kt AND @st = $2::@stt"
		" AND ($4 IS NULL OR @am = $4)"
		" AND ($5 IS NULL OR @cu IS NULL OR pg_catalog.upper(@cu) = pg_catalog.upper($5))",
		5, {TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID}, true
	},
};

static PnConfig *current = NULL;
static List *retired = NIL;		/* generations to free at transaction end */
static bool stale = true;

static void config_inval_callback(Datum arg, Oid relid);
static void proc_inval_callback(Datum arg, int cacheid, uint32 hashvalue);
static void config_xact_callback(XactEvent event, void *arg);
static PnConfig *config_load(Oid nsp);
static void load_channels(PnConfig *cfg);
static void load_keys(PnConfig *cfg);
static void load_binding(PnConfig *cfg);
static void load_transitions(PnConfig *cfg);
static void load_hooks(PnConfig *cfg);
static void config_free(PnConfig *cfg);
static char *expand_sql(const PnConfig *cfg, const char *tmpl);
static char *spi_text(int row, int col);
static void load_key(PnConfig *cfg, PnChannel *ch, PnKey *key,
					 const char *material, int64 not_before, int64 not_after);

/* Register the invalidation and end-of-transaction callbacks. */
void
pn_config_init(void)
{
	CacheRegisterRelcacheCallback(config_inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, proc_inval_callback, (Datum) 0);
	RegisterXactCallback(config_xact_callback, NULL);
}

/* Any invalidation of one of our configuration tables (or of all) marks the cache stale. */
static void
config_inval_callback(Datum arg, Oid relid)
{
	if (current == NULL || relid == InvalidOid)
	{
		stale = true;
		return;
	}
	for (int i = 0; i < (int) lengthof(current->config_relids); i++)
		if (current->config_relids[i] == relid)
			stale = true;
}

/* A hook function changed or was dropped: resolve the hooks again. */
static void
proc_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (current == NULL)
		return;
	for (int i = 0; i < current->nhooks; i++)
		if (hashvalue == 0 || hashvalue == current->hooks[i].hash)
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
	static const char *const tables[] = {
		"paynotify_channel", "paynotify_key", "paynotify_binding",
		"paynotify_transition", "paynotify_hook"
	};

	cfg = MemoryContextAllocZero(cxt, sizeof(PnConfig));
	cfg->cxt = cxt;
	cfg->nsp = nsp;
	cfg->schema = MemoryContextStrdup(cxt, quote_identifier(get_namespace_name(nsp)));
	for (int i = 0; i < (int) lengthof(tables); i++)
		cfg->config_relids[i] = get_relname_relid(tables[i], nsp);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PG_TRY();
	{
		load_channels(cfg);
		load_keys(cfg);
		load_binding(cfg);
		load_transitions(cfg);
		load_hooks(cfg);
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
	if (SPI_execute(expand_sql(cfg, tmpl), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "paynotify configuration query failed");
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
		Jsonb	   *settings;
		MemoryContext old;

		ch->gw = pn_gateway_lookup(gw);
		if (ch->gw == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("channel \"%s\" has unknown gateway \"%s\"", spi_text(i, 1), gw)));
		settings = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
													  CStringGetDatum(spi_text(i, 3))));
		old = MemoryContextSwitchTo(cfg->cxt);
		ch->name = pstrdup(spi_text(i, 1));
		ch->conf = ch->gw->load_settings(settings);
		MemoryContextSwitchTo(old);
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
			if (strcmp(spi_text(r, 1), ch->name) != 0)
				continue;
			ch->keys[ch->nkeys].key_id = MemoryContextStrdup(cfg->cxt, spi_text(r, 2));
			load_key(cfg, ch, &ch->keys[ch->nkeys], spi_text(r, 3),
					 strtoll(spi_text(r, 4), NULL, 10),
					 strtoll(spi_text(r, 5), NULL, 10));
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
					 errmsg("key \"%s\" of channel \"%s\" is unusable: %s",
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

/* The orders table the business step acts on, if bound. */
static void
load_binding(PnConfig *cfg)
{
	spi_query(cfg,
			  "SELECT b.orders, b.key_column, b.status_column, b.amount_column,"
			  " pg_catalog.format_type(k.atttypid, NULL), pg_catalog.format_type(s.atttypid, NULL),"
			  " b.currency_column"
			  " FROM @s.paynotify_binding b"
			  " LEFT JOIN pg_catalog.pg_attribute k ON k.attrelid = pg_catalog.to_regclass(b.orders)"
			  "  AND k.attname = b.key_column AND NOT k.attisdropped"
			  " LEFT JOIN pg_catalog.pg_attribute s ON s.attrelid = pg_catalog.to_regclass(b.orders)"
			  "  AND s.attname = b.status_column AND NOT s.attisdropped");
	if (SPI_processed == 0)
		return;
	if (spi_text(0, 5) == NULL || spi_text(0, 6) == NULL)
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("the bound orders table %s no longer has its key or status column",
						spi_text(0, 1)),
				 errhint("Call paynotify_bind_orders again.")));
	else
	{
		MemoryContext old = MemoryContextSwitchTo(cfg->cxt);
		char	   *amount = spi_text(0, 4);
		char	   *currency = spi_text(0, 7);

		cfg->bound = true;
		cfg->orders = pstrdup(spi_text(0, 1));
		cfg->key_col = pstrdup(quote_identifier(spi_text(0, 2)));
		cfg->status_col = pstrdup(quote_identifier(spi_text(0, 3)));
		cfg->status_col_name = pstrdup(spi_text(0, 3));
		cfg->amount_expr = amount ? psprintf("%s::bigint", quote_identifier(amount))
			: pstrdup("NULL::bigint");
		cfg->currency_expr = currency ? psprintf("%s::text", quote_identifier(currency))
			: pstrdup("NULL::text");
		cfg->key_type = pstrdup(spi_text(0, 5));
		cfg->status_type = pstrdup(spi_text(0, 6));
		MemoryContextSwitchTo(old);
	}
}

/* The state machine's legal transitions. */
static void
load_transitions(PnConfig *cfg)
{
	spi_query(cfg, "SELECT from_state, to_state FROM @s.paynotify_transition");
	cfg->ntransitions = SPI_processed;
	cfg->transitions = MemoryContextAlloc(cfg->cxt,
										  sizeof(char *) * 2 * Max(cfg->ntransitions, 1));
	for (int i = 0; i < cfg->ntransitions; i++)
	{
		cfg->transitions[2 * i] = MemoryContextStrdup(cfg->cxt, spi_text(i, 1));
		cfg->transitions[2 * i + 1] = MemoryContextStrdup(cfg->cxt, spi_text(i, 2));
	}
}

/* User hooks, resolved to function oids (a dropped function is skipped, loudly). */
static void
load_hooks(PnConfig *cfg)
{
	spi_query(cfg,
			  "SELECT event, handler, pg_catalog.to_regprocedure(handler)::oid"
			  " FROM @s.paynotify_hook ORDER BY event, created_at, handler");
	cfg->nhooks = SPI_processed;
	cfg->hooks = MemoryContextAllocZero(cfg->cxt, sizeof(PnHook) * Max(cfg->nhooks, 1));
	for (int i = 0; i < cfg->nhooks; i++)
	{
		char	   *fn = spi_text(i, 3);

		cfg->hooks[i].event = MemoryContextStrdup(cfg->cxt, spi_text(i, 1));
		cfg->hooks[i].fn = fn ? atooid(fn) : InvalidOid;
		cfg->hooks[i].hash = GetSysCacheHashValue1(PROCOID,
												   ObjectIdGetDatum(cfg->hooks[i].fn));
		if (!OidIsValid(cfg->hooks[i].fn))
			ereport(WARNING,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("paynotify hook %s no longer exists", spi_text(i, 2))));
	}
}

/* Free a generation: OpenSSL keys, plans, then the memory. */
static void
config_free(PnConfig *cfg)
{
	ListCell   *lc;

	foreach(lc, cfg->pkeys)
	{
		pn_rsa_verifier_free(((PnKey *) lfirst(lc))->verifier);
		pn_pkey_free(((PnKey *) lfirst(lc))->pkey);
	}
	for (int i = 0; i < PN_NPLANS; i++)
		if (cfg->plans[i] != NULL)
			SPI_freeplan(cfg->plans[i]);
	for (int c = 0; c < cfg->nchannels; c++)
		for (int k = 0; k < cfg->channels[c].nkeys; k++)
			if (cfg->channels[c].keys[k].secret)
				explicit_bzero(cfg->channels[c].keys[k].secret,
							   cfg->channels[c].keys[k].secret_len);
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

/* Replace @s, @o, @k, @kt, @st, @stt, @am and @cu in a plan template. */
static char *
expand_sql(const PnConfig *cfg, const char *tmpl)
{
	StringInfoData s;
	static const struct
	{
		const char *tok;
		int			field;
	}			toks[] = {
		/* longest first: @stt before @st, @kt before @k */
		{"@stt", 5}, {"@st", 4}, {"@kt", 3}, {"@k", 2}, {"@am", 6}, {"@cu", 7}, {"@s", 0}, {"@o", 1}
	};

	initStringInfo(&s);
	for (const char *p = tmpl; *p;)
	{
		bool		done = false;

		if (*p == '@')
		{
			for (int i = 0; i < (int) lengthof(toks) && !done; i++)
			{
				size_t		len = strlen(toks[i].tok);
				const char *val = NULL;

				if (strncmp(p, toks[i].tok, len) != 0)
					continue;
				switch (toks[i].field)
				{
					case 0: val = cfg->schema; break;
					case 1: val = cfg->orders; break;
					case 2: val = cfg->key_col; break;
					case 3: val = cfg->key_type; break;
					case 4: val = cfg->status_col; break;
					case 5: val = cfg->status_type; break;
					case 6: val = cfg->amount_expr; break;
					case 7: val = cfg->currency_expr; break;
				}
				appendStringInfoString(&s, val);
				p += len;
				done = true;
			}
		}
		if (!done)
			appendStringInfoChar(&s, *p++);
	}
	return s.data;
}

/* A prepared plan, built once per configuration generation. */
SPIPlanPtr
pn_plan(PnConfig *cfg, PnPlanId id)
{
	const PlanSpec *spec = &plan_specs[id];
	SPIPlanPtr	plan;

	if (cfg->plans[id] != NULL)
		return cfg->plans[id];
	if (spec->needs_orders && !cfg->bound)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no orders table is bound"),
				 errhint("Call paynotify_bind_orders first.")));
	plan = SPI_prepare(expand_sql(cfg, spec->sql), spec->nargs, (Oid *) spec->argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(plan);
	cfg->plans[id] = plan;
	return plan;
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
		elog(ERROR, "paynotify_config_changed: not called by trigger manager");
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}

/* paynotify_check_settings(gateway text, settings jsonb) returns void */
Datum
paynotify_check_settings(PG_FUNCTION_ARGS)
{
	char	   *gwname = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Jsonb	   *settings = PG_GETARG_JSONB_P(1);
	const PnGateway *gw = pn_gateway_lookup(gwname);

	if (gw == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown gateway \"%s\"", gwname),
				 errhint("Gateways are %s.", pn_gateway_names())));
	if (!JB_ROOT_IS_OBJECT(settings))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings must be a JSON object")));
	(void) gw->load_settings(settings);
	PG_RETURN_VOID();
}

/*
 * paynotify_check_key(gateway text, key_id text, material text) returns text
 *
 * Public-key gateways: a PEM public key, an X.509 certificate, or bare
 * base64 of a SubjectPublicKeyInfo (as Alipay's console shows it), which is
 * returned wrapped in PEM.  Secret gateways: the secret as given.
 */
Datum
paynotify_check_key(PG_FUNCTION_ARGS)
{
	const PnGateway *gw = pn_gateway_lookup(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	char	   *key_id = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *material = text_to_cstring(PG_GETARG_TEXT_PP(2));

	if (gw == NULL)
		elog(ERROR, "unknown gateway");
	if (key_id[0] == '\0' || strlen(key_id) > 128 ||
		!pg_verify_mbstr(PG_SQL_ASCII, key_id, strlen(key_id), true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key id must be 1 to 128 characters")));
	if (gw->public_keys)
	{
		const char *err;
		void	   *pkey;
		char	   *trimmed = material;

		while (*trimmed == ' ' || *trimmed == '\n' || *trimmed == '\r' || *trimmed == '\t')
			trimmed++;
		if (strncmp(trimmed, "-----BEGIN", 10) != 0)
		{
			StringInfoData pem;
			int			len = strlen(trimmed);

			while (len > 0 && strchr(" \r\n\t", trimmed[len - 1]))
				len--;
			initStringInfo(&pem);
			appendStringInfoString(&pem, "-----BEGIN PUBLIC KEY-----\n");
			for (int i = 0; i < len; i += 64)
				appendStringInfo(&pem, "%.*s\n", Min(64, len - i), trimmed + i);
			appendStringInfoString(&pem, "-----END PUBLIC KEY-----\n");
			material = pem.data;
		}
		pkey = pn_pkey_load(material, strlen(material), &err);
		if (pkey == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid key material for key \"%s\": %s", key_id, err),
					 errhint("Give a PEM public key (-----BEGIN PUBLIC KEY-----) or an X.509 certificate.")));
		pn_pkey_free(pkey);
	}
	if (gw->check_key)
		gw->check_key(key_id, material);
	PG_RETURN_TEXT_P(cstring_to_text(material));
}
