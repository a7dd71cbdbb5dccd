/*
 * send_opts.c
 *		The command line: one table lists every option with what it sets
 *		and how its argument is checked, and --help; then the checks and
 *		defaults that depend on several options.
 */
#include "send_run.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

const char *const mode_names[] = {"one", "storm", "distinct", "retry", "bad", "serve"};
const char *const gateway_names[] = {"wxpay", "alipay", "stripe"};
const char *const event_names[] = {"pay", "refund", "sign", "terminate", "charge", "charge-failed"};

/* Seconds between deliveries after a failed one (docs/GATEWAYS.md 1.10, 2.9, 3.7). */
static const double sched_wxpay[] = {15, 15, 30, 180, 600, 1200, 1800, 1800, 1800,
3600, 10800, 10800, 10800, 21600, 21600};
static const double sched_alipay[] = {240, 600, 600, 3600, 7200, 21600, 54000};
static const double sched_stripe[] = {60, 300, 1800, 3600, 7200, 14400, 28800,
43200, 43200, 43200, 43200};

static const char *const help_lines[] = {
	"Usage: paynotify-send --gateway wxpay|alipay|stripe --url URL [options]\n",
	"       paynotify-send --gateway G (--dump-dir DIR | --dump-sql FILE) [options]\n",
	"       paynotify-send --mode serve --listen ADDR:PORT --sales FILE[,FILE...] [options]\n",
	"\n",
	"A payment gateway in a box: signs (and for WeChat Pay encrypts) notifications\n",
	"exactly as WeChat Pay v3, Alipay and Stripe do, and POSTs them to URL, e.g.\n",
	"http://127.0.0.1:8080/notify/wxpay (the channel name in the URL is yours).\n",
	"\n",
	"Modes (--mode M, default one):\n",
	"  one        one notification; prints the reply's status line, headers and body\n",
	"  storm      -n deliveries of ONE notification (order --start), -c at a time; each\n",
	"             delivery keeps the id and body and is signed afresh (new timestamp,\n",
	"             nonce, signature), as a gateway's re-delivery is\n",
	"  distinct   -n notifications for -n orders (--start, --start+1, ...), -c at a time\n",
	"  retry      -n notifications (as distinct), each re-delivered on its gateway's\n",
	"             schedule until acknowledged; gives up when the schedule ends\n",
	"  bad        -n deliberately bad requests of each kind chosen by --bad\n",
	"  serve      send nothing: answer the gateways' query and bill APIs from the\n",
	"             --sales record (see \"Serving the APIs\" below)\n",
	"\n",
	"Notification content:\n",
	"  --gateway G         wxpay, alipay or stripe (required)\n",
	"  --event E           pay (default): WeChat TRANSACTION.SUCCESS, Alipay TRADE_SUCCESS,\n",
	"                      Stripe payment_intent.succeeded; refund: WeChat REFUND.SUCCESS\n",
	"                      (refund_id, out_refund_no, amount.refund), Alipay refund_fee/\n",
	"                      out_biz_no/gmt_refund (TRADE_SUCCESS for a partial refund,\n",
	"                      TRADE_CLOSED for a full one), Stripe charge.refunded\n",
	"                      (amount_refunded; refunded=true only when full)\n",
	"                      Agreements (recurring billing), each naming an agreement:\n",
	"                      sign: WeChat ENTRUST.SIGN (resource entrust: contract_id,\n",
	"                      out_contract_code, plan_id, openid, contract_state SIGNED),\n",
	"                      Alipay dut_user_sign (agreement_no, external_agreement_no,\n",
	"                      status NORMAL), Stripe customer.subscription.created\n",
	"                      (status active); terminate: WeChat ENTRUST.TERMINATE\n",
	"                      (TERMINATED, contract_terminate_info), Alipay\n",
	"                      dut_user_unsign (status UNSIGN, unsign_time), Stripe\n",
	"                      customer.subscription.deleted (canceled); charge: a payment\n",
	"                      of the order under the agreement: WeChat TRANSACTION.SUCCESS\n",
	"                      with trade_type PAP and contract_id, Alipay the pay notice,\n",
	"                      Stripe invoice.paid (a renewal, no payment_intent; the\n",
	"                      order at the invoice's metadata.order_id, the agreement\n",
	"                      reference in the subscription's metadata, trade number\n",
	"                      the invoice id, amount_paid); charge-failed: Stripe\n",
	"                      invoice.payment_failed (Stripe only)\n",
	"  --agreement-id ID   the gateway's agreement id (WeChat contract_id, Alipay\n",
	"                      agreement_no, Stripe sub_...; default: derived from the\n",
	"                      order number, as the trade ids are, so that every event of\n",
	"                      one order's agreement names the same one)\n",
	"  --agreement-ref R   the merchant's reference to it (WeChat out_contract_code,\n",
	"                      Alipay external_agreement_no, Stripe subscription\n",
	"                      metadata.order_id; default AG<order number>, for Stripe\n",
	"                      the order number)\n",
	"  --start I           index of the first order (default 1)\n",
	"  --order-format F    order number from the index, printf style with exactly one\n",
	"                      integer conversion (default PN%08d -> PN00000001)\n",
	"  --amount A          order amount in minor units, fen/cents (default 8888;\n",
	"                      Alipay sends it as decimal yuan, 88.88)\n",
	"  --refund-amount R   refunded amount in minor units, 1..A (default 1000, or A if less)\n",
	"  --currency C        WeChat amount.currency (default CNY), Stripe currency (default usd)\n",
	"  --mchid ID          WeChat mchid (default 1900000109)\n",
	"  --appid ID          WeChat appid (default wx0000000000test01)\n",
	"  --app-id ID         Alipay app_id and auth_app_id (default 2021000000000001)\n",
	"  --seller-id ID      Alipay seller_id (default 2088000000000002)\n",
	"  --livemode          Stripe events say \"livemode\": true (default false)\n",
	"  --seed N            seed of the PRNG behind ids and nonces (default: from the\n",
	"                      clock; the report prints it). Notification ids depend on the\n",
	"                      seed, the gateway, the event, the bad kind and the order index\n",
	"  --now UNIX          sign with this clock instead of the real one: WeChat\n",
	"                      Wechatpay-Timestamp and create_time, Alipay notify_time and\n",
	"                      gmt_*, Stripe t and created. With --seed the output is then\n",
	"                      byte-for-byte reproducible (except --bad unknown-serial for\n",
	"                      Alipay, whose key is generated per run). A verifier replaying\n",
	"                      such requests later must use the same clock (paynotify.now)\n",
	"  --created UNIX      the time the notification says it was made (WeChat\n",
	"                      create_time, Alipay gmt_*, Stripe created; default: --now or\n",
	"                      the clock), signed with the clock as a gateway's re-delivery\n",
	"                      is. To deliver an earlier run's notification again (the\n",
	"                      same body: a duplicate, not another notification with its\n",
	"                      id), give its --seed, --start, --event and --created: each\n",
	"                      run prints them\n",
	"  --payload FILE      send the notification in FILE instead of generating one,\n",
	"                      signed (WeChat: encrypted) as the gateway does; modes one,\n",
	"                      storm and retry (-n 1), and --dump-*. --event, --amount\n",
	"                      and the other content options do not change it; --now is\n",
	"                      the signing clock as usual. FILE holds:\n",
	"                        wxpay   the JSON envelope with resource.plaintext (the\n",
	"                                decrypted resource object) instead of ciphertext;\n",
	"                                the envelope is sent compact (whitespace outside\n",
	"                                strings dropped, everything else as written), the\n",
	"                                plaintext's compact bytes are sealed with the APIv3\n",
	"                                key, the file's nonce and associated_data, and\n",
	"                                \"ciphertext\" takes the place of \"plaintext\"\n",
	"                        alipay  one line of form parameters without sign, UTF-8;\n",
	"                                with charset GBK, gb2312 or gb18030 the values are\n",
	"                                converted to it before signing and sending. sign\n",
	"                                (SHA256withRSA, whatever sign_type says) is\n",
	"                                appended; notify_time stays the file's\n",
	"                        stripe  the event JSON, sent byte for byte\n",
	"                      A file that does not read or parse is exit 2, nothing sent.\n",
	"                      Reports and --ledger take the notification id and order\n",
	"                      number from the file (WeChat id and out_trade_no, Alipay\n",
	"                      notify_id and out_trade_no, Stripe id and\n",
	"                      data.object.metadata.order_id) and the event from --event\n",
	"\n",
	"Keys (--keys DIR; a file name containing '/' is taken as a path as it is):\n",
	"  --keys DIR          key folder (default .), laid out like test/vectors/keys:\n",
	"                        wechat_platform_1.key.pem   WeChat platform private key\n",
	"                        wechat_platform_1.cert.pem  its certificate (serial)\n",
	"                        wechat_apiv3.key            APIv3 key, 32 ASCII bytes\n",
	"                        alipay_1.key.pem            Alipay private key\n",
	"                        stripe_secret_1.txt         Stripe endpoint secret whsec_...\n",
	"                      only the chosen gateway's files are read\n",
	"  --wx-key FILE       WeChat signing key (default wechat_platform_1.key.pem)\n",
	"  --wx-cert FILE      certificate whose serial (upper-case hex) is sent as\n",
	"                      Wechatpay-Serial (default wechat_platform_1.cert.pem)\n",
	"  --serial S          send this Wechatpay-Serial instead of reading the certificate,\n",
	"                      e.g. a PUB_KEY_ID_... with --wx-key wechat_pubkey_3.key.pem\n",
	"  --apiv3-key FILE    APIv3 key file (default wechat_apiv3.key)\n",
	"  --alipay-key FILE   Alipay signing key (default alipay_1.key.pem)\n",
	"  --stripe-secret F   Stripe secret file (default stripe_secret_1.txt); the HMAC key\n",
	"                      is the whole whsec_ string\n",
	"\n",
	"Delivery:\n",
	"  --url URL           where to POST (http or https); not needed with --dump-*\n",
	"  -n N                storm: deliveries; distinct, retry: notifications; bad:\n",
	"                      requests per kind (default 1000; bad 1; one is always 1)\n",
	"  -c C                transfers in flight at once (default 50; one: 1)\n",
	"  --timeout S         per-request timeout in seconds (default 5, WeChat's limit);\n",
	"                      a timeout counts as a failed delivery\n",
	"  --same-signature    storm: sign once and send the identical bytes N times\n",
	"  --bad KIND          tampered, stale, probe, unknown-serial or all (default all):\n",
	"                        tampered        body changed after signing (WeChat\n",
	"                                        create_time, Alipay total_amount +0.01,\n",
	"                                        Stripe amount +1)\n",
	"                        stale           timestamp 1 h old (WeChat, Stripe); Alipay has\n",
	"                                        no freshness field: notify_time 1 h old, which\n",
	"                                        a verifier is expected to accept\n",
	"                        probe           WeChat only: Wechatpay-Signature prefixed\n",
	"                                        WECHATPAY/SIGNTEST/\n",
	"                        unknown-serial  WeChat: a serial nobody configured; Alipay:\n",
	"                                        signed by a freshly generated RSA key; Stripe:\n",
	"                                        HMAC with a random secret\n",
	"                      all = every kind that applies to the gateway\n",
	"\n",
	"Retry mode:\n",
	"  Acknowledged means: WeChat HTTP 200 or 204; Alipay a 2xx whose body is exactly\n",
	"  \"success\"; Stripe any 2xx. Anything else, or no reply, is retried after the\n",
	"  next interval of the schedule (counted from the failed reply); each re-delivery\n",
	"  keeps the id (and, but for Alipay's notify_time, the body) and is signed afresh.\n",
	"  Default schedules, seconds between deliveries:\n",
	"    wxpay   15 15 30 180 600 1200 1800 1800 1800 3600 10800 10800 10800 21600\n",
	"            21600 (16 deliveries in 24 h 4 min)\n",
	"    alipay  240 600 600 3600 7200 21600 54000 (8 deliveries in about 25 h)\n",
	"    stripe  60 300 1800 3600 7200 14400 28800 43200 43200 43200 43200 (Stripe only\n",
	"            says \"exponential back-off for up to 3 days\"; this is an approximation)\n",
	"  --time-scale F      multiply every interval by F (default 1; 0.001 turns WeChat's\n",
	"                      15 s into 15 ms)\n",
	"  --schedule LIST     comma-separated intervals in seconds replacing the default\n",
	"  --extra-deliveries K  after the acknowledgement deliver K more duplicates, each the\n",
	"                      first interval of the schedule after the previous one, as\n",
	"                      at-least-once gateways do\n",
	"  Exit status 1 when any notification was never acknowledged.\n",
	"\n",
	"Signing:\n",
	"  --threads T         signing threads (default: online CPUs)\n",
	"  --presign N         requests built ahead of sending (default 50000); when the run\n",
	"                      fits, all are signed before the clock starts\n",
	"  --resign-after S    a request sent more than S seconds after it was signed\n",
	"                      is signed again (default 60; receivers refuse signatures\n",
	"                      older than 5 minutes, and a long run on a slow machine\n",
	"                      must not send stale ones); not with --now or\n",
	"                      --same-signature, whose signatures are fixed\n",
	"\n",
	"Output:\n",
	"  Counts by HTTP status and by outcome (reply header Paynotify-Outcome, \"none\"\n",
	"  when absent; only replies are counted there), transport errors by libcurl error,\n",
	"  acknowledgements, requests/s and latency p50/p99/max. Progress goes to stderr\n",
	"  every 2 s on longer runs.\n",
	"  --json              print one JSON object on stdout instead: mode, gateway, event,\n",
	"                      url, seed, concurrency, notifications, deliveries, replies,\n",
	"                      transport_errors, acked, status{code:n}, outcome{label:n},\n",
	"                      errors{message:n}, elapsed_s, rps, latency_ms{p50,p99,max},\n",
	"                      interrupted; retry adds retry{notifications, acknowledged,\n",
	"                      unacknowledged, extra_deliveries, time_scale,\n",
	"                      deliveries_to_ack{k:n}}; bad adds by_kind{kind:{...counts}};\n",
	"                      one adds notify_id, order_no, reply{status, outcome, acked,\n",
	"                      error, headers[[name,value]], body}\n",
	"  --quiet             no progress lines\n",
	"  --verbose           one line per reply on stderr\n",
	"  --dump-dir DIR      send nothing; write each request the mode would send first to\n",
	"                      DIR/NNNNNN/headers.txt (Name: value per line) and body.json or\n",
	"                      body.form, plus DIR/index.tsv (seq, gateway, event, bad,\n",
	"                      order_no, notify_id, delivery). retry dumps first deliveries\n",
	"  --dump-sql FILE     send nothing; write one line per request (FILE - = stdout):\n",
	"                      SELECT outcome FROM paynotify_handle('<channel>',\n",
	"                      '<headers json>'::jsonb, '\\x<hex body>'::bytea);\n",
	"                      (standard_conforming_strings = on). Use --now to sign at a\n",
	"                      fixed time and replay with SET paynotify.now to that time\n",
	"  --channel NAME      channel for --dump-sql and --ledger (default: last path\n",
	"                      segment of --url, else the gateway name)\n",
	"  --ledger FILE       append one line per delivery, in every sending mode, to FILE\n",
	"                      (created if missing; several runs may share it: each line is\n",
	"                      one O_APPEND write), tab-separated: UTC time of the reply\n",
	"                      (2026-01-01T00:00:00.000000Z), channel, event (as --event),\n",
	"                      notification id, order number, delivery number (1 = first),\n",
	"                      HTTP status (0 = no reply), outcome (Paynotify-Outcome, none\n",
	"                      when absent), acknowledged by the gateway's rule (1|0), bad\n",
	"                      kind (- for a good request), seconds from the request's start\n",
	"                      to its reply (0.012345). A failed write ends in exit 1\n",
	"                      A notification lost by --drop gets one line: delivery 1,\n",
	"                      status 0, outcome dropped, 0, -, 0.000000\n",
	"\n",
	"What was sold, and lost notifications (every sending mode but bad, and --dump-*):\n",
	"  --sales FILE        append one line per notification generated (its first\n",
	"                      delivery; a storm is one notification) to FILE, created if\n",
	"                      missing, one O_APPEND write a line; tab-separated, 16 fields:\n",
	"                        gateway (wxpay|alipay|stripe), channel (as --ledger),\n",
	"                        event (pay|refund), order number, trade number (WeChat\n",
	"                        transaction_id, Alipay trade_no, Stripe payment intent\n",
	"                        id), amount (minor units), currency, refund id (WeChat\n",
	"                        refund_id, Alipay out_biz_no, Stripe re_...; - for a\n",
	"                        payment), out_refund_no (- for a payment and Stripe),\n",
	"                        refund amount (minor units, 0 for a payment), time (unix\n",
	"                        seconds of the success time in the notification: WeChat\n",
	"                        success_time, Alipay gmt_payment/gmt_refund, Stripe\n",
	"                        created), dropped (1|0), notification id, merchant\n",
	"                        (WeChat mchid, Alipay seller_id, Stripe -), app (WeChat\n",
	"                        appid, Alipay app_id, Stripe -), payer (WeChat openid,\n",
	"                        Alipay buyer_id, Stripe latest_charge ch_...)\n",
	"                      The same ids, amounts and times are the ones signed into\n",
	"                      the notifications. Not with --payload. A failed write ends\n",
	"                      in exit 1\n",
	"  --drop F            lose the fraction F (0..1) of the notifications: never\n",
	"                      delivered, not even retried, but recorded in --sales as\n",
	"                      sold and dropped, in --ledger as outcome dropped, and\n",
	"                      counted as dropped in the report. Which ones is decided by\n",
	"                      --seed, the gateway, the event and the order index alone\n",
	"                      (a storm loses all its deliveries or none). With --dump-*\n",
	"                      a dropped notification is not written\n",
	"\n",
	"Serving the APIs (--mode serve; no --gateway, --url or sending options):\n",
	"  --listen ADDR:PORT  IPv4 address and port to answer on (port 0: any free one;\n",
	"                      the first stdout line says \"paynotify-send: serving\n",
	"                      http://ADDR:PORT ...\"). Runs until SIGINT or SIGTERM\n",
	"  --sales F[,F...]    the record answered from, read again at a request when a\n",
	"                      file changed (a file not there yet is empty). An order's\n",
	"                      payment with a time later than the server's clock (--now,\n",
	"                      else the real one) is not paid yet; a refund recorded\n",
	"                      makes it refunded. Dropped sales are answered as sold\n",
	"  --merchant-cert F   the merchant's certificate or public key (PEM): checks the\n",
	"                      WeChat Pay requests' Authorization (WECHATPAY2-SHA256-\n",
	"                      RSA2048 over \"METHOD\\nPATH?QUERY\\nTS\\nNONCE\\nBODY\\n\", mchid,\n",
	"                      nonce_str, signature, timestamp within 5 min, serial_no);\n",
	"                      answers are signed with --wx-key and --wx-cert's serial\n",
	"                      (or --serial) as WeChat does (Wechatpay-Timestamp, -Nonce,\n",
	"                      -Signature over \"TS\\nNONCE\\nBODY\\n\", -Serial). Enables:\n",
	"                        GET /v3/pay/transactions/out-trade-no/NO?mchid=M\n",
	"                        GET /v3/pay/partner/transactions/out-trade-no/NO\n",
	"                            ?sp_mchid=SP&sub_mchid=M  (signed by SP)\n",
	"                          200 trade_state SUCCESS, REFUND, NOTPAY or CLOSED; a\n",
	"                          signed 404 ORDER_NOT_EXIST; 401 SIGN_ERROR (unsigned)\n",
	"                          on a bad request signature\n",
	"                        POST .../out-trade-no/NO/close  {\"mchid\":M} (partner:\n",
	"                            {\"sp_mchid\":SP,\"sub_mchid\":M})  204 signed, the\n",
	"                          order CLOSED from then on; 400 ORDERPAID if paid\n",
	"                        GET /v3/bill/tradebill?bill_date=YYYY-MM-DD[&bill_type=ALL]\n",
	"                            [&tar_type=GZIP]   download_url, hash_type SHA1,\n",
	"                          hash_value (of the plain file); 400 NO_STATEMENT_EXIST\n",
	"                          for a Beijing day without sales\n",
	"                        GET /v3/billdownload/file?token=T  (signed request) the\n",
	"                          bill: UTF-8 with BOM, CRLF, backtick fields, fee 0.6 %\n",
	"  --app-public-key F  the Alipay app's public key (PEM): checks the RSA2 sign of\n",
	"                      GET or POST /gateway.do (app_id must be --app-id); answers\n",
	"                      {\"<method>_response\":{...},\"sign\":\"...\"} signed over the\n",
	"                      object's exact text with --alipay-key. Methods:\n",
	"                        alipay.trade.query  TRADE_SUCCESS, TRADE_CLOSED (fully\n",
	"                          refunded, or closed), WAIT_BUYER_PAY, or 40004\n",
	"                          ACQ.TRADE_NOT_EXIST\n",
	"                        alipay.trade.close  10000, the trade TRADE_CLOSED from\n",
	"                          then on; 40004 ACQ.TRADE_STATUS_ERROR if paid\n",
	"                        alipay.data.dataservice.bill.downloadurl.query (bill_type\n",
	"                          trade, bill_date YYYY-MM-DD) bill_download_url, served\n",
	"                          at GET /downloadBillFile.resource: a zip of the GBK\n",
	"                          _业务明细.csv and _业务明细(汇总).csv of --seller-id\n",
	"  --stripe-api-key F  file holding the secret key (sk_test_...) requests must\n",
	"                      give as Authorization: Bearer KEY (or Basic KEY:):\n",
	"                        GET /v1/payment_intents/search?query=metadata['order_id']:'NO'\n",
	"                        GET /v1/payment_intents/pi_...\n",
	"                        GET /v1/balance_transactions?created[gte]=&created[lt]=\n",
	"                            [&limit=1..100][&starting_after=txn_...]\n",
	"                      401 for another key, 404 resource_missing\n",
	"  --serve-bad K       break every signed answer after signing: signature (one\n",
	"                      character of the signature) or body (one digit or letter\n",
	"                      of the body), so a client's refusal can be tested\n",
	"  --now UNIX          the server's clock (default: the real one)\n",
	"  Days are Beijing days for WeChat Pay and Alipay, UTC for Stripe. --verbose\n",
	"  logs one line per request on stderr.\n",
	"\n",
	"  -h, --help          this text;  --version  the version\n",
	"\n",
	"Exit status: 0 when the run completed (whatever the replies were), 1 when it\n",
	"could not complete (interrupted, write error, no reply in mode one) or, in\n",
	"retry mode, when a notification was never acknowledged, 2 on usage, key or\n",
	"--payload errors.\n",
	NULL
};

