#!/usr/bin/env bash
# test/package/run.sh: the Debian packages, built, installed and tested.
#
#   1. dpkg-buildpackage -us -uc -b in a temporary copy of the tree (the
#      work tree is never touched), in parallel (dpkg-buildpackage's default
#      parallel=N, N the cores).  The copy is a git repository of its own:
#      after the build `git status` there must be clean (.gitignore covers
#      the build's artefacts).  The versions agree: paynotify.control,
#      debian/changelog, META.json (which has the PGXN META spec's keys).
#      scripts/deps.sh --build names every Build-Depends.
#   2. lintian, when installed: no errors (warnings are printed).
#   3. Installs postgresql-15-paynotify and paynotify-shim into the machine
#      (apt-get install ./x.deb; the system PostgreSQL in
#      /usr/lib/postgresql/15) and checks the installed files: each program
#      (paynotify-cgi, paynotify-send, paynotify-relay) runs --version and
#      --help, has its manual page (no warnings from man), the units and
#      settings files of the services, the nginx snippets' comments as the
#      templates have them.  A `make install` of the tree and the package
#      over each other: each says so (the package's preinst, the Makefile's
#      warning), and the package's files come back with dpkg -i.
#   4. pg_buildext installcheck, as postgres, in a clean copy of the tree:
#      a part of pg_regress and the isolation specs (PN_PACKAGE_REGRESS,
#      PN_PACKAGE_ISOLATION: the installation, configuration, every signed
#      vector, the pipeline, hooks, the catalog's SET clauses, concurrent
#      deliveries; the whole of them ran against `make install`'s files
#      earlier in test/run-all.sh) against the installed files, in
#      temporary instances.
#   5. In a throwaway cluster: CREATE EXTENSION gives the default version, a
#      1.0 updated with ALTER EXTENSION UPDATE gets there too, and the
#      packaged paynotify-cgi answers a CGI request through the packaged
#      extension, the packaged paynotify-relay --once and paynotify-send
#      work with it.  nginx accepts both snippets; systemd-analyze the units.
#   6. test/package/readme.sh: the README's "On a real machine", step by
#      step as written there, with the packages just built.
#
# At the end the packages are purged, unless they were installed before the
# test (then the freshly built ones stay).  If the system had paynotify
# installed by `make install` before (test/run-all.sh does that when the
# system's pg_config comes first on PATH), it is installed again from the
# tree, so the system copy stays the tree's; if it had neither, what the
# test's own `make install` left is uninstalled.
#
# Run as root from anywhere: test/package/run.sh    (PN_KEEP_TMP=1 keeps the
# temporary directory).  Last line: "N passed, M failed".
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 2
TOP=$(pwd)
if [ "$(id -u)" != 0 ]; then
    echo "test/package/run.sh: needs root (it installs packages); skipped"
    echo "0 passed, 0 failed"
    exit 0
fi

# the system's PostgreSQL, whatever a private copy on PATH says
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PG_CONFIG
PGV=15
PGBIN=/usr/lib/postgresql/$PGV/bin
EXTDIR=/usr/share/postgresql/$PGV/extension
LIBDIR=/usr/lib/postgresql/$PGV/lib
PKG_EXT=postgresql-$PGV-paynotify
PKG_SHIM=paynotify-shim
export PN_PGBIN=$PGBIN
# shellcheck source=test/lib.sh
. test/lib.sh

TMP=$(mktemp -d /tmp/pn-package.XXXXXX)
chmod 755 "$TMP"
PGDIR=$TMP/pg
pass=0
fail=0
# check_status NAME STATUS: STATUS (an exit status) must be 0 (check, summary,
# remove_tmp: test/lib.sh)
check_status() { check "$1" 0 "$2"; }
# copy_tree SRC DST: the tree's own files (tracked, and new ones that are
# not ignored), none of its build products
copy_tree() {
    mkdir -p "$2"
    if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$1" && git ls-files -z -co --exclude-standard |
            while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
            tar -c --null -T -) | tar -x -C "$2"
    else
        cp -a "$1/." "$2" && make -s -C "$2" clean PG_CONFIG=$PGBIN/pg_config >/dev/null 2>&1
        make -s -C "$2/shim" clean >/dev/null 2>&1
    fi
}
installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -x installed >/dev/null; }

