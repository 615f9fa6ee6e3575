#!/usr/bin/env bash
# The heartbeat against its floor with wrk, and where the
# lock-server's CPU goes on each (perf, software clock: this machine has no
# hardware counters). One release lock-server on the memory store, one
# session; wrk (1 thread, 16 connections) on L2 and on GET /healthz in PAIRS
# (default 5) interleaved pairs of 4 s, the heartbeat first on odd pairs and
# second on even ones, then a 4 s perf profile of each under the same
# load. Writes OUT/wrk-pairs.csv, OUT/profile-heartbeat.txt and
# OUT/profile-healthz.txt (default OUT: data/peer-limits).
#
#   cargo build --release -p lock-server && scripts/profile-heartbeat.sh [OUT] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/peer-limits}
pairs=${2:-5}
case "$pairs" in '' | *[!0-9]* | 0) echo "profile-heartbeat: PAIRS must be a whole number ≥ 1, not '$pairs'" >&2; exit 2 ;; esac
bin=${CARGO_TARGET_DIR:-target}/release/lock-server
for tool in wrk perf curl python3; do
  command -v "$tool" >/dev/null || { echo "profile-heartbeat: $tool is not on PATH" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "profile-heartbeat: no $bin (cargo build --release -p lock-server)" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-profile.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" --store memory: --listen "127.0.0.1:$port" >"$work/lock-server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 100); do curl -fs "$base/healthz" >/dev/null && break; sleep 0.05; done
sid=$(curl -fs -XPOST "$base/v1/sessions" -H 'content-type: application/json' \
  -d '{"owner_id":"wrk","ttl_ms":600000}' | python3 -c 'import sys,json; print(json.load(sys.stdin)["session_id"])')
# L2 as the SDK sends it: no body (C1 allows an empty one).
cat >"$work/hb.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Length"] = "0"
wrk.path = "/v1/sessions/$sid/heartbeat"
LUA
rate() { awk '/Requests\/sec/ {print $2}'; }
hb() { wrk -t1 -c16 -d"$1" -s "$work/hb.lua" "$base"; }
hz() { wrk -t1 -c16 -d"$1" "$base/healthz"; }
echo "pair,heartbeat_per_s,healthz_per_s,ratio" >"$out/wrk-pairs.csv"
for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 1 ]; then
    a=$(hb 4s | rate); b=$(hz 4s | rate)
  else
    b=$(hz 4s | rate); a=$(hb 4s | rate)
  fi
  echo "$i,$a,$b,$(python3 -c "print(f'{$a/$b:.3f}')")" | tee -a "$out/wrk-pairs.csv"
done
profile() {  # NAME LOADFN
  # head closes the report's pipe early: not a failure of the profile.
  set +o pipefail
  "$2" 6s >"$work/$1.wrk" &
  local load=$!
  sleep 1
  perf record -q -F 1999 -g -p "$pid" -o "$work/$1.data" -- sleep 4 2>/dev/null
  wait "$load"
  {
    echo "# lock-server under wrk -t1 -c16 ($1): $(rate <"$work/$1.wrk") requests/s while profiled"
    perf report -i "$work/$1.data" --no-children --sort dso -g none --stdio 2>/dev/null | grep "%" | head -5
    echo
    perf report -i "$work/$1.data" --no-children --sort dso,symbol -g none --stdio 2>/dev/null |
      grep '%' | head -50 | cut -c1-160 | sed 's/[ -]*$//'
  } >"$out/profile-$1.txt"
  set -o pipefail
}
profile heartbeat hb
profile healthz hz
echo "profile-heartbeat: wrote $out/wrk-pairs.csv, $out/profile-heartbeat.txt, $out/profile-healthz.txt"
