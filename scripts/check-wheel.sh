#!/usr/bin/env bash
# The wheel as a user gets it: built with its sdist, checked by twine, installed into a fresh
# virtual environment outside the checkout, and run from there (`scaletune demo`, the
# console's help). Needs `make`'s .venv (build, twine, uv); PYTHON makes the fresh environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BIN=${BIN:-.venv/bin}
checkout=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$BIN/python" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
    cat "$work/build.log"
    exit 1
}
"$BIN/twine" check --strict "$work"/dist/*
wheel=$(ls "$work"/dist/scaletune-*.whl)
# The templates, stylesheet and scripts the console, reports and notebooks render with.
"$BIN/python" - "$wheel" "$work"/dist/scaletune-*.tar.gz <<'PY'
import sys, tarfile, zipfile
wheel, sdist = sys.argv[1], sys.argv[2]
names = set(zipfile.ZipFile(wheel).namelist())
sdist_names = {name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name}
needed = [
    "scaletune/views/templates/page.html",
    "scaletune/views/templates/notebook_job.html",
    "scaletune/views/static/console.css",
    "scaletune/views/static/console.js",
    "scaletune/py.typed",
]
missing = [name for name in needed if name not in names]
missing += [f"sdist: src/{name}" for name in needed if f"src/{name}" not in sdist_names]
if missing:
    sys.exit(f"missing from the distributions: {missing}")
print(f"wheel: {len(names)} files; sdist: {len(sdist_names)}")
PY

"$PYTHON" -m venv "$work/venv"
# uv, as `make` installs it into .venv: its cache, which that install filled, serves this one.
# Not compiled to bytecode up front (that takes a minute of both cores for the thousands of
# modules the demo never imports): Python compiles and keeps those it imports, even where the
# environment says not to write bytecode, since this environment is thrown away.
"$BIN/uv" pip install --quiet --python "$work/venv/bin/python" -c "$checkout/constraints.txt" "$wheel"
unset PYTHONDONTWRITEBYTECODE
cd "$work"  # outside the checkout: nothing of the clone is importable from here
"$work/venv/bin/python" -c "import scaletune, sys; sys.exit(not scaletune.__file__.startswith('$work/venv/'))"
export SCALETUNE_STORE="$work/store/scaletune.db" SCALETUNE_HOME="$work/home"
"$work/venv/bin/scaletune" demo
"$work/venv/bin/scaletune" console --help >/dev/null
echo "wheel check: built, twine-clean, installed outside the checkout, demo and console --help ran"
