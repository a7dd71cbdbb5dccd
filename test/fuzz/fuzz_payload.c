/*-------------------------------------------------------------------------
 *
 * fuzz_payload.c
 *	  libFuzzer target: the parsers of paynotify-send --payload
 *	  (shim/send/send_payload.c), with their invariants checked on every
 *	  input:
 *
 *	  - the JSON reader (pn_json_check) accepts exactly what a reference
 *	    written apart (an explicit-stack automaton) accepts: RFC 8259 with
 *	    strings of well-formed UTF-8 (no overlong forms, surrogates or code
 *	    points above U+10FFFF), no raw control characters, the escapes
 *	    \" \\ \/ \b \f \n \r \t \uXXXX (lone surrogate escapes allowed, as
 *	    Python's json module does), objects and arrays nested at most
 *	    PN_JSON_MAX_DEPTH deep; the verdict and the byte where it stopped
 *	    are the same with and without output;
 *	  - what it accepts, it copies compact: the input with the whitespace
 *	    outside strings dropped and every other byte kept; that output is
 *	    accepted again and is a fixed point; wrapped in arrays up to the
 *	    nesting limit it is accepted, one array more is refused;
 *	  - member lookup (pn_json_member) in the compact output agrees with a
 *	    reference walk for every object (names as written, raw bytes): a
 *	    name present once gives its member's and value's spans, a name
 *	    present twice is -1, an absent name 1, a value that is not an
 *	    object -1;
 *	  - pn_payload_parse of the input as each gateway's payload: Stripe's
 *	    is accepted iff the JSON is, and kept byte for byte; WeChat Pay's
 *	    is accepted iff the JSON is and it is an object whose unique
 *	    resource object has no ciphertext, a unique non-empty nonce and a
 *	    unique associated_data (strings without escapes that fit) and a
 *	    unique plaintext object; then head, "plaintext":<plaintext> and
 *	    tail are the compact JSON, and head "ciphertext":"..." tail is
 *	    valid JSON; Alipay's line agrees with a reference decoder: one
 *	    non-empty line (end of line bytes at its end dropped) of name=value
 *	    parameters split at '&', no empty name, '+' a space, %XX with two
 *	    hex digits, no NUL, names and values UTF-8, no sign, no name twice,
 *	    at most PN_MAX_PARAMS, charset utf-8 or absent (values as decoded)
 *	    or GBK, gb2312, gb18030 (values converted, refused only when one
 *	    is not representable); the ids for reports come from the file;
 *	  - a refused payload logs why and leaves the payload empty; an
 *	    accepted one logs nothing.  Inputs are copied to buffers of their
 *	    exact size, so ASan sees any read past them.
 *
 *-------------------------------------------------------------------------
 */
#include <iconv.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "send_payload.h"

int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
#define require(cond) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "fuzz_payload.c:%d: %s does not hold\n", __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

/* pn_log: counted, formatted (so its arguments are checked), not written. */
static int	n_logged;

void
pn_log(const char *fmt,...)
{
	char		line[1024];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	require(line[0] != '\0');
	n_logged++;
}

/* ---- a reference JSON reader ----------------------------------------------- */

