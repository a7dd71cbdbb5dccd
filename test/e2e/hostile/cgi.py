#!/usr/bin/env python3
"""Hostile requests through paynotify-cgi run as a plain CGI process.

    cgi.py SHIM DSN PSQL PGDIR PGPORT

Needs the database test/e2e/hostile.sh built (channels st, wx, ali; schema h
of hostile.sql).  Requests are signed at the real clock, so the channels'
timestamp windows hold.  Prints one "PASS name: ..." or "FAIL name: ..."
line per request: the reply's status and Paynotify-Outcome, and, for every
refused, rejected or malformed request, that nothing was written.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pylib"))
import pnsign as s  # noqa: E402

SHIM, DSN, PSQL, PGDIR, PGPORT = sys.argv[1:6]
NOW = int(time.time())
MIB10 = 10 * 1024 * 1024


def sql(query):
    return subprocess.run([PSQL, "-X", "-At", "-h", PGDIR, "-p", PGPORT, "-U", "postgres",
                           "-d", "postgres", "-c", query], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False).stdout.decode().strip()


def env_name(header):
    return "HTTP_" + header.upper().replace("-", "_")


def run(name, channel, body, headers, want_status, want_outcome, env=None, length=True):
    """Deliver body with headers (name -> value; names are HTTP header names,
    or raw CGI variable names when they start with HTTP_) to /notify/channel."""
    e = {b"PATH": b"/usr/bin:/bin", b"GATEWAY_INTERFACE": b"CGI/1.1",
         b"REQUEST_METHOD": b"POST", b"PATH_INFO": b"/notify/" + channel.encode(),
         b"PAYNOTIFY_DSN": DSN.encode(), b"PAYNOTIFY_FUNCTION": b"pay.paynotify_handle"}
    if length:
        e[b"CONTENT_LENGTH"] = str(len(body)).encode()
    for k, v in headers.items():
        k = k if k.startswith("HTTP_") or k == "CONTENT_TYPE" else env_name(k)
        e[k.encode()] = v if isinstance(v, bytes) else v.encode()
    e.update(env or {})
    before = sql("SELECT h.fp()")
    p = subprocess.run([SHIM], input=body, env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    after = sql("SELECT h.fp()")
    head = p.stdout.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    status = head[0].split()[1] if head and head[0].startswith("Status:") else "?"
    outcome = next((h.split(": ", 1)[1] for h in head
                    if h.lower().startswith("paynotify-outcome:")), "?")
    why = []
    if (status, outcome) != (str(want_status), want_outcome):
        why.append("got %s %s, want %s %s (exit %d, stderr %r)" % (
            status, outcome, want_status, want_outcome, p.returncode, p.stderr[:200]))
    if outcome in ("refused", "rejected", "malformed") and before != after:
        why.append("wrote rows although not authentic")
    if p.returncode != 0:
        why.append("exit status %d" % p.returncode)
    if why:
        print("FAIL %s: %s" % (name, "; ".join(why)))
    else:
        print("PASS %s: %s %s" % (name, status, outcome))


def st_event(evt_id, order, amount=1250):
    return json.dumps({"id": evt_id, "object": "event", "type": "payment_intent.succeeded",
                       "created": NOW, "livemode": False,
                       "data": {"object": {"id": "pi_" + evt_id, "amount": amount,
                                           "amount_received": amount, "currency": "usd",
                                           "metadata": {"order_id": order}}}},
                      separators=(",", ":")).encode()


def main():
    for order, amount in (("HX-CGI-ST", 1250), ("HX-CGI-WX", 100), ("HX-CGI-ALI", 8888)):
        sql("SELECT t.set_order('%s', 'pending', %d)" % (order, amount))

    # Stripe
    body = st_event("evt_hx_cgi_1", "HX-CGI-ST")
    sig = s.stripe_header(NOW, body)
    run("stripe_valid", "st", body, {"Stripe-Signature": sig}, 200, "processed")
    run("stripe_signature_header_twice_joined", "st", body,
        {"HTTP_STRIPE_SIGNATURE": sig, "HTTP_STRIPE-SIGNATURE": sig}, 200, "duplicate")
    run("stripe_100kb_junk_header", "st", body,
        {"Stripe-Signature": sig, "X-Junk": "x" * 100000}, 200, "duplicate")
    run("stripe_100kb_signature_header", "st", body,
        {"Stripe-Signature": sig + ",x=1" * 25000}, 400, "malformed")
    big = b"[" * MIB10
    run("10mib_body_declared", "st", big, {"Stripe-Signature": s.stripe_header(NOW, big)},
        413, "refused")
    run("10mib_body_undeclared", "st", big, {"Stripe-Signature": s.stripe_header(NOW, big)},
        413, "refused", length=False)
    run("10mib_body_shim_cap_raised", "st", big,
        {"Stripe-Signature": s.stripe_header(NOW, big)}, 413, "malformed",
        env={b"PAYNOTIFY_MAX_BODY": b"67108864"})
    nul = b'{"id":"evt_hx_cgi_nul","object":"event","type":"x","s":"\x00"}'
    run("stripe_nul_body_signed", "st", nul, {"Stripe-Signature": s.stripe_header(NOW, nul)},
        400, "malformed")
    run("stripe_nul_body_unsigned", "st", nul, {"Stripe-Signature": sig}, 401, "rejected")
    deep = b'{"id":"evt_hx_cgi_deep","object":"event","type":"x","d":' + b"[" * 10000 + \
        b"]" * 10000 + b"}"
    run("stripe_deep_signed", "st", deep, {"Stripe-Signature": s.stripe_header(NOW, deep)},
        400, "malformed")
    run("stripe_content_type_text_plain", "st", body,
        {"Stripe-Signature": sig, "CONTENT_TYPE": "text/plain"}, 200, "duplicate")
    run("header_not_utf8", "st", body, {"Stripe-Signature": sig, "X-Junk": b"\xff\xfe"},
        400, "refused")
    run("unknown_channel", "nope", body, {"Stripe-Signature": sig}, 404, "rejected")
    run("channel_with_dash", "s-t", body, {"Stripe-Signature": sig}, 404, "refused")

    # WeChat Pay
    plain = json.dumps({"mchid": "1900000109", "appid": "wx0000000000test01",
                        "out_trade_no": "HX-CGI-WX", "transaction_id": "4200CGI0001",
                        "trade_state": "SUCCESS", "amount": {"total": 100, "currency": "CNY"}},
                       separators=(",", ":")).encode()
    env = json.dumps({"id": "hx-cgi-wx-1", "event_type": "TRANSACTION.SUCCESS",
                      "resource_type": "encrypt-resource", "summary": "cgi",
                      "resource": s.wx_resource(plain)}, separators=(",", ":")).encode()
    h = s.wx_headers(NOW, "cgi-nonce-000001", env)
    run("wechat_valid", "wx", env, h, 200, "processed")
    run("wechat_signature_header_twice_joined", "wx", env,
        dict(h, **{"HTTP_WECHATPAY-SIGNATURE": h["Wechatpay-Signature"]}), 400, "malformed")
    run("wechat_serial_header_twice_joined", "wx", env,
        dict(h, **{"HTTP_WECHATPAY-SERIAL": h["Wechatpay-Serial"]}), 401, "rejected")
    run("wechat_100kb_nonce", "wx", env, dict(h, **{"Wechatpay-Nonce": "n" * 100000}),
        401, "rejected")
    run("wechat_content_type_form", "wx", env,
        dict(h, CONTENT_TYPE="application/x-www-form-urlencoded"), 200, "duplicate")

    # Alipay
    form = s.alipay_body([("app_id", "2021000000000001"), ("charset", "utf-8"),
                          ("notify_id", "hx-cgi-ali-1"), ("notify_type", "trade_status_sync"),
                          ("out_trade_no", "HX-CGI-ALI"), ("total_amount", "88.88"),
                          ("trade_no", "2026CGI0001"), ("trade_status", "TRADE_SUCCESS")])
    ct = "application/x-www-form-urlencoded; charset=utf-8"
    run("alipay_content_type_json", "ali", form, {"CONTENT_TYPE": "application/json"},
        400, "malformed")
    run("alipay_content_type_text_plain", "ali", form, {"CONTENT_TYPE": "text/plain"},
        400, "malformed")
    run("alipay_valid", "ali", form, {"CONTENT_TYPE": ct}, 200, "processed")
    run("alipay_nul_byte_in_body", "ali", form + b"&x=\x00", {"CONTENT_TYPE": ct},
        400, "malformed")
    run("alipay_10mib_form", "ali", b"a=1&" * (MIB10 // 4), {"CONTENT_TYPE": ct},
        413, "refused")


if __name__ == "__main__":
    main()
