/*-------------------------------------------------------------------------
 *
 * fuzz_bill.c
 *	  libFuzzer target: the daily bills' text (src/parse/bill.c), with its
 *	  invariants checked on every input.
 *
 * The whole input is read as a bill three ways (lines split plain and by
 * backtick, and RFC 4180 records), and every field and line is also tried
 * as an amount, an integer, a time and an Alipay comment line.  Invariants:
 *	- lines and fields lie inside the input (or the CSV buffer), the lines
 *	  taken are at most the input's '\n' count + 1, and re-joining a plain
 *	  split gives the line back;
 *	- a backtick split's fields, each with its backtick, joined by ',' give
 *	  the line back;
 *	- an accepted amount printed back with scale decimals parses to the same
 *	  value, and |value| < 10^17;
 *	- an accepted time is a real calendar time.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bill.h"

static PnBillField fields[PN_BILL_MAX_FIELDS];

/* Abort (a crash libFuzzer reports) when an invariant does not hold. */
static void
require(int cond)
{
	if (!cond)
		abort();
}

static int
inside(const char *p, size_t len, const char *base, size_t size)
{
	return p >= base && p + len <= base + size;
}

static void
check_value(const char *s, size_t len)
{
	int64_t		v,
				w;
	PnBillTime	t;
	char		buf[64];

	for (int maxscale = 2; maxscale <= 6; maxscale += 4)
	{
		if (pn_bill_amount(s, len, 2, maxscale, &v))
		{
			int64_t		a = v < 0 ? -v : v;
			int			n;

			require(a < 100000000000000000LL);
			n = snprintf(buf, sizeof(buf), "%s%lld.%02lld", v < 0 ? "-" : "",
						 (long long) (a / 100), (long long) (a % 100));
			require(pn_bill_amount(buf, (size_t) n, 2, 2, &w) && w == v);
		}
	}
	if (pn_bill_int(s, len, &v))
	{
		int			n = snprintf(buf, sizeof(buf), "%lld", (long long) v);

		require(pn_bill_int(buf, (size_t) n, &w) && w == v);
	}
	if (pn_bill_time(s, len, true, &t))
		require(t.year >= 1970 && t.year <= 9999 && t.month >= 1 && t.month <= 12 &&
				t.day >= 1 && t.day <= 31 && t.hour < 24 && t.minute < 60 && t.second < 60);
	(void) pn_bill_alipay_date(s, len, &t);
	if (pn_bill_alipay_total(s, len, &v, &w))
		require(v >= 0);
}

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	const char *text = (const char *) data;
	PnBillCursor c;
	const char *line;
	size_t		len;
	size_t		newlines = 0;
	char	   *buf;
	int			n;

	for (size_t i = 0; i < size; i++)
		newlines += (text[i] == '\n');

	pn_bill_start(&c, text, size);
	while (pn_bill_next_line(&c, &line, &len))
	{
		require(inside(line, len, text, size));
		require(memchr(line, '\n', len) == NULL);
		(void) pn_bill_blank(line, len);
		n = pn_bill_split_plain(line, len, fields, PN_BILL_MAX_FIELDS);
		if (n >= 0)
		{
			size_t		total = 0;

			require(n >= 1);
			for (int i = 0; i < n; i++)
			{
				require(inside(fields[i].s, fields[i].len, line, len));
				require(memchr(fields[i].s, ',', fields[i].len) == NULL);
				total += fields[i].len;
				check_value(fields[i].s, fields[i].len);
				check_value(pn_bill_trim(fields[i]).s, pn_bill_trim(fields[i]).len);
			}
			require(total + (size_t) (n - 1) == len);
		}
		n = pn_bill_split_backtick(line, len, fields, PN_BILL_MAX_FIELDS);
		if (n >= 0)
		{
			size_t		total = 0;

			require(n >= 1 && line[0] == '`');
			for (int i = 0; i < n; i++)
			{
				require(inside(fields[i].s, fields[i].len, line, len));
				require(fields[i].s[-1] == '`');
				total += fields[i].len + 1;
				check_value(fields[i].s, fields[i].len);
			}
			require(total + (size_t) (n - 1) == len);
		}
		check_value(line, len);
		(void) pn_bill_contains(line, len, "业务明细列表");
	}
	require(c.line_no <= newlines + 1);

	buf = malloc(size + 1);
	require(buf != NULL);
	pn_bill_start(&c, text, size);
	while ((n = pn_bill_csv_record(&c, fields, PN_BILL_MAX_FIELDS, buf, size + 1)) > 0)
	{
		for (int i = 0; i < n; i++)
		{
			require(inside(fields[i].s, fields[i].len, buf, size + 1));
			check_value(fields[i].s, fields[i].len);
		}
	}
	require(n == 0 || n == -1 || n == -2);
	free(buf);
	return 0;
}
