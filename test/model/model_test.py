#!/usr/bin/python3
"""Model-based concurrency test of paynotify's ledger (issue 10).

Generates random orders over WeChat Pay, Alipay and Stripe (payments,
double payments, WeChat combine payments (合单支付) over 2-3 orders with
sub-orders of another merchant or unpaid that must not be applied, partial
and full refunds, failed refunds and their later success, Stripe refunds
that fail after they succeeded, Stripe disputes won or lost, closes,
refunds before payments), signs every notification as its gateway does,
and delivers them from several backends at once in random order with
duplicates, redelivering every reply that is not an acknowledgement like a
gateway would; a dispute is sent only once its order's payment was
acknowledged (held back until then).  After quiescence every order is
compared with the reference model (ledger.py): its payment records,
refund rows, dispute rows and sums exactly; its status, anomalies and
events as the one outcome the rules allow or, where the arrival order
decides (a Stripe refund failed after it succeeded, a dispute lost in part
decided alone before the rest took all, a dispute's open after its close),
as one of those they allow; and the ledger's invariants are checked.  The
state machine gets the moves of a "disputed" state.  Exit status 0 only
when nothing differs.

Run by test/model/run.sh, which starts the database; see --help.
"""
import argparse
import collections
import heapq
import json
import os
import random
import sys
import threading
import time

import psycopg2
import psycopg2.extras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import ledger  # noqa: E402
import pnsign  # noqa: E402

WX = pnsign.WeChat(1)
ALI = pnsign.Alipay(1)
STRIPE = pnsign.Stripe(1)


def yuan(fen):
    return "%d.%02d" % (fen // 100, fen % 100)


# ---- requests ----------------------------------------------------------------

def prepare(n, rng):
    """The parts of n's request that do not change between deliveries."""
    gw, kind = n["gw"], n["kind"]
    if gw == "wxpay":
        nonce = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(12))
        if n.get("combine"):
            # a combine payment: one notification, the same bytes for
            # every order it names (each order's view of it)
            c = n["combine"]
            if "body" not in c:
                plain = {"combine_appid": WX.appid, "combine_mchid": WX.mchid,
                         "combine_out_trade_no": c["no"], "scene_info": {"device_id": "POS1:1"},
                         "sub_orders": [{
                             "mchid": sub["mchid"], "trade_type": "JSAPI",
                             "trade_state": sub["state"], "bank_type": "OTHERS", "attach": "",
                             "success_time": "2026-01-01T08:00:05+08:00",
                             "transaction_id": sub["trade"], "out_trade_no": sub["order"],
                             "amount": {"total_amount": sub["amount"],
                                        "payer_amount": sub["amount"],
                                        "currency": "CNY", "payer_currency": "CNY"}}
                             for sub in c["subs"]],
                         "combine_payer_info": {"openid": "oMODEL" + c["no"]}}
                c["body"] = WX.envelope(c["nid"], "TRANSACTION.SUCCESS", plain, "transaction",
                                        "支付成功", nonce)
            n["body"] = c["body"]
        elif kind == "pay":
            plain = {"mchid": WX.mchid, "appid": WX.appid, "out_trade_no": n["order"],
                     "transaction_id": n["trade"], "trade_type": "JSAPI",
                     "trade_state": "SUCCESS", "trade_state_desc": "支付成功",
                     "bank_type": "OTHERS", "attach": "",
                     "success_time": "2026-01-01T08:00:05+08:00",
                     "payer": {"openid": "oMODEL" + n["order"]},
                     "amount": {"total": n["amount"], "payer_total": n["amount"],
                                "currency": "CNY", "payer_currency": "CNY"}}
            n["body"] = WX.envelope(n["nid"], "TRANSACTION.SUCCESS", plain, "transaction",
                                    "支付成功", nonce)
        else:
            event = "REFUND.SUCCESS" if kind == "refund" else n["event"]
            status = event.split(".")[1]
            plain = {"mchid": WX.mchid, "out_trade_no": n["order"],
                     "transaction_id": n["trade"], "out_refund_no": "RF" + n["refund_id"][3:],
                     "refund_id": n["refund_id"], "refund_status": status,
                     "user_received_account": "支付用户零钱",
                     "amount": {"total": n["trade_amount"], "refund": n["amount"],
                                "payer_total": n["trade_amount"], "payer_refund": n["amount"]}}
            if status == "SUCCESS":
                plain["success_time"] = "2026-01-01T09:00:00+08:00"
            n["body"] = WX.envelope(n["nid"], event, plain, "refund",
                                    {"SUCCESS": "退款成功", "ABNORMAL": "退款异常",
                                     "CLOSED": "退款关闭"}[status], nonce)
    elif gw == "alipay":
        f = [("gmt_create", "2026-01-01 08:00:00"), ("charset", "utf-8"),
             ("subject", "模型订单 " + n["order"]), ("buyer_id", "2088000000000001"),
             ("version", "1.0"), ("notify_id", n["nid"]), ("notify_type", "trade_status_sync"),
             ("out_trade_no", n["order"]), ("total_amount", yuan(n["trade_amount"])),
             ("auth_app_id", ALI.app_id), ("app_id", ALI.app_id),
             ("seller_id", "2088000000000002")]
        if kind != "close":
            f += [("gmt_payment", "2026-01-01 08:00:05"), ("trade_no", n["trade"]),
                  ("invoice_amount", yuan(n["trade_amount"])),
                  ("receipt_amount", yuan(n["trade_amount"])),
                  ("buyer_pay_amount", yuan(n["trade_amount"]))]
        if kind == "pay":
            # as Alipay's documented payment notice: refund_fee=0.00 and
            # gmt_close on a payment (no refund without gmt_refund/out_biz_no)
            f += [("trade_status", "TRADE_SUCCESS"), ("refund_fee", "0.00"),
                  ("gmt_close", "2026-01-01 08:30:00")]
        elif kind == "refund":
            f += [("trade_status", "TRADE_CLOSED" if n["cum"] == n["trade_amount"]
                   else "TRADE_SUCCESS"),
                  ("refund_fee", yuan(n["cum"])), ("out_biz_no", n["refund_id"]),
                  ("gmt_refund", "2026-01-01 09:00:00.123")]
        elif kind == "close":
            f += [("trade_status", "TRADE_CLOSED"), ("refund_fee", "0.00"),
                  ("gmt_close", "2026-01-01 10:00:00")]
        else:
            raise ValueError(kind)
        n["fields"] = f
    else:
        if kind == "pay":
            obj = {"id": n["trade"], "object": "payment_intent", "amount": n["amount"],
                   "amount_received": n["amount"], "currency": "usd",
                   "latest_charge": n["charge"], "livemode": False,
                   "metadata": {"order_id": n["order"]}, "status": "succeeded"}
            data = {"object": obj}
            typ = "payment_intent.succeeded"
        elif kind == "refund":
            obj = {"id": n["charge"], "object": "charge", "amount": n["trade_amount"],
                   "amount_refunded": n["cum"], "currency": "usd", "livemode": False,
                   "metadata": {"order_id": n["order"]}, "payment_intent": n["trade"],
                   "refunded": n["cum"] == n["trade_amount"],
                   "status": "succeeded"}
            if n["listed"]:
                obj["refunds"] = {"object": "list", "has_more": False, "data": [
                    {"id": n["refund_id"], "object": "refund", "amount": n["amount"],
                     "charge": n["charge"], "currency": "usd",
                     "payment_intent": n["trade"], "status": "succeeded"}]}
            data = {"object": obj, "previous_attributes": {"amount_refunded": n["cum"] - n["amount"]}}
            typ = "charge.refunded"
        elif kind == "refund_fail":
            # the refund itself, failed after it succeeded; its metadata
            # names the order as the charge's does
            obj = {"id": n["refund_id"], "object": "refund", "amount": n["amount"],
                   "charge": n["charge"], "currency": "usd",
                   "failure_reason": "expired_or_canceled_card",
                   "metadata": {"order_id": n["order"]}, "payment_intent": n["trade"],
                   "status": "failed"}
            data = {"object": obj}
            typ = "refund.failed"
        elif kind in ("dispute_open", "dispute_close"):
            # the dispute: it names the payment intent and charge, not the
            # order (its metadata is its own, empty)
            obj = {"id": n["dispute"], "object": "dispute", "amount": n["amount"],
                   "balance_transactions": [], "charge": n["charge"], "currency": "usd",
                   "evidence_details": {"has_evidence": False, "submission_count": 0},
                   "is_charge_refundable": False, "livemode": False, "metadata": {},
                   "payment_intent": n["trade"], "reason": "fraudulent", "status": n["event"]}
            data = {"object": obj}
            if kind == "dispute_close":
                data["previous_attributes"] = {"status": "under_review"}
            typ = "charge.dispute.created" if kind == "dispute_open" else "charge.dispute.closed"
        else:
            raise ValueError(kind)
        n["event_doc"] = {"id": n["nid"], "object": "event", "api_version": "2025-03-31.basil",
                          "created": 1767225990, "data": data, "livemode": False,
                          "pending_webhooks": 1, "request": {"id": None, "idempotency_key": None},
                          "type": typ}


