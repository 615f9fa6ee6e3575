#!/usr/bin/env bash
# An interleaved A/B of two lock-server builds on one client's
# durable grant on PostgreSQL, kept or dropped on what it shows. Both
# servers run at once, each on its own scratch schema of the database at
# FENCEPOST_TEST_PG_URL; scripts/grant-split.py drives one client's L4 + L6
# loop on A then B (B then A on even pairs, so neither always runs first)
# for PAIRS pairs of 3 s windows. Writes OUT/FILE (default ab-grants.csv):
# per pair and build, grants/s, the client's L4 and L6 round trips, the
# server's L4 answer and its store transaction (means, ms), and prints B ÷ A
# of grants/s and of the store transaction as median (min–max). A_LABEL and
# B_LABEL name the builds in the CSV's first line (default: the file names;
# the CSV never records a path of the machine).
#
#   eval "$(scripts/pg-test-cluster.sh start)"
#   scripts/ab-grants.sh A_BIN B_BIN OUT [PAIRS] [FILE]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_BIN B_BIN OUT [PAIRS] [FILE]" >&2; exit 2; }
a_bin=$1 b_bin=$2 out=$3 pairs=${4:-5} file=${5:-ab-grants.csv}
case "$pairs" in '' | *[!0-9]* | 0) echo "ab-grants: PAIRS must be a whole number ≥ 1, not '$pairs'" >&2; exit 2 ;; esac
url=${FENCEPOST_TEST_PG_URL:?ab-grants: set FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh start)}
for tool in psql curl python3; do
  command -v "$tool" >/dev/null || { echo "ab-grants: $tool is not on PATH" >&2; exit 1; }
done
for b in "$a_bin" "$b_bin"; do
  [ -x "$b" ] || { echo "ab-grants: $b is not an executable lock-server" >&2; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-ab-grants.XXXXXX")
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  psql -q "$url" -c 'DROP SCHEMA IF EXISTS fp_ab_grants_a CASCADE; DROP SCHEMA IF EXISTS fp_ab_grants_b CASCADE' >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sep='?'; case "$url" in *\?*) sep='&' ;; esac
start() {  # NAME BIN -> writes $work/NAME.port
  local port schema=fp_ab_grants_$1
  psql -q "$url" -c "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema" >/dev/null
  port=$(free_port)
  "$2" --store "$url${sep}options=-csearch_path%3D$schema" --listen "127.0.0.1:$port" >"$work/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null ||
    { echo "ab-grants: $2 was not ready on port $port" >&2; cat "$work/$1.log" >&2; exit 1; }
  echo "$port" >"$work/$1.port"
}
start a "$a_bin"
start b "$b_bin"
echo "# A: ${A_LABEL:-$(basename "$a_bin")}; B: ${B_LABEL:-$(basename "$b_bin")}; PostgreSQL store, one client (scripts/grant-split.py: L4 + L6 on one key), 3 s per window after 1 s warm-up, $pairs pairs, A first on odd pairs" >"$work/ab.csv"
echo "pair,build,grants_per_s,client_l4_ms,client_l6_ms,server_l4_ms,store_commit_ms,store_tx_per_grant" >>"$work/ab.csv"
for pair in $(seq "$pairs"); do
  order="a b"; [ $((pair % 2)) = 0 ] && order="b a"
  for name in $order; do
    python3 "$here/grant-split.py" 127.0.0.1 "$(cat "$work/$name.port")" 3 >"$work/split.json" ||
      { cat "$work/$name.log" >&2; exit 1; }
    python3 - "$pair" "$name" "$work/split.json" >>"$work/ab.csv" <<'PY'
import json, sys
pair, name, path = sys.argv[1:]
r = json.load(open(path))
cols = ["grants_per_s", "client_l4_ms", "client_l6_ms", "server_l4_ms", "store_commit_ms", "store_tx_per_grant"]
print(",".join([pair, name] + [str(r[c]) for c in cols]))
PY
    tail -n 1 "$work/ab.csv" >&2
  done
done
cp "$work/ab.csv" "$out/$file"
python3 - "$out/$file" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
by = {}
for r in rows:
    by.setdefault(r["pair"], {})[r["build"]] = r
def ratio(col):
    rs = sorted(float(p["b"][col]) / float(p["a"][col]) for p in by.values())
    return f"{statistics.median(rs):.3f} ({rs[0]:.3f}–{rs[-1]:.3f})"
print(f"ab-grants: B ÷ A grants/s {ratio('grants_per_s')}; store transaction {ratio('store_commit_ms')}; {len(by)} pairs; wrote {sys.argv[1]}")
PY
