/*-------------------------------------------------------------------------
 *
 * json.c
 *	  Reading requests: header lookup, JSON bodies into jsonb, dotted-path
 *	  field access and exact number parsing; the few helpers that build
 *	  jsonb values (notice.c, apply.c); and text cut to a number of bytes
 *	  on a character's boundary.
 *
 * Everything a request reaches in this file returns a verdict instead of
 * raising: a malformed notification must be answered, never abort the
 * transaction.  PostgreSQL's own JSON parser does the parsing; the
 * hand-written scanners it needs (the nesting-depth pre-scan, because the
 * parser's recursion would otherwise end in a stack-depth ERROR, the
 * number-token check, and exact amounts) live in parse/scan.c, free of
 * PostgreSQL so that they can be fuzzed on their own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "paynotify.h"
#include "scan.h"

/*
 * Most values (scalars, objects and arrays) a JSON body may hold.  jsonb_in
 * raises instead of answering when one container outgrows what it can
 * build (about 16 million elements, or 256 MB of jsonb), which a body a
 * raised paynotify.max_body_size lets through can reach: "[1,1,...]" of
 * 40 MB.  A 1 MB body holds at most about half a million values.
 */
#define MAX_JSON_VALUES (4 * 1024 * 1024)

/*
 * Builds jsonb while PostgreSQL's parser walks the text, the way jsonb_in
 * does, so a body is parsed once; it also refuses what jsonb_in would raise
 * on (numbers numeric_in cannot take, too many values).
 */
typedef struct Builder
{
	JsonbParseState *state;
	JsonbValue *result;
	PnJsonCount count;
} Builder;

static void build_object_start(void *state);
static void build_object_end(void *state);
static void build_array_start(void *state);
static void build_array_end(void *state);
static void build_key(void *state, char *fname, bool isnull);
static void build_scalar(void *state, char *token, JsonTokenType type);

/* ---------------------------------------------------------------------
 * Headers
 * ---------------------------------------------------------------------
 */

/*
 * Find a header by name, case-insensitively, in a jsonb object of
 * name → string.  Returns 1 and a NUL-terminated copy when found once as a
 * string without NUL bytes, 0 when absent, -1 when ambiguous (two spellings),
 * not a string, or headers is not an object.
 */
int
pn_header(Jsonb *headers, const char *name, char **value)
{
	int			found;

	pn_headers(headers, &name, 1, value, &found);
	return found;
}

/*
 * pn_header for n names in one pass over the headers: found[i] and
 * values[i] are what pn_header(headers, names[i], &values[i]) gives.
 */
void
pn_headers(Jsonb *headers, const char *const *names, int n, char **values, int *found)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			match = -1;

	for (int i = 0; i < n; i++)
	{
		values[i] = NULL;
		found[i] = (headers != NULL && !JB_ROOT_IS_OBJECT(headers)) ? -1 : 0;
	}
	if (headers == NULL || !JB_ROOT_IS_OBJECT(headers))
		return;

	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			match = -1;
			for (int i = 0; i < n && match < 0; i++)
				if ((size_t) v.val.string.len == strlen(names[i]) &&
					pg_strncasecmp(v.val.string.val, names[i], v.val.string.len) == 0)
					match = i;
		}
		else if (tok == WJB_VALUE && match >= 0 && found[match] >= 0)
		{
			if (found[match] || v.type != jbvString ||
				memchr(v.val.string.val, '\0', v.val.string.len) != NULL)
			{
				/* pn_header gives up on this name here: no value */
				found[match] = -1;
				values[match] = NULL;
				continue;
			}
			values[match] = pnstrdup(v.val.string.val, v.val.string.len);
			found[match] = 1;
		}
	}
}

/*
 * A copy of s, at most max bytes of it, not cut inside a character: a
 * header's value or an error's message as paynotify keeps or passes it on.
 */
char *
pn_clip_text(const char *s, int max)
{
	return pn_clip_len(s, strlen(s), max);
}

/* pn_clip_text of the len bytes at s (no NUL needed), NUL-terminated */
char *
pn_clip_len(const char *s, int len, int max)
{
	return pnstrdup(s, pg_mbcliplen(s, len, max));
}

/* ---------------------------------------------------------------------
 * JSON bodies
 * ---------------------------------------------------------------------
 */

/* What both readers below refuse before the parser runs. */
static bool
text_ok(const char *text, int len)
{
	return len > 0 && memchr(text, '\0', len) == NULL &&
		pn_json_depth_ok(text, len, PAYNOTIFY_MAX_JSON_DEPTH) &&
		pg_verify_mbstr(PG_UTF8, text, len, true);
}