# what the system had before, to leave it that way
had_pkg=0
installed $PKG_EXT && had_pkg=1
had_make_install=0
if [ -e $EXTDIR/paynotify.control ] && ! dpkg -S $EXTDIR/paynotify.control >/dev/null 2>&1; then
    had_make_install=1
fi

hand_installed=0		# this test ran `make install` into the system
# the tree, built for the system's PostgreSQL, for `make install` by hand
# (step 3) and for putting the system's copy back at the end: built in the
# background while dpkg-buildpackage builds the packages (2 cores)
HAND=$TMP/hand
hand_pid=
cleanup() {
    pn_cluster_stop "$PGDIR"
    if [ $had_pkg = 0 ]; then
        dpkg --purge $PKG_SHIM $PKG_EXT >"$TMP/purge.log" 2>&1 || cat "$TMP/purge.log"
    fi
    [ -n "$hand_pid" ] && wait "$hand_pid"
    if [ $had_make_install = 1 ] && [ -d "$HAND" ]; then
        make -s -C "$HAND" install PG_CONFIG=$PGBIN/pg_config >"$TMP/restore.log" 2>&1 \
            || { echo "reinstalling the tree's extension failed:"; tail -20 "$TMP/restore.log"; }
    elif [ $had_pkg = 0 ] && [ $hand_installed = 1 ]; then
        make -s -C "$TMP/hand" uninstall PG_CONFIG=$PGBIN/pg_config >"$TMP/uninstall.log" 2>&1 \
            || { echo "make uninstall failed:"; tail -20 "$TMP/uninstall.log"; }
        ls -d $EXTDIR/paynotify* $LIBDIR/paynotify* $LIBDIR/bitcode/paynotify* 2>/dev/null \
            | sed 's/^/left behind: /'
    fi
    remove_tmp "$TMP"
}
trap cleanup EXIT
copy_tree "$TOP" "$HAND"
make -s -C "$HAND" PG_CONFIG=$PGBIN/pg_config >"$TMP/hand-build.log" 2>&1 &
hand_pid=$!

# ---- 1. build ---------------------------------------------------------------
echo "== build"
SRC=$TMP/build/paynotify
copy_tree "$TOP" "$SRC"
git -C "$SRC" init -q && git -C "$SRC" add -A &&
    git -C "$SRC" -c user.name=test -c user.email=test@localhost commit -q -m tree
(cd "$SRC" && dpkg-buildpackage -us -uc -b) >"$TMP/build.log" 2>&1
rc=$?
[ $rc -ne 0 ] && tail -40 "$TMP/build.log"
check_status "dpkg-buildpackage -us -uc -b" $rc
grep -E 'warning:' "$TMP/build.log" | grep -v -e 'strip-program' | head -20
status=$(git -C "$SRC" status --porcelain --ignored=no)
[ -z "$status" ] || echo "$status"
check_status "git status clean after the build" "$([ -z "$status" ]; echo $?)"

ctl_version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$SRC/paynotify.control")
deb_version=$(cd "$SRC" && dpkg-parsechangelog -S Version)
echo "paynotify.control: $ctl_version, debian/changelog: $deb_version"
check_status "debian/changelog has the control file's version" "$([ -n "$ctl_version" ] && [ "$deb_version" = "$ctl_version" ]; echo $?)"
python3 - "$SRC/META.json" "$ctl_version" "$SRC" <<'EOF'
# META.json: the keys and value shapes of the PGXN META spec 1.0.0, and
# the version of the control file (as SemVer: 1.1 is 1.1.0)
import json, os, re, sys
meta = json.load(open(sys.argv[1]))
version = sys.argv[2] + ".0" * (2 - sys.argv[2].count("."))
semver = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-.]+)?$")
licenses = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd",
            "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit",
            "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay",
            "sun", "zlib", "open_source", "restricted", "unrestricted", "unknown"}
errors = []
def need(cond, what):
    if not cond:
        errors.append(what)
