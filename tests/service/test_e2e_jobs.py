"""End to end on the real local Ray cluster: the real service (uvicorn on a free port, SQLite)
launches real trainer jobs, which report back over HTTP; we watch them over the websocket."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from websockets.sync.client import connect

from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker, transaction
from app.experiments import service as experiments
from app.experiments.schemas import ExperimentCreate
from app.jobs.ray_head import LocalRayHead, descendants, free_ports
from app.main import create_app
from tests.service import failing_env

pytestmark = pytest.mark.ray

# Reaches its target in a few seconds of serial-mode training on a busy 2-core machine.
QUICK = {
    "env_id": "CartPole-v1",
    "num_envs_per_env_runner": 8,
    "train_batch_size_per_learner": 1024,
    "minibatch_size": 256,
    "num_epochs": 4,
    "lr": 1e-3,
    "stop": {"episode_return_mean": 120, "env_steps": 40_000},
    "checkpoint_every": 3,
}
# Never ends by itself within a test.
ENDLESS = {**QUICK, "stop": {"env_steps": 50_000_000}, "checkpoint_every": 0}


class LiveService:
    """The real app served by uvicorn in a background thread (its own event loop)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.url = f"http://127.0.0.1:{settings.port}"
        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=settings.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.http = httpx.Client(base_url=f"{self.url}/api/v1", timeout=30)

    def start(self) -> LiveService:
        self.thread.start()
        wait_for(lambda: self.server.started, 60, "service start")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.http.close()
        assert not self.thread.is_alive(), "service did not shut down"

    def submit(self, config: dict[str, Any], name: str = "e2e") -> int:
        response = self.http.post("/experiments", json={"name": name, "config": config})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def experiment(self, exp_id: int) -> dict[str, Any]:
        response = self.http.get(f"/experiments/{exp_id}")
        response.raise_for_status()
        return response.json()

    def wait_status(self, exp_id: int, statuses: set[str], timeout_s: float) -> dict[str, Any]:
        return wait_for_status(lambda: self.experiment(exp_id), statuses, timeout_s)

    def metric_steps(self, exp_id: int, name: str = "episode_return_mean") -> list[int]:
        response = self.http.get(f"/experiments/{exp_id}/metrics", params={"names": name})
        response.raise_for_status()
        series = response.json()["series"].get(name)
        return series["step"] if series else []


def wait_for(
    condition: Callable[[], Any],
    timeout_s: float,
    what: str,
    context: Callable[[], Any] | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            extra = f": {context()}" if context else ""
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}{extra}")
        time.sleep(0.25)


def wait_for_status(
    fetch: Callable[[], dict[str, Any]], statuses: set[str], timeout_s: float
) -> dict[str, Any]:
    """Poll `fetch` (an experiment as the API shows it) until its status is one of `statuses`;
    the experiment as last seen."""
    found: dict[str, Any] = {}

    def reached() -> bool:
        found.update(fetch())
        return found["status"] in statuses

    wait_for(reached, timeout_s, f"experiment to reach {statuses}", lambda: found)
    return found


def make_settings(data_dir: Path, ray_address: str, port: int | None = None) -> Settings:
    return Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'rollout.db'}",
        host="127.0.0.1",
        port=port or free_ports(1)[0],
        ray_address=ray_address,
        jobs_enabled=True,
        max_concurrent_experiments=4,
        frontend_dir=data_dir / "no-frontend",
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@contextlib.contextmanager
def serving(data_dir: Path, ray_address: str) -> Iterator[LiveService]:
    """A started service on `data_dir`; its jobs and server stopped at the end."""
    live = LiveService(make_settings(data_dir, ray_address)).start()
    try:
        yield live
    finally:
        if live.thread.is_alive():
            stop_all(live)
            live.stop()


@pytest.fixture(scope="module")
def service(ray_head: LocalRayHead, data_dir: Path) -> Iterator[LiveService]:
    with serving(data_dir, ray_head.address) as live:
        yield live


