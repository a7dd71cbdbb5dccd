#!/usr/bin/env python3
"""Signed Alipay notification bodies for sql/alipay.sql.

Prints the INSERT that fills t.ali_form: each row is a urlencoded body
signed exactly as Alipay signs (RSA2 over the sorted, skip-empty content
without sign/sign_type), with the TEST-ONLY private keys of test/vectors/keys.
PKCS#1 v1.5 signatures are deterministic, so the output is byte-identical on
every run.  Needs python3 and python3-cryptography (test/pylib/pnsign.py).

    test/unit/make_alipay_forms.py [VECTORS_DIR] > /tmp/forms.sql
    PN_AGREEMENTS=1 test/unit/make_alipay_forms.py  # sql/agreements.sql's
    PN_BOUNDS=1 test/unit/make_alipay_forms.py      # sql/bounds.sql's
"""
import os
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
if len(sys.argv) > 1:
    os.environ['PN_VECTORS'] = sys.argv[1]
sys.path.insert(0, os.path.join(HERE, '..', 'pylib'))
import pnsign  # noqa: E402

KEYS = {1: 'alipay_1.key.pem', 2: 'alipay_2.key.pem'}

BASE = [
    ('notify_time', '2026-01-02 10:00:00'), ('notify_type', 'trade_status_sync'),
    ('charset', 'utf-8'), ('version', '1.0'), ('sign_type', 'RSA2'),
    ('app_id', '2021000000000001'), ('auth_app_id', '2021000000000001'),
    ('seller_id', '2088000000000002'), ('buyer_id', '2088000000000001'),
    ('subject', '回归测试 order'), ('gmt_payment', '2026-01-02 09:59:58'),
]

