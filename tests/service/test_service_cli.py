"""`rollout` service commands against a live uvicorn (a subprocess on a free port)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli import main
from app.core.db import make_engine, make_sessionmaker, transaction
from app.experiments import service as experiments
from app.jobs.ray_head import free_ports
from tests.serve_process import rollout_serve
from tests.service.conftest import SMALL_CONFIG

pytestmark = pytest.mark.timeout(120)


@contextlib.contextmanager
def running_service(
    data_dir: Path, port: int, token: str | None = None, log: list[str] | None = None
) -> Iterator[str]:
    """`rollout serve` with jobs off; SIGINT on exit, which must end it cleanly. Its log
    (uvicorn's, access lines included) is appended to `log` once it has stopped."""
    env = {
        "ROLLOUT_JOBS_ENABLED": "false",
        "ROLLOUT_FRONTEND_DIR": str(data_dir / "no-frontend"),
        "ROLLOUT_API_TOKEN": token,
        "ROLLOUT_DATABASE_URL": None,
    }
    with rollout_serve(data_dir, port=port, env=env, stop_timeout_s=20) as served:
        yield served.url
    assert served.proc.returncode == 0, served.log_path.read_text()[-2000:]
    if log is not None:
        log.append(served.log_path.read_text())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("serve")
    with running_service(data_dir, free_ports(1)[0]) as url:
        yield url, data_dir


def _token(data_dir: Path, experiment_id: int) -> str:
    engine = make_engine(f"sqlite:///{data_dir / 'rollout.db'}")
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return experiments.issue_job_token(session, experiment_id)
    finally:
        engine.dispose()


def _submit(url: str, tmp_path: Path, capsys, name: str = "cli") -> int:
    config = tmp_path / "config.yaml"
    config.write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in SMALL_CONFIG.items()))
    assert main(["submit", str(config), "--name", name, "--tag", "cli", "--url", url]) == 0
    return int(capsys.readouterr().out.strip())


def test_submit_list_stop(server, tmp_path, capsys):
    url, _ = server
    exp_id = _submit(url, tmp_path, capsys)
    assert main(["list", "--url", url, "--tag", "cli"]) == 0
    listing = capsys.readouterr().out
    assert str(exp_id) in listing and "pending" in listing
    assert main(["stop", str(exp_id), "--url", url]) == 0
    assert "stopped" in capsys.readouterr().out
    assert main(["stop", str(exp_id), "--url", url]) == 1
    assert "already ended" in capsys.readouterr().err


def test_submit_invalid_config_shows_fields(server, tmp_path, capsys):
    url, _ = server
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"lr": -1, "gamma": 2}))
    assert main(["submit", str(config), "--url", url]) == 1
    err = capsys.readouterr().err
    assert "error 422" in err and "config.lr" in err and "config.gamma" in err
    assert "Traceback" not in err


def test_submit_and_fork_take_evaluation_every_beside_the_config(server, tmp_path, capsys):
    url, _ = server
    doc = tmp_path / "filmed.yaml"
    doc.write_text("name: filmed\nevaluation_every: 3\nconfig:\n  env_id: CartPole-v1\n")
    assert main(["submit", str(doc), "--url", url]) == 0
    exp_id = int(capsys.readouterr().out)
    assert main(["submit", str(doc), "--url", url, "--evaluation-every", "0"]) == 0
    plain_id = int(capsys.readouterr().out)
    assert main(["fork", str(exp_id), "--url", url, "--evaluation-every", "7"]) == 0
    fork_id = int(capsys.readouterr().out)
    with httpx.Client(base_url=f"{url}/api/v1") as api:
        every = [api.get(f"/experiments/{i}").json()["evaluation_every"] for i in
                 (exp_id, plain_id, fork_id)]  # fmt: skip
    assert every == [3, 0, 7]
    old = tmp_path / "old.yaml"
    old.write_text("env_id: CartPole-v1\nevaluation_every: 3\n")
    assert main(["submit", str(old), "--url", url]) == 1
    err = capsys.readouterr().err
    assert "config.evaluation_every" in err and "beside `config`" in err
    assert "Traceback" not in err