def request(n, attempt):
    """(headers, body) of one delivery, signed now: every retry is re-signed
    with a fresh timestamp, as the gateways do."""
    gw = n["gw"]
    if gw == "wxpay":
        return WX.headers(n["body"]), n["body"]
    if gw == "alipay":
        body = ALI.body(n["fields"] + [("notify_time", time.strftime("%Y-%m-%d %H:%M:%S"))])
        return ALI.headers(), body
    doc = dict(n["event_doc"])
    doc["pending_webhooks"] = 1 + attempt % 3	# differs between deliveries
    body = json.dumps(doc, ensure_ascii=False, indent=2).encode()
    return STRIPE.headers(body), body


def acknowledged(gw, status, body):
    """Each gateway's own rule for a successful reply."""
    if gw == "wxpay":
        return status in (200, 204)
    if gw == "alipay":
        return status == 200 and body == "success"
    return 200 <= status <= 299


# ---- the schedule -----------------------------------------------------------

def schedule(rng, orders, workers):
    """All deliveries, in the order they are handed to the workers: waves of
    about 6 per worker; an order's deliveries land in one burst (handed out
    back to back, so they run at the same moment), its payments first and
    then everything else in one burst, in one wave, or spread over several;
    sometimes its payments come last (refunds first).  A combine payment
    is in the burst of every order it names."""
    total = sum(len(o["notes"]) for o in orders) * 2
    nwaves = max(1, total // (6 * workers))
    waves = [[] for _ in range(nwaves + 12)]
    for o in orders:
        copies = []
        for n in o["notes"]:
            if n.get("combine") and n["combine"]["orders"][0] != o["no"]:
                # a combine payment's duplicates are its first order's;
                # each other order it names has one copy in its own burst
                copies.append(n)
            else:
                copies += [n] * rng.choices((1, 2, 3), (55, 30, 15))[0]
        w0 = rng.randrange(nwaves)
        late_pay = rng.random() < 0.25
        mode = rng.choices(("burst", "refund_burst", "wave", "spread"), (30, 25, 20, 25))[0]
        if mode == "burst" and not late_pay:
            rng.shuffle(copies)
            waves[w0].append(copies)
            continue
        if mode == "refund_burst":
            # paid first; then all its other notifications at the same moment
            first = [n for n in copies if n["kind"] == "pay"]
            rest = [n for n in copies if n["kind"] != "pay"]
            rng.shuffle(rest)
            waves[w0].append(first)
            waves[w0 + rng.randint(2, 4)].append(rest)
            continue
        for n in copies:
            w = w0 if mode != "spread" else w0 + rng.randint(0, 8)
            if late_pay and n["kind"] == "pay":
                w += rng.randint(1, 3)
            waves[w].append([n])
    queue = []
    for wave in waves:
        rng.shuffle(wave)
        for block in wave:
            queue += block
    return queue


class Deliverer:
    """Worker threads, each with its own backend, taking deliveries from the
    schedule; a reply that is not an acknowledgement is delivered again
    later (backing off), like a gateway, until acknowledged or max_attempts."""

    def __init__(self, dsns, queue, workers, max_attempts, seed, touches=None, after=None):
        self.dsns = dsns		# worker w connects to dsns[w % len(dsns)]
        self.touches = touches or {}	# notify id -> the orders it names, if several
        # notify id -> (gateway, notify id) it is sent after: a dispute is
        # sent only once its order's payment was acknowledged (Stripe
        # disputes a payment days after it; before it a dispute is
        # dispute_unmatched), held back until then
        self.after = after or {}
        self.held = 0			# times a delivery was held back so
        self.given_up = set()
        self.queue = collections.deque(queue)
        self.retry = []			# heap of (due, seq, note, attempt)
        self.lock = threading.Lock()
        self.inflight = 0
        self.workers = workers
        self.max_attempts = max_attempts
        self.ledger = []		# (nid, order, kind, attempt, status, outcome, t0, t1, worker)
        self.acked = set()
        self.gave_up = []
        self.errors = collections.Counter()
        self.seq = 0
        self.rng = random.Random(seed ^ 0x5EED)

    def waits(self, n):
        """Whether n must wait (its payment not yet acknowledged nor given
        up); the caller holds the lock."""
        first = self.after.get(n["nid"])
        return first is not None and first not in self.acked and first not in self.given_up

    def hold(self, n, attempt, now):
        """Send n again a little later, as the same attempt."""
        self.held += 1
        self.seq += 1
        heapq.heappush(self.retry, (now + 0.01 + 0.02 * self.rng.random(), self.seq, n, attempt))

    def take(self):
        while True:
            with self.lock:
                now = time.monotonic()
                if self.retry and self.retry[0][0] <= now:
                    _, _, n, attempt = heapq.heappop(self.retry)
                    if self.waits(n):
                        self.hold(n, attempt, now)
                        continue
                    self.inflight += 1
                    return n, attempt
                if self.queue:
                    n = self.queue.popleft()
                    if self.waits(n):
                        self.hold(n, 0, now)
                        continue
                    self.inflight += 1
                    return n, 0
                if not self.retry and self.inflight == 0:
                    return None, None
                wait = (self.retry[0][0] - now) if self.retry else 0.01
            time.sleep(min(max(wait, 0.001), 0.05))

    def done(self, n, attempt, status, body, outcome, t0, t1, worker):
        with self.lock:
            self.inflight -= 1
            self.ledger.append((n["nid"], n["order"], n["kind"], attempt, status, outcome,
                                t0, t1, worker))
            if acknowledged(n["gw"], status, body):
                self.acked.add((n["gw"], n["nid"]))
                return
            if attempt + 1 >= self.max_attempts:
                self.gave_up.append(n)
                self.given_up.add((n["gw"], n["nid"]))
                return
            if (n["gw"], n["nid"]) in self.acked:
                return			# a gateway stops once one delivery was acknowledged
            self.seq += 1
            delay = min(0.02 * 2 ** min(attempt, 6), 1.0) * (0.5 + self.rng.random())
            heapq.heappush(self.retry, (time.monotonic() + delay, self.seq, n, attempt + 1))

    def worker(self, w):
        conn = None
        while True:
            n, attempt = self.take()
            if n is None:
                break
            headers, body = request(n, attempt)
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = psycopg2.connect(self.dsns[w % len(self.dsns)])
                    conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute("SELECT status, body, outcome FROM pay.paynotify_handle(%s, %s::jsonb, %s)",
                                (n["gw"], json.dumps(headers), psycopg2.Binary(body)))
                    status, rbody, outcome = cur.fetchone()
            except psycopg2.Error as e:
                # the shim answers 500 when the call itself fails
                status, rbody, outcome = 500, None, "error"
                with self.lock:
                    self.errors[(e.pgcode or "") + " " + str(e).split("\n")[0][:120]] += 1
                try:
                    conn.close()
                except Exception:
                    pass
                conn = None
            self.done(n, attempt, status, rbody, outcome, t0, time.monotonic(), w)
        if conn is not None:
            conn.close()

    def run(self):
        threads = [threading.Thread(target=self.worker, args=(w,)) for w in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.by_order = collections.defaultdict(list)
        for e in self.ledger:
            for no in self.touches.get(e[0], (e[1],)):
                self.by_order[no].append(e)
        self.features = {}


# ---- the database side --------------------------------------------------------

def setup_orders(admin_dsn, orders, after_setup=None):
    conn = psycopg2.connect(admin_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    if ledger.REFUNDED_TO_PAID:
        # a failed refund takes a refunded order back to paid
        cur.execute("INSERT INTO pay.paynotify_transition VALUES ('refunded', 'paid')")
    # a "disputed" state: an order follows its Stripe disputes (disputed
    # while one is open, then back, or refunded when the lost ones took
    # what it kept)
    psycopg2.extras.execute_values(cur, "INSERT INTO pay.paynotify_transition VALUES %s",
                                   sorted(ledger.DISPUTE_MOVES))
    cur.execute("""
        CREATE TABLE public.orders (
            order_no	text PRIMARY KEY,
            status		text NOT NULL DEFAULT 'pending',
            amount_fen	bigint NOT NULL,
            currency	text NOT NULL
        );
        CREATE TRIGGER orders_guard BEFORE UPDATE ON public.orders
            FOR EACH ROW EXECUTE FUNCTION pay.paynotify_guard_transition();
        CREATE TABLE public.hook_calls (event text, channel text, order_no text,
            notify_id text, amount bigint);
        CREATE FUNCTION public.record_hook(ev jsonb) RETURNS void LANGUAGE sql
        BEGIN ATOMIC
            INSERT INTO public.hook_calls VALUES (ev->>'event', ev->>'channel',
                ev->'notice'->>'order_no', ev->'notice'->>'notify_id', (ev->>'amount')::bigint);
        END;""")
    # registered by model_hooks (run.sh makes it): no superuser may register
    # a hook
    cur.execute("""
        SELECT pay.paynotify_grant('model_hooks', 'admin');
        GRANT INSERT ON public.hook_calls TO model_hooks;
        SET ROLE model_hooks;""")
    for ev in ("paid", "refunded", "refund_failed", "closed", "dispute_opened", "dispute_won",
               "dispute_lost", "notification"):
        cur.execute("SELECT pay.paynotify_on(%s, 'public.record_hook(jsonb)')", (ev,))
    cur.execute("RESET ROLE")
    # an application that moved an order to paid itself (its own UPDATE,
    # before any notification): inserted so, the guard watches updates only
    psycopg2.extras.execute_values(
        cur, "INSERT INTO public.orders VALUES %s",
        [(o["no"], "paid" if o["app_paid"] else "pending", o["amount"], o["currency"])
         for o in orders], page_size=2000)
    cur.execute("""SELECT EXISTS (SELECT FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace
                   WHERE s.nspname = 'pay' AND p.proname = 'paynotify_bind_orders'
                   AND 'currency_column' = ANY (p.proargnames))""")
    has_currency = cur.fetchone()[0]
    if has_currency:
        cur.execute("SELECT pay.paynotify_bind_orders('public.orders', 'order_no', 'status',"
                    " amount_column => 'amount_fen', currency_column => 'currency')")
    else:
        cur.execute("SELECT pay.paynotify_bind_orders('public.orders', 'order_no', 'status', 'amount_fen')")
    if after_setup:
        cur.execute(after_setup)
    cur.execute("ANALYZE")
    conn.close()
    return has_currency


def snapshot(admin_dsn):
    conn = psycopg2.connect(admin_dsn)
    cur = conn.cursor()
    q = {}
    for name, sql in {
        "orders": "SELECT order_no, status FROM public.orders",
        "payments": "SELECT channel, trade_no, order_no, amount FROM pay.payment_record",
        "refunds": "SELECT channel, refund_id, order_no, trade_no, amount, status, notify_id"
                   " FROM pay.paynotify_refund",
        "outbox": "SELECT event, channel, order_no, notify_id, amount FROM pay.paynotify_outbox",
        "anomalies": "SELECT channel, notify_id, order_no, kind FROM pay.paynotify_anomaly",
        "log": "SELECT channel, notify_id, order_no, status, note, error_msg FROM pay.payment_notify_log",
        "hooks": "SELECT event, channel, order_no, notify_id, amount FROM public.hook_calls",
        "disputes": "SELECT channel, dispute_id, order_no, trade_no, amount, currency, status,"
                    " opened_notify_id, closed_notify_id FROM pay.paynotify_dispute",
    }.items():
        cur.execute(sql)
        q[name] = cur.fetchall()
    conn.close()
    return q


# ---- the comparison -------------------------------------------------------------

def compare(orders, db, deliv, tally=None):
    """[(order_no or '-', category, detail)] of everything that differs from
    the model or breaks an invariant; tally counts, of the orders with
    several allowed outcomes, which one each ended in."""
    out = []
    notes = {}
    for o in orders:
        for n in o["notes"]:
            notes[(n["gw"], n["nid"])] = n
    per = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in db["payments"]:
        per[r[2]]["payments"].append(r)
    for r in db["refunds"]:
        per[r[2]]["refunds"].append(r)
    for r in db["outbox"]:
        per[r[2]]["outbox"].append(r)
    for r in db["anomalies"]:
        per[r[2]]["anomalies"].append(r)
    for r in db["log"]:
        per[r[2]]["log"].append(r)
    for r in db["disputes"]:
        per[r[2]]["disputes"].append(r)
    status = dict(db["orders"])
    known = {o["no"] for o in orders}
    for r in db["disputes"]:
        if r[2] not in known:
            out.append(("-", "dispute rows", "dispute %s recorded for %r, no order of the run"
                        % (r[1], r[2])))

    for o in orders:
        p = ledger.predict(o)
        d = per[o["no"]]
        no = o["no"]

        def diff(cat, want, got):
            if want != got:
                out.append((no, cat, "model %s, database %s" % (want, got)))

        pays = {r[1]: r[3] for r in d["payments"] if r[0] == o["gw"]}
        diff("payment records", p["payments"], pays)
        if any(r[0] != o["gw"] for r in d["payments"]):
            out.append((no, "payment records", "records on another channel: %s" % (
                [(r[0], r[1]) for r in d["payments"] if r[0] != o["gw"]])))
        got = {t: 0 for t in p["refunded"]}
        for r in d["refunds"]:
            if r[5] == "succeeded":
                got[r[3]] = got.get(r[3], 0) + r[4]
        diff("refunded per trade", p["refunded"], got)
        ev = collections.Counter(r[0] for r in d["outbox"])
        diff("paid events", p["paid_events"], ev["paid"])
        diff("closed events", p["closed_events"], ev["closed"])
        # status, anomalies and refunded events per trade: one of the
        # outcomes the rules allow (one, unless a Stripe refund failed
        # after it succeeded)
        ref_ev = {t: 0 for t in p["refunded"]}
        for r in d["outbox"]:
            if r[0] == "refunded":
                n = notes.get((r[1], r[3]))
                t = n["trade"] if n else "?" + r[3]
                ref_ev[t] = ref_ev.get(t, 0) + (r[4] or 0)
        anom = ledger.norm_anomalies(collections.Counter(r[3] for r in d["anomalies"]))
        got = {"status": status.get(no), "anomalies": anom, "refunded_events": ref_ev}
        keys = [ledger.alt_key(x) for x in p["alts"]]
        if tally is not None and len(keys) > 1 and ledger.alt_key(got) in keys:
            tally[("dispute" if o["disputes"] else "refund_fail",
                   keys.index(ledger.alt_key(got)))] += 1
        if ledger.alt_key(got) not in keys:
            # say what differs from the nearest allowed outcome
            near = min(p["alts"], key=lambda x: sum(x[k] != got[k] for k in got))
            for k, cat in (("status", "status"), ("anomalies", "anomalies"),
                           ("refunded_events", "refunded events per trade")):
                if near[k] != got[k]:
                    want = " or ".join(sorted({str(x[k]) for x in p["alts"]}))
                    out.append((no, cat, "model %s, database %s" % (want, got[k])))
        rows = {r[1]: r for r in d["refunds"]}
        for rid, (st, amt) in p["rows"].items():
            r = rows.get(rid)
            if r is None or r[5] != st or (amt is not None and r[4] != amt):
                out.append((no, "refund row of a delivered %s" % (
                    "success" if st == "succeeded" else "failure"),
                    "%s: model %s %s, database %s" % (
                        rid, st, amt if amt is not None else "",
                        "missing" if r is None else "%s %s" % (r[5], r[4]))))
        for rid, r in rows.items():
            if rid not in p["known_ids"]:
                out.append((no, "refund row of no notification", "%s: %s %s" % (rid, r[5], r[4])))
            elif rid not in p["rows"] and r[5] != "succeeded":
                out.append((no, "refund row of a delivered success",
                            "%s: database %s" % (rid, r[5])))
        failed = collections.defaultdict(list)
        for r in d["outbox"]:
            if r[0] == "refund_failed":
                failed[r[3]].append(r[4])
        for nid, (counts, amt) in p["failed_events"].items():
            got = failed.pop(nid, [])
            if len(got) not in counts or any(x != amt for x in got):
                out.append((no, "refund_failed events", "%s: model %s of %d, database %s" % (
                    nid, " or ".join(map(str, sorted(counts))), amt, got)))
        for nid, got in failed.items():
            out.append((no, "refund_failed events", "%s: model none, database %s" % (nid, got)))
        left = [(r[1], r[3]) + ((r[5],) if r[5] else ()) for r in d["log"] if r[3] in ("failed", "parked")]
        if left:
            out.append((no, "failed or parked log rows", str(left)))
        # Stripe disputes: one row per dispute, closed as its close said,
        # with its amount, of the order's trade; exactly one event per
        # dispute note (its close's dispute_won / dispute_lost with the
        # amount; its open's dispute_opened, or a notification when the
        # close came first); no dispute row or event for other orders
        drows = {}
        for r in d["disputes"]:
            if r[1] in drows:
                out.append((no, "dispute rows", "%s recorded twice" % r[1]))
            drows[r[1]] = (r[6], r[4], r[7], r[8])
            if (r[0], r[3], (r[5] or "").upper()) != ("stripe",) + tuple(
                    (o["trades"][0]["id"], o["currency"]) if o["disputes"] else ("?", "?")):
                out.append((no, "dispute rows", "%s: channel %s trade %s currency %s" % (
                    r[1], r[0], r[3], r[5])))
        devents = collections.defaultdict(list)
        for r in d["outbox"]:
            if r[0].startswith("dispute_") or r[0] == "notification":
                devents[r[3]].append((r[0], r[4]))
        for what, want, got in ledger.dispute_diffs(p, drows, devents):
            out.append((no, "dispute rows" if what.startswith("dispute row") else "dispute events",
                        "%s: model %s, database %s" % (what, want, got)))

        # invariants, from the database alone
        paid = {r[1]: r[3] for r in d["payments"]}
        refunded = collections.Counter()
        for r in d["refunds"]:
            if r[5] == "succeeded":
                refunded[r[3]] += r[4]
                if r[3] not in paid:
                    out.append((no, "invariant: refund of a recorded trade",
                                "refund %s names trade %s, which has no payment record" % (r[1], r[3])))
        if "refunded_more_than_paid" not in anom:
            for t, a in paid.items():
                if refunded[t] > a:
                    out.append((no, "invariant: refunded <= paid per trade",
                                "trade %s paid %d refunded %d" % (t, a, refunded[t])))
        all_full = bool(paid) and all(refunded[t] >= a for t, a in paid.items())
        # or its lost disputes took what it kept (paid less refunded)
        lost = sum(r[4] or 0 for r in d["disputes"] if r[6] == "lost")
        kept = sum(max(a - refunded[t], 0) for t, a in paid.items())
        all_full = all_full or (bool(paid) and lost > 0 and lost >= kept)
        # except where the ledger says why: a refunded order whose refund
        # failed stays refunded without refunded -> paid; a Stripe total on
        # a trade with a failed refund does not move the order
        if (status.get(no) == "refunded") != all_full and not (
                "refund_failed_after_refunded" in anom if not all_full
                else "refund_total_after_failure" in anom):
            out.append((no, "invariant: refunded exactly when every trade is",
                        "status %s, trades %s, refunded %s, disputes lost %d" % (
                            status.get(no), paid, dict(refunded), lost)))
        if (ev["paid"] == 1) != bool(paid) or ev["paid"] > 1:
            out.append((no, "invariant: one paid event per order with a payment",
                        "%d paid events, %d payment records" % (ev["paid"], len(paid))))
        per_id = collections.Counter((r[0], r[3]) for r in d["outbox"] if r[0] in ("refunded", "refund_failed"))
        for k, c in per_id.items():
            if c > 1:
                out.append((no, "invariant: one event per refund notification", "%s x%d" % (k, c)))

    # a combine payment's log row is its own (keyed by combine_out_trade_no):
    # none left failed or parked
    combines = {n["combine"]["no"]: n["combine"] for o in orders for n in o["notes"]
                if n.get("combine")}
    for no in combines:
        left = [(r[1], r[3]) + ((r[5],) if r[5] else ()) for r in per[no]["log"]
                if r[3] in ("failed", "parked")]
        if left:
            out.append((no, "failed or parked log rows", str(left)))

    # one payment record per trade, whatever the channel
    for t, c in collections.Counter(r[1] for r in db["payments"]).items():
        if c > 1:
            out.append(("-", "invariant: one payment record per trade", "%s x%d" % (t, c)))
    # hooks ran exactly for the outbox events
    ob = collections.Counter((r[0], r[1], r[2], r[3], r[4]) for r in db["outbox"])
    hk = collections.Counter((r[0], r[1], r[2], r[3], r[4]) for r in db["hooks"])
    if ob != hk:
        out.append(("-", "invariant: hooks ran once per outbox event",
                    "outbox only %s; hooks only %s" % (list((ob - hk).items())[:3],
                                                        list((hk - ob).items())[:3])))
    # the gateway's side
    logged = {(r[0], r[1]) for r in db["log"]}
    for k in sorted(deliv.acked - logged):
        out.append((notes[k]["order"], "acknowledged but not in the log", k[1]))
    processed = collections.Counter(e[0] for e in deliv.ledger if e[5] == "processed")
    for nid, c in processed.items():
        if c > 1:
            out.append(("-", "invariant: at most one processed reply per notification",
                        "%s answered processed %d times" % (nid, c)))
    for n in deliv.gave_up:
        if (n["gw"], n["nid"]) not in deliv.acked:
            out.append((n["order"], "never acknowledged", n["nid"]))
    # every delivery ends in a clean answer: no call fails with an SQL error
    # (a unique violation, deadlock or serialization failure that the
    # retries hide), and no business step fails (nothing in these scenarios
    # may fail: every order exists, every hook succeeds)
    for msg, c in sorted(deliv.errors.items()):
        out.append(("-", "invariant: no call fails with an SQL error", "%dx %s" % (c, msg)))
    errmsg = {r[1]: r[5] for r in db["log"] if r[5]}
    for e in deliv.ledger:
        if e[5] == "failed":
            out.append((e[1], "invariant: no business step fails",
                        "%s (%s, attempt %d) answered failed%s" % (
                            e[0], e[2], e[3], " (the log's last error: %s)" % errmsg[e[0]]
                            if e[0] in errmsg else "")))
    return out


def order_story(o, deliv):
    """A readable account of one order: its notifications and what each
    delivery got, in time order."""
    lines = ["  order %s  %s  amount %d%s%s" % (
        o["no"], o["gw"], o["amount"], "  app marked it paid" if o["app_paid"] else "",
        "  closed unpaid" if o["close"] else "")]
    desc = {}
    for n in o["notes"]:
        s = n["kind"]
        if n.get("combine"):
            c = n["combine"]
            s = "combine %s of %s%s" % (c["no"], "+".join(x["order"] for x in c["subs"]),
                                        "" if n["kind"] == "pay" else ": a sub-order not applied")
        if n["trade"]:
            s += " trade " + n["trade"]
        if n["refund_id"]:
            s += " refund " + n["refund_id"]
        if n["kind"] in ("refund", "refund_fail"):
            s += " amount %d" % n["amount"]
            if o["gw"] in ledger.CUMULATIVE and n["kind"] == "refund":
                s += " (cumulative %d)" % n["cum"]
        if n.get("dispute"):
            s += " dispute %s amount %d" % (n["dispute"], n["amount"])
        if n["event"]:
            s += " " + n["event"]
        desc[n["nid"]] = s
    mine = deliv.by_order[o["no"]]
    t0 = min((e[6] for e in mine), default=0)
    for e in sorted(mine, key=lambda e: e[6]):
        lines.append("    %+8.3fs..%+8.3fs w%d %-9s %s  (%s)" % (
            e[6] - t0, e[7] - t0, e[8], e[5], desc[e[0]], e[0]))
    return "\n".join(lines)


def observed_features(o, deliv):
    if o["no"] in deliv.features:
        return deliv.features[o["no"]]
    f = deliv.features[o["no"]] = set()
    mine = deliv.by_order[o["no"]]
    if any(e[5] == "parked" for e in mine):
        f.add("parked_refund")
    iv = sorted((e[6], e[7], e[0]) for e in mine)
    for i in range(len(iv)):
        for j in range(i + 1, len(iv)):
            if iv[j][0] >= iv[i][1]:
                break
            if iv[j][2] != iv[i][2]:
                f.add("concurrent")
    return f


# ---- the self-check of the model ------------------------------------------------

def self_check(seed, examples):
    """Property (hypothesis): for generated orders and any arrival order with
    duplicates, the spec's rules applied one notification at a time end
    exactly where predict() says.  This is what makes the database
    comparison fair: the scenarios are order-independent, or where they
    are not (a Stripe refund that failed after it succeeded), the outcomes
    predict() allows are exactly those of every arrival order (all of them
    are tried: each allowed outcome is reached, no other)."""
    from hypothesis import given, settings, strategies as st, seed as hseed, HealthCheck

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 2 ** 32 - 1), st.data())
    def prop(oseed, data):
        rng = random.Random(oseed)
        # three orders, often a combine payment's (its sub-orders of
        # another merchant or unpaid naming an order generated before)
        for o in ledger.generate(rng, 3, oseed, combine_share=0.3):
            seq = []
            for n in o["notes"]:
                seq += [n["nid"]] * data.draw(st.integers(1, 3))
            # a dispute after its payment
            arrivals = ledger.pay_first(o, data.draw(st.permutations(seq)))
            d = ledger.agrees(o, ledger.simulate(o, arrivals))
            assert not d, d
            if ledger.several(o):
                d = ledger.exhaustive(o)
                assert not d, d

    prop()


# ---- main ----------------------------------------------------------------------

# ---- agreements (subscriptions; needs paynotify to apply them) ---------------

def prepare_agreement(n, rng):
    """The request parts of an agreement's notice (ledger.generate_agreements),
    signed and sealed as request() sends every notice."""
    a, gw, kind = n["agreement"], n["gw"], n["kind"]
    if gw == "wxpay":
        nonce = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(12))
        if kind == "charge":
            plain = {"mchid": WX.mchid, "appid": WX.appid, "out_trade_no": n["order"],
                     "transaction_id": n["trade"], "trade_type": "PAP", "contract_id": a["id"],
                     "trade_state": "SUCCESS", "trade_state_desc": "支付成功",
                     "bank_type": "OTHERS", "attach": "",
                     "success_time": "2026-01-01T08:00:05+08:00",
                     "payer": {"openid": "oMODEL" + a["no"]},
                     "amount": {"total": n["amount"], "payer_total": n["amount"],
                                "currency": "CNY", "payer_currency": "CNY"}}
            n["body"] = WX.envelope(n["nid"], "TRANSACTION.SUCCESS", plain, "transaction",
                                    "支付成功", nonce)
            return
        end = kind == "agreement_end"
        plain = {"mchid": WX.mchid, "appid": WX.appid, "contract_id": a["id"],
                 "out_contract_code": a["ref"], "plan_id": 12535, "openid": "oMODEL" + a["no"],
                 "contract_state": "TERMINATED" if end else "SIGNED",
                 "contract_signed_time": "2026-01-01T08:00:00+08:00"}
        if end:
            plain["contract_terminate_info"] = {"contract_terminated_time": "2026-01-02T08:00:00+08:00",
                                                "contract_termination_mode": "USER_TERMINATE"}
        n["body"] = WX.envelope(n["nid"], "ENTRUST.TERMINATE" if end else "ENTRUST.SIGN", plain,
                                "entrust", "解约成功" if end else "签约成功", nonce)
    elif gw == "alipay":
        if kind == "charge":
            n["fields"] = [("gmt_create", "2026-01-01 08:00:00"), ("charset", "utf-8"),
                           ("subject", "周期扣款 " + n["order"]), ("buyer_id", "2088000000000001"),
                           ("version", "1.0"), ("notify_id", n["nid"]),
                           ("notify_type", "trade_status_sync"), ("out_trade_no", n["order"]),
                           ("total_amount", yuan(n["amount"])), ("auth_app_id", ALI.app_id),
                           ("app_id", ALI.app_id), ("seller_id", "2088000000000002"),
                           ("gmt_payment", "2026-01-01 08:00:05"), ("trade_no", n["trade"]),
                           ("trade_status", "TRADE_SUCCESS")]
            return
        end = kind == "agreement_end"
        f = [("charset", "utf-8"), ("alipay_user_id", "2088000000000001"),
             ("external_agreement_no", a["ref"]), ("version", "1.0"), ("notify_id", n["nid"]),
             ("notify_type", "dut_user_unsign" if end else "dut_user_sign"),
             ("agreement_no", a["id"]), ("auth_app_id", ALI.app_id),
             ("personal_product_code", "CYCLE_PAY_AUTH_P"), ("app_id", ALI.app_id),
             ("sign_scene", "INDUSTRY|SOCIALIZATION"), ("status", "UNSIGN" if end else "NORMAL")]
        f += [("unsign_time", "2026-01-02 08:00:00")] if end else \
            [("sign_time", "2026-01-01 08:00:00"), ("valid_time", "2026-01-01 08:00:00"),
             ("invalid_time", "2115-02-01 00:00:00")]
        n["fields"] = f
    else:
        if kind in ("charge", "charge_failed"):
            paid = kind == "charge"
            obj = {"id": n["trade"], "object": "invoice", "amount_due": n["amount"],
                   "amount_paid": n["amount"] if paid else 0,
                   "amount_remaining": 0 if paid else n["amount"], "attempt_count": 1,
                   "attempted": True, "billing_reason": "subscription_cycle", "currency": "usd",
                   "customer": "cus_MODEL" + a["no"], "livemode": False,
                   "metadata": {"order_id": n["order"]},
                   "parent": {"quote_details": None, "type": "subscription_details",
                              "subscription_details": {"metadata": {"order_id": a["ref"]},
                                                       "subscription": a["id"]}},
                   "status": "paid" if paid else "open", "total": n["amount"]}
            typ = "invoice.paid" if paid else "invoice.payment_failed"
        else:
            end = kind == "agreement_end"
            obj = {"id": a["id"], "object": "subscription", "cancel_at_period_end": False,
                   "canceled_at": 1767312000 if end else None, "currency": "usd",
                   "customer": "cus_MODEL" + a["no"], "livemode": False,
                   "metadata": {"order_id": a["ref"]}, "status": "canceled" if end else "active"}
            typ = ("customer.subscription.updated" if n.get("via_update") else
                   "customer.subscription.deleted") if end else "customer.subscription.created"
        n["event_doc"] = {"id": n["nid"], "object": "event", "api_version": "2025-03-31.basil",
                          "created": 1767225990, "data": {"object": obj}, "livemode": False,
                          "pending_webhooks": 1, "request": {"id": None, "idempotency_key": None},
                          "type": typ}


