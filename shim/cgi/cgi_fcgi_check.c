/*
 * cgi_fcgi_check.c
 *	  What a FastCGI connection must pass before libfcgi reads any of it.
 *
 * libfcgi trusts its peer: a name-value length of the PARAMS stream is
 * malloc'd before the bytes are read (1 GiB for the asking; two such
 * lengths overflow an int and its Malloc asserts, aborting the process),
 * and a management record (FCGI_GET_VALUES) is parsed the same way and
 * answered through a 64-byte stack buffer that four known names overflow.
 * Such records may come before the request, between its PARAMS records or
 * in its STDIN stream.  So the shim reads a request's start itself
 * (cgi_fcgi.c), checks it here, hands libfcgi only a start that passed,
 * and reads the STDIN stream itself, record by record, with the check
 * below: libfcgi never reads from the client.
 *
 * A request's start, as nginx sends it, and the only one accepted:
 *
 *   BEGIN_REQUEST   request id R (not 0), 8 bytes: role RESPONDER, flags 0
 *                   or FCGI_KEEP_CONN
 *   PARAMS          request id R, content 1..65535 bytes, any number
 *   PARAMS          request id R, content 0: the end of the stream
 *
 * each record of version 1, with any padding; the PARAMS contents together
 * a sequence of whole name-value pairs (a pair may straddle records), each
 * length in its 1- or 4-byte form, the whole start at most `max' bytes and
 * PN_FCGI_PAIRS_MAX pairs.  Anything else (a management record, a record of
 * another request, another type) is refused, and a length that cannot fit
 * in what is left of `max' is refused as soon as it is read.
 *
 * pn_fcgi_scan_feed is incremental: it is given the whole buffer each time,
 * resumes where it stopped and reads each byte once (but the BEGIN_REQUEST
 * header, read again at each call until its 8-byte body has arrived: 16
 * bytes, each read 8 times at most); it never reads at or
 * past len, and its verdict does not depend on how the bytes were cut into
 * reads.  pn_fcgi_scan_request, as incremental, goes on past the start over
 * the STDIN stream's records (each header checked as pn_fcgi_check_stdin
 * does, the content skipped unread) and tells when the whole request has
 * arrived: the FastCGI acceptor (cgi_accept.c) reads a connection until
 * then before a worker takes it.
 */
#include "cgi_fcgi_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

enum
{
	PHASE_BEGIN,				/* expecting BEGIN_REQUEST */
	PHASE_HEADER,				/* expecting a PARAMS record */
	PHASE_CONTENT,				/* in a PARAMS record's content */
	PHASE_PADDING,				/* in a record's padding */
	PHASE_DONE
};

enum
{
	FIELD_NAME_LEN,
	FIELD_VALUE_LEN,
	FIELD_DATA
};

/* A record header's fields. */
typedef struct header
{
	unsigned	version;
	unsigned	type;
	unsigned	request_id;
	size_t		content;
	size_t		padding;
} header;

static header
read_header(const unsigned char *p)
{
	header		h;

	h.version = p[0];
	h.type = p[1];
	h.request_id = (unsigned) p[2] << 8 | p[3];
	h.content = (size_t) p[4] << 8 | p[5];
	h.padding = p[6];
	return h;
}

/* Starts a scan of a request's start of at most max bytes. */
void
pn_fcgi_scan_init(pn_fcgi_scan *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
	s->verdict = PN_FCGI_MORE;
	s->whole = PN_FCGI_MORE;
	s->phase = PHASE_BEGIN;
	s->field = FIELD_NAME_LEN;
}

static pn_fcgi_verdict
finish(pn_fcgi_scan *s, pn_fcgi_verdict v)
{
	s->verdict = v;
	return v;
}

