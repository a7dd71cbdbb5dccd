/*
 * send_util.c
 *		Small helpers for paynotify-send: checked allocation, appends to
 *		the shared buffer (common/) that end the program when memory runs
 *		out, a seeded PRNG, a JSON writer, number parsing, time formatting
 *		and the counters a run reports.  No global state, so all
 *		of it may be used from any thread.
 */
#include "send.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char	PN_ALNUM[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const char	PN_DIGITS[] = "0123456789";
const char	PN_HEX_LOWER[] = "0123456789abcdef";
const char	PN_HEX_UPPER[] = "0123456789ABCDEF";

static void json_prefix(struct pn_json *j, const char *key);
static int	cmp_u32(const void *a, const void *b);

/* ------------------------------------------------------------ allocation */

/* Allocation failure ends the program: a load generator has no fallback. */
static _Noreturn void
oom(void)
{
	pn_log("out of memory");
	abort();
}

void *
pn_xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (!p)
		oom();
	return p;
}

void *
pn_xcalloc(size_t n, size_t size)
{
	void	   *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom();
	return p;
}

void *
pn_xrealloc(void *p, size_t n)
{
	void	   *q = realloc(p, n ? n : 1);

	if (!q)
		oom();
	return q;
}

char *
pn_xmemdup(const void *p, size_t n)
{
	char	   *q = pn_xmalloc(n + 1);

	memcpy(q, p, n);
	q[n] = '\0';
	return q;
}

char *
pn_xstrdup(const char *s)
{
	return pn_xmemdup(s, strlen(s));
}

/* --------------------------------------------------------------- buffers */

/* Ends the program when an append to b failed. */
static void
buf_check(const struct pn_buf *b)
{
	if (b->failed)
		oom();
}

void
pn_buf_put(struct pn_buf *b, const void *p, size_t n)
{
	pn_buf_append(b, p, n);
	buf_check(b);
}

void
pn_buf_puts(struct pn_buf *b, const char *s)
{
	pn_buf_put(b, s, strlen(s));
}

void
pn_buf_putc(struct pn_buf *b, char c)
{
	pn_buf_put(b, &c, 1);
}

void
pn_buf_printf(struct pn_buf *b, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	pn_buf_vappendf(b, fmt, ap);
	va_end(ap);
	buf_check(b);
}

