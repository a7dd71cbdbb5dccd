/*-------------------------------------------------------------------------
 *
 * fuzz_fcgi.c
 *	  libFuzzer target: the shim's check of a FastCGI request's start, of
 *	  the whole request (its STDIN stream to the empty record), of STDIN
 *	  record headers and of the peer's address (shim/cgi/cgi_fcgi_check.c),
 *	  with its invariants checked on every input:
 *
 *	  - the input, as bytes off a connection: every way of cutting it into
 *	    reads (whole, byte by byte, pseudo-random pieces) gives the same
 *	    verdict and fields, and agrees with a plain reference decoder
 *	    written apart (a start it accepts is one the reference accepts,
 *	    with the same length, pairs and PARAMS length, and the other way
 *	    round); the scan never reads at or past the bytes it is given (the
 *	    input is copied to a buffer of its exact size, so ASan sees it);
 *	  - the same bytes through pn_fcgi_scan_request: every way of cutting
 *	    them gives the same verdict and end, which agree with a reference
 *	    that walks the STDIN records after the reference's start (each
 *	    header judged once its 8 bytes are there: version 1, type STDIN,
 *	    the request's id; content and padding skipped; WHOLE at the empty
 *	    record's header, the request's length not counting its padding);
 *	    a refused start is pn_fcgi_scan_feed's verdict.  While fed, pos
 *	    and end only grow and stay within the bytes fed, a verdict once
 *	    given is kept; each call sees only the bytes fed so far (the rest
 *	    poisoned for ASan), and the bytes already checked are scrambled
 *	    and poisoned again, so a scan that looked at them again would be
 *	    caught.  WHOLE comes byte by byte exactly at end, end - 1 bytes
 *	    are MORE, exactly end bytes are WHOLE with the same fields;
 *	  - the input, as the description of a request: a reference encoder
 *	    writes that request's start (pairs of any lengths in either length
 *	    form, records split anywhere, padding), which the scan accepts
 *	    whole at its exact length, and one byte short is MORE; over the
 *	    bound it is refused; then its STDIN stream (records of any length
 *	    and padding, the empty record, padded or not), which
 *	    pn_fcgi_scan_request finds whole at its exact length, also with
 *	    the bound set to the start's length, MORE one byte short, and
 *	    refused as BAD_VERSION or BAD_RECORD when one of its headers is
 *	    spoilt;
 *	  - the address check: an IPv4 address and the same address mapped
 *	    into IPv6 get the same answer, any other IPv6 address is refused
 *	    when a list is set, and everything passes without one.
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__has_include)
#if __has_include(<sanitizer/asan_interface.h>)
#include <sanitizer/asan_interface.h>
#endif
#endif
#ifndef ASAN_POISON_MEMORY_REGION
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void) (addr), (void) (size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void) (addr), (void) (size))
#endif

#include "cgi_fcgi_check.h"

int			LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
#define require(cond) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "fuzz_fcgi.c:%d: %s does not hold\n", __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

/* ---- the reference decoder ------------------------------------------------ */

typedef enum
{
	REF_VALID,
	REF_INVALID,
	REF_INCOMPLETE
} ref_result;

typedef struct ref_start
{
	size_t		length;
	size_t		pairs;
	size_t		params_len;
	unsigned	request_id;
	int			keep_conn;
} ref_start;

/*
 * Reads whole records in order; each header is judged once its 8 bytes are
 * there (version, place, the bound); the PARAMS contents are gathered and
 * split into pairs at the end of the stream, lengths checked against what
 * is there.
 */