static void
usage(FILE *f)
{
	for (int i = 0; help_lines[i]; i++)
		fputs(help_lines[i], f);
}

static int
bad_usage(const char *fmt, const char *arg)
{
	fputs("paynotify-send: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry paynotify-send --help.\n", stderr);
	return EXIT_USAGE;
}

/*
 * Accepts a printf format with exactly one %d/%i/%u conversion (flags and
 * width allowed) and rewrites it to take a long long.
 */
static bool
parse_order_format(const char *in, char *out, size_t outsz)
{
	size_t		k = 0;
	int			conv = 0;

	for (const char *p = in; *p; p++)
	{
		if (k + 8 >= outsz)
			return false;
		out[k++] = *p;
		if (*p != '%')
			continue;
		if (p[1] == '%')
		{
			out[k++] = *++p;
			continue;
		}
		while (strchr("-+ 0#", p[1]) && p[1])
			out[k++] = *++p;
		while (p[1] >= '0' && p[1] <= '9' && k + 8 < outsz)
			out[k++] = *++p;
		if (p[1] != 'd' && p[1] != 'i' && p[1] != 'u')
			return false;
		p++;
		out[k++] = 'l';
		out[k++] = 'l';
		out[k++] = 'd';
		conv++;
	}
	out[k] = '\0';
	return conv == 1;
}

