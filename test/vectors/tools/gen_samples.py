#!/usr/bin/env python3
"""Regenerates samples/cases/ and samples/manifest.json: the documentation
corpus.  Each payload in samples/payloads/ is a notification as published in
a gateway's documentation or an SDK's test fixture (see CASES below and
samples/ORIGIN.md); this script signs it with the TEST-ONLY keys exactly as
the gateway would sign the original:

  wxpay   resource.plaintext -> AES-256-GCM (APIv3 key, resource.nonce,
          resource.associated_data) -> resource.ciphertext; the body is the
          envelope with ciphertext in plaintext's place, signed RSA-SHA256
          over "ts\\nnonce\\nbody\\n" with platform certificate #1
  alipay  the form line (no sign) + "&sign=<RSA2 over the sorted non-empty
          params except sign/sign_type>" with alipay_1
  stripe  the event JSON as is; Stripe-Signature t=..,v1=HMAC(t.body) with
          stripe_secret_1

Deterministic: fixed timestamps and header nonces, PKCS#1 v1.5 and HMAC are
deterministic, GCM nonces come from the payloads.  Reuses gen.py."""
import json, os, shutil, sys
from urllib.parse import quote_plus, unquote_to_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen  # noqa: E402

ROOT = gen.ROOT                                   # test/vectors
SROOT = os.path.join(ROOT, "samples")
PAY = os.path.join(SROOT, "payloads")
SIGNER = "wechat_platform_1"

WX_DOC = "https://pay.weixin.qq.com/wiki/doc/apiv3/apis/chapter3_1_5.shtml"
WX_REFUND_DOC = "https://pay.weixin.qq.com/wiki/doc/apiv3/apis/chapter3_1_11.shtml"
WX_PARTNER_DOC = "https://pay.weixin.qq.com/wiki/doc/apiv3_partner/apis/chapter4_5_5.shtml"
WX_COMBINE_DOC = "https://pay.weixin.qq.com/wiki/doc/apiv3/apis/chapter5_1_13.shtml"
WX_WEBHOOK = "https://github.com/TheNorthMemory/wechatpay.js.org/blob/730e63683f257a23f60b2596713861a3dadf274d/webhook/v3/"
ALI_DOC = "https://opendocs.alipay.com/open/204/105301"
ALI_NODE = ("https://github.com/alipay/alipay-sdk-nodejs-all/blob/"
            "e1676390871eb7a69b4f81aa15de8327ac15738a/test/alipay.test.ts")
STRIPE_FIX = ("https://github.com/stripe/openapi/blob/f6c2a48fbac2819d1feba8143d942ffc65e1c0d2/"
              "openapi/fixtures3.json")
WX_ENTRUST = "https://github.com/TheNorthMemory/wechatpay.js.org/blob/80cb6edcc0815a3e5c510a656f2d77e0bbae7364/webhook/v3/"
# the Alipay agreement notices come from public merchant code, which names no page of the docs
ALI_DUT_DOC = None
STRIPE_PY = "https://github.com/stripe/stripe-python/blob/be43bda6f3dd2904f3a6821036f3d743e904ca50/tests/test_v2_event.py"

WX_TS = 1432099775        # 2015-05-20T13:29:35+08:00, the documented create_time
ALI_NOW = 1468908649      # 2016-07-19 14:10:49 +08:00, the documented notify_time
ST_T = 1234567895         # the fixture event's created (1234567890) + 5 s


def src(url, title, section):
    return {"url": url, "title": title, "section": section}


def before(order, status, amount, paid_trade=None):
    return {"order_no": order, "status": status, "amount": amount, "paid_trade": paid_trade}


def exp(outcome, after, events, payment=None, refund=None, ack=True):
    return {"outcome": outcome, "ack": ack, "after_status": after, "events": events,
            "payment": payment, "refund": refund}


def agr(agreement_no, merchant_ref, action):
    """What an agreement notice does by the subscriptions contract: the agreement
    the gateway names, the merchant's reference to it (Stripe: the
    subscription's metadata.order_id; None where the notice has none), the
    action, its outcome."""
    return {"agreement_no": agreement_no, "merchant_ref": merchant_ref, "action": action, "outcome": "processed"}


def pay(trade, amount):
    return {"trade_no": trade, "amount": amount}


def ref(rid, amount, status):
    return {"refund_id": rid, "amount": amount, "status": status}


WX_APPID = "wxd678efh567hg6787"
PARTNER = {"sp_mchid": "1230000109", "sub_mchid": "1900000109", "sp_appid": "wx8888888888888888",
           "sub_appid": "wxd678efh567hg6999"}
# the ENTRUST.* samples' service-provider ids (sp_mchid and sub_mchid alike, as published)
ENTRUST_PARTNER = {"sp_mchid": "1900000109", "sub_mchid": "1900000109", "sp_appid": "wxd678efh567hg6787",
                   "sub_appid": "wxd678efh567hg6787"}
