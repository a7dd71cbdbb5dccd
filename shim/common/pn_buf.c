/*
 * pn_buf.c
 *	  The growable byte buffer of every shim program (see pn_common.h).
 */
#include "pn_common.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An empty buffer that already holds the empty string "" (or is failed). */
void
pn_buf_init(pn_buf *b)
{
	memset(b, 0, sizeof(*b));
	if (pn_buf_reserve(b, 0))
		b->data[0] = '\0';
}

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

/* Appends printf-formatted text. */
bool
pn_buf_appendf(pn_buf *b, const char *fmt,...)
{
	va_list		ap;
	bool		ok;

	va_start(ap, fmt);
	ok = pn_buf_vappendf(b, fmt, ap);
	va_end(ap);
	return ok;
}

/* pn_buf_appendf with a va_list. */
bool
pn_buf_vappendf(pn_buf *b, const char *fmt, va_list ap)
{
	va_list		again;
	int			n;

	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	if (n >= 0 && pn_buf_reserve(b, (size_t) n))
	{
		vsnprintf(b->data + b->len, (size_t) n + 1, fmt, again);
		b->len += (size_t) n;
	}
	va_end(again);
	return n >= 0 && !b->failed;
}

/* Empties the buffer, keeping its storage (and a failure). */
void
pn_buf_reset(pn_buf *b)
{
	b->len = 0;
	if (b->data != NULL)
		b->data[0] = '\0';
}

/* Hands the storage to the caller and leaves the buffer empty. */
char *
pn_buf_steal(pn_buf *b)
{
	char	   *p = b->data;

	memset(b, 0, sizeof(*b));
	return p;
}

/* Releases the buffer and leaves it empty and usable. */
void
pn_buf_free(pn_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}
