#!/usr/bin/env python3
"""The hand-written hostile requests of test/e2e/hostile.sh, as SQL.

Prints INSERTs into h.cases (hostile.sql) and the orders they pay.  Every
case names the outcome and status paynotify must answer, and the anomaly it
must record (if any); what the outcome is for an authentic request with
missing or mistyped fields was read from the gateway code:

  Stripe  (verify_stripe.c) the envelope (object "event", string id and type)
          is required, else malformed; the order number, trade number and
          amounts are optional: missing or mistyped they leave the event
          authentic and the pipeline records an anomaly (no_order_number,
          amount_mismatch) and acknowledges it (ignored).
  WeChat  (verify_wxpay.c) envelope id/event_type and, for a payment,
          out_trade_no, transaction_id, trade_state and an integral
          amount.total >= 0 are required: malformed otherwise.  Another
          mchid is the anomaly merchant_mismatch.
  Alipay  (verify_alipay.c) notify_id is required and amounts must be exact
          decimals (malformed otherwise); app_id must be ours (rejected);
          a payment without out_trade_no is the anomaly no_order_number.

Bodies are bytes, or ("repeat", prefix, unit, count, suffix) for the big
ones, which are built in SQL and signed here over the same bytes.
"""
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pylib"))
import pnsign as s  # noqa: E402
import pnsql as q  # noqa: E402

CASES = []
ORDERS = []                          # (order_no, amount)

ST_TS = 1767300000                   # Stripe events signed at this time
WX_TS = 1767300000
NOW = 1767300002
MIB10 = 10 * 1024 * 1024
REAL_NOW = int(time.time())

SQL_STRINGS = {
    "st": "';DROP TABLE orders;--S",
    "wx": "';DROP TABLE orders;--W",
    "ali": "';DROP TABLE orders;--A",
}


def body_bytes(body):
    if isinstance(body, tuple):
        _, prefix, unit, count, suffix = body
        return prefix + unit.encode() * count + suffix
    return body


def body_sql(body):
    if isinstance(body, tuple):
        _, prefix, unit, count, suffix = body
        return "(%s || convert_to(repeat(%s, %d), 'UTF8') || %s)" % (
            q.sql_bytea(prefix), q.sql_text(unit), count, q.sql_bytea(suffix))
    return q.sql_bytea(body)


def case(name, channel, headers, body, want, status, anomaly=None, now=NOW,
         max_body=None, note=""):
    CASES.append((name, channel, headers, body, now, max_body, want, status,
                  anomaly, note))


