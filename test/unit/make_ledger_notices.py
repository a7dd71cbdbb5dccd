#!/usr/bin/env python3
"""Signed WeChat Pay notifications for the ledger tests (sql/ledger.sql and
test/specs/ledger_*.spec), written to test/ledger_notices.json.

Each entry is {"name", "now", "headers", "body"}: a TRANSACTION.SUCCESS or
REFUND.* notification for one of the ledger orders, its resource encrypted
with the TEST-ONLY APIv3 key (AES-256-GCM) and signed RSA-SHA256 with the
TEST-ONLY platform key 1 of test/vectors/keys, for the channel that
t.configure('wx_transaction_success_valid', ...) sets up.  PKCS#1 v1.5 and
GCM with fixed nonces are deterministic: the output is the same on every
run.  Needs python3 and python3-cryptography (test/pylib/pnsign.py).

    test/unit/make_ledger_notices.py > test/ledger_notices.json
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pylib"))
import pnsign as s  # noqa: E402

TS = 1767300000
MCHID = "1900000109"
APPID = "wx0000000000test01"


def pay(order, trade, total, currency="CNY"):
    return "TRANSACTION.SUCCESS", "transaction", {
        "mchid": MCHID, "appid": APPID, "out_trade_no": order,
        "transaction_id": trade, "trade_type": "JSAPI", "trade_state": "SUCCESS",
        "trade_state_desc": "ok", "bank_type": "OTHERS", "attach": "",
        "success_time": "2026-01-02T04:40:00+08:00",
        "payer": {"openid": "oTEST0000000000000000000001"},
        "amount": {"total": total, "payer_total": total, "currency": currency,
                   "payer_currency": currency}}


def refund(order, trade, refund_id, total, amount, status="SUCCESS"):
    plain = {
        "mchid": MCHID, "out_trade_no": order, "transaction_id": trade,
        "out_refund_no": "OUT-" + refund_id, "refund_id": refund_id,
        "refund_status": status, "user_received_account": "test",
        "amount": {"total": total, "refund": amount, "payer_total": total,
                   "payer_refund": amount}}
    if status == "SUCCESS":
        plain["success_time"] = "2026-01-02T05:00:00+08:00"
    return "REFUND." + status, "refund", plain


def combine(combine_no, subs, combine_mchid=MCHID):
    """A combine payment (合单支付): subs are (order, trade, total, mchid, state)."""
    return "TRANSACTION.SUCCESS", "transaction", {
        "combine_appid": APPID, "combine_mchid": combine_mchid,
        "combine_out_trade_no": combine_no, "scene_info": {"device_id": "POS1:1"},
        "sub_orders": [{
            "mchid": m, "trade_type": "JSAPI", "trade_state": st, "bank_type": "CMC",
            "attach": "", "success_time": "2026-01-02T04:40:00+08:00",
            "transaction_id": trade, "out_trade_no": order,
            "amount": {"total_amount": total, "payer_amount": total,
                       "currency": "CNY", "payer_currency": "CNY"}}
            for order, trade, total, m, st in subs],
        "combine_payer_info": {"openid": "oTEST0000000000000000000001"}}


SP_MCHID = "1900000100"
SP_APPID = "wx8888888888888888"


def partner_pay(order, trade, total, sub_mchid, sp_mchid=SP_MCHID):
    """A service provider's (partner) payment for its sub-merchant."""
    return "TRANSACTION.SUCCESS", "transaction", {
        "sp_appid": SP_APPID, "sp_mchid": sp_mchid, "sub_appid": "wxd678efh567hg6999",
        "sub_mchid": sub_mchid, "out_trade_no": order, "transaction_id": trade,
        "trade_type": "JSAPI", "trade_state": "SUCCESS", "trade_state_desc": "ok",
        "bank_type": "CMC", "attach": "", "success_time": "2026-01-02T04:40:00+08:00",
        "payer": {"sp_openid": "oUpF8uN95-Ptaags6E79BjjAAAAA",
                  "sub_openid": "oUpF8uN95-Ptaags6E79BjjBBBBB"},
        "amount": {"total": total, "payer_total": total, "currency": "CNY",
                   "payer_currency": "CNY"}}


