"""benchmarks/zoo_scores.py: every row trains at rl-zoo's budget from its preset alone, runs are
resumable seed by seed, and the table reads the verdicts right. The training and evaluation
processes are a stand-in `rollout` (and a stand-in SB3 peer python) here: a real run is minutes
to hours, a benchmark."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from benchmarks import zoo_scores
from trainer.resolve import resolve_config, zoo_entry

FAKE_ROLLOUT = """#!/bin/sh
# train: write metrics and say where the checkpoint is; evaluate: print the report.
if [ "$1" = train ]; then
  out=""; prev=""
  for a in "$@"; do [ "$prev" = --out ] && out="$a"; prev="$a"; done
  mkdir -p "$out/checkpoints/0001"
  echo "$@" >> "$out/../calls.txt"
  echo '{"env_steps": 20000, "episode_return_mean": 90.0}' > "$out/metrics.jsonl"
  echo "stopped: env_steps reached; checkpoint $out/checkpoints/0001"
else
  echo '{"episodes": 50, "return_mean": %(score)s, "return_std": 1.5}'
fi
"""


FAKE_SB3_PYTHON = """#!/bin/sh
# sb3_reference.py --entry JSON --env ID ...: report two episodes, then the train and score lines.
echo "$@" >> "%(calls)s"
echo '{"t": 1.0, "steps": 900, "ret": 70.0}' >> "$BENCH_REPORT"
echo '{"t": 2.0, "steps": 1900, "ret": 80.0}' >> "$BENCH_REPORT"
echo '{"done": true, "sb3": "2.9.2", "env_steps": 2048}'
echo '{"episodes": 50, "return_mean": %(score)s, "return_std": 2.0}'
"""


def _fake_sb3(tmp_path: Path, score: float) -> Path:
    script = tmp_path / "sb3-python"
    script.write_text(FAKE_SB3_PYTHON % {"score": score, "calls": tmp_path / "sb3-calls.txt"})
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _fake(tmp_path: Path, score: float) -> Path:
    script = tmp_path / "rollout"
    script.write_text(FAKE_ROLLOUT % {"score": score})
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.parametrize("row", zoo_scores.ZOO_TABLE, ids=lambda r: r.env_id)
def test_every_row_trains_at_rl_zoos_budget(row: zoo_scores.ZooRow) -> None:
    resolved = resolve_config({"env_id": row.env_id})
    assert resolved.preset != "none"
    extra = zoo_scores.budget_args(row)
    if row.env_id == "CartPole-v1":  # its preset keeps PPOConfig's defaults (1M steps)
        assert extra == ["--set", "stop.env_steps=100000"]
    else:
        assert extra == [] and resolved.config.stop.env_steps == row.budget


def test_runs_are_resumable_and_the_table_reads_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zoo_scores, "ROLLOUT", _fake(tmp_path, 91.25))
    results, work = tmp_path / "zoo.jsonl", tmp_path / "work"
    argv = ["--envs", "MountainCarContinuous-v0", "--seeds", "0,1", "--no-docs"]
    argv += ["--results", str(results), "--work", str(work)]
    assert zoo_scores.main(argv) == 0
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["env_id"], r["seed"]) for r in lines] == [
        ("MountainCarContinuous-v0", 0),
        ("MountainCarContinuous-v0", 1),
    ]
    assert lines[0]["eval_return_mean"] == 91.25 and lines[0]["env_steps"] == 20000
    assert lines[0]["command"] == "rollout train --env MountainCarContinuous-v0 --seed 0"
    calls = (work / "calls.txt").read_text().splitlines()
    assert len(calls) == 2

    # Again: both seeds are recorded, nothing is trained; a third seed is.
    assert zoo_scores.main([*argv[:3], "0,1,2", *argv[4:]]) == 0
    assert len((work / "calls.txt").read_text().splitlines()) == 3
    assert len(results.read_text().splitlines()) == 3

    table = zoo_scores.markdown(zoo_scores.summary_rows(zoo_scores.load_results(results)))
    assert "| MountainCarContinuous-v0 | 88.3 | 20,000 | 3 | 91.2 | 0.0 |" in table
    assert "| met |" in table and "Not run yet: CartPole-v1" in table


def test_a_rerun_replaces_the_seed_and_a_shortfall_is_sized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results, work = tmp_path / "zoo.jsonl", tmp_path / "work"
    argv = ["--envs", "MountainCarContinuous-v0", "--seeds", "0", "--no-docs"]
    argv += ["--results", str(results), "--work", str(work)]
    monkeypatch.setattr(zoo_scores, "ROLLOUT", _fake(tmp_path, 95.0))
    zoo_scores.main(argv)
    monkeypatch.setattr(zoo_scores, "ROLLOUT", _fake(tmp_path, 80.0))
    zoo_scores.main([*argv, "--rerun"])
    (summary,) = zoo_scores.summary_rows(zoo_scores.load_results(results))
    assert [r["eval_return_mean"] for r in summary["runs"]] == [80.0]
    assert "short by 8.3" in zoo_scores.markdown([summary])


def test_docs_section_is_written_between_its_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\n## Learning quality against rl-zoo\n\nintro\n\n## Other\n")
    row = {
        "env_id": "Pendulum-v1",
        "seed": 0,
        "date": "2026-12-03",
        "commit": "abc1234",
        "train_s": 60.0,
        "eval_return_mean": -170.0,
        "eval_return_std": 100.0,
    }
    monkeypatch.setattr(zoo_scores, "DOCS", docs)
    zoo_scores.write_docs([row])
    zoo_scores.write_docs([row, {**row, "seed": 1, "eval_return_mean": -180.0}])
    text = docs.read_text()
    assert text.count(zoo_scores.START) == 1 and "## Other" in text
    assert "| Pendulum-v1 | -172.2 | 100,000 | 2 | -175.0 | 5.0 |" in text
    assert "short by 2.8 (within one s.e.)" in text


def test_sb3_runs_the_presets_zoo_entry_and_gets_its_own_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zoo_scores, "ROLLOUT", _fake(tmp_path, 91.25))
    monkeypatch.setattr(zoo_scores, "SB3_PYTHON", _fake_sb3(tmp_path, 85.5))
    results, work = tmp_path / "zoo.jsonl", tmp_path / "work"
    argv = ["--envs", "MountainCarContinuous-v0", "--no-docs"]
    argv += ["--results", str(results), "--work", str(work)]
    assert zoo_scores.main([*argv, "--seeds", "0,1", "--trainer", "sb3"]) == 0
    (call, _) = (tmp_path / "sb3-calls.txt").read_text().splitlines()
    entry = json.loads(call.split("--entry ", 1)[1].split(" --env ")[0])
    assert entry == zoo_entry("MountainCarContinuous-v0")
    assert "--total-timesteps 20000 --evaluate 50 --eval-seed 1000" in call
    first = json.loads(results.read_text().splitlines()[0])
    assert first["trainer"] == "sb3" and first["env_steps"] == 2048
    assert first["eval_return_mean"] == 85.5 and first["train_return_mean"] == 75.0

    # SB3's seeds are not Rollout's: Rollout's seed 0 still trains, and the row shows both.
    assert zoo_scores.main([*argv, "--seeds", "0"]) == 0
    assert len((work / "calls.txt").read_text().splitlines()) == 1
    table = zoo_scores.markdown(zoo_scores.summary_rows(zoo_scores.load_results(results)))
    assert "| MountainCarContinuous-v0 | 88.3 | 20,000 | 1 | 91.2 |" in table
    assert "| met | 85.5 (s0 85.5; s1 85.5) |" in table
    assert zoo_scores.main([*argv, "--seeds", "0", "--trainer", "sb3"]) == 0  # recorded: skipped
    assert len((tmp_path / "sb3-calls.txt").read_text().splitlines()) == 2


def test_sb3_lines_of_another_entry_than_the_presets_no_longer_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preset that changes its entry leaves SB3 lines of the old one behind: the row shows,
    and resuming skips, only lines of the entry the preset has now, never a line that does not
    say which entry it ran."""
    monkeypatch.setattr(zoo_scores, "SB3_PYTHON", _fake_sb3(tmp_path, 85.5))
    results, work = tmp_path / "zoo.jsonl", tmp_path / "work"
    argv = ["--envs", "MountainCarContinuous-v0", "--no-docs", "--trainer", "sb3"]
    argv += ["--results", str(results), "--work", str(work), "--seeds", "0"]
    assert zoo_scores.main(argv) == 0
    (line,) = zoo_scores.load_results(results)
    assert line["entry"] == zoo_entry("MountainCarContinuous-v0") and line["env_kwargs"] == {}
    stale = {**line, "seed": 1, "entry": {**line["entry"], "gamma": 0.5}}
    unrecorded = {k: v for k, v in line.items() if k not in ("entry", "env_kwargs")}
    with results.open("a") as f:
        f.write(json.dumps(stale) + "\n" + json.dumps({**unrecorded, "seed": 2}) + "\n")
    sb3 = zoo_scores.latest_per_run(zoo_scores.load_results(results), "sb3")
    assert sorted(sb3) == [("MountainCarContinuous-v0", 0)]
    assert zoo_scores.main([*argv[:-1], "1,2"]) == 0  # neither line counts: both seeds run again
    assert len((tmp_path / "sb3-calls.txt").read_text().splitlines()) == 3
