/*
 * relay_http.c
 *	  The POSTs of one batch with one libcurl multi handle: each signed
 *	  delivery started as the limits allow, its result kept in its job.
 */
#include "relay.h"

#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

static size_t
discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	(void) ptr;
	(void) userdata;
	return size * nmemb;
}

/* An IPv4 address (host order) that is not public. */
static bool
ipv4_private(uint32_t a)
{
	return (a >> 24) == 0			/* 0.0.0.0/8 "this network" */
		|| (a >> 24) == 10			/* 10.0.0.0/8 */
		|| (a >> 22) == (100u << 2 | 1)	/* 100.64.0.0/10 shared (CGN) */
		|| (a >> 24) == 127			/* 127.0.0.0/8 loopback */
		|| (a >> 16) == (169u << 8 | 254)	/* 169.254.0.0/16 link-local */
		|| (a >> 20) == (172u << 4 | 1) /* 172.16.0.0/12 */
		|| (a >> 8) == (192u << 16 | 0 << 8 | 0)	/* 192.0.0.0/24 protocol assignments */
		|| (a >> 16) == (192u << 8 | 168)	/* 192.168.0.0/16 */
		|| (a >> 17) == (198u << 7 | 18 >> 1)	/* 198.18.0.0/15 benchmarking */
		|| (a >> 8) == (192u << 16 | 0 << 8 | 2)	/* 192.0.2.0/24 documentation */
		|| (a >> 8) == (198u << 16 | 51 << 8 | 100)	/* 198.51.100.0/24 documentation */
		|| (a >> 8) == (203u << 16 | 0 << 8 | 113)	/* 203.0.113.0/24 documentation */
		|| (a >> 28) >= 14;			/* 224.0.0.0/4 multicast, 240.0.0.0/4 reserved */
}

/*
 * The IPv4 address an IPv6 address carries, if it is one of the forms that
 * reach that IPv4 address: IPv4-mapped (::ffff:a.b.c.d, which an IPv6
 * socket connects to over IPv4), SIIT, NAT64 (64:ff9b::/96), compatible
 * (::a.b.c.d) and 6to4 (2002::/16).
 */
static bool
ipv6_carried_ipv4(const struct sockaddr_in6 *sa6, struct sockaddr_in *sa4)
{
	const unsigned char *b = sa6->sin6_addr.s6_addr;
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
	static const unsigned char siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
	static const unsigned char zero[12] = {0};

	memset(sa4, 0, sizeof(*sa4));
	sa4->sin_family = AF_INET;
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, siit, 12) == 0 ||
		memcmp(b, nat64, 12) == 0 || memcmp(b, zero, 12) == 0)
		memcpy(&sa4->sin_addr.s_addr, b + 12, 4);
	else if (b[0] == 0x20 && b[1] == 0x02)
		memcpy(&sa4->sin_addr.s_addr, b + 2, 4);
	else
		return false;
	return true;
}

/*
 * An address of one of this host's own interfaces, whatever its class: a
 * public address of the relay's host reaches every service listening there
 * on all addresses.  Also written as an IPv6 address that carries it
 * (::ffff:a.b.c.d reaches it through an IPv6 socket).  Read anew for each
 * connection (connections are reused, so this is rare), so that an address
 * added later counts too.
 */
static bool
address_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifs,
			   *i;
	bool		local = false;
	struct sockaddr_in carried;

	if (sa->sa_family == AF_INET6 &&
		ipv6_carried_ipv4((const struct sockaddr_in6 *) sa, &carried) &&
		address_local((const struct sockaddr *) &carried))
		return true;
	if (getifaddrs(&ifs) != 0)
		return true;			/* cannot tell: refuse */
	for (i = ifs; i != NULL && !local; i = i->ifa_next)
	{
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
			local = ((const struct sockaddr_in *) i->ifa_addr)->sin_addr.s_addr ==
				((const struct sockaddr_in *) sa)->sin_addr.s_addr;
		else if (sa->sa_family == AF_INET6)
			local = memcmp(&((const struct sockaddr_in6 *) i->ifa_addr)->sin6_addr,
						   &((const struct sockaddr_in6 *) sa)->sin6_addr, sizeof(struct in6_addr)) == 0;
	}
	freeifaddrs(ifs);
	return local;
}

