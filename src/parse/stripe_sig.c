/*-------------------------------------------------------------------------
 *
 * stripe_sig.c
 *	  The Stripe-Signature header, parsed without PostgreSQL.
 *
 * Nothing here allocates: the caller passes the PnStripeSig, so the same
 * code runs inside a backend and inside a libFuzzer target (test/fuzz/).
 * Items are split on ',' and '=' without trimming, as the Stripe SDKs do;
 * everything else is strict (see stripe_sig.h).
 *
 *-------------------------------------------------------------------------
 */
#include "stripe_sig.h"
#include "scan.h"

#include <string.h>

static bool parse_lower_hex(const char *s, size_t len, unsigned char *out);
static PnSigStatus sig_item(const char *item, size_t len, PnStripeSig *sig,
							bool *seen_t);

/* ---------------------------------------------------------------------
 * Stripe-Signature
 * ---------------------------------------------------------------------
 */

/*
 * Exactly 64 lower-case hex digits into 32 bytes.  Stripe sends lower case
 * and the node/python SDKs compare strings, so upper case never matches.
 */
static bool
parse_lower_hex(const char *s, size_t len, unsigned char *out)
{
	if (len != 64)
		return false;
	for (size_t i = 0; i < 64; i++)
	{
		int			d = (s[i] >= 'A' && s[i] <= 'F') ? -1 :
			pn_scan_hex_value((unsigned char) s[i]);

		if (d < 0)
			return false;
		if (i % 2 == 0)
			out[i / 2] = (unsigned char) (d << 4);
		else
			out[i / 2] |= (unsigned char) d;
	}
	return true;
}

/* Take one key=value item of the header into sig. */
static PnSigStatus
sig_item(const char *item, size_t len, PnStripeSig *sig, bool *seen_t)
{
	const char *eq = memchr(item, '=', len);
	const char *val;
	size_t		klen,
				vlen;

	if (eq == NULL || memchr(eq + 1, '=', len - (size_t) (eq - item) - 1))
		return PN_SIG_BAD_ITEM;
	klen = (size_t) (eq - item);
	val = eq + 1;
	vlen = len - klen - 1;

	if (klen == 1 && item[0] == 't')
	{
		if (*seen_t)
			return PN_SIG_DUP_TIMESTAMP;
		*seen_t = true;
		if (vlen > PN_STRIPE_MAX_T_DIGITS || !pn_scan_int64(val, vlen, &sig->t_value))
			return PN_SIG_BAD_TIMESTAMP;
		sig->t = val;
		sig->t_len = vlen;
	}
	else if (klen == 2 && memcmp(item, "v1", 2) == 0)
	{
		if (sig->nv1 < PN_STRIPE_MAX_V1 &&
			parse_lower_hex(val, vlen, sig->v1[sig->nv1]))
			sig->nv1++;
		else
			sig->v1_skipped++;
	}
	else if (klen == 2 && memcmp(item, "v0", 2) == 0)
		sig->v0_count++;
	/* any other key: ignored, as every Stripe SDK does */
	return PN_SIG_OK;
}

/* See stripe_sig.h. */
PnSigStatus
pn_stripe_sig_parse(const char *hdr, size_t len, PnStripeSig *sig)
{
	size_t		pos = 0;
	int			items = 0;
	bool		seen_t = false;

	memset(sig, 0, sizeof(*sig));
	if (len == 0)
		return PN_SIG_EMPTY;
	for (;;)
	{
		const char *comma = memchr(hdr + pos, ',', len - pos);
		size_t		itemlen = comma ? (size_t) (comma - (hdr + pos)) : len - pos;
		PnSigStatus st;

		if (++items > PN_STRIPE_MAX_ITEMS)
			return PN_SIG_TOO_MANY;
		st = sig_item(hdr + pos, itemlen, sig, &seen_t);
		if (st != PN_SIG_OK)
			return st;
		if (comma == NULL)
			break;
		pos += itemlen + 1;
	}
	return seen_t ? PN_SIG_OK : PN_SIG_NO_TIMESTAMP;
}

/* Fixed text for a header status. */
const char *
pn_sig_status_message(PnSigStatus status)
{
	switch (status)
	{
		case PN_SIG_OK:
			return "ok";
		case PN_SIG_EMPTY:
			return "empty Stripe-Signature header";
		case PN_SIG_BAD_ITEM:
			return "Stripe-Signature item without exactly one '='";
		case PN_SIG_NO_TIMESTAMP:
			return "Stripe-Signature without t";
		case PN_SIG_BAD_TIMESTAMP:
			return "Stripe-Signature t is not a decimal timestamp";
		case PN_SIG_DUP_TIMESTAMP:
			return "Stripe-Signature t given twice";
		case PN_SIG_TOO_MANY:
			return "too many Stripe-Signature items";
	}
	return "invalid Stripe-Signature";
}