for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    need(key in meta, "missing key " + key)
need(re.match(r"^[^/\\\s\x00-\x1f]{2,}$", meta.get("name", "")), "name is not a term")
need(isinstance(meta.get("abstract"), str) and meta["abstract"], "abstract")
need(meta.get("version") == version, "version %r is not %r" % (meta.get("version"), version))
need(semver.match(str(meta.get("version"))), "version is not SemVer")
m = meta.get("maintainer")
need(isinstance(m, str) and m or isinstance(m, list) and m and all(isinstance(x, str) for x in m), "maintainer")
lic = meta.get("license")
need(lic in licenses or isinstance(lic, list) and lic and set(lic) <= licenses
     or isinstance(lic, dict) and lic, "license %r" % (lic,))
prov = meta.get("provides", {})
need(isinstance(prov, dict) and "paynotify" in prov, "provides has no paynotify")
for ext, p in prov.items():
    need(os.path.isfile(os.path.join(sys.argv[3], p.get("file", ""))), "provides.%s.file %r does not exist" % (ext, p.get("file")))
    need(p.get("version") == version, "provides.%s.version is not %s" % (ext, version))
ms = meta.get("meta-spec", {})
need(re.match(r"^1\.0\.\d+$", str(ms.get("version"))), "meta-spec.version")
need(meta.get("release_status", "stable") in ("stable", "testing", "unstable"), "release_status")
for phase, rels in meta.get("prereqs", {}).items():
    need(phase in ("configure", "build", "test", "runtime", "develop"), "prereqs phase " + phase)
    for rel, reqs in rels.items():
        need(rel in ("requires", "recommends", "suggests", "conflicts"), "prereqs relationship " + rel)
        for name, ver in reqs.items():
            need(ver == 0 or isinstance(ver, str) and re.match(r"^(([=!]=|[<>]=?)\s*)?\d+\.\d+\.\d+", ver), "prereq %s %r" % (name, ver))
for e in errors:
    print("META.json:", e)
sys.exit(1 if errors else 0)
EOF
check_status "META.json: PGXN structure, version $ctl_version" $?

# what scripts/deps.sh --build installs covers the packages' Build-Depends
missing=$(sed -n '/^Build-Depends:/,/^[A-Z]/{/^ /p}' "$SRC/debian/control" |
    sed -e 's/^ *//' -e 's/[ ,(].*//' -e 's/^debhelper-compat$/debhelper/' |
    grep -vxF -f <(scripts/deps.sh --list --build))
[ -n "$missing" ] && echo "not in scripts/deps.sh --build: $missing"
check_status "scripts/deps.sh --build names every Build-Depends of debian/control" "$([ -z "$missing" ]; echo $?)"

DEB_EXT=$(ls "$TMP"/build/${PKG_EXT}_*.deb 2>/dev/null | head -1)
DEB_SHIM=$(ls "$TMP"/build/${PKG_SHIM}_*.deb 2>/dev/null | head -1)
check_status "both packages built" "$([ -f "$DEB_EXT" ] && [ -f "$DEB_SHIM" ]; echo $?)"
if [ ! -f "$DEB_EXT" ] || [ ! -f "$DEB_SHIM" ]; then
    not_ok "the packages are there to install"; summary; exit 1
fi

# ---- 2. lintian -------------------------------------------------------------
if command -v lintian >/dev/null; then
    echo "== lintian"
    lintian --info "$TMP"/build/paynotify_*_*.changes >"$TMP/lintian.log" 2>&1
    grep -E '^[EW]:' "$TMP/lintian.log" | sort -u
    check_status "lintian: no errors" "$(grep -q '^E:' "$TMP/lintian.log"; [ $? -ne 0 ]; echo $?)"
else
    echo "lintian is not installed: not run"
fi

