#!/usr/bin/env python3
"""Property-based fuzzing of paynotify's notice extraction in the backend.

The libFuzzer targets (test/fuzz/run.sh) reach the parsers; this reaches
what src/verify_wxpay.c, src/verify_alipay.c and src/verify_stripe.c make
of a notification once it is authentic: every input here is signed (and
for WeChat Pay sealed) with the test keys exactly as the gateway would,
and odd only in its content.  Templates are the gateways' own kinds
(payments, refunds, closes, disputes, and with most of the weight the
agreement notices and invoices: WeChat ENTRUST.SIGN / ENTRUST.TERMINATE
and PAP charges, Alipay dut_user_sign / dut_user_unsign, Stripe
customer.subscription.* and invoice.paid / invoice.payment_failed) and the
documented samples of test/vectors/samples; Hypothesis changes one to four
fields of each: missing, null, of another JSON type, empty, huge (1 MB
strings, 10^30, nesting past the limit), duplicated keys, unknown states,
non-ASCII text (GBK for Alipay), ids of 255 and 256 bytes and more,
amounts negative, zero and past int64.

Each input goes through paynotify_handle as the shim's role (handler
capacity), twice, in autocommit as the shim sends it, and on every input:
  1. the backend survives (the connection still answers; the postmaster's
     start time is unchanged at the end: notices.sh checks the log too);
  2. a reply row whose outcome is one of the eight and whose status is an
     HTTP status, or an error whose SQLSTATE is not XX000-XX002 and whose
     message carries no key material;
  3. nothing half-written: after an error, a rejection or a malformed
     answer no row of any table of paynotify or of the orders table is new
     or changed (each table hashed by its rows' versions before and after);
     after an answer that applied nothing (any outcome but processed) the
     orders, the agreements and the payments are unchanged;
  4. the repeat of the same request gets the same outcome class (processed
     becomes duplicate, everything else stays what it was or becomes
     duplicate, an error the same SQLSTATE) and applies nothing again.

Hypothesis draws the inputs only: a failed invariant is recorded with its
request (written under --out) and the run goes on, so that a long run
reports everything it finds; the exit status is non-zero when anything
failed.  Started by test/fuzz/notices.sh, which makes the cluster.
"""
import argparse
import collections
import copy
import json
import os
import random
import sys
import time

import psycopg2
from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings, strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import pnsign  # noqa: E402

OUTCOMES = {"processed", "duplicate", "ignored", "parked", "failed", "busy", "rejected", "malformed"}
INTERNAL = {"XX000", "XX001", "XX002"}
# what an application moves, as (key, standing) per row: the orders, the
# agreements' standing (a notice that restates an agreement may record its
# gateway_state and notify id: docs/GATEWAYS.md, "Agreements") and the
# payments
APPLIED = {
    "public.orders": "SELECT o.order_no, row(o.status, o.amount_fen, o.currency)::text"
                     " FROM public.orders o",
    "pay.paynotify_agreement": "SELECT row(a.channel, a.agreement_id)::text, row(a.state, a.signed_at,"
                               " a.ended_at, a.merchant_ref, a.plan_id)::text FROM pay.paynotify_agreement a",
    "pay.payment_record": "SELECT row(p.channel, p.trade_no)::text, p::text FROM pay.payment_record p",
}

WX = pnsign.WeChat(1)
ALI = pnsign.Alipay(1)
ST = pnsign.Stripe(1)
SECRETS = [WX.apiv3_key.decode(), ST.secret.decode(), WX.apiv3_key.hex(), "PRIVATE KEY"]

MB = 1024 * 1024


class Dup(list):
    """A JSON object as a list of (key, value) pairs: keys may repeat."""


class Raw(str):
    """JSON text written as it is (numbers Python cannot spell, nesting)."""


