#!/usr/bin/env bash
# Build and run paynotify's libFuzzer targets, each for a bounded time.
#
#   test/fuzz/run.sh [SECONDS] [TARGET...]     (default 7 s per target)
#
# Targets (test/fuzz/fuzz_*.c), each checking invariants on every input:
#   fuzz_form        urlencoded form decoding, Alipay's canonical content
#                    (src/parse/form.c)
#   fuzz_stripe_sig  the Stripe-Signature header (src/parse/stripe_sig.c)
#   fuzz_base64      strict base64, canonical spelling only (src/parse/scan.c)
#   fuzz_json        depth pre-scan and number check before pg_parse_json
#                    (PostgreSQL's frontend JSON parser, libpgcommon), and
#                    the envelope's field reader (src/parse/fields.c)
#                    against a reference reading of the same text
#   fuzz_number      exact integers and decimal amounts, against a reference
#   fuzz_pem         PEM / DER public keys, certificates and their serials
#                    (the PEM loaders of src/crypto.c, built alone)
#   fuzz_fcgi        the shim's check of a FastCGI request's start (BEGIN_
#                    REQUEST, PARAMS), of the whole request (STDIN to the
#                    empty record), of STDIN headers and of the peer's
#                    address (shim/cgi/cgi_fcgi_check.c), against a reference
#                    decoder and encoder
#   fuzz_bill        the daily bills' text: lines, WeChat's backtick fields,
#                    CSV records, amounts, times, Alipay's comment lines
#                    (src/parse/bill.c), against their own re-printing
#   fuzz_payload     paynotify-send --payload: the JSON reader (validity,
#                    nesting, compact copy, member lookup) against a
#                    reference, and WeChat Pay, Alipay and Stripe payloads
#                    (shim/send/send_payload.c)
#
# What the backend makes of an authentic notice (src/verify_*.c), which
# needs a live server and a valid signature, is fuzzed by
# test/fuzz/notices.sh instead.
#
# Needs clang with libFuzzer (Debian: clang libclang-rt-14-dev), OpenSSL's
# headers, postgresql-server-dev-15 (for fuzz_json) and the openssl command
# (DER seeds).  Seeds come from the test vectors (PAYNOTIFY_VECTORS, default
# test/vectors), the shim's test payloads (shim/tests/payloads/) and from the
# corpus kept in test/fuzz/out/.  Exits non-zero on any crash, leak,
# sanitizer report or invariant failure; reproducers are left in
# test/fuzz/out/<target>/ (crash-*, leak-*, timeout-*, oom-*).
set -euo pipefail
secs=${1:-7}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vectors=${PAYNOTIFY_VECTORS:-$root/test/vectors}
cc=${CC:-clang}
bin=$here/bin
out=$here/out
if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=(fuzz_form fuzz_stripe_sig fuzz_base64 fuzz_json fuzz_number fuzz_pem fuzz_fcgi
             fuzz_payload fuzz_bill)
fi
mkdir -p "$bin" "$out"

pg_config=${PG_CONFIG:-pg_config}
pg_inc=$("$pg_config" --includedir-server)
pg_lib=$("$pg_config" --pkglibdir)
ssl_cflags=$(pkg-config --cflags openssl 2>/dev/null || true)
ssl_libs=$(pkg-config --libs openssl 2>/dev/null || echo -lcrypto)

# ---- seeds: seed_<target> DIR copies inputs from the vectors into a corpus --

