#!/usr/bin/env python3
"""Write the daily bills of sql/bills.sql into test/bills/.

The layouts are the gateways' own (docs/RECONCILIATION.md, "Daily bills"):

- WeChat Pay's trade bill (GET /v3/bill/tradebill, bill_type=ALL): UTF-8
  with a byte order mark and CRLF, the 27-column header, every data field
  prefixed by a backtick, the 7-column summary header and its row; the
  same bytes gzipped (tar_type=GZIP), and without BOM and with LF.
- Alipay's trade bill (alipay.data.dataservice.bill.downloadurl.query,
  bill_type=trade): a zip of GBK CSV files whose entry names are GBK
  without the zip's UTF-8 flag; the detail file (_业务明细.csv) frames its
  rows with '#' marker lines and pads some fields with a TAB, the summary
  file (_业务明细(汇总).csv) ends with a 合计 row.
- Stripe's balance transactions: the API's list (GET /v1/balance_transactions),
  the Dashboard's export (17 columns) and a balance report
  (balance_change_from_activity.itemized.3 with chosen columns).

Order numbers, ids and amounts are invented.  Run from anywhere; the
output is the same bytes every time (the gzip and zip times are fixed).
usage: test/bills/make_bills.py
"""
import gzip
import json
import os
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- WeChat Pay

WX_HEADER = ("交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,"
             "交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,"
             "商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,"
             "手续费,费率,订单金额,申请退款金额,费率备注")
WX_SUMMARY = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"
OPENID = "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"


def wx_pay(time, trade, order, yuan, fee, kind="JSAPI", bank="OTHERS", name="测试商品A", attach=""):
    return [time, "wx8888888888888888", "1900000109", "0", "", trade, order, OPENID, kind,
            "SUCCESS", bank, "CNY", yuan, "0.00", "0", "0", "0.00", "0.00", "", "", name,
            attach, fee, "0.60%", yuan, "0.00", ""]


def wx_refund(time, trade, order, refund_id, out_refund, yuan, fee, name="测试商品A",
              status="SUCCESS"):
    return [time, "wx8888888888888888", "1900000109", "0", "", trade, order, OPENID, "JSAPI",
            "REFUND", "OTHERS", "CNY", "0.00", "0.00", refund_id, out_refund, yuan, "0.00",
            "ORIGINAL", status, name, "", fee, "0.60%", "0.00", yuan, ""]


def fen(s):
    whole, _, dec = s.lstrip("-").partition(".")
    v = int(whole) * 100 + int((dec + "00")[:2])
    return -v if s.startswith("-") else v


