"""The reference model of paynotify's ledger (docs/LEDGER.md,
the rules src/apply.c follows) and the scenario generator.

Three parts:
  generate(rng, n)   random orders over wxpay, alipay and stripe, each with
                     the notifications the gateway will send for it, kept to
                     the scenarios whose ledger does not depend on the
                     arrival order (the spec's "What is order-independent");
                     some wxpay orders are paid together by a combine
                     payment (合单支付), and some Stripe refunds fail after
                     they succeeded (refund.failed)
  predict(order)     the end state those notifications must leave, whatever
                     their order and concurrency: the quantities the test
                     compares with the database; where the rules make the
                     order's status, anomalies or events depend on the
                     arrival order (a Stripe refund that fails after it
                     succeeded), the exact set of outcomes they allow
  simulate(order, arrivals)
                     the spec's rules applied step by step to one arrival
                     order (each notification's first arrival; later ones
                     are duplicates): used by the self-check to show that
                     predict() is what the rules give for every order, i.e.
                     that a discrepancy in the database test is a defect of
                     the code, not of the model

A combine payment is one notification that pays several orders: each of its
orders holds a view of it (kind "pay", with that order's sub-order's trade
and amount; "combine" names the shared notification), and an order that one
of its other sub-orders names (another merchant's, or unpaid: never applied)
holds a view of kind "other_sub".  Per order a combine payment is a payment
of that order's trade (docs/LEDGER.md, "Combine payment"), so the model stays
one order at a time.
"""
import itertools
import random

GATEWAYS = ("wxpay", "alipay", "stripe")
CUMULATIVE = ("alipay", "stripe")		# refund amounts may be totals per trade
FAILURE_FINAL = ("stripe",)			# a failed refund stays failed (refund_failure_final)
REFUNDED_TO_PAID = False			# the state machine has refunded -> paid (not by default)
MCHID = "1900000109"				# the wxpay channel's merchant (run.sh)
OTHER_MCHID = "1900000999"			# another merchant, in a combine payment
COMBINE_SHARE = 0.05				# of new orders that start a combine group


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
        self.orders = []		# generated so far
        self.closed = []		# of them, closed unpaid

    def next(self):
        self.n += 1
        return self.n


def generate(rng, norders, seed=0, combine_share=COMBINE_SHARE):
    """norders order scenarios (list of dicts), reproducible from rng;
    combine_share of the new orders start a combine payment's group."""
    g = Gen(seed)
    while len(g.orders) < norders:
        left = norders - len(g.orders)
        if left >= 2 and rng.random() < combine_share:
            _combine_group(rng, g, min(rng.choice((2, 2, 3)), left))
        else:
            o = _order(rng, g, len(g.orders) + 1)
            g.orders.append(o)
            if o["close"]:
                g.closed.append(o)
    return g.orders


def _combine_group(rng, g, k):
    """k wxpay orders paid together by one combine payment (sometimes by a
    second one too: each order's second trade, a double payment).  Each
    combine may carry sub-orders that must not be applied, naming an order
    generated before (half the time one closed unpaid): another merchant's,
    or this merchant's but unpaid."""
    combines = []
    for _ in range(2 if rng.random() < 0.15 else 1):
        combines.append({"nid": _nid(g, "wxpay"), "no": "MC%08d" % g.next(), "subs": [],
                         "orders": []})
    group = []
    for j in range(k):
        o = _order(rng, g, len(g.orders) + 1, gw="wxpay", combines=combines)
        g.orders.append(o)
        group.append(o)
    for c in combines:
        for _ in range(rng.choices((0, 1, 2), (45, 40, 15))[0]):
            pool = g.closed if g.closed and rng.random() < 0.5 else g.orders[:-k]
            if not pool:
                break
            target = rng.choice(pool)
            mchid, state = rng.choice(((OTHER_MCHID, "SUCCESS"), (MCHID, "NOTPAY")))
            c["subs"].append({"order": target["no"], "trade": _trade_id("wxpay", g),
                              "amount": target["amount"], "mchid": mchid, "state": state})
            view = _view(c, target, "other_sub")
            target["notes"].append(view)
            if target["no"] not in c["orders"]:
                c["orders"].append(target["no"])
        rng.shuffle(c["subs"])
    return group


def _view(c, o, kind, trade=None):
    """Order o's view of combine payment c."""
    return {"nid": c["nid"], "gw": "wxpay", "order": o["no"], "kind": kind,
            "trade": trade["id"] if trade else None,
            "trade_amount": trade["amount"] if trade else o["amount"],
            "charge": None, "refund_id": None,
            "amount": trade["amount"] if trade else None,
            "cum": None, "event": None, "listed": True, "combine": c}


