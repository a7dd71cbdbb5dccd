/*-------------------------------------------------------------------------
 *
 * bill.c
 *	  The gateways' daily bills (version 1.4): paynotify_bill_parse reads
 *	  the file a gateway gives for a day (WeChat Pay's trade bill, plain or
 *	  gzip; Alipay's zip of GBK CSV files; Stripe's balance transactions as
 *	  CSV or as the API's JSON list) and returns its lines and its own
 *	  summary as rows; paynotify_import_bill (SQL) writes them.
 *
 * The bytes are decompressed with libarchive, bounded (BILL_MAX_BYTES), and
 * every archive handle is freed on every path (PG_FINALLY).  GBK is
 * converted with PostgreSQL's own conversion (GBK is a client-only
 * encoding: pg_do_encoding_conversion runs its conversion proc).  The text
 * itself is read by src/parse/bill.c, which knows no PostgreSQL.
 *
 * Errors: 22P02 for a file that is not what it claims or is cut short,
 * 22023 for the bill of another gateway or kind, 22021 for bytes that are
 * not text in the bill's encoding, 54000 for a file that decompresses past
 * the bound.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <archive.h>
#include <archive_entry.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "paynotify.h"
#include "bill.h"
#include "scan.h"

PG_FUNCTION_INFO_V1(paynotify_bill_parse);

/* Most bytes a bill may decompress to (all of a zip's entries together). */
#define BILL_MAX_BYTES ((size_t) 256 * 1024 * 1024)
/*
 * Most values a Stripe bill's JSON may hold: its 100,000 transactions of
 * forty or more values each, more than a notification's limit (the bytes'
 * limit bounds it anyway)
 */
#define BILL_MAX_JSON_VALUES ((int64) 64 * 1024 * 1024)
/* Most entries a zip may hold. */
#define BILL_MAX_ENTRIES 64

#define NCOLS 12

typedef enum BillFormat
{
	BF_UNKNOWN,
	BF_WXPAY,					/* WeChat Pay trade bill (text) */
	BF_GZIP,					/* gzip: WeChat Pay's tar_type=GZIP */
	BF_ZIP,						/* zip: Alipay's bill */
	BF_STRIPE_CSV,
	BF_STRIPE_JSON
} BillFormat;

/* What the rows are written into, and the bill's own summary. */
typedef struct Bill
{
	ReturnSetInfo *rsinfo;
	MemoryContext linecxt;
	int			line_no;
	const char *format;
	pg_tz	   *tz;				/* NULL: UTC */
	/* the summary, as the file states it (has_* false: it does not) */
	bool		has_day;
	PnBillTime	day;
	char		account[33];	/* Alipay's #账号, digits; "" when none */
	bool		has[6];
	int64		total[6];
} Bill;

enum
{
	S_ROWS, S_PAYMENTS, S_REFUNDS, S_PAID, S_REFUNDED, S_FEES
};
static const char *const summary_key[6] = {
	"row_count", "payment_count", "refund_count", "paid_total", "refund_total", "fee_total"
};

/* One line of a bill, as returned. */
typedef struct BillLine
{
	const char *kind;
	char	   *trade_no;
	char	   *order_no;
	char	   *refund_id;
	int64		amount;
	bool		has_settled;
	int64		settled;
	bool		has_fee;
	int64		fee;
	char	   *currency;
	TimestampTz at;
	char	   *status;
	Jsonb	   *raw;
} BillLine;

static void malformed(const Bill *b, const char *fmt,...) pg_attribute_printf(2, 3) pg_attribute_noreturn();

/* The bill is not what it claims (22P02); the message names the format. */
static void
malformed(const Bill *b, const char *fmt,...)
{
	char		msg[512];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* a message cut at the buffer's end is not cut inside a character */
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("malformed %s bill: %s", b->format, pn_clip_len(msg, strlen(msg), strlen(msg)))));
}

/* A UTF-8 field as a palloc'd string in the database's encoding. */
static char *
field_str(PnBillField f)
{
	char	   *s = pnstrdup(f.s, f.len);
	char	   *conv = pg_any_to_server(s, (int) f.len, PG_UTF8);

	return conv;
}

/* Empty fields (and WeChat's "0" for no refund) are no value. */
static char *
field_or_null(PnBillField f, bool zero_is_null)
{
	if (f.len == 0 || (zero_is_null && f.len == 1 && f.s[0] == '0'))
		return NULL;
	return field_str(f);
}

/* A calendar time of the bill's zone (or UTC) as timestamptz. */
static TimestampTz
bill_timestamp(const Bill *b, const PnBillTime *t)
{
	struct pg_tm tm;
	int			tz = 0;
	TimestampTz ts;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = t->year;
	tm.tm_mon = t->month;
	tm.tm_mday = t->day;
	tm.tm_hour = t->hour;
	tm.tm_min = t->minute;
	tm.tm_sec = t->second;
	if (b->tz != NULL)
		tz = DetermineTimeZoneOffset(&tm, b->tz);
	if (tm2timestamp(&tm, 0, &tz, &ts) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("bill time out of range")));
	return ts;
}

/* Push a string value (NULL: null) under key into an object being built. */
static void
push_pair(JsonbParseState **st, const char *key, size_t klen, const char *val)
{
	JsonbValue	k,
				v;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = (int) klen;
	(void) pushJsonbValue(st, WJB_KEY, &k);
	if (val == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) val;
		v.val.string.len = (int) strlen(val);
	}
	(void) pushJsonbValue(st, WJB_VALUE, &v);
}