# ---- 3. install -------------------------------------------------------------
echo "== install"
# the tree, built for the system's PostgreSQL, for `make install` by hand
# (its build started before step 1)
wait "$hand_pid"
rc=$?
hand_pid=
[ $rc -ne 0 ] && tail -20 "$TMP/hand-build.log"
check_status "the tree builds for the system's PostgreSQL (for make install)" $rc
# A copy from `make install` that the package replaces: the preinst says so
# (the system's own, or one made here when it has neither)
if [ $had_pkg = 0 ] && [ $had_make_install = 0 ]; then
    hand_installed=1
    make -s -C "$HAND" install PG_CONFIG=$PGBIN/pg_config >"$TMP/hand-install.log" 2>&1
    check_status "make install into the system (no package yet): no warning" \
        "$(grep -q 'make install: replacing' "$TMP/hand-install.log"; [ $? -ne 0 ]; echo $?)"
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "$DEB_EXT" "$DEB_SHIM" >"$TMP/install.log" 2>&1
rc=$?
[ $rc -ne 0 ] && tail -30 "$TMP/install.log"
check_status "apt-get install ./$(basename "$DEB_EXT") ./$(basename "$DEB_SHIM")" $rc
if [ $had_pkg = 0 ]; then
    grep "^$PKG_EXT: replacing" "$TMP/install.log"
    check_status "the package over a make install: its preinst says so" \
        "$(grep -q "^$PKG_EXT: replacing $EXTDIR/paynotify.control and the other files of paynotify that belong to no package" "$TMP/install.log"; echo $?)"
fi
# `make install` over the package: one line on stderr naming the package
# and what to do; then the package's own files again (dpkg -i)
hand_installed=1
make -s -C "$HAND" install PG_CONFIG=$PGBIN/pg_config >/dev/null 2>"$TMP/over.err"
rc=$?
cat "$TMP/over.err"
check_status "make install over the package: one line on stderr, naming the package and apt-get remove" \
    "$([ $rc -eq 0 ] && [ "$(wc -l <"$TMP/over.err")" -eq 1 ] &&
       grep -q "^make install: replacing $EXTDIR/paynotify.control and the other files of the Debian package $PKG_EXT, .*apt-get remove $PKG_EXT and make install again$" "$TMP/over.err"; echo $?)"
dpkg -i "$DEB_EXT" >"$TMP/reinstall.log" 2>&1
rc=$?
out=$(dpkg --verify $PKG_EXT 2>&1)
[ -n "$out" ] && echo "$out"
check_status "dpkg -i puts the package's files back (dpkg --verify clean)" "$([ $rc -eq 0 ] && [ -z "$out" ]; echo $?)"
check_status "both packages installed, version $ctl_version" \
    "$([ "$(dpkg-query -W -f='${Version}' $PKG_EXT)" = "$ctl_version" ] &&
       [ "$(dpkg-query -W -f='${Version}' $PKG_SHIM)" = "$ctl_version" ]; echo $?)"

files_ok=0
for f in $LIBDIR/paynotify.so $EXTDIR/paynotify.control $EXTDIR/paynotify--1.0.sql \
         $EXTDIR/paynotify--1.0--1.1.sql $EXTDIR/paynotify--1.1--1.2.sql \
         $EXTDIR/paynotify--1.1.sql "$EXTDIR/paynotify--$ctl_version.sql" \
         /usr/share/doc/$PKG_EXT/copyright; do
    dpkg -S "$f" 2>/dev/null | grep "^$PKG_EXT: " >/dev/null || { echo "not in $PKG_EXT: $f"; files_ok=1; }
done
SHIM_PROGRAMS="paynotify-cgi paynotify-send paynotify-relay paynotify-reconcile"
for f in /lib/systemd/system/paynotify-cgi.service /lib/systemd/system/paynotify-relay.service \
         /lib/systemd/system/paynotify-reconcile.service /lib/systemd/system/paynotify-cgi.socket \
         /etc/paynotify/paynotify-cgi.env /etc/paynotify/paynotify-relay.env \
         /etc/paynotify/paynotify-reconcile.env \
         /etc/nginx/snippets/paynotify-fastcgi.conf /etc/nginx/snippets/paynotify-cgi.conf \
         $(for p in $SHIM_PROGRAMS; do echo /usr/sbin/$p /usr/share/man/man8/$p.8.gz; done) \
         /usr/share/doc/$PKG_SHIM/copyright; do
    dpkg -S "$f" 2>/dev/null | grep "^$PKG_SHIM: " >/dev/null || { echo "not in $PKG_SHIM: $f"; files_ok=1; }
