"""time_to_target.main end to end with fake contenders: a fake `rollout train` that writes
metrics.jsonl lines and a fake peer; checks the interleaving, the JSON report and the table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import time_to_target
from benchmarks.contenders import PEER_SCRIPTS, Contender

FAKE_ROLLOUT = """#!{python}
import argparse, json, pathlib, time
p = argparse.ArgumentParser()
p.add_argument("command")
p.add_argument("--env")
p.add_argument("--stop-return", type=float)
p.add_argument("--seed", type=int)
p.add_argument("--out", type=pathlib.Path)
p.add_argument("--set", action="append", default=[])
args = p.parse_args()
args.out.mkdir(parents=True)
(args.out / "set.json").write_text(json.dumps(args.set))
start = time.monotonic()
with (args.out / "metrics.jsonl").open("a") as f:
    for i in range(1, 6):
        time.sleep(0.05)
        f.write(json.dumps({{
            "env_steps": 1000 * i, "episodes": 40 * i, "episode_return_mean": 100.0 * i,
            "time_s": time.monotonic() - start, "time_iteration_s": 0.05,
            "time_sample_s": 0.01, "time_gae_s": 0.001, "time_sgd_s": 0.03,
            "time_weight_sync_s": 0.001,
        }}) + "\\n")
        f.flush()
time.sleep(60)
"""

FAKE_PEER = """
import argparse, sys, time
sys.path.insert(0, {peers!r})
from episode_report import EpisodeReport
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int)
p.add_argument("--target", type=float)
args = p.parse_args()
report = EpisodeReport(args.target)
for i in range(100):
    report.episode(300 * (i + 1), 500.0)
time.sleep(60)
"""


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rollout = tmp_path / "rollout"
    rollout.write_text(FAKE_ROLLOUT.format(python=sys.executable))
    rollout.chmod(0o755)
    peer = tmp_path / "peer.py"
    peer.write_text(FAKE_PEER.format(peers=str(PEER_SCRIPTS)))
    contenders = {
        "rollout": Contender("rollout", "rollout", rollout, "fake Rollout"),
        "sb3": Contender("sb3", "episodes", Path(sys.executable), "fake SB3", peer),
    }
    monkeypatch.setattr(time_to_target, "CONTENDERS", contenders)
    return tmp_path


def test_main_interleaves_and_reports(fakes: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = fakes / "report.json"
    argv = ["--peers", "sb3", "--seeds", "0,1", "--timeout", "30"]
    argv += ["--json", str(out), "--results-dir", str(fakes / "results")]
    assert time_to_target.main(argv) == 0

    report = json.loads(out.read_text())
    order = [(r["contender"], r["seed"]) for r in report["runs"]]
    assert order == [("rollout", 0), ("sb3", 0), ("rollout", 1), ("sb3", 1)]
    rollout_runs = [r for r in report["runs"] if r["contender"] == "rollout"]
    assert all(r["reached"] and r["env_steps"] == 5000 for r in rollout_runs)
    assert all(r["phases"]["time_sgd_s"] == pytest.approx(0.15) for r in rollout_runs)
    assert all(r["wall_s"] < 30 for r in report["runs"])  # stopped at the crossing
    assert report["summary"]["sb3"]["reached"] == 2
    assert report["summary"]["sb3"]["time_ratio_to_rollout"] > 0
    printed = capsys.readouterr().out
    assert "| fake Rollout |" in printed and "| fake SB3 |" in printed
    assert "goal >= 3x" in printed and "Rollout time split" in printed


def test_main_refuses_missing_executables(
    fakes: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = Contender("sb3", "episodes", fakes / "nope" / "python", "x", fakes / "peer.py")
    monkeypatch.setitem(time_to_target.CONTENDERS, "sb3", missing)
    assert time_to_target.main(["--without-rollout", "--peers", "sb3"]) == 2
    assert "make -C benchmarks peers" in capsys.readouterr().err


def test_rollout_set_reaches_rollouts_runs_only(
    fakes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = fakes / "results"
    argv = ["--peers", "sb3", "--seeds", "0", "--timeout", "30", "--results-dir", str(results)]
    argv += ["--rollout-set", "vector_env=serial", "--rollout-set", "lr=0.001"]
    assert time_to_target.main(argv) == 0
    (run,) = results.iterdir()
    overrides = json.loads((run / "rollout-s0" / "out" / "set.json").read_text())
    assert overrides == ["vector_env=serial", "lr=0.001"]
    assert "| fake Rollout, --set vector_env=serial lr=0.001 |" in capsys.readouterr().out
