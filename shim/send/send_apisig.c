/*
 * send_apisig.c
 *		The keys of --mode serve and what it does with them: checking the
 *		merchant's WeChat Pay request signatures and the app's Alipay
 *		signatures (RSA-SHA256, PKCS#1 v1.5), signing the answers with the
 *		gateway keys the notifications are signed with, SHA-1 for WeChat's
 *		bill hash, and base64.  With send_sign.c, the only files of
 *		paynotify-send that include OpenSSL headers.
 *
 *		The server answers on one thread (send_serve.c), so one set of
 *		contexts is enough.
 */
#include "send_serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

struct pn_apikeys
{
	EVP_PKEY   *verify[PN_KEY_COUNT];	/* merchant, app: public keys */
	EVP_PKEY   *sign[PN_KEY_COUNT];	/* WeChat platform, Alipay: private keys */
	EVP_MD_CTX *md;
};

static char *
read_text(const char *dir, const char *name, const char *what)
{
	char		path[4096];
	FILE	   *f;
	struct pn_buf b;
	char		chunk[4096];
	size_t		n;

	if (strchr(name, '/') || !dir)
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "rb")))
	{
		pn_log("cannot read the %s \"%s\": %s", what, path, strerror(errno));
		return NULL;
	}
	pn_buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && b.len < (1 << 20))
		pn_buf_put(&b, chunk, n);
	fclose(f);
	pn_buf_putc(&b, '\0');
	return pn_buf_steal(&b);
}

/* A public key from a PEM certificate or a PEM public key. */
static EVP_PKEY *
load_public(const char *pem)
{
	BIO		   *bio = BIO_new_mem_buf(pem, -1);
	X509	   *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	EVP_PKEY   *k = NULL;

	if (x)
		k = X509_get_pubkey(x);
	else if (bio)
	{
		ERR_clear_error();
		(void) BIO_reset(bio);
		k = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	}
	X509_free(x);
	BIO_free(bio);
	ERR_clear_error();
	return k;
}

static EVP_PKEY *
load_private(const char *pem)
{
	BIO		   *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY   *k = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;

	BIO_free(bio);
	ERR_clear_error();
	return k;
}

/* The serial of a PEM certificate as upper-case hex; -1 if it is not one. */
static int
cert_serial(const char *pem, char *out, size_t outsz)
{
	BIO		   *bio = BIO_new_mem_buf(pem, -1);
	X509	   *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	const ASN1_INTEGER *sn;
	int			n,
				rc = -1;

	BIO_free(bio);
	if (x)
	{
		sn = X509_get0_serialNumber(x);
		n = ASN1_STRING_length(sn);
		if (n > 0 && (size_t) (2 * n + 1) <= outsz)
		{
			pn_hex(ASN1_STRING_get0_data(sn), (size_t) n, out, PN_HEX_UPPER);
			rc = 0;
		}
	}
	X509_free(x);
	ERR_clear_error();
	return rc;
}

static int
load_one(struct pn_apikeys *k, const char *dir, const char *name, bool priv, int slot,
		 const char *what)
{
	char	   *pem = read_text(dir, name, what);
	EVP_PKEY   *key;

	if (!pem)
		return -1;
	key = priv ? load_private(pem) : load_public(pem);
	OPENSSL_cleanse(pem, strlen(pem));
	free(pem);
	if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA)
	{
		pn_log("\"%s\" (the %s) is not a PEM RSA %s", name, what,
			   priv ? "private key" : "certificate or public key");
		EVP_PKEY_free(key);
		return -1;
	}
	if (priv)
		k->sign[slot] = key;
	else
		k->verify[slot] = key;
	return 0;
}

/*
 * The keys --mode serve needs: for each gateway whose request key is given,
 * that key and the gateway's own signing key.  NULL after logging why.
 */