static bool
parse_schedule(const char *s, struct opts *o)
{
	char		tmp[1024],
			   *save = NULL;

	snprintf(tmp, sizeof(tmp), "%s", s);
	o->n_schedule = 0;
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save))
	{
		if (o->n_schedule == MAX_SCHEDULE ||
			!pn_parse_double(t, 0, 1e7, &o->schedule[o->n_schedule]))
			return false;
		o->n_schedule++;
	}
	return o->n_schedule > 0;
}

static bool
parse_bad(const char *s, enum pn_gateway gw, struct opts *o)
{
	o->n_bad_kinds = 0;
	if (strcmp(s, "all") == 0)
	{
		for (int k = PN_BAD_TAMPERED; k < PN_BAD_COUNT; k++)
			if (k != PN_BAD_PROBE || gw == PN_WXPAY)
				o->bad_kinds[o->n_bad_kinds++] = k;
		return true;
	}
	for (int k = PN_BAD_TAMPERED; k < PN_BAD_COUNT; k++)
		if (strcmp(s, pn_bad_names[k]) == 0)
		{
			if (k == PN_BAD_PROBE && gw != PN_WXPAY)
				return false;
			o->bad_kinds[o->n_bad_kinds++] = k;
			return true;
		}
	return false;
}

static bool set_gateway(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_mode(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_event(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_order_format(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_seed(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_now(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_created(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_timeout(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_time_scale(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_schedule(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_drop(const char *arg, struct opts *o, struct pn_conf *c);
static bool set_serve_bad(const char *arg, struct opts *o, struct pn_conf *c);

/* How an option takes its argument. */
enum arg_kind
{
	ARG_FLAG,					/* no argument: sets a bool to true */
	ARG_STRING,					/* keeps the argument */
	ARG_LL,						/* a long long in [min, max] */
	ARG_INT,					/* an int in [min, max] */
	ARG_CUSTOM,					/* parse() checks and stores it */
	ARG_HELP,					/* prints the help, exits 0 */
	ARG_VERSION					/* prints the version, exits 0 */
};

/* One option: its names, where it goes, how it is checked. */
struct optdef
{
	const char *name;			/* --name, or NULL for a short-only option */
	char		short_name;		/* -c, or 0 for a long-only option */
	enum arg_kind kind;
	bool		in_conf;		/* offset is into struct pn_conf, else opts */
	size_t		offset;
	long long	min;			/* ARG_LL, ARG_INT */
	long long	max;
	bool		(*parse) (const char *arg, struct opts *o, struct pn_conf *c);
	const char *error;			/* for a bad argument; %s is the argument */
};

#define IN_OPTS(f) .in_conf = false, .offset = offsetof(struct opts, f)
#define IN_CONF(f) .in_conf = true, .offset = offsetof(struct pn_conf, f)

static const struct optdef optdefs[] = {
	{.name = "gateway", .kind = ARG_CUSTOM, .parse = set_gateway,
	.error = "unknown gateway \"%s\" (wxpay, alipay, stripe)"},
	{.name = "url", .kind = ARG_STRING, IN_OPTS(url)},
	{.name = "mode", .kind = ARG_CUSTOM, .parse = set_mode,
	.error = "unknown mode \"%s\" (one, storm, distinct, retry, bad, serve)"},
	{.name = "event", .kind = ARG_CUSTOM, .parse = set_event,
	.error = "unknown event \"%s\" (pay, refund, sign, terminate, charge, charge-failed)"},
	{.name = "agreement-id", .kind = ARG_STRING, IN_CONF(agreement_id)},
	{.name = "agreement-ref", .kind = ARG_STRING, IN_CONF(agreement_ref)},
	{.short_name = 'n', .kind = ARG_LL, IN_OPTS(n), .min = 1, .max = 100000000,
	.error = "-n wants an integer 1..100000000, not \"%s\""},
	{.short_name = 'c', .kind = ARG_INT, IN_OPTS(conc), .min = 1, .max = 10000,
	.error = "-c wants an integer 1..10000, not \"%s\""},
	{.name = "start", .kind = ARG_LL, IN_OPTS(start), .min = 0, .max = 999999999999LL,
	.error = "--start wants an integer 0..999999999999, not \"%s\""},
	{.name = "order-format", .kind = ARG_CUSTOM, .parse = set_order_format,
	.error = "--order-format needs exactly one %%d conversion: \"%s\""},
	{.name = "amount", .kind = ARG_LL, IN_CONF(amount), .min = 1, .max = 100000000000LL,
	.error = "--amount wants minor units 1..100000000000, not \"%s\""},
	{.name = "refund-amount", .kind = ARG_LL, IN_CONF(refund_amount),
		.min = 1, .max = 100000000000LL,
	.error = "--refund-amount wants minor units 1..100000000000, not \"%s\""},
	{.name = "currency", .kind = ARG_STRING, IN_CONF(currency)},
	{.name = "mchid", .kind = ARG_STRING, IN_CONF(mchid)},
	{.name = "appid", .kind = ARG_STRING, IN_CONF(appid)},
	{.name = "app-id", .kind = ARG_STRING, IN_CONF(ali_app_id)},
	{.name = "seller-id", .kind = ARG_STRING, IN_CONF(seller_id)},
	{.name = "livemode", .kind = ARG_FLAG, IN_CONF(livemode)},
	{.name = "seed", .kind = ARG_CUSTOM, .parse = set_seed,
	.error = "--seed wants a non-negative integer, not \"%s\""},
	{.name = "now", .kind = ARG_CUSTOM, .parse = set_now,
	.error = "--now wants unix seconds, not \"%s\""},
	{.name = "created", .kind = ARG_CUSTOM, .parse = set_created,
	.error = "--created wants unix seconds, not \"%s\""},
	{.name = "payload", .kind = ARG_STRING, IN_OPTS(payload)},
	{.name = "keys", .kind = ARG_STRING, IN_OPTS(keys_dir)},
	{.name = "wx-key", .kind = ARG_STRING, IN_OPTS(wx_key)},
	{.name = "wx-cert", .kind = ARG_STRING, IN_OPTS(wx_cert)},
	{.name = "serial", .kind = ARG_STRING, IN_OPTS(serial)},
	{.name = "apiv3-key", .kind = ARG_STRING, IN_OPTS(apiv3)},
	{.name = "alipay-key", .kind = ARG_STRING, IN_OPTS(ali_key)},
	{.name = "stripe-secret", .kind = ARG_STRING, IN_OPTS(stripe_secret)},
	{.name = "timeout", .kind = ARG_CUSTOM, .parse = set_timeout,
	.error = "--timeout wants seconds 0.001..3600, not \"%s\""},
	{.name = "same-signature", .kind = ARG_FLAG, IN_OPTS(same_signature)},
	{.name = "bad", .kind = ARG_STRING, IN_OPTS(bad)},
	{.name = "time-scale", .kind = ARG_CUSTOM, .parse = set_time_scale,
	.error = "--time-scale wants a factor 1e-9..1000, not \"%s\""},
	{.name = "schedule", .kind = ARG_CUSTOM, .parse = set_schedule,
	.error = "--schedule wants up to 64 comma-separated seconds, not \"%s\""},
	{.name = "extra-deliveries", .kind = ARG_LL, IN_OPTS(extra), .min = 0, .max = 1000,
	.error = "--extra-deliveries wants 0..1000, not \"%s\""},
	{.name = "threads", .kind = ARG_INT, IN_OPTS(threads), .min = 1, .max = 256,
	.error = "--threads wants 1..256, not \"%s\""},
	{.name = "presign", .kind = ARG_LL, IN_OPTS(presign), .min = 1, .max = 100000000,
	.error = "--presign wants 1..100000000, not \"%s\""},
	{.name = "resign-after", .kind = ARG_LL, IN_OPTS(resign_after), .min = 0, .max = 100000000,
	.error = "--resign-after wants 0..100000000 seconds, not \"%s\""},
	{.name = "json", .kind = ARG_FLAG, IN_OPTS(json)},
	{.name = "quiet", .kind = ARG_FLAG, IN_OPTS(quiet)},
	{.name = "verbose", .kind = ARG_FLAG, IN_OPTS(verbose)},
	{.name = "dump-dir", .kind = ARG_STRING, IN_OPTS(dump_dir)},
	{.name = "dump-sql", .kind = ARG_STRING, IN_OPTS(dump_sql)},
	{.name = "channel", .kind = ARG_STRING, IN_OPTS(channel)},
	{.name = "ledger", .kind = ARG_STRING, IN_OPTS(ledger)},
	{.name = "sales", .kind = ARG_STRING, IN_OPTS(sales)},
	{.name = "drop", .kind = ARG_CUSTOM, .parse = set_drop,
	.error = "--drop wants a fraction 0..1, not \"%s\""},
	{.name = "listen", .kind = ARG_STRING, IN_OPTS(listen)},
	{.name = "merchant-cert", .kind = ARG_STRING, IN_OPTS(merchant_cert)},
	{.name = "app-public-key", .kind = ARG_STRING, IN_OPTS(app_public_key)},
	{.name = "stripe-api-key", .kind = ARG_STRING, IN_OPTS(stripe_api_key)},
	{.name = "serve-bad", .kind = ARG_CUSTOM, .parse = set_serve_bad,
	.error = "--serve-bad wants signature or body, not \"%s\""},
	{.name = "help", .short_name = 'h', .kind = ARG_HELP},
	{.name = "version", .kind = ARG_VERSION},
};

#define NOPTDEFS (sizeof(optdefs) / sizeof(optdefs[0]))

/* Sets the defaults that do not depend on other options. */
void
opts_defaults(struct opts *o, struct pn_conf *c)
{
	long		ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(o, 0, sizeof(*o));
	memset(c, 0, sizeof(*c));
	o->mode = MODE_ONE;
	o->n = -1;
	o->conc = -1;
	o->start = 1;
	o->timeout_ms = 5000;
	o->time_scale = 1.0;
	o->threads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int) ncpu;
	o->presign = 50000;
	o->resign_after = 60;
	o->keys_dir = ".";
	o->wx_key = "wechat_platform_1.key.pem";
	o->wx_cert = "wechat_platform_1.cert.pem";
	o->apiv3 = "wechat_apiv3.key";
	o->ali_key = "alipay_1.key.pem";
	o->stripe_secret = "stripe_secret_1.txt";
	snprintf(o->order_fmt, sizeof(o->order_fmt), "PN%%08lld");
	c->gateway = (enum pn_gateway) -1;
	c->amount = 8888;
	c->refund_amount = -1;
	c->mchid = "1900000109";
	c->appid = "wx0000000000test01";
	c->ali_app_id = "2021000000000001";
	c->seller_id = "2088000000000002";
}

static int
lookup(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

static bool
set_gateway(const char *arg, struct opts *o, struct pn_conf *c)
{
	int			v = lookup(arg, gateway_names, 3);

	(void) o;
	if (v >= 0)
		c->gateway = (enum pn_gateway) v;
	return v >= 0;
}

static bool
set_mode(const char *arg, struct opts *o, struct pn_conf *c)
{
	int			v = lookup(arg, mode_names, 6);

	(void) c;
	if (v >= 0)
		o->mode = (enum mode) v;
	return v >= 0;
}

static bool
set_event(const char *arg, struct opts *o, struct pn_conf *c)
{
	int			v = lookup(arg, event_names, PN_EV_COUNT);

	(void) o;
	if (v >= 0)
		c->event = (enum pn_event) v;
	return v >= 0;
}

static bool
set_order_format(const char *arg, struct opts *o, struct pn_conf *c)
{
	(void) c;
	return parse_order_format(arg, o->order_fmt, sizeof(o->order_fmt));
}

static bool
set_seed(const char *arg, struct opts *o, struct pn_conf *c)
{
	long long	v;

	if (!pn_parse_ll(arg, 0, INT64_MAX, &v))
		return false;
	c->seed = (uint64_t) v;
	o->seed_given = true;
	return true;
}

static bool
set_now(const char *arg, struct opts *o, struct pn_conf *c)
{
	long long	v;

	(void) o;
	if (!pn_parse_ll(arg, 1, 253402300799LL, &v))
		return false;
	c->now_fixed = (time_t) v;
	return true;
}

static bool
set_created(const char *arg, struct opts *o, struct pn_conf *c)
{
	long long	v;

	(void) o;
	if (!pn_parse_ll(arg, 1, 253402300799LL, &v))
		return false;
	c->epoch = (time_t) v;
	return true;
}

static bool
set_timeout(const char *arg, struct opts *o, struct pn_conf *c)
{
	double		d;

	(void) c;
	if (!pn_parse_double(arg, 0.001, 3600, &d))
		return false;
	o->timeout_ms = (long) (d * 1000.0 + 0.5);
	return true;
}

static bool
set_time_scale(const char *arg, struct opts *o, struct pn_conf *c)
{
	(void) c;
	return pn_parse_double(arg, 1e-9, 1000, &o->time_scale);
}

static bool
set_schedule(const char *arg, struct opts *o, struct pn_conf *c)
{
	(void) c;
	return parse_schedule(arg, o);
}

static bool
set_drop(const char *arg, struct opts *o, struct pn_conf *c)
{
	(void) c;
	return pn_parse_double(arg, 0, 1, &o->drop);
}

static bool
set_serve_bad(const char *arg, struct opts *o, struct pn_conf *c)
{
	(void) c;
	if (strcmp(arg, "signature") != 0 && strcmp(arg, "body") != 0)
		return false;
	o->serve_bad = arg;
	return true;
}

/*
 * getopt_long's view of the table: each long option returns 256 + its row,
 * each short one its letter.
 */
static void
getopt_tables(struct option *longs, char *shorts)
{
	size_t		k = 0;
	size_t		n = 0;

	for (size_t i = 0; i < NOPTDEFS; i++)
	{
		const struct optdef *d = &optdefs[i];
		bool		arg = d->kind != ARG_FLAG && d->kind != ARG_HELP &&
			d->kind != ARG_VERSION;

		if (d->name)
			longs[k++] = (struct option) {d->name, arg ? required_argument : no_argument,
			NULL, 256 + (int) i};
		if (d->short_name)
		{
			shorts[n++] = d->short_name;
			if (arg)
				shorts[n++] = ':';
		}
	}
	longs[k] = (struct option) {NULL, 0, NULL, 0};
	shorts[n] = '\0';
}

/* The row of getopt_long's return value, or NULL for an unknown option. */
static const struct optdef *
find_optdef(int ch)
{
	if (ch >= 256 && ch < 256 + (int) NOPTDEFS)
		return &optdefs[ch - 256];
	for (size_t i = 0; i < NOPTDEFS; i++)
		if (ch > 0 && optdefs[i].short_name == ch)
			return &optdefs[i];
	return NULL;
}

/* Applies one option: 0, EXIT_USAGE, or -1 for --help/--version. */
static int
apply_optdef(const struct optdef *d, const char *arg, struct opts *o, struct pn_conf *c)
{
	char	   *at = (d->in_conf ? (char *) c : (char *) o) + d->offset;
	long long	v;

	switch (d->kind)
	{
		case ARG_FLAG:
			*(bool *) at = true;
			return 0;
		case ARG_STRING:
			*(const char **) at = arg;
			return 0;
		case ARG_LL:
		case ARG_INT:
			if (!pn_parse_ll(arg, d->min, d->max, &v))
				return bad_usage(d->error, arg);
			if (d->kind == ARG_LL)
				*(long long *) at = v;
			else
				*(int *) at = (int) v;
			return 0;
		case ARG_CUSTOM:
			return d->parse(arg, o, c) ? 0 : bad_usage(d->error, arg);
		case ARG_HELP:
			usage(stdout);
			return -1;
		case ARG_VERSION:
			printf("paynotify-send %s (%s)\n", PAYNOTIFY_VERSION, curl_version());
			return -1;
	}
	return EXIT_USAGE;
}

/* Parses argv; returns 0, EXIT_USAGE, or -1 for --help/--version (exit 0). */
int
parse_args(int argc, char **argv, struct opts *o, struct pn_conf *c)
{
	struct option longs[NOPTDEFS + 1];
	char		shorts[2 * NOPTDEFS + 1];
	int			ch;

	getopt_tables(longs, shorts);
	while ((ch = getopt_long(argc, argv, shorts, longs, NULL)) != -1)
	{
		const struct optdef *d = find_optdef(ch);
		int			rc;

		if (d == NULL)
		{
			fputs("Try paynotify-send --help.\n", stderr);
			return EXIT_USAGE;
		}
		if ((rc = apply_optdef(d, optarg, o, c)) != 0)
			return rc;
	}
	if (optind < argc)
		return bad_usage("unexpected argument \"%s\"", argv[optind]);
	return 0;
}

/* --mode serve: what it needs, and no sending options. */
static int
finish_serve_opts(struct opts *o, struct pn_conf *c)
{
	if (!o->listen)
		return bad_usage("%s", "--mode serve needs --listen HOST:PORT");
	if (!o->sales)
		return bad_usage("%s", "--mode serve needs --sales FILE[,FILE...]");
	if (!o->merchant_cert && !o->app_public_key && !o->stripe_api_key)
		return bad_usage("%s", "--mode serve needs --merchant-cert, --app-public-key or --stripe-api-key (the keys requests are checked with)");
	if (o->url || o->dump_dir || o->dump_sql || o->ledger || o->payload || o->bad || o->drop > 0)
		return bad_usage("%s", "--mode serve answers requests: --url, --dump-*, --ledger, --payload, --bad and --drop are for sending");
	if (!c->currency)
		c->currency = "CNY";
	return 0;
}

/* An agreement id or reference: what every gateway's field takes. */
static bool
agreement_text_ok(const char *s)
{
	size_t		n = strlen(s);

	if (n == 0 || n > 48)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
			  *s == '_' || *s == '-'))
			return false;
	return true;
}

/* Cross-option checks and defaults that depend on other options. */
int
finish_opts(struct opts *o, struct pn_conf *c)
{
	const char *bad_arg = o->bad;
	const double *sched;
	int			nsched;
	char		probe[256];
	long long	last;

	if (o->mode == MODE_SERVE)
		return finish_serve_opts(o, c);
	if (o->listen || o->merchant_cert || o->app_public_key || o->stripe_api_key || o->serve_bad)
		return bad_usage("%s", "--listen, --merchant-cert, --app-public-key, --stripe-api-key and --serve-bad need --mode serve");
	if ((int) c->gateway < 0)
		return bad_usage("%s", "--gateway is required");
	if (!o->url && !o->dump_dir && !o->dump_sql)
		return bad_usage("%s", "--url is required (or --dump-dir / --dump-sql)");
	if (o->ledger && (o->dump_dir || o->dump_sql))
		return bad_usage("%s", "--ledger records deliveries; --dump-dir and --dump-sql deliver nothing");
	if (bad_arg && o->mode != MODE_BAD)
		return bad_usage("%s", "--bad needs --mode bad");
	if (o->mode == MODE_BAD && !parse_bad(bad_arg ? bad_arg : "all", c->gateway, o))
		return bad_usage("--bad: \"%s\" is not tampered, stale, probe (wxpay only), unknown-serial or all",
						 bad_arg);
	if (o->payload && (o->mode == MODE_DISTINCT || o->mode == MODE_BAD))
		return bad_usage("--payload sends one notification: modes one, storm and retry, not %s",
						 mode_names[o->mode]);
	if (o->payload && o->mode == MODE_RETRY && o->n > 1)
		return bad_usage("%s", "--payload sends one notification: retry mode takes -n 1");
	if (o->payload && o->mode == MODE_RETRY)
		o->n = 1;
	if ((o->sales || o->drop > 0) && o->mode == MODE_BAD)
		return bad_usage("%s", "--sales and --drop record and lose sales; --mode bad sends none");
	if (o->sales && o->payload)
		return bad_usage("%s", "--sales records generated notifications, not --payload files");
	if (o->sales && strchr(o->sales, ','))
		return bad_usage("%s", "--sales takes one file when sending (several only with --mode serve)");
	if (c->event == PN_EV_CHARGE_FAILED && c->gateway != PN_STRIPE)
		return bad_usage("%s", "--event charge-failed is Stripe's invoice.payment_failed: --gateway stripe");
	if ((c->agreement_id || c->agreement_ref) && (c->event == PN_EV_PAY || c->event == PN_EV_REFUND))
		return bad_usage("%s", "--agreement-id and --agreement-ref name the agreement of --event sign, terminate, charge or charge-failed");
	if (c->agreement_id && !agreement_text_ok(c->agreement_id))
		return bad_usage("--agreement-id \"%s\": 1 to 48 letters, digits, '_' or '-'", c->agreement_id);
	if (c->agreement_ref && !agreement_text_ok(c->agreement_ref))
		return bad_usage("--agreement-ref \"%s\": 1 to 48 letters, digits, '_' or '-'", c->agreement_ref);
	if (o->sales && c->event != PN_EV_PAY && c->event != PN_EV_REFUND)
		return bad_usage("%s", "--sales records payments and refunds: --event pay or refund");
	if (o->same_signature && o->mode != MODE_STORM)
		return bad_usage("%s", "--same-signature needs --mode storm");
	if (o->mode == MODE_ONE)
		o->n = 1;
	else if (o->n < 0)
		o->n = o->mode == MODE_BAD ? 1 : 1000;
	if (o->conc < 0)
		o->conc = o->mode == MODE_ONE ? 1 : 50;
	if (c->refund_amount < 0)
		c->refund_amount = c->amount < 1000 ? c->amount : 1000;
	if (c->refund_amount > c->amount)
		return bad_usage("%s", "--refund-amount cannot exceed --amount");
	if (!c->currency)
		c->currency = c->gateway == PN_STRIPE ? "usd" : "CNY";
	last = o->start + o->n - 1;
	snprintf(probe, sizeof(probe), o->order_fmt, last);
	if (strlen(probe) >= PN_ID_LEN - 4)
		return bad_usage("order numbers from --order-format are too long: \"%s\"", probe);
	if (o->n_schedule == 0)
	{
		sched = c->gateway == PN_WXPAY ? sched_wxpay : c->gateway == PN_ALIPAY ? sched_alipay : sched_stripe;
		nsched = c->gateway == PN_WXPAY ? (int) (sizeof(sched_wxpay) / sizeof(double)) :
			c->gateway == PN_ALIPAY ? (int) (sizeof(sched_alipay) / sizeof(double)) :
			(int) (sizeof(sched_stripe) / sizeof(double));
		memcpy(o->schedule, sched, sizeof(double) * (size_t) nsched);
		o->n_schedule = nsched;
	}
	if (o->mode == MODE_RETRY && o->n > 10000000)
		return bad_usage("%s", "retry mode takes at most 10000000 notifications");
	c->order_fmt = o->order_fmt;
	return 0;
}

/* Channel for --dump-sql: --channel, else the URL's last path segment. */
void
channel_name(const struct opts *o, const struct pn_conf *c, char *out, size_t outsz)
{
	const char *s,
			   *e;

	if (o->channel)
	{
		snprintf(out, outsz, "%s", o->channel);
		return;
	}
	snprintf(out, outsz, "%s", gateway_names[c->gateway]);
	if (!o->url || !(s = strstr(o->url, "://")) || !(s = strchr(s + 3, '/')))
		return;
	e = s + strcspn(s, "?#");
	while (e > s && e[-1] == '/')
		e--;
	for (const char *p = s; p < e; p++)
		if (*p == '/')
			s = p + 1;
	if (e > s)
		snprintf(out, outsz, "%.*s", (int) (e - s), s);
}