/* An address the relay connects to only with PAYNOTIFY_RELAY_ALLOW_PRIVATE=1. */
static bool
address_private(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ipv4_private(ntohl(((const struct sockaddr_in *) sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
	{
		const unsigned char *b = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;
		static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
		static const unsigned char siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
		static const unsigned char zero[12] = {0};
		uint32_t	v4 = (uint32_t) b[12] << 24 | (uint32_t) b[13] << 16 | (uint32_t) b[14] << 8 | b[15];

		/* an IPv4 address inside IPv6 (mapped, SIIT, NAT64, compatible; also :: and ::1) */
		if (memcmp(b, mapped, 12) == 0 || memcmp(b, siit, 12) == 0 ||
			memcmp(b, nat64, 12) == 0 || memcmp(b, zero, 12) == 0)
			return memcmp(b, zero, 12) == 0 && v4 <= 1 ? true : ipv4_private(v4);
		/* 6to4 (2002::/16): the IPv4 address it carries */
		if (b[0] == 0x20 && b[1] == 0x02)
			return ipv4_private((uint32_t) b[2] << 24 | (uint32_t) b[3] << 16 | (uint32_t) b[4] << 8 | b[5]);
		return (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)	/* 2001::/32 Teredo */
			|| (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)	/* 2001:db8::/32 documentation */
			|| (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1)	/* 64:ff9b:1::/48 local NAT64 */
			|| (b[0] == 0x01 && b[1] == 0 && memcmp(b + 2, zero, 6) == 0)	/* 100::/64 discard */
			|| (b[0] & 0xfe) == 0xfc	/* fc00::/7 unique local */
			|| (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)	/* fe80::/10 link-local */
			|| (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)	/* fec0::/10 site-local */
			|| b[0] == 0xff;	/* ff00::/8 multicast */
	}
	return true;				/* no other family is expected */
}

/*
 * libcurl's socket for each connection it makes, after name resolution: the
 * address checked here is the one connected to, so a name that resolves to
 * a private address (also on a second lookup: DNS rebinding) is refused.
 */
static curl_socket_t
open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
	job		   *j = clientp;

	if (!cfg.allow_private && (purpose != CURLSOCKTYPE_IPCXN || address_private(&addr->addr) ||
							   address_local(&addr->addr)))
	{
		j->blocked = true;
		return CURL_SOCKET_BAD;
	}
	return socket(addr->family, addr->socktype, addr->protocol);
}

/*
 * What is recorded in last_error, which operators (admin) read: a coarse
 * class, never libcurl's text (which names addresses, ports and what
 * answered there).  The relay's own log has the details (--verbose=1).
 */
static const char *
error_class(const job *j, CURLcode rc)
{
	if (j->blocked)
		return "address not allowed (not public; see PAYNOTIFY_RELAY_ALLOW_PRIVATE)";
	switch (rc)
	{
		case CURLE_COULDNT_RESOLVE_HOST:
			return "could not resolve host";
		case CURLE_COULDNT_CONNECT:
			return "could not connect";
		case CURLE_OPERATION_TIMEDOUT:
			return "timed out";
		case CURLE_SSL_CONNECT_ERROR:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CIPHER:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_ISSUER_ERROR:
		case CURLE_SSL_CRL_BADFILE:
		case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		case CURLE_SSL_INVALIDCERTSTATUS:
		case CURLE_USE_SSL_FAILED:
			return "TLS failure";
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_WEIRD_SERVER_REPLY:
		case CURLE_PARTIAL_FILE:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			return "connection failed during the request";
		case CURLE_URL_MALFORMAT:
		case CURLE_UNSUPPORTED_PROTOCOL:
			return "bad url";
		default:
			return "request failed";
	}
}

static bool
start_job(CURLM *multi, job *j)
{
	char		line[256];
	char		sig[128];
	long long	ts = (long long) time(NULL);
	struct curl_slist *h = NULL,
			   *t;

	j->state = JOB_DONE;
	if (j->secret_len < 0)
	{
		snprintf(j->error, sizeof(j->error), "endpoint secret is not whsec_ base64");
		return false;
	}
	if (!sign(j, ts, sig, sizeof(sig)))
	{
		snprintf(j->error, sizeof(j->error), "signing failed");
		return false;
	}
#define ADD(...) do { snprintf(line, sizeof(line), __VA_ARGS__); \
		t = curl_slist_append(h, line); if (t == NULL) goto oom; h = t; } while (0)
	ADD("Content-Type: application/json");
	ADD("webhook-id: %s", j->webhook_id);
	ADD("webhook-timestamp: %lld", ts);
	ADD("webhook-signature: %s", sig);
	ADD("User-Agent: %s/%s", PN_PROGRAM, PAYNOTIFY_VERSION);
	ADD("Expect:");
#undef ADD
	j->easy = curl_easy_init();
	if (j->easy == NULL)
		goto oom;
	j->headers = h;
	j->curl_error[0] = '\0';
	curl_easy_setopt(j->easy, CURLOPT_URL, j->url);
	curl_easy_setopt(j->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(j->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDSIZE, (long) j->body_len);
	curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, (long) cfg.timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) cfg.connect_timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(j->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->curl_error);
	curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
	/* every connection is checked (open_socket); a proxy would connect for us */
	curl_easy_setopt(j->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(j->easy, CURLOPT_OPENSOCKETDATA, j);
	curl_easy_setopt(j->easy, CURLOPT_PROXY, "");
	if (curl_multi_add_handle(multi, j->easy) != CURLM_OK)
	{
		curl_easy_cleanup(j->easy);
		j->easy = NULL;
		goto oom;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->started);
	j->state = JOB_RUNNING;
	return true;
oom:
	curl_slist_free_all(h);
	j->headers = NULL;
	snprintf(j->error, sizeof(j->error), "out of memory");
	return false;
}

static void
finish_job(CURLM *multi, job *j, CURLcode rc)
{
	long		code = 0;

	curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
	if (rc == CURLE_OK)
	{
		j->status = code;
		if (code < 200 || code > 299)
			snprintf(j->error, sizeof(j->error), "HTTP %ld", code);
	}
	else
		snprintf(j->error, sizeof(j->error), "%s", error_class(j, rc));
	curl_multi_remove_handle(multi, j->easy);
	curl_easy_cleanup(j->easy);
	curl_slist_free_all(j->headers);
	j->easy = NULL;
	j->headers = NULL;
	j->state = JOB_DONE;
	if (cfg.verbose >= 2 || (cfg.verbose >= 1 && (j->status < 200 || j->status > 299)))
		pn_log("delivery %s (%s) to endpoint %s: %s%s%.190s", j->delivery_id, j->webhook_id,
			   j->endpoint_id, j->status >= 200 && j->status <= 299 ? "delivered" : j->error,
			   rc != CURLE_OK && j->curl_error[0] ? ": " : "", rc != CURLE_OK ? j->curl_error : "");
}

/*
 * POSTs the jobs: starts what the limits allow, until every job is done or
 * may no longer start (deadline, SIGTERM) and none is running.
 */
void
run_jobs(CURLM *multi, job *jobs, int n)
{
	long long	deadline = pn_now_ms() + 2 * cfg.timeout_ms;
	int			running = 0;

	for (;;)
	{
		bool		may_start = !stop_requested && pn_now_ms() < deadline;
		int			still,
					left;
		CURLMsg    *msg;

		for (int i = 0; may_start && i < n && running < cfg.max_in_flight; i++)
		{
			if (jobs[i].state != JOB_WAITING || *jobs[i].in_flight >= jobs[i].max_in_flight)
				continue;
			if (start_job(multi, &jobs[i]))
			{
				running++;
				(*jobs[i].in_flight)++;
			}
		}
		if (running == 0)
			break;
		curl_multi_perform(multi, &still);
		while ((msg = curl_multi_info_read(multi, &left)) != NULL)
		{
			job		   *j = NULL;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &j);
			if (j == NULL)
				continue;
			finish_job(multi, j, msg->data.result);
			running--;
			(*j->in_flight)--;
		}
		if (running > 0)
			curl_multi_poll(multi, NULL, 0, 50, NULL);
	}
}
