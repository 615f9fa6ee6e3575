#!/usr/bin/env bash
# Where the CPU of durable grants goes at 64 clients, for the
# target the ceiling table reports as not met (grants/s within 2× of the
# fsync ceiling × grants per flush). Runs one `bench peer --ops grant` at 64
# clients (release build; the postgres store too when FENCEPOST_TEST_PG_URL
# is set) under a system-wide perf profile (software clock: this machine
# has no hardware counters), and writes OUT/profile-grants.txt: the share
# of every process (the driver, the lock-server, PostgreSQL's backends,
# etcd, the kernel's threads), then the top symbols of the lock-server and
# of PostgreSQL. Default OUT: data/peer-limits.
#
#   cargo build --release -p bench -p lock-server && scripts/profile-grants.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/peer-limits}
bin=${CARGO_TARGET_DIR:-target}/release/bench
for tool in perf etcd; do
  command -v "$tool" >/dev/null || { echo "profile-grants: $tool is not on PATH" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "profile-grants: no $bin (cargo build --release -p bench -p lock-server)" >&2; exit 1; }
stores=sqlite
[ -n "${FENCEPOST_TEST_PG_URL:-}" ] && stores=sqlite,postgres
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-grants.XXXXXX")
trap 'rm -rf "$work"' EXIT
run=("$bin" peer --ops grant --concurrency 64 --stores "$stores" --repeat 1 --duration 6s --warmup 1s --seed 27 --out "$work/peer")
perf record -q -a -F 499 -o "$work/grants.data" -- "${run[@]}" >"$work/peer.log" 2>&1 ||
  { cat "$work/peer.log" >&2; echo "profile-grants: the profiled run failed" >&2; exit 1; }
# Threads are named by their runtime (tokio-rt-worker on both sides of the
# socket), so samples are put to their process by the exec name of its
# main thread, from perf's task events.
perf script -i "$work/grants.data" --show-task-events -F pid,tid,comm,ip,sym,dso 2>/dev/null >"$work/samples.txt"
python3 - "$work/samples.txt" "$stores" "$work/peer.log" >"$out/profile-grants.txt" <<'PY'
import collections, re, sys
samples, stores, log = sys.argv[1], sys.argv[2], sys.argv[3]
name = {}
by_proc = collections.Counter()
by_sym = collections.defaultdict(collections.Counter)
by_dso = collections.defaultdict(collections.Counter)
rows = []
for line in open(samples, errors="replace"):
    m = re.match(r"\s*(\S.*?)\s+(\d+)/(\d+)\s+(.*)$", line.rstrip("\n"))
    if not m:
        continue
    comm, pid, tid, rest = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    ev = re.search(r"PERF_RECORD_COMM(?: exec)?: (.*):(\d+)/(\d+)", rest)
    if ev:
        if int(ev.group(2)) == int(ev.group(3)):
            name[int(ev.group(2))] = ev.group(1)
        continue
    if rest.startswith("PERF_RECORD"):
        continue
    sm = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", rest)
    sym, dso = (sm.group(1), sm.group(2).rsplit("/", 1)[-1]) if sm else ("[unknown]", "[unknown]")
    rows.append((pid, comm, sym, dso))
total = len(rows)
def proc(pid, comm):
    n = name.get(pid, comm)
    return "postgres" if n.startswith("postgres") else n
for pid, comm, sym, dso in rows:
    p = proc(pid, comm)
    by_proc[p] += 1
    by_sym[p][(dso, sym)] += 1
    by_dso[p][dso] += 1
print(f"# bench peer --ops grant --concurrency 64 --stores {stores} --repeat 1 --duration 6s --warmup 1s --seed 27,")
print(f"# profiled system-wide (perf -a, software clock, 499 Hz): {total} samples over the whole run, etcd's windows included")
for l in open(log, errors="replace"):
    if re.search(r"\sgrant\s+c=64\s", l):
        print("# " + l.strip())
print()
print("## share of all samples by process")
for p, c in by_proc.most_common(12):
    print(f"{100 * c / total:7.2f}%  {p}")
for p in ("lock-server", "postgres", "etcd", "bench"):
    if not by_proc[p]:
        continue
    print()
    print(f"## {p}: by shared object (share of all samples)")
    for d, c in by_dso[p].most_common(5):
        print(f"{100 * c / total:7.2f}%  {d}")
    print()
    print(f"## {p}: top symbols (share of all samples)")
    for (d, s), c in by_sym[p].most_common(25):
        print(f"{100 * c / total:7.2f}%  {d:<20.20} {s[:120]}")
PY
echo "profile-grants: wrote $out/profile-grants.txt"
