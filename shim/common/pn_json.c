/*
 * pn_json.c
 *	  UTF-8 well-formedness and JSON string escaping, the same for every
 *	  shim program: what paynotify-cgi passes to jsonb and what
 *	  paynotify-send writes into bodies and reports.
 */
#include "pn_common.h"

#include <stdint.h>
#include <stdio.h>

/*
 * Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), 1 for an ASCII byte
 * (NUL included), 0 when s does not start a well-formed sequence within
 * avail bytes.
 */
size_t
pn_utf8_len(const char *s, size_t avail)
{
	const unsigned char *u = (const unsigned char *) s;
	size_t		k;
	uint32_t	cp;

	if (avail == 0)
		return 0;
	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xC2 && u[0] <= 0xDF)
		k = 2;
	else if (u[0] >= 0xE0 && u[0] <= 0xEF)
		k = 3;
	else if (u[0] >= 0xF0 && u[0] <= 0xF4)
		k = 4;
	else
		return 0;
	if (k > avail)
		return 0;
	cp = u[0] & (0x7F >> k);
	for (size_t i = 1; i < k; i++)
	{
		if ((u[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (u[i] & 0x3F);
	}
	if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
		(k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return k;
}

/* The escape of one byte below 0x20 or '"' or '\\' (JSON's short forms). */
static const char *
short_escape(unsigned char c)
{
	switch (c)
	{
		case '"':
			return "\\\"";
		case '\\':
			return "\\\\";
		case '\n':
			return "\\n";
		case '\r':
			return "\\r";
		case '\t':
			return "\\t";
		case '\b':
			return "\\b";
		case '\f':
			return "\\f";
		default:
			return NULL;
	}
}

/*
 * Appends s[0..n) as a quoted JSON string, escaped like Python's
 * json.dumps(ensure_ascii=False): well-formed UTF-8 stays raw (so generated
 * bodies match the gateways' byte for byte), control bytes become \uXXXX,
 * and a byte that is not UTF-8 (a foreign reply body) is written as the
 * Latin-1 character of the same value.  False when the buffer failed.
 */
bool
pn_json_escape(pn_buf *b, const char *s, size_t n)
{
	pn_buf_append(b, "\"", 1);
	for (size_t i = 0; i < n;)
	{
		unsigned char c = (unsigned char) s[i];
		const char *esc = short_escape(c);
		size_t		k;
		char		uesc[8];

		if (esc != NULL)
			pn_buf_append(b, esc, 2);
		else if (c >= 0x20 && (k = pn_utf8_len(s + i, n - i)) > 0)
		{
			pn_buf_append(b, s + i, k);
			i += k;
			continue;
		}
		else
		{
			snprintf(uesc, sizeof(uesc), "\\u%04x", c);
			pn_buf_append(b, uesc, 6);
		}
		i++;
	}
	return pn_buf_append(b, "\"", 1);
}