def partner_refund(order, trade, refund_id, total, amount, sub_mchid):
    plain = refund(order, trade, refund_id, total, amount)[2]
    del plain["mchid"]
    plain.update({"sp_mchid": SP_MCHID, "sub_mchid": sub_mchid})
    return "REFUND.SUCCESS", "refund", plain


def entrust(event_type, contract_id, state, mchid=MCHID, **extra):
    """A PAP contract (委托代扣) notice: signed, terminated, or another state."""
    plain = {"mchid": mchid, "appid": APPID, "out_contract_code": "MC-" + contract_id,
             "plan_id": 12535, "openid": "oTEST0000000000000000000001",
             "contract_state": state}
    if contract_id:
        plain["contract_id"] = contract_id
    if state == "SIGNED":
        plain["contract_signed_time"] = "2026-01-02T04:00:00+08:00"
    if state == "TERMINATED":
        plain["contract_terminated_time"] = "2026-01-02T06:00:00+08:00"
    plain.update(extra)
    plain = {k: v for k, v in plain.items() if v is not None}
    return event_type, "entrust", plain


def pap_pay(order, trade, total, contract_id):
    """A deduction under a contract: a payment naming it."""
    spec = pay(order, trade, total)
    spec[2]["contract_id"] = contract_id
    spec[2]["trade_type"] = "PAP"
    return spec


