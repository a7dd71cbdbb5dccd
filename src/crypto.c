/*-------------------------------------------------------------------------
 *
 * crypto.c
 *	  The backend's cryptography: base64, PEM/X.509 keys, RSA signature
 *	  verification, AES-GCM opening, HMAC-SHA256, constant-time comparison,
 *	  and the two SQL primitives built on them.  The only code that includes
 *	  OpenSSL.
 *
 * Nothing here raises between allocating an OpenSSL object and freeing it:
 * the helpers return verdicts and the SQL-callable functions raise only after
 * every object is freed, so no PG_TRY is needed to avoid leaks.  Algorithms
 * are fetched once per backend.
 *
 * The PEM loaders (pem.h) use no PostgreSQL: built with -DPN_PEM_ONLY, this
 * file is only them, which is how the libFuzzer target test/fuzz/fuzz_pem.c
 * links them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PN_PEM_ONLY
#include "postgres.h"
#endif

#include <limits.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "pem.h"

/* ---------------------------------------------------------------------
 * PEM keys and certificates (no PostgreSQL)
 * ---------------------------------------------------------------------
 */

EVP_PKEY *
pn_pem_pkey(const char *pem, size_t len, const char **err)
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
pn_pem_cert_serial(const char *pem, size_t len)
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

#ifndef PN_PEM_ONLY

#include "common/base64.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "paynotify.h"
#include "scan.h"

PG_FUNCTION_INFO_V1(paynotify_rsa_verify);
PG_FUNCTION_INFO_V1(paynotify_aead_decrypt);

static EVP_MD *md_sha1;
static EVP_MD *md_sha256;
static EVP_MD *md_sha384;
static EVP_MD *md_sha512;
static EVP_CIPHER *gcm[3];		/* AES-128/192/256-GCM */
static EVP_MAC *hmac;

static const EVP_MD *digest_by_name(const char *name);
static void sha256(const unsigned char *msg, size_t len, unsigned char out[32]);

/* Fetch the algorithms once per backend. */
void
pn_crypto_init(void)
{
	md_sha1 = EVP_MD_fetch(NULL, "SHA1", NULL);
	md_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	md_sha384 = EVP_MD_fetch(NULL, "SHA384", NULL);
	md_sha512 = EVP_MD_fetch(NULL, "SHA512", NULL);
	gcm[0] = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
	gcm[1] = EVP_CIPHER_fetch(NULL, "AES-192-GCM", NULL);
	gcm[2] = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!md_sha256 || !gcm[2] || !hmac)
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_INVOCATION_EXCEPTION),
				 errmsg("OpenSSL lacks SHA-256, AES-256-GCM or HMAC")));
}

/* sha1/sha256/sha384/sha512 (case-insensitive), or NULL. */
static const EVP_MD *
digest_by_name(const char *name)
{
	if (pg_strcasecmp(name, "sha256") == 0)
		return md_sha256;
	if (pg_strcasecmp(name, "sha384") == 0)
		return md_sha384;
	if (pg_strcasecmp(name, "sha512") == 0)
		return md_sha512;
	if (pg_strcasecmp(name, "sha1") == 0)
		return md_sha1;
	return NULL;
}

/* ---------------------------------------------------------------------
 * base64 (RFC 4648 standard alphabet, padded, no whitespace)
 * ---------------------------------------------------------------------
 */

/*
 * Decode strictly (parse/scan.c); false when in is not exactly canonical padded
 * base64.  The result is palloc'd.
 */
bool
pn_base64_decode(const char *in, int inlen, unsigned char **out, int *outlen)
{
	unsigned char *buf;
	size_t		n;

	if (inlen <= 0)
		return false;
	buf = palloc(PN_BASE64_DECODED_SIZE(inlen));
	if (!pn_scan_base64(in, (size_t) inlen, buf, PN_BASE64_DECODED_SIZE(inlen), &n))
	{
		pfree(buf);
		return false;
	}
	*out = buf;
	*outlen = (int) n;
	return true;
}

