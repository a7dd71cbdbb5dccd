"""The reference model of paynotify's ledger (docs/LEDGER.md,
the rules src/apply.c follows) and the scenario generator.

Three parts:
  generate(rng, n)   random orders over wxpay, alipay and stripe, each with
                     the notifications the gateway will send for it, kept to
                     the scenarios whose ledger does not depend on the
                     arrival order (the spec's "What is order-independent");
                     some wxpay orders are paid together by a combine
                     payment (合单支付), some Stripe refunds fail after
                     they succeeded (refund.failed), and some Stripe orders
                     are disputed (charge.dispute.created / .closed: 1 or 2
                     disputes, won or lost, of all or part of the payment),
                     only on orders of one trade without refunds, each
                     dispute delivered after its order's payment (as
                     Stripe does: a dispute comes days after the payment;
                     before it, it is dispute_unmatched and recorded
                     nowhere)
  predict(order)     the end state those notifications must leave, whatever
                     their order and concurrency: the quantities the test
                     compares with the database; where the rules make the
                     order's status, anomalies or events depend on the
                     arrival order (a Stripe refund that fails after it
                     succeeded; whether a partly lost dispute was decided
                     alone; whether a dispute's open came before its
                     close), the exact set of outcomes they allow
  simulate(order, arrivals)
                     the spec's rules applied step by step to one arrival
                     order (each notification's first arrival; later ones
                     are duplicates; a dispute after its order's payment:
                     pay_first()): used by the self-check to show that
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
DISPUTE_SHARE = 0.25				# of Stripe orders of one trade, disputed
# the moves the model run adds to the state machine (model_test.py's
# setup_orders): an order follows its disputes (docs/LEDGER.md, "Disputes")
DISPUTE_MOVES = {("paid", "disputed"), ("disputed", "paid"), ("disputed", "refunded")}
WON = ("won", "warning_closed")			# a close's statuses that mean won


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
         "trades": [], "notes": [], "disputes": []}
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
    # Stripe disputes (charge.dispute.created, .closed): only on an order
    # of one trade with no refunds (a refund would change what the order
    # kept, which a lost dispute is measured against, at a moment that
    # depends on the arrival order), and each delivered after the order's
    # payment was acknowledged (model_test.py's Deliverer, pay_first()):
    # before it a dispute is dispute_unmatched and recorded nowhere.
    disputes = 0
    if gw == "stripe" and ntrades == 1 and not fail_after and rng.random() < DISPUTE_SHARE:
        plan = "none"
        disputes = rng.choice((1, 1, 2))
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
        for _ in range(disputes):
            _dispute(rng, g, o, tr)
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


def _dispute(rng, g, o, tr):
    """A dispute of trade tr: its created and closed notes.  Its amount is
    the trade's most of the time, sometimes a part of it; closed won,
    warning_closed (an inquiry closed: won) or lost."""
    amt = tr["amount"] if rng.random() < 0.7 else rng.randint(1, tr["amount"] - 1)
    did = "dp_M%09d" % g.next()
    status = rng.choice(("won", "warning_closed", "lost", "lost"))
    d = {"id": did, "amount": amt, "status": status,
         "outcome": "won" if status in WON else "lost"}
    o["disputes"].append(d)
    for kind, st in (("dispute_open", "warning_needs_response" if status == "warning_closed"
                      else "needs_response"), ("dispute_close", status)):
        n = _note(g, o, kind, trade=tr, amount=amt, event=st)
        n["dispute"] = did
        o["notes"].append(n)


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
    if o["disputes"]:
        f.add("dispute")
        if len(o["disputes"]) > 1:
            f.add("two_disputes")
        if any(d["outcome"] == "lost" for d in o["disputes"]):
            f.add("dispute_lost")
        if any(d["amount"] < o["trades"][0]["amount"] for d in o["disputes"]):
            f.add("dispute_of_part")
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
    # Stripe disputes (on an order of one trade with no refunds, each
    # after the payment): every dispute ends closed as its close says.
    # With none open, the lost ones either took what the order kept (then
    # refunded) or not (then back to paid, and dispute_lost_in_part).  That
    # anomaly is recorded at each decision that finds none open and some
    # but not all kept lost: when the end is refunded it is there exactly
    # when a dispute lost in part was decided alone first, which the
    # arrival order decides (both are allowed, if such a dispute exists).
    disputes = {}
    dispute_events = {}
    if o["disputes"]:
        assert alts == [base]
        kept = sum(max(t["amount"] - refunded[t["id"]], 0) for t in o["trades"])
        lost = [d["amount"] for d in o["disputes"] if d["outcome"] == "lost"]
        if lost and sum(lost) >= kept:
            base["status"] = "refunded"
            in_part = [False] + ([True] if any(a < kept for a in lost) else [])
        else:
            in_part = [bool(lost)]
        alts = [dict(base, anomalies=dict(anomalies, dispute_lost_in_part=1) if x
                     else dict(anomalies)) for x in in_part]
        for d in o["disputes"]:
            opened, closed = [n["nid"] for n in o["notes"] if n.get("dispute") == d["id"]]
            disputes[d["id"]] = (d["outcome"], d["amount"], opened, closed)
            # exactly one event per note: a close is applied (closing the
            # open dispute, or recording it closed when it came first); an
            # open after its close is handed on as a notification
            dispute_events[closed] = {("dispute_" + d["outcome"], d["amount"])}
            dispute_events[opened] = {("dispute_opened", d["amount"]), ("notification", None)}
    return {
        "payments": {t["id"]: t["amount"] for t in o["trades"]},
        "refunded": refunded,
        "paid_events": 1 if o["trades"] else 0,
        "closed_events": 1 if o["close"] else 0,
        "alts": alts,
        "rows": rows,
        "known_ids": set(success) | {n["refund_id"] for n in fails},
        "failed_events": failed_events,
        "disputes": disputes,
        "dispute_events": dispute_events,
    }


def norm_anomalies(counts):
    """Anomaly counts as the model compares them: dispute_lost_in_part is
    recorded at each decision that finds no dispute open and some lost,
    how many depends on the arrival order: only its presence counts.  Used
    alike for simulate()'s counts and the database's."""
    a = dict(counts)
    if a.get("dispute_lost_in_part"):
        a["dispute_lost_in_part"] = 1
    return a


def pay_first(o, arrivals):
    """arrivals with every dispute note (first arrival) moved after the
    first arrival of its order's payment: a dispute comes after the payment
    it disputes (the model test delivers it once the payment was
    acknowledged)."""
    pay = {n["trade"]: n["nid"] for n in o["notes"] if n["kind"] == "pay"}
    dnotes = {n["nid"]: pay[n["trade"]] for n in o["notes"] if n.get("dispute")}
    seq = list(arrivals)
    for i in range(len(seq)):
        # a dispute note before its payment's first arrival goes right after it
        nid = seq[i]
        if nid in dnotes and dnotes[nid] in seq[i:]:
            j = seq.index(dnotes[nid], i)
            seq[i:j + 1] = seq[i + 1:j + 1] + [nid]
            return pay_first(o, seq)
    return seq


def paid_first(o, arrivals):
    """Whether every dispute note of arrivals comes after its payment."""
    return pay_first(o, arrivals) == list(arrivals)


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
          "parked": [], "outbox": [], "anom": [], "log": {}, "disp": {}, "history": []}

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
        if k in ("dispute_open", "dispute_close"):
            return dispute(n)
        if k == "close":
            if st["status"] != "pending":
                return "ignored"
            st["status"] = "cancelled"
            st["outbox"].append(("closed", n["nid"], 0))
            return "processed"
        raise ValueError(k)

    def allowed(a, b):
        return (a, b) in DISPUTE_MOVES

    def move(to):
        st["history"].append((st["status"], to))
        st["status"] = to

    def dispute(n):
        # docs/LEDGER.md, "Disputes": the order of the trade's payment record
        t = n["trade"]
        if t not in st["pay"]:
            st["anom"].append("dispute_unmatched")
            return "anomaly"
        d = st["disp"].get(n["dispute"])
        if n["kind"] == "dispute_open":
            if d is not None:
                st["outbox"].append(("notification", n["nid"], None))
                return "ignored"	# recorded already: handed on
            st["disp"][n["dispute"]] = {"status": "open", "amount": n["amount"],
                                        "opened": n["nid"], "closed": None}
            event = "dispute_opened"
        else:
            outcome = "won" if n["event"] in WON else "lost"
            if d is not None and d["status"] != "open":
                st["outbox"].append(("notification", n["nid"], None))
                return "ignored"
            if d is None:
                d = st["disp"][n["dispute"]] = {"opened": None}
            d.update(status=outcome, amount=n["amount"], closed=n["nid"])
            event = "dispute_" + outcome
        dispute_move(n)
        st["outbox"].append((event, n["nid"], n["amount"]))
        return "processed"

    def dispute_move(n):
        # the order's state from all its disputes (apply.c dispute_move)
        status = st["status"]
        disputed = status == "disputed"
        ds = st["disp"].values()
        if any(d["status"] == "open" for d in ds):
            if not disputed and allowed(status, "disputed"):
                move("disputed")
            return
        lost = [d["amount"] for d in ds if d["status"] == "lost"]
        kept = sum(max(a - trade_refunded(t), 0) for t, a in st["pay"].items())
        if lost and sum(lost) >= kept:
            if status == "refunded":
                return
            if not disputed and allowed(status, "disputed") and allowed("disputed", "refunded"):
                move("disputed")
                disputed = True
            if disputed and allowed("disputed", "refunded"):
                move("refunded")
            else:
                st["anom"].append("dispute_lost_not_refunded")
            return
        if lost:
            st["anom"].append("dispute_lost_in_part")
        if disputed:
            before = [a for a, b in st["history"] if b == "disputed"]
            if before and allowed("disputed", before[-1]):
                move(before[-1])

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
    anomalies = norm_anomalies(anomalies)
    ref_events = {t: 0 for t in st["pay"]}
    failed_events = {}
    dispute_events = {}
    for e, nid, amt in st["outbox"]:
        if e == "refunded":
            t = by_id[nid]["trade"]
            ref_events[t] = ref_events.get(t, 0) + amt
        elif e == "refund_failed":
            failed_events.setdefault(nid, []).append(amt)
        elif e.startswith("dispute_") or e == "notification":
            dispute_events.setdefault(nid, []).append((e, amt))
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
        "disputes": {i: (d["status"], d["amount"], d["opened"], d["closed"])
                     for i, d in st["disp"].items()},
        "dispute_events": dispute_events,
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
    d += dispute_diffs(p, sim["disputes"], sim["dispute_events"])
    return d


def dispute_diffs(p, rows, events):
    """Differences of an order's dispute records and events from the
    prediction p ([(what, model, got)]): rows {dispute id: (status, amount,
    opened notify id, closed notify id)}, events {notify id: [(event,
    amount)]} of the dispute and notification events of the order.  Each
    dispute recorded once, closed as its close said, with its amount, closed
    by its close; opened by its open exactly when that open came first
    (then its event is dispute_opened, else the open is handed on as a
    notification); exactly one event per dispute note."""
    d = []
    for did in sorted(set(p["disputes"]) | set(rows)):
        want, got = p["disputes"].get(did), rows.get(did)
        if want is None or got is None:
            d.append(("dispute row " + did, want and want[:2], got and got[:2]))
            continue
        status, amount, opened, closed = want
        if got[:2] != (status, amount):
            d.append(("dispute row " + did, (status, amount), got[:2]))
        if got[3] != closed:
            d.append(("dispute row %s closed by" % did, closed, got[3]))
        ev = events.get(opened, [])
        first = [("dispute_opened", amount)] == ev
        if got[2] != (opened if first else None):
            d.append(("dispute row %s opened by" % did, "%s (its open's event %s)" % (
                opened if first else None, ev), got[2]))
    for nid, allowed in sorted(p["dispute_events"].items()):
        got = events.get(nid, [])
        if len(got) != 1 or got[0] not in allowed:
            d.append(("dispute events " + nid, "one of %s" % sorted(allowed, key=str), got))
    for nid in sorted(set(events) - set(p["dispute_events"])):
        d.append(("dispute events " + nid, None, events[nid]))
    return d


def random_arrivals(rng, o):
    """A random arrival order of o's notifications, with duplicates (a
    dispute after its payment)."""
    seq = []
    for n in o["notes"]:
        seq += [n["nid"]] * rng.choice((1, 1, 2, 3))
    rng.shuffle(seq)
    return pay_first(o, seq)


def several(o, p=None):
    """Whether the order's outcome is not one fixed end: several allowed
    outcomes, or dispute events that the arrival order chooses between
    (the self-checks then try every arrival order: exhaustive())."""
    p = p or predict(o)
    return len(p["alts"]) > 1 or bool(p["dispute_events"])


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
    events = set()
    for perm in itertools.permutations(nids):
        if not paid_first(o, perm):
            continue		# a dispute comes after its payment
        sim = simulate(o, perm)
        d = agrees(o, sim, p)
        if d:
            return [("arrivals", list(perm))] + d
        reached.add(alt_key(sim))
        events |= {(nid, e[0]) for nid, e in sim["dispute_events"].items()}
    unreached = [x for x in p["alts"] if alt_key(x) not in reached]
    unreached += [(nid, e) for nid, allowed in p["dispute_events"].items()
                  for e in allowed if (nid, e) not in events]
    return [("never reached", unreached)] if unreached else []


if __name__ == "__main__":
    rng = random.Random(1)
    orders = generate(rng, 2000, 1)
    for o in orders:
        for _ in range(20):
            d = agrees(o, simulate(o, random_arrivals(rng, o)))
            assert not d, (o, d)
        if several(o):
            d = exhaustive(o)
            assert d is not None, ("too many notifications to try all", o)
            assert not d, (o, d)
    print("ledger: 2000 orders x 20 arrival orders agree with the prediction;"
          " %d orders' allowed outcomes all reached (%d disputed)" % (
              sum(1 for o in orders if several(o)), sum(1 for o in orders if o["disputes"])))


# ---- agreements (subscriptions) -------------------------------------------------
#
# The subscriptions contract (model_test.py --agreements; run.sh runs it
# after the orders by default): an agreement is signed and ended by notices of
# its own (WeChat Pay ENTRUST.SIGN / ENTRUST.TERMINATE, Alipay
# dut_user_sign / dut_user_unsign, Stripe customer.subscription.created and
# .deleted or .updated to canceled), each the events agreement_signed /
# agreement_ended; its charges are ordinary payments of orders of their own
# (WeChat Pay trade_type PAP naming the contract, Alipay trade notices,
# Stripe invoice.paid of a renewal with the order in the invoice's own
# metadata.order_id, trade number the invoice id), each paying its order once (event paid); a Stripe invoice.payment_failed
# leaves its order pending with the event payment_failed.  Every notice of
# an agreement is delivered in any order (its end before its signing, its
# charges before either), with duplicates.

AGREEMENT_FAILED_SHARE = 0.3		# of Stripe agreements, with a failed charge


def generate_agreements(rng, n, first_order=1):
    """n agreements over the three gateways, each with its signing, 1-3
    charges (orders AO...), for Stripe sometimes a failed charge (another
    order, which stays pending), and its end; reproducible from rng."""
    out = []
    k = first_order
    for i in range(1, n + 1):
        gw = rng.choice(GATEWAYS)
        a = {"no": "AG%06d" % i, "gw": gw, "charges": [], "failed": []}
        a["id"] = {"wxpay": "2026%014d" % i, "alipay": "2026%016d" % i,
                   "stripe": "sub_MODEL%019d" % i}[gw]
        a["ref"] = "REF" + a["no"]
        a["sign"] = {"nid": _agreement_nid(gw, a, "sign"), "gw": gw, "order": a["no"],
                     "kind": "agreement_sign", "agreement": a}
        a["end"] = {"nid": _agreement_nid(gw, a, "end"), "gw": gw, "order": a["no"],
                    "kind": "agreement_end", "agreement": a,
                    "via_update": gw == "stripe" and rng.random() < 0.5}
        for j in range(rng.choice((1, 2, 3))):
            o = {"no": "AO%08d" % k, "gw": gw, "amount": rng.randint(100, 99999),
                 "currency": CURRENCY[gw], "app_paid": False}
            k += 1
            o["note"] = {"nid": _agreement_nid(gw, a, "charge%d" % j), "gw": gw, "order": o["no"],
                         "kind": "charge", "agreement": a, "amount": o["amount"],
                         "trade": {"wxpay": "4200%016d" % k, "alipay": "2026%024d" % k,
                                   "stripe": "in_MODEL%018d" % k}[gw]}
            a["charges"].append(o)
        if gw == "stripe" and rng.random() < AGREEMENT_FAILED_SHARE:
            o = {"no": "AO%08d" % k, "gw": gw, "amount": rng.randint(100, 99999),
                 "currency": CURRENCY[gw], "app_paid": False}
            k += 1
            o["note"] = {"nid": _agreement_nid(gw, a, "failed"), "gw": gw, "order": o["no"],
                         "kind": "charge_failed", "agreement": a, "amount": o["amount"],
                         "trade": "in_MODELF%017d" % k}
            a["failed"].append(o)
        out.append(a)
    return out


def _agreement_nid(gw, a, what):
    if gw == "wxpay":
        return "EV-AGR-%s-%s" % (a["no"], what)
    if gw == "alipay":
        return "2026%s%s" % (a["no"][2:], what)
    return "evt_AGR%s%s" % (a["no"], what)


def agreement_notes(a):
    """Every notice of agreement a, once each."""
    return [a["sign"], a["end"]] + [o["note"] for o in a["charges"] + a["failed"]]


def predict_agreement(a, sign_first):
    """What a's notices must leave, whatever their order: per order its
    status, payments and events; per agreement its events by notice id.
    sign_first: whether the signing was acknowledged before the end was
    first delivered (then it must have signed; otherwise the contract
    leaves a late signing to the extension, at most one agreement_signed)."""
    orders = {}
    for o in a["charges"]:
        n = o["note"]
        orders[o["no"]] = {"status": "paid", "payments": [(n["trade"], o["amount"])],
                           "events": {"paid": 1}}
    for o in a["failed"]:
        orders[o["no"]] = {"status": "pending", "payments": [], "events": {"payment_failed": 1}}
    events = {("agreement_ended", a["end"]["nid"]): (1, 1),
              ("agreement_signed", a["sign"]["nid"]): (1, 1) if sign_first else (0, 1)}
    return orders, events