static ref_result
ref_decode(const unsigned char *p, size_t n, size_t max, ref_start *out)
{
	static unsigned char params[70000];
	size_t		plen = 0;
	size_t		pos = 0;
	int			seen_begin = 0;

	memset(out, 0, sizeof(*out));
	for (;;)
	{
		unsigned	version,
					type,
					id;
		size_t		clen,
					pad;

		if (max - pos < 8)
			return REF_INVALID;
		if (n - pos < 8)
			return REF_INCOMPLETE;
		version = p[pos];
		type = p[pos + 1];
		id = (unsigned) p[pos + 2] << 8 | p[pos + 3];
		clen = (size_t) p[pos + 4] << 8 | p[pos + 5];
		pad = p[pos + 6];
		if (version != 1)
			return REF_INVALID;
		if (!seen_begin)
		{
			if (type != 1 || id == 0)
				return REF_INVALID;
			if (clen != 8)
				return REF_INVALID;
		}
		else if (type != 4 || id != out->request_id)
			return REF_INVALID;
		if (pos + 8 + clen + pad > max)
			return REF_INVALID;
		if (!seen_begin)
		{
			if (n - pos < 16)
				return REF_INCOMPLETE;
			if ((p[pos + 8] << 8 | p[pos + 9]) != 1 || (p[pos + 10] & ~1) != 0)
				return REF_INVALID;
			out->request_id = id;
			out->keep_conn = p[pos + 10] & 1;
			seen_begin = 1;
		}
		else
		{
			if (n - pos < 8 + clen)
				return REF_INCOMPLETE;
			memcpy(params + plen, p + pos + 8, clen);
			plen += clen;
		}
		if (n - pos < 8 + clen + pad)
			return REF_INCOMPLETE;
		pos += 8 + clen + pad;
		if (type == 4 && clen == 0)
			break;
	}
	/* the pairs */
	for (size_t i = 0; i < plen;)
	{
		unsigned long long lens[2];

		for (int k = 0; k < 2; k++)
		{
			if (i >= plen)
				return REF_INVALID;
			if (params[i] & 0x80)
			{
				if (plen - i < 4)
					return REF_INVALID;
				lens[k] = (unsigned long long) (params[i] & 0x7f) << 24 |
					(unsigned long long) params[i + 1] << 16 |
					(unsigned long long) params[i + 2] << 8 | params[i + 3];
				i += 4;
			}
			else
				lens[k] = params[i++];
		}
		if (lens[0] + lens[1] > plen - i)
			return REF_INVALID;
		i += (size_t) (lens[0] + lens[1]);
		if (++out->pairs > PN_FCGI_PAIRS_MAX)
			return REF_INVALID;
	}
	out->length = pos;
	out->params_len = plen;
	return REF_VALID;
}

/* ---- the scan, fed in pieces --------------------------------------------- */

typedef struct outcome
{
	pn_fcgi_verdict v;
	size_t		pos;
	unsigned	request_id;
	int			keep_conn;
	size_t		pairs;
	size_t		params_len;
} outcome;

/* step 0: whole; 1: byte by byte; else pieces of pseudo-random sizes */
static outcome
scan(const unsigned char *buf, size_t n, size_t max, unsigned step)
{
	pn_fcgi_scan s;
	outcome		o;
	size_t		have = 0;
	unsigned	x = step;

	pn_fcgi_scan_init(&s, max);
	o.v = PN_FCGI_MORE;
	while (o.v == PN_FCGI_MORE)
	{
		size_t		piece = step == 0 ? n : step == 1 ? 1 : (x = x * 1103515245u + 12345u) >> 20 & 1023;

		have = n - have < piece ? n : have + piece;
		o.v = pn_fcgi_scan_feed(&s, buf, have);
		require(s.pos <= have && s.pos <= max);
		if (have == n)
			break;
	}
	/* a verdict is kept */
	require(pn_fcgi_scan_feed(&s, buf, have) == o.v);
	o.pos = s.pos;
	o.request_id = s.request_id;
	o.keep_conn = s.keep_conn;
	o.pairs = s.pairs;
	o.params_len = s.params_len;
	return o;
}

static void
same(outcome a, outcome b)
{
	require(a.v == b.v);
	if (a.v == PN_FCGI_DONE)
		require(a.pos == b.pos && a.request_id == b.request_id &&
				a.keep_conn == b.keep_conn && a.pairs == b.pairs &&
				a.params_len == b.params_len);
}