def js(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def vector(name):
    for c in s.manifest():
        if c["case"] == name:
            return c
    raise KeyError(name)


def vheaders(c):
    return {k: v for k, v in c["headers"]}


def vbody(c):
    return s.vread(c["files"]["body"])


# ---------------------------------------------------------------------------
# Stripe, channel "st" (secret 1, 300 s window)
# ---------------------------------------------------------------------------

def st_event(evt_id, type_, obj, **extra):
    e = {"id": evt_id, "object": "event", "api_version": "2025-03-31.basil",
         "created": ST_TS, "type": type_, "livemode": False,
         "data": {"object": obj}}
    e.update(extra)
    return e


def st_signed(name, body, want, status, anomaly=None, ts=ST_TS, headers=None,
              max_body=None, note=""):
    hdrs = {"Content-Type": "application/json; charset=utf-8",
            "Stripe-Signature": s.stripe_header(ts, body_bytes(body))}
    hdrs.update(headers or {})
    case(name, "st", hdrs, body, want, status, anomaly, max_body=max_body, note=note)


def pi(order, amount=1250, pid="pi_hx", **over):
    o = {"id": pid, "object": "payment_intent", "amount": amount,
         "amount_received": amount, "currency": "usd",
         "metadata": {"order_id": order}}
    o.update(over)
    return o


def stripe_cases():
    ORDERS.extend([("HX-ST-1", 1250), ("HX-ST-AMT", 1250), ("HX-ST-BIG", 1250),
                   ("HX-ST-FRAC", 1250), ("HX-ST-NEG", 1250), ("HX-ST-CT", 1250),
                   (SQL_STRINGS["st"], 1250)])
    ok = js(st_event("evt_hx_ok", "payment_intent.succeeded", pi("HX-ST-1")))
    st_signed("st_valid_sanity", ok, "processed", 200, note="signing works")
    st_signed("st_valid_again", ok, "duplicate", 200)

    # empty, NULL, 10 MiB
    st_signed("st_empty_body_signed", b"", "malformed", 400)
    case("st_empty_body_unsigned", "st",
         {"Stripe-Signature": s.stripe_header(ST_TS, b"x")}, b"", "rejected", 401)
    case("st_null_body", "st", {"Stripe-Signature": s.stripe_header(ST_TS, b"")},
         None, "malformed", 400)
    big_ok = ("repeat", b'{"id":"evt_hx_big","object":"event","type":"hostile.big","pad":"',
              "x", MIB10, b'"}')
    st_signed("st_10mib_default_cap", big_ok, "malformed", 413)
    st_signed("st_10mib_signed_event", big_ok, "ignored", 200, max_body="64MB",
              note="authentic, unknown type: recorded and acknowledged")
    st_signed("st_10mib_signed_brackets", ("repeat", b"", "[", MIB10, b""),
              "malformed", 400, max_body="64MB")
    st_signed("st_10mib_signed_garbage", ("repeat", b"", "\u00e9\u4e2d", MIB10 // 5, b"\xff"),
              "malformed", 400, max_body="64MB")
    # jsonb_in raises rather than build a container of ~16M elements: refused first
    vals = b'{"id":"evt_hx_vals%d","object":"event","type":"hostile.values","a":['
    st_signed("st_4m_values_at_limit", ("repeat", vals % 1, "1,", 4194298, b"1]}"),
              "ignored", 200, max_body="64MB", note="4194304 values: the limit")
    st_signed("st_4m_values_over_limit", ("repeat", vals % 2, "1,", 4194299, b"1]}"),
              "malformed", 400, max_body="64MB")
    st_signed("st_40mb_20m_values", ("repeat", vals % 3, "1,", 20000000, b"1]}"),
              "malformed", 400, max_body="64MB", note="jsonb_in raised out of memory here")
    case("st_10mib_unsigned", "st", {"Stripe-Signature": s.stripe_header(ST_TS, b"x")},
         ("repeat", b"", "A", MIB10, b""), "rejected", 401, max_body="64MB")

    # bytes the JSON must not hold
    st_signed("st_invalid_utf8_signed",
              b'{"id":"evt_hx_u8","object":"event","type":"x","s":"\xff\xfe\xc3("}',
              "malformed", 400)
    case("st_invalid_utf8_unsigned", "st", {"Stripe-Signature": s.stripe_header(ST_TS, b"x")},
         b'{"id":"evt_hx_u8","object":"event","type":"x","s":"\xff"}', "rejected", 401)
    st_signed("st_nul_raw_signed", b'{"id":"evt_hx_nul","object":"event","type":"x","s":"a\x00b"}',
              "malformed", 400)
    st_signed("st_nul_escaped_signed",
              b'{"id":"evt_hx_nul2","object":"event","type":"x","s":"a\\u0000b"}',
              "malformed", 400)
    st_signed("st_lone_surrogate_signed",
              b'{"id":"evt_hx_sur","object":"event","type":"x","s":"\\ud800"}',
              "malformed", 400)
    st_signed("st_nul_after_json_signed",
              js(st_event("evt_hx_nul3", "x", {})) + b"\x00", "malformed", 400)

    # nesting
    st_signed("st_deep_10000_signed",
              ("repeat", b'{"id":"evt_hx_deep","object":"event","type":"x","data":',
               "[", 10000, b"]" * 10000 + b"}"), "malformed", 400)
    st_signed("st_deep_10000_objects_signed",
              ("repeat", b'{"id":"evt_hx_deepo","object":"event","type":"x","data":',
               '{"a":', 10000, b"1" + b"}" * 10000 + b"}"), "malformed", 400)
    case("st_deep_10000_unsigned", "st", {"Stripe-Signature": s.stripe_header(ST_TS, b"x")},
         ("repeat", b"", "[", 10000, b"]" * 10000), "rejected", 401)
    st_signed("st_deep_in_string_signed",
              ("repeat", b'{"id":"evt_hx_strdeep","object":"event","type":"hostile.s","s":"',
               "[{", 10000, b'\\"[["}'), "ignored", 200,
              note="brackets inside a string are not nesting")
    st_signed("st_depth_64_signed",
              b'{"id":"evt_hx_d64","object":"event","type":"hostile.d","d":' + b"[" * 63 +
              b"]" * 63 + b"}", "ignored", 200)
    st_signed("st_depth_65_signed",
              b'{"id":"evt_hx_d65","object":"event","type":"hostile.d","d":' + b"[" * 64 +
              b"]" * 64 + b"}", "malformed", 400)

    # SQL in every field, header names included
    q = SQL_STRINGS["st"]
    st_signed("st_sql_everywhere",
              js(st_event("evt_';DROP TABLE pay.payment_notify_log;--", "payment_intent.succeeded",
                          pi(q, pid="pi_'); DELETE FROM pay.payment_record;--",
                             currency="usd'--", description="' OR '1'='1"))),
              "processed", 200, headers={"'; DROP TABLE pay.paynotify_key;--": "';--"})
    case("sql_channel", "'; DROP TABLE pay.paynotify_channel;--",
         {"Stripe-Signature": s.stripe_header(ST_TS, ok)}, ok, "rejected", 404)

    # content type is not Stripe's concern: the signature covers the body
    st_signed("st_content_type_text_plain",
              js(st_event("evt_hx_ct", "payment_intent.succeeded", pi("HX-ST-CT", pid="pi_hx_ct"))),
              "processed", 200, headers={"Content-Type": "text/plain; charset=latin1"})

    # time
    st_signed("st_stale_signed", js(st_event("evt_hx_old", "x", {})), "rejected", 401,
              ts=ST_TS - 301)
    st_signed("st_future_signed", js(st_event("evt_hx_new", "x", {})), "rejected", 401,
              ts=ST_TS + 303)

    # the Stripe-Signature header
    good = s.stripe_header(ST_TS, ok)
    v1 = good.split(",v1=")[1]
    for name, hdrs, want, st in [
            ("st_sig_array", {"Stripe-Signature": [good]}, "malformed", 400),
            ("st_sig_number", {"Stripe-Signature": ST_TS}, "malformed", 400),
            ("st_sig_null", {"Stripe-Signature": None}, "malformed", 400),
            ("st_sig_object", {"Stripe-Signature": {"t": ST_TS, "v1": v1}}, "malformed", 400),
            ("st_sig_dup_spelling", {"Stripe-Signature": good, "stripe-signature": good},
             "malformed", 400),
            ("st_sig_missing", {"Content-Type": "application/json"}, "malformed", 400),
            ("st_sig_empty", {"Stripe-Signature": ""}, "malformed", 400),
            ("st_sig_dup_t", {"Stripe-Signature": good + ",t=%d" % ST_TS}, "malformed", 400),
            ("st_sig_upper_v1", {"Stripe-Signature": "t=%d,v1=%s" % (ST_TS, v1.upper())},
             "rejected", 401),
            ("st_sig_only_v0", {"Stripe-Signature": "t=%d,v0=%s" % (ST_TS, v1)}, "rejected", 401),
            ("st_sig_33_items", {"Stripe-Signature": good + ",x=1" * 31}, "malformed", 400),
            ("st_sig_space", {"Stripe-Signature": " " + good}, "malformed", 400),
            ("st_sig_t_sign", {"Stripe-Signature": "t=+%d,v1=%s" % (ST_TS, v1)}, "malformed", 400),
            ("st_sig_t_19_digits", {"Stripe-Signature": "t=0%018d,v1=%s" % (ST_TS, v1)},
             "malformed", 400),
            ("st_headers_array", [["Stripe-Signature", good]], "malformed", 400),
            ("st_headers_string", good, "malformed", 400),
            ("st_headers_null", None, "malformed", 400),
            ("st_sig_sql", {"Stripe-Signature": "t=1';DROP TABLE x;--,v1=" + v1}, "malformed", 400),
    ]:
        if isinstance(hdrs, str):
            hdrs = json.dumps(hdrs)
        case(name, "st", hdrs, ok, want, st)
    case("st_sig_other_secret", "st", {"Stripe-Signature": s.stripe_header(ST_TS, ok, (2,))},
         ok, "rejected", 401)

    # authentic, fields missing or of the wrong type
    def ev(i, type_="payment_intent.succeeded", obj=None, **kw):
        return js(st_event("evt_hx_f%s" % i, type_, obj if obj is not None else {}, **kw))

    st_signed("st_amount_string",
              ev(1, obj=pi("HX-ST-AMT", amount="1250", pid="pi_hx_f1")),
              "ignored", 200, "amount_mismatch")
    st_signed("st_id_missing", js({k: v for k, v in st_event("x", "payment_intent.succeeded",
                                                              pi("HX-ST-1")).items() if k != "id"}),
              "malformed", 400)
    st_signed("st_id_number", js(st_event(12345, "payment_intent.succeeded", pi("HX-ST-1"))),
              "malformed", 400)
    st_signed("st_id_empty", js(st_event("", "payment_intent.succeeded", pi("HX-ST-1"))),
              "malformed", 400)
    st_signed("st_id_300_chars", js(st_event("evt_" + "x" * 296, "x", {})), "malformed", 400)
    st_signed("st_object_not_event",
              js(dict(st_event("evt_hx_f2", "x", {}), object="evt")), "malformed", 400)
    st_signed("st_type_missing",
              js({k: v for k, v in st_event("evt_hx_f3", "x", {}).items() if k != "type"}),
              "malformed", 400)
    st_signed("st_type_number", js(st_event("evt_hx_f4", 7, {})), "malformed", 400)
    st_signed("st_data_object_array",
              js(dict(st_event("evt_hx_f5", "payment_intent.succeeded", {}),
                      data={"object": [pi("HX-ST-1")]})),
              "ignored", 200, "no_order_number")
    st_signed("st_order_id_number",
              ev(6, obj=pi(12345, pid="pi_hx_f6")), "ignored", 200, "no_order_number")
    st_signed("st_data_missing",
              js({k: v for k, v in st_event("evt_hx_f7", "payment_intent.succeeded", {}).items()
                  if k != "data"}), "ignored", 200, "no_order_number")
    st_signed("st_amount_1e999999",
              ev(8).replace(b'"data":{"object":{}}',
                            b'"data":{"object":{"id":"pi_hx_f8","amount":1e999999,'
                            b'"metadata":{"order_id":"HX-ST-BIG"}}}'),
              "malformed", 400, note="numeric_in would raise: refused before jsonb")
    st_signed("st_amount_minus_1e999999",
              ev(9).replace(b'"data":{"object":{}}',
                            b'"data":{"object":{"amount":-1e999999}}'), "malformed", 400)
    st_signed("st_created_1e_minus_999999",
              ev(10).replace(b'"created":%d' % ST_TS, b'"created":1e-999999'), "malformed", 400)
    st_signed("st_amount_1e1001", ev(11).replace(b'"data":{"object":{}}',
                                                 b'"data":{"object":{"amount":1e1001}}'),
              "malformed", 400)
    st_signed("st_amount_1e1000",
              ev(12).replace(b'"data":{"object":{}}',
                             b'"data":{"object":{"id":"pi_hx_f12","amount":1e1000,'
                             b'"amount_received":1e1000,"metadata":{"order_id":"HX-ST-BIG"}}}'),
              "ignored", 200, "amount_mismatch", note="a number jsonb holds, not an int64")
    st_signed("st_number_41_chars",
              ev(13).replace(b'"data":{"object":{}}',
                             b'"data":{"object":{"amount":' + b"1" * 41 + b"}}"),
              "malformed", 400)
    st_signed("st_amount_fraction", ev(14, obj=pi("HX-ST-FRAC", amount=12.5, pid="pi_hx_f14")),
              "ignored", 200, "amount_mismatch")
    st_signed("st_amount_negative", ev(15, obj=pi("HX-ST-NEG", amount=-1250, pid="pi_hx_f15")),
              "ignored", 200, "amount_mismatch")
    st_signed("st_trade_id_missing",
              ev(16, obj={"object": "payment_intent", "amount": 1250, "amount_received": 1250,
                          "metadata": {"order_id": "HX-ST-NEG"}}),
              "ignored", 200, "no_trade_number")
    st_signed("st_top_level_array", js([st_event("evt_hx_f17", "x", {})]), "malformed", 400)
    st_signed("st_top_level_string", b'"evt_hx_f18"', "malformed", 400)
    st_signed("st_top_level_number", b"1e999999", "malformed", 400)


# ---------------------------------------------------------------------------
# WeChat Pay, channel "wx" (platform certificate 1, APIv3 key, mchid/appid)
# ---------------------------------------------------------------------------

def wx_plain(order, amount=100, tid="4200000000202601019999999999", **over):
    p = {"mchid": "1900000109", "appid": "wx0000000000test01", "out_trade_no": order,
         "transaction_id": tid, "trade_type": "JSAPI", "trade_state": "SUCCESS",
         "trade_state_desc": "ok", "bank_type": "OTHERS", "attach": "",
         "success_time": "2026-01-02T08:00:00+08:00", "payer": {"openid": "oTEST"},
         "amount": {"total": amount, "payer_total": amount, "currency": "CNY",
                    "payer_currency": "CNY"}}
    p.update(over)
    return p


def wx_env(nid, plain, event="TRANSACTION.SUCCESS", **over):
    if isinstance(plain, dict):
        plain = js(plain)
    e = {"id": nid, "create_time": "2026-01-02T08:00:00+08:00",
         "resource_type": "encrypt-resource", "event_type": event, "summary": "hostile",
         "resource": s.wx_resource(plain)}
    e.update(over)
    return e


def wx_signed(name, body, want, status, anomaly=None, ts=WX_TS, nonce="hostile-nonce-0001",
              headers=None, max_body=None, note="", drop=()):
    h = s.wx_headers(ts, nonce, body_bytes(body))
    h.update(headers or {})
    for d in drop:
        h.pop(d, None)
    case(name, "wx", h, body, want, status, anomaly, max_body=max_body, note=note)


def wechat_cases():
    ORDERS.extend([("HX-WX-1", 100), ("HX-WX-MCH", 100), (SQL_STRINGS["wx"], 100)])
    ok = js(wx_env("hx-wx-ok", wx_plain("HX-WX-1")))
    wx_signed("wx_valid_sanity", ok, "processed", 200, note="signing and encryption work")
    wx_signed("wx_valid_again", ok, "duplicate", 200, nonce="another-nonce-0002")
    sig_ok = s.wx_headers(WX_TS, "hostile-nonce-0001", ok)

    # empty, NULL, 10 MiB
    wx_signed("wx_empty_body_signed", b"", "malformed", 400)
    case("wx_empty_body_unsigned", "wx", sig_ok, b"", "rejected", 401)
    case("wx_null_body", "wx", sig_ok, None, "malformed", 400)
    case("wx_10mib_default_cap", "wx", sig_ok, ("repeat", b"", "A", MIB10, b""), "malformed", 413)
    case("wx_10mib_unsigned", "wx", sig_ok, ("repeat", b"", "A", MIB10, b""), "rejected", 401,
         max_body="64MB")
    big = js(wx_env("hx-wx-big", js({"mchid": "1900000109", "out_trade_no": "HX-WX-1"}),
                    event="HOSTILE.BIG"))
    wx_signed("wx_10mib_signed_event",
              ("repeat", big[:-1] + b',"pad":"', "x", MIB10, b'"}'), "ignored", 200,
              max_body="64MB", note="authentic, unknown event: recorded and acknowledged")
    wx_signed("wx_10mib_signed_brackets", ("repeat", b"", "[", MIB10, b""), "malformed", 400,
              max_body="64MB")

    # bytes
    wx_signed("wx_invalid_utf8_signed", ok[:-1] + b',"x":"\xff\xfe"}', "malformed", 400)
    wx_signed("wx_nul_signed", ok[:-1] + b',"x":"\x00"}', "malformed", 400)
    wx_signed("wx_plain_invalid_utf8",
              js(wx_env("hx-wx-pu8", js(wx_plain("HX-WX-1"))[:-1] + b',"x":"\xc3\x28"}')),
              "malformed", 400)
    wx_signed("wx_plain_nul",
              js(wx_env("hx-wx-pnul", js(wx_plain("HX-WX-1"))[:-1] + b',"x":"a\x00"}')),
              "malformed", 400)

    # nesting
    wx_signed("wx_deep_envelope_signed",
              ("repeat", ok[:-1] + b',"deep":', "[", 10000, b"]" * 10000 + b"}"), "malformed", 400)
    wx_signed("wx_deep_plaintext",
              js(wx_env("hx-wx-pdeep",
                        js(wx_plain("HX-WX-1"))[:-1] + b',"deep":' + b"[" * 10000 +
                        b"]" * 10000 + b"}")), "malformed", 400)

    # SQL everywhere (the nonce is signed, the serial is looked up)
    q = SQL_STRINGS["wx"]
    wx_signed("wx_sql_everywhere",
              js(wx_env("wx'; DROP TABLE pay.payment_record;--",
                        wx_plain(q, tid="4200'; DELETE FROM pay.paynotify_outbox;--",
                                 attach="' OR 1=1 --"),
                        summary="'); DROP TABLE orders;--")),
              "processed", 200, nonce="n';DROP TABLE pay.payment_notify_log;--")
    h = dict(sig_ok, **{"Wechatpay-Serial": "'; DROP TABLE pay.paynotify_key;--"})
    case("wx_sql_serial", "wx", h, ok, "rejected", 401)

    # probes and serials
    for name, sig, serial, ts, want, st in [
            ("wx_signtest_probe_fresh", "WECHATPAY/SIGNTEST/" + "A" * 40, s.WX_SERIAL_1, WX_TS,
             "rejected", 401),
            ("wx_signtest_bare", "WECHATPAY/SIGNTEST/", s.WX_SERIAL_1, WX_TS, "rejected", 401),
            ("wx_signtest_unknown_serial", "WECHATPAY/SIGNTEST/x", "0000", WX_TS, "rejected", 401),
            ("wx_signtest_stale", "WECHATPAY/SIGNTEST/x", s.WX_SERIAL_1, WX_TS - 400,
             "rejected", 401),
            ("wx_unknown_serial", sig_ok["Wechatpay-Signature"], "0123456789ABCDEF", WX_TS,
             "rejected", 401),
            ("wx_serial_lower_case", sig_ok["Wechatpay-Signature"], s.WX_SERIAL_1.lower(), WX_TS,
             "rejected", 401),
            ("wx_serial_trailing_space", sig_ok["Wechatpay-Signature"], s.WX_SERIAL_1 + " ",
             WX_TS, "rejected", 401),
            ("wx_serial_empty", sig_ok["Wechatpay-Signature"], "", WX_TS, "rejected", 401),
            ("wx_serial_other_key", sig_ok["Wechatpay-Signature"],
             "6A1B2C3D4E5F60718293A4B5C6D7E8F901234567", WX_TS, "rejected", 401),
    ]:
        h = dict(sig_ok, **{"Wechatpay-Signature": sig, "Wechatpay-Serial": serial,
                            "Wechatpay-Timestamp": str(ts)})
        case(name, "wx", h, ok, want, st)

    # headers of the wrong type or spelled twice
    def hdr(**kv):
        h = dict(sig_ok)
        for k, v in kv.items():
            h[k.replace("_", "-")] = v
        return h
    for name, h, want, st in [
            ("wx_serial_array", hdr(Wechatpay_Serial=[s.WX_SERIAL_1]), "malformed", 400),
            ("wx_timestamp_number", hdr(Wechatpay_Timestamp=WX_TS), "malformed", 400),
            ("wx_nonce_object", hdr(Wechatpay_Nonce={"n": 1}), "malformed", 400),
            ("wx_signature_null", hdr(Wechatpay_Signature=None), "malformed", 400),
            ("wx_signature_bool", hdr(Wechatpay_Signature=True), "malformed", 400),
            ("wx_sigtype_number", hdr(Wechatpay_Signature_Type=1), "malformed", 400),
            ("wx_sigtype_other", hdr(Wechatpay_Signature_Type="HMAC-SHA256"), "rejected", 400),
            ("wx_timestamp_plus", hdr(Wechatpay_Timestamp="+%d" % WX_TS), "malformed", 400),
            ("wx_timestamp_space", hdr(Wechatpay_Timestamp="%d " % WX_TS), "malformed", 400),
            ("wx_timestamp_19_digits", hdr(Wechatpay_Timestamp="9" * 19), "malformed", 400),
            ("wx_timestamp_empty", hdr(Wechatpay_Timestamp=""), "malformed", 400),
            ("wx_signature_newline", hdr(Wechatpay_Signature=sig_ok["Wechatpay-Signature"] + "\n"),
             "malformed", 400),
            ("wx_nonce_dup_spelling", dict(sig_ok, **{"wechatpay-nonce": "hostile-nonce-0001"}),
             "malformed", 400),
            ("wx_nonce_missing", {k: v for k, v in sig_ok.items() if k != "Wechatpay-Nonce"},
             "malformed", 400),
            ("wx_headers_array", [[k, v] for k, v in sig_ok.items()], "malformed", 400),
            ("wx_headers_empty", {}, "malformed", 400),
            ("wx_headers_null", None, "malformed", 400),
    ]:
        case(name, "wx", h, ok, want, st)

    # authentic, fields missing or of the wrong type
    plain = js(wx_plain("HX-WX-1"))
    env = json.loads(js(wx_env("hx-wx-f", plain)))

    def env_with(**kv):
        e = dict(env)
        for k, v in kv.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return js(e)
    wx_signed("wx_env_id_missing", env_with(id=None), "malformed", 400)
    wx_signed("wx_env_id_number", env_with(id=42), "malformed", 400)
    wx_signed("wx_env_event_type_array", env_with(event_type=["TRANSACTION.SUCCESS"]),
              "malformed", 400)
    wx_signed("wx_resource_missing", env_with(resource=None), "malformed", 400)
    wx_signed("wx_resource_array", env_with(resource=[env["resource"]]), "malformed", 400)
    wx_signed("wx_resource_other_algorithm",
              env_with(resource=dict(env["resource"], algorithm="AEAD_AES_128_GCM")),
              "rejected", 400)
    wx_signed("wx_ciphertext_not_base64",
              env_with(resource=dict(env["resource"], ciphertext="not base64!")), "malformed", 400)
    wx_signed("wx_ciphertext_tag_only",
              env_with(resource=dict(env["resource"], ciphertext="AAAAAAAAAAAAAAAAAAAAAA==")),
              "rejected", 400)
    wx_signed("wx_envelope_top_array", js([env]), "malformed", 400)
    for name, p, want, st, anomaly in [
            ("wx_plain_amount_string", wx_plain("HX-WX-1", amount="100"), "malformed", 400, None),
            ("wx_plain_out_trade_no_missing",
             {k: v for k, v in wx_plain("HX-WX-1").items() if k != "out_trade_no"},
             "malformed", 400, None),
            ("wx_plain_out_trade_no_number", wx_plain(12345), "malformed", 400, None),
            ("wx_plain_amount_negative", wx_plain("HX-WX-1", amount=-100), "malformed", 400, None),
            ("wx_plain_amount_missing", dict(wx_plain("HX-WX-1"), amount=None),
             "malformed", 400, None),
            ("wx_plain_mchid_other", wx_plain("HX-WX-MCH", mchid="1900000999",
                                              tid="4200000000202601018888888888"),
             "ignored", 200, "merchant_mismatch"),
    ]:
        wx_signed(name, js(wx_env("hx-wx-" + name, js(p))), want, st, anomaly)
    wx_signed("wx_plain_amount_1e999999",
              js(wx_env("hx-wx-e999", js(wx_plain("HX-WX-1", amount=0)).replace(
                  b'"total":0', b'"total":1e999999'))), "malformed", 400)
    wx_signed("wx_plain_top_array", js(wx_env("hx-wx-parr", js([wx_plain("HX-WX-1")]))),
              "malformed", 400)


# ---------------------------------------------------------------------------
# Alipay, channel "ali" (app_id 2021000000000001, key 1)
# ---------------------------------------------------------------------------

def ali_fields(order, nid, amount="88.88", **over):
    f = [("app_id", "2021000000000001"), ("auth_app_id", "2021000000000001"),
         ("charset", "utf-8"), ("notify_id", nid), ("notify_time", "2026-01-02 08:00:00"),
         ("notify_type", "trade_status_sync"), ("out_trade_no", order),
         ("total_amount", amount), ("trade_no", "2026010222001400000000" + nid[-6:]),
         ("trade_status", "TRADE_SUCCESS"), ("version", "1.0")]
    f = [(k, over.pop(k) if k in over else v) for k, v in f]
    f = [(k, v) for k, v in f if v is not None]
    f.extend(over.items())
    return f


FORM = "application/x-www-form-urlencoded; charset=utf-8"


def ali(name, fields, want, status, anomaly=None, ct=FORM, headers=None, sign=True,
        keyfile="alipay_1.key.pem", max_body=None, note=""):
    h = {"Content-Type": ct} if ct is not None else {}
    h.update(headers or {})
    case(name, "ali", h, s.alipay_body(fields, keyfile=keyfile, sign=sign), want, status,
         anomaly, max_body=max_body, note=note)


def alipay_cases():
    ORDERS.extend([("HX-ALI-1", 8888), ("HX-ALI-2", 8888), (SQL_STRINGS["ali"], 8888)])
    ali("ali_valid_sanity", ali_fields("HX-ALI-1", "hx-ali-000001"), "processed", 200,
        note="signing works")
    ali("ali_valid_again", ali_fields("HX-ALI-1", "hx-ali-000001"), "duplicate", 200)

    case("ali_empty_body", "ali", {"Content-Type": FORM}, b"", "malformed", 400)
    case("ali_null_body", "ali", {"Content-Type": FORM}, None, "malformed", 400)
    case("ali_10mib_default_cap", "ali", {"Content-Type": FORM},
         ("repeat", b"", "A", MIB10, b""), "malformed", 413)
    case("ali_10mib_no_equals", "ali", {"Content-Type": FORM},
         ("repeat", b"", "A", MIB10, b""), "malformed", 400, max_body="64MB")
    case("ali_10mib_many_params", "ali", {"Content-Type": FORM},
         ("repeat", b"", "a=1&", MIB10 // 4, b"z=1"), "malformed", 400, max_body="64MB")
    case("ali_10mib_one_value", "ali", {"Content-Type": FORM},
         ("repeat", b"sign_type=RSA2&sign=AAAA&v=", "%41", MIB10 // 3, b""),
         "rejected", 401, max_body="64MB", note="decoded and verified, not authentic")

    # bytes
    ali("ali_invalid_utf8_signed", ali_fields("HX-ALI-2", "hx-ali-000002", subject=b"\xff\xfe"),
        "malformed", 400)
    ali("ali_gbk_invalid_signed", ali_fields("HX-ALI-2", "hx-ali-000003", charset="gbk",
                                             subject=b"\x81"), "malformed", 400,
        ct="application/x-www-form-urlencoded")
    ali("ali_nul_escaped", ali_fields("HX-ALI-2", "hx-ali-000004", subject="a\x00b"),
        "malformed", 400)
    case("ali_nul_raw", "ali", {"Content-Type": FORM},
         s.alipay_body(ali_fields("HX-ALI-2", "hx-ali-000005")) + b"&x=a\x00b", "malformed", 400)

    # SQL everywhere
    q = SQL_STRINGS["ali"]
    ali("ali_sql_everywhere",
        ali_fields(q, "ali';DROP TABLE pay.paynotify_outbox;--",
                   trade_no="2088'); DELETE FROM pay.payment_record;--",
                   subject="'; DROP TABLE orders; --", body="' OR '1'='1"),
        "processed", 200, headers={"x-sql'--": "'; DROP TABLE pay.paynotify_anomaly;--"})

    # content types (on a correctly signed body)
    for name, ct, want, st in [
            ("ali_ct_json", "application/json", "malformed", 400),
            ("ali_ct_text_plain", "text/plain", "malformed", 400),
            ("ali_ct_multipart", "multipart/form-data; boundary=x", "malformed", 400),
            ("ali_ct_latin1", "application/x-www-form-urlencoded; charset=latin1", "malformed", 400),
            ("ali_ct_gbk_vs_form_utf8", "application/x-www-form-urlencoded; charset=GBK",
             "malformed", 400),
            ("ali_ct_empty", "", "malformed", 400),
            ("ali_ct_spaces", "  Application/X-WWW-Form-Urlencoded ;  charset=\"UTF-8\" ",
             "duplicate", 200),
    ]:
        ali(name, ali_fields("HX-ALI-1", "hx-ali-000001"), want, st, ct=ct)
    ali("ali_ct_array", ali_fields("HX-ALI-1", "hx-ali-000001"), "malformed", 400, ct=None,
        headers={"Content-Type": [FORM]})
    ali("ali_ct_dup_spelling", ali_fields("HX-ALI-1", "hx-ali-000001"), "malformed", 400,
        headers={"content-type": FORM})
    case("ali_headers_array", "ali", [["Content-Type", FORM]],
         s.alipay_body(ali_fields("HX-ALI-1", "hx-ali-000001")), "malformed", 400)
    case("ali_headers_null", "ali", None, s.alipay_body(ali_fields("HX-ALI-1", "hx-ali-000001")),
         "duplicate", 200, note="Alipay needs no header: the body carries the signature")

    # the signature fields
    ali("ali_sign_type_rsa", ali_fields("HX-ALI-2", "hx-ali-000006", sign_type="RSA"),
        "rejected", 400)
    ali("ali_sign_type_empty", ali_fields("HX-ALI-2", "hx-ali-000007", sign_type=""),
        "malformed", 400)
    ali("ali_unsigned", ali_fields("HX-ALI-2", "hx-ali-000008", sign_type="RSA2"),
        "malformed", 400, sign=False)
    ali("ali_other_key", ali_fields("HX-ALI-2", "hx-ali-000009"), "rejected", 401,
        keyfile="alipay_2.key.pem")

    # authentic, fields missing or of the wrong type
    for name, over, want, st, anomaly in [
            ("ali_amount_letters", {"total_amount": "abc"}, "malformed", 400, None),
            ("ali_amount_exponent", {"total_amount": "1e3"}, "malformed", 400, None),
            ("ali_amount_negative", {"total_amount": "-88.88"}, "malformed", 400, None),
            ("ali_amount_three_decimals", {"total_amount": "88.888"}, "malformed", 400, None),
            ("ali_amount_space", {"total_amount": " 88.88"}, "malformed", 400, None),
            ("ali_amount_huge", {"total_amount": "9" * 40}, "malformed", 400, None),
            ("ali_refund_fee_letters", {"refund_fee": "x"}, "malformed", 400, None),
            ("ali_notify_id_missing", {"notify_id": None}, "malformed", 400, None),
            ("ali_notify_id_256", {"notify_id": "n" * 256}, "malformed", 400, None),
            ("ali_app_id_missing", {"app_id": None}, "rejected", 400, None),
            ("ali_app_id_other", {"app_id": "2021000000000009"}, "rejected", 400, None),
            ("ali_out_trade_no_missing", {"out_trade_no": None}, "ignored", 200, "no_order_number"),
            ("ali_amount_missing", {"total_amount": None}, "ignored", 200, "amount_mismatch"),
    ]:
        ali(name, ali_fields("HX-ALI-2", "hx-ali-%06d" % (100 + len(CASES)), **over),
            want, st, anomaly)
    ali("ali_dup_param", ali_fields("HX-ALI-2", "hx-ali-000010") + [("out_trade_no", "HX-ALI-1")],
        "malformed", 400)


# ---------------------------------------------------------------------------
# The vectors again, on the channels h.baseline replayed them on (m_<case>)
# ---------------------------------------------------------------------------

def vector_cases():
    def again(name, base, headers, body, now, want, st, note=""):
        c = vector(base)
        case(name, "m_" + c.get("duplicate_of", base), headers, body, want, st, now=now,
             note=note)

    for base in ("wx_transaction_success_valid", "stripe_payment_intent_succeeded_valid",
                 "ali_trade_success_valid"):
        c = vector(base)
        again(base + "_replayed_now", base, vheaders(c), vbody(c), REAL_NOW,
              "duplicate" if base.startswith("ali") else "rejected",
              200 if base.startswith("ali") else 401,
              note="Alipay has no timestamp (docs/GATEWAYS.md 2.6); the others are stale")
        again(base + "_text_plain", base,
              dict(vheaders(c), **{"Content-Type": "text/plain"}), vbody(c), c["now_unix"],
              "malformed" if base.startswith("ali") else "duplicate",
              400 if base.startswith("ali") else 200)

    # one signature, two spellings: base64 whose padding bits are not zero
    c = vector("wx_transaction_success_valid")
    h = vheaders(c)
    sig = h["Wechatpay-Signature"]
    assert sig.endswith("A==")
    h["Wechatpay-Signature"] = sig[:-3] + "B=="
    again("wx_signature_noncanonical_base64", c["case"], h, vbody(c), c["now_unix"],
          "malformed", 400, note="decodes to the valid signature's bytes")
    c = vector("ali_trade_success_valid")
    body = vbody(c)
    assert b"Jw%3D%3D&" in body
    again("ali_sign_noncanonical_base64", c["case"], vheaders(c),
          body.replace(b"Jw%3D%3D&", b"Jx%3D%3D&"), c["now_unix"], "malformed", 400,
          note="decodes to the valid sign's bytes")

    for base in ("wx_signtest_probe", "wx_unknown_serial", "wx_timestamp_stale",
                 "stripe_timestamp_stale"):
        c = vector(base)
        again("vector_" + base, base, vheaders(c), vbody(c), c["now_unix"], "rejected", 401)

    # unknown channels
    c = vector("stripe_payment_intent_succeeded_valid")
    for name, chan in [("unknown_channel", "nope"), ("null_channel", None),
                       ("empty_channel", ""), ("long_channel", "c" * 10000),
                       ("unicode_channel", "\u652f\u4ed8")]:
        case(name, chan, vheaders(c), vbody(c), "rejected", 404, now=c["now_unix"])


def main():
    s.check_vectors()
    stripe_cases()
    wechat_cases()
    alipay_cases()
    vector_cases()
    out = sys.stdout
    out.write("-- generated by test/e2e/hostile/cases.py\n")
    for order, amount in ORDERS:
        out.write("SELECT t.set_order(%s, 'pending', %d);\n" % (q.sql_text(order), amount))
    names = set()
    for (name, channel, headers, body, now, max_body, want, status, anomaly, note) in CASES:
        assert name not in names, name
        names.add(name)
        out.write("INSERT INTO h.cases (name, channel, headers, body, now, max_body, "
                  "want_outcome, want_status, want_anomaly, note) VALUES (%s, %s, %s, %s, "
                  "%d, %s, %s, %d, %s, %s);\n" % (
                      q.sql_text(name), q.sql_text(channel), q.sql_jsonb(headers),
                      "NULL::bytea" if body is None else body_sql(body), now,
                      q.sql_text(max_body), q.sql_text(want), status, q.sql_text(anomaly),
                      q.sql_text(note)))


if __name__ == "__main__":
    main()
