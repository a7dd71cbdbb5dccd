/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  Which of a channel's keys a request may be verified with: those whose
 *	  validity window (not_before, not_after) holds the request's time,
 *	  found by the id the request names or tried in turn (verify_*.c).
 *
 * The keys themselves are parsed once per configuration generation
 * (config.c), checked when added (secrets.c) and used by crypto.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "paynotify.h"

/* Whether key is usable at unix time now (its validity window). */
bool
pn_key_active(const PnKey *key, int64 now)
{
	if (key->not_before != 0 && now < key->not_before)
		return false;
	if (key->not_after != 0 && now > key->not_after)
		return false;
	return true;
}

/* The channel's active key with exactly that id (case-sensitive), or NULL. */
const PnKey *
pn_channel_key(const PnChannel *ch, const char *key_id, int64 now)
{
	for (int i = 0; i < ch->nkeys; i++)
		if (strcmp(ch->keys[i].key_id, key_id) == 0)
			return pn_key_active(&ch->keys[i], now) ? &ch->keys[i] : NULL;
	return NULL;
}
