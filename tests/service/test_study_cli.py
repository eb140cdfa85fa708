"""`rollout study ...` in-process against the real app (the ASGI test client stands in for the
service), as test_cli_tree.py runs the other commands: the example study file validates and
submits, a bad file prints the 422's fields and stores nothing, list / show / best / stop /
delete. Trials come from `app.studies.service.advance` (the reconciler's call) with jobs off;
a trial completes when its run reports metrics and succeeds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app import cli
from app.client import RolloutClient
from app.core.db import transaction
from app.studies import service as studies

pytestmark = pytest.mark.timeout(120)
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "study.yaml"


@pytest.fixture
def rollout(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """`rollout ARGS...` with its client on the test app."""

    def connect(url: str, token: str | None = None) -> RolloutClient:
        return RolloutClient("http://testserver", token, http=client)

    monkeypatch.setattr(cli, "RolloutClient", connect)
    return lambda *args: cli.main(list(args))


@pytest.fixture
def advance(app: FastAPI) -> Callable[[int], None]:
    """One turn of the study's loop, as the reconciler runs it."""

    def run(study_id: int) -> None:
        with transaction(app.state.sessionmaker) as session:
            studies.advance(session, study_id)

    return run


def _submit(rollout: Callable[..., int], capsys: pytest.CaptureFixture[str], *args: str) -> int:
    assert rollout("study", "submit", str(EXAMPLE), *args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("16 trials, at most 2 at a time"), out
    study_id = int(out[0].split()[1].rstrip(":"))
    assert out[1] == (
        f"watch it: http://testserver/#/studies/{study_id} or `rollout study show {study_id}`"
    )
    return study_id


def _complete(
    client: TestClient,
    transition: Callable[..., None],
    job_token: Callable[[int], str],
    run_id: int,
    returns: list[float],
) -> None:
    """The run's job: running, one metrics row per 10,000 env steps, succeeded."""
    transition(run_id, "queued", "running")
    rows = [
        {"step": 10_000 * (i + 1), "time_s": float(i), "values": {"episode_return_mean": r}}
        for i, r in enumerate(returns)
    ]
    response = client.post(
        f"/api/v1/jobs/experiments/{run_id}/metrics",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {job_token(run_id)}"},
    )
    assert response.status_code == 200, response.text
    transition(run_id, "succeeded")


def test_the_example_study_file_validates(client: TestClient):
    body = yaml.safe_load(EXAMPLE.read_text())
    response = client.post("/api/v1/studies", json=body)
    assert response.status_code == 201, response.text
    study = response.json()
    assert study["config"]["env_id"] == "CartPole-v1" and study["n_trials"] == 16
    assert set(study["space"]) == {"lr", "clip_param", "num_epochs", "model.hidden_sizes"}
    assert study["space"]["lr"]["log"] is True
    assert study["sampler"]["kind"] == "tpe" and study["pruner"]["kind"] == "median"
    assert study["interval_env_steps"] == 5_000  # a tenth of the 50,000-step budget


def test_submit_list_and_show(rollout, client, advance, capsys):
    study_id = _submit(rollout, capsys, "--name", "from the command line")
    stored = client.get(f"/api/v1/studies/{study_id}").json()
    assert stored["name"] == "from the command line" and stored["max_parallel"] == 2

    assert rollout("study", "list") == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "STATUS", "TRIALS", "BEST", "CREATED", "NAME"]
    assert row.split()[:4] == [str(study_id), "running", "0/16", "-"], row
    assert row.endswith("from the command line")

    advance(study_id)  # suggests the first max_parallel trials
    assert rollout("study", "show", str(study_id)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"study {study_id} 'from the command line': running (2 running; 2/16 trials, "
        "at most 2 at a time)"
    )
    assert out[1] == "objective   maximize episode_return_mean (mean of the last 5)"
    assert "tpe sampler, median pruner" in out[2] and "every 5000 env steps" in out[2]
    assert out[3] == "best        - (no complete trial yet)"
    assert out[4].startswith("importances - ")
    assert out[6].split() == ["#", "STATE", "VALUE", "LATEST", "STEPS", "RUN", "PARAMS"]
    trials = client.get(f"/api/v1/studies/{study_id}").json()["trials"]
    for line, trial in zip(out[7:], trials, strict=True):
        run = str(trial["experiment_id"])
        assert line.split()[:6] == [str(trial["number"]), "running", "-", "-", "0", run], line
        for key in ("lr=", "clip_param=", "num_epochs=", "model.hidden_sizes=["):
            assert key in line, line