def test_watch_follows_until_success_and_download(server, tmp_path, capsys):
    url, data_dir = server
    exp_id = _submit(url, tmp_path, capsys, name="watched")
    token = _token(data_dir, exp_id)
    job = httpx.Client(
        base_url=f"{url}/api/v1/jobs/experiments/{exp_id}",
        headers={"Authorization": f"Bearer {token}"},
    )
    job.post("/status", json={"status": "running"}).raise_for_status()
    result: dict[str, int] = {}
    watcher = threading.Thread(
        target=lambda: result.update(rc=main(["watch", str(exp_id), "--url", url]))
    )
    watcher.start()
    time.sleep(1.0)
    rows = [{"step": 5000, "time_s": 1.0, "values": {"episode_return_mean": 42.5}}]
    job.post("/metrics", json={"rows": rows}).raise_for_status()
    job.put(
        "/checkpoints",
        params={"iteration": 1, "env_steps": 5000, "episode_return_mean": 42.5},
        content=b"archive-bytes",
    ).raise_for_status()
    time.sleep(0.5)
    job.post("/status", json={"status": "succeeded", "reason": "target reached"}).raise_for_status()
    watcher.join(timeout=30)
    assert not watcher.is_alive() and result["rc"] == 0
    out = capsys.readouterr().out
    assert "env_steps 5000/10000" in out and "42.50" in out and "status: succeeded" in out

    target = tmp_path / "best.tar.gz"
    assert main(["download", str(exp_id), "-o", str(target), "--url", url]) == 0
    assert target.read_bytes() == b"archive-bytes"
    assert (
        main(["download", str(exp_id), "--checkpoint", "77", "-o", str(target), "--url", url]) == 1
    )


def test_watch_with_a_token_and_the_server_log(tmp_path, capsys):
    """The token stays out of the server log; the log has the experiment's events, and the
    job's successful calls are not in its access lines (their errors are)."""
    token = "cli-s3cret-token"
    log: list[str] = []
    with running_service(tmp_path, free_ports(1)[0], token=token, log=log) as url:
        exp_id = _submit_with_token(url, tmp_path, capsys, token)
        job = httpx.Client(
            base_url=f"{url}/api/v1/jobs/experiments/{exp_id}",
            headers={"Authorization": f"Bearer {_token(tmp_path, exp_id)}"},
        )
        job.post("/status", json={"status": "running"}).raise_for_status()
        result: dict[str, int] = {}
        args = ["watch", str(exp_id), "--url", url, "--token", token]
        watcher = threading.Thread(target=lambda: result.update(rc=main(args)))
        watcher.start()
        time.sleep(1.0)
        rows = [{"step": 5000, "time_s": 1.0, "values": {"episode_return_mean": 42.5}}]
        job.post("/metrics", json={"rows": rows}).raise_for_status()
        job.post("/status", json={"status": "succeeded"}).raise_for_status()
        watcher.join(timeout=30)
        assert not watcher.is_alive() and result["rc"] == 0
        assert "status: succeeded" in capsys.readouterr().out
        assert job.post("/status", json={"status": "bogus"}).status_code == 422
    [text] = log
    assert f"/api/v1/experiments/{exp_id}/stream" in text  # the websocket was logged...
    assert token not in text  # ...without the token
    for event in ("pending: created", "running: ", "succeeded: "):
        assert f"INFO:     experiment {exp_id} {event}" in text, event
    job_lines = [line for line in text.splitlines() if "/api/v1/jobs/" in line]
    assert len(job_lines) == 1 and "422" in job_lines[0], job_lines


def _submit_with_token(url: str, tmp_path: Path, capsys, token: str) -> int:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMALL_CONFIG))
    assert main(["submit", str(config), "--url", url, "--token", token]) == 0
    return int(capsys.readouterr().out.strip())


