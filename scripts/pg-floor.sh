#!/usr/bin/env bash
# What PostgreSQL itself allows one client's grants, beside what
# the lock-server on PostgreSQL and etcd reach, in one interleaved run.
#
# A single-client grant on the postgres store is two autocommitted
# statements, each one round trip and one WAL flush: the grant (GRANTS_SQL,
# an upsert that issues the next token) and the release (CLEAR_GRANTS_SQL),
# both over one-element arrays. pgbench runs exactly those two statements,
# prepared, on one connection (-c1 -M prepared), on a scratch schema shaped
# like the store's: its rate is PostgreSQL's own floor for a grant, with no
# HTTP, no lock-server and no driver in the way. A lock-server on
# PostgreSQL is a leader (a second replica may join at any time), so each of
# its write transactions is BEGIN, the epoch fence, the write, the breach
# audit and COMMIT, pipelined into one round trip
# (services/lock-server/src/store/postgres.rs): the second pgbench script
# runs exactly that, in pipeline mode, against a leader row of epoch 1 (its
# release takes the grant's token by a subquery, since pgbench cannot
# \gset inside a pipeline). Today a leader's lone grant and
# release are each one statement instead, the fence and the audit as its
# common table expressions (services/lock-server/src/store/pg_fence.rs):
# the third pgbench script runs those two statements, prepared, on one
# connection. Each pair runs the three pgbench scripts for the window,
# then one `bench peer --ops grant --concurrency 1 --stores
# postgres` repeat (fencepost/postgres and etcd, their order seeded), with
# the pairs' seeds 27, 28, ...; then one window of scripts/grant-split.py
# against a lock-server (the same release build) on a scratch schema of the
# same cluster, started once before the first pair: it splits one grant's
# time into the client's round trip, the server's L4 answer and its store
# transaction, read from the server's own /metrics, to set beside
# pgbench's time per fenced statement. Writes OUT/pg-floor.csv (default
# OUT: data/peer-limits).
#
#   eval "$(scripts/pg-test-cluster.sh start)"
#   cargo build --release -p bench -p lock-server && scripts/pg-floor.sh [OUT] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/peer-limits}
pairs=${2:-3}
window=3
bin=${CARGO_TARGET_DIR:-target}/release/bench
server=${CARGO_TARGET_DIR:-target}/release/lock-server
for tool in pgbench psql etcd python3 curl; do
  command -v "$tool" >/dev/null || { echo "pg-floor: $tool is not on PATH" >&2; exit 1; }
done
for b in "$bin" "$server"; do
  [ -x "$b" ] || { echo "pg-floor: no $b (cargo build --release -p bench -p lock-server)" >&2; exit 1; }