done
check_status "installed files belong to their packages" $files_ok
cmp -s $EXTDIR/paynotify.control "$SRC/paynotify.control"
check_status "installed paynotify.control is the tree's" $?
cat "$SRC/paynotify--1.0.sql" "$SRC/paynotify--1.0--1.1.sql" "$SRC/paynotify--1.1--1.2.sql" | cmp -s - "$EXTDIR/paynotify--1.2.sql"
check_status "installed paynotify--1.2.sql is paynotify--1.0.sql + paynotify--1.0--1.1.sql + paynotify--1.1--1.2.sql" $?
cmp -s "$SRC/paynotify--1.0--1.1.sql" $EXTDIR/paynotify--1.0--1.1.sql
check_status "installed paynotify--1.0--1.1.sql is the tree's" $?
cat "$SRC/paynotify--1.0.sql" "$SRC/paynotify--1.0--1.1.sql" "$SRC/paynotify--1.1--1.2.sql" | cmp -s - "$EXTDIR/paynotify--1.2.sql"
check_status "installed paynotify--1.2.sql is paynotify--1.0.sql + paynotify--1.0--1.1.sql + paynotify--1.1--1.2.sql" $?
cmp -s "$SRC/paynotify--1.1--1.2.sql" $EXTDIR/paynotify--1.1--1.2.sql
check_status "installed paynotify--1.1--1.2.sql is the tree's" $?
nm -D --defined-only $LIBDIR/paynotify.so | grep -w Pg_magic_func >/dev/null	# not -q: nm must not die of SIGPIPE under pipefail
check_status "paynotify.so is a PostgreSQL module" $?
for svc in paynotify-cgi paynotify-relay paynotify-reconcile; do
    grep -qx "ExecStart=/usr/sbin/$svc" /lib/systemd/system/$svc.service &&
        grep -qx "Documentation=man:$svc(8)" /lib/systemd/system/$svc.service &&
        grep -qx "EnvironmentFile=/etc/paynotify/$svc.env" /lib/systemd/system/$svc.service
    check_status "$svc.service starts /usr/sbin/$svc with /etc/paynotify/$svc.env, man:$svc(8)" $?
    ! ls /etc/systemd/system/*/$svc.service 2>/dev/null | grep . >/dev/null
    check_status "$svc.service is not enabled (no .wants link)" $?
done
getent passwd paynotify >/dev/null && getent passwd paynotify-relay >/dev/null &&
    getent passwd paynotify-reconcile >/dev/null &&
    [ "$(stat -c '%a %U %G' /etc/paynotify/paynotify-cgi.env)" = "640 root paynotify" ] &&
    [ "$(stat -c '%a %U %G' /etc/paynotify/paynotify-relay.env)" = "640 root paynotify-relay" ] &&
    [ "$(stat -c '%a %U %G' /etc/paynotify/paynotify-reconcile.env)" = "640 root paynotify-reconcile" ] &&
    grep -qx 'User=paynotify' /lib/systemd/system/paynotify-cgi.service &&
    grep -qx 'User=paynotify-relay' /lib/systemd/system/paynotify-relay.service &&
    grep -qx 'User=paynotify-reconcile' /lib/systemd/system/paynotify-reconcile.service
check_status "users paynotify, paynotify-relay and paynotify-reconcile, one per service; settings files 0640 root and the service's group" $?
! grep -n '@[A-Z_]*@' /etc/nginx/snippets/paynotify-*.conf
check_status "nginx snippets have no placeholders left" $?
# the substitution touched directives only: the comments read as in the
# templates (no "Placeholder to replace: unix:/run/... e.g. unix:/..." line)
for s in fastcgi cgi; do
    diff <(grep '^ *#' "$SRC/deploy/nginx-$s.conf.in") <(grep '^ *#' /etc/nginx/snippets/paynotify-$s.conf) &&
        ! grep -niE 'placeholder.*(unix:|/run/|/usr/)' /etc/nginx/snippets/paynotify-$s.conf
    check_status "snippets/paynotify-$s.conf: the template's comments, none naming a filled-in placeholder" $?
done

for p in $SHIM_PROGRAMS; do
    out=$($p --version 2>&1)
    rc=$?
    echo "$p --version: $out"
    # (paynotify-send adds its libcurl's versions in parentheses)
    check_status "$p --version from the package" "$([ $rc -eq 0 ] && [ "${out%% (*}" = "$p $ctl_version" ] &&
        [ "$(command -v $p)" = /usr/sbin/$p ]; echo $?)"
    $p --help >"$TMP/$p.help" 2>&1
    check_status "$p --help: exit 0, usage" "$([ $? -eq 0 ] && grep -q "^Usage: $p" "$TMP/$p.help"; echo $?)"
    if command -v man >/dev/null; then
        out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l /usr/share/man/man8/$p.8.gz 2>&1 >"$TMP/$p.man")
        check_status "man $p: renders without warnings" "$([ -z "$out" ] && grep -q '^NAME' "$TMP/$p.man"; echo $?)"
        [ -n "$out" ] && echo "$out"
    fi
done
grep -q -- '--keys DIR' "$TMP/paynotify-send.help" && zgrep -q 'keys' /usr/share/man/man8/paynotify-send.8.gz
check_status "paynotify-send: --help and the man page say where the keys come from (--keys DIR)" $?
grep -q -- '--once' "$TMP/paynotify-relay.help" && zgrep -q 'claimed 3, delivered 2, failed 1' /usr/share/man/man8/paynotify-relay.8.gz
check_status "paynotify-relay: --help and the man page describe --once" $?

if command -v nginx >/dev/null; then
    mkdir -p "$TMP/nginx/logs"
    for s in fastcgi cgi; do
        cat >"$TMP/nginx/$s.conf" <<EOF
error_log $TMP/nginx/logs/error.log;
pid $TMP/nginx/nginx.pid;
events {}
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    proxy_temp_path $TMP/nginx/proxy;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    server {
        listen 127.0.0.1:1;
        include /etc/nginx/snippets/paynotify-$s.conf;
    }
}
EOF
        nginx -t -q -p "$TMP/nginx" -c "$TMP/nginx/$s.conf" 2>&1 | grep -v 'could not open error log'
        check_status "nginx -t accepts snippets/paynotify-$s.conf" "${PIPESTATUS[0]}"
    done
fi
if command -v systemd-analyze >/dev/null; then
    out=$(systemd-analyze verify /lib/systemd/system/paynotify-cgi.socket \
          /lib/systemd/system/paynotify-cgi.service /lib/systemd/system/paynotify-relay.service 2>&1)
    rc=$?
    [ -n "$out" ] && echo "$out"
    check_status "systemd-analyze verify: the units" $rc
fi

# ---- 4. pg_buildext installcheck -------------------------------------------
echo "== pg_buildext installcheck (against the installed files)"
CHECK=$TMP/check/paynotify
copy_tree "$TOP" "$CHECK"
# the part of the tests run here (the Makefile's lists, in the copy only)
PN_PACKAGE_REGRESS=${PN_PACKAGE_REGRESS-setup config crypto state vectors pipeline hooks catalog}
PN_PACKAGE_ISOLATION=${PN_PACKAGE_ISOLATION-fixture concurrent_delivery failed_then_retry}
sed -i -e "s/^REGRESS = .*/REGRESS = $PN_PACKAGE_REGRESS/" \
    -e "s/^ISOLATION = .*/ISOLATION = $PN_PACKAGE_ISOLATION/" "$CHECK/Makefile"