/* The line's fields as an object: header name -> value (as the file has it). */
static Jsonb *
raw_object(const PnBillField *names, const PnBillField *vals, int n)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < n; i++)
	{
		char	   *k = field_str(names[i]);

		push_pair(&st, k, strlen(k), field_str(vals[i]));
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

static Datum
text_or_null(const char *s, bool *isnull)
{
	*isnull = (s == NULL);
	return s ? CStringGetTextDatum(s) : (Datum) 0;
}

/* Return one row. */
static void
emit(Bill *b, int line_no, const BillLine *l)
{
	Datum		values[NCOLS];
	bool		nulls[NCOLS];

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int32GetDatum(line_no);
	values[1] = CStringGetTextDatum(l->kind);
	values[2] = text_or_null(l->trade_no, &nulls[2]);
	values[3] = text_or_null(l->order_no, &nulls[3]);
	values[4] = text_or_null(l->refund_id, &nulls[4]);
	values[5] = Int64GetDatum(l->amount);
	values[6] = Int64GetDatum(l->settled);
	nulls[6] = !l->has_settled;
	values[7] = Int64GetDatum(l->fee);
	nulls[7] = !l->has_fee;
	values[8] = text_or_null(l->currency, &nulls[8]);
	values[9] = TimestampTzGetDatum(l->at);
	nulls[9] = (line_no == 0);
	values[10] = text_or_null(l->status, &nulls[10]);
	values[11] = JsonbPGetDatum(l->raw);
	tuplestore_putvalues(b->rsinfo->setResult, b->rsinfo->setDesc, values, nulls);
}

/* A line of the bill: numbered from 1 in the order the file has them. */
static void
emit_line(Bill *b, const BillLine *l)
{
	emit(b, ++b->line_no, l);
}

/* The summary, line 0: what the file states of itself. */
static void
emit_summary(Bill *b)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;
	BillLine	l;

	memset(&l, 0, sizeof(l));
	(void) pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	pn_jsonb_push_text(&st, "format", b->format);
	if (b->has_day)
		pn_jsonb_push_text(&st, "day", psprintf("%04d-%02d-%02d", b->day.year, b->day.month, b->day.day));
	if (b->account[0] != '\0')
		pn_jsonb_push_text(&st, "account", b->account);
	for (int i = 0; i < 6; i++)
		if (b->has[i])
			pn_jsonb_push_int64(&st, summary_key[i], b->total[i]);
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	l.kind = "summary";
	l.raw = JsonbValueToJsonb(res);
	emit(b, 0, &l);
}

/* ---------------------------------------------------------------------
 * Decompression (libarchive)
 * ---------------------------------------------------------------------
 */

/* Append an entry's data to out, within the bound; false on a read error. */
static bool
read_entry(struct archive *a, StringInfo out, size_t *total, const char *what)
{
	char		buf[65536];

	for (;;)
	{
		la_ssize_t	n = archive_read_data(a, buf, sizeof(buf));

		if (n == 0)
			return true;
		if (n < 0)
			return false;
		if (*total + (size_t) n > BILL_MAX_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("%s decompresses to more than %zu MB", what, BILL_MAX_BYTES / (1024 * 1024)),
					 errdetail("A daily bill is read whole, and at most that much.")));
		*total += (size_t) n;
		if (out != NULL)
			appendBinaryStringInfo(out, buf, (int) n);
	}
}

/*
 * The bytes of a gzip stream appended to out: false, and why in *err, when
 * it is no readable gzip (an error when it decompresses to more than
 * BILL_MAX_BYTES).  Shared with the bill fetch (billfetch.c), which hashes
 * the file as the gateway did.
 */
bool
pn_gunzip(const char *data, size_t len, StringInfo out, char **errp)
{
	struct archive *volatile a = archive_read_new();
	char	   *volatile err = NULL;

	if (a == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		struct archive_entry *e;
		size_t		total = 0;

		if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
			archive_read_support_format_raw(a) != ARCHIVE_OK)
			elog(ERROR, "libarchive has no gzip support: %s", archive_error_string(a));
		if (archive_read_open_memory(a, data, len) != ARCHIVE_OK ||
			archive_read_next_header(a, &e) != ARCHIVE_OK ||
			!read_entry(a, out, &total, "the gzip bill"))
			err = pstrdup(archive_error_string(a) ? archive_error_string(a) : "unreadable");
	}
	PG_FINALLY();
	{
		archive_read_free(a);
	}
	PG_END_TRY();
	*errp = err;
	return err == NULL;
}

/* The bytes of a gzip stream. */
static void
gunzip(const Bill *b, const char *data, size_t len, StringInfo out)
{
	char	   *err;

	if (!pn_gunzip(data, len, out, &err))
		malformed(b, "truncated or corrupt gzip (%s)", err);
}

/* Whether name (len bytes) ends with suffix (slen bytes). */
static bool
ends_with(const char *name, size_t len, const char *suffix, size_t slen)
{
	return slen > 0 && len >= slen && memcmp(name + len - slen, suffix, slen) == 0;
}

/*
 * Alipay's zip: the detail file (name ending "_业务明细.csv") and, if there
 * is one, its summary ("_业务明细(汇总).csv"), their bytes as stored (GBK).
 * Entry names are GBK without the zip's UTF-8 flag, or UTF-8: both spellings
 * of the suffixes are looked for (the GBK one made by PostgreSQL's
 * conversion).  Other entries are skipped unread.
 */
