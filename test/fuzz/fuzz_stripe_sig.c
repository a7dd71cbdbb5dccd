/*-------------------------------------------------------------------------
 *
 * fuzz_stripe_sig.c
 *	  libFuzzer target: the Stripe-Signature header parser (src/parse/stripe_sig.c),
 *	  with its invariants checked on every input.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "stripe_sig.h"

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	/* an exact-size heap copy, so ASan sees any read past the header */
	char	   *hdr = malloc(size ? size : 1);
	PnStripeSig sig;

	memcpy(hdr, data, size);
	if (pn_stripe_sig_parse(hdr, size, &sig) == PN_SIG_OK)
	{
		require(sig.t >= hdr && sig.t + sig.t_len <= hdr + size);
		require(sig.t_len >= 1 && sig.t_len <= PN_STRIPE_MAX_T_DIGITS);
		require(sig.t_value >= 0);
		require(sig.nv1 >= 0 && sig.nv1 <= PN_STRIPE_MAX_V1);
		require(sig.nv1 + sig.v1_skipped + sig.v0_count < PN_STRIPE_MAX_ITEMS);
		for (size_t i = 0; i < sig.t_len; i++)
			require(sig.t[i] >= '0' && sig.t[i] <= '9');
	}
	free(hdr);
	return 0;
}
