# Shared shell helpers for paynotify's scripts: a throwaway PostgreSQL
# cluster on loopback, owned by an unprivileged user, stopped by pid.
# Source it; it defines functions only: the cluster (pn_*), the checks that
# test scripts count (ok, not_ok, check, check_cmd, check_rc, summary) and
# process and temporary-file helpers (stop_pid, remove_tmp).

PN_PGBIN=${PN_PGBIN:-$(pg_config --bindir 2>/dev/null)}
PN_RUNUSER=${PN_RUNUSER:-postgres}
PN_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# pn_as_user CMD...: run a command as the cluster's owner (root cannot run postgres).
pn_as_user() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$PN_RUNUSER" -- "$@"
    else
        "$@"
    fi
}

# pn_install: paynotify built and installed into the PostgreSQL that
# PN_PGBIN belongs to (its pg_config), unless what is installed there is
# already this build.  make install removes each file before it writes it
# again: a script run beside another one (test/run-all.sh's early_tests, a
# Citus test started while another runs) would pull paynotify.so and the
# control file from under the other's backends ("extension \"paynotify\" is
# not available").  Two scripts that find it not installed at once take
# turns (a lock on the library directory, flock), and the second finds it
# installed.  Output of make on stderr only.
pn_install() {
    local pgc=$PN_PGBIN/pg_config
    make -s -C "$PN_TOP" PG_CONFIG="$pgc" >/dev/null || return 1
    (
        local f dest
        exec 9<"$("$pgc" --pkglibdir)" && flock 9 || exit 1
        for f in "$PN_TOP"/paynotify.so "$PN_TOP"/paynotify.control "$PN_TOP"/paynotify--*.sql; do
            case $f in
                *.so) dest=$("$pgc" --pkglibdir)/${f##*/} ;;
                *) dest=$("$pgc" --sharedir)/extension/${f##*/} ;;
            esac
            cmp -s "$f" "$dest" || { make -s -C "$PN_TOP" PG_CONFIG="$pgc" install >/dev/null; exit; }
        done
    )
}

# pn_free_port: print a free TCP port on 127.0.0.1, below the kernel's
# range of ephemeral ports (ip_local_port_range) when there is room: a port
# the kernel hands out itself (port 0) may be given again, between this
# look and the server's bind, as the source port of any connection that
# another test opens meanwhile ("Address already in use").  Random in
# 10000 up to that range, tried until one binds.
pn_free_port() {
    python3 -c '
import random, socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 0
for _ in range(500):
    port = random.randint(10000, low - 1) if low > 11000 else 0
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        port = s.getsockname()[1]
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("pn_free_port: no free port")
'
}

# pn_cluster_start DIR PORT [extra postgresql.conf lines...]
# initdb in DIR/data, listen on 127.0.0.1:PORT and a socket in DIR, start.
pn_cluster_start() {
    local dir=$1 port=$2; shift 2
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown "$PN_RUNUSER" "$dir"
    pn_as_user "$PN_PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log"; return 1; }
    {
        echo "listen_addresses = '127.0.0.1'"
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        echo "max_connections = 200"
        echo "shared_buffers = 256MB"
        echo "logging_collector = off"
        for line in "$@"; do echo "$line"; done
    } >>"$dir/data/postgresql.conf"
    pn_as_user "$PN_PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
        || { cat "$dir/server.log"; return 1; }
}

# pn_fixture_cluster DIR PORT [extra postgresql.conf lines...]: a cluster
# with fsync off started in DIR (pn_cluster_start) and the fixture's files
# copied beside it (pn_fixture_copy); then pn_fixture_load DIR PORT DB.
pn_fixture_cluster() {
    local dir=$1 port=$2; shift 2
    pn_cluster_start "$dir" "$port" "fsync = off" "$@" && pn_fixture_copy "$dir"
}

# pn_cluster_pid DIR: the postmaster's pid.
pn_cluster_pid() {
    head -1 "$1/data/postmaster.pid" 2>/dev/null
}

# pn_cluster_stop DIR: fast shutdown of that cluster, by its pid.
pn_cluster_stop() {
    local pid
    pid=$(pn_cluster_pid "$1") || true
    stop_pid "${pid:-}" INT 10
}

