/*-------------------------------------------------------------------------
 *
 * fuzz_form.c
 *	  libFuzzer target: the urlencoded form decoder and Alipay's canonical
 *	  content (src/parse/form.c), with their invariants checked on every input.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "form.h"

static PnForm form;

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

/* The invariants of a successfully decoded form. */
static void
check_form(const char *data, size_t size, const char *buf, size_t bufsize)
{
	size_t		total = 0;

	require(form.nparams >= 1 && form.nparams <= PN_FORM_MAX_PARAMS);
	for (int i = 0; i < form.nparams; i++)
	{
		const PnFormParam *p = &form.params[i];

		require(p->name_len > 0);
		require(p->name >= buf && p->value + p->value_len < buf + bufsize);
		require(p->name[p->name_len] == '\0' && p->value[p->value_len] == '\0');
		require(memchr(p->name, '\0', p->name_len) == NULL);
		require(memchr(p->value, '\0', p->value_len) == NULL);
		require(pn_form_get(&form, p->name) == p);
		total += p->name_len + 1 + p->value_len;
	}
	require(total <= size);
	for (int i = 1; i < form.nparams; i++)
	{
		const PnFormParam *a = form.sorted[i - 1],
				   *b = form.sorted[i];
		size_t		n = a->name_len < b->name_len ? a->name_len : b->name_len;
		int			c = memcmp(a->name, b->name, n);

		require(c < 0 || (c == 0 && a->name_len < b->name_len));
	}
	(void) data;
}

/* Both canonical variants fit in size + 1 bytes, and keep >= skip. */
static void
check_canonical(size_t size)
{
	char	   *out = malloc(size + 1);
	size_t		skip,
				keep;

	skip = pn_form_canonical(&form, false, out, size + 1);
	require(skip != (size_t) -1 && skip <= size && out[skip] == '\0');
	keep = pn_form_canonical(&form, true, out, size + 1);
	require(keep != (size_t) -1 && keep <= size && out[keep] == '\0');
	require(keep >= skip);
	require(pn_form_has_empty(&form) ? keep > skip : keep == skip);
	if (skip > 0)
		require(pn_form_canonical(&form, false, out, skip) == (size_t) -1);
	free(out);
}

int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	size_t		bufsize = PN_FORM_BUFSIZE(size);
	char	   *buf = malloc(bufsize);

	if (pn_form_decode((const char *) data, size, &form, buf, bufsize) == PN_FORM_OK)
	{
		check_form((const char *) data, size, buf, bufsize);
		check_canonical(size);
	}
	free(buf);
	return 0;
}
