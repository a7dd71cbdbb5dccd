/*
 * paynotify-relay.c
 *	  Delivers paynotify's outbox events over HTTP in the Standard Webhooks
 *	  format (webhook-id, webhook-timestamp, webhook-signature), at least
 *	  once, to the endpoints of the table paynotify_endpoint.
 *
 * One loop, one database connection, one libcurl multi handle:
 *   1. paynotify_relay_fanout() turns new outbox rows into deliveries (its
 *      own short transaction);
 *   2. BEGIN; paynotify_relay_claim(batch) locks the due deliveries
 *      (FOR UPDATE SKIP LOCKED): the claim is the row lock, held by this
 *      open transaction;
 *   3. every claimed delivery is signed and POSTed, at most max_in_flight
 *      at once per endpoint (a column of the endpoint) and
 *      PAYNOTIFY_RELAY_MAX_IN_FLIGHT in all, each bounded by the request
 *      timeout; no request starts later than two timeouts after the claim;
 *   4. paynotify_relay_report() records each result (2xx: delivered; else a
 *      retry with backoff, or dead past the endpoint's horizon); COMMIT.
 * A relay that dies, or whose database connection breaks, rolls back: its
 * claims are due again at once for any relay (deliveries it had made are
 * made again: at least once).  The session's
 * idle_in_transaction_session_timeout ends a relay that hangs.
 *
 * Waking up: after a batch with work the loop goes on at once; when idle it
 * polls the due-deliveries index every PAYNOTIFY_RELAY_POLL_MIN ms, doubling
 * up to PAYNOTIFY_RELAY_POLL_MAX, and a NOTIFY on channel "paynotify" (when
 * the extension sends them) wakes it before that.
 *
 * SIGTERM / SIGINT: no new request starts; those in flight finish and are
 * reported; the claimed rest is released by the COMMIT; exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>

#define PN_PROGRAM "paynotify-relay"
#ifndef PAYNOTIFY_VERSION
#define PAYNOTIFY_VERSION "unknown"
#endif

#define SECRET_MAX 64			/* Standard Webhooks: 24 to 64 bytes */
#define ERROR_MAX 200

/* ---------------------------------------------------------------------
 * Settings: one table gives each its variable, flag, default and help.
 * --------------------------------------------------------------------- */

typedef struct relay_config
{
	const char *dsn;
	const char *schema;
	long long	batch;
	long long	fanout_batch;
	long long	max_in_flight;
	long long	timeout_ms;
	long long	connect_timeout_ms;
	long long	poll_min_ms;
	long long	poll_max_ms;
	long long	listen;
	long long	reconnect_max_ms;
	long long	verbose;
} relay_config;

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
	"libpq connection string or URI (empty: libpq defaults and PG* variables)"},
	{"PAYNOTIFY_RELAY_SCHEMA", "schema", "public", SETTING_STRING, 0, 0,
		offsetof(relay_config, schema),
	"schema of the paynotify extension (a plain identifier)"},
	{"PAYNOTIFY_RELAY_BATCH", "batch", "100", SETTING_NUMBER, 1, 10000,
		offsetof(relay_config, batch),
	"deliveries claimed per transaction"},
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
	{"PAYNOTIFY_RELAY_VERBOSE", "verbose", "0", SETTING_NUMBER, 0, 2,
		offsetof(relay_config, verbose),
	"1: log each failed attempt; 2: log every attempt"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))
#define NUMBER_AT(cfg, off) ((long long *) ((char *) (cfg) + (off)))
#define STRING_AT(cfg, off) ((const char **) ((char *) (cfg) + (off)))

/* ---------------------------------------------------------------------
 * One claimed delivery.
 * --------------------------------------------------------------------- */

typedef struct job
{
	const char *delivery_id;	/* text from the claim (points into res) */
	const char *webhook_id;
	const char *endpoint_id;
	const char *url;
	const char *body;
	int			body_len;
	int			max_in_flight;
	int		   *in_flight;		/* shared by the jobs of one endpoint */
	unsigned char secret[SECRET_MAX];
	int			secret_len;		/* -1: the secret did not decode */
	enum
	{
		JOB_WAITING, JOB_RUNNING, JOB_DONE
	}			state;
	long		status;			/* HTTP status, 0: none */
	char		error[ERROR_MAX];
	char		curl_error[CURL_ERROR_SIZE];
	CURL	   *easy;
	struct curl_slist *headers;
	struct timespec started;
} job;

static relay_config cfg;
static volatile sig_atomic_t stop_requested;
static bool once;

