"""A user-registered env that records the environment of every process that builds it:
`tests.service.env_spy:EnvSpy-v0`, with env_config {"dump_dir": DIR}.

User env modules run inside the job driver and every EnvRunner actor, so whatever a process of
a job holds in `os.environ` is readable by user code: this env writes it to
`DIR/env-<pid>.json` for a test to inspect (with the process's CPU niceness).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "EnvSpy-v0"


class EnvSpy(CartPoleEnv):
    def __init__(self, dump_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        record = {
            "pid": os.getpid(),
            "argv": sys.argv,
            "environ": dict(os.environ),
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
        }
        (Path(dump_dir) / f"env-{os.getpid()}.json").write_text(json.dumps(record))


gym.register(id=ENV_ID, entry_point=f"{__name__}:EnvSpy", max_episode_steps=500)