/* ---- the whole request: a reference, and the scan in pieces -------------- */

/*
 * The STDIN stream after a start the reference accepted (start->length
 * bytes): its records in order, each header judged once its 8 bytes are
 * there (version 1, then type STDIN and the request's id), the content and
 * padding skipped; the empty record ends the request with its header.
 * Returns MORE, WHOLE (*end the request's length), BAD_VERSION or
 * BAD_RECORD (*end where that header is); at MORE, *end is how far the
 * stream is checked: all the bytes there, or up to a header not all there.
 */
static pn_fcgi_verdict
ref_stdin(const unsigned char *p, size_t n, const ref_start *start, size_t *end)
{
	size_t		pos = start->length;

	for (;;)
	{
		size_t		clen,
					pad;

		*end = pos;
		if (n - pos < 8)
			return PN_FCGI_MORE;
		if (p[pos] != 1)
			return PN_FCGI_BAD_VERSION;
		if (p[pos + 1] != 5 || ((unsigned) p[pos + 2] << 8 | p[pos + 3]) != start->request_id)
			return PN_FCGI_BAD_RECORD;
		clen = (size_t) p[pos + 4] << 8 | p[pos + 5];
		pad = p[pos + 6];
		if (clen == 0)
		{
			*end = pos + 8;
			return PN_FCGI_WHOLE;
		}
		if (n - pos - 8 < clen + pad)
		{
			*end = n;
			return PN_FCGI_MORE;
		}
		pos += 8 + clen + pad;
	}
}

typedef struct rq_outcome
{
	pn_fcgi_verdict v;			/* pn_fcgi_scan_request's */
	size_t		end;
	size_t		at;				/* bytes fed when v came, if not MORE */
	outcome		start;			/* the start's verdict (s.verdict), fields */
} rq_outcome;

/*
 * pn_fcgi_scan_request over a private copy of data[0..n), fed in pieces as
 * scan() does and on to n after a verdict.  The copy's buffer is kept from
 * one call to the next (not mapped afresh for a large request); the bytes
 * not yet fed are poisoned for ASan, each piece unpoisoned as it is fed, so
 * no call reads at or past the length it is given.  The bytes checked
 * (before pos, then before end) are scrambled once checked and poisoned
 * again by whole 8-byte granules: they are never to be looked at again.
 */
static rq_outcome
scan_rq(const unsigned char *data, size_t n, size_t max, unsigned step)
{
	static unsigned char *buf;
	static size_t cap;
	size_t		fence;
	pn_fcgi_scan s;
	rq_outcome	o;
	size_t		have = 0,
				pos = 0,
				end = 0,
				seen = 0,
				poisoned = 0;
	unsigned	x = step;

	if (n + 4096 > cap)
	{
		free(buf);
		cap = n + 4096 > 400000 ? n + 4096 : 400000;
		buf = malloc(cap);
		require(buf != NULL);
	}
	if (n > 0)
		memcpy(buf, data, n);
	fence = n + 4096;
	ASAN_POISON_MEMORY_REGION(buf, fence);
	pn_fcgi_scan_init(&s, max);
	o.v = PN_FCGI_MORE;
	o.at = 0;
	for (;;)
	{
		size_t		piece = step == 0 ? n : step == 1 ? 1 : (x = x * 1103515245u + 12345u) >> 20 & 1023;
		pn_fcgi_verdict v;
		size_t		checked,
					fed = have;

		have = n - have < piece ? n : have + piece;
		if (have > fed)
			ASAN_UNPOISON_MEMORY_REGION(buf + fed, have - fed);
		v = pn_fcgi_scan_request(&s, buf, have);
		require(v == s.whole);
		require(v == PN_FCGI_MORE || v == PN_FCGI_WHOLE || s.verdict == v ||
				(s.verdict == PN_FCGI_DONE &&
				 (v == PN_FCGI_BAD_VERSION || v == PN_FCGI_BAD_RECORD)));
		require(v != PN_FCGI_DONE && v != PN_FCGI_OK);
		/* within the bytes fed, only growing */
		require(s.pos <= have && s.end <= have && s.pos <= max);
		require(s.pos >= pos && s.end >= end);
		if (s.verdict == PN_FCGI_DONE)
			require(s.end >= s.pos);
		/* a verdict is kept, and nothing moves after it */
		if (o.v != PN_FCGI_MORE)
			require(v == o.v && s.pos == pos && s.end == end);
		else if (v != PN_FCGI_MORE)
		{
			o.v = v;
			o.at = have;
		}
		pos = s.pos;
		end = s.end;
		/* what is checked is not to be looked at again */
		checked = pos > end ? pos : end;
		for (; seen < checked; seen++)
			buf[seen] ^= 0xa5;
		if ((checked & ~(size_t) 7) > poisoned)
		{
			ASAN_POISON_MEMORY_REGION(buf + poisoned, (checked & ~(size_t) 7) - poisoned);
			poisoned = checked & ~(size_t) 7;
		}
		if (have == n)
			break;
	}
	require(pn_fcgi_scan_request(&s, buf, n) == o.v && s.pos == pos && s.end == end);
	ASAN_UNPOISON_MEMORY_REGION(buf, fence);
	o.end = s.end;
	o.start.v = s.verdict;
	o.start.pos = s.pos;
	o.start.request_id = s.request_id;
	o.start.keep_conn = s.keep_conn;
	o.start.pairs = s.pairs;
	o.start.params_len = s.params_len;
	return o;
}

