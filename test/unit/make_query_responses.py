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

The answers to the close calls of expired orders not paid (WeChat Pay's
204, signed; alipay_trade_close_response, signed as the query's) are made
too.  Besides, the requests that are deterministic at a fixed clock
(Alipay's query and close: PKCS#1 v1.5 signatures are), signed with the merchant's key merchant_1, so
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
        wx_answer("wx_closed_qz", "QZ-1", wx_txn("QZ-1", "CLOSED")),
        wx_answer("wx_userpaying", "QY-4", wx_txn("QY-4", "USERPAYING")),
        wx_answer("wx_not_exist", "QY-3",
                  compact({"code": "ORDER_NOT_EXIST", "message": "order does not exist"}),
                  status=404),
        # the close call of an expired order that was not paid (NOTPAY):
        # 204 with an empty body, signed over "ts\nnonce\n\n"; the query
        # that follows finds it CLOSED
        wx_answer("wx_close_done", "QY-2", b"", status=204),
        wx_answer("wx_close_forged", "QY-2", b"", status=204,
                  keyfile="wechat_platform_2.key.pem"),
        wx_answer("wx_closed_qy2", "QY-2", wx_txn("QY-2", "CLOSED")),
        # paid meanwhile: the close is refused (ORDERPAID), the query finds
        # the payment
        wx_answer("wx_notpay_qy6", "QY-6", wx_txn("QY-6", "NOTPAY")),
        wx_answer("wx_close_orderpaid", "QY-6",
                  compact({"code": "ORDERPAID", "message": "order paid"}), status=400),
        wx_answer("wx_paid_qy6", "QY-6", wx_txn("QY-6", "SUCCESS", "4200000000202601020000000106")),
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


def ali_answer(name, order, response, keyfile="alipay_1.key.pem", signed_text=None,
               key=b"alipay_trade_query_response"):
    """{"alipay_trade_query_response": ..., "sign": ...} as Alipay writes it:
    the response's text signed as it stands in the body."""
    text = compact(response)
    sig = s.rsa_sign(keyfile, signed_text if signed_text is not None else text)
    body = b'{"' + key + b'":' + text + b',"sign":"' + sig.encode() + b'"}'
    return {"name": name, "gateway": "alipay", "order": order, "now": TS, "status": 200,
            "headers": {"Content-Type": "text/html;charset=utf-8"}, "body": body.decode()}


def ali_trade(order, status, trade, total="88.88", paid=None):
    """paid: money received (a payment date); by default when the status says so
    (a TRADE_CLOSED may be a paid trade refunded in full: paid=True)"""
    if paid is None:
        paid = status in ("TRADE_SUCCESS", "TRADE_FINISHED")
    r = {"code": "10000", "msg": "Success", "buyer_logon_id": "159****4027",
         "buyer_pay_amount": total if paid else "0.00",
         "buyer_user_id": "2088012351746164",
         "invoice_amount": total if paid else "0.00", "out_trade_no": order,
         "point_amount": "0.00", "receipt_amount": total if paid else "0.00",
         "total_amount": total, "trade_no": trade, "trade_status": status}
    if paid:
        r["send_pay_date"] = "2026-01-02 04:40:00"
    return r


def alipay():
    paid = ali_trade("QA-1", "TRADE_SUCCESS", "2026010222001004160000000101")
    out = [
        ali_answer("ali_paid", "QA-1", paid),
        ali_answer("ali_paid_tampered", "QA-1", dict(paid, total_amount="0.01"),
                   signed_text=compact(paid)),
        ali_answer("ali_paid_wrong_key", "QA-1", paid, keyfile="alipay_2.key.pem"),
        ali_answer("ali_paid_other_order", "QA-1",
                   ali_trade("QA-9", "TRADE_SUCCESS", "2026010222001004160000000109")),
        ali_answer("ali_wait", "QA-2", ali_trade("QA-2", "WAIT_BUYER_PAY",
                                                 "2026010222001004160000000102")),
        # closed unpaid (timed out); closed after a payment (refunded in full)
        ali_answer("ali_closed", "QA-4", ali_trade("QA-4", "TRADE_CLOSED",
                                                   "2026010222001004160000000104")),
        ali_answer("ali_closed_refunded", "QA-5", ali_trade("QA-5", "TRADE_CLOSED",
                                                            "2026010222001004160000000105",
                                                            paid=True)),
        # an order expected on two channels: closed on both
        ali_answer("ali_closed_qz", "QZ-1", ali_trade("QZ-1", "TRADE_CLOSED",
                                                      "2026010222001004160000000106")),
        ali_answer("ali_not_exist", "QA-3", {
            "code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST",
            "sub_msg": "trade does not exist", "buyer_pay_amount": "0.00",
            "invoice_amount": "0.00", "out_trade_no": "QA-3", "point_amount": "0.00",
            "receipt_amount": "0.00"}),
        # a gateway error is not signed
        {"name": "ali_gateway_error", "gateway": "alipay", "order": "QA-1", "now": TS,
         "status": 200, "headers": {"Content-Type": "text/html;charset=utf-8"},
         "body": compact({"error_response": {"code": "40002", "msg": "Invalid Arguments",
                                             "sub_code": "isv.invalid-app-id"}}).decode()},
    ]
    # the payment's own notification, after the query found it
    ali = s.Alipay()
    fields = [("notify_time", "2026-01-02 04:41:00"), ("notify_type", "trade_status_sync"),
              ("notify_id", "2026010200222044100000000101"), ("app_id", ali.app_id),
              ("charset", "utf-8"), ("version", "1.0"), ("trade_status", "TRADE_SUCCESS"),
              ("out_trade_no", "QA-1"), ("trade_no", "2026010222001004160000000101"),
              ("total_amount", "88.88"), ("seller_id", "2088101106499364")]
    out.append({"name": "ali_paid_notification", "gateway": "alipay", "order": "QA-1",
                "now": TS, "status": None, "headers": ali.headers(),
                "body": ali.body(fields).decode()})
    # the requests at TS, signed with the application's key merchant_1: the
    # query, and the close call of an expired order still waiting for payment
    out.append(ali_request("ali_request", "QA-1", "alipay.trade.query", ali.app_id))
    out.append(ali_request("ali_close_request", "QA-2", "alipay.trade.close", ali.app_id))
    out += [
        # alipay.trade.close of QA-2 (WAIT_BUYER_PAY, expired): closed; the
        # query that follows finds TRADE_CLOSED
        ali_answer("ali_close_done", "QA-2", ali_close("QA-2"),
                   key=b"alipay_trade_close_response"),
        ali_answer("ali_close_forged", "QA-2", ali_close("QA-2"), keyfile="alipay_2.key.pem",
                   key=b"alipay_trade_close_response"),
        ali_answer("ali_close_other_order", "QA-2", ali_close("QA-9"),
                   key=b"alipay_trade_close_response"),
        ali_answer("ali_closed_qa2", "QA-2", ali_trade("QA-2", "TRADE_CLOSED",
                                                       "2026010222001004160000000102")),
        # paid meanwhile: the close is refused, the query finds the payment
        ali_answer("ali_wait_qa6", "QA-6", ali_trade("QA-6", "WAIT_BUYER_PAY",
                                                     "2026010222001004160000000107")),
        ali_answer("ali_close_status_error", "QA-6", {
            "code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_STATUS_ERROR",
            "sub_msg": "trade status is not valid"}, key=b"alipay_trade_close_response"),
        ali_answer("ali_paid_qa6", "QA-6", ali_trade("QA-6", "TRADE_SUCCESS",
                                                     "2026010222001004160000000107")),
    ]
    return out


def ali_close(order):
    """alipay_trade_close_response of a closed trade"""
    return {"code": "10000", "msg": "Success", "out_trade_no": order,
            "trade_no": "2026010222001004160000000102"}


def ali_request(name, order, method, app_id):
    """The request of method about order at TS, signed with merchant_1."""
    biz = compact({"out_trade_no": order}).decode()
    params = {"app_id": app_id, "biz_content": biz, "charset": "utf-8", "format": "JSON",
              "method": method, "sign_type": "RSA2",
              "timestamp": "2026-01-02 04:40:00", "version": "1.0"}
    content = "&".join("%s=%s" % (k, params[k]) for k in sorted(params))
    params["sign"] = s.rsa_sign("merchant_1.key.pem", content.encode())
    q = lambda v: urllib.parse.quote(v, safe="-._~")  # noqa: E731
    url = "https://openapi.alipay.com/gateway.do?" + "&".join(
        "%s=%s" % (k, q(params[k])) for k in sorted(params) if k != "biz_content")
    return {"name": name, "gateway": "alipay", "order": order, "now": TS,
            "method": "POST", "url": url, "body": "biz_content=" + q(biz),
            "sign_content": content}


def pi(order, status, pid, amount=8888):
    """A PaymentIntent as the search lists it (the research's layout)."""
    received = amount if status == "succeeded" else 0
    return {"amount": amount, "amount_capturable": 0, "amount_received": received,
            "canceled_at": None, "cancellation_reason": None, "capture_method": "automatic",
            "client_secret": pid + "_secret_TESTONLY", "created": TS - 600, "currency": "usd",
            "id": pid, "latest_charge": "ch_" + pid[3:] if received else None,
            "livemode": False, "metadata": {"order_id": order}, "object": "payment_intent",
            "status": status}


def st_answer(name, order, intents, status=200, has_more=False):
    body = {"object": "search_result", "url": "/v1/payment_intents/search",
            "has_more": has_more, "data": intents,
            "next_page": "TEST_PAGE_2" if has_more else None}
    return {"name": name, "gateway": "stripe", "order": order, "now": TS, "status": status,
            "headers": {"Content-Type": "application/json", "Request-Id": "req_TEST" + name},
            "body": json.dumps(body, indent=2) + "\n"}


def stripe():
    return [
        st_answer("st_paid", "QS-1", [pi("QS-1", "requires_payment_method", "pi_qs_0"),
                                      pi("QS-1", "succeeded", "pi_qs_1")]),
        st_answer("st_canceled", "QS-2", [pi("QS-2", "canceled", "pi_qs_2")]),
        # a page of canceled intents with more to come: not every intent seen
        st_answer("st_canceled_more", "QS-2", [pi("QS-2", "canceled", "pi_qs_2")], has_more=True),
        st_answer("st_none", "QS-3", []),
        st_answer("st_processing", "QS-4", [pi("QS-4", "processing", "pi_qs_4")]),
        st_answer("st_other_order", "QS-1", [pi("QS-9", "succeeded", "pi_qs_9")]),
        {"name": "st_error", "gateway": "stripe", "order": "QS-4", "now": TS, "status": 401,
         "headers": {"Content-Type": "application/json"},
         "body": json.dumps({"error": {"code": "api_key_expired", "type": "invalid_request_error",
                                       "message": "Expired API Key provided"}})},
    ]


BILLS = os.path.join(HERE, "..", "bills")
WX_API = "https://api.mch.weixin.qq.com"
ALI_API = "http://127.0.0.1:8099"


def bills():
    """The answers to the steps of fetching a day's bill (sql/bill_fetch.sql):
    WeChat Pay's tradebill (signed, with the SHA-1 of the plain CSV of
    test/bills/wx_20260314.csv, which the .gz there holds), Alipay's
    bill.downloadurl.query (signed) and Stripe's balance transactions of
    test/bills/stripe_20260314.json in two pages."""
    import hashlib
    csv = open(os.path.join(BILLS, "wx_20260314.csv"), "rb").read()
    sha = hashlib.sha1(csv).hexdigest()
    url = WX_API + "/v3/billdownload/file?token=7c3132337c"

    def tb(name, body, status=200, **kw):
        e = wx_answer(name, "", body, status=status, **kw)
        e["gateway"] = "wxpay"
        del e["order"]
        return e
    good = compact({"download_url": url, "hash_type": "SHA1", "hash_value": sha})
    out = [
        tb("bill_wx_list", good),
        tb("bill_wx_list_wrong_key", good, keyfile="wechat_platform_2.key.pem"),
        tb("bill_wx_list_tampered", good.replace(sha.encode(), b"0" * 40), signed_body=good),
        tb("bill_wx_list_other_origin", compact({
            "download_url": "https://bills.example.com/v3/billdownload/file?token=7c3132337c",
            "hash_type": "SHA1", "hash_value": sha})),
        tb("bill_wx_list_bad_hash", compact({"download_url": url, "hash_type": "SHA1",
                                              "hash_value": hashlib.sha1(b"another bill").hexdigest()})),
        tb("bill_wx_not_ready", compact({"code": "NO_STATEMENT_EXIST",
                                          "message": "no statement"}), status=400),
    ]
    # download URLs on api_base's origin that are no bill download: refused
    for name, path in (("dots", "/../../v3/pay/transactions/out-trade-no/X/close"),
                       ("slash", "/%2F%2Fevil.com/x"), ("at", "/x;@evil.com"),
                       ("nonascii", "/v3/billdownload/file?token=7c31\u00e9")):
        out.append(tb("bill_wx_list_url_" + name, compact({
            "download_url": WX_API + path, "hash_type": "SHA1", "hash_value": sha})))

    def ab(name, response, **kw):
        e = ali_answer(name, "", response,
                       key=b"alipay_data_dataservice_bill_downloadurl_query_response", **kw)
        del e["order"]
        return e
    dl = (ALI_API + "/downloadBillFile.resource?bizType=trade&userId=20881234567890120156"
          "&fileType=csv.zip&bizDates=20260916&downloadFileName=20881234567890120156_20260916.csv.zip"
          "&fileId=%2Ftrade%2F20881234567890120156%2F20260916.csv.zip&timestamp=1767300000&token=TESTONLY")
    ok = {"code": "10000", "msg": "Success", "bill_download_url": dl}
    out += [
        ab("bill_ali_list", ok),
        ab("bill_ali_list_wrong_key", ok, keyfile="alipay_2.key.pem"),
        ab("bill_ali_list_other_host", dict(ok, bill_download_url="http://bills.example.com/x.zip")),
        ab("bill_ali_not_ready", {"code": "40004", "msg": "Business Failed",
                                  "sub_code": "isp.bill_not_exist", "sub_msg": "bill does not exist"}),
    ]
    # download URLs refused: not plain, or https off Alipay's hosts; and one
    # on a host of Alipay's, allowed
    for name, u in (("dots", ALI_API + "/../../v3/pay/transactions/out-trade-no/X/close"),
                    ("slash", ALI_API + "/%2f%2Fevil.com/x"), ("at", ALI_API + "/x;@evil.com"),
                    ("nonascii", ALI_API + "/downloadBillFile.resource?token=7c31\u00e9"),
                    ("evil", "https://evil.com/bill.zip"), ("evilalipay", "https://evilalipay.com/x"),
                    ("hostpct", "https://evil.com%2f.alipay.com/x"), ("hostsemi", "https://evil.com;.alipay.com/x"),
                    ("https", "https://dwbillcenter.alipay.com/downloadBillFile.resource?token=TESTONLY")):
        out.append(ab("bill_ali_list_url_" + name, dict(ok, bill_download_url=u)))
    # the request at TS, signed with the application's key merchant_1
    ali = s.Alipay()
    biz = compact({"bill_type": "trade", "bill_date": "2026-09-16"}).decode()
    params = {"app_id": ali.app_id, "biz_content": biz, "charset": "utf-8", "format": "JSON",
              "method": "alipay.data.dataservice.bill.downloadurl.query", "sign_type": "RSA2",
              "timestamp": "2026-01-02 04:40:00", "version": "1.0"}
    content = "&".join("%s=%s" % (k, params[k]) for k in sorted(params))
    params["sign"] = s.rsa_sign("merchant_1.key.pem", content.encode())
    q = lambda v: urllib.parse.quote(v, safe="-._~")  # noqa: E731
    url = ALI_API + "/gateway.do?" + "&".join(
        "%s=%s" % (k, q(params[k])) for k in sorted(params) if k != "biz_content")
    out.append({"name": "bill_ali_request", "gateway": "alipay", "now": TS,
                "method": "POST", "url": url, "body": "biz_content=" + q(biz),
                "sign_content": content})
    # Stripe: the day's transactions in two pages
    data = json.load(open(os.path.join(BILLS, "stripe_20260314.json")))["data"]
    for name, part, more in (("bill_st_page1", data[:2], True), ("bill_st_page2", data[2:], False)):
        out.append({"name": name, "gateway": "stripe", "now": TS, "status": 200,
                    "headers": {"Content-Type": "application/json"},
                    "body": json.dumps({"object": "list", "url": "/v1/balance_transactions",
                                        "has_more": more, "data": part}, indent=2) + "\n"})
    return out


def main():
    s.check_vectors()
    entries = wechat() + alipay() + stripe() + bills()
    json.dump(entries, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
