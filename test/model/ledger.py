"""The reference model of paynotify's ledger (docs/LEDGER.md,
the rules src/apply.c follows) and the scenario generator.

Three parts:
  generate(rng, n)   random orders over wxpay, alipay and stripe, each with
                     the notifications the gateway will send for it, kept to
                     the scenarios whose end state does not depend on the
                     arrival order (the spec's "What is order-independent")
  predict(order)     the end state those notifications must leave, whatever
                     their order and concurrency: the quantities the test
                     compares with the database
  simulate(order, arrivals)
                     the spec's rules applied step by step to one arrival
                     order (each notification's first arrival; later ones
                     are duplicates): used by the self-check to show that
                     predict() is what the rules give for every order, i.e.
                     that a discrepancy in the database test is a defect of
                     the code, not of the model
"""
import random

GATEWAYS = ("wxpay", "alipay", "stripe")
CUMULATIVE = ("alipay", "stripe")		# refund amounts may be totals per trade


def cumulative(gw, listed=True):
    """Whether a refund notice states the trade's total refunded: Alipay's
    and Stripe's charge.refunded, whether or not the charge lists its
    refunds (listed, it names the newest refund; unlisted, the refund is
    known by the event's id)."""
    return gw in CUMULATIVE
CURRENCY = {"wxpay": "CNY", "alipay": "CNY", "stripe": "USD"}


def split(rng, total, k):
    """k positive integers summing to total (total >= k)."""
    cuts = sorted(rng.sample(range(1, total), k - 1)) if k > 1 else []
    edges = [0] + cuts + [total]
    return [edges[i + 1] - edges[i] for i in range(k)]


class Gen:
    """Identifiers unique within one run (one fresh database)."""

    def __init__(self, seed):
        self.seed = seed
        self.n = 0

    def next(self):
        self.n += 1
        return self.n


def generate(rng, norders, seed=0):
    """norders order scenarios (list of dicts), reproducible from rng."""
    g = Gen(seed)
    orders = []
    for i in range(norders):
        orders.append(_order(rng, g, i + 1))
    return orders


def _order(rng, g, i):
    gw = rng.choice(GATEWAYS)
    o = {"no": "MO%08d" % i, "gw": gw, "amount": rng.randint(100, 99999),
         "currency": CURRENCY[gw], "app_paid": False, "close": False,
         "trades": [], "notes": []}
    if gw == "alipay" and rng.random() < 0.10:
        # closed unpaid (only Alipay notifies a close); never paid
        o["close"] = True
        o["notes"].append(_note(g, o, "close"))
        return o
    ntrades = rng.choices((1, 2, 3), (72, 22, 6))[0]
    o["app_paid"] = rng.random() < 0.07
    # with several trades, every trade ends fully refunded or none does
    plan = rng.choices(("none", "partial", "full"), (25, 35, 40))[0]
    for t in range(ntrades):
        tr = {"id": _trade_id(gw, g), "amount": o["amount"], "refunds": [], "listed": True}
        if gw == "stripe":
            tr["charge"] = "ch_M%09d" % g.next()
            tr["listed"] = rng.random() < 0.5
        o["trades"].append(tr)
        o["notes"].append(_note(g, o, "pay", trade=tr))
        if plan == "full":
            parts = split(rng, tr["amount"], min(rng.choice((1, 1, 2, 2, 3)), tr["amount"]))
        elif plan == "partial" and rng.random() < 0.8:
            total = rng.randint(1, tr["amount"] - 1)
            parts = split(rng, total, min(rng.choice((1, 2, 2)), total))
        else:
            parts = []
        cum = 0
        for amt in parts:
            cum += amt
            rid = _refund_id(gw, g)
            if gw == "wxpay" and rng.random() < 0.25:
                # REFUND.ABNORMAL, completed later under the same refund_id
                o["notes"].append(_note(g, o, "refund_fail", trade=tr, refund_id=rid,
                                        amount=amt, event="REFUND.ABNORMAL"))
            note = _note(g, o, "refund", trade=tr, refund_id=rid, amount=amt, cum=cum)
            if not tr["listed"]:
                # no refunds list: the refund is known by its event's id
                note["refund_id"] = rid = note["nid"]
            o["notes"].append(note)
            tr["refunds"].append(rid)
        if gw == "wxpay" and rng.random() < 0.10:
            # a refund that failed and was never completed: counts for nothing
            rid = _refund_id(gw, g)
            o["notes"].append(_note(g, o, "refund_fail", trade=tr, refund_id=rid,
                                    amount=rng.randint(1, tr["amount"]),
                                    event=rng.choice(("REFUND.ABNORMAL", "REFUND.CLOSED"))))
    return o


def _trade_id(gw, g):
    n = g.next()
    return {"wxpay": "42%026d" % n, "alipay": "2026%024d" % n,
            "stripe": "pi_M%09d" % n}[gw]


