/*
 * cgi_json.c
 *	  The one place where the shim escapes output: JSON strings for the
 *	  headers object, plus the UTF-8 check that decides whether a value can
 *	  be put into jsonb at all, and the growable buffer both use.
 *
 * PostgreSQL's jsonb rejects invalid UTF-8 and \u0000, so a value is checked
 * before it is escaped; the caller refuses the request when it is not valid
 * (see cgi_request.c) rather than altering a header silently.
 */
#include "cgi.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Makes room for extra more bytes plus a terminating NUL; false (and the
 * buffer marked failed) when out of memory.
 */
bool
pn_buf_reserve(pn_buf *b, size_t extra)
{
	size_t		cap;
	char	   *p;

	if (b->failed || extra > SIZE_MAX / 4 - b->len)
	{
		b->failed = true;
		return false;
	}
	if (b->len + extra + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	p = realloc(b->data, cap);
	if (p == NULL)
	{
		b->failed = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

/* Appends n bytes, keeping the contents NUL-terminated. */
bool
pn_buf_append(pn_buf *b, const void *data, size_t n)
{
	if (!pn_buf_reserve(b, n))
		return false;
	if (n > 0)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return true;
}

/* Releases the buffer and leaves it empty and usable. */
void
pn_buf_free(pn_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

/*
 * UTF-8 well-formedness per RFC 3629 (table 3-7 of the Unicode standard):
 * for each lead byte, the number of continuation bytes and the allowed range
 * of the first one; the rest are 80..BF.  This rejects overlong forms,
 * surrogates and code points above U+10FFFF, exactly what the server
 * rejects.  NUL is refused too, as jsonb cannot hold \u0000.
 */
typedef struct utf8_lead
{
	unsigned char lo;			/* lead byte range */
	unsigned char hi;
	unsigned char ncont;		/* continuation bytes that follow */
	unsigned char first_lo;		/* allowed range of the first of them */
	unsigned char first_hi;
} utf8_lead;

static const utf8_lead utf8_leads[] = {
	{0x01, 0x7F, 0, 0, 0},
	{0xC2, 0xDF, 1, 0x80, 0xBF},
	{0xE0, 0xE0, 2, 0xA0, 0xBF},
	{0xE1, 0xEC, 2, 0x80, 0xBF},
	{0xED, 0xED, 2, 0x80, 0x9F},
	{0xEE, 0xEF, 2, 0x80, 0xBF},
	{0xF0, 0xF0, 3, 0x90, 0xBF},
	{0xF1, 0xF3, 3, 0x80, 0xBF},
	{0xF4, 0xF4, 3, 0x80, 0x8F},
};

/* The table row for a lead byte, or NULL for a byte that cannot start one. */
static const utf8_lead *
utf8_find_lead(unsigned char c)
{
	for (size_t k = 0; k < sizeof(utf8_leads) / sizeof(utf8_leads[0]); k++)
		if (c >= utf8_leads[k].lo && c <= utf8_leads[k].hi)
			return &utf8_leads[k];
	return NULL;
}

/* True when s[0..n) is well-formed UTF-8 without NUL. */
bool
pn_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		i = 0;

	while (i < n)
	{
		const utf8_lead *lead = utf8_find_lead(p[i]);

		if (lead == NULL || lead->ncont >= n - i)
			return false;
		if (lead->ncont > 0 &&
			(p[i + 1] < lead->first_lo || p[i + 1] > lead->first_hi))
			return false;
		for (size_t k = 2; k <= lead->ncont; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xBF)
				return false;
		i += 1 + (size_t) lead->ncont;
	}
	return true;
}

/*
 * Appends s[0..n) as a quoted JSON string.  The input must already have
 * passed pn_utf8_valid: bytes >= 0x80 are copied as they are, '"' and '\\'
 * are backslash-escaped and every other byte below 0x20 becomes \u00XX.
 */
bool
pn_json_string(pn_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t		run = 0;

	if (!pn_buf_append(b, "\"", 1))
		return false;
	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];
		char		esc[6];
		size_t		esc_len;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		/* flush the plain run before this byte */
		pn_buf_append(b, s + run, i - run);
		run = i + 1;
		if (c == '"' || c == '\\')
		{
			esc[0] = '\\';
			esc[1] = (char) c;
			esc_len = 2;
		}
		else
		{
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xF];
			esc_len = 6;
		}
		pn_buf_append(b, esc, esc_len);
	}
	pn_buf_append(b, s + run, n - run);
	return pn_buf_append(b, "\"", 1);
}
