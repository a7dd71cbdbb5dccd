#!/usr/bin/env python3
"""Independent check of a paynotify-send --dump-dir folder.

Every signature is checked with the openssl command-line tool, the WeChat
resource is decrypted with test/vectors/tools/gcm.py (AES-GCM built from
openssl AES-ECB/CTR plus a Python GHASH), and the decoded fields are compared
with what was asked for.  Rows whose `bad` column names a broken variant are
checked for exactly that defect (e.g. a tampered body must NOT verify).

With --payload FILE the requests were made with paynotify-send --payload FILE
and are checked against that file instead: WeChat's envelope is the file's
with "ciphertext" in the place of "plaintext" and the ciphertext decrypts to
the file's plaintext; Alipay's parameters are the file's (in its charset)
plus a sign over them; Stripe's body is the file's bytes.

Agreement events (sign, terminate, charge, charge-failed) are checked for the
agreement they name: --agreement-id / --agreement-ref when given, else the
form of a derived one (WeChat 2026 + 14 digits, Alipay 2026 + 16 digits,
Stripe sub_ + 24 letters and digits; AG<order> or, for Stripe, the order);
--agreements-out FILE writes "order<TAB>agreement id" per request, so that
runs of several events can be compared.

usage: send_verify.py GATEWAY DUMPDIR KEYSDIR [--event E] [--amount A]
                      [--refund-amount R] [--now T] [--serial S] [--wx-pub FILE]
                      [--payload FILE] [--agreement-id ID] [--agreement-ref R]
                      [--agreements-out FILE]
Prints one line per request and exits 1 if any check failed.
"""
import argparse
import base64
import hmac
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from urllib.parse import unquote_to_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
GCM_PATH = os.environ.get("PN_GCM_PY", os.path.join(HERE, "..", "..", "test", "vectors", "tools", "gcm.py"))


