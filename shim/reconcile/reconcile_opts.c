/*
 * reconcile_opts.c
 *	  paynotify-reconcile's settings: one table gives each its variable,
 *	  flag, default and help (read by shim/common's pn_settings.c); the
 *	  environment is read first, then the options.
 */
#include "reconcile.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

reconcile_config cfg;
bool		once;

static const pn_setting settings[] = {
	{"PAYNOTIFY_DSN", "dsn", "", PN_SETTING_STRING, 0, 0, offsetof(reconcile_config, dsn),
	"libpq connection string or URI (empty: libpq defaults and PG* variables); --dsn refuses a password"},
	{"PAYNOTIFY_RECONCILE_SCHEMA", "schema", "public", PN_SETTING_STRING, 0, 0,
		offsetof(reconcile_config, schema),
	"schema of the paynotify extension (a plain identifier)"},
	{"PAYNOTIFY_RECONCILE_BATCH", "batch", "10", PN_SETTING_NUMBER, 1, 1000,
		offsetof(reconcile_config, batch),
	"due queries, and due bills, claimed per round (max_rows of paynotify_query_due and paynotify_bill_due)"},
	{"PAYNOTIFY_RECONCILE_RATE", "rate", "5", PN_SETTING_NUMBER, 1, 1000,
		offsetof(reconcile_config, rate),
	"requests per second at most, per channel"},
	{"PAYNOTIFY_RECONCILE_INTERVAL", "interval", "10000", PN_SETTING_NUMBER, 100, 3600000,
		offsetof(reconcile_config, interval_ms),
	"milliseconds between rounds when nothing was due"},
	{"PAYNOTIFY_RECONCILE_TIMEOUT", "timeout", "10000", PN_SETTING_NUMBER, 100, 600000,
		offsetof(reconcile_config, timeout_ms),
	"whole-request timeout in milliseconds"},
	{"PAYNOTIFY_RECONCILE_CONNECT_TIMEOUT", "connect-timeout", "3000", PN_SETTING_NUMBER, 100, 600000,
		offsetof(reconcile_config, connect_timeout_ms),
	"TCP/TLS connect timeout in milliseconds"},
	{"PAYNOTIFY_RECONCILE_BACKOFF_MAX", "backoff-max", "60000", PN_SETTING_NUMBER, 1000, 3600000,
		offsetof(reconcile_config, backoff_max_ms),
	"cap in milliseconds on a channel's back-off after no response, 5xx or 429 (starts at 1000, doubles; Retry-After within it)"},
	{"PAYNOTIFY_RECONCILE_RECONNECT_MAX", "reconnect-max", "5000", PN_SETTING_NUMBER, 100, 600000,
		offsetof(reconcile_config, reconnect_max_ms),
	"cap in milliseconds on the database reconnect back-off (starts at 100)"},
	{"PAYNOTIFY_RECONCILE_MAX_RESPONSE", "max-response", "1048576", PN_SETTING_NUMBER, 1024, 67108864,
		offsetof(reconcile_config, max_response),
	"largest response body of a query in bytes (a larger one is no response)"},
	{"PAYNOTIFY_RECONCILE_MAX_BILL", "max-bill", "268435456", PN_SETTING_NUMBER, 1048576, 536870912,
		offsetof(reconcile_config, max_bill),
	"largest response body of a bill's fetch in bytes (a day's bill file or page; at most 512 MB, which the database takes as one value)"},
	{"PAYNOTIFY_RECONCILE_BILL_TIMEOUT", "bill-timeout", "300000", PN_SETTING_NUMBER, 100, 3600000,
		offsetof(reconcile_config, bill_timeout_ms),
	"whole-request timeout of a bill's fetch in milliseconds"},
	{"PAYNOTIFY_RECONCILE_ALLOW_PRIVATE", "allow-private", "0", PN_SETTING_NUMBER, 0, 1,
		offsetof(reconcile_config, allow_private),
	"1: also connect to loopback, private, link-local, own and other non-public addresses (0: refused, checked on every connection)"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static void
usage(FILE *out)
{
	fprintf(out,
			"Usage: %s [options]\n"
			"Asks the payment gateways for the orders paynotify expected a notification of\n"
			"and did not get: claims the due queries (paynotify_query_due), sends each\n"
			"request as the database built and signed it (paynotify_query_request) and\n"
			"hands the response back (paynotify_query_apply).  Then fetches the planned\n"
			"daily bills the same way, step by step (paynotify_bill_due,\n"
			"paynotify_bill_request, paynotify_bill_apply, which imports the bill).\n"
			"Holds no gateway key.  Runs until SIGTERM.\n\n"
			"Options (each overrides its environment variable):\n", PN_PROGRAM);
	pn_settings_usage_options(out, settings, NSETTINGS);
	fprintf(out,
			"  --once            one round, then exit; prints \"claimed N, applied N, failed N\"\n"
			"                    (and \"; bills: claimed N, imported N, failed N\" when bills were\n"
			"                    due); exit status 0 when every claimed query was answered and\n"
			"                    applied and every claimed bill imported (or none was due)\n"
			"  -h, --help        this text\n"
			"  -V, --version     the version\n\n"
			"Environment (default in parentheses):\n");
	pn_settings_usage_env(out, settings, NSETTINGS);
	fprintf(out, "\nExit status: 0 stopped by SIGTERM/SIGINT (or --once: all applied);\n"
			"1 --once: a query failed, or a database error; 2 a bad option or setting.\n"
			"\nThe database role needs the relay capacity in the database it connects to:\n"
			"  SELECT paynotify_grant('ROLE'::regrole, 'relay');  (there, as the extension's owner)\n"
			"Its password goes in the file PGPASSFILE names (default ~/.pgpass; mode 0600),\n"
			"one line host:port:database:user:password, never in --dsn.\n"
			"Each query is logged (channel, order, HTTP status, outcome); the requests'\n"
			"headers never are.\n");
}

/* -1: go on; else the exit status. */
int
load_config(int argc, char **argv)
{
	const pn_command_line cl = {
		PN_PROGRAM, PAYNOTIFY_VERSION, settings, NSETTINGS, &cfg,
		offsetof(reconcile_config, dsn), pn_pq_dsn_without_password,
		offsetof(reconcile_config, schema), "PAYNOTIFY_RECONCILE_SCHEMA", usage, &once
	};

	memset(&cfg, 0, sizeof(cfg));
	return pn_settings_load(argc, argv, &cl);
}