# name -> (event_type, aad, plaintext)
NOTICES = [
    # two refunds of 50 racing on a paid order of 100 (test/specs/ledger_race.spec)
    ("race_pay", pay("LG-RACE", "T-RACE", 100)),
    ("race_r1", refund("LG-RACE", "T-RACE", "R-RACE-1", 100, 50)),
    ("race_r2", refund("LG-RACE", "T-RACE", "R-RACE-2", 100, 50)),
    # the same two, parked before the payment and applied by it
    ("park_pay", pay("LG-PARK", "T-PARK", 100)),
    ("park_r1", refund("LG-PARK", "T-PARK", "R-PARK-1", 100, 50)),
    ("park_r2", refund("LG-PARK", "T-PARK", "R-PARK-2", 100, 50)),
    # a double payment; its duplicate trade refunded in full, then the first
    ("dbl_pay1", pay("LG-DBL", "T-DBL-1", 100)),
    ("dbl_pay2", pay("LG-DBL", "T-DBL-2", 100)),
    ("dbl_r2", refund("LG-DBL", "T-DBL-2", "R-DBL-2", 100, 100)),
    ("dbl_r1", refund("LG-DBL", "T-DBL-1", "R-DBL-1", 100, 100)),
    # an abnormal refund completed later under the same refund id
    ("abn_pay", pay("LG-ABN", "T-ABN", 100)),
    ("abn_fail", refund("LG-ABN", "T-ABN", "R-ABN", 100, 100, "ABNORMAL")),
    ("abn_ok", refund("LG-ABN", "T-ABN", "R-ABN", 100, 100)),
    ("abn_closed", refund("LG-ABN", "T-ABN", "R-ABN", 100, 100, "CLOSED")),
    # a refund closed while the application had the order refunding
    ("clo_pay", pay("LG-CLO", "T-CLO", 100)),
    ("clo_closed", refund("LG-CLO", "T-CLO", "R-CLO", 100, 100, "CLOSED")),
    # the application marked the order paid itself
    ("app_pay", pay("LG-APP", "T-APP", 100)),
    # refund anomalies: more than paid; an order already shipped
    ("over_pay", pay("LG-OVER", "T-OVER", 100)),
    ("over_r1", refund("LG-OVER", "T-OVER", "R-OVER-1", 100, 80)),
    ("over_r2", refund("LG-OVER", "T-OVER", "R-OVER-2", 100, 80)),
    ("ship_pay", pay("LG-SHIP", "T-SHIP", 100)),
    ("ship_r", refund("LG-SHIP", "T-SHIP", "R-SHIP", 100, 100)),
    # a parked refund whose hook fails: the payment fails with it
    ("hook_pay", pay("LG-HOOK", "T-HOOK", 100)),
    ("hook_r", refund("LG-HOOK", "T-HOOK", "R-HOOK", 100, 30)),
    # currency: the order's currency against the payment's
    ("cur_ok", pay("LG-CUR1", "T-CUR1", 100, "cny")),
    ("cur_bad", pay("LG-CUR2", "T-CUR2", 100, "USD")),
    # a profit-sharing resource sent as TRANSACTION.SUCCESS (WeChat's docs
    # allow it): never a payment, not even when it reads like one
    ("ps_txn", ("TRANSACTION.SUCCESS", "profitsharing",
                {"mchid": "1900000109", "transaction_id": "T-PS",
                 "order_id": "3008450740201411110007820472", "out_order_no": "P20150806125346",
                 "receiver": {"type": "MERCHANT_ID", "account": "1900000110", "amount": 888,
                              "description": "分给商户1900000110"},
                 "success_time": "2018-06-08T10:34:56+08:00"})),
    ("ps_txn_shaped", ("TRANSACTION.SUCCESS", "profitsharing",
                       pay("LG-PS", "T-PS", 100)[2])),
    # combine payments: each of this merchant's paid sub-orders pays its
    # order (another merchant's and an unpaid one do not); all or none
    ("cmb_ok", combine("LG-CMB-A", [("LG-CMB-2", "T-CMB-2", 200, MCHID, "SUCCESS"),
                                    ("LG-CMB-1", "T-CMB-1", 100, MCHID, "SUCCESS"),
                                    ("LG-CMB-X", "T-CMB-X", 300, "1900000999", "SUCCESS"),
                                    ("LG-CMB-Y", "T-CMB-Y", 300, MCHID, "NOTPAY")])),
    ("cmb_mismatch", combine("LG-CMB-B", [("LG-CMB-3", "T-CMB-3", 999, MCHID, "SUCCESS"),
                                          ("LG-CMB-4", "T-CMB-4", 400, MCHID, "SUCCESS")])),
    ("cmb_missing", combine("LG-CMB-C", [("LG-CMB-5", "T-CMB-5", 500, MCHID, "SUCCESS"),
                                         ("LG-CMB-6", "T-CMB-6", 600, MCHID, "SUCCESS")])),
    ("cmb_others", combine("LG-CMB-D", [("LG-CMB-7", "T-CMB-7", 700, "1900000999", "SUCCESS")])),
    ("cmb_foreign", combine("LG-CMB-E", [("LG-CMB-8", "T-CMB-8", 800, MCHID, "SUCCESS")],
                            combine_mchid="1900000999")),
    ("cmb_no_subs", combine("LG-CMB-F", [])),
    # partner (service provider) notices on a channel for one sub-merchant
    ("pp_ok", partner_pay("LG-PP-1", "T-PP-1", 100, "1900000109")),
    ("pp_other_sub", partner_pay("LG-PP-2", "T-PP-2", 100, "1900000555")),
    ("pp_other_sp", partner_pay("LG-PP-3", "T-PP-3", 100, "1900000109", sp_mchid="1900000666")),
    ("pp_refund", partner_refund("LG-PP-1", "T-PP-1", "R-PP-1", 100, 100, "1900000109")),
    ("pp_refund_other_sub", partner_refund("LG-PP-1", "T-PP-1", "R-PP-2", 100, 100, "1900000555")),
    ("pp_combine", combine("LG-PP-C", [("LG-PP-4", "T-PP-4", 400, SP_MCHID, "SUCCESS"),
                                       ("LG-PP-5", "T-PP-5", 500, SP_MCHID, "SUCCESS")],
                           combine_mchid=SP_MCHID)),
    # an unpaid sub-order that names no transaction yet: the paid one pays
    ("cmb_unpaid_no_txn", combine("LG-CMB-G", [("LG-CMB-9", "T-CMB-9", 900, MCHID, "SUCCESS"),
                                               ("LG-CMB-10", "", 100, MCHID, "NOTPAY")])),
    # PAP contracts (sql/agreements.sql): an end before its sign, a charge
    # under each contract, states that move nothing, another merchant's, none
    ("ent_term_1", entrust("ENTRUST.TERMINATE", "WXC-1", "TERMINATED")),
    ("ent_sign_1", entrust("ENTRUST.SIGN", "WXC-1", "SIGNED")),
    ("ent_sign_2", entrust("ENTRUST.SIGN", "WXC-2", "SIGNED")),
    ("ent_renew_2", entrust("ENTRUST.RENEW", "WXC-2", "TO_BE_RENEWED")),
    ("ent_failed_3", entrust("ENTRUST.SIGN", "WXC-3", "SIGN_FAILED")),
    ("ent_other_mch", entrust("ENTRUST.SIGN", "WXC-4", "SIGNED", mchid="1900000999")),
    ("ent_no_id", entrust("ENTRUST.SIGN", "", "SIGNED")),
    ("pap_pay_2", pap_pay("LG-PAP-2", "T-PAP-2", 100, "WXC-2")),
    ("pap_pay_1", pap_pay("LG-PAP-1", "T-PAP-1", 100, "WXC-1")),
    # ids one byte over the bound (PN_MAX_ID_LEN, 255) and at it (sql/bounds.sql)
    ("long_contract", entrust("ENTRUST.SIGN", "C" * 256, "SIGNED")),
    ("long_order", pay("B" * 256, "T-BOUND-1", 100)),
    ("long_trade", pay("LG-BOUND-1", "T" * 256, 100)),
    ("limit_contract", entrust("ENTRUST.SIGN", "C" * 255, "SIGNED")),
    ("limit_pay", pay("LG-BOUND-2", "T" * 255, 100)),
    # a termination whose time is in contract_terminate_info, as the
    # contract's query answer carries it (sql/agreements.sql)
    ("ent_term_2", entrust("ENTRUST.TERMINATE", "WXC-2", "TERMINATED",
                           contract_terminated_time=None,
                           contract_terminate_info={
                               "contract_terminated_time": "2026-01-03T09:00:00+08:00",
                               "contract_termination_mode": "USER"})),
]


