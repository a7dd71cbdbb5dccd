/*-------------------------------------------------------------------------
 *
 * form.c
 *	  The urlencoded form Alipay posts and the canonical content Alipay
 *	  signs, parsed without PostgreSQL.
 *
 * Nothing here allocates: the caller passes the PnForm and the byte
 * buffers, so the same code runs inside a backend (palloc'd
 * buffers) and inside a libFuzzer target (test/fuzz/).  Every decision is
 * strict, because these bytes decide what a signature covers:
 *
 *	- the form is decoded exactly once ('+' is a space, %XX a byte); a bad
 *	  escape, a NUL byte, an empty or '='-less item, or a repeated name is an
 *	  error, never silently kept or merged;
 *	- the signed content is built from the decoded octets as they are: no
 *	  charset is applied (a GBK form is signed in GBK).
 *
 *-------------------------------------------------------------------------
 */
#include "form.h"
#include "scan.h"

#include <stdlib.h>
#include <string.h>

static PnFormStatus decode_part(const char *in, size_t len, char *out,
								size_t *outlen);
static int	param_cmp(const void *a, const void *b);
static int	name_cmp(const char *a, size_t alen, const char *b, size_t blen);
static bool is_signature_param(const PnFormParam *p);
static PnFormStatus add_item(const char *item, size_t len, PnForm *form,
							 char *buf, size_t bufsize, size_t *used);

/* ---------------------------------------------------------------------
 * Form decoding
 * ---------------------------------------------------------------------
 */

/*
 * Decode one name or value ('+' → space, %XX → byte) into out, which has
 * room for len bytes; the result is never longer than the input.
 */
static PnFormStatus
decode_part(const char *in, size_t len, char *out, size_t *outlen)
{
	size_t		o = 0;

	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) in[i];

		if (c == '%')
		{
			int			hi,
						lo;

			if (len - i < 3)
				return PN_FORM_BAD_ESCAPE;
			hi = pn_scan_hex_value((unsigned char) in[i + 1]);
			lo = pn_scan_hex_value((unsigned char) in[i + 2]);
			if (hi < 0 || lo < 0)
				return PN_FORM_BAD_ESCAPE;
			c = (unsigned char) (hi * 16 + lo);
			i += 2;
		}
		else if (c == '+')
			c = ' ';
		if (c == '\0')
			return PN_FORM_NUL;
		out[o++] = (char) c;
	}
	*outlen = o;
	return PN_FORM_OK;
}

/* Byte-order comparison of two names; a proper prefix sorts first. */
static int
name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int			c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return (alen > blen) - (alen < blen);
}

/* qsort comparator over PnFormParam pointers, by name. */
static int
param_cmp(const void *a, const void *b)
{
	const PnFormParam *pa = *(const PnFormParam *const *) a;
	const PnFormParam *pb = *(const PnFormParam *const *) b;

	return name_cmp(pa->name, pa->name_len, pb->name, pb->name_len);
}

/*
 * Decode one "name=value" item into the next parameter slot, appending
 * both strings (NUL-terminated) to buf at *used.
 */
static PnFormStatus
add_item(const char *item, size_t len, PnForm *form,
		 char *buf, size_t bufsize, size_t *used)
{
	const char *eq;
	size_t		rawname;
	PnFormParam *p;
	PnFormStatus st;

	if (len == 0)
		return PN_FORM_EMPTY_ITEM;
	eq = memchr(item, '=', len);
	if (eq == NULL)
		return PN_FORM_NO_EQUALS;
	rawname = (size_t) (eq - item);
	if (rawname == 0)
		return PN_FORM_EMPTY_ITEM;
	if (form->nparams >= PN_FORM_MAX_PARAMS)
		return PN_FORM_TOO_MANY;
	/* decoded name + NUL + decoded value + NUL <= len + 1 */
	if (bufsize - *used < len + 1)
		return PN_FORM_NO_SPACE;

	p = &form->params[form->nparams];
	p->name = buf + *used;
	st = decode_part(item, rawname, buf + *used, &p->name_len);
	if (st != PN_FORM_OK)
		return st;
	*used += p->name_len;
	buf[(*used)++] = '\0';

	p->value = buf + *used;
	st = decode_part(eq + 1, len - rawname - 1, buf + *used, &p->value_len);
	if (st != PN_FORM_OK)
		return st;
	*used += p->value_len;
	buf[(*used)++] = '\0';

	form->sorted[form->nparams] = p;
	form->nparams++;
	return PN_FORM_OK;
}

