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

check_vectors() reproduces committed vectors byte for byte (signatures
are deterministic), so a helper that drifts from the gateways' rules
fails loudly instead of producing notifications nobody would send.
"""
import base64
import hashlib
import hmac
import json
import os
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

VECTORS = os.environ.get("PN_VECTORS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "vectors")

WX_SIGNATURE_TYPE = "WECHATPAY2-SHA256-RSA2048"


def vpath(*parts):
    return os.path.join(VECTORS, *parts)


def vread(*parts):
    with open(vpath(*parts), "rb") as f:
        return f.read()


def _private_key(name):
    return serialization.load_pem_private_key(vread("keys", name), password=None)


def rsa_sha256(key, message):
    """RSASSA-PKCS1-v1_5 with SHA-256, base64 on one line."""
    return base64.b64encode(key.sign(message, padding.PKCS1v15(), hashes.SHA256())).decode()


# ---- WeChat Pay v3 ----------------------------------------------------------

class WeChat:
    """Notifications of one WeChat Pay merchant, signed with platform key N."""

    def __init__(self, platform=1, mchid="1900000109", appid="wx0000000000test01"):
        self.key = _private_key("wechat_platform_%d.key.pem" % platform)
        cert = x509.load_pem_x509_certificate(vread("keys", "wechat_platform_%d.cert.pem" % platform))
        self.serial = "%X" % cert.serial_number
        self.cert_pem = vread("keys", "wechat_platform_%d.cert.pem" % platform).decode()
        self.apiv3_key = vread("keys", "wechat_apiv3.key").strip()
        self.mchid = mchid
        self.appid = appid

    def resource(self, plain, nonce, associated_data):
        """The envelope's resource: plain (bytes) sealed with AES-256-GCM."""
        ct = AESGCM(self.apiv3_key).encrypt(nonce.encode(), plain,
                                             associated_data.encode() or None)
        return {"original_type": associated_data, "algorithm": "AEAD_AES_256_GCM",
                "ciphertext": base64.b64encode(ct).decode(),
                "associated_data": associated_data, "nonce": nonce}

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
        sig = rsa_sha256(self.key, b"%d\n%s\n" % (ts, nonce.encode()) + body + b"\n")
        return {"Content-Type": "application/json", "Wechatpay-Timestamp": str(ts),
                "Wechatpay-Nonce": nonce, "Wechatpay-Signature": sig,
                "Wechatpay-Serial": self.serial,
                "Wechatpay-Signature-Type": WX_SIGNATURE_TYPE}


# ---- Alipay -----------------------------------------------------------------

class Alipay:
    """Asynchronous notifications of one Alipay app, signed RSA2 with key N."""

    def __init__(self, key=1, app_id="2021000000000001"):
        self.key = _private_key("alipay_%d.key.pem" % key)
        self.pub_pem = vread("keys", "alipay_%d.pub.pem" % key).decode()
        self.app_id = app_id

    @staticmethod
    def content(fields):
        """The signed content of fields [(name, value) str]: sorted by name,
        sign and sign_type and empty values left out."""
        items = sorted((k, v) for k, v in fields if k not in ("sign", "sign_type") and v != "")
        return "&".join(k + "=" + v for k, v in items)

    def body(self, fields, sign_type="RSA2"):
        """The urlencoded body of fields [(name, value) str], signed."""
        fields = list(fields)
        sig = rsa_sha256(self.key, self.content(fields).encode("utf-8"))
        fields += [("sign", sig), ("sign_type", sign_type)]
        return urllib.parse.urlencode(fields).encode()

    @staticmethod
    def headers():
        return {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}


# ---- Stripe -----------------------------------------------------------------

class Stripe:
    """Webhook events of one Stripe endpoint, signed with secret N."""

    def __init__(self, secret=1):
        self.secret = vread("keys", "stripe_secret_%d.txt" % secret).strip()

    def signature(self, body, ts):
        return hmac.new(self.secret, str(ts).encode() + b"." + body, hashlib.sha256).hexdigest()

    def headers(self, body, ts=None):
        ts = int(time.time()) if ts is None else ts
        return {"Content-Type": "application/json; charset=utf-8",
                "Stripe-Signature": "t=%d,v1=%s" % (ts, self.signature(body, ts))}


# ---- the helpers reproduce the committed vectors --------------------------

def _manifest():
    with open(vpath("manifest.json")) as f:
        return {c["case"]: c for c in json.load(f)}


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
