"""The one `rollout` command tree (app/cli.py), in-process against the real app (the ASGI
test client stands in for the service): global flags before the command, every command in
`--help`, one file reader for `submit` (bare configs and `{name, tags, config}`), resume with
new stop criteria, `logs`, `sweep list` / `sweep delete`, a closed pipe ends quietly."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.client import RolloutClient
from tests.service.conftest import SMALL_CONFIG

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def rollout(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """`rollout ARGS...` with its client on the test app; the URL it was given is recorded."""
    urls: list[str] = []

    def connect(url: str, token: str | None = None) -> RolloutClient:
        urls.append(url)
        return RolloutClient("http://testserver", token, http=client)

    monkeypatch.setattr(cli, "RolloutClient", connect)

    def run(*args: str) -> int:
        return cli.main(list(args))

    run.urls = urls  # type: ignore[attr-defined]
    return run


def test_global_flags_go_before_or_after_the_command(rollout, capsys):
    assert rollout("--url", "http://before:1", "list") == 0
    assert rollout("list", "--url", "http://after:2") == 0
    assert rollout("--url", "http://before:3", "sweep", "list") == 0
    assert rollout.urls == ["http://before:1", "http://after:2", "http://before:3"]
    assert cli.build_parser().parse_args(["--token", "t", "show", "1"]).token == "t"


def test_help_lists_every_command_and_parsing_loads_no_torch():
    helptext = cli.build_parser().format_help()
    for command in ("serve", "submit", "logs", "resume", "sweep", "study", "train", "evaluate"):
        assert f"\n    {command} " in helptext, command
    code = (
        "import sys, app.cli; app.cli.build_parser().parse_args(['train', '--out', 'x']); "
        "print(','.join(m for m in ('torch', 'gymnasium', 'ray') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_submit_reads_a_submission_document_and_a_bare_config(rollout, client, tmp_path, capsys):
    doc = tmp_path / "doc.yaml"
    doc.write_text(
        f"name: from the form\ntags: [saved, form]\nconfig: {json.dumps(SMALL_CONFIG)}\n"
    )
    assert rollout("submit", str(doc)) == 0
    exp = client.get(f"/api/v1/experiments/{capsys.readouterr().out.strip()}").json()
    assert exp["name"] == "from the form" and exp["tags"] == ["form", "saved"]
    assert exp["config"]["train_batch_size_per_learner"] == 256
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(SMALL_CONFIG))
    assert rollout("submit", str(bare), "--tag", "cli") == 0
    exp = client.get(f"/api/v1/experiments/{capsys.readouterr().out.strip()}").json()
    assert exp["name"] == "bare" and exp["tags"] == ["cli"]

    (tmp_path / "empty.yaml").write_text("\n")
    assert rollout("submit", str(tmp_path / "empty.yaml")) == 2
    assert "empty.yaml is empty" in capsys.readouterr().err
    (tmp_path / "stray.json").write_text(json.dumps({"config": SMALL_CONFIG, "lr": 0.1}))
    assert rollout("submit", str(tmp_path / "stray.json")) == 2
    assert "unknown keys lr next to `config`" in capsys.readouterr().err


def test_resume_takes_new_stop_criteria(rollout, client, create_experiment, job_token, capsys):
    exp = create_experiment("done")
    client.put(
        f"/api/v1/jobs/experiments/{exp['id']}/checkpoints",
        params={"iteration": 4, "env_steps": 10_000},
        content=b"ckpt",
        headers={"Authorization": f"Bearer {job_token(exp['id'])}"},
    ).raise_for_status()
    assert rollout("resume", str(exp["id"]), "--stop-steps", "50000", "--stop-return", "400") == 0
    new = client.get(f"/api/v1/experiments/{capsys.readouterr().out.strip()}").json()
    assert new["config"]["stop"]["env_steps"] == 50_000
    assert new["config"]["stop"]["episode_return_mean"] == 400.0
    assert new["resume_from_checkpoint_id"] is not None and new["parent_id"] == exp["id"]
    # Without flags, the source's criteria: this run is already at its 10,000-step budget, so
    # that is refused with the reason (it would train one iteration); a bad one is a 422 too.
    assert rollout("resume", str(exp["id"])) == 1
    said = capsys.readouterr().err
    assert "stop.env_steps" in said and "already at the budget of 10,000" in said
    bad = client.post(f"/api/v1/experiments/{exp['id']}/resume", json={"stop": {"steps": 5}})
    assert bad.status_code == 422 and "config.stop.steps" in bad.text
    assert rollout("resume", str(exp["id"]), "--stop-steps", "-5") == 1
    assert "config.stop.env_steps" in capsys.readouterr().err


def test_logs_and_sweep_list_and_delete(rollout, client, job_token, capsys):
    body = {"name": "tiny", "config": SMALL_CONFIG, "grid": {"lr": [0.001]}, "seeds": [0]}
    sweep = client.post("/api/v1/sweeps", json=body).json()
    member = sweep["members"][0]["id"]
    client.post(
        f"/api/v1/jobs/experiments/{member}/logs",
        json={"lines": ["hello from the job", "second line"]},
        headers={"Authorization": f"Bearer {job_token(member)}"},
    ).raise_for_status()
    assert rollout("logs", str(member), "--tail", "1") == 0
    assert capsys.readouterr().out == "second line\n"
    assert rollout("sweep", "list") == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].split()[:3] == [str(sweep["id"]), sweep["status"], "1"], listing
    assert listing[1].endswith("tiny")
    assert rollout("sweep", "delete", str(sweep["id"])) == 1  # a member has not ended
    assert "error 409" in capsys.readouterr().err
    assert rollout("sweep", "stop", str(sweep["id"])) == 0
    assert rollout("sweep", "delete", str(sweep["id"])) == 0
    assert f"sweep {sweep['id']}: deleted" in capsys.readouterr().out
    assert client.get(f"/api/v1/sweeps/{sweep['id']}").status_code == 404


def test_a_closed_pipe_ends_quietly(tmp_path: Path):
    """`rollout show 1 | head`: the reader leaves early; no BrokenPipe traceback."""
    script = tmp_path / "many_lines.py"
    script.write_text(
        "import sys\n"
        "import app.cli, app.commands.experiments as commands\n"
        "def many(args, client):\n"
        "    for i in range(100_000):\n"
        "        print('row', i)\n"
        "    return 0\n"
        "commands.cmd_list = many\n"
        "sys.exit(app.cli.main(['list']))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"row 0\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == cli.EXIT_BROKEN_PIPE
    assert err == ""


def test_metrics_export_has_every_point_as_csv_and_json(
    rollout, client, create_experiment, job_token, monkeypatch, tmp_path, capsys
):
    exp = create_experiment("export")
    rows = [
        {"step": 100 * i, "time_s": float(i), "values": {"episode_return_mean": i * 1.5}}
        for i in range(1, 11)
    ]
    rows[4]["values"]["kl"] = 0.25  # a series with one point: empty cells elsewhere
    client.post(
        f"/api/v1/jobs/experiments/{exp['id']}/metrics",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {job_token(exp['id'])}"},
    ).raise_for_status()
    # The service thins any series longer than this in one response; the export still has all.
    monkeypatch.setattr("app.metrics.service.MAX_POINTS_PER_SERIES", 4)
    thinned = client.get(f"/api/v1/experiments/{exp['id']}/metrics").json()
    assert thinned["downsampled"]["episode_return_mean"]
    assert rollout("metrics", str(exp["id"]), "--csv") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "step,episode_return_mean,kl,time_s"
    assert lines[1:] == [
        f"{100 * i},{i * 1.5!r},{'0.25' if i == 5 else ''},{float(i)!r}" for i in range(1, 11)
    ]
    out = tmp_path / "m.json"
    names = "episode_return_mean,time_s"
    assert rollout("metrics", str(exp["id"]), "--json", "--names", names, "-o", str(out)) == 0
    assert "2 series, 20 points" in capsys.readouterr().err
    body = json.loads(out.read_text())
    assert body["experiment_id"] == exp["id"] and sorted(body["series"]) == names.split(",")
    assert body["series"]["episode_return_mean"]["step"] == [100 * i for i in range(1, 11)]


def test_list_filters_by_part_of_a_tag_and_of_the_name(rollout, create_experiment, capsys):
    create_experiment("lr sweep a", tags=["Baseline"])
    create_experiment("lr sweep b", tags=["tuned"])
    create_experiment("other", tags=["baseline-2"])
    assert rollout("list", "--tag-contains", "base", "--name", "SWEEP") == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[-1] for row in rows] == ["a"], rows
