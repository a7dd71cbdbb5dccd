/*-------------------------------------------------------------------------
 *
 * scan.c
 *	  Strict base64, the JSON depth pre-scan and number-token check, and
 *	  exact integer and decimal amounts, without PostgreSQL or OpenSSL.
 *
 * These are the scanners paynotify runs over request bytes itself (the JSON
 * grammar, the form and the signatures are left to PostgreSQL, form.c and
 * crypto.c).  They take lengths, never rely on a terminating NUL, write only
 * into the caller's buffers and never raise, so json.c and crypto.c wrap
 * them for the backend and test/fuzz/ links them alone.
 *
 *-------------------------------------------------------------------------
 */
#include "scan.h"

#include <limits.h>
#include <string.h>

static int	base64_value(unsigned char c);

/* ---------------------------------------------------------------------
 * base64
 * ---------------------------------------------------------------------
 */

/* The 6-bit value of a standard base64 character, or -1. */
static int
base64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

bool
pn_scan_base64(const char *in, size_t inlen, unsigned char *out,
			   size_t outsize, size_t *outlen)
{
	size_t		pad = 0;
	size_t		n;

	if (inlen == 0 || inlen % 4 != 0 || inlen > INT_MAX ||
		out == NULL || outsize < PN_BASE64_DECODED_SIZE(inlen))
		return false;
	for (size_t i = 0; i < inlen; i++)
	{
		unsigned char c = (unsigned char) in[i];

		if (c == '=')
		{
			if (i < inlen - 2)
				return false;
			pad++;
		}
		else if (pad > 0 || base64_value(c) < 0)
			return false;
	}

	/*
	 * The last character before the padding carries bits past the end of
	 * the data: 4 of them with "==", 2 with "=".  They must be zero, or two
	 * spellings would decode to the same bytes.
	 */
	if (pad > 0 &&
		(base64_value((unsigned char) in[inlen - pad - 1]) &
		 (pad == 2 ? 0x0f : 0x03)) != 0)
		return false;

	/* every character is valid now: 4 of them give 3 bytes */
	n = 0;
	for (size_t i = 0; i < inlen; i += 4)
	{
		uint32_t	v = 0;

		for (size_t j = 0; j < 4; j++)
			v = (v << 6) | (uint32_t) (in[i + j] == '=' ? 0 :
									   base64_value((unsigned char) in[i + j]));
		out[n++] = (unsigned char) (v >> 16);
		out[n++] = (unsigned char) (v >> 8);
		out[n++] = (unsigned char) v;
	}
	*outlen = n - pad;
	return true;
}

/* ---------------------------------------------------------------------
 * hex
 * ---------------------------------------------------------------------
 */

int
pn_scan_hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ---------------------------------------------------------------------
 * JSON
 * ---------------------------------------------------------------------
 */

bool
pn_json_depth_ok(const char *text, size_t len, int max_depth)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = text[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
		{
			if (++depth > max_depth)
				return false;
		}
		else if ((c == '}' || c == ']') && depth > 0)
			depth--;
	}
	return true;
}

bool
pn_json_number_ok(const char *token, size_t len)
{
	size_t		i = 0;
	int			exponent = 0;

	if (len > PN_JSON_MAX_NUMBER_TOKEN)
		return false;
	while (i < len && token[i] != 'e' && token[i] != 'E')
		i++;
	if (i == len)
		return true;			/* no exponent */
	i++;
	if (i < len && (token[i] == '+' || token[i] == '-'))
		i++;
	if (i == len)
		return false;
	for (; i < len; i++)
	{
		if (token[i] < '0' || token[i] > '9')
			return false;
		exponent = exponent * 10 + (token[i] - '0');
		if (exponent > PN_JSON_MAX_EXPONENT)
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Numbers
 * ---------------------------------------------------------------------
 */

bool
pn_scan_int64(const char *s, size_t len, int64_t *value)
{
	int64_t		v = 0;

	if (len == 0 || len > PN_INT_MAX_DIGITS)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*value = v;
	return true;
}

bool
pn_scan_decimal(const char *s, size_t len, int scale, int64_t *value)
{
	const char *dot;
	size_t		intlen,
				fraclen;
	int64_t		whole,
				frac = 0;

	if (len == 0 || scale < 0 || scale > PN_INT_MAX_DIGITS)
		return false;
	dot = memchr(s, '.', len);
	intlen = dot ? (size_t) (dot - s) : len;
	fraclen = dot ? len - intlen - 1 : 0;
	if (intlen == 0 || (dot && (fraclen == 0 || fraclen > (size_t) scale)))
		return false;
	if (intlen > 1 && s[0] == '0')
		return false;			/* "01.00" is not how gateways write amounts */
	if (intlen > (size_t) (PN_INT_MAX_DIGITS - scale) ||
		!pn_scan_int64(s, intlen, &whole))
		return false;
	if (dot && !pn_scan_int64(dot + 1, fraclen, &frac))
		return false;
	for (size_t i = fraclen; i < (size_t) scale; i++)
		frac *= 10;
	for (int i = 0; i < scale; i++)
		whole *= 10;
	*value = whole + frac;
	return true;
}