def _refund_id(gw, g):
    n = g.next()
    return {"wxpay": "503%026d" % n, "alipay": "RFM%012d" % n,
            "stripe": "re_M%09d" % n}[gw]


def _note(g, o, kind, trade=None, refund_id=None, amount=None, cum=None, event=None):
    n = g.next()
    nid = {"wxpay": "m%08d-5eec-8000-%012d" % (g.seed % 10 ** 8, n),
           "alipay": "2026%08d%018d" % (g.seed % 10 ** 8, n),
           "stripe": "evt_M%d_%d" % (g.seed, n)}[o["gw"]]
    return {"nid": nid, "gw": o["gw"], "order": o["no"], "kind": kind,
            "trade": trade["id"] if trade else None,
            "trade_amount": trade["amount"] if trade else o["amount"],
            "charge": trade.get("charge") if trade else None,
            "refund_id": refund_id, "amount": amount if amount is not None else
            (trade["amount"] if trade else None),
            "cum": cum, "event": event, "listed": trade["listed"] if trade else True}


def features(o):
    """Scenario features, for attributing discrepancies to defects."""
    f = set()
    f.add(o["gw"])
    if any(cumulative(o["gw"], t["listed"]) for t in o["trades"]) or o["gw"] == "alipay":
        f.add("cumulative")
    if o["close"]:
        f.add("close")
    if len(o["trades"]) > 1:
        f.add("double_payment")
    if o["app_paid"]:
        f.add("app_paid")
    kinds = {}
    for n in o["notes"]:
        kinds.setdefault(n["refund_id"], set()).add(n["kind"])
    if any(k == {"refund", "refund_fail"} for k in kinds.values()):
        f.add("fail_then_success")
    if any(k == {"refund_fail"} for k in kinds.values()):
        f.add("fail_only")
    if any(len(t["refunds"]) > 1 for t in o["trades"]):
        f.add("several_refunds_per_trade")
    if any(t["refunds"] for t in o["trades"]):
        f.add("refunded_some")
    return f


# ---- what every arrival order must end in ---------------------------------

def predict(o):
    """The order-independent end state of order o."""
    refunded = {t["id"]: 0 for t in o["trades"]}
    success_ids = {}
    for n in o["notes"]:
        if n["kind"] == "refund":
            refunded[n["trade"]] += n["amount"]
            success_ids[n["refund_id"]] = n
    fail_only = sorted({n["refund_id"] for n in o["notes"] if n["kind"] == "refund_fail"}
                       - set(success_ids))
    full = all(refunded[t["id"]] >= t["amount"] for t in o["trades"])
    if o["close"]:
        status = "cancelled"
    elif o["trades"]:
        status = "refunded" if full else "paid"
    else:
        status = "paid" if o["app_paid"] else "pending"
    must_succeed = {}
    for t in o["trades"]:
        if cumulative(o["gw"], t["listed"]):
            # an older total arriving after a newer one adds nothing: only
            # the last refund of the trade is sure to have its own row
            if t["refunds"]:
                must_succeed[t["refunds"][-1]] = None
        else:
            for rid in t["refunds"]:
                must_succeed[rid] = success_ids[rid]["amount"]
    return {
        "status": status,
        "payments": {t["id"]: t["amount"] for t in o["trades"]},
        "refunded": refunded,
        "paid_events": 1 if o["trades"] else 0,
        "closed_events": 1 if o["close"] else 0,
        "anomalies": {"double_payment": len(o["trades"]) - 1} if len(o["trades"]) > 1 else {},
        "succeeded_ids": must_succeed,
        "failed_ids": fail_only,
        "success_ids": sorted(success_ids),
    }


# ---- the spec's rules, one notification at a time --------------------------

REFUNDABLE = ("paid", "received", "refunding")


