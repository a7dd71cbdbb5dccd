/*
 * relay_sign.c
 *	  Standard Webhooks signing: the endpoint's "whsec_" secret and the
 *	  webhook-signature of one delivery.
 */
#include "relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

/* "whsec_" + base64 -> bytes; -1 when it is not that. */
int
decode_secret(const char *s, unsigned char *out)
{
	unsigned char buf[((SECRET_MAX + 2) / 3) * 3 + 3];
	size_t		len;
	int			n,
				pad = 0;

	if (strncmp(s, "whsec_", 6) != 0)
		return -1;
	s += 6;
	len = strlen(s);
	if (len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof(buf) - 1)
		return -1;
	n = EVP_DecodeBlock(buf, (const unsigned char *) s, (int) len);
	if (n < 0)
		return -1;
	if (s[len - 1] == '=')
		pad++;
	if (s[len - 2] == '=')
		pad++;
	n -= pad;
	if (n < 1 || n > SECRET_MAX)
		return -1;
	memcpy(out, buf, n);
	OPENSSL_cleanse(buf, sizeof(buf));
	return n;
}

/* "v1," + base64(HMAC-SHA256(secret, id "." ts "." body)) into out. */
bool
sign(const job *j, long long ts, char *out, size_t outsz)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	size_t		idlen = strlen(j->webhook_id);
	size_t		n = idlen + 2 + 24 + (size_t) j->body_len;
	char	   *msg;
	int			plen;
	bool		ok;

	if (outsz < 3 + 4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1 || (msg = malloc(n)) == NULL)
		return false;
	plen = snprintf(msg, n, "%s.%lld.", j->webhook_id, ts);
	memcpy(msg + plen, j->body, j->body_len);
	ok = HMAC(EVP_sha256(), j->secret, j->secret_len, (const unsigned char *) msg,
			  (size_t) plen + j->body_len, mac, &maclen) != NULL;
	free(msg);
	if (!ok)
		return false;
	memcpy(out, "v1,", 3);
	EVP_EncodeBlock((unsigned char *) out + 3, mac, (int) maclen);
	return true;
}
