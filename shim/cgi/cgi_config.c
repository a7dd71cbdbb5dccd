/*
 * cgi_config.c
 *	  The shim's settings: one table lists every environment variable with
 *	  its default and help text, so loading and --help cannot drift apart.
 *	  Also the checked number conversions used for settings and for
 *	  CONTENT_LENGTH.
 *
 * The environment is read once, at start, before any thread exists.
 */
#include "cgi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum setting_kind
{
	SETTING_STRING,
	SETTING_NUMBER
} setting_kind;

typedef struct setting
{
	const char *name;
	const char *default_value;
	setting_kind kind;
	long long	min;			/* numbers only */
	long long	max;
	size_t		offset;			/* into pn_config */
	const char *help;
} setting;

#define NUMBER_AT(cfg, off) ((long long *) ((char *) (cfg) + (off)))
#define STRING_AT(cfg, off) ((const char **) ((char *) (cfg) + (off)))

static const setting settings[] = {
	{"PAYNOTIFY_DSN", "", SETTING_STRING, 0, 0, offsetof(pn_config, dsn),
	"libpq connection string or URI (empty: libpq defaults and PG* variables)"},
	{"PAYNOTIFY_FUNCTION", "paynotify_handle", SETTING_STRING, 0, 0,
		offsetof(pn_config, function),
	"function to call, as schema.name or name (plain identifiers only); a bare\n"
	"      name must find the paynotify extension's function in the role's search_path"},
	{"PAYNOTIFY_MAX_BODY", "1048576", SETTING_NUMBER, 1, 64LL * 1024 * 1024,
		offsetof(pn_config, max_body),
	"largest request body in bytes; larger requests get 413"},
	{"PAYNOTIFY_WORKERS", "4", SETTING_NUMBER, 1, 256,
		offsetof(pn_config, workers),
	"FastCGI worker threads, each with one database connection"},
	{"PAYNOTIFY_STATEMENT_TIMEOUT", "0", SETTING_NUMBER, 0, 2147483647,
		offsetof(pn_config, statement_timeout_ms),
	"statement_timeout in milliseconds for the session (0: server setting)"},
	{"PAYNOTIFY_CONNECT_TIMEOUT", "2", SETTING_NUMBER, 1, 3600,
		offsetof(pn_config, connect_timeout_s),
	"libpq connect_timeout in seconds, unless the DSN sets one"},
	{"PAYNOTIFY_RECONNECT_MAX", "5000", SETTING_NUMBER, 100, 600000,
		offsetof(pn_config, reconnect_max_ms),
	"cap in milliseconds on the FastCGI reconnect back-off (starts at 100)"},
	{"PAYNOTIFY_NO_PREPARE", "0", SETTING_NUMBER, 0, 1,
		offsetof(pn_config, no_prepare),
	"1: FastCGI sends the statement with each request instead of preparing it\n"
	"      once per connection (for pgbouncer's transaction pooling before 1.21)"},
	{"PAYNOTIFY_IDLE_TIMEOUT", "5000", SETTING_NUMBER, 100, 600000,
		offsetof(pn_config, idle_timeout_ms),
	"FastCGI: milliseconds a new connection may take to send its whole request\n"
	"      (to its empty STDIN record; the first 64 KiB of a larger one) before\n"
	"      it is closed; no worker waits for it meanwhile"},
	{"PAYNOTIFY_IO_TIMEOUT", "5000", SETTING_NUMBER, 100, 600000,
		offsetof(pn_config, io_timeout_ms),
	"FastCGI: milliseconds a worker waits for the rest of a request over\n"
	"      64 KiB, from when it takes it up (half the workers at most, at least\n"
	"      one, take such requests at once: with two or more, one is left for\n"
	"      the others); also the longest wait for each write of the reply and\n"
	"      for the client to close after it; after SIGTERM no client is waited\n"
	"      for longer than that from the signal"},
	{"PAYNOTIFY_MAX_PENDING", "256", SETTING_NUMBER, 1, 65536,
		offsetof(pn_config, max_pending),
	"FastCGI: connections held that no worker serves yet, each with up to\n"
	"      64 KiB read: this many whose request has not arrived whole (one more\n"
	"      closes the oldest of them; a whole request closes none), and up to\n"
	"      this many waiting for a free worker (64 at least beside as many\n"
	"      partial ones), this plus 64 in all; the open-file limit must allow\n"
	"      about this plus 100 and 5 per worker (checked at start)"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* NAMEDATALEN - 1: longer names would be truncated by the server. */
#define IDENT_MAX 63

static bool function_name_valid(const char *name);

/*
 * Fills cfg from the environment; on a bad value logs one line naming the
 * variable (never its value) and returns false.
 */
bool
pn_config_load(pn_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < NSETTINGS; i++)
	{
		const setting *s = &settings[i];
		const char *value = getenv(s->name);

		if (value == NULL || (value[0] == '\0' && s->kind == SETTING_NUMBER))
			value = s->default_value;
		if (s->kind == SETTING_STRING)
		{
			*STRING_AT(cfg, s->offset) = value;
			continue;
		}
		if (pn_parse_number(value, s->min, s->max,
							NUMBER_AT(cfg, s->offset)) != PN_NUMBER_OK)
		{
			pn_log("%s must be a whole number from %lld to %lld",
				   s->name, s->min, s->max);
			return false;
		}
	}
	if (cfg->function[0] == '\0')
		cfg->function = "paynotify_handle";
	if (!function_name_valid(cfg->function))
	{
		pn_log("PAYNOTIFY_FUNCTION must be name or schema.name "
			   "(letters, digits, _ and $; at most 63 each)");
		return false;
	}
	snprintf(cfg->sql, sizeof(cfg->sql),
			 "SELECT status, content_type, body, outcome FROM %s($1, $2::jsonb, $3)",
			 cfg->function);
	return true;
}

/* Prints the environment part of --help from the settings table. */
void
pn_config_help(void)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		printf("  %s (default: %s)\n      %s\n", settings[i].name,
			   settings[i].default_value[0] ? settings[i].default_value : "empty",
			   settings[i].help);
}

