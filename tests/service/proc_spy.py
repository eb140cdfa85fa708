"""A user-registered env that tries what hostile user code in a job would:
`tests.service.proc_spy:ProcSpy-v0`, env_config {"dump_dir": DIR, "api_pid": PID}.

It reads the API process's /proc/<pid>/environ (where ROLLOUT_API_TOKEN lives) and writes what
it got (or the error) and its own environment to `DIR/spy-<pid>.json` for a test to inspect.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "ProcSpy-v0"


def _attempt(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as file:
            return {"read": file.read(1_000_000).decode(errors="replace")}
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


class ProcSpy(CartPoleEnv):
    def __init__(self, dump_dir: str, api_pid: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        record = {
            "pid": os.getpid(),
            "environ": dict(os.environ),
            "api_environ": _attempt(f"/proc/{api_pid}/environ"),
        }
        (Path(dump_dir) / f"spy-{os.getpid()}.json").write_text(json.dumps(record))


gym.register(id=ENV_ID, entry_point=f"{__name__}:ProcSpy", max_episode_steps=500)