def stop_all(live: LiveService) -> None:
    """Leave no job running on the shared cluster when the module ends."""
    for exp in live.http.get("/experiments", params={"limit": 500}).json()["items"]:
        if exp["status"] in ("pending", "queued", "running"):
            live.http.post(f"/experiments/{exp['id']}/stop")
    for exp in live.http.get("/experiments", params={"limit": 500}).json()["items"]:
        if exp["status"] == "stopping":
            live.wait_status(exp["id"], {"stopped", "failed", "succeeded"}, 90)


def add_running_experiment_without_job(settings: Settings) -> int:
    """An experiment left `running` long ago on a Ray job that no longer exists."""
    engine = make_engine(settings.resolved_database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            exp = experiments.create(session, ExperimentCreate(name="ghost", config=QUICK))
            for to in ("queued", "running"):
                experiments.transition(session, exp.id, to, "before the restart")
            exp.ray_job_id = "rollout-exp-lost"
            exp.started_at = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
            return exp.id
    finally:
        engine.dispose()


def follow(live: LiveService, exp_id: int, until: set[str], timeout_s: float) -> list[dict]:
    """Websocket messages of one experiment until its status is in `until`."""
    ws_url = live.url.replace("http", "ws") + f"/api/v1/experiments/{exp_id}/stream?since_step=0"
    messages: list[dict] = []
    deadline = time.monotonic() + timeout_s
    with connect(ws_url, open_timeout=10) as ws:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                statuses = [m.get("status") for m in messages if m["type"] == "status"]
                raise AssertionError(f"experiment {exp_id} did not reach {until}: {statuses}")
            try:
                message = json.loads(ws.recv(timeout=remaining))
            except TimeoutError:
                continue
            messages.append(message)
            if message["type"] == "status" and message["status"] in until:
                return messages


def test_cartpole_experiment_runs_to_success_and_its_checkpoint_evaluates(
    service: LiveService, tmp_path: Path
) -> None:
    exp_id = service.submit(QUICK, name="quick cartpole")
    messages = follow(service, exp_id, {"succeeded", "failed", "stopped"}, timeout_s=150)
    exp = service.experiment(exp_id)
    assert exp["status"] == "succeeded", (exp["error"], exp["log_tail"])
    assert exp["ray_job_id"].startswith(f"rollout-exp{exp_id}-")

    statuses = [m["status"] for m in messages if m["type"] == "status"]
    assert "running" in statuses and statuses[-1] == "succeeded"
    metric_steps = [s for m in messages if m["type"] == "metrics" for s in m["step"]]
    assert len(metric_steps) >= 2 and metric_steps == sorted(metric_steps)
    assert any(m["type"] == "log" and "steps/s" in " ".join(m["lines"]) for m in messages)
    events = [e["to_status"] for e in exp["events"]]
    assert events == ["pending", "queued", "running", "succeeded"]
    assert "stop criterion met" in exp["events"][-1]["reason"]
    # Every iteration's metrics are stored, keyed by lifetime env steps.
    steps = service.metric_steps(exp_id)
    assert steps and steps[-1] == exp["env_steps"]
    # System metrics are stored and charted like the rest.
    names = service.http.get(f"/experiments/{exp_id}/metrics/names").json()["names"]
    assert {"system/cpu_percent", "system/rss_mb", "system/node_memory_percent"} <= set(names)

    checkpoints = service.http.get(f"/experiments/{exp_id}/checkpoints").json()
    assert checkpoints and any(c["is_latest"] for c in checkpoints)
    assert max(c["env_steps"] for c in checkpoints) == exp["env_steps"]  # the final one
    archive = tmp_path / "best.tar.gz"
    with service.http.stream("GET", f"/experiments/{exp_id}/checkpoints/best/download") as r:
        r.raise_for_status()
        archive.write_bytes(r.read())
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "evaluate", str(archive), "--episodes", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    evaluation = json.loads(result.stdout.strip().splitlines()[-1])
    assert evaluation["episodes"] == 3 and evaluation["return_mean"] > 20

    # Resume: a new experiment whose job downloads the latest checkpoint and continues from it.
    response = service.http.post(f"/experiments/{exp_id}/resume")
    assert response.status_code == 201, response.text
    resumed = service.wait_status(response.json()["id"], {"succeeded", "failed", "stopped"}, 120)
    assert resumed["status"] == "succeeded", (resumed["error"], resumed["log_tail"])
    resumed_steps = service.metric_steps(resumed["id"])
    assert resumed_steps[0] > exp["env_steps"]  # counters continue from the checkpoint
    logs = service.http.get(f"/experiments/{resumed['id']}/logs").json()["lines"]
    assert any("resuming from checkpoint" in line for line in logs)


def test_stopping_a_running_experiment_saves_a_final_checkpoint(service: LiveService) -> None:
    exp_id = service.submit(ENDLESS, name="to be stopped")
    wait_for(lambda: len(service.metric_steps(exp_id)) >= 2, 90, "two iterations")
    response = service.http.post(f"/experiments/{exp_id}/stop")
    assert response.status_code == 200 and response.json()["status"] == "stopping"

    exp = service.wait_status(exp_id, {"stopped", "failed", "succeeded"}, 90)
    assert exp["status"] == "stopped", (exp["error"], exp["log_tail"])
    events = [e["to_status"] for e in exp["events"]]
    assert events[-2:] == ["stopping", "stopped"]
    assert exp["events"][-1]["reason"] == "stopped by request"  # reported by the job itself
    checkpoints = service.http.get(f"/experiments/{exp_id}/checkpoints").json()
    # checkpoint_every=0: the only checkpoint is the final one written on SIGTERM.
    assert len(checkpoints) == 1
    assert checkpoints[0]["env_steps"] == service.metric_steps(exp_id)[-1]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"env_config": {"no_such_argument": 1}}, "no_such_argument"),
        ({"env_id": "nosuchmodule:Foo-v0"}, "cannot import module 'nosuchmodule'"),
    ],
    ids=["env-raises", "unknown-env-module"],
)
def test_a_failing_experiment_ends_failed_with_its_error(
    service: LiveService, override: dict[str, Any], expected: str
) -> None:
    exp_id = service.submit({**QUICK, **override}, name="broken")
    exp = service.wait_status(exp_id, {"failed", "succeeded", "stopped"}, 90)
    assert exp["status"] == "failed", (exp["events"][-1], exp["error"])
    assert expected in exp["error"]
    assert "Traceback" in exp["log_tail"]
    assert exp["events"][-1]["reason"] == "job raised"


