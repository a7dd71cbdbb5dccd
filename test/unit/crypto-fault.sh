#!/usr/bin/env bash
# A MAC that OpenSSL failed to compute verifies nothing.  Starts a throwaway
# cluster whose backends get EVP_MAC_init from a preloaded library that
# always fails (as a FIPS provider does for a short HMAC key), then delivers
# a Stripe event twice: with the right v1, and with v1 = 64 zeros (what a
# zero-filled MAC buffer would equal).  Both must be rejected, nothing
# logged, and the server log must say why.
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh

dir=$(pn_tmp_dir mac)
port=$(pn_free_port)
trap 'pn_cluster_stop "$dir"; remove_tmp "$dir"' EXIT

cat >"$dir/failmac.c" <<'C'
#include <stddef.h>
/* the OpenSSL 3 signature; every call fails */
int EVP_MAC_init(void *ctx, const unsigned char *key, size_t keylen, const void *params);
int
EVP_MAC_init(void *ctx, const unsigned char *key, size_t keylen, const void *params)
{
	(void) ctx; (void) key; (void) keylen; (void) params;
	return 0;
}
C
${CC:-cc} -shared -fPIC -o "$dir/failmac.so" "$dir/failmac.c"
chmod 755 "$dir/failmac.so"

LD_PRELOAD="$dir/failmac.so" pn_fixture_cluster "$dir" "$port"
sql() { pn_psql "$dir" "$port" "$@"; }
pn_fixture_load "$dir" "$port" postgres
out=$(sql -At <<'SQL'
SELECT pay.paynotify_add_channel('mac', 'stripe', '{}');
SELECT pay.paynotify_add_key('mac', 's1', t.secret(1));
SELECT t.set_order('MAC-1', 'pending', 100);
CREATE TABLE t.ev AS SELECT '{"id": "evt_mac_1", "object": "event", "type": "payment_intent.succeeded",
	"livemode": false, "data": {"object": {"id": "pi_mac_1", "amount_received": 100,
	"currency": "usd", "metadata": {"order_id": "MAC-1"}}}}'::text AS body;
SET paynotify.now = 1767300002;
-- right MAC, then all zeros
SELECT h.status || ' ' || h.outcome FROM t.ev, pay.paynotify_handle('mac',
	jsonb_build_object('Stripe-Signature', 't=1767300000,v1=' ||
		t.hmac_sha256(convert_to(t.secret(1), 'UTF8'), convert_to('1767300000.' || body, 'UTF8'))),
	body) h;
SELECT h.status || ' ' || h.outcome FROM t.ev, pay.paynotify_handle('mac',
	jsonb_build_object('Stripe-Signature', 't=1767300000,v1=' || repeat('0', 64)), body) h;
SELECT 'logged ' || count(*) FROM pay.payment_notify_log WHERE channel = 'mac';
SELECT 'order ' || status FROM public.orders WHERE order_no = 'MAC-1';
SQL
)
echo "$out"
want=$'401 rejected\n401 rejected\nlogged 0\norder pending'
# check, check_cmd, summary: test/lib.sh
check "with HMAC failing, a Stripe event is rejected (right MAC and zero MAC alike)" \
    "$want" "$(echo "$out" | grep -v '^$')"
check_cmd "the server log reports the HMAC failure" \
    grep -q 'HMAC-SHA256 failed for a key of channel "mac"' "$dir/server.log"
check_cmd "no secret reached the server log" \
    bash -c '! grep -q -e whsec_ "$1"' _ "$dir/server.log"
summary
