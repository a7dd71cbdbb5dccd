# A Citus cluster on loopback for test/e2e/citus.sh and test/bench/citus.sh:
# a coordinator and two workers (three PostgreSQL clusters in one
# temporary directory, stopped by pid), paynotify configured on the
# coordinator as the other end-to-end tests configure it (stack_schema),
# distributed with paynotify_distribute(), and one FastCGI shim per node
# behind one nginx upstream.  Source after test/lib.sh and test/e2e/stack.sh.
#
# The coordinator is stack.sh's cluster (STACK_DIR/pg, STACK_PGPORT, so
# stack_sql and stack_send work); the workers are STACK_DIR/w1 and
# STACK_DIR/w2 (CITUS_PORTS holds the three ports, CITUS_DIRS the three
# directories, coordinator first).

CITUS_DIRS=()
CITUS_PORTS=()

# citus_build_script: print the path of the shared Citus build script:
# CITUS_BUILD if set, else ../shared/tools/citus/build.sh beside the
# repository, else /work/shared/tools/citus/build.sh.
citus_build_script() {
    local c
    for c in ${CITUS_BUILD:+"$CITUS_BUILD"} "$PN_TOP/../shared/tools/citus/build.sh" /work/shared/tools/citus/build.sh; do
        [ -f "$c" ] && { echo "$c"; return 0; }
    done
    return 1
}

# citus_ensure: Citus installed into the PostgreSQL that PN_PGBIN belongs
# to, built with the shared script when it is not (that needs root).
citus_ensure() {
    local script pgc=$PN_PGBIN/pg_config
    if ! script=$(citus_build_script); then
        echo "citus: the build script is nowhere (CITUS_BUILD, $PN_TOP/../shared/tools/citus/build.sh," \
            "/work/shared/tools/citus/build.sh): cannot install Citus" >&2
        return 1
    fi
    PG_CONFIG=$pgc bash "$script" --check && return 0
    echo "# citus: not installed into $("$pgc" --pkglibdir); building it with $script"
    PG_CONFIG=$pgc bash "$script" || { echo "citus: $script failed" >&2; return 1; }
    PG_CONFIG=$pgc bash "$script" --check || { echo "citus: still not installed after $script" >&2; return 1; }
}

# citus_install: paynotify built and installed into the PostgreSQL that
# PN_PGBIN belongs to (where Citus was checked), unless what is installed
# there is already this build: pn_install (test/lib.sh).  A Citus test
# started while another one runs (the same build, the same PostgreSQL) must
# not replace the files under the running one's workers.
citus_install() { pn_install; }

# citus_begin NAME: what a Citus test starts with: Citus installed (built if
# missing), paynotify built and installed (citus_install), the shims built,
# stack_init NAME, the nodes stopped on exit.  Ends the script when one of
# them fails.
citus_begin() {
    citus_ensure || { echo "citus: not installed and cannot be built"; echo "0 passed, 1 failed"; exit 1; }
    citus_install && make -s -C shim >/dev/null || { echo "build failed"; exit 1; }
    stack_init "$1"
    trap citus_stop EXIT
}

# citus_node_crash N: node N stopped as by a crash: immediate shutdown, and
# where that has not ended within 10 s, the postmaster and its children
# SIGKILLed (a worker's immediate shutdown was seen, rarely, not to end
# within pg_ctl's 60 s here; a line with its processes says so).
citus_node_crash() {
    local n=$1 data=${CITUS_DIRS[$1]}/data pid kids
    pid=$(head -1 "$data/postmaster.pid" 2>/dev/null)
    pn_as_user "$PN_PGBIN/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1 && return 0
    [ -n "$pid" ] || return 1
    echo "# node $n: the immediate shutdown did not end within 10 s; its processes (then SIGKILLed):"
    ps -o pid,ppid,stat,wchan:25,cmd --ppid "$pid" -p "$pid" | sed 's/^/#   /'
    kids=$(ps -o pid= --ppid "$pid")
    # shellcheck disable=SC2086
    kill -KILL "$pid" $kids 2>/dev/null
    for _ in $(seq 1 200); do pn_alive "$pid" || break; sleep 0.05; done
    # the lock files name the dead postmaster, which init may not have
    # reaped yet (a zombie passes the new postmaster's liveness check)
    rm -f "$data/postmaster.pid" "${CITUS_DIRS[$n]}"/.s.PGSQL.*
}

