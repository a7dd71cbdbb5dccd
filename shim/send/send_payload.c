/*
 * send_payload.c
 *		--payload FILE: a notification's content read from a file instead
 *		of generated, checked once at start-up; send_sign.c then signs
 *		(and for WeChat Pay encrypts) it as the gateway does.
 *
 *		wxpay   JSON: the notification envelope with resource.plaintext (the
 *		        decrypted resource) where resource.ciphertext goes.  The file
 *		        is validated and made compact (whitespace outside strings
 *		        dropped; keys, their order, strings and numbers kept byte for
 *		        byte, escapes as written); the plaintext's compact bytes are
 *		        what gets encrypted, and "plaintext":{...} is replaced by
 *		        "ciphertext":"..." in place.
 *		alipay  one line of application/x-www-form-urlencoded parameters
 *		        without sign, in UTF-8; when charset says GBK, gb2312 or
 *		        gb18030 the values are converted to it (iconv) before
 *		        signing and sending.
 *		stripe  the event JSON, validated and sent byte for byte.
 *
 *		The JSON reader here only validates (RFC 8259) and finds members;
 *		writing JSON stays with pn_json_* in send_util.c.
 */
#include "send_payload.h"

#include <errno.h>
#include <iconv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PAYLOAD_MAX		(4 << 20)

/* ------------------------------------------------------------------ JSON */

/* A validating reader over s[0..n); copies compact JSON to out when set. */
struct jp
{
	const char *s;
	size_t		n;
	size_t		i;
	struct pn_buf *out;
	int			depth;
	const char *err;
};

static bool jp_value(struct jp *p);

static void
jp_ws(struct jp *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' ||
						   p->s[p->i] == '\n' || p->s[p->i] == '\r'))
		p->i++;
}

static void
jp_emit(struct jp *p, size_t from)
{
	if (p->out)
		pn_buf_put(p->out, p->s + from, p->i - from);
}

static bool
jp_fail(struct jp *p, const char *why)
{
	if (!p->err)
		p->err = why;
	return false;
}

static bool
is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool
jp_string(struct jp *p)
{
	size_t		from = p->i;

	if (p->i >= p->n || p->s[p->i] != '"')
		return jp_fail(p, "expected a string");
	p->i++;
	while (p->i < p->n)
	{
		unsigned char c = (unsigned char) p->s[p->i];
		size_t		k;

		if (c == '"')
		{
			p->i++;
			jp_emit(p, from);
			return true;
		}
		if (c == '\\')
		{
			if (p->i + 1 >= p->n)
				break;
			c = (unsigned char) p->s[p->i + 1];
			if (c == 'u')
			{
				if (p->i + 6 > p->n || !is_hex(p->s[p->i + 2]) || !is_hex(p->s[p->i + 3]) ||
					!is_hex(p->s[p->i + 4]) || !is_hex(p->s[p->i + 5]))
					return jp_fail(p, "bad \\u escape");
				p->i += 6;
			}
			else if (strchr("\"\\/bfnrt", c) && c)
				p->i += 2;
			else
				return jp_fail(p, "bad escape in a string");
			continue;
		}
		if (c < 0x20)
			return jp_fail(p, "control character in a string");
		if ((k = pn_utf8_len(p->s + p->i, p->n - p->i)) == 0)
			return jp_fail(p, "a string is not UTF-8");
		p->i += k;
	}
	return jp_fail(p, "unterminated string");
}

static bool
jp_digits(struct jp *p)
{
	size_t		from = p->i;

	while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
		p->i++;
	return p->i > from;
}

static bool
jp_number(struct jp *p)
{
	size_t		from = p->i;

	if (p->s[p->i] == '-')
		p->i++;
	if (p->i < p->n && p->s[p->i] == '0')
		p->i++;
	else if (!jp_digits(p))
		return jp_fail(p, "bad number");
	if (p->i < p->n && p->s[p->i] == '.')
	{
		p->i++;
		if (!jp_digits(p))
			return jp_fail(p, "bad number");
	}
	if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E'))
	{
		p->i++;
		if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
			p->i++;
		if (!jp_digits(p))
			return jp_fail(p, "bad number");
	}
	jp_emit(p, from);
	return true;
}

