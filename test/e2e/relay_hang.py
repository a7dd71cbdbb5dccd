#!/usr/bin/env python3
"""A receiver that hangs, for paynotify-relay's tests.

    relay_hang.py PORTFILE LOGFILE

Listens on 127.0.0.1 (a free port, written to PORTFILE), accepts every
connection, reads what is sent and never answers.  Each connection is
appended to LOGFILE as one line.
"""
import select
import socket
import sys
import time

portfile, logfile = sys.argv[1], sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(4096)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
import os
os.rename(portfile + ".tmp", portfile)
conns = []
n = 0
while True:
    r, _, _ = select.select([s] + conns[-900:], [], [], 1.0)
    for c in r:
        if c is s:
            a, _ = s.accept()
            conns.append(a)
            n += 1
            with open(logfile, "a") as f:
                f.write("%.3f connection %d\n" % (time.time(), n))
        else:
            try:
                d = c.recv(65536)
            except OSError:
                d = b""
            if not d:
                c.close()
                conns.remove(c)
