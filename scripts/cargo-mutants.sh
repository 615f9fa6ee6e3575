#!/usr/bin/env bash
# Mutation testing of the safety core with cargo-mutants: it changes the
# code (a `>` to `>=`, a function body to a constant, ...) one mutant at a
# time and runs the tests; a mutant the tests do not notice is "missed".
# The scope (which files, and which functions in them are not safety) is
# .cargo/mutants.toml; each crate's mutants run against that crate's own
# tests only (the per-crate test selection is below), one at a time (in
# place: one build directory, so one mutant at a time).
#
#   scripts/cargo-mutants.sh                  # the whole scope; rewrites the
#                                             # table in docs/mutation-testing.md
#   scripts/cargo-mutants.sh --in-diff [BASE] # only what changed in the scoped
#                                             # files since BASE (default: the
#                                             # commit the table was recorded at,
#                                             # or else the last that changed it)
#   ... --in-place                            # mutate this tree rather than a copy
#                                             # (CI: a fresh clone nobody edits)
#   ... --only api,sdk                        # these crates only (api, sdk,
#                                             # lock-server); the table keeps the
#                                             # others' latest results
#   ... --iterate                             # only the mutants the last run did
#                                             # not catch (after adding tests)
#   scripts/cargo-mutants.sh --report         # rewrite the table from the latest
#                                             # results, running nothing
#
# Exit status: 0 when every viable mutant is caught or makes the tests time
# out (or, with --in-diff, when no scoped file changed: it says so and stops
# at once), 1 when a mutant is missed, 2 for a bad argument or a missing
# cargo-mutants (`cargo install --locked cargo-mutants`).
#
# Without --in-place the tree (tracked files, uncommitted edits included) is
# copied to a scratch directory and built in a target directory of its own,
# TARGET/mutants-cargo (FENCEPOST_CARGO_MUTANTS_TARGET_DIR to move it): the
# first build there is a whole one, later ones rebuild only what a mutant
# touched. --in-place builds in the tree's own target directory and restores
# each file after its mutant; do not edit the tree while it runs. Each
# crate's results stay in TARGET/mutants-out/CRATE/mutants.out
# (FENCEPOST_CARGO_MUTANTS_OUT to move it); the table is written from them.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
doc=docs/mutation-testing.md