static void
unzip(const Bill *b, const char *data, size_t len, StringInfo detail, StringInfo summary)
{
	static const char *const dsuf = "_业务明细.csv";
	static const char *const ssuf = "_业务明细(汇总).csv";
	const char *dsuf_gbk = (const char *) pg_do_encoding_conversion((unsigned char *) dsuf, strlen(dsuf), PG_UTF8, PG_GBK);
	const char *ssuf_gbk = (const char *) pg_do_encoding_conversion((unsigned char *) ssuf, strlen(ssuf), PG_UTF8, PG_GBK);
	struct archive *volatile a = archive_read_new();
	char	   *volatile err = NULL;
	volatile int ndetail = 0;
	volatile int nsummary = 0;

	if (a == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		struct archive_entry *e;
		size_t		total = 0;
		int			entries = 0;
		int			r;

		if (archive_read_support_format_zip(a) != ARCHIVE_OK)
			elog(ERROR, "libarchive has no zip support: %s", archive_error_string(a));
		if (archive_read_open_memory(a, data, len) != ARCHIVE_OK)
			err = pstrdup(archive_error_string(a) ? archive_error_string(a) : "unreadable");
		while (err == NULL && (r = archive_read_next_header(a, &e)) != ARCHIVE_EOF)
		{
			const char *name;
			size_t		nlen;
			StringInfo	into = NULL;

			if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
			{
				err = pstrdup(archive_error_string(a) ? archive_error_string(a) : "unreadable");
				break;
			}
			if (++entries > BILL_MAX_ENTRIES)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the zip bill holds more than %d files", BILL_MAX_ENTRIES)));
			name = archive_entry_pathname(e);
			if (name == NULL)
				name = archive_entry_pathname_utf8(e);
			nlen = name ? strlen(name) : 0;
			if (name != NULL && archive_entry_filetype(e) == AE_IFREG)
			{
				if (ends_with(name, nlen, dsuf_gbk, strlen(dsuf_gbk)) ||
					ends_with(name, nlen, dsuf, strlen(dsuf)))
				{
					ndetail++;
					into = detail;
				}
				else if (ends_with(name, nlen, ssuf_gbk, strlen(ssuf_gbk)) ||
						 ends_with(name, nlen, ssuf, strlen(ssuf)))
				{
					nsummary++;
					into = summary;
				}
			}
			if (into == NULL)
				continue;		/* the next header skips its data */
			if (ndetail > 1 || nsummary > 1)
				break;
			if (!read_entry(a, into, &total, "the zip bill"))
				err = pstrdup(archive_error_string(a) ? archive_error_string(a) : "unreadable");
		}
	}
	PG_FINALLY();
	{
		archive_read_free(a);
	}
	PG_END_TRY();
	if (err != NULL)
		malformed(b, "truncated or corrupt zip (%s)", err);
	if (ndetail > 1 || nsummary > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the zip bill holds several %s files", ndetail > 1 ? "detail (业务明细)" : "summary (业务明细(汇总))"),
				 errdetail("A bill is one account's day: which of them is meant is not known.")));
	if (ndetail == 0)
		malformed(b, "the zip holds no detail file (a name ending in \"%s\")", dsuf);
}

/* ---------------------------------------------------------------------
 * Columns by header name
 * ---------------------------------------------------------------------
 */

/* The index of the column called name (first match), or -1. */
static int
column(const PnBillField *hdr, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (pn_bill_is(hdr[i], name))
			return i;
	return -1;
}

/* The index of the first of several names present, or -1. */
static int
column_any(const PnBillField *hdr, int n, const char *const *names, int nnames)
{
	for (int j = 0; j < nnames; j++)
	{
		int			i = column(hdr, n, names[j]);

		if (i >= 0)
			return i;
	}
	return -1;
}

static int
need_column(const Bill *b, const PnBillField *hdr, int n, const char *name)
{
	int			i = column(hdr, n, name);

	if (i < 0)
		malformed(b, "the header has no column \"%s\"", name);
	return i;
}

/* An amount field (scale 2, up to maxscale decimals). */
static int64
amount_of(const Bill *b, size_t line, PnBillField f, const char *name, int maxscale)
{
	int64_t		v;

	if (!pn_bill_amount(f.s, f.len, 2, maxscale, &v))
		malformed(b, "line %zu: %s \"%s\" is not an amount", line, name,
				  pn_clip_len(f.s, (int) Min(f.len, 1024), 40));
	return (int64) v;
}

static TimestampTz
time_of(const Bill *b, size_t line, PnBillField f, const char *name, bool seconds_optional)
{
	PnBillTime	t;

	if (!pn_bill_time(f.s, f.len, seconds_optional, &t))
		malformed(b, "line %zu: %s \"%s\" is not a time", line, name,
				  pn_clip_len(f.s, (int) Min(f.len, 1024), 40));
	return bill_timestamp(b, &t);
}

/* ---------------------------------------------------------------------
 * WeChat Pay: the trade bill
 * ---------------------------------------------------------------------
 */

