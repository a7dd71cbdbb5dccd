/*
 * fcgi_check_test.c
 *	  Unit test of shim/cgi/cgi_fcgi_check.c: the checks of a request's
 *	  start (BEGIN_REQUEST and PARAMS), of STDIN record headers, of the
 *	  whole request (its STDIN stream to the empty record), and of the
 *	  peer's address against FCGI_WEB_SERVER_ADDRS.  Built alone with ASan
 *	  and UBSan by shim/tests/cgi-test.sh; prints "fcgi_check_test: N
 *	  checks, M failures" and exits 1 on a failure.
 */
#include "cgi_fcgi_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

static int	checks;
static int	failures;

#define CHECK(cond, ...) \
	do { \
		checks++; \
		if (!(cond)) \
		{ \
			failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

/* A byte string being built. */
typedef struct bytes
{
	unsigned char data[200000];
	size_t		len;
} bytes;

static void
put(bytes *b, const void *p, size_t n)
{
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void
record(bytes *b, int version, int type, unsigned id, const void *content,
	   size_t n, int padding)
{
	unsigned char h[8] = {(unsigned char) version, (unsigned char) type,
		(unsigned char) (id >> 8), (unsigned char) id,
	(unsigned char) (n >> 8), (unsigned char) n, (unsigned char) padding, 0};
	unsigned char pad[255] = {0};

	put(b, h, 8);
	put(b, content, n);
	put(b, pad, (size_t) padding);
}

static void
begin(bytes *b, unsigned id, int role, int flags)
{
	unsigned char body[8] = {(unsigned char) (role >> 8), (unsigned char) role,
	(unsigned char) flags, 0, 0, 0, 0, 0};

	record(b, 1, PN_FCGI_BEGIN_REQUEST, id, body, 8, 0);
}

/* A name-value pair, each length in the short form when it fits. */
static size_t
pair(unsigned char *out, const char *name, size_t nlen, const char *value, size_t vlen)
{
	size_t		n = 0;
	size_t		lens[2] = {nlen, vlen};

	for (int i = 0; i < 2; i++)
	{
		if (lens[i] < 128)
			out[n++] = (unsigned char) lens[i];
		else
		{
			out[n++] = (unsigned char) (0x80 | (lens[i] >> 24));
			out[n++] = (unsigned char) (lens[i] >> 16);
			out[n++] = (unsigned char) (lens[i] >> 8);
			out[n++] = (unsigned char) lens[i];
		}
	}
	memcpy(out + n, name, nlen);
	memcpy(out + n + nlen, value, vlen);
	return n + nlen + vlen;
}

/* The whole buffer at once. */
static pn_fcgi_verdict
scan_all(const bytes *b, size_t max, pn_fcgi_scan *s)
{
	pn_fcgi_scan_init(s, max);
	return pn_fcgi_scan_feed(s, b->data, b->len);
}

/* One byte more at a time: MORE until the last byte, then the verdict. */
static pn_fcgi_verdict
scan_bytewise(const bytes *b, size_t max, pn_fcgi_scan *s, size_t *at)
{
	pn_fcgi_verdict v = PN_FCGI_MORE;

	pn_fcgi_scan_init(s, max);
	for (*at = 0; *at <= b->len && v == PN_FCGI_MORE; (*at)++)
		v = pn_fcgi_scan_feed(s, b->data, *at);
	(*at)--;
	return v;
}

/* A request's start as nginx sends it: BEGIN, one PARAMS record, the end. */
static void
nginx_start(bytes *b, int flags)
{
	unsigned char params[256];
	size_t		n = 0;

	n += pair(params + n, "REQUEST_METHOD", 14, "POST", 4);
	n += pair(params + n, "PATH_INFO", 9, "/notify/wxpay", 13);
	n += pair(params + n, "HTTP_EMPTY", 10, "", 0);
	begin(b, 1, PN_FCGI_RESPONDER, flags);
	record(b, 1, PN_FCGI_PARAMS, 1, params, n, (int) ((8 - n % 8) % 8));
	record(b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
}

static void
test_valid(void)
{
	static bytes b;
	pn_fcgi_scan s;
	size_t		at;
	size_t		start_len;

	b.len = 0;
	nginx_start(&b, PN_FCGI_KEEP_CONN);
	start_len = b.len;
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_DONE, "nginx's start");
	CHECK(s.pos == start_len, "length of the start: %zu, not %zu", s.pos, start_len);
	CHECK(s.request_id == 1 && s.keep_conn && s.pairs == 3, "fields");
	CHECK(scan_bytewise(&b, PN_FCGI_START_MAX, &s, &at) == PN_FCGI_DONE && at == start_len,
		  "byte by byte: DONE at the last byte (%zu of %zu)", at, start_len);
	/* STDIN after it is not looked at */
	record(&b, 1, PN_FCGI_STDIN, 1, "{}", 2, 0);
	record(&b, 9, 0, 0, "\xff", 1, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_DONE && s.pos == start_len,
		  "bytes after the start ignored");
	CHECK(pn_fcgi_scan_feed(&s, b.data, b.len) == PN_FCGI_DONE, "DONE again");

	/* a pair straddling three records, 4-byte lengths split too */
	{
		unsigned char p[400];
		char		value[300];
		size_t		n;

		memset(value, 'v', sizeof(value));
		n = pair(p, "HTTP_X", 6, value, sizeof(value));
		b.len = 0;
		begin(&b, 7, PN_FCGI_RESPONDER, 0);
		record(&b, 1, PN_FCGI_PARAMS, 7, p, 1, 3);
		record(&b, 1, PN_FCGI_PARAMS, 7, p + 1, 3, 0);
		record(&b, 1, PN_FCGI_PARAMS, 7, p + 4, n - 4, 255);
		record(&b, 1, PN_FCGI_PARAMS, 7, "", 0, 5);
		CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_DONE && s.pos == b.len,
			  "a pair over three records, with padding");
		CHECK(s.request_id == 7 && !s.keep_conn && s.pairs == 1 && s.params_len == n, "fields");
		CHECK(scan_bytewise(&b, PN_FCGI_START_MAX, &s, &at) == PN_FCGI_DONE && at == b.len,
			  "byte by byte");
	}
	/* no pairs at all */
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_DONE && s.pairs == 0, "empty PARAMS");
}

static void
test_lengths(void)
{
	static bytes b;
	static unsigned char big[70000];
	static char filler[70000];
	pn_fcgi_scan s;
	size_t		n;
	unsigned char crash[8] = {0xc0, 0, 0, 0, 0xc0, 0, 0, 0};
	unsigned char claim[5] = {0xbf, 0xff, 0xff, 0xff, 0};

	/* the 16-byte record: refused as soon as it is read, end or not */
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, crash, 8, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_PAIR, "0x40000000 + 0x40000000");
	/* a claimed 1 GiB name, with bytes after it */
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	put(&b, "", 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, claim, 5, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_PAIR, "1 GiB name");
	/* a value that would end past the bound, though the record is small */
	big[0] = 1;
	big[1] = 0x80;
	big[2] = 0;
	big[3] = 0xff;
	big[4] = 0xf0;				/* value length 65520 */
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, big, 6, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_PAIR, "value past the bound");
	/* the stream ends in a pair's data, or in its lengths */
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, "\x03\x01" "ab", 4, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_PAIR, "stream ends in a pair");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, "\x01\x01" "ab\x80\x00", 6, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_PAIR, "stream ends in a length");

	/* the bound: 70,000 bytes of good pairs are refused */
	memset(filler, 'x', sizeof(filler));
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	n = pair(big, "HTTP_X", 6, filler, 60000);
	record(&b, 1, PN_FCGI_PARAMS, 1, big, n, 0);
	n = pair(big, "HTTP_Y", 6, filler, 10000);
	record(&b, 1, PN_FCGI_PARAMS, 1, big, n, 0);
	record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_TOO_LARGE, "70,000 bytes");
	/* exactly max bytes pass; one byte less of room does not */
	{
		pn_fcgi_scan t;

		b.len = 0;
		begin(&b, 1, PN_FCGI_RESPONDER, 0);
		n = pair(big, "HTTP_X", 6, filler, 60000);
		record(&b, 1, PN_FCGI_PARAMS, 1, big, n, 0);
		record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
		CHECK(scan_all(&b, b.len, &t) == PN_FCGI_DONE && t.pos == b.len, "exactly max");
		CHECK(scan_all(&b, b.len - 1, &t) == PN_FCGI_TOO_LARGE, "max - 1");
		CHECK(scan_all(&b, 10, &t) == PN_FCGI_TOO_LARGE, "a tiny max");
	}
	/* too many pairs */
	{
		static unsigned char many[2 * (PN_FCGI_PAIRS_MAX + 1)];

		memset(many, 0, sizeof(many));
		b.len = 0;
		begin(&b, 1, PN_FCGI_RESPONDER, 0);
		record(&b, 1, PN_FCGI_PARAMS, 1, many, 2 * PN_FCGI_PAIRS_MAX, 0);
		record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
		CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_DONE && s.pairs == PN_FCGI_PAIRS_MAX,
			  "PN_FCGI_PAIRS_MAX empty pairs");
		b.len = 0;
		begin(&b, 1, PN_FCGI_RESPONDER, 0);
		record(&b, 1, PN_FCGI_PARAMS, 1, many, sizeof(many), 0);
		CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_TOO_MANY, "one pair more");
	}
}

