/*-------------------------------------------------------------------------
 *
 * stripe_sig.h
 *	  The Stripe-Signature header parser, which needs no PostgreSQL.
 *
 * stripe_sig.c includes neither postgres.h nor OpenSSL, allocates nothing,
 * and writes only into the PnStripeSig its caller provides, so the fuzz
 * target in test/fuzz/ links it alone.  Every function is total: any input
 * bytes give a result code, never a crash, and every loop is bounded by the
 * input.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_STRIPE_SIG_H
#define PAYNOTIFY_STRIPE_SIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------- Stripe-Signature ---------- */

#define PN_STRIPE_MAX_ITEMS 32	/* items of any kind in one header */
#define PN_STRIPE_MAX_V1 8		/* usable v1 signatures kept */
#define PN_STRIPE_MAX_T_DIGITS 18

typedef enum PnSigStatus
{
	PN_SIG_OK = 0,
	PN_SIG_EMPTY,				/* empty header */
	PN_SIG_BAD_ITEM,			/* item without exactly one '=' */
	PN_SIG_NO_TIMESTAMP,		/* no t= */
	PN_SIG_BAD_TIMESTAMP,		/* t empty, not 1..18 decimal digits */
	PN_SIG_DUP_TIMESTAMP,		/* t= twice */
	PN_SIG_TOO_MANY				/* more than PN_STRIPE_MAX_ITEMS items */
} PnSigStatus;

/*
 * A parsed Stripe-Signature header.  t points into the header (the exact
 * bytes the HMAC covers); v1 holds the decoded signatures that were 64
 * lower-case hex digits.  v1 items of another shape, and v1 items past
 * PN_STRIPE_MAX_V1, are counted in v1_skipped; v0 items in v0_count.
 * Neither can ever match.
 */
typedef struct PnStripeSig
{
	const char *t;
	size_t		t_len;
	int64_t		t_value;
	int			nv1;
	unsigned char v1[PN_STRIPE_MAX_V1][32];
	int			v1_skipped;
	int			v0_count;
} PnStripeSig;

/*
 * Parse a Stripe-Signature header strictly: comma-separated key=value
 * items, no whitespace trimming, each item exactly one '=', exactly one
 * decimal t, any number of v1, unknown keys ignored.
 */
extern PnSigStatus pn_stripe_sig_parse(const char *hdr, size_t len,
									   PnStripeSig *sig);

/* A short fixed description of a status, for logs. */
extern const char *pn_sig_status_message(PnSigStatus status);

#endif							/* PAYNOTIFY_STRIPE_SIG_H */