/*
 * Parse UTF-8 JSON text into jsonb.  NULL when the text is not valid UTF-8,
 * not valid JSON, nested deeper than PAYNOTIFY_MAX_JSON_DEPTH, holds a
 * number jsonb could not store, or more than MAX_JSON_VALUES values.
 */
Jsonb *
pn_parse_json(const char *text, int len)
{
	return pn_parse_json_max(text, len, MAX_JSON_VALUES);
}

/*
 * pn_parse_json with at most max_values values: for a document that is
 * not a request to answer (a day's bill), where one that outgrows jsonb
 * may end in PostgreSQL's own error.
 */
Jsonb *
pn_parse_json_max(const char *text, int len, int64 max_values)
{
	JsonLexContext *lex;
	JsonSemAction sem;
	Builder		b;

	if (!text_ok(text, len))
		return NULL;

	memset(&b, 0, sizeof(b));
	b.count.max_values = max_values;
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &b;
	sem.object_start = build_object_start;
	sem.object_end = build_object_end;
	sem.array_start = build_array_start;
	sem.array_end = build_array_end;
	sem.object_field_start = build_key;
	sem.scalar = build_scalar;
	lex = makeJsonLexContextCstringLen(pnstrdup(text, len), len, PG_UTF8, true);
	if (pg_parse_json(lex, &sem) != JSON_SUCCESS || b.count.bad || b.result == NULL)
		return NULL;
	return JsonbValueToJsonb(b.result);
}

/* ---------------------------------------------------------------------
 * Fields of a document that is never stored (src/parse/fields.c)
 * ---------------------------------------------------------------------
 */

bool
pn_json_fields(const char *text, int len, PnJsonField *fields, int n)
{
	if (!text_ok(text, len))
	{
		pn_fields_none(fields, n);
		return false;
	}
	return pn_fields_walk(makeJsonLexContextCstringLen(pnstrdup(text, len), len, PG_UTF8, true),
						  fields, n, MAX_JSON_VALUES);
}

static void
build_object_start(void *state)
{
	Builder    *b = (Builder *) state;

	if (pn_json_count_value(&b->count, false, JSON_TOKEN_OBJECT_START, NULL))
		(void) pushJsonbValue(&b->state, WJB_BEGIN_OBJECT, NULL);
}

static void
build_object_end(void *state)
{
	Builder    *b = (Builder *) state;

	if (!b->count.bad)
		b->result = pushJsonbValue(&b->state, WJB_END_OBJECT, NULL);
}

static void
build_array_start(void *state)
{
	Builder    *b = (Builder *) state;

	if (pn_json_count_value(&b->count, false, JSON_TOKEN_ARRAY_START, NULL))
		(void) pushJsonbValue(&b->state, WJB_BEGIN_ARRAY, NULL);
}

static void
build_array_end(void *state)
{
	Builder    *b = (Builder *) state;

	if (!b->count.bad)
		b->result = pushJsonbValue(&b->state, WJB_END_ARRAY, NULL);
}

static void
build_key(void *state, char *fname, bool isnull)
{
	Builder    *b = (Builder *) state;
	JsonbValue	v;

	if (b->count.bad)
		return;
	v.type = jbvString;
	v.val.string.val = fname;
	v.val.string.len = strlen(fname);
	(void) pushJsonbValue(&b->state, WJB_KEY, &v);
}

/*
 * A scalar inside an object or array.  A document that is a bare scalar is
 * refused: every body and payload paynotify reads is an object.
 */
static void
build_scalar(void *state, char *token, JsonTokenType type)
{
	Builder    *b = (Builder *) state;
	JsonbValue	v;

	if (!pn_json_count_value(&b->count, b->state == NULL, type, token))
		return;
	switch (type)
	{
		case JSON_TOKEN_STRING:
			v.type = jbvString;
			v.val.string.val = token;
			v.val.string.len = strlen(token);
			break;
		case JSON_TOKEN_NUMBER:
			/* in range (pn_json_count_value): numeric_in cannot raise */
			v.type = jbvNumeric;
			v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																CStringGetDatum(token),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));
			break;
		case JSON_TOKEN_TRUE:
		case JSON_TOKEN_FALSE:
			v.type = jbvBool;
			v.val.boolean = (type == JSON_TOKEN_TRUE);
			break;
		default:
			v.type = jbvNull;
			break;
	}
	(void) pushJsonbValue(&b->state,
						  b->state->contVal.type == jbvArray ? WJB_ELEM : WJB_VALUE, &v);
}

/* ---------------------------------------------------------------------
 * Field access
 * ---------------------------------------------------------------------
 */

