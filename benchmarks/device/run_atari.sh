#!/usr/bin/env bash
# The Atari benchmark on the GPU benchmark machine, in one command (repository root):
#
#   bash benchmarks/device/run_atari.sh [benchmarks/atari.py arguments, e.g. --seconds 270]
#
# That machine has torch and numpy but not gymnasium, ale-py, pydantic or Ray. What is missing
# is installed from the wheels in .whl/ (benchmarks/device/fetch_wheels.sh) into a --target dir
# put first on PYTHONPATH; nothing else is touched. Then the versions are printed, the serial
# trainer path is checked to import without Ray, and benchmarks/atari.py runs into a results
# dir of its own (benchmarks/results/atari/run-<UTC time>/), printing a progress line every
# PROGRESS_S seconds. Whatever happens (a crash, a timeout's SIGTERM), the EXIT trap copies
# this run's files, and only them, to $OUT/atari/ with docs/benchmarks.md when $OUT is set.
#
# It refuses to run without CUDA (a CPU run would spend the device budget on the wrong thing)
# unless ROLLOUT_ALLOW_CPU=1.
#
# Environment: PYTHON (default python3), WHEELS (default .whl), DEPS_DIR (default
# $TMPDIR/rollout-deps), RUN_DIR (default above), PROGRESS_S (default 10), ROLLOUT_ALLOW_CPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
DEPS=${DEPS_DIR:-${TMPDIR:-/tmp}/rollout-deps}
PROGRESS_S=${PROGRESS_S:-10}
RUN_DIR=${RUN_DIR:-benchmarks/results/atari/run-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RUN_DIR"
progress_pid=""

finish() {
  local rc=$?
  if [ -n "$progress_pid" ]; then kill "$progress_pid" 2>/dev/null || true; fi
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT/atari"
    cp -r "$RUN_DIR"/. "$OUT/atari/" 2>/dev/null || true
    cp docs/benchmarks.md "$OUT/" 2>/dev/null || true
    echo "[run_atari] exit $rc; this run's files copied to $OUT/atari"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
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

import os

assert "ray" not in sys.modules, "the serial trainer path imported Ray"
cuda = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
print(f"python {sys.version.split()[0]}, torch {torch.__version__} ({cuda}), "
      f"gymnasium {gymnasium.__version__}, ale-py {ale_py.__version__}, pydantic {pydantic.VERSION}, "
      f"{os.cpu_count()} cores")
if torch.cuda.is_available():
    import subprocess

    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False).stdout.strip()
    print(f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"driver {smi or 'unknown (no nvidia-smi)'}")
if not torch.cuda.is_available() and os.environ.get("ROLLOUT_ALLOW_CPU") != "1":
    sys.exit("run_atari.sh: no CUDA device; set ROLLOUT_ALLOW_CPU=1 to run on the CPU anyway")
PY

# A progress line every PROGRESS_S seconds: the newest metrics.jsonl's last iteration.
(
  while sleep "$PROGRESS_S"; do
    "$PY" - "$RUN_DIR" "$SECONDS" <<'PY' || true
import json
import sys
from pathlib import Path

files = sorted(Path(sys.argv[1]).rglob("metrics.jsonl"), key=lambda f: f.stat().st_mtime)
last = files[-1].read_text().splitlines()[-1:] if files else []
row = json.loads(last[0]) if last else {}
print(f"[run_atari] {sys.argv[2]}s: {files[-1].parent.name if files else 'starting'}, "
      f"env_steps {row.get('env_steps', 0)}, return {row.get('episode_return_mean', 'n/a')}",
      flush=True)
PY
  done
) &
progress_pid=$!

"$PY" benchmarks/atari.py --results "$RUN_DIR" "$@"
