/*-------------------------------------------------------------------------
 *
 * gateway.c
 *	  The gateway registry, outcome names, and the parts of a reply that
 *	  every gateway shares.
 *
 * Adding a gateway: write src/verify_<name>.c defining a PnGateway and add
 * it to the table below.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "paynotify.h"

static const PnGateway *const gateways[] = {
	&pn_gateway_wxpay,
	&pn_gateway_alipay,
	&pn_gateway_stripe,
};

/* The gateway called name, or NULL. */
const PnGateway *
pn_gateway_lookup(const char *name)
{
	for (int i = 0; i < (int) lengthof(gateways); i++)
		if (strcmp(gateways[i]->name, name) == 0)
			return gateways[i];
	return NULL;
}

/* "wxpay, alipay, stripe", for error hints. */
const char *
pn_gateway_names(void)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < (int) lengthof(gateways); i++)
		appendStringInfo(&s, "%s%s", i ? ", " : "", gateways[i]->name);
	return s.data;
}

/* The reply row's spelling of an outcome. */
const char *
pn_outcome_name(PnOutcome outcome)
{
	switch (outcome)
	{
		case PN_PROCESSED:
			return "processed";
		case PN_DUPLICATE:
			return "duplicate";
		case PN_IGNORED:
			return "ignored";
		case PN_PARKED:
			return "parked";
		case PN_FAILED:
			return "failed";
		case PN_BUSY:
			return "busy";
		case PN_REJECTED:
			return "rejected";
		case PN_MALFORMED:
			return "malformed";
	}
	return "failed";
}

/*
 * A short, fixed message for a reason; this is all a reply says about why,
 * so no request or key bytes can leak through it.
 */
const char *
pn_reason_message(PnReason reason)
{
	switch (reason)
	{
		case PN_OK:
			return "ok";
		case PN_R_MALFORMED:
			return "malformed notification";
		case PN_R_TOO_LARGE:
			return "notification too large";
		case PN_R_UNSUPPORTED:
			return "unsupported algorithm";
		case PN_R_STALE:
			return "timestamp outside the allowed window";
		case PN_R_UNKNOWN_KEY:
			return "unknown key";
		case PN_R_BAD_SIGNATURE:
			return "invalid signature";
		case PN_R_DECRYPT:
			return "decryption failed";
		case PN_R_MISMATCH:
			return "not for this merchant";
		case PN_R_NO_CHANNEL:
			return "unknown channel";
	}
	return "error";
}

/* The HTTP status for a request that was not authenticated. */
int
pn_reason_status(PnReason reason)
{
	switch (reason)
	{
		case PN_R_TOO_LARGE:
			return 413;
		case PN_R_NO_CHANNEL:
			return 404;
		case PN_R_BAD_SIGNATURE:
		case PN_R_UNKNOWN_KEY:
		case PN_R_STALE:
			return 401;
		default:
			return 400;
	}
}

/* Whether an outcome acknowledges the notification (the gateway stops). */
bool
pn_outcome_acknowledges(PnOutcome outcome)
{
	return outcome == PN_PROCESSED || outcome == PN_DUPLICATE ||
		outcome == PN_IGNORED || outcome == PN_PARKED;
}

/*
 * The HTTP status of a failure reply: the business step failed → 500, the
 * notification is busy in another delivery → 503 (both retried by every
 * gateway), not authentic or malformed → the reason's 4xx.
 */
static int
failure_status(PnOutcome outcome, PnReason reason)
{
	if (outcome == PN_FAILED)
		return 500;
	if (outcome == PN_BUSY)
		return 503;
	return pn_reason_status(reason);
}

/* The fixed message of a failure reply (ASCII, no quotes: safe in JSON). */
static const char *
failure_message(PnOutcome outcome, PnReason reason)
{
	if (outcome == PN_FAILED)
		return "processing failed, retry later";
	if (outcome == PN_BUSY)
		return "busy, retry later";
	return pn_reason_message(reason);
}

/*
 * The HTTP reply for an outcome, in the gateway's wording: acknowledgements
 * are 200 with the gateway's success body; failures carry a status every
 * gateway retries on and a fixed message, never request or key bytes.
 */
void
pn_gateway_reply(const PnGateway *gw, PnOutcome outcome, PnReason reason, PnReply *reply)
{
	if (gw == NULL)
	{
		reply->status = pn_reason_status(reason);
		reply->content_type = "text/plain";
		reply->body = pn_reason_message(reason);
		return;
	}
	reply->content_type = gw->content_type;
	if (pn_outcome_acknowledges(outcome))
	{
		reply->status = 200;
		reply->body = gw->ack_body;
		return;
	}
	reply->status = failure_status(outcome, reason);
	reply->body = strstr(gw->fail_body, "%s")
		? psprintf(gw->fail_body, failure_message(outcome, reason))
		: gw->fail_body;
}