mode=full
base=
in_place=0
only=
iterate=0
while [ $# -gt 0 ]; do
  case "$1" in
    --in-diff)
      mode=diff
      if [ $# -gt 1 ] && [ "${2#--}" = "$2" ]; then base=$2; shift; fi
      ;;
    --in-place) in_place=1 ;;
    --iterate) iterate=1 ;;
    --report) mode=report ;;
    --only)
      [ $# -gt 1 ] || { echo "cargo-mutants.sh: --only needs crates, e.g. --only api,sdk" >&2; exit 2; }
      only=$2; shift
      ;;
    -h | --help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cargo-mutants.sh: unknown argument '$1' (expected --in-diff [BASE], --in-place, --only CRATES, --iterate or --report)" >&2; exit 2 ;;
  esac
  shift
done

# Whether cargo-mutants is here is asked once the work is known: an
# --in-diff run with no scoped change needs none.
need_cargo_mutants() {
  if ! cargo mutants --version >/dev/null 2>&1; then
    echo "cargo-mutants.sh: cargo-mutants is not installed; cargo install --locked cargo-mutants" >&2
    exit 2
  fi
}

# One group per crate: the package, its scoped source files (as in
# .cargo/mutants.toml), and the tests its mutants run. The slow tests that
# start processes or need PostgreSQL are left out; each group's baseline
# (the unmutated tree) must pass these first.
groups=(api sdk lock-server)
declare -A pkg files tests
pkg[api]=fencepost-api
files[api]="api/src/grace.rs api/src/clock.rs"
tests[api]="--lib"
pkg[sdk]=fencepost-sdk
files[sdk]="sdk/src/lease.rs sdk/src/clock.rs sdk/src/session/handle.rs sdk/src/session/api.rs"
tests[sdk]="--lib --test it -- --skip auth:: --skip real_server:: --skip replicas:: --skip tls::"
pkg[lock-server]=lock-server
files[lock-server]="services/lock-server/src/core/table.rs services/lock-server/src/core/expiry.rs services/lock-server/src/core/model.rs services/lock-server/src/core/limits.rs services/lock-server/src/store/memory.rs services/lock-server/src/store/sqlite.rs services/lock-server/src/store/sql.rs services/lock-server/src/store/lock_store.rs"
tests[lock-server]="--lib --test it -- table_rules:: proptest_table:: proptest_router:: semantics:: boundaries:: store_suite:: cancel:: hardening:: auth:: auth_persist:: metrics:: store::"

if [ -n "$only" ]; then
  for g in ${only//,/ }; do
    [ -n "${pkg[$g]:-}" ] || { echo "cargo-mutants.sh: --only '$g': expected api, sdk or lock-server" >&2; exit 2; }
  done
  read -r -a groups <<< "${only//,/ }"
fi

# The groups to run, and (--in-diff) the diff each is limited to.
run=()
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-cargo-mutants.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
if [ "$mode" = diff ]; then
  if [ -z "$base" ]; then
    base=$(sed -n 's/^Recorded at commit `\([0-9a-f]*\)`.*/\1/p' "$doc" | head -1)
    # A recorded commit that is not in this history (the branch it was
    # recorded on was squashed or rebased): the last commit that changed
    # the table stands for it.
    if [ -z "$base" ] || ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
      base=$(git log -1 --format=%H -- "$doc")
    fi
    [ -n "$base" ] || { echo "cargo-mutants.sh: $doc records no run; give a BASE" >&2; exit 2; }
  fi
  git rev-parse --verify -q "$base^{commit}" >/dev/null \
    || { echo "cargo-mutants.sh: --in-diff base '$base' is not a commit here" >&2; exit 2; }
  for g in "${groups[@]}"; do
    # shellcheck disable=SC2086  # the file list is words
    git diff "$base" -- ${files[$g]} > "$scratch/$g.diff"
    [ -s "$scratch/$g.diff" ] && run+=("$g")
  done
  if [ "${#run[@]}" -eq 0 ]; then
    echo "cargo-mutants: no change in the scoped files since $(git rev-parse --short "$base"); nothing to mutate"
    exit 0
  fi
  echo "cargo-mutants: scoped files changed since $(git rev-parse --short "$base") in: ${run[*]}"
elif [ "$mode" = full ]; then
  run=("${groups[@]}")
fi
[ "$mode" = report ] || need_cargo_mutants

target=${CARGO_TARGET_DIR:-$root/target}
out=${FENCEPOST_CARGO_MUTANTS_OUT:-$target/mutants-out}
if [ "$mode" = report ]; then
  tree=
elif [ "$in_place" = 1 ]; then
  tree=$root
  export CARGO_TARGET_DIR=$target
else
  # Its own target directory: the copy's crates hash like the tree's (cargo
  # hashes a workspace's crates by their path relative to the workspace), so
  # building into the tree's would overwrite the tree's artifacts. The copy
  # lives in it, at the same path every run (tar keeps the files' times), so
  # a later run rebuilds only what changed.
  export CARGO_TARGET_DIR=${FENCEPOST_CARGO_MUTANTS_TARGET_DIR:-$target/mutants-cargo}
  tree=$CARGO_TARGET_DIR/tree
  rm -rf "$tree"
  mkdir -p "$tree"
  git ls-files -z -- . ':!:data' | tar -cf - --null -T - | tar -xf - -C "$tree"
fi
# A property test that fails needs no shrinking here: the failure is the answer.
export FP_PROPTEST_MAX_SHRINK_ITERS=0 PROPTEST_MAX_SHRINK_ITERS=0
failed=0
for g in "${run[@]+"${run[@]}"}"; do
  args=(mutants --in-place --package "${pkg[$g]}" --output "$out/$g" --no-times --colors never)
  if [ "$iterate" = 1 ] && [ "$mode" = full ]; then
    args+=(--iterate)
    # cargo-mutants carries the unviable ones forward as "previously caught";
    # keep their names, so that the table still counts them as unviable.
    acc=$out/$g/unviable-before.txt
    cat "$out/$g/mutants.out/unviable.txt" "$acc" 2>/dev/null | sort -u > "$acc.new" || true
    mv "$acc.new" "$acc"
  else
    rm -rf "${out:?}/$g"
  fi
  mkdir -p "$out/$g"
  [ "$mode" = diff ] && args+=(--in-diff "$scratch/$g.diff")
  echo "== cargo mutants: ${pkg[$g]} (tests: ${tests[$g]})"
  rc=0
  # shellcheck disable=SC2086  # the test arguments are words
  (cd "$tree" && cargo "${args[@]}" -- ${tests[$g]}) || rc=$?
  # 0: all caught; 2: missed; 3: timeouts; 4: the unmutated tree failed.
  # A timeout is a mutant the tests noticed (they hung): only a missed one fails.
  case "$rc" in
    0 | 3) ;;
    2) failed=1 ;;
    *) echo "cargo-mutants.sh: ${pkg[$g]}: cargo mutants exited $rc (1: a usage error or an interrupted run; 4: the unmutated tree fails its tests)" >&2; exit 1 ;;
  esac
