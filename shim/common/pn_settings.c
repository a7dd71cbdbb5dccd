/*
 * pn_settings.c
 *	  The settings of the shim's daemons (paynotify-relay,
 *	  paynotify-reconcile): one table gives each setting its environment
 *	  variable, flag, default, bounds and help; the environment is read
 *	  first, then the options override it.
 */
#include "pn_common.h"

#include <errno.h>
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
