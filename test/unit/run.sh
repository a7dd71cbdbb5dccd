#!/usr/bin/env bash
# Build and run the PostgreSQL-free unit tests of src/parse/ (form.c,
# stripe_sig.c; bill.c), with ASan and
# UBSan when the compiler has them.  usage: test/unit/run.sh [VECTORS_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vectors=${1:-${PAYNOTIFY_VECTORS:-$root/test/vectors}}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc=${CC:-cc}
flags=(-std=c99 -g -O1 -Wall -Wextra -Werror -I"$root/src/parse")
if "$cc" -fsanitize=address,undefined -x c -o "$out/probe" - <<<'int main(void){return 0;}' 2>/dev/null; then
    flags+=(-fsanitize=address,undefined -fno-sanitize-recover=all)
fi
"$cc" "${flags[@]}" -o "$out/form_test" "$here/form_test.c" \
    "$root/src/parse/form.c" "$root/src/parse/stripe_sig.c" "$root/src/parse/scan.c"
if [ -d "$vectors/cases" ]; then
    "$out/form_test" "$vectors"
else
    echo "form_test: no vectors at $vectors, vector checks skipped" >&2
    "$out/form_test"
fi
"$cc" "${flags[@]}" -o "$out/bill_test" "$here/bill_test.c" "$root/src/parse/bill.c"
"$out/bill_test"
