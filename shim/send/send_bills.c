/*
 * send_bills.c
 *		The daily bills of --mode serve, from the sales record, laid out as
 *		the gateways lay them out:
 *
 *		WeChat Pay trade bill (bill_type ALL): UTF-8 with a BOM, CRLF, the
 *		27-column detail header, one row per payment (its success time)
 *		and per refund (its time), every field prefixed with a backtick,
 *		yuan with 2 decimals and the fee (0.6 %, rounded to the fen;
 *		negative on refunds) with 5, then the 7-column summary.
 *
 *		Alipay trade bill: a zip (written here with zlib, entry names in
 *		GBK without the UTF-8 flag) of two GBK CSVs with CRLF:
 *		<pid>0156_<yyyymmdd>_业务明细.csv (the '#' header lines, the
 *		25-column rows with their TAB padding, trades then refunds in time
 *		order, negative refund amounts, service fee -0.6 % on trades and
 *		+0.6 % on refunds, the totals lines) and _业务明细(汇总).csv (the
 *		合计 row).
 *
 *		Days are Beijing days (UTC+8) for both; Stripe's balance
 *		transactions are JSON and built in send_serve.c.
 */
#include "send_serve.h"

#include <iconv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#define BJ_OFFSET	(8 * 3600)
#define ALI_SUBJECT "paynotify 测试商品 A+B 100%"
#define WX_PRODUCT	"paynotify 测试商品"

