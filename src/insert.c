/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  The log's and the payments' inserts, plain inside a business step on
 *	  one server: whether a step runs now, and the plain insert running.
 *
 * Below the files that insert (log.c, ledger.c) and the step that reads
 * their conflicts (step.c); above the plans (plans.c) and the
 * configuration (config.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "mb/pg_wchar.h"

#include "paynotify.h"
#include "pipeline.h"

/*
 * Inside a business step now (apply_call, step.c), where the log's and the
 * payment's inserts may be plain (plans.c), and the plain insert running
 * now, set by pn_insert_execute (below) around the statement: an error
 * raised while it is set is that statement's.  Both restored by
 * pn_apply_step (step.c) after every step.
 */
bool		pn_in_step = false;
PnPlainInsert pn_plain_insert = {NULL, ""};

/*
 * Run an INSERT ... ON CONFLICT DO NOTHING plan with args and nulls: inside
 * a business step on one server its plain variant (plans.c, plain_table),
 * with pn_plain_insert naming its table (and trade_no, a payment's, at most
 * 255 bytes of it) while it runs, so that pn_apply_step (step.c) reads a
 * unique violation the statement raises as the conflict.  The SPI result
 * code.
 */
int
pn_insert_execute(PnConfig *cfg, PnPlanId id, const char *trade_no, Datum *args,
				  const char *nulls)
{
	const char *table = pn_plan_plain_table(id);
	bool		plain = pn_in_step && table != NULL && !pn_config_distributed(cfg);
	SPIPlanPtr	plan = plain ? pn_plan_plain(cfg, id) : pn_plan(cfg, id);
	int			rc;

	if (plain)
	{
		pn_plain_insert.table = table;
		pn_plain_insert.trade_no[0] = '\0';
		/* (a notice stored before ids were bounded may hold a longer one) */
		if (trade_no != NULL)
			strlcpy(pn_plain_insert.trade_no, trade_no,
					pg_mbcliplen(trade_no, strlen(trade_no),
								 sizeof(pn_plain_insert.trade_no) - 1) + 1);
	}
	rc = SPI_execute_plan(plan, args, nulls, false, 0);
	pn_plain_insert.table = NULL;
	return rc;
}