/* Follow a dotted path of object keys; NULL when any step is missing. */
JsonbValue *
pn_json_value(Jsonb *doc, const char *path, JsonbValue *buf)
{
	JsonbContainer *cont;
	const char *seg = path;

	if (doc == NULL || !JB_ROOT_IS_OBJECT(doc))
		return NULL;
	cont = &doc->root;
	for (;;)
	{
		const char *dot = strchr(seg, '.');
		int			seglen = dot ? (int) (dot - seg) : (int) strlen(seg);

		if (getKeyJsonValueFromContainer(cont, seg, seglen, buf) == NULL)
			return NULL;
		if (dot == NULL)
			return buf;
		if (buf->type != jbvBinary || !JsonContainerIsObject(buf->val.binary.data))
			return NULL;
		cont = buf->val.binary.data;
		seg = dot + 1;
	}
}

/* A string field (without NUL bytes) as a palloc'd C string. */
bool
pn_json_string(Jsonb *doc, const char *path, char **value)
{
	JsonbValue	buf;
	JsonbValue *v = pn_json_value(doc, path, &buf);

	if (v == NULL || v->type != jbvString ||
		memchr(v->val.string.val, '\0', v->val.string.len) != NULL)
		return false;
	*value = pnstrdup(v->val.string.val, v->val.string.len);
	return true;
}

/* An integral number field that fits in int64. */
bool
pn_json_int64(Jsonb *doc, const char *path, int64 *value)
{
	JsonbValue	buf;
	JsonbValue *v = pn_json_value(doc, path, &buf);
	char	   *s;
	bool		neg;

	if (v == NULL || v->type != jbvNumeric)
		return false;
	s = DatumGetCString(DirectFunctionCall1(numeric_out,
											NumericGetDatum(v->val.numeric)));
	neg = (s[0] == '-');
	if (!pn_parse_int64(s + neg, strlen(s + neg), value))
		return false;
	if (neg)
		*value = -*value;
	return true;
}

/* A boolean field. */
bool
pn_json_bool(Jsonb *doc, const char *path, bool *value)
{
	JsonbValue	buf;
	JsonbValue *v = pn_json_value(doc, path, &buf);

	if (v == NULL || v->type != jbvBool)
		return false;
	*value = v->val.boolean;
	return true;
}

/*
 * An array of objects at path, each as a Jsonb of its own: false when the
 * path is no array, holds more than max elements, or one is no object.
 */
