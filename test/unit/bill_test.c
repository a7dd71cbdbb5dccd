/*-------------------------------------------------------------------------
 *
 * bill_test.c
 *	  Unit test of src/parse/bill.c, built without PostgreSQL
 *	  (test/unit/run.sh): the edge cases of the daily bills' text.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <string.h>

#include "bill.h"

static int	failures;
static int	checks;

#define CHECK(cond, ...) \
	do { \
		checks++; \
		if (!(cond)) { \
			failures++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

static void
expect_amount(const char *s, int maxscale, int ok, long long want)
{
	int64_t		v = 0;
	int			got = pn_bill_amount(s, strlen(s), 2, maxscale, &v);

	CHECK(got == ok && (!ok || v == want), "amount \"%s\" (maxscale %d): got %d %lld, want %d %lld",
		  s, maxscale, got, (long long) v, ok, want);
}

static void
expect_time(const char *s, int ok)
{
	PnBillTime	t;

	CHECK(pn_bill_time(s, strlen(s), true, &t) == ok, "time \"%s\"", s);
}

static int
field_is(PnBillField f, const char *s)
{
	return f.len == strlen(s) && memcmp(f.s, s, f.len) == 0;
}

int
main(void)
{
	PnBillField f[PN_BILL_MAX_FIELDS];
	PnBillCursor c;
	const char *line;
	size_t		len;
	char		buf[256];
	int			n;
	int64_t		count,
				amount;
	PnBillTime	t;

	/* yuan to fen, exactly */
	expect_amount("0.01", 2, 1, 1);
	expect_amount("1299.02", 2, 1, 129902);
	expect_amount("-10.00", 2, 1, -1000);
	expect_amount("100", 2, 1, 10000);
	expect_amount("88.8", 2, 1, 8880);
	expect_amount("0.60000", 6, 1, 60);
	expect_amount("-0.27000", 6, 1, -27);
	expect_amount("0.60000", 2, 0, 0);
	expect_amount("0.60100", 6, 0, 0);	/* finer than a fen */
	expect_amount("1.2.3", 2, 0, 0);
	expect_amount("", 2, 0, 0);
	expect_amount("-", 2, 0, 0);
	expect_amount(".5", 2, 0, 0);
	expect_amount("5.", 2, 0, 0);
	expect_amount("01.00", 2, 0, 0);
	expect_amount("+1.00", 2, 0, 0);
	expect_amount("1e3", 2, 0, 0);
	expect_amount(" 1.00", 2, 0, 0);
	expect_amount("1,000.00", 2, 0, 0);
	expect_amount("999999999999999.99", 2, 1, 99999999999999999LL);
	expect_amount("1000000000000000.00", 2, 0, 0);

	/* times */
	expect_time("2026-03-14 09:21:07", 1);
	expect_time("2026-03-14 09:21", 1);
	expect_time("2024-02-29 23:59:59", 1);
	expect_time("2026-02-29 00:00:00", 0);
	expect_time("2026-03-14 24:00:00", 0);
	expect_time("2026-03-14T09:21:07", 0);
	expect_time("2026-3-14 09:21:07", 0);

	/* WeChat: backtick fields, a ',' inside one stays */
	line = "`2026-03-14 09:21:07,`wx1,`{\"a\":1,\"b\":2},`0.60000,`";
	n = pn_bill_split_backtick(line, strlen(line), f, PN_BILL_MAX_FIELDS);
	CHECK(n == 5, "backtick fields: %d", n);
	CHECK(n == 5 && field_is(f[2], "{\"a\":1,\"b\":2}") && f[4].len == 0, "backtick values");
	CHECK(pn_bill_split_backtick("a,`b", 4, f, PN_BILL_MAX_FIELDS) == -2, "no leading backtick");
	CHECK(pn_bill_split_backtick("`a,`b,`c", 8, f, 2) == -1, "too many fields");

	/* lines: BOM, CRLF and LF, no line end at the end */
	pn_bill_start(&c, "\xEF\xBB\xBFh1,h2\r\nx\n\nlast", 17);
	CHECK(pn_bill_next_line(&c, &line, &len) && len == 5 && memcmp(line, "h1,h2", 5) == 0, "first line");
	CHECK(pn_bill_next_line(&c, &line, &len) && len == 1, "second line");
	CHECK(pn_bill_next_line(&c, &line, &len) && len == 0, "empty line");
	CHECK(pn_bill_next_line(&c, &line, &len) && len == 4, "last line");
	CHECK(!pn_bill_next_line(&c, &line, &len), "the end");

	/* CSV: quotes, doubled quotes, a line end inside quotes, CRLF */
	{
		const char *csv = "a,\"b,\"\"c\"\"\",\"d\ne\"\r\n1,,3\r\n\"open";

		pn_bill_start(&c, csv, strlen(csv));
		n = pn_bill_csv_record(&c, f, PN_BILL_MAX_FIELDS, buf, sizeof(buf));
		CHECK(n == 3 && field_is(f[0], "a") && field_is(f[1], "b,\"c\"") && field_is(f[2], "d\ne"),
			  "csv record 1: %d", n);
		n = pn_bill_csv_record(&c, f, PN_BILL_MAX_FIELDS, buf, sizeof(buf));
		CHECK(n == 3 && field_is(f[0], "1") && f[1].len == 0 && field_is(f[2], "3"), "csv record 2: %d", n);
		n = pn_bill_csv_record(&c, f, PN_BILL_MAX_FIELDS, buf, sizeof(buf));
		CHECK(n == -2, "unclosed quote: %d", n);
		pn_bill_start(&c, "\"a\"b\n", 5);
		CHECK(pn_bill_csv_record(&c, f, PN_BILL_MAX_FIELDS, buf, sizeof(buf)) == -2, "text after a quote");
	}

	/* Alipay: TAB padding, comment lines */
	{
		PnBillField p = {"2026091622001412341234567890\t", 29};

		p = pn_bill_trim(p);
		CHECK(p.len == 28, "trim TAB");
	}
	line = "#交易合计：2笔，商家实收共125.50元，商家优惠共0.00元";
	CHECK(pn_bill_alipay_total(line, strlen(line), &count, &amount) && count == 2 && amount == 12550,
		  "交易合计");
	line = "#退款合计：1笔，商家实收退款共-10.00元，商家优惠退款共0.00元";
	CHECK(pn_bill_alipay_total(line, strlen(line), &count, &amount) && count == 1 && amount == -1000,
		  "退款合计");
	line = "#退款合计：笔，共元";
	CHECK(!pn_bill_alipay_total(line, strlen(line), &count, &amount), "empty totals");
	line = "#起始日期：[2026年09月16日 00:00:00]   终止日期：[2026年09月17日 00:00:00]";
	CHECK(pn_bill_alipay_date(line, strlen(line), &t) && t.year == 2026 && t.month == 9 && t.day == 16,
		  "起始日期");
	line = "#-----------------------------------------业务明细列表结束------------------------------------";
	CHECK(pn_bill_contains(line, strlen(line), "业务明细列表结束"), "end marker");

	printf("bill_test: %d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
