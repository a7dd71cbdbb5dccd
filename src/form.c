/*-------------------------------------------------------------------------
 *
 * form.c
 *	  The urlencoded form Alipay posts, the canonical content Alipay signs,
 *	  and the Stripe-Signature header, parsed without PostgreSQL.
 *
 * Nothing here allocates: the caller passes the PnForm / PnStripeSig and
 * the byte buffers, so the same code runs inside a backend (palloc'd
 * buffers) and inside a libFuzzer target (test/fuzz/).  Every decision is
 * strict, because these bytes decide what a signature covers:
 *
 *	- the form is decoded exactly once ('+' is a space, %XX a byte); a bad
 *	  escape, a NUL byte, an empty or '='-less item, or a repeated name is an
 *	  error, never silently kept or merged;
 *	- the signed content is built from the decoded octets as they are: no
 *	  charset is applied (a GBK form is signed in GBK);
 *	- Stripe-Signature items are split on ',' and '=' without trimming, as
 *	  the Stripe SDKs do.
 *
 *-------------------------------------------------------------------------
 */
#include "form.h"
#include "scan.h"

#include <stdlib.h>
#include <string.h>

static int	hex_value(unsigned char c);
static PnFormStatus decode_part(const char *in, size_t len, char *out,
								size_t *outlen);
static int	param_cmp(const void *a, const void *b);
static int	name_cmp(const char *a, size_t alen, const char *b, size_t blen);
static bool is_signature_param(const PnFormParam *p);
static PnFormStatus add_item(const char *item, size_t len, PnForm *form,
							 char *buf, size_t bufsize, size_t *used);
static bool parse_lower_hex(const char *s, size_t len, unsigned char *out);
static PnSigStatus sig_item(const char *item, size_t len, PnStripeSig *sig,
							bool *seen_t);

/* ---------------------------------------------------------------------
 * Form decoding
 * ---------------------------------------------------------------------
 */

/* The value of a hex digit (either case), or -1. */
static int
hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

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
			hi = hex_value((unsigned char) in[i + 1]);
			lo = hex_value((unsigned char) in[i + 2]);
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

/* ---------------------------------------------------------------------
 * Stripe-Signature
 * ---------------------------------------------------------------------
 */

/*
 * Exactly 64 lower-case hex digits into 32 bytes.  Stripe sends lower case
 * and the node/python SDKs compare strings, so upper case never matches.
 */
static bool
parse_lower_hex(const char *s, size_t len, unsigned char *out)
{
	if (len != 64)
		return false;
	for (size_t i = 0; i < 64; i++)
	{
		int			d = (s[i] >= 'A' && s[i] <= 'F') ? -1 :
			hex_value((unsigned char) s[i]);

		if (d < 0)
			return false;
		if (i % 2 == 0)
			out[i / 2] = (unsigned char) (d << 4);
		else
			out[i / 2] |= (unsigned char) d;
	}
	return true;
}

/* Take one key=value item of the header into sig. */
static PnSigStatus
sig_item(const char *item, size_t len, PnStripeSig *sig, bool *seen_t)
{
	const char *eq = memchr(item, '=', len);
	const char *val;
	size_t		klen,
				vlen;

	if (eq == NULL || memchr(eq + 1, '=', len - (size_t) (eq - item) - 1))
		return PN_SIG_BAD_ITEM;
	klen = (size_t) (eq - item);
	val = eq + 1;
	vlen = len - klen - 1;

	if (klen == 1 && item[0] == 't')
	{
		if (*seen_t)
			return PN_SIG_DUP_TIMESTAMP;
		*seen_t = true;
		if (vlen > PN_STRIPE_MAX_T_DIGITS || !pn_scan_int64(val, vlen, &sig->t_value))
			return PN_SIG_BAD_TIMESTAMP;
		sig->t = val;
		sig->t_len = vlen;
	}
	else if (klen == 2 && memcmp(item, "v1", 2) == 0)
	{
		if (sig->nv1 < PN_STRIPE_MAX_V1 &&
			parse_lower_hex(val, vlen, sig->v1[sig->nv1]))
			sig->nv1++;
		else
			sig->v1_skipped++;
	}
	else if (klen == 2 && memcmp(item, "v0", 2) == 0)
		sig->v0_count++;
	/* any other key: ignored, as every Stripe SDK does */
	return PN_SIG_OK;
}

/* See form.h. */
PnSigStatus
pn_stripe_sig_parse(const char *hdr, size_t len, PnStripeSig *sig)
{
	size_t		pos = 0;
	int			items = 0;
	bool		seen_t = false;

	memset(sig, 0, sizeof(*sig));
	if (len == 0)
		return PN_SIG_EMPTY;
	for (;;)
	{
		const char *comma = memchr(hdr + pos, ',', len - pos);
		size_t		itemlen = comma ? (size_t) (comma - (hdr + pos)) : len - pos;
		PnSigStatus st;

		if (++items > PN_STRIPE_MAX_ITEMS)
			return PN_SIG_TOO_MANY;
		st = sig_item(hdr + pos, itemlen, sig, &seen_t);
		if (st != PN_SIG_OK)
			return st;
		if (comma == NULL)
			break;
		pos += itemlen + 1;
	}
	return seen_t ? PN_SIG_OK : PN_SIG_NO_TIMESTAMP;
}

/* Fixed text for a header status. */
const char *
pn_sig_status_message(PnSigStatus status)
{
	switch (status)
	{
		case PN_SIG_OK:
			return "ok";
		case PN_SIG_EMPTY:
			return "empty Stripe-Signature header";
		case PN_SIG_BAD_ITEM:
			return "Stripe-Signature item without exactly one '='";
		case PN_SIG_NO_TIMESTAMP:
			return "Stripe-Signature without t";
		case PN_SIG_BAD_TIMESTAMP:
			return "Stripe-Signature t is not a decimal timestamp";
		case PN_SIG_DUP_TIMESTAMP:
			return "Stripe-Signature t given twice";
		case PN_SIG_TOO_MANY:
			return "too many Stripe-Signature items";
	}
	return "invalid Stripe-Signature";
}
