#!/usr/bin/env bash
# An interleaved A/B of two lock-server builds on the heartbeat
# path, kept or dropped on what it shows. Both servers run at once on the
# memory store, one session each; wrk (1 thread, 16 connections) drives L2
# and GET /healthz on A then B (B then A on odd pairs, so neither always
# runs first) for PAIRS pairs of 4 s. Writes OUT/ab-heartbeat.csv: per pair
# and build, heartbeats/s, healthz/s and their ratio, and prints B ÷ A of
# heartbeats/s and of heartbeat ÷ healthz as median (min–max). The
# heartbeat's body is `{}` on both sides unless A_BODY or B_BODY says
# otherwise (`A_BODY= ...` sends none, as the SDK does).
# A_LABEL and B_LABEL name the builds in the CSV (default: the file names;
# the CSV never records a path of the machine).
#
#   [A_BODY=…] [B_BODY=…] scripts/ab-heartbeat.sh A_BIN B_BIN OUT [PAIRS]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 A_BIN B_BIN OUT [PAIRS]" >&2; exit 2; }
a_bin=$1 b_bin=$2 out=$3 pairs=${4:-5}
default_body={}
for tool in wrk curl python3; do
  command -v "$tool" >/dev/null || { echo "ab-heartbeat: $tool is not on PATH" >&2; exit 1; }
done
for b in "$a_bin" "$b_bin"; do
  [ -x "$b" ] || { echo "ab-heartbeat: $b is not an executable lock-server" >&2; exit 1; }
done
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-ab.XXXXXX")
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() {  # NAME BIN BODY -> writes $work/NAME.base and NAME.lua
  local port base sid
  port=$(free_port)
  "$2" --store memory: --listen "127.0.0.1:$port" >"$work/$1.log" 2>&1 &
  pids+=($!)
  base="http://127.0.0.1:$port"
  for _ in $(seq 200); do curl -fs "$base/healthz" >/dev/null && break; sleep 0.05; done
  curl -fs "$base/healthz" >/dev/null || { echo "ab-heartbeat: $2 did not answer on $base" >&2; cat "$work/$1.log" >&2; exit 1; }
  sid=$(curl -fs -XPOST "$base/v1/sessions" -H 'content-type: application/json' \
    -d '{"owner_id":"wrk","ttl_ms":600000}' | python3 -c 'import sys,json; print(json.load(sys.stdin)["session_id"])')
  echo "$base" >"$work/$1.base"
  {
    echo 'wrk.method = "POST"'
    if [ -n "$3" ]; then
      echo "wrk.body = '$3'"
      echo 'wrk.headers["Content-Type"] = "application/json"'
    else
      echo 'wrk.headers["Content-Length"] = "0"'
    fi
    echo "wrk.path = \"/v1/sessions/$sid/heartbeat\""
  } >"$work/$1.lua"
}
start a "$a_bin" "${A_BODY-$default_body}"
start b "$b_bin" "${B_BODY-$default_body}"
rate() { awk '/Requests\/sec/ {print $2}'; }
measure() {  # NAME -> "hb hz"
  local base hb hz
  base=$(cat "$work/$1.base")
  hb=$(wrk -t1 -c16 -d4s -s "$work/$1.lua" "$base" | rate)
  hz=$(wrk -t1 -c16 -d4s "$base/healthz" | rate)
  echo "$hb $hz"
}
csv="$out/ab-heartbeat.csv"
a_label=${A_LABEL:-$(basename "$a_bin")} b_label=${B_LABEL:-$(basename "$b_bin")}
echo "# A: $a_label, heartbeat body '${A_BODY-$default_body}'; B: $b_label, heartbeat body '${B_BODY-$default_body}'; wrk -t1 -c16, 4 s per load, $pairs pairs, A first on odd pairs" >"$csv"
echo "pair,build,heartbeat_per_s,healthz_per_s,heartbeat_over_healthz" >>"$csv"
for i in $(seq "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then order="a b"; else order="b a"; fi
  for n in $order; do
    read -r hb hz < <(measure "$n")
    echo "$i,$n,$hb,$hz,$(python3 -c "print(f'{$hb/$hz:.3f}')")" | tee -a "$csv"
  done
done
python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith('#')))
by = {}
for r in rows:
    by.setdefault(r["pair"], {})[r["build"]] = r
def show(name, f):
    v = sorted(f(p["b"]) / f(p["a"]) for p in by.values())
    print(f"B ÷ A, {name}: median {statistics.median(v):.3f} ({v[0]:.3f}–{v[-1]:.3f}) over {len(v)} pairs")
show("heartbeats/s", lambda r: float(r["heartbeat_per_s"]))
show("heartbeat ÷ healthz", lambda r: float(r["heartbeat_over_healthz"]))
for b in "ab":
    v = sorted(float(p[b]["heartbeat_over_healthz"]) for p in by.values())
    print(f"{b.upper()}: heartbeat ÷ healthz median {statistics.median(v):.3f} ({v[0]:.3f}–{v[-1]:.3f})")
PY
