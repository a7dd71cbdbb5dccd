/*-------------------------------------------------------------------------
 *
 * form.h
 *	  The urlencoded form (Alipay) and its signed canonical content, parsed
 *	  without PostgreSQL.
 *
 * form.c includes neither postgres.h nor OpenSSL, allocates nothing, and
 * writes only into buffers its caller provides, so the fuzz targets in
 * test/fuzz/ link it alone.  Every function is total: any input bytes give
 * a result code, never a crash, and every loop is bounded by the input.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_FORM_H
#define PAYNOTIFY_FORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------- application/x-www-form-urlencoded ---------- */

#define PN_FORM_MAX_PARAMS 512

/* Scratch bytes pn_form_decode needs for a body of len bytes. */
#define PN_FORM_BUFSIZE(len) ((size_t) (len) + 1)

typedef enum PnFormStatus
{
	PN_FORM_OK = 0,
	PN_FORM_EMPTY,				/* no parameter at all */
	PN_FORM_EMPTY_ITEM,			/* "&&", a leading/trailing '&', or "=v" */
	PN_FORM_NO_EQUALS,			/* an item without '=' */
	PN_FORM_BAD_ESCAPE,			/* '%' not followed by two hex digits */
	PN_FORM_NUL,				/* a name or value decodes to a NUL byte */
	PN_FORM_DUPLICATE,			/* the same name twice */
	PN_FORM_TOO_MANY,			/* more than PN_FORM_MAX_PARAMS items */
	PN_FORM_NO_SPACE			/* caller's buffer too small */
} PnFormStatus;

/*
 * One decoded parameter.  name and value point into the caller's buffer,
 * are NUL-terminated, and contain no NUL byte; the lengths exclude the
 * terminator.  The bytes are exactly the percent-decoded octets: no
 * charset is applied.
 */
typedef struct PnFormParam
{
	const char *name;
	size_t		name_len;
	const char *value;
	size_t		value_len;
} PnFormParam;

typedef struct PnForm
{
	int			nparams;
	PnFormParam params[PN_FORM_MAX_PARAMS];		/* in body order */
	const PnFormParam *sorted[PN_FORM_MAX_PARAMS];	/* by name, memcmp */
} PnForm;

/*
 * Decode body once into form, using buf (at least PN_FORM_BUFSIZE(len)
 * bytes) for the decoded strings.  On any status other than PN_FORM_OK the
 * contents of form are unspecified.
 */
extern PnFormStatus pn_form_decode(const char *body, size_t len,
								   PnForm *form, char *buf, size_t bufsize);

/* The parameter called name (NUL-terminated), or NULL. */
extern const PnFormParam *pn_form_get(const PnForm *form, const char *name);

/* Whether some parameter other than sign/sign_type has an empty value. */
extern bool pn_form_has_empty(const PnForm *form);

/*
 * Alipay's signed content: every parameter but sign and sign_type, sorted
 * by name in byte order, as name=value joined by '&'; parameters with an
 * empty value are left out unless keep_empty (then they appear as "name=").
 * Writes a NUL-terminated string into out and returns its length, or
 * (size_t) -1 when outsize is too small.  An outsize of the body length + 1
 * is always enough.
 */
extern size_t pn_form_canonical(const PnForm *form, bool keep_empty,
								char *out, size_t outsize);

/* A short fixed description of a status, for logs. */
extern const char *pn_form_status_message(PnFormStatus status);

#endif							/* PAYNOTIFY_FORM_H */