/*
 * One unquoted identifier: a letter or _, then letters, digits, _ or $, at
 * most 63 bytes.  Anything that would need quoting is refused, because the
 * name is pasted into the statement text.
 */
static size_t
identifier_length(const char *s)
{
	size_t		n = 0;

	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
		return 0;
	while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
		   (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '$')
		n++;
	return n <= IDENT_MAX ? n : 0;
}

/* name or schema.name, each an unquoted identifier. */
static bool
function_name_valid(const char *name)
{
	size_t		n = identifier_length(name);

	if (n == 0)
		return false;
	if (name[n] == '\0')
		return true;
	if (name[n] != '.')
		return false;
	name += n + 1;
	n = identifier_length(name);
	return n > 0 && name[n] == '\0';
}

/*
 * Converts a string of decimal digits (no sign, no spaces) to an unsigned
 * value no larger than max.  An all-digit string too large for any type is
 * PN_NUMBER_RANGE, not INVALID: it is a well-formed, too-large number.
 */
pn_number
pn_parse_unsigned(const char *s, unsigned long long max, unsigned long long *out)
{
	unsigned long long v;
	char	   *end;

	if (s == NULL || s[0] < '0' || s[0] > '9')
		return PN_NUMBER_INVALID;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return PN_NUMBER_INVALID;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE || v > max)
		return PN_NUMBER_RANGE;
	if (errno != 0 || *end != '\0')
		return PN_NUMBER_INVALID;
	*out = v;
	return PN_NUMBER_OK;
}

/* pn_parse_unsigned for a setting that must lie in [min, max]. */
pn_number
pn_parse_number(const char *s, long long min, long long max, long long *out)
{
	unsigned long long v;
	pn_number	r = pn_parse_unsigned(s, (unsigned long long) max, &v);

	if (r != PN_NUMBER_OK)
		return r;
	if ((long long) v < min)
		return PN_NUMBER_RANGE;
	*out = (long long) v;
	return PN_NUMBER_OK;
}
