#!/usr/bin/env bash
# Makes the TEST-ONLY keys that shim/tests/serve-test.sh needs beyond the
# gateway keys of test/vectors/make-keys.sh, in test/vectors/keys/, leaving
# any that exist alone (the results are committed; run it once):
#   merchant_1.key.pem / .pub.pem  the merchant's own RSA key: signs WeChat
#                                  Pay API requests and Alipay app requests
#                                  (the same pair make-keys.sh makes)
#   stripe_api_key_1.txt           a Stripe secret API key, sk_test_...
set -euo pipefail
cd "$(dirname "$0")/../../test/vectors/keys"
if [ ! -e merchant_1.key.pem ]; then
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out merchant_1.key.pem 2>/dev/null
	openssl pkey -in merchant_1.key.pem -pubout -out merchant_1.pub.pem
fi
if [ ! -e stripe_api_key_1.txt ]; then
	printf 'sk_test_%s' "$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 99)" >stripe_api_key_1.txt
fi
