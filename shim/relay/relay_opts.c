/*
 * relay_opts.c
 *	  paynotify-relay's settings: one table gives each its variable, flag,
 *	  default and help; the environment is read first, then the options.
 */
#include "relay.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

relay_config cfg;
bool		once;

typedef enum setting_kind
{
	SETTING_STRING,
	SETTING_NUMBER
} setting_kind;

typedef struct setting
{
	const char *env;
	const char *flag;
	const char *default_value;
	setting_kind kind;
	long long	min;
	long long	max;
	size_t		offset;
	const char *help;
} setting;

static const setting settings[] = {
	{"PAYNOTIFY_DSN", "dsn", "", SETTING_STRING, 0, 0, offsetof(relay_config, dsn),
	"libpq connection string or URI (empty: libpq defaults and PG* variables); --dsn refuses a password"},
	{"PAYNOTIFY_RELAY_SCHEMA", "schema", "public", SETTING_STRING, 0, 0,
		offsetof(relay_config, schema),
	"schema of the paynotify extension (a plain identifier)"},
	{"PAYNOTIFY_RELAY_BATCH", "batch", "100", SETTING_NUMBER, 1, 10000,
		offsetof(relay_config, batch),
	"deliveries claimed per transaction (at most --max-in-flight; per endpoint at most its max_in_flight column)"},
	{"PAYNOTIFY_RELAY_FANOUT_BATCH", "fanout-batch", "1000", SETTING_NUMBER, 1, 100000,
		offsetof(relay_config, fanout_batch),
	"outbox events turned into deliveries per round"},
	{"PAYNOTIFY_RELAY_MAX_IN_FLIGHT", "max-in-flight", "64", SETTING_NUMBER, 1, 4096,
		offsetof(relay_config, max_in_flight),
	"requests in flight at once in all (per endpoint: its max_in_flight column)"},
	{"PAYNOTIFY_RELAY_TIMEOUT", "timeout", "10000", SETTING_NUMBER, 100, 600000,
		offsetof(relay_config, timeout_ms),
	"whole-request timeout in milliseconds; a timeout is a failed attempt"},
	{"PAYNOTIFY_RELAY_CONNECT_TIMEOUT", "connect-timeout", "3000", SETTING_NUMBER, 100, 600000,
		offsetof(relay_config, connect_timeout_ms),
	"TCP/TLS connect timeout in milliseconds"},
	{"PAYNOTIFY_RELAY_POLL_MIN", "poll-min", "10", SETTING_NUMBER, 1, 60000,
		offsetof(relay_config, poll_min_ms),
	"first idle poll interval in milliseconds (doubles while idle)"},
	{"PAYNOTIFY_RELAY_POLL_MAX", "poll-max", "1000", SETTING_NUMBER, 1, 600000,
		offsetof(relay_config, poll_max_ms),
	"longest idle poll interval in milliseconds (also how late a retry may start)"},
	{"PAYNOTIFY_RELAY_LISTEN", "listen", "1", SETTING_NUMBER, 0, 1,
		offsetof(relay_config, listen),
	"1: also LISTEN on channel \"paynotify\" to wake at once when NOTIFY is on"},
	{"PAYNOTIFY_RELAY_RECONNECT_MAX", "reconnect-max", "5000", SETTING_NUMBER, 100, 600000,
		offsetof(relay_config, reconnect_max_ms),
	"cap in milliseconds on the reconnect back-off (starts at 100)"},
	{"PAYNOTIFY_RELAY_ALLOW_PRIVATE", "allow-private", "0", SETTING_NUMBER, 0, 1,
		offsetof(relay_config, allow_private),
	"1: also connect to loopback, private, link-local, own and other non-public addresses (0: refused, checked on every connection)"},
	{"PAYNOTIFY_RELAY_VERBOSE", "verbose", "0", SETTING_NUMBER, 0, 2,
		offsetof(relay_config, verbose),
	"1: log each failed attempt; 2: log every attempt"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))
#define NUMBER_AT(cfg, off) ((long long *) ((char *) (cfg) + (off)))
#define STRING_AT(cfg, off) ((const char **) ((char *) (cfg) + (off)))