/* BEGIN_REQUEST at s->pos. */
static pn_fcgi_verdict
scan_begin(pn_fcgi_scan *s, const unsigned char *buf, size_t len)
{
	header		h;
	const unsigned char *body;

	/* first, so that the verdict does not depend on how the bytes came */
	if (s->max - s->pos < PN_FCGI_HEADER_LEN)
		return finish(s, PN_FCGI_TOO_LARGE);
	if (len - s->pos < PN_FCGI_HEADER_LEN)
		return PN_FCGI_MORE;
	h = read_header(buf + s->pos);
	if (h.version != 1)
		return finish(s, PN_FCGI_BAD_VERSION);
	if (h.type != PN_FCGI_BEGIN_REQUEST || h.request_id == 0)
		return finish(s, PN_FCGI_BAD_RECORD);
	if (h.content != 8)
		return finish(s, PN_FCGI_BAD_BEGIN);
	if (s->max - s->pos < PN_FCGI_HEADER_LEN + h.content + h.padding)
		return finish(s, PN_FCGI_TOO_LARGE);
	if (len - s->pos < PN_FCGI_HEADER_LEN + h.content)
		return PN_FCGI_MORE;
	body = buf + s->pos + PN_FCGI_HEADER_LEN;
	if (((unsigned) body[0] << 8 | body[1]) != PN_FCGI_RESPONDER ||
		(body[2] & ~PN_FCGI_KEEP_CONN) != 0)
		return finish(s, PN_FCGI_BAD_BEGIN);
	s->request_id = h.request_id;
	s->keep_conn = (body[2] & PN_FCGI_KEEP_CONN) != 0;
	s->pos += PN_FCGI_HEADER_LEN + h.content;
	s->padding_left = h.padding;
	s->phase = PHASE_PADDING;
	s->after_padding = PHASE_HEADER;
	return PN_FCGI_MORE;
}

/* A PARAMS record's header at s->pos. */
static pn_fcgi_verdict
scan_header(pn_fcgi_scan *s, const unsigned char *buf, size_t len)
{
	header		h;

	/* first, so that the verdict does not depend on how the bytes came */
	if (s->max - s->pos < PN_FCGI_HEADER_LEN)
		return finish(s, PN_FCGI_TOO_LARGE);
	if (len - s->pos < PN_FCGI_HEADER_LEN)
		return PN_FCGI_MORE;
	h = read_header(buf + s->pos);
	if (h.version != 1)
		return finish(s, PN_FCGI_BAD_VERSION);
	if (h.type != PN_FCGI_PARAMS || h.request_id != s->request_id)
		return finish(s, PN_FCGI_BAD_RECORD);
	if (s->max - s->pos < PN_FCGI_HEADER_LEN + h.content + h.padding)
		return finish(s, PN_FCGI_TOO_LARGE);
	s->pos += PN_FCGI_HEADER_LEN;
	s->padding_left = h.padding;
	s->phase = PHASE_PADDING;
	if (h.content == 0)
	{
		/* the end of the stream: between two pairs */
		if (s->field != FIELD_NAME_LEN || s->len_have != 0)
			return finish(s, PN_FCGI_BAD_PAIR);
		s->after_padding = PHASE_DONE;
		return PN_FCGI_MORE;
	}
	s->params_len += h.content;
	s->content_left = h.content;
	s->phase = PHASE_CONTENT;
	s->after_padding = PHASE_HEADER;
	return PN_FCGI_MORE;
}