# name, key, overrides (None drops a parameter); bytes values are sent as is
FORMS = [
    ('pay_yuan0', 1, dict(notify_id='ali-n-01', out_trade_no='ALI-1', trade_no='ALI-T1', total_amount='20', trade_status='TRADE_SUCCESS')),
    ('pay_yuan1', 1, dict(notify_id='ali-n-02', out_trade_no='ALI-2', trade_no='ALI-T2', total_amount='88.8', trade_status='TRADE_SUCCESS')),
    ('pay_yuan2', 1, dict(notify_id='ali-n-03', out_trade_no='ALI-3', trade_no='ALI-T3', total_amount='0.01', trade_status='TRADE_SUCCESS')),
    ('amt_3dec', 1, dict(notify_id='ali-n-04', out_trade_no='ALI-4', trade_no='ALI-T4', total_amount='88.888', trade_status='TRADE_SUCCESS')),
    ('amt_comma', 1, dict(notify_id='ali-n-05', out_trade_no='ALI-4', trade_no='ALI-T4', total_amount='1,000.00', trade_status='TRADE_SUCCESS')),
    ('amt_negative', 1, dict(notify_id='ali-n-06', out_trade_no='ALI-4', trade_no='ALI-T4', total_amount='-1.00', trade_status='TRADE_SUCCESS')),
    ('amt_exponent', 1, dict(notify_id='ali-n-07', out_trade_no='ALI-4', trade_no='ALI-T4', total_amount='1e2', trade_status='TRADE_SUCCESS')),
    ('amt_bare_point', 1, dict(notify_id='ali-n-08', out_trade_no='ALI-4', trade_no='ALI-T4', total_amount='.50', trade_status='TRADE_SUCCESS')),
    ('amt_space', 1, dict(notify_id='ali-n-09', out_trade_no='ALI-4', trade_no='ALI-T4', total_amount=' 1.00', trade_status='TRADE_SUCCESS')),
    ('success_5', 1, dict(notify_id='ali-n-10', out_trade_no='ALI-5', trade_no='ALI-T5', total_amount='66.00', trade_status='TRADE_SUCCESS')),
    ('finished_5', 1, dict(notify_id='ali-n-11', out_trade_no='ALI-5', trade_no='ALI-T5', total_amount='66.00', trade_status='TRADE_FINISHED')),
    ('closed_6', 1, dict(notify_id='ali-n-12', out_trade_no='ALI-6', trade_no='ALI-T6', total_amount='10.00', trade_status='TRADE_CLOSED')),
    ('refund_part_1', 1, dict(notify_id='ali-n-13', out_trade_no='ALI-1', trade_no='ALI-T1', total_amount='20', trade_status='TRADE_SUCCESS',
                              refund_fee='5.00', out_biz_no='ALI-R1', gmt_refund='2026-01-02 10:00:00.123')),
    ('refund_full_1', 1, dict(notify_id='ali-n-14', out_trade_no='ALI-1', trade_no='ALI-T1', total_amount='20', trade_status='TRADE_CLOSED',
                              refund_fee='20.00', out_biz_no='ALI-R2', gmt_refund='2026-01-02 11:00:00.456')),
    ('wait_7', 1, dict(notify_id='ali-n-15', out_trade_no='ALI-7', trade_no='ALI-T7', total_amount='1.00', trade_status='WAIT_BUYER_PAY')),
    ('seller_other', 1, dict(notify_id='ali-n-16', out_trade_no='ALI-7', trade_no='ALI-T7', total_amount='1.00', trade_status='TRADE_SUCCESS',
                             seller_id='2088000000009999')),
    ('no_sign_type', 1, dict(notify_id='ali-n-17', out_trade_no='ALI-7', trade_no='ALI-T7', total_amount='1.00', trade_status='TRADE_SUCCESS',
                             sign_type=None)),
    ('no_order_no', 1, dict(notify_id='ali-n-18', trade_no='ALI-T7', total_amount='1.00', trade_status='TRADE_SUCCESS')),
    ('key2_8', 2, dict(notify_id='ali-n-20', out_trade_no='ALI-8', trade_no='ALI-T8', total_amount='30.00', trade_status='TRADE_SUCCESS')),
    ('key1_9', 1, dict(notify_id='ali-n-21', out_trade_no='ALI-9', trade_no='ALI-T9', total_amount='40.00', trade_status='TRADE_SUCCESS')),
    ('key2_9', 2, dict(notify_id='ali-n-22', out_trade_no='ALI-9', trade_no='ALI-T9', total_amount='40.00', trade_status='TRADE_SUCCESS')),
    # Alipay's documented payment notice carries refund_fee=0.00 and
    # gmt_close: a payment; a close with refund_fee=0.00 closes; a
    # refund_fee without gmt_refund or out_biz_no is no refund
    ('paid_zero_fee_10', 1, dict(notify_id='ali-n-24', out_trade_no='ALI-10', trade_no='ALI-T10', total_amount='20.00', trade_status='TRADE_SUCCESS',
                                 refund_fee='0.00', gmt_close='2026-01-02 10:00:00')),
    ('closed_zero_fee_11', 1, dict(notify_id='ali-n-25', out_trade_no='ALI-11', trade_no='ALI-T11', total_amount='20.00', trade_status='TRADE_CLOSED',
                                   refund_fee='0.00', gmt_close='2026-01-02 10:00:00')),
    ('finished_fee_only_12', 1, dict(notify_id='ali-n-26', out_trade_no='ALI-12', trade_no='ALI-T12', total_amount='20.00', trade_status='TRADE_SUCCESS',
                                     refund_fee='5.00')),
    ('refund_zero_fee_10', 1, dict(notify_id='ali-n-27', out_trade_no='ALI-10', trade_no='ALI-T10', total_amount='20.00', trade_status='TRADE_SUCCESS',
                                   refund_fee='0.00', out_biz_no='ALI-R10', gmt_refund='2026-01-02 11:00:00')),
    ('gbk_invalid', 1, dict(notify_id='ali-n-23', out_trade_no='ALI-7', trade_no='ALI-T7', total_amount='1.00', trade_status='TRADE_SUCCESS',
                            charset='GBK', subject=b'\x81\x20bad')),
]