# pn_psql DIR PORT [psql args...]: psql as superuser to that cluster.
pn_psql() {
    local dir=$1 port=$2; shift 2
    "$PN_PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres "$@"
}

# pn_tmp_dir NAME: print a new directory /tmp/paynotify-NAME.XXXXXX that the
# cluster's owner can enter (remove it with remove_tmp).
pn_tmp_dir() {
    local d
    d=$(mktemp -d "/tmp/paynotify-$1.XXXXXX") && chmod 755 "$d" && echo "$d"
}

# pn_fixture_copy DIR: the files test/fixture.sql reads (the signed vectors
# and the ledger notices) copied where the cluster's owner can read them;
# load the fixture with paynotify_test.vdir = 'DIR/vectors/' (pn_fixture_load).
pn_fixture_copy() {
    cp -r "$PN_TOP/test/vectors" "$1/vectors"
    cp "$PN_TOP/test/ledger_notices.json" "$1/ledger_notices.json"
    chmod -R a+rX "$1/vectors"
}

# pn_fixture_load DIR PORT DB [FILE]: test/fixture.sql (or FILE, a variant of
# it) loaded into database DB of that cluster, reading the vectors that
# pn_fixture_copy DIR put there.  The helpers of a Stripe channel 'st' are in
# test/e2e/stripe.sql (\i it).
pn_fixture_load() {
    local dir=$1 port=$2 db=$3 file=${4:-$PN_TOP/test/fixture.sql}
    pn_psql "$dir" "$port" -d "$db" -c "SET paynotify_test.vdir = '$dir/vectors/'" -f "$file" >/dev/null
}

# pn_sample WHAT SCHEMA CHANNEL CASE: SQL for a documented sample notification
# of test/vectors/samples (manifest.json, signed with the test keys), every
# function named with SCHEMA (quoted when needed) and no other, so that any
# role on any search_path may run it:
#   WHAT=channel  paynotify_add_channel and paynotify_add_key for CHANNEL,
#                 configured as the case's entry says (a superuser's);
#   WHAT=handle   the case's request through paynotify_handle on CHANNEL,
#                 its outcome (run at the case's paynotify.now: WHAT=now).
#   WHAT=now      the case's now_unix;
#   WHAT=carry    (CASE is another channel) that channel's agreements
#                 copied to CHANNEL, as signed there: a sample's end repeats
#                 its sign's notification id, and comes on a channel of its
#                 own (a superuser's).
pn_sample() {
    python3 - "$PN_TOP/test/vectors" "$@" <<'PY'
import json, sys
vdir, what, schema, chan, case = sys.argv[1:6]
m = {c["case"]: c for c in json.load(open(vdir + "/samples/manifest.json"))}.get(case)
def lit(s):
    return "'" + s.replace("'", "''") + "'"
def key(path):
    return open(vdir + "/" + path).read().strip("\n")
sch = schema if schema.isidentifier() and schema == schema.lower() else '"' + schema.replace('"', '""') + '"'
if what == "carry":
    print("INSERT INTO %s.paynotify_agreement (channel, agreement_id, merchant_ref, plan_id, state, gateway_state, signed_at)"
          " SELECT %s, agreement_id, merchant_ref, plan_id, state, gateway_state, signed_at"
          " FROM %s.paynotify_agreement WHERE channel OPERATOR(pg_catalog.=) %s" % (sch, lit(chan), sch, lit(case)))
    sys.exit(0)
cfg = m["config"]
if what == "now":
    print(m["now_unix"])
elif what == "handle":
    headers = {h[0].lower(): h[1] for h in m["headers"]}
    body = open(vdir + "/samples/" + m["files"]["body"], "rb").read()
    print("SELECT outcome FROM %s.paynotify_handle(%s, %s::jsonb, %s::bytea)"
          % (sch, lit(chan), lit(json.dumps(headers)), lit("\\x" + body.hex())))
elif what == "channel":
    if m["gateway"] == "wxpay":
        conf = {k: cfg[k] for k in ("mchid", "appid", "sp_mchid", "sub_mchid", "sp_appid", "sub_appid") if k in cfg}
        conf["apiv3_key"] = key(cfg["apiv3_key_file"])
        keys = [(serial, key(f)) for serial, f in cfg["trusted"].items()]
    elif m["gateway"] == "alipay":
        conf = {"app_id": cfg["app_id"]}
        keys = [(f, key(f)) for f in cfg["alipay_public_keys"]]
    else:
        conf = {k: cfg[k] for k in ("order_ref_path",) if k in cfg}
        keys = [(f, key(f)) for f in cfg["secret_files"]]
    conf["tolerance_s"] = cfg["tolerance_s"]
    print("SELECT %s.paynotify_add_channel(%s, %s, %s::jsonb);" % (sch, lit(chan), lit(m["gateway"]), lit(json.dumps(conf))))
    for name, k in keys:
        print("SELECT %s.paynotify_add_key(%s, %s, %s);" % (sch, lit(chan), lit(name), lit(k)))
else:
    sys.exit("pn_sample: channel, handle, now or carry")
PY
}

