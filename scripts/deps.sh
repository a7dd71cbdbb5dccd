#!/usr/bin/env bash
# scripts/deps.sh: installs, from Debian's archive, what paynotify needs and
# is not installed yet.  Idempotent; run as root (Debian 12).
#
#   scripts/deps.sh            build + run + test: everything the demo
#                              (demo.sh) and the whole test suite
#                              (test/run-all.sh) need; both call it
#   scripts/deps.sh --build    only what building needs: the extension
#                              (make), the shim's programs (make -C shim)
#                              and the Debian packages (dpkg-buildpackage) --
#                              what a database host that builds from the
#                              tree needs, and nothing more
#   scripts/deps.sh --list [--build]
#                              print the packages (one a line), install nothing
#
# The three sets:
#   build  a compiler, pkg-config, PostgreSQL 15's server headers (with the
#          clang and llvm that PGXS uses for the JIT bitcode), the libraries
#          of the extension (OpenSSL, libarchive) and of the shim's programs
#          (libpq, OpenSSL, libfcgi, libcurl, libmicrohttpd, zlib), and for
#          the packages debhelper, dpkg-dev, postgresql-server-dev-all
#   run    what the demo runs: PostgreSQL 15, nginx, fcgiwrap, spawn-fcgi,
#          curl, systemd (socket activation), python3
#   test   what only the tests use: valgrind, clang with libFuzzer, lintian,
#          cgi-fcgi, the Python libraries of the model test, pg_cron,
#          prometheus-postgres-exporter, pgbouncer, and Patroni with etcd
#          (server and etcdctl) for test/e2e/patroni.sh, which reads
#          the listening sockets with ss (iproute2)
set -euo pipefail

build=(build-essential pkg-config postgresql-server-dev-15
       libssl-dev libarchive-dev libpq-dev libfcgi-dev libcurl4-openssl-dev
       libmicrohttpd-dev zlib1g-dev
       debhelper dpkg-dev postgresql-server-dev-all)
run=(postgresql-15 nginx-light fcgiwrap spawn-fcgi curl systemd python3)
test=(valgrind clang libclang-rt-14-dev lintian libfcgi-bin
      python3-psycopg2 python3-cryptography python3-hypothesis
      postgresql-15-cron prometheus-postgres-exporter pgbouncer
      patroni etcd-server etcd-client iproute2)

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

only_build=0
list=0
for arg in "$@"; do
    case $arg in
        --build) only_build=1 ;;
        --list) list=1 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "scripts/deps.sh: unknown argument \"$arg\"" >&2; usage >&2; exit 2 ;;
    esac
done

pkgs=("${build[@]}")
[ $only_build = 1 ] || pkgs+=("${run[@]}" "${test[@]}")
if [ $list = 1 ]; then
    printf '%s\n' "${pkgs[@]}"
    exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Debian package postgresql-15 starts a cluster of its own; paynotify's
# demo and tests never use it.