def test_a_bad_file_is_refused_with_its_fields_and_nothing_is_stored(
    rollout, client, tmp_path, capsys
):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\n"
        "config: {env_id: CartPole-v1, stop: {env_steps: 50000}}\n"
        "space:\n"
        "  learning_rate: {type: float, low: 0.0001, high: 0.003}\n"
        "  clip_param: {type: float, low: 0.3, high: 0.1}\n"
        "n_trials: 4\n"
        "objective: {metric: no_such_metric}\n"
    )
    assert rollout("study", "submit", str(bad)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error 422: the study is invalid"), err
    fields = dict(line.strip().split(": ", 1) for line in err.splitlines()[1:])
    assert "unknown field" in fields["space.learning_rate"], fields
    assert fields["space.clip_param.low"] == "low 0.3 > high 0.1"
    assert "not a metric trials log" in fields["objective.metric"]
    assert "Traceback" not in err

    missing = tmp_path / "missing.yaml"
    missing.write_text("name: no trials\nspace: {lr: {type: float, low: 0.001, high: 0.01}}\n")
    assert rollout("study", "submit", str(missing)) == 1
    assert "  n_trials: " in capsys.readouterr().err

    stray = tmp_path / "stray.yaml"
    stray.write_text("lr: 0.1\nspace: {}\n")
    assert rollout("study", "submit", str(stray)) == 2
    err = capsys.readouterr().err
    assert "unknown keys lr" in err and "PPO fields go under `config`" in err
    (tmp_path / "broken.yaml").write_text("space: [\n")
    assert rollout("study", "submit", str(tmp_path / "broken.yaml")) == 2
    assert "cannot parse" in capsys.readouterr().err
    assert rollout("study", "submit", str(tmp_path / "absent.json")) == 2
    assert "cannot read" in capsys.readouterr().err
    assert rollout("study", "show", "999") == 1
    assert "study 999 does not exist" in capsys.readouterr().err
    assert client.get("/api/v1/studies").json()["items"] == []
    assert client.get("/api/v1/experiments").json()["items"] == []


def test_best_stop_and_delete(rollout, client, advance, transition, job_token, capsys):
    study_id = _submit(rollout, capsys)
    advance(study_id)
    assert rollout("study", "best", str(study_id)) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: study {study_id} has no complete trial yet (running: 2 running); "
        f"see `rollout study show {study_id}`\n"
    )
    assert rollout("study", "best", "999") == 1
    assert "study 999 does not exist" in capsys.readouterr().err

    first = client.get(f"/api/v1/studies/{study_id}").json()["trials"][0]
    _complete(client, transition, job_token, first["experiment_id"], [10.0, 20.0, 30.0])
    advance(study_id)  # settles trial 0 and suggests trial 2

    assert rollout("study", "best", str(study_id)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"study {study_id}, best trial 0: 20.0000"  # the mean of the last 5
    assert lines[1].split() == ["run", str(first["experiment_id"])]
    assert lines[2].startswith("params      lr=")
    config = json.loads(out.split("config\n", 1)[1])
    assert config["lr"] == pytest.approx(first["params"]["lr"])
    assert config["model"]["hidden_sizes"] == first["params"]["model.hidden_sizes"]
    assert config["stop"]["env_steps"] == 50_000

    assert rollout("study", "best", str(study_id), "--json") == 0
    best: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert best["study_id"] == study_id and best["trial"]["number"] == 0
    assert best["trial"]["value"] == 20.0 and best["trial"]["state"] == "complete"
    assert best["trial"]["experiment_id"] == first["experiment_id"]
    assert best["config"] == config

    assert rollout("study", "show", str(study_id)) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "(1 complete, 2 running; 3/16 trials" in shown[0]
    assert shown[3].startswith(f"best        trial 0: 20.00 (run {first['experiment_id']}; lr=")
    row = shown[7].split()
    assert row[:6] == ["0", "complete", "20.00", "20.00", "30000", str(first["experiment_id"])]

    assert rollout("study", "delete", str(study_id)) == 1  # trials 1 and 2 still run
    assert "error 409" in capsys.readouterr().err
    assert rollout("study", "stop", str(study_id)) == 0
    assert capsys.readouterr().out == f"study {study_id}: stopping (1 complete, 2 running)\n"
    advance(study_id)  # their runs were waiting: stopped at once, so the study ends
    assert rollout("study", "list") == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:4] == [
        str(study_id),
        "stopped",
        "3/16",
        "20.00",
    ]
    assert rollout("study", "delete", str(study_id)) == 0
    assert capsys.readouterr().out == f"study {study_id}: deleted\n"
    assert client.get(f"/api/v1/studies/{study_id}").status_code == 404
    assert client.get(f"/api/v1/experiments/{first['experiment_id']}").status_code == 404
    assert rollout("study", "delete", str(study_id)) == 1
    assert "does not exist" in capsys.readouterr().err
