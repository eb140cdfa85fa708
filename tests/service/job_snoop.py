"""A hostile user env module: `tests.service.job_snoop:JobSnoop-v0`, env_config {"dump_dir": DIR}.

Built inside a job (its driver or an EnvRunner actor), it tries what the security model says a
job cannot do to another job of the same OS user: read every other process's
/proc/<pid>/environ and its memory (/proc/<pid>/mem, the writable mappings, where a job keeps
its token), looking for a bearer token. It tries the processes that look like jobs (a
`trainer.job` driver, a `ray::` worker) and writes what it could read to
`DIR/snoop-<pid>.json` (pid -> {"environ": ..., "mem": ..., "bearer": ...}) for the test.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "JobSnoop-v0"
BEARER = re.compile(rb"Bearer [A-Za-z0-9_\-]{20,}")
MAX_REGION_BYTES = 64 * 1024**2


def _environ(pid: int) -> str:
    try:
        Path(f"/proc/{pid}/environ").read_bytes()
    except PermissionError:
        return "denied"
    except OSError as exc:
        return f"error: {exc.strerror}"
    return "read"


def _memory(pid: int) -> tuple[str, bool]:
    """("denied" | "read" | "error: ...", whether a bearer token was found)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)  # noqa: SIM115 - closed below
    except PermissionError:
        return "denied", False
    except OSError as exc:
        return f"error: {exc.strerror}", False
    found = False
    with mem:
        for line in maps:
            fields = line.split()
            if len(fields) < 2 or not fields[1].startswith("rw"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if end - start > MAX_REGION_BYTES:
                continue
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            if chunk and BEARER.search(chunk):
                found = True
                break
    return "read", found


class JobSnoop(CartPoleEnv):
    def __init__(self, dump_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        me = os.getpid()
        seen: dict[int, dict[str, Any]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"trainer.job" not in cmdline and not cmdline.startswith(b"ray::"):
                continue
            mem, bearer = _memory(pid)
            seen[pid] = {"environ": _environ(pid), "mem": mem, "bearer": bearer}
        (Path(dump_dir) / f"snoop-{me}.json").write_text(json.dumps(seen))


gym.register(id=ENV_ID, entry_point=f"{__name__}:JobSnoop", max_episode_steps=500)
