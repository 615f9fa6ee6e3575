#!/usr/bin/env bash
# Executes both notebooks headless (nbclient) against the committed reference
# pack, so they cannot rot:
#   notebooks/analysis.ipynb  on data/reference/sweep   (pandas)
#   notebooks/adr-006.ipynb   on data/reference          (polars + matplotlib)
# The Python environment is a venv from PyPI (notebooks/requirements.txt),
# created once at $FENCEPOST_NOTEBOOK_VENV (default /tmp/fencepost-notebook-venv).
# The notebooks are regenerated from their scripts first, so what runs is what
# the scripts say. Executed copies go to $FENCEPOST_NOTEBOOK_OUT (default
# /tmp/fencepost-notebooks); the committed notebooks stay unexecuted.
#
#   scripts/run-notebooks.sh                 # against data/reference
#   FENCEPOST_PACK=data/runs/my-pack scripts/run-notebooks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${FENCEPOST_NOTEBOOK_VENV:-/tmp/fencepost-notebook-venv}"
out="${FENCEPOST_NOTEBOOK_OUT:-/tmp/fencepost-notebooks}"
pack="${FENCEPOST_PACK:-data/reference}"
[ -f "$pack/adr-manifest.json" ] || { echo "run-notebooks: $pack has no adr-manifest.json (bench adr writes it)" >&2; exit 2; }
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
fi
"$venv/bin/pip" install -q -r notebooks/requirements.txt
"$venv/bin/python" notebooks/make_notebook.py
"$venv/bin/python" notebooks/make_adr_notebook.py
mkdir -p "$out"
FENCEPOST_PACK="$(realpath "$pack")" FENCEPOST_RUN="$(realpath "$pack")/sweep" \
"$venv/bin/python" - "$out" <<'PY'
import sys, time, pathlib
import nbformat
from nbclient import NotebookClient
out = pathlib.Path(sys.argv[1])
for name in ["analysis.ipynb", "adr-006.ipynb"]:
    path = pathlib.Path("notebooks") / name
    nb = nbformat.read(path, as_version=4)
    t0 = time.monotonic()
    NotebookClient(nb, kernel_name="python3", timeout=600,
                   resources={"metadata": {"path": "notebooks"}}).execute()
    nbformat.write(nb, out / name)
    print(f"run-notebooks: {name} executed top to bottom in {time.monotonic() - t0:.1f} s -> {out / name}")
PY
