#!/usr/bin/env python3
"""Gateways' answers to order queries, signed as each gateway signs them, for
sql/query.sql: written to test/vectors/query/responses.json.

Each entry is {"name", "gateway", "order", "now", "status", "headers",
"body"}: the HTTP answer the daemon hands to paynotify_query_apply, laid out
as the gateways' documented answers are (/v3/pay/transactions/out-trade-no/
of WeChat Pay, alipay.trade.query, Stripe's PaymentIntent search), with
TEST-ONLY keys of test/vectors/keys:

  WeChat Pay  body signed RSA-SHA256 over "timestamp\\nnonce\\nbody\\n" with
              platform key 1 (Wechatpay-* headers, as its notifications);
              4xx answers are signed too (ORDER_NOT_EXIST).
  Alipay      {"alipay_trade_query_response": {...}, "sign": "..."}: RSA2
              over the exact text of the response object, with the Alipay
              key 1 (the channel trusts its public key).
  Stripe      unsigned JSON (TLS only).

Besides, the requests that are deterministic at a fixed clock (Alipay's:
PKCS#1 v1.5 signatures are), signed with the merchant's key merchant_1, so
that the test compares the database's request with an independent one; and
a WeChat notification of a payment a query finds first.  The variants a
verifier must refuse are made here too: a body changed after signing, a
signature by another key, an unknown serial, another body's signature.
Output is the same on every run.  Needs python3-cryptography.

    test/unit/make_query_responses.py > test/vectors/query/responses.json
"""
import json
import os
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import pnsign as s  # noqa: E402

TS = 1767300000          # the clock of every entry (paynotify.now)
MCHID = "1900000109"
APPID = "wx0000000000test01"
ALI_APP_ID = "2021000000000001"
NONCE = "5F1E2D3C4B5A69788796A5B4C3D2E1F0"


def compact(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def wx_txn(order, state, trade=None, total=8888, mchid=MCHID):
    """A transaction as the query answers it (the research's layout)."""
    t = {"amount": {"currency": "CNY", "payer_currency": "CNY", "total": total},
         "appid": APPID, "mchid": mchid, "out_trade_no": order,
         "promotion_detail": [], "scene_info": {"device_id": ""},
         "trade_state": state, "trade_state_desc": "test"}
    if trade is not None:
        t.update({"attach": "", "bank_type": "OTHERS",
                  "payer": {"openid": "oTEST0000000000000000000001"},
                  "success_time": "2026-01-02T04:40:00+08:00",
                  "trade_type": "JSAPI", "transaction_id": trade})
        t["amount"]["payer_total"] = total
    return compact(t)


def wx_answer(name, order, body, status=200, keyfile="wechat_platform_1.key.pem",
              serial=s.WX_SERIAL_1, signed_body=None):
    headers = s.wx_headers(TS, NONCE, signed_body if signed_body is not None else body,
                           keyfile=keyfile, serial=serial)
    headers["Content-Type"] = "application/json; charset=utf-8"
    headers["Request-ID"] = "08TEST-QUERY-" + name
    return {"name": name, "gateway": "wxpay", "order": order, "now": TS,
            "status": status, "headers": headers, "body": body.decode()}


def wechat():
    paid = wx_txn("QY-1", "SUCCESS", "4200000000202601020000000101")
    out = [
        wx_answer("wx_paid", "QY-1", paid),
        # refused: the amount changed after signing; another key under S1's
        # serial; a serial nobody trusts; the signature of another body;
        # an authentic answer about another order
        wx_answer("wx_paid_tampered", "QY-1", paid.replace(b'"total":8888', b'"total":1'),
                  signed_body=paid),
        wx_answer("wx_paid_wrong_key", "QY-1", paid, keyfile="wechat_platform_2.key.pem"),
        wx_answer("wx_paid_wrong_serial", "QY-1", paid,
                  serial="1234567890ABCDEF1234567890ABCDEF12345678"),
        wx_answer("wx_paid_other_body", "QY-1", paid,
                  signed_body=wx_txn("QY-1", "NOTPAY")),
        wx_answer("wx_paid_other_order", "QY-1",
                  wx_txn("QY-9", "SUCCESS", "4200000000202601020000000109")),
        wx_answer("wx_notpay", "QY-2", wx_txn("QY-2", "NOTPAY")),
        wx_answer("wx_closed", "QY-5", wx_txn("QY-5", "CLOSED")),
        wx_answer("wx_userpaying", "QY-4", wx_txn("QY-4", "USERPAYING")),
        wx_answer("wx_not_exist", "QY-3",
                  compact({"code": "ORDER_NOT_EXIST", "message": "order does not exist"}),
                  status=404),
    ]
    # the payment's own notification, arriving after the query found it
    wx = s.WeChat()
    plain = json.loads(paid)
    plain["trade_state_desc"] = "ok"
    body = wx.envelope("a7c3e1d0-0001-5eec-8000-0000000000q1", "TRANSACTION.SUCCESS",
                       plain, "transaction", "test", "queryNonce01")
    headers = wx.headers(body, ts=TS, nonce="query-notification-nonce-0000001")
    out.append({"name": "wx_paid_notification", "gateway": "wxpay", "order": "QY-1",
                "now": TS, "status": None, "headers": headers, "body": body.decode()})
    return out


def main():
    s.check_vectors()
    entries = wechat()
    json.dump(entries, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