struct pn_apikeys *
pn_apikeys_load(const struct pn_serve_keys *p, char *wx_serial, size_t serialsz)
{
	struct pn_apikeys *k = pn_xcalloc(1, sizeof(*k));

	if (!(k->md = EVP_MD_CTX_new()))
		goto fail;
	if (p->merchant_cert)
	{
		if (load_one(k, p->dir, p->merchant_cert, false, PN_KEY_WECHAT, "merchant certificate") != 0 ||
			load_one(k, p->dir, p->wx_key, true, PN_KEY_WECHAT, "WeChat platform key") != 0)
			goto fail;
		if (p->serial)
			snprintf(wx_serial, serialsz, "%s", p->serial);
		else
		{
			char	   *pem = read_text(p->dir, p->wx_cert, "WeChat platform certificate");

			if (!pem || cert_serial(pem, wx_serial, serialsz) != 0)
			{
				if (pem)
					pn_log("\"%s\" is not a PEM certificate (give --serial)", p->wx_cert);
				free(pem);
				goto fail;
			}
			free(pem);
		}
	}
	if (p->app_public_key &&
		(load_one(k, p->dir, p->app_public_key, false, PN_KEY_ALIPAY, "Alipay app public key") != 0 ||
		 load_one(k, p->dir, p->ali_key, true, PN_KEY_ALIPAY, "Alipay key") != 0))
		goto fail;
	return k;
fail:
	pn_apikeys_free(k);
	return NULL;
}

void
pn_apikeys_free(struct pn_apikeys *k)
{
	if (!k)
		return;
	for (int i = 0; i < PN_KEY_COUNT; i++)
	{
		EVP_PKEY_free(k->verify[i]);
		EVP_PKEY_free(k->sign[i]);
	}
	EVP_MD_CTX_free(k->md);
	free(k);
}

bool
pn_apikeys_has(const struct pn_apikeys *k, int which)
{
	return k->verify[which] != NULL && k->sign[which] != NULL;
}

/* Decodes standard base64 (no whitespace); -1 when it is not base64. */
int
pn_b64_decode(const char *in, unsigned char **out, size_t *outlen)
{
	size_t		n = strlen(in),
				pad = 0;
	int			m;

	*out = NULL;
	if (n == 0 || n % 4 != 0 || n > (1 << 20))
		return -1;
	if (in[n - 1] == '=')
		pad++;
	if (in[n - 2] == '=')
		pad++;
	*out = pn_xmalloc(n / 4 * 3 + 1);
	m = EVP_DecodeBlock(*out, (const unsigned char *) in, (int) n);
	if (m < 0 || (size_t) m < pad)
	{
		free(*out);
		*out = NULL;
		return -1;
	}
	*outlen = (size_t) m - pad;
	return 0;
}

/* Whether sig_b64 is the request key's RSA-SHA256 signature of msg. */
bool
pn_api_verify(struct pn_apikeys *k, int which, const void *msg, size_t n, const char *sig_b64)
{
	unsigned char *sig;
	size_t		siglen;
	bool		ok;

	if (!k->verify[which] || pn_b64_decode(sig_b64, &sig, &siglen) != 0)
		return false;
	ok = EVP_DigestVerifyInit(k->md, NULL, EVP_sha256(), NULL, k->verify[which]) == 1 &&
		EVP_DigestVerify(k->md, sig, siglen, msg, n) == 1;
	EVP_MD_CTX_reset(k->md);
	ERR_clear_error();
	free(sig);
	return ok;
}

/* Appends base64(RSA-SHA256(msg)) with the gateway's key; false on failure. */
bool
pn_api_sign(struct pn_apikeys *k, int which, const void *msg, size_t n, struct pn_buf *out)
{
	unsigned char sig[1024];
	unsigned char b64[1400];
	size_t		siglen = sizeof(sig);
	bool		ok;

	ok = k->sign[which] &&
		EVP_DigestSignInit(k->md, NULL, EVP_sha256(), NULL, k->sign[which]) == 1 &&
		EVP_DigestSign(k->md, sig, &siglen, msg, n) == 1;
	EVP_MD_CTX_reset(k->md);
	if (!ok)
	{
		ERR_print_errors_fp(stderr);
		return false;
	}
	pn_buf_put(out, b64, (size_t) EVP_EncodeBlock(b64, sig, (int) siglen));
	return true;
}

/* Lower-case hex SHA-1 (WeChat's bill hash_value); out holds 41 bytes. */
void
pn_sha1_hex(const void *p, size_t n, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (EVP_Digest(p, n, md, &len, EVP_sha1(), NULL) != 1)
		len = 0;
	pn_hex(md, len, out, PN_HEX_LOWER);
}
