/*
 * send_sales.c
 *		--sales and --drop: the record of what the gateway in a box sold,
 *		one tab-separated line per generated notification, and which
 *		notifications it "loses" (never delivers), chosen from --seed.
 *		The same record is what --mode serve answers queries and bills
 *		from (send_serve.c); the reader here keeps it in memory and reads
 *		the files again when one of them changed.
 *
 *		A line (fields separated by one TAB, no quoting; no field holds a
 *		TAB or a newline):
 *		  1 gateway        wxpay | alipay | stripe
 *		  2 channel        as --ledger names it
 *		  3 event          pay | refund
 *		  4 order number   out_trade_no, Stripe metadata.order_id
 *		  5 trade number   WeChat transaction_id, Alipay trade_no, Stripe
 *		                   payment intent id
 *		  6 amount         the order's amount, minor units
 *		  7 currency
 *		  8 refund id      WeChat refund_id, Alipay out_biz_no, Stripe re_...;
 *		                   "-" for a payment
 *		  9 out_refund_no  the merchant's refund number (WeChat out_refund_no);
 *		                   "-" for a payment and for Stripe
 *		 10 refund amount  minor units, 0 for a payment
 *		 11 time           unix seconds of the success time the notification
 *		                   carries (WeChat success_time, Alipay gmt_payment or
 *		                   gmt_refund without milliseconds, Stripe created)
 *		 12 dropped        1 when --drop kept the notification from being
 *		                   delivered at all, else 0
 *		 13 notification id
 *		 14 merchant       WeChat mchid, Alipay seller_id, "-" for Stripe
 *		 15 app            WeChat appid, Alipay app_id, "-" for Stripe
 *		 16 payer          WeChat openid, Alipay buyer_id, Stripe latest_charge
 *		Lines starting with '#' and empty lines are skipped by the reader.
 */
#include "send.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "send_sales.h"

#define SALE_FIELDS 16

static const char *const gw_names[] = {"wxpay", "alipay", "stripe"};
static const char *const ev_names[] = {"pay", "refund"};

/*
 * Whether --drop loses the notification of this order: a pure function of
 * the seed, the gateway, the event and the order index, so a run with the
 * same --seed drops the same notifications, whatever the mode or threads.
 */
bool
pn_is_dropped(const struct pn_conf *c, double drop, long long order_index)
{
	struct pn_rng r;
	double		u;

	if (drop <= 0)
		return false;
	if (drop >= 1)
		return true;
	pn_rng_seed(&r, c->seed, 0x64726f70, (uint64_t) c->gateway, (uint64_t) c->event,
				(uint64_t) order_index);
	u = (double) (pn_rng_next(&r) >> 11) / 9007199254740992.0;
	return u < drop;
}

void
pn_sale_line(const struct pn_sale *s, struct pn_buf *out)
{
	pn_buf_printf(out, "%s\t%s\t%s\t%s\t%s\t%lld\t%s\t%s\t%s\t%lld\t%lld\t%d\t%s\t%s\t%s\t%s\n",
				  gw_names[s->gateway], s->channel, ev_names[s->event], s->order_no,
				  s->trade_no, s->amount, s->currency, s->refund_id, s->out_refund_no,
				  s->refund_amount, s->time, s->dropped ? 1 : 0, s->notify_id,
				  s->merchant, s->app, s->payer);
}