static void
pn_log(const char *fmt,...)
{
	va_list		ap;
	char		line[1024];
	size_t		n;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* one line each (libpq's messages end in a newline, some have several) */
	for (char *p = line; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	n = strlen(line);
	while (n > 0 && line[n - 1] == ' ')
		line[--n] = '\0';
	fprintf(stderr, "%s: %s\n", PN_PROGRAM, line);
}

static void
on_signal(int sig)
{
	(void) sig;
	stop_requested = 1;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps up to ms, returning early on a signal. */
static void
nap(long long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	if (!stop_requested)
		nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------
 * Settings and command line
 * --------------------------------------------------------------------- */

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
			"  --once            deliver what is due, then exit (0: all went, 1: some failed)\n"
			"  -h, --help        this text\n"
			"  -V, --version     the version\n\n"
			"Environment (default in parentheses):\n");
	for (size_t i = 0; i < NSETTINGS; i++)
		fprintf(out, "  %s (default: %s)\n      %s\n", settings[i].env,
				settings[i].default_value[0] ? settings[i].default_value : "empty",
				settings[i].help);
	fprintf(out, "\nThe database role needs only membership in paynotify_relay.\n");
}

/* -1: go on; else the exit status. */
static int
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

/* ---------------------------------------------------------------------
 * Signing
 * --------------------------------------------------------------------- */

/* "whsec_" + base64 -> bytes; -1 when it is not that. */
static int
decode_secret(const char *s, unsigned char *out)
{
	unsigned char buf[((SECRET_MAX + 2) / 3) * 3 + 3];
	size_t		len;
	int			n,
				pad = 0;

	if (strncmp(s, "whsec_", 6) != 0)
		return -1;
	s += 6;
	len = strlen(s);
	if (len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof(buf) - 1)
		return -1;
	n = EVP_DecodeBlock(buf, (const unsigned char *) s, (int) len);
	if (n < 0)
		return -1;
	if (s[len - 1] == '=')
		pad++;
	if (s[len - 2] == '=')
		pad++;
	n -= pad;
	if (n < 1 || n > SECRET_MAX)
		return -1;
	memcpy(out, buf, n);
	OPENSSL_cleanse(buf, sizeof(buf));
	return n;
}

/* "v1," + base64(HMAC-SHA256(secret, id "." ts "." body)) into out. */
static bool
sign(const job *j, long long ts, char *out, size_t outsz)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	size_t		idlen = strlen(j->webhook_id);
	size_t		n = idlen + 2 + 24 + (size_t) j->body_len;
	char	   *msg;
	int			plen;
	bool		ok;

	if (outsz < 3 + 4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1 || (msg = malloc(n)) == NULL)
		return false;
	plen = snprintf(msg, n, "%s.%lld.", j->webhook_id, ts);
	memcpy(msg + plen, j->body, j->body_len);
	ok = HMAC(EVP_sha256(), j->secret, j->secret_len, (const unsigned char *) msg,
			  (size_t) plen + j->body_len, mac, &maclen) != NULL;
	free(msg);
	if (!ok)
		return false;
	memcpy(out, "v1,", 3);
	EVP_EncodeBlock((unsigned char *) out + 3, mac, (int) maclen);
	return true;
}

/* ---------------------------------------------------------------------
 * HTTP
 * --------------------------------------------------------------------- */

static size_t
discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	(void) ptr;
	(void) userdata;
	return size * nmemb;
}

static bool
start_job(CURLM *multi, job *j)
{
	char		line[256];
	char		sig[128];
	long long	ts = (long long) time(NULL);
	struct curl_slist *h = NULL,
			   *t;

	j->state = JOB_DONE;
	if (j->secret_len < 0)
	{
		snprintf(j->error, sizeof(j->error), "endpoint secret is not whsec_ base64");
		return false;
	}
	if (!sign(j, ts, sig, sizeof(sig)))
	{
		snprintf(j->error, sizeof(j->error), "signing failed");
		return false;
	}
#define ADD(...) do { snprintf(line, sizeof(line), __VA_ARGS__); \
		t = curl_slist_append(h, line); if (t == NULL) goto oom; h = t; } while (0)
	ADD("Content-Type: application/json");
	ADD("webhook-id: %s", j->webhook_id);
	ADD("webhook-timestamp: %lld", ts);
	ADD("webhook-signature: %s", sig);
	ADD("User-Agent: %s/%s", PN_PROGRAM, PAYNOTIFY_VERSION);
	ADD("Expect:");
