/*-------------------------------------------------------------------------
 *
 * fuzz_pem.c
 *	  libFuzzer target: PEM public-key / certificate loading and the
 *	  certificate serial (src/crypto.c).
 *
 * An input that starts with "-----BEGIN" is taken as PEM text as is; any
 * other input is taken as DER and wrapped, once as a "PUBLIC KEY" and once
 * as a "CERTIFICATE", so that mutations reach OpenSSL's ASN.1 decoders and
 * not only its PEM framing.  Invariants, on every input:
 *	- a key comes back exactly when *err is NULL, and is RSA of at least
 *	  2048 bits; a refusal names one of the three fixed messages;
 *	- a serial is non-empty upper-case hex (a '-' first when negative);
 *	- OpenSSL's error queue is left empty; nothing leaks.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "pem.h"

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

/* Load a key and a serial from pem (len bytes) and check them. */
static void
check(const char *pem, size_t len)
{
	const char *err = "unset";
	EVP_PKEY   *pkey = pn_pem_pkey(pem, len, &err);
	char	   *serial;

	require((pkey != NULL) == (err == NULL));
	if (pkey != NULL)
	{
		require(EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA);
		require(EVP_PKEY_get_bits(pkey) >= PN_MIN_RSA_BITS);
	}
	else
		require(strcmp(err, "not a PEM public key or certificate") == 0 ||
				strcmp(err, "not an RSA key") == 0 ||
				strcmp(err, "RSA key shorter than 2048 bits") == 0);
	require(ERR_peek_error() == 0);

	serial = pn_pem_cert_serial(pem, len);
	require(ERR_peek_error() == 0);
	if (serial != NULL)
	{
		size_t		n = strlen(serial);
		size_t		i = serial[0] == '-' ? 1 : 0;

		require(n > i);
		for (; i < n; i++)
			require((serial[i] >= '0' && serial[i] <= '9') ||
					(serial[i] >= 'A' && serial[i] <= 'F'));
		OPENSSL_free(serial);
	}
	EVP_PKEY_free(pkey);
}

/* der wrapped as a PEM block of the given label, exact-size on the heap. */
static char *
wrap(const unsigned char *der, size_t len, const char *label, size_t *pemlen)
{
	size_t		b64 = (len + 2) / 3 * 4;
	size_t		cap = b64 + b64 / 64 + 2 + 2 * (strlen(label) + 32);
	char	   *pem = malloc(cap);
	char	   *body = malloc(b64 + 1);
	size_t		n = 0;

	EVP_EncodeBlock((unsigned char *) body, der, (int) len);
	n += (size_t) snprintf(pem + n, cap - n, "-----BEGIN %s-----\n", label);
	for (size_t i = 0; i < b64; i += 64)
	{
		size_t		line = b64 - i < 64 ? b64 - i : 64;

		memcpy(pem + n, body + i, line);
		n += line;
		pem[n++] = '\n';
	}
	n += (size_t) snprintf(pem + n, cap - n, "-----END %s-----\n", label);
	require(n < cap);
	free(body);
	*pemlen = n;
	return pem;
}

int			LLVMFuzzerInitialize(int *argc, char ***argv);
int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Load OpenSSL's error strings and providers once, not inside an input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *err;

	OPENSSL_init_crypto(OPENSSL_INIT_LOAD_CRYPTO_STRINGS, NULL);
	EVP_PKEY_free(pn_pem_pkey("x", 1, &err));
	(void) argc;
	(void) argv;
	return 0;
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size >= 10 && memcmp(data, "-----BEGIN", 10) == 0)
	{
		/* an exact-size heap copy, so ASan sees any read past the text */
		char	   *pem = malloc(size);

		memcpy(pem, data, size);
		check(pem, size);
		free(pem);
	}
	else
	{
		static const char *const labels[] = {"PUBLIC KEY", "CERTIFICATE"};

		for (int i = 0; i < 2; i++)
		{
			size_t		len;
			char	   *pem = wrap(data, size, labels[i], &len);
			char	   *exact = malloc(len);

			memcpy(exact, pem, len);
			free(pem);
			check(exact, len);
			free(exact);
		}
	}
	return 0;
}
