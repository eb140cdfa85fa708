"""Record an evaluation video headless, as a user would: a checkpoint trained one iteration,
then `rollout evaluate --video OUT` with no display and no MUJOCO_GL set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainer.algorithm import PPO
from trainer.config import PPOConfig

ROOT = Path(__file__).resolve().parents[2]


def record_headless(env_id: str, tmp_path: Path, out: Path) -> dict[str, Any]:
    """`rollout evaluate`'s JSON report for one episode of `env_id` recorded to `out`."""
    config = PPOConfig(
        env_id=env_id, train_batch_size_per_learner=256, minibatch_size=128, num_epochs=1
    )
    algo = PPO(config)
    try:
        algo.train()
        checkpoint = algo.save_checkpoint(tmp_path / "checkpoint")
    finally:
        algo.stop()
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    cmd = [sys.executable, "-m", "app.cli", "evaluate", str(checkpoint), "--episodes", "1"]
    done = subprocess.run(
        [*cmd, "--video", str(out)], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
