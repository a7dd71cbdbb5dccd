/*-------------------------------------------------------------------------
 *
 * fuzz_json.c
 *	  libFuzzer target: the JSON depth pre-scan and number-token check
 *	  (src/parse/scan.c) in front of PostgreSQL's own JSON parser, as
 *	  pn_parse_json (src/json.c) runs them: no NUL byte, depth pre-scan,
 *	  UTF-8 check, then pg_parse_json, from the frontend build of the parser
 *	  (libpgcommon), which is the same source as the backend's.
 *
 * Invariants, on every input (the parser runs on every UTF-8 input when
 * the pre-scan passes, and on short ones, which cannot exhaust the stack,
 * when it refuses):
 *	- when the pre-scan passes, the parser never nests deeper than
 *	  PAYNOTIFY_MAX_JSON_DEPTH, whether the text is valid or not;
 *	- more precisely the pre-scan never under-counts: the deepest nesting
 *	  the parser reaches, even on text it then refuses, is at most the
 *	  depth the pre-scan counts;
 *	- and on valid JSON it counts exactly, so it never refuses valid JSON
 *	  that nests no deeper than the limit;
 *	- every number token the parser hands over is accepted by
 *	  pn_json_number_ok exactly when it has at most 40 characters and an
 *	  exponent of magnitude at most 1000 (strtol's reading of it);
 *	- the envelope's field reader (src/parse/fields.c, pn_fields_walk)
 *	  agrees with a reference reading of the same text: a tree built from
 *	  the parser's events, each field looked up as jsonb keeps it (the last
 *	  value of a key given twice): it accepts exactly the texts whose
 *	  parse succeeds with every number accepted, an object at the root and
 *	  no more values than a limit drawn from the input, and for each path
 *	  finds the same thing (absent, a string, and which, or another value);
 *	  a path of three keys is always refused.
 *
 * The parser allocates with palloc and, on its error paths, leaves some of
 * it (a field name, a scalar) to be freed with the memory context, as the
 * backend does.  This file therefore provides palloc and friends itself: an
 * arena freed after every input, so the frontend library's fe_memutils is
 * not linked and LeakSanitizer still sees every leak of our own code.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>
#include <stddef.h>
#include <limits.h>

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "fields.h"
#include "scan.h"

#define MAX_DEPTH 64			/* PAYNOTIFY_MAX_JSON_DEPTH, paynotify.h */
#define UNBOUNDED_PARSE_MAX 4096	/* longest text parsed after a refusal */

/* ---------- a per-input "memory context" ---------- */

typedef struct Chunk
{
	struct Chunk *prev;
	struct Chunk *next;
	max_align_t data[];
} Chunk;

static Chunk *arena;

static void *
arena_alloc(size_t size, bool zero)
{
	Chunk	   *c = zero ? calloc(1, sizeof(Chunk) + size) : malloc(sizeof(Chunk) + size);

	if (c == NULL)
		abort();
	c->prev = NULL;
	c->next = arena;
	if (arena)
		arena->prev = c;
	arena = c;
	return c->data;
}

static void
arena_unlink(Chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		arena = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

static void
arena_reset(void)
{
	while (arena)
	{
		Chunk	   *c = arena;

		arena = c->next;
		free(c);
	}
}

void *
palloc(Size size)
{
	return arena_alloc(size, false);
}

void *
palloc0(Size size)
{
	return arena_alloc(size, true);
}

void
pfree(void *pointer)
{
	Chunk	   *c = (Chunk *) ((char *) pointer - offsetof(Chunk, data));

	arena_unlink(c);
	free(c);
}

void *
repalloc(void *pointer, Size size)
{
	Chunk	   *c = (Chunk *) ((char *) pointer - offsetof(Chunk, data));
	Chunk	   *n;

	arena_unlink(c);
	n = realloc(c, sizeof(Chunk) + size);
	if (n == NULL)
		abort();
	n->prev = NULL;
	n->next = arena;
	if (arena)
		arena->prev = n;
	arena = n;
	return n->data;
}

char *
pstrdup(const char *in)
{
	size_t		len = strlen(in);
	char	   *out = palloc(len + 1);

	memcpy(out, in, len + 1);
	return out;
}

/* ---------- the target ---------- */

typedef struct Walk
{
	int			depth;
	int			max_depth;
	int			numbers;
} Walk;

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

static void
enter(void *state)
{
	Walk	   *w = state;

	if (++w->depth > w->max_depth)
		w->max_depth = w->depth;
}

static void
leave(void *state)
{
	((Walk *) state)->depth--;
}

/* The reference reading of a number token's size and exponent. */
static bool
ref_number_ok(const char *token, size_t len)
{
	const char *e = strpbrk(token, "eE");
	long		exponent;

	if (len > PN_JSON_MAX_NUMBER_TOKEN)
		return false;
	if (e == NULL)
		return true;
	errno = 0;
	exponent = strtol(e + 1, NULL, 10);
	return errno == 0 && exponent >= -PN_JSON_MAX_EXPONENT &&
		exponent <= PN_JSON_MAX_EXPONENT;
}

static void
scalar(void *state, char *token, JsonTokenType type)
{
	if (type == JSON_TOKEN_NUMBER)
	{
		size_t		len = strlen(token);

		require(pn_json_number_ok(token, len) == ref_number_ok(token, len));
		((Walk *) state)->numbers++;
	}
}

/* Parse text with need_escapes as json.c does; the deepest nesting seen. */
static JsonParseErrorType
parse(char *text, int len, Walk *walk)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen(text, len, PG_UTF8, true);
	JsonSemAction sem;
	JsonParseErrorType result;

	memset(&sem, 0, sizeof(sem));
	memset(walk, 0, sizeof(*walk));
	sem.semstate = walk;
	sem.object_start = enter;
	sem.object_end = leave;
	sem.array_start = enter;
	sem.array_end = leave;
	sem.scalar = scalar;
	result = pg_parse_json(lex, &sem);
	arena_reset();
	return result;
}