CASES = [
    # ------------------------------------------------------------------ WeChat Pay v3
    dict(case="doc_wx_transaction_success", gateway="wxpay", mchid="1230000109", appid=WX_APPID,
         source=src(WX_DOC, "微信支付 APIv3 JSAPI支付 支付通知API", "通知参数 / 商户对resource对象进行解密后，得到的资源对象示例"),
         notes="Envelope as documented (id EV-2018022511223320873, create_time, summary 支付成功). The documented "
               "resource leaves nonce and associated_data as placeholders; nonce 'katvtHDDPxkw' and associated_data "
               "'transaction' are those of the encrypted copy of this very plaintext in EasyWeChat's "
               "tests/Kernel/Support/AesGcmTest.php, whose plaintext string is the documented sample byte for byte.",
         before=before("1217752501201407033233368018", "pending", 100),
         expected=exp("processed", "paid", ["paid"], pay("1217752501201407033233368018", 100))),
    dict(case="doc_wx_refund_success", gateway="wxpay", mchid="1900000100", appid=WX_APPID,
         source=src(WX_REFUND_DOC, "微信支付 APIv3 退款结果通知", "通知报文 / 解密后的资源对象示例"),
         notes="Envelope and decrypted resource as documented (associated_data empty as in the sample); the "
               "resource nonce (documented '...') is 'rfNonce00001'. The refund carries no appid; the channel's "
               "appid is the payment sample's.",
         before=before("20150806125346", "paid", 999, "1008450740201411110005820873"),
         expected=exp("processed", "refunded", ["refunded"], None,
                      ref("50200207182018070300011301001", 999, "succeeded"))),
    dict(case="doc_wx_refund_abnormal", gateway="wxpay", mchid="1900000100", appid=WX_APPID,
         source=src(WX_WEBHOOK + "REFUND.ABNORMAL.md", "wechatpay.js.org: 退款异常(REFUND.ABNORMAL)通知",
                    "请求报文(body) / resource.ciphertext 解密后的明文格式"),
         notes="As published (no summary in this envelope; the documented plaintext keeps success_time although "
               "refund_status is ABNORMAL); resource nonce (documented '...') is 'rfNonce00002'.",
         before=before("20150806125346", "paid", 999, "1008450740201411110005820873"),
         expected=exp("processed", "paid", ["refund_failed"], None,
                      ref("50200207182018070300011301001", 999, "failed"))),
    dict(case="doc_wx_refund_closed", gateway="wxpay", mchid="1900000100", appid=WX_APPID,
         source=src(WX_WEBHOOK + "REFUND.CLOSED.md", "wechatpay.js.org: 退款关闭(REFUND.CLOSED)通知",
                    "请求报文(body) / resource.ciphertext 解密后的明文格式"),
         notes="As published (no summary); resource nonce (documented '...') is 'rfNonce00003'.",
         before=before("20150806125346", "paid", 999, "1008450740201411110005820873"),
         expected=exp("processed", "paid", ["refund_failed"], None,
                      ref("50200207182018070300011301001", 999, "failed"))),
    dict(case="doc_wx_partner_transaction_success", gateway="wxpay", partner=PARTNER,
         source=src(WX_PARTNER_DOC, "微信支付 APIv3 服务商 JSAPI支付 支付通知API", "商户对resource对象进行解密后，得到的资源对象示例"),
         notes="The service-provider sample as quoted in public merchant code, which elides the middle with '...'; "
               "the elided amount object is taken from the direct-merchant sample and promotion_detail is left out. "
               "Envelope as the payment sample's; resource nonce 'spNonce00001'. A partner channel: sp_mchid, "
               "sub_mchid, sp_appid, sub_appid as in the sample.",
         before=before("1217752501201407033233368018", "pending", 100),
         expected=exp("processed", "paid", ["paid"], pay("1217752501201407033233368018", 100))),
    dict(case="doc_wx_partner_refund_success", gateway="wxpay", partner=PARTNER,
         source=src("https://pay.weixin.qq.com/wiki/doc/apiv3_partner/apis/chapter4_5_11.shtml",
                    "微信支付 APIv3 服务商 退款结果通知", "通知报文 / 解密后的资源对象示例"),
         notes="The service-provider refund notice (sp_mchid/sub_mchid instead of mchid), text as quoted in "
               "public merchant code; resource nonce (documented '...') is 'spNonce00002'. A partner channel: "
               "sp_mchid, sub_mchid, sp_appid, sub_appid of the partner payment sample.",
         before=before("20150806125346", "paid", 999, "1008450740201411110005820873"),
         expected=exp("processed", "refunded", ["refunded"], None,
                      ref("50200207182018070300011301001", 999, "succeeded"))),
    dict(case="doc_wx_combine_transaction_success", gateway="wxpay", mchid="1900000109", appid=WX_APPID,
         source=src(WX_COMBINE_DOC, "微信支付 APIv3 合单支付 支付通知API",
                    "回调示例 / 商户对 resource 对象进行解密后, 得到的资源对象示例"),
         notes="Envelope exactly as this page documents it (create_time 20180225112233, no summary, no "
               "original_type, associated_data empty); resource nonce (documented '...') is 'cbNonce00001'. "
               "Text read from a public copy of the page (支付通知API, 合单支付). The sub-order of the channel's "
               "mchid pays its bound order.",
         before=before("20150806125346", "pending", 10),
         expected=exp("processed", "paid", ["paid"], pay("1009660380201506130728806387", 10))),
    dict(case="doc_wx_profitsharing_success", gateway="wxpay", mchid="1900000100", appid=WX_APPID,
         source=src(WX_WEBHOOK + "PROFITSHARING.SUCCESS.md", "wechatpay.js.org: 分账动账(PROFITSHARING.SUCCESS)通知",
                    "请求报文(body) / resource.ciphertext 解密后的明文格式"),
         notes="As published (no summary, no original_type); resource nonce 'psNonce00001'. Not a payment: must "
               "be acknowledged and leave the order alone (order_id in it is WeChat's order number of a paid order).",
         before=before("1217752501201407033233368018", "paid", 100),
         expected=exp("ignored", "paid", ["notification"])),
    dict(case="doc_wx_profitsharing_as_transaction", gateway="wxpay", mchid="1900000100", appid=WX_APPID,
         source=src(WX_WEBHOOK + "TRANSACTION.SUCCESS.md", "wechatpay.js.org: 支付成功(TRANSACTION.SUCCESS)通知",
                    "分账动帐通知(original_type)为\"profitsharing\""),
         notes="The profit-sharing plaintext sent under event_type TRANSACTION.SUCCESS with original_type "
               "profitsharing, which the page documents; resource nonce 'psNonce00002'.",
         before=before("1217752501201407033233368018", "paid", 100),
         expected=exp("ignored", "paid", ["notification"])),
    dict(case="doc_wx_sdk_go_payscore_open_service", gateway="wxpay", mchid="1234567890",
         appid="054aa7d7a2a54ab5898df65bd96f001c", ts=1624523846, hnonce="EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz",
         source=src("https://github.com/wechatpay-apiv3/wechatpay-go/blob/10b581e92a93933b822603bd502dbe1bd521f9fd/"
                    "core/notify/notify_test.go", "wechatpay-go core/notify/notify_test.go",
                    "TestHandler_ParseNotifyRequest (body, headers, decrypted data)"),
         notes="The official Go SDK's notification fixture (PAYSCORE.USER_OPEN_SERVICE, original_type payscore; "
               "the same ciphertext is wechatpay-java's test resource notification/wechat_pay_notification.json): "
               "envelope, resource nonce and associated data, plaintext, Wechatpay-Timestamp and Wechatpay-Nonce "
               "as in the fixture; sealed with the test APIv3 key (the fixture's is 16 bytes) and signed with "
               "platform certificate #1 instead of the fixture's. Not a payment: acknowledged, nothing applied.",
         before=None,
         expected=exp("ignored", None, ["notification"])),
    # WeChat Pay entrusted payment (委托代扣, papay): agreements and their charges
    dict(case="doc_wx_entrust_sign", gateway="wxpay", partner=ENTRUST_PARTNER, ts=1710048759,
         hnonce="3d980fb850fdce97f6bfb3d248597f16", implemented=True,
         source=src(WX_ENTRUST + "ENTRUST.SIGN.md", "wechatpay.js.org: 委托代扣签约成功通知(ENTRUST.SIGN)",
                    "请求头 / 请求报文(body) / resource.ciphertext 解密后的明文格式"),
         notes="As published, envelope and plaintext (the service-provider shape: sp_mchid, sub_mchid, sp_appid, "
               "sub_appid, sp_openid, sub_openid; no original_type in the envelope, as on the page); "
               "Wechatpay-Timestamp and Wechatpay-Nonce are the page's request headers; resource nonce "
               "(documented '...') is 'etNonce00001'. The page cites the official 签约、解约结果通知 "
               "(pay.weixin.qq.com/docs/merchant/apis/entrusted-payment/contract-alter-notify.html). A partner "
               "channel with the sample's ids. Names no order: the agreement is the sample's contract_id.",
         before=None,
         expected=dict(exp("processed", None, ["agreement_signed"]),
                       agreement=agr("123124412412423431", "wxwtdk20200910100000", "agreement_signed"))),
    dict(case="doc_wx_entrust_terminate", gateway="wxpay", partner=ENTRUST_PARTNER, ts=1710048759,
         hnonce="3d980fb850fdce97f6bfb3d248597f16", implemented=True,
         source=src(WX_ENTRUST + "ENTRUST.TERMINATE.md", "wechatpay.js.org: 委托代扣解约成功通知(ENTRUST.TERMINATE)",
                    "请求头 / 请求报文(body) / resource.ciphertext 解密后的明文格式"),
         notes="As published: the signing sample's plaintext with contract_state TERMINATED (the page shows no "
               "contract_terminate_info); resource nonce (documented '...') is 'etNonce00002'; headers as the page's.",
         before=None, before_agreement={'agreement_id': '123124412412423431', 'merchant_ref': 'wxwtdk20200910100000'},
         expected=dict(exp("processed", None, ["agreement_ended"]),
                       agreement=agr("123124412412423431", "wxwtdk20200910100000", "agreement_ended"))),
    dict(case="doc_wx_pap_transaction_success", gateway="wxpay", mchid="1230000109", appid=WX_APPID,
         source=src(WX_DOC, "微信支付 APIv3 支付通知API (not a published papay sample: built)",
                    "通知参数 / 资源对象示例, with trade_type PAP"),
         notes="BUILT, NOT PUBLISHED: no published papay (委托代扣) payment notice was found. The documented "
               "TRANSACTION.SUCCESS sample of doc_wx_transaction_success with trade_type MICROPAY -> PAP and "
               "contract_id (the ENTRUST.SIGN sample's) after it, as the papay charge notice's field table has "
               "them; resource nonce 'papNonce0001'. A charge under an agreement is an ordinary payment.",
         before=before("1217752501201407033233368018", "pending", 100),
         expected=exp("processed", "paid", ["paid"], pay("1217752501201407033233368018", 100))),
    # ------------------------------------------------------------------ Alipay
    dict(case="doc_ali_trade_success", gateway="alipay", app_id="2015102700040153",
         source=src(ALI_DOC, "支付宝开放平台 App支付 异步通知说明", "请求示例 (trade_status=TRADE_SUCCESS)"),
         notes="The documented notification, parameter for parameter in its order (refund_fee=0.00 and gmt_close "
               "included); its sign is replaced by one made with the test key.",
         before=before("0719141034-6418", "pending", 200),
         expected=exp("processed", "paid", ["paid"], pay("2016071921001003030200089909", 200))),
    dict(case="doc_ali_trade_finished", gateway="alipay", app_id="2015102700040153",
         source=src(ALI_DOC, "支付宝开放平台 App支付 异步通知说明", "请求示例; 交易状态说明 TRADE_FINISHED"),
         notes="The documented notification with trade_status=TRADE_FINISHED (a value the page lists).",
         before=before("0719141034-6418", "pending", 200),
         expected=exp("processed", "paid", ["paid"], pay("2016071921001003030200089909", 200))),
    dict(case="doc_ali_partial_refund", gateway="alipay", app_id="2015102700040153",
         source=src(ALI_DOC, "支付宝开放平台 App支付 异步通知说明", "请求示例; 参数 refund_fee / gmt_refund / out_biz_no"),
         notes="The documented notification as a partial refund: refund_fee 0.00 -> 1.00, notify_time a day later, "
               "gmt_refund and out_biz_no added (out_biz_no HZRF001 is the page's example value; gmt_refund in "
               "its yyyy-MM-dd HH:mm:ss.SSS form).",
         before=before("0719141034-6418", "paid", 200, "2016071921001003030200089909"),
         expected=exp("processed", "paid", ["refunded"], None, ref("HZRF001", 100, "succeeded"))),
    dict(case="doc_ali_full_refund", gateway="alipay", app_id="2015102700040153",
         source=src(ALI_DOC, "支付宝开放平台 App支付 异步通知说明", "请求示例; 交易状态说明 TRADE_CLOSED (全额退款)"),
         notes="The documented notification as a full refund: trade_status TRADE_CLOSED, refund_fee 2.00, "
               "notify_time a day later, gmt_refund and out_biz_no (HZRF001) added.",
         before=before("0719141034-6418", "paid", 200, "2016071921001003030200089909"),
         expected=exp("processed", "refunded", ["refunded"], None, ref("HZRF001", 200, "succeeded"))),
    dict(case="doc_ali_trade_closed", gateway="alipay", app_id="2015102700040153",
         source=src(ALI_DOC, "支付宝开放平台 App支付 异步通知说明", "请求示例; 交易状态说明 TRADE_CLOSED (未付款交易超时关闭)"),
         notes="The documented notification as an unpaid close: trade_status TRADE_CLOSED, gmt_payment removed; "
               "refund_fee=0.00 and gmt_close kept as the sample carries them.",
         before=before("0719141034-6418", "pending", 200),
         expected=exp("processed", "cancelled", ["closed"])),
    dict(case="doc_ali_sdk_nodejs_trade_success", gateway="alipay", app_id="2019073166072302",
         source=src(ALI_NODE, "alipay-sdk-nodejs-all test/alipay.test.ts",
                    "checkNotifySign: 'with sign_type arguments verify success' postData"),
         notes="A real notification kept by the official Node SDK's tests, parameter for parameter in its order; "
               "fund_bill_list (an object in the test) travels as the JSON string Alipay sends; sign replaced.",
         before=before("20190815155618536-564-57", "pending", 10),
         expected=exp("processed", "paid", ["paid"], pay("2019081522001468450512505578", 10))),
    dict(case="doc_ali_sdk_nodejs_servicemarket_notify", gateway="alipay", app_id="2017122801303261",
         include_sign_type=True,
         source=src(ALI_NODE, "alipay-sdk-nodejs-all test/alipay.test.ts",
                    "checkNotifySign: 'verify sign should not delete sign_type' postData"),
         notes="A real Alipay notification that is not a trade notice (notify_type servicemarket_order_notify, "
               "服务市场订购), parameter for parameter; Alipay signs this kind with sign_type inside the signed "
               "content (the SDKs' rsaCheckV2 rule, as its test shows), so it is signed that way here too "
               "(config.sign_content_rule). Under the trade-notification rule it does not verify: refused.",
         before=None,
         expected=exp("rejected", None, [], ack=False)),
    dict(case="doc_ali_dut_user_sign", gateway="alipay", app_id="2021001146649415", implemented=True,
         source=src(ALI_DUT_DOC, "支付宝 周期扣款 签约/解约异步通知 (a notification quoted in public merchant code)",
                    "notify_type=dut_user_sign, status NORMAL"),
         notes="A real Alipay 周期扣款 (CYCLE_PAY_AUTH_P) signing notice as quoted, JSON-decoded, in a public "
               "merchant's PHP notify controller, parameter for parameter in its order; its sign (over these "
               "parameters, RSA2) is replaced by one made with the test key. Names no order: the agreement is "
               "agreement_no, the merchant's reference external_agreement_no.",
         before=None,
         expected=dict(exp("processed", None, ["agreement_signed"]),
                       agreement=agr("20225310838635316223", "1700336165218822912819-config", "agreement_signed"))),
    dict(case="doc_ali_dut_user_unsign", gateway="alipay", app_id="2016120904060189", implemented=True,
         source=src(ALI_DUT_DOC, "支付宝 商家扣款 解约异步通知 (a notification quoted in public merchant code)",
                    "notify_type=dut_user_unsign, status UNSIGN"),
         notes="A real Alipay 商家扣款 (GENERAL_WITHHOLDING_P) unsigning notice as printed by a public merchant "
               "script (a Java map's text: the parameter order is the map's), charset UTF-8 as sent; sign replaced.",
         before=None, before_agreement={'agreement_id': '20215225715271617440', 'merchant_ref': 'SN202104251121441327164428238554'},
         expected=dict(exp("processed", None, ["agreement_ended"]),
                       agreement=agr("20215225715271617440", "SN202104251121441327164428238554", "agreement_ended"))),
    # ------------------------------------------------------------------ Stripe
    dict(case="doc_stripe_payment_intent_succeeded", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json (the API reference's example objects)",
                    "resources.event + resources.payment_intent"),
         notes="The fixture event envelope with type payment_intent.succeeded around the fixture payment_intent; "
               "changed so that it is a succeeded intent: status succeeded, amount_received 1099, canceled_at/"
               "last_payment_error/next_action/processing null; metadata.order_id added.",
         before=before("SD-PI-1099", "pending", 1099),
         expected=exp("processed", "paid", ["paid"], pay("pi_1PgafyB7WZ01zgkWSjxsAJo3", 1099))),
    dict(case="doc_stripe_payment_intent_payment_failed", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.payment_intent"),
         notes="The fixture payment_intent unchanged (status requires_payment_method with a last_payment_error, "
               "the state payment_intent.payment_failed reports) under type payment_intent.payment_failed; "
               "metadata.order_id added. Not an end state: acknowledged (ignored), the order stays pending, event payment_failed.",
         before=before("SD-PI-FAILED", "pending", 1099),
         expected=exp("ignored", "pending", ["payment_failed"])),
    dict(case="doc_stripe_checkout_session_completed", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources[\"checkout.session\"]"),
         notes="Fixture checkout.session with status complete, payment_status paid, amount_subtotal/amount_total "
               "1099 and currency usd (null in the fixture); metadata.order_id added.",
         before=before("SD-CS-1099", "pending", 1099),
         expected=exp("processed", "paid", ["paid"], pay("pi_1PgafyB7WZ01zgkWSjxsAJo3", 1099))),
    dict(case="doc_stripe_checkout_session_async_payment_succeeded", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources[\"checkout.session\"]"),
         notes="Fixture checkout.session, complete and paid (amounts 1099, currency usd), under type "
               "checkout.session.async_payment_succeeded (a delayed payment method's success); "
               "metadata.order_id added.",
         before=before("SD-CS-ASYNC", "pending", 1099),
         expected=exp("processed", "paid", ["paid"], pay("pi_1PgafyB7WZ01zgkWSjxsAJo3", 1099))),
    dict(case="doc_stripe_charge_refunded", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.charge + resources.refund"),
         notes="Fixture charge fully refunded: captured, amount_captured/amount_refunded 100, refunded true, "
               "payment_intent set to the fixture intent (null in the fixture), refunds.data = [fixture refund]; "
               "metadata.order_id added.",
         before=before("SD-CH-100", "paid", 100, "pi_1PgafyB7WZ01zgkWSjxsAJo3"),
         expected=exp("processed", "refunded", ["refunded"], None,
                      ref("re_1Pgc72B7WZ01zgkWqPvrRrPE", 100, "succeeded"))),
    dict(case="doc_stripe_charge_refunded_partial", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.charge + resources.refund"),
         notes="Fixture charge partially refunded (charge.refunded fires for partial refunds too): captured, "
               "amount_captured 100, amount_refunded 50, refunded false, payment_intent set, refunds.data = "
               "[fixture refund with amount 50]; metadata.order_id added.",
         before=before("SD-CH-PARTIAL", "paid", 100, "pi_1PgafyB7WZ01zgkWSjxsAJo3"),
         expected=exp("processed", "paid", ["refunded"], None,
                      ref("re_1Pgc72B7WZ01zgkWqPvrRrPE", 50, "succeeded"))),
    dict(case="doc_stripe_refund_failed", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.refund"),
         notes="Fixture refund with status failed, failure_reason lost_or_stolen_card, payment_intent set; "
               "metadata.order_id added.",
         before=before("SD-RF-100", "paid", 100, "pi_1PgafyB7WZ01zgkWSjxsAJo3"),
         expected=exp("processed", "paid", ["refund_failed"], None,
                      ref("re_1Pgc72B7WZ01zgkWqPvrRrPE", 100, "failed"))),
    dict(case="doc_stripe_charge_refund_updated_failed", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.refund"),
         notes="Fixture refund with status failed, failure_reason lost_or_stolen_card, payment_intent set, under "
               "type charge.refund.updated (how a refund's failure reaches endpoints that do not subscribe to "
               "refund.failed); metadata.order_id added.",
         before=before("SD-RU-100", "paid", 100, "pi_1PgafyB7WZ01zgkWSjxsAJo3"),
         expected=exp("processed", "paid", ["refund_failed"], None,
                      ref("re_1Pgc72B7WZ01zgkWqPvrRrPE", 100, "failed"))),
    dict(case="doc_stripe_payment_intent_canceled", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.payment_intent"),
         notes="Fixture payment_intent with status canceled, cancellation_reason abandoned; metadata.order_id added.",
         before=before("SD-PI-CANCEL", "pending", 1099),
         expected=exp("processed", "cancelled", ["closed"])),
    dict(case="doc_stripe_checkout_session_expired", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources[\"checkout.session\"]"),
         notes="Fixture checkout.session with status expired (payment_status unpaid), amounts 1099 and currency "
               "usd; metadata.order_id added.",
         before=before("SD-CS-EXPIRE", "pending", 1099),
         expected=exp("processed", "cancelled", ["closed"])),
    dict(case="doc_stripe_charge_dispute_created", gateway="stripe",
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.dispute"),
         notes="Fixture dispute (status warning_needs_response) with payment_intent set; metadata.order_id added. "
               "A dispute_opened event on the paid order whose payment recorded the payment intent, with the "
               "amount disputed; the order stays paid (no transition to \"disputed\" by default).",
         before=before("SD-DP-1000", "paid", 1000, "pi_1PgafyB7WZ01zgkWSjxsAJo3"),
         expected=exp("processed", "paid", ["dispute_opened"])),
    dict(case="doc_stripe_api_event_object", gateway="stripe",
         source=src("https://docs.stripe.com/api/events/object", "Stripe API reference: The Event object",
                    "The Event object (example)"),
         notes="The API reference's example event (setup_intent.created) exactly as shown, nothing added: no "
               "order to tie it to. Not a payment: acknowledged, nothing applied.",
         before=None,
         expected=exp("ignored", None, ["notification"])),
    dict(case="doc_stripe_thin_event", gateway="stripe",
         source=src(STRIPE_PY, "stripe-python tests/test_v2_event.py", "TestV2Event.v2_payload_no_data"),
         notes="The SDK's thin-event (object v2.core.event) payload as is, pretty-printed. Verified, acknowledged "
               "2xx, applied to nothing.",
         before=None,
         expected=exp("ignored", None, ["notification"])),
    dict(case="doc_stripe_customer_subscription_created", gateway="stripe", implemented=True,
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.subscription"),
         notes="Fixture subscription as an active one: status active, cancel_at/canceled_at/ended_at/trial_* null, "
               "cancel_at_period_end false, pause_collection and pending_update null; metadata.order_id added. "
               "Names no order the extension knows: the agreement is the subscription id.",
         before=None,
         expected=dict(exp("processed", None, ["agreement_signed"]),
                       agreement=agr("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw", "SD-SUB-2000", "agreement_signed"))),
    dict(case="doc_stripe_customer_subscription_updated_trialing", gateway="stripe", implemented=True,
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.subscription"),
         notes="Fixture subscription in its trial: status trialing (trial_start/trial_end as in the fixture), "
               "cancel_at/canceled_at/ended_at null, cancel_at_period_end false, pause_collection and "
               "pending_update null, under customer.subscription.updated with previous_attributes.status "
               "incomplete (the event's previous_attributes member); metadata.order_id added. Trialing signs.",
         before=None,
         expected=dict(exp("processed", None, ["agreement_signed"]),
                       agreement=agr("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw", "SD-SUB-2000", "agreement_signed"))),
    dict(case="doc_stripe_customer_subscription_updated_canceled", gateway="stripe", implemented=True,
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.subscription"),
         notes="Fixture subscription, canceled (canceled_at/ended_at as in the fixture, cancellation_details.reason "
               "cancellation_requested, cancel_at_period_end false), under customer.subscription.updated; "
               "metadata.order_id added.",
         before=None, before_agreement={'agreement_id': 'sub_1Pgc6rB7WZ01zgkWNy0Cn5nw', 'merchant_ref': 'SD-SUB-2000'},
         expected=dict(exp("processed", None, ["agreement_ended"]),
                       agreement=agr("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw", "SD-SUB-2000", "agreement_ended"))),
    dict(case="doc_stripe_customer_subscription_deleted", gateway="stripe", implemented=True,
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.subscription"),
         notes="The canceled fixture subscription under customer.subscription.deleted; metadata.order_id added.",
         before=None, before_agreement={'agreement_id': 'sub_1Pgc6rB7WZ01zgkWNy0Cn5nw', 'merchant_ref': 'SD-SUB-2000'},
         expected=dict(exp("processed", None, ["agreement_ended"]),
                       agreement=agr("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw", "SD-SUB-2000", "agreement_ended"))),
    dict(case="doc_stripe_invoice_paid", gateway="stripe", implemented=True,
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.invoice (basil shape)"),
         notes="Fixture invoice (API 2025-03-31.basil: no payment_intent, parent instead of subscription) as a paid "
               "subscription cycle: status paid, amount_paid 1000, amount_remaining 0, attempted, billing_reason "
               "subscription_cycle, status_transitions finalized_at/paid_at set, parent of type "
               "subscription_details naming the fixture subscription with metadata.order_id, its line's parent "
               "subscription_item_details; the fixture's placeholder shipping_cost/from_invoice/"
               "last_finalization_error/amount_overpaid cleared; the invoice's own metadata stays empty, "
               "metadata.order_id added to the subscription's under parent.subscription_details. A renewal "
               "(billing_reason subscription_cycle) is the payment of the period's order, which only the "
               "invoice's own metadata names (the subscription's metadata names the first period's order, "
               "for the invoice that created the subscription only): this one names no order, so it is the "
               "anomaly no_order_number, acknowledged, and the order stays pending.",
         before=before("SD-INV-1000", "pending", 1000),
         expected=exp("ignored", "pending", [])),
    dict(case="doc_stripe_invoice_payment_failed", gateway="stripe", implemented=True,
         source=src(STRIPE_FIX, "stripe/openapi fixtures3.json", "resources.event + resources.invoice (basil shape)"),
         notes="The invoice of doc_stripe_invoice_paid as a failed attempt: status open, amount_paid 0, "
               "amount_remaining 1000, next_payment_attempt kept. A renewal naming no order of its own: "
               "payment_failed is queued for no order, and the order stays pending.",
         before=before("SD-INV-FAILED", "pending", 1000),
         expected=exp("ignored", "pending", ["payment_failed"])),
]