static void
test_records(void)
{
	static bytes b;
	pn_fcgi_scan s;
	unsigned char ask[32];
	size_t		n = pair(ask, "FCGI_MAX_CONNS", 14, "", 0);

	/* another version, first or later */
	b.len = 0;
	record(&b, 2, PN_FCGI_BEGIN_REQUEST, 1, "\0\1\0\0\0\0\0\0", 8, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_VERSION, "version 2 BEGIN");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 0, PN_FCGI_PARAMS, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_VERSION, "version 0 PARAMS");
	/* a management record, before the request or inside it */
	b.len = 0;
	record(&b, 1, 9, 0, ask, n, 0);
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "GET_VALUES first");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, 9, 0, ask, n, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "GET_VALUES in PARAMS");
	/* BEGIN with request id 0, a second BEGIN, another request's PARAMS */
	b.len = 0;
	begin(&b, 0, PN_FCGI_RESPONDER, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "BEGIN id 0");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	begin(&b, 2, PN_FCGI_RESPONDER, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "second BEGIN");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_PARAMS, 2, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "PARAMS of request 2");
	/* PARAMS first, STDIN before the end of PARAMS */
	b.len = 0;
	record(&b, 1, PN_FCGI_PARAMS, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "PARAMS first");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	record(&b, 1, PN_FCGI_STDIN, 1, "", 0, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_RECORD, "STDIN before PARAMS end");
	/* BEGIN_REQUEST's body */
	b.len = 0;
	begin(&b, 1, 2, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_BEGIN, "AUTHORIZER");
	b.len = 0;
	begin(&b, 1, 0x101, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_BEGIN, "role 0x101");
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 2);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_BEGIN, "unknown flag");
	b.len = 0;
	record(&b, 1, PN_FCGI_BEGIN_REQUEST, 1, "\0\1\0\0\0\0\0\0\0", 9, 0);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_BAD_BEGIN, "BEGIN of 9 bytes");
	/* a short header is MORE, not a verdict */
	b.len = 0;
	begin(&b, 1, PN_FCGI_RESPONDER, 0);
	put(&b, "\1\4\0", 3);
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_MORE && s.pos == 16, "short header");
	b.len = 0;
	CHECK(scan_all(&b, PN_FCGI_START_MAX, &s) == PN_FCGI_MORE && s.pos == 0, "nothing yet");
	for (int v = PN_FCGI_MORE; v <= PN_FCGI_TOO_MANY; v++)
		CHECK(strcmp(pn_fcgi_verdict_text((pn_fcgi_verdict) v), "?") != 0, "text of %d", v);
}

