"""benchmarks/device/run_atari.sh refuses a machine without CUDA (unless ROLLOUT_ALLOW_CPU=1)
and its EXIT trap still hands this run's dir to $OUT."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_without_cuda_it_refuses_and_still_copies_to_out(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run_dir, out = tmp_path / "run", tmp_path / "out"
    # psutil (which the device machine gets from the wheels) is not a dependency of the venv:
    # a module that fails to import stands in for it, as trainer/cli.py copes with its absence.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "psutil.py").write_text("raise ImportError('not installed')\n")
    env = {**os.environ, "PYTHON": sys.executable, "RUN_DIR": str(run_dir), "OUT": str(out)}
    env["PYTHONPATH"] = str(tmp_path / "site")
    env.pop("ROLLOUT_ALLOW_CPU", None)
    done = subprocess.run(
        ["bash", "benchmarks/device/run_atari.sh", "--seconds", "1"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode != 0
    assert "no CUDA device; set ROLLOUT_ALLOW_CPU=1" in done.stderr, done.stderr
    assert "torch 2.13.0" in done.stdout and "ale-py" in done.stdout, done.stdout
    assert (out / "atari").is_dir() and (out / "benchmarks.md").is_file()
    assert "copied to" in done.stdout
    assert not any(run_dir.rglob("*.jsonl"))  # nothing ran