static bool
jp_literal(struct jp *p)
{
	static const char *const lits[] = {"true", "false", "null"};

	for (int k = 0; k < 3; k++)
	{
		size_t		len = strlen(lits[k]);

		if (p->n - p->i >= len && memcmp(p->s + p->i, lits[k], len) == 0)
		{
			p->i += len;
			jp_emit(p, p->i - len);
			return true;
		}
	}
	return jp_fail(p, "unexpected character");
}

/* An object or array; close is '}' or ']'. */
static bool
jp_container(struct jp *p, char close)
{
	size_t		from = p->i;

	if (++p->depth > PN_JSON_MAX_DEPTH)
		return jp_fail(p, "nested too deeply");
	p->i++;
	jp_emit(p, from);
	jp_ws(p);
	if (p->i < p->n && p->s[p->i] == close)
	{
		p->i++;
		jp_emit(p, p->i - 1);
		p->depth--;
		return true;
	}
	for (;;)
	{
		jp_ws(p);
		if (close == '}')
		{
			if (p->i >= p->n || p->s[p->i] != '"')
				return jp_fail(p, "expected a member name");
			if (!jp_string(p))
				return false;
			jp_ws(p);
			if (p->i >= p->n || p->s[p->i] != ':')
				return jp_fail(p, "expected ':'");
			p->i++;
			jp_emit(p, p->i - 1);
		}
		if (!jp_value(p))
			return false;
		jp_ws(p);
		if (p->i < p->n && p->s[p->i] == ',')
		{
			p->i++;
			jp_emit(p, p->i - 1);
			continue;
		}
		if (p->i < p->n && p->s[p->i] == close)
		{
			p->i++;
			jp_emit(p, p->i - 1);
			p->depth--;
			return true;
		}
		return jp_fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
	}
}

static bool
jp_value(struct jp *p)
{
	char		c;

	jp_ws(p);
	if (p->i >= p->n)
		return jp_fail(p, "unexpected end of input");
	c = p->s[p->i];
	if (c == '{')
		return jp_container(p, '}');
	if (c == '[')
		return jp_container(p, ']');
	if (c == '"')
		return jp_string(p);
	if (c == '-' || (c >= '0' && c <= '9'))
		return jp_number(p);
	return jp_literal(p);
}

/* Validates one JSON text; with out, appends it compacted.  NULL or why not. */
const char *
pn_json_check(const char *s, size_t n, struct pn_buf *out, size_t *at)
{
	struct jp	p = {s, n, 0, out, 0, NULL};

	if (jp_value(&p))
	{
		jp_ws(&p);
		if (p.i != n)
			jp_fail(&p, "data after the JSON value");
	}
	*at = p.i;
	return p.err;
}

/*
 * The member `key` of the object at v in compact valid JSON s: its whole
 * member ("key":value) in *member and value in *val.  0 found, 1 absent,
 * -1 not an object or the name appears twice.
 */
int
pn_json_member(const char *s, struct pn_span v, const char *key, struct pn_span *member,
			struct pn_span *val)
{
	struct jp	p = {s, v.b, v.a + 1, NULL, 0, NULL};
	size_t		klen = strlen(key);
	int			found = 0;

	if (v.b - v.a < 2 || s[v.a] != '{')
		return -1;
	while (p.i < v.b - 1)
	{
		size_t		ks = p.i,
					ke,
					vs;

		jp_string(&p);
		ke = p.i;
		vs = ++p.i;				/* ':' */
		jp_value(&p);
		if (ke - ks == klen + 2 && memcmp(s + ks + 1, key, klen) == 0)
		{
			if (found++)
				return -1;
			member->a = ks;
			member->b = p.i;
			val->a = vs;
			val->b = p.i;
		}
		if (s[p.i] == ',')
			p.i++;
	}
	return found ? 0 : 1;
}

/* A string value without escapes, copied out; false if it is not one or too long. */
static bool
plain_string(const char *s, struct pn_span v, char *out, size_t outsz)
{
	size_t		len = v.b - v.a;

	if (len < 2 || s[v.a] != '"' || memchr(s + v.a, '\\', len) || len - 2 >= outsz)
		return false;
	memcpy(out, s + v.a + 1, len - 2);
	out[len - 2] = '\0';
	return true;
}