done
url=${FENCEPOST_TEST_PG_URL:?pg-floor: set FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh start)}
case "$pairs" in '' | *[!0-9]*) echo "pg-floor: PAIRS must be a whole number, not '$pairs'" >&2; exit 2 ;; esac
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-pgfloor.XXXXXX")
server_pid=
cleanup() {
  [ -z "$server_pid" ] || { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; }
  psql -q "$url" -c 'DROP SCHEMA IF EXISTS fp_pg_floor_server CASCADE' >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql -q -v ON_ERROR_STOP=1 "$url" <<'SQL'
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS fp_pg_floor CASCADE;
CREATE SCHEMA fp_pg_floor;
CREATE TABLE fp_pg_floor.fp_locks (
    key            TEXT PRIMARY KEY,
    last_token     BIGINT NOT NULL,
    holder_session TEXT,
    holder_token   BIGINT,
    lease_ms       BIGINT
) WITH (fillfactor = 50);
CREATE INDEX ON fp_pg_floor.fp_locks (holder_session);
CREATE TABLE fp_pg_floor.fp_leader (id INT PRIMARY KEY, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);
INSERT INTO fp_pg_floor.fp_leader VALUES (1, 1, 'infinity');
CREATE TABLE fp_pg_floor.fp_epoch_breaches (writer_epoch BIGINT NOT NULL, row_epoch BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL);
SQL
# The store's two statements (services/lock-server/src/store/pg_batch.rs),
# over one-element arrays; the release clears the token the grant returned.
cat >"$work/grant.sql" <<'SQL'
INSERT INTO fp_locks (key, last_token, holder_session, holder_token, lease_ms)
SELECT g.key, 1, g.session, 1, g.lease FROM unnest(ARRAY['pg-floor']::text[], ARRAY['s-1']::text[], ARRAY[30000]::bigint[]) AS g(key, session, lease)
ON CONFLICT (key) DO UPDATE SET last_token = fp_locks.last_token + 1, holder_session = excluded.holder_session, holder_token = fp_locks.last_token + 1, lease_ms = excluded.lease_ms
RETURNING last_token AS token \gset
UPDATE fp_locks SET holder_token = NULL, lease_ms = NULL FROM unnest(ARRAY['pg-floor']::text[], ARRAY[:token]::bigint[]) AS c(key, token) WHERE fp_locks.key = c.key AND fp_locks.holder_token = c.token;
SQL
fence="BEGIN;
SELECT set_config('idle_in_transaction_session_timeout', '1250', true);
SELECT 1 / count(*)::int FROM (SELECT 1 FROM fp_leader WHERE id = 1 AND epoch = 1 AND expires_at > clock_timestamp() FOR KEY SHARE) AS fence;"
audit="INSERT INTO fp_epoch_breaches (writer_epoch, row_epoch, at) SELECT 1, epoch, clock_timestamp() FROM fp_leader WHERE id = 1 AND epoch <> 1;
COMMIT;"
cat >"$work/fenced.sql" <<SQL
\\startpipeline
$fence
INSERT INTO fp_locks (key, last_token, holder_session, holder_token, lease_ms)
SELECT g.key, 1, g.session, 1, g.lease FROM unnest(ARRAY['pg-floor']::text[], ARRAY['s-1']::text[], ARRAY[30000]::bigint[]) AS g(key, session, lease)
ON CONFLICT (key) DO UPDATE SET last_token = fp_locks.last_token + 1, holder_session = excluded.holder_session, holder_token = fp_locks.last_token + 1, lease_ms = excluded.lease_ms
RETURNING key, last_token;
$audit
\\endpipeline
\\startpipeline
$fence
UPDATE fp_locks SET holder_token = NULL, lease_ms = NULL FROM unnest(ARRAY['pg-floor']::text[], ARRAY[(SELECT last_token FROM fp_locks WHERE key = 'pg-floor')]::bigint[]) AS c(key, token) WHERE fp_locks.key = c.key AND fp_locks.holder_token = c.token;
$audit
\\endpipeline
SQL
# The lock-server the split measures, on its own schema of the same cluster.
psql -q "$url" -c 'SET client_min_messages = warning; DROP SCHEMA IF EXISTS fp_pg_floor_server CASCADE; CREATE SCHEMA fp_pg_floor_server' >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sep='?'; case "$url" in *\?*) sep='&' ;; esac
"$server" --store "$url${sep}options=-csearch_path%3Dfp_pg_floor_server" --listen "127.0.0.1:$port" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 200); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "pg-floor: the lock-server was not ready" >&2; cat "$work/server.log" >&2; exit 1; }
# The store's one-statement forms of the same grant and release for a
# leader of epoch 1 (pg_fence.rs: FENCED_GRANTS_SQL, FENCED_CLEAR_GRANTS_SQL).
fence_cte="WITH fence AS MATERIALIZED (SELECT 1 / count(*)::int AS ok FROM (SELECT 1 FROM fp_leader WHERE id = 1 AND epoch = 1 AND expires_at > clock_timestamp() FOR KEY SHARE) AS leader), audit AS (INSERT INTO fp_epoch_breaches (writer_epoch, row_epoch, at) SELECT 1, epoch, clock_timestamp() FROM fp_leader WHERE id = 1 AND epoch <> 1)"
cat >"$work/fenced-one.sql" <<SQL
$fence_cte INSERT INTO fp_locks (key, last_token, holder_session, holder_token, lease_ms) SELECT g.key, 1, g.session, 1, g.lease FROM unnest(ARRAY['pg-floor']::text[], ARRAY['s-1']::text[], ARRAY[30000]::bigint[]) AS g(key, session, lease) WHERE (SELECT ok FROM fence) = 1 ON CONFLICT (key) DO UPDATE SET last_token = fp_locks.last_token + 1, holder_session = excluded.holder_session, holder_token = fp_locks.last_token + 1, lease_ms = excluded.lease_ms RETURNING last_token AS token \\gset
$fence_cte UPDATE fp_locks SET holder_token = NULL, lease_ms = NULL FROM unnest(ARRAY['pg-floor']::text[], ARRAY[:token]::bigint[]) AS c(key, token) WHERE fp_locks.key = c.key AND fp_locks.holder_token = c.token AND (SELECT ok FROM fence) = 1;
SQL
echo "pair,pgbench_grants_per_s,pgbench_fenced_grants_per_s,pgbench_fenced_one_grants_per_s,fencepost_postgres_grants_per_s,etcd_grants_per_s,split_grants_per_s,split_client_l4_ms,split_server_l4_ms,split_store_commit_ms" >"$work/pg-floor.csv"
for pair in $(seq "$pairs"); do
  seed=$((26 + pair))
  PGOPTIONS='-c search_path=fp_pg_floor' pgbench -n -M prepared -c 1 -j 1 -T "$window" -f "$work/grant.sql" "$url" \
    >"$work/pgbench-$pair.log" 2>&1 || { cat "$work/pgbench-$pair.log" >&2; exit 1; }
  PGOPTIONS='-c search_path=fp_pg_floor' pgbench -n -M prepared -c 1 -j 1 -T "$window" -f "$work/fenced.sql" "$url" \
    >"$work/fenced-$pair.log" 2>&1 || { cat "$work/fenced-$pair.log" >&2; exit 1; }
  PGOPTIONS='-c search_path=fp_pg_floor' pgbench -n -M prepared -c 1 -j 1 -T "$window" -f "$work/fenced-one.sql" "$url" \
    >"$work/fenced-one-$pair.log" 2>&1 || { cat "$work/fenced-one-$pair.log" >&2; exit 1; }
  "$bin" peer --ops grant --concurrency 1 --stores postgres --repeat 1 --duration "${window}s" --warmup 1s \
    --seed "$seed" --out "$work/peer-$pair" >"$work/peer-$pair.log" 2>&1 ||
    { cat "$work/peer-$pair.log" >&2; echo "pg-floor: bench peer failed" >&2; exit 1; }
  python3 scripts/grant-split.py 127.0.0.1 "$port" "$window" >"$work/split-$pair.json" ||
    { cat "$work/server.log" >&2; echo "pg-floor: grant-split failed" >&2; exit 1; }
  python3 - "$pair" "$work/pgbench-$pair.log" "$work/fenced-$pair.log" "$work/fenced-one-$pair.log" "$work/peer-$pair.log" "$work/split-$pair.json" >>"$work/pg-floor.csv" <<'PY'