def build(i, name, spec):
    event_type, aad, plain = spec
    if name == "cmb_unpaid_no_txn":
        del plain["sub_orders"][1]["transaction_id"]
    if name == "pp_combine":
        plain["combine_appid"] = SP_APPID
        for sub, sub_mchid in zip(plain["sub_orders"], ["1900000109", "1900000555"]):
            sub["sub_mchid"] = sub_mchid
    raw = json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode()
    nonce = "ledger%06d" % i
    env = {"id": "1ed9e700-0000-4000-8000-%012d" % i,
           "create_time": "2026-01-02T05:00:00+08:00",
           "resource_type": "encrypt-resource", "event_type": event_type,
           "summary": "test", "resource": s.wx_resource(raw, nonce, aad)}
    body = json.dumps(env, ensure_ascii=False, separators=(",", ":")).encode()
    headers = s.wx_headers(TS, "ledger-nonce-%04d" % i, body)
    return {"name": name, "now": TS + 2, "headers": headers, "body": body.decode()}


def j(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def obj(pairs):
    """An object's text from (key, value text) pairs, duplicates kept."""
    return "{" + ",".join(j(k) + ":" + v for k, v in pairs) + "}"


def envelope_text(i, order, shape):
    """The body of a payment of order whose envelope is written as shape
    says (sql/ledger.sql, "the envelope"): shape gets the envelope's pairs
    and the resource's, and returns the body's text."""
    raw = j(pay(order, "T-" + order, 100)[2]).encode()
    nonce = "ledger%06d" % i
    res = s.wx_resource(raw, nonce, "transaction")
    rpairs = [(k, j(v)) for k, v in res.items()]
    epairs = [("id", j("1ed9e700-0000-4000-8000-%012d" % i)),
              ("create_time", j("2026-01-02T05:00:00+08:00")),
              ("resource_type", j("encrypt-resource")),
              ("event_type", j("TRANSACTION.SUCCESS")), ("summary", j("test"))]
    return shape(epairs, rpairs)


def with_resource(epairs, rpairs):
    return epairs + [("resource", obj(rpairs))]


def replaced(pairs, key, value):
    return [(k, value if k == key else v) for k, v in pairs]


# How an envelope is read (its fields, as jsonb would give them: a key
# given twice keeps its last value, the whole of it), each a payment of its
# own order; built as text, so that keys can repeat.
ENVELOPES = [
    ("env_plain", "LG-ENV-1", lambda e, r: obj(with_resource(e, r))),
    # the resource twice: the last one, whole, is read
    ("env_dup_resource_last_ok", "LG-ENV-2",
     lambda e, r: obj(e + [("resource", obj([("algorithm", j("AEAD_AES_256_GCM"))])),
                           ("resource", obj(r))])),
    ("env_dup_resource_last_short", "LG-ENV-3",
     lambda e, r: obj(e + [("resource", obj(r)),
                           ("resource", obj([("algorithm", j("AEAD_AES_256_GCM"))]))])),
    ("env_dup_resource_last_null", "LG-ENV-4",
     lambda e, r: obj(e + [("resource", obj(r)), ("resource", "null")])),
    # a field of the resource twice: its last value
    ("env_dup_ciphertext_last_ok", "LG-ENV-5",
     lambda e, r: obj(e + [("resource", obj([("ciphertext", j("AAAA"))] + r))])),
    ("env_dup_ciphertext_last_bad", "LG-ENV-6",
     lambda e, r: obj(e + [("resource", obj(r + [("ciphertext", j("AAAA"))]))])),
    # the id twice: the last is the notification's
    ("env_dup_id", "LG-ENV-7",
     lambda e, r: obj(with_resource(e + [("id", j("1ed9e700-0000-4000-8000-last-of-two"))], r))),
    # an id, a type or a resource field of another type
    ("env_id_number", "LG-ENV-8", lambda e, r: obj(with_resource(replaced(e, "id", "12345"), r))),
    ("env_id_object", "LG-ENV-9",
     lambda e, r: obj(with_resource(replaced(e, "id", obj([("id", j("x"))])), r))),
    ("env_event_type_null", "LG-ENV-10",
     lambda e, r: obj(with_resource(replaced(e, "event_type", "null"), r))),
    ("env_aad_null", "LG-ENV-11",
     lambda e, r: obj(with_resource(e, replaced(r, "associated_data", "null")))),
    ("env_original_type_null", "LG-ENV-12",
     lambda e, r: obj(with_resource(e, replaced(r, "original_type", "null")))),
    ("env_original_type_absent", "LG-ENV-13",
     lambda e, r: obj(with_resource(e, [(k, v) for k, v in r if k != "original_type"]))),
    ("env_nonce_array", "LG-ENV-14",
     lambda e, r: obj(with_resource(e, replaced(r, "nonce", "[" + dict(r)["nonce"] + "]")))),
    ("env_resource_string", "LG-ENV-15", lambda e, r: obj(e + [("resource", j("x"))])),
    ("env_resource_array", "LG-ENV-16", lambda e, r: obj(e + [("resource", "[" + obj(r) + "]")])),
    # keys spelled with escapes are the same keys
    ("env_escaped_keys", "LG-ENV-17",
     lambda e, r: "{" + ",".join(
         ('"\\u0069d"' if k == "id" else j(k)) + ":" + v for k, v in e)
     + ',"resource":{' + ",".join(
         ('"nonc\\u0065"' if k == "nonce" else j(k)) + ":" + v for k, v in r) + "}}"),
    # deeper fields and arrays of no interest, after the resource
    ("env_deep_extra", "LG-ENV-18",
     lambda e, r: obj(with_resource(e, r + [("extra", obj([("ciphertext", j("AAAA"))]))])
                      + [("x", obj([("resource", obj([("nonce", j("n"))])),
                                    ("a", "[1,[2,{\"id\":3}],{}]")]))])),
    # a fields' path one level deeper is not the field
    ("env_nested_id", "LG-ENV-19",
     lambda e, r: obj(with_resource([(k, v) for k, v in e if k != "id"]
                                    + [("wrap", obj([("id", j("nested"))]))], r))),
    # not an object at the root
    ("env_root_array", "LG-ENV-20", lambda e, r: "[" + obj(with_resource(e, r)) + "]"),
]


def build_envelope(i, name, order, shape):
    body = envelope_text(i, order, shape).encode()
    headers = s.wx_headers(TS, "ledger-nonce-%04d" % i, body)
    return {"name": name, "now": TS + 2, "headers": headers, "body": body.decode()}


def main():
    s.check_vectors()
    out = [build(i + 1, n, spec) for i, (n, spec) in enumerate(NOTICES)]
    out += [build_envelope(len(NOTICES) + i + 1, n, order, shape)
            for i, (n, order, shape) in enumerate(ENVELOPES)]
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