static void
test_stdin(void)
{
	unsigned char h[8] = {1, PN_FCGI_STDIN, 1, 2, 0x12, 0x34, 7, 0};
	size_t		content = 0,
				padding = 0;

	CHECK(pn_fcgi_check_stdin(h, 0x102, &content, &padding) == PN_FCGI_OK &&
		  content == 0x1234 && padding == 7, "a STDIN record");
	CHECK(pn_fcgi_check_stdin(h, 1, &content, &padding) == PN_FCGI_BAD_RECORD, "another request");
	h[1] = 9;
	h[2] = h[3] = 0;
	CHECK(pn_fcgi_check_stdin(h, 1, &content, &padding) == PN_FCGI_BAD_RECORD, "GET_VALUES");
	h[1] = PN_FCGI_PARAMS;
	h[3] = 1;
	CHECK(pn_fcgi_check_stdin(h, 1, &content, &padding) == PN_FCGI_BAD_RECORD, "PARAMS again");
	h[0] = 2;
	h[1] = PN_FCGI_STDIN;
	CHECK(pn_fcgi_check_stdin(h, 1, &content, &padding) == PN_FCGI_BAD_VERSION, "version 2");
}

/*
 * pn_fcgi_scan_request over nginx's start and a STDIN stream: MORE until the
 * empty STDIN record's header is there, whether the bytes come at once or
 * one at a time, each looked at once; a record out of place refused.
 */
