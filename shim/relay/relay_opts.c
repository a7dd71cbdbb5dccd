/*
 * relay_opts.c
 *	  paynotify-relay's settings: one table gives each its variable, flag,
 *	  default and help (read by shim/common's pn_settings.c); the
 *	  environment is read first, then the options.
 */
#include "relay.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

relay_config cfg;
bool		once;

static const pn_setting settings[] = {
	{"PAYNOTIFY_DSN", "dsn", "", PN_SETTING_STRING, 0, 0, offsetof(relay_config, dsn),
	"libpq connection string or URI (empty: libpq defaults and PG* variables); --dsn refuses a password"},
	{"PAYNOTIFY_RELAY_SCHEMA", "schema", "public", PN_SETTING_STRING, 0, 0,
		offsetof(relay_config, schema),
	"schema of the paynotify extension (a plain identifier)"},
	{"PAYNOTIFY_RELAY_BATCH", "batch", "100", PN_SETTING_NUMBER, 1, 10000,
		offsetof(relay_config, batch),
	"deliveries leased per claim (at most the free slots of --max-in-flight; per endpoint at most its max_in_flight column less its leases in flight)"},
	{"PAYNOTIFY_RELAY_FANOUT_BATCH", "fanout-batch", "1000", PN_SETTING_NUMBER, 1, 100000,
		offsetof(relay_config, fanout_batch),
	"outbox events turned into deliveries per round"},
	{"PAYNOTIFY_RELAY_MAX_IN_FLIGHT", "max-in-flight", "64", PN_SETTING_NUMBER, 1, 4096,
		offsetof(relay_config, max_in_flight),
	"requests kept in flight at once in all, a slot refilled as soon as a request ends (per endpoint: its max_in_flight column)"},
	{"PAYNOTIFY_RELAY_TIMEOUT", "timeout", "10000", PN_SETTING_NUMBER, 100, 600000,
		offsetof(relay_config, timeout_ms),
	"whole-request timeout in milliseconds; a timeout is a failed attempt (the database session's lock_timeout is a quarter of it, at most 1 s)"},
	{"PAYNOTIFY_RELAY_CONNECT_TIMEOUT", "connect-timeout", "3000", PN_SETTING_NUMBER, 100, 600000,
		offsetof(relay_config, connect_timeout_ms),
	"TCP/TLS connect timeout in milliseconds"},
	{"PAYNOTIFY_RELAY_POLL_MIN", "poll-min", "10", PN_SETTING_NUMBER, 1, 60000,
		offsetof(relay_config, poll_min_ms),
	"first idle poll interval in milliseconds (doubles while idle)"},
	{"PAYNOTIFY_RELAY_POLL_MAX", "poll-max", "1000", PN_SETTING_NUMBER, 1, 600000,
		offsetof(relay_config, poll_max_ms),
	"longest idle poll interval in milliseconds (also how late a retry may start)"},
	{"PAYNOTIFY_RELAY_LISTEN", "listen", "1", PN_SETTING_NUMBER, 0, 1,
		offsetof(relay_config, listen),
	"1: also LISTEN on channel \"paynotify\" to wake at once when NOTIFY is on"},
	{"PAYNOTIFY_RELAY_RECONNECT_MAX", "reconnect-max", "5000", PN_SETTING_NUMBER, 100, 600000,
		offsetof(relay_config, reconnect_max_ms),
	"cap in milliseconds on the reconnect back-off (starts at 100)"},
	{"PAYNOTIFY_RELAY_ALLOW_PRIVATE", "allow-private", "0", PN_SETTING_NUMBER, 0, 1,
		offsetof(relay_config, allow_private),
	"1: also connect to loopback, private, link-local, own and other non-public addresses (0: refused, checked on every connection)"},
	{"PAYNOTIFY_RELAY_VERBOSE", "verbose", "0", PN_SETTING_NUMBER, 0, 2,
		offsetof(relay_config, verbose),
	"1: log each failed attempt; 2: log every attempt"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

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
	pn_settings_usage_options(out, settings, NSETTINGS);
	fprintf(out,
			"  --once            deliver what is due, then exit; prints one line per failed\n"
			"                    delivery with its reason (as in paynotify_delivery.last_error)\n"
			"                    and last \"claimed N, delivered N, failed N\"; exit status 0\n"
			"                    when every delivery succeeded (or none was due), else 1\n"
			"  -h, --help        this text\n"
			"  -V, --version     the version\n\n"
			"Environment (default in parentheses):\n");
	pn_settings_usage_env(out, settings, NSETTINGS);
	fprintf(out, "\nThe database role needs only the relay capacity in the database it connects to:\n"
			"  SELECT paynotify_grant('ROLE'::regrole, 'relay');  (there, as the extension's owner)\n"
			"Its password goes in the file PGPASSFILE names (default ~/.pgpass; mode 0600),\n"
			"one line host:port:database:user:password, never in --dsn.\n"
			"PAYNOTIFY_RELAY_SCHEMA is the extension's schema in that database:\n"
			"  SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'paynotify';\n");
}

/* -1: go on; else the exit status. */
int
load_config(int argc, char **argv)
{
	const pn_command_line cl = {
		PN_PROGRAM, PAYNOTIFY_VERSION, settings, NSETTINGS, &cfg,
		offsetof(relay_config, dsn), pn_pq_dsn_without_password,
		offsetof(relay_config, schema), "PAYNOTIFY_RELAY_SCHEMA", usage, &once
	};

	memset(&cfg, 0, sizeof(cfg));
	return pn_settings_load(argc, argv, &cl);
}