def run_agreements(a):
    """The agreements' notices, in random order with duplicates, from
    several backends; then every charge order and every agreement compared
    with ledger.predict_agreement.  Needs paynotify to apply agreement
    notices: run by run.sh --agreements, and by its default run after the orders."""
    rng = random.Random(a.seed ^ 0xA6)
    ags = ledger.generate_agreements(rng, max(1, a.orders // 4))
    notes = [n for g in ags for n in ledger.agreement_notes(g)]
    for n in notes:
        prepare_agreement(n, rng)
    queue = [n for n in notes for _ in range(rng.choices((1, 2, 3), (55, 30, 15))[0])]
    rng.shuffle(queue)
    orders = [o for g in ags for o in g["charges"] + g["failed"]]
    setup_orders(a.admin_dsn, orders, a.after_setup)
    print("model: agreements: %d agreements, %d notices, %d deliveries in random order"
          % (len(ags), len(notes), len(queue)), flush=True)
    deliv = Deliverer(a.dsn, queue, a.workers, a.max_attempts, a.seed)
    deliv.run()
    db = snapshot(a.admin_dsn)
    status = dict(db["orders"])
    pays = collections.defaultdict(list)
    for ch, trade, no, amount in db["payments"]:
        pays[no].append((trade, amount))
    events = collections.Counter((r[0], r[2]) for r in db["outbox"])
    by_nid = collections.Counter((r[0], r[3]) for r in db["outbox"])
    # when each notice was first acknowledged and first sent (the ledger's
    # t1, t0): a signing acknowledged before its end was first sent was
    # applied first, and must have signed
    first = {}
    for nid, _, _, _, _, outcome, t0, t1, _ in deliv.ledger:
        if outcome in ("processed", "duplicate", "ignored", "parked"):
            first[("ack", nid)] = min(first.get(("ack", nid), t1), t1)
        first[("start", nid)] = min(first.get(("start", nid), t0), t0)
    bad = []
    for n in deliv.gave_up:
        bad.append((n["order"], "never acknowledged", n["kind"]))
    for g in ags:
        sign_first = first.get(("ack", g["sign"]["nid"]), float("inf")) \
            < first.get(("start", g["end"]["nid"]), float("-inf"))
        want_orders, want_events = ledger.predict_agreement(g, sign_first)
        for no, w in want_orders.items():
            if status.get(no) != w["status"]:
                bad.append((no, "status", "%s, expected %s" % (status.get(no), w["status"])))
            if sorted(pays[no]) != sorted(w["payments"]):
                bad.append((no, "payments", "%s, expected %s" % (pays[no], w["payments"])))
            for ev, k in w["events"].items():
                if events[(ev, no)] != k:
                    bad.append((no, "events", "%d %s, expected %d" % (events[(ev, no)], ev, k)))
        for (ev, nid), (lo, hi) in want_events.items():
            if not lo <= by_nid[(ev, nid)] <= hi:
                bad.append((g["no"], "events", "%d %s for %s, expected %d..%d (%s)" % (
                    by_nid[(ev, nid)], ev, nid, lo, hi, g["gw"])))
    for no, cat, detail in bad[:a.show]:
        print("model:   %s %s: %s" % (no, cat, detail))
    if bad:
        print("model: agreements FAILED: %d discrepancies" % len(bad))
        return 1
    print("model: agreements OK: %d agreements, %d charge orders as the contract says"
          % (len(ags), len(orders)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", required=True, action="append",
                    help="libpq DSN of the handler role (non-superuser); repeat it for several"
                    " servers of one database (e.g. a Citus coordinator and its workers):"
                    " the backends are spread over them in turn")
    ap.add_argument("--admin-dsn", required=True, help="libpq DSN of the database owner")
    ap.add_argument("--after-setup", metavar="SQL",
                    help="run as the owner once the orders are created and bound, before any"
                    " delivery (e.g. SELECT pay.paynotify_distribute() on Citus)")
    ap.add_argument("--orders", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20261001)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--max-attempts", type=int, default=40)
    ap.add_argument("--self-check", type=int, default=300, metavar="N",
                    help="hypothesis examples of the model's self-check (0: skip)")
    ap.add_argument("--refunded-to-paid", action="store_true",
                    help="add refunded -> paid to the state machine (a Stripe refund that"
                    " fails after it refunded the order takes it back to paid)")
    ap.add_argument("--ledger-out", metavar="FILE",
                    help="write the gateway-side ledger there: one line per delivery")
    ap.add_argument("--show", type=int, default=12, help="discrepant orders shown in full")
    ap.add_argument("--show-class", default="", metavar="TEXT",
                    help="show only orders whose scenario class contains TEXT")
    ap.add_argument("--agreements", action="store_true",
                    help="instead: agreements (subscriptions), signed, charged, failed and"
                    " ended, out of order (needs paynotify to apply agreement notices)")
    a = ap.parse_args()
    ledger.REFUNDED_TO_PAID = a.refunded_to_paid
    if a.agreements:
        pnsign.check_vectors()
        return run_agreements(a)

    print("model: seed %d, %d orders, %d backends%s" % (
        a.seed, a.orders, a.workers,
        " over %d servers" % len(a.dsn) if len(a.dsn) > 1 else ""), flush=True)
    pnsign.check_vectors()
    if a.self_check:
        t = time.monotonic()
        self_check(a.seed, a.self_check)
        print("model: self-check: %d examples of 3 orders in random arrival orders agree"
              " with the model (%.1fs)"
              % (a.self_check, time.monotonic() - t), flush=True)

    rng = random.Random(a.seed)
    orders = ledger.generate(rng, a.orders, a.seed)
    for o in orders:
        for n in o["notes"]:
            prepare(n, rng)
    queue = schedule(rng, orders, a.workers)
    has_currency = setup_orders(a.admin_dsn, orders, a.after_setup)
    unique = {n["nid"]: "combine" if n.get("combine") else
              "stripe_refund_fail" if n["kind"] == "refund_fail" and n["gw"] == "stripe" else
              n["kind"] for o in orders for n in o["notes"]}
    kinds = collections.Counter(unique.values())
    feats = collections.Counter(f for o in orders for f in ledger.features(o))
    print("model: %d notifications (%s), %d scheduled deliveries; currency column %s"
          % (sum(kinds.values()), ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
             len(queue), "bound" if has_currency else "not available"), flush=True)
    print("model: scenarios: " + ", ".join("%s %d" % kv for kv in sorted(feats.items())), flush=True)

    t = time.monotonic()
    touches = {n["nid"]: n["combine"]["orders"] for o in orders for n in o["notes"]
               if n.get("combine")}
    after = {n["nid"]: ("stripe", p["nid"]) for o in orders for n in o["notes"]
             if n.get("dispute") for p in o["notes"] if p["kind"] == "pay"}
    deliv = Deliverer(a.dsn, queue, a.workers, a.max_attempts, a.seed, touches, after)
    deliv.run()
    took = time.monotonic() - t
    outcomes = collections.Counter(e[5] for e in deliv.ledger)
    print("model: %d deliveries in %.1fs (%.0f/s): %s; %d held back until their payment"
          " was acknowledged" % (
              len(deliv.ledger), took, len(deliv.ledger) / max(took, 1e-9),
              ", ".join("%s %d" % kv for kv in sorted(outcomes.items())), deliv.held), flush=True)
    for msg, c in deliv.errors.most_common(5):
        print("model:   call failed %dx: %s" % (c, msg))

    if a.ledger_out:
        with open(a.ledger_out, "w") as f:
            f.write("notify_id\torder_no\tkind\tattempt\thttp_status\toutcome\tstart_s\tend_s\tbackend\n")
            for e in sorted(deliv.ledger, key=lambda e: e[6]):
                f.write("%s\t%s\t%s\t%d\t%d\t%s\t%.4f\t%.4f\t%d\n" % (
                    e[0], e[1], e[2], e[3], e[4], e[5], e[6] - t, e[7] - t, e[8]))
    db = snapshot(a.admin_dsn)
    tally = collections.Counter()
    bad = compare(orders, db, deliv, tally)
    if tally[("refund_fail", 0)] + tally[("refund_fail", 1)]:
        print("model: Stripe refunds failed after they succeeded: %d orders ended as the"
              " success applied first, %d as the failure first"
              % (tally[("refund_fail", 0)], tally[("refund_fail", 1)]), flush=True)
    dis = [o for o in orders if o["disputes"]]
    if dis:
        opened = collections.Counter(r[0] for r in db["outbox"] if r[0] in (
            "dispute_opened", "dispute_won", "dispute_lost"))
        handed = sum(1 for r in db["outbox"] if r[0] == "notification" and r[3] in after)
        print("model: Stripe disputes: %d orders, %d disputes; events %s, %d opens handed on"
              " (their close came first); %d orders lost in part first and then in whole:"
              " %d ended with dispute_lost_in_part, %d without" % (
                  len(dis), sum(len(o["disputes"]) for o in dis),
                  ", ".join("%s %d" % kv for kv in sorted(opened.items())), handed,
                  tally[("dispute", 0)] + tally[("dispute", 1)], tally[("dispute", 1)],
                  tally[("dispute", 0)]), flush=True)
    by_order = collections.OrderedDict()
    for no, cat, detail in bad:
        by_order.setdefault(no, []).append((cat, detail))
    omap = {o["no"]: o for o in orders}
    if not bad:
        print("model: OK: all %d orders equal the model, invariants hold" % len(orders))
        return 0

    print("\nmodel: FAILED: %d discrepancies in %d orders; the first %d:" % (
        len(bad), len(by_order), min(a.show, len(by_order))))
    shown = [(no, items) for no, items in by_order.items()
             if not a.show_class or (no in omap and a.show_class in scenario_class(omap[no], deliv))]
    for no, items in shown[:a.show]:
        print()
        for cat, detail in items:
            print("  %s: %s: %s" % (no, cat, detail))
        if no in omap:
            print(order_story(omap[no], deliv))
    cats = collections.Counter(cat for _, cat, _ in bad)
    cat_orders = collections.defaultdict(set)
    for no, cat, _ in bad:
        cat_orders[cat].add(no)
    print("\nmodel: summary by category (discrepancies / orders; and the orders' scenario features):")
    for cat, c in cats.most_common():
        fc = collections.Counter()
        for no in cat_orders[cat]:
            if no in omap:
                fc.update(ledger.features(omap[no]) | observed_features(omap[no], deliv))
        print("  %-55s %5d / %5d   %s" % (cat, c, len(cat_orders[cat]),
                                        ", ".join("%s %d" % kv for kv in fc.most_common(8))))
    print("\nmodel: discrepant orders by scenario class (first matching class):")
    total = collections.Counter()
    wrong = collections.Counter()
    for o in orders:
        c = scenario_class(o, deliv)
        total[c] += 1
        if o["no"] in by_order:
            wrong[c] += 1
    for c in CLASSES:
        if total[c]:
            print("  %-62s %5d of %5d" % (c, wrong[c], total[c]))
    if "-" in by_order:
        print("  %-62s %5d" % ("not of one order", len(by_order["-"])))
    return 1


CLASSES = (
    "the application marked it paid",
    "Stripe refund failed after it succeeded (refund.failed)",
    "Stripe dispute (charge.dispute.created / .closed)",
    "WeChat combine payment (合单支付) sub-order",
    "named by a combine payment's sub-order not to apply",
    "double payment (several trades)",
    "WeChat refund failed, then succeeded (same refund_id)",
    "closed unpaid",
    "one trade: refunds applied together by the payment (parked)",
    "one trade: notifications in flight at the same moment",
    "one trade: one at a time",
)


def scenario_class(o, deliv):
    f = ledger.features(o) | observed_features(o, deliv)
    if "app_paid" in f:
        return CLASSES[0]
    if "failed_after_success" in f or "failed_after_unlisted_success" in f:
        return CLASSES[1]
    if "dispute" in f:
        return CLASSES[2]
    if "combine" in f:
        return CLASSES[3]
    if "named_by_other_sub_order" in f:
        return CLASSES[4]
    if "double_payment" in f:
        return CLASSES[5]
    if "fail_then_success" in f:
        return CLASSES[6]
    if "close" in f:
        return CLASSES[7]
    if "parked_refund" in f and "several_refunds_per_trade" in f:
        return CLASSES[8]
    if "concurrent" in f:
        return CLASSES[9]
    return CLASSES[10]


if __name__ == "__main__":
    sys.exit(main())