seed_form() {
    local f
    for f in "$vectors"/cases/*/body.form; do
        [ -e "$f" ] && cp "$f" "$1/seed-$(basename "$(dirname "$f")")"
    done
    printf 'a=1&b=&sign=x%%2B&sign_type=RSA2' >"$1/seed-small"
}
seed_stripe_sig() {
    local f
    for f in "$vectors"/cases/*/headers.txt; do
        [ -e "$f" ] || continue
        sed -n 's/^Stripe-Signature: //p' "$f" | tr -d '\n' >"$1/seed-$(basename "$(dirname "$f")")"
    done
    find "$1" -name 'seed-*' -empty -delete
    printf 't=1,v1=%064d,v0=%064d' 0 0 >"$1/seed-small"
}
# every base64 string of the vectors: signatures, ciphertexts, Alipay signs
seed_base64() {
    python3 - "$vectors" "$1" <<'PY'
import json, os, re, sys, urllib.parse
vectors, corpus = sys.argv[1], sys.argv[2]
found = set()
for c in json.load(open(os.path.join(vectors, "manifest.json"))):
    for name, value in c["headers"]:
        if name.lower() == "wechatpay-signature":
            found.add(value)
    body = open(os.path.join(vectors, c["files"]["body"]), "rb").read()
    if c["gateway"] == "wxpay":
        try:
            res = json.loads(body).get("resource", {})
            found.add(res.get("ciphertext", ""))
        except ValueError:
            pass
    elif c["gateway"] == "alipay":
        for k, v in urllib.parse.parse_qsl(body.decode("latin-1")):
            if k == "sign":
                found.add(v)
for i, s in enumerate(sorted(x for x in found if x)):
    open(os.path.join(corpus, "seed-%02d" % i), "w").write(s)
PY
    printf 'AA==' >"$1/seed-pad2"
    printf 'AAA=' >"$1/seed-pad1"
    printf 'AB==' >"$1/seed-noncanonical"
}
# the JSON bodies of the vectors and the decrypted WeChat resources
seed_json() {
    local f
    for f in "$vectors"/cases/*/body.json "$vectors"/cases/*/resource_plaintext.json; do
        [ -e "$f" ] && cp "$f" "$1/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
    done
    python3 -c 'print("[" * 64 + "]" * 64, end="")' >"$1/seed-depth64"
    python3 -c 'print("[" * 65 + "]" * 65, end="")' >"$1/seed-depth65"
    printf '{"a":[1e1000,-1E-1000,1e999999,0.5e+7,"[[[\\"{"]}' >"$1/seed-numbers"
    # keys given twice, at the root and one level down (the last value, whole)
    printf '{"a":{"b":"x"},"a":{"a":"y"},"b":{"a":1},"b":{"a":"z"},"resource":{"nonce":"n","nonce":1}}' \
        >"$1/seed-duplicates"
}
# amounts and ids as the vectors carry them, each after a scale byte
seed_number() {
    local v i=0
    for v in 88.88 88.8 20 0.01 0 100000000 9999999999999999.99 1767225606 \
        01.00 .5 5. 1e3 -1 '88.888' '' 123456789012345678; do
        printf '\002%s' "$v" >"$1/seed-$i"
        i=$((i + 1))
    done
}
# the vectors' PEM keys and certificates, as PEM and as DER
seed_pem() {
    local f b
    for f in "$vectors"/keys/*.pub.pem "$vectors"/keys/*.cert.pem; do
        [ -e "$f" ] || continue
        b=$(basename "$f" .pem)
        cp "$f" "$1/seed-$b"
        case "$f" in
            *.cert.pem) openssl x509 -in "$f" -outform DER -out "$1/seed-$b.der" 2>/dev/null || true ;;
            *.pub.pem) openssl pkey -pubin -in "$f" -outform DER -out "$1/seed-$b.der" 2>/dev/null || true ;;
        esac
    done
}

# the hostile cases of the shim's test, and nginx's own kind of request
seed_fcgi() {
    PYTHONDONTWRITEBYTECODE=1 python3 - "$root/shim/tests" "$1" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import fcgi_hostile as h
for name in ("crash", "claim", "oversized", "large", "version", "getvalues",
             "stdin_mgmt", "keep", "request"):
    open(os.path.join(sys.argv[2], "seed-" + name), "wb").write(h.case_bytes(name))
PY
}

# the shim's payload files, and small JSON and form lines at the edges
seed_payload() {
    local f
    for f in "$root"/shim/tests/payloads/*; do
        [ -e "$f" ] && cp "$f" "$1/seed-$(basename "$f")"
    done
    # the agreement kinds of the gateways' documented samples: WeChat
    # ENTRUST and PAP, Alipay dut_user_*, Stripe subscriptions and invoices
    for f in "$vectors"/samples/payloads/*{_entrust_,_pap_,_dut_user_,_subscription_,_invoice_}*; do
        [ -e "$f" ] && cp "$f" "$1/seed-$(basename "$f")"
    done
    python3 -c 'print("[" * 64 + "]" * 64, end="")' >"$1/seed-depth64"
    python3 -c 'print("{\"a\":" * 65 + "1" + "}" * 65, end="")' >"$1/seed-depth65"
    printf '{"id":"e","data":{"object":{"metadata":{"order_id":"o"}}},"a":[1,-0.5e+3,true,null],"id":1}' \
        >"$1/seed-members"
    printf '{"resource":{"nonce":"n","associated_data":"","plaintext":{"out_trade_no":"\\u00e9\\ud800"}}}' \
        >"$1/seed-wx-small"
    printf '"\xc3\xa9\\"\\/\\b\\f\\n\\r\\t\xf0\x9f\x98\x80"' >"$1/seed-string"
    printf 'a=1&b=&c=%%E4%%B8%%AD+x&charset=gb18030\r\n' >"$1/seed-form"
    printf 'a=1&a=2&%%73ign=x&' >"$1/seed-form-bad"
}

# the bills of test/bills/ (the gzip and zip ones as their text), and edges
seed_bill() {
    local f
    for f in "$root"/test/bills/*.csv "$root"/test/bills/*.json; do
        [ -e "$f" ] && cp "$f" "$1/seed-$(basename "$f")"
    done
    printf '`1.2.3,`-0.60000,`0.601,`2026-02-29 00:00:00,`2024-02-29 23:59:59,`\r\n' >"$1/seed-values"
    printf 'id,"a ""b""\nc",d\r\n"open\n' >"$1/seed-quotes"
    printf '#交易合计：2笔，商家实收共125.50元\n#起始日期：[2026年09月16日 00:00:00]\n' >"$1/seed-alipay"
}

# ---- build: build TARGET ----------------------------------------------------

# shellcheck disable=SC2054
cflags=(-g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -I"$root/src" -I"$root/src/parse")
parse=$root/src/parse
build() {
    local t=$1
    case $t in
        fuzz_form)
            "$cc" "${cflags[@]}" -std=c99 -o "$bin/$t" "$here/$t.c" "$parse/form.c" "$parse/scan.c" ;;
        fuzz_stripe_sig)
            "$cc" "${cflags[@]}" -std=c99 -o "$bin/$t" "$here/$t.c" "$parse/stripe_sig.c" "$parse/scan.c" ;;
        fuzz_fcgi)
            "$cc" "${cflags[@]}" -std=c11 -D_GNU_SOURCE -I"$root/shim/cgi" -o "$bin/$t" "$here/$t.c" \
                "$root/shim/cgi/cgi_fcgi_check.c" ;;
        fuzz_payload)
            # send_payload.c with what it uses of the shim; pn_log is the target's
            "$cc" "${cflags[@]}" -std=c11 -D_GNU_SOURCE -I"$root/shim/send" -I"$root/shim/common" \
                -o "$bin/$t" "$here/$t.c" "$root/shim/send/send_payload.c" "$root/shim/send/send_util.c" \
                "$root/shim/common/pn_buf.c" "$root/shim/common/pn_json.c" -lm ;;
        fuzz_bill)
            "$cc" "${cflags[@]}" -std=c99 -o "$bin/$t" "$here/$t.c" "$parse/bill.c" ;;
        fuzz_number)
            "$cc" "${cflags[@]}" -std=c99 -o "$bin/$t" "$here/$t.c" "$parse/scan.c" ;;
        fuzz_base64)
            # OpenSSL's encoder is the reference the decoder is checked against
            # shellcheck disable=SC2086
            "$cc" "${cflags[@]}" -std=c99 $ssl_cflags -o "$bin/$t" "$here/$t.c" "$parse/scan.c" $ssl_libs ;;
        fuzz_pem)
            # crypto.c's PEM loaders alone (no PostgreSQL)
            # shellcheck disable=SC2086
            "$cc" "${cflags[@]}" -std=c99 -DPN_PEM_ONLY $ssl_cflags -o "$bin/$t" "$here/$t.c" \
                "$root/src/crypto.c" $ssl_libs ;;
        fuzz_json)
            # PostgreSQL's headers want GNU C and are not -Wextra clean
            # shellcheck disable=SC2086
            "$cc" "${cflags[@]}" -std=gnu11 -Wno-unused-parameter \
                -Wno-missing-field-initializers -Wno-sign-compare -Wno-ignored-attributes $ssl_cflags \
                -I"$pg_inc" -o "$bin/$t" "$here/$t.c" "$parse/scan.c" \
                -DFRONTEND "$parse/fields.c" \
                "$pg_lib/libpgcommon.a" "$pg_lib/libpgport.a" $ssl_libs -lm ;;
        *) echo "unknown target $t" >&2; return 1 ;;
    esac
}

# ---- run: the targets are built (two compilers at a time), then fuzzed
# PN_FUZZ_JOBS at a time (default: the number of processors), each for its
# full SECONDS of wall time; the verdicts are printed in the targets' order.
jobs=${PN_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

# build_one TARGET: builds it; its build log in $out/TARGET.build.log
build_one() {
    build "$1" 2>"$out/$1.build.log"
}

# fuzz_one TARGET: seeds its corpus and fuzzes it; what it prints goes to
# $out/TARGET.result, exit status non-zero on a failure
fuzz_one() {
    local t=$1 corpus dictarg
    exec >"$out/$t.result" 2>&1
    corpus=$out/$t/corpus
    mkdir -p "$corpus"
    "seed_${t#fuzz_}" "$corpus"
    dictarg=()
    [ -f "$here/${t#fuzz_}.dict" ] && dictarg=(-dict="$here/${t#fuzz_}.dict")
    echo "== $t: ${secs}s"
    if ! (cd "$out/$t" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            "$bin/$t" -max_total_time="$secs" -max_len=65536 -timeout=10 \
            -rss_limit_mb=2048 -print_final_stats=1 "${dictarg[@]}" \
            "$corpus" >"$out/$t.log" 2>&1); then
        echo "FAIL $t (log: $out/$t.log)"
        tail -40 "$out/$t.log"
        return 1
    fi
    if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$out/$t.log"; then
        echo "FAIL $t: sanitizer report (log: $out/$t.log)"
        grep -E -A20 'ERROR: |runtime error:' "$out/$t.log" | head -40
        return 1
    fi
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^Done' "$out/$t.log" | tr '\n' ' '
    echo
    echo "ok   $t"
}

# in_parallel N FUNC ITEM...: FUNC ITEM for every ITEM, at most N at a time;
# prints the items whose FUNC failed, one a line
in_parallel() {
    local n=$1 f=$2 i
    shift 2
    local items=("$@") pids=()
    for i in "${!items[@]}"; do
        if [ ${#pids[@]} -ge "$n" ]; then
            wait "${pids[$((i - n))]}" || echo "${items[$((i - n))]}"
        fi
        "$f" "${items[$i]}" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        [ "$i" -ge $((${#pids[@]} - n)) ] || continue
        wait "${pids[$i]}" || echo "${items[$i]}"
    done
}

status=0
mapfile -t unbuilt < <(in_parallel 2 build_one "${targets[@]}")
built=()
for t in "${targets[@]}"; do
    if printf '%s\n' "${unbuilt[@]}" | grep -qxF "$t"; then
        echo "FAIL $t: does not build"
        cat "$out/$t.build.log"
        status=1
    else
        built+=("$t")
    fi
done
[ ${#built[@]} -gt 0 ] || exit $status
mapfile -t failed < <(in_parallel "$jobs" fuzz_one "${built[@]}")
[ ${#failed[@]} -eq 0 ] || status=1
for t in "${built[@]}"; do
    cat "$out/$t.result"
    rm -f "$out/$t.result"
done
exit $status
