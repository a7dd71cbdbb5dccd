/*
 * send_serve.h
 *		--mode serve: the gateways' query and bill APIs answered from the
 *		sales record.  send_serve.c (HTTP, routes, the three APIs),
 *		send_bills.c (the daily bill files), send_apisig.c (keys,
 *		signatures; OpenSSL stays there and in send_sign.c).
 */
#ifndef PAYNOTIFY_SEND_SERVE_H
#define PAYNOTIFY_SEND_SERVE_H

#include "send.h"
#include "send_sales.h"

/* Which gateway's key pair: request key to verify, gateway key to sign. */
enum
{
	PN_KEY_WECHAT,
	PN_KEY_ALIPAY,
	PN_KEY_COUNT
};

/* Where the keys of --mode serve are (names as --keys resolves them). */
struct pn_serve_keys
{
	const char *dir;
	const char *merchant_cert;	/* NULL: no WeChat API */
	const char *wx_key;
	const char *wx_cert;
	const char *serial;
	const char *app_public_key; /* NULL: no Alipay API */
	const char *ali_key;
};

struct pn_apikeys;

struct pn_apikeys *pn_apikeys_load(const struct pn_serve_keys *p, char *wx_serial,
								   size_t serialsz);
void		pn_apikeys_free(struct pn_apikeys *k);
bool		pn_apikeys_has(const struct pn_apikeys *k, int which);
bool		pn_api_verify(struct pn_apikeys *k, int which, const void *msg, size_t n,
						  const char *sig_b64);
bool		pn_api_sign(struct pn_apikeys *k, int which, const void *msg, size_t n,
						struct pn_buf *out);
int			pn_b64_decode(const char *in, unsigned char **out, size_t *outlen);
void		pn_sha1_hex(const void *p, size_t n, char *out);

/* send_bills.c: the bills of one day from the record */
struct pn_bill_day
{
	const struct pn_sales *sales;
	const char *merchant;		/* WeChat mchid / Alipay seller_id the bill is for */
	long long	day_start;		/* unix seconds of the day's first second */
	time_t		now;			/* Alipay's export time */
};

/* The rows the bill of that day has (0: no bill, the gateways' "no statement"). */
size_t		pn_bill_rows(const struct pn_bill_day *d, enum pn_gateway gw);
void		pn_bill_wechat(const struct pn_bill_day *d, struct pn_buf *csv);
int			pn_bill_alipay_zip(const struct pn_bill_day *d, struct pn_buf *zip);
int			pn_gzip(const void *p, size_t n, struct pn_buf *out);
bool		pn_parse_day(const char *s, int utc_offset_s, long long *day_start);

#endif							/* PAYNOTIFY_SEND_SERVE_H */
