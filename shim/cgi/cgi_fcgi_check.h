/*
 * cgi_fcgi_check.h
 *	  The checks a FastCGI connection passes before libfcgi sees any of it
 *	  (cgi_fcgi_check.c): the peer's address against FCGI_WEB_SERVER_ADDRS,
 *	  and the records of a request.  Pure functions over memory, plain C11
 *	  and libc: the unit test and the fuzz target build this file alone.
 */
#ifndef PAYNOTIFY_CGI_FCGI_CHECK_H
#define PAYNOTIFY_CGI_FCGI_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PN_FCGI_HEADER_LEN 8

/* FastCGI record types and the values this shim uses */
#define PN_FCGI_BEGIN_REQUEST 1
#define PN_FCGI_PARAMS 4
#define PN_FCGI_STDIN 5
#define PN_FCGI_RESPONDER 1
#define PN_FCGI_KEEP_CONN 1

/*
 * A request's start, BEGIN_REQUEST through the empty PARAMS record with
 * every header and padding byte, is at most this long.  nginx sends a few
 * kilobytes (its header buffers hold 32 KiB at most by default).
 */
#define PN_FCGI_START_MAX 65536
/* ... and has at most this many name-value pairs. */
#define PN_FCGI_PAIRS_MAX 4096

typedef enum pn_fcgi_verdict
{
	PN_FCGI_MORE,				/* right so far: more bytes are needed */
	PN_FCGI_DONE,				/* the request's start is complete */
	PN_FCGI_OK,					/* pn_fcgi_check_stdin: a STDIN record */
	PN_FCGI_WHOLE,				/* pn_fcgi_scan_request: the whole request,
								 * its STDIN stream to the empty record */
	PN_FCGI_BAD_VERSION,		/* a record of another FastCGI version */
	PN_FCGI_BAD_RECORD,			/* a record out of place (type or request id) */
	PN_FCGI_BAD_BEGIN,			/* BEGIN_REQUEST not a responder's */
	PN_FCGI_BAD_PAIR,			/* a name-value pair past the PARAMS stream */
	PN_FCGI_TOO_LARGE,			/* over PN_FCGI_START_MAX bytes */
	PN_FCGI_TOO_MANY			/* over PN_FCGI_PAIRS_MAX pairs */
} pn_fcgi_verdict;

/*
 * The state of pn_fcgi_scan over a request's start (and of
 * pn_fcgi_scan_request over the whole request): zeroed by
 * pn_fcgi_scan_init, then fed the same buffer again and again as it grows.
 */
typedef struct pn_fcgi_scan
{
	size_t		max;			/* the start may not be longer */
	size_t		pos;			/* bytes of the buffer checked; at DONE the
								 * length of the start */
	pn_fcgi_verdict verdict;	/* MORE until it is known */
	unsigned	request_id;		/* BEGIN_REQUEST's, once seen */
	bool		keep_conn;		/* FCGI_KEEP_CONN was set */
	size_t		params_len;		/* content bytes of PARAMS so far */
	size_t		pairs;			/* name-value pairs begun so far */
	size_t		end;			/* pn_fcgi_scan_request: bytes checked; at
								 * WHOLE the request's length (the empty
								 * STDIN record's padding, never read, not
								 * counted) */
	pn_fcgi_verdict whole;		/* pn_fcgi_scan_request's: MORE until known */
	/* private */
	int			phase;
	int			after_padding;
	size_t		content_left;
	size_t		padding_left;
	int			field;
	int			len_have;
	int			len_need;
	uint32_t	len_acc;
	uint32_t	name_len;
	uint64_t	data_left;
	size_t		stdin_left;		/* of a STDIN record: content and padding */
} pn_fcgi_scan;

extern void pn_fcgi_scan_init(pn_fcgi_scan *s, size_t max);
extern pn_fcgi_verdict pn_fcgi_scan_feed(pn_fcgi_scan *s,
										 const unsigned char *buf, size_t len);
extern pn_fcgi_verdict pn_fcgi_scan_request(pn_fcgi_scan *s,
											const unsigned char *buf, size_t len);
extern pn_fcgi_verdict pn_fcgi_check_stdin(const unsigned char *header,
										   unsigned request_id,
										   size_t *content, size_t *padding);
extern const char *pn_fcgi_verdict_text(pn_fcgi_verdict v);

extern bool pn_fcgi_peer_allowed(const char *list, const struct sockaddr *sa,
								 socklen_t len);

#endif							/* PAYNOTIFY_CGI_FCGI_CHECK_H */