static void
parse_wxpay(Bill *b, const char *text, size_t len)
{
	static const char *const amount_names[] = {"订单金额", "应结订单金额", "总金额"};
	static const char *const settled_names[] = {"应结订单金额", "总金额"};
	PnBillCursor c;
	const char *line;
	size_t		llen;
	PnBillField hdr[PN_BILL_MAX_FIELDS];
	PnBillField f[PN_BILL_MAX_FIELDS];
	int			nh = -1;
	int			c_time, c_trade, c_order, c_state, c_cur, c_amount, c_settled,
				c_refund_id, c_refund, c_refund_status, c_fee;
	bool		summary_seen = false;
	MemoryContext old;

	if (!pg_verify_mbstr(PG_UTF8, text, (int) len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("malformed %s bill: not UTF-8 text", b->format)));
	pn_bill_start(&c, text, len);
	while (pn_bill_next_line(&c, &line, &llen) && pn_bill_blank(line, llen))
		;
	if (c.line_no == 0 || pn_bill_blank(line, llen))
		malformed(b, "empty");
	nh = pn_bill_split_plain(line, llen, hdr, PN_BILL_MAX_FIELDS);
	if (nh < 0)
		malformed(b, "the header has more than %d columns", PN_BILL_MAX_FIELDS);
	c_time = need_column(b, hdr, nh, "交易时间");
	c_trade = need_column(b, hdr, nh, "微信订单号");
	c_order = need_column(b, hdr, nh, "商户订单号");
	c_state = need_column(b, hdr, nh, "交易状态");
	c_cur = need_column(b, hdr, nh, "货币种类");
	c_fee = need_column(b, hdr, nh, "手续费");
	c_amount = column_any(hdr, nh, amount_names, lengthof(amount_names));
	c_settled = column_any(hdr, nh, settled_names, lengthof(settled_names));
	if (c_amount < 0 || c_settled < 0)
		malformed(b, "the header has no column \"应结订单金额\"");
	/* a SUCCESS bill has no refund columns */
	c_refund_id = column(hdr, nh, "微信退款单号");
	c_refund = column(hdr, nh, "退款金额");
	c_refund_status = column(hdr, nh, "退款状态");

	while (pn_bill_next_line(&c, &line, &llen))
	{
		BillLine	l;
		int			n;
		bool		refund;
		PnBillField state;

		if (pn_bill_blank(line, llen))
			continue;
		if (summary_seen)
			malformed(b, "line %zu follows the summary", c.line_no);
		if (line[0] != '`')
		{
			/* the summary: its header and one row */
			PnBillField sh[PN_BILL_MAX_FIELDS];
			int			ns = pn_bill_split_plain(line, llen, sh, PN_BILL_MAX_FIELDS);
			int			s_rows, s_paid, s_refund, s_fee;

			if (ns < 0 || column(sh, ns, "总交易单数") < 0)
				malformed(b, "line %zu is neither a data row nor the summary header", c.line_no);
			while (pn_bill_next_line(&c, &line, &llen) && pn_bill_blank(line, llen))
				;
			n = pn_bill_blank(line, llen) ? -2 : pn_bill_split_backtick(line, llen, f, PN_BILL_MAX_FIELDS);
			if (n != ns)
				malformed(b, "the summary header is not followed by its row of %d fields", ns);
			s_rows = column(sh, ns, "总交易单数");
			s_paid = column(sh, ns, "应结订单总金额");
			if (s_paid < 0)
				s_paid = column(sh, ns, "总金额");
			s_refund = column(sh, ns, "退款总金额");
			s_fee = column(sh, ns, "手续费总金额");
			{
				int64_t		v;

				if (!pn_bill_int(f[s_rows].s, f[s_rows].len, &v) || v < 0)
					malformed(b, "line %zu: 总交易单数 is not a count", c.line_no);
				b->has[S_ROWS] = true;
				b->total[S_ROWS] = v;
			}
			if (s_paid >= 0)
			{
				b->has[S_PAID] = true;
				b->total[S_PAID] = amount_of(b, c.line_no, f[s_paid], "应结订单总金额", 2);
			}
			if (s_refund >= 0)
			{
				b->has[S_REFUNDED] = true;
				b->total[S_REFUNDED] = amount_of(b, c.line_no, f[s_refund], "退款总金额", 2);
			}
			if (s_fee >= 0)
			{
				b->has[S_FEES] = true;
				b->total[S_FEES] = amount_of(b, c.line_no, f[s_fee], "手续费总金额", 6);
			}
			summary_seen = true;
			continue;
		}
		n = pn_bill_split_backtick(line, llen, f, PN_BILL_MAX_FIELDS);
		if (n != nh)
			malformed(b, "line %zu has %d fields, the header %d", c.line_no, n < 0 ? PN_BILL_MAX_FIELDS + 1 : n, nh);
		old = MemoryContextSwitchTo(b->linecxt);
		memset(&l, 0, sizeof(l));
		state = f[c_state];
		refund = pn_bill_is(state, "REFUND");
		l.kind = pn_bill_is(state, "SUCCESS") ? "payment" :
			refund ? "refund" :
			pn_bill_is(state, "REVOKED") ? "revoked" : "other";
		l.at = time_of(b, c.line_no, f[c_time], "交易时间", false);
		l.trade_no = field_or_null(f[c_trade], false);
		l.order_no = field_or_null(f[c_order], false);
		l.currency = field_or_null(f[c_cur], false);
		l.has_fee = true;
		l.fee = amount_of(b, c.line_no, f[c_fee], "手续费", 6);
		l.has_settled = true;
		if (refund)
		{
			if (c_refund < 0 || c_refund_id < 0)
				malformed(b, "line %zu is a refund, and the header has no refund columns", c.line_no);
			l.refund_id = field_or_null(f[c_refund_id], true);
			l.amount = l.settled = amount_of(b, c.line_no, f[c_refund], "退款金额", 2);
			l.status = c_refund_status >= 0 ? field_or_null(f[c_refund_status], false) : NULL;
		}
		else
		{
			l.amount = amount_of(b, c.line_no, f[c_amount], "订单金额", 2);
			l.settled = amount_of(b, c.line_no, f[c_settled], "应结订单金额", 2);
			l.status = field_or_null(state, false);
		}
		l.raw = raw_object(hdr, f, n);
		emit_line(b, &l);
		MemoryContextSwitchTo(old);
		MemoryContextReset(b->linecxt);
	}
	if (!summary_seen)
		malformed(b, "no summary (总交易单数) after the rows: the file is cut short");
}

/* ---------------------------------------------------------------------
 * Alipay: the zip's detail file and its summary
 * ---------------------------------------------------------------------
 */


/* GBK converted a chunk at a time: at most this many bytes, then to a line's end */
#define GBK_CHUNK (1024 * 1024)

/*
 * The GBK text in, as UTF-8, NUL-terminated.  PostgreSQL's conversion
 * takes room for four times its input at once (a 256 MB detail file:
 * 1 GB): here it converts a chunk of whole lines at a time, and the
 * result grows with what it holds.  A chunk ends after a line feed,
 * which is never a GBK character's second byte (0x40 to 0xFE); a line
 * longer than a chunk is converted whole.
 */
static char *
gbk_to_utf8(StringInfo in)
{
	StringInfoData out;
	int			off = 0;

	initStringInfo(&out);
	while (off < in->len)
	{
		int			n = Min(in->len - off, GBK_CHUNK);
		char	   *conv;

		if (off + n < in->len)
		{
			int			k = n;

			while (k > 0 && in->data[off + k - 1] != '\n')
				k--;
			if (k > 0)
				n = k;
			else
			{
				const char *nl = memchr(in->data + off + n, '\n', in->len - off - n);

				n = nl != NULL ? (int) (nl - (in->data + off)) + 1 : in->len - off;
			}
		}
		conv = (char *) pg_do_encoding_conversion((unsigned char *) in->data + off, n, PG_GBK, PG_UTF8);
		appendStringInfoString(&out, conv);
		if (conv != in->data + off)
			pfree(conv);
		off += n;
	}
	return out.data;
}