/* ---------------------------------------------------------------------
 * Keys
 * ---------------------------------------------------------------------
 */

/*
 * An RSA public key (at least 2048 bits) from a PEM "PUBLIC KEY" or an X.509
 * certificate (pn_pem_pkey).  Returns an EVP_PKEY the caller frees with
 * pn_pkey_free, or NULL with *err set to a fixed message.
 */
void *
pn_pkey_load(const char *pem, int len, const char **err)
{
	if (len < 0)
	{
		*err = "not a PEM public key or certificate";
		return NULL;
	}
	return pn_pem_pkey(pem, (size_t) len, err);
}

/* Free a key from pn_pkey_load (NULL is fine). */
void
pn_pkey_free(void *pkey)
{
	EVP_PKEY_free((EVP_PKEY *) pkey);
}

/* The serial number of a PEM certificate in upper-case hex, or NULL. */
char *
pn_cert_serial(const char *pem, int len)
{
	char	   *hex = len >= 0 ? pn_pem_cert_serial(pem, (size_t) len) : NULL;
	char	   *result = NULL;

	if (hex != NULL)
	{
		/* no error between OpenSSL's allocation and its free */
		result = palloc_extended(strlen(hex) + 1, MCXT_ALLOC_NO_OOM);
		if (result != NULL)
			strcpy(result, hex);
		OPENSSL_free(hex);
		if (result == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	return result;
}

/* ---------------------------------------------------------------------
 * Signatures, AEAD, MAC
 * ---------------------------------------------------------------------
 */

/* RSASSA-PKCS1-v1_5: 1 verified, 0 not, -1 unknown digest name. */
int
pn_rsa_verify(void *pkey, const char *digest,
			  const unsigned char *msg, size_t msglen,
			  const unsigned char *sig, size_t siglen)
{
	const EVP_MD *md = digest_by_name(digest);
	EVP_MD_CTX *ctx;
	int			ok = 0;

	if (md == NULL)
		return -1;
	ctx = EVP_MD_CTX_new();
	if (ctx != NULL &&
		EVP_DigestVerifyInit(ctx, NULL, md, NULL, (EVP_PKEY *) pkey) == 1)
		ok = (EVP_DigestVerify(ctx, sig, siglen, msg, msglen) == 1);
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}

/*
 * A verification context for RSASSA-PKCS1-v1_5 with SHA-256, set up once per
 * key: OpenSSL 3 looks up the algorithm implementation on every
 * EVP_DigestVerifyInit, which the hot path should not pay per request.
 * NULL when it cannot be set up (pn_key_verify then takes the long way).
 */
void *
pn_rsa_verifier_new(void *pkey)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, (EVP_PKEY *) pkey, NULL);

	if (ctx == NULL || EVP_PKEY_verify_init(ctx) != 1 ||
		EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) != 1 ||
		EVP_PKEY_CTX_set_signature_md(ctx, md_sha256) != 1)
	{
		EVP_PKEY_CTX_free(ctx);
		ctx = NULL;
	}
	ERR_clear_error();
	return ctx;
}

/* Free a context from pn_rsa_verifier_new (NULL is fine). */
void
pn_rsa_verifier_free(void *verifier)
{
	EVP_PKEY_CTX_free((EVP_PKEY_CTX *) verifier);
}

/* RSA-SHA256 signature of msg by key: true only when it verifies. */
bool
pn_key_verify(const PnKey *key, const unsigned char *msg, size_t msglen,
			  const unsigned char *sig, size_t siglen)
{
	unsigned char digest[32];
	bool		ok;

	if (key->verifier == NULL)
		return pn_rsa_verify(key->pkey, "sha256", msg, msglen, sig, siglen) == 1;
	sha256(msg, msglen, digest);
	ok = EVP_PKEY_verify((EVP_PKEY_CTX *) key->verifier, sig, siglen, digest, sizeof(digest)) == 1;
	ERR_clear_error();
	return ok;
}

