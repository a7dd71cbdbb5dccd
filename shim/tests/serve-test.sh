#!/usr/bin/env bash
# Tests of paynotify-send's record of sales (--sales), lost notifications
# (--drop) and --mode serve, the gateways' query and bill APIs answered from
# that record.  Run from the repo root:
#     shim/tests/serve-test.sh
# 1. Selling: every gateway sells to a loopback responder (send_responder.py)
#    with --drop; the sales file has one line per notification, its ids are
#    the ones signed (checked against --dump-dir), the dropped ones never
#    reached the responder, the ledger and the report count them.
# 2. Serving, on a free loopback port, stopped by pid: every order queried
#    by a merchant's client (serve_client.py, python3-cryptography, the
#    test keys) whose requests are signed with merchant_1 and whose answers
#    are checked with the gateway keys: WeChat (direct, partner, NOTPAY,
#    404, 401 on a bad request signature), Alipay (GET and POST,
#    TRADE_NOT_EXIST, a bad sign), Stripe (search, retrieve, 401); the
#    close calls (WeChat 204 signed or ORDERPAID, Alipay alipay.trade.close
#    10000 or ACQ.TRADE_STATUS_ERROR) and the queries that then answer
#    CLOSED / TRADE_CLOSED; a sale
#    appended while it runs is answered; the bills (WeChat plain and GZIP
#    with the SHA-1 of the plain file, Alipay's zip of GBK CSVs, Stripe's
#    balance transactions with paging) checked line by line and in their
#    totals against the sales file; --serve-bad signature and body answers
#    refused by the client.
# 3. valgrind: a selling run and a serving run, no leaks or errors.
# Needs: cc, libcurl, OpenSSL, libmicrohttpd and zlib headers, python3 with
# cryptography; optional valgrind (SERVE_TEST_VALGRIND=0 skips it).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESTS=$ROOT/shim/tests
SEND=$ROOT/shim/paynotify-send
KEYS=${PN_VECTORS:-$ROOT/test/vectors}/keys
TMP=$(mktemp -d /tmp/serve-test.XXXXXX)
chmod 755 "$TMP"
RESP_PID=
SERVE_PIDS=()

pass=0
fail=0
skip=0

# shellcheck source=../../test/lib.sh
. "$ROOT/test/lib.sh"

