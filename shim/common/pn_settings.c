/*
 * pn_settings.c
 *	  The settings of the shim's daemons (paynotify-relay,
 *	  paynotify-reconcile): one table gives each setting its environment
 *	  variable, flag, default, bounds and help; the environment is read
 *	  first, then the options override it.
 */
#include "pn_common.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUMBER_AT(cfg, off) ((long long *) ((char *) (cfg) + (off)))
#define STRING_AT(cfg, off) ((const char **) ((char *) (cfg) + (off)))

/* A whole number from min to max, all of s (no sign, no space). */
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

/* A plain lower-case identifier (pasted into statements as a schema name). */
bool
pn_identifier_valid(const char *s)
{
	size_t		n = 0;

	if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			return false;
	return n <= 63;
}

/*
 * Sets s in cfg from value (from_flag: given as --flag, else from the
 * environment); false, logged, when a number is out of bounds.
 */
bool
pn_setting_set(const pn_setting *s, void *cfg, const char *value, bool from_flag)
{
	if (s->kind == PN_SETTING_STRING)
	{
		*STRING_AT(cfg, s->offset) = value;
		return true;
	}
	if (!parse_number(value, s->min, s->max, NUMBER_AT(cfg, s->offset)))
	{
		if (from_flag)
			pn_log("--%s must be a whole number from %lld to %lld", s->flag, s->min, s->max);
		else
			pn_log("%s must be a whole number from %lld to %lld", s->env, s->min, s->max);
		return false;
	}
	return true;
}

/*
 * Every setting from its environment variable (an empty number: its
 * default) or its default, and its long option (val 1000 + index) in
 * longopts[0 .. n).  False, logged, on a bad value.
 */
bool
pn_settings_load_env(const pn_setting *settings, size_t n, void *cfg, struct option *longopts)
{
	for (size_t i = 0; i < n; i++)
	{
		const char *v = getenv(settings[i].env);

		if (v == NULL || (v[0] == '\0' && settings[i].kind == PN_SETTING_NUMBER))
			v = settings[i].default_value;
		if (!pn_setting_set(&settings[i], cfg, v, false))
			return false;
		longopts[i].name = settings[i].flag;
		longopts[i].has_arg = required_argument;
		longopts[i].flag = NULL;
		longopts[i].val = PN_SETTING_OPTION + (int) i;
	}
	return true;
}

/* The usage lines of the settings' options: "  --flag=N". */
void
pn_settings_usage_options(FILE *out, const pn_setting *settings, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  --%s=%s\n", settings[i].flag,
				settings[i].kind == PN_SETTING_NUMBER ? "N" : "TEXT");
}

/* The usage lines of the environment: each variable, its default, its help. */
void
pn_settings_usage_env(FILE *out, const pn_setting *settings, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %s (default: %s)\n      %s\n", settings[i].env,
				settings[i].default_value[0] ? settings[i].default_value : "empty",
				settings[i].help);
}

/*
 * The whole command line of a daemon: the environment, then the options
 * (--once, --help, --version and each setting's flag), then the checks.
 * -1: go on; else the exit status (0 after --help or --version, 2 on a
 * bad option or value, said on standard error).
 */
int
pn_settings_load(int argc, char **argv, const pn_command_line *cl)
{
	struct option *longopts = calloc(cl->n + 4, sizeof(struct option));
	const char **schema = STRING_AT(cl->cfg, cl->schema_offset);
	int			c,
				idx,
				rc = -1;

	if (longopts == NULL)
	{
		pn_log("out of memory");
		return 2;
	}
	if (!pn_settings_load_env(cl->settings, cl->n, cl->cfg, longopts))
	{
		free(longopts);
		return 2;
	}
	longopts[cl->n] = (struct option) {"once", no_argument, NULL, 'o'};
	longopts[cl->n + 1] = (struct option) {"help", no_argument, NULL, 'h'};
	longopts[cl->n + 2] = (struct option) {"version", no_argument, NULL, 'V'};
	longopts[cl->n + 3] = (struct option) {NULL, 0, NULL, 0};

	while (rc < 0 && (c = getopt_long(argc, argv, "hV", longopts, &idx)) != -1)
	{
		if (c >= PN_SETTING_OPTION && c < PN_SETTING_OPTION + (int) cl->n)
		{
			const pn_setting *s = &cl->settings[c - PN_SETTING_OPTION];

			if (!pn_setting_set(s, cl->cfg, optarg, true))
				rc = 2;
			else if (s->offset == cl->dsn_offset && !cl->dsn_ok(optarg))
			{
				pn_log("--dsn must not contain a password: every local user can read the command line;"
					   " use PAYNOTIFY_DSN, PGPASSWORD or a .pgpass file");
				rc = 2;
			}
			continue;
		}
		switch (c)
		{
			case 'o':
				*cl->once = true;
				break;
			case 'h':
				cl->usage(stdout);
				rc = 0;
				break;
			case 'V':
				printf("%s %s\n", cl->program, cl->version);
				rc = 0;
				break;
			default:
				fprintf(stderr, "Try '%s --help'.\n", cl->program);
				rc = 2;
				break;
		}
	}
	free(longopts);
	if (rc >= 0)
		return rc;
	if (optind < argc)
	{
		fprintf(stderr, "%s: unexpected argument \"%s\"\nTry '%s --help'.\n",
				cl->program, argv[optind], cl->program);
		return 2;
	}
	if ((*schema)[0] == '\0')
		*schema = "public";
	if (!pn_identifier_valid(*schema))
	{
		pn_log("%s must be a plain lower-case identifier", cl->schema_env);
		return 2;
	}
	return -1;
}
