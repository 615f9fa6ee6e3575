#!/usr/bin/env bash
# The heartbeat (L2) throughput and latency, wrk -t1 -c16, on two release
# lock-servers (memory store): without tokens, and with --auth-tokens (a file
# of 3 tokens, the caller's last). Three interleaved pairs of 4 s; prints
# requests/s, p50 and p99 of each run (docs/security.md, "What a check costs").
#
#   cargo build --release -p lock-server && scripts/auth-heartbeat-cost.sh
set -euo pipefail
bin=${CARGO_TARGET_DIR:-target}/release/lock-server
[ -x "$bin" ] || { echo "auth-heartbeat-cost: no $bin (cargo build --release -p lock-server)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-auth-wrk.XXXXXX")
secret=$("$bin" token new --name w --role client 2>>"$work/tokens")
"$bin" token new --name a --role admin >/dev/null 2>>"$work/tokens"
"$bin" token new --name b --role client >/dev/null 2>>"$work/tokens"
# the caller's line last: every line is compared anyway
tac "$work/tokens" > "$work/t2"; mv "$work/t2" "$work/tokens"
start() { # LOG-PREFIX ARGS...: a lock-server on a free port; its pid
  local log=$1; shift
  "$bin" --store memory: --listen 127.0.0.1:0 "$@" >"$log.out" 2>"$log.err" &
  echo $!
}
p1=$(start "$work/plain"); p2=$(start "$work/auth" --auth-tokens "$work/tokens")
trap 'kill $p1 $p2 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do [ -s "$work/plain.out" ] && [ -s "$work/auth.out" ] && break; sleep 0.05; done
u1=$(sed 's/listening on //' "$work/plain.out"); u2=$(sed 's/listening on //' "$work/auth.out")
open() { curl -fs -XPOST "$1/v1/sessions" -H 'content-type: application/json' ${2:+-H "Authorization: Bearer $2"} \
  -d '{"owner_id":"wrk","ttl_ms":600000}' | python3 -c 'import sys,json; print(json.load(sys.stdin)["session_id"])'; }
s1=$(open "$u1"); s2=$(open "$u2" "$secret")
cat >"$work/plain.lua" <<LUA
wrk.method = "POST"; wrk.body = "{}"; wrk.headers["Content-Type"] = "application/json"
wrk.path = "/v1/sessions/$s1/heartbeat"
LUA
cat >"$work/auth.lua" <<LUA
wrk.method = "POST"; wrk.body = "{}"; wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $secret"
wrk.path = "/v1/sessions/$s2/heartbeat"
LUA
run() { wrk -t1 -c16 -d4s --latency -s "$work/$1.lua" "$2" | awk -v m="$1" '
  /Requests\/sec/ {rps=$2} / 50%/ {p50=$2} / 99%/ {p99=$2} /Non-2xx/ {bad=$NF}
  END {printf "%s rps=%s p50=%s p99=%s non2xx=%s\n", m, rps, p50, p99, bad+0}'; }
for i in 1 2 3; do run plain "$u1"; run auth "$u2"; done
