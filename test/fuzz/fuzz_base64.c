/*-------------------------------------------------------------------------
 *
 * fuzz_base64.c
 *	  libFuzzer target: the strict base64 decoder (src/parse/scan.c).
 *
 * Invariants, on every input:
 *	- the input read as base64: accepted exactly when it is the canonical
 *	  encoding of some byte string (OpenSSL's encoder gives it back), and
 *	  then the decoded bytes are that string;
 *	- the input read as bytes: its canonical encoding is accepted and
 *	  decodes back to it;
 *	- too small an output buffer is refused, never written past.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "scan.h"

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

/* Whether in is exactly OpenSSL's (canonical, padded) encoding of something. */
static int
is_canonical(const unsigned char *in, size_t len)
{
	unsigned char *raw,
			   *again;
	int			n,
				pad = 0,
				same;

	if (len == 0 || len % 4 != 0)
		return 0;
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = in[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '='))
			return 0;
	}
	if (in[len - 1] == '=')
		pad++;
	if (len >= 2 && in[len - 2] == '=')
		pad++;
	raw = malloc(len);
	n = EVP_DecodeBlock(raw, in, (int) len);
	if (n < pad)
	{
		free(raw);
		return 0;
	}
	again = malloc(len + 1);
	same = EVP_EncodeBlock(again, raw, n - pad) == (int) len &&
		memcmp(again, in, len) == 0;
	free(raw);
	free(again);
	return same;
}

int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	/* exact-size heap copies, so ASan sees any read or write past them */
	char	   *in = malloc(size ? size : 1);
	size_t		outsize = PN_BASE64_DECODED_SIZE(size);
	unsigned char *out = malloc(outsize);
	size_t		outlen = (size_t) -1;
	bool		ok;
	char	   *enc;
	unsigned char *dec;
	size_t		enclen,
				declen;

	memcpy(in, data, size);

	/* the input as base64 */
	ok = pn_scan_base64(in, size, out, outsize, &outlen);
	require(ok == (is_canonical(data, size) != 0));
	if (ok)
	{
		char	   *again = malloc(size + 1);

		require(outlen <= size / 4 * 3 && outlen + 2 >= size / 4 * 3);
		require(EVP_EncodeBlock((unsigned char *) again, out, (int) outlen) == (int) size);
		require(memcmp(again, in, size) == 0);
		free(again);
		/* one byte short of the documented size: refused */
		require(!pn_scan_base64(in, size, out, outsize - 1, &outlen));
	}

	/* the input as bytes */
	enclen = (size + 2) / 3 * 4;
	enc = malloc(enclen + 1);
	require(EVP_EncodeBlock((unsigned char *) enc, data, (int) size) == (int) enclen);
	dec = malloc(PN_BASE64_DECODED_SIZE(enclen));
	ok = pn_scan_base64(enc, enclen, dec, PN_BASE64_DECODED_SIZE(enclen), &declen);
	require(ok == (size > 0));
	if (ok)
		require(declen == size && memcmp(dec, data, size) == 0);

	free(dec);
	free(enc);
	free(out);
	free(in);
	return 0;
}
