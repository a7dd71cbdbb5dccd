/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  Validators for a channel's gateway settings (the settings jsonb of
 *	  paynotify_channel), used by each gateway's load_settings.
 *
 * These run at configuration time and when the cache loads, never on a
 * request: unlike json.c, they raise on bad input, with a message that
 * names the setting but never its value.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/jsonb.h"

#include "paynotify.h"

/* A text setting; NULL when absent and not required. */
char *
pn_setting_text(Jsonb *settings, const char *key, bool required)
{
	JsonbValue	buf;
	JsonbValue *v = pn_json_value(settings, key, &buf);

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("setting \"%s\" is required", key)));
		return NULL;
	}
	if (v->type != jbvString || v->val.string.len == 0 ||
		memchr(v->val.string.val, '\0', v->val.string.len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" must be a non-empty string", key)));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* An integer setting within [min, max], dflt when absent. */
int
pn_setting_int(Jsonb *settings, const char *key, int dflt, int min, int max)
{
	int64		v;

	if (!pn_json_present(settings, key))
		return dflt;
	if (!pn_json_int64(settings, key, &v) || v < min || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" must be an integer between %d and %d",
						key, min, max)));
	return (int) v;
}

/* A boolean setting: 1 true, 0 false, -1 absent. */
int
pn_setting_bool(Jsonb *settings, const char *key)
{
	bool		b;

	if (!pn_json_present(settings, key))
		return -1;
	if (!pn_json_bool(settings, key, &b))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" must be true or false", key)));
	return b ? 1 : 0;
}

/*
 * Refuse any settings key not in allowed (NULL-terminated): a typo such as
 * "mch_id" must not silently disable a check.
 */
void
pn_settings_only(Jsonb *settings, const char *gateway, const char *const *allowed)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (!JB_ROOT_IS_OBJECT(settings))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s settings must be a JSON object", gateway)));
	it = JsonbIteratorInit(&settings->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		known = false;
		StringInfoData list;

		if (tok != WJB_KEY)
			continue;
		for (int i = 0; allowed[i]; i++)
			if (strlen(allowed[i]) == (size_t) v.val.string.len &&
				memcmp(allowed[i], v.val.string.val, v.val.string.len) == 0)
				known = true;
		if (known)
			continue;
		initStringInfo(&list);
		for (int i = 0; allowed[i]; i++)
			appendStringInfo(&list, "%s%s", i ? ", " : "", allowed[i]);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown %s setting \"%.*s\"", gateway,
						Min(v.val.string.len, 64), v.val.string.val),
				 errhint("Settings for %s are %s.", gateway, list.data)));
	}
}