/*
 * Open AES-GCM (128/192/256 chosen by key length) where ct ends with its
 * tag of PN_GCM_TAG_LEN bytes.  False on any failure, a wrong tag above
 * all; the plaintext buffer is palloc'd and NUL-terminated, and never
 * returned unverified.
 */
bool
pn_aead_open(const unsigned char *key, int keylen,
			 const unsigned char *nonce, int noncelen,
			 const unsigned char *aad, int aadlen,
			 const unsigned char *ct, int ctlen,
			 unsigned char **plain, int *plainlen)
{
	EVP_CIPHER *cipher;
	EVP_CIPHER_CTX *ctx;
	unsigned char *out;
	int			n = 0,
				fin = 0;
	int			datalen = ctlen - PN_GCM_TAG_LEN;
	bool		ok;

	if (keylen != 16 && keylen != 24 && keylen != 32)
		return false;
	cipher = gcm[keylen / 8 - 2];
	if (cipher == NULL || datalen < 0 || noncelen < 1 || noncelen > 128)
		return false;
	out = palloc(datalen + 1);
	ctx = EVP_CIPHER_CTX_new();
	ok = ctx != NULL &&
		EVP_DecryptInit_ex(ctx, cipher, NULL, NULL, NULL) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, noncelen, NULL) == 1 &&
		EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce) == 1 &&
		(aadlen == 0 || EVP_DecryptUpdate(ctx, NULL, &n, aad, aadlen) == 1) &&
		EVP_DecryptUpdate(ctx, out, &n, ct, datalen) == 1 &&
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, PN_GCM_TAG_LEN,
							(void *) (ct + datalen)) == 1 &&
		EVP_DecryptFinal_ex(ctx, out + n, &fin) == 1;
	EVP_CIPHER_CTX_free(ctx);
	ERR_clear_error();
	if (!ok)
	{
		pfree(out);
		return false;
	}
	out[n + fin] = '\0';
	*plain = out;
	*plainlen = n + fin;
	return true;
}

/*
 * HMAC-SHA256 over msg1 || msg2 into out.  False when OpenSSL fails: out is
 * then wiped and must not be compared with anything (a caller that compared
 * a zero-filled buffer would accept a forged all-zero MAC).
 */
bool
pn_hmac_sha256(const unsigned char *key, int keylen,
			   const unsigned char *msg1, size_t len1,
			   const unsigned char *msg2, size_t len2,
			   unsigned char out[32])
{
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac);
	OSSL_PARAM	params[2];
	size_t		outlen = 0;
	bool		ok;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
												 "SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	ok = ctx != NULL && keylen > 0 &&
		EVP_MAC_init(ctx, key, keylen, params) == 1 &&
		EVP_MAC_update(ctx, msg1, len1) == 1 &&
		EVP_MAC_update(ctx, msg2, len2) == 1 &&
		EVP_MAC_final(ctx, out, &outlen, 32) == 1 && outlen == 32;
	EVP_MAC_CTX_free(ctx);		/* cleanses the keyed state */
	ERR_clear_error();
	if (!ok)
		explicit_bzero(out, 32);
	return ok;
}

/* SHA-256 of msg. */
void
pn_sha256(const unsigned char *msg, size_t len, unsigned char out[32])
{
	unsigned int outlen = 0;

	if (EVP_Digest(msg, len, out, &outlen, md_sha256, NULL) != 1 || outlen != 32)
		elog(ERROR, "paynotify: SHA-256 failed");
}

/* SHA-1 of msg (a WeChat Pay bill's hash_value): false when OpenSSL fails. */
bool
pn_sha1(const unsigned char *msg, size_t len, unsigned char out[20])
{
	unsigned int outlen = 0;

	return EVP_Digest(msg, len, out, &outlen, EVP_sha1(), NULL) == 1 && outlen == 20;
}