#undef ADD
	j->easy = curl_easy_init();
	if (j->easy == NULL)
		goto oom;
	j->headers = h;
	j->curl_error[0] = '\0';
	curl_easy_setopt(j->easy, CURLOPT_URL, j->url);
	curl_easy_setopt(j->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(j->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
	curl_easy_setopt(j->easy, CURLOPT_POSTFIELDSIZE, (long) j->body_len);
	curl_easy_setopt(j->easy, CURLOPT_TIMEOUT_MS, (long) cfg.timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) cfg.connect_timeout_ms);
	curl_easy_setopt(j->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(j->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->curl_error);
	curl_easy_setopt(j->easy, CURLOPT_PRIVATE, j);
	if (curl_multi_add_handle(multi, j->easy) != CURLM_OK)
	{
		curl_easy_cleanup(j->easy);
		j->easy = NULL;
		goto oom;
	}
	clock_gettime(CLOCK_MONOTONIC, &j->started);
	j->state = JOB_RUNNING;
	return true;
oom:
	curl_slist_free_all(h);
	j->headers = NULL;
	snprintf(j->error, sizeof(j->error), "out of memory");
	return false;
}

static void
finish_job(CURLM *multi, job *j, CURLcode rc)
{
	long		code = 0;

	curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &code);
	if (rc == CURLE_OK)
	{
		j->status = code;
		if (code < 200 || code > 299)
			snprintf(j->error, sizeof(j->error), "HTTP %ld", code);
	}
	else
		snprintf(j->error, sizeof(j->error), "%.190s",
				 j->curl_error[0] ? j->curl_error : curl_easy_strerror(rc));
	curl_multi_remove_handle(multi, j->easy);
	curl_easy_cleanup(j->easy);
	curl_slist_free_all(j->headers);
	j->easy = NULL;
	j->headers = NULL;
	j->state = JOB_DONE;
	if (cfg.verbose >= 2 || (cfg.verbose >= 1 && (j->status < 200 || j->status > 299)))
		pn_log("delivery %s (%s) to endpoint %s: %s", j->delivery_id, j->webhook_id,
			   j->endpoint_id, j->status >= 200 && j->status <= 299 ? "delivered" : j->error);
}

/*
 * POSTs the jobs: starts what the limits allow, until every job is done or
 * may no longer start (deadline, SIGTERM) and none is running.
 */
static void
run_jobs(CURLM *multi, job *jobs, int n)
{
	long long	deadline = now_ms() + 2 * cfg.timeout_ms;
	int			running = 0;

	for (;;)
	{
		bool		may_start = !stop_requested && now_ms() < deadline;
		int			still,
					left;
		CURLMsg    *msg;

		for (int i = 0; may_start && i < n && running < cfg.max_in_flight; i++)
		{
			if (jobs[i].state != JOB_WAITING || *jobs[i].in_flight >= jobs[i].max_in_flight)
				continue;
			if (start_job(multi, &jobs[i]))
			{
				running++;
				(*jobs[i].in_flight)++;
			}
		}
		if (running == 0)
			break;
		curl_multi_perform(multi, &still);
		while ((msg = curl_multi_info_read(multi, &left)) != NULL)
		{
			job		   *j = NULL;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &j);
			if (j == NULL)
				continue;
			finish_job(multi, j, msg->data.result);
			running--;
			(*j->in_flight)--;
		}
		if (running > 0)
			curl_multi_poll(multi, NULL, 0, 50, NULL);
	}
}

/* ---------------------------------------------------------------------
 * Database
 * --------------------------------------------------------------------- */

static bool
command_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	bool		ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		pn_log("\"%s\" failed: %s", sql, PQerrorMessage(conn));
	PQclear(res);
	return ok;
}