def wx_build(c, payload):
    d = json.loads(payload)
    res = d["resource"]
    plain = json.dumps(res["plaintext"], ensure_ascii=False, separators=(",", ":")).encode()
    ct = gen.gcm.encrypt(gen.APIV3, res["nonce"].encode(), res["associated_data"].encode(), plain)
    out = {}
    for k, v in d.items():
        if k == "resource":   # the documented member order, ciphertext in the plaintext's stead
            v = {kk: (gen.b64(ct) if kk == "ciphertext" else res[kk])
                 for kk in ("original_type", "algorithm", "ciphertext", "associated_data", "nonce")
                 if kk in res or kk == "ciphertext"}
        out[k] = v
    body = json.dumps(out, ensure_ascii=False, separators=(",", ":")).encode()
    n = CASES.index(c) + 1
    ts = c.get("ts", WX_TS)
    hnonce = c.get("hnonce") or c["case"][4:].replace("_", "").upper()[:32].ljust(32, "0")
    sig = gen.b64(gen.sign(SIGNER, str(ts).encode() + b"\n" + hnonce.encode() + b"\n" + body + b"\n"))
    hs = [("Content-Type", "application/json"), ("Request-ID", "08DOC%027d" % n),
          ("Wechatpay-Nonce", hnonce), ("Wechatpay-Serial", gen.S1), ("Wechatpay-Signature", sig),
          ("Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048"), ("Wechatpay-Timestamp", str(ts))]
    cfg = {"trusted": {gen.S1: "keys/wechat_platform_1.pub.pem"}, "apiv3_key_file": "keys/wechat_apiv3.key"}
    cfg.update(c.get("partner") or {"mchid": c["mchid"], "appid": c["appid"]})
    cfg["tolerance_s"] = 300
    return body, "body.json", hs, ts, ts + 2, cfg, {"resource_plaintext.json": plain,
                                                  "signed_message.bin": str(ts).encode() + b"\n" + hnonce.encode()
                                                  + b"\n" + body + b"\n"}