chown -R postgres "$TMP/check"
# in C.UTF-8, the expected files' locale, whatever the caller's
runuser -u postgres -- env -u LC_ALL PATH="$PATH" HOME="$TMP/check" LANG=C.UTF-8 LC_COLLATE=C.UTF-8 LC_CTYPE=C.UTF-8 sh -c \
    "cd '$CHECK' && pg_buildext installcheck" >"$TMP/installcheck.log" 2>&1
rc=$?
grep -E '^(test | *[A-Za-z0-9_]+ +\.\.\. |ok |not ok )|tests? passed|failed' "$TMP/installcheck.log" | tail -80
if [ $rc -ne 0 ]; then
    tail -60 "$TMP/installcheck.log"
fi
check_status "pg_buildext installcheck (pg_regress: $(echo $PN_PACKAGE_REGRESS | wc -w) tests, isolation: $(echo $PN_PACKAGE_ISOLATION | wc -w) specs; installed files)" $rc

# ---- 5. the installed extension and shim in a throwaway cluster --------------
echo "== throwaway cluster"
PGPORT=$(pn_free_port)
if pn_cluster_start "$PGDIR" "$PGPORT"; then
    v=$(pn_psql "$PGDIR" "$PGPORT" -At -c 'CREATE EXTENSION paynotify' \
        -c "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")
    echo "CREATE EXTENSION paynotify: $v"
    check_status "CREATE EXTENSION paynotify installs $ctl_version" "$([ "$v" = "$ctl_version" ]; echo $?)"
    pn_psql "$PGDIR" "$PGPORT" -c 'CREATE DATABASE upgraded'
    v=$(pn_psql "$PGDIR" "$PGPORT" -d upgraded -At -c "CREATE EXTENSION paynotify VERSION '1.0'" \
        -c 'ALTER EXTENSION paynotify UPDATE' \
        -c "SELECT extversion FROM pg_extension WHERE extname = 'paynotify'")
    echo "1.0, then ALTER EXTENSION paynotify UPDATE: $v"
    check_status "1.0 updates to $ctl_version" "$([ "$v" = "$ctl_version" ]; echo $?)"

    # one CGI request through the packaged program and extension: a channel
    # that is not configured is answered by paynotify_handle, not by 503
    printf '{}' >"$TMP/body"
    env -i PATH="$PATH" GATEWAY_INTERFACE=CGI/1.1 REQUEST_METHOD=POST PATH_INFO=/notify/nochannel \
        CONTENT_LENGTH=2 CONTENT_TYPE=application/json \
        PAYNOTIFY_DSN="host=$PGDIR port=$PGPORT dbname=postgres user=postgres" \
        /usr/sbin/paynotify-cgi <"$TMP/body" >"$TMP/cgi.out" 2>"$TMP/cgi.err"
    rc=$?
    head -c 600 "$TMP/cgi.out" | tr -d '\r'; echo
    [ -s "$TMP/cgi.err" ] && cat "$TMP/cgi.err"
    check_status "packaged paynotify-cgi answers through the packaged extension" \
        "$([ $rc -eq 0 ] && grep -qi '^Paynotify-Outcome: ' "$TMP/cgi.out" &&
           ! grep -qi '^Paynotify-Outcome: unavailable' "$TMP/cgi.out"; echo $?)"

    # the packaged relay, once, with nothing due; the packaged sender's
    # request (keys from the tree's test vectors) answered by the extension
    out=$(env -i PATH="$PATH" PAYNOTIFY_DSN="host=$PGDIR port=$PGPORT dbname=postgres user=postgres" \
        /usr/sbin/paynotify-relay --once 2>"$TMP/relay.err")
    rc=$?
    echo "paynotify-relay --once: $out"
    check_status "packaged paynotify-relay --once: exit 0, the summary" \
        "$([ $rc -eq 0 ] && [ "$out" = "claimed 0, delivered 0, failed 0" ]; echo $?)"
    /usr/sbin/paynotify-send --gateway stripe --keys "$SRC/test/vectors/keys" --channel nochannel \
        --quiet --dump-sql "$TMP/send.sql" >/dev/null 2>"$TMP/send.err"
    out=$(pn_psql "$PGDIR" "$PGPORT" -At -f "$TMP/send.sql" 2>&1)
    echo "paynotify-send --dump-sql, replayed: $out"
    check_status "packaged paynotify-send signs a notification the packaged extension answers" \
        "$([ "$out" = rejected ]; echo $?)"
    pn_cluster_stop "$PGDIR"
else
    check_status "throwaway cluster with the system PostgreSQL starts" 1
fi

# ---- 6. the README's path for a real machine, as it is written ---------------
echo "== README: On a real machine (test/package/readme.sh)"
"$TOP/test/package/readme.sh" "$SRC" >"$TMP/readme.log" 2>&1
rc=$?
sed 's/^/  /' "$TMP/readme.log"
read -r rp _ rf _ < <(tail -1 "$TMP/readme.log")
case "$rp$rf" in
*[!0-9]*|'') check_status "test/package/readme.sh ran to its summary" 1 ;;
*) pass=$((pass + rp)); fail=$((fail + rf))
   [ $rc -ne 0 ] && [ "$rf" = 0 ] && check_status "test/package/readme.sh: exit status" $rc ;;
esac

summary
