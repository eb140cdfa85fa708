"""A hostile user env module: `tests.service.job_trespass:JobTrespass-v0`, env_config
{"data_dir": DIR, "service_pid": PID}.

Built inside a job, it tries what a job must not do when the service runs its jobs as another
OS user (ROLLOUT_JOBS_USER): read and write the SQLite database, list the checkpoints, read the
service's environment (its API token). It writes what happened to
`$ROLLOUT_JOB_DIR/trespass-<pid>.json` (its own job dir, where it may write) for the test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "JobTrespass-v0"


def attempt(action: Any) -> str:
    """What the OS said to `action`: denied, done or its error."""
    try:
        action()
    except PermissionError:
        return "denied"
    except OSError as exc:
        return f"error: {exc.strerror}"
    return "done"


def service_attempts(data: Path, service_pid: int) -> dict[str, str]:
    """What a job tries against the service's own database, data dir and process."""
    database = data / "rollout.db"
    return {
        "read database": attempt(lambda: database.read_bytes()),
        "write database": attempt(lambda: database.open("r+b").close()),
        "list data dir": attempt(lambda: list(data.iterdir())),
        "read service environ": attempt(lambda: Path(f"/proc/{service_pid}/environ").read_bytes()),
    }


def write_outcome(name: str, outcome: dict[str, Any]) -> None:
    """Leave `outcome` in this job's dir, where the test reads it after the run."""
    job_dir = Path(os.environ["ROLLOUT_JOB_DIR"])
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / f"{name}-{os.getpid()}.json").write_text(json.dumps(outcome))


class JobTrespass(CartPoleEnv):
    def __init__(self, data_dir: str, service_pid: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        data = Path(data_dir)
        outcome = {
            "uid": os.getuid(),
            **service_attempts(data, service_pid),
            "list checkpoints": attempt(lambda: list((data / "checkpoints").iterdir())),
        }
        write_outcome("trespass", outcome)


gym.register(id=ENV_ID, entry_point=f"{__name__}:JobTrespass", max_episode_steps=500)
