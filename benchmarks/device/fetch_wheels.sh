#!/usr/bin/env bash
# Fetch, on a machine with internet, the wheels the GPU benchmark machine lacks: everything the
# serial trainer path (`python -m trainer.cli train`, benchmarks/atari.py) imports beyond torch
# and numpy. Versions are those installed in the project's .venv (what the tests ran with);
# psutil (optional: process start time) is pinned here. Linux x86_64, CPython 3.11 and 3.12
# by default (PYTHON_VERSIONS="3.12" to fetch fewer). About 7 MB per Python version.
#
#   bash benchmarks/device/fetch_wheels.sh          # -> .whl/ (gitignored; carried to the run)
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${WHEELS:-.whl}
PYTHON_VERSIONS=${PYTHON_VERSIONS:-"3.11 3.12"}
VENV_PY=${VENV_PY:-.venv/bin/python}
PACKAGES="gymnasium ale-py pydantic pydantic-core annotated-types typing-extensions typing-inspection cloudpickle farama-notifications pyyaml"
PSUTIL="psutil==7.2.2"

pins=$("$VENV_PY" - $PACKAGES <<'PY'
import importlib.metadata as md
import sys

print(" ".join(f"{name}=={md.version(name)}" for name in sys.argv[1:]))
PY
)
mkdir -p "$DEST"
for version in $PYTHON_VERSIONS; do
  "$VENV_PY" -m pip download --quiet --only-binary=:all: --no-deps \
    --python-version "$version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
    --platform manylinux2010_x86_64 \
    -d "$DEST" $pins "$PSUTIL"
done
ls -1 "$DEST"
du -sh "$DEST"
