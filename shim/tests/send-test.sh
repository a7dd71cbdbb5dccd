#!/usr/bin/env bash
# Tests of shim/paynotify-send, the gateway in a box.  Run from the repo root:
#     shim/tests/send-test.sh
# 1. Signing, without any server: --dump-dir output of every gateway, event
#    (agreement events too: one agreement per order across sign, terminate
#    and charge) and bad kind is verified independently with the openssl CLI (and the
#    WeChat resource decrypted with vectors/tools/gcm.py); --dump-sql is
#    checked against the dump and, when PostgreSQL 15 is installed, run
#    through psql against a stub paynotify_handle.
# 2. Delivery: a loopback responder (send_responder.py) that verifies each
#    request, answers per gateway rules and can fail the first k deliveries
#    of every notification id; storm/distinct/retry/bad counts are checked
#    through --json.
#    --payload files (shim/tests/payloads/) are checked against the file
#    (send_verify.py --payload) and delivered once and as a storm; bad files
#    (missing, invalid JSON, no resource.plaintext, ...) exit 2 sending nothing.
# 3. The ledger (--ledger): one line per delivery in every sending mode, its
#    fields checked against the replies and the responder's counts.
# Needs: cc, libcurl and OpenSSL headers, python3, openssl; optional:
# valgrind (SEND_TEST_VALGRIND=0 skips it), PostgreSQL 15 binaries.
# Environment: PN_VECTORS (default test/vectors in the repo).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESTS=$ROOT/shim/tests
SEND=$ROOT/shim/paynotify-send
VECTORS=${PN_VECTORS:-$ROOT/test/vectors}
KEYS=$VECTORS/keys
export PN_GCM_PY=$VECTORS/tools/gcm.py
NOW=1767225606
TMP=$(mktemp -d /tmp/send-test.XXXXXX)
chmod 755 "$TMP"
RESP_PID=
PG_DIR=

pass=0
fail=0
skip=0

# shellcheck source=../../test/lib.sh
. "$ROOT/test/lib.sh"

