#!/usr/bin/env bash
# The gateways' documented sample notifications (the samples manifest,
# test/vectors/samples/manifest.json) end to end: PostgreSQL with the
# extension, paynotify-cgi in FastCGI mode behind nginx, all on loopback in
# a temporary directory (test/e2e/stack.sh), and paynotify-send --payload
# as the gateway.  Each case gets a channel of its own configured as its
# entry says, its order in the entry's "before" state; its payload is sent
# once over HTTP, signed (WeChat Pay: encrypted) afresh at the real clock,
# and the reply's outcome and acknowledgement, the order's status, the
# outbox events and the payment and refund recorded must be the entry's
# "expected" (an agreement notice's agreement recorded in
# paynotify_agreement too); a second delivery must be a duplicate.  Cases not marked
# implemented are printed (what happened), not counted.  test/e2e/samples.py
# does the per-case work.
#
#   test/e2e/samples.sh
# Environment: PN_SAMPLES (default test/vectors/samples; its manifest.json
# and payloads), PN_VECTORS (default test/vectors; the keys the manifest's
# configs name), and as for every e2e script PG_CONFIG (which PostgreSQL
# the extension is installed into) and PN_PGBIN (whose binaries run the
# cluster).  As root: the cluster runs as postgres, the shim and nginx's
# workers as nobody.
# Prints "N passed, M failed" last; non-zero exit on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh

samples=${PN_SAMPLES:-test/vectors/samples}
vectors=${PN_VECTORS:-test/vectors}
if [ ! -f "$samples/manifest.json" ]; then
    echo "no samples manifest at $samples/manifest.json (set PN_SAMPLES)" >&2
    exit 2
fi
samples=$(cd "$samples" && pwd)
vectors=$(cd "$vectors" && pwd)
pn_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }
pass=0
fail=0

stack_init samples
stack_pg "fsync = off" >/dev/null || { not_ok "PostgreSQL starts"; finish; }
stack_schema 0 0 || { not_ok "the schema loads"; finish; }
stack_http fastcgi 2 || { not_ok "the shim and nginx start"; finish; }
echo "# $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(len(m), "cases,", sum(bool(c.get("implemented")) for c in m), "implemented")' "$samples/manifest.json") ($samples)"

PN_PGBIN=$PN_PGBIN STACK_DIR=$STACK_DIR STACK_PGPORT=$STACK_PGPORT \
    python3 test/e2e/samples.py "$samples/manifest.json" "$vectors" "$STACK_ROOT/shim/paynotify-send" "$STACK_URL" \
    >"$STACK_DIR/results" 2>"$STACK_DIR/results.err"
rc=$?
notes=0
while IFS= read -r line; do
    case "$line" in
        PASS\ *) ok "${line#PASS }" ;;
        FAIL\ *) not_ok "${line#FAIL }" ;;
        NOTE\ *) echo "note - ${line#NOTE }"; notes=$((notes + 1)) ;;
        *) not_ok "unexpected output" "$line" ;;
    esac
done <"$STACK_DIR/results"
check "samples.py ran to the end" 0 "$rc"
want=$(python3 -c 'import json,sys; print(sum(1 for c in json.load(open(sys.argv[1])) if c.get("implemented") and not c.get("config", {}).get("sign_content_rule")))' "$samples/manifest.json")
check "every implemented case sent was reported (none skipped)" "$want" "$(grep -c '^PASS \|^FAIL ' "$STACK_DIR/results")"
[ "${want:-0}" -gt 0 ] || not_ok "the manifest has implemented cases to send" "$want"
[ -s "$STACK_DIR/results.err" ] && not_ok "samples.py wrote no errors" "$(cat "$STACK_DIR/results.err")"
check "the shim did not crash" yes "$(pn_alive "$(cat "$STACK_DIR/shim.pid")" && echo yes || echo no)"
echo "(not counted: not implemented, or signed by another rule; printed above: $notes)"
summary
