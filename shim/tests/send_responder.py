#!/usr/bin/env python3
"""A stand-in notify endpoint for testing paynotify-send, on 127.0.0.1 only.

POST /notify/<channel>: the gateway is the channel's prefix (wxpay, alipay,
stripe).  Each request is verified the way a merchant must (WeChat: headers,
signature type, +-300 s window, serial, WECHATPAY/SIGNTEST/ probe, RSA
signature; Alipay: sign_type, RSA signature over the sorted content, app_id;
Stripe: HMAC of "t.body" with the whole whsec_ secret, +-300 s window), with
the tests' one signing module (test/pylib/pnsign.py, python3-cryptography).

Then, per notification id: the first --fail-first deliveries get a failure
(outcome "failed"), the next one "processed", every later one "duplicate".
Replies follow the gateways' conventions (WeChat 204/200 vs 500 + FAIL JSON,
Alipay 200 "success" vs 200 "fail", Stripe 200 vs 500) and carry
Paynotify-Outcome, as the real shim does.

GET /stats returns the counters as JSON; POST /reset?fail_first=K clears them.
usage: send_responder.py --keys DIR --port-file FILE [--fail-first K]
"""
import argparse
import base64
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote_to_bytes, urlparse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "pylib"))
import pnsign  # noqa: E402

class State:
    def __init__(self, keys, fail_first, now):
        k = lambda n: os.path.join(keys, n)
        self.wx_pub = pnsign.public_key(k("wechat_platform_1.pub.pem"))
        self.ali_pub = pnsign.public_key(k("alipay_1.pub.pem"))
        with open(k("wechat_platform_1.cert.pem"), "rb") as f:
            self.wx_serial = pnsign.cert_serial(f.read())
        self.secret = open(k("stripe_secret_1.txt")).read().strip().encode()
        self.now = now
        self.lock = threading.Lock()
        self.reset(fail_first)

    def reset(self, fail_first):
        with self.lock:
            self.fail_first = fail_first
            self.ids = {}
            self.outcomes = {}
            self.requests = 0

    def clock(self):
        return self.now or int(time.time())

    def record(self, nid):
        """Outcome for a verified delivery of notification nid."""
        with self.lock:
            st = self.ids.setdefault(nid, {"deliveries": 0, "failed": 0, "processed": 0, "duplicate": 0})
            st["deliveries"] += 1
            if st["deliveries"] <= self.fail_first:
                out = "failed"
            elif st["processed"]:
                out = "duplicate"
            else:
                out = "processed"
            st[out] += 1
            return out

    def count(self, outcome):
        with self.lock:
            self.requests += 1
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


def verify_wxpay(st, hs, body):
    """(notify id or None, reason)."""
    need = ("wechatpay-timestamp", "wechatpay-nonce", "wechatpay-signature", "wechatpay-serial")
    if any(h not in hs for h in need):
        return None, "malformed"
    if hs.get("wechatpay-signature-type", "WECHATPAY2-SHA256-RSA2048") != "WECHATPAY2-SHA256-RSA2048":
        return None, "rejected"
    if abs(st.clock() - int(hs["wechatpay-timestamp"])) > 300:
        return None, "rejected"
    if hs["wechatpay-serial"] != st.wx_serial:
        return None, "rejected"
    sig = hs["wechatpay-signature"]
    if sig.startswith("WECHATPAY/SIGNTEST/"):
        return None, "rejected"
    msg = hs["wechatpay-timestamp"].encode() + b"\n" + hs["wechatpay-nonce"].encode() + b"\n" + body + b"\n"
    if not pnsign.rsa_verify_raw(st.wx_pub, msg, base64.b64decode(sig)):
        return None, "rejected"
    return json.loads(body)["id"], "ok"


def verify_alipay(st, hs, body):
    params = {}
    for part in body.split(b"&"):
        k, _, v = part.partition(b"=")
        params[k.decode()] = unquote_to_bytes(v.replace(b"+", b" "))
    if params.get("sign_type") != b"RSA2" or "sign" not in params:
        return None, "rejected"
    content = pnsign.alipay_content([(k.encode(), v) for k, v in params.items()])
    if not pnsign.rsa_verify_raw(st.ali_pub, content, base64.b64decode(params["sign"])):
        return None, "rejected"
    if params.get("app_id") != b"2021000000000001":
        return None, "rejected"
    return params["notify_id"].decode(), "ok"


def verify_stripe(st, hs, body):
    items = [x.split("=", 1) for x in hs.get("stripe-signature", "").split(",") if "=" in x]
    t = [v for k, v in items if k == "t"]
    if not t:
        return None, "malformed"
    mac = pnsign.stripe_v1(st.secret, t[0], body)
    if not any(k == "v1" and hmac.compare_digest(v, mac) for k, v in items):
        return None, "rejected"
    if abs(st.clock() - int(t[0])) > 300:
        return None, "rejected"
    return json.loads(body)["id"], "ok"


# status and body per gateway and outcome
REPLIES = {
    "wxpay": {"processed": (204, b""), "duplicate": (200, b""),
              "failed": (500, b'{"code":"FAIL","message":"retry"}'),
              "rejected": (401, b'{"code":"FAIL","message":"rejected"}'),
              "malformed": (400, b'{"code":"FAIL","message":"malformed"}')},
    "alipay": {"processed": (200, b"success"), "duplicate": (200, b"success"),
               "failed": (200, b"fail"), "rejected": (400, b"fail"), "malformed": (400, b"fail")},
    "stripe": {"processed": (200, b'{"received":true}'), "duplicate": (200, b'{"received":true}'),
               "failed": (500, b'{"error":"retry"}'), "rejected": (400, b'{"error":"rejected"}'),
               "malformed": (400, b'{"error":"malformed"}')},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *args):
        pass

    def reply(self, status, body, outcome=None, ctype="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if outcome:
            self.send_header("Paynotify-Outcome", outcome)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        st = self.state
        if urlparse(self.path).path != "/stats":
            return self.reply(404, b"not found")
        with st.lock:
            doc = {"requests": st.requests, "outcomes": st.outcomes, "ids": st.ids}
        self.reply(200, json.dumps(doc).encode(), ctype="application/json")

    def do_POST(self):
        st = self.state
        u = urlparse(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if u.path == "/reset":
            st.reset(int(parse_qs(u.query).get("fail_first", ["0"])[0]))
            return self.reply(200, b"reset")
        channel = u.path.rsplit("/", 1)[-1]
        gw = next((g for g in ("wxpay", "alipay", "stripe") if channel.startswith(g)), None)
        if not u.path.startswith("/notify/") or not gw:
            return self.reply(404, b"no such channel")
        hs = {k.lower(): v for k, v in self.headers.items()}
        try:
            nid, why = {"wxpay": verify_wxpay, "alipay": verify_alipay, "stripe": verify_stripe}[gw](st, hs, body)
        except Exception:
            nid, why = None, "malformed"
        outcome = st.record(nid) if nid else why
        st.count(outcome)
        status, text = REPLIES[gw][outcome]
        self.reply(status, text, outcome, "application/json" if gw != "alipay" else "text/plain")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--now", type=int, default=0)
    a = ap.parse_args()
    Handler.state = State(a.keys, a.fail_first, a.now)
    ThreadingHTTPServer.request_queue_size = 512
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