# ---- checks -------------------------------------------------------------------
# The test scripts count with the caller's globals pass, fail (and skip) and
# end with summary, whose last line is "N passed, M failed".

# ok DESC / not_ok DESC [DETAIL] / skipped DESC
ok() { pass=$((${pass:-0} + 1)); echo "ok   - $1"; }
not_ok() {
    fail=$((${fail:-0} + 1))
    echo "FAIL - $1"
    [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -n 40 | sed 's/^/       /'
    return 0
}
skipped() { skip=$((${skip:-0} + 1)); echo "skip - $1"; }

# check DESC EXPECTED ACTUAL: the two strings must be equal.
check() {
    if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1" "expected [$2], got [$3]"; fi
}

# check_cmd DESC CMD...: CMD must exit 0 (its output is shown when not).
check_cmd() {
    local desc=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$desc"; else not_ok "$desc" "$out"; fi
}

# check_rc DESC RC CMD...: CMD must exit with RC.
check_rc() {
    local desc=$1 want=$2 out rc
    shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" = "$want" ]; then ok "$desc"; else not_ok "$desc (exit $rc, want $want)" "$out"; fi
}

# relay_results FILE [PREFIX]: one ok or not_ok per "PASS desc" or
# "FAIL desc" line of FILE (a helper program's report); any other line is
# a failure.
relay_results() {
    local line
    while IFS= read -r line; do
        case "$line" in
            PASS\ *) ok "${2:-}${line#PASS }" ;;
            FAIL\ *) not_ok "${2:-}${line#FAIL }" ;;
            *) not_ok "${2:-}unexpected output" "$line" ;;
        esac
    done <"$1"
}

# summary: prints the counts; false when anything failed.
summary() {
    [ "${skip:-0}" = 0 ] || echo "(${skip} skipped)"
    echo "${pass:-0} passed, ${fail:-0} failed"
    [ "${fail:-0}" -eq 0 ]
}

# finish: summary, then exit (non-zero when anything failed).
finish() {
    summary
    exit
}

# ---- processes and temporary files ------------------------------------------

# pn_alive PID: true while the process runs.  A process that has exited but
# is not yet reaped (a zombie) counts as gone: a daemon's parent is init,
# and an init that reaps late would keep `kill -0` succeeding.
pn_alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    case $st in '' | Z* | X*) return 1 ;; esac
    return 0
}

# stop_pid PID [SIGNAL [SECONDS]]: signal a process we started and wait
# until it is gone (SECONDS, 5 by default, then SIGKILL).
stop_pid() {
    local pid=$1 sig=${2:-TERM} secs=${3:-5}
    [ -n "$pid" ] || return 0
    pn_alive "$pid" || return 0
    kill -"$sig" "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 $((secs * 20))); do
        pn_alive "$pid" || return 0
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
}

# remove_tmp DIR: remove a script's temporary directory, or keep it (and
# say so) when PN_KEEP_TMP=1.
remove_tmp() {
    [ -n "${1:-}" ] && [ -d "$1" ] || return 0
    if [ "${PN_KEEP_TMP:-0}" = 1 ]; then
        echo "kept $1"
    else
        rm -rf "$1"
    fi
}
