/*-------------------------------------------------------------------------
 *
 * scan.c
 *	  Strict base64, the JSON depth pre-scan and number-token check, exact
 *	  integer and decimal amounts, and PEM key / certificate loading, all
 *	  without PostgreSQL.
 *
 * These are the scanners paynotify runs over request bytes itself (the JSON
 * grammar, the form and the crypto are left to PostgreSQL, form.c and
 * OpenSSL).  They take lengths, never rely on a terminating NUL, write only
 * into the caller's buffers and never raise, so json.c and crypto.c wrap
 * them for the backend and test/fuzz/ links them alone.
 *
 *-------------------------------------------------------------------------
 */
#include "scan.h"

#include <limits.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

static int	base64_value(unsigned char c);

/* ---------------------------------------------------------------------
 * base64
 * ---------------------------------------------------------------------
 */

/* The 6-bit value of a standard base64 character, or -1. */
static int
base64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

bool
pn_scan_base64(const char *in, size_t inlen, unsigned char *out,
			   size_t outsize, size_t *outlen)
{
	size_t		pad = 0;
	int			n;

	if (inlen == 0 || inlen % 4 != 0 || inlen > INT_MAX ||
		out == NULL || outsize < PN_BASE64_DECODED_SIZE(inlen))
		return false;
	for (size_t i = 0; i < inlen; i++)
	{
		unsigned char c = (unsigned char) in[i];

		if (c == '=')
		{
			if (i < inlen - 2)
				return false;
			pad++;
		}
		else if (pad > 0 || base64_value(c) < 0)
			return false;
	}

	/*
	 * The last character before the padding carries bits past the end of
	 * the data: 4 of them with "==", 2 with "=".  They must be zero, or two
	 * spellings would decode to the same bytes.
	 */
	if (pad > 0 &&
		(base64_value((unsigned char) in[inlen - pad - 1]) &
		 (pad == 2 ? 0x0f : 0x03)) != 0)
		return false;

	n = EVP_DecodeBlock(out, (const unsigned char *) in, (int) inlen);
	if (n < 0 || (size_t) n < pad)
		return false;
	*outlen = (size_t) n - pad;
	return true;
}

/* ---------------------------------------------------------------------
 * JSON
 * ---------------------------------------------------------------------
 */

bool
pn_json_depth_ok(const char *text, size_t len, int max_depth)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = text[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
		{
			if (++depth > max_depth)
				return false;
		}
		else if ((c == '}' || c == ']') && depth > 0)
			depth--;
	}
	return true;
}

bool
pn_json_number_ok(const char *token, size_t len)
{
	size_t		i = 0;
	int			exponent = 0;

	if (len > PN_JSON_MAX_NUMBER_TOKEN)
		return false;
	while (i < len && token[i] != 'e' && token[i] != 'E')
		i++;
	if (i == len)
		return true;			/* no exponent */
	i++;
	if (i < len && (token[i] == '+' || token[i] == '-'))
		i++;
	if (i == len)
		return false;
	for (; i < len; i++)
	{
		if (token[i] < '0' || token[i] > '9')
			return false;
		exponent = exponent * 10 + (token[i] - '0');
		if (exponent > PN_JSON_MAX_EXPONENT)
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Numbers
 * ---------------------------------------------------------------------
 */

bool
pn_scan_int64(const char *s, size_t len, int64_t *value)
{
	int64_t		v = 0;

	if (len == 0 || len > PN_INT_MAX_DIGITS)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*value = v;
	return true;
}

bool
pn_scan_decimal(const char *s, size_t len, int scale, int64_t *value)
{
	const char *dot;
	size_t		intlen,
				fraclen;
	int64_t		whole,
				frac = 0;

	if (len == 0 || scale < 0 || scale > PN_INT_MAX_DIGITS)
		return false;
	dot = memchr(s, '.', len);
	intlen = dot ? (size_t) (dot - s) : len;
	fraclen = dot ? len - intlen - 1 : 0;
	if (intlen == 0 || (dot && (fraclen == 0 || fraclen > (size_t) scale)))
		return false;
	if (intlen > 1 && s[0] == '0')
		return false;			/* "01.00" is not how gateways write amounts */
	if (intlen > (size_t) (PN_INT_MAX_DIGITS - scale) ||
		!pn_scan_int64(s, intlen, &whole))
		return false;
	if (dot && !pn_scan_int64(dot + 1, fraclen, &frac))
		return false;
	for (size_t i = fraclen; i < (size_t) scale; i++)
		frac *= 10;
	for (int i = 0; i < scale; i++)
		whole *= 10;
	*value = whole + frac;
	return true;
}

/* ---------------------------------------------------------------------
 * PEM keys and certificates
 * ---------------------------------------------------------------------
 */

struct evp_pkey_st *
pn_scan_pkey(const char *pem, size_t len, const char **err)
{
	BIO		   *bio;
	EVP_PKEY   *pkey = NULL;
	X509	   *cert;

	*err = "not a PEM public key or certificate";
	if (len > INT_MAX)
		return NULL;
	bio = BIO_new_mem_buf(pem, (int) len);
	if (bio == NULL)
		return NULL;
	pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	if (pkey == NULL)
	{
		(void) BIO_reset(bio);
		cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		if (cert != NULL)
		{
			pkey = X509_get_pubkey(cert);
			X509_free(cert);
		}
	}
	BIO_free(bio);
	ERR_clear_error();
	if (pkey != NULL && EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA)
		*err = "not an RSA key";
	else if (pkey != NULL && EVP_PKEY_get_bits(pkey) < PN_MIN_RSA_BITS)
		*err = "RSA key shorter than 2048 bits";
	else if (pkey != NULL)
	{
		*err = NULL;
		return pkey;
	}
	EVP_PKEY_free(pkey);
	return NULL;
}

char *
pn_scan_cert_serial(const char *pem, size_t len)
{
	BIO		   *bio = len <= INT_MAX ? BIO_new_mem_buf(pem, (int) len) : NULL;
	X509	   *cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	BIGNUM	   *bn = NULL;
	char	   *hex = NULL;

	if (cert != NULL)
		bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
	if (bn != NULL)
		hex = BN_bn2hex(bn);
	BN_free(bn);
	X509_free(cert);
	BIO_free(bio);
	ERR_clear_error();
	return hex;
}