static bool
copy_field(char *dst, size_t dstsz, const char *src)
{
	size_t		n = strlen(src);

	if (n == 0 || n >= dstsz)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* Parses one line (modified in place): 0, or -1 when it is not a sale. */
int
pn_sale_parse(char *line, struct pn_sale *out)
{
	char	   *f[SALE_FIELDS];
	int			n = 0;
	char	   *p = line;
	long long	v;

	memset(out, 0, sizeof(*out));
	line[strcspn(line, "\r\n")] = '\0';
	for (;;)
	{
		char	   *tab = strchr(p, '\t');

		if (n == SALE_FIELDS)
			return -1;
		f[n++] = p;
		if (!tab)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	if (n != SALE_FIELDS)
		return -1;
	if (strcmp(f[0], "wxpay") == 0)
		out->gateway = PN_WXPAY;
	else if (strcmp(f[0], "alipay") == 0)
		out->gateway = PN_ALIPAY;
	else if (strcmp(f[0], "stripe") == 0)
		out->gateway = PN_STRIPE;
	else
		return -1;
	if (strcmp(f[2], "pay") == 0)
		out->event = PN_EV_PAY;
	else if (strcmp(f[2], "refund") == 0)
		out->event = PN_EV_REFUND;
	else
		return -1;
	if (!copy_field(out->channel, sizeof(out->channel), f[1]) ||
		!copy_field(out->order_no, sizeof(out->order_no), f[3]) ||
		!copy_field(out->trade_no, sizeof(out->trade_no), f[4]) ||
		!copy_field(out->currency, sizeof(out->currency), f[6]) ||
		!copy_field(out->refund_id, sizeof(out->refund_id), f[7]) ||
		!copy_field(out->out_refund_no, sizeof(out->out_refund_no), f[8]) ||
		!copy_field(out->notify_id, sizeof(out->notify_id), f[12]) ||
		!copy_field(out->merchant, sizeof(out->merchant), f[13]) ||
		!copy_field(out->app, sizeof(out->app), f[14]) ||
		!copy_field(out->payer, sizeof(out->payer), f[15]))
		return -1;
	if (!pn_parse_ll(f[5], 0, 100000000000LL, &out->amount) ||
		!pn_parse_ll(f[9], 0, 100000000000LL, &out->refund_amount) ||
		!pn_parse_ll(f[10], 0, 253402300799LL, &out->time) ||
		!pn_parse_ll(f[11], 0, 1, &v))
		return -1;
	out->dropped = v == 1;
	return 0;
}

/* ------------------------------------------------------------ the reader */

void
pn_sales_init(struct pn_sales *s, const char *files)
{
	char	   *copy = pn_xstrdup(files),
			   *save = NULL;

	memset(s, 0, sizeof(*s));
	for (char *t = strtok_r(copy, ",", &save); t && s->n_files < PN_MAX_SALES_FILES;
		 t = strtok_r(NULL, ",", &save))
		if (*t)
			s->file[s->n_files++] = pn_xstrdup(t);
	free(copy);
}

void
pn_sales_free(struct pn_sales *s)
{
	for (int i = 0; i < s->n_files; i++)
		free(s->file[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int
load_file(struct pn_sales *s, const char *path)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;

	if (!f)
		return errno == ENOENT ? 0 : -1;	/* nothing sold there yet */
	while ((len = getline(&line, &cap, f)) >= 0)
	{
		struct pn_sale sale;

		if (len == 0 || line[0] == '#' || line[0] == '\n')
			continue;
		if (pn_sale_parse(line, &sale) != 0)
		{
			s->bad_lines++;
			continue;
		}
		if (s->n == s->cap)
		{
			s->cap = s->cap ? 2 * s->cap : 256;
			s->v = pn_xrealloc(s->v, s->cap * sizeof(struct pn_sale));
		}
		s->v[s->n++] = sale;
	}
	free(line);
	fclose(f);
	return 0;
}

/*
 * Reads the files again when any of them changed (size, modification time
 * or inode) since the last read: 0, or -1 when one cannot be read.
 */
int
pn_sales_refresh(struct pn_sales *s)
{
	bool		changed = !s->loaded;

	for (int i = 0; i < s->n_files; i++)
	{
		struct stat st;
		long long	sig[3] = {-1, -1, -1};

		if (stat(s->file[i], &st) == 0)
		{
			sig[0] = (long long) st.st_size;
			sig[1] = (long long) st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
			sig[2] = (long long) st.st_ino;
		}
		if (memcmp(sig, s->sig[i], sizeof(sig)) != 0)
		{
			memcpy(s->sig[i], sig, sizeof(sig));
			changed = true;
		}
	}
	if (!changed)
		return 0;
	s->n = 0;
	s->bad_lines = 0;
	s->loaded = true;
	for (int i = 0; i < s->n_files; i++)
		if (load_file(s, s->file[i]) != 0)
		{
			pn_log("cannot read the sales file \"%s\": %s", s->file[i], strerror(errno));
			s->loaded = false;
			return -1;
		}
	return 0;
}
