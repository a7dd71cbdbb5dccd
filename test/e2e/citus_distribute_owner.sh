#!/usr/bin/env bash
# paynotify_distribute() runs no one's code with the rights of the superuser
# who calls it: a Citus coordinator and two workers on loopback
# (test/e2e/citus-lib.sh).
#
#   test/e2e/citus_distribute_owner.sh
#
# Citus copies a table's rows into its shards when it distributes it, over
# the connections of the role that distributes it: the table's triggers,
# constraints, index expressions and its columns' domains run on the
# workers with that role's rights.  Here the orders table belongs to an
# application role (pn_app) that put such code on it, each piece trying to
# make a role of its own (pn_m_<piece>, no login) a superuser: a BEFORE
# INSERT trigger, a CHECK constraint, an index expression, a generated
# column, a domain's check, a row-level security policy (forced on the
# owner) and a default.  And
# another role (pn_planter), allowed to create in every node's public
# schema, put there an operator "=" for (oid, regclass), which a query of
# the nodes' search_path would take over pg_catalog's (an exact match,
# where pg_catalog's needs a cast), trying the same for pn_m_operator.  As
# the superuser postgres:
#   allowed    paynotify's guard trigger, an enum column and a default are
#              no code the copy runs as someone else (paynotify_table_authors for the
#              table with them; nor is a policy the owner is not held to:
#              the owner and a superuser read past it)
#   refused    each piece alone: paynotify_distribute() refused (42501),
#              the detail naming it (also an index predicate, a rule, the
#              guard with a WHEN condition); a CHECK that runs SQL held as
#              text through query_to_xml (no function of pn_app's named):
#              refused, as the code of a table whose owner lacks the
#              caller's rights; all of them: refused, the hint
#              naming create_distributed_table, nothing distributed
#   way out    the owner distributes the table itself (EXECUTE on the guard
#              granted on every node, citus.enable_unsafe_triggers on): its
#              code runs as the owner; paynotify_distribute() then finds it
#              distributed and does the rest, also its block on every worker
#              (with the planted operator in the nodes' search_path); a
#              payment handled on its order's node is processed, the guard
#              refuses an illegal move (a payment handled on the other
#              worker is shown, not counted: Citus refuses it, as paynotify
#              writes the orders table as its owner and its own tables as
#              paynotify's owner in one transaction)
#   ext owner  (database extown) paynotify created by a role that is no
#              superuser any more (the orders table bound while it was
#              one: the guard is its function); paynotify_distribute() as
#              postgres is refused (42501, the hint naming that role); once
#              it is one again, an orders table of pn_app whose only code is
#              a default and the guard is still refused (42501, the hint
#              naming pn_app): an orders table is distributed here only
#              when its owner has the caller's rights
#   nobody     in the end no pn_m_ role is a superuser on any node
# Before 1.3, paynotify_distribute() distributed the orders table itself:
# pn_m_trigger, _check, _index, _generated and _domain became superusers on
# both workers, and pn_m_operator too (its block on the workers); not
# pn_m_default (the copy sends every column) nor pn_m_policy (a superuser
# reads past row-level security).
# In the --full suite.  Last line: "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
. test/lib.sh
. test/e2e/stack.sh
. test/e2e/citus-lib.sh
pass=0 fail=0
citus_begin citus-owner
citus_cluster || exit 1
echo "# coordinator 127.0.0.1:${CITUS_PORTS[0]}, workers :${CITUS_PORTS[1]} :${CITUS_PORTS[2]}"
stack_schema 0 20 >/dev/null 2>&1 || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
# the shim's role may call paynotify_handle on every node (a grant is the
# node's own)
citus_grant notify_shim handler || { echo "grants failed"; echo "0 passed, 1 failed"; exit 1; }
markers="trigger check index generated domain policy default when operator xml history"
as() {	# as NODE ROLE [psql args...]: psql as that role on that node (database AS_DB, default postgres)
    local n=$1 role=$2
    shift 2
    "$PN_PGBIN/psql" -X -q -tA "host=127.0.0.1 port=${CITUS_PORTS[$n]} dbname=${AS_DB:-postgres} user=$role" "$@"
}
superusers() {	# the pn_m_ roles that are superusers, node by node
    local i
    for i in 0 1 2; do
        echo -n "node $i: $(citus_q $i "SELECT coalesce(string_agg(rolname, ' ' ORDER BY rolname), 'none')
                                        FROM pg_roles WHERE rolname LIKE 'pn\_m\_%' AND rolsuper")"
        [ $i -lt 2 ] && echo -n "; "
    done
}
distributed() {	# how many tables are distributed or reference tables (DB)
    citus_q 0 "SELECT count(*) FROM pg_dist_partition" 2>&1
}