def parse_form(line):
    out = []
    for part in line.split("&"):
        k, _, v = part.partition("=")
        out.append((k, unquote_to_bytes(v.replace("+", " ")).decode("utf-8")))
    return out


def ali_build(c, payload):
    line = payload.decode("ascii").strip("\n")
    params = parse_form(line)
    charset = dict(params).get("charset", "utf-8")
    content = gen.ali_content(params, charset, include_sign_type=c.get("include_sign_type", False))
    sig = gen.b64(gen.sign("alipay_1", content))
    body = (line + "&sign=" + quote_plus(sig, safe="")).encode("ascii")
    ctype = "application/x-www-form-urlencoded; charset=%s" % charset
    cfg = {"alipay_public_keys": ["keys/alipay_1.pub.pem"], "app_id": c["app_id"], "sign_types": ["RSA2"]}
    if c.get("include_sign_type"):
        cfg["sign_content_rule"] = {"include_empty": False, "include_sign_type": True}
    return body, "body.form", [("Content-Type", ctype)], None, ALI_NOW, cfg, {"sign_content.bin": content}


def st_build(c, payload):
    body = payload
    t = ST_T
    v1 = gen.hmac_hex(gen.WHSEC1, str(t).encode() + b"." + body)
    hs = [("Content-Type", "application/json; charset=utf-8"), ("Stripe-Signature", "t=%d,v1=%s" % (t, v1))]
    cfg = {"secret_files": ["keys/stripe_secret_1.txt"], "tolerance_s": 300,
           "order_ref_path": "data.object.metadata.order_id"}
    return body, "body.json", hs, t, t + 3, cfg, {"signed_payload.bin": str(t).encode() + b"." + body}


