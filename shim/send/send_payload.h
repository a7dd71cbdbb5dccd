/*
 * send_payload.h
 *		The parsers of send_payload.c, for paynotify-send and the fuzz
 *		target (test/fuzz/fuzz_payload.c): the JSON reader, member lookup
 *		in compact JSON, and a payload parsed from bytes already read.
 */
#ifndef PAYNOTIFY_SEND_PAYLOAD_H
#define PAYNOTIFY_SEND_PAYLOAD_H

#include "send.h"

#define PN_JSON_MAX_DEPTH	64	/* objects and arrays nested deeper: refused */

/* A value of compact, valid JSON: s[a..b). */
struct pn_span
{
	size_t		a;
	size_t		b;
};

/*
 * Validates one JSON text s[0..n) (RFC 8259, UTF-8, nesting up to
 * PN_JSON_MAX_DEPTH); with out, appends it made compact.  NULL when valid,
 * else why not, with *at the byte where it stopped.
 */
const char *pn_json_check(const char *s, size_t n, struct pn_buf *out, size_t *at);

/*
 * The member `key` (its name as written, without the quotes) of the object
 * at v in compact valid JSON s: the whole member in *member, its value in
 * *val.  0 found, 1 absent, -1 not an object or the name appears twice.
 */
int			pn_json_member(const char *s, struct pn_span v, const char *key,
						   struct pn_span *member, struct pn_span *val);

/*
 * A payload of gateway gw from txt[0..len) (malloc'd, taken over: kept as
 * the Stripe body or freed); name is what messages call it.  0, or -1 with
 * a message logged and *pl left empty.
 */
int			pn_payload_parse(struct pn_payload *pl, enum pn_gateway gw, const char *name,
							 char *txt, size_t len);

#endif							/* PAYNOTIFY_SEND_PAYLOAD_H */
