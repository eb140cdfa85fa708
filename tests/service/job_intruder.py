"""A hostile user env module: `tests.service.job_intruder:JobIntruder-v0`, env_config
{"data_dir": DIR, "service_pid": PID, "starter_pid": PID, "victim": {...}} where the victim
is another running job as the service recorded its cluster (app/jobs/job_clusters.py
`ClusterRecord`) plus its driver's pid.

Built inside a job, it tries what one job must not do to another when every job runs on a Ray
cluster of its own as a jobs user of its own (ROLLOUT_JOBS_USERS): stop the victim through its
cluster's Jobs API or by joining its cluster (as a Ray driver, with its own token) and killing
its job supervisor, read its cluster's token, read its driver's memory and environment, read
or write its job dir and Ray temp dir; and what no job may do to the service: read or write
the database, list the data dir, read the environment of the service or of the process that
started it. It writes what happened to
`$ROLLOUT_JOB_DIR/intruder-<pid>.json` (its own job dir) for the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from tests.service.job_trespass import attempt, service_attempts, write_outcome

ENV_ID = "JobIntruder-v0"
_TRIED = False


# Joining the victim's cluster as a driver (its own token in hand: RAY_AUTH_TOKEN_PATH of the
# intruder's job) and killing the victim's job supervisor, Ray's own way.
_JOIN_AND_KILL = """
import sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
name, namespace = "_ray_internal_job_actor_" + sys.argv[2], "SUPERVISOR_ACTOR_RAY_NAMESPACE"
actor = ray.get_actor(name, namespace=namespace)
ray.kill(actor)
print("KILLED")
"""


def _join_and_kill(victim: dict[str, Any]) -> str:
    argv = [sys.executable, "-c", _JOIN_AND_KILL, victim["gcs_address"], victim["submission_id"]]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=20)  # 2 s on a shared cluster
    except subprocess.TimeoutExpired:  # a refused driver retries for a minute: not connected
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return "done" if "KILLED" in out else "denied"


def _stop_through_jobs_api(victim: dict[str, Any]) -> str:
    """What the victim's dashboard answers to a stop without its token (Ray >= 2.52's
    token authentication: 401)."""
    url = f"{victim['dashboard_url']}/api/jobs/{victim['submission_id']}/stop"
    try:
        response = httpx.post(url, timeout=10)
    except httpx.HTTPError as exc:
        return f"error: {type(exc).__name__}"
    return "denied" if response.status_code in (401, 403) else f"answered {response.status_code}"


class JobIntruder(CartPoleEnv):
    def __init__(
        self,
        data_dir: str,
        service_pid: int,
        starter_pid: int,
        victim: dict[str, Any],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        global _TRIED
        if _TRIED:  # a vector env builds several: the tries run once per process
            return
        _TRIED = True
        data = Path(data_dir)
        victim_dir, victim_temp = Path(victim["job_dir"]), Path(victim["temp_dir"])
        driver = victim["driver_pid"]
        outcome = {
            "uid": os.getuid(),
            "join victim's cluster and kill its job": _join_and_kill(victim),
            "stop victim through its Jobs API": _stop_through_jobs_api(victim),
            "read victim's cluster token": attempt(
                lambda: (victim_temp / "auth_token").read_bytes()
            ),
            "list victim's Ray temp dir": attempt(lambda: list(victim_temp.iterdir())),
            "read victim driver's memory": attempt(
                lambda: Path(f"/proc/{driver}/mem").open("rb").close()
            ),
            "read victim driver's environ": attempt(
                lambda: Path(f"/proc/{driver}/environ").read_bytes()
            ),
            "list victim's job dir": attempt(lambda: list(victim_dir.iterdir())),
            "write victim's job dir": attempt(
                lambda: (victim_dir / "planted.json").write_text("{}")
            ),
            **service_attempts(data, service_pid),
            "read the environ of the service's starter": attempt(
                lambda: Path(f"/proc/{starter_pid}/environ").read_bytes()
            ),
        }
        write_outcome("intruder", outcome)


gym.register(id=ENV_ID, entry_point=f"{__name__}:JobIntruder", max_episode_steps=500)