/* Constant-time equality of two equally long buffers. */
bool
pn_ct_equal(const void *a, const void *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

/* SHA-256 of msg. */
static void
sha256(const unsigned char *msg, size_t len, unsigned char out[32])
{
	unsigned int outlen = 0;

	if (EVP_Digest(msg, len, out, &outlen, md_sha256, NULL) != 1 || outlen != 32)
		elog(ERROR, "paynotify: SHA-256 failed");
}

/* ---------------------------------------------------------------------
 * Signing: the requests of queries to a gateway (query.c)
 * ---------------------------------------------------------------------
 */

/* An encrypted PEM is never decrypted: no passphrase, and never a prompt. */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	return -1;
}

/*
 * An RSA private key (at least 2048 bits) from PEM (PKCS#8 "PRIVATE KEY" or
 * PKCS#1 "RSA PRIVATE KEY"), or from bare base64 of PKCS#8 or PKCS#1 DER, as
 * the gateways' consoles and tools hand it out.  NULL and *err (a fixed
 * message that never quotes the material) when it is none of them.  The
 * caller frees the key with EVP_PKEY_free.
 */
static EVP_PKEY *
private_key_load(const char *material, size_t len, const char **err)
{
	EVP_PKEY   *pkey = NULL;

	*err = "not an RSA private key in PEM or base64";
	while (len > 0 && strchr(" \t\r\n", *material) != NULL)
		material++, len--;
	if (len == 0 || len > INT_MAX / 2)
		return NULL;
	if (len >= 10 && strncmp(material, "-----BEGIN", 10) == 0)
	{
		BIO		   *bio = BIO_new_mem_buf(material, (int) len);

		if (bio != NULL)
			pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
		BIO_free(bio);
	}
	else
	{
		/* bare base64 of DER: decoded by OpenSSL, never by palloc */
		BIO		   *b64 = BIO_new(BIO_f_base64());
		BIO		   *mem = BIO_new_mem_buf(material, (int) len);
		unsigned char *der = OPENSSL_malloc(len);
		int			derlen = 0;

		if (b64 != NULL && mem != NULL && der != NULL)
		{
			const unsigned char *p = der;

			BIO_set_flags(b64, BIO_FLAGS_BASE64_NO_NL);
			/* line breaks in the text: let OpenSSL read it line by line */
			if (memchr(material, '\n', len) != NULL)
				BIO_clear_flags(b64, BIO_FLAGS_BASE64_NO_NL);
			BIO_push(b64, mem);
			mem = NULL;			/* owned by the chain now */
			derlen = BIO_read(b64, der, (int) len);
			if (derlen > 0)
				pkey = d2i_AutoPrivateKey(NULL, &p, derlen);
		}
		if (der != NULL)
			OPENSSL_clear_free(der, len);
		BIO_free_all(b64);
		BIO_free(mem);
	}
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

/* NULL when material is a usable RSA private key, else why not (fixed text). */
const char *
pn_private_key_check(const char *material)
{
	const char *err;
	EVP_PKEY   *pkey = private_key_load(material, strlen(material), &err);

	EVP_PKEY_free(pkey);
	return err;
}

/*
 * RSASSA-PKCS1-v1_5 with SHA-256 of msg by the private key in material:
 * the signature in padded standard base64 (palloc'd), or NULL with *err
 * set.  Every OpenSSL object is freed before anything is palloc'd.
 */
char *
pn_rsa_sign(const char *material, const unsigned char *msg, size_t msglen, const char **err)
{
	EVP_PKEY   *pkey = private_key_load(material, strlen(material), err);
	EVP_MD_CTX *ctx;
	unsigned char sig[1024];	/* RSA up to 8192 bits */
	size_t		siglen = sizeof(sig);
	bool		ok;
	char	   *out;
	int			outlen;

	if (pkey == NULL)
		return NULL;
	ctx = EVP_MD_CTX_new();
	ok = ctx != NULL && EVP_PKEY_get_size(pkey) <= (int) sizeof(sig) &&
		EVP_DigestSignInit(ctx, NULL, md_sha256, NULL, pkey) == 1 &&
		EVP_DigestSign(ctx, sig, &siglen, msg, msglen) == 1;
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(pkey);
	ERR_clear_error();
	if (!ok)
	{
		*err = "RSA signing failed";
		return NULL;
	}
	out = palloc(pg_b64_enc_len(siglen) + 1);
	outlen = pg_b64_encode((const char *) sig, (int) siglen, out, pg_b64_enc_len(siglen));
	if (outlen < 0)
		elog(ERROR, "paynotify: base64 encoding failed");
	out[outlen] = '\0';
	return out;
}

/* ---------------------------------------------------------------------
 * SQL primitives
 * ---------------------------------------------------------------------
 */

/*
 * paynotify_rsa_verify(public_key text, message bytea, signature text,
 *                      digest text DEFAULT 'sha256') returns boolean
 */
Datum
paynotify_rsa_verify(PG_FUNCTION_ARGS)
{
	text	   *pem = PG_GETARG_TEXT_PP(0);
	bytea	   *msg = PG_GETARG_BYTEA_PP(1);
	text	   *sigtxt = PG_GETARG_TEXT_PP(2);
	char	   *digest = text_to_cstring(PG_GETARG_TEXT_PP(3));
	const char *err;
	unsigned char *sig;
	int			siglen;
	void	   *pkey;
	int			ok;

	if (digest_by_name(digest) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unsupported digest \"%s\"", digest),
				 errhint("Use sha256, sha384, sha512 or sha1.")));
	if (!pn_base64_decode(VARDATA_ANY(sigtxt), VARSIZE_ANY_EXHDR(sigtxt),
						  &sig, &siglen))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("signature is not valid base64")));
	pkey = pn_pkey_load(VARDATA_ANY(pem), VARSIZE_ANY_EXHDR(pem), &err);
	if (pkey == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid public key: %s", err)));
	ok = pn_rsa_verify(pkey, digest,
					   (unsigned char *) VARDATA_ANY(msg), VARSIZE_ANY_EXHDR(msg),
					   sig, siglen);
	pn_pkey_free(pkey);
	PG_RETURN_BOOL(ok == 1);
}

