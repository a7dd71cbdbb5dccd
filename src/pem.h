/*-------------------------------------------------------------------------
 *
 * pem.h
 *	  PEM public keys and certificates, loaded with OpenSSL and without
 *	  PostgreSQL (crypto.c), so that test/fuzz/fuzz_pem.c can link them.
 *	  The backend calls them through pn_pkey_load and pn_cert_serial
 *	  (paynotify.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_PEM_H
#define PAYNOTIFY_PEM_H

#include <stddef.h>

#include <openssl/evp.h>

#define PN_MIN_RSA_BITS 2048

/*
 * An RSA public key of at least PN_MIN_RSA_BITS bits from the first PEM
 * "PUBLIC KEY" in pem, or else from its first X.509 "CERTIFICATE".  The
 * caller frees it with EVP_PKEY_free.  NULL with *err set to a fixed
 * message otherwise.  Leaves OpenSSL's error queue empty.
 */
extern EVP_PKEY *pn_pem_pkey(const char *pem, size_t len, const char **err);

/*
 * The serial number of the first PEM certificate in pem, as upper-case hex
 * (BN_bn2hex: a '-' first when negative), or NULL when there is none.  The
 * caller frees it with OPENSSL_free.  Leaves OpenSSL's error queue empty.
 */
extern char *pn_pem_cert_serial(const char *pem, size_t len);

#endif							/* PAYNOTIFY_PEM_H */
