/*-------------------------------------------------------------------------
 *
 * scan.h
 *	  The hand-written scanners, without PostgreSQL or OpenSSL: strict
 *	  base64, the JSON nesting-depth pre-scan and number-token check, and
 *	  exact integer and decimal amounts.
 *
 * scan.c includes no PostgreSQL or OpenSSL header and allocates nothing:
 * everything is written into buffers the caller provides, so the same code
 * runs inside a backend (json.c and crypto.c wrap it with palloc'd results)
 * and inside the libFuzzer targets in test/fuzz/.  Every function is total: any input bytes give a verdict,
 * never a crash, and every loop is bounded by the input.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_SCAN_H
#define PAYNOTIFY_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------- base64 (RFC 4648 standard alphabet, padded) ---------- */

/* Output bytes pn_scan_base64 needs for an input of len characters. */
#define PN_BASE64_DECODED_SIZE(len) ((size_t) (len) / 4 * 3 + 1)

/*
 * Decode in strictly: a non-zero multiple of 4 characters of the standard
 * alphabet, '=' only as the last one or two, and the bits the padding
 * leaves over all zero, so every byte string has exactly one accepted
 * spelling.  No whitespace, no URL-safe alphabet.  out needs
 * PN_BASE64_DECODED_SIZE(inlen) bytes.  False (out unspecified) otherwise.
 */
extern bool pn_scan_base64(const char *in, size_t inlen,
						   unsigned char *out, size_t outsize,
						   size_t *outlen);

/* ---------- hex ---------- */

/* The value of a hex digit (either case), or -1. */
extern int	pn_scan_hex_value(unsigned char c);

/* ---------- JSON ---------- */

/* Longest number token taken, and the largest exponent magnitude. */
#define PN_JSON_MAX_NUMBER_TOKEN 40
#define PN_JSON_MAX_EXPONENT 1000

/*
 * Whether the brackets of text nest at most max_depth deep, counting only
 * outside strings.  Run before PostgreSQL's recursive JSON parser, it bounds
 * the parser's recursion: for any text the parser accepts, this is true
 * exactly when its nesting depth is at most max_depth, and on any text the
 * parser never recurses deeper than the depth this counts.
 */
extern bool pn_json_depth_ok(const char *text, size_t len, int max_depth);

/*
 * Whether a number token (as the JSON lexer delimits it) is one jsonb can
 * store: at most PN_JSON_MAX_NUMBER_TOKEN characters and an exponent of at
 * most PN_JSON_MAX_EXPONENT in magnitude.  numeric_in raises an error,
 * rather than answering, for exponents beyond numeric's range (1e999999,
 * 1e-16384), and a request must never make paynotify raise.
 */
extern bool pn_json_number_ok(const char *token, size_t len);

/* ---------- numbers ---------- */

#define PN_INT_MAX_DIGITS 18

/* Unsigned decimal digits only (1..18 of them), no sign, no spaces. */
extern bool pn_scan_int64(const char *s, size_t len, int64_t *value);

/*
 * An exact decimal amount ("20", "88.8", "88.88" for scale 2) in minor
 * units.  No sign, exponent, spaces, leading '.' or superfluous leading
 * zero; at most scale decimals; the integer part at most 18 - scale digits,
 * so the result is below 10^18.
 */
extern bool pn_scan_decimal(const char *s, size_t len, int scale,
							int64_t *value);

#endif							/* PAYNOTIFY_SCAN_H */