/* The 合计 row's 服务费 of the summary file, as a fee (positive: charged). */
static void
parse_alipay_summary(Bill *b, const char *text, size_t len)
{
	PnBillCursor c;
	const char *line;
	size_t		llen;
	PnBillField hdr[PN_BILL_MAX_FIELDS];
	PnBillField f[PN_BILL_MAX_FIELDS];
	int			nh = -1;

	pn_bill_start(&c, text, len);
	while (pn_bill_next_line(&c, &line, &llen))
	{
		int			n;

		if (pn_bill_blank(line, llen) || line[0] == '#')
			continue;
		n = pn_bill_split_plain(line, llen, f, PN_BILL_MAX_FIELDS);
		if (n < 0)
			malformed(b, "summary line %zu has more than %d fields", c.line_no, PN_BILL_MAX_FIELDS);
		for (int i = 0; i < n; i++)
			f[i] = pn_bill_trim(f[i]);
		if (nh < 0)
		{
			memcpy(hdr, f, sizeof(PnBillField) * n);
			nh = n;
			continue;
		}
		if (n > 0 && pn_bill_is(f[0], "合计"))
		{
			int			i = column(hdr, nh, "服务费（元）");

			if (i < 0 || n != nh)
				malformed(b, "the summary file's 合计 row has no 服务费（元）");
			b->has[S_FEES] = true;
			b->total[S_FEES] = -amount_of(b, c.line_no, f[i], "服务费（元）", 2);
		}
	}
}

static void
parse_alipay(Bill *b, const char *data, size_t len)
{
	StringInfoData dz,
				sz;
	char	   *text;
	char	   *stext = NULL;
	PnBillCursor c;
	const char *line;
	size_t		llen;
	PnBillField hdr[PN_BILL_MAX_FIELDS];
	PnBillField f[PN_BILL_MAX_FIELDS];
	int			nh = -1;
	int			in_list = 0;	/* 0 before the start marker, 1 in, 2 after */
	int			c_trade = -1,
				c_order = -1,
				c_type = -1,
				c_done = -1,
				c_amount = -1,
				c_settled = -1,
				c_refund_id = -1,
				c_fee = -1;
	MemoryContext old;

	initStringInfo(&dz);
	initStringInfo(&sz);
	unzip(b, data, len, &dz, &sz);
	text = gbk_to_utf8(&dz);
	pfree(dz.data);
	if (sz.len > 0)
		stext = (char *) pg_do_encoding_conversion((unsigned char *) sz.data, sz.len, PG_GBK, PG_UTF8);

	pn_bill_start(&c, text, strlen(text));
	while (pn_bill_next_line(&c, &line, &llen))
	{
		int			n;
		BillLine	l;
		PnBillField type;
		bool		refund;

		if (pn_bill_blank(line, llen))
			continue;
		if (line[0] == '#')
		{
			if (pn_bill_contains(line, llen, "业务明细列表结束"))
			{
				if (in_list != 1)
					malformed(b, "line %zu: an end marker without its start", c.line_no);
				in_list = 2;
			}
			else if (pn_bill_contains(line, llen, "业务明细列表"))
			{
				if (in_list != 0)
					malformed(b, "line %zu: a second start marker", c.line_no);
				in_list = 1;
			}
			else if (pn_bill_contains(line, llen, "账号"))
			{
				/* #账号：[20880000000000010156]: the digits in the brackets */
				const char *open = memchr(line, '[', llen);
				const char *close = open ? memchr(open, ']', llen - (size_t) (open - line)) : NULL;
				size_t		n = close ? (size_t) (close - open - 1) : 0;

				if (close == NULL || n == 0 || n >= sizeof(b->account) ||
					strspn(open + 1, "0123456789") < n)
					malformed(b, "line %zu: no account in 账号", c.line_no);
				if (b->account[0] != '\0' &&
					(strlen(b->account) != n || memcmp(b->account, open + 1, n) != 0))
					malformed(b, "line %zu: a second, other account in 账号", c.line_no);
				memcpy(b->account, open + 1, n);
				b->account[n] = '\0';
			}
			else if (pn_bill_contains(line, llen, "起始日期"))
			{
				if (!pn_bill_alipay_date(line, llen, &b->day))
					malformed(b, "line %zu: no date in 起始日期", c.line_no);
				b->has_day = true;
			}
			else if (pn_bill_contains(line, llen, "交易合计") || pn_bill_contains(line, llen, "退款合计"))
			{
				int64_t		count,
							amount;
				bool		refunds = pn_bill_contains(line, llen, "退款合计");

				if (in_list != 2)
					malformed(b, "line %zu: totals inside the rows", c.line_no);
				if (!pn_bill_alipay_total(line, llen, &count, &amount))
					malformed(b, "line %zu: totals not in the shape \"N笔，...共X元\"", c.line_no);
				b->has[refunds ? S_REFUNDS : S_PAYMENTS] = true;
				b->total[refunds ? S_REFUNDS : S_PAYMENTS] = count;
				b->has[refunds ? S_REFUNDED : S_PAID] = true;
				b->total[refunds ? S_REFUNDED : S_PAID] = amount < 0 ? -amount : amount;
			}
			continue;
		}
		if (in_list != 1)
			malformed(b, "line %zu: a row outside the detail list's markers", c.line_no);
		n = pn_bill_split_plain(line, llen, f, PN_BILL_MAX_FIELDS);
		if (n < 0)
			malformed(b, "line %zu has more than %d fields", c.line_no, PN_BILL_MAX_FIELDS);
		for (int i = 0; i < n; i++)
			f[i] = pn_bill_trim(f[i]);
		if (nh < 0)
		{
			memcpy(hdr, f, sizeof(PnBillField) * n);
			nh = n;
			c_trade = need_column(b, hdr, nh, "支付宝交易号");
			c_order = need_column(b, hdr, nh, "商户订单号");
			c_type = need_column(b, hdr, nh, "业务类型");
			c_done = need_column(b, hdr, nh, "完成时间");
			c_amount = need_column(b, hdr, nh, "订单金额（元）");
			c_settled = need_column(b, hdr, nh, "商家实收（元）");
			c_refund_id = need_column(b, hdr, nh, "退款批次号/请求号");
			c_fee = need_column(b, hdr, nh, "服务费（元）");
			continue;
		}
		if (n != nh)
			malformed(b, "line %zu has %d fields, the header %d", c.line_no, n, nh);
		old = MemoryContextSwitchTo(b->linecxt);
		memset(&l, 0, sizeof(l));
		type = f[c_type];
		refund = pn_bill_is(type, "退款");
		l.kind = pn_bill_is(type, "交易") ? "payment" : refund ? "refund" : "other";
		l.at = time_of(b, c.line_no, f[c_done], "完成时间", false);
		l.trade_no = field_or_null(f[c_trade], false);
		l.order_no = field_or_null(f[c_order], false);
		l.currency = "CNY";
		l.amount = amount_of(b, c.line_no, f[c_amount], "订单金额（元）", 2);
		l.settled = amount_of(b, c.line_no, f[c_settled], "商家实收（元）", 2);
		l.has_settled = true;
		if (refund)
		{
			l.amount = -l.amount;
			l.settled = -l.settled;
			l.refund_id = field_or_null(f[c_refund_id], false);
		}
		/* Alipay writes a fee taken as negative */
		l.fee = -amount_of(b, c.line_no, f[c_fee], "服务费（元）", 2);
		l.has_fee = true;
		l.raw = raw_object(hdr, f, n);
		emit_line(b, &l);
		MemoryContextSwitchTo(old);
		MemoryContextReset(b->linecxt);
	}
	if (in_list == 0)
		malformed(b, "no detail list (业务明细列表) marker");
	if (in_list == 1)
		malformed(b, "no end marker (业务明细列表结束): the file is cut short");
	if (nh < 0)
		malformed(b, "no header in the detail list");
	if (stext != NULL)
		parse_alipay_summary(b, stext, strlen(stext));
}

