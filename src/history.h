/*-------------------------------------------------------------------------
 *
 * history.h
 *	  What happened (history.c): order moves and deliveries.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PN_HISTORY_H
#define PN_HISTORY_H

#include "pipeline.h"
#include "utils/rel.h"

extern void pn_history_init(void);
extern void pn_history_own_move_done(PnConfig *cfg, const char *order_no, bool moved);
extern void pn_history_own_move_of(PnConfig *cfg, const char *order_no, const char *from,
								   const char *to);
extern void pn_history_guard_shard(Oid fn_oid, Relation shard, Oid orders_oid,
								   const char *order_no, const char *from, const char *to);
extern void pn_history_cause(const char *channel, const char *notify_id);
extern void pn_history_move(PnConfig *cfg, const char *order_no, const char *from,
							const char *to);
extern char *pn_history_before(PnConfig *cfg, const char *order_no, const char *state);
extern void pn_history_guard(Oid fn_oid, const char *order_no, const char *from,
							 const char *to);
/* the client a delivery is recorded under (X-Paynotify-Client), cut as kept */
extern char *pn_client_header(Jsonb *headers);
extern void pn_delivery_record(PnConfig *cfg, const PnChannel *ch, const PnNotice *n,
							   PnOutcome outcome, Jsonb *headers);

#endif							/* PN_HISTORY_H */