static PGconn *
connect_db(void)
{
	const char *keys[] = {"application_name", "connect_timeout", "dbname", NULL};
	const char *vals[] = {PN_PROGRAM, "5", cfg.dsn, NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 1);
	char		sql[128];

	if (PQstatus(conn) != CONNECTION_OK)
	{
		pn_log("cannot connect to the database: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	/* a relay that hangs inside a batch gives its claims back */
	snprintf(sql, sizeof(sql), "SET idle_in_transaction_session_timeout = %lld",
			 3 * cfg.timeout_ms + 30000);
	/*
	 * The relay's own commits need not wait for the WAL flush: a fan-out is
	 * one transaction (outbox rows out, deliveries in), so a crash loses it
	 * whole and the outbox rows come back; a lost result means a delivery
	 * made again.  Either way at least once, and the round is shorter.
	 */
	if (!command_ok(conn, sql) ||
		!command_ok(conn, "SET synchronous_commit = off") ||
		(cfg.listen && !command_ok(conn, "LISTEN paynotify")))
	{
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* A growing string for the array literals of the report. */
typedef struct strbuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		failed;
} strbuf;

static void
sb_put(strbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap)
	{
		size_t		ncap = (b->len + n + 1) * 2;
		char	   *nd = realloc(b->data, ncap);

		if (nd == NULL)
		{
			b->failed = true;
			return;
		}
		b->data = nd;
		b->cap = ncap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* s as a double-quoted array element, or NULL for s == NULL. */
static void
sb_element(strbuf *b, const char *s)
{
	if (b->len > 1)
		sb_put(b, ",", 1);
	if (s == NULL)
	{
		sb_put(b, "NULL", 4);
		return;
	}
	sb_put(b, "\"", 1);
	for (; *s; s++)
	{
		if (*s == '"' || *s == '\\')
			sb_put(b, "\\", 1);
		sb_put(b, s, 1);
	}
	sb_put(b, "\"", 1);
}

/* Records the done jobs; false on a database error. */
static bool
report(PGconn *conn, job *jobs, int n, int *failed)
{
	strbuf		arr[3] = {{0}};
	char		sql[256];
	const char *params[3];
	PGresult   *res;
	bool		ok = true;
	int			done = 0;

	for (int k = 0; k < 3; k++)
		sb_put(&arr[k], "{", 1);
	for (int i = 0; i < n; i++)
	{
		char		status[16];
		bool		good;

		if (jobs[i].state != JOB_DONE)
			continue;
		good = jobs[i].status >= 200 && jobs[i].status <= 299;
		if (!good)
			(*failed)++;
		snprintf(status, sizeof(status), "%ld", jobs[i].status);
		sb_element(&arr[0], jobs[i].delivery_id);
		sb_element(&arr[1], jobs[i].status ? status : NULL);
		sb_element(&arr[2], good ? NULL : jobs[i].error);
		done++;
	}
	for (int k = 0; k < 3; k++)
	{
		sb_put(&arr[k], "}", 1);
		ok = ok && !arr[k].failed;
		params[k] = arr[k].data;
	}
	if (!ok)
		pn_log("out of memory");
	else if (done > 0)
	{
		snprintf(sql, sizeof(sql),
				 "SELECT %s.paynotify_relay_report($1::bigint[], $2::integer[], $3::text[])",
				 cfg.schema);
		res = PQexecParams(conn, sql, 3, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			pn_log("report failed: %s", PQerrorMessage(conn));
			ok = false;
		}
		PQclear(res);
	}
	for (int k = 0; k < 3; k++)
		free(arr[k].data);
	return ok;
}

/*
 * One round: fan out, claim, deliver, report.  Returns the number of
 * outbox events and deliveries handled (0: nothing to do), -1 on a
 * database error (the caller reconnects).
 */
static int
round_once(PGconn *conn, CURLM *multi, int *failed)
{
	char		sql[256];
	char		limit[24];
	const char *params[1] = {limit};
	PGresult   *res;
	int			taken,
				n;
	job		   *jobs;
	int		   *counts;
	bool		ok;

	snprintf(limit, sizeof(limit), "%lld", cfg.fanout_batch);
	snprintf(sql, sizeof(sql), "SELECT %s.paynotify_relay_fanout($1::integer)", cfg.schema);
	res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pn_log("fan-out failed: %s", PQerrorMessage(conn));
		PQclear(res);
		return -1;
	}
	taken = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);

	if (!command_ok(conn, "BEGIN"))
		return -1;
	snprintf(limit, sizeof(limit), "%lld", cfg.batch);
	snprintf(sql, sizeof(sql),
			 "SELECT delivery_id, webhook_id, endpoint_id, url, secret, max_in_flight, body"
			 " FROM %s.paynotify_relay_claim($1::integer)", cfg.schema);
	res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		pn_log("claim failed: %s", PQerrorMessage(conn));
		PQclear(res);
		return -1;
	}
	n = PQntuples(res);
	if (n == 0)
	{
		PQclear(res);
		return command_ok(conn, "COMMIT") ? taken : -1;
	}
	jobs = calloc(n, sizeof(job));
	counts = calloc(n, sizeof(int));
	if (jobs == NULL || counts == NULL)
	{
		pn_log("out of memory");
		free(jobs);
		free(counts);
		for (int i = 0; i < n; i++)
			OPENSSL_cleanse(PQgetvalue(res, i, 4), (size_t) PQgetlength(res, i, 4));
		PQclear(res);
		return -1;
	}
	for (int i = 0; i < n; i++)
	{
		job		   *j = &jobs[i];

		j->delivery_id = PQgetvalue(res, i, 0);
		j->webhook_id = PQgetvalue(res, i, 1);
		j->endpoint_id = PQgetvalue(res, i, 2);
		j->url = PQgetvalue(res, i, 3);
		j->secret_len = decode_secret(PQgetvalue(res, i, 4), j->secret);
		j->max_in_flight = atoi(PQgetvalue(res, i, 5));
		if (j->max_in_flight < 1)
			j->max_in_flight = 1;
		j->body = PQgetvalue(res, i, 6);
		j->body_len = PQgetlength(res, i, 6);
		j->state = JOB_WAITING;
		/* the counter of the first job of the same endpoint (rows are few) */
		j->in_flight = &counts[i];
		for (int k = 0; k < i; k++)
			if (strcmp(jobs[k].endpoint_id, j->endpoint_id) == 0)
			{
				j->in_flight = jobs[k].in_flight;
				break;
			}
	}
	run_jobs(multi, jobs, n);
	ok = report(conn, jobs, n, failed) && command_ok(conn, "COMMIT");
	for (int i = 0; i < n; i++)
	{
		OPENSSL_cleanse(jobs[i].secret, sizeof(jobs[i].secret));
		/* and the whsec_ text the claim returned */
		OPENSSL_cleanse(PQgetvalue(res, i, 4), (size_t) PQgetlength(res, i, 4));
	}
	free(jobs);
	free(counts);
	PQclear(res);
	return ok ? taken + n : -1;
}

/*
 * Waits up to ms for a NOTIFY (or just sleeps when not listening).
 * Returns false when the connection is broken.
 */
static bool
wait_for_work(PGconn *conn, long long ms)
{
	int			sock = PQsocket(conn);
	fd_set		rd;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	PGnotify   *note;

	if (sock < 0)
		return false;
	if (stop_requested)
		return true;
	FD_ZERO(&rd);
	FD_SET(sock, &rd);
	if (select(sock + 1, &rd, NULL, NULL, &tv) < 0 && errno != EINTR)
		return false;
	if (!PQconsumeInput(conn))
	{
		pn_log("database connection lost: %s", PQerrorMessage(conn));
		return false;
	}
	while ((note = PQnotifies(conn)) != NULL)
		PQfreemem(note);
	return true;
}

int
main(int argc, char **argv)
{
	int			rc = load_config(argc, argv);
	struct sigaction sa;
	CURLM	   *multi;
	PGconn	   *conn = NULL;
	long long	idle_ms,
				backoff_ms = 100;
	int			failed = 0;

	if (rc >= 0)
		return rc;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (multi = curl_multi_init()) == NULL)
	{
		pn_log("libcurl initialisation failed");
		return 1;
	}
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) cfg.max_in_flight);
	pn_log("started (version %s, schema %s)", PAYNOTIFY_VERSION, cfg.schema);
	idle_ms = cfg.poll_min_ms;
	while (!stop_requested)
	{
		int			got;

		if (conn == NULL)
		{
			conn = connect_db();
			if (conn == NULL)
			{
				if (once)
				{
					rc = 1;
					break;
				}
				nap(backoff_ms);
				backoff_ms = backoff_ms * 2 > cfg.reconnect_max_ms ? cfg.reconnect_max_ms : backoff_ms * 2;
				continue;
			}
		}
		got = round_once(conn, multi, &failed);
		if (got < 0)
		{
			/* a broken connection or a failing statement: start afresh, slowly */
			PQfinish(conn);
			conn = NULL;
			if (once)
			{
				rc = 1;
				break;
			}
			nap(backoff_ms);
			backoff_ms = backoff_ms * 2 > cfg.reconnect_max_ms ? cfg.reconnect_max_ms : backoff_ms * 2;
			continue;
		}
		backoff_ms = 100;
		if (got > 0)
		{
			idle_ms = cfg.poll_min_ms;
			continue;
		}
		if (once)
			break;
		if (!wait_for_work(conn, idle_ms))
		{
			PQfinish(conn);
			conn = NULL;
			continue;
		}
		idle_ms = idle_ms * 2 > cfg.poll_max_ms ? cfg.poll_max_ms : idle_ms * 2;
	}
	if (conn != NULL)
		PQfinish(conn);
	curl_multi_cleanup(multi);
	curl_global_cleanup();
	pn_log("stopped");
	if (rc < 0)
		rc = once && failed > 0 ? 1 : 0;
	return rc;
}