static void
same_rq(rq_outcome a, rq_outcome b)
{
	require(a.v == b.v && a.end == b.end);
	same(a.start, b.start);
}

/*
 * The bytes through pn_fcgi_scan_request: as pn_fcgi_scan_feed sees the
 * start (start, the reference's r and ref), then as ref_stdin walks STDIN.
 */
static void
check_request(const unsigned char *buf, size_t size, size_t max, outcome start,
			  ref_result r, const ref_start *ref)
{
	rq_outcome	w = scan_rq(buf, size, max, 0);
	rq_outcome	b = scan_rq(buf, size, max, 1);
	pn_fcgi_verdict v;
	size_t		end;

	same_rq(w, b);
	same_rq(w, scan_rq(buf, size, max, 7));
	same_rq(w, scan_rq(buf, size, max, 12345));
	same(w.start, start);
	if (start.v != PN_FCGI_DONE)
	{
		/* MORE or the start's refusal */
		require(w.v == start.v);
		return;
	}
	require(r == REF_VALID && w.start.pos == ref->length);
	v = ref_stdin(buf, size, ref, &end);
	require(w.v == v && w.end == end);
	if (v == PN_FCGI_MORE)
		return;
	/* byte by byte, the verdict comes with the header's last byte */
	require(b.at == (v == PN_FCGI_WHOLE ? end : end + PN_FCGI_HEADER_LEN));
	if (v == PN_FCGI_WHOLE)
	{
		require(scan_rq(buf, end - 1, max, 0).v == PN_FCGI_MORE);
		same_rq(w, scan_rq(buf, end, max, 0));
	}
}

/* The input as the bytes of a connection. */
static void
check_bytes(const unsigned char *data, size_t size)
{
	unsigned char *buf = malloc(size ? size : 1);
	/* the last byte picks the bound: the shim's, or a small one */
	size_t		max = size == 0 || (data[size - 1] & 1) ? PN_FCGI_START_MAX :
		64 + data[size - 1] * 64u;
	outcome		whole;
	ref_start	ref;
	ref_result	r;

	if (size > 0)
		memcpy(buf, data, size);
	whole = scan(buf, size, max, 0);
	same(whole, scan(buf, size, max, 1));
	same(whole, scan(buf, size, max, 7));
	same(whole, scan(buf, size, max, 12345));
	r = ref_decode(buf, size, max, &ref);
	if (whole.v == PN_FCGI_DONE)
	{
		require(r == REF_VALID && ref.length == whole.pos && ref.pairs == whole.pairs &&
				ref.params_len == whole.params_len && ref.request_id == whole.request_id &&
				ref.keep_conn == whole.keep_conn);
		/* the start alone is enough; one byte less is not */
		same(whole, scan(buf, whole.pos, max, 0));
		require(scan(buf, whole.pos - 1, max, 0).v == PN_FCGI_MORE);
	}
	else if (whole.v == PN_FCGI_MORE)
		require(r == REF_INCOMPLETE);
	else
		require(r != REF_VALID);
	if (r == REF_VALID)
		require(whole.v == PN_FCGI_DONE);
	check_request(buf, size, max, whole, r, &ref);
	free(buf);
}