cleanup() {
	if [ -n "$RESP_PID" ]; then
		stop_pid "$RESP_PID"
		wait "$RESP_PID" 2>/dev/null
	fi
	if [ -n "$PG_DIR" ]; then
		pn_cluster_stop "$PG_DIR"
	fi
	remove_tmp "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# expect_json DESC FILE PYEXPR: PYEXPR over d (the parsed JSON) must hold.
expect_json() {
	local desc=$1 file=$2 expr=$3
	if python3 - "$file" "$expr" <<'EOF' 2>"$TMP/jerr"; then ok "$desc"; else not_ok "$desc" "$(cat "$TMP/jerr" "$file")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

# send_json OUT ARGS...: run paynotify-send --json --quiet, stdout to OUT; sets RC.
send_json() {
	local out=$1
	shift
	"$SEND" --keys "$KEYS" --json --quiet "$@" >"$out" 2>"$out.err"
	RC=$?
}

# ------------------------------------------------------------------ build
echo "# build"
if [ ! -d "$KEYS" ]; then
	echo "no key folder at $KEYS (set PN_VECTORS)" >&2
	exit 2
fi
# Every file compiled again, to see its warnings, in a copy of the shim's
# tree; the tree's own paynotify-send, which the tests run, is only brought
# up to date (shim/tests/serve-test.sh may be running it meanwhile).
mkdir -p "$TMP/tree"
if cp -a "$ROOT/shim" "$ROOT/paynotify.control" "$TMP/tree/" &&
	make -B -C "$TMP/tree/shim" paynotify-send >"$TMP/build.log" 2>&1 &&
	make -C "$ROOT/shim" paynotify-send >>"$TMP/build.log" 2>&1; then
	if grep -qi "warning" "$TMP/build.log"; then
		not_ok "builds without warnings" "$(cat "$TMP/build.log")"
	else
		ok "builds without warnings (-Wall -Wextra -pedantic -std=c11)"
	fi
else
	not_ok "builds" "$(cat "$TMP/build.log")"
	summary
	exit 1
fi

# ------------------------------------------------------------------ command line
echo "# command line"
"$SEND" --help >"$TMP/help" 2>&1
check_cmd "--help exits 0" test $? = 0
missing=
for f in $(grep -o '{\.name = "[a-z0-9-]*"' "$ROOT/shim/send/send_opts.c" | sed 's/.*"\([^"]*\)"/\1/'); do
	grep -q -- "--$f" "$TMP/help" || missing="$missing --$f"
done
for f in -n -c; do grep -q -- "^  $f " "$TMP/help" || missing="$missing $f"; done
check_cmd "--help documents every flag${missing:+ (missing:$missing)}" test -z "$missing"
check_rc "no --gateway is a usage error" 2 "$SEND" --url http://127.0.0.1:1/
check_rc "unknown gateway is a usage error" 2 "$SEND" --gateway paypal --url http://127.0.0.1:1/
check_rc "no --url (and no dump) is a usage error" 2 "$SEND" --gateway wxpay --keys "$KEYS"
check_rc "-n 0 is a usage error" 2 "$SEND" --gateway wxpay --keys "$KEYS" --mode storm -n 0 --url http://127.0.0.1:1/
check_rc "--bad probe for alipay is a usage error" 2 "$SEND" --gateway alipay --keys "$KEYS" --mode bad --bad probe --url http://127.0.0.1:1/
check_rc "--order-format with two conversions is a usage error" 2 "$SEND" --gateway stripe --keys "$KEYS" --order-format 'A%dB%d' --dump-sql /dev/null
check_rc "unknown option is a usage error" 2 "$SEND" --gateway stripe --frobnicate
check_rc "missing key file is exit 2" 2 "$SEND" --gateway wxpay --keys "$TMP/nokeys" --url http://127.0.0.1:1/

# ------------------------------------------------------------------ signing
echo "# signing, verified with the openssl CLI (no server)"
verify() { python3 "$TESTS/send_verify.py" "$@"; }
for gw in wxpay alipay stripe; do
	for ev in pay refund; do
		d=$TMP/dump-$gw-$ev
		"$SEND" --gateway "$gw" --keys "$KEYS" --event "$ev" --mode distinct -n 3 --now $NOW --seed 11 \
			--dump-dir "$d" --quiet >/dev/null 2>&1
		check_cmd "$gw $ev: 3 dumped notifications verify" verify "$gw" "$d" "$KEYS" --event "$ev" --now $NOW
	done
	d=$TMP/bad-$gw
	"$SEND" --gateway "$gw" --keys "$KEYS" --mode bad -n 2 --now $NOW --dump-dir "$d" --quiet >/dev/null 2>&1
	check_cmd "$gw --mode bad: each kind has exactly its defect" verify "$gw" "$d" "$KEYS" --now $NOW
done
d=$TMP/dump-ali-full
"$SEND" --gateway alipay --keys "$KEYS" --event refund --amount 500 --refund-amount 500 --mode distinct -n 2 \
	--now $NOW --dump-dir "$d" --quiet >/dev/null 2>&1
check_cmd "alipay full refund verifies (TRADE_CLOSED)" verify alipay "$d" "$KEYS" --event refund --amount 500 --refund-amount 500
d=$TMP/dump-pubkey
"$SEND" --gateway wxpay --keys "$KEYS" --wx-key wechat_pubkey_3.key.pem --serial "$(cat "$KEYS/wechat_pubkey_3.id")" \
	-n 2 --mode distinct --now $NOW --dump-dir "$d" --quiet >/dev/null 2>&1
check_cmd "wxpay public-key-id mode verifies" verify wxpay "$d" "$KEYS" --now $NOW \
	--wx-pub wechat_pubkey_3.pub.pem --serial "$(cat "$KEYS/wechat_pubkey_3.id")"
# agreements: each event verifies, and the events of one order name one agreement
for gw in wxpay alipay stripe; do
	evs="sign terminate charge"
	[ "$gw" = stripe ] && evs="$evs charge-failed"
	for ev in $evs; do
		d=$TMP/dump-$gw-$ev
		"$SEND" --gateway "$gw" --keys "$KEYS" --event "$ev" --mode distinct -n 3 --now $NOW --seed 11 \
			--dump-dir "$d" --quiet >/dev/null 2>&1
		check_cmd "$gw $ev: 3 dumped notifications verify" verify "$gw" "$d" "$KEYS" --event "$ev" --now $NOW \
			--agreements-out "$TMP/agreements-$gw-$ev"
	done
	check_cmd "$gw: sign and terminate of an order name one agreement, another per order" sh -c "
		cmp -s '$TMP/agreements-$gw-sign' '$TMP/agreements-$gw-terminate' &&
		[ \$(cut -f2 '$TMP/agreements-$gw-sign' | sort -u | wc -l) = 3 ]"
	if [ "$gw" != alipay ]; then  # Alipay's charge is its trade notice: it names no agreement
		check_cmd "$gw: a charge names the agreement its order signed" \
			cmp -s "$TMP/agreements-$gw-sign" "$TMP/agreements-$gw-charge"
	fi
	for ev in sign terminate; do
		d=$TMP/bad-$gw-$ev
		"$SEND" --gateway "$gw" --keys "$KEYS" --event "$ev" --mode bad -n 1 --now $NOW --dump-dir "$d" \
			--quiet >/dev/null 2>&1
		check_cmd "$gw $ev --mode bad: each kind has exactly its defect" verify "$gw" "$d" "$KEYS" \
			--event "$ev" --now $NOW
	done
	d=$TMP/given-$gw
	"$SEND" --gateway "$gw" --keys "$KEYS" --event sign --agreement-id AGR-given_1 --agreement-ref REF-given-1 \
		--mode distinct -n 2 --now $NOW --dump-dir "$d" --quiet >/dev/null 2>&1
	check_cmd "$gw sign: --agreement-id and --agreement-ref are the ones signed" verify "$gw" "$d" "$KEYS" \
		--event sign --now $NOW --agreement-id AGR-given_1 --agreement-ref REF-given-1
	verify "$gw" "$d" "$KEYS" --event sign --now $NOW >"$TMP/given.out" 2>&1
	check_cmd "$gw sign: the verifier notices an agreement that is not the derived one" \
		grep -q '^FAIL 000001 .*agreement id AGR-given_1' "$TMP/given.out"
done
check_rc "--event charge-failed for wxpay is a usage error" 2 "$SEND" --gateway wxpay --keys "$KEYS" \
	--event charge-failed --dump-sql /dev/null
check_rc "--agreement-id with --event pay is a usage error" 2 "$SEND" --gateway stripe --keys "$KEYS" \
	--agreement-id sub_1 --dump-sql /dev/null
check_rc "--agreement-ref with a quote is a usage error" 2 "$SEND" --gateway alipay --keys "$KEYS" \
	--event sign --agreement-ref 'a"b' --dump-sql /dev/null
check_rc "--sales with --event sign is a usage error" 2 "$SEND" --gateway wxpay --keys "$KEYS" \
	--event sign --mode distinct -n 1 --sales "$TMP/agreement.sales" --dump-sql /dev/null
check_cmd "serial is the certificate's, upper-case hex" grep -q "^Wechatpay-Serial: $(openssl x509 -in "$KEYS/wechat_platform_1.cert.pem" -noout -serial | cut -d= -f2)$" "$TMP/dump-wxpay-pay/000001/headers.txt"

# the verifier must notice a changed byte (it is not vacuous)
mutate() { # FILE FROM TO: replace one byte sequence (same length) once
	python3 -c 'import sys; p,a,b=sys.argv[1:]; d=open(p,"rb").read(); assert a.encode() in d; open(p,"wb").write(d.replace(a.encode(),b.encode(),1))' "$@"
}
for gw in wxpay alipay stripe; do
	cp -r "$TMP/dump-$gw-sign" "$TMP/mut-$gw-sign"
	f=$(ls "$TMP/mut-$gw-sign/000002/"body.*)
	case $gw in
		wxpay) mutate "$f" ENTRUST.SIGN ENTRUST.SIGX ;;
		alipay) mutate "$f" dut_user_sign dut_user_sigN ;;
		stripe) mutate "$f" '"status": "active"' '"status": "Active"' ;;
	esac
	verify "$gw" "$TMP/mut-$gw-sign" "$KEYS" --event sign --now $NOW >"$TMP/mut.out" 2>&1
	check_cmd "$gw sign: verifier rejects a body changed by one byte" \
		grep -Eq '^FAIL 000002 .*(Verification failure|does not match)' "$TMP/mut.out"
	cp -r "$TMP/dump-$gw-pay" "$TMP/mut-$gw"
	f=$(ls "$TMP/mut-$gw/000002/"body.*)
	case $gw in
		wxpay) mutate "$f" encrypt-resource Encrypt-resource ;;
		alipay) mutate "$f" trade_status_sync trade_status_sYnc ;;
		stripe) mutate "$f" '"pending_webhooks": 1' '"pending_webhooks": 2' ;;
	esac
	verify "$gw" "$TMP/mut-$gw" "$KEYS" --now $NOW >"$TMP/mut.out" 2>&1
	check_cmd "$gw: verifier rejects a body changed by one byte" \
		grep -Eq '^FAIL 000002 .*(Verification failure|does not match)' "$TMP/mut.out"
