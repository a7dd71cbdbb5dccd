/*
 * pn_curl.c
 *	  The daemons' HTTP requests (see pn_curl.h): the addresses they may
 *	  connect to and the class of a failure.
 */
#include "pn_curl.h"

#include <string.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

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

/* An address a daemon connects to only when allowed to reach private ones. */
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
 * clientp: the request's "blocked" flag, set when an address is refused.
 */
static curl_socket_t
open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
	bool	   *blocked = clientp;

	if (purpose != CURLSOCKTYPE_IPCXN || address_private(&addr->addr) ||
		address_local(&addr->addr))
	{
		*blocked = true;
		return CURL_SOCKET_BAD;
	}
	return socket(addr->family, addr->socktype, addr->protocol);
}

/*
 * Where easy may connect: no proxy (a proxy would connect for us, unchecked;
 * proxy environment variables are ignored) and, unless allow_private, only
 * public addresses that are not this host's own, checked on the socket of
 * every connection; *blocked is set when one is refused (false first).
 */
void
pn_curl_guard(CURL *easy, bool allow_private, bool *blocked)
{
	*blocked = false;
	curl_easy_setopt(easy, CURLOPT_PROXY, "");
	if (allow_private)
		return;
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, blocked);
}

/*
 * A coarse class of a failed request, never libcurl's text (which names
 * addresses, ports and what answered there): what a daemon records where
 * others read it.  (A refused address is the caller's to name.)
 */
const char *
pn_curl_error_class(CURLcode rc)
{
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