/* ---- the reference encoder ----------------------------------------------- */

/* Reads the description one byte at a time (0 past its end). */
typedef struct reader
{
	const unsigned char *p;
	size_t		n;
	size_t		i;
} reader;

static unsigned
next(reader *r)
{
	return r->i < r->n ? r->p[r->i++] : 0;
}

static void
header(unsigned char *out, size_t *len, int type, unsigned id, size_t clen, unsigned pad)
{
	unsigned char *h = out + *len;

	h[0] = 1;
	h[1] = (unsigned char) type;
	h[2] = (unsigned char) (id >> 8);
	h[3] = (unsigned char) id;
	h[4] = (unsigned char) (clen >> 8);
	h[5] = (unsigned char) clen;
	h[6] = (unsigned char) pad;
	h[7] = 0;
	*len += 8;
}

/* STDIN records the encoder appends, and the room for its start */
#define ENC_STDIN_MAX 4
#define ENC_START_ROOM 50000

/*
 * The input as a request: request id, flags, then pairs (name and value
 * lengths, each possibly in the 4-byte form), then its STDIN stream (how
 * many records, each one's length and padding, the empty record's padding,
 * perhaps a header to spoil), then how the PARAMS stream is cut into
 * records and padded.
 */
static void
check_encoded(const unsigned char *data, size_t size)
{
	static unsigned char params[48000];
	static unsigned char out[100000 + ENC_STDIN_MAX * (8 + 65535 + 255) + 8 + 255 + 8];
	reader		r = {data, size, 0};
	size_t		plen = 0;
	size_t		len = 0;
	size_t		npairs = 0;
	unsigned	id = (next(&r) << 8 | next(&r));
	unsigned	flags = next(&r) & 1;
	unsigned	count = next(&r) % 40;
	unsigned	nstdin;
	size_t		stdin_len[ENC_STDIN_MAX];
	unsigned	stdin_pad[ENC_STDIN_MAX];
	size_t		stdin_at[ENC_STDIN_MAX + 1];
	unsigned	empty_pad,
				spoil,
				spoil_how;
	size_t		start_len,
				whole_len,
				total;
	outcome		o;
	rq_outcome	q;

	if (id == 0)
		id = 1;
	for (unsigned k = 0; k < count && plen < 30000; k++)
	{
		size_t		lens[2];
		unsigned	form = next(&r);

		lens[0] = next(&r) * (form & 4 ? 37u : 1u);
		lens[1] = (next(&r) << 8 | next(&r)) % 2000;
		for (int j = 0; j < 2; j++)
		{
			if (lens[j] >= 128 || (form >> j & 1))
			{
				params[plen++] = (unsigned char) (0x80 | lens[j] >> 24);
				params[plen++] = (unsigned char) (lens[j] >> 16);
				params[plen++] = (unsigned char) (lens[j] >> 8);
				params[plen++] = (unsigned char) lens[j];
			}
			else
				params[plen++] = (unsigned char) lens[j];
		}
		memset(params + plen, 'a' + (int) (k % 26), lens[0] + lens[1]);
		plen += lens[0] + lens[1];
		npairs++;
	}
	/* the STDIN stream: up to 4 records of 1..65535 bytes, any padding */
	nstdin = next(&r) % (ENC_STDIN_MAX + 1);
	for (unsigned k = 0; k < nstdin; k++)
	{
		unsigned	form = next(&r);

		stdin_len[k] = next(&r);
		if (form & 1)
			stdin_len[k] = stdin_len[k] << 8 | next(&r);
		if (stdin_len[k] == 0)
			stdin_len[k] = 1;
		stdin_pad[k] = form & 2 ? next(&r) : form >> 5;
	}
	empty_pad = next(&r);
	spoil = next(&r);
	spoil_how = next(&r);

	header(out, &len, 1, id, 8, 0);
	memset(out + len, 0, 8);
	out[len + 1] = 1;
	out[len + 2] = (unsigned char) flags;
	len += 8;
	for (size_t i = 0; i < plen;)
	{
		size_t		piece = 1 + (next(&r) << 8 | next(&r)) % 20000;
		unsigned	pad = next(&r) % 9;

		/* the rest in one record once the description or the room ends */
		if (piece > plen - i || r.i >= r.n || len + 8 + piece + pad + 16 + 8 > ENC_START_ROOM)
			piece = plen - i;
		header(out, &len, 4, id, piece, pad);
		memcpy(out + len, params + i, piece);
		memset(out + len + piece, 0xee, pad);
		len += piece + pad;
		i += piece;
	}
	header(out, &len, 4, id, 0, 0);
	start_len = len;
	/*
	 * STDIN records whose content and padding, if ever read as a header,
	 * would be refused, then the empty record, its padding not counted
	 */
	for (unsigned k = 0; k < nstdin; k++)
	{
		stdin_at[k] = len;
		header(out, &len, 5, id, stdin_len[k], stdin_pad[k]);
		for (size_t j = 0; j < stdin_len[k]; j++)
			out[len + j] = (unsigned char) "\x02\x09\x00\x00\xff\xff\xff\x00"[j % 8];
		len += stdin_len[k];
		memset(out + len, 0xee, stdin_pad[k]);
		len += stdin_pad[k];
	}
	stdin_at[nstdin] = len;
	header(out, &len, 5, id, 0, empty_pad);
	whole_len = len;
	memset(out + len, 0xee, empty_pad);
	len += empty_pad;
	/* what follows the request is not looked at */
	memcpy(out + len, "\x09\x09\x00\x00\xff\xff\xff\xff", 8);
	total = len + 8;

	o = scan(out, total, PN_FCGI_START_MAX, 0);
	q = scan_rq(out, total, PN_FCGI_START_MAX, 0);
	same(q.start, o);
	if (start_len > PN_FCGI_START_MAX)
	{
		require(o.v == PN_FCGI_TOO_LARGE || o.v == PN_FCGI_BAD_PAIR);
		require(q.v == o.v);
		return;
	}
	require(o.v == PN_FCGI_DONE && o.pos == start_len && o.request_id == id &&
			o.keep_conn == (int) flags && o.pairs == npairs && o.params_len == plen);
	same(o, scan(out, start_len, PN_FCGI_START_MAX, 1));
	require(scan(out, start_len - 1, PN_FCGI_START_MAX, 0).v == PN_FCGI_MORE);
	/* below its length, the bound refuses it */
	o = scan(out, start_len, start_len - 1, 0);
	require(o.v == PN_FCGI_TOO_LARGE || o.v == PN_FCGI_BAD_PAIR);
	require(scan_rq(out, total, start_len - 1, 0).v == o.v);

	/* the whole request: at its length, however fed; one byte short, MORE */
	require(q.v == PN_FCGI_WHOLE && q.end == whole_len);
	q = scan_rq(out, total, PN_FCGI_START_MAX, 1);
	require(q.v == PN_FCGI_WHOLE && q.end == whole_len && q.at == whole_len);
	same_rq(q, scan_rq(out, total, PN_FCGI_START_MAX, 99));
	same_rq(q, scan_rq(out, whole_len, PN_FCGI_START_MAX, 0));
	require(scan_rq(out, whole_len - 1, PN_FCGI_START_MAX, 0).v == PN_FCGI_MORE);
	/* the bound is the start's: STDIN is not counted */
	same_rq(q, scan_rq(out, total, start_len, 0));

	/* a STDIN header spoilt: refused there, with the header's last byte */
	if (spoil % 4 == 1)
	{
		size_t		at = stdin_at[(spoil >> 2) % (nstdin + 1)];
		unsigned char keep[8];
		pn_fcgi_verdict want;
		unsigned	x = 1 + (spoil_how >> 2);

		memcpy(keep, out + at, 8);
		switch (spoil_how % 3)
		{
			case 0:				/* version: never 1 */
				out[at] = (unsigned char) (1 + x);
				want = PN_FCGI_BAD_VERSION;
				break;
			case 1:				/* type: never STDIN */
				out[at + 1] = (unsigned char) (5 + x);
				want = PN_FCGI_BAD_RECORD;
				break;
			default:			/* another request's id */
				out[at + 2] ^= (unsigned char) (x >> 3);
				out[at + 3] ^= (unsigned char) (x << 2 | 1);
				want = PN_FCGI_BAD_RECORD;
				break;
		}
		q = scan_rq(out, total, PN_FCGI_START_MAX, 0);
		require(q.v == want && q.end == at);
		same_rq(q, scan_rq(out, total, PN_FCGI_START_MAX, 7));
		q = scan_rq(out, total, PN_FCGI_START_MAX, 1);
		require(q.v == want && q.end == at && q.at == at + PN_FCGI_HEADER_LEN);
		require(scan_rq(out, at + PN_FCGI_HEADER_LEN - 1, PN_FCGI_START_MAX, 0).v == PN_FCGI_MORE);
		memcpy(out + at, keep, 8);
	}
}