/* PARAMS content from s->pos: the name-value pairs' lengths and data. */
static pn_fcgi_verdict
scan_content(pn_fcgi_scan *s, const unsigned char *buf, size_t len)
{
	while (s->content_left > 0)
	{
		size_t		avail = len - s->pos;
		unsigned char b;

		if (avail == 0)
			return PN_FCGI_MORE;
		if (avail > s->content_left)
			avail = s->content_left;
		if (s->field == FIELD_DATA)
		{
			size_t		n = s->data_left < avail ? (size_t) s->data_left : avail;

			s->pos += n;
			s->content_left -= n;
			s->data_left -= n;
			if (s->data_left == 0)
				s->field = FIELD_NAME_LEN;
			continue;
		}
		b = buf[s->pos++];
		s->content_left--;
		if (s->len_have == 0)
		{
			if (s->field == FIELD_NAME_LEN && ++s->pairs > PN_FCGI_PAIRS_MAX)
				return finish(s, PN_FCGI_TOO_MANY);
			s->len_need = (b & 0x80) ? 4 : 1;
			s->len_acc = b & 0x7f;
		}
		else
			s->len_acc = s->len_acc << 8 | b;
		if (++s->len_have < s->len_need)
			continue;
		s->len_have = 0;
		if (s->field == FIELD_NAME_LEN)
		{
			s->name_len = s->len_acc;
			s->field = FIELD_VALUE_LEN;
			continue;
		}
		s->data_left = (uint64_t) s->name_len + s->len_acc;
		/* it could never arrive: refused before anything more is read */
		if (s->data_left > s->max - s->pos)
			return finish(s, PN_FCGI_BAD_PAIR);
		s->field = s->data_left > 0 ? FIELD_DATA : FIELD_NAME_LEN;
	}
	s->phase = PHASE_PADDING;
	return PN_FCGI_MORE;
}

/*
 * Checks buf[0..len), the bytes of a connection so far (the same bytes as
 * at the last call, and perhaps more), from where the last call stopped.
 * Returns PN_FCGI_MORE while the bytes are right but the start is not
 * complete, PN_FCGI_DONE once it is (s->pos is then its length; the bytes
 * after it are not looked at), else the reason to refuse the connection.
 * Once not MORE, the same verdict is returned again.
 */
pn_fcgi_verdict
pn_fcgi_scan_feed(pn_fcgi_scan *s, const unsigned char *buf, size_t len)
{
	pn_fcgi_verdict v = PN_FCGI_MORE;

	if (s->verdict != PN_FCGI_MORE)
		return s->verdict;
	if (len < s->pos)			/* not the same buffer: a caller's bug */
		return finish(s, PN_FCGI_BAD_RECORD);
	while (v == PN_FCGI_MORE)
	{
		size_t		before = s->pos;
		int			phase = s->phase;

		switch (s->phase)
		{
			case PHASE_BEGIN:
				v = scan_begin(s, buf, len);
				break;
			case PHASE_HEADER:
				v = scan_header(s, buf, len);
				break;
			case PHASE_CONTENT:
				v = scan_content(s, buf, len);
				break;
			case PHASE_PADDING:
				{
					size_t		n = len - s->pos;

					if (n > s->padding_left)
						n = s->padding_left;
					s->pos += n;
					s->padding_left -= n;
					if (s->padding_left == 0)
						s->phase = s->after_padding;
				}
				break;
			default:
				return finish(s, PN_FCGI_DONE);
		}
		/* no progress: the bytes so far are all checked */
		if (v == PN_FCGI_MORE && s->pos == before && s->phase == phase)
			return v;
	}
	return v;
}

/*
 * Checks buf[0..len) as pn_fcgi_scan_feed does, and once the request's start
 * is complete, the records of its STDIN stream after it, up to the empty
 * one, from where the last call stopped: each header as pn_fcgi_check_stdin
 * does, the content and padding skipped unread.  Returns PN_FCGI_MORE while
 * the bytes are right but the request is not whole, PN_FCGI_WHOLE once the
 * empty STDIN record's header has arrived (s->end is then the request's
 * length; s->pos is still the start's), else the reason to refuse the
 * connection; once not MORE, the same verdict again.  Each byte is looked at
 * once at most, however the bytes were cut into reads.
 */
