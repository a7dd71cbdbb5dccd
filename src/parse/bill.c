/*-------------------------------------------------------------------------
 *
 * bill.c
 *	  The text of the gateways' daily bills, without PostgreSQL (bill.h).
 *
 * What the bills look like is docs/RECONCILIATION.md's ("Daily bills"):
 * WeChat Pay prefixes every data field with a backtick and quotes nothing;
 * Alipay pads some fields with a TAB and frames its detail rows with '#'
 * lines; Stripe's exports are RFC 4180 CSV.  Everything here reads bytes
 * by length, never past the end, and writes only into the caller's buffers.
 *
 *-------------------------------------------------------------------------
 */
#include "bill.h"

#include <string.h>

void
pn_bill_start(PnBillCursor *c, const char *text, size_t len)
{
	c->p = text;
	c->end = text + len;
	c->line_no = 0;
	if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
		c->p += 3;
}

bool
pn_bill_next_line(PnBillCursor *c, const char **line, size_t *len)
{
	const char *nl;
	size_t		n;

	if (c->p >= c->end)
		return false;
	nl = memchr(c->p, '\n', (size_t) (c->end - c->p));
	n = nl ? (size_t) (nl - c->p) : (size_t) (c->end - c->p);
	*line = c->p;
	*len = (n > 0 && c->p[n - 1] == '\r') ? n - 1 : n;
	c->p = nl ? nl + 1 : c->end;
	c->line_no++;
	return true;
}

bool
pn_bill_blank(const char *line, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
			return false;
	return true;
}

int
pn_bill_split_plain(const char *line, size_t len, PnBillField *f, int max)
{
	int			n = 0;
	size_t		start = 0;

	for (size_t i = 0; i <= len; i++)
	{
		if (i == len || line[i] == ',')
		{
			if (n >= max)
				return -1;
			f[n].s = line + start;
			f[n].len = i - start;
			n++;
			start = i + 1;
		}
	}
	return n;
}

int
pn_bill_split_backtick(const char *line, size_t len, PnBillField *f, int max)
{
	int			n = 0;
	size_t		start;

	if (len == 0 || line[0] != '`')
		return -2;
	start = 1;
	for (size_t i = 1; i <= len; i++)
	{
		if (i == len || (line[i] == ',' && i + 1 < len && line[i + 1] == '`'))
		{
			if (n >= max)
				return -1;
			f[n].s = line + start;
			f[n].len = i - start;
			n++;
			start = i + 2;
			i++;				/* past the backtick */
		}
	}
	return n;
}

int
pn_bill_csv_record(PnBillCursor *c, PnBillField *f, int max,
				   char *buf, size_t bufsize)
{
	const char *p = c->p;
	const char *end = c->end;
	size_t		o = 0;
	int			n = 0;

	if (p >= end)
		return 0;
	if ((size_t) (end - p) > bufsize)
		return -3;
	for (;;)
	{
		size_t		start = o;

		if (n >= max)
			return -1;
		if (p < end && *p == '"')
		{
			p++;
			for (;;)
			{
				if (p >= end)
					return -2;	/* not closed */
				if (*p == '"')
				{
					if (p + 1 < end && p[1] == '"')
					{
						buf[o++] = '"';
						p += 2;
						continue;
					}
					p++;
					break;
				}
				buf[o++] = *p++;
			}
			if (p < end && *p == '\r' && p + 1 < end && p[1] == '\n')
				p++;
			if (p < end && *p != ',' && *p != '\n')
				return -2;
		}
		else
		{
			while (p < end && *p != ',' && *p != '\n')
				buf[o++] = *p++;
			if (o > start && buf[o - 1] == '\r' && (p >= end || *p == '\n'))
				o--;
		}
		f[n].s = buf + start;
		f[n].len = o - start;
		n++;
		if (p >= end || *p == '\n')
		{
			if (p < end)
				p++;
			break;
		}
		p++;					/* the ',' */
	}
	c->p = p;
	c->line_no++;
	return n;
}

PnBillField
pn_bill_trim(PnBillField f)
{
	while (f.len > 0 && (f.s[0] == ' ' || f.s[0] == '\t'))
	{
		f.s++;
		f.len--;
	}
	while (f.len > 0 && (f.s[f.len - 1] == ' ' || f.s[f.len - 1] == '\t'))
		f.len--;
	return f;
}

bool
pn_bill_is(PnBillField f, const char *word)
{
	size_t		n = strlen(word);

	return f.len == n && memcmp(f.s, word, n) == 0;
}

