#!/usr/bin/env bash
# The mutation suite: each patch in experiments/mutations/
# re-creates a known way to break safety; this applies it to a scratch copy
# of the tree, builds that copy's lock-server, rail-stub and experiments, and
# runs the experiment its header names, which must catch it: exit 1, with a
# line matching the header's `expect:` (an extended regular expression) in
# its output. A patch that no longer applies, a
# build that fails, or a mutant that gets through fails the suite (exit 1).
#
#   scripts/mutations.sh                 # every patch
#   scripts/mutations.sh token-reuse     # one, by name
#
# A patch file: free text, then `run: <experiments subcommand and flags>`
# and `expect: <text>` lines, then a unified diff against the tree.
# The replicated runs need FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh
# start); PostgreSQL is never restarted here. The copies build into a
# target directory of their own, TARGET/mutants (FENCEPOST_MUTANTS_TARGET_DIR
# to move it): the first build there is a whole one, the later ones rebuild
# only what a patch touched. Each mutant's binaries are copied out at once.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/fencepost-mutations.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# A target directory of the mutants' own: cargo hashes a workspace's crates
# by their path relative to the workspace, so a copy building into the
# tree's target directory would overwrite the tree's artifacts with the
# mutant's and leave them looking fresh to the tree.
mtarget=${FENCEPOST_MUTANTS_TARGET_DIR:-$target/mutants}

patches=()
if [ $# -gt 0 ]; then
  for n in "$@"; do patches+=("experiments/mutations/$n.patch"); done
else
  patches=(experiments/mutations/*.patch)
fi

failed=0
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  [ -f "$patch" ] || { echo "mutations: no $patch" >&2; exit 2; }
  run=$(sed -n 's/^run: //p' "$patch" | head -1)
  expect=$(sed -n 's/^expect: //p' "$patch" | head -1)
  if [ -z "$run" ] || [ -z "$expect" ]; then
    echo "mutations: $patch needs a 'run:' and an 'expect:' line" >&2
    exit 2
  fi
  echo "== mutation $name: experiments $run (must exit 1 with \"$expect\")"
  copy="$scratch/$name"
  mkdir -p "$copy"
  # The tree as it is (tracked files, uncommitted edits included), without data/.
  git ls-files -z -- . ':!:data' | tar -cf - --null -T - | tar -xf - -C "$copy"
  if ! (cd "$copy" && git apply -p1 --check "$root/$patch"); then
    echo "mutations: $name: the patch no longer applies to the tree; update it" >&2
    failed=1
    continue
  fi
  (cd "$copy" && git apply -p1 "$root/$patch")
  if ! (cd "$copy" && CARGO_TARGET_DIR=$mtarget cargo build --locked -q -p lock-server -p rail-stub -p experiments); then
    echo "mutations: $name: the mutant does not build" >&2
    failed=1
    continue
  fi
  bin="$scratch/bin-$name"
  mkdir -p "$bin"
  cp "$mtarget/debug/lock-server" "$mtarget/debug/rail-stub" "$mtarget/debug/experiments" "$bin/"
  rc=0
  # shellcheck disable=SC2086  # the header's flags are words
  env -u FENCEPOST_PG_DIR "$bin/experiments" $run --out "$scratch/out-$name" \
    > "$scratch/$name.log" 2>&1 || rc=$?
  if [ "$rc" -eq 1 ] && grep -qE -- "$expect" "$scratch/$name.log"; then
    echo "   caught: exit 1, \"$expect\" in its output"
  else
    echo "mutations: $name got through: exit $rc, \"$expect\" $(grep -qE -- "$expect" "$scratch/$name.log" && echo found || echo 'not found'); its output ends:" >&2
    tail -20 "$scratch/$name.log" >&2
    failed=1
  fi
done
exit "$failed"
