/*-------------------------------------------------------------------------
 *
 * form_test.c
 *	  Unit test of src/parse/form.c and src/parse/stripe_sig.c, built
 *	  without PostgreSQL (test/unit/run.sh).
 *
 * Checks the edge cases of the form decoder and of the Stripe-Signature
 * parser, then rebuilds the signed content of every ali_* vector and
 * compares it, byte for byte, with the case's sign_content.bin.
 *
 * usage: form_test VECTORS_DIR
 *
 *-------------------------------------------------------------------------
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "form.h"
#include "stripe_sig.h"

static int	failures;
static int	checks;

#define CHECK(cond, ...) \
	do { \
		checks++; \
		if (!(cond)) { \
			failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static PnForm form;

/* Decode a NUL-terminated body; returns the status. */
static PnFormStatus
decode(const char *body, char *buf, size_t bufsize)
{
	return pn_form_decode(body, strlen(body), &form, buf, bufsize);
}

/* Expect body to decode with status want. */
static void
expect_form(const char *body, PnFormStatus want)
{
	char		buf[4096];
	PnFormStatus st = decode(body, buf, sizeof(buf));

	CHECK(st == want, "form \"%s\": got %s, want %s", body,
		  pn_form_status_message(st), pn_form_status_message(want));
}

/* Expect the canonical content of body (both variants) and has_empty. */
static void
expect_canonical(const char *body, const char *skip, const char *keep,
				 int has_empty)
{
	char		buf[4096],
				out[4096];
	size_t		n;

	CHECK(decode(body, buf, sizeof(buf)) == PN_FORM_OK, "decode \"%s\"", body);
	n = pn_form_canonical(&form, false, out, sizeof(out));
	CHECK(n == strlen(skip) && memcmp(out, skip, n) == 0,
		  "skip-empty of \"%s\": got \"%s\"", body, out);
	n = pn_form_canonical(&form, true, out, sizeof(out));
	CHECK(n == strlen(keep) && memcmp(out, keep, n) == 0,
		  "keep-empty of \"%s\": got \"%s\"", body, out);
	CHECK(pn_form_has_empty(&form) == has_empty, "has_empty of \"%s\"", body);
}