def main():
    cdir = os.path.join(SROOT, "cases")
    if os.path.isdir(cdir):
        shutil.rmtree(cdir)
    manifest = []
    for c in CASES:
        name = c["case"]
        ext = ".form" if c["gateway"] == "alipay" else ".json"
        ppath = "payloads/" + name + ext
        payload = open(os.path.join(SROOT, ppath), "rb").read()
        build = {"wxpay": wx_build, "alipay": ali_build, "stripe": st_build}[c["gateway"]]
        body, bname, hs, ts, now, cfg, extra = build(c, payload)
        d = os.path.join(cdir, name)
        os.makedirs(d)
        files = {"payload": ppath, "body": "cases/%s/%s" % (name, bname),
                 "headers": "cases/%s/headers.txt" % name}
        with open(os.path.join(d, bname), "wb") as f:
            f.write(body)
        with open(os.path.join(d, "headers.txt"), "w") as f:
            f.write(gen.headers_txt(hs))
        for fname, data in extra.items():
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)
            files[fname.split(".")[0]] = "cases/%s/%s" % (name, fname)
        manifest.append({"case": name, "gateway": c["gateway"], "source": c["source"], "notes": c["notes"],
                         "files": files, "headers": [list(h) for h in hs], "timestamp_unix": ts,
                         "now_unix": now, "config": cfg, "before": c["before"], "before_agreement": c.get("before_agreement"),
                         "expected": c["expected"],
                         "implemented": c.get("implemented", True)})
    with open(os.path.join(SROOT, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %d sample cases" % len(manifest))


if __name__ == "__main__":
    main()
