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
#include <stddef.h>
#include <string.h>


/* ---------------------------------------------------------------------
 * base64
 * ---------------------------------------------------------------------
 */

/*
 * The 6-bit value of each standard base64 character plus one; 0 for every
 * other byte ('=' included).  A table rather than comparisons: the bytes
 * of a signature or a ciphertext are random, and a branch per character
 * that the processor cannot predict made this loop one of the costliest
 * of a WeChat delivery.
 */
static const unsigned char base64_table[256] = {
	['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7,
	['H'] = 8, ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
	['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
	['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26,
	['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33,
	['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
	['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47,
	['v'] = 48, ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52,
	['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57, ['5'] = 58, ['6'] = 59,
	['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};

bool
pn_scan_base64(const char *in, size_t inlen, unsigned char *out,
			   size_t outsize, size_t *outlen)
{
	const unsigned char *s = (const unsigned char *) in;
	size_t		pad;
	size_t		full;
	size_t		n;
	unsigned int a, b, c, d;

	if (inlen == 0 || inlen % 4 != 0 || inlen > INT_MAX ||
		out == NULL || outsize < PN_BASE64_DECODED_SIZE(inlen))
		return false;

	/*
	 * Padding is only "=" or "==" at the very end; anywhere else an "=" is
	 * an invalid character below (the table has no value for it).
	 */
	pad = s[inlen - 1] != '=' ? 0 : s[inlen - 2] != '=' ? 1 : 2;
	full = pad > 0 ? inlen - 4 : inlen;

	/* every group of 4 before the padded one: 3 bytes */
	n = 0;
	for (size_t i = 0; i < full; i += 4)
	{
		a = base64_table[s[i]];
		b = base64_table[s[i + 1]];
		c = base64_table[s[i + 2]];
		d = base64_table[s[i + 3]];
		if (a == 0 || b == 0 || c == 0 || d == 0)
			return false;
		a = ((a - 1) << 18) | ((b - 1) << 12) | ((c - 1) << 6) | (d - 1);
		out[n++] = (unsigned char) (a >> 16);
		out[n++] = (unsigned char) (a >> 8);
		out[n++] = (unsigned char) a;
	}
	if (pad > 0)
	{
		a = base64_table[s[full]];
		b = base64_table[s[full + 1]];
		c = pad == 1 ? base64_table[s[full + 2]] : 1;
		if (a == 0 || b == 0 || c == 0)
			return false;

		/*
		 * The last character before the padding carries bits past the end
		 * of the data: 4 of them with "==", 2 with "=".  They must be zero,
		 * or two spellings would decode to the same bytes.
		 */
		if (((pad == 2 ? b : c) - 1) & (pad == 2 ? 0x0f : 0x03))
			return false;
		a = ((a - 1) << 18) | ((b - 1) << 12) | ((c - 1) << 6);
		out[n++] = (unsigned char) (a >> 16);
		out[n++] = (unsigned char) (a >> 8);
		out[n++] = (unsigned char) a;
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
	size_t		i = 0;

	while (i < len)
	{
		char		c = text[i++];

		if (c == '"')
		{
			/*
			 * To the quote that closes the string: the first one after an
			 * even run of backslashes (each backslash escapes the character
			 * after it, so an odd run escapes the quote).  memchr, because a
			 * body's bytes are mostly inside strings (WeChat's ciphertext).
			 */
			for (;;)
			{
				const char *q = memchr(text + i, '"', len - i);
				size_t		k = 0;

				if (q == NULL)
					return true;	/* unterminated: the parser refuses it */
				while ((size_t) (q - text) - k > i && q[-1 - (ptrdiff_t) k] == '\\')
					k++;
				i = (size_t) (q - text) + 1;
				if (k % 2 == 0)
					break;
			}
		}
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