def test_a_user_registered_env_that_crashes_fails_the_experiment_with_its_log(
    service: LiveService,
) -> None:
    # "module:EnvId": the job imports tests.service.failing_env (from its working directory,
    # the project root) to register the env; 8 sub-envs x 128 steps per iteration, so each
    # sub-env crashes in the third iteration, after two have reported their metrics.
    config = {
        **QUICK,
        "env_id": f"tests.service.failing_env:{failing_env.ENV_ID}",
        "env_config": {"crash_after_steps": 300},
    }
    exp_id = service.submit(config, name="custom env")
    exp = service.wait_status(exp_id, {"failed", "succeeded", "stopped"}, 90)
    assert exp["status"] == "failed", (exp["events"][-1], exp["error"])
    assert failing_env.CRASH_MESSAGE in exp["error"] and "RuntimeError" in exp["error"]
    assert exp["events"][-1]["reason"] == "job raised"
    assert "Traceback" in exp["log_tail"] and "failing_env.py" in exp["log_tail"]
    assert len(service.metric_steps(exp_id)) == 2  # the env loaded and ran until it crashed


def test_experiments_that_do_not_fit_together_run_one_after_the_other(
    service: LiveService, ray_head: LocalRayHead
) -> None:
    # Driver (1 CPU) + one 2-CPU EnvRunner = 3 of the cluster's 4 CPUs: only one fits at a time.
    big = {**QUICK, "num_env_runners": 1, "num_cpus_per_env_runner": 2.0}
    big["stop"] = {"env_steps": 3072}
    first, second = service.submit(big, name="big 1"), service.submit(big, name="big 2")
    exp = service.wait_status(first, {"running"}, 30)
    # While the first runs, the second waits (pending until the reconciler's next tick, then
    # queued). Read the second before the first: a "running" second read earlier than a
    # "running" first would be a real overlap, never a race of the two reads.
    deadline = time.monotonic() + 120
    while True:
        second_status = service.experiment(second)["status"]
        if service.experiment(first)["status"] != "running":
            break
        assert second_status in {"pending", "queued"}
        assert time.monotonic() < deadline, "the first experiment did not finish in 120 s"
        time.sleep(0.25)
    first_done = service.wait_status(first, {"succeeded", "failed", "stopped"}, 120)
    assert first_done["status"] == "succeeded", first_done["error"]
    second_done = service.wait_status(second, {"succeeded", "failed", "stopped"}, 120)
    assert second_done["status"] == "succeeded", second_done["error"]
    assert second_done["started_at"] >= first_done["finished_at"]
    assert exp["ray_job_id"] != second_done["ray_job_id"]

    cluster = service.http.get("/cluster").json()
    assert cluster["resources"]["CPU"]["total"] == 4
    assert cluster["running"] == []


