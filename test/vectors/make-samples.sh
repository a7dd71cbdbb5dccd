#!/usr/bin/env bash
# Regenerates samples/cases/ and samples/manifest.json (the documentation
# corpus) deterministically from samples/payloads/ and the committed keys/.
# Needs: python3 (stdlib only) and the openssl CLI.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
cd "$(dirname "$0")"
python3 tools/gen_samples.py