/* ---- STDIN headers and addresses ----------------------------------------- */

static void
check_stdin(const unsigned char *data, size_t size)
{
	size_t		content = 0,
				padding = 0;
	unsigned	id;
	pn_fcgi_verdict v;

	if (size < 10)
		return;
	id = (unsigned) data[8] << 8 | data[9];
	v = pn_fcgi_check_stdin(data, id, &content, &padding);
	require((v == PN_FCGI_OK) ==
			(data[0] == 1 && data[1] == 5 && (unsigned) (data[2] << 8 | data[3]) == id));
	if (v == PN_FCGI_OK)
		require(content == (size_t) (data[4] << 8 | data[5]) && padding == data[6]);
	else
		require(v == PN_FCGI_BAD_VERSION || v == PN_FCGI_BAD_RECORD);
}

static void
check_peer(const unsigned char *data, size_t size)
{
	char		list[64];
	size_t		n = size > 20 ? size - 20 : 0;
	struct sockaddr_in in4 = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	bool		a,
				b;

	if (size < 20)
		return;
	if (n > sizeof(list) - 1)
		n = sizeof(list) - 1;
	memcpy(list, data + 20, n);
	list[n] = '\0';
	memcpy(&in4.sin_addr, data, 4);
	memcpy(in6.sin6_addr.s6_addr, data + 4, 16);
	a = pn_fcgi_peer_allowed(list, (struct sockaddr *) &in4, sizeof(in4));
	b = pn_fcgi_peer_allowed(list, (struct sockaddr *) &in6, sizeof(in6));
	if (list[0] == '\0')
		require(a && b);
	else if (!IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr))
		require(!b);
	/* the same IPv4 address mapped */
	memset(in6.sin6_addr.s6_addr, 0, 10);
	in6.sin6_addr.s6_addr[10] = in6.sin6_addr.s6_addr[11] = 0xff;
	memcpy(in6.sin6_addr.s6_addr + 12, data, 4);
	require(pn_fcgi_peer_allowed(list, (struct sockaddr *) &in6, sizeof(in6)) == a);
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	check_bytes(data, size);
	check_encoded(data, size);
	check_stdin(data, size);
	check_peer(data, size);
	return 0;
}