citus_sql 0 >/dev/null <<SQL || { echo "roles failed"; echo "0 passed, 1 failed"; exit 1; }
CREATE ROLE pn_app LOGIN;
CREATE ROLE pn_planter LOGIN;
$(for m in $markers; do echo "CREATE ROLE pn_m_$m;"; done)
GRANT CREATE ON SCHEMA public TO pn_app, pn_planter;
ALTER TABLE orders OWNER TO pn_app;
SQL
# the application's escalation attempt, as pn_app: true whatever happens
as 0 pn_app >/dev/null <<'SQL'
CREATE FUNCTION public.pn_try_superuser(r text, v text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER', r);
	RAISE WARNING 'pn_try_superuser: % made a superuser by %', r, current_user;
	RETURN true;
EXCEPTION WHEN insufficient_privilege THEN
	RETURN true;
END $f$;
-- for index expressions and generated columns
CREATE FUNCTION public.pn_try_superuser_i(r text, v text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $f$
BEGIN RETURN public.pn_try_superuser(r, v); END $f$;
CREATE FUNCTION public.pn_trg() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN PERFORM public.pn_try_superuser('pn_m_trigger', NEW.order_no); RETURN NEW; END $f$;
CREATE DOMAIN public.pn_dom AS text CHECK (public.pn_try_superuser('pn_m_domain', VALUE));
CREATE TYPE public.pn_mood AS ENUM ('calm', 'busy');
SQL
# what is no code the copy runs: the guard (stack_schema's), an enum
# column, a default calling a function (added by the owner, who runs it
# for the rows there)
as 0 pn_app >/dev/null <<'SQL'
ALTER TABLE orders ADD COLUMN pn_mood public.pn_mood DEFAULT 'calm',
	ADD COLUMN pn_def boolean DEFAULT public.pn_try_superuser('pn_m_default', 'x');
SQL
check "allowed: the guard, an enum column and a default are no code the copy runs as someone else (paynotify_table_authors)" \
    "t" "$(citus_q 0 "SELECT NOT EXISTS (SELECT FROM paynotify_table_authors('orders') WHERE NOT pg_has_role(owner, current_user, 'USAGE'))" 2>&1)"
# the planted operator, on every node (not propagated: each node its own)
for i in 0 1 2; do
    as $i pn_planter >/dev/null 2>&1 <<'SQL'
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION public.pn_eq(a oid, b regclass) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	BEGIN
		EXECUTE 'ALTER ROLE pn_m_operator SUPERUSER';
		RAISE WARNING 'pn_eq: pn_m_operator made a superuser by %', current_user;
	EXCEPTION WHEN insufficient_privilege THEN NULL;
	END;
	RETURN a OPERATOR(pg_catalog.=) b::pg_catalog.oid;
END $f$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.pn_eq);
SQL
done
# (the exact match the parser looks for first, found in the search_path;
# as pn_planter, nothing run).  This test's own queries as a superuser
# compare oid with oid: one with a regclass would run it.
check "the operator = (oid, regclass) planted in public on every node: the exact match in the nodes' search_path" \
    "public public public" \
    "$(for i in 0 1 2; do as $i pn_planter -c "SELECT o.oprnamespace::regnamespace FROM pg_operator o WHERE o.oid = '=(oid,regclass)'::regoperator" 2>&1 \
           | head -1; done | tr '\n' ' ' | sed 's/ $//')"

# ---- each piece alone: refused, the detail naming it -------------------------
# (in a transaction rolled back: the piece is added as pn_app, then
# paynotify_distribute() is called as postgres; its refusal comes before
# it changes anything)
citus_q 0 "GRANT EXECUTE ON FUNCTION paynotify_guard_transition() TO pn_app" >/dev/null
refusal() {	# refusal SQL: "SQLSTATE|detail" of paynotify_distribute() with SQL run as pn_app first
    citus_sql 0 -tA 2>&1 <<SQL | sed -n 's/^NOTICE:  result: //p'
BEGIN;
SET LOCAL ROLE pn_app;
$1;
RESET ROLE;
DO \$\$
DECLARE
	st text;
	det text;
BEGIN
	PERFORM paynotify_distribute();
	RAISE NOTICE 'result: distributed';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL;
	RAISE NOTICE 'result: %|%', st, det;
END
\$\$;
ROLLBACK;
SQL
}
while IFS='|' read -r piece sql; do
    out=$(refusal "$sql")
    # the detail names the piece by its name (quoted for a trigger, a
    # constraint, a rule, a policy; schema-qualified for an index)
    name=$(echo "$piece" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
    check "refused: $piece alone (42501, the detail naming it)" "42501|yes" \
        "$(echo "$out" | cut -d'|' -f1)|$(echo "$out" | cut -d'|' -f2- | grep -w -- "$name" >/dev/null && echo yes || echo "no: $out")"
done <<'PIECES'
trigger "pn_trg"|CREATE TRIGGER pn_trg BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION public.pn_trg()
CHECK constraint "pn_chk"|ALTER TABLE orders ADD CONSTRAINT pn_chk CHECK (public.pn_try_superuser('pn_m_check', order_no))
index "pn_idx" (an expression)|CREATE INDEX pn_idx ON orders ((public.pn_try_superuser_i('pn_m_index', order_no)))
index "pn_idx_p" (a predicate)|CREATE INDEX pn_idx_p ON orders (status) WHERE public.pn_try_superuser_i('pn_m_index', order_no)
generated column "pn_gen"|ALTER TABLE orders ADD COLUMN pn_gen boolean GENERATED ALWAYS AS (public.pn_try_superuser_i('pn_m_generated', order_no)) STORED
column "pn_d" of a domain|ALTER TABLE orders ADD COLUMN pn_d public.pn_dom DEFAULT 'x'
policy "pn_pol" (row-level security forced)|CREATE POLICY pn_pol ON orders USING (public.pn_try_superuser('pn_m_policy', order_no)); ALTER TABLE orders ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY
rule "pn_rule"|CREATE RULE pn_rule AS ON UPDATE TO orders DO ALSO SELECT public.pn_try_superuser('pn_m_policy', NEW.order_no)
guard trigger "pn_guard_when" with a WHEN condition|CREATE TRIGGER pn_guard_when BEFORE INSERT ON orders FOR EACH ROW WHEN (public.pn_try_superuser('pn_m_when', NEW.order_no)) EXECUTE FUNCTION paynotify_guard_transition()
PIECES
# a CHECK of the owner's that calls only functions of the bootstrap
# superuser, one of which runs SQL it is given as text: no function of
# pn_app's is named, yet the copy would run pn_try_superuser as the caller.
# Refused because the table is pn_app's (whose code may not run as postgres)
# a role granted TRIGGER on the orders table (its triggers would run in the
# copy as the caller): refused, the detail naming that right and the role
out=$(refusal "GRANT TRIGGER ON orders TO pn_planter")
check "refused: TRIGGER on the orders table granted to another role (42501, the detail naming the right and the role)" "42501|yes" \
    "$(echo "$out" | cut -d'|' -f1)|$(echo "$out" | grep -q 'the right to create triggers on table public.orders of role pn_planter' && echo yes || echo "no: $out")"
out=$(refusal "ALTER TABLE orders ADD CONSTRAINT pn_chk_xml CHECK (query_to_xml('SELECT public.pn_try_superuser(''pn_m_xml'', ''x'')', false, false, '') IS NOT NULL)")
check "refused: a CHECK running SQL held as text through query_to_xml (42501, the table's owner named)" "42501|yes" \
    "$(echo "$out" | cut -d'|' -f1)|$(echo "$out" | grep -q 'which runs its code' && echo yes || echo "no: $out")"

# ---- all of them: refused, nothing distributed ----------------------------------
as 0 pn_app >/dev/null <<'SQL'
CREATE TRIGGER pn_trg BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION public.pn_trg();
ALTER TABLE orders ADD CONSTRAINT pn_chk CHECK (public.pn_try_superuser('pn_m_check', order_no));
CREATE INDEX pn_idx ON orders ((public.pn_try_superuser_i('pn_m_index', order_no)));
ALTER TABLE orders ADD COLUMN pn_gen boolean GENERATED ALWAYS AS (public.pn_try_superuser_i('pn_m_generated', order_no)) STORED;
ALTER TABLE orders ADD COLUMN pn_d public.pn_dom DEFAULT 'x';
CREATE POLICY pn_pol ON orders USING (public.pn_try_superuser('pn_m_policy', order_no));
ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
SQL
before=$(distributed)
out=$(citus_sql 0 -v VERBOSITY=verbose -c "SELECT * FROM paynotify_distribute()" 2>&1)
check "refused: all of them (42501, the hint naming create_distributed_table)" "42501|yes" \
    "$(echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1)|$(echo "$out" | grep "^HINT: .*create_distributed_table('public.orders', 'order_no')" >/dev/null && echo yes || echo "no: $(echo "$out" | grep -m1 -E 'ERROR|HINT')")"
check "refused: nothing distributed (tables in pg_dist_partition as before)" "$before" "$(distributed)"
echo "# $(echo "$out" | grep -m1 '^ERROR')"
echo "# $(echo "$out" | grep -m1 '^DETAIL')"
echo "# $(echo "$out" | grep -m1 '^HINT')"
check "refused: no pn_m_ role is a superuser" "node 0: none; node 1: none; node 2: none" "$(superusers)"

# ---- the way out: its owner distributes it, then paynotify_distribute() ---------
out=$(citus_q 0 "SELECT bool_and(success) FROM run_command_on_all_nodes(
                 'GRANT EXECUTE ON FUNCTION public.paynotify_guard_transition() TO pn_app')" 2>&1)
check "way out: EXECUTE on the guard granted to the owner on every node" t "$out"
out=$(as 0 pn_app -c "SET citus.enable_unsafe_triggers = on" -c "SELECT create_distributed_table('orders', 'order_no')" 2>&1)
check "way out: the owner distributes the orders table itself" "" "$(echo "$out" | grep -m1 -E 'ERROR|FATAL')"
out=$(citus_sql 0 -tA -c "SELECT relation::text || ' ' || action FROM paynotify_distribute() WHERE kind = 'orders'" 2>&1)
check "way out: paynotify_distribute() then does the rest (orders: already)" "orders already" \
    "$(echo "$out" | grep -E '^ERROR|^orders ' | head -1)"
out=$(citus_app 2>&1)
check "way out: the application's tables distributed beside orders (erp_calls not co-located, hook_faults reference)" "0|" \
    "$?|$(echo "$out" | grep -E 'ERROR' | head -3)"
config_tables=$(citus_q 0 "SELECT count(*) FROM pg_depend d JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'r'
                           WHERE d.classid = 'pg_class'::regclass::oid AND d.deptype = 'e'
                             AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'paynotify')
                             AND NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'order_no')")
check "way out: the layout (every table with order_no co-located with orders, the $config_tables configuration tables reference tables)" "0|$config_tables" \
    "$(citus_q 0 "SELECT count(*) FILTER (WHERE p.colocationid IS DISTINCT FROM (SELECT colocationid FROM pg_dist_partition
                                                                           WHERE logicalrelid = 'orders'::regclass::oid)
                                    AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'order_no'))
                  || '|' || count(*) FILTER (WHERE p.partmethod = 'n')
                  FROM pg_depend d JOIN pg_class c ON c.oid = d.objid AND c.relkind = 'r'
                  LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
                  WHERE d.classid = 'pg_class'::regclass::oid AND d.deptype = 'e'
                    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'paynotify')" 2>&1)"