/* Decode a whole body, then sort the names and refuse duplicates. */
PnFormStatus
pn_form_decode(const char *body, size_t len, PnForm *form,
			   char *buf, size_t bufsize)
{
	size_t		pos = 0;
	size_t		used = 0;

	form->nparams = 0;
	if (len == 0)
		return PN_FORM_EMPTY;
	if (buf == NULL || bufsize < PN_FORM_BUFSIZE(len))
		return PN_FORM_NO_SPACE;

	for (;;)
	{
		const char *amp = memchr(body + pos, '&', len - pos);
		size_t		itemlen = amp ? (size_t) (amp - (body + pos)) : len - pos;
		PnFormStatus st = add_item(body + pos, itemlen, form,
								   buf, bufsize, &used);

		if (st != PN_FORM_OK)
			return st;
		if (amp == NULL)
			break;
		pos += itemlen + 1;		/* a trailing '&' gives an empty item */
	}

	qsort(form->sorted, form->nparams, sizeof(form->sorted[0]), param_cmp);
	for (int i = 1; i < form->nparams; i++)
		if (param_cmp(&form->sorted[i - 1], &form->sorted[i]) == 0)
			return PN_FORM_DUPLICATE;
	return PN_FORM_OK;
}

/* Binary search of the sorted names. */
const PnFormParam *
pn_form_get(const PnForm *form, const char *name)
{
	size_t		nlen = strlen(name);
	int			lo = 0,
				hi = form->nparams - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		const PnFormParam *p = form->sorted[mid];
		int			c = name_cmp(p->name, p->name_len, name, nlen);

		if (c == 0)
			return p;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * Alipay signed content
 * ---------------------------------------------------------------------
 */

/* Whether p is one of the two parameters the signature does not cover. */
static bool
is_signature_param(const PnFormParam *p)
{
	return (p->name_len == 4 && memcmp(p->name, "sign", 4) == 0) ||
		(p->name_len == 9 && memcmp(p->name, "sign_type", 9) == 0);
}

/* Whether the keep-empty content would differ from the skip-empty one. */
bool
pn_form_has_empty(const PnForm *form)
{
	for (int i = 0; i < form->nparams; i++)
		if (form->params[i].value_len == 0 &&
			!is_signature_param(&form->params[i]))
			return true;
	return false;
}

/* Sorted name=value&... without sign/sign_type; see form.h. */
size_t
pn_form_canonical(const PnForm *form, bool keep_empty,
				  char *out, size_t outsize)
{
	size_t		o = 0;

	for (int i = 0; i < form->nparams; i++)
	{
		const PnFormParam *p = form->sorted[i];
		size_t		need;

		if (is_signature_param(p) || (p->value_len == 0 && !keep_empty))
			continue;
		need = (o > 0) + p->name_len + 1 + p->value_len;
		if (outsize - o < need + 1)
			return (size_t) -1;
		if (o > 0)
			out[o++] = '&';
		memcpy(out + o, p->name, p->name_len);
		o += p->name_len;
		out[o++] = '=';
		memcpy(out + o, p->value, p->value_len);
		o += p->value_len;
	}
	if (outsize < 1)
		return (size_t) -1;
	out[o] = '\0';
	return o;
}

/* Fixed text for a form status. */
const char *
pn_form_status_message(PnFormStatus status)
{
	switch (status)
	{
		case PN_FORM_OK:
			return "ok";
		case PN_FORM_EMPTY:
			return "empty form";
		case PN_FORM_EMPTY_ITEM:
			return "empty form item or name";
		case PN_FORM_NO_EQUALS:
			return "form item without '='";
		case PN_FORM_BAD_ESCAPE:
			return "invalid percent escape";
		case PN_FORM_NUL:
			return "NUL byte in form";
		case PN_FORM_DUPLICATE:
			return "duplicate form parameter";
		case PN_FORM_TOO_MANY:
			return "too many form parameters";
		case PN_FORM_NO_SPACE:
			return "form buffer too small";
	}
	return "invalid form";
}