# citus_sql N [psql args...]: psql as superuser to node N (0 coordinator, 1, 2 workers).
citus_sql() {
    local n=$1
    shift
    pn_psql "${CITUS_DIRS[n]}" "${CITUS_PORTS[n]}" "$@"
}

# citus_q N SQL: one query's unaligned tuples on node N.
citus_q() { citus_sql "$1" -tA -c "$2"; }

# citus_cluster [postgresql.conf lines...]: the three nodes started (after
# stack_init), citus created on each, the coordinator and both workers in
# its metadata.  CITUS_SHARD_COUNT shards per distributed table (default 4,
# two per worker: a first delivery still reads some tables on every shard,
# see the README's Scale-out on Citus).  Two-phase commit records are kept
# (citus.recover_2pc_interval = -1: citus_2pc_count).  fsync is off.  The
# caller's EXIT trap must run citus_stop.  The workers are made and started
# beside the coordinator, and citus is created on the three at once (each
# node is a cluster of its own until citus_add_node).
citus_cluster() {
    local i rc=0 pids=() conf=("shared_preload_libraries = 'citus'" "max_prepared_transactions = 100"
        "fsync = off" "citus.recover_2pc_interval = -1" "citus.shard_count = ${CITUS_SHARD_COUNT:-4}" "$@")
    CITUS_DIRS=("$STACK_DIR/pg") CITUS_PORTS=("")
    for i in 1 2; do
        CITUS_DIRS+=("$STACK_DIR/w$i") CITUS_PORTS+=("$(pn_free_port)")
        pn_cluster_start "${CITUS_DIRS[i]}" "${CITUS_PORTS[i]}" "${conf[@]}" &
        pids+=($!)
    done
    stack_pg "${conf[@]}" || rc=1
    CITUS_PORTS[0]=$STACK_PGPORT
    for i in "${pids[@]}"; do wait "$i" || rc=1; done
    [ $rc = 0 ] || return 1
    pids=()
    for i in 0 1 2; do
        citus_sql $i -c "CREATE EXTENSION citus" >/dev/null &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i" || rc=1; done
    [ $rc = 0 ] || return 1
    citus_sql 0 -c "SELECT citus_set_coordinator_host('127.0.0.1', ${CITUS_PORTS[0]})" \
        -c "SELECT citus_add_node('127.0.0.1', ${CITUS_PORTS[1]})" \
        -c "SELECT citus_add_node('127.0.0.1', ${CITUS_PORTS[2]})" >/dev/null || return 1
}

