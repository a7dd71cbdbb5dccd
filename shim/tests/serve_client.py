#!/usr/bin/env python3
"""A merchant's client of paynotify-send --mode serve, for shim/tests/serve-test.sh.

Signs requests as a merchant does (python3-cryptography, the TEST-ONLY keys
of test/vectors/keys), checks the answers' signatures as a merchant must,
and checks the bills against the sales file.  Each request command prints
one JSON object on stdout:
  {"status": int, "headers": {name: value}, "body": text, "body_b64": ...,
   "signed": bool, "verified": bool|null, "json": parsed body or null}

usage:
  serve_client.py BASE KEYS wx URI [--mchid M] [--bad-sign] [--key FILE] [--post BODY]
  serve_client.py BASE KEYS ali METHOD BIZ_JSON [--get] [--bad-sign] [--app-id ID]
  serve_client.py BASE KEYS stripe URI [--api-key KEY]
  serve_client.py BASE KEYS fetch URL
  serve_client.py BASE KEYS check-queries GATEWAY SALES NOW
  serve_client.py - - check-wx-bill CSVFILE SALES DAY MCHID
  serve_client.py - - check-ali-bill ZIPFILE SALES DAY SELLER
  serve_client.py - - check-stripe-bill JSONFILE SALES GTE LT
The check commands exit 1 with the reason when the bill does not match.
"""
import base64
import datetime
import hashlib
import io
import json
import os
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography import x509

BJ = datetime.timezone(datetime.timedelta(hours=8))


def load_priv(path):
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), None)


def load_pub(path):
    data = open(path, "rb").read()
    if b"CERTIFICATE" in data:
        return x509.load_pem_x509_certificate(data).public_key()
    return serialization.load_pem_public_key(data)


def sign(key, msg):
    return base64.b64encode(key.sign(msg, padding.PKCS1v15(), hashes.SHA256())).decode()


def verify(pub, msg, sig_b64):
    try:
        pub.verify(base64.b64decode(sig_b64), msg, padding.PKCS1v15(), hashes.SHA256())
        return True
    except (InvalidSignature, ValueError):
        return False


def http(method, url, headers, body=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers.items()), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers.items()), e.read()