/*
 * paynotify_aead_decrypt(key bytea, nonce bytea, aad bytea, ciphertext text)
 *   returns bytea
 */
Datum
paynotify_aead_decrypt(PG_FUNCTION_ARGS)
{
	bytea	   *key = PG_GETARG_BYTEA_PP(0);
	bytea	   *nonce = PG_GETARG_BYTEA_PP(1);
	bytea	   *aad = PG_GETARG_BYTEA_PP(2);
	text	   *cttxt = PG_GETARG_TEXT_PP(3);
	int			keylen = VARSIZE_ANY_EXHDR(key);
	unsigned char *ct,
			   *plain;
	int			ctlen,
				plainlen;
	bytea	   *result;

	if (keylen != 16 && keylen != 24 && keylen != 32)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("AES-GCM key must be 16, 24 or 32 bytes, not %d", keylen)));
	if (VARSIZE_ANY_EXHDR(nonce) < 1 || VARSIZE_ANY_EXHDR(nonce) > 128)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("nonce must be 1 to 128 bytes")));
	if (!pn_base64_decode(VARDATA_ANY(cttxt), VARSIZE_ANY_EXHDR(cttxt),
						  &ct, &ctlen))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ciphertext is not valid base64")));
	if (ctlen < PN_GCM_TAG_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ciphertext is shorter than its %d-byte tag", PN_GCM_TAG_LEN)));
	if (!pn_aead_open((unsigned char *) VARDATA_ANY(key), keylen,
					  (unsigned char *) VARDATA_ANY(nonce), VARSIZE_ANY_EXHDR(nonce),
					  (unsigned char *) VARDATA_ANY(aad), VARSIZE_ANY_EXHDR(aad),
					  ct, ctlen, &plain, &plainlen))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("AES-GCM authentication failed"),
				 errdetail("The key, nonce, associated data or ciphertext is wrong.")));
	result = palloc(VARHDRSZ + plainlen);
	SET_VARSIZE(result, VARHDRSZ + plainlen);
	memcpy(VARDATA(result), plain, plainlen);
	PG_RETURN_BYTEA_P(result);
}

#endif							/* PN_PEM_ONLY */
