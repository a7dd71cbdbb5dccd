/*-------------------------------------------------------------------------
 *
 * fields.c
 *	  A few string fields of JSON text, as jsonb would give them, read in
 *	  one walk of PostgreSQL's JSON parser without building the document
 *	  (see fields.h).  The same source in the backend (json.c,
 *	  pn_json_fields) and in the libFuzzer target test/fuzz/fuzz_json.c.
 *
 * Only the root object and the objects that are values of its keys are
 * tracked: a path has one or two keys.  Every callback is bounded by the
 * text; once the walk is refused (bad), nothing more is tracked.
 *
 *-------------------------------------------------------------------------
 */
#ifdef FRONTEND
#include "postgres_fe.h"
#else
#include "postgres.h"
#endif

#include "fields.h"
#include "scan.h"

#define FIELD_DEPTH 2			/* the containers tracked: the root and one below */

typedef enum
{
	IN_OBJECT,
	IN_ARRAY
} Container;

typedef struct FieldScan
{
	PnJsonField *fields;
	int			n;
	size_t		len1[PN_MAX_FIELDS];	/* each path's first key's length */
	const char *k2[PN_MAX_FIELDS];	/* each path's second key, or NULL */
	int			depth;			/* containers open: 1 inside the root */
	Container	kind[FIELD_DEPTH + 1];	/* kind[d]: the container at depth d */
	char	   *key[FIELD_DEPTH + 1];	/* key[d]: the current key at depth d */
	size_t		keylen[FIELD_DEPTH + 1];
	PnJsonCount count;
} FieldScan;

/* Whether the first key of field i's path is key (of keylen bytes). */
static bool
first_key_is(const FieldScan *f, int i, const char *key, size_t keylen)
{
	return f->len1[i] == keylen && memcmp(f->fields[i].path, key, keylen) == 0;
}

/*
 * The field whose path is where the next value sits (a key of the root, or
 * a key of an object that is the value of a key of the root), or NULL.
 */
static PnJsonField *
field_here(FieldScan *f)
{
	if (f->depth < 1 || f->depth > 2 || f->kind[1] != IN_OBJECT || f->key[1] == NULL ||
		(f->depth == 2 && (f->kind[2] != IN_OBJECT || f->key[2] == NULL)))
		return NULL;
	for (int i = 0; i < f->n; i++)
	{
		const char *k2 = f->k2[i];

		if (!first_key_is(f, i, f->key[1], f->keylen[1]))
			continue;
		if (f->depth == 1 ? k2 == NULL : (k2 != NULL && strcmp(k2, f->key[2]) == 0))
			return &f->fields[i];
	}
	return NULL;
}

/* A value (not a string) sits at the current key: its field is present. */
static void
field_other(FieldScan *f)
{
	PnJsonField *field = field_here(f);

	if (field != NULL)
	{
		field->found = -1;
		field->value = NULL;
	}
}

bool
pn_json_count_value(PnJsonCount *c, bool root, JsonTokenType type, const char *token)
{
	if (c->bad)
		return false;
	if (++c->values > c->max_values ||
		(type != JSON_TOKEN_OBJECT_START && type != JSON_TOKEN_ARRAY_START &&
		 (root || (type == JSON_TOKEN_NUMBER && !pn_json_number_ok(token, strlen(token))))))
		c->bad = true;
	return !c->bad;
}

void
pn_fields_none(PnJsonField *fields, int n)
{
	for (int i = 0; i < n; i++)
	{
		fields[i].found = 0;
		fields[i].value = NULL;
	}
}

static void
field_container_start(FieldScan *f, Container kind)
{
	if (!pn_json_count_value(&f->count, f->depth == 0,
							 kind == IN_OBJECT ? JSON_TOKEN_OBJECT_START : JSON_TOKEN_ARRAY_START, NULL))
		return;
	if (f->depth == 0 && kind != IN_OBJECT)
	{
		f->count.bad = true;	/* the root is no object */
		return;
	}
	field_other(f);
	f->depth++;
	if (f->depth >= 1 && f->depth <= FIELD_DEPTH)
	{
		f->kind[f->depth] = kind;
		f->key[f->depth] = NULL;
	}
}

static void
field_object_start(void *state)
{
	field_container_start((FieldScan *) state, IN_OBJECT);
}

static void
field_array_start(void *state)
{
	field_container_start((FieldScan *) state, IN_ARRAY);
}

static void
field_container_end(void *state)
{
	FieldScan  *f = (FieldScan *) state;

	/* once bad, nothing is tracked any more (the walk is refused) */
	if (!f->count.bad)
		f->depth--;
}

/*
 * A key.  Of the root, a later value of it replaces the earlier one whole,
 * so the fields found under the earlier one (paths of two keys) are
 * forgotten; a field's own value always follows its key and sets it.
 */
static void
field_key(void *state, char *fname, bool isnull)
{
	FieldScan  *f = (FieldScan *) state;

	(void) isnull;
	if (f->count.bad || f->depth < 1 || f->depth > 2)
		return;
	f->key[f->depth] = fname;
	f->keylen[f->depth] = strlen(fname);
	if (f->depth != 1)
		return;
	for (int i = 0; i < f->n; i++)
		if (f->k2[i] != NULL && first_key_is(f, i, fname, f->keylen[1]))
		{
			f->fields[i].found = 0;
			f->fields[i].value = NULL;
		}
}

static void
field_scalar(void *state, char *token, JsonTokenType type)
{
	FieldScan  *f = (FieldScan *) state;
	PnJsonField *field;

	if (!pn_json_count_value(&f->count, f->depth == 0, type, token))
		return;
	field = field_here(f);
	if (field == NULL)
		return;
	if (type == JSON_TOKEN_STRING)
	{
		field->found = 1;
		field->value = token;
	}
	else
	{
		field->found = -1;
		field->value = NULL;
	}
}

bool
pn_fields_walk(JsonLexContext *lex, PnJsonField *fields, int n, long long max_values)
{
	JsonSemAction sem;
	FieldScan	f;

	pn_fields_none(fields, n);
	if (n > PN_MAX_FIELDS || lex->strval == NULL)
		return false;
	memset(&f, 0, sizeof(f));
	f.fields = fields;
	f.n = n;
	f.count.max_values = max_values;
	for (int i = 0; i < n; i++)
	{
		const char *dot = strchr(fields[i].path, '.');

		if (dot != NULL && strchr(dot + 1, '.') != NULL)
			return false;
		f.len1[i] = dot != NULL ? (size_t) (dot - fields[i].path) : strlen(fields[i].path);
		f.k2[i] = dot != NULL ? dot + 1 : NULL;
	}
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &f;
	sem.object_start = field_object_start;
	sem.object_end = field_container_end;
	sem.array_start = field_array_start;
	sem.array_end = field_container_end;
	sem.object_field_start = field_key;
	sem.scalar = field_scalar;
	if (pg_parse_json(lex, &sem) != JSON_SUCCESS || f.count.bad)
	{
		pn_fields_none(fields, n);
		return false;
	}
	return true;
}