def result(status, headers, raw, signed=False, verified=None):
    out = {"status": status, "headers": headers, "signed": signed, "verified": verified,
           "body_b64": base64.b64encode(raw).decode()}
    try:
        out["body"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        out["body"] = None
    try:
        out["json"] = json.loads(raw)
    except ValueError:
        out["json"] = None
    return out


def opt(args, name, default=None):
    if name in args:
        i = args.index(name)
        return args[i + 1]
    return default


def cmd_wx(base, keys, args):
    uri = args[0]
    mchid = opt(args, "--mchid", "1900000109")
    key = load_priv(opt(args, "--key", os.path.join(keys, "merchant_1.key.pem")))
    body = opt(args, "--post")
    method = "GET" if body is None else "POST"
    ts = str(int(time.time()))
    nonce = secrets.token_hex(16).upper()
    sig = sign(key, ("%s\n%s\n%s\n%s\n%s\n" % (method, uri, ts, nonce, body or "")).encode())
    if "--bad-sign" in args:
        sig = sign(key, ("%s\n%s\n%s\n%s\n%s\n" % (method, uri + "x", ts, nonce, body or "")).encode())
    auth = ('WECHATPAY2-SHA256-RSA2048 mchid="%s",nonce_str="%s",signature="%s",'
            'timestamp="%s",serial_no="%s"' % (mchid, nonce, sig, ts, "4D3C2B1A00000000000000000000000000000001"))
    headers = {"Authorization": auth, "Accept": "application/json", "User-Agent": "serve_client"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    status, headers, raw = http(method, base + uri, headers,
                                body.encode() if body is not None else None)
    h = {k.lower(): v for k, v in headers.items()}
    signed = "wechatpay-signature" in h
    verified = None
    if signed:
        pub = load_pub(os.path.join(keys, "wechat_platform_1.pub.pem"))
        msg = h["wechatpay-timestamp"].encode() + b"\n" + h["wechatpay-nonce"].encode() + b"\n" + raw + b"\n"
        verified = verify(pub, msg, h["wechatpay-signature"]) and \
            abs(int(h["wechatpay-timestamp"]) - time.time()) < 300
    return result(status, headers, raw, signed, verified)


def alipay_signed_content(text, node):
    """The response object's exact text, found the way Alipay's Java SDK does."""
    i = text.find('"%s"' % node)
    if i < 0:
        return None
    i = text.index("{", i + len(node) + 2)
    depth, inq, esc = 0, False, False
    for j in range(i, len(text)):
        c = text[j]
        if inq:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                inq = False
            continue
        if c == '"':
            inq = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i:j + 1]
    return None


def cmd_ali(base, keys, args):
    method, biz = args[0], args[1]
    key = load_priv(opt(args, "--key", os.path.join(keys, "merchant_1.key.pem")))
    p = {"app_id": opt(args, "--app-id", "2021000000000001"), "method": method, "format": "JSON",
         "charset": "UTF-8", "sign_type": "RSA2",
         "timestamp": datetime.datetime.now(BJ).strftime("%Y-%m-%d %H:%M:%S"), "version": "1.0",
         "biz_content": biz}
    content = "&".join("%s=%s" % (k, p[k]) for k in sorted(p) if p[k])
    p["sign"] = sign(key, (content + ("x" if "--bad-sign" in args else "")).encode())
    common = {k: v for k, v in p.items() if k != "biz_content"}
    if "--get" in args:
        status, headers, raw = http("GET", base + "/gateway.do?" + urllib.parse.urlencode(p), {})
    else:
        status, headers, raw = http("POST", base + "/gateway.do?" + urllib.parse.urlencode(common),
                                    {"Content-Type": "application/x-www-form-urlencoded;charset=UTF-8"},
                                    urllib.parse.urlencode({"biz_content": biz}).encode())
    text = raw.decode("utf-8")
    node = method.replace(".", "_") + "_response"
    obj = json.loads(text)
    signed = "sign" in obj
    verified = None
    if signed:
        content = alipay_signed_content(text, node)
        verified = content is not None and verify(load_pub(os.path.join(keys, "alipay_1.pub.pem")),
                                                  content.encode("utf-8"), obj["sign"])
    return result(status, headers, raw, signed, verified)


def cmd_stripe(base, keys, args):
    key = opt(args, "--api-key") or open(os.path.join(keys, "stripe_api_key_1.txt")).read().strip()
    status, headers, raw = http("GET", base + args[0], {"Authorization": "Bearer " + key})
    return result(status, headers, raw)


def cmd_fetch(base, keys, args):
    status, headers, raw = http("GET", args[0], {})
    return result(status, headers, raw)


# ------------------------------------------------------------------ bills

def read_sales(path):
    rows = []
    for line in open(path, encoding="utf-8"):
        if not line.strip() or line.startswith("#"):
            continue
        f = line.rstrip("\n").split("\t")
        assert len(f) == 16, ("sales line", line)
        rows.append(dict(gateway=f[0], channel=f[1], event=f[2], order=f[3], trade=f[4], amount=int(f[5]),
                         currency=f[6], refund_id=f[7], out_refund_no=f[8], refund=int(f[9]), time=int(f[10]),
                         dropped=f[11] == "1", notify_id=f[12], merchant=f[13], app=f[14], payer=f[15]))
    return rows


def yuan(minor):
    return "%s%d.%02d" % ("-" if minor < 0 else "", abs(minor) // 100, abs(minor) % 100)


def fee(minor):
    return (minor * 6 + 500) // 1000


def day_of(s, day, tz):
    return datetime.datetime.fromtimestamp(s["time"], tz).strftime("%Y-%m-%d") == day


def check_wx_bill(path, sales, day, mchid):
    raw = open(path, "rb").read()
    assert raw.startswith(b"\xef\xbb\xbf"), "no BOM"
    lines = raw[3:].decode("utf-8").split("\r\n")
    assert lines[-1] == "", "no CRLF after the summary"
    lines = lines[:-1]
    assert lines[0].count(",") == 26 and lines[0].startswith("交易时间,公众账号ID,"), lines[0]
    assert lines[-2] == "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"
    want = [s for s in sales if s["gateway"] == "wxpay" and s["merchant"] == mchid and day_of(s, day, BJ)]
    rows = [l for l in lines[1:-2]]
    assert len(rows) == len(want), (len(rows), len(want))
    got = {}
    for r in rows:
        f = r.split(",`")
        assert r.startswith("`") and len(f) == 27 and r.endswith(",`"), r
        f[0] = f[0][1:]
        got[(f[6], f[9])] = f
    for s in want:
        f = got[(s["order"], "SUCCESS" if s["event"] == "pay" else "REFUND")]
        t = datetime.datetime.fromtimestamp(s["time"], BJ).strftime("%Y-%m-%d %H:%M:%S")
        assert f[0] == t and f[5] == s["trade"] and f[2] == mchid and f[1] == s["app"] and f[7] == s["payer"], f
        if s["event"] == "pay":
            assert f[12] == yuan(s["amount"]) and f[16] == "0.00" and f[22] == yuan(fee(s["amount"])) + "000", f
        else:
            assert f[14] == s["refund_id"] and f[15] == s["out_refund_no"] and f[16] == yuan(s["refund"]), f
            assert f[22] == yuan(-fee(s["refund"])) + "000" and f[12] == "0.00", f
    pay = sum(s["amount"] for s in want if s["event"] == "pay")
    ref = sum(s["refund"] for s in want if s["event"] == "refund")
    fees = sum(fee(s["amount"]) if s["event"] == "pay" else -fee(s["refund"]) for s in want)
    summary = "`%d,`%s,`%s,`0.00,`%s000,`%s,`%s" % (len(want), yuan(pay), yuan(ref), yuan(fees), yuan(pay), yuan(ref))
    assert lines[-1] == summary, (lines[-1], summary)
    return "%d rows, %s paid, %s refunded" % (len(want), yuan(pay), yuan(ref))


def check_ali_bill(path, sales, day, seller):
    z = zipfile.ZipFile(path)
    names = [i.filename.encode("cp437").decode("gbk") for i in z.infolist()]
    d = day.replace("-", "")
    assert names == ["%s0156_%s_业务明细.csv" % (seller, d), "%s0156_%s_业务明细(汇总).csv" % (seller, d)], names
    assert all(i.flag_bits & 0x800 == 0 for i in z.infolist()), "UTF-8 flag set"
    det = z.read(z.infolist()[0]).decode("gbk").split("\r\n")
    summ = z.read(z.infolist()[1]).decode("gbk").split("\r\n")
    assert det[0] == "#支付宝业务明细查询" and det[1] == "#账号：[%s0156]" % seller, det[:2]
    assert det[3] == "#" + "-" * 41 + "业务明细列表" + "-" * 40, det[3]
    hdr = det[4].split(",")
    assert len(hdr) == 25 and hdr[0] == "支付宝交易号" and hdr[11] == "订单金额（元）", hdr
    end = det.index("#" + "-" * 41 + "业务明细列表结束" + "-" * 36)
    rows = [r.split(",") for r in det[5:end]]
    want = [s for s in sales if s["gateway"] == "alipay" and s["merchant"] == seller and day_of(s, day, BJ)]
    assert len(rows) == len(want), (len(rows), len(want))
    got = {(r[1].rstrip("\t"), r[2].rstrip("\t")): r for r in rows}
    for s in want:
        r = got[(s["order"], "交易" if s["event"] == "pay" else "退款")]
        assert len(r) == 25 and r[0] == s["trade"] + "\t" and r[0].endswith("\t"), r
        amt = s["amount"] if s["event"] == "pay" else -s["refund"]
        t = datetime.datetime.fromtimestamp(s["time"], BJ).strftime("%Y-%m-%d %H:%M:%S")
        assert r[5] == t and r[11] == yuan(amt) and r[12] == yuan(amt), r
        assert r[22] == yuan(-fee(s["amount"]) if s["event"] == "pay" else fee(s["refund"])), r
        if s["event"] == "refund":
            assert r[21] == s["out_refund_no"] + "\t", r
    trades = [s for s in want if s["event"] == "pay"]
    refunds = [s for s in want if s["event"] == "refund"]
    tsum = sum(s["amount"] for s in trades)
    rsum = -sum(s["refund"] for s in refunds)
    assert det[end + 1] == "#交易合计：%d笔，商家实收共%s元，商家优惠共0.00元" % (len(trades), yuan(tsum)), det[end + 1]
    assert det[end + 2] == "#退款合计：%d笔，商家实收退款共%s元，商家优惠退款共0.00元" % (len(refunds), yuan(rsum)), det[end + 2]
    assert det[end + 3].startswith("#导出时间：[") and det[end + 4] == "", det[end + 3:]
    fees = sum(-fee(s["amount"]) for s in trades) + sum(fee(s["refund"]) for s in refunds)
    assert summ[0] == "#支付宝业务汇总查询" and summ[3] == "#" + "-" * 41 + "业务汇总列表" + "-" * 40, summ[:4]
    assert len(summ[4].split(",")) == 12, summ[4]
    total = "合计,,%d,%d,%s,%s,0.00,0.00,0.00,%s,0.00,%s" % (len(trades), len(refunds), yuan(tsum + rsum),
                                                          yuan(tsum + rsum), yuan(fees), yuan(tsum + rsum + fees))
    assert summ[5] == total, (summ[5], total)
    assert summ[6] == "#" + "-" * 40 + "业务汇总列表结束" + "-" * 37, summ[6]
    return "%d trades, %d refunds" % (len(trades), len(refunds))


def check_stripe_bill(path, sales, gte, lt):
    got = json.load(open(path))
    data = got["data"]
    want = [s for s in sales if s["gateway"] == "stripe" and gte <= s["time"] < lt]
    assert got["object"] == "list" and len(data) == len(want), (len(data), len(want))
    assert [t["created"] for t in data] == sorted((t["created"] for t in data), reverse=True)
    by = {(t["type"], t["description"].split("Order ")[1].rstrip(")")): t for t in data}
    for s in want:
        t = by[("charge" if s["event"] == "pay" else "refund", s["order"])]
        if s["event"] == "pay":
            assert t["amount"] == s["amount"] and t["source"] == s["payer"] and t["net"] == t["amount"] - t["fee"], t
        else:
            assert t["amount"] == -s["refund"] and t["source"] == s["refund_id"] and t["fee"] == 0, t
        assert t["created"] == s["time"] and t["currency"] == s["currency"] and t["id"].startswith("txn_"), t
    return "%d balance transactions" % len(data)


def check_queries(base, keys, gw, sales, now):
    """Queries every order of gw in the record and compares the answer with it."""
    orders = {}
    for s in sales:
        if s["gateway"] == gw:
            orders.setdefault(s["order"], {})[s["event"]] = s
    n = 0
    for no, ev in sorted(orders.items()):
        pay, ref = ev.get("pay"), ev.get("refund")
        v = pay or ref
        paid = ref is not None or pay["time"] <= now
        if gw == "wxpay":
            r = cmd_wx(base, keys, ["/v3/pay/transactions/out-trade-no/%s?mchid=%s" % (no, v["merchant"])])
            d = r["json"]
            assert r["status"] == 200 and r["verified"], (no, r["status"], r["verified"])
            state = "NOTPAY" if not paid else "REFUND" if ref else "SUCCESS"
            assert d["trade_state"] == state and d["out_trade_no"] == no and d["amount"]["total"] == v["amount"], d
            if paid:
                t = datetime.datetime.fromtimestamp(v["time"] if not pay else pay["time"], BJ).isoformat()
                assert d["transaction_id"] == v["trade"] and d["success_time"] == t and \
                    d["payer"]["openid"] == v["payer"] and d["amount"]["payer_total"] == v["amount"], d
            else:
                assert "transaction_id" not in d and "success_time" not in d, d
        elif gw == "alipay":
            args = [] if n % 2 else ["--get"]
            r = cmd_ali(base, keys, ["alipay.trade.query", json.dumps({"out_trade_no": no})] + args)
            d = r["json"]["alipay_trade_query_response"]
            assert r["verified"] and d["code"] == "10000", (no, r["verified"], d)
            state = "WAIT_BUYER_PAY" if not paid else \
                "TRADE_CLOSED" if ref and ref["refund"] >= v["amount"] else "TRADE_SUCCESS"
            assert d["trade_status"] == state and d["trade_no"] == v["trade"] and \
                d["total_amount"] == yuan(v["amount"]) and d["buyer_user_id"] == v["payer"], d
            if paid:
                t = datetime.datetime.fromtimestamp(v["time"] if not pay else pay["time"], BJ)
                assert d["send_pay_date"] == t.strftime("%Y-%m-%d %H:%M:%S") and \
                    d["receipt_amount"] == yuan(v["amount"]), d
        else:
            q = urllib.parse.quote("metadata['order_id']:'%s'" % no)
            r = cmd_stripe(base, keys, ["/v1/payment_intents/search?query=" + q])
            d = r["json"]
            assert r["status"] == 200 and d["object"] == "search_result" and len(d["data"]) == 1, r
            pi = d["data"][0]
            assert pi["id"] == v["trade"] and pi["metadata"]["order_id"] == no and pi["amount"] == v["amount"], pi
            assert pi["status"] == ("succeeded" if paid else "requires_payment_method"), pi
            assert pi["amount_received"] == (v["amount"] if paid else 0), pi
            assert pi["latest_charge"] == (v["payer"] if paid else None), pi
            r2 = cmd_stripe(base, keys, ["/v1/payment_intents/" + v["trade"]])
            assert r2["status"] == 200 and r2["json"] == pi, r2
        n += 1
    return "%d %s orders answered as recorded" % (n, gw)


def main():
    base, keys, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    if cmd == "check-queries":
        try:
            print(check_queries(base.rstrip("/"), keys, args[0], read_sales(args[1]), int(args[2])))
        except AssertionError as e:
            print("answer does not match the sales: %r" % (e.args,))
            sys.exit(1)
        return
    if cmd.startswith("check-"):
        sales = read_sales(args[1])
        try:
            if cmd == "check-wx-bill":
                print(check_wx_bill(args[0], sales, args[2], args[3]))
            elif cmd == "check-ali-bill":
                print(check_ali_bill(args[0], sales, args[2], args[3]))
            else:
                print(check_stripe_bill(args[0], sales, int(args[2]), int(args[3])))
        except AssertionError as e:
            print("bill does not match the sales: %r" % (e.args,))
            sys.exit(1)
        return
    fn = {"wx": cmd_wx, "ali": cmd_ali, "stripe": cmd_stripe, "fetch": cmd_fetch}[cmd]
    json.dump(fn(base.rstrip("/"), keys, args), sys.stdout, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