def _order(rng, g, i, gw=None, combines=()):
    gw = gw or rng.choice(GATEWAYS)
    o = {"no": "MO%08d" % i, "gw": gw, "amount": rng.randint(100, 99999),
         "currency": CURRENCY[gw], "app_paid": False, "close": False,
         "trades": [], "notes": []}
    if not combines and gw == "alipay" and rng.random() < 0.10:
        # closed unpaid (only Alipay notifies a close); never paid
        o["close"] = True
        o["notes"].append(_note(g, o, "close"))
        return o
    if combines:
        # its combine payments' trades, sometimes one more of its own
        ntrades = len(combines) + rng.choices((0, 1), (85, 15))[0]
    else:
        ntrades = rng.choices((1, 2, 3), (72, 22, 6))[0]
    o["app_paid"] = rng.random() < 0.07
    # with several trades, every trade ends fully refunded or none does
    plan = rng.choices(("none", "partial", "full"), (25, 35, 40))[0]
    # A Stripe refund that fails after it succeeded (refund.failed after
    # charge.refunded): only as the one refund of an order's only trade.
    # A cumulative total taken after the failure, or another refund's
    # total, would make the ledger itself depend on the arrival order (a
    # total recorded before the failure arrives is computed on the failed
    # refund: docs/LEDGER.md, refund_total_after_failure); with one trade
    # and one refund only the status, anomalies and events do, and the
    # model knows exactly how (predict()).
    fail_after = (gw == "stripe" and ntrades == 1 and plan != "none"
                  and rng.random() < 0.3)
    for t in range(ntrades):
        tr = {"id": _trade_id(gw, g), "amount": o["amount"], "refunds": [], "listed": True}
        if gw == "stripe":
            tr["charge"] = "ch_M%09d" % g.next()
            tr["listed"] = rng.random() < 0.5
        o["trades"].append(tr)
        if t < len(combines):
            c = combines[t]
            c["subs"].append({"order": o["no"], "trade": tr["id"], "amount": tr["amount"],
                              "mchid": MCHID, "state": "SUCCESS"})
            c["orders"].append(o["no"])
            o["notes"].append(_view(c, o, "pay", trade=tr))
        else:
            o["notes"].append(_note(g, o, "pay", trade=tr))
        if fail_after:
            amt = tr["amount"] if plan == "full" else rng.randint(1, tr["amount"] - 1)
            rid = _refund_id(gw, g)
            note = _note(g, o, "refund", trade=tr, refund_id=rid, amount=amt, cum=amt)
            if not tr["listed"]:
                # known by the event's id: the failure, which names the
                # refund, finds no row of it (refund_failed_unmatched)
                note["refund_id"] = note["nid"]
            o["notes"].append(note)
            tr["refunds"].append(note["refund_id"])
            o["notes"].append(_note(g, o, "refund_fail", trade=tr, refund_id=rid,
                                    amount=amt, event="refund.failed"))
            continue
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


def _nid(g, gw):
    n = g.next()
    return {"wxpay": "m%08d-5eec-8000-%012d" % (g.seed % 10 ** 8, n),
            "alipay": "2026%08d%018d" % (g.seed % 10 ** 8, n),
            "stripe": "evt_M%d_%d" % (g.seed, n)}[gw]


