#!/usr/bin/env python3
"""A webhook receiver for paynotify-relay's tests, demo and bench.

    relay_receiver.py PORTFILE LOGFILE SECRET [--fail P] [--timeout P]
                      [--slow P] [--hang S] [--seed N]

Listens on 127.0.0.1 (a free port, written to PORTFILE).  Every POST is
checked on its own against the Standard Webhooks scheme with Python's hmac
(not the relay's code): webhook-signature must hold
"v1," + base64(HMAC-SHA256(base64decode(SECRET minus "whsec_"),
id "." timestamp "." body)).  Then, at random: with probability --fail it
answers 500, with --timeout it waits --hang seconds (longer than the relay's
timeout) before answering, with --slow it waits 0.2 s and answers 200, else
it answers 200 at once.  Paths under /fast/ never fail; under /slow/ every
request waits 1 s and is answered 200; under /flaky/ (a sometimes-slow
receiver, whatever the options) 20 % of the requests are answered 500, 5 %
only after --hang seconds, the rest at once; under /hang-order/ORDER/ a
request for the order ORDER (the body's order_no) is answered after --hang
seconds, every other at once.  Each request is
appended to LOGFILE as one JSON line before the answer:
    {"at": unix time, "id", "timestamp", "signature", "body",
     "verified": bool, "verdict": "ok" | "fail" | "timeout", "path"}
"""
import argparse
import base64
import hashlib
import hmac
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("portfile")
ap.add_argument("logfile")
ap.add_argument("secret")
ap.add_argument("--fail", type=float, default=0.0)
ap.add_argument("--timeout", type=float, default=0.0)
ap.add_argument("--slow", type=float, default=0.0)
ap.add_argument("--hang", type=float, default=2.0)
ap.add_argument("--seed", type=int, default=None)
args = ap.parse_args()

key = base64.b64decode(args.secret[len("whsec_"):], validate=True)
rng = random.Random(args.seed)
lock = threading.Lock()
log = open(args.logfile, "a", buffering=1)


def verified(msg_id, ts, sig, body):
    if not msg_id or not ts or not sig:
        return False
    mac = hmac.new(key, msg_id.encode() + b"." + ts.encode() + b"." + body, hashlib.sha256)
    want = base64.b64encode(mac.digest()).decode()
    return any(s.startswith("v1,") and hmac.compare_digest(s[3:], want) for s in sig.split(" "))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True   # the reply's two writes must not wait for a delayed ACK

    def log_message(self, *a):
        pass

    def do_POST(self):
        at = time.time()
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        h = {k.lower(): v for k, v in self.headers.items()}
        ok = verified(h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature"), body)
        with lock:
            r = rng.random()
        delay = 0.0
        if not ok:
            verdict = "fail"
        elif self.path.startswith("/fast/"):
            verdict = "ok"
        elif self.path.startswith("/slow/"):
            verdict = "ok"
            delay = 1.0
        elif self.path.startswith("/flaky/"):
            verdict = "fail" if r < 0.20 else "timeout" if r < 0.25 else "ok"
        elif self.path.startswith("/hang-order/"):
            try:
                order = json.loads(body).get("order_no")
            except ValueError:
                order = None
            verdict = "timeout" if order == self.path.split("/")[2] else "ok"
        elif r < args.fail:
            verdict = "fail"
        elif r < args.fail + args.timeout:
            verdict = "timeout"
        else:
            verdict = "ok"
            if r < args.fail + args.timeout + args.slow:
                delay = 0.2
        rec = {"at": at, "id": h.get("webhook-id"), "timestamp": h.get("webhook-timestamp"),
               "signature": h.get("webhook-signature"), "body": body.decode("utf-8", "replace"),
               "verified": ok, "verdict": verdict, "path": self.path}
        with lock:
            log.write(json.dumps(rec) + "\n")
        if verdict == "timeout":
            delay = args.hang
        time.sleep(delay)
        status = 200 if verdict in ("ok", "timeout") else (401 if not ok else 500)
        reply = b"{}"
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address):
        pass    # a relay killed mid-request resets its connections


srv = Server(("127.0.0.1", 0), Handler)
with open(args.portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os  # noqa: E402
os.rename(args.portfile + ".tmp", args.portfile)
srv.serve_forever()
