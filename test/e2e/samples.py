#!/usr/bin/env python3
"""The documentation corpus over HTTP: each case of a samples manifest sent
by paynotify-send --payload through nginx and the shim, judged against the
entry's "expected".  Called by test/e2e/samples.sh with a running stack.

For each case: a channel named after the case, configured as its "config"
says (keys from the vectors folder); the order put in its "before" state
(and the paid trade recorded when "paid_trade" is given); the payload sent
once, signed with the matching test key at the real clock (the stack's
clock: paynotify.now is not set); then the reply's outcome and
acknowledgement, the order's status, the channel's outbox events and the
payment and refund recorded compared with "expected", and for an
agreement notice ("expected"."agreement") one row of paynotify_agreement
naming its agreement id and the merchant's reference; the same payload
sent again must be answered "duplicate".  Afterwards the case's payments
and refunds are removed: several cases name the same order.

Prints one line per case: "PASS <desc>" or "FAIL <desc>: <why>" for cases
marked implemented, "NOTE <desc>" for the others (what happened, not
judged).

usage: samples.py MANIFEST VECTORS_DIR SEND URL_BASE
Environment: PN_PGBIN, STACK_DIR, STACK_PGPORT (the stack's cluster).
"""
import json
import os
import subprocess
import sys


def psql(sql, **vars_):
    """Runs sql (with psql variables) as the superuser; stdout, tuples only."""
    cmd = [os.path.join(os.environ["PN_PGBIN"], "psql"), "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1",
           "-h", os.path.join(os.environ["STACK_DIR"], "pg"), "-p", os.environ["STACK_PGPORT"],
           "-U", "postgres", "-d", "postgres"]
    for k, v in vars_.items():
        cmd += ["-v", "%s=%s" % (k, v)]
    p = subprocess.run(cmd, input=sql, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("psql: " + " | ".join(p.stderr.strip().splitlines()))
    return p.stdout.strip()


def read(vectors, rel, strip=False):
    with open(os.path.join(vectors, rel), encoding="utf-8") as f:
        s = f.read()
    return s.strip() if strip else s


# Several cases are of one account (app_id, mchid, Stripe secret), each on
# a channel of its own: what paynotify refuses unless allowed (test/fixture.sql
# allows it the same way).
SHARED = "SET paynotify.allow_shared_accounts = on;\n"


def configure(m, vectors):
    """The case's channel, and the paynotify-send key options matching it."""
    chan, cfg, gw = m["case"], m["config"], m["gateway"]
    keys = os.path.join(vectors, "keys")
    if gw == "wxpay":
        conf = {"apiv3_key": read(vectors, cfg["apiv3_key_file"], True)}
        for k in ("mchid", "appid", "tolerance_s"):
            if cfg.get(k) is not None:
                conf[k] = cfg[k]
        psql(SHARED + "SELECT paynotify_add_channel(:'chan', 'wxpay', :'conf'::jsonb);\n",
             chan=chan, conf=json.dumps(conf))
        send = []
        for i, (serial, pub) in enumerate(cfg["trusted"].items()):
            psql(SHARED + "SELECT paynotify_add_key(:'chan', :'serial', :'pem');\n",
                 chan=chan, serial=serial, pem=read(vectors, pub))
            if i == 0:
                send = ["--wx-key", os.path.join(vectors, pub.replace(".pub.pem", ".key.pem")),
                        "--serial", serial]
        return send + ["--apiv3-key", os.path.join(vectors, cfg["apiv3_key_file"]), "--keys", keys]
    if gw == "alipay":
        psql(SHARED + "SELECT paynotify_add_channel(:'chan', 'alipay', :'conf'::jsonb);\n",
             chan=chan, conf=json.dumps({"app_id": cfg["app_id"]}))
        for f in cfg["alipay_public_keys"]:
            psql(SHARED + "SELECT paynotify_add_key(:'chan', :'kid', :'pem');\n", chan=chan, kid=f, pem=read(vectors, f))
        first = cfg["alipay_public_keys"][0]
        return ["--alipay-key", os.path.join(vectors, first.replace(".pub.pem", ".key.pem")), "--keys", keys]
    conf = {k: cfg[k] for k in ("tolerance_s", "order_ref_path") if cfg.get(k) is not None}
    psql(SHARED + "SELECT paynotify_add_channel(:'chan', 'stripe', :'conf'::jsonb);\n", chan=chan, conf=json.dumps(conf))
    for f in cfg["secret_files"]:
        psql(SHARED + "SELECT paynotify_add_key(:'chan', :'kid', :'secret');\n", chan=chan, kid=f,
             secret=read(vectors, f, True))
    return ["--stripe-secret", os.path.join(vectors, cfg["secret_files"][0]), "--keys", keys]


def set_before(m):
    b = m.get("before")
    if not isinstance(b, dict):
        b = {}
    a = m.get("before_agreement")
    if isinstance(a, dict):
        psql("""INSERT INTO paynotify_agreement (channel, agreement_id, merchant_ref, state, gateway_state, signed_at)
	VALUES (:'chan', :'id', NULLIF(:'ref', ''), 'signed', 'prepared', now());
""", chan=m["case"], id=a["agreement_id"], ref=a.get("merchant_ref") or "")
    if not b:
        return
    psql("""ALTER TABLE orders DISABLE TRIGGER orders_guard;
INSERT INTO orders VALUES (:'ord', :'st', :'amt') ON CONFLICT (order_no)
	DO UPDATE SET status = EXCLUDED.status, amount_fen = EXCLUDED.amount_fen;
ALTER TABLE orders ENABLE TRIGGER orders_guard;
""", ord=b["order_no"], st=b["status"], amt=str(b["amount"]))
    if b.get("paid_trade"):
        psql("""INSERT INTO payment_record (channel, trade_no, order_no, amount, notify_id)
	VALUES (:'chan', :'trade', :'ord', :'amt', 'prepared');
""", chan=m["case"], trade=b["paid_trade"], ord=b["order_no"], amt=str(b["amount"]))


def send(m, samples, send_bin, url, key_opts):
    """paynotify-send --payload once; its --json report (or an error text)."""
    cmd = [send_bin, "--gateway", m["gateway"], "--payload", os.path.join(samples, m["files"]["payload"]),
           "--url", url + "/" + m["case"], "--timeout", "60", "--json", "--quiet"] + key_opts
    p = subprocess.run(cmd, capture_output=True, text=True)
    err = " | ".join(p.stderr.strip().splitlines())[-300:]
    try:
        return json.loads(p.stdout), None
    except ValueError:
        return None, "paynotify-send exit %d: %s" % (p.returncode, err)


def observe(m, rep):
    """What happened, in the terms of the manifest's "expected"."""
    chan = m["case"]
    b = m.get("before") if isinstance(m.get("before"), dict) else {}
    got = {"outcome": rep["reply"]["outcome"], "ack": bool(rep["reply"]["acked"])}
    st = psql("SELECT status FROM orders WHERE order_no = :'ord';\n", ord=b.get("order_no", ""))
    got["after_status"] = st or None
    got["events"] = json.loads(psql(
        "SELECT COALESCE(jsonb_agg(event ORDER BY id), '[]') FROM paynotify_outbox WHERE channel = :'chan';\n",
        chan=chan))
    got["payment"] = json.loads(psql(
        "SELECT COALESCE((SELECT jsonb_build_object('trade_no', trade_no, 'amount', amount) FROM payment_record"
        " WHERE channel = :'chan' AND notify_id <> 'prepared' ORDER BY trade_no LIMIT 1), 'null');\n", chan=chan))
    got["refund"] = json.loads(psql(
        "SELECT COALESCE((SELECT jsonb_build_object('refund_id', refund_id, 'amount', amount, 'status', status)"
        " FROM paynotify_refund WHERE channel = :'chan' ORDER BY refund_id LIMIT 1), 'null');\n", chan=chan))
    return got


def agreement_diffs(chan, want):
    """An agreement notice's agreement, recorded: one row of
    paynotify_agreement for the case's channel and the gateway's agreement
    id, holding the merchant's reference where the gateway has one, in the
    state the notice's action leaves it."""
    state = {"agreement_signed": "signed", "agreement_ended": "ended"}[want["action"]]
    n = psql("SELECT count(*) FROM paynotify_agreement a WHERE a.channel = :'chan'"
             " AND a.agreement_id = :'id' AND a.merchant_ref IS NOT DISTINCT FROM NULLIF(:'ref', '')"
             " AND a.state = :'st';\n",
             id=want["agreement_no"], ref=want.get("merchant_ref") or "", chan=chan, st=state)
    if n != "1":
        return ["%s rows of paynotify_agreement name channel %s, agreement %s, reference %s and state %s,"
                " expected 1" % (n, chan, want["agreement_no"], want.get("merchant_ref"), state)]
    return []


def run_case(m, samples, vectors, send_bin, url):
    key_opts = configure(m, vectors)
    set_before(m)
    rep, err = send(m, samples, send_bin, url, key_opts)
    if err:
        return [err], {}, None
    got = observe(m, rep)
    again, err = send(m, samples, send_bin, url, key_opts)
    again_outcome = again["reply"]["outcome"] if again else err
    exp = m["expected"]
    diffs = ["%s %s, expected %s" % (k, json.dumps(got.get(k), ensure_ascii=False),
                                     json.dumps(exp.get(k), ensure_ascii=False))
             for k in ("outcome", "ack", "after_status", "events", "payment", "refund")
             if k in exp and got.get(k) != exp[k]]
    if again_outcome != "duplicate":
        diffs.append("second delivery %s, expected duplicate" % again_outcome)
    if exp.get("agreement"):
        diffs += agreement_diffs(m["case"], exp["agreement"])
    psql("DELETE FROM paynotify_refund WHERE channel = :'chan';\n"
         "DELETE FROM payment_record WHERE channel = :'chan';\n", chan=m["case"])
    return diffs, got, again_outcome


def main():
    manifest, vectors, send_bin, url = sys.argv[1:5]
    samples = os.path.dirname(os.path.abspath(manifest))
    cases = json.load(open(manifest, encoding="utf-8"))
    cases.sort(key=lambda c: c["case"])
    cases.sort(key=lambda c: c["gateway"], reverse=True)
    for m in cases:
        desc = "%s (%s)" % (m["case"], m["gateway"])
        if m.get("config", {}).get("sign_content_rule"):
            # paynotify-send signs as the gateway signs its trade
            # notifications; a case signed by another rule is the replay's
            # (sql/samples.sql), not this test's
            print("NOTE %s, signed by another rule than paynotify-send's: not sent" % desc)
            continue
        try:
            diffs, got, again = run_case(m, samples, vectors, send_bin, url)
        except Exception as e:  # a broken case is a failed case, the run goes on
            diffs, got, again = ["%s: %s" % (type(e).__name__, e)], {}, None
        if not m.get("implemented"):
            print("NOTE %s, not implemented: %s%s" % (desc, "as expected" if not diffs else "; ".join(diffs),
                                                      "" if not got else " (got outcome %s, ack %s, again %s)"
                                                      % (got["outcome"], got["ack"], again)))
        elif diffs:
            print("FAIL %s: %s" % (desc, "; ".join(diffs)))
        else:
            print("PASS %s: %s, ack %s, order %s, events %s, again duplicate"
                  % (desc, got["outcome"], got["ack"], got["after_status"], got["events"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
