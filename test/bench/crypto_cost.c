/*
 * crypto_cost: the CPU a WeChat Pay notification's crypto costs, which no
 * verifier can skip (the "limit" of test/bench/run.sh db): one RSA-2048
 * signature verification (SHA-256, PKCS#1 v1.5) over a message of the
 * size paynotify verifies (timestamp, nonce and a ~1.5 KB body: the
 * SHA-256 of the body is in it), and one AES-256-GCM decryption (tag
 * checked) of a ~1 KB resource.  The clock is read every 16 (256)
 * operations, so that reading it costs next to nothing.  Prints microseconds of CPU (this
 * process's, CLOCK_PROCESS_CPUTIME_ID) per notification, and the parts:
 *
 *   crypto_us=31.2 verify_us=29.9 decrypt_us=1.3
 *
 * Usage: crypto_cost [SECONDS]  (CPU seconds per part, default 2).
 * Built by run.sh with the system's OpenSSL: cc crypto_cost.c -lcrypto.
 */
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MSG_LEN 1536			/* "ts\nnonce\nbody\n": a wxpay body is ~1.3 KB */
#define RES_LEN 1024			/* the encrypted resource */

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
die(const char *what)
{
	fprintf(stderr, "crypto_cost: %s failed\n", what);
	exit(1);
}

static int
verify_once(EVP_PKEY *pkey, const unsigned char *msg, const unsigned char *sig, size_t siglen)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int			ok;

	if (ctx == NULL || EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pkey) != 1)
		die("EVP_DigestVerifyInit");
	ok = EVP_DigestVerify(ctx, sig, siglen, msg, MSG_LEN);
	EVP_MD_CTX_free(ctx);
	return ok;
}

static int
decrypt_once(const unsigned char *key, const unsigned char *iv, const unsigned char *aad,
			 const unsigned char *ct, unsigned char *tag, unsigned char *out)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int			len,
				ok;

	if (ctx == NULL ||
		EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1 ||
		EVP_DecryptInit_ex(ctx, NULL, NULL, key, iv) != 1 ||
		EVP_DecryptUpdate(ctx, NULL, &len, aad, 16) != 1 ||
		EVP_DecryptUpdate(ctx, out, &len, ct, RES_LEN) != 1 ||
		EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag) != 1)
		die("AES-256-GCM setup");
	ok = EVP_DecryptFinal_ex(ctx, out + len, &len);
	EVP_CIPHER_CTX_free(ctx);
	return ok;
}

int
main(int argc, char **argv)
{
	double		secs = argc > 1 ? atof(argv[1]) : 2.0;
	unsigned char msg[MSG_LEN],
				sig[512],
				key[32],
				iv[12],
				aad[16],
				plain[RES_LEN],
				ct[RES_LEN],
				out[RES_LEN + 16],
				tag[16];
	size_t		siglen = sizeof(sig);
	EVP_PKEY   *pkey;
	EVP_MD_CTX *sctx;
	EVP_CIPHER_CTX *ectx;
	int			len;
	long		n;
	double		t0,
				verify_us,
				decrypt_us;

	if (secs <= 0)
		secs = 2.0;
	memset(msg, 'a', sizeof(msg));
	memset(plain, '{', sizeof(plain));
	if (RAND_bytes(key, sizeof(key)) != 1 || RAND_bytes(iv, sizeof(iv)) != 1 ||
		RAND_bytes(aad, sizeof(aad)) != 1)
		die("RAND_bytes");

	/* a key pair and a signature, as the platform's */
	pkey = EVP_RSA_gen(2048);
	sctx = EVP_MD_CTX_new();
	if (pkey == NULL || sctx == NULL ||
		EVP_DigestSignInit(sctx, NULL, EVP_sha256(), NULL, pkey) != 1 ||
		EVP_DigestSign(sctx, sig, &siglen, msg, MSG_LEN) != 1)
		die("signing");
	EVP_MD_CTX_free(sctx);

	/* the resource, encrypted */
	ectx = EVP_CIPHER_CTX_new();
	if (ectx == NULL ||
		EVP_EncryptInit_ex(ectx, EVP_aes_256_gcm(), NULL, key, iv) != 1 ||
		EVP_EncryptUpdate(ectx, NULL, &len, aad, sizeof(aad)) != 1 ||
		EVP_EncryptUpdate(ectx, ct, &len, plain, RES_LEN) != 1 ||
		EVP_EncryptFinal_ex(ectx, ct + len, &len) != 1 ||
		EVP_CIPHER_CTX_ctrl(ectx, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
		die("encrypting");
	EVP_CIPHER_CTX_free(ectx);

	/* each must succeed: a measurement of a failing check measures nothing */
	if (verify_once(pkey, msg, sig, siglen) != 1)
		die("verifying");
	if (decrypt_once(key, iv, aad, ct, tag, out) != 1 || memcmp(out, plain, RES_LEN) != 0)
		die("decrypting");

	t0 = cpu_now();
	for (n = 0; cpu_now() - t0 < secs; n += 16)
		for (int i = 0; i < 16; i++)
			if (verify_once(pkey, msg, sig, siglen) != 1)
				die("verifying");
	verify_us = (cpu_now() - t0) * 1e6 / n;

	t0 = cpu_now();
	for (n = 0; cpu_now() - t0 < secs / 4; n += 256)
		for (int i = 0; i < 256; i++)
			if (decrypt_once(key, iv, aad, ct, tag, out) != 1)
				die("decrypting");
	decrypt_us = (cpu_now() - t0) * 1e6 / n;

	printf("crypto_us=%.1f verify_us=%.1f decrypt_us=%.1f\n",
		   verify_us + decrypt_us, verify_us, decrypt_us);
	EVP_PKEY_free(pkey);
	return 0;
}
