"""Sign payment notifications exactly as each gateway does, with the
TEST-ONLY keys of test/vectors/keys (python3-cryptography).

  WeChat Pay v3  resource encrypted with AEAD_AES_256_GCM under the APIv3
                 key (nonce and associated data in the envelope), envelope
                 signed RSA-SHA256 (PKCS#1 v1.5) over "timestamp\\nnonce\\nbody\\n"
                 with the platform key; headers Wechatpay-Timestamp, -Nonce,
                 -Signature, -Serial, -Signature-Type.
  Alipay         RSA2 (RSA-SHA256, PKCS#1 v1.5) over the parameters sorted
                 by name, "k=v" joined with "&", sign and sign_type left
                 out, empty values left out; form-urlencoded body.
  Stripe         HMAC-SHA256 keyed by the whole whsec_ secret over
                 "t.body"; header Stripe-Signature: t=...,v1=....

The one signer of the Python tests (test/model, test/e2e/hostile,
test/unit/make_*.py): the classes for tests that think in merchants and
keys, the functions below them for tests that name key files and build
hostile variants.  check_vectors() reproduces committed vectors byte for
byte (signatures are deterministic), so a helper that drifts from the
gateways' rules fails loudly instead of producing notifications nobody
would send.  Import it with
    sys.path.insert(0, <repository>/test/pylib); import pnsign
"""
import base64
import binascii
import functools
import hashlib
import hmac
import json
import os
import time
import urllib.parse

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VECTORS = os.environ.get("PN_VECTORS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "vectors")

WX_SIGNATURE_TYPE = "WECHATPAY2-SHA256-RSA2048"
WX_SERIAL_1 = "7E3F2A9C1B5D4E6F80912A3B4C5D6E7F8091A2B3"


def vpath(*parts):
    return os.path.join(VECTORS, *parts)


def vread(*parts):
    with open(vpath(*parts), "rb") as f:
        return f.read()


def manifest():
    """The vectors' manifest: a list of cases."""
    with open(vpath("manifest.json")) as f:
        return json.load(f)


@functools.lru_cache(maxsize=None)
def private_key(name):
    """A private key of test/vectors/keys by file name (or keys/ path)."""
    return serialization.load_pem_private_key(vread("keys", os.path.basename(name)),
                                              password=None)


def rsa_sha256(key, message):
    """RSASSA-PKCS1-v1_5 with SHA-256, base64 on one line."""
    return base64.b64encode(key.sign(message, padding.PKCS1v15(), hashes.SHA256())).decode()


def rsa_sign(keyfile, message):
    """rsa_sha256 with the private key in test/vectors/keys/keyfile."""
    return rsa_sha256(private_key(keyfile), message)


def public_key(path):
    """The PEM public key in the file at path."""
    with open(path, "rb") as f:
        return serialization.load_pem_public_key(f.read())


def rsa_verify_raw(key, message, raw):
    """Whether raw (bytes) is an RSA-SHA256 PKCS#1 v1.5 signature of message
    by the public key."""
    try:
        key.verify(raw, message, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return False
    return True


def rsa_verify(pubfile, message, sig):
    """Whether sig (base64 text) is an RSA-SHA256 signature of message by the
    public key in vectors/pubfile (a keys/... path)."""
    try:
        raw = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return False
    return rsa_verify_raw(public_key(vpath(pubfile)), message, raw)


def cert_serial(pem):
    """A PEM certificate's serial number as WeChat writes it (hex, capitals)."""
    return "%X" % x509.load_pem_x509_certificate(pem).serial_number


# ---- WeChat Pay v3 ----------------------------------------------------------

def wx_apiv3_key():
    return vread("keys", "wechat_apiv3.key").strip()


def wx_message(ts, nonce, body):
    """What WeChat signs: "timestamp\\nnonce\\nbody\\n" (bytes)."""
    return ts + b"\n" + nonce + b"\n" + body + b"\n"


def wx_headers(ts, nonce, body, keyfile="wechat_platform_1.key.pem", serial=WX_SERIAL_1):
    """The signed headers of one delivery of body (bytes)."""
    sig = rsa_sign(keyfile, wx_message(b"%d" % ts, nonce.encode(), body))
    return {"Content-Type": "application/json", "Wechatpay-Timestamp": str(ts),
            "Wechatpay-Nonce": nonce, "Wechatpay-Signature": sig,
            "Wechatpay-Serial": serial,
            "Wechatpay-Signature-Type": WX_SIGNATURE_TYPE}


def wx_resource(plain, nonce="hostileNonce", aad="transaction", key=None):
    """The envelope's resource: plain (bytes) sealed with AEAD_AES_256_GCM
    under the APIv3 key (ciphertext || 16-byte tag, base64)."""
    ct = AESGCM(key or wx_apiv3_key()).encrypt(nonce.encode(), plain, aad.encode() or None)
    return {"original_type": aad, "algorithm": "AEAD_AES_256_GCM",
            "ciphertext": base64.b64encode(ct).decode(),
            "associated_data": aad, "nonce": nonce}


class WeChat:
    """Notifications of one WeChat Pay merchant, signed with platform key N."""

    def __init__(self, platform=1, mchid="1900000109", appid="wx0000000000test01"):
        self.keyfile = "wechat_platform_%d.key.pem" % platform
        self.serial = cert_serial(vread("keys", "wechat_platform_%d.cert.pem" % platform))
        self.cert_pem = vread("keys", "wechat_platform_%d.cert.pem" % platform).decode()
        self.apiv3_key = wx_apiv3_key()
        self.mchid = mchid
        self.appid = appid

    def resource(self, plain, nonce, associated_data):
        """The envelope's resource: plain (bytes) sealed with AES-256-GCM."""
        return wx_resource(plain, nonce, associated_data, key=self.apiv3_key)

    def envelope(self, notify_id, event_type, plain_obj, original_type, summary,
                 nonce, create_time="2026-01-01T08:00:06+08:00"):
        """The request body (bytes) of one notification; plain_obj is the
        decrypted resource (a dict).  nonce: 12 ASCII characters."""
        plain = json.dumps(plain_obj, ensure_ascii=False, separators=(",", ":")).encode()
        env = {"id": notify_id, "create_time": create_time,
               "resource_type": "encrypt-resource", "event_type": event_type,
               "summary": summary,
               "resource": self.resource(plain, nonce, original_type)}
        return json.dumps(env, ensure_ascii=False, separators=(",", ":")).encode()

    def headers(self, body, ts=None, nonce=None):
        """The signed headers for one delivery of body (a fresh timestamp and
        nonce per delivery, as WeChat re-signs every retry)."""
        ts = int(time.time()) if ts is None else ts
        nonce = nonce or base64.b32encode(os.urandom(20)).decode()[:32]
        return wx_headers(ts, nonce, body, keyfile=self.keyfile, serial=self.serial)


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
    """Alipay's signed content of decoded params (bytes pairs): sorted by
    name, sign and sign_type (and empty values, unless keep_empty) left out."""
    items = sorted((n, v) for n, v in params
                   if n not in (b"sign", b"sign_type") and (keep_empty or v != b""))
    return b"&".join(n + b"=" + v for n, v in items)


def alipay_body(fields, keyfile="alipay_1.key.pem", sign=True):
    """A urlencoded body of fields (list of (str, str)), signed with RSA2
    (sign_type RSA2 added after sign unless fields has one)."""
    fields = list(fields)
    if sign:
        params = [(k.encode(), v if isinstance(v, bytes) else v.encode())
                  for k, v in fields]
        fields.append(("sign", rsa_sign(keyfile, alipay_content(params))))
        if not any(k == "sign_type" for k, _ in fields):
            fields.append(("sign_type", "RSA2"))
    return urllib.parse.urlencode(fields).encode()


class Alipay:
    """Asynchronous notifications of one Alipay app, signed RSA2 with key N."""

    def __init__(self, key=1, app_id="2021000000000001"):
        self.keyfile = "alipay_%d.key.pem" % key
        self.pub_pem = vread("keys", "alipay_%d.pub.pem" % key).decode()
        self.app_id = app_id

    @staticmethod
    def content(fields):
        """The signed content of fields [(name, value) str]: sorted by name,
        sign and sign_type and empty values left out."""
        return alipay_content([(k.encode(), v.encode()) for k, v in fields]).decode()

    def body(self, fields, sign_type="RSA2"):
        """The urlencoded body of fields [(name, value) str], signed."""
        fields = list(fields)
        sig = rsa_sign(self.keyfile, self.content(fields).encode("utf-8"))
        fields += [("sign", sig), ("sign_type", sign_type)]
        return urllib.parse.urlencode(fields).encode()

    @staticmethod
    def headers():
        return {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}


# ---- Stripe -----------------------------------------------------------------

def stripe_secret(n):
    return vread("keys", "stripe_secret_%d.txt" % n).strip()


def stripe_v1(secret, ts, body):
    """The v1 signature: HMAC-SHA256 keyed by the whole secret over "t.body"
    (ts an int or its text)."""
    return hmac.new(secret, str(ts).encode() + b"." + body, hashlib.sha256).hexdigest()


def stripe_header(ts, body, secrets=(1,)):
    """A Stripe-Signature value with one v1 per secret number."""
    return "t=%d" % ts + "".join(",v1=" + stripe_v1(stripe_secret(n), ts, body)
                                 for n in secrets)


class Stripe:
    """Webhook events of one Stripe endpoint, signed with secret N."""

    def __init__(self, secret=1):
        self.secret = stripe_secret(secret)

    def signature(self, body, ts):
        return stripe_v1(self.secret, ts, body)

    def headers(self, body, ts=None):
        ts = int(time.time()) if ts is None else ts
        return {"Content-Type": "application/json; charset=utf-8",
                "Stripe-Signature": "t=%d,v1=%s" % (ts, self.signature(body, ts))}


# ---- the helpers reproduce the committed vectors --------------------------

def _manifest():
    return {c["case"]: c for c in manifest()}


def _case_file(case, which):
    return vread(case["files"][which])


def check_vectors():
    """Raise AssertionError unless every helper reproduces a vector exactly."""
    m = _manifest()

    c = m["wx_transaction_success_valid"]
    wx = WeChat(1)
    body = _case_file(c, "body")
    env = json.loads(body)
    res = env["resource"]
    got = wx.resource(_case_file(c, "plaintext"), res["nonce"], res["associated_data"])
    assert got["ciphertext"] == res["ciphertext"], "WeChat AES-GCM differs from the vector"
    h = dict(c["headers"])
    got = wx.headers(body, ts=int(h["Wechatpay-Timestamp"]), nonce=h["Wechatpay-Nonce"])
    assert got["Wechatpay-Signature"] == h["Wechatpay-Signature"], "WeChat signature differs"
    assert got["Wechatpay-Serial"] == h["Wechatpay-Serial"], "WeChat serial differs"

    c = m["ali_partial_refund_valid"]
    body = _case_file(c, "body")
    fields = urllib.parse.parse_qsl(body.decode(), keep_blank_values=True)
    assert Alipay.content(fields).encode() == _case_file(c, "sign_content"), \
        "Alipay signed content differs from the vector"
    want = dict(fields)["sign"]
    got = dict(urllib.parse.parse_qsl(Alipay(1).body(
        [(k, v) for k, v in fields if k not in ("sign", "sign_type")]).decode()))["sign"]
    assert got == want, "Alipay signature differs from the vector"

    c = m["stripe_charge_refunded_valid"]
    body = _case_file(c, "body")
    h = dict(c["headers"])
    ts = int(h["Stripe-Signature"].split(",")[0][2:])
    assert Stripe(1).headers(body, ts)["Stripe-Signature"] == h["Stripe-Signature"], \
        "Stripe signature differs from the vector"


if __name__ == "__main__":
    check_vectors()
    print("pnsign: the helpers reproduce the vectors")