/* ---------- the reference reading of fields ---------- */

typedef enum
{
	R_OBJECT,
	R_ARRAY,
	R_STRING,
	R_OTHER
} RefKind;

typedef struct RefNode
{
	RefKind		kind;
	char	   *str;			/* R_STRING */
	int			n;				/* R_OBJECT, R_ARRAY: members */
	int			cap;
	char	  **keys;			/* R_OBJECT */
	struct RefNode **kids;
} RefNode;

#define REF_STACK 128			/* deeper than MAX_DEPTH: only shallow text is read */

typedef struct RefTree
{
	RefNode    *root;
	RefNode    *stack[REF_STACK];
	int			depth;
	char	   *key;			/* the key whose value comes next */
	bool		bad_number;
	long long	values;			/* objects, arrays and scalars */
} RefTree;

static RefNode *
ref_node(RefTree *t, RefKind kind)
{
	RefNode    *node = palloc0(sizeof(RefNode));
	RefNode    *parent = t->depth > 0 ? t->stack[t->depth - 1] : NULL;

	node->kind = kind;
	t->values++;
	if (parent == NULL)
	{
		if (t->root == NULL)
			t->root = node;
		return node;
	}
	if (parent->n == parent->cap)
	{
		parent->cap = parent->cap ? parent->cap * 2 : 4;
		parent->kids = parent->kids ? repalloc(parent->kids, parent->cap * sizeof(RefNode *))
			: palloc(parent->cap * sizeof(RefNode *));
		parent->keys = parent->keys ? repalloc(parent->keys, parent->cap * sizeof(char *))
			: palloc(parent->cap * sizeof(char *));
	}
	parent->keys[parent->n] = parent->kind == R_OBJECT ? t->key : NULL;
	parent->kids[parent->n++] = node;
	return node;
}

static void
ref_push(RefTree *t, RefKind kind)
{
	RefNode    *node = ref_node(t, kind);

	require(t->depth < REF_STACK);
	t->stack[t->depth++] = node;
}

static void
ref_object_start(void *state)
{
	ref_push(state, R_OBJECT);
}

static void
ref_array_start(void *state)
{
	ref_push(state, R_ARRAY);
}

static void
ref_end(void *state)
{
	((RefTree *) state)->depth--;
}

static void
ref_key(void *state, char *fname, bool isnull)
{
	(void) isnull;
	((RefTree *) state)->key = fname;
}

static void
ref_scalar(void *state, char *token, JsonTokenType type)
{
	RefTree    *t = state;
	RefNode    *node = ref_node(t, type == JSON_TOKEN_STRING ? R_STRING : R_OTHER);

	node->str = token;
	if (type == JSON_TOKEN_NUMBER && !ref_number_ok(token, strlen(token)))
		t->bad_number = true;
}

/* The last member of object node named key, or NULL. */
static RefNode *
ref_member(RefNode *node, const char *key, size_t keylen)
{
	RefNode    *found = NULL;

	if (node == NULL || node->kind != R_OBJECT)
		return NULL;
	for (int i = 0; i < node->n; i++)
		if (strlen(node->keys[i]) == keylen && memcmp(node->keys[i], key, keylen) == 0)
			found = node->kids[i];
	return found;
}