/* The decoder's edge cases. */
static void
test_form(void)
{
	char		buf[64],
				out[64];
	const PnFormParam *p;

	expect_form("", PN_FORM_EMPTY);
	expect_form("a=1", PN_FORM_OK);
	expect_form("a=", PN_FORM_OK);
	expect_form("a", PN_FORM_NO_EQUALS);
	expect_form("=1", PN_FORM_EMPTY_ITEM);
	expect_form("a=1&", PN_FORM_EMPTY_ITEM);
	expect_form("&a=1", PN_FORM_EMPTY_ITEM);
	expect_form("a=1&&b=2", PN_FORM_EMPTY_ITEM);
	expect_form("a=1&a=2", PN_FORM_DUPLICATE);
	expect_form("a=1&%61=2", PN_FORM_DUPLICATE);
	expect_form("a=%", PN_FORM_BAD_ESCAPE);
	expect_form("a=%4", PN_FORM_BAD_ESCAPE);
	expect_form("a=%4g", PN_FORM_BAD_ESCAPE);
	expect_form("a=%%41", PN_FORM_BAD_ESCAPE);
	expect_form("a=%00", PN_FORM_NUL);
	expect_form("a%00=1", PN_FORM_NUL);
	CHECK(pn_form_decode("a=\0", 3, &form, buf, sizeof(buf)) == PN_FORM_NUL,
		  "raw NUL");
	CHECK(pn_form_decode("a=1", 3, &form, buf, 3) == PN_FORM_NO_SPACE,
		  "small buffer");

	/* decoded exactly once, first '=' splits, '+' is a space */
	CHECK(decode("p=a%253Db%26c&q=x=y+z%2B", buf, sizeof(buf)) == PN_FORM_OK,
		  "decode once");
	p = pn_form_get(&form, "p");
	CHECK(p && strcmp(p->value, "a%3Db&c") == 0, "p decoded once");
	p = pn_form_get(&form, "q");
	CHECK(p && strcmp(p->value, "x=y z+") == 0, "q split at first '='");
	CHECK(pn_form_get(&form, "r") == NULL, "absent name");
	CHECK(decode("k=%e4%B8%AD", buf, sizeof(buf)) == PN_FORM_OK &&
		  memcmp(pn_form_get(&form, "k")->value, "\xe4\xb8\xad", 4) == 0,
		  "either hex case, raw octets");

	/* canonical content: sort by bytes, drop sign/sign_type, empties */
	expect_canonical("b=2&a=1&sign=S&sign_type=RSA2", "a=1&b=2", "a=1&b=2", 0);
	expect_canonical("b=&a=1&c=3", "a=1&c=3", "a=1&b=&c=3", 1);
	expect_canonical("ab=1&a=2&B=3&a_=4", "B=3&a=2&a_=4&ab=1",
					 "B=3&a=2&a_=4&ab=1", 0);
	expect_canonical("sign=&sign_type=&x=1", "x=1", "x=1", 0);
	expect_canonical("sign=S&e=", "", "e=", 1);
	expect_canonical("signs=1&sign_typ=2", "sign_typ=2&signs=1",
					 "sign_typ=2&signs=1", 0);

	CHECK(decode("a=1&b=2", buf, sizeof(buf)) == PN_FORM_OK, "small out");
	CHECK(pn_form_canonical(&form, false, out, 7) == (size_t) -1,
		  "out too small by one");
	CHECK(pn_form_canonical(&form, false, out, 8) == 7, "out exact");
}

/* A body with PN_FORM_MAX_PARAMS + 1 distinct names. */
static void
test_form_limits(void)
{
	size_t		cap = 16 * (PN_FORM_MAX_PARAMS + 1);
	char	   *body = malloc(cap),
			   *buf = malloc(cap);
	size_t		len = 0;

	for (int i = 0; i <= PN_FORM_MAX_PARAMS; i++)
		len += snprintf(body + len, cap - len, "%sp%d=%d", i ? "&" : "", i, i);
	CHECK(pn_form_decode(body, len, &form, buf, cap) == PN_FORM_TOO_MANY,
		  "too many params");
	len = strrchr(body, '&') - body;
	CHECK(pn_form_decode(body, len, &form, buf, cap) == PN_FORM_OK &&
		  form.nparams == PN_FORM_MAX_PARAMS, "max params");
	free(body);
	free(buf);
}

/* Expect a Stripe-Signature header to parse with status want. */
static PnStripeSig sig;

static void
expect_sig(const char *hdr, PnSigStatus want, int nv1)
{
	PnSigStatus st = pn_stripe_sig_parse(hdr, strlen(hdr), &sig);

	CHECK(st == want, "sig \"%s\": got %s, want %s", hdr,
		  pn_sig_status_message(st), pn_sig_status_message(want));
	if (st == PN_SIG_OK)
		CHECK(sig.nv1 == nv1, "sig \"%s\": %d v1, want %d", hdr, sig.nv1, nv1);
}

