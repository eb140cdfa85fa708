"""benchmarks/atari.py's bookkeeping: crossings need a full 100-episode window, the table reads
the outcomes right, and the docs block between the markers is replaced (nothing else)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmarks.atari import BEGIN, END, Outcome, _follow, rollout_config, table, write_docs
from benchmarks.progress import RolloutProgress


def _rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_crossings_need_100_episodes_and_keep_the_first(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    _rows(
        metrics,
        [
            {"env_steps": 1000, "episodes": 40, "episode_return_mean": 20.5, "time_s": 1.0},
            {"env_steps": 2000, "episodes": 120, "episode_return_mean": 18.2, "time_s": 2.0},
            {"env_steps": 3000, "episodes": 180, "episode_return_mean": 19.0, "time_s": 3.0},
            {"env_steps": 4000, "episodes": 260, "episode_return_mean": 20.1, "time_s": 4.0},
        ],
    )
    outcome = Outcome("rollout", "Pong", [])
    progress = RolloutProgress(metrics)
    _follow(progress, 5.0, outcome)
    assert outcome.crossings["18"]["env_steps"] == 2000  # the 40-episode 20.5 does not count
    assert outcome.crossings["20"]["env_steps"] == 4000
    assert outcome.best_return == 20.1 and outcome.crossings["18"]["t"] == 5.0


def test_table_and_docs_block(tmp_path: Path) -> None:
    outcome = Outcome("rollout", "Pong", ["python"])
    outcome.crossings = {"18": {"t": 240.0, "env_steps": 2_100_000}}
    outcome.best_return = 19.3
    outcome.steps_per_s = 12_000.0
    outcome.gpu_util_mean = 41.0
    outcome.iteration_s = 300.0
    outcome.startup_s = 12.0
    outcome.phases = {"time_sample_s": 150.0, "time_env_step_s": 90.0, "time_sgd_s": 120.0}
    games = {
        "Pong": {
            "bare": {"num_envs": 64, "num_threads": 15, "env_steps_per_s": 18_000.0},
            "outcomes": [asdict(outcome)],
        }
    }
    meta = {
        "date": "2026-12-01 00:00 UTC",
        "machine": {"cores": 16, "gpu": "H200", "torch": "2.13.0"},
        "seconds": 330.0,
        "command": "python benchmarks/atari.py",
        "results": "benchmarks/results/atari",
    }
    text = table(games, meta)
    row = next(line for line in text.splitlines() if line.startswith("| Pong | rollout"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:7] == ["240 (2.10M)", "not reached", "19.3", "12000", "18000 (64, 15)"]
    assert cells[7] == "67%" and cells[8] == "41"
    assert cells[9].startswith("sample 50% (env 30%, inference 0%), sgd 40%")
    assert cells[9].endswith("start-up 12 s")

    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# B\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n")
    write_docs(docs, text)
    content = docs.read_text()
    assert content.startswith("# B\n\nbefore\n") and content.endswith(f"{END}\nafter\n")
    assert "old" not in content and row in content
    (tmp_path / "plain.md").write_text("no markers\n")
    with pytest.raises(SystemExit):
        write_docs(tmp_path / "plain.md", text)


def test_the_benchmark_uses_the_preset_as_rollout_train_resolves_it() -> None:
    config = rollout_config("Pong", [])
    assert config.preset == "atari" and config.env_id == "ALE/Pong-v5"
    assert config.num_envs_per_env_runner == 64 and config.clip_rewards == 1.0
    assert rollout_config("Pong", ["num_envs_per_env_runner=8"]).num_envs_per_env_runner == 8


def test_a_real_rollout_run_on_pong_is_measured_end_to_end(tmp_path: Path) -> None:
    """The whole script with tiny settings on the CPU: the trainer process starts, trains, and
    its metrics come back into the summary (a run that fails at start-up ends with exit 2)."""
    pytest.importorskip("ale_py")
    from benchmarks.atari import main

    tiny = ["num_envs_per_env_runner=4", "train_batch_size_per_learner=128", "minibatch_size=64"]
    argv = ["--seconds", "4", "--bare-seconds", "1", "--no-docs", "--results", str(tmp_path)]
    for item in tiny:
        argv += ["--rollout-set", item]
    assert main(argv) == 0
    (summary_file,) = tmp_path.glob("*-summary.json")
    (outcome,) = json.loads(summary_file.read_text())["games"]["Pong"]["outcomes"]
    assert outcome["exit_code"] == 0, outcome["log_tail"]
    assert outcome["env_steps"] >= 128  # at least one iteration
    assert (tmp_path / outcome["metrics_file"]).stat().st_size > 0