done

# storm = re-deliveries: same id and body, fresh nonce and signature
d=$TMP/storm-wx
"$SEND" --gateway wxpay --keys "$KEYS" --mode storm -n 3 --now $NOW --dump-dir "$d" --quiet >/dev/null 2>&1
check_cmd "wxpay re-deliveries verify" verify wxpay "$d" "$KEYS" --now $NOW
check_cmd "wxpay re-deliveries keep id and body" sh -c "cmp -s '$d/000001/body.json' '$d/000002/body.json' && cmp -s '$d/000001/body.json' '$d/000003/body.json' && [ \$(cut -f6 '$d/index.tsv' | sort -u | wc -l) = 2 ]"
check_cmd "wxpay re-deliveries get fresh nonce and signature" sh -c "[ \$(grep -h -e '^Wechatpay-Nonce' -e '^Wechatpay-Signature:' '$d'/0*/headers.txt | sort -u | wc -l) = 6 ]"

# --payload: a file's notification, signed (WeChat: encrypted) as the gateway does
PAYLOADS=$TESTS/payloads
for pf in wxpay:wxpay-pay.json alipay:alipay-pay.form alipay:alipay-gbk.form stripe:stripe-pay.json; do
	gw=${pf%%:*} f=$PAYLOADS/${pf#*:}
	d=$TMP/payload-${pf#*:}
	"$SEND" --gateway "$gw" --keys "$KEYS" --payload "$f" --mode storm -n 2 --now $NOW \
		--dump-dir "$d" --quiet >/dev/null 2>&1
	what="the file's content, signed"
	[ "$gw" = wxpay ] && what="$what, decrypting to its plaintext"
	check_cmd "--payload ${pf#*:}: 2 re-deliveries are $what" \
		verify "$gw" "$d" "$KEYS" --now $NOW --payload "$f"
done
sed 's/PAYLOAD-WX-1/PAYLOAD-WX-2/' "$PAYLOADS/wxpay-pay.json" >"$TMP/other-wx.json"
verify wxpay "$TMP/payload-wxpay-pay.json" "$KEYS" --now $NOW --payload "$TMP/other-wx.json" >"$TMP/mut.out" 2>&1
check_cmd "--payload: the verifier notices a plaintext that is not the file's" \
	grep -q "decrypted resource is not the file's plaintext" "$TMP/mut.out"
check_cmd "--payload alipay GBK: values travel GBK-encoded" grep -q 'subject=%D6%D0%CE%C4' "$TMP/payload-alipay-gbk.form/000001/body.form"
check_rc "--payload with --mode distinct is a usage error" 2 "$SEND" --gateway stripe --keys "$KEYS" \
	--payload "$PAYLOADS/stripe-pay.json" --mode distinct -n 2 --dump-sql /dev/null

# reproducibility
"$SEND" --gateway wxpay --keys "$KEYS" --mode distinct -n 4 --now $NOW --seed 5 --threads 1 --dump-dir "$TMP/r1" --quiet >/dev/null 2>&1
"$SEND" --gateway wxpay --keys "$KEYS" --mode distinct -n 4 --now $NOW --seed 5 --threads 3 --dump-dir "$TMP/r2" --quiet >/dev/null 2>&1
"$SEND" --gateway wxpay --keys "$KEYS" --mode distinct -n 4 --now $NOW --seed 6 --dump-dir "$TMP/r3" --quiet >/dev/null 2>&1
check_cmd "same --seed and --now give identical bytes (1 or 3 threads)" diff -r "$TMP/r1" "$TMP/r2"
check_rc "another --seed gives other ids" 1 cmp -s "$TMP/r1/index.tsv" "$TMP/r3/index.tsv"
"$SEND" --gateway stripe --keys "$KEYS" --mode distinct -n 2 --start 42 --order-format 'ORD-%06d-X' --dump-dir "$TMP/fmt" --quiet >/dev/null 2>&1
check_cmd "--order-format and --start name the orders" sh -c "cut -f5 '$TMP/fmt/index.tsv' | tr '\n' ' ' | grep 'order_no ORD-000042-X ORD-000043-X' >/dev/null"

# --dump-sql: the same requests as --dump-dir, quoted for SQL
for gw in wxpay alipay stripe; do
	"$SEND" --gateway "$gw" --keys "$KEYS" --mode distinct -n 3 --now $NOW --seed 9 --channel "shop'1" \
		--dump-sql "$TMP/$gw.sql" --dump-dir "$TMP/sqldir-$gw" --quiet >/dev/null 2>&1
	check_cmd "$gw --dump-sql lines match the dumped requests" python3 - "$TMP/$gw.sql" "$TMP/sqldir-$gw" <<'EOF'
import json, os, re, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
rows = open(os.path.join(sys.argv[2], "index.tsv")).read().splitlines()[1:]
assert len(lines) == len(rows) == 3, (len(lines), len(rows))
pat = re.compile(r"^SELECT outcome FROM paynotify_handle\('((?:[^']|'')*)', '((?:[^']|'')*)'::jsonb, '\\x([0-9a-f]*)'::bytea\);$")
for line, row in zip(lines, rows):
    m = pat.match(line)
    assert m, line[:120]
    assert m.group(1).replace("''", "'") == "shop'1"
    hs = json.loads(m.group(2).replace("''", "'"))
    d = os.path.join(sys.argv[2], row.split("\t")[0])
    want = dict(l.split(": ", 1) for l in open(os.path.join(d, "headers.txt"), encoding="utf-8").read().splitlines())
    assert hs == want, (hs, want)
    body = [f for f in os.listdir(d) if f.startswith("body.")][0]
    assert bytes.fromhex(m.group(3)) == open(os.path.join(d, body), "rb").read()
EOF
done

# the SQL really parses: run it through PostgreSQL against a stub
PGBIN=$(pg_config --bindir 2>/dev/null || true)
if [ -x "$PGBIN/initdb" ] && [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1; then
	PG_DIR=$TMP/pg
	PG_PORT=$(pn_free_port)
	if pn_cluster_start "$PG_DIR" "$PG_PORT" "fsync = off" >"$TMP/pg.log" 2>&1; then
		pn_psql "$PG_DIR" "$PG_PORT" -d postgres -c "
			CREATE FUNCTION paynotify_handle(channel text, headers jsonb, body bytea,
				OUT status int, OUT content_type text, OUT reply text, OUT outcome text)
			LANGUAGE sql AS \$\$ SELECT 200, 'text/plain', '',
				format('%s %s %s %s', channel, (SELECT count(*) FROM jsonb_object_keys(headers)),
				       coalesce(headers->>'Wechatpay-Signature', headers->>'Stripe-Signature', '-'), md5(body)) \$\$;" \
			>>"$TMP/pg.log" 2>&1
		for gw in wxpay alipay stripe; do
			pn_psql "$PG_DIR" "$PG_PORT" -d postgres -At -f "$TMP/$gw.sql" >"$TMP/$gw.sqlout" 2>&1
			check_cmd "$gw --dump-sql runs in psql and passes exact headers and bytes" python3 - "$TMP/$gw.sqlout" "$TMP/sqldir-$gw" <<'EOF'
import hashlib, os, sys
got = open(sys.argv[1], encoding="utf-8").read().splitlines()
want = []
for row in open(os.path.join(sys.argv[2], "index.tsv")).read().splitlines()[1:]:
    d = os.path.join(sys.argv[2], row.split("\t")[0])
    hs = dict(l.split(": ", 1) for l in open(os.path.join(d, "headers.txt"), encoding="utf-8").read().splitlines())
    body = open(os.path.join(d, [f for f in os.listdir(d) if f.startswith("body.")][0]), "rb").read()
    sig = hs.get("Wechatpay-Signature", hs.get("Stripe-Signature", "-"))
    want.append("shop'1 %d %s %s" % (len(hs), sig, hashlib.md5(body).hexdigest()))
assert got == want, (got, want)
EOF
		done
	else
		not_ok "PostgreSQL test cluster starts" "$(cat "$TMP/pg.log")"
	fi
	pn_cluster_stop "$PG_DIR"
	PG_DIR=
else
	skipped "--dump-sql through psql (no PostgreSQL binaries or not root)"
fi

# A later re-delivery of a notification (--seed, --start, --event and
# --created of the first run, signed an hour later): the same body, as a
# gateway re-delivers it (Alipay changes only notify_time and sign).
for gw in wxpay alipay stripe; do
	for run in first again; do
		now=$NOW; [ $run = again ] && now=$((NOW + 3600))
		"$SEND" --gateway "$gw" --keys "$KEYS" --seed 7 --start 3 --event refund --created $NOW \
			--now $now --dump-dir "$TMP/redeliver-$gw-$run" --quiet >/dev/null 2>&1
	done
	check_cmd "$gw: a re-delivery an hour later with the first run's --seed and --created has its body" \
		python3 - "$TMP/redeliver-$gw-first/000001" "$TMP/redeliver-$gw-again/000001" <<'EOF'
import os, sys
def body(d):
    f = [x for x in os.listdir(d) if x.startswith("body.")][0]
    b = open(os.path.join(d, f), "rb").read()
    if f.endswith(".form"):
        b = b"&".join(p for p in b.split(b"&") if not p.startswith((b"notify_time=", b"sign=")))
    return b
a, b = sys.argv[1], sys.argv[2]
assert body(a) == body(b), "bodies differ"
assert open(os.path.join(a, "headers.txt")).read() != open(os.path.join(b, "headers.txt")).read() \
    or any(x.endswith(".form") for x in os.listdir(a)), "signed at the same time"
EOF
done

# ------------------------------------------------------------------ delivery
echo "# delivery to a loopback responder"
python3 "$TESTS/send_responder.py" --keys "$KEYS" --port-file "$TMP/port" >"$TMP/responder.log" 2>&1 &
RESP_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
if [ ! -s "$TMP/port" ]; then
	not_ok "responder starts" "$(cat "$TMP/responder.log")"
	summary
	exit 1
fi
BASE=http://127.0.0.1:$(cat "$TMP/port")
reset() { curl -s -X POST "$BASE/reset?fail_first=$1" >/dev/null; }
stats() { curl -s "$BASE/stats" >"$1"; }

reset 0
send_json "$TMP/one.json" --gateway wxpay --url "$BASE/notify/wxpay"
expect_json "one: wxpay answered 204 processed, acknowledged" "$TMP/one.json" \
	'd["reply"]["status"]==204 and d["reply"]["outcome"]=="processed" and d["reply"]["acked"] and d["deliveries"]==1'
"$SEND" --keys "$KEYS" --gateway alipay --url "$BASE/notify/alipay" >"$TMP/one.txt" 2>&1
check_cmd "one (text): prints reply headers and body" sh -c "grep -q '^Paynotify-Outcome: processed' '$TMP/one.txt' && grep -qx 'success' '$TMP/one.txt'"

for gw in wxpay alipay stripe; do
	reset 0
	send_json "$TMP/storm-$gw.json" --gateway "$gw" --url "$BASE/notify/$gw" --mode storm -n 200 -c 20
	expect_json "storm $gw: 200 deliveries of one notification = 1 processed + 199 duplicate, all acked" "$TMP/storm-$gw.json" \
		'd["deliveries"]==200 and d["replies"]==200 and d["acked"]==200 and d["outcome"]=={"processed":1,"duplicate":199} and d["transport_errors"]==0'
	stats "$TMP/stats.json"
	expect_json "storm $gw: the responder saw one id, 200 times, all verified" "$TMP/stats.json" \
		'len(d["ids"])==1 and list(d["ids"].values())[0]["deliveries"]==200 and d["requests"]==200'
done
reset 0
send_json "$TMP/same.json" --gateway stripe --url "$BASE/notify/stripe" --mode storm --same-signature -n 100 -c 10
expect_json "storm --same-signature: identical bytes accepted once, then duplicates" "$TMP/same.json" \
	'd["outcome"]=={"processed":1,"duplicate":99}'

for gw in wxpay alipay stripe; do
	reset 0
	send_json "$TMP/distinct-$gw.json" --gateway "$gw" --url "$BASE/notify/$gw" --mode distinct -n 300 -c 30 --start 1000
	expect_json "distinct $gw: 300 notifications, 300 processed" "$TMP/distinct-$gw.json" \
		'd["deliveries"]==300 and d["outcome"]=={"processed":300} and d["acked"]==300 and d["notifications"]==300 and d["rps"]>0 and d["latency_ms"]["p99"]>=d["latency_ms"]["p50"]>0'
	stats "$TMP/stats.json"
	expect_json "distinct $gw: 300 different ids at the responder" "$TMP/stats.json" \
		'len(d["ids"])==300 and all(v["deliveries"]==1 for v in d["ids"].values())'
done
for gw in wxpay alipay stripe; do
	reset 0
	send_json "$TMP/agreements-$gw.json" --gateway "$gw" --url "$BASE/notify/$gw" --mode distinct -n 5 --event terminate
	expect_json "distinct $gw agreement ends: 5 processed, acked" "$TMP/agreements-$gw.json" \
		'd["event"]=="terminate" and d["outcome"]=={"processed":5} and d["acked"]==5'
done
reset 0
send_json "$TMP/refund.json" --gateway wxpay --url "$BASE/notify/wxpay" --mode distinct -n 20 --event refund
expect_json "distinct wxpay refunds: 20 processed" "$TMP/refund.json" 'd["outcome"]=={"processed":20}'

reset 2
send_json "$TMP/retry-wx.json" --gateway wxpay --url "$BASE/notify/wxpay" --mode retry -n 100 -c 20 \
	--time-scale 0.001 --extra-deliveries 1
check_cmd "retry wxpay: exit 0 when all acknowledged" test "$RC" = 0
expect_json "retry wxpay: 2 failures, ack on the 3rd delivery, 1 extra duplicate each" "$TMP/retry-wx.json" \
	'd["retry"]["acknowledged"]==100 and d["retry"]["unacknowledged"]==0 and d["retry"]["deliveries_to_ack"]=={"3":100} and d["retry"]["extra_deliveries"]==100 and d["deliveries"]==400 and d["outcome"]=={"failed":200,"processed":100,"duplicate":100}'
stats "$TMP/stats.json"
expect_json "retry wxpay: responder saw 4 deliveries of each id" "$TMP/stats.json" \
	'len(d["ids"])==100 and all(v["deliveries"]==4 for v in d["ids"].values())'

reset 2
send_json "$TMP/retry-ali.json" --gateway alipay --url "$BASE/notify/alipay" --mode retry -n 50 --time-scale 0.00001
expect_json "retry alipay: a 200 whose body is \"fail\" is not an ack" "$TMP/retry-ali.json" \
	'd["retry"]["deliveries_to_ack"]=={"3":50} and d["status"]=={"200":150} and d["acked"]==50'

reset 1000
send_json "$TMP/giveup.json" --gateway wxpay --url "$BASE/notify/wxpay" --mode retry -n 10 --time-scale 0.00001
check_cmd "retry wxpay never acknowledged: exit 1" test "$RC" = 1
expect_json "retry wxpay gives up after the schedule: 16 deliveries each" "$TMP/giveup.json" \
	'd["retry"]["unacknowledged"]==10 and d["deliveries"]==160 and d["acked"]==0'

reset 1000
"$SEND" --keys "$KEYS" --json --gateway stripe --url "$BASE/notify/stripe" --mode retry -n 5 \
	--schedule 0.5,0.5,0.5,0.5,0.5 --time-scale 1 >"$TMP/sched.json" 2>"$TMP/sched.json.err"
check_cmd "retry stripe --schedule: exit 1" test $? = 1
expect_json "retry stripe --schedule of 5 intervals: 6 deliveries each" "$TMP/sched.json" \
	'd["deliveries"]==30 and d["retry"]["unacknowledged"]==5 and d["elapsed_s"]>=2.4'
check_cmd "progress line on stderr for a run over 2 s" grep -q '^\[ *2\.[0-9] s\] ' "$TMP/sched.json.err"

reset 0
send_json "$TMP/bad-wx.json" --gateway wxpay --url "$BASE/notify/wxpay" --mode bad -n 3
expect_json "bad wxpay: tampered, stale, probe, unknown-serial all rejected (401)" "$TMP/bad-wx.json" \
	'sorted(d["by_kind"])==["probe","stale","tampered","unknown-serial"] and all(k["outcome"]=={"rejected":3} and k["status"]=={"401":3} for k in d["by_kind"].values()) and d["acked"]==0'
send_json "$TMP/bad-ali.json" --gateway alipay --url "$BASE/notify/alipay" --mode bad -n 3
expect_json "bad alipay: tampered and unknown key rejected; stale notify_time still valid" "$TMP/bad-ali.json" \
	'd["by_kind"]["tampered"]["outcome"]=={"rejected":3} and d["by_kind"]["unknown-serial"]["outcome"]=={"rejected":3} and d["by_kind"]["stale"]["outcome"]=={"processed":3} and "probe" not in d["by_kind"]'
send_json "$TMP/bad-st.json" --gateway stripe --url "$BASE/notify/stripe" --mode bad --bad stale -n 4
expect_json "bad stripe --bad stale: 4 rejected" "$TMP/bad-st.json" \
	'list(d["by_kind"])==["stale"] and d["outcome"]=={"rejected":4} and d["status"]=={"400":4}'

# --payload delivered once to the checking responder; bad files send nothing
for pf in wxpay:wxpay-pay.json alipay:alipay-pay.form alipay:alipay-gbk.form stripe:stripe-pay.json; do
	gw=${pf%%:*}
	reset 0
	send_json "$TMP/pl-$gw.json" --gateway "$gw" --url "$BASE/notify/$gw" --payload "$PAYLOADS/${pf#*:}"
	expect_json "--payload ${pf#*:} once: verified and processed by the responder" "$TMP/pl-$gw.json" \
		'd["deliveries"]==1 and d["reply"]["outcome"]=="processed" and d["reply"]["acked"] and d["notify_id"]!=""'
done
reset 0
send_json "$TMP/pl-storm.json" --gateway wxpay --url "$BASE/notify/wxpay" --payload "$PAYLOADS/wxpay-pay.json" --mode storm -n 20 -c 5
expect_json "--payload wxpay storm -n 20: 1 processed + 19 duplicate" "$TMP/pl-storm.json" \
	'd["outcome"]=={"processed":1,"duplicate":19} and d["acked"]==20'
reset 2
send_json "$TMP/pl-retry.json" --gateway alipay --url "$BASE/notify/alipay" --payload "$PAYLOADS/alipay-gbk.form" \
	--mode retry --time-scale 0.0001
expect_json "--payload alipay GBK retry: 2 failures, acknowledged on the 3rd delivery" "$TMP/pl-retry.json" \
	'd["retry"]["deliveries_to_ack"]=={"3":1} and d["outcome"]=={"failed":2,"processed":1}'
check_rc "--payload with retry -n 2 is a usage error" 2 "$SEND" --gateway alipay --keys "$KEYS" \
	--payload "$PAYLOADS/alipay-gbk.form" --mode retry -n 2 --url "$BASE/notify/alipay"
printf '{"id": "x", "resource": {"nonce": "abc",}}' >"$TMP/badjson.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["resource"].pop("plaintext"); d["resource"]["ciphertext"]="AAAA"; json.dump(d, open(sys.argv[2],"w"))' \
	"$PAYLOADS/wxpay-pay.json" "$TMP/noplain.json"
printf '{"id": "evt_1", "object": "event"' >"$TMP/trunc.json"
{ tr -d '\n' <"$PAYLOADS/alipay-pay.form"; echo '&sign=abc'; } >"$TMP/signed.form"
sed 's/subject=[^&]*/subject=%F0%9F%98%80/' "$PAYLOADS/alipay-gbk.form" >"$TMP/nogbk.form"
{ tr -d '\n' <"$PAYLOADS/alipay-pay.form"; echo '&'; } >"$TMP/trailamp.form"
reset 0
for c in "missing file:wxpay:$TMP/no-such-file.json:cannot read the payload" \
	"invalid JSON:wxpay:$TMP/badjson.json:invalid JSON at byte 40: expected a member name" \
	"wxpay without resource.plaintext:wxpay:$TMP/noplain.json:resource has \"ciphertext\"" \
	"truncated Stripe JSON:stripe:$TMP/trunc.json:invalid JSON" \
	"alipay with sign already:alipay:$TMP/signed.form:has sign already" \
	"alipay value not representable in GBK:alipay:$TMP/nogbk.form:cannot be written in GBK" \
	"alipay line ending in an empty parameter:alipay:$TMP/trailamp.form:is not name=value"; do
	IFS=: read -r desc gw f msg <<<"$c"
	"$SEND" --keys "$KEYS" --gateway "$gw" --url "$BASE/notify/$gw" --payload "$f" >"$TMP/plbad.out" 2>&1
	rc=$?
	check_cmd "--payload $desc: exit 2 and says so ($(head -c 120 "$TMP/plbad.out"))" \
		sh -c "[ $rc = 2 ] && grep -qF -- '$msg' '$TMP/plbad.out'"
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["resource"].pop("plaintext"); json.dump(d, open(sys.argv[2],"w"))' \
	"$PAYLOADS/wxpay-pay.json" "$TMP/noplain2.json"
check_rc "--payload wxpay without plaintext or ciphertext: exit 2" 2 "$SEND" --keys "$KEYS" --gateway wxpay \
	--url "$BASE/notify/wxpay" --payload "$TMP/noplain2.json"
stats "$TMP/stats.json"
expect_json "--payload: bad files sent nothing" "$TMP/stats.json" 'd["requests"]==0'

send_json "$TMP/refused.json" --gateway wxpay --url "http://127.0.0.1:1/notify/wxpay" --mode storm -n 5
check_cmd "transport errors: the run completes with exit 0" test "$RC" = 0
expect_json "transport errors are counted, not replies" "$TMP/refused.json" \
	'd["transport_errors"]==5 and d["replies"]==0 and d["outcome"]=={} and sum(d["errors"].values())==5'

# ------------------------------------------------------------------ ledger
echo "# --ledger: one line per delivery, in every sending mode"
# ledger_check DESC LEDGER JSON PYEXPR: PYEXPR over L (the ledger's lines as
# dicts), by_id (L grouped by notification id) and d (the run's --json report,
# JSON "-" for none) must hold
ledger_check() {
	local desc=$1 ledger=$2 json=$3 expr=$4
	if python3 - "$ledger" "$json" "$expr" <<'EOF' 2>"$TMP/jerr"; then ok "$desc"; else not_ok "$desc" "$(cat "$TMP/jerr"; head -5 "$ledger")"; fi
import collections, json, re, sys
cols = ["time", "channel", "event", "id", "order", "delivery", "status", "outcome", "ack", "bad", "seconds"]
L = []
for line in open(sys.argv[1], encoding="utf-8"):
    assert line.endswith("\n"), line
    f = line[:-1].split("\t")
    assert len(f) == len(cols), f
    r = dict(zip(cols, f))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["time"]), r
    assert re.fullmatch(r"\d+\.\d{6}", r["seconds"]), r
    r["delivery"], r["status"], r["ack"] = int(r["delivery"]), int(r["status"]), int(r["ack"])
    r["seconds"] = float(r["seconds"])
    L.append(r)
d = json.load(open(sys.argv[2])) if sys.argv[2] != "-" else None
by_id = collections.defaultdict(list)
for r in L:
    by_id[r["id"]].append(r)
sys.exit(0 if eval(sys.argv[3]) else 1)
EOF
}
reset 2
send_json "$TMP/lretry.json" --gateway wxpay --url "$BASE/notify/wxpay" --mode retry -n 40 -c 8 \
	--time-scale 0.001 --extra-deliveries 1 --ledger "$TMP/retry.ledger"
ledger_check "retry wxpay: 160 lines, per id 2 failed (500, not acked), 1 processed (204, acked), 1 duplicate" \
	"$TMP/retry.ledger" "$TMP/lretry.json" \
	'len(L)==d["deliveries"]==160 and len(by_id)==40 and all(r["channel"]=="wxpay" and r["event"]=="pay" and r["bad"]=="-" for r in L) and all(sorted((r["delivery"],r["status"],r["outcome"],r["ack"]) for r in v)==[(1,500,"failed",0),(2,500,"failed",0),(3,204,"processed",1),(4,200,"duplicate",1)] for v in by_id.values())'
stats "$TMP/stats.json"
check_cmd "retry wxpay: the ledger's ids are the ids the responder saw" python3 -c '
import json, sys
ids = set(json.load(open(sys.argv[1]))["ids"])
led = set(l.split("\t")[3] for l in open(sys.argv[2]))
sys.exit(0 if ids == led and len(ids) == 40 else 1)' "$TMP/stats.json" "$TMP/retry.ledger"
reset 1
send_json "$TMP/lali.json" --gateway alipay --url "$BASE/notify/alipay_shop2" --mode retry -n 10 --time-scale 0.00001 \
	--event refund --ledger "$TMP/ali.ledger"
ledger_check "retry alipay refund: channel from the URL, 200 \"fail\" is not acknowledged, 200 \"success\" is" \
	"$TMP/ali.ledger" "$TMP/lali.json" \
	'len(L)==20 and all(r["channel"]=="alipay_shop2" and r["event"]=="refund" for r in L) and all(sorted((r["status"],r["outcome"],r["ack"]) for r in v)==[(200,"failed",0),(200,"processed",1)] for v in by_id.values())'
reset 0
send_json "$TMP/lstorm.json" --gateway stripe --url "$BASE/notify/stripe" --mode storm -n 30 -c 5 --ledger "$TMP/modes.ledger"
send_json "$TMP/ldist.json" --gateway stripe --url "$BASE/notify/stripe" --mode distinct -n 20 -c 5 --start 500 --ledger "$TMP/modes.ledger"
send_json "$TMP/lbad.json" --gateway stripe --url "$BASE/notify/stripe" --mode bad -n 2 --ledger "$TMP/modes.ledger"
send_json "$TMP/lone.json" --gateway stripe --url "$BASE/notify/stripe" --start 900 --ledger "$TMP/modes.ledger"
ledger_check "storm, distinct, bad and one append to one ledger: 30 + 20 + 6 + 1 lines, outcomes as replied" \
	"$TMP/modes.ledger" - \
	'len(L)==57 and [r["outcome"] for r in L[:30]].count("processed")==1 and len(set(r["id"] for r in L[:30]))==1 and [r["outcome"] for r in L[30:50]]==["processed"]*20 and sorted(r["bad"] for r in L[50:56])==["stale","stale","tampered","tampered","unknown-serial","unknown-serial"] and all(r["status"]==400 and r["ack"]==0 for r in L[50:56]) and L[56]["order"]=="PN00000900" and L[56]["ack"]==1'
send_json "$TMP/lrefused.json" --gateway wxpay --url "http://127.0.0.1:1/notify/wxpay" --mode storm -n 3 --ledger "$TMP/refused.ledger"
ledger_check "transport errors: status 0, not acknowledged" "$TMP/refused.ledger" - \
	'len(L)==3 and all(r["status"]==0 and r["ack"]==0 and r["outcome"]=="none" for r in L)'
check_rc "--ledger with --dump-sql is a usage error" 2 "$SEND" --gateway wxpay --keys "$KEYS" --dump-sql /dev/null --ledger "$TMP/x.ledger"
check_rc "a ledger that cannot be opened is exit 1" 1 "$SEND" --gateway wxpay --keys "$KEYS" \
	--url "$BASE/notify/wxpay" --ledger "$TMP/no/such/dir/ledger"
if [ -w /dev/full ]; then
	check_rc "a ledger write that fails is exit 1" 1 "$SEND" --gateway wxpay --keys "$KEYS" --quiet \
		--url "$BASE/notify/wxpay" --mode distinct -n 3 --ledger /dev/full
fi

# -------------------------------------------------------- fresh signatures
# a slow receiver (1.1 s a request, one at a time): with --resign-after 1
# each request is signed again when it is sent, later ones with later
# timestamps; by default (60 s) all three are the ones signed at the start
echo "# a request sent long after it was signed is signed again"
python3 - "$TMP/slow.port" "$TMP/slow.ts" >"$TMP/slow.log" 2>&1 <<'EOF' &
import sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        with open(sys.argv[2], "a") as f:
            f.write(self.headers["Wechatpay-Timestamp"] + "\n")
        time.sleep(1.1)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
EOF
SLOW_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/slow.port" ] && break; sleep 0.05; done
spread() { sort -n "$TMP/slow.ts" | sed -n '1p;$p' | tr '\n' ' ' | awk '{print $2 - $1}'; }
"$SEND" --keys "$KEYS" --gateway wxpay --url "http://127.0.0.1:$(cat "$TMP/slow.port")/notify/wxpay" \
	--mode storm -n 3 -c 1 --presign 10 --resign-after 1 --quiet >/dev/null 2>&1
check_cmd "--resign-after 1: the third request signed about 2 s after the first ($(spread) s)" \
	test "$(spread)" -ge 2
: >"$TMP/slow.ts"
"$SEND" --keys "$KEYS" --gateway wxpay --url "http://127.0.0.1:$(cat "$TMP/slow.port")/notify/wxpay" \
	--mode storm -n 3 -c 1 --presign 10 --quiet >/dev/null 2>&1
check_cmd "default (60 s): the three requests signed at the start ($(spread) s apart)" \
	test "$(spread)" -le 1
kill "$SLOW_PID" 2>/dev/null

# ------------------------------------------------------------------ valgrind
if [ "${SEND_TEST_VALGRIND:-1}" != 0 ] && command -v valgrind >/dev/null; then
	reset 1
	check_cmd "valgrind: retry run with re-deliveries, no leaks or errors" valgrind -q --leak-check=full \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
		"$SEND" --keys "$KEYS" --gateway wxpay --url "$BASE/notify/wxpay" --mode retry -n 3 -c 2 \
		--time-scale 0.001 --extra-deliveries 1 --quiet --ledger "$TMP/valgrind.ledger"
	# (the runs of one check are independent: they run side by side, and
	# every one's exit status is checked)
	check_cmd "valgrind: alipay bad run and SQL dump, no leaks or errors" sh -c "
		valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
			'$SEND' --keys '$KEYS' --gateway alipay --url '$BASE/notify/alipay' --mode bad --bad tampered -n 1 --quiet &
		p1=\$!
		valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
			'$SEND' --keys '$KEYS' --gateway stripe --mode storm -n 2 --dump-sql /dev/null --quiet &
		p2=\$!
		wait \$p1; r1=\$?
		wait \$p2; r2=\$?
		[ \$r1 = 0 ] && [ \$r2 = 0 ]"
	check_cmd "valgrind: agreement events of each gateway (dumped, and bad), no leaks or errors" sh -c "
		pids=
		for a in 'wxpay sign' 'wxpay charge' 'alipay terminate' 'stripe sign' 'stripe charge-failed'; do
			set -- \$a
			valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
				'$SEND' --keys '$KEYS' --gateway \$1 --event \$2 --mode storm -n 2 --dump-sql /dev/null --quiet &
			pids=\"\$pids \$!\"
		done
		valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
			'$SEND' --keys '$KEYS' --gateway alipay --event sign --url '$BASE/notify/alipay' --mode bad -n 1 --quiet &
		pids=\"\$pids \$!\"
		rc=0
		for p in \$pids; do wait \$p || rc=1; done
		[ \$rc = 0 ]"
	reset 0
	check_cmd "valgrind: --payload once for each gateway (GBK too) and a bad file, no leaks or errors" sh -c "
		pids=
		for a in 'wxpay wxpay-pay.json' 'alipay alipay-gbk.form' 'stripe stripe-pay.json'; do
			set -- \$a
			valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
				'$SEND' --keys '$KEYS' --gateway \$1 --url '$BASE/notify/'\$1 --payload '$PAYLOADS/'\$2 --quiet >/dev/null &
			pids=\"\$pids \$!\"
		done
		valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9 \
			'$SEND' --keys '$KEYS' --gateway wxpay --url '$BASE/notify/wxpay' --payload '$TMP/noplain.json' 2>/dev/null &
		bad=\$!
		rc=0
		for p in \$pids; do wait \$p || rc=1; done
		wait \$bad
		[ \$? = 2 ] && [ \$rc = 0 ]"
else
	skipped "valgrind"
fi

summary