# citus_stop: the workers stopped by pid (the coordinator is stack_stop's).
citus_stop() {
    local i
    for ((i = ${#CITUS_DIRS[@]} - 1; i >= 1; i--)); do
        pn_cluster_stop "${CITUS_DIRS[i]}" || true
    done
    stack_stop
}

# citus_grant ROLE CAPACITY [DB]: SELECT paynotify_grant(ROLE, CAPACITY) on
# the coordinator and on each worker (in DB, default postgres).  The
# extension is on every node (CREATE EXTENSION on the coordinator created
# it on the workers too, as CREATE ROLE creates the role there), but a
# capacity is privileges on one node's objects: paynotify_grant grants
# only on the node where it runs, and a role that calls paynotify's
# functions on a worker (a shim or a relay connected there) needs it run
# on that worker as well.  For the handler and relay capacities (EXECUTE
# only), before or after paynotify_distribute().
citus_grant() {
    local i
    for i in 0 1 2; do
        citus_sql $i -d "${3:-postgres}" -c "SELECT paynotify_grant('$1', '$2')" >/dev/null || return 1
    done
}

# citus_schema ORDERS: stack_schema's configuration on the coordinator
# (extension, channels, keys, ORDERS pending orders, guard trigger,
# paid/refunded hook, the shim's role with the handler capacity on every
# node: citus_grant), then SELECT paynotify_distribute().
# The application's own tables are made ready for the workers as an
# application on Citus would: erp_calls (written by the hook) distributed by
# order_no in a co-location group of its own (the hook writes it as its
# registrant, over a connection of its own), hook_faults a reference table, and the
# hook without its fault-injection sequence (a local sequence does not
# exist on the workers; these tests inject no hook faults).
citus_schema() {
    stack_schema 0 "$1" || return 1
    citus_grant notify_shim handler || return 1
    citus_sql 0 -c "SELECT paynotify_distribute()" >/dev/null || return 1
    citus_app
}

# citus_app: the application's tables of stack_schema made ready for the
# workers (after paynotify_distribute(); see citus_schema).
citus_app() {
    citus_sql 0 >/dev/null <<'SQL' || return 1
SELECT create_distributed_table('erp_calls', 'order_no', colocate_with => 'none');
SELECT create_reference_table('hook_faults');
CREATE OR REPLACE FUNCTION erp_hook(ev jsonb) RETURNS void LANGUAGE sql
BEGIN ATOMIC
	INSERT INTO erp_calls (order_no, event) VALUES (ev->'notice'->>'order_no', ev->>'event');
END;
SQL
}

# citus_shims WORKERS [VAR=value...] [--option...]: one FastCGI shim per
# node (shim0 -> coordinator, shim1, shim2 -> the workers, WORKERS workers
# each, the rest as stack_shim_named takes it) and nginx in front of the
# three, round robin (STACK_URL).
citus_shims() {
    local i socks=() workers=$1
    shift
    for i in 0 1 2; do
        STACK_DSN="host=127.0.0.1 port=${CITUS_PORTS[i]} dbname=postgres user=notify_shim" \
            stack_shim_named "shim$i" "$workers" "$@" || return 1
        socks+=("$STACK_DIR/run/shim$i.sock")
    done
    stack_nginx_upstream "${socks[@]}"
}

# citus_hold N NAME SQL...: a transaction on node N (BEGIN, then each SQL,
# as psql's input), kept open until citus_release NAME; returns once its
# backend (application_name NAME) is idle in transaction, that is once every
# SQL has run (waits up to 60 s; false when it never is).  What a test wants
# held (a row lock) is held for as long as the test needs it, not for a
# fixed time.
declare -gA CITUS_HOLD_PID=() CITUS_HOLD_FD=()
citus_hold() {
    local n=$1 name=$2 fifo fd s
    shift 2
    fifo=$STACK_DIR/hold.$name
    rm -f "$fifo"
    mkfifo "$fifo" || return 1
    PGAPPNAME=$name citus_sql "$n" <"$fifo" >"$STACK_DIR/hold.$name.out" 2>&1 &
    CITUS_HOLD_PID[$name]=$!
    exec {fd}>"$fifo"
    CITUS_HOLD_FD[$name]=$fd
    { echo "BEGIN;"; for s in "$@"; do echo "$s;"; done; } >&"$fd"
    for _ in $(seq 1 1200); do
        [ "$(citus_q "$n" "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$name' AND state = 'idle in transaction'")" = 1 ] &&
            return 0
        pn_alive "${CITUS_HOLD_PID[$name]}" || break
        sleep 0.05
    done
    echo "# citus_hold $name: not held: $(cat "$STACK_DIR/hold.$name.out")"
    return 1
}

# citus_release NAME: citus_hold's transaction committed, its psql waited for.
citus_release() {
    local fd=${CITUS_HOLD_FD[$1]}
    echo "COMMIT;" >&"$fd"
    exec {fd}>&-
    wait "${CITUS_HOLD_PID[$1]}"
}

# citus_2pc_count: two-phase commit records on every node (pg_dist_transaction
# rows; Citus keeps them until its recovery removes them: run with
# citus.recover_2pc_interval = -1) plus prepared transactions in flight.
citus_2pc_count() {
    local i n total=0
    for i in 0 1 2; do
        n=$(citus_q $i "SELECT (SELECT count(*) FROM pg_dist_transaction) + (SELECT count(*) FROM pg_prepared_xacts)") || n=999999
        total=$((total + n))
    done
    echo "$total"
}

# citus_database DB: database DB created on the three nodes, citus in each,
# and the nodes in its metadata (Citus's metadata is per database).
citus_database() {
    local i
    for i in 0 1 2; do
        # (Citus says that it does not propagate CREATE DATABASE: known)
        PGOPTIONS="-c client_min_messages=warning" citus_sql $i -c "CREATE DATABASE $1" >/dev/null &&
            citus_sql $i -d "$1" -c "CREATE EXTENSION citus" >/dev/null || return 1
    done
    citus_sql 0 -d "$1" -c "SELECT citus_set_coordinator_host('127.0.0.1', ${CITUS_PORTS[0]})" \
        -c "SELECT citus_add_node('127.0.0.1', ${CITUS_PORTS[1]})" \
        -c "SELECT citus_add_node('127.0.0.1', ${CITUS_PORTS[2]})" >/dev/null
}