/* ---------------------------------------------------------------------
 * Stripe: balance transactions
 * ---------------------------------------------------------------------
 */

/* Stripe's zero-decimal currencies: amounts in major units are minor units. */
static int
stripe_scale(const char *currency)
{
	static const char *const zero[] = {
		"bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf",
		"ugx", "vnd", "vuv", "xaf", "xof", "xpf"
	};

	for (int i = 0; i < (int) lengthof(zero); i++)
		if (currency != NULL && pg_strcasecmp(currency, zero[i]) == 0)
			return 0;
	return 2;
}

/* The kind of a balance transaction, by its type and reporting category. */
static const char *
stripe_kind(const char *type, const char *category)
{
	const char *t = type ? type : category;

	if (t == NULL)
		return "other";
	if (strcmp(t, "charge") == 0 || strcmp(t, "payment") == 0)
		return "payment";
	if (strcmp(t, "refund") == 0 || strcmp(t, "payment_refund") == 0)
		return "refund";
	if ((category && strcmp(category, "dispute") == 0) || strcmp(t, "dispute") == 0)
		return "dispute";
	if (strcmp(t, "adjustment") == 0)
		return "adjustment";
	if (strcmp(t, "payout") == 0)
		return "payout";
	if (strcmp(t, "stripe_fee") == 0 || strcmp(t, "application_fee") == 0 ||
		strcmp(t, "fee") == 0 || strcmp(t, "tax") == 0)
		return "fee";
	return "other";
}

static bool
has_prefix(const char *s, const char *p)
{
	return s != NULL && strncmp(s, p, strlen(p)) == 0;
}

static int64
stripe_amount(const Bill *b, size_t line, PnBillField f, const char *name, int scale)
{
	int64_t		v;

	if (!pn_bill_amount(f.s, f.len, scale, scale, &v))
		malformed(b, "line %zu: %s \"%s\" is not an amount", line, name,
				  pn_clip_len(f.s, (int) Min(f.len, 1024), 40));
	return (int64) v;
}

