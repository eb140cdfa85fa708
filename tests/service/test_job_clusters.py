"""One Ray cluster per job, each as an OS user of its own (ROLLOUT_JOBS_USERS,
app/jobs/job_clusters.py), the way an operator runs it: `rollout serve` as root with a pool of
two jobs users, real jobs on their own local clusters.

A hostile env module (tests/service/job_intruder.py) in one job tries everything against
another running job (its Jobs API, its token, its memory, its files) and against the service;
all of it is refused, the victim trains on, survives a SIGKILL of the API (its cluster is
adopted by the next `rollout serve`) and stops when asked. When the jobs end their clusters
go, with every process of their users, and their job dirs are the service's again.

The users are made for the test and removed after it; the service runs from an interpreter
they may run (tests/other_users.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.layout import experiment_job_dir, job_clusters_dir
from app.jobs.job_clusters import processes_of
from app.jobs.ray_head import free_ports
from tests import other_users
from tests.conftest import SERVICE_SECRETS
from tests.other_users import ServedApi, fresh_users, why_not_other_users
from tests.serve_process import rollout_serve
from tests.service import job_intruder
from tests.service.test_e2e_jobs import wait_for

API_TOKEN = SERVICE_SECRETS["ROLLOUT_API_TOKEN"]
FINISHED = {"succeeded", "failed", "stopped"}

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(1800),  # four Ray heads in turn on two cores the suite keeps busy
    pytest.mark.skipif(why_not_other_users() is not None, reason=str(why_not_other_users())),
]


@pytest.fixture(scope="module")
def pool_users() -> Iterator[list[str]]:
    with fresh_users(2) as users:
        yield users


@pytest.fixture(scope="module")
def shared_python(pool_users: list[str]) -> Iterator[str]:
    with other_users.shared_python(pool_users[0]) as python:
        if python is None:
            pytest.skip("a jobs user cannot import the project")
        yield python


def _config(env_id: str, env_config: dict[str, Any], env_steps: int) -> dict[str, Any]:
    return {
        "env_id": env_id,
        "env_config": env_config,
        "num_env_runners": 0,  # one CPU a job: both fit the two cores
        "num_envs_per_env_runner": 2,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 128,
        "num_epochs": 1,
        "stop": {"env_steps": env_steps},
        "checkpoint_every": 0,
    }


def _record(data_dir: Path, submission_id: str) -> dict[str, Any]:
    return dict(json.loads((job_clusters_dir(data_dir) / f"{submission_id}.json").read_text()))


def _driver_pid(user: str) -> int | None:
    """The job driver among the processes of `user` (the only job that user runs)."""
    for pid in processes_of(pwd.getpwnam(user).pw_uid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[-2:] == [b"trainer.job", b""] and b"python" in argv[0]:
            return pid
    return None


def test_jobs_on_their_own_clusters_cannot_touch_each_other_and_survive_an_api_restart(
    pool_users: list[str], shared_python: str
) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="rollout-job-clusters-", dir="/tmp"))
    env = {
        "ROLLOUT_JOBS_USERS": ",".join(pool_users),
        "ROLLOUT_API_TOKEN": API_TOKEN,  # in the service's environment: no job may read it
        "ROLLOUT_DATABASE_URL": None,  # the data dir's SQLite file
        "ROLLOUT_JOBS_USER": None,
        "ROLLOUT_RAY_ADDRESS": None,
        "RAY_ADDRESS": None,
    }
    uids = {user: pwd.getpwnam(user).pw_uid for user in pool_users}
    port = free_ports(1)[0]
    try:
        # The same port both times: a running job keeps calling the URL it was started with.
        with rollout_serve(data_dir, env=env, python=shared_python, port=port) as served:
            api = ServedApi(served.url, API_TOKEN)
            victim = api.submit(_config("CartPole-v1", {}, 50_000_000), "victim")
            running = api.wait(victim, {"running"} | FINISHED, 180)
            assert running["status"] == "running", running
            victim_job = running["ray_job_id"]
            # A head, then a driver importing torch: minutes on two cores the suite keeps busy.
            seen: dict[str, Any] = {}

            def reporting() -> bool:
                seen.update(api.get(victim))
                assert seen["status"] == "running", (seen["events"][-3:], seen["error"])
                return int(seen.get("env_steps") or 0) > 0

            wait_for(reporting, 360, "the victim's first metrics", lambda: seen["events"][-3:])
            record = _record(data_dir, victim_job)
            # The machine's CPUs, the victim's among them; Ray is there (its own cluster).
            cluster = api.http.get("/cluster").json()
            assert cluster["reachable"] is True and cluster["local_head"] is False
            assert cluster["resources"]["CPU"]["total"] == os.cpu_count()
            assert [r["experiment_id"] for r in cluster["running"]] == [victim]
            assert httpx.get(f"{served.url}/health").json()["ray"] is True
            victim_user = record["user"]
            driver = _driver_pid(victim_user)
            assert driver is not None
            intruder_config = _config(
                f"tests.service.job_intruder:{job_intruder.ENV_ID}",
                {
                    "data_dir": str(data_dir),
                    "service_pid": served.proc.pid,
                    "starter_pid": os.getpid(),  # this test started it, with the token
                    "victim": {
                        "gcs_address": record["address"],
                        "submission_id": victim_job,
                        "dashboard_url": record["dashboard_url"],
                        "temp_dir": record["temp_dir"],
                        "job_dir": record["job_dir"],
                        "driver_pid": driver,
                    },
                },
                2048,
            )
            intruder = api.submit(intruder_config, "intruder")
            ended = api.wait(intruder, FINISHED, 480)
            assert ended["status"] == "succeeded", (ended["events"][-1], ended["error"])
            outcomes = [
                json.loads(p.read_text())
                for p in experiment_job_dir(data_dir, intruder).glob("intruder-*.json")
            ]
            assert outcomes, "the intruder never built its env"
            intruder_uid = next(uid for user, uid in uids.items() if user != victim_user)
            for outcome in outcomes:
                assert outcome.pop("uid") == intruder_uid
                assert outcome == dict.fromkeys(outcome, "denied"), outcome
            # The victim trained on meanwhile, untouched.
            before = api.steps(victim)
            assert api.get(victim)["status"] == "running"
            wait_for(lambda: api.steps(victim) > before, 120, "the victim to go on training")
            assert not (experiment_job_dir(data_dir, victim) / "planted.json").exists()
            # The intruder's cluster went with its job: no process of its user is left,
            # and its job dir is the service's again.
            wait_for(lambda: not processes_of(intruder_uid), 120, "the intruder's processes")
            wait_for(
                lambda: experiment_job_dir(data_dir, intruder).stat().st_uid == 0,
                30,
                "the intruder's job dir handed back",
            )
            # The API dies hard; the victim's cluster (a session of its own) carries on.
            os.killpg(served.proc.pid, signal.SIGKILL)
            served.proc.wait(30)
        assert processes_of(uids[victim_user]), "the victim's cluster went with the API"
        with rollout_serve(data_dir, env=env, python=shared_python, port=port) as served:
            api = ServedApi(served.url, API_TOKEN)
            assert api.get(victim)["status"] == "running"
            before = api.steps(victim)
            wait_for(lambda: api.steps(victim) > before, 240, "the adopted victim to report")
            assert api.http.post(f"/experiments/{victim}/stop").status_code == 200
            stopped = api.wait(victim, FINISHED, 240)
            assert stopped["status"] == "stopped", stopped
            wait_for(lambda: not processes_of(uids[victim_user]), 120, "the victim's processes")
            # An evaluation is a job like any other: a cluster of its own, then gone.
            created = api.http.post(
                f"/experiments/{victim}/evaluations",
                json={"checkpoint": "latest", "episodes": 2, "record_video": False},
            )
            assert created.status_code == 201, created.text
            evaluation = created.json()["id"]
            found: dict[str, Any] = {}

            def evaluated() -> bool:
                found.update(api.http.get(f"/evaluations/{evaluation}").json())
                return found["status"] in ("succeeded", "failed")

            wait_for(evaluated, 360, "the evaluation", lambda: found)
            assert found["status"] == "succeeded", (found["error"], found["log_tail"])
            assert found["episodes_done"] == 2 and found["return_mean"] is not None
            wait_for(
                lambda: not any(processes_of(uid) for uid in uids.values()),
                120,
                "the evaluation's processes",
            )
        assert not list(job_clusters_dir(data_dir).glob("*.json"))
        for uid in uids.values():
            assert not processes_of(uid)
    finally:
        for uid in uids.values():  # a failed test must not leave jobs running
            for pid in processes_of(uid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        shutil.rmtree(data_dir, ignore_errors=True)