cleanup() {
	for p in "${SERVE_PIDS[@]}" $RESP_PID; do
		stop_pid "$p"
		wait "$p" 2>/dev/null
	done
	remove_tmp "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

expect_json() {
	local desc=$1 file=$2 expr=$3
	if python3 - "$file" "$expr" <<'EOF' 2>"$TMP/jerr"; then ok "$desc"; else not_ok "$desc" "$(cat "$TMP/jerr" "$file")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
client() { python3 "$TESTS/serve_client.py" "$BASE" "$KEYS" "$@"; }

# serve OUT ARGS...: start paynotify-send --mode serve on a free port; sets BASE.
serve() {
	local log=$1 port
	shift
	port=$(pn_free_port)
	"$SEND" --mode serve --listen "127.0.0.1:$port" --keys "$KEYS" "$@" >"$log" 2>&1 &
	SERVE_PIDS+=($!)
	BASE=http://127.0.0.1:$port
	for _ in $(seq 1 100); do grep -q '^paynotify-send: serving' "$log" && return 0; sleep 0.05; done
	return 1
}
stop_last_server() {
	local p=${SERVE_PIDS[-1]}
	stop_pid "$p"
	wait "$p" 2>/dev/null
	unset 'SERVE_PIDS[-1]'
}

echo "# build"
if make -C "$ROOT/shim" paynotify-send >"$TMP/build.log" 2>&1 && ! grep -qi warning "$TMP/build.log"; then
	ok "paynotify-send builds without warnings"
else
	not_ok "paynotify-send builds without warnings" "$(cat "$TMP/build.log")"
	summary
	exit 1
fi
for f in merchant_1.key.pem merchant_1.pub.pem stripe_api_key_1.txt; do
	[ -s "$KEYS/$f" ] || { echo "missing $KEYS/$f (shim/tests/make-serve-keys.sh)" >&2; exit 2; }
done

# ------------------------------------------------------------------ selling
echo "# selling with --sales and --drop"
python3 "$TESTS/send_responder.py" --keys "$KEYS" --port-file "$TMP/port" >"$TMP/responder.log" 2>&1 &
RESP_PID=$!
for _ in $(seq 1 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
RESP=http://127.0.0.1:$(cat "$TMP/port")
NOW=$(date +%s)
DAY1=$(( (NOW / 86400 - 3) * 86400 + 3 * 3600 ))	# 11:00 Beijing, 03:00 UTC, 3 days ago
DAY2=$(( DAY1 + 86400 ))
SALES=$TMP/sales.tsv
SALES2=$TMP/sales2.tsv
for gw in wxpay alipay stripe; do
	curl -s -X POST "$RESP/reset?fail_first=0" >/dev/null
	"$SEND" --keys "$KEYS" --json --quiet --gateway "$gw" --url "$RESP/notify/$gw" --mode distinct -n 40 \
		--drop 0.25 --seed 21 --created $DAY1 --sales "$SALES" --ledger "$TMP/$gw.ledger" >"$TMP/sell-$gw.json"
	curl -s "$RESP/stats" >"$TMP/stats-$gw.json"
	check_cmd "$gw: 40 sold, the dropped ones never delivered, the others delivered once" python3 - \
		"$SALES" "$TMP/stats-$gw.json" "$TMP/sell-$gw.json" "$TMP/$gw.ledger" "$gw" <<'EOF'
import json, sys
sales = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.startswith(sys.argv[5] + "\t")]
seen = json.load(open(sys.argv[2]))["ids"]
rep = json.load(open(sys.argv[3]))
led = [l.rstrip("\n").split("\t") for l in open(sys.argv[4])]
dropped = {s[12] for s in sales if s[11] == "1"}
kept = {s[12] for s in sales if s[11] == "0"}
assert len(sales) == 40 and 4 <= len(dropped) <= 18, (len(sales), len(dropped))
assert set(seen) == kept and not dropped & set(seen), "responder saw other ids"
assert rep["dropped"] == len(dropped) and rep["deliveries"] == len(kept) and rep["notifications"] == 40, rep
assert {l[3] for l in led if l[7] == "dropped" and l[6] == "0"} == dropped and len(led) == 40, "ledger"
EOF
done
# the sales lines say what the notifications signed: same ids, amounts, times
"$SEND" --keys "$KEYS" --gateway alipay --mode distinct -n 3 --seed 21 --created $DAY1 --event refund \
	--start 5 --amount 2000 --refund-amount 2000 --sales "$TMP/dump.tsv" --dump-dir "$TMP/dump-ali" --quiet >/dev/null
"$SEND" --keys "$KEYS" --gateway wxpay --mode distinct -n 3 --seed 21 --created $DAY1 \
	--sales "$TMP/dump.tsv" --dump-dir "$TMP/dump-wx" --quiet >/dev/null
check_cmd "sales lines carry the signed notifications' ids, amounts and times" python3 - \
	"$TMP/dump.tsv" "$TMP/dump-ali" "$TMP/dump-wx" "$KEYS/wechat_apiv3.key" "$ROOT/test/vectors/tools/gcm.py" <<'EOF'
import base64, datetime, importlib.util, json, os, sys, urllib.parse
sales = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
ali = [s for s in sales if s[0] == "alipay"]
for i, s in enumerate(ali):
    f = dict(urllib.parse.parse_qsl(open(os.path.join(sys.argv[2], "%06d" % (i + 1), "body.form")).read()))
    t = datetime.datetime.strptime(f["gmt_refund"][:19], "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=datetime.timezone(datetime.timedelta(hours=8))).timestamp()
    assert (f["out_trade_no"], f["trade_no"], f["notify_id"], f["refund_fee"], f["total_amount"], f["out_biz_no"], f["buyer_id"]) == \
        (s[3], s[4], s[12], "20.00", "20.00", s[7], s[15]) and int(t) == int(s[10]) and s[9] == "2000", (f, s)
spec = importlib.util.spec_from_file_location("gcm", sys.argv[5]); gcm = importlib.util.module_from_spec(spec); spec.loader.exec_module(gcm)
key = open(sys.argv[4], "rb").read().strip()
wx = [s for s in sales if s[0] == "wxpay"]
for i, s in enumerate(wx):
    env = json.load(open(os.path.join(sys.argv[3], "%06d" % (i + 1), "body.json")))
    r = env["resource"]
    pt = json.loads(gcm.decrypt(key, r["nonce"].encode(), r["associated_data"].encode(), base64.b64decode(r["ciphertext"])))
    t = datetime.datetime.fromisoformat(pt["success_time"]).timestamp()
    assert (pt["out_trade_no"], pt["transaction_id"], pt["amount"]["total"], pt["payer"]["openid"], env["id"]) == \
        (s[3], s[4], int(s[5]), s[15], s[12]) and int(t) == int(s[10]), (pt, s)
assert len(ali) == 3 and len(wx) == 3
EOF
# refunds of some orders an hour later, a sale not paid yet, another day's sales
for gw in wxpay alipay stripe; do
	"$SEND" --keys "$KEYS" --quiet --gateway "$gw" --url "$RESP/notify/$gw" --mode distinct -n 4 --start 3 \
		--event refund --seed 22 --created $((DAY1 + 3600)) --sales "$SALES" >/dev/null
	"$SEND" --keys "$KEYS" --quiet --gateway "$gw" --url "$RESP/notify/$gw" --start 900 --seed 23 \
		--created $((NOW + 86400)) --drop 1 --sales "$SALES" >/dev/null
	"$SEND" --keys "$KEYS" --quiet --gateway "$gw" --url "$RESP/notify/$gw" --mode distinct -n 6 --start 1000 \
		--amount 1999 --seed 24 --created $DAY2 --sales "$SALES2" >/dev/null
done
"$SEND" --keys "$KEYS" --quiet --gateway alipay --url "$RESP/notify/alipay" --start 7 --event refund \
	--refund-amount 8888 --seed 25 --created $((DAY1 + 7200)) --sales "$SALES2" >/dev/null
check_cmd "--drop 1 in mode one: nothing delivered, exit 0, recorded as dropped" \
	test "$(grep -c $'\tPN00000900\t' "$SALES")" = 3 -a "$(grep $'\tPN00000900\t' "$SALES" | cut -f12 | sort -u)" = 1
check_rc "--sales with --mode bad is a usage error" 2 "$SEND" --keys "$KEYS" --gateway wxpay --mode bad \
	--url "$RESP/x" --sales "$TMP/x.tsv"
check_rc "--drop 1.5 is a usage error" 2 "$SEND" --keys "$KEYS" --gateway wxpay --url "$RESP/x" --drop 1.5
check_rc "--mode serve without --sales is a usage error" 2 "$SEND" --mode serve --listen 127.0.0.1:1 \
	--merchant-cert merchant_1.pub.pem --keys "$KEYS"
cat "$SALES2" >>"$TMP/all.tsv"
cat "$SALES" >>"$TMP/all.tsv"

# ------------------------------------------------------------------ serving
echo "# --mode serve"
if ! serve "$TMP/serve.log" --sales "$SALES,$SALES2" --merchant-cert merchant_1.pub.pem \
	--app-public-key merchant_1.pub.pem --stripe-api-key stripe_api_key_1.txt; then
	not_ok "the server starts" "$(cat "$TMP/serve.log")"
	summary
	exit 1
fi
ok "the server starts on a free loopback port"
for gw in wxpay alipay stripe; do
	check_cmd "$gw: every order queried, the signed answer is what was sold (paid, refunded, not yet paid)" \
		client check-queries $gw "$TMP/all.tsv" "$(date +%s)"
done
client wx "/v3/pay/transactions/out-trade-no/PN00000001?mchid=1900000109" --bad-sign >"$TMP/r.json"
expect_json "wxpay: a request signed over other bytes is 401 SIGN_ERROR, unsigned" "$TMP/r.json" \
	'd["status"]==401 and d["json"]["code"]=="SIGN_ERROR" and not d["signed"]'
client wx "/v3/pay/transactions/out-trade-no/PN00000001?mchid=1900000109" \
	--key "$KEYS/wechat_platform_2.key.pem" >"$TMP/r.json"
expect_json "wxpay: a request signed with another key is 401" "$TMP/r.json" 'd["status"]==401'
client wx "/v3/pay/transactions/out-trade-no/NO-SUCH-ORDER?mchid=1900000109" >"$TMP/r.json"
expect_json "wxpay: an unknown order is a signed 404 ORDER_NOT_EXIST 订单不存在" "$TMP/r.json" \
	'd["status"]==404 and d["json"]=={"code":"ORDER_NOT_EXIST","message":"订单不存在"} and d["verified"]'
client wx "/v3/pay/partner/transactions/out-trade-no/PN00000002?sp_mchid=1230000109&sub_mchid=1900000109" \
	--mchid 1230000109 >"$TMP/r.json"
expect_json "wxpay partner query: sp_mchid signs, the sub-merchant's order answered" "$TMP/r.json" \
	'd["status"]==200 and d["verified"] and d["json"]["sp_mchid"]=="1230000109" and d["json"]["sub_mchid"]=="1900000109" and "sp_openid" in d["json"]["payer"] and "mchid" not in d["json"]'
client ali alipay.trade.query '{"out_trade_no":"NO-SUCH-ORDER"}' >"$TMP/r.json"
expect_json "alipay: an unknown order is a signed 40004 ACQ.TRADE_NOT_EXIST" "$TMP/r.json" \
	'd["verified"] and d["json"]["alipay_trade_query_response"]["sub_code"]=="ACQ.TRADE_NOT_EXIST" and d["json"]["alipay_trade_query_response"]["code"]=="40004"'
client ali alipay.trade.query '{"out_trade_no":"PN00000001"}' --bad-sign >"$TMP/r.json"
expect_json "alipay: a request with a bad sign is isv.invalid-signature, no trade data" "$TMP/r.json" \
	'd["json"]["alipay_trade_query_response"]["sub_code"]=="isv.invalid-signature" and "trade_no" not in d["json"]["alipay_trade_query_response"]'
client stripe "/v1/payment_intents/search?query=metadata%5B%27order_id%27%5D%3A%27PN00000001%27" \
	--api-key sk_test_not_the_key >"$TMP/r.json"
expect_json "stripe: a wrong API key is 401" "$TMP/r.json" \
	'd["status"]==401 and d["json"]["error"]["type"]=="invalid_request_error"'
client stripe "/v1/payment_intents/pi_nosuchintent" >"$TMP/r.json"
expect_json "stripe: an unknown payment intent is 404 resource_missing" "$TMP/r.json" \
	'd["status"]==404 and d["json"]["error"]["code"]=="resource_missing"'

# the close calls: an order not paid yet is closed and answered closed
# from then on; a paid one is refused
WXC=/v3/pay/transactions/out-trade-no
client wx "$WXC/PN00000001/close" --post '{"mchid":"1900000109"}' >"$TMP/r.json"
expect_json "wxpay close of a paid order: a signed 400 ORDERPAID" "$TMP/r.json" \
	'd["status"]==400 and d["json"]["code"]=="ORDERPAID" and d["verified"]'
client wx "$WXC/PN00000900/close" --post '{"mchid":"1900000109"}' --bad-sign >"$TMP/r.json"
expect_json "wxpay close signed over other bytes: 401 SIGN_ERROR" "$TMP/r.json" \
	'd["status"]==401 and d["json"]["code"]=="SIGN_ERROR"'
client wx "$WXC/PN00000900/close" --post '{"mchid":"1900000109"}' >"$TMP/r.json"
expect_json "wxpay close of an order not paid: 204, empty body, signed" "$TMP/r.json" \
	'd["status"]==204 and d["body"]=="" and d["verified"]'
client wx "$WXC/PN00000900?mchid=1900000109" >"$TMP/r.json"
expect_json "wxpay: the closed order is queried CLOSED" "$TMP/r.json" \
	'd["status"]==200 and d["json"]["trade_state"]=="CLOSED" and d["verified"] and "transaction_id" not in d["json"]'
client wx "$WXC/PN00000900/close" >"$TMP/r.json"
expect_json "wxpay close by GET: 405" "$TMP/r.json" 'd["status"]==405'
client ali alipay.trade.close '{"out_trade_no":"PN00000001"}' >"$TMP/r.json"
expect_json "alipay close of a paid order: ACQ.TRADE_STATUS_ERROR, signed" "$TMP/r.json" \
	'd["verified"] and d["json"]["alipay_trade_close_response"]["sub_code"]=="ACQ.TRADE_STATUS_ERROR"'
client ali alipay.trade.close '{"out_trade_no":"PN00000900"}' --bad-sign >"$TMP/r.json"
expect_json "alipay close with a bad sign: isv.invalid-signature" "$TMP/r.json" \
	'd["json"]["alipay_trade_close_response"]["sub_code"]=="isv.invalid-signature"'
client ali alipay.trade.close '{"out_trade_no":"PN00000900"}' >"$TMP/r.json"
expect_json "alipay close of an order not paid: 10000 of that order, signed" "$TMP/r.json" \
	'd["verified"] and d["json"]["alipay_trade_close_response"]["code"]=="10000" and d["json"]["alipay_trade_close_response"]["out_trade_no"]=="PN00000900"'
client ali alipay.trade.query '{"out_trade_no":"PN00000900"}' >"$TMP/r.json"
expect_json "alipay: the closed order is queried TRADE_CLOSED, nothing received" "$TMP/r.json" \
	'd["verified"] and d["json"]["alipay_trade_query_response"]["trade_status"]=="TRADE_CLOSED" and d["json"]["alipay_trade_query_response"]["receipt_amount"]=="0.00"'

# a sale appended while the server runs is answered
"$SEND" --keys "$KEYS" --quiet --gateway wxpay --url "$RESP/notify/wxpay" --start 777 --seed 26 \
	--created $((NOW - 60)) --drop 1 --sales "$SALES2" >/dev/null
client wx "/v3/pay/transactions/out-trade-no/PN00000777?mchid=1900000109" >"$TMP/r.json"
expect_json "a sale appended to a sales file while serving is answered (SUCCESS)" "$TMP/r.json" \
	'd["status"]==200 and d["json"]["trade_state"]=="SUCCESS" and d["verified"]'
tail -n 1 "$SALES2" >>"$TMP/all.tsv"

# bills
BJDAY1=$(TZ=Asia/Shanghai date -d "@$DAY1" +%F)
BJDAY2=$(TZ=Asia/Shanghai date -d "@$DAY2" +%F)
for tar in "" "&tar_type=GZIP"; do
	client wx "/v3/bill/tradebill?bill_date=$BJDAY1&bill_type=ALL$tar" >"$TMP/tb.json"
	expect_json "wxpay tradebill$tar: signed, SHA1, a download URL on the server" "$TMP/tb.json" \
		'd["status"]==200 and d["verified"] and d["json"]["hash_type"]=="SHA1" and len(d["json"]["hash_value"])==40 and d["json"]["download_url"].startswith("'"$BASE"'/v3/billdownload/file?token=")'
	url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["json"]["download_url"])' "$TMP/tb.json")
	client wx "${url#"$BASE"}" >"$TMP/dl.json"
	python3 - "$TMP/dl.json" "$TMP/bill.csv" "$tar" <<'EOF'
import base64, gzip, json, sys
raw = base64.b64decode(json.load(open(sys.argv[1]))["body_b64"])
open(sys.argv[2], "wb").write(gzip.decompress(raw) if sys.argv[3] else raw)
EOF
	check_cmd "wxpay bill$tar: the SHA1 is the plain file's" test \
		"$(sha1sum "$TMP/bill.csv" | cut -c1-40)" = "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["json"]["hash_value"])' "$TMP/tb.json")"
	check_cmd "wxpay bill$tar: rows, fields and summary match the sales" \
		client check-wx-bill "$TMP/bill.csv" "$TMP/all.tsv" "$BJDAY1" 1900000109
done
client wx "/v3/bill/tradebill?bill_date=2001-01-01&bill_type=ALL" >"$TMP/r.json"
expect_json "wxpay: a day without sales is a signed 400 NO_STATEMENT_EXIST" "$TMP/r.json" \
	'd["status"]==400 and d["json"]["code"]=="NO_STATEMENT_EXIST" and d["verified"]'
client wx "/v3/billdownload/file?token=00" --bad-sign >"$TMP/r.json"
expect_json "wxpay: the bill download wants a signed request too" "$TMP/r.json" 'd["status"]==401'
for day in "$BJDAY1" "$BJDAY2"; do
	client ali alipay.data.dataservice.bill.downloadurl.query "{\"bill_type\":\"trade\",\"bill_date\":\"$day\"}" >"$TMP/r.json"
	expect_json "alipay bill url for $day: signed, a csv.zip on the server" "$TMP/r.json" \
		'd["verified"] and d["json"]["alipay_data_dataservice_bill_downloadurl_query_response"]["bill_download_url"].startswith("'"$BASE"'/downloadBillFile.resource?") and "\\/" in d["body"]'
	url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["json"]["alipay_data_dataservice_bill_downloadurl_query_response"]["bill_download_url"])' "$TMP/r.json")
	client fetch "$url" | python3 -c 'import base64,json,sys; open(sys.argv[1],"wb").write(base64.b64decode(json.load(sys.stdin)["body_b64"]))' "$TMP/ali.zip"
	check_cmd "alipay bill $day: the zip's GBK CSVs match the sales (rows, TABs, markers, totals)" \
		client check-ali-bill "$TMP/ali.zip" "$TMP/all.tsv" "$day" 2088000000000002
done
client ali alipay.data.dataservice.bill.downloadurl.query '{"bill_type":"trade","bill_date":"2001-01-01"}' >"$TMP/r.json"
expect_json "alipay: a day without sales is isp.bill_not_exist, signed" "$TMP/r.json" \
	'd["verified"] and d["json"]["alipay_data_dataservice_bill_downloadurl_query_response"]["sub_code"]=="isp.bill_not_exist"'
D0=$(( DAY1 / 86400 * 86400 ))
client stripe "/v1/balance_transactions?created%5Bgte%5D=$D0&created%5Blt%5D=$((D0 + 86400))&limit=100" \
	| python3 -c 'import json,sys; json.dump(json.load(sys.stdin)["json"], open(sys.argv[1],"w"))' "$TMP/bt.json"
check_cmd "stripe balance transactions of a UTC day match the sales (charges with fees, refunds)" \
	client check-stripe-bill "$TMP/bt.json" "$TMP/all.tsv" $D0 $((D0 + 86400))
check_cmd "stripe balance transactions: limit and starting_after page through the same list" python3 - \
	"$BASE" "$KEYS" "$TMP/bt.json" "$D0" <<EOF
import json, subprocess, sys
full = [t["id"] for t in json.load(open(sys.argv[3]))["data"]]
got, after = [], None
while True:
    q = "/v1/balance_transactions?created%%5Bgte%%5D=%s&created%%5Blt%%5D=%d&limit=7" % (sys.argv[4], int(sys.argv[4]) + 86400)
    if after:
        q += "&starting_after=" + after
    d = json.loads(subprocess.check_output(["python3", "$TESTS/serve_client.py", sys.argv[1], sys.argv[2], "stripe", q]))["json"]
    got += [t["id"] for t in d["data"]]
    if not d["has_more"]:
        break
    after = d["data"][-1]["id"]
assert got == full and len(full) > 7, (len(got), len(full))
EOF
check_cmd "the server was stopped by its pid" stop_last_server

# tampered answers are refused by the client
for bad in signature body; do
	serve "$TMP/serve-$bad.log" --sales "$SALES" --merchant-cert merchant_1.pub.pem \
		--app-public-key merchant_1.pub.pem --serve-bad $bad || not_ok "server --serve-bad $bad starts"
	client wx "/v3/pay/transactions/out-trade-no/PN00000001?mchid=1900000109" >"$TMP/r.json"
	expect_json "--serve-bad $bad: the WeChat answer does not verify" "$TMP/r.json" \
		'd["status"]==200 and d["signed"] and d["verified"] is False'
	client ali alipay.trade.query '{"out_trade_no":"PN00000002"}' >"$TMP/r.json"
	expect_json "--serve-bad $bad: the Alipay answer does not verify" "$TMP/r.json" \
		'd["signed"] and d["verified"] is False'
	stop_last_server
done

# ------------------------------------------------------------------ valgrind
if [ "${SERVE_TEST_VALGRIND:-1}" != 0 ] && command -v valgrind >/dev/null; then
	VG="valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=9"
	check_cmd "valgrind: a retry run with --sales and --drop, no leaks or errors" $VG "$SEND" --keys "$KEYS" \
		--gateway alipay --url "$RESP/notify/alipay" --mode retry -n 6 --drop 0.5 --seed 3 \
		--time-scale 0.001 --quiet --sales "$TMP/vg.tsv" --ledger "$TMP/vg.ledger"
	port=$(pn_free_port)
	$VG --log-file="$TMP/vg-serve.log" "$SEND" --mode serve --listen "127.0.0.1:$port" --keys "$KEYS" \
		--sales "$TMP/all.tsv" --merchant-cert merchant_1.pub.pem --app-public-key merchant_1.pub.pem \
		--stripe-api-key stripe_api_key_1.txt >"$TMP/vg-serve.out" 2>&1 &
	VG_PID=$!
	SERVE_PIDS+=($VG_PID)
	for _ in $(seq 1 200); do grep -q '^paynotify-send: serving' "$TMP/vg-serve.out" && break; sleep 0.1; done
	BASE=http://127.0.0.1:$port
	client wx "/v3/pay/transactions/out-trade-no/PN00000003?mchid=1900000109" >/dev/null
	client wx "/v3/pay/transactions/out-trade-no/PN00000003?mchid=1900000109" --bad-sign >/dev/null
	client wx "/v3/bill/tradebill?bill_date=$BJDAY1&tar_type=GZIP" >"$TMP/tb.json"
	url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["json"]["download_url"])' "$TMP/tb.json")
	client wx "${url#"$BASE"}" >/dev/null
	client ali alipay.trade.query '{"out_trade_no":"PN00000003"}' >/dev/null
	client wx "/v3/pay/transactions/out-trade-no/PN00000900/close" --post '{"mchid":"1900000109"}' >/dev/null
	client wx "/v3/pay/transactions/out-trade-no/PN00000001/close" --post '{"mchid":"1900000109"}' >/dev/null
	client wx "/v3/pay/transactions/out-trade-no/PN00000900?mchid=1900000109" >/dev/null
	client ali alipay.trade.close '{"out_trade_no":"PN00000900"}' >/dev/null
	client ali alipay.trade.close '{"out_trade_no":"PN00000900"}' >/dev/null
	client ali alipay.trade.query '{"out_trade_no":"PN00000900"}' >/dev/null
	client ali alipay.data.dataservice.bill.downloadurl.query "{\"bill_type\":\"trade\",\"bill_date\":\"$BJDAY1\"}" >"$TMP/r.json"
	url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["json"]["alipay_data_dataservice_bill_downloadurl_query_response"]["bill_download_url"])' "$TMP/r.json")
	client fetch "$url" >/dev/null
	client stripe "/v1/balance_transactions?limit=3" >/dev/null
	client stripe "/v1/payment_intents/search?query=metadata%5B%27order_id%27%5D%3A%27PN00000003%27" >/dev/null
	kill -TERM "$VG_PID"
	wait "$VG_PID"
	rc=$?
	unset 'SERVE_PIDS[-1]'
	check_cmd "valgrind: serving every API once, stopped by SIGTERM, no leaks or errors (exit $rc)" \
		sh -c "[ $rc = 0 ] && ! grep -q . '$TMP/vg-serve.log'"
	[ $rc = 0 ] || cat "$TMP/vg-serve.log" | head -40
else
	skipped "valgrind"
fi

summary