/* The Dashboard's export or a balance report (Reports API), by header name. */
static void
parse_stripe_csv(Bill *b, const char *text, size_t len)
{
	static const char *const id_names[] = {"id", "balance_transaction_id"};
	static const char *const type_names[] = {"Type", "type"};
	static const char *const cat_names[] = {"reporting_category", "Reporting Category"};
	static const char *const src_names[] = {"Source", "source_id"};
	static const char *const amount_names[] = {"Amount", "gross", "amount"};
	static const char *const fee_names[] = {"Fee", "fee"};
	static const char *const cur_names[] = {"Currency", "currency"};
	static const char *const created_names[] = {"Created (UTC)", "created_utc"};
	static const char *const status_names[] = {"Status", "status"};
	PnBillCursor c;
	PnBillField hdr[PN_BILL_MAX_FIELDS];
	PnBillField f[PN_BILL_MAX_FIELDS];
	char	   *hbuf = palloc(len + 1);
	char	   *buf = palloc(len + 1);
	int			nh;
	int			c_id, c_type, c_cat, c_src, c_amount, c_fee, c_cur, c_created,
				c_status, c_charge, c_pi;
	MemoryContext old;

	if (!pg_verify_mbstr(PG_UTF8, text, (int) len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("malformed %s bill: not UTF-8 text", b->format)));
	pn_bill_start(&c, text, len);
	nh = pn_bill_csv_record(&c, hdr, PN_BILL_MAX_FIELDS, hbuf, len + 1);
	if (nh <= 0)
		malformed(b, "no header");
	c_id = column_any(hdr, nh, id_names, lengthof(id_names));
	c_type = column_any(hdr, nh, type_names, lengthof(type_names));
	c_cat = column_any(hdr, nh, cat_names, lengthof(cat_names));
	c_src = column_any(hdr, nh, src_names, lengthof(src_names));
	c_amount = column_any(hdr, nh, amount_names, lengthof(amount_names));
	c_fee = column_any(hdr, nh, fee_names, lengthof(fee_names));
	c_cur = column_any(hdr, nh, cur_names, lengthof(cur_names));
	c_created = column_any(hdr, nh, created_names, lengthof(created_names));
	c_status = column_any(hdr, nh, status_names, lengthof(status_names));
	c_charge = column(hdr, nh, "charge_id");
	c_pi = column(hdr, nh, "payment_intent_id");
	if (c_id < 0 || (c_type < 0 && c_cat < 0) || c_amount < 0 || c_cur < 0 || c_created < 0)
		malformed(b, "the header lacks id, Type (or reporting_category), Amount (or gross), Currency or Created (UTC)");

	for (;;)
	{
		int			n = pn_bill_csv_record(&c, f, PN_BILL_MAX_FIELDS, buf, len + 1);
		BillLine	l;
		char	   *type,
				   *cat,
				   *src,
				   *charge,
				   *pi;
		int			scale;

		if (n == 0)
			break;
		if (n == -2)
			malformed(b, "line %zu: a quote not closed or followed by more", c.line_no + 1);
		if (n == 1 && f[0].len == 0)
			continue;			/* an empty line */
		if (n != nh)
			malformed(b, "line %zu has %d fields, the header %d", c.line_no, n < 0 ? PN_BILL_MAX_FIELDS + 1 : n, nh);
		old = MemoryContextSwitchTo(b->linecxt);
		memset(&l, 0, sizeof(l));
		type = c_type >= 0 ? field_or_null(f[c_type], false) : NULL;
		cat = c_cat >= 0 ? field_or_null(f[c_cat], false) : NULL;
		src = c_src >= 0 ? field_or_null(f[c_src], false) : NULL;
		charge = c_charge >= 0 ? field_or_null(f[c_charge], false) : NULL;
		pi = c_pi >= 0 ? field_or_null(f[c_pi], false) : NULL;
		l.kind = stripe_kind(type, cat);
		l.currency = field_or_null(f[c_cur], false);
		scale = stripe_scale(l.currency);
		l.amount = stripe_amount(b, c.line_no, f[c_amount], "Amount", scale);
		if (c_fee >= 0 && f[c_fee].len > 0)
		{
			l.fee = stripe_amount(b, c.line_no, f[c_fee], "Fee", scale);
			l.has_fee = true;
		}
		l.at = time_of(b, c.line_no, f[c_created], "Created (UTC)", true);
		l.status = c_status >= 0 ? field_or_null(f[c_status], false) : NULL;
		/* the trade: the payment intent when named, else the charge */
		l.trade_no = pi ? pi : charge;
		if (strcmp(l.kind, "refund") == 0)
		{
			l.amount = -l.amount;
			if (has_prefix(src, "re_") || has_prefix(src, "pyr_"))
				l.refund_id = src;
			else if (l.trade_no == NULL)
				l.trade_no = src;	/* older exports: the refund's charge */
		}
		else if (l.trade_no == NULL && (has_prefix(src, "ch_") || has_prefix(src, "py_") || has_prefix(src, "pi_")))
			l.trade_no = src;
		l.settled = l.amount;
		l.has_settled = true;
		l.raw = raw_object(hdr, f, n);
		emit_line(b, &l);
		MemoryContextSwitchTo(old);
		MemoryContextReset(b->linecxt);
	}
}

/* A string at path of an object, or the "id" of an object there. */
static char *
json_id(Jsonb *doc, const char *path)
{
	JsonbValue	buf;
	JsonbValue *v = pn_json_value(doc, path, &buf);

	if (v == NULL)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data))
	{
		JsonbValue	idbuf;

		if (getKeyJsonValueFromContainer(v->val.binary.data, "id", 2, &idbuf) != NULL &&
			idbuf.type == jbvString)
			return pnstrdup(idbuf.val.string.val, idbuf.val.string.len);
	}
	return NULL;
}

/* GET /v1/balance_transactions: {"object":"list","data":[...]} */
static void
parse_stripe_json(Bill *b, const char *text, size_t len)
{
	Jsonb	   *doc;
	Jsonb	  **items;
	int			n;
	char	   *object;
	bool		more;
	MemoryContext old;

	/*
	 * As every JSON body is read: valid UTF-8, no NUL byte (jsonb_in would
	 * take the text before one and drop the rest), no deeper than
	 * PAYNOTIFY_MAX_JSON_DEPTH, numbers jsonb can hold; at most
	 * BILL_MAX_JSON_VALUES values
	 */
	if (len > INT_MAX || (doc = pn_parse_json_max(text, (int) len, BILL_MAX_JSON_VALUES)) == NULL)
		malformed(b, "not valid UTF-8 JSON (or nested deeper than %d, a NUL byte, a number too large, too many values)",
				  PAYNOTIFY_MAX_JSON_DEPTH);
	if (!pn_json_string(doc, "object", &object) || strcmp(object, "list") != 0 ||
		!pn_json_objects(doc, "data", INT_MAX, &items, &n))
		malformed(b, "not a list of balance transactions ({\"object\":\"list\",\"data\":[...]})");
	if (pn_json_bool(doc, "has_more", &more) && more)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the Stripe list is one page of several (has_more is true)"),
				 errhint("Import the day's balance transactions whole: put every page's data into one list, with has_more false.")));
	for (int i = 0; i < n; i++)
	{
		Jsonb	   *t = items[i];
		BillLine	l;
		char	   *type = NULL,
				   *cat = NULL,
				   *src;
		int64		created;

		old = MemoryContextSwitchTo(b->linecxt);
		memset(&l, 0, sizeof(l));
		if (!pn_json_string(t, "object", &type) || strcmp(type, "balance_transaction") != 0)
			malformed(b, "data[%d] is not a balance_transaction", i);
		type = NULL;
		(void) pn_json_string(t, "type", &type);
		(void) pn_json_string(t, "reporting_category", &cat);
		if (!pn_json_int64(t, "amount", &l.amount))
			malformed(b, "data[%d] has no integral amount", i);
		if (!pn_json_int64(t, "created", &created) || created < 0 || created > INT64CONST(253402300799))
			malformed(b, "data[%d] has no created time", i);
		if (!pn_json_string(t, "currency", &l.currency))
			malformed(b, "data[%d] has no currency", i);
		if (!pn_json_string(t, "id", &src) || !has_prefix(src, "txn_"))
			malformed(b, "data[%d] has no id", i);
		l.has_fee = pn_json_int64(t, "fee", &l.fee);
		(void) pn_json_string(t, "status", &l.status);
		l.kind = stripe_kind(type, cat);
		l.at = time_t_to_timestamptz((pg_time_t) created);
		src = json_id(t, "source");
		if (strcmp(l.kind, "refund") == 0)
		{
			l.amount = -l.amount;
			l.refund_id = src;
			/* an expanded refund names its payment */
			l.trade_no = json_id(t, "source.payment_intent");
			if (l.trade_no == NULL)
				l.trade_no = json_id(t, "source.charge");
		}
		else
		{
			/* a payment's source is its charge (or payment); an expanded
			 * one names its payment intent, and so do expanded disputes */
			l.trade_no = json_id(t, "source.payment_intent");
			if (l.trade_no == NULL)
				l.trade_no = json_id(t, "source.charge");
			if (l.trade_no == NULL && strcmp(l.kind, "payment") == 0)
				l.trade_no = src;
		}
		l.settled = l.amount;
		l.has_settled = true;
		l.raw = t;
		emit_line(b, &l);
		MemoryContextSwitchTo(old);
		MemoryContextReset(b->linecxt);
	}
}