/* The Stripe-Signature parser's edge cases. */
static void
test_sig(void)
{
#define H64 "047efdc366922f103eeb3d58e1bc7694f4ec8b032152735ce95c05eca39cec93"
	expect_sig("", PN_SIG_EMPTY, 0);
	expect_sig("t=1767226000,v1=" H64, PN_SIG_OK, 1);
	CHECK(sig.t_value == 1767226000 && sig.t_len == 10 &&
		  memcmp(sig.t, "1767226000", 10) == 0 && sig.v1[0][0] == 0x04 &&
		  sig.v1[0][31] == 0x93, "fields");
	expect_sig("v1=" H64 ",t=5", PN_SIG_OK, 1);
	expect_sig("v1=" H64, PN_SIG_NO_TIMESTAMP, 0);
	expect_sig("t=", PN_SIG_BAD_TIMESTAMP, 0);
	expect_sig("t=-5", PN_SIG_BAD_TIMESTAMP, 0);
	expect_sig("t= 5", PN_SIG_BAD_TIMESTAMP, 0);
	expect_sig("t=1234567890123456789", PN_SIG_BAD_TIMESTAMP, 0);
	expect_sig("t=5,t=5", PN_SIG_DUP_TIMESTAMP, 0);
	expect_sig("t=5,v1", PN_SIG_BAD_ITEM, 0);
	expect_sig("t=5,v1==", PN_SIG_BAD_ITEM, 0);
	expect_sig("t=5,", PN_SIG_BAD_ITEM, 0);
	expect_sig("t=5,x=a=b", PN_SIG_BAD_ITEM, 0);
	expect_sig("t=5,v0=" H64, PN_SIG_OK, 0);
	CHECK(sig.v0_count == 1, "v0 counted");
	expect_sig("t=5,v1=" H64 ",v1=" H64 ",v0=" H64 ",zz=1", PN_SIG_OK, 2);
	expect_sig("t=5,v1=" "047EFDC366922F103EEB3D58E1BC7694F4EC8B032152735CE95C05ECA39CEC93",
			   PN_SIG_OK, 0);
	CHECK(sig.v1_skipped == 1, "upper-case v1 skipped");
	expect_sig("t=5,v1=abc", PN_SIG_OK, 0);
	expect_sig("t=5, v1=" H64, PN_SIG_OK, 0);	/* " v1" is an unknown key */
	expect_sig("t=5,v1=" H64 " ", PN_SIG_OK, 0);
}

/* Read a whole file; NULL when missing. */
static char *
slurp(const char *path, size_t *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *data;
	long		n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = malloc(n + 1);
	*len = fread(data, 1, n, f);
	fclose(f);
	return data;
}

/* Every ali_* vector: our canonical content equals sign_content.bin. */
static void
test_vectors(const char *dir)
{
	char		path[1024];
	DIR		   *d;
	struct dirent *e;
	int			n = 0;

	snprintf(path, sizeof(path), "%s/cases", dir);
	d = opendir(path);
	CHECK(d != NULL, "open %s", path);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		size_t		blen,
					clen,
					olen;
		char	   *body,
				   *want,
				   *buf,
				   *out;
		int			keep;

		if (strncmp(e->d_name, "ali_", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/cases/%s/body.form", dir, e->d_name);
		body = slurp(path, &blen);
		snprintf(path, sizeof(path), "%s/cases/%s/sign_content.bin", dir, e->d_name);
		want = slurp(path, &clen);
		CHECK(body && want, "%s: files", e->d_name);
		if (!body || !want)
			continue;
		buf = malloc(PN_FORM_BUFSIZE(blen));
		out = malloc(blen + 1);
		CHECK(pn_form_decode(body, blen, &form, buf, PN_FORM_BUFSIZE(blen)) == PN_FORM_OK,
			  "%s: decode", e->d_name);
		keep = strstr(e->d_name, "_included_") != NULL;
		CHECK(keep == 0 || pn_form_has_empty(&form), "%s: has empty", e->d_name);
		olen = pn_form_canonical(&form, keep, out, blen + 1);
		CHECK(olen == clen && memcmp(out, want, clen) == 0,
			  "%s: canonical content differs", e->d_name);
		n++;
		free(body);
		free(want);
		free(buf);
		free(out);
	}
	closedir(d);
	CHECK(n >= 16, "found %d ali_* vectors", n);
}

int
main(int argc, char **argv)
{
	test_form();
	test_form_limits();
	test_sig();
	if (argc > 1)
		test_vectors(argv[1]);
	printf("form_test: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