def test_unreachable_service_is_a_clear_message(capsys):
    port = free_ports(1)[0]
    assert main(["list", "--url", f"http://127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the Rollout service" in err and "Traceback" not in err


def test_serve_refuses_non_loopback_without_token(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("ROLLOUT_API_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]) == 2
    assert "refusing to listen on 0.0.0.0" in capsys.readouterr().err


def test_watch_resumes_after_the_service_restarts(tmp_path, capsys):
    data_dir, port = tmp_path / "data", free_ports(1)[0]
    data_dir.mkdir()
    with running_service(data_dir, port) as url:
        exp_id = _submit(url, tmp_path, capsys, name="restarted")
        token = _token(data_dir, exp_id)
        job = httpx.Client(base_url=f"{url}/api/v1/jobs/experiments/{exp_id}")
        job.headers["Authorization"] = f"Bearer {token}"
        job.post("/status", json={"status": "running"}).raise_for_status()
        result: dict[str, int] = {}
        watcher = threading.Thread(
            target=lambda: result.update(rc=main(["watch", str(exp_id), "--url", url]))
        )
        watcher.start()
        time.sleep(1.0)
    # the service is down; the watcher keeps trying, then finds it again on the same port
    with running_service(data_dir, port):
        rows = [{"step": 2500, "time_s": 1.0, "values": {"episode_return_mean": 7.0}}]
        job.post("/metrics", json={"rows": rows}).raise_for_status()
        job.post("/status", json={"status": "succeeded"}).raise_for_status()
        watcher.join(timeout=45)
    assert not watcher.is_alive() and result["rc"] == 0
    out = capsys.readouterr().out
    assert "env_steps 2500/10000" in out and "status: succeeded" in out


def test_sweep_submit_show_stop(server, tmp_path, capsys):
    url, data_dir = server
    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(
        "name: cli sweep\n"
        f"config: {json.dumps(SMALL_CONFIG)}\n"
        "grid: {lr: [0.001, 0.0003]}\n"
        "seeds: [0, 1]\n"
        "max_parallel: 1\n"
    )
    assert main(["sweep", "submit", str(sweep_file), "--url", url]) == 0
    out = capsys.readouterr().out
    assert "4 experiments in 2 groups" in out
    sweep_id = int(out.split()[1].rstrip(":"))
    members = httpx.get(f"{url}/api/v1/sweeps/{sweep_id}").json()["members"]
    token = _token(data_dir, members[2]["id"])
    job = httpx.Client(
        base_url=f"{url}/api/v1/jobs/experiments/{members[2]['id']}",
        headers={"Authorization": f"Bearer {token}"},
    )
    job.post("/status", json={"status": "running"}).raise_for_status()
    rows = [{"step": 1000, "time_s": 1.0, "values": {"episode_return_mean": 77.0}}]
    job.post("/metrics", json={"rows": rows}).raise_for_status()
    assert main(["sweep", "show", str(sweep_id), "--url", url]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "cli sweep" in shown[0] and "3 pending" in shown[0] and "1 running" in shown[0]
    assert "lr=0.0003" in shown[2] and "77.00" in shown[2] and "1/2" in shown[2]  # ranked first
    assert "lr=0.001" in shown[3] and " 0/2" in shown[3]
    assert main(["sweep", "stop", str(sweep_id), "--url", url]) == 0
    assert "3 stopped, 1 stopping" in capsys.readouterr().out


def test_sweep_submit_errors_are_clear(server, tmp_path, capsys):
    url, _ = server
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ngrid: {learning_rate: [0.1]}\nseeds: [0, 0]\n")
    assert main(["sweep", "submit", str(bad), "--url", url]) == 1
    err = capsys.readouterr().err
    assert "error 422" in err and "grid.learning_rate" in err and "seeds" in err
    stray = tmp_path / "stray.yaml"
    stray.write_text("lr: 0.1\n")
    assert main(["sweep", "submit", str(stray), "--url", url]) == 2
    assert "unknown keys lr" in capsys.readouterr().err
    assert main(["sweep", "show", "999", "--url", url]) == 1
    assert "sweep 999 does not exist" in capsys.readouterr().err


def test_show_fork_wait_delete(server, tmp_path, capsys):
    url, _ = server
    exp_id = _submit(url, tmp_path, capsys, name="shown")
    assert main(["show", str(exp_id), "--url", url]) == 0
    out = capsys.readouterr().out
    assert f"experiment {exp_id}: shown" in out and "status      pending" in out
    assert "-> pending: " in out  # the timeline

    args = ["fork", str(exp_id), "--set", "lr=0.001", "--set", "stop.env_steps=5000"]
    assert main([*args, "--name", "forked", "--url", url]) == 0
    fork_id = int(capsys.readouterr().out.strip())
    assert main(["show", str(fork_id), "--json", "--url", url]) == 0
    forked = json.loads(capsys.readouterr().out)
    assert forked["parent_id"] == exp_id and forked["name"] == "forked"
    assert forked["config"]["lr"] == 0.001 and forked["config"]["stop"]["env_steps"] == 5000
    assert main(["fork", str(exp_id), "--set", "lr=-1", "--url", url]) == 1
    assert "config.lr" in capsys.readouterr().err
    assert main(["fork", str(exp_id), "--set", "lr", "--url", url]) == 2
    assert "expected FIELD=VALUE" in capsys.readouterr().err

    assert main(["wait", str(fork_id), "--timeout", "0.5", "--url", url]) == 3
    assert "still pending" in capsys.readouterr().err
    assert main(["resume", str(exp_id), "--url", url]) == 1
    assert "error 409" in capsys.readouterr().err
    assert main(["delete", str(exp_id), "--url", url]) == 1  # not finished
    assert main(["stop", str(exp_id), "--url", url]) == 0
    assert main(["wait", str(exp_id), "--url", url]) == 1  # ended, but not succeeded
    assert "status: stopped" in capsys.readouterr().out
    assert main(["delete", str(exp_id), "--url", url]) == 0
    assert "deleted" in capsys.readouterr().out
    assert main(["show", str(exp_id), "--url", url]) == 1
    assert "error 404" in capsys.readouterr().err


def test_presets_and_evaluate_remote(server, tmp_path, capsys):
    url, data_dir = server
    assert main(["presets", "--url", url]) == 0
    assert "classic_control" in capsys.readouterr().out
    config = tmp_path / "acrobot.json"
    config.write_text(json.dumps({"env_id": "Acrobot-v1"}))
    assert main(["presets", "--resolve", str(config), "--url", url]) == 0
    out = capsys.readouterr().out
    assert "preset: classic_control + Acrobot" in out and '"num_epochs": 4' in out

    exp_id = _submit(url, tmp_path, capsys, name="evaluated")
    assert main(["evaluate-remote", str(exp_id), "--url", url]) == 1
    assert "error 409" in capsys.readouterr().err  # no checkpoint yet
    job = httpx.Client(base_url=f"{url}/api/v1/jobs/experiments/{exp_id}")
    job.headers["Authorization"] = f"Bearer {_token(data_dir, exp_id)}"
    job.put("/checkpoints", params={"iteration": 1, "env_steps": 100}, content=b"x")
    args = ["evaluate-remote", str(exp_id), "--episodes", "3", "--url", url]
    assert main([*args, "--no-wait"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("evaluation ") and "(iteration 1), 3 episodes" in out
    # Jobs are off in this service: the evaluation stays pending until the wait runs out.
    assert main([*args, "--timeout", "0.5"]) == 3
    assert "still pending" in capsys.readouterr().err
    assert main([*args, "--episodes", "0"]) == 1
    assert "episodes" in capsys.readouterr().err
