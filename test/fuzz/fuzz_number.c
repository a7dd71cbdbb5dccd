/*-------------------------------------------------------------------------
 *
 * fuzz_number.c
 *	  libFuzzer target: exact integers and decimal amounts (src/parse/scan.c),
 *	  checked against an independent reference on every input.
 *
 * The first input byte picks the scale (0..20, beyond the 18 the parser
 * takes); the rest is the text.  Invariants:
 *	- pn_scan_int64 accepts exactly 1..18 ASCII digits, with strtoll's value;
 *	- pn_scan_decimal accepts exactly (0|[1-9][0-9]*)(.[0-9]{1,scale})? with
 *	  at most 18 - scale integer digits, with the value of the digits read
 *	  as one integer scaled by 10^scale (computed in 128 bits);
 *	- an accepted amount re-printed (with all scale decimals, and with the
 *	  trailing zeros cut) parses back to the same value, and is below 10^18.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

static int
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The reference integer parser. */
static int
ref_int(const char *s, size_t len, long long *value)
{
	char		buf[32];

	if (len == 0 || len > 18)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!is_digit(s[i]))
			return 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	*value = strtoll(buf, NULL, 10);
	return 1;
}

/* The reference decimal parser: a grammar walk and 128-bit arithmetic. */
static int
ref_decimal(const char *s, size_t len, int scale, long long *value)
{
	size_t		i = 0,
				intdigits = 0,
				fracdigits = 0;
	__int128	v = 0;

	if (scale < 0 || scale > 18)
		return 0;
	if (i < len && s[i] == '0')
	{
		i++;
		intdigits = 1;
	}
	else
		while (i < len && is_digit(s[i]))
		{
			if (++intdigits <= 19)
				v = v * 10 + (s[i] - '0');
			i++;
		}
	if (intdigits == 0 || intdigits > (size_t) (18 - scale))
		return 0;
	if (i < len && s[i] == '.')
	{
		i++;
		while (i < len && is_digit(s[i]))
		{
			if (++fracdigits <= 19)
				v = v * 10 + (s[i] - '0');
			i++;
		}
		if (fracdigits == 0 || fracdigits > (size_t) scale)
			return 0;
	}
	if (i != len)
		return 0;
	for (size_t k = fracdigits; k < (size_t) scale; k++)
		v *= 10;
	require(v < (__int128) 1000000000000000000LL);
	*value = (long long) v;
	return 1;
}

/* Print value (minor units) at scale; cut trailing zeros when asked. */
static size_t
print_decimal(long long value, int scale, int cut, char *out, size_t outsize)
{
	long long	unit = 1;
	int			n;

	for (int i = 0; i < scale; i++)
		unit *= 10;
	if (scale == 0)
		n = snprintf(out, outsize, "%lld", value);
	else
		n = snprintf(out, outsize, "%lld.%0*lld", value / unit, scale, value % unit);
	require(n > 0 && (size_t) n < outsize);
	if (cut && scale > 0)
	{
		while (out[n - 1] == '0')
			n--;
		if (out[n - 1] == '.')
			n--;
		out[n] = '\0';
	}
	return (size_t) n;
}

int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	int			scale;
	size_t		len;
	char	   *s;
	int64_t		got;
	long long	want;
	int			ok,
				ref;

	if (size == 0)
		return 0;
	scale = data[0] % 21;
	len = size - 1;
	/* an exact-size heap copy, so ASan sees any read past the text */
	s = malloc(len ? len : 1);
	memcpy(s, data + 1, len);

	ok = pn_scan_int64(s, len, &got);
	ref = ref_int(s, len, &want);
	require(ok == ref);
	if (ok)
		require(got == want && got >= 0);

	ok = pn_scan_decimal(s, len, scale, &got);
	ref = ref_decimal(s, len, scale, &want);
	require(ok == ref);
	if (ok)
	{
		char		buf[64];
		int64_t		again;

		require(got == want && got >= 0 && got < 1000000000000000000LL);
		for (int cut = 0; cut < 2; cut++)
		{
			size_t		n = print_decimal(got, scale, cut, buf, sizeof(buf));

			require(pn_scan_decimal(buf, n, scale, &again) && again == got);
		}
	}
	free(s);
	return 0;
}
