#!/usr/bin/env bash
# Installs, from Debian's archive, whatever paynotify's build, demo and tests
# need and is not installed yet.  Idempotent; run as root.
set -euo pipefail
pkgs=(build-essential pkg-config postgresql-15 postgresql-server-dev-15
      postgresql-server-dev-all debhelper dpkg-dev lintian
      libssl-dev libpq-dev libfcgi-dev libcurl4-openssl-dev
      nginx-light fcgiwrap spawn-fcgi libfcgi-bin curl systemd python3 valgrind clang libclang-rt-14-dev
      python3-psycopg2 python3-cryptography python3-hypothesis
      postgresql-15-cron prometheus-postgres-exporter pgbouncer)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian package starts a cluster of its own; paynotify never uses it.
