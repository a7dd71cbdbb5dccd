/*-------------------------------------------------------------------------
 *
 * bill.h
 *	  The text of the gateways' daily bills, without PostgreSQL: records and
 *	  fields (WeChat Pay's backtick-prefixed fields, Alipay's TAB-padded
 *	  ones, RFC 4180 CSV), exact amounts in yuan or dollars to minor units,
 *	  times, and Alipay's comment lines ('#' marker and total lines).
 *
 * bill.c includes no PostgreSQL header and allocates nothing: fields point
 * into the caller's text or into a buffer the caller provides, so the same
 * code runs inside a backend (src/bill.c) and inside the libFuzzer target
 * test/fuzz/fuzz_bill.c.  Every function is total: any input bytes give a
 * verdict, never a crash, and every loop is bounded by the input.  The
 * text is UTF-8 (a GBK bill is converted by PostgreSQL before it is read).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAYNOTIFY_BILL_H
#define PAYNOTIFY_BILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most fields a record may have (the widest known bill has 29). */
#define PN_BILL_MAX_FIELDS 128

/* One field: len bytes at s (not NUL-terminated). */
typedef struct PnBillField
{
	const char *s;
	size_t		len;
} PnBillField;

/* A position in a bill's text. */
typedef struct PnBillCursor
{
	const char *p;
	const char *end;
	size_t		line_no;		/* lines taken so far */
} PnBillCursor;

/* Start a cursor at text, after a UTF-8 byte order mark if there is one. */
extern void pn_bill_start(PnBillCursor *c, const char *text, size_t len);

/*
 * The next physical line (without its "\n" or "\r\n"); false at the end.
 * A last line without a line end is a line; an empty text has none.
 */
extern bool pn_bill_next_line(PnBillCursor *c, const char **line, size_t *len);

/* Whether every byte of the line is a space, TAB or CR. */
extern bool pn_bill_blank(const char *line, size_t len);

/*
 * Split a line at every ',' (no quoting: the bills' header lines and
 * WeChat's).  Returns the number of fields, or -1 when there are more than
 * max.
 */
extern int	pn_bill_split_plain(const char *line, size_t len,
								PnBillField *f, int max);

/*
 * A WeChat Pay data row: every field begins with a backtick, fields are
 * separated by ",`" (so a ',' inside a field, which WeChat does not quote,
 * stays in its field).  The fields are returned without their backtick.
 * Returns the number of fields, -1 when there are more than max, -2 when
 * the line does not begin with a backtick.
 */
extern int	pn_bill_split_backtick(const char *line, size_t len,
								   PnBillField *f, int max);

/*
 * One RFC 4180 record at the cursor: fields separated by ',', a field in
 * double quotes may hold ',', '""' and line ends.  The fields' bytes are
 * written into buf (bufsize at least the bytes left at the cursor) and
 * point there.  Returns the number of fields, 0 at the end of the text, -1
 * when there are more than max, -2 for a quote that is not closed or is
 * followed by anything but ',' or the line end, -3 when buf is too small.
 */
extern int	pn_bill_csv_record(PnBillCursor *c, PnBillField *f, int max,
							   char *buf, size_t bufsize);

/* The field without the spaces and TABs around it (Alipay pads with TAB). */
extern PnBillField pn_bill_trim(PnBillField f);

/* Whether the field is exactly the NUL-terminated word. */
extern bool pn_bill_is(PnBillField f, const char *word);

/* Whether the len bytes at s contain the NUL-terminated needle. */
extern bool pn_bill_contains(const char *s, size_t len, const char *needle);

/*
 * An exact amount in major units to minor units (scale 2: yuan to fen,
 * dollars to cents): an optional '-', digits without a superfluous leading
 * zero (at most 15 of them), then optionally '.' and 1..maxscale decimals;
 * decimals beyond the scale must be zeros (WeChat writes its fees with 5
 * decimals, "0.60000", rounded to fen).  False otherwise: "1.2.3", "1e3",
 * "", "+1", " 1", "0.601" for scale 2.
 */
extern bool pn_bill_amount(const char *s, size_t len, int scale, int maxscale,
						   int64_t *value);

/* An optional '-' and 1..18 digits (Stripe's amounts in minor units). */
extern bool pn_bill_int(const char *s, size_t len, int64_t *value);

/* A calendar time, as the bill writes it (no zone). */
typedef struct PnBillTime
{
	int			year,
				month,
				day,
				hour,
				minute,
				second;
} PnBillTime;

/*
 * "YYYY-MM-DD HH:MM:SS" or, when seconds_optional, "YYYY-MM-DD HH:MM"
 * (Stripe's Dashboard export) — a real date (years 1970..9999) and time.
 */
extern bool pn_bill_time(const char *s, size_t len, bool seconds_optional,
						 PnBillTime *t);

/*
 * Alipay's "#起始日期：[2026年09月16日 00:00:00]   终止日期：[...]": the first
 * date in the line's brackets.  False when the line holds none.
 */
extern bool pn_bill_alipay_date(const char *line, size_t len, PnBillTime *t);

/*
 * Alipay's total lines, "#交易合计：2笔，商家实收共125.50元，..." and
 * "#退款合计：1笔，商家实收退款共-10.00元，...": the count before "笔" and the
 * first amount between "共" and "元" (in fen).  False when the line is not
 * in that shape.
 */
extern bool pn_bill_alipay_total(const char *line, size_t len,
								 int64_t *count, int64_t *amount);

#endif							/* PAYNOTIFY_BILL_H */