/* ---------------------------------------------------------------------
 * The entry point
 * ---------------------------------------------------------------------
 */

/* What the bytes are, by their first bytes; text formats by their header. */
static BillFormat
sniff(const char *d, size_t len)
{
	size_t		i = 0;

	if (len >= 2 && (unsigned char) d[0] == 0x1f && (unsigned char) d[1] == 0x8b)
		return BF_GZIP;
	if (len >= 4 && memcmp(d, "PK\003\004", 4) == 0)
		return BF_ZIP;
	if (len >= 3 && memcmp(d, "\xEF\xBB\xBF", 3) == 0)
		i = 3;
	while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n'))
		i++;
	if (i < len && d[i] == '{')
		return BF_STRIPE_JSON;
	if (len - i >= strlen("交易时间,") && memcmp(d + i, "交易时间,", strlen("交易时间,")) == 0)
		return BF_WXPAY;
	if ((len - i >= 3 && memcmp(d + i, "id,", 3) == 0) ||
		(len - i >= 23 && memcmp(d + i, "balance_transaction_id,", 23) == 0))
		return BF_STRIPE_CSV;
	return BF_UNKNOWN;
}

static const char *
format_gateway(BillFormat f)
{
	switch (f)
	{
		case BF_WXPAY:
		case BF_GZIP:
			return "wxpay";
		case BF_ZIP:
			return "alipay";
		case BF_STRIPE_CSV:
		case BF_STRIPE_JSON:
			return "stripe";
		default:
			return NULL;
	}
}

/*
 * paynotify_bill_parse(gateway text, bill bytea) returns setof (line_no,
 * kind, trade_no, order_no, refund_id, amount, settled, fee, currency, at,
 * status, raw): the bill's lines (from 1) and its summary (line 0, kind
 * 'summary', raw holding what the file states of itself).
 */
Datum
paynotify_bill_parse(PG_FUNCTION_ARGS)
{
	char	   *gateway;
	bytea	   *bill;
	const char *data;
	size_t		len;
	BillFormat	fmt;
	const char *fgw;
	Bill		b;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("gateway and bill must not be null")));
	gateway = text_to_cstring(PG_GETARG_TEXT_PP(0));
	bill = PG_GETARG_BYTEA_PP(1);
	data = VARDATA_ANY(bill);
	len = VARSIZE_ANY_EXHDR(bill);

	InitMaterializedSRF(fcinfo, 0);
	memset(&b, 0, sizeof(b));
	b.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	b.linecxt = AllocSetContextCreate(CurrentMemoryContext, "paynotify bill line",
									  ALLOCSET_DEFAULT_SIZES);
	if (strcmp(gateway, "wxpay") == 0 || strcmp(gateway, "alipay") == 0)
	{
		b.tz = pg_tzset("Asia/Shanghai");
		if (b.tz == NULL)
			elog(ERROR, "time zone \"Asia/Shanghai\" is not known");
	}
	else if (strcmp(gateway, "stripe") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no bill format for gateway \"%s\"", gateway)));

	fmt = sniff(data, len);
	fgw = format_gateway(fmt);
	if (fgw == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("malformed bill: not a bill of any known gateway"),
				 errdetail("WeChat Pay's trade bill begins \"交易时间,\" (or is gzip), Alipay's is a zip, Stripe's balance transactions are CSV (\"id,\" or \"balance_transaction_id,\") or a JSON list.")));
	if (strcmp(fgw, gateway) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the bill is gateway %s's, and the channel's gateway is %s", fgw, gateway)));

	switch (fmt)
	{
		case BF_GZIP:
			{
				StringInfoData plain;

				b.format = "wxpay";
				initStringInfo(&plain);
				gunzip(&b, data, len, &plain);
				if (sniff(plain.data, plain.len) != BF_WXPAY)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("the gzip bill holds no WeChat Pay trade bill (its header begins \"交易时间,\")")));
				b.format = "wxpay_gzip";
				parse_wxpay(&b, plain.data, plain.len);
				break;
			}
		case BF_WXPAY:
			b.format = "wxpay";
			parse_wxpay(&b, data, len);
			break;
		case BF_ZIP:
			b.format = "alipay";
			parse_alipay(&b, data, len);
			break;
		case BF_STRIPE_CSV:
			b.format = "stripe_csv";
			parse_stripe_csv(&b, data, len);
			break;
		case BF_STRIPE_JSON:
			b.format = "stripe_json";
			parse_stripe_json(&b, data, len);
			break;
		default:
			break;
	}
	emit_summary(&b);
	MemoryContextDelete(b.linecxt);
	return (Datum) 0;
}