# a payment handled on the node that holds its order's shard.  (On another
# node Citus refuses it: paynotify writes the orders table as its owner and
# its own tables as its own owner, and Citus will not reach co-located
# shards written in one transaction over two roles' connections: shown
# below, not counted.)
node_of() {	# node_of ORDER: the index of the node that holds its shard
    local i port
    port=$(citus_q 0 "SELECT nodeport FROM citus_shards WHERE table_name::oid = 'orders'::regclass::oid
                      AND shardid = get_shard_id_for_distribution_column('orders', '$1')")
    for i in 0 1 2; do [ "${CITUS_PORTS[i]}" = "$port" ] && echo $i; done
}
for o in 1 2; do
    shim/paynotify-send --gateway stripe --mode one --start $o --seed 90 --keys test/vectors/keys \
        --dump-sql "$STACK_DIR/pay$o.sql" >/dev/null 2>&1
done
n1=$(node_of PN00000001)
out=$(as "${n1:-1}" notify_shim <"$STACK_DIR/pay1.sql" 2>&1)
check "way out: a payment handled on its order's node (worker ${n1:-?}) processed, its order paid" "processed|paid" \
    "$(echo "$out" | grep -v '^$' | tail -1)|$(citus_q 0 "SELECT status FROM orders WHERE order_no = 'PN00000001'")"
n2=$(node_of PN00000002)
other=$((3 - ${n2:-1}))
out=$(as $other notify_shim <"$STACK_DIR/pay2.sql" 2>&1)
outcome=$(echo "$out" | grep -E '^[a-z_]+$' | tail -1)
echo "# a payment handled on worker $other, its order's shard on worker ${n2:-?}: ${outcome:-an error}" \
     "($(echo "$out" | grep -m1 -E '^(ERROR|DETAIL)' | sed -E 's/^(ERROR|DETAIL): *//'))"
out=$(as 2 pn_app -c "UPDATE orders SET status = 'received' WHERE order_no = 'PN00000003'" 2>&1)
check "way out: the guard refuses an illegal move through worker 2 (pending to received)" yes \
    "$(echo "$out" | grep 'illegal order status transition from "pending" to "received"' >/dev/null && echo yes || echo "no: $out")"

# ---- a table named as a shard of the order history, planted by pn_app -------------
# On the coordinator (no placement of orders there), pn_app, who owns the
# orders table and may create in public (the extension's schema), makes a
# table named as a shard of orders with the guard, and one named as the
# co-located shard of the order history with a trigger of its own.  A legal
# move on the first makes the guard record it as the application's in the
# second, as paynotify's owner: its trigger would run as a superuser.  The
# guard refuses a history shard not owned by paynotify's owner.
# (oid compared with oid: the planted operator = (oid, regclass) is in public)
hshard=$(citus_q 0 "SELECT get_shard_id_for_distribution_column('orders'::regclass, 'PN-FAKE'::text) || ' ' ||
                           get_shard_id_for_distribution_column('paynotify_order_history'::regclass, 'PN-FAKE'::text)" 2>&1)
echo "# planted as shards: orders and history shard ids $hshard"
read -r oshard hist <<<"$hshard"
out=$(as 0 pn_app 2>&1 <<SQL
SET citus.enable_ddl_propagation = off;
CREATE TABLE public.orders_$oshard (order_no text PRIMARY KEY, status text NOT NULL, amount_fen bigint NOT NULL);
INSERT INTO public.orders_$oshard VALUES ('PN-FAKE', 'pending', 100);
CREATE TRIGGER orders_guard BEFORE UPDATE ON public.orders_$oshard FOR EACH ROW EXECUTE FUNCTION paynotify_guard_transition();
CREATE TABLE public.paynotify_order_history_$hist (id bigint, order_no text, from_state text, to_state text, source text, by_role text, at timestamptz);
CREATE FUNCTION public.pn_hist_trg() RETURNS trigger LANGUAGE plpgsql AS \$f\$
BEGIN PERFORM public.pn_try_superuser('pn_m_history', NEW.order_no); RETURN NEW; END \$f\$;
CREATE TRIGGER pn_hist BEFORE INSERT ON public.paynotify_order_history_$hist FOR EACH ROW EXECUTE FUNCTION public.pn_hist_trg();
UPDATE public.orders_$oshard SET status = 'paid' WHERE order_no = 'PN-FAKE';
SQL
)
check "a history shard planted by pn_app on the coordinator: the guard's record refused (not paynotify's owner's), pn_m_history no superuser" \
    "yes|none" "$(echo "$out" | grep -q 'on this node is not paynotify.s owner.s' && echo yes || echo "no: $(echo "$out" | grep -m1 -E 'ERROR')")|$(citus_q 0 "SELECT coalesce(string_agg(rolname, ' '), 'none') FROM pg_roles WHERE rolname = 'pn_m_history' AND rolsuper")"

# ---- extension tables owned by a role without the caller's privileges -----------
if citus_database extown; then
    citus_q 0 "CREATE ROLE pn_extowner LOGIN SUPERUSER" >/dev/null
    AS_DB=extown as 0 pn_extowner -c "CREATE EXTENSION paynotify" >/dev/null 2>&1
    # the orders table bound while pn_extowner is a superuser: paynotify
    # binds no table whose code (here the guard, pn_extowner's function) has
    # an owner without the rights of the table's owner
    out=$(citus_sql 0 -d extown 2>&1 >/dev/null <<'SQL'
GRANT CREATE ON SCHEMA public TO pn_app;
CREATE TABLE orders (order_no text PRIMARY KEY, status text NOT NULL DEFAULT 'pending', amount_fen bigint NOT NULL);
INSERT INTO orders (order_no, amount_fen) SELECT 'PN' || lpad(i::text, 8, '0'), 100 FROM generate_series(1, 10) i;
CREATE TRIGGER orders_guard BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION paynotify_guard_transition();
SELECT paynotify_bind_orders('orders', 'order_no', 'status', 'amount_fen');
ALTER TABLE orders OWNER TO pn_app;
SQL
    )
    # its code: a default only (added by its owner, who runs it for the rows there)
    out+=$(AS_DB=extown as 0 pn_app 2>&1 >/dev/null <<'SQL'
CREATE FUNCTION public.pn_try_superuser(r text, v text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER', r);
	RETURN true;
EXCEPTION WHEN insufficient_privilege THEN
	RETURN true;
END $f$;
ALTER TABLE orders ADD COLUMN pn_def boolean DEFAULT public.pn_try_superuser('pn_m_default', 'x');
SQL
    )
    out+=$(citus_q 0 "ALTER ROLE pn_extowner NOSUPERUSER" 2>&1 >/dev/null)
    check "ext owner: set up (paynotify created by pn_extowner, the orders table bound, given to pn_app, pn_extowner no superuser then)" \
        "" "$(echo "$out" | grep -m1 -E 'ERROR|FATAL')"
    # the only code on it run with rights its owner lacks: the guard, whose
    # function is pn_extowner's (the default is not code the copy runs)
    check "ext owner: paynotify created by pn_extowner, no superuser now; the orders table of pn_app with a default and the guard (pn_extowner's)" \
        "pn_extowner|false|trigger \"orders_guard\" of public.orders: pn_extowner" \
        "$(citus_sql 0 -d extown -tA -c "SELECT extowner::regrole || '|' || (SELECT rolsuper FROM pg_roles WHERE rolname = 'pn_extowner')
                                        || '|' || (SELECT coalesce(string_agg(a.what || ': ' || a.owner, ', ' ORDER BY a.what), 'none')
                                                   FROM paynotify_table_authors('orders') a WHERE NOT pg_has_role(a.owner, current_user, 'USAGE'))
                                        FROM pg_extension WHERE extname = 'paynotify'" 2>&1)"
    out=$(citus_sql 0 -d extown -v VERBOSITY=verbose -c "SELECT * FROM paynotify_distribute()" 2>&1)
    check "ext owner: paynotify_distribute() as postgres refused (42501, the hint naming pn_extowner), nothing distributed" \
        "42501|yes|0" "$(echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1)|$(echo "$out" | grep '^HINT: .*"pn_extowner"' >/dev/null && echo yes || echo "no: $(echo "$out" | grep -m1 -E 'ERROR|HINT')")|$(citus_sql 0 -d extown -tA -c "SELECT count(*) FROM pg_dist_partition" 2>&1)"
    citus_q 0 "ALTER ROLE pn_extowner SUPERUSER" >/dev/null
    # its code (a default) is its owner's, pn_app's, which the copy would run
    # as postgres: its owner distributes it (see "way out")
    out=$(citus_sql 0 -d extown -v VERBOSITY=verbose -c "SELECT * FROM paynotify_distribute()" 2>&1)
    check "ext owner: a superuser again: the orders table of pn_app (a default and the guard its code) refused (42501, the hint naming pn_app), nothing distributed" \
        "42501|yes|0" "$(echo "$out" | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1)|$(echo "$out" | grep '^HINT: .*Have its owner, pn_app,' >/dev/null && echo yes || echo "no: $(echo "$out" | grep -m1 -E 'ERROR|HINT')")|$(citus_sql 0 -d extown -tA -c "SELECT count(*) FROM pg_dist_partition" 2>&1)"
else
    not_ok "ext owner: a database of its own on the three nodes"
fi

check "nobody: no pn_m_ role is a superuser on any node" "node 0: none; node 1: none; node 2: none" "$(superusers)"
check "no server crashed (no PANIC, no backend terminated by a signal)" "" \
    "$(grep -lE 'PANIC|server process .* was terminated' "${CITUS_DIRS[0]}/server.log" "${CITUS_DIRS[1]}/server.log" "${CITUS_DIRS[2]}/server.log" | tr '\n' ' ')"
summary