done

if [ "$mode" != diff ]; then
  python3 - "$root/$doc" "$out" "$(git rev-parse HEAD)" api sdk lock-server <<'EOF'
import sys
from pathlib import Path

doc, out, commit, groups = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
KINDS = ["caught", "missed", "unviable", "timeout"]
per_file: dict[str, dict[str, int]] = {}
missed: list[str] = []
def lines(p: Path) -> list[str]:
    return p.read_text().splitlines() if p.exists() else []

for g in groups:
    d = out / g / "mutants.out"
    before = set(lines(out / g / "unviable-before.txt"))
    found = [(k, line) for k in KINDS for line in lines(d / f"{k}.txt")]
    found += [("unviable" if line in before else "caught", line)
              for line in lines(d / "previously_caught.txt")]
    for kind, line in found:
        f = line.split(":", 1)[0]
        per_file.setdefault(f, dict.fromkeys(KINDS, 0))[kind] += 1
        if kind in ("missed", "timeout"):
            missed.append(f"{line} ({kind})")
# A mutant that makes the tests hang (timeout) is noticed too: the suite
# does not pass. Only a missed one goes unnoticed.
rows = ["| file | caught | timeout | missed | unviable | noticed (caught or timeout) of viable |",
        "| --- | ---: | ---: | ---: | ---: | ---: |"]
tot = dict.fromkeys(KINDS, 0)
def pct(c):
    viable = c["caught"] + c["missed"] + c["timeout"]
    return f"{100 * (c['caught'] + c['timeout']) / viable:.0f} %" if viable else "–"
for f in sorted(per_file):
    c = per_file[f]
    for k in KINDS:
        tot[k] += c[k]
    rows.append(f"| `{f}` | {c['caught']} | {c['timeout']} | {c['missed']} | {c['unviable']} | {pct(c)} |")
rows.append(f"| **all** | {tot['caught']} | {tot['timeout']} | {tot['missed']} | {tot['unviable']} | {pct(tot)} |")
body = [f"Recorded at commit `{commit}` by `scripts/cargo-mutants.sh`.", "", *rows, ""]
body += ["Missed and timed-out mutants:", ""] + ([f"- `{m}`" for m in missed] or ["- none"]) + [""]
text = doc.read_text()
start = "<!-- generated: mutation-baseline (scripts/cargo-mutants.sh) -->\n"
end = "<!-- end generated: mutation-baseline -->"
i, j = text.index(start) + len(start), text.index(end)
doc.write_text(text[:i] + "\n".join(body) + text[j:])
print(f"cargo-mutants: {tot['caught']} caught, {tot['missed']} missed, "
      f"{tot['unviable']} unviable, {tot['timeout']} timeout; table in {doc.name}")
EOF
fi
exit "$failed"
