"""Signing helpers for test/e2e/hostile.sh, with the TEST-ONLY keys of
test/vectors/keys: Stripe HMAC (stdlib), WeChat Pay RSA-SHA256 and Alipay
RSA2 (the openssl command), WeChat's AEAD_AES_256_GCM (AES from the openssl
command, GHASH here), Alipay's canonical content, and SQL literals.

Everything here only produces requests; what paynotify makes of them is
checked in SQL (hostile.sql).
"""
import hashlib
import hmac
import json
import os
import subprocess
import urllib.parse

VECTORS = os.environ.get("PN_VECTORS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "vectors")


def vpath(*parts):
    return os.path.join(VECTORS, *parts)


def vread(*parts):
    with open(vpath(*parts), "rb") as f:
        return f.read()


def manifest():
    with open(vpath("manifest.json")) as f:
        return json.load(f)


# ---- SQL literals -----------------------------------------------------------

def sql_text(s):
    if s is None:
        return "NULL"
    return "'" + s.replace("'", "''") + "'"


def sql_bytea(b):
    if b is None:
        return "NULL::bytea"
    return "'\\x" + b.hex() + "'::bytea"


def sql_jsonb(obj):
    """obj is a Python value (dumped as JSON) or a str of raw JSON text."""
    if obj is None:
        return "NULL::jsonb"
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=True)
    return sql_text(text) + "::jsonb"


# ---- Stripe -----------------------------------------------------------------

def stripe_secret(n):
    return vread("keys", "stripe_secret_%d.txt" % n).strip()


def stripe_v1(secret, ts, body):
    return hmac.new(secret, str(ts).encode() + b"." + body, hashlib.sha256).hexdigest()


def stripe_header(ts, body, secrets=(1,)):
    return "t=%d" % ts + "".join(",v1=" + stripe_v1(stripe_secret(n), ts, body)
                                 for n in secrets)


# ---- RSA with the openssl command -------------------------------------------

def rsa_sign(keyfile, message):
    """RSASSA-PKCS1-v1_5 with SHA-256, base64 (one line)."""
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", vpath("keys", keyfile)],
                         input=message, stdout=subprocess.PIPE, check=True).stdout
    import base64
    return base64.b64encode(sig).decode()


# ---- WeChat Pay v3 ----------------------------------------------------------

WX_SERIAL_1 = "7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3"


def wx_headers(ts, nonce, body, keyfile="wechat_platform_1.key.pem",
               serial=WX_SERIAL_1):
    sig = rsa_sign(keyfile, b"%d\n%s\n" % (ts, nonce.encode()) + body + b"\n")
    return {"Content-Type": "application/json", "Wechatpay-Timestamp": str(ts),
            "Wechatpay-Nonce": nonce, "Wechatpay-Signature": sig,
            "Wechatpay-Serial": serial,
            "Wechatpay-Signature-Type": "WECHATPAY2-SHA256-RSA2048"}


def _aes(mode, key, data, iv=None):
    cmd = ["openssl", "enc", "-" + mode, "-K", key.hex(), "-nosalt"]
    if iv is not None:
        cmd += ["-iv", iv.hex()]
    if mode.endswith("ecb"):
        cmd.append("-nopad")
    return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout


def _gf_mult(x, y):
    r = 0xE1 << 120
    z = 0
    for i in range(127, -1, -1):
        if (y >> i) & 1:
            z ^= x
        x = (x >> 1) ^ r if x & 1 else x >> 1
    return z


def _ghash(h, aad, ct):
    def blocks(b):
        b = b + b"\0" * (-len(b) % 16)
        return [int.from_bytes(b[i:i + 16], "big") for i in range(0, len(b), 16)]
    y = 0
    for blk in blocks(aad) + blocks(ct) + [((len(aad) * 8) << 64) | (len(ct) * 8)]:
        y = _gf_mult(y ^ blk, h)
    return y


def aes_gcm_encrypt(key, nonce, aad, plain):
    """AES-256-GCM with a 12-byte nonce: ciphertext || 16-byte tag."""
    assert len(nonce) == 12
    h = int.from_bytes(_aes("aes-256-ecb", key, b"\0" * 16), "big")
    j0 = nonce + b"\0\0\0\1"
    ct = _aes("aes-256-ctr", key, plain, iv=nonce + b"\0\0\0\2") if plain else b""
    ek = int.from_bytes(_aes("aes-256-ecb", key, j0), "big")
    tag = (_ghash(h, aad, ct) ^ ek).to_bytes(16, "big")
    return ct + tag


def wx_apiv3_key():
    return vread("keys", "wechat_apiv3.key").strip()


def wx_resource(plain, nonce="hostileNonce", aad="transaction"):
    import base64
    ct = aes_gcm_encrypt(wx_apiv3_key(), nonce.encode(), aad.encode(), plain)
    return {"original_type": aad, "algorithm": "AEAD_AES_256_GCM",
            "ciphertext": base64.b64encode(ct).decode(),
            "associated_data": aad, "nonce": nonce}


def check_gcm():
    """The GCM here reproduces a vector's ciphertext, or raise."""
    for c in manifest():
        if c["case"] != "wx_transaction_success_valid":
            continue
        body = json.loads(vread(c["files"]["body"]))
        res = body["resource"]
        plain = vread(c["files"]["plaintext"])
        got = wx_resource(plain, res["nonce"], res["associated_data"])
        if got["ciphertext"] != res["ciphertext"]:
            raise SystemExit("AES-GCM helper does not reproduce the vector")
        return
    raise SystemExit("vector wx_transaction_success_valid missing")


# ---- Alipay -----------------------------------------------------------------

def form_decode(body):
    """[(name bytes, value bytes)] as form.c reads them, or None when form.c
    would refuse the body (bad escape, NUL, empty item, no '=')."""
    if not body:
        return None
    out = []
    for item in body.split(b"&"):
        if b"=" not in item or item.startswith(b"="):
            return None
        name, value = item.split(b"=", 1)
        parts = []
        for raw in (name, value):
            dec = bytearray()
            i = 0
            while i < len(raw):
                c = raw[i]
                if c == 0x25:
                    h = raw[i + 1:i + 3]
                    if len(h) < 2 or any(x not in b"0123456789abcdefABCDEF" for x in h):
                        return None
                    c = int(h, 16)
                    i += 2
                elif c == 0x2B:
                    c = 0x20
                if c == 0:
                    return None
                dec.append(c)
                i += 1
            parts.append(bytes(dec))
        out.append((parts[0], parts[1]))
    return out


def alipay_content(params, keep_empty=False):
    """Alipay's signed content of decoded params (bytes pairs)."""
    items = sorted((n, v) for n, v in params
                   if n not in (b"sign", b"sign_type") and (keep_empty or v != b""))
    return b"&".join(n + b"=" + v for n, v in items)


def alipay_body(fields, keyfile="alipay_1.key.pem", sign=True):
    """A urlencoded body of fields (list of (str, str)), signed with RSA2."""
    fields = list(fields)
    if sign:
        params = [(k.encode(), v if isinstance(v, bytes) else v.encode())
                  for k, v in fields]
        fields.append(("sign", rsa_sign(keyfile, alipay_content(params))))
        if not any(k == "sign_type" for k, _ in fields):
            fields.append(("sign_type", "RSA2"))
    return urllib.parse.urlencode(fields).encode()