# Agreement (deduction) notices for sql/agreements.sql: printed with
# --agreements, for t.ali_agr_form
AGREEMENT_BASE = [
    ('notify_time', '2026-01-02 10:00:00'), ('charset', 'utf-8'), ('version', '1.0'),
    ('sign_type', 'RSA2'), ('app_id', '2021000000000001'),
    ('alipay_user_id', '2088000000000001'), ('personal_product_code', 'CYCLE_PAY_AUTH_P'),
    ('sign_scene', 'INDUSTRY|DEFAULT_SCENE'), ('sign_time', '2026-01-02 09:00:00'),
]
AGREEMENT_FORMS = [
    ('sign_1', 1, dict(notify_id='ali-a-01', notify_type='dut_user_sign', status='NORMAL',
                       agreement_no='ALI-AG-1', external_agreement_no='M-AG-1')),
    ('unsign_1', 1, dict(notify_id='ali-a-02', notify_type='dut_user_unsign', status='UNSIGN',
                         agreement_no='ALI-AG-1', external_agreement_no='M-AG-1',
                         unsign_time='2026-01-03 09:00:00')),
    # partner_id and no app_id
    ('sign_2_partner', 1, dict(notify_id='ali-a-03', notify_type='dut_user_sign', status='NORMAL',
                               agreement_no='ALI-AG-2', app_id=None, partner_id='2088000000000002')),
    ('sign_3_other_app', 1, dict(notify_id='ali-a-04', notify_type='dut_user_sign', status='NORMAL',
                                 agreement_no='ALI-AG-3', app_id='2021000000009999')),
    ('sign_no_agreement', 1, dict(notify_id='ali-a-05', notify_type='dut_user_sign', status='NORMAL')),
    ('pay_ag_1', 1, dict(BASE + [('notify_id', 'ali-a-06'), ('out_trade_no', 'ALI-AG-O1'),
                                 ('trade_no', 'ALI-AG-T1'), ('total_amount', '1.00'),
                                 ('trade_status', 'TRADE_SUCCESS'), ('agreement_no', 'ALI-AG-1')])),
    # another merchant's PID: without app_id, and beside our app_id
    ('sign_4_other_partner', 1, dict(notify_id='ali-a-07', notify_type='dut_user_sign', status='NORMAL',
                                     agreement_no='ALI-AG-4', app_id=None, partner_id='2088999999999999')),
    ('unsign_2_other_partner', 1, dict(notify_id='ali-a-08', notify_type='dut_user_unsign', status='UNSIGN',
                                       agreement_no='ALI-AG-2', partner_id='2088999999999999',
                                       unsign_time='2026-01-05 09:00:00')),
]

# Ids one byte over the bound (PN_MAX_ID_LEN, 255) and at it, for
# sql/bounds.sql: printed with PN_BOUNDS=1, for t.ali_bound_form
BOUND_FORMS = [
    ('long_agreement', 1, dict(notify_id='ali-b-01', notify_type='dut_user_sign', status='NORMAL',
                               agreement_no='A' * 256)),
    ('long_order', 1, dict(BASE + [('notify_id', 'ali-b-02'), ('out_trade_no', 'B' * 256),
                                   ('trade_no', 'ALI-B-T2'), ('total_amount', '1.00'),
                                   ('trade_status', 'TRADE_SUCCESS')])),
    ('long_trade', 1, dict(BASE + [('notify_id', 'ali-b-03'), ('out_trade_no', 'ALI-B-O3'),
                                   ('trade_no', 'T' * 256), ('total_amount', '1.00'),
                                   ('trade_status', 'TRADE_SUCCESS')])),
    ('limit_agreement', 1, dict(notify_id='ali-b-04', notify_type='dut_user_sign', status='NORMAL',
                                agreement_no='A' * 255)),
    ('limit_pay', 1, dict(BASE + [('notify_id', 'ali-b-05'), ('out_trade_no', 'ALI-B-O5'),
                                  ('trade_no', 'T' * 255), ('total_amount', '1.00'),
                                  ('trade_status', 'TRADE_SUCCESS')])),
]


def body(key, overrides, base=None):
    """The urlencoded, signed body."""
    params = dict(BASE if base is None else base)
    params.update(overrides)
    enc = 'gbk' if params.get('charset') == 'GBK' else 'utf-8'
    items = [(k, v if isinstance(v, bytes) else v.encode(enc)) for k, v in params.items() if v is not None]
    content = pnsign.alipay_content([(k.encode(), v) for k, v in items])
    items.append(('sign', pnsign.rsa_sign(KEYS[key], content)))
    return '&'.join(k + '=' + urllib.parse.quote_plus(v) for k, v in items), params.get('charset')


def main():
    rows = []
    agreements = os.environ.get('PN_AGREEMENTS') == '1'
    bounds = os.environ.get('PN_BOUNDS') == '1'
    forms = BOUND_FORMS if bounds else AGREEMENT_FORMS if agreements else FORMS
    for name, key, overrides in forms:
        text, charset = body(key, overrides, AGREEMENT_BASE if agreements or bounds else None)
        rows.append("\t('%s', '%s',\n\t '%s')" % (name, charset, text))
    print('INSERT INTO t.%s (name, charset, body) VALUES'
          % ('ali_bound_form' if bounds else 'ali_agr_form' if agreements else 'ali_form'))
    print(',\n'.join(rows) + ';')


if __name__ == '__main__':
    main()
