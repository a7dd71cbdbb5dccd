#!/usr/bin/env bash
# Build and run paynotify's libFuzzer targets, each for a bounded time.
#
#   test/fuzz/run.sh [SECONDS]      (default 20 per target)
#
# Needs clang with libFuzzer (Debian: clang libclang-rt-14-dev).  Seeds come
# from the test vectors (PAYNOTIFY_VECTORS, default test/vectors) and
# from the corpus kept in test/fuzz/out/.  Exits non-zero on any crash,
# leak, sanitizer report or invariant failure; reproducers are left in
# test/fuzz/out/<target>/.
set -euo pipefail
secs=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vectors=${PAYNOTIFY_VECTORS:-$root/test/vectors}
cc=${CC:-clang}
bin=$here/bin
out=$here/out
targets=(fuzz_form fuzz_stripe_sig)
mkdir -p "$bin" "$out"

# seed_form DIR / seed_stripe_sig DIR: copy vector inputs into a corpus.
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

status=0
for t in "${targets[@]}"; do
    "$cc" -g -O1 -std=c99 -Wall -Wextra -Werror \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -I"$root/src" -o "$bin/$t" "$here/$t.c" "$root/src/form.c"
    corpus=$out/$t/corpus
    mkdir -p "$corpus"
    "seed_${t#fuzz_}" "$corpus"
    dict=$here/${t#fuzz_}.dict
    echo "== $t: ${secs}s"
    if ! (cd "$out/$t" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            "$bin/$t" -max_total_time="$secs" -max_len=65536 -timeout=10 \
            -rss_limit_mb=2048 -print_final_stats=1 -dict="$dict" \
            "$corpus" >"$out/$t.log" 2>&1); then
        echo "FAIL $t (log: $out/$t.log)"
        tail -40 "$out/$t.log"
        status=1
        continue
    fi
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^Done' "$out/$t.log" | tr '\n' ' '
    echo
    echo "ok   $t"
done
exit $status