/* The string at the path of member names (NULL-terminated), or "" when absent. */
static void
path_string(const char *s, size_t n, const char *const *path, char *out, size_t outsz)
{
	struct pn_span v = {0, n},
				m;

	out[0] = '\0';
	for (; *path; path++)
		if (pn_json_member(s, v, *path, &m, &v) != 0)
			return;
	if (!plain_string(s, v, out, outsz))
		out[0] = '\0';
}

/* ------------------------------------------------------------------ files */

static char *
read_file(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	struct pn_buf b;
	char		chunk[8192];
	size_t		n;

	if (!f)
	{
		pn_log("cannot read the payload \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	pn_buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
	{
		pn_buf_put(&b, chunk, n);
		if (b.len > PAYLOAD_MAX)
			break;
	}
	if (ferror(f) || b.len > PAYLOAD_MAX)
	{
		pn_log("cannot read the payload \"%s\": %s", path,
			   ferror(f) ? strerror(errno) : "larger than 4 MB");
		fclose(f);
		pn_buf_free(&b);
		return NULL;
	}
	fclose(f);
	*len = b.len;
	return pn_buf_steal(&b);
}

/* ------------------------------------------------------------------ WeChat */

static int
load_wx(struct pn_payload *pl, const char *path, const char *txt, size_t len)
{
	struct pn_buf c;
	struct pn_span top,
				res,
				m,
				v;
	size_t		at;
	const char *err;
	int			rc = -1;
	static const char *const id_path[] = {"id", NULL};
	static const char *const order_path[] = {"out_trade_no", NULL};

	pn_buf_init(&c);
	if ((err = pn_json_check(txt, len, &c, &at)) != NULL)
	{
		pn_log("payload \"%s\": invalid JSON at byte %zu: %s", path, at, err);
		goto done;
	}
	top.a = 0;
	top.b = c.len;
	if (c.data[0] != '{' || pn_json_member(c.data, top, "resource", &m, &res) != 0 ||
		c.data[res.a] != '{')
	{
		pn_log("payload \"%s\": a wxpay payload is an object with a \"resource\" object", path);
		goto done;
	}
	if (pn_json_member(c.data, res, "ciphertext", &m, &v) != 1)
	{
		pn_log("payload \"%s\": resource has \"ciphertext\"; give \"plaintext\" instead", path);
		goto done;
	}
	if (pn_json_member(c.data, res, "nonce", &m, &v) != 0 ||
		!plain_string(c.data, v, pl->nonce, sizeof(pl->nonce)) || !pl->nonce[0])
	{
		pn_log("payload \"%s\": resource.nonce must be a non-empty string of up to %zu bytes without escapes",
			   path, sizeof(pl->nonce) - 1);
		goto done;
	}
	if (pn_json_member(c.data, res, "associated_data", &m, &v) != 0 ||
		!plain_string(c.data, v, pl->aad, sizeof(pl->aad)))
	{
		pn_log("payload \"%s\": resource.associated_data must be a string of up to %zu bytes without escapes",
			   path, sizeof(pl->aad) - 1);
		goto done;
	}
	if (pn_json_member(c.data, res, "plaintext", &m, &v) != 0 || c.data[v.a] != '{')
	{
		pn_log("payload \"%s\": resource.plaintext (the decrypted resource object) is missing or not an object", path);
		goto done;
	}
	pl->plaintext = pn_xmemdup(c.data + v.a, v.b - v.a);
	pl->plaintext_len = v.b - v.a;
	pl->head = pn_xmemdup(c.data, m.a);
	pl->head_len = m.a;
	pl->tail = pn_xmemdup(c.data + m.b, c.len - m.b);
	pl->tail_len = c.len - m.b;
	path_string(c.data, c.len, id_path, pl->notify_id, sizeof(pl->notify_id));
	path_string(pl->plaintext, pl->plaintext_len, order_path, pl->order_no, sizeof(pl->order_no));
	rc = 0;
done:
	pn_buf_free(&c);
	return rc;
}

/* ------------------------------------------------------------------ Alipay */

static int
hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Form-decodes s[0..n) ('+' is a space); NULL on a bad %XX or a NUL byte. */
static char *
form_decode(const char *s, size_t n)
{
	char	   *out = pn_xmalloc(n + 1);
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
	{
		if (s[i] == '+')
			out[k++] = ' ';
		else if (s[i] == '%')
		{
			if (i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2]))
				goto bad;
			out[k] = (char) (hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			if (out[k++] == '\0')
				goto bad;
			i += 2;
		}
		else
			out[k++] = s[i];
	}
	out[k] = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

static bool
utf8_ok(const char *s)
{
	size_t		n = strlen(s),
				k;

	for (size_t i = 0; i < n; i += k)
		if ((k = pn_utf8_len(s + i, n - i)) == 0)
			return false;
	return true;
}

/* UTF-8 text converted to charset cs; NULL when a character has no equivalent. */
static char *
to_charset(iconv_t cd, const char *s)
{
	size_t		inleft = strlen(s),
				cap = 4 * inleft + 4,
				outleft = cap - 1;
	char	   *out = pn_xmalloc(cap),
			   *in = (char *) s,
			   *o = out;

	iconv(cd, NULL, NULL, NULL, NULL);
	if (iconv(cd, &in, &inleft, &o, &outleft) == (size_t) -1 ||
		iconv(cd, NULL, NULL, &o, &outleft) == (size_t) -1)
	{
		free(out);
		return NULL;
	}
	*o = '\0';
	return out;
}

static int
ali_charset(struct pn_payload *pl, const char *path)
{
	char		cs[32] = "utf-8";
	iconv_t		cd;

	/* a copy: the charset parameter's own value is converted below */
	for (int i = 0; i < pl->n_params; i++)
		if (strcmp(pl->pkey[i], "charset") == 0)
		{
			if (strlen(pl->pval[i]) >= sizeof(cs))
			{
				pn_log("payload \"%s\": charset \"%s\" is too long", path, pl->pval[i]);
				return -1;
			}
			strcpy(cs, pl->pval[i]);
		}
	snprintf(pl->content_type, sizeof(pl->content_type),
			 "application/x-www-form-urlencoded; charset=%s", cs);
	if (strcasecmp(cs, "utf-8") == 0 || strcasecmp(cs, "utf8") == 0)
		return 0;
	if (strcasecmp(cs, "gbk") != 0 && strcasecmp(cs, "gb2312") != 0 &&
		strcasecmp(cs, "gb18030") != 0)
	{
		pn_log("payload \"%s\": charset \"%s\" is not utf-8, GBK, gb2312 or gb18030", path, cs);
		return -1;
	}
	if ((cd = iconv_open(cs, "UTF-8")) == (iconv_t) -1)
	{
		pn_log("payload \"%s\": iconv cannot convert to %s: %s", path, cs, strerror(errno));
		return -1;
	}
	for (int i = 0; i < pl->n_params; i++)
	{
		char	   *conv = to_charset(cd, pl->pval[i]);

		if (!conv)
		{
			pn_log("payload \"%s\": the value of %s cannot be written in %s",
				   path, pl->pkey[i], cs);
			iconv_close(cd);
			return -1;
		}
		free(pl->pval[i]);
		pl->pval[i] = conv;
	}
	iconv_close(cd);
	return 0;
}

static int
load_ali(struct pn_payload *pl, const char *path, char *txt, size_t len)
{
	const char *p,
			   *end;

	while (len > 0 && (txt[len - 1] == '\n' || txt[len - 1] == '\r'))
		txt[--len] = '\0';
	if (len == 0 || memchr(txt, '\n', len) || memchr(txt, '\r', len) || memchr(txt, '\0', len))
	{
		pn_log("payload \"%s\": an alipay payload is one non-empty line of form parameters", path);
		return -1;
	}
	for (p = txt;; p = end + 1)
	{
		const char *eq;
		char	   *k,
				   *v;

		end = memchr(p, '&', (size_t) (txt + len - p));
		if (!end)
			end = txt + len;
		eq = memchr(p, '=', (size_t) (end - p));
		if (!eq || eq == p)
		{
			pn_log("payload \"%s\": \"%.*s\" is not name=value", path, (int) (end - p), p);
			return -1;
		}
		k = form_decode(p, (size_t) (eq - p));
		v = form_decode(eq + 1, (size_t) (end - eq - 1));
		if (!k || !v || !utf8_ok(k) || !utf8_ok(v))
		{
			pn_log("payload \"%s\": parameter \"%.*s\": bad percent-encoding or not UTF-8",
				   path, (int) (eq - p), p);
			free(k);
			free(v);
			return -1;
		}
		if (strcmp(k, "sign") == 0 || pl->n_params == PN_MAX_PARAMS)
		{
			pn_log("payload \"%s\": %s", path, strcmp(k, "sign") == 0 ?
				   "has sign already; paynotify-send adds it" : "too many parameters");
			free(k);
			free(v);
			return -1;
		}
		for (int i = 0; i < pl->n_params; i++)
			if (strcmp(pl->pkey[i], k) == 0)
			{
				pn_log("payload \"%s\": parameter %s appears twice", path, k);
				free(k);
				free(v);
				return -1;
			}
		pl->pkey[pl->n_params] = k;
		pl->pval[pl->n_params++] = v;
		if (end == txt + len)
			break;
	}
	for (int i = 0; i < pl->n_params; i++)
	{
		if (strcmp(pl->pkey[i], "notify_id") == 0)
			snprintf(pl->notify_id, sizeof(pl->notify_id), "%s", pl->pval[i]);
		else if (strcmp(pl->pkey[i], "out_trade_no") == 0)
			snprintf(pl->order_no, sizeof(pl->order_no), "%s", pl->pval[i]);
	}
	return ali_charset(pl, path);
}

/* ------------------------------------------------------------------ Stripe */

static int
load_stripe(struct pn_payload *pl, const char *path, char *txt, size_t len)
{
	size_t		at;
	const char *err;
	static const char *const id_path[] = {"id", NULL};
	static const char *const order_path[] = {"data", "object", "metadata", "order_id", NULL};

	if ((err = pn_json_check(txt, len, NULL, &at)) != NULL)
	{
		pn_log("payload \"%s\": invalid JSON at byte %zu: %s", path, at, err);
		return -1;
	}
	/* member lookups need compact text: look them up in a compacted copy */
	{
		struct pn_buf c;

		pn_buf_init(&c);
		pn_json_check(txt, len, &c, &at);
		path_string(c.data, c.len, id_path, pl->notify_id, sizeof(pl->notify_id));
		path_string(c.data, c.len, order_path, pl->order_no, sizeof(pl->order_no));
		pn_buf_free(&c);
	}
	pl->body = txt;
	pl->body_len = len;
	return 0;
}

/* ------------------------------------------------------------------ API */

int
pn_payload_parse(struct pn_payload *pl, enum pn_gateway gw, const char *name, char *txt,
				 size_t len)
{
	int			rc;

	memset(pl, 0, sizeof(*pl));
	if (len == 0)
	{
		pn_log("payload \"%s\" is empty", name);
		free(txt);
		return -1;
	}
	if (gw == PN_STRIPE)
	{
		if ((rc = load_stripe(pl, name, txt, len)) != 0)
			free(txt);
		return rc;				/* the body keeps txt */
	}
	rc = gw == PN_WXPAY ? load_wx(pl, name, txt, len) : load_ali(pl, name, txt, len);
	free(txt);
	if (rc != 0)
		pn_payload_free(pl);
	return rc;
}

int
pn_payload_load(struct pn_payload *pl, enum pn_gateway gw, const char *path)
{
	size_t		len;
	char	   *txt;

	memset(pl, 0, sizeof(*pl));
	if (!(txt = read_file(path, &len)))
		return -1;
	return pn_payload_parse(pl, gw, path, txt, len);
}

void
pn_payload_free(struct pn_payload *pl)
{
	free(pl->body);
	free(pl->head);
	free(pl->tail);
	free(pl->plaintext);
	for (int i = 0; i < pl->n_params; i++)
	{
		free(pl->pkey[i]);
		free(pl->pval[i]);
	}
	memset(pl, 0, sizeof(*pl));
}