/* Length of the well-formed UTF-8 character at s[0..n), 0 if none. */
static size_t
ref_utf8(const unsigned char *s, size_t n)
{
	unsigned long cp;
	size_t		len;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0)
		len = 2, cp = s[0] & 0x1F;
	else if ((s[0] & 0xF0) == 0xE0)
		len = 3, cp = s[0] & 0x0F;
	else if ((s[0] & 0xF8) == 0xF0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
	{
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		(cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return len;
}

static int
ref_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool
ref_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The end of the string at s[i] == '"', or 0 when it is not one. */
static size_t
ref_string(const unsigned char *s, size_t n, size_t i)
{
	for (i++; i < n;)
	{
		size_t		k;

		if (s[i] == '"')
			return i + 1;
		if (s[i] == '\\')
		{
			if (i + 1 >= n)
				return 0;
			if (s[i + 1] == 'u')
			{
				if (i + 5 >= n)
					return 0;
				for (int d = 2; d < 6; d++)
					if (ref_hex(s[i + d]) < 0)
						return 0;
				i += 6;
			}
			else if (s[i + 1] != '\0' && strchr("\"\\/bfnrt", s[i + 1]))
				i += 2;
			else
				return 0;
			continue;
		}
		if (s[i] < 0x20 || (k = ref_utf8(s + i, n - i)) == 0)
			return 0;
		i += k;
	}
	return 0;
}

static size_t
ref_digits(const unsigned char *s, size_t n, size_t i)
{
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	return i;
}

/* The end of the scalar (number or literal) at s[i], or 0. */
static size_t
ref_scalar(const unsigned char *s, size_t n, size_t i)
{
	size_t		j;

	if (s[i] == 't' || s[i] == 'f' || s[i] == 'n')
	{
		const char *w = s[i] == 't' ? "true" : s[i] == 'f' ? "false" : "null";
		size_t		len = strlen(w);

		return n - i >= len && memcmp(s + i, w, len) == 0 ? i + len : 0;
	}
	if (s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if ((j = ref_digits(s, n, i)) > i)
		i = j;
	else
		return 0;
	if (i < n && s[i] == '.')
	{
		if ((j = ref_digits(s, n, i + 1)) == i + 1)
			return 0;
		i = j;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E'))
	{
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if ((j = ref_digits(s, n, i)) == i)
			return 0;
		i = j;
	}
	return i;
}

/* Whether s[0..n) is one JSON text; *maxdepth is its deepest nesting. */
static bool
ref_json(const unsigned char *s, size_t n, int *maxdepth)
{
	enum
	{
		VALUE, FIRST_VALUE, FIRST_KEY, KEY, AFTER
	}			st = VALUE;
	char		stack[PN_JSON_MAX_DEPTH];
	int			sp = 0;
	size_t		i = 0,
				j;

	*maxdepth = 0;
	for (;;)
	{
		while (i < n && ref_ws(s[i]))
			i++;
		if (st == AFTER && sp == 0)
			return i == n;
		if (i >= n)
			return false;
		switch (st)
		{
			case FIRST_VALUE:
				if (s[i] == ']')
				{
					sp--, i++, st = AFTER;
					break;
				}
				/* FALLTHROUGH */
			case VALUE:
				if (s[i] == '{' || s[i] == '[')
				{
					if (sp == PN_JSON_MAX_DEPTH)
						return false;
					stack[sp++] = s[i] == '{' ? '}' : ']';
					if (sp > *maxdepth)
						*maxdepth = sp;
					st = s[i] == '{' ? FIRST_KEY : FIRST_VALUE;
					i++;
				}
				else if (s[i] == '"')
				{
					if ((i = ref_string(s, n, i)) == 0)
						return false;
					st = AFTER;
				}
				else
				{
					if ((j = ref_scalar(s, n, i)) == 0)
						return false;
					i = j, st = AFTER;
				}
				break;
			case FIRST_KEY:
				if (s[i] == '}')
				{
					sp--, i++, st = AFTER;
					break;
				}
				/* FALLTHROUGH */
			case KEY:
				if (s[i] != '"' || (i = ref_string(s, n, i)) == 0)
					return false;
				while (i < n && ref_ws(s[i]))
					i++;
				if (i >= n || s[i] != ':')
					return false;
				i++, st = VALUE;
				break;
			case AFTER:
				if (s[i] == ',')
					i++, st = stack[sp - 1] == '}' ? KEY : VALUE;
				else if (s[i] == stack[sp - 1])
					i++, sp--;
				else
					return false;
				break;
		}
	}
}

/* Valid JSON without the whitespace outside strings, into out (n + 1 bytes). */
static size_t
ref_compact(const unsigned char *s, size_t n, char *out)
{
	size_t		k = 0;
	bool		in_str = false;

	for (size_t i = 0; i < n; i++)
	{
		if (in_str)
		{
			if (s[i] == '\\')
				out[k++] = (char) s[i++];
			else if (s[i] == '"')
				in_str = false;
		}
		else if (s[i] == '"')
			in_str = true;
		else if (ref_ws(s[i]))
			continue;
		out[k++] = (char) s[i];
	}
	out[k] = '\0';
	return k;
}

/* The end of the value at s[i] in compact valid JSON s[0..n). */
static size_t
ref_skip(const char *s, size_t n, size_t i)
{
	int			depth = 0;

	do
	{
		if (s[i] == '"')
		{
			for (i++; s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			i++;
		}
		else if (s[i] == '{' || s[i] == '[')
			depth++, i++;
		else if (s[i] == '}' || s[i] == ']')
			depth--, i++;
		else if (depth > 0 && (s[i] == ',' || s[i] == ':'))
			i++;
		else
			while (i < n && !strchr(",:]}", s[i]))
				i++;
	} while (depth > 0);
	return i;
}

#define MAX_MEMBERS 48

struct ref_member
{
	struct pn_span name;		/* with its quotes */
	struct pn_span member;
	struct pn_span val;
};

/* The members of the object at v (compact valid JSON), at most MAX_MEMBERS. */
static int
ref_members(const char *s, struct pn_span v, struct ref_member *m, bool *more)
{
	size_t		i = v.a + 1;
	int			k = 0;

	*more = false;
	while (s[i] != '}')
	{
		size_t		ne = ref_skip(s, v.b, i),
					ve = ref_skip(s, v.b, ne + 1);

		if (k == MAX_MEMBERS)
		{
			*more = true;
			break;
		}
		m[k].name = (struct pn_span) {i, ne};
		m[k].member = (struct pn_span) {i, ve};
		m[k].val = (struct pn_span) {ne + 1, ve};
		k++;
		i = ve;
		if (s[i] == ',')
			i++;
	}
	return k;
}

/* The member key of the object at v the reference's way: 0, 1, -1. */
static int
ref_member(const char *s, struct pn_span v, const char *key, struct pn_span *val)
{
	size_t		i = v.a + 1,
				klen = strlen(key);
	int			found = 0;

	if (s[v.a] != '{')
		return -1;
	while (s[i] != '}')
	{
		size_t		ne = ref_skip(s, v.b, i),
					ve = ref_skip(s, v.b, ne + 1);

		if (ne - i == klen + 2 && memcmp(s + i + 1, key, klen) == 0)
		{
			if (found++)
				return -1;
			*val = (struct pn_span) {ne + 1, ve};
		}
		i = ve;
		if (s[i] == ',')
			i++;
	}
	return found ? 0 : 1;
}

/* A string value without escapes shorter than size, or NULL. */
static bool
ref_plain(const char *s, struct pn_span v, size_t size)
{
	return s[v.a] == '"' && v.b - v.a - 2 < size &&
		memchr(s + v.a, '\\', v.b - v.a) == NULL;
}

/* The report id at a path the reference's way: the string, or "". */
static void
ref_path(const char *s, size_t n, const char *const *path, char *out, size_t size)
{
	struct pn_span v = {0, n};

	out[0] = '\0';
	for (; *path; path++)
		if (ref_member(s, v, *path, &v) != 0)
			return;
	if (ref_plain(s, v, size))
	{
		memcpy(out, s + v.a + 1, v.b - v.a - 2);
		out[v.b - v.a - 2] = '\0';
	}
}

/* ---- JSON: the reader and member lookup ------------------------------------ */

static int	n_objects;
static size_t budget;			/* bytes pn_json_member may still walk */

/* pn_json_member against the reference for the value at v and what it holds. */
static void
check_members(const char *s, size_t n, struct pn_span v)
{
	struct ref_member m[MAX_MEMBERS];
	struct pn_span mm,
				mv;
	bool		more;
	int			k;

	if (s[v.a] != '{')
	{
		require(pn_json_member(s, v, "a", &mm, &mv) == -1);
		if (s[v.a] == '[')
			for (size_t i = v.a + 1; s[i] != ']' && n_objects < 64;)
			{
				size_t		e = ref_skip(s, n, i);

				check_members(s, n, (struct pn_span) {i, e});
				i = s[e] == ',' ? e + 1 : e;
			}
		return;
	}
	if (++n_objects > 64)
		return;
	k = ref_members(s, v, m, &more);
	if ((v.b - v.a) * (size_t) (k + 1) > budget)
		return;
	budget -= (v.b - v.a) * (size_t) (k + 1);
	require(pn_json_member(s, v, "\x01", &mm, &mv) == 1);
	for (int i = 0; i < k; i++)
	{
		size_t		len = m[i].name.b - m[i].name.a - 2;
		char	   *key = malloc(len + 1);
		int			dup = 0,
					rc;

		memcpy(key, s + m[i].name.a + 1, len);
		key[len] = '\0';
		for (int j = 0; j < k; j++)
			if (m[j].name.b - m[j].name.a == m[i].name.b - m[i].name.a &&
				memcmp(s + m[j].name.a, s + m[i].name.a, len + 2) == 0)
				dup++;
		rc = pn_json_member(s, v, key, &mm, &mv);
		if (dup > 1)
			require(rc == -1);
		else if (!more)
		{
			require(rc == 0);
			require(mm.a == m[i].member.a && mm.b == m[i].member.b);
			require(mv.a == m[i].val.a && mv.b == m[i].val.b);
		}
		else
			require(rc != 1);
		free(key);
		check_members(s, n, m[i].val);
	}
}

/* Whether the JSON at s[0..n) is valid, with every check of the reader. */
static bool
check_json(const unsigned char *data, size_t size)
{
	char	   *in = malloc(size ? size : 1);
	pn_buf		out;
	const char *err,
			   *err2;
	size_t		at,
				at2;
	int			depth;
	bool		valid;

	memcpy(in, data, size);
	pn_buf_init(&out);
	err = pn_json_check(in, size, NULL, &at);
	err2 = pn_json_check(in, size, &out, &at2);
	require(err == err2 && at == at2 && at <= size);
	valid = ref_json(data, size, &depth);
	require(valid == (err == NULL));
	if (valid)
	{
		char	   *c = malloc(size + 1);
		size_t		clen = ref_compact(data, size, c),
					at3,
					w;
		pn_buf		again,
					deep;

		require(out.len == clen && memcmp(out.data, c, clen) == 0);
		pn_buf_init(&again);
		require(pn_json_check(out.data, out.len, &again, &at3) == NULL);
		require(again.len == clen && memcmp(again.data, c, clen) == 0);
		pn_buf_free(&again);

		/* up to the limit and one array beyond */
		pn_buf_init(&deep);
		w = (size_t) (PN_JSON_MAX_DEPTH - depth);
		for (size_t i = 0; i < w; i++)
			pn_buf_putc(&deep, '[');
		pn_buf_put(&deep, c, clen);
		for (size_t i = 0; i < w; i++)
			pn_buf_putc(&deep, ']');
		require(pn_json_check(deep.data, deep.len, NULL, &at3) == NULL);
		pn_buf_reset(&deep);
		pn_buf_put(&deep, "[", 1);
		for (size_t i = 0; i < w; i++)
			pn_buf_putc(&deep, '[');
		pn_buf_put(&deep, c, clen);
		for (size_t i = 0; i <= w; i++)
			pn_buf_putc(&deep, ']');
		err = pn_json_check(deep.data, deep.len, NULL, &at3);
		require(err != NULL && strcmp(err, "nested too deeply") == 0);
		pn_buf_free(&deep);

		n_objects = 0;
		budget = 1 << 22;
		check_members(c, clen, (struct pn_span) {0, clen});
		free(c);
	}
	pn_buf_free(&out);
	free(in);
	return valid;
}

/* ---- the payloads ---------------------------------------------------------- */

static bool
payload_empty(const struct pn_payload *pl)
{
	static const struct pn_payload zero;

	return memcmp(pl, &zero, sizeof(zero)) == 0;
}

/* Parses a copy of data as gw's payload; logs as the verdict says. */
static int
parse(struct pn_payload *pl, enum pn_gateway gw, const unsigned char *data, size_t size)
{
	char	   *txt = malloc(size ? size : 1);
	int			rc;

	memcpy(txt, data, size);
	n_logged = 0;
	rc = pn_payload_parse(pl, gw, "fuzz", txt, size);
	require(rc == 0 || rc == -1);
	if (rc == 0)
		require(n_logged == 0);
	else
		require(n_logged > 0 && payload_empty(pl));
	return rc;
}

static void
check_stripe(const unsigned char *data, size_t size, bool valid)
{
	static const char *const id_path[] = {"id", NULL};
	static const char *const order_path[] = {"data", "object", "metadata", "order_id", NULL};
	struct pn_payload pl;
	char	   *c,
				id[PN_ID_LEN];
	size_t		clen;

	require((parse(&pl, PN_STRIPE, data, size) == 0) == (valid && size > 0));
	if (!valid)
		return;
	require(pl.body_len == size && memcmp(pl.body, data, size) == 0);
	c = malloc(size + 1);
	clen = ref_compact(data, size, c);
	ref_path(c, clen, id_path, id, sizeof(id));
	require(strcmp(pl.notify_id, id) == 0);
	ref_path(c, clen, order_path, id, sizeof(id));
	require(strcmp(pl.order_no, id) == 0);
	free(c);
	pn_payload_free(&pl);
}

static void
check_wx(const unsigned char *data, size_t size, bool valid)
{
	static const char *const id_path[] = {"id", NULL};
	static const char *const order_path[] = {"out_trade_no", NULL};
	struct pn_payload pl;
	struct pn_span top,
				res,
				v,
				nonce,
				aad,
				plain;
	char	   *c = NULL,
				id[PN_ID_LEN];
	size_t		clen = 0;
	bool		expect = false;
	int			rc;

	if (valid)
	{
		c = malloc(size + 1);
		clen = ref_compact(data, size, c);
		top = (struct pn_span) {0, clen};
		expect = ref_member(c, top, "resource", &res) == 0 && c[res.a] == '{' &&
			ref_member(c, res, "ciphertext", &v) == 1 &&
			ref_member(c, res, "nonce", &nonce) == 0 &&
			ref_plain(c, nonce, sizeof(pl.nonce)) && nonce.b - nonce.a > 2 &&
			ref_member(c, res, "associated_data", &aad) == 0 &&
			ref_plain(c, aad, sizeof(pl.aad)) &&
			ref_member(c, res, "plaintext", &plain) == 0 && c[plain.a] == '{';
	}
	rc = parse(&pl, PN_WXPAY, data, size);
	require((rc == 0) == expect);
	if (rc == 0)
	{
		pn_buf		body;
		size_t		at,
					mid = clen - pl.head_len - pl.tail_len;

		require(pl.head_len + pl.tail_len <= clen);
		require(memcmp(pl.head, c, pl.head_len) == 0);
		require(memcmp(pl.tail, c + clen - pl.tail_len, pl.tail_len) == 0);
		require(mid == strlen("\"plaintext\":") + pl.plaintext_len);
		require(memcmp(c + pl.head_len, "\"plaintext\":", 12) == 0);
		require(memcmp(c + pl.head_len + 12, pl.plaintext, pl.plaintext_len) == 0);
		require(pl.plaintext_len == plain.b - plain.a &&
				memcmp(pl.plaintext, c + plain.a, pl.plaintext_len) == 0);
		require(pn_json_check(pl.plaintext, pl.plaintext_len, NULL, &at) == NULL);
		require(strlen(pl.nonce) == nonce.b - nonce.a - 2 &&
				memcmp(pl.nonce, c + nonce.a + 1, strlen(pl.nonce)) == 0);
		require(strlen(pl.aad) == aad.b - aad.a - 2 &&
				memcmp(pl.aad, c + aad.a + 1, strlen(pl.aad)) == 0);
		pn_buf_init(&body);
		pn_buf_put(&body, pl.head, pl.head_len);
		pn_buf_puts(&body, "\"ciphertext\":\"AAAA\"");
		pn_buf_put(&body, pl.tail, pl.tail_len);
		require(pn_json_check(body.data, body.len, NULL, &at) == NULL);
		pn_buf_free(&body);
		ref_path(c, clen, id_path, id, sizeof(id));
		require(strcmp(pl.notify_id, id) == 0);
		ref_path(pl.plaintext, pl.plaintext_len, order_path, id, sizeof(id));
		require(strcmp(pl.order_no, id) == 0);
		pn_payload_free(&pl);
	}
	free(c);
}

/* ---- Alipay: a reference decoder ------------------------------------------- */

enum
{
	ALI_BAD, ALI_OK, ALI_CONVERT
};

struct ali
{
	int			n;
	char	   *key[PN_MAX_PARAMS + 1];
	char	   *val[PN_MAX_PARAMS + 1];
	const char *charset;
};

/* %-decodes s[0..n) into a new string; NULL on a bad escape, NUL or not UTF-8. */
static char *
ali_decode(const unsigned char *s, size_t n)
{
	char	   *out = malloc(n + 1);
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
	{
		if (s[i] == '%')
		{
			if (n - i < 3 || ref_hex(s[i + 1]) < 0 || ref_hex(s[i + 2]) < 0 ||
				(ref_hex(s[i + 1]) | ref_hex(s[i + 2])) == 0)
			{
				free(out);
				return NULL;
			}
			out[k++] = (char) (ref_hex(s[i + 1]) << 4 | ref_hex(s[i + 2]));
			i += 2;
		}
		else
			out[k++] = s[i] == '+' ? ' ' : (char) s[i];
	}
	out[k] = '\0';
	for (size_t i = 0, len; i < k; i += len)
		if ((len = ref_utf8((const unsigned char *) out + i, k - i)) == 0)
		{
			free(out);
			return NULL;
		}
	return out;
}

static void
ali_free(struct ali *a)
{
	for (int i = 0; i < a->n; i++)
	{
		free(a->key[i]);
		free(a->val[i]);
	}
	a->n = 0;
}

static int
ref_ali(const unsigned char *s, size_t n, struct ali *a)
{
	size_t		p = 0;

	a->n = 0;
	a->charset = "utf-8";
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
		n--;
	if (n == 0 || memchr(s, '\n', n) || memchr(s, '\r', n) || memchr(s, '\0', n))
		return ALI_BAD;
	for (;;)
	{
		const unsigned char *amp = memchr(s + p, '&', n - p),
				   *eq;
		size_t		end = amp ? (size_t) (amp - s) : n;

		eq = memchr(s + p, '=', end - p);
		if (!eq || eq == s + p || a->n == PN_MAX_PARAMS)
			return ALI_BAD;
		a->key[a->n] = ali_decode(s + p, (size_t) (eq - s - p));
		a->val[a->n] = ali_decode(eq + 1, end - (size_t) (eq - s) - 1);
		a->n++;
		if (!a->key[a->n - 1] || !a->val[a->n - 1] || strcmp(a->key[a->n - 1], "sign") == 0)
			return ALI_BAD;
		for (int i = 0; i < a->n - 1; i++)
			if (strcmp(a->key[i], a->key[a->n - 1]) == 0)
				return ALI_BAD;
		if (strcmp(a->key[a->n - 1], "charset") == 0)
			a->charset = a->val[a->n - 1];
		if (!amp)
			break;
		p = end + 1;
	}
	if (strlen(a->charset) >= 32)
		return ALI_BAD;
	if (strcasecmp(a->charset, "utf-8") == 0 || strcasecmp(a->charset, "utf8") == 0)
		return ALI_OK;
	if (strcasecmp(a->charset, "gbk") == 0 || strcasecmp(a->charset, "gb2312") == 0 ||
		strcasecmp(a->charset, "gb18030") == 0)
		return ALI_CONVERT;
	return ALI_BAD;
}

/* s converted from cs to UTF-8 (or back), or NULL. */
static char *
convert(const char *to, const char *from, const char *s)
{
	iconv_t		cd = iconv_open(to, from);
	size_t		inleft = strlen(s),
				outleft = 4 * inleft + 4;
	char	   *out = malloc(outleft + 1),
			   *in = (char *) s,
			   *o = out;

	require(cd != (iconv_t) -1);
	if (iconv(cd, &in, &inleft, &o, &outleft) == (size_t) -1 ||
		iconv(cd, NULL, NULL, &o, &outleft) == (size_t) -1)
	{
		free(out);
		out = NULL;
	}
	else
		*o = '\0';
	iconv_close(cd);
	return out;
}

static void
check_ali(const unsigned char *data, size_t size)
{
	struct ali	a;
	struct pn_payload pl;
	int			want = ref_ali(data, size, &a),
				rc = parse(&pl, PN_ALIPAY, data, size);
	char		expect[PN_ID_LEN + 128];

	if (want == ALI_BAD || want == ALI_OK)
		require((rc == 0) == (want == ALI_OK));
	if (want == ALI_CONVERT)
	{
		bool		representable = true;

		for (int i = 0; i < a.n && representable; i++)
		{
			char	   *t = convert(a.charset, "UTF-8", a.val[i]);

			representable = t != NULL;
			free(t);
		}
		require((rc == 0) == representable);
	}
	if (rc == 0)
	{
		require(pl.n_params == a.n);
		for (int i = 0; i < a.n; i++)
		{
			require(strcmp(pl.pkey[i], a.key[i]) == 0);
			if (want == ALI_OK)
				require(strcmp(pl.pval[i], a.val[i]) == 0);
			else
			{
				char	   *back = convert("UTF-8", a.charset, pl.pval[i]);

				require(back && strcmp(back, a.val[i]) == 0);
				free(back);
			}
			if (strcmp(a.key[i], "notify_id") == 0)
			{
				snprintf(expect, PN_ID_LEN, "%s", a.val[i]);
				require(strcmp(pl.notify_id, expect) == 0);
			}
			if (strcmp(a.key[i], "out_trade_no") == 0)
			{
				snprintf(expect, PN_ID_LEN, "%s", a.val[i]);
				require(strcmp(pl.order_no, expect) == 0);
			}
		}
		snprintf(expect, sizeof(expect), "application/x-www-form-urlencoded; charset=%s",
				 a.charset);
		require(strcmp(pl.content_type, expect) == 0);
		pn_payload_free(&pl);
	}
	ali_free(&a);
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	bool		valid = check_json(data, size);

	check_stripe(data, size, valid);
	check_wx(data, size, valid);
	check_ali(data, size);
	return 0;
}