bool
pn_json_objects(Jsonb *doc, const char *path, int max, Jsonb ***elems, int *n)
{
	JsonbValue	buf;
	JsonbValue *v = pn_json_value(doc, path, &buf);
	JsonbContainer *arr;
	int			count;

	if (v == NULL || v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		return false;
	arr = v->val.binary.data;
	count = JsonContainerSize(arr);
	if (count > max)
		return false;
	*elems = palloc(sizeof(Jsonb *) * Max(count, 1));
	for (int i = 0; i < count; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(arr, i);

		if (e == NULL || e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
			return false;
		(*elems)[i] = JsonbValueToJsonb(e);
	}
	*n = count;
	return true;
}

/* Whether the path exists at all (any type, null included). */
bool
pn_json_present(Jsonb *doc, const char *path)
{
	JsonbValue	buf;

	return pn_json_value(doc, path, &buf) != NULL;
}

/* ---------------------------------------------------------------------
 * Numbers
 * ---------------------------------------------------------------------
 */

/* Unsigned decimal digits only (1..18 of them), no sign, no spaces. */
bool
pn_parse_int64(const char *s, int len, int64 *value)
{
	int64_t		v;

	if (len <= 0 || !pn_scan_int64(s, (size_t) len, &v))
		return false;
	*value = v;
	return true;
}

/*
 * An exact decimal amount ("20", "88.8", "88.88" for scale 2) in minor
 * units.  No sign, exponent, spaces or leading '.'; at most scale decimals.
 */
bool
pn_parse_decimal(const char *s, int len, int scale, int64 *value)
{
	int64_t		v;

	if (len <= 0 || !pn_scan_decimal(s, (size_t) len, scale, &v))
		return false;
	*value = v;
	return true;
}

/* n digits at s as a number; -1 when any is not a digit */
static int
time_digits(const char *s, int n)
{
	int			v = 0;

	for (int i = 0; i < n; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

/*
 * A gateway's time: "YYYY-MM-DDTHH:MM:SS" (or a space for the T) followed
 * by "Z", "+HH:MM" / "-HH:MM", or nothing, when it is offset_s east of UTC
 * (Alipay's times are Beijing time).  Anything else, or a day that does
 * not exist, is false.
 */
bool
pn_parse_time(const char *s, int offset_s, int64 *unix_s)
{
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	size_t		len = s ? strlen(s) : 0;
	int			y, mo, d, h, mi, se;
	int64		era, yoe, doy, doe, days;

	if (len < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') ||
		s[13] != ':' || s[16] != ':')
		return false;
	y = time_digits(s, 4);
	mo = time_digits(s + 5, 2);
	d = time_digits(s + 8, 2);
	h = time_digits(s + 11, 2);
	mi = time_digits(s + 14, 2);
	se = time_digits(s + 17, 2);
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h < 0 || h > 23 ||
		mi < 0 || mi > 59 || se < 0 || se > 59)
		return false;
	if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return false;
	if (len == 20 && s[19] == 'Z')
		offset_s = 0;
	else if (len == 25 && (s[19] == '+' || s[19] == '-') && s[22] == ':')
	{
		int			oh = time_digits(s + 20, 2);
		int			om = time_digits(s + 23, 2);

		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return false;
		offset_s = (oh * 3600 + om * 60) * (s[19] == '-' ? -1 : 1);
	}
	else if (len != 19)
		return false;
	/* days from 1970-01-01 (H. Hinnant's days_from_civil) */
	era = (mo <= 2 ? y - 1 : y) / 400;
	yoe = (mo <= 2 ? y - 1 : y) - era * 400;
	doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	days = era * 146097 + doe - 719468;
	*unix_s = days * 86400 + h * 3600 + mi * 60 + se - offset_s;
	return true;
}

/* ---------------------------------------------------------------------
 * Building jsonb (pushJsonbValue into an object being built)
 * ---------------------------------------------------------------------
 */

/* Push an object key. */
void
pn_jsonb_push_key(JsonbParseState **st, const char *key)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	(void) pushJsonbValue(st, WJB_KEY, &k);
}

/* Push key: a string, or null when val is NULL. */
void
pn_jsonb_push_text(JsonbParseState **st, const char *key, const char *val)
{
	JsonbValue	v;

	pn_jsonb_push_key(st, key);
	if (val == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) val;
		v.val.string.len = strlen(val);
	}
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/* Push key: an integer. */
void
pn_jsonb_push_int64(JsonbParseState **st, const char *key, int64 val)
{
	JsonbValue	v;

	pn_jsonb_push_key(st, key);
	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(val);
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/* Push key: a boolean. */
void
pn_jsonb_push_bool(JsonbParseState **st, const char *key, bool val)
{
	JsonbValue	v;

	pn_jsonb_push_key(st, key);
	v.type = jbvBool;
	v.val.boolean = val;
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/* A key and a whole jsonb document as its value. */
void
pn_jsonb_push_jsonb(JsonbParseState **st, const char *key, Jsonb *val)
{
	JsonbValue	v;

	pn_jsonb_push_key(st, key);
	v.type = jbvBinary;
	v.val.binary.data = &val->root;
	v.val.binary.len = VARSIZE(val) - VARHDRSZ;
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/* Whether the len bytes at s (not NUL-terminated) contain mark. */
static bool
contains(const char *s, int len, const char *mark)
{
	int			m = strlen(mark);

	for (int i = 0; i + m <= len; i++)
		if (memcmp(s + i, mark, m) == 0)
			return true;
	return false;
}

/*
 * doc without the keys listed, at any depth, and their values, and with
 * every string that contains one of the marks (at any depth) replaced by
 * "redacted": a copy; doc itself when it is a scalar.
 */
Jsonb *
pn_jsonb_redacted(Jsonb *doc, const char *const *keys, int nkeys,
				  const char *const *marks, int nmarks)
{
	JsonbIterator *it;
	JsonbParseState *st = NULL;
	JsonbValue	v;
	JsonbValue *res = NULL;
	JsonbIteratorToken tok;

	if (JB_ROOT_IS_SCALAR(doc))
		return doc;
	it = JsonbIteratorInit(&doc->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		bool		listed = false;

		for (int i = 0; tok == WJB_KEY && i < nkeys; i++)
			listed |= (v.val.string.len == (int) strlen(keys[i]) &&
					   memcmp(v.val.string.val, keys[i], v.val.string.len) == 0);
		if (listed)
		{
			int			depth = 0;

			/* the key's value: a scalar, or a container to its end */
			do
			{
				tok = JsonbIteratorNext(&it, &v, false);
				if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY)
					depth++;
				else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
					depth--;
			} while (depth > 0);
			continue;
		}
		if ((tok == WJB_VALUE || tok == WJB_ELEM) && v.type == jbvString)
		{
			for (int i = 0; i < nmarks; i++)
				if (contains(v.val.string.val, v.val.string.len, marks[i]))
				{
					v.val.string.val = "redacted";
					v.val.string.len = strlen("redacted");
					break;
				}
		}
		res = pushJsonbValue(&st, tok, tok < WJB_BEGIN_ARRAY ? &v : NULL);
	}
	return JsonbValueToJsonb(res);
}
