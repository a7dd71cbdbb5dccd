#!/usr/bin/env python3
"""Clients that connect to a FastCGI server and then do not behave.

usage: fcgi_clients.py HOST PORT COUNT MODE HOLD

Opens COUNT TCP connections to HOST:PORT, one after the other, and prints
"connected COUNT EPOCH" once every connect() has succeeded, EPOCH being the
time of day (seconds since 1970) of the first one; exit 1 if one fails.
Then each connection, according to MODE:

  idle     sends nothing
  byte     sends one byte (the start of a record header) and nothing more
  begin    sends a whole BEGIN_REQUEST record and nothing more
  stall    sends part of a request and nothing more: the first connection
           and every other one after it a whole BEGIN_REQUEST record and
           part of a PARAMS record, the others a whole request's start
           (BEGIN_REQUEST, PARAMS for a body of 100 bytes, the empty PARAMS
           record) and 50 bytes of its body in a STDIN record
  trickle  sends a whole BEGIN_REQUEST record, then the bytes of a PARAMS
           record one every 0.2 s: it never pauses long, it never finishes
  keep     sends a whole request, POST /notify/keep with the body "{}", as
           nginx does with fastcgi_keep_conn (the FCGI_KEEP_CONN flag), and
           then leaves the connection open as that asks
  request  sends a whole request, POST /notify/keep with the body "{}",
           right after its connect, as nginx does (no FCGI_KEEP_CONN), and
           closes the connection once the server has closed its end
  after    sends that whole request, then a byte every 0.15 s, past its
           end, for as long as the server takes them, its reply and the
           end of its stream notwithstanding

and is watched for HOLD seconds at most.  At the end one line per
connection, in the order they were opened: "N closed SECONDS AT" when the
server closed it (end of stream or reset), SECONDS after its own connect
and AT seconds after the first connection's, or "N open" if the server had
not closed it; either followed by " status NNN" when the server sent a
reply with that status.  Then the sockets are closed.
"""
import re
import select
import socket
import struct
import sys
import time

TRICKLE_EVERY = 0.2
AFTER_EVERY = 0.15


def record(rtype, content):
    """One FastCGI record of request 1, without padding."""
    return struct.pack("!BBHHBx", 1, rtype, 1, len(content), 0) + content


def pair(name, value):
    """A FastCGI name-value pair (short lengths)."""
    return bytes([len(name), len(value)]) + name + value


# FCGI_BEGIN_REQUEST (1), responder role, flags 0 or FCGI_KEEP_CONN (1)
BEGIN = record(1, struct.pack("!HB5x", 1, 0))
PARAMS = pair(b"REQUEST_METHOD", b"POST") + pair(b"PATH_INFO", b"/notify/keep") + \
    pair(b"CONTENT_LENGTH", b"2")
KEEP_REQUEST = record(1, struct.pack("!HB5x", 1, 1)) + record(4, PARAMS) + record(4, b"") + \
    record(5, b"{}") + record(5, b"")
REQUEST = record(1, struct.pack("!HB5x", 1, 0)) + KEEP_REQUEST[16:]
# a PARAMS record longer than any trickle lasts
TRICKLE = BEGIN + record(4, pair(b"X" * 100, b"Y" * 100))
# a start, then part of a PARAMS record; a whole start, then part of STDIN
STALLED = [TRICKLE[:len(BEGIN) + 60],
           BEGIN + record(4, PARAMS.replace(b"\x0e\x01CONTENT_LENGTH2", b"\x0e\x03CONTENT_LENGTH100")) +
           record(4, b"") + record(5, b"{" * 100)[:58]]


def read_some(sock, got):
    """Appends what the server sent to got; True when it closed the connection."""
    try:
        data = sock.recv(65536)
    except BlockingIOError:
        return False
    except OSError:
        return True
    got += data
    return data == b""


def main():
    host, port, count, mode, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
    socks, opened = [], []
    first_epoch = time.time()
    for _ in range(count):
        try:
            s = socket.create_connection((host, port), timeout=5)
        except OSError as e:
            print("connect failed: %s" % e, flush=True)
            return 1
        s.setblocking(False)
        socks.append(s)
        opened.append(time.monotonic())
        if mode == "byte":
            s.send(BEGIN[:1])
        elif mode in ("begin", "trickle"):
            s.sendall(BEGIN)
        elif mode == "stall":
            s.sendall(STALLED[len(socks) % 2 == 0])
        elif mode == "keep":
            s.sendall(KEEP_REQUEST)
        elif mode in ("request", "after"):
            s.sendall(REQUEST)
    print("connected %d %.3f" % (count, first_epoch), flush=True)
    closed = [None] * count
    got = [bytearray() for _ in range(count)]
    sent = [len(BEGIN)] * count
    end = time.monotonic() + hold
    every = AFTER_EVERY if mode == "after" else TRICKLE_EVERY
    next_byte = time.monotonic() + every
    refused = [False] * count      # after: the server takes no more bytes
    while (None in closed or (mode == "after" and not all(refused))) and time.monotonic() < end:
        live = [s for s, c in zip(socks, closed) if c is None]
        wait = max(0.0, min(end, next_byte) - time.monotonic())
        readable, _, _ = select.select(live, [], [], wait)
        now = time.monotonic()
        for i, s in enumerate(socks):
            if closed[i] is None and s in readable and read_some(s, got[i]):
                closed[i] = now - opened[i]
                if mode == "request":
                    s.close()       # as nginx does: the server's wait ends
        if mode in ("trickle", "after") and now >= next_byte:
            next_byte = now + every
            for i, s in enumerate(socks):
                if mode == "after" and not refused[i]:
                    try:
                        s.send(b"\0")
                    except OSError:
                        refused[i] = True
                    continue
                if closed[i] is None:
                    try:
                        s.send(TRICKLE[sent[i] % len(TRICKLE):][:1])
                        sent[i] += 1
                    except OSError:
                        closed[i] = now - opened[i]
    for i, s in enumerate(socks):
        status = re.search(rb"Status: (\d+)", bytes(got[i]))
        state = "open" if closed[i] is None else \
            "closed %.2f %.2f" % (closed[i], closed[i] + opened[i] - opened[0])
        print("%d %s%s" % (i + 1, state, " status " + status.group(1).decode() if status else ""))
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
