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
 *	  exponent of magnitude at most 1000 (strtol's reading of it).
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
	/* a higher limit never refuses what a lower one takes */
	require(!shallow || pn_json_depth_ok(text, size, MAX_DEPTH + 1));
	free(text);
	return 0;
}