bool
pn_bill_contains(const char *s, size_t len, const char *needle)
{
	size_t		m = strlen(needle);

	if (m == 0)
		return true;
	for (size_t i = 0; i + m <= len; i++)
		if (memcmp(s + i, needle, m) == 0)
			return true;
	return false;
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

bool
pn_bill_amount(const char *s, size_t len, int scale, int maxscale,
			   int64_t *value)
{
	size_t		i = 0;
	size_t		digits = 0;
	int64_t		v = 0;
	bool		neg = false;
	int			decimals = 0;

	if (scale < 0 || scale > 3 || maxscale < scale || maxscale > 9)
		return false;
	if (i < len && s[i] == '-')
	{
		neg = true;
		i++;
	}
	while (i < len && is_digit(s[i]))
	{
		if (digits == 1 && s[i - 1] == '0')
			return false;		/* a superfluous leading zero */
		if (++digits > 15)
			return false;
		v = v * 10 + (s[i] - '0');
		i++;
	}
	if (digits == 0)
		return false;
	if (i < len && s[i] == '.')
	{
		i++;
		if (i >= len)
			return false;
		while (i < len && is_digit(s[i]))
		{
			if (++decimals > maxscale)
				return false;
			if (decimals <= scale)
				v = v * 10 + (s[i] - '0');
			else if (s[i] != '0')
				return false;	/* finer than the minor unit */
			i++;
		}
		if (decimals == 0)
			return false;
	}
	if (i != len)
		return false;
	for (; decimals < scale; decimals++)
		v *= 10;
	*value = neg ? -v : v;
	return true;
}

bool
pn_bill_int(const char *s, size_t len, int64_t *value)
{
	size_t		i = 0;
	int64_t		v = 0;
	bool		neg = false;

	if (len > 0 && s[0] == '-')
	{
		neg = true;
		i = 1;
	}
	if (i == len || len - i > 18)
		return false;
	if (s[i] == '0' && len - i > 1)
		return false;
	for (; i < len; i++)
	{
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*value = neg ? -v : v;
	return true;
}

/* n digits at s as a number, or -1. */
static int
digits_at(const char *s, int n)
{
	int			v = 0;

	for (int i = 0; i < n; i++)
	{
		if (!is_digit(s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static bool
real_date(int y, int m, int d)
{
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int			max;

	if (y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1)
		return false;
	max = mdays[m - 1];
	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		max = 29;
	return d <= max;
}

bool
pn_bill_time(const char *s, size_t len, bool seconds_optional, PnBillTime *t)
{
	if (!(len == 19 || (seconds_optional && len == 16)))
		return false;
	if (s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' ||
		(len == 19 && s[16] != ':'))
		return false;
	t->year = digits_at(s, 4);
	t->month = digits_at(s + 5, 2);
	t->day = digits_at(s + 8, 2);
	t->hour = digits_at(s + 11, 2);
	t->minute = digits_at(s + 14, 2);
	t->second = len == 19 ? digits_at(s + 17, 2) : 0;
	return real_date(t->year, t->month, t->day) &&
		t->hour >= 0 && t->hour < 24 && t->minute >= 0 && t->minute < 60 &&
		t->second >= 0 && t->second < 60;
}

/* Where needle first occurs in the len bytes at s, or NULL. */
static const char *
find(const char *s, size_t len, const char *needle)
{
	size_t		m = strlen(needle);

	for (size_t i = 0; i + m <= len; i++)
		if (memcmp(s + i, needle, m) == 0)
			return s + i;
	return NULL;
}

bool
pn_bill_alipay_date(const char *line, size_t len, PnBillTime *t)
{
	/* [YYYY年MM月DD日 ...: 年, 月 and 日 are three bytes each in UTF-8 */
	const char *b = find(line, len, "[");
	size_t		left;

	if (b == NULL)
		return false;
	left = len - (size_t) (b - line);
	if (left < 1 + 4 + 3 + 2 + 3 + 2 + 3)
		return false;
	if (memcmp(b + 5, "年", 3) != 0 || memcmp(b + 10, "月", 3) != 0 ||
		memcmp(b + 15, "日", 3) != 0)
		return false;
	memset(t, 0, sizeof(*t));
	t->year = digits_at(b + 1, 4);
	t->month = digits_at(b + 8, 2);
	t->day = digits_at(b + 13, 2);
	return real_date(t->year, t->month, t->day);
}

bool
pn_bill_alipay_total(const char *line, size_t len, int64_t *count, int64_t *amount)
{
	const char *colon = find(line, len, "：");
	const char *bi,
			   *gong,
			   *yuan;
	const char *end = line + len;

	if (colon == NULL)
		return false;
	colon += 3;
	bi = find(colon, (size_t) (end - colon), "笔");
	if (bi == NULL || !pn_bill_int(colon, (size_t) (bi - colon), count) || *count < 0)
		return false;
	gong = find(bi, (size_t) (end - bi), "共");
	if (gong == NULL)
		return false;
	gong += 3;
	yuan = find(gong, (size_t) (end - gong), "元");
	if (yuan == NULL)
		return false;
	return pn_bill_amount(gong, (size_t) (yuan - gong), 2, 2, amount);
}