def test_a_restarted_service_finds_its_experiments_again(
    service: LiveService, ray_head: LocalRayHead, data_dir: Path
) -> None:
    exp_id = service.submit(ENDLESS, name="survives a restart")
    wait_for(lambda: len(service.metric_steps(exp_id)) >= 1, 90, "first iteration")
    before = service.http.get("/experiments", params={"limit": 500}).json()["items"]
    service.stop()  # the API goes away; the job keeps training on the external cluster
    ghost = add_running_experiment_without_job(service.settings)

    again = LiveService(make_settings(data_dir, ray_head.address, service.settings.port))
    again.start()
    service.http = again.http  # the module fixture's cleanup talks to the new instance
    service.thread = again.thread
    service.server = again.server
    after = again.http.get("/experiments", params={"limit": 500}).json()["items"]
    assert [(e["id"], e["name"]) for e in after if e["id"] != ghost] == [
        (e["id"], e["name"]) for e in before
    ]
    # An experiment marked running whose Ray job is gone is failed, saying why.
    gone = again.wait_status(ghost, {"failed"}, 30)
    assert "does not exist" in gone["error"]
    # Its Ray job still runs, so it stays running, and keeps reporting to the new instance.
    steps = len(again.metric_steps(exp_id))
    wait_for(lambda: len(again.metric_steps(exp_id)) > steps, 60, "metrics after the restart")
    assert again.experiment(exp_id)["status"] == "running"
    again.http.post(f"/experiments/{exp_id}/stop")
    assert again.wait_status(exp_id, {"stopped", "failed"}, 90)["status"] == "stopped"


def driver_pid(ray_head: LocalRayHead, live: LiveService, exp_id: int) -> int | None:
    """The pid of this experiment's job driver (a descendant of the test's Ray head)."""
    assert ray_head.process is not None
    wanted = {f"ROLLOUT_EXPERIMENT_ID={exp_id}", f"ROLLOUT_API_URL={live.url}"}
    for pid in descendants(ray_head.process.pid):
        try:
            environ = set(Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0"))
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        argv = cmdline.split(b"\0")
        if argv[-2:] == [b"trainer.job", b""] and b"python" in argv[0] and wanted <= environ:
            return pid  # the Python process itself, not the shell Ray wraps it in
    return None


def test_a_job_that_dies_without_reporting_fails_with_rays_log(
    service: LiveService, ray_head: LocalRayHead
) -> None:
    exp_id = service.submit(ENDLESS, name="killed")
    wait_for(lambda: len(service.metric_steps(exp_id)) >= 1, 90, "first iteration")
    pid = driver_pid(ray_head, service, exp_id)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would

    exp = service.wait_status(exp_id, {"failed", "stopped", "succeeded"}, 60)
    assert exp["status"] == "failed", (exp["events"][-1], exp["error"])
    assert (
        "failed" in exp["events"][-1]["reason"] and exp["ray_job_id"] in exp["events"][-1]["reason"]
    )
    assert "exit code" in exp["error"], exp["error"]  # Ray's message
    assert f"experiment {exp_id}, job dir" in exp["log_tail"]  # the tail of the Ray job log
