/*-------------------------------------------------------------------------
 *
 * fields.h
 *	  A few string fields of JSON text read in one walk of PostgreSQL's
 *	  JSON parser, without building the document (WeChat Pay's envelope,
 *	  which is read once and never stored).
 *
 * fields.c is built into the backend and into the libFuzzer target
 * test/fuzz/fuzz_json.c (with the frontend build of the parser), where it
 * is checked against a reference reading of the same text.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_FIELDS_H
#define PAYNOTIFY_FIELDS_H

#include "common/jsonapi.h"

/*
 * The values of a document read with PostgreSQL's parser, counted as they
 * come (json.c's builder and the walk below share it).
 */
typedef struct PnJsonCount
{
	long long	values;
	long long	max_values;
	bool		bad;
} PnJsonCount;

/*
 * One more value: an object or an array (type JSON_TOKEN_OBJECT_START or
 * JSON_TOKEN_ARRAY_START, token NULL), or a scalar and its token.  False,
 * and bad set for good, past max_values, for a scalar that is the whole
 * document (root), and for a number pn_json_number_ok refuses: what
 * jsonb_in would raise on, refused instead.
 */
extern bool pn_json_count_value(PnJsonCount *c, bool root, JsonTokenType type, const char *token);

/* the most fields one walk looks for */
#define PN_MAX_FIELDS 16

/* one field asked for, and what the walk found */
typedef struct PnJsonField
{
	const char *path;			/* "key" or "key.key" */
	int			found;			/* 0 absent, 1 a string (value), -1 anything else */
	char	   *value;			/* the string, as the parser hands it over */
} PnJsonField;

/*
 * Walk the text of lex (made with need_escapes) and find each field as
 * jsonb would give it: a path is a key of the root object or two keys
 * ("resource.nonce": a path has at most one dot, so a key with a dot in
 * it cannot be asked for); a key given twice in an object keeps its last value,
 * the whole of it; a value inside an array is no field.  False, and
 * nothing found, when the parser refuses the text, the root is not an
 * object, a number is one pn_json_number_ok refuses, the text holds more
 * than max_values values (objects, arrays and scalars); and, as a caller's
 * error, when n is more than PN_MAX_FIELDS, a path has two dots or lex was
 * made without need_escapes.
 */
extern bool pn_fields_walk(JsonLexContext *lex, PnJsonField *fields, int n, long long max_values);

/* Every field absent (what pn_fields_walk leaves when it refuses). */
extern void pn_fields_none(PnJsonField *fields, int n);

#endif							/* PAYNOTIFY_FIELDS_H */