import json, re, sys
pair, pgb, fenced, fenced_one, peer, split = sys.argv[1:]
def tps(path):
    text = open(path).read()
    m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", text)
    if not m or "aborted" in text or not re.search(r"number of failed transactions: 0 ", text):
        sys.exit(f"pg-floor: pair {pair}: pgbench did not run cleanly:\n{text}")
    return float(m.group(1))
rates = dict(re.findall(r"\sgrant\s+c=1\s+(\S+)\s+([0-9]+) ops/s", open(peer).read()))
if "fencepost/postgres" not in rates or "etcd/bbolt" not in rates:
    sys.exit(f"pg-floor: pair {pair}: bench peer gave no grant rate ({sorted(rates)})")
sp = json.load(open(split))
if sp["store_tx_per_grant"] != 2:
    sys.exit(f"pg-floor: pair {pair}: {sp['store_tx_per_grant']} store transactions per grant, not 2 (L4 and L6)")
print(f"{pair},{tps(pgb):.1f},{tps(fenced):.1f},{tps(fenced_one):.1f},{rates['fencepost/postgres']},{rates['etcd/bbolt']},"
      f"{sp['grants_per_s']},{sp['client_l4_ms']},{sp['server_l4_ms']},{sp['store_commit_ms']}")
PY
  tail -n 1 "$work/pg-floor.csv" >&2
done
breaches=$(psql -qtA "$url" -c 'SELECT count(*) FROM fp_pg_floor.fp_epoch_breaches')
[ "$breaches" = 0 ] || { echo "pg-floor: the fenced script recorded $breaches epoch breaches" >&2; exit 1; }
psql -q "$url" -c 'DROP SCHEMA fp_pg_floor CASCADE' >/dev/null 2>&1
{
  echo "# scripts/pg-floor.sh: $pairs pairs of ${window} s windows; pgbench -c1 -M prepared on the store's grant and release statements (autocommitted; as the leader's fenced, pipelined transactions; as the leader's fenced one-statement forms), then bench peer --ops grant --concurrency 1 --stores postgres --repeat 1 --duration ${window}s --warmup 1s (seeds 27..$((26 + pairs))), then scripts/grant-split.py for ${window} s on a lock-server on the same cluster (the split_ columns: means over the window, ms), release build"
  cat "$work/pg-floor.csv"
} >"$out/pg-floor.csv"
echo "pg-floor: wrote $out/pg-floor.csv"