def _note(g, o, kind, trade=None, refund_id=None, amount=None, cum=None, event=None):
    return {"nid": _nid(g, o["gw"]), "gw": o["gw"], "order": o["no"], "kind": kind,
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
    if any(n["kind"] == "pay" and n.get("combine") for n in o["notes"]):
        f.add("combine")
    if any(n["kind"] == "other_sub" for n in o["notes"]):
        f.add("named_by_other_sub_order")
    kinds = {}
    for n in o["notes"]:
        kinds.setdefault(n["refund_id"], set()).add(n["kind"])
    if o["gw"] in FAILURE_FINAL:
        if any(n["kind"] == "refund_fail" for n in o["notes"]):
            f.add("failed_after_success" if all(t["listed"] for t in o["trades"])
                  else "failed_after_unlisted_success")
    else:
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
    """The end state of order o.  Order-independent: payments, refunded
    (the ledger per trade), paid and closed events, the refund rows;
    "alts" lists every (status, anomalies, refunded events per trade) the
    rules allow: one, unless a Stripe refund fails after it succeeded
    (then two: its success applied first, its failure applied first);
    "failed_events" the refund_failed events each failure may leave."""
    final = o["gw"] in FAILURE_FINAL
    success = {}
    for n in o["notes"]:
        if n["kind"] == "refund":
            success[n["refund_id"]] = n
    fails = [n for n in o["notes"] if n["kind"] == "refund_fail"]
    undone = {n["refund_id"] for n in fails} if final else set()
    refunded = {t["id"]: 0 for t in o["trades"]}
    for rid, n in success.items():
        if rid not in undone:
            refunded[n["trade"]] += n["amount"]
    full = all(refunded[t["id"]] >= t["amount"] for t in o["trades"])
    if o["close"]:
        status = "cancelled"
    elif o["trades"]:
        status = "refunded" if full else "paid"
    else:
        status = "paid" if o["app_paid"] else "pending"
    # refund rows that must exist: (status, amount or None if not fixed)
    rows = {}
    for t in o["trades"]:
        if cumulative(o["gw"], t["listed"]):
            # an older total arriving after a newer one adds nothing: only
            # the last refund of the trade is sure to have its own row, and
            # its amount is fixed only when it is the trade's one refund
            if t["refunds"]:
                last = success[t["refunds"][-1]]
                rows[last["refund_id"]] = ("succeeded",
                                           last["cum"] if len(t["refunds"]) == 1 else None)
        else:
            for rid in t["refunds"]:
                rows[rid] = ("succeeded", success[rid]["amount"])
    failed_events = {}
    for n in fails:
        if final or n["refund_id"] not in success:
            rows[n["refund_id"]] = ("failed", n["amount"])
        # WeChat: a failure applied after its refund's success is ignored
        failed_events[n["nid"]] = ({0, 1} if not final and n["refund_id"] in success else {1},
                                   n["amount"])
    anomalies = {"double_payment": len(o["trades"]) - 1} if len(o["trades"]) > 1 else {}
    base = {"status": status, "anomalies": anomalies, "refunded_events": dict(refunded)}
    alts = [base]
    if final and fails:
        # one trade, its one refund R (amount a) failed: which of R's
        # success and failure is applied first decides.
        assert len(o["trades"]) == 1 and len(fails) == 1
        f = fails[0]
        t = f["trade"]
        a = f["amount"]
        whole = a >= o["trades"][0]["amount"]
        listed = f["refund_id"] in success
        if listed:
            # success first: recorded, the order refunded when a is all;
            # the failure undoes it (refund_failed_after_total) but a
            # refunded order stays so without refunded -> paid.  Failure
            # first: the success is ignored ("refund already failed").
            s_anom = dict(anomalies, refund_failed_after_total=1)
            s_status = "paid"
            if whole and not REFUNDED_TO_PAID:
                s_status = "refunded"
                s_anom["refund_failed_after_refunded"] = 1
            alts = [{"status": s_status, "anomalies": s_anom, "refunded_events": {t: a}},
                    {"status": "paid", "anomalies": dict(anomalies), "refunded_events": {t: 0}}]
        else:
            # the success is recorded under its event's id either way.
            # Success first: the failure finds no row of its refund id on a
            # trade with refunds (refund_failed_unmatched).  Failure first:
            # the total then counts on a trade with a failed refund
            # (refund_total_after_failure), and the order does not move.
            alts = [{"status": "refunded" if whole else "paid",
                     "anomalies": dict(anomalies, refund_failed_unmatched=1),
                     "refunded_events": {t: a}},
                    {"status": "paid",
                     "anomalies": dict(anomalies, refund_total_after_failure=1),
                     "refunded_events": {t: a}}]
    return {
        "payments": {t["id"]: t["amount"] for t in o["trades"]},
        "refunded": refunded,
        "paid_events": 1 if o["trades"] else 0,
        "closed_events": 1 if o["close"] else 0,
        "alts": alts,
        "rows": rows,
        "known_ids": set(success) | {n["refund_id"] for n in fails},
        "failed_events": failed_events,
    }


def alt_key(x):
    """A hashable form of one outcome (an element of predict()'s alts)."""
    return (x["status"], tuple(sorted(x["anomalies"].items())),
            tuple(sorted(x["refunded_events"].items())))


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
        final = n["gw"] in FAILURE_FINAL
        if k == "other_sub":
            # a combine payment's sub-order of another merchant, or unpaid
            return "ignored"
        if k == "pay":
            # also one sub-order of a combine payment: a payment of its own
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
            r = st["ref"].get(n["refund_id"])
            if r is not None and r["status"] == "succeeded":
                return "ignored"
            if r is not None and final:
                return "ignored"		# refund already failed
            before = trade_refunded(t)
            if cumulative(n["gw"], n["listed"]):
                amount = n["cum"] - before
            else:
                amount = n["amount"]
            if amount <= 0:
                return "ignored"
            st["ref"][n["refund_id"]] = {"trade": t, "amount": amount, "status": "succeeded"}
            if before + amount > st["pay"][t]:
                st["anom"].append("refunded_more_than_paid")
            doubtful = False
            if cumulative(n["gw"], n["listed"]) and final and any(
                    x["trade"] == t and x["status"] == "failed" for x in st["ref"].values()):
                st["anom"].append("refund_total_after_failure")
                doubtful = True
            if not doubtful and all(trade_refunded(x) >= a for x, a in st["pay"].items()):
                if st["status"] in REFUNDABLE:
                    st["status"] = "refunded"
                elif st["status"] not in ("refunded", "cancelled"):
                    st["anom"].append("refund_in_unrefundable_state")
            st["outbox"].append(("refunded", n["nid"], amount))
            return "processed"
        if k == "refund_fail":
            r = st["ref"].get(n["refund_id"])
            if r is not None and r["status"] == "succeeded" and final:
                # Stripe: the failure is final, the success undone
                r["status"] = "failed"
                amount = r["amount"]
                st["anom"].append("refund_failed_after_total")
                if st["status"] == "refunded":
                    if REFUNDED_TO_PAID:
                        st["status"] = "paid"
                    else:
                        st["anom"].append("refund_failed_after_refunded")
            elif r is not None:
                return "ignored"
            else:
                amount = n["amount"]
                st["ref"][n["refund_id"]] = {"trade": n["trade"], "amount": amount,
                                             "status": "failed"}
                if final and n["trade"] and trade_refunded(n["trade"]) > 0:
                    st["anom"].append("refund_failed_unmatched")
            if st["status"] == "refunding":
                st["status"] = "paid"
            st["outbox"].append(("refund_failed", n["nid"], amount))
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
    ref_events = {t: 0 for t in st["pay"]}
    failed_events = {}
    for e, nid, amt in st["outbox"]:
        if e == "refunded":
            t = by_id[nid]["trade"]
            ref_events[t] = ref_events.get(t, 0) + amt
        elif e == "refund_failed":
            failed_events.setdefault(nid, []).append(amt)
    return {
        "status": st["status"],
        "payments": dict(st["pay"]),
        "refunded": refunded,
        "refunded_events": ref_events,
        "paid_events": ev("paid"),
        "closed_events": ev("closed"),
        "anomalies": anomalies,
        "refund_rows": {rid: (r["status"], r["amount"]) for rid, r in st["ref"].items()},
        "failed_events": failed_events,
        "log": dict(st["log"]),
        "parked": list(st["parked"]),
    }


def agrees(o, sim, pred=None):
    """Differences between a simulation and the prediction ([] if none)."""
    p = pred or predict(o)
    d = []
    for k in ("payments", "refunded", "paid_events", "closed_events"):
        if sim[k] != p[k]:
            d.append((k, p[k], sim[k]))
    if alt_key(sim) not in {alt_key(x) for x in p["alts"]}:
        d.append(("outcome", p["alts"], {k: sim[k] for k in
                                         ("status", "anomalies", "refunded_events")}))
    rows = sim["refund_rows"]
    for rid, (status, amt) in p["rows"].items():
        row = rows.get(rid)
        if row is None or row[0] != status or (amt is not None and row[1] != amt):
            d.append(("refund_row " + rid, (status, amt), row))
    for rid, row in rows.items():
        if rid not in p["known_ids"]:
            d.append(("refund_row " + rid, None, row))
        elif rid not in p["rows"] and row[0] != "succeeded":
            d.append(("refund_row " + rid, "succeeded or none", row))
    for nid, (counts, amt) in p["failed_events"].items():
        got = sim["failed_events"].get(nid, [])
        if len(got) not in counts or any(x != amt for x in got):
            d.append(("refund_failed events " + nid, (counts, amt), got))
    if set(sim["failed_events"]) - set(p["failed_events"]):
        d.append(("refund_failed events", sorted(p["failed_events"]), sorted(sim["failed_events"])))
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


def exhaustive(o, limit=7):
    """For an order of at most limit notifications: every arrival order
    (first arrivals; a duplicate changes nothing) ends as predict() says,
    and every outcome predict() allows is reached by one of them: the set
    is exact.  Returns the differences ([] if none), None if too many."""
    nids = [n["nid"] for n in o["notes"]]
    if len(nids) > limit:
        return None
    p = predict(o)
    reached = set()
    for perm in itertools.permutations(nids):
        sim = simulate(o, perm)
        d = agrees(o, sim, p)
        if d:
            return [("arrivals", list(perm))] + d
        reached.add(alt_key(sim))
    unreached = [x for x in p["alts"] if alt_key(x) not in reached]
    return [("never reached", unreached)] if unreached else []


if __name__ == "__main__":
    rng = random.Random(1)
    orders = generate(rng, 2000, 1)
    for o in orders:
        for _ in range(20):
            d = agrees(o, simulate(o, random_arrivals(rng, o)))
            assert not d, (o, d)
        if len(predict(o)["alts"]) > 1:
            d = exhaustive(o)
            assert not d, (o, d)
    print("ledger: 2000 orders x 20 arrival orders agree with the prediction;"
          " %d orders' allowed outcomes all reached" %
          sum(1 for o in orders if len(predict(o)["alts"]) > 1))