pn_fcgi_verdict
pn_fcgi_scan_request(pn_fcgi_scan *s, const unsigned char *buf, size_t len)
{
	pn_fcgi_verdict v;

	if (s->whole != PN_FCGI_MORE)
		return s->whole;
	v = pn_fcgi_scan_feed(s, buf, len);
	if (v != PN_FCGI_DONE)
	{
		if (v != PN_FCGI_MORE)
			s->whole = v;
		return v;
	}
	if (s->end < s->pos)
		s->end = s->pos;
	if (len < s->end)			/* not the same buffer: a caller's bug */
		return s->whole = PN_FCGI_BAD_RECORD;
	for (;;)
	{
		size_t		n = len - s->end;
		size_t		content,
					padding;

		if (n > s->stdin_left)
			n = s->stdin_left;
		s->end += n;
		s->stdin_left -= n;
		if (s->stdin_left > 0 || len - s->end < PN_FCGI_HEADER_LEN)
			return PN_FCGI_MORE;
		v = pn_fcgi_check_stdin(buf + s->end, s->request_id, &content, &padding);
		if (v != PN_FCGI_OK)
			return s->whole = v;
		s->end += PN_FCGI_HEADER_LEN;
		/* the empty record ends the stream; its padding is never read */
		if (content == 0)
			return s->whole = PN_FCGI_WHOLE;
		s->stdin_left = content + padding;
	}
}

/*
 * Checks a record header read in a request's STDIN stream: it must be a
 * STDIN record (version 1) of request_id.  PN_FCGI_OK with its content and
 * padding lengths, else the reason to refuse it.
 */
pn_fcgi_verdict
pn_fcgi_check_stdin(const unsigned char *p, unsigned request_id,
					size_t *content, size_t *padding)
{
	header		h = read_header(p);

	if (h.version != 1)
		return PN_FCGI_BAD_VERSION;
	if (h.type != PN_FCGI_STDIN || h.request_id != request_id)
		return PN_FCGI_BAD_RECORD;
	*content = h.content;
	*padding = h.padding;
	return PN_FCGI_OK;
}

/* What a verdict means, for the log. */
const char *
pn_fcgi_verdict_text(pn_fcgi_verdict v)
{
	switch (v)
	{
		case PN_FCGI_MORE:
			return "the request was incomplete";
		case PN_FCGI_DONE:
		case PN_FCGI_OK:
		case PN_FCGI_WHOLE:
			return "no error";
		case PN_FCGI_BAD_VERSION:
			return "a record of another FastCGI version";
		case PN_FCGI_BAD_RECORD:
			return "a record other than the request's BEGIN_REQUEST, PARAMS and STDIN";
		case PN_FCGI_BAD_BEGIN:
			return "a BEGIN_REQUEST other than a responder's";
		case PN_FCGI_BAD_PAIR:
			return "a name-value pair longer than the PARAMS stream";
		case PN_FCGI_TOO_LARGE:
			return "BEGIN_REQUEST and PARAMS over 64 KiB";
		case PN_FCGI_TOO_MANY:
			return "over 4096 name-value pairs";
	}
	return "?";
}

/*
 * True when list (FCGI_WEB_SERVER_ADDRS: comma-separated IPv4 addresses)
 * is unset or empty, or lets the peer sa (of len bytes) in: an IPv4
 * address in the list, or the same address mapped into IPv6 (::ffff:a.b.c.d,
 * an IPv4 client of a dual-stack socket).  With a list, any other IPv6
 * address is refused, since the list cannot name one; a unix socket's peer
 * is not filtered (as libfcgi did not).
 */
bool
pn_fcgi_peer_allowed(const char *list, const struct sockaddr *sa, socklen_t len)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	struct in_addr addr;

	if (list == NULL || list[0] == '\0')
		return true;
	if (sa->sa_family == AF_UNIX)
		return true;
	if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in))
		addr = ((const struct sockaddr_in *) sa)->sin_addr;
	else if (sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6))
	{
		const unsigned char *a = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;

		if (memcmp(a, mapped, sizeof(mapped)) != 0)
			return false;
		memcpy(&addr.s_addr, a + 12, 4);
	}
	else
		return false;
	while (*list)
	{
		size_t		n = strcspn(list, ",");
		char		one[INET_ADDRSTRLEN + 8];
		struct in_addr listed;

		if (n < sizeof(one))
		{
			memcpy(one, list, n);
			one[n] = '\0';
			if (inet_aton(one, &listed) && listed.s_addr == addr.s_addr)
				return true;
		}
		list += n + (list[n] == ',');
	}
	return false;
}