/* "2026-03-14" -> the unix time of its first second in that zone. */
bool
pn_parse_day(const char *s, int utc_offset_s, long long *day_start)
{
	struct tm	tm;
	int			y,
				m,
				d;
	char		tail;

	if (!s || strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%c", &y, &m, &d, &tail) != 3 ||
		s[4] != '-' || s[7] != '-' || y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
		return false;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = m - 1;
	tm.tm_mday = d;
	*day_start = (long long) timegm(&tm) - utc_offset_s;
	/* 2026-02-30 normalises to March: not a date */
	{
		time_t		t = (time_t) (*day_start + utc_offset_s);
		struct tm	back;

		gmtime_r(&t, &back);
		if (back.tm_mday != d || back.tm_mon != m - 1)
			return false;
	}
	return true;
}

/* Minor units as yuan, "-10.00" for negative amounts. */
static void
yuan(long long minor, char *out, size_t outsz)
{
	long long	a = minor < 0 ? -minor : minor;

	snprintf(out, outsz, "%s%lld.%02lld", minor < 0 ? "-" : "", a / 100, a % 100);
}

/* 0.6 %, rounded half up to the fen: the fee the simulator charges. */
static long long
fee_of(long long minor)
{
	return (minor * 6 + 500) / 1000;
}

/* One row of a bill: a sale of the day. */
struct row
{
	const struct pn_sale *s;
	long long	time;
	size_t		seq;			/* position in the record, for a stable order */
};

static int
row_cmp(const void *a, const void *b)
{
	const struct row *x = a,
			   *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A sale recorded again (the same notification sold twice): the first counts. */
static bool
seen_before(const struct pn_sales *sales, size_t i)
{
	const struct pn_sale *s = &sales->v[i];

	for (size_t k = 0; k < i; k++)
	{
		const struct pn_sale *t = &sales->v[k];

		if (t->gateway == s->gateway && t->event == s->event &&
			strcmp(t->order_no, s->order_no) == 0 && strcmp(t->merchant, s->merchant) == 0 &&
			strcmp(t->refund_id, s->refund_id) == 0)
			return true;
	}
	return false;
}

/* The day's sales of gateway gw for the merchant, in time order; caller frees. */
static struct row *
day_rows(const struct pn_bill_day *d, enum pn_gateway gw, size_t *n)
{
	struct row *rows = pn_xcalloc(d->sales->n ? d->sales->n : 1, sizeof(struct row));

	*n = 0;
	for (size_t i = 0; i < d->sales->n; i++)
	{
		const struct pn_sale *s = &d->sales->v[i];

		if (s->gateway != gw || strcmp(s->merchant, d->merchant) != 0 ||
			s->time < d->day_start || s->time >= d->day_start + 86400 || seen_before(d->sales, i))
			continue;
		rows[*n].s = s;
		rows[*n].time = s->time;
		rows[*n].seq = i;
		(*n)++;
	}
	qsort(rows, *n, sizeof(struct row), row_cmp);
	return rows;
}

size_t
pn_bill_rows(const struct pn_bill_day *d, enum pn_gateway gw)
{
	size_t		n;

	free(day_rows(d, gw, &n));
	return n;
}

/* --------------------------------------------------------------- WeChat */

static void
wx_fee5(long long fee, struct pn_buf *b)
{
	char		y[40];

	yuan(fee, y, sizeof(y));
	pn_buf_printf(b, "`%s000", y);
}

/* The WeChat Pay ALL trade bill of the day, as the download serves it. */
void
pn_bill_wechat(const struct pn_bill_day *d, struct pn_buf *csv)
{
	size_t		n;
	struct row *rows = day_rows(d, PN_WXPAY, &n);
	long long	settle = 0,
				refunds = 0,
				fees = 0,
				orders = 0,
				asked = 0;
	char		t[32],
				a[40],
				r[40];

	pn_buf_puts(csv, "\xEF\xBB\xBF");
	pn_buf_puts(csv, "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,"
				"用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,"
				"微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,"
				"商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\r\n");
	for (size_t i = 0; i < n; i++)
	{
		const struct pn_sale *s = rows[i].s;
		bool		pay = s->event == PN_EV_PAY;
		long long	fee = pay ? fee_of(s->amount) : -fee_of(s->refund_amount);

		pn_fmt_beijing((time_t) rows[i].time, "%Y-%m-%d %H:%M:%S", t, sizeof(t));
		yuan(s->amount, a, sizeof(a));
		yuan(s->refund_amount, r, sizeof(r));
		pn_buf_printf(csv, "`%s,`%s,`%s,`0,`,`%s,`%s,`%s,`JSAPI,`%s,`OTHERS,`%s,",
					  t, s->app, s->merchant, s->trade_no, s->order_no, s->payer,
					  pay ? "SUCCESS" : "REFUND", s->currency);
		if (pay)
			pn_buf_printf(csv, "`%s,`0.00,`0,`0,`0.00,`0.00,`,`,", a);
		else
			pn_buf_printf(csv, "`0.00,`0.00,`%s,`%s,`%s,`0.00,`ORIGINAL,`SUCCESS,",
						  s->refund_id, s->out_refund_no, r);
		pn_buf_printf(csv, "`%s,`,", WX_PRODUCT);
		wx_fee5(fee, csv);
		pn_buf_printf(csv, ",`0.60%%,`%s,`%s,`\r\n", pay ? a : "0.00", pay ? "0.00" : r);
		settle += pay ? s->amount : 0;
		orders += pay ? s->amount : 0;
		refunds += pay ? 0 : s->refund_amount;
		asked += pay ? 0 : s->refund_amount;
		fees += fee;
	}
	pn_buf_puts(csv, "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,"
				"订单总金额,申请退款总金额\r\n");
	yuan(settle, a, sizeof(a));
	yuan(refunds, r, sizeof(r));
	pn_buf_printf(csv, "`%zu,`%s,`%s,`0.00,", n, a, r);
	wx_fee5(fees, csv);
	yuan(orders, a, sizeof(a));
	yuan(asked, r, sizeof(r));
	pn_buf_printf(csv, ",`%s,`%s\r\n", a, r);
	free(rows);
}

/* --------------------------------------------------------------- Alipay */

/* The masked account Alipay shows for a buyer: 138****NNNN. */
static void
ali_logon(const char *buyer_id, char *out, size_t outsz)
{
	size_t		n = strlen(buyer_id);

	snprintf(out, outsz, "138****%s", n >= 4 ? buyer_id + n - 4 : "0000");
}

/* The payment of an order, for a refund row's creation time. */
static const struct pn_sale *
pay_of(const struct pn_sales *sales, const struct pn_sale *refund)
{
	for (size_t i = 0; i < sales->n; i++)
	{
		const struct pn_sale *s = &sales->v[i];

		if (s->gateway == refund->gateway && s->event == PN_EV_PAY &&
			strcmp(s->order_no, refund->order_no) == 0 &&
			strcmp(s->merchant, refund->merchant) == 0)
			return s;
	}
	return NULL;
}

static void
ali_head(const struct pn_bill_day *d, const char *title, const char *marker, struct pn_buf *b)
{
	char		from[48],
				to[48];

	pn_fmt_beijing((time_t) d->day_start, "%Y年%m月%d日 %H:%M:%S", from, sizeof(from));
	pn_fmt_beijing((time_t) d->day_start + 86400, "%Y年%m月%d日 %H:%M:%S", to, sizeof(to));
	pn_buf_printf(b, "#%s\r\n#账号：[%s0156]\r\n#起始日期：[%s]   终止日期：[%s]\r\n",
				  title, d->merchant, from, to);
	pn_buf_printf(b, "#-----------------------------------------%s----------------------------------------\r\n",
				  marker);
}

static void
ali_export_time(const struct pn_bill_day *d, struct pn_buf *b)
{
	char		t[48];

	pn_fmt_beijing(d->now, "%Y年%m月%d日 %H:%M:%S", t, sizeof(t));
	pn_buf_printf(b, "#导出时间：[%s]\r\n", t);
}

/* The two CSVs, in UTF-8 (converted to GBK by the caller). */
static void
ali_csvs(const struct pn_bill_day *d, struct pn_buf *detail, struct pn_buf *summary)
{
	size_t		n;
	struct row *rows = day_rows(d, PN_ALIPAY, &n);
	long long	trade_sum = 0,
				refund_sum = 0,
				fee_sum = 0;
	size_t		trades = 0,
				refunds = 0;
	char		a[40],
				f[40],
				t1[32],
				t2[32],
				logon[32];

	ali_head(d, "支付宝业务明细查询", "业务明细列表", detail);
	pn_buf_puts(detail, "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,"
				"门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,"
				"集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,"
				"商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,"
				"备注\r\n");
	for (size_t i = 0; i < n; i++)
	{
		const struct pn_sale *s = rows[i].s;
		bool		pay = s->event == PN_EV_PAY;
		const struct pn_sale *p = pay ? s : pay_of(d->sales, s);
		long long	amount = pay ? s->amount : -s->refund_amount;
		long long	fee = pay ? -fee_of(s->amount) : fee_of(s->refund_amount);

		pn_fmt_beijing((time_t) ((p ? p->time : s->time) - 5), "%Y-%m-%d %H:%M:%S", t1, sizeof(t1));
		pn_fmt_beijing((time_t) s->time, "%Y-%m-%d %H:%M:%S", t2, sizeof(t2));
		yuan(amount, a, sizeof(a));
		yuan(fee, f, sizeof(f));
		ali_logon(s->payer, logon, sizeof(logon));
		pn_buf_printf(detail, "%s\t,%s\t,%s\t,%s,%s,%s,\t,\t,\t,\t,*试(%s)\t,%s,%s,"
					  "0.00,0.00,0.00,0.00,0.00,,0.00\t,0.00,%s\t,%s,0.00,\r\n",
					  s->trade_no, s->order_no, pay ? "交易" : "退款", ALI_SUBJECT, t1, t2,
					  logon, a, a, pay ? "" : s->out_refund_no, f);
		if (pay)
		{
			trades++;
			trade_sum += amount;
		}
		else
		{
			refunds++;
			refund_sum += amount;
		}
		fee_sum += fee;
	}
	pn_buf_puts(detail, "#-----------------------------------------业务明细列表结束------------------------------------\r\n");
	yuan(trade_sum, a, sizeof(a));
	pn_buf_printf(detail, "#交易合计：%zu笔，商家实收共%s元，商家优惠共0.00元\r\n", trades, a);
	yuan(refund_sum, a, sizeof(a));
	pn_buf_printf(detail, "#退款合计：%zu笔，商家实收退款共%s元，商家优惠退款共0.00元\r\n", refunds, a);
	ali_export_time(d, detail);

	ali_head(d, "支付宝业务汇总查询", "业务汇总列表", summary);
	pn_buf_puts(summary, "门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,"
				"商家实收（元）,支付宝优惠（元）,商家优惠（元）,卡消费金额（元）,服务费（元）,"
				"分润（元）,实收净额（元）\r\n");
	yuan(trade_sum + refund_sum, a, sizeof(a));
	yuan(fee_sum, f, sizeof(f));
	{
		char		net[40];

		yuan(trade_sum + refund_sum + fee_sum, net, sizeof(net));
		pn_buf_printf(summary, "合计,,%zu,%zu,%s,%s,0.00,0.00,0.00,%s,0.00,%s\r\n",
					  trades, refunds, a, a, f, net);
	}
	pn_buf_puts(summary, "#----------------------------------------业务汇总列表结束-------------------------------------\r\n");
	ali_export_time(d, summary);
	free(rows);
}

/* UTF-8 to GBK; -1 when a character has no GBK form. */
static int
to_gbk(const struct pn_buf *in, struct pn_buf *out)
{
	iconv_t		cd = iconv_open("GBK", "UTF-8");
	char	   *src = in->data;
	size_t		inleft = in->len,
				cap = 2 * in->len + 16,
				outleft = cap;
	char	   *dst,
			   *o;
	int			rc = 0;

	if (cd == (iconv_t) -1)
		return -1;
	dst = o = pn_xmalloc(cap);
	if (iconv(cd, &src, &inleft, &o, &outleft) == (size_t) -1)
		rc = -1;
	else
		pn_buf_put(out, dst, cap - outleft);
	free(dst);
	iconv_close(cd);
	return rc;
}

static int
gbk_name(const char *utf8, struct pn_buf *out)
{
	struct pn_buf in;
	int			rc;

	pn_buf_init(&in);
	pn_buf_puts(&in, utf8);
	rc = to_gbk(&in, out);
	pn_buf_free(&in);
	return rc;
}

/* raw deflate (zip method 8), or gzip when gz */
static int
deflate_buf(const void *p, size_t n, bool gz, struct pn_buf *out)
{
	z_stream	z;
	unsigned char chunk[16384];
	int			rc;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, gz ? 15 + 16 : -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	z.next_in = (unsigned char *) p;
	z.avail_in = (uInt) n;
	do
	{
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		rc = deflate(&z, Z_FINISH);
		if (rc == Z_STREAM_ERROR)
		{
			deflateEnd(&z);
			return -1;
		}
		pn_buf_put(out, chunk, sizeof(chunk) - z.avail_out);
	} while (rc != Z_STREAM_END);
	deflateEnd(&z);
	return 0;
}

int
pn_gzip(const void *p, size_t n, struct pn_buf *out)
{
	return deflate_buf(p, n, true, out);
}

static void
put16(struct pn_buf *b, unsigned v)
{
	unsigned char x[2] = {(unsigned char) v, (unsigned char) (v >> 8)};

	pn_buf_put(b, x, 2);
}

static void
put32(struct pn_buf *b, unsigned long v)
{
	unsigned char x[4] = {(unsigned char) v, (unsigned char) (v >> 8),
	(unsigned char) (v >> 16), (unsigned char) (v >> 24)};

	pn_buf_put(b, x, 4);
}

struct zent
{
	struct pn_buf name;
	struct pn_buf data;			/* deflated */
	unsigned long crc;
	size_t		size;
	size_t		offset;
};

/* Local header + data of one entry, its central record kept in e. */
static int
zip_add(struct pn_buf *zip, struct zent *e, const struct pn_buf *content,
		unsigned dos_time, unsigned dos_date)
{
	if (deflate_buf(content->data, content->len, false, &e->data) != 0)
		return -1;
	e->crc = crc32(0L, (const Bytef *) content->data, (uInt) content->len);
	e->size = content->len;
	e->offset = zip->len;
	put32(zip, 0x04034b50);
	put16(zip, 20);				/* version needed */
	put16(zip, 0);				/* flags: no UTF-8 bit, sizes known */
	put16(zip, 8);				/* deflate */
	put16(zip, dos_time);
	put16(zip, dos_date);
	put32(zip, e->crc);
	put32(zip, (unsigned long) e->data.len);
	put32(zip, (unsigned long) e->size);
	put16(zip, (unsigned) e->name.len);
	put16(zip, 0);
	pn_buf_put(zip, e->name.data, e->name.len);
	pn_buf_put(zip, e->data.data, e->data.len);
	return 0;
}

static void
zip_central(struct pn_buf *zip, const struct zent *e, unsigned dos_time, unsigned dos_date)
{
	put32(zip, 0x02014b50);
	put16(zip, (3 << 8) | 20);	/* made by: Unix, 2.0 */
	put16(zip, 20);
	put16(zip, 0);
	put16(zip, 8);
	put16(zip, dos_time);
	put16(zip, dos_date);
	put32(zip, e->crc);
	put32(zip, (unsigned long) e->data.len);
	put32(zip, (unsigned long) e->size);
	put16(zip, (unsigned) e->name.len);
	put16(zip, 0);				/* extra */
	put16(zip, 0);				/* comment */
	put16(zip, 0);				/* disk */
	put16(zip, 0);				/* internal attributes */
	put32(zip, 0100600UL << 16);	/* regular file, 0600 */
	put32(zip, (unsigned long) e->offset);
	pn_buf_put(zip, e->name.data, e->name.len);
}

/* The Alipay bill archive of the day: 0, or -1 when it cannot be made. */
int
pn_bill_alipay_zip(const struct pn_bill_day *d, struct pn_buf *zip)
{
	struct pn_buf detail,
				summary,
				gbk[2];
	struct zent e[2];
	char		day[16],
				name[160];
	struct tm	tm;
	time_t		bj = d->now + BJ_OFFSET;
	unsigned	dos_time,
				dos_date;
	size_t		cd_start;
	int			rc = 0;

	gmtime_r(&bj, &tm);
	dos_time = (unsigned) ((tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2));
	dos_date = (unsigned) (((tm.tm_year - 80) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday);
	pn_fmt_beijing((time_t) d->day_start, "%Y%m%d", day, sizeof(day));
	pn_buf_init(&detail);
	pn_buf_init(&summary);
	memset(e, 0, sizeof(e));
	for (int i = 0; i < 2; i++)
	{
		pn_buf_init(&gbk[i]);
		pn_buf_init(&e[i].name);
		pn_buf_init(&e[i].data);
	}
	ali_csvs(d, &detail, &summary);
	snprintf(name, sizeof(name), "%s0156_%s_业务明细.csv", d->merchant, day);
	rc |= gbk_name(name, &e[0].name);
	snprintf(name, sizeof(name), "%s0156_%s_业务明细(汇总).csv", d->merchant, day);
	rc |= gbk_name(name, &e[1].name);
	rc |= to_gbk(&detail, &gbk[0]);
	rc |= to_gbk(&summary, &gbk[1]);
	for (int i = 0; rc == 0 && i < 2; i++)
		rc = zip_add(zip, &e[i], &gbk[i], dos_time, dos_date);
	if (rc == 0)
	{
		cd_start = zip->len;
		size_t		cd_size;

		for (int i = 0; i < 2; i++)
			zip_central(zip, &e[i], dos_time, dos_date);
		cd_size = zip->len - cd_start;
		put32(zip, 0x06054b50);
		put16(zip, 0);
		put16(zip, 0);
		put16(zip, 2);
		put16(zip, 2);
		put32(zip, (unsigned long) cd_size);
		put32(zip, (unsigned long) cd_start);
		put16(zip, 0);
	}
	pn_buf_free(&detail);
	pn_buf_free(&summary);
	for (int i = 0; i < 2; i++)
	{
		pn_buf_free(&gbk[i]);
		pn_buf_free(&e[i].name);
		pn_buf_free(&e[i].data);
	}
	return rc ? -1 : 0;
}