static void
test_request(void)
{
	static bytes b;
	pn_fcgi_scan s;
	size_t		start_len,
				whole_len,
				at;
	pn_fcgi_verdict v = PN_FCGI_MORE;

	b.len = 0;
	nginx_start(&b, 0);
	start_len = b.len;
	record(&b, 1, PN_FCGI_STDIN, 1, "{\"id\":1}", 8, 3);
	record(&b, 1, PN_FCGI_STDIN, 1, "", 0, 0);
	whole_len = b.len;
	put(&b, "\1\1", 2);			/* what follows is not looked at */
	pn_fcgi_scan_init(&s, PN_FCGI_START_MAX);
	CHECK(pn_fcgi_scan_request(&s, b.data, b.len) == PN_FCGI_WHOLE &&
		  s.pos == start_len && s.end == whole_len, "a whole request at once");
	CHECK(pn_fcgi_scan_request(&s, b.data, b.len) == PN_FCGI_WHOLE, "WHOLE again");
	pn_fcgi_scan_init(&s, PN_FCGI_START_MAX);
	for (at = 0; at <= b.len && v == PN_FCGI_MORE; at++)
		v = pn_fcgi_scan_request(&s, b.data, at);
	CHECK(v == PN_FCGI_WHOLE && at - 1 == whole_len && s.end == whole_len,
		  "a byte at a time: WHOLE at the empty STDIN record's header (%zu)", at - 1);
	pn_fcgi_scan_init(&s, PN_FCGI_START_MAX);
	CHECK(pn_fcgi_scan_request(&s, b.data, whole_len - 1) == PN_FCGI_MORE &&
		  s.end == whole_len - PN_FCGI_HEADER_LEN, "one byte short: MORE");
	CHECK(pn_fcgi_scan_request(&s, b.data, start_len - 1) == PN_FCGI_BAD_RECORD,
		  "a shorter buffer than before: refused");
	/* the start alone, then a record of another type in STDIN */
	b.len = start_len;
	pn_fcgi_scan_init(&s, PN_FCGI_START_MAX);
	CHECK(pn_fcgi_scan_request(&s, b.data, b.len) == PN_FCGI_MORE && s.pos == start_len,
		  "the start alone: MORE");
	record(&b, 1, 9, 0, "", 0, 0);
	CHECK(pn_fcgi_scan_request(&s, b.data, b.len) == PN_FCGI_BAD_RECORD,
		  "a management record in STDIN");
	/* a start refused stays refused */
	b.len = 0;
	record(&b, 2, PN_FCGI_BEGIN_REQUEST, 1, "\0\1\0\0\0\0\0\0", 8, 0);
	pn_fcgi_scan_init(&s, PN_FCGI_START_MAX);
	CHECK(pn_fcgi_scan_request(&s, b.data, b.len) == PN_FCGI_BAD_VERSION &&
		  pn_fcgi_scan_request(&s, b.data, b.len) == PN_FCGI_BAD_VERSION, "version 2");
}

static bool
v4(const char *list, const char *addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};

	inet_pton(AF_INET, addr, &sa.sin_addr);
	return pn_fcgi_peer_allowed(list, (struct sockaddr *) &sa, sizeof(sa));
}

static bool
v6(const char *list, const char *addr)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6};

	inet_pton(AF_INET6, addr, &sa.sin6_addr);
	return pn_fcgi_peer_allowed(list, (struct sockaddr *) &sa, sizeof(sa));
}

static void
test_peer(void)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	struct sockaddr_in6 short6 = {.sin6_family = AF_INET6};

	CHECK(v4(NULL, "192.0.2.7") && v4("", "192.0.2.7"), "no list: any IPv4");
	CHECK(v6(NULL, "2001:db8::1") && v6("", "::1"), "no list: any IPv6");
	CHECK(v4("10.9.9.9,127.0.0.1", "127.0.0.1"), "IPv4 listed (second)");
	CHECK(v4("127.0.0.1", "127.0.0.1"), "IPv4 listed (alone)");
	CHECK(!v4("10.9.9.9", "127.0.0.1"), "IPv4 not listed");
	CHECK(v6("10.9.9.9,127.0.0.1", "::ffff:127.0.0.1"), "mapped IPv4 listed");
	CHECK(!v6("10.9.9.9", "::ffff:127.0.0.1"), "mapped IPv4 not listed");
	CHECK(!v6("10.9.9.9", "::ffff:10.9.9.8"), "mapped IPv4 next to a listed one");
	CHECK(!v6("127.0.0.1", "::1"), "native IPv6 with a list");
	CHECK(!v6("127.0.0.1", "::127.0.0.1"), "IPv4-compatible IPv6 is not mapped");
	CHECK(!v6("127.0.0.1", "64:ff9b::7f00:1"), "NAT64 is not mapped");
	CHECK(!v6("0.0.0.0", "::"), "the unspecified address");
	CHECK(!v4("bogus,,127.0.0.2", "127.0.0.1") && v4("bogus,,127.0.0.2", "127.0.0.2"),
		  "an unparsable entry skipped");
	CHECK(pn_fcgi_peer_allowed("127.0.0.1", (struct sockaddr *) &un, sizeof(un)),
		  "a unix socket's peer is not filtered");
	CHECK(!pn_fcgi_peer_allowed("127.0.0.1", (struct sockaddr *) &short6, 8),
		  "a truncated address is refused");
}

int
main(void)
{
	test_valid();
	test_lengths();
	test_records();
	test_stdin();
	test_request();
	test_peer();
	printf("fcgi_check_test: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