static bool
parse_number(const char *s, long long min, long long max, long long *out)
{
	char	   *end;
	long long	v;

	if (s == NULL || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* A plain identifier (it is pasted into the statements). */
static bool
identifier_valid(const char *s)
{
	size_t		n = 0;

	if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			return false;
	return n <= 63;
}

static bool
set_value(const setting *s, const char *value, const char *source)
{
	if (s->kind == SETTING_STRING)
	{
		*STRING_AT(&cfg, s->offset) = value;
		return true;
	}
	if (!parse_number(value, s->min, s->max, NUMBER_AT(&cfg, s->offset)))
	{
		if (strcmp(source, "--") == 0)
			pn_log("--%s must be a whole number from %lld to %lld", s->flag, s->min, s->max);
		else
			pn_log("%s must be a whole number from %lld to %lld", s->env, s->min, s->max);
		return false;
	}
	return true;
}

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: %s [options]\n"
			"Delivers paynotify's outbox events to the endpoints of paynotify_endpoint\n"
			"(Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature), at\n"
			"least once, in order per order and endpoint; retries with backoff and dead\n"
			"letters are kept in paynotify_delivery.  Runs until SIGTERM.\n\n"
			"Options (each overrides its environment variable):\n", PN_PROGRAM);
	for (size_t i = 0; i < NSETTINGS; i++)
		fprintf(out, "  --%s=%s\n", settings[i].flag,
				settings[i].kind == SETTING_NUMBER ? "N" : "TEXT");
	fprintf(out,
			"  --once            deliver what is due, then exit; prints one line per failed\n"
			"                    delivery with its reason (as in paynotify_delivery.last_error)\n"
			"                    and last \"claimed N, delivered N, failed N\"; exit status 0\n"
			"                    when every delivery succeeded (or none was due), else 1\n"
			"  -h, --help        this text\n"
			"  -V, --version     the version\n\n"
			"Environment (default in parentheses):\n");
	for (size_t i = 0; i < NSETTINGS; i++)
		fprintf(out, "  %s (default: %s)\n      %s\n", settings[i].env,
				settings[i].default_value[0] ? settings[i].default_value : "empty",
				settings[i].help);
	fprintf(out, "\nThe database role needs only the relay capacity in the database it connects to:\n"
			"  SELECT paynotify_grant('ROLE', 'relay');  (there, as the extension's owner)\n"
			"Its password goes in the file PGPASSFILE names (default ~/.pgpass; mode 0600),\n"
			"one line host:port:database:user:password, never in --dsn.\n"
			"PAYNOTIFY_RELAY_SCHEMA is the extension's schema in that database:\n"
			"  SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'paynotify';\n");
}

/*
 * A connection string on the command line is readable by every local user
 * (ps, /proc/PID/cmdline): it must not hold a password.  True when dsn has
 * none (or does not parse: connecting will say what is wrong).
 */
static bool
dsn_without_password(const char *dsn)
{
	char	   *err = NULL;
	PQconninfoOption *opts = PQconninfoParse(dsn, &err);
	bool		ok = true;

	if (opts == NULL)
	{
		PQfreemem(err);
		return true;
	}
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL && o->val[0] != '\0')
			ok = false;
	PQconninfoFree(opts);
	return ok;
}

/* -1: go on; else the exit status. */
int
load_config(int argc, char **argv)
{
	struct option longopts[NSETTINGS + 4];
	int			c,
				idx;

	memset(&cfg, 0, sizeof(cfg));
	for (size_t i = 0; i < NSETTINGS; i++)
	{
		const char *v = getenv(settings[i].env);

		if (v == NULL || (v[0] == '\0' && settings[i].kind == SETTING_NUMBER))
			v = settings[i].default_value;
		if (!set_value(&settings[i], v, "environment variable"))
			return 2;
		longopts[i].name = settings[i].flag;
		longopts[i].has_arg = required_argument;
		longopts[i].flag = NULL;
		longopts[i].val = 1000 + (int) i;
	}
	longopts[NSETTINGS] = (struct option) {"once", no_argument, NULL, 'o'};
	longopts[NSETTINGS + 1] = (struct option) {"help", no_argument, NULL, 'h'};
	longopts[NSETTINGS + 2] = (struct option) {"version", no_argument, NULL, 'V'};
	longopts[NSETTINGS + 3] = (struct option) {NULL, 0, NULL, 0};

	while ((c = getopt_long(argc, argv, "hV", longopts, &idx)) != -1)
	{
		if (c >= 1000 && c < 1000 + (int) NSETTINGS)
		{
			if (!set_value(&settings[c - 1000], optarg, "--"))
				return 2;
			if (settings[c - 1000].offset == offsetof(relay_config, dsn) &&
				!dsn_without_password(optarg))
			{
				pn_log("--dsn must not contain a password: every local user can read the command line;"
					   " use PAYNOTIFY_DSN, PGPASSWORD or a .pgpass file");
				return 2;
			}
			continue;
		}
		switch (c)
		{
			case 'o':
				once = true;
				break;
			case 'h':
				usage(stdout);
				return 0;
			case 'V':
				printf("%s %s\n", PN_PROGRAM, PAYNOTIFY_VERSION);
				return 0;
			default:
				fprintf(stderr, "Try '%s --help'.\n", PN_PROGRAM);
				return 2;
		}
	}
	if (optind < argc)
	{
		fprintf(stderr, "%s: unexpected argument \"%s\"\nTry '%s --help'.\n",
				PN_PROGRAM, argv[optind], PN_PROGRAM);
		return 2;
	}
	if (cfg.schema[0] == '\0')
		cfg.schema = "public";
	if (!identifier_valid(cfg.schema))
	{
		pn_log("PAYNOTIFY_RELAY_SCHEMA must be a plain lower-case identifier");
		return 2;
	}
	if (cfg.poll_max_ms < cfg.poll_min_ms)
		cfg.poll_max_ms = cfg.poll_min_ms;
	return -1;
}