def wx_bill(rows, bom=True, eol="\r\n"):
    paid = sum(fen(r[12]) for r in rows)
    refunded = sum(fen(r[16]) for r in rows)
    fee5 = sum(int(round(float(r[22]) * 100000)) for r in rows)
    total = sum(fen(r[24]) for r in rows)
    asked = sum(fen(r[25]) for r in rows)

    def yuan(v):
        return "%s%d.%02d" % ("-" if v < 0 else "", abs(v) // 100, abs(v) % 100)

    lines = [WX_HEADER]
    lines += [",".join("`" + f for f in r) for r in rows]
    lines.append(WX_SUMMARY)
    sign = "-" if fee5 < 0 else ""
    lines.append(",".join("`" + f for f in [
        str(len(rows)), yuan(paid), yuan(refunded), "0.00",
        "%s%d.%05d" % (sign, abs(fee5) // 100000, abs(fee5) % 100000), yuan(total), yuan(asked)]))
    text = eol.join(lines) + eol
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")


P1 = wx_pay("2026-03-14 09:21:07", "4200002087202603142345678901", "PN20260314000101", "100.00", "0.60000")
P2 = wx_pay("2026-03-14 11:02:45", "4200002087202603142345678902", "PN20260314000102", "25.50", "0.15000",
            kind="NATIVE", bank="CMB_DEBIT", name="测试商品B",
            attach='{"order":"PN20260314000102","note":"a,b"}')
R1 = wx_refund("2026-03-14 15:30:12", "4200002087202603142345678901", "PN20260314000101",
               "50303108562026031401487282563", "RF20260314000101", "10.00", "-0.06000")
# paid two seconds before midnight, Beijing time: notified here just after
P3 = wx_pay("2026-03-14 23:59:58", "4200002087202603142345678903", "PN20260314000103", "8.80", "0.05000")
P4 = wx_pay("2026-03-15 10:00:00", "4200002087202603152345678904", "PN20260315000104", "50.00", "0.30000")

day14 = wx_bill([P1, P2, R1, P3])
write("wx_20260314.csv", day14)
write("wx_20260314.csv.gz", gzip.compress(day14, compresslevel=9, mtime=0))
write("wx_20260314_lf.csv", wx_bill([P1, P2, R1, P3], bom=False, eol="\n"))
write("wx_20260315.csv", wx_bill([P4]))
# the gateway's ledger differs from ours: 902 for 25.60, 901 not there
P2x = list(P2)
P2x[12] = P2x[24] = "25.60"
write("wx_20260314_changed.csv", wx_bill([P2x, R1, P3]))

# malformed
write("wx_truncated.csv.gz", gzip.compress(day14, compresslevel=9, mtime=0)[:300])
write("wx_bad_amount.csv", wx_bill([P1, P2]).replace(b"`25.50,`0.00,`", b"`1.2.3,`0.00,`"))
short = wx_bill([P1, P2]).decode("utf-8").split("\r\n")
short[2] = short[2].rsplit(",`", 3)[0]          # a row with three fields too few
write("wx_few_fields.csv", "\r\n".join(short).encode("utf-8"))
cut = day14.decode("utf-8").split("\r\n")
write("wx_no_summary.csv", "\r\n".join(cut[:-3]).encode("utf-8") + b"\r\n")
# a gzip that inflates past the bound of 256 MB
write("wx_bomb.csv.gz", gzip.compress(b"0" * (257 * 1024 * 1024), compresslevel=9, mtime=0))

# ---------------------------------------------------------------- Alipay

ALI_HEADER = ("支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,"
              "终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
              "支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,"
              "卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注")
ALI_SUMMARY_HEADER = ("门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,"
                      "支付宝优惠（元）,商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,实收净额（元）")
T = "\t"


def ali_row(trade, order, kind, name, created, done, peer, amount, refund_no, fee, note):
    return ",".join([trade + T, order + T, kind + T, name, created, done, T, T, T, T, peer + T,
                     amount, amount, "0.00", "0.00", "0.00", "0.00", "0.00", "", "0.00" + T,
                     "0.00", refund_no + T, fee, "0.00", note])


def ali_head(title, marker, day, nextday):
    return ["#" + title,
            "#账号：[20880000000000000156]",
            "#起始日期：[%s 00:00:00]   终止日期：[%s 00:00:00]" % (day, nextday),
            "#" + "-" * 41 + marker + "-" * 40]


def ali_zip(entries):
    import io
    buf = io.BytesIO()

    class GbkInfo(zipfile.ZipInfo):
        # Alipay's entry names are GBK, without the UTF-8 flag (0x800)
        def _encodeFilenameFlags(self):
            return self.filename.encode("gbk"), self.flag_bits & ~0x800

    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in entries:
            zi = GbkInfo(name, date_time=(2026, 9, 17, 5, 46, 48))
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, text.encode("gbk"))
    return buf.getvalue()


rows = [
    ali_row("2026091622001412341234567890", "PN20260916000201", "交易", "测试商品A",
            "2026-09-16 10:55:16", "2026-09-16 10:55:23", "*三(138****0000)", "100.00", "", "-0.60",
            "测试商品A"),
    ali_row("2026091622001412341234567890", "PN20260916000201", "退款", "测试商品A",
            "2026-09-16 10:55:16", "2026-09-16 14:15:12", "*三(138****0000)", "-10.00",
            "RF20260916000201", "0.06", "测试商品A"),
    ali_row("2026091622001412341234567891", "PN20260916000202", "交易", "测试商品B",
            "2026-09-16 16:58:56", "2026-09-16 16:58:58", "*四(jo***@example.com)", "25.50", "",
            "-0.15", ""),
]


def ali_day(rows, totals, summary_line):
    """The detail and summary texts of 2026-09-16: rows, the detail's two
    totals lines, the summary's line"""
    detail = "\r\n".join(
        ali_head("支付宝业务明细查询", "业务明细列表", "2026年09月16日", "2026年09月17日")
        + [ALI_HEADER] + rows
        + ["#" + "-" * 41 + "业务明细列表结束" + "-" * 36] + totals
        + ["#导出时间：[2026年09月17日 05:46:49]"]) + "\r\n"
    summary = "\r\n".join(
        ali_head("支付宝业务汇总查询", "业务汇总列表", "2026年09月16日", "2026年09月17日")
        + [ALI_SUMMARY_HEADER, summary_line,
           "#" + "-" * 40 + "业务汇总列表结束" + "-" * 37,
           "#导出时间：[2026年09月17日 05:46:49]"]) + "\r\n"
    return detail, summary


detail, summary = ali_day(rows, ["#交易合计：2笔，商家实收共125.50元，商家优惠共0.00元",
                                 "#退款合计：1笔，商家实收退款共-10.00元，商家优惠退款共0.00元"],
                          "合计,,2,1,115.50,115.50,0.00,0.00,0.00,-0.69,0.00,114.81")
base = "20880000000000000156_20260916"
write("alipay_20260916.zip", ali_zip([(base + "_业务明细.csv", detail),
                                      (base + "_业务明细(汇总).csv", summary)]))
write("alipay_20260916_detail.csv", detail.encode("gbk"))
# a day of 12,000 payments (2.6 MB of GBK, every line with two-byte
# characters): read a chunk of whole lines at a time (GBK_CHUNK, 1 MB).
# The first line's note is padded so that the first 1 MB ends inside a
# two-byte character: a chunk cut there, not at a line's end, is refused.
big_rows = [ali_row("20260916220014%014d" % i, "PN2026091611%06d" % i, "交易", "测试商品甲乙丙",
                    "2026-09-16 10:55:16", "2026-09-16 10:55:23", "*三(138****0000)", "1.00", "", "-0.01",
                    "大额账单第%d笔" % i + ("x" * 51 if i == 0 else "")) for i in range(12000)]
big_detail, big_summary = ali_day(big_rows, ["#交易合计：12000笔，商家实收共12000.00元，商家优惠共0.00元",
                                             "#退款合计：0笔，商家实收退款共0.00元，商家优惠退款共0.00元"],
                                  "合计,,12000,0,12000.00,12000.00,0.00,0.00,0.00,-120.00,0.00,11880.00")
write("alipay_20260916_big.zip", ali_zip([(base + "_业务明细.csv", big_detail),
                                          (base + "_业务明细(汇总).csv", big_summary)]))
# malformed: no detail file; two detail files (two accounts' days)
write("alipay_no_detail.zip", ali_zip([(base + "_业务明细(汇总).csv", summary)]))
write("alipay_two_details.zip", ali_zip([(base + "_业务明细.csv", detail),
                                         ("20880000000000010156_20260916_业务明细.csv", detail)]))

# ---------------------------------------------------------------- Stripe

def txn(id_, amount, created, fee, type_, cat, source, desc, status="available"):
    return {"id": id_, "object": "balance_transaction", "amount": amount,
            "available_on": created + 259200, "created": created, "currency": "usd",
            "description": desc, "exchange_rate": None, "fee": fee,
            "fee_details": ([{"amount": fee, "application": None, "currency": "usd",
                              "description": "Stripe processing fees", "type": "stripe_fee"}]
                            if fee else []),
            "net": amount - fee, "reporting_category": cat, "source": source,
            "status": status, "type": type_}


# 2026-03-14 UTC: 1773446400 .. 1773532799
lst = {"object": "list", "url": "/v1/balance_transactions", "has_more": False, "data": [
    txn("txn_3PzAdjustTest0000000000004", -1500, 1773529200, 1500, "adjustment", "dispute",
        "du_1PzDisputeTest0000000004", "Chargeback withdrawal for ch_3PzOldChargeTest00000009"),
    txn("txn_3PzRfundTest0000000000003", -1000, 1773502400, 0, "refund", "refund",
        "re_3PzRfundTest0000000000003", "REFUND FOR CHARGE (Order PN-S1)"),
    txn("txn_3PzChargeTest000000000002", 2550, 1773486165, 104, "charge", "charge",
        "ch_3PzChargeTest000000000002", "Order PN-S2", "pending"),
    txn("txn_3PzChargeTest000000000001", 10000, 1773480067, 320, "charge", "charge",
        "ch_3PzChargeTest000000000001", "Order PN-S1", "pending"),
]}
write("stripe_20260314.json", (json.dumps(lst, indent=2, ensure_ascii=False) + "\n").encode())
more = dict(lst, has_more=True)
write("stripe_has_more.json", (json.dumps(more, indent=2) + "\n").encode())

dash = ("id,Type,Source,Amount,Fee,Destination Platform Fee,Destination Platform Fee Currency,Net,"
        "Currency,Created (UTC),Available On (UTC),Description,Customer Facing Amount,"
        "Customer Facing Currency,Transfer,Transfer Date (UTC),Transfer Group\n"
        "txn_3PzAdjustTest0000000000004,adjustment,du_1PzDisputeTest0000000004,-15.00,15.00,,,-30.00,usd,"
        "2026-03-14 23:00,2026-03-14 23:00,Chargeback withdrawal for ch_3PzOldChargeTest00000009,,,,,\n"
        "txn_3PzRfundTest0000000000003,refund,re_3PzRfundTest0000000000003,-10.00,0.00,,,-10.00,usd,"
        "2026-03-14 15:33,2026-03-14 15:33,\"REFUND FOR CHARGE (Order PN-S1, \"\"partial\"\")\",-10.00,usd,,,\n"
        "txn_3PzChargeTest000000000002,charge,ch_3PzChargeTest000000000002,25.50,1.04,,,24.46,usd,"
        "2026-03-14 11:02,2026-03-17 00:00,Order PN-S2,25.50,usd,,,\n"
        "txn_3PzChargeTest000000000001,charge,ch_3PzChargeTest000000000001,100.00,3.20,,,96.80,usd,"
        "2026-03-14 09:21,2026-03-17 00:00,Order PN-S1,100.00,usd,,,\n")
write("stripe_20260314_dashboard.csv", dash.encode())

report = ("balance_transaction_id,created_utc,available_on_utc,currency,gross,fee,net,reporting_category,"
          "source_id,description,charge_id,payment_intent_id,payment_metadata[order_id]\n"
          "txn_3PzChargeTest000000000001,2026-03-14 09:21:07,2026-03-17 00:00:00,usd,100.00,3.20,96.80,charge,"
          "ch_3PzChargeTest000000000001,Order PN-S1,ch_3PzChargeTest000000000001,pi_3PzChargeTest000000000001,PN-S1\n"
          "txn_3PzChargeTest000000000002,2026-03-14 11:02:45,2026-03-17 00:00:00,usd,25.50,1.04,24.46,charge,"
          "ch_3PzChargeTest000000000002,Order PN-S2,ch_3PzChargeTest000000000002,pi_3PzChargeTest000000000002,PN-S2\n"
          "txn_3PzRfundTest0000000000003,2026-03-14 15:33:20,2026-03-14 15:33:20,usd,-10.00,0.00,-10.00,refund,"
          "re_3PzRfundTest0000000000003,\"REFUND FOR CHARGE (Order PN-S1)\",ch_3PzChargeTest000000000001,"
          "pi_3PzChargeTest000000000001,PN-S1\n")
write("stripe_20260314_report.csv", report.encode())