def load_gcm():
    sys.dont_write_bytecode = True  # never leave a cache next to the shared helper
    spec = importlib.util.spec_from_file_location("gcm", GCM_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def openssl_verify(pub, msg, sig):
    """True when openssl says the RSA-SHA256 PKCS#1 v1.5 signature is good."""
    with tempfile.TemporaryDirectory() as d:
        m, s = os.path.join(d, "msg"), os.path.join(d, "sig")
        open(m, "wb").write(msg)
        open(s, "wb").write(sig)
        p = subprocess.run(["openssl", "dgst", "-sha256", "-verify", pub, "-signature", s, m],
                           capture_output=True)
        return p.returncode == 0 and b"Verified OK" in p.stdout


def openssl_hmac(secret, msg):
    with tempfile.NamedTemporaryFile() as f:
        f.write(msg)
        f.flush()
        out = subprocess.run(["openssl", "dgst", "-sha256", "-hmac", secret, f.name],
                             capture_output=True, check=True).stdout.decode()
    return out.strip().rsplit(" ", 1)[-1]


def cert_serial(path):
    out = subprocess.run(["openssl", "x509", "-in", path, "-noout", "-serial"],
                         capture_output=True, check=True).stdout.decode()
    return out.strip().split("=", 1)[1]


def read_headers(path):
    hs = {}
    for line in open(path, encoding="utf-8").read().splitlines():
        k, _, v = line.partition(": ")
        hs[k.lower()] = v
    return hs


def yuan(minor):
    return "%d.%02d" % (minor // 100, minor % 100)


AGREEMENT_EVENTS = ("sign", "terminate")
# WeChat: event_type and original_type (= associated data) per --event
WX_KINDS = {"pay": ("TRANSACTION.SUCCESS", "transaction"), "refund": ("REFUND.SUCCESS", "refund"),
            "sign": ("ENTRUST.SIGN", "entrust"), "terminate": ("ENTRUST.TERMINATE", "entrust"),
            "charge": ("TRANSACTION.SUCCESS", "transaction")}
DERIVED_ID = {"wxpay": r"2026[0-9]{14}", "alipay": r"2026[0-9]{16}", "stripe": r"sub_[A-Za-z0-9]{24}"}


class Checker:
    def __init__(self, a):
        self.a = a
        self.k = lambda n: os.path.join(a.keys, n)
        self.gcm = load_gcm() if a.gateway == "wxpay" else None
        self.serial = a.serial or (cert_serial(self.k("wechat_platform_1.cert.pem"))
                                   if a.gateway == "wxpay" else None)
        self.agreements = []

    def agreement_errs(self, row, agreement, ref):
        """The agreement a notification names: the asked-for one, else a derived one."""
        a, errs = self.a, []
        if a.agreement_id is not None:
            if agreement != a.agreement_id:
                errs.append("agreement id %s" % agreement)
        elif not re.fullmatch(DERIVED_ID[a.gateway], agreement or ""):
            errs.append("agreement id %s is not of the derived form" % agreement)
        want_ref = a.agreement_ref if a.agreement_ref is not None else \
            (row["order_no"] if a.gateway == "stripe" else "AG" + row["order_no"])
        if ref != want_ref:
            errs.append("agreement reference %s" % ref)
        self.agreements.append((row["order_no"], agreement or ""))
        return errs

    def check(self, row, hs, body):
        if self.a.payload:
            return getattr(self, "payload_" + self.a.gateway)(row, hs, body)
        return getattr(self, "check_" + self.a.gateway)(row, hs, body)

    # --payload: the file's content, signed (WeChat: encrypted) as the gateway does
    def payload_wxpay(self, row, hs, body):
        a, errs = self.a, []
        want = json.loads(open(a.payload, "rb").read())
        msg = hs["wechatpay-timestamp"].encode() + b"\n" + hs["wechatpay-nonce"].encode() + b"\n" + body + b"\n"
        if not openssl_verify(self.k(a.wx_pub), msg, base64.b64decode(hs["wechatpay-signature"])):
            errs.append("openssl verify says Verification failure")
        if hs.get("wechatpay-serial") != self.serial or len(hs.get("wechatpay-nonce", "")) != 32 \
                or hs.get("wechatpay-signature-type") != "WECHATPAY2-SHA256-RSA2048":
            errs.append("headers")
        if a.now and int(hs["wechatpay-timestamp"]) != a.now:
            errs.append("timestamp")
        env = json.loads(body)
        res = env["resource"]
        apiv3 = open(self.k("wechat_apiv3.key"), "rb").read().strip()
        pt = self.gcm.decrypt(apiv3, res["nonce"].encode(), res["associated_data"].encode(),
                              base64.b64decode(res["ciphertext"]))
        if pt is None:
            return errs + ["GCM tag does not verify"]
        plain = want["resource"].pop("plaintext")
        if json.loads(pt) != plain:
            errs.append("decrypted resource is not the file's plaintext")
        if pt != json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode():
            errs.append("decrypted bytes are not the compact plaintext")
        want_keys = [("ciphertext" if k == "plaintext" else k) for k in
                     json.loads(open(a.payload, "rb").read())["resource"]]
        del res["ciphertext"]
        if list(env["resource"]) != [k for k in want_keys if k != "ciphertext"] or res != want["resource"]:
            errs.append("resource fields or order differ from the file")
        if list(json.loads(body)["resource"]) != want_keys:
            errs.append("ciphertext is not in the place of plaintext")
        del env["resource"], want["resource"]
        if env != want or list(env) != list(want):
            errs.append("envelope differs from the file")
        if body != json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":")).encode():
            errs.append("body is not compact")
        return errs

    def payload_alipay(self, row, hs, body):
        a, errs = self.a, []
        line = open(a.payload, "rb").read().strip()
        want = [(k.decode(), unquote_to_bytes(v.replace(b"+", b" ")))
                for k, _, v in (x.partition(b"=") for x in line.split(b"&"))]
        cs = dict(want).get("charset", b"utf-8").decode()
        if cs.lower() != "utf-8":
            want = [(k, v.decode("utf-8").encode(cs)) for k, v in want]
        if hs.get("content-type") != "application/x-www-form-urlencoded; charset=" + cs:
            errs.append("content type %s" % hs.get("content-type"))
        got = []
        for part in body.split(b"&"):
            k, _, v = part.partition(b"=")
            got.append((k.decode(), unquote_to_bytes(v.replace(b"+", b" "))))
        params = dict(got)
        if got[:-1] != want or got[-1][0] != "sign":
            errs.append("parameters are not the file's (in its charset) followed by sign")
        content = b"&".join(k.encode() + b"=" + v for k, v in sorted(params.items())
                            if k not in ("sign", "sign_type") and v != b"")
        if not openssl_verify(self.k("alipay_1.pub.pem"), content, base64.b64decode(params["sign"])):
            errs.append("openssl verify says Verification failure")
        return errs

    def payload_stripe(self, row, hs, body):
        a, errs = self.a, []
        if body != open(a.payload, "rb").read():
            errs.append("body is not the file's bytes")
        items = dict(x.split("=", 1) for x in hs["stripe-signature"].split(","))
        if a.now and int(items["t"]) != a.now:
            errs.append("t %s" % items["t"])
        secret = open(self.k("stripe_secret_1.txt")).read().strip()
        if not hmac.compare_digest(openssl_hmac(secret, items["t"].encode() + b"." + body), items["v1"]):
            errs.append("HMAC does not match")
        return errs

    # WeChat: signature over ts\nnonce\nbody\n, then the AES-256-GCM resource
    def check_wxpay(self, row, hs, body):
        a, bad, errs = self.a, row["bad"], []
        for h in ("wechatpay-timestamp", "wechatpay-nonce", "wechatpay-serial", "wechatpay-signature"):
            if h not in hs:
                return ["missing header " + h]
        if hs.get("wechatpay-signature-type") != "WECHATPAY2-SHA256-RSA2048":
            errs.append("signature type")
        if len(hs["wechatpay-nonce"]) != 32:
            errs.append("nonce is not 32 chars")
        ts = int(hs["wechatpay-timestamp"])
        if a.now and ts != a.now - (3600 if bad == "stale" else 0):
            errs.append("timestamp %d" % ts)
        sig = hs["wechatpay-signature"]
        if bad == "probe":
            if not sig.startswith("WECHATPAY/SIGNTEST/"):
                errs.append("probe prefix missing")
            sig = sig[len("WECHATPAY/SIGNTEST/"):]
        if (hs["wechatpay-serial"] == self.serial) == (bad == "unknown-serial"):
            errs.append("serial %s" % hs["wechatpay-serial"])
        msg = hs["wechatpay-timestamp"].encode() + b"\n" + hs["wechatpay-nonce"].encode() + b"\n" + body + b"\n"
        good = openssl_verify(self.k(a.wx_pub), msg, base64.b64decode(sig))
        if good != (bad != "tampered"):
            errs.append("openssl verify says %s" % ("Verified OK" if good else "Verification failure"))
        env = json.loads(body)
        if env["id"] != row["notify_id"]:
            errs.append("envelope id")
        res = env["resource"]
        refund = a.event == "refund"
        want = WX_KINDS[a.event]
        if (env["event_type"], res["original_type"]) != want or env["resource_type"] != "encrypt-resource":
            errs.append("event/original type")
        if a.event not in ("pay", "refund") and res["associated_data"] != want[1]:
            errs.append("associated_data %s" % res["associated_data"])
        if res["algorithm"] != "AEAD_AES_256_GCM" or len(res["nonce"]) != 12:
            errs.append("algorithm/nonce")
        apiv3 = open(self.k("wechat_apiv3.key"), "rb").read().strip()
        pt = self.gcm.decrypt(apiv3, res["nonce"].encode(), res["associated_data"].encode(),
                              base64.b64decode(res["ciphertext"]))
        if pt is None:
            return errs + ["GCM tag does not verify"]
        t = json.loads(pt)
        if a.event in AGREEMENT_EVENTS:
            end = a.event == "terminate"
            errs += self.agreement_errs(row, t.get("contract_id"), t.get("out_contract_code"))
            if t["mchid"] != "1900000109" or t["appid"] != "wx0000000000test01" \
                    or not t["openid"].startswith("oTEST") or not isinstance(t["plan_id"], int):
                errs.append("entrust mchid/appid/openid/plan_id")
            if t["contract_state"] != ("TERMINATED" if end else "SIGNED") or not t["contract_signed_time"]:
                errs.append("contract_state/contract_signed_time")
            info = t.get("contract_terminate_info")
            if end != (info is not None) or (end and (not info["contract_terminated_time"]
                                                      or info["contract_termination_mode"] != "USER_TERMINATE")):
                errs.append("contract_terminate_info")
            return errs
        if a.event == "charge":
            errs += self.agreement_errs(row, t.get("contract_id"), "AG" + row["order_no"]
                                        if a.agreement_ref is None else a.agreement_ref)
            if t["trade_type"] != "PAP":
                errs.append("trade_type %s" % t["trade_type"])
        elif "contract_id" in t or t.get("trade_type") == "PAP":
            errs.append("a payment outside an agreement names one")
        if t["out_trade_no"] != row["order_no"] or t["mchid"] != "1900000109":
            errs.append("decrypted out_trade_no/mchid")
        if t["amount"]["total"] != a.amount:
            errs.append("amount.total %s" % t["amount"]["total"])
        if refund:
            if t["amount"]["refund"] != a.refund_amount or t["refund_status"] != "SUCCESS" \
                    or not t["out_refund_no"] or not t["refund_id"]:
                errs.append("refund fields")
        elif t["trade_state"] != "SUCCESS" or t["appid"] != "wx0000000000test01" \
                or t["amount"]["currency"] != "CNY":
            errs.append("transaction fields")
        return errs

    # Alipay: form decode once, drop sign/sign_type/empty, sort, verify
    def check_alipay(self, row, hs, body):
        a, bad, errs = self.a, row["bad"], []
        if hs.get("content-type") != "application/x-www-form-urlencoded; charset=utf-8":
            errs.append("content type")
        params = {}
        for part in body.split(b"&"):
            k, _, v = part.partition(b"=")
            params[k.decode()] = unquote_to_bytes(v.replace(b"+", b" "))
        content = b"&".join(k.encode() + b"=" + v for k, v in sorted(params.items())
                            if k not in ("sign", "sign_type") and v != b"")
        good = openssl_verify(self.k("alipay_1.pub.pem"), content, base64.b64decode(params["sign"]))
        if good != (bad not in ("tampered", "unknown-serial")):
            errs.append("openssl verify says %s" % ("Verified OK" if good else "Verification failure"))
        p = {k: v.decode() for k, v in params.items()}
        if p["notify_id"] != row["notify_id"] or p["sign_type"] != "RSA2" or p["charset"] != "utf-8" \
                or p["app_id"] != "2021000000000001":
            errs.append("notify_id/sign_type/charset/app_id")
        if a.event in AGREEMENT_EVENTS:
            end = a.event == "terminate"
            agreement = p.get("agreement_no", "")
            if bad == "tampered":  # the agreement notice's tampered field: agreement_no gains a 0
                agreement = agreement[:-1] if agreement.endswith("0") else "(not tampered) " + agreement
            errs += self.agreement_errs(row, agreement, p.get("external_agreement_no"))
            if p["notify_type"] != ("dut_user_unsign" if end else "dut_user_sign") \
                    or p["status"] != ("UNSIGN" if end else "NORMAL") or "total_amount" in p:
                errs.append("notify_type/status")
            if end != ("unsign_time" in p) or end == ("sign_time" in p) \
                    or not p["alipay_user_id"].startswith("2088") or not p["personal_product_code"]:
                errs.append("sign_time/unsign_time/alipay_user_id/personal_product_code")
            return errs
        want_amount = yuan(a.amount + (1 if bad == "tampered" else 0))
        if p["total_amount"] != want_amount:
            errs.append("total_amount %s" % p["total_amount"])
        if p["out_trade_no"] != row["order_no"] or p["notify_id"] != row["notify_id"]:
            errs.append("out_trade_no/notify_id")
        if p["sign_type"] != "RSA2" or p["charset"] != "utf-8" or p["app_id"] != "2021000000000001":
            errs.append("sign_type/charset/app_id")
        if a.event == "refund":
            full = a.refund_amount >= a.amount
            if p.get("refund_fee") != yuan(a.refund_amount) or not p.get("out_biz_no") \
                    or not p.get("gmt_refund") or p["trade_status"] != ("TRADE_CLOSED" if full else "TRADE_SUCCESS"):
                errs.append("refund fields")
        elif p["trade_status"] != "TRADE_SUCCESS":
            errs.append("trade_status")
        return errs

    # Stripe: v1 = hex HMAC-SHA256(whole whsec_ secret, "t.body")
    def check_stripe(self, row, hs, body):
        a, bad, errs = self.a, row["bad"], []
        items = dict(x.split("=", 1) for x in hs["stripe-signature"].split(","))
        t = items["t"]
        if a.now and int(t) != a.now - (3600 if bad == "stale" else 0):
            errs.append("t %s" % t)
        secret = open(self.k("stripe_secret_1.txt")).read().strip()
        mac = openssl_hmac(secret, t.encode() + b"." + body)
        good = hmac.compare_digest(mac, items["v1"])
        if good != (bad not in ("tampered", "unknown-serial")):
            errs.append("HMAC %s" % ("matches" if good else "does not match"))
        ev = json.loads(body)
        if body != json.dumps(ev, indent=2, ensure_ascii=False).encode():
            errs.append("body is not 2-space pretty JSON")
        obj = ev["data"]["object"]
        want_amount = a.amount + (1 if bad == "tampered" else 0)
        if ev["id"] != row["notify_id"] or not ev["id"].startswith("evt_") or ev["object"] != "event":
            errs.append("event id")
        if a.event in AGREEMENT_EVENTS:
            end = a.event == "terminate"
            errs += self.agreement_errs(row, obj["id"], obj["metadata"].get("order_id"))
            if ev["type"] != ("customer.subscription.deleted" if end else "customer.subscription.created") \
                    or obj["object"] != "subscription" or obj["status"] != ("canceled" if end else "active") \
                    or (obj["canceled_at"] is not None) != end or (obj["ended_at"] is not None) != end:
                errs.append("subscription type/status")
            if a.now and obj["created"] != a.now - (86400 if end else 1) + (1 if bad == "tampered" else 0):
                errs.append("created %s" % obj["created"])
            return errs
        if a.event in ("charge", "charge-failed"):
            paid = a.event == "charge"
            sd = obj.get("parent", {}).get("subscription_details") or {}
            errs += self.agreement_errs(row, sd.get("subscription"),
                                        sd.get("metadata", {}).get("order_id"))
            if ev["type"] != ("invoice.paid" if paid else "invoice.payment_failed") \
                    or obj["object"] != "invoice" or not obj["id"].startswith("in_") \
                    or obj["status"] != ("paid" if paid else "open") or "payment_intent" in obj:
                errs.append("invoice type/status")
            if obj["metadata"] != {"order_id": row["order_no"]} \
                    or obj["parent"]["type"] != "subscription_details" \
                    or obj["billing_reason"] != "subscription_cycle":
                errs.append("a renewal with its order at metadata.order_id")
            if (obj["amount_due"], obj["amount_paid"], obj["amount_remaining"]) != \
                    ((want_amount, want_amount, 0) if paid else (want_amount, 0, want_amount)):
                errs.append("amounts")
            return errs
        if obj["metadata"]["order_id"] != row["order_no"] or obj["amount"] != want_amount \
                or ev["livemode"] is not False:
            errs.append("object fields")
        if a.event == "refund":
            if ev["type"] != "charge.refunded" or obj["amount_refunded"] != a.refund_amount \
                    or obj["refunded"] != (a.refund_amount >= a.amount):
                errs.append("refund fields")
        elif ev["type"] != "payment_intent.succeeded" or not obj["id"].startswith("pi_"):
            errs.append("type")
        return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gateway")
    ap.add_argument("dump")
    ap.add_argument("keys")
    ap.add_argument("--event", default="pay")
    ap.add_argument("--amount", type=int, default=8888)
    ap.add_argument("--refund-amount", type=int, default=1000)
    ap.add_argument("--now", type=int, default=0)
    ap.add_argument("--serial")
    ap.add_argument("--wx-pub", default="wechat_platform_1.pub.pem")
    ap.add_argument("--payload")
    ap.add_argument("--agreement-id")
    ap.add_argument("--agreement-ref")
    ap.add_argument("--agreements-out")
    a = ap.parse_args()
    c = Checker(a)
    lines = open(os.path.join(a.dump, "index.tsv"), encoding="utf-8").read().splitlines()
    cols = lines[0].split("\t")
    failed = 0
    for line in lines[1:]:
        row = dict(zip(cols, line.split("\t")))
        d = os.path.join(a.dump, row["seq"])
        body = open(os.path.join(d, "body.form" if a.gateway == "alipay" else "body.json"), "rb").read()
        try:
            errs = c.check(row, read_headers(os.path.join(d, "headers.txt")), body)
        except Exception as e:  # a crash in a check is a failed check
            errs = ["exception %r" % e]
        print("%s %s %s %s %s%s" % ("ok  " if not errs else "FAIL", row["seq"], row["bad"], row["order_no"],
                                     row["notify_id"], "" if not errs else ": " + "; ".join(errs)))
        failed += bool(errs)
    if a.agreements_out:
        with open(a.agreements_out, "w") as f:
            f.writelines("%s\t%s\n" % x for x in c.agreements)
    print("checked %d, failed %d" % (len(lines) - 1, failed))
    sys.exit(1 if failed or len(lines) < 2 else 0)


if __name__ == "__main__":
    main()
