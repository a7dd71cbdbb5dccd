#!/usr/bin/env python3
"""The gateway's side against the database, for the failover and multi-shim tests.

    ledger_audit.py LEDGER DIR [--kill T] [--promote-start T] [--promote T] [--lost-is-figure]

LEDGER is paynotify-send's --ledger file (one line per delivery); DIR holds
log.tsv (channel, notify_id, status of payment_notify_log) and payments.tsv
(channel, notify_id, order_no of payment_record), copied from the database
that survived.  Prints one "description<TAB>expected<TAB>actual" line per
check and "# ..." lines with figures.  --kill, --promote-start and --promote
(unix times: the kill, and when the promotion was asked for and when it was
seen complete) describe an outage (the longest time between two
acknowledgements is printed, with when it began and ended): a request sent after the kill and
answered before the promotion was asked for had no primary to commit on,
and must not be answered 2xx (judged by when each request was sent, the
ledger's last column, never by a grace period; the standby may accept
writes before the command that promotes it returns), and the time from the
kill to the first acknowledgement after the promotion is printed.  --lost-is-figure: acknowledged
but lost notifications are a figure to report, not a failure (an
asynchronous standby).
"""
import argparse
import calendar
import collections
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("ledger")
ap.add_argument("dir")
ap.add_argument("--kill", type=float)
ap.add_argument("--promote-start", type=float)
ap.add_argument("--promote", type=float)
ap.add_argument("--lost-is-figure", action="store_true")
a = ap.parse_args()


def out(desc, want, got):
    print(f"{desc}\t{want}\t{got}")


def rows(name):
    with open(os.path.join(a.dir, name)) as f:
        return [l.rstrip("\n").split("\t") for l in f if l.strip()]


def unix(t):  # 2026-01-01T00:00:00.000000Z
    head, frac = t.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S")) + float("0." + frac)


lines = [l.rstrip("\n").split("\t") for l in open(a.ledger)]
bad = [l for l in lines if len(l) != 11]
lines = [l for l in lines if len(l) == 11]
out("ledger: every line well-formed", 0, len(bad))
notif, acked = set(), set()
for t, channel, event, nid, order, delivery, status, outcome, ack, kind, seconds in lines:
    notif.add((channel, nid))
    if ack == "1":
        acked.add((channel, nid))
log = collections.Counter((c, i) for c, i, s in rows("log.tsv") if s == "succeeded")
logall = collections.Counter((c, i) for c, i, s in rows("log.tsv"))
pay = collections.Counter((c, i) for c, i, o in rows("payments.tsv"))
lost = sorted(k for k in acked if log[k] == 0 or pay[k] == 0)
twice = sorted(k for k in notif if logall[k] > 1 or pay[k] > 1)
print(f"# ledger: {len(lines)} deliveries of {len(notif)} notifications, {len(acked)} acknowledged")


def show(keys):
    return str(len(keys)) if not keys else f"{len(keys)} e.g. {' '.join('/'.join(k) for k in keys[:3])}"


if a.lost_is_figure:
    print(f"# acknowledged but lost on the new primary: {len(lost)} of {len(acked)}")
else:
    out("acknowledged but not applied on the surviving database (lost): 0", 0, show(lost))
out("applied twice (two log or payment rows for one notification): 0", 0, show(twice))

if a.kill is not None:
    before = sum(1 for l in lines if l[8] == "1" and unix(l[0]) < a.kill)
    after = sorted(unix(l[0]) for l in lines if l[8] == "1" and unix(l[0]) > a.kill)
    out("acknowledgements before the kill and after it (traffic spans the failover)", "yes|yes",
        f"{'yes' if before else 'no'}|{'yes' if after else 'no'}")
    acks = sorted(unix(l[0]) for l in lines if l[8] == "1")
    gap = max(zip(acks, acks[1:]), key=lambda p: p[1] - p[0], default=None)
    if gap:
        print(f"# longest time without an acknowledgement: {gap[1] - gap[0]:.2f} s, "
              f"from {gap[0] - a.kill:+.2f} s to {gap[1] - a.kill:+.2f} s from the kill")
    if a.promote is not None:
        end = a.promote_start if a.promote_start is not None else a.promote
        during = [l for l in lines if a.kill < unix(l[0]) - float(l[10]) and unix(l[0]) < end]
        st = collections.Counter(l[6] for l in during)
        print(f"# replies to requests sent while no primary accepted writes ({end - a.kill:.1f} s): {dict(st)}")
        out("while no primary accepts writes: requests answered, none 2xx, all 503", "yes|0|0",
            f"{'yes' if during else 'no'}|{sum(n for s, n in st.items() if s.startswith('2'))}|"
            f"{sum(n for s, n in st.items() if s != '503')}")
        if after:
            first_after_promote = [t for t in after if t > a.promote]
            if first_after_promote:
                print(f"# time from the kill to the first acknowledgement on the new primary: "
                      f"{first_after_promote[0] - a.kill:.2f} s "
                      f"({first_after_promote[0] - a.promote:.2f} s after the promotion completed)")