static RefNode *
ref_lookup(RefNode *root, const char *path)
{
	const char *dot = strchr(path, '.');

	if (dot == NULL)
		return ref_member(root, path, strlen(path));
	return ref_member(ref_member(root, path, (size_t) (dot - path)), dot + 1, strlen(dot + 1));
}

/* the envelope's paths, and a few more of each shape */
static const char *const field_paths[] = {
	"id", "event_type", "resource.algorithm", "resource.ciphertext", "resource.nonce",
	"resource.associated_data", "resource.original_type", "a", "a.a", "a.b", "b.a", "",
	"a."
};
#define NFIELDS (int) (sizeof(field_paths) / sizeof(field_paths[0]))

/* pn_fields_walk against the reference, on text the backend would parse */
static void
check_fields(const char *data, size_t size)
{
	char	   *text = malloc(size);
	PnJsonField fields[NFIELDS];
	PnJsonField two_dots = {"a.b.c"};
	RefTree		t;
	JsonSemAction sem;
	bool		ok,
				ref_ok;
	/* a limit on the values drawn from the input: both sides of it are met */
	long long	max_values = 1 + (long long) ((size * 31 + (unsigned char) data[0]) % 128);

	for (int i = 0; i < NFIELDS; i++)
		fields[i].path = field_paths[i];
	memcpy(text, data, size);
	ok = pn_fields_walk(makeJsonLexContextCstringLen(text, (int) size, PG_UTF8, true),
						fields, NFIELDS, max_values);
	if (!ok)
		for (int i = 0; i < NFIELDS; i++)
			require(fields[i].found == 0 && fields[i].value == NULL);

	memcpy(text, data, size);
	memset(&t, 0, sizeof(t));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &t;
	sem.object_start = ref_object_start;
	sem.object_end = ref_end;
	sem.array_start = ref_array_start;
	sem.array_end = ref_end;
	sem.object_field_start = ref_key;
	sem.scalar = ref_scalar;
	ref_ok = pg_parse_json(makeJsonLexContextCstringLen(text, (int) size, PG_UTF8, true), &sem)
		== JSON_SUCCESS && !t.bad_number && t.root != NULL && t.root->kind == R_OBJECT &&
		t.values <= max_values;
	require(ok == ref_ok);
	/* a path of three keys is a caller's error: refused, whatever the text */
	require(!pn_fields_walk(makeJsonLexContextCstringLen(text, (int) size, PG_UTF8, true),
							&two_dots, 1, LLONG_MAX) && two_dots.found == 0);
	if (ok)
		for (int i = 0; i < NFIELDS; i++)
		{
			RefNode    *v = ref_lookup(t.root, field_paths[i]);

			if (v == NULL)
				require(fields[i].found == 0);
			else if (v->kind == R_STRING)
				require(fields[i].found == 1 && strcmp(fields[i].value, v->str) == 0);
			else
				require(fields[i].found == -1);
		}
	arena_reset();
	free(text);
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *text;
	bool		shallow;
	Walk		walk;
	JsonParseErrorType r;

	if (size == 0 || size > INT_MAX / 2 || memchr(data, '\0', size) != NULL)
		return 0;
	/* an exact-size heap copy, so ASan sees any read past the text */
	text = malloc(size);
	memcpy(text, data, size);

	shallow = pn_json_depth_ok(text, size, MAX_DEPTH);
	if (pg_encoding_verifymbstr(PG_UTF8, text, (int) size) == (int) size &&
		(shallow || size <= UNBOUNDED_PARSE_MAX))
	{
		r = parse(text, (int) size, &walk);
		/* the bound json.c relies on */
		if (shallow)
			require(walk.max_depth <= MAX_DEPTH);
		/* never under-counts: the parser got no deeper than the pre-scan */
		if (walk.max_depth > 0)
			require(!pn_json_depth_ok(text, size, walk.max_depth - 1));
		/* counts valid JSON exactly: no valid text refused needlessly */
		if (r == JSON_SUCCESS)
			require(pn_json_depth_ok(text, size, walk.max_depth));
	}
	if (shallow && pg_encoding_verifymbstr(PG_UTF8, text, (int) size) == (int) size)
		check_fields(text, size);
	/* a higher limit never refuses what a lower one takes */
	require(!shallow || pn_json_depth_ok(text, size, MAX_DEPTH + 1));
	free(text);
	return 0;
}