def dumps(v, ascii_only):
    """JSON text of v (dict, Dup, list, str, int, float, bool, None, Raw)."""
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, (dict, Dup)):
        items = v.items() if isinstance(v, dict) else v
        return "{" + ",".join(json.dumps(k, ensure_ascii=ascii_only) + ":" + dumps(x, ascii_only)
                              for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ",".join(dumps(x, ascii_only) for x in v) + "]"
    return json.dumps(v, ensure_ascii=ascii_only)


# ---- the templates: (gateway, kind) -> a fresh document ----------------------

def wx_template(kind, ids):
    """(event_type, original_type, plaintext dict) of one WeChat notice."""
    base = {"mchid": WX.mchid, "appid": WX.appid}
    if kind in ("entrust_sign", "entrust_terminate"):
        end = kind == "entrust_terminate"
        plain = dict(base, contract_id=ids["agreement"], out_contract_code=ids["ref"], plan_id=12535,
                     openid="oFUZZ", contract_state="TERMINATED" if end else "SIGNED",
                     contract_signed_time="2026-01-01T08:00:00+08:00",
                     operate_time="2026-01-02T08:00:00+08:00")
        if end:
            plain["contract_terminate_info"] = {"contract_terminated_time": "2026-01-02T08:00:00+08:00",
                                                "contract_termination_mode": "USER_TERMINATE"}
        return ("ENTRUST.TERMINATE" if end else "ENTRUST.SIGN"), "entrust", plain
    if kind in ("pay", "pap_charge"):
        plain = dict(base, out_trade_no=ids["order"], transaction_id=ids["trade"],
                     trade_type="PAP" if kind == "pap_charge" else "JSAPI", trade_state="SUCCESS",
                     trade_state_desc="支付成功", bank_type="OTHERS", attach="",
                     success_time="2026-01-01T08:00:05+08:00", payer={"openid": "oFUZZ"},
                     amount={"total": ids["amount"], "payer_total": ids["amount"],
                             "currency": "CNY", "payer_currency": "CNY"})
        if kind == "pap_charge":
            plain["contract_id"] = ids["agreement"]
        return "TRANSACTION.SUCCESS", "transaction", plain
    if kind == "refund":
        plain = {"mchid": WX.mchid, "out_trade_no": ids["order"], "transaction_id": ids["trade"],
                 "out_refund_no": ids["refund"], "refund_id": ids["refund"] + "w",
                 "refund_status": "SUCCESS", "success_time": "2026-01-01T09:00:00+08:00",
                 "user_received_account": "招商银行信用卡0403",
                 "amount": {"total": ids["amount"], "refund": ids["amount"],
                            "payer_total": ids["amount"], "payer_refund": ids["amount"]}}
        return "REFUND.SUCCESS", "refund", plain
    if kind == "combine":
        subs = [{"mchid": WX.mchid, "trade_state": "SUCCESS", "trade_type": "JSAPI",
                 "transaction_id": ids["trade"] + str(i), "out_trade_no": ids["order"] + "-" + str(i),
                 "success_time": "2026-01-01T08:00:05+08:00",
                 "amount": {"total_amount": ids["amount"], "currency": "CNY",
                            "payer_amount": ids["amount"], "payer_currency": "CNY"}}
                for i in (1, 2)]
        plain = {"combine_appid": WX.appid, "combine_mchid": WX.mchid,
                 "combine_out_trade_no": ids["order"], "sub_orders": subs,
                 "combine_payer_info": {"openid": "oFUZZ"}}
        return "TRANSACTION.SUCCESS", "transaction", plain
    raise ValueError(kind)


def ali_template(kind, ids):
    """The fields [(name, value)] of one Alipay notice, unsigned."""
    yuan = "%d.%02d" % divmod(ids["amount"], 100)
    if kind in ("dut_user_sign", "dut_user_unsign"):
        end = kind == "dut_user_unsign"
        f = [("charset", "utf-8"), ("alipay_user_id", "2088000000000001"),
             ("external_agreement_no", ids["ref"]), ("version", "1.0"), ("notify_id", ids["nid"]),
             ("notify_type", kind), ("agreement_no", ids["agreement"]), ("auth_app_id", ALI.app_id),
             ("personal_product_code", "CYCLE_PAY_AUTH_P"), ("app_id", ALI.app_id),
             ("sign_scene", "INDUSTRY|SOCIALIZATION"), ("status", "UNSIGN" if end else "NORMAL"),
             ("notify_time", "2026-01-02 08:00:00")]
        f += [("unsign_time", "2026-01-02 08:00:00")] if end else \
            [("sign_time", "2026-01-01 08:00:00"), ("valid_time", "2026-01-01 08:00:00"),
             ("invalid_time", "2115-02-01 00:00:00")]
        return f
    f = [("gmt_create", "2026-01-01 08:00:00"), ("charset", "utf-8"), ("subject", "周期扣款"),
         ("buyer_id", "2088000000000001"), ("version", "1.0"), ("notify_id", ids["nid"]),
         ("notify_type", "trade_status_sync"), ("out_trade_no", ids["order"]),
         ("total_amount", yuan), ("auth_app_id", ALI.app_id), ("app_id", ALI.app_id),
         ("seller_id", "2088000000000002"), ("gmt_payment", "2026-01-01 08:00:05"),
         ("trade_no", ids["trade"]), ("notify_time", "2026-01-01 08:00:06")]
    if kind in ("trade_success", "charge"):
        return f + [("trade_status", "TRADE_SUCCESS")]
    if kind == "trade_closed":
        return f + [("trade_status", "TRADE_CLOSED")]
    if kind == "refund":
        return f + [("trade_status", "TRADE_SUCCESS"), ("refund_fee", yuan),
                    ("out_biz_no", ids["refund"]), ("gmt_refund", "2026-01-01 09:00:00.123")]
    raise ValueError(kind)


def st_template(kind, ids):
    """One Stripe event (a dict)."""
    meta = {"order_id": ids["order"]}
    if kind in ("invoice_paid", "invoice_payment_failed"):
        paid = kind == "invoice_paid"
        obj = {"id": "in_" + ids["trade"], "object": "invoice", "amount_due": ids["amount"],
               "amount_paid": ids["amount"] if paid else 0,
               "amount_remaining": 0 if paid else ids["amount"], "attempt_count": 1,
               "attempted": True, "billing_reason": "subscription_cycle", "currency": "usd",
               "customer": "cus_FUZZ", "livemode": False, "metadata": meta,
               "payment_intent": "pi_" + ids["trade"],
               "parent": {"quote_details": None, "type": "subscription_details",
                          "subscription_details": {"metadata": {"order_id": ids["ref"]},
                                                   "subscription": ids["agreement"]}},
               "status": "paid" if paid else "open", "total": ids["amount"]}
        typ = "invoice." + ("paid" if paid else "payment_failed")
    elif kind.startswith("subscription_"):
        what = kind[len("subscription_"):]
        end = what in ("deleted", "updated_canceled")
        obj = {"id": ids["agreement"], "object": "subscription", "cancel_at_period_end": False,
               "canceled_at": 1767312000 if end else None, "ended_at": 1767312000 if end else None,
               "start_date": 1767225600, "currency": "usd", "customer": "cus_FUZZ",
               "livemode": False, "metadata": {"order_id": ids["ref"]},
               "items": {"object": "list", "data": [{"id": "si_1", "price": {"id": "price_1"}}]},
               "status": "canceled" if end else ("trialing" if what == "updated_trialing" else "active")}
        typ = "customer.subscription." + ("updated" if what.startswith("updated") else what)
    elif kind == "payment_intent_succeeded":
        obj = {"id": "pi_" + ids["trade"], "object": "payment_intent", "amount": ids["amount"],
               "amount_received": ids["amount"], "currency": "usd", "metadata": meta,
               "status": "succeeded", "latest_charge": "ch_" + ids["trade"]}
        typ = "payment_intent.succeeded"
    elif kind == "charge_refunded":
        obj = {"id": "ch_" + ids["trade"], "object": "charge", "amount": ids["amount"],
               "amount_refunded": ids["amount"], "currency": "usd", "metadata": meta,
               "payment_intent": "pi_" + ids["trade"], "refunded": True,
               "refunds": {"object": "list", "data": [
                   {"id": "re_" + ids["refund"], "amount": ids["amount"], "status": "succeeded"}]}}
        typ = "charge.refunded"
    elif kind in ("dispute_created", "dispute_closed"):
        obj = {"id": "dp_" + ids["trade"], "object": "dispute", "amount": ids["amount"],
               "charge": "ch_" + ids["trade"], "payment_intent": "pi_" + ids["trade"],
               "currency": "usd", "metadata": meta, "reason": "fraudulent",
               "status": "lost" if kind == "dispute_closed" else "needs_response"}
        typ = "charge.dispute." + kind.split("_")[1]
    else:
        raise ValueError(kind)
    return {"id": ids["nid"], "object": "event", "api_version": "2025-03-31.basil",
            "created": 1767225990, "data": {"object": obj}, "livemode": False,
            "pending_webhooks": 1, "request": {"id": None, "idempotency_key": None}, "type": typ}


# the kinds, agreement notices and invoices weighted up
KINDS = {
    "wxpay": [("entrust_sign", 4), ("entrust_terminate", 4), ("pap_charge", 3), ("pay", 1),
              ("refund", 1), ("combine", 1)],
    "alipay": [("dut_user_sign", 4), ("dut_user_unsign", 4), ("charge", 2), ("trade_success", 1),
               ("refund", 1), ("trade_closed", 1)],
    "stripe": [("subscription_created", 3), ("subscription_updated_trialing", 1),
               ("subscription_updated_canceled", 2), ("subscription_deleted", 3),
               ("invoice_paid", 4), ("invoice_payment_failed", 3), ("payment_intent_succeeded", 1),
               ("charge_refunded", 1), ("dispute_created", 1), ("dispute_closed", 1)],
}

# fields the extraction reads, to aim at (besides any path of the document)
AIM = {
    "wxpay": ["contract_id", "contract_state", "out_contract_code", "plan_id", "contract_signed_time",
              "contract_terminated_time", "contract_terminate_info", "contract_terminate_info.contract_terminated_time",
              "operate_time", "mchid", "appid", "sp_mchid", "sub_mchid", "out_trade_no", "transaction_id",
              "trade_state", "amount", "amount.total", "amount.currency", "amount.refund",
              "refund_id", "out_refund_no", "refund_status", "combine_out_trade_no", "sub_orders",
              "sub_orders.0.amount.total_amount", "sub_orders.0.out_trade_no", "@id", "@event_type"],
    "alipay": ["notify_id", "notify_type", "agreement_no", "external_agreement_no", "status",
               "sign_time", "unsign_time", "valid_time", "invalid_time", "app_id", "auth_app_id",
               "out_trade_no", "trade_no", "trade_status", "total_amount", "refund_fee", "out_biz_no",
               "gmt_refund", "seller_id", "personal_product_code", "charset", "notify_time"],
    "stripe": ["id", "type", "data", "data.object", "data.object.id", "data.object.status",
               "data.object.metadata", "data.object.metadata.order_id", "data.object.amount_paid",
               "data.object.amount_due", "data.object.amount", "data.object.amount_received",
               "data.object.amount_refunded", "data.object.currency", "data.object.subscription",
               "data.object.parent", "data.object.parent.subscription_details",
               "data.object.parent.subscription_details.subscription",
               "data.object.parent.subscription_details.metadata.order_id", "data.object.canceled_at",
               "data.object.ended_at", "data.object.start_date", "data.object.items.data",
               "data.object.billing_reason", "data.object.charge", "data.object.payment_intent",
               "data.object.refunds.data", "data.object.reason", "data.object.invoice", "livemode",
               "created", "object"],
}

# the fields that say what a notice is: a third of the changes, half of
# them to another state word
STATES = {
    "wxpay": ["contract_state", "trade_state", "refund_status", "@event_type",
              "sub_orders.0.trade_state"],
    "alipay": ["status", "notify_type", "trade_status"],
    "stripe": ["type", "data.object.status", "data.object.object", "data.object.billing_reason"],
}

UNKNOWN_STATES = ["PAUSED", "SIGN_FAILED", "TO_BE_RENEWED", "TEMP", "past_due", "incomplete",
                  "unpaid", "paused", "incomplete_expired", "draft", "void", "uncollectible",
                  "STOP", "UNSIGN", "NORMAL", "TRADE_FINISHED", "WAIT_BUYER_PAY", "signed", "ended",
                  "warning_closed", "won", "lost", "SUCCESS", "REFUND", "CLOSED", "signed\u0000",
                  "SIGNED ", "signed", "Signed"]

ODD = ["delete", "null", "true", "false", "zero", "neg1", "neg_big", "int64max", "int64over",
       "ten30", "float_ten30", "float_frac", "neg_zero", "exp", "empty", "numstr", "negstr",
       "huge", "huge_cjk", "text", "cjk", "id255", "id256", "id1000", "obj_empty", "obj",
       "arr_empty", "arr", "deep_ok", "deep_over", "unknown_state", "escape_nul",
       "lone_surrogate", "dup_first", "dup_last", "space", "time_odd"]


def odd_value(kind, draw, gateway):
    """A JSON value (or text, for Alipay) of the odd kind."""
    text_only = gateway == "alipay"
    v = {
        "null": None, "true": True, "false": False, "zero": 0, "neg1": -1,
        "neg_big": -(2 ** 63), "int64max": 2 ** 63 - 1, "int64over": 2 ** 63,
        "ten30": 10 ** 30, "float_ten30": Raw("1e30"), "float_frac": 12.5,
        "neg_zero": Raw("-0"), "exp": Raw("1E2"), "empty": "", "numstr": "100",
        "negstr": "-0.01", "huge": "x" * MB, "huge_cjk": "签" * (MB // 3),
        "cjk": "微信代扣用户€ñ", "id255": None, "id256": None, "id1000": None,
        "obj_empty": {}, "obj": {"a": 1, "id": "x"}, "arr_empty": [], "arr": [1, "a", None],
        "deep_ok": Raw("[" * 60 + "]" * 60), "deep_over": Raw("[" * 200 + "1" + "]" * 200),
        "escape_nul": "a\u0000b", "lone_surrogate": Raw('"\\ud800x"'), "space": " ",
        "time_odd": draw(st.sampled_from(["2026-13-45T99:99:99+08:00", "0000-00-00T00:00:00Z",
                                          "9999-12-31T23:59:59+14:00", "2026-01-01", "-1",
                                          "2026-01-01 08:00:00", "1767225600"])),
    }.get(kind)
    if kind in ("id255", "id256", "id1000"):
        n = int(kind[2:])
        unit = draw(st.sampled_from(["a", "é", "微"]))
        s = (unit * n).encode()[:n]
        while True:
            try:
                v = s.decode()
                break
            except UnicodeDecodeError:
                s = s[:-1] + b"z"
    elif kind == "text":
        v = draw(st.text(max_size=40))
    elif kind == "unknown_state":
        v = draw(st.sampled_from(UNKNOWN_STATES))
    if text_only:
        if v is None or isinstance(v, (dict, list, Dup, bool)):
            v = {None: "", True: "true", False: "false"}.get(v, "") if not isinstance(v, (dict, list)) \
                else json.dumps(v)
        v = str(v)
    return v


# ---- paths into a document --------------------------------------------------------

def paths(doc, prefix=""):
    """Every dotted path of doc (list items by index)."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        p = prefix + str(k)
        out.append(p)
        if isinstance(v, (dict, list)):
            out.extend(paths(v, p + "."))
    return out


def parent_of(doc, path, create):
    """(container, last key) of path; containers made on the way if create."""
    parts = path.split(".")
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                return None, None
            cur = cur[int(part)]
        elif isinstance(cur, dict):
            if part not in cur or not isinstance(cur[part], (dict, list)):
                if not create:
                    return None, None
                cur[part] = {}
            cur = cur[part]
        else:
            return None, None
    last = parts[-1]
    if isinstance(cur, list):
        return (cur, int(last)) if last.isdigit() and int(last) < len(cur) else (None, None)
    return (cur, last) if isinstance(cur, dict) else (None, None)


def mutate_json(doc, path, kind, value):
    """Apply one odd change to a JSON document (in place, where it can)."""
    cont, key = parent_of(doc, path, create=kind not in ("delete", "dup_first", "dup_last"))
    if cont is None:
        return
    if kind == "delete":
        if isinstance(cont, dict):
            cont.pop(key, None)
        else:
            del cont[key]
    elif kind in ("dup_first", "dup_last") and isinstance(cont, dict) and key in cont:
        # the same key twice: the odd value before or after the real one
        pairs = list(cont.items())
        i = [k for k, _ in pairs].index(key)
        extra = (key, value)
        pairs.insert(i if kind == "dup_first" else i + 1, extra)
        # a Dup cannot replace the container in place: keep the pairs as a marker
        cont.clear()
        cont["\u0000dup"] = Dup(pairs)
    else:
        cont[key] = value


def undup(v):
    """Turn the dup markers left by mutate_json into Dup objects."""
    if isinstance(v, dict):
        if "\u0000dup" in v:
            return Dup((k, undup(x)) for k, x in v["\u0000dup"])
        return {k: undup(x) for k, x in v.items()}
    if isinstance(v, list):
        return [undup(x) for x in v]
    return v


# ---- one request ------------------------------------------------------------------

def fresh_ids(draw, n):
    """The ids of one input: fresh per input, or (to meet earlier state) from
    a small pool shared across inputs."""
    pooled = draw(st.booleans())
    pick = draw(st.integers(0, 9)) if pooled else n
    return {
        # a pooled notification id may come back with other content
        "nid": "FZ-N-%d" % n if not pooled or draw(st.integers(0, 3)) else "FZ-N-P%d" % pick,
        "order": "FZ-O-%d" % (pick if draw(st.booleans()) else n),
        "trade": "FZT%d" % (pick if draw(st.booleans()) else n),
        "refund": "FZR%d" % n,
        "agreement": "sub_FZ%d" % pick,
        "ref": "FZ-REF-%d" % pick,
        "amount": draw(st.sampled_from([1, 100, 8888, 123456])),
    }


def build_request(gateway, kind, ids, muts, draw, template_doc=None):
    """(headers, body, summary of the changes) of one signed request."""
    summary = []
    if gateway == "wxpay":
        if template_doc is not None:
            event_type, original_type, plain = template_doc
        else:
            event_type, original_type, plain = wx_template(kind, ids)
        env = {"id": ids["nid"], "create_time": "2026-01-01T08:00:06+08:00",
               "resource_type": "encrypt-resource", "event_type": event_type, "summary": "通知"}
        for path, mk, value in muts:
            if path.startswith("@"):
                mutate_json(env, path[1:], mk, value)
            else:
                mutate_json(plain, path, mk, value)
            summary.append((path, mk))
        ascii_only = draw(st.booleans())
        pt = dumps(undup(plain), ascii_only).encode("utf-8", "surrogatepass")
        env = undup(env)
        res = WX.resource(pt, "fuzzNonce012", original_type)
        if isinstance(env, Dup):
            env.append(("resource", res))
        else:
            env["resource"] = res
        body = dumps(env, ascii_only).encode("utf-8", "surrogatepass")
        return WX.headers(body), body, summary
    if gateway == "alipay":
        fields = list(template_doc) if template_doc is not None else ali_template(kind, ids)
        fields = [(k, v) for k, v in fields if k not in ("sign", "sign_type")]
        charset = "utf-8"
        for path, mk, value in muts:
            summary.append((path, mk))
            if mk == "gbk":
                charset = "gbk"
                continue
            names = [k for k, _ in fields]
            if mk == "delete":
                fields = [(k, v) for k, v in fields if k != path]
            elif mk in ("dup_first", "dup_last"):
                if path in names:
                    i = names.index(path)
                    fields.insert(i if mk == "dup_first" else i + 1, (path, value))
            elif path in names:
                fields[names.index(path)] = (path, value)
            else:
                fields.append((path, value))
        enc = "gbk" if charset == "gbk" else "utf-8"
        out = []
        for k, v in fields:
            if k == "charset":
                v = charset if charset == "gbk" else v
            try:
                out.append((k, v.encode(enc)))
            except UnicodeEncodeError:
                out.append((k, v.encode("utf-8", "surrogatepass")))
        if charset == "gbk" and not any(k == "charset" for k, _ in out):
            out.append(("charset", b"gbk"))
        body = pnsign.alipay_body(out, keyfile=ALI.keyfile)
        ct = "application/x-www-form-urlencoded; charset=" + charset
        return {"Content-Type": ct}, body, summary
    doc = copy.deepcopy(template_doc) if template_doc is not None else st_template(kind, ids)
    for path, mk, value in muts:
        mutate_json(doc, path, mk, value)
        summary.append((path, mk))
    body = dumps(undup(doc), draw(st.booleans())).encode("utf-8", "surrogatepass")
    return ST.headers(body), body, summary


# ---- the samples as templates, made to fit the fuzz channels ------------------

def sample_templates():
    """[(gateway, name, doc)] from test/vectors/samples, our merchant's."""
    out = []
    sdir = pnsign.vpath("samples")
    for c in json.load(open(os.path.join(sdir, "manifest.json"))):
        payload = open(os.path.join(sdir, c["files"]["payload"]), "rb").read()
        if c["gateway"] == "wxpay":
            env = json.loads(payload)
            plain = env["resource"].get("plaintext")
            if not isinstance(plain, dict):
                continue
            for k, mine in (("mchid", WX.mchid), ("sp_mchid", WX.mchid), ("appid", WX.appid),
                            ("sp_appid", WX.appid), ("combine_mchid", WX.mchid),
                            ("combine_appid", WX.appid)):
                if k in plain:
                    plain[k] = mine
            otype = env["resource"].get("original_type") or \
                {"ENTRUST": "entrust", "REFUND": "refund"}.get(env["event_type"].split(".")[0], "transaction")
            out.append(("wxpay", c["case"], (env["event_type"], otype, plain)))
        elif c["gateway"] == "alipay":
            fields = pnsign.form_decode(payload.strip())
            if fields is None:
                continue
            fields = [(k.decode(), v.decode("utf-8", "replace")) for k, v in fields]
            fields = [(k, ALI.app_id if k in ("app_id", "auth_app_id") else v) for k, v in fields]
            out.append(("alipay", c["case"], fields))
        else:
            out.append(("stripe", c["case"], json.loads(payload)))
    return out


SAMPLES = sample_templates()


@st.composite
def notices(draw, counter):
    """(gateway, kind, ids, headers, body, summary, make_order)."""
    n = next(counter)
    gateway = draw(st.sampled_from(["wxpay", "alipay", "stripe"]))
    template_doc = None
    if draw(st.integers(0, 4)) == 0:
        samples = [s for s in SAMPLES if s[0] == gateway]
        _, kind, template_doc = draw(st.sampled_from(samples))
        template_doc = copy.deepcopy(template_doc)
    else:
        kinds = [k for k, w in KINDS[gateway] for _ in range(w)]
        kind = draw(st.sampled_from(kinds))
    ids = fresh_ids(draw, n)
    if template_doc is not None:
        template_doc = retarget(gateway, template_doc, ids)
    if gateway == "wxpay":
        doc_paths = paths(template_doc[2] if template_doc else wx_template(kind, ids)[2])
        doc_paths += ["@id", "@event_type", "@resource_type", "@create_time"]
    elif gateway == "alipay":
        doc_paths = [k for k, _ in (template_doc or ali_template(kind, ids))]
    else:
        doc_paths = paths(template_doc or st_template(kind, ids))
    muts = []
    for _ in range(draw(st.integers(0, 4))):
        path = draw(st.one_of(st.sampled_from(STATES[gateway]), st.sampled_from(AIM[gateway]),
                              st.sampled_from(doc_paths)))
        if path in STATES[gateway] and draw(st.booleans()):
            mk = "unknown_state"
        else:
            mk = draw(st.sampled_from(ODD + (["gbk"] if gateway == "alipay" else [])))
        value = odd_value(mk, draw, gateway)
        muts.append((path, mk, value))
    headers, body, summary = build_request(gateway, kind, ids, muts, draw, template_doc)
    make_order = draw(st.integers(0, 3)) > 0
    return gateway, kind, ids, headers, body, summary, make_order


def retarget(gateway, doc, ids):
    """A sample's ids replaced by this input's, so that it is not a duplicate."""
    if gateway == "wxpay":
        et, ot, plain = doc
        for k, v in (("out_trade_no", ids["order"]), ("transaction_id", ids["trade"]),
                     ("contract_id", ids["agreement"]), ("combine_out_trade_no", ids["order"]),
                     ("out_refund_no", ids["refund"]), ("refund_id", ids["refund"] + "w")):
            if k in plain:
                plain[k] = v
        return et, ot, plain
    if gateway == "alipay":
        rep = {"notify_id": ids["nid"], "out_trade_no": ids["order"], "trade_no": ids["trade"],
               "agreement_no": ids["agreement"], "out_biz_no": ids["refund"]}
        return [(k, rep.get(k, v)) for k, v in doc]
    doc["id"] = ids["nid"]
    obj = doc.get("data", {}).get("object")
    if isinstance(obj, dict):
        obj.setdefault("metadata", {})
        if isinstance(obj["metadata"], dict):
            obj["metadata"]["order_id"] = ids["order"]
        if obj.get("object") == "subscription":
            obj["id"] = ids["agreement"]
    return doc


# ---- the database side --------------------------------------------------------------

class Db:
    def __init__(self, dsn, admin_dsn):
        self.dsn, self.admin_dsn = dsn, admin_dsn
        self.admin = psycopg2.connect(admin_dsn)
        self.admin.autocommit = True
        self.shim = None
        self.connect()
        cur = self.admin.cursor()
        # every table's row count and newest row version: a call that
        # inserts, updates or deletes a row changes one of them
        cur.execute("""SELECT string_agg(format('SELECT %L, count(*), max(xmin::text::bigint) FROM %s', r, r),
                                         ' UNION ALL ')
                       FROM (SELECT format('%I.%I', n.nspname, c.relname) AS r FROM pg_class c
                             JOIN pg_namespace n ON n.oid = c.relnamespace
                             WHERE n.nspname IN ('pay', 'public') AND c.relkind IN ('r', 'p')
                             ORDER BY 1) t""")
        self.snap_sql = cur.fetchone()[0]
        self.mirror = {t: {} for t in APPLIED}
        self.newest = {t: -1 for t in APPLIED}
        cur.execute("SELECT pg_postmaster_start_time()")
        self.started = cur.fetchone()[0]

    def connect(self):
        self.shim = psycopg2.connect(self.dsn)
        self.shim.autocommit = True

    def snapshot(self):
        cur = self.admin.cursor()
        cur.execute(self.snap_sql)
        return {r[0]: (r[1], r[2]) for r in cur.fetchall()}

    def sync(self):
        """{(table, ended_unsigned)} of the applied tables whose rows' standing
        moved since the last sync (rows written since then, compared with
        what they were); ended_unsigned: a new agreement, ended, never
        signed."""
        moved = set()
        cur = self.admin.cursor()
        for t, q in APPLIED.items():
            cur.execute("SELECT max(xmin::text::bigint) FROM %s" % t)
            newest = cur.fetchone()[0] or -1
            if newest == self.newest[t]:
                continue
            cur.execute(q + " WHERE xmin::text::bigint > %s", (self.newest[t],))
            for key, standing in cur.fetchall():
                was = self.mirror[t].get(key)
                if was != standing:
                    moved.add((t, was is None and standing.startswith("(ended,,")))
                    self.mirror[t][key] = standing
            self.newest[t] = newest
        return moved

    def order(self, order_no, amount, status):
        cur = self.admin.cursor()
        cur.execute("INSERT INTO public.orders VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (order_no, status, amount, "CNY"))

    def handle(self, channel, headers, body):
        """('reply', (status, content_type, body, outcome)), ('error', (sqlstate,
        message)) or ('dead', message)."""
        try:
            cur = self.shim.cursor()
            cur.execute("SELECT status, content_type, body, outcome FROM pay.paynotify_handle(%s, %s::jsonb, %s)",
                        (channel, json.dumps(headers), psycopg2.Binary(body)))
            return "reply", cur.fetchone()
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            if self.alive():
                return "error", (getattr(e, "pgcode", None) or "?", str(e))
            try:
                self.connect()
            except psycopg2.Error:
                pass
            return "dead", str(e)
        except psycopg2.Error as e:
            return "error", (e.pgcode, e.pgerror or str(e))

    def alive(self):
        try:
            cur = self.shim.cursor()
            cur.execute("SELECT 1")
            return cur.fetchone() == (1,)
        except psycopg2.Error:
            return False


def changed(before, after):
    """The tables whose rows differ."""
    return sorted(t for t in after if before.get(t) != after.get(t))


class Checker:
    def __init__(self, db, out, show):
        self.db, self.out, self.show = db, out, show
        self.failures = 0
        self.tally = collections.Counter()
        self.spent = collections.Counter()
        self.n = 0

    def fail(self, what, gateway, kind, summary, headers, body):
        self.failures += 1
        if self.failures <= self.show:
            print("FAIL %s: %s %s changes %s" % (what, gateway, kind,
                                                 [(p, m) for p, m in summary]), flush=True)
        if self.out:
            base = os.path.join(self.out, "fail-%03d" % self.failures)
            with open(base + ".body", "wb") as f:
                f.write(body)
            with open(base + ".json", "w") as f:
                json.dump({"what": what, "gateway": gateway, "kind": kind, "headers": headers,
                           "changes": summary}, f, ensure_ascii=False, indent=1)

    def one(self, gateway, kind, ids, headers, body, summary, make_order):
        db = self.db
        self.n += 1
        if make_order:
            status = "paid" if kind in ("refund", "charge_refunded", "dispute_created", "dispute_closed") \
                else "pending"
            db.order(ids["order"], ids["amount"], status)
            if kind == "combine":
                for i in (1, 2):
                    db.order(ids["order"] + "-" + str(i), ids["amount"], status)
        results = []
        for attempt in (1, 2):
            t0 = time.monotonic()
            db.sync()
            before = db.snapshot()
            t1 = time.monotonic()
            res = db.handle(gateway, headers, body)
            t2 = time.monotonic()
            after = db.snapshot()
            moved = db.sync()
            # a row gone from an applied table moved it too
            moved |= {(t, False) for t in APPLIED if after[t][0] < before[t][0]}
            self.spent["checks"] += time.monotonic() - t2 + t1 - t0
            self.spent["paynotify_handle"] += t2 - t1
            results.append(res)
            bad = self.check(res, before, after, sorted(moved), attempt)
            for what in bad:
                self.fail("%s (delivery %d)" % (what, attempt), gateway, kind, summary, headers, body)
            if res[0] == "dead":
                return
        first, second = results
        self.tally[(gateway, kind if kind in dict(KINDS[gateway]) else "sample",
                    first[1][3] if first[0] == "reply" else "ERROR " + str(first[1][0]))] += 1
        if not same_class(first, second):
            self.fail("repeat answered %s after %s" % (describe(second), describe(first)),
                      gateway, kind, summary, headers, body)

    def check(self, res, before, after, moved, attempt):
        bad = []
        if res[0] == "dead":
            return ["the backend died: %s" % res[1].strip()]
        if res[0] == "error":
            code, msg = res[1]
            if code in INTERNAL or code is None or code == "?":
                bad.append("internal error %s: %s" % (code, msg.strip()[:300]))
            if any(s in msg for s in SECRETS):
                bad.append("key material in the error %s" % code)
            if changed(before, after):
                bad.append("error %s left rows: %s" % (code, changed(before, after)))
            return bad
        status, ctype, rbody, outcome = res[1]
        if outcome not in OUTCOMES:
            bad.append("outcome %r is not the contract's" % outcome)
        if not isinstance(status, int) or not 100 <= status <= 599:
            bad.append("status %r is not an HTTP status" % status)
        if any(s in (rbody or "") for s in SECRETS):
            bad.append("key material in the reply")
        if outcome in ("rejected", "malformed") and changed(before, after):
            bad.append("%s but rows changed: %s" % (outcome, changed(before, after)))
        if attempt == 2 and moved:
            bad.append("applied again: %s" % sorted({t for t, _ in moved}))
        # ignored, yet recorded: a payment of an order paid by another trade
        # (the money is real: double_payment, docs/LEDGER.md), and a Stripe
        # subscription ended incomplete_expired that was never signed (a
        # new agreement, ended, unsigned: docs/GATEWAYS.md, "Agreements")
        moved = sorted({t for t, ended_unsigned in moved
                        if t != "pay.payment_record" and
                        not (t == "pay.paynotify_agreement" and ended_unsigned and outcome == "ignored")})
        if outcome != "processed" and moved:
            bad.append("%s but applied: %s" % (outcome, moved))
        return bad


def describe(res):
    return res[1][3] if res[0] == "reply" else "%s %s" % (res[0], res[1][0] if res[0] == "error" else "")


def same_class(first, second):
    """Whether the repeat's answer is what the first one allows."""
    if first[0] != second[0]:
        return False
    if first[0] == "error":
        return first[1][0] == second[1][0]
    if first[0] == "dead":
        return True
    a, b = first[1][3], second[1][3]
    if a == "processed":
        return b == "duplicate"
    return b == a or (b == "duplicate" and a in ("ignored", "parked", "failed", "duplicate"))


# ---- setup (the superuser's, once) -------------------------------------------------------

def setup(admin_dsn, role):
    """paynotify in schema pay, the three channels with the test keys, the
    shim's role (handler) and an orders table bound to it."""
    conn = psycopg2.connect(admin_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE SCHEMA pay; CREATE EXTENSION paynotify SCHEMA pay")
    cur.execute("SELECT pay.paynotify_add_channel('wxpay', 'wxpay', %s::jsonb)",
                (json.dumps({"apiv3_key": WX.apiv3_key.decode(), "mchid": WX.mchid, "appid": WX.appid}),))
    cur.execute("SELECT pay.paynotify_add_key('wxpay', %s, %s)", (WX.serial, WX.cert_pem))
    cur.execute("SELECT pay.paynotify_add_channel('alipay', 'alipay', %s::jsonb)",
                (json.dumps({"app_id": ALI.app_id}),))
    cur.execute("SELECT pay.paynotify_add_key('alipay', 'alipay_1', %s)", (ALI.pub_pem,))
    cur.execute("SELECT pay.paynotify_add_channel('stripe', 'stripe', '{}')")
    cur.execute("SELECT pay.paynotify_add_key('stripe', 'whsec_1', %s)", (ST.secret.decode(),))
    cur.execute("""
        CREATE TABLE public.orders (order_no text PRIMARY KEY, status text NOT NULL,
                                    amount_fen bigint NOT NULL, currency text NOT NULL);
        CREATE TRIGGER orders_guard BEFORE UPDATE ON public.orders
            FOR EACH ROW EXECUTE FUNCTION pay.paynotify_guard_transition();
        SELECT pay.paynotify_bind_orders('public.orders', 'order_no', 'status',
                                         amount_column => 'amount_fen', currency_column => 'currency');""")
    cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
    if cur.fetchone() is None:
        cur.execute("CREATE ROLE %s LOGIN" % role)
    cur.execute("SELECT pay.paynotify_grant(%s, 'handler')", (role,))
    # bodies up to 8 MB, so that 1 MB fields reach the extraction sealed
    cur.execute("SELECT current_database()")
    cur.execute("ALTER DATABASE %s SET paynotify.max_body_size = '8MB'" % cur.fetchone()[0])
    conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True, help="the shim's role (handler capacity)")
    ap.add_argument("--admin-dsn", required=True)
    ap.add_argument("--setup", metavar="ROLE", help="create paynotify, the channels and ROLE first")
    ap.add_argument("--examples", type=int, default=600)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--derandomize", action="store_true",
                    help="Hypothesis's fixed sequence (the suite's run: it cannot flake)")
    ap.add_argument("--out", help="directory for the requests that failed")
    ap.add_argument("--show", type=int, default=20)
    a = ap.parse_args()
    if a.setup:
        setup(a.admin_dsn, a.setup)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(2 ** 32)
    if a.derandomize:
        print("notices: %d examples, derandomized" % a.examples, flush=True)
    else:
        print("notices: %d examples, --seed %d" % (a.examples, seed), flush=True)
    db = Db(a.dsn, a.admin_dsn)
    chk = Checker(db, a.out, a.show)
    counter = iter(range(1, 1 << 62))
    t0 = time.monotonic()

    @settings(max_examples=a.examples, deadline=None, database=None, derandomize=a.derandomize,
              phases=[Phase.generate], print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(notices(counter))
    def prop(x):
        chk.one(*x)

    if not a.derandomize:
        prop = hyp_seed(seed)(prop)
    prop()
    cur = db.admin.cursor()
    cur.execute("SELECT pg_postmaster_start_time()")
    if cur.fetchone()[0] != db.started:
        chk.fail("the server restarted", "-", "-", [], {}, b"")
    for (gw, kind, outcome), k in sorted(chk.tally.items()):
        print("notices:   %-7s %-30s %-22s %d" % (gw, kind, outcome, k))
    print("notices: %d inputs (each delivered twice) in %.0f s (%s), %d failures"
          % (chk.n, time.monotonic() - t0,
             ", ".join("%s %.0f s" % kv for kv in sorted(chk.spent.items())), chk.failures), flush=True)
    return 1 if chk.failures else 0


if __name__ == "__main__":
    sys.exit(main())
