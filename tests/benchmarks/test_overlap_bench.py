"""benchmarks/overlap.py end to end with a fake `rollout train`: both variants interleaved,
the overlapped one started with `--set overlap_sampling=true`, table and JSON report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import overlap
from benchmarks.contenders import Contender

# Reaches the target after 3 iterations off, 5 with overlap (so the two are told apart).
FAKE_ROLLOUT = """#!{python}
import argparse, json, pathlib, time
p = argparse.ArgumentParser()
p.add_argument("command")
p.add_argument("--env")
p.add_argument("--stop-return", type=float)
p.add_argument("--seed", type=int)
p.add_argument("--set", action="append", default=[])
p.add_argument("--out", type=pathlib.Path)
args = p.parse_args()
args.out.mkdir(parents=True)
on = "overlap_sampling=true" in args.set
(args.out / "flags.json").write_text(json.dumps(args.set))
start = time.monotonic()
with (args.out / "metrics.jsonl").open("a") as f:
    for i in range(1, 7):
        time.sleep(0.05)
        ret = 100.0 * i / (5 if on else 3)
        f.write(json.dumps({{
            "env_steps": 1000 * i, "episodes": 100 * i, "episode_return_mean": ret,
            "time_s": time.monotonic() - start, "time_iteration_s": 0.05,
            "time_sample_s": 0.01, "time_gae_s": 0.001, "time_sgd_s": 0.03,
            "time_weight_sync_s": 0.001,
        }}) + "\\n")
        f.flush()
time.sleep(60)
"""


def test_overlap_benchmark_runs_both_variants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rollout = tmp_path / "rollout"
    rollout.write_text(FAKE_ROLLOUT.format(python=sys.executable))
    rollout.chmod(0o755)
    fake = Contender("rollout", "rollout", rollout, "fake Rollout")
    monkeypatch.setitem(overlap.CONTENDERS, "rollout", fake)
    report_path = tmp_path / "overlap.json"
    argv = ["--seeds", "0,1", "--target", "100", "--timeout", "30"]
    argv += ["--json", str(report_path), "--results-dir", str(tmp_path / "results")]
    assert overlap.main(argv) == 0

    report = json.loads(report_path.read_text())
    order = [(r["contender"], r["seed"]) for r in report["runs"]]
    assert order == [(overlap.OFF, 0), (overlap.ON, 0), (overlap.OFF, 1), (overlap.ON, 1)]
    steps = {r["contender"]: r["env_steps"] for r in report["runs"]}
    assert steps == {overlap.OFF: 3000, overlap.ON: 5000}
    assert all(r["reached"] and r["wall_s"] < 30 for r in report["runs"])
    flags = sorted((tmp_path / "results").glob("overlap-*/*/out/flags.json"))
    by_run = {p.parent.parent.name: json.loads(p.read_text()) for p in flags}
    assert by_run["rollout-s0"] == [] and by_run["rollout-overlap-s0"] == ["overlap_sampling=true"]
    assert report["summary"][overlap.ON]["time_ratio_to_rollout"] > 1.0
    printed = capsys.readouterr().out
    assert "overlap_sampling off" in printed and "+ overlap_sampling" in printed
