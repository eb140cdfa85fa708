#!/usr/bin/env bash
# The Atari benchmark on the GPU benchmark machine, in one command (repository root):
#
#   bash benchmarks/device/run_atari.sh [benchmarks/atari.py arguments, e.g. --seconds 330]
#
# That machine has torch and numpy but not gymnasium, ale-py, pydantic or Ray. What is missing
# is installed from the wheels in .whl/ (benchmarks/device/fetch_wheels.sh) into a --target dir
# put first on PYTHONPATH; nothing else is touched. Then the serial trainer path is checked to
# import without Ray, and benchmarks/atari.py runs. Its metrics.jsonl files and summary go to
# benchmarks/results/atari/ and, when $OUT is set, to $OUT/ with the updated docs/benchmarks.md.
#
# Environment: PYTHON (default python3), WHEELS (default .whl), DEPS_DIR (default
# $TMPDIR/rollout-deps).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
DEPS=${DEPS_DIR:-${TMPDIR:-/tmp}/rollout-deps}
DISTS="gymnasium ale-py pydantic pydantic-core annotated-types typing-extensions typing-inspection cloudpickle farama-notifications pyyaml psutil"

missing=$("$PY" - <<'PY'
import importlib.util

modules = ("gymnasium", "ale_py", "pydantic", "pydantic_core", "yaml", "psutil")
print(" ".join(m for m in modules if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  echo "missing: $missing; installing from $WHEELS into $DEPS"
  mkdir -p "$DEPS"
  if "$PY" -m pip --version >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    "$PY" -m pip install --quiet --no-index --no-deps --find-links "$WHEELS" --target "$DEPS" \
      --upgrade $DISTS
  else  # no pip: a wheel is a zip of site-packages entries; take the ones for this Python
    "$PY" - "$WHEELS" "$DEPS" <<'PY'
import sys
import zipfile
from pathlib import Path

wheels, deps = Path(sys.argv[1]), Path(sys.argv[2])
tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
for wheel in sorted(wheels.glob("*.whl")):
    parts = wheel.name.split("-")
    if parts[-3] in ("py3", tag) or "abi3" in parts[-2]:
        zipfile.ZipFile(wheel).extractall(deps)
        print("extracted", wheel.name)
PY
  fi
  export PYTHONPATH="$DEPS${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" - <<'PY'
import sys

import ale_py, gymnasium, pydantic, torch  # noqa: E401,F401
import trainer.algorithm, trainer.cli  # noqa: E401,F401 - the serial path

assert "ray" not in sys.modules, "the serial trainer path imported Ray"
cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
print(f"python {sys.version.split()[0]}, torch {torch.__version__} ({cuda}), "
      f"gymnasium {gymnasium.__version__}, ale-py {ale_py.__version__}, pydantic {pydantic.VERSION}")
PY

"$PY" benchmarks/atari.py "$@"

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/atari"
  cp benchmarks/results/atari/* "$OUT/atari/"
  cp docs/benchmarks.md "$OUT/"
fi
