#!/usr/bin/env python3
"""Mutated copies of every test vector, for test/e2e/hostile.sh.

    mutate.py SEED COUNT     prints INSERTs into h.mut (hostile.sql)

Each mutation starts from one vector's headers and body and applies one to
three random changes: bit flips, truncation, byte insertion and deletion,
repeated chunks, case changes, JSON tokens that stress the parser (deep
brackets, 1e999999, \\u0000), bodies and header values spliced in from
other vectors of the same gateway, headers removed, duplicated under
another spelling, renamed, retyped (number, array, null, object) or the
whole header object replaced.  It is delivered on the channel the vector
was replayed on (m_<case>) at the vector's clock.

"allowed" says whether the mutated request still carries bytes a genuine
gateway signed, by each gateway's own rule, computed here independently of
paynotify:
  WeChat  body, Wechatpay-Timestamp, -Nonce and -Signature identical to
          those of some vector (RSA signatures and their canonical base64
          have one spelling), and the signature verifies (pnsign.rsa_verify) over
          them with the key the channel files under Wechatpay-Serial;
  Stripe  some t and v1 in Stripe-Signature with v1 = HMAC-SHA256 of
          "t.body" under one of the channel's secrets;
  Alipay  the form's sign and its signed content (every parameter but sign
          and sign_type, sorted, empty ones left out or kept) identical to
          some vector's.
Only an allowed request may come out authentic (anything but rejected or
malformed); hostile.sql checks that.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pylib"))
import pnsign as s  # noqa: E402
import pnsql as q  # noqa: E402

INTERESTING = [b"\x00", b"\xff", b"\xc3", b"\x80", b'"', b"\\", b"[", b"{", b"]", b"}",
               b",", b":", b"&", b"=", b"%", b"%00", b"%zz", b"+", b"\n", b"\r\n", b" ",
               b"1e999999", b"-1e-999999", b"\\u0000", b"\\ud800", b"null", b"true",
               b"[" * 70, b"{\"a\":" * 70, b"';DROP TABLE pay.payment_notify_log;--",
               b"\xe4\xb8\xad", b"WECHATPAY/SIGNTEST/", b"9" * 30]


def wx_verifies(keyfile, ts, nonce, sig, body):
    """Whether sig (base64) is key's RSA-SHA256 over WeChat's message."""
    return s.rsa_verify(keyfile, s.wx_message(ts.encode(), nonce.encode(), body), sig)


def lookup(headers, name):
    """The one value of name (case-insensitive), or None when absent, spelt
    twice or not a string."""
    if not isinstance(headers, dict):
        return None
    hits = [v for k, v in headers.items() if k.lower() == name.lower()]
    if len(hits) != 1 or not isinstance(hits[0], str):
        return None
    return hits[0]


class Vectors:
    def __init__(self):
        self.cases = s.manifest()
        self.by_name = {c["case"]: c for c in self.cases}
        for c in self.cases:
            c["_headers"] = {k: v for k, v in c["headers"]}
            c["_body"] = s.vread(c["files"]["body"])
        self.wx = {}                # (ts, nonce, sig, body) -> key files it verifies with
        self.ali = []
        for c in self.cases:
            if c["gateway"] == "wxpay":
                key = self.wx_key(c["_headers"], c["_body"])
                if None not in key and key not in self.wx:
                    self.wx[key] = {f for f in set(c["config"]["trusted"].values())
                                    if wx_verifies(f, *key)}
            elif c["gateway"] == "alipay":
                form = s.form_decode(c["_body"])
                sign = dict(form).get(b"sign") if form else None
                content = s.vread(c["files"]["sign_content"]) if "sign_content" in c["files"] \
                    else None
                if sign is not None and content is not None:
                    self.ali.append((sign, content))

    @staticmethod
    def wx_key(headers, body):
        return tuple(lookup(headers, "Wechatpay-" + n)
                     for n in ("Timestamp", "Nonce", "Signature")) + (body,)

    def channel(self, c):
        return "m_" + c.get("duplicate_of", c["case"])

    def secrets(self, c):
        base = self.by_name[c.get("duplicate_of", c["case"])]
        return [s.vread(f).strip() for f in base["config"]["secret_files"]]

    def allowed(self, c, headers, body):
        gw = c["gateway"]
        if gw == "wxpay":
            base = self.by_name[c.get("duplicate_of", c["case"])]
            serial = lookup(headers, "Wechatpay-Serial")
            keyfile = base["config"]["trusted"].get(serial) if serial is not None else None
            return keyfile in self.wx.get(self.wx_key(headers, body), ())
        if gw == "stripe":
            hdr = lookup(headers, "Stripe-Signature")
            if hdr is None:
                return False
            ts, v1s = [], []
            for item in hdr.split(","):
                kv = item.split("=")
                if len(kv) != 2:
                    continue
                if kv[0] == "t":
                    ts.append(kv[1])
                elif kv[0] == "v1":
                    v1s.append(kv[1])
            for secret in self.secrets(c):
                for t in ts:
                    mac = s.stripe_v1(secret, t, body)
                    if mac in v1s:
                        return True
            return False
        form = s.form_decode(body)
        if form is None:
            return False
        sign = [v for n, v in form if n == b"sign"]
        if len(sign) != 1:
            return False
        contents = {s.alipay_content(form), s.alipay_content(form, keep_empty=True)}
        return any(sign[0] == vs and vc in contents for vs, vc in self.ali)


# ---- the mutations ------------------------------------------------------------

def flip_bits(rng, b):
    b = bytearray(b)
    for _ in range(rng.randint(1, 4)):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def truncate(rng, b):
    if not b:
        return b
    if rng.random() < 0.5:
        return b[:rng.randrange(len(b))]
    i = rng.randrange(len(b))
    return b[:i] + b[i + rng.randint(1, 64):]


def insert(rng, b):
    i = rng.randint(0, len(b))
    if rng.random() < 0.6:
        ins = rng.choice(INTERESTING)
    else:
        ins = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return b[:i] + ins + b[i:]


def repeat_chunk(rng, b):
    if not b:
        return b
    i = rng.randrange(len(b))
    j = min(len(b), i + rng.randint(1, 32))
    return b[:j] + b[i:j] * rng.randint(1, 50) + b[j:]


def change_case(rng, b):
    b = bytearray(b)
    letters = [i for i, c in enumerate(b) if 65 <= c <= 90 or 97 <= c <= 122]
    for i in rng.sample(letters, min(len(letters), rng.randint(1, 3))):
        b[i] ^= 0x20
    return bytes(b)


def change_digit(rng, b):
    b = bytearray(b)
    digits = [i for i, c in enumerate(b) if 48 <= c <= 57]
    if digits:
        b[rng.choice(digits)] = rng.choice(b"0123456789")
    return bytes(b)


BYTE_OPS = [flip_bits, truncate, insert, repeat_chunk, change_case, change_digit]


def mutate_string(rng, v):
    op = rng.choice(BYTE_OPS)
    out = op(rng, v.encode()).decode("utf-8", "replace").replace("\x00", "")
    return out, op.__name__


def spelling(rng, name):
    variants = [name.lower(), name.upper(), name.title(),
                "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)]
    variants = [v for v in variants if v != name]
    return rng.choice(variants) if variants else name + "-"


def mutate(rng, vec, c):
    headers = dict(c["_headers"])
    body = c["_body"]
    ops = []
    same_gw = [x for x in vec.cases if x["gateway"] == c["gateway"] and x is not c]
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        r = rng.random()
        if r < 0.45 or not isinstance(headers, dict):
            op = rng.choice(BYTE_OPS + ["splice_body"])
            if op == "splice_body":
                body = rng.choice(same_gw)["_body"]
                ops.append("body:splice")
            else:
                body = op(rng, body)
                ops.append("body:" + op.__name__)
            continue
        names = list(headers)
        kind = rng.choice(["drop", "dup", "rename", "value", "value", "value", "type",
                           "splice", "junk", "whole"])
        if not names and kind not in ("junk", "whole"):
            kind = "junk"
        if kind == "drop":
            n = rng.choice(names)
            del headers[n]
            ops.append("drop:" + n)
        elif kind == "dup":
            n = rng.choice(names)
            v = headers[n]
            if isinstance(v, str) and rng.random() < 0.5:
                v, how = mutate_string(rng, v)
            headers[spelling(rng, n)] = v
            ops.append("dup:" + n)
        elif kind == "rename":
            n = rng.choice(names)
            headers[spelling(rng, n)] = headers.pop(n)
            ops.append("rename:" + n)
        elif kind == "value":
            n = rng.choice(names)
            if isinstance(headers[n], str):
                headers[n], how = mutate_string(rng, headers[n])
                ops.append("value:%s:%s" % (n, how))
        elif kind == "type":
            n = rng.choice(names)
            v = headers[n]
            headers[n] = rng.choice([12345, 1e300, [v], None, {"v": v}, True, ""])
            ops.append("type:" + n)
        elif kind == "splice":
            other = rng.choice(same_gw)["_headers"]
            n = rng.choice(list(other))
            headers[n] = other[n]
            ops.append("splice:" + n)
        elif kind == "junk":
            headers[rng.choice(["X-Junk", "Content-Length", "Request-ID", "'; DROP--"])] = \
                rng.choice(["", "x" * 5000, "\u652f\u4ed8", "1e999999"])
            ops.append("junk")
        else:
            headers = rng.choice([list(headers.items()), "headers", None, 42, []])
            ops.append("headers:" + type(headers).__name__)
    return headers, body, ops


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    vec = Vectors()
    out = sys.stdout
    out.write("-- generated by test/e2e/hostile/mutate.py %d %d\n" % (seed, count))
    allowed_n = 0
    for i in range(1, count + 1):
        c = rng.choice(vec.cases)
        headers, body, ops = mutate(rng, vec, c)
        allowed = vec.allowed(c, headers, body)
        allowed_n += allowed
        out.write("INSERT INTO h.mut VALUES (%d, %s, %s, %s, %s, %d, %s, %s);\n" % (
            i, q.sql_text(c["case"]), q.sql_text(vec.channel(c)),
            q.sql_jsonb(json.dumps(headers, ensure_ascii=True)), q.sql_bytea(body),
            c["now_unix"], "true" if allowed else "false", q.sql_text(" ".join(ops))))
    sys.stderr.write("mutate.py: %d mutations of %d vectors (seed %d), %d still genuinely "
                     "signed\n" % (count, len(vec.cases), seed, allowed_n))


if __name__ == "__main__":
    main()
