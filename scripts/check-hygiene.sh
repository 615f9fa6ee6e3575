#!/usr/bin/env bash
# The repository's shape rules, checked on the tracked files (run from anywhere):
#   1. no Rust source file (src, tests, benches, examples) is over 700 lines;
#   2. `anyhow` appears only in `main.rs` files (libraries return typed errors);
#   3. nothing points outside the repository: no path into the shared folder
#      beside the clone (dot-dot-slash shared) and no absolute
#      path of a build machine (`/work/…`) in code, docs, scripts or manifests
#      (data/ is exempt: run manifests record the argv and binary paths of the
#      machine they ran on, as facts about that run).
# Exits 1 listing every offence, 0 when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_LINES=700
fail=0

echo "largest Rust source files:"
git ls-files -z '*.rs' | xargs -0 wc -l | grep -v ' total$' | sort -n | tail -5 | sed 's/^/  /'
while read -r n f; do
  if [ "$n" -gt "$MAX_LINES" ]; then
    echo "over $MAX_LINES lines: $f ($n)"
    fail=1
  fi
done < <(git ls-files -z '*.rs' | xargs -0 wc -l | grep -v ' total$')

while read -r f; do
  case "$(basename "$f")" in
    main.rs) ;;
    *) echo "anyhow outside a main.rs: $f"; fail=1 ;;
  esac
done < <(git ls-files -z '*.rs' | xargs -0 grep -l 'anyhow' || true)

# Paths outside the repository. This script names the patterns, so it is
# skipped; data/ records real runs.
outside=$(git ls-files -z ':!data/' ':!scripts/check-hygiene.sh' |
  xargs -0 grep -nI -e '\.\./shared' -e '/work/' 2>/dev/null || true)
if [ -n "$outside" ]; then
  echo "points outside the repository:"
  echo "$outside" | sed 's/^/  /'
  fail=1
fi

if [ "$fail" -ne 0 ]; then
  echo "check-hygiene: FAILED"
  exit 1
fi
echo "check-hygiene: ok (largest .rs file ≤ $MAX_LINES lines; anyhow only in main.rs; nothing points outside the repository)"