/* ------------------------------------------------------------------ PRNG */

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t	z = (*x += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/*
 * Seeds a generator from the run seed and up to four stream selectors, so
 * that e.g. "notification 17, delivery 2" always yields the same values,
 * whichever thread builds it.
 */
void
pn_rng_seed(struct pn_rng *r, uint64_t seed, uint64_t a, uint64_t b,
			uint64_t c, uint64_t d)
{
	uint64_t	x = seed;
	uint64_t	sel[4] = {a, b, c, d};

	for (int i = 0; i < 4; i++)
		x = splitmix64(&x) ^ sel[i];
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t
pn_rng_next(struct pn_rng *r)
{
	uint64_t   *s = r->s;
	uint64_t	result = rotl(s[1] * 5, 7) * 9;
	uint64_t	t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* Uniform in [0, n) without modulo bias. */
uint64_t
pn_rng_below(struct pn_rng *r, uint64_t n)
{
	uint64_t	limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t	x;

	do
		x = pn_rng_next(r);
	while (x >= limit);
	return x % n;
}

/* Writes n random characters of alphabet plus a NUL. */
void
pn_rng_chars(struct pn_rng *r, char *out, size_t n, const char *alphabet)
{
	size_t		k = strlen(alphabet);

	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[pn_rng_below(r, k)];
	out[n] = '\0';
}

/* FNV-1a, then a final mix: stable ids derived from an order number. */
uint64_t
pn_hash64(const char *s)
{
	uint64_t	h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
	{
		h ^= (unsigned char) *s;
		h *= 0x100000001b3ULL;
	}
	return splitmix64(&h);
}

/* ------------------------------------------------------------------ JSON */

void
pn_json_init(struct pn_json *j, struct pn_buf *b, bool pretty)
{
	j->b = b;
	j->pretty = pretty;
	j->depth = 0;
	j->count[0] = 0;
}

/* Separator, newline and indentation before a value, then its key. */
static void
json_prefix(struct pn_json *j, const char *key)
{
	if (j->depth > 0)
	{
		if (j->count[j->depth] > 0)
			pn_buf_putc(j->b, ',');
		if (j->pretty)
		{
			pn_buf_putc(j->b, '\n');
			for (int i = 0; i < j->depth; i++)
				pn_buf_puts(j->b, "  ");
		}
		j->count[j->depth]++;
	}
	if (key)
	{
		pn_json_escape(j->b, key, strlen(key));
		buf_check(j->b);
		pn_buf_puts(j->b, j->pretty ? ": " : ":");
	}
}

void
pn_json_open(struct pn_json *j, const char *key, char bracket)
{
	json_prefix(j, key);
	pn_buf_putc(j->b, bracket);
	if (j->depth < 31)
		j->depth++;
	j->count[j->depth] = 0;
}

void
pn_json_close(struct pn_json *j, char bracket)
{
	if (j->pretty && j->count[j->depth] > 0)
	{
		pn_buf_putc(j->b, '\n');
		for (int i = 1; i < j->depth; i++)
			pn_buf_puts(j->b, "  ");
	}
	pn_buf_putc(j->b, bracket);
	if (j->depth > 0)
		j->depth--;
}

void
pn_json_strn(struct pn_json *j, const char *key, const char *val, size_t n)
{
	json_prefix(j, key);
	pn_json_escape(j->b, val, n);
	buf_check(j->b);
}

void
pn_json_str(struct pn_json *j, const char *key, const char *val)
{
	pn_json_strn(j, key, val, strlen(val));
}

void
pn_json_int(struct pn_json *j, const char *key, long long val)
{
	json_prefix(j, key);
	pn_buf_printf(j->b, "%lld", val);
}

void
pn_json_num(struct pn_json *j, const char *key, double val)
{
	json_prefix(j, key);
	if (isfinite(val))
		pn_buf_printf(j->b, "%.6g", val);
	else
		pn_buf_puts(j->b, "null");
}

void
pn_json_bool(struct pn_json *j, const char *key, bool val)
{
	json_prefix(j, key);
	pn_buf_puts(j->b, val ? "true" : "false");
}

void
pn_json_null(struct pn_json *j, const char *key)
{
	json_prefix(j, key);
	pn_buf_puts(j->b, "null");
}

/* ------------------------------------------------------- numbers & time */

/* Whole string must be a decimal integer within [lo, hi]. */
bool
pn_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
	char	   *end;
	long long	v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

bool
pn_parse_double(const char *s, double lo, double hi, double *out)
{
	char	   *end;
	double		v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* out must hold 2n+1 bytes. */
void
pn_hex(const unsigned char *in, size_t n, char *out, const char *alphabet)
{
	for (size_t i = 0; i < n; i++)
	{
		out[2 * i] = alphabet[in[i] >> 4];
		out[2 * i + 1] = alphabet[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/* Formats t as Beijing time (UTC+8, no DST), the gateways' clock. */
void
pn_fmt_beijing(time_t t, const char *fmt, char *out, size_t outsz)
{
	struct tm	tm;
	time_t		bj = t + 8 * 3600;

	gmtime_r(&bj, &tm);
	if (strftime(out, outsz, fmt, &tm) == 0 && outsz)
		out[0] = '\0';
}

/* 8888 -> "88.88": Alipay sends decimal yuan strings. */
void
pn_fmt_yuan(long long minor, char *out, size_t outsz)
{
	snprintf(out, outsz, "%lld.%02lld", minor / 100, minor % 100);
}

/* ------------------------------------------------------------ statistics */

void
pn_stats_init(struct pn_stats *s, bool keep_latency)
{
	memset(s, 0, sizeof(*s));
	if (keep_latency)
	{
		s->cap_lat = 1024;
		s->lat_us = pn_xmalloc(s->cap_lat * sizeof(uint32_t));
	}
}

void
pn_stats_free(struct pn_stats *s)
{
	free(s->lat_us);
	s->lat_us = NULL;
}

/* Counts one outcome label; labels beyond the table go to "other". */
void
pn_stats_outcome(struct pn_stats *s, const char *outcome)
{
	for (int i = 0; i < s->n_outcomes; i++)
	{
		if (strcmp(s->outcome_name[i], outcome) == 0)
		{
			s->outcome_count[i]++;
			return;
		}
	}
	if (s->n_outcomes == PN_MAX_OUTCOMES)
	{
		s->outcome_other++;
		return;
	}
	snprintf(s->outcome_name[s->n_outcomes], sizeof(s->outcome_name[0]), "%s", outcome);
	s->outcome_count[s->n_outcomes++] = 1;
}

void
pn_stats_latency(struct pn_stats *s, double seconds)
{
	double		us = seconds * 1e6;

	if (!s->lat_us)
		return;
	if (s->n_lat == s->cap_lat)
	{
		s->cap_lat *= 2;
		s->lat_us = pn_xrealloc(s->lat_us, s->cap_lat * sizeof(uint32_t));
	}
	if (us < 0)
		us = 0;
	if (us > 4e9)
		us = 4e9;
	s->lat_us[s->n_lat++] = (uint32_t) us;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile in milliseconds (sorts the samples once). */
double
pn_stats_pct(struct pn_stats *s, double pct)
{
	double		exact;
	size_t		rank;

	if (!s->lat_us || s->n_lat == 0)
		return 0.0;
	qsort(s->lat_us, s->n_lat, sizeof(uint32_t), cmp_u32);
	exact = pct / 100.0 * (double) s->n_lat;
	rank = (size_t) exact;
	if ((double) rank < exact)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > s->n_lat)
		rank = s->n_lat;
	return s->lat_us[rank - 1] / 1000.0;
}
