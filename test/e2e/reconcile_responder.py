#!/usr/bin/env python3
"""A stand-in payment gateway for test/e2e/reconcile.sh, on 127.0.0.1 only.

Every request is recorded, on arrival, as one JSON line in LOG: the time
(time.time()), the method, the path with its query, the headers as
received (a list of [name, value], case kept) and the body (base64).  The
reply depends on the path's first part:
  /ok/...     200 with BODY_BYTES (every byte value, NULs and bytes that are
              not UTF-8), a repeated header and names in mixed case
  /busy/...   503, no Retry-After
  /limit/...  429 with Retry-After: 2
  /slow/...   200 "slow" after 1.5 s
  /big/N      200 with N bytes (0x00 to 0xff over and over)
anything else 404.  The port it listens on is written to PORT_FILE.
usage: reconcile_responder.py PORT_FILE LOG
"""
import base64
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY_BYTES = bytes(range(256)) + b"\xff\xfe\x00end"
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        rec = {"t": time.time(), "method": self.command, "path": self.path,
               "headers": [[k, v] for k, v in self.headers.raw_items()],
               "body": base64.b64encode(body).decode()}
        with lock, open(sys.argv[2], "a") as f:
            f.write(json.dumps(rec) + "\n")
        kind = self.path.split("/")[1] if self.path.count("/") >= 1 else ""
        if kind == "ok":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("X-Multi", "one")
            self.send_header("x-multi", "two")
            self.send_header("X-MiXed-Case", "v")
            self.send_header("Content-Length", str(len(BODY_BYTES)))
            self.end_headers()
            self.wfile.write(BODY_BYTES)
            return
        if kind == "big":
            n = int(self.path.split("/")[2])
            data = bytes(range(256)) * (n // 256) + bytes(range(n % 256))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:
                pass  # the client stopped reading (over its bound)
            self.close_connection = True
            return
        if kind == "slow":
            time.sleep(1.5)
        status, extra = {"busy": (503, []), "limit": (429, [("Retry-After", "2")]),
                         "slow": (200, [])}.get(kind, (404, []))
        text = kind.encode()
        self.send_response(status)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    do_GET = do_POST = do_PUT = handle_one


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os  # noqa: E402
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