def simulate(o, arrivals):
    """Apply the notifications of o in the order of arrivals (notify ids;
    repeats are duplicates and change nothing) by the rules of docs/LEDGER.md and
    return the same quantities as predict()."""
    by_id = {n["nid"]: n for n in o["notes"]}
    st = {"status": "paid" if o["app_paid"] else "pending", "pay": {}, "ref": {},
          "parked": [], "outbox": [], "anom": [], "log": {}}

    def trade_refunded(t):
        return sum(r["amount"] for r in st["ref"].values()
                   if r["trade"] == t and r["status"] == "succeeded")

    def apply_parked(trade=None):
        for nid in list(st["parked"]):
            n = by_id[nid]
            if trade is not None and n["trade"] != trade:
                continue
            st["parked"].remove(nid)
            st["log"][nid] = apply(n)

    def apply(n):
        k = n["kind"]
        if k == "pay":
            t = n["trade"]
            if t in st["pay"]:
                return "ignored"
            if st["status"] == "pending":
                st["status"] = "paid"
                st["pay"][t] = n["amount"]
                st["outbox"].append(("paid", n["nid"], n["amount"]))
                apply_parked()
                return "processed"
            if not st["pay"] and st["status"] not in ("cancelled", "refunded"):
                st["pay"][t] = n["amount"]
                st["outbox"].append(("paid", n["nid"], n["amount"]))
                apply_parked()
                return "processed"
            st["pay"][t] = n["amount"]
            st["anom"].append("paid_after_cancel" if st["status"] == "cancelled"
                              else "double_payment")
            apply_parked(t)
            return "ignored"
        if k == "refund":
            t = n["trade"]
            if t not in st["pay"]:
                if n["nid"] not in st["parked"]:
                    st["parked"].append(n["nid"])
                return "parked"
            if cumulative(n["gw"], n["listed"]):
                amount = n["cum"] - trade_refunded(t)
                if amount <= 0:
                    return "ignored"
            else:
                amount = n["amount"]
            r = st["ref"].get(n["refund_id"])
            if r is not None and r["status"] == "succeeded":
                return "ignored"
            st["ref"][n["refund_id"]] = {"trade": t, "amount": amount, "status": "succeeded"}
            st["outbox"].append(("refunded", n["nid"], amount))
            if trade_refunded(t) > st["pay"][t]:
                st["anom"].append("refunded_more_than_paid")
            if all(trade_refunded(x) >= a for x, a in st["pay"].items()):
                if st["status"] in REFUNDABLE:
                    st["status"] = "refunded"
                elif st["status"] not in ("refunded", "cancelled"):
                    st["anom"].append("refund_in_unrefundable_state")
            return "processed"
        if k == "refund_fail":
            if n["refund_id"] in st["ref"]:
                return "ignored"
            st["ref"][n["refund_id"]] = {"trade": n["trade"], "amount": n["amount"],
                                         "status": "failed"}
            st["outbox"].append(("refund_failed", n["nid"], n["amount"]))
            if st["status"] == "refunding":
                st["status"] = "paid"
            return "processed"
        if k == "close":
            if st["status"] != "pending":
                return "ignored"
            st["status"] = "cancelled"
            st["outbox"].append(("closed", n["nid"], 0))
            return "processed"
        raise ValueError(k)

    for nid in arrivals:
        if nid in st["log"]:
            continue
        st["log"][nid] = apply(by_id[nid])

    refunded = {t: 0 for t in st["pay"]}
    for r in st["ref"].values():
        if r["status"] == "succeeded" and r["trade"] in refunded:
            refunded[r["trade"]] += r["amount"]
    ev = lambda e: sum(1 for x in st["outbox"] if x[0] == e)
    anomalies = {}
    for a in st["anom"]:
        anomalies[a] = anomalies.get(a, 0) + 1
    ref_events = {}
    for e, nid, amt in st["outbox"]:
        if e == "refunded":
            t = by_id[nid]["trade"]
            ref_events[t] = ref_events.get(t, 0) + amt
    return {
        "status": st["status"],
        "payments": dict(st["pay"]),
        "refunded": refunded,
        "refunded_events": ref_events,
        "paid_events": ev("paid"),
        "closed_events": ev("closed"),
        "anomalies": anomalies,
        "refund_rows": {rid: (r["status"], r["amount"]) for rid, r in st["ref"].items()},
        "log": dict(st["log"]),
        "parked": list(st["parked"]),
    }


def agrees(o, sim, pred=None):
    """Differences between a simulation and the prediction ([] if none)."""
    p = pred or predict(o)
    d = []
    for k in ("status", "payments", "paid_events", "closed_events", "anomalies"):
        if sim[k] != p[k]:
            d.append((k, p[k], sim[k]))
    if sim["refunded"] != p["refunded"]:
        d.append(("refunded", p["refunded"], sim["refunded"]))
    evs = {t: sim["refunded_events"].get(t, 0) for t in p["refunded"]}
    if evs != p["refunded"]:
        d.append(("refunded_events", p["refunded"], evs))
    for rid, amt in p["succeeded_ids"].items():
        row = sim["refund_rows"].get(rid)
        if row is None or row[0] != "succeeded" or (amt is not None and row[1] != amt):
            d.append(("refund_row " + rid, ("succeeded", amt), row))
    for rid in p["failed_ids"]:
        row = sim["refund_rows"].get(rid)
        if row is None or row[0] != "failed":
            d.append(("refund_row " + rid, "failed", row))
    if sim["parked"]:
        d.append(("parked", [], sim["parked"]))
    return d


def random_arrivals(rng, o):
    """A random arrival order of o's notifications, with duplicates."""
    seq = []
    for n in o["notes"]:
        seq += [n["nid"]] * rng.choice((1, 1, 2, 3))
    rng.shuffle(seq)
    return seq


if __name__ == "__main__":
    rng = random.Random(1)
    for o in generate(rng, 2000, 1):
        for _ in range(20):
            d = agrees(o, simulate(o, random_arrivals(rng, o)))
            assert not d, (o, d)
    print("ledger: 2000 orders x 20 arrival orders agree with the prediction")
