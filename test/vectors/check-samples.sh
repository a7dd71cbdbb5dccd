#!/usr/bin/env bash
# Verifies every case of samples/manifest.json (the documentation corpus) with
# the openssl CLI (see tools/check_samples.py).  Needs: bash, python3 (stdlib
# only), openssl >= 1.1.1; optional node (AES-GCM cross-check).
# Exit status 0 only when every case holds.  VERBOSE=1 prints each openssl command.
set -euo pipefail
export PYTHONDONTWRITEBYTECODE=1
cd "$(dirname "$0")"
command -v openssl >/dev/null || { echo "openssl not found" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 2; }
exec python3 tools/check_samples.py "$PWD"
