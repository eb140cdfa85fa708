"""benchmarks/rescore.py: a finished time_to_target.py log folder timed again at a lower
threshold, on the harness clock, with the default threshold taken from the peers' runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import rescore


def _result(run_dir: Path, name: str, seed: int, first_report_s: float) -> None:
    record = {"contender": name, "seed": seed, "reached": False, "wall_s": 100.0}
    record |= {"first_report_s": first_report_s, "peak_rss_bytes": 2e8, "peak_processes": 1}
    (run_dir / "result.json").write_text(json.dumps(record))


def _rollout_run(log_dir: Path, seed: int, means: list[float]) -> None:
    """Iterations every 10 s of trainer time from 1 s; the harness saw the first at 3 s."""
    run_dir = log_dir / f"rollout-s{seed}"
    (run_dir / "out").mkdir(parents=True)
    lines = [
        {"env_steps": 1000 * (i + 1), "episodes": 100 * (i + 1), "time_s": 1.0 + 10 * i}
        | {"episode_return_mean": m}
        for i, m in enumerate(means)
    ]
    (run_dir / "out" / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    _result(run_dir, "rollout", seed, first_report_s=3.0)


def _sb3_run(log_dir: Path, seed: int, returns: list[float], every_s: float) -> None:
    run_dir = log_dir / f"sb3-s{seed}"
    run_dir.mkdir(parents=True)
    lines = [
        {"t": every_s * (i + 1), "steps": 100 * (i + 1), "ret": r} for i, r in enumerate(returns)
    ]
    (run_dir / "episodes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    _result(run_dir, "sb3", seed, first_report_s=every_s)


def test_default_threshold_is_the_highest_every_peer_seed_reaches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _rollout_run(tmp_path, 0, [10.0, 150.0, 180.0])
    _sb3_run(tmp_path, 0, [100.0] * 100 + [200.0] * 100, every_s=1.0)  # best mean 200
    _sb3_run(tmp_path, 1, [100.0] * 100 + [150.0] * 100, every_s=2.0)  # best mean 150
    out = tmp_path / "rescored.json"
    assert rescore.main([str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["target"] == 150.0
    runs = {(r["contender"], r["seed"]): r for r in report["runs"]}
    # Rollout's second iteration (trainer clock 11 s) is 13 s on the harness clock.
    assert runs["rollout", 0]["time_to_target_s"] == pytest.approx(13.0)
    assert runs["rollout", 0]["env_steps"] == 2000
    # sb3 seed 0 crosses 150 on its 150th episode (mean of 50 x 100 and 50 x 200), seed 1 on its
    # 200th (every episode of the window at 150).
    assert runs["sb3", 0]["time_to_target_s"] == pytest.approx(150.0)
    assert runs["sb3", 1]["time_to_target_s"] == pytest.approx(400.0)
    assert report["summary"]["sb3"]["time_ratio_to_rollout"] == pytest.approx(275.0 / 13.0)
    assert "time-to-150 s" in capsys.readouterr().out


def test_a_given_threshold_out_of_reach_is_said_not_reached(tmp_path: Path) -> None:
    _rollout_run(tmp_path, 0, [10.0, 150.0, 180.0])
    _sb3_run(tmp_path, 0, [100.0] * 150, every_s=1.0)
    out = tmp_path / "rescored.json"
    assert rescore.main([str(tmp_path), "--target", "160", "--json", str(out)]) == 0
    runs = {r["contender"]: r for r in json.loads(out.read_text())["runs"]}
    assert runs["rollout"]["reached"] and runs["rollout"]["time_to_target_s"] == 23.0
    assert not runs["sb3"]["reached"] and runs["sb3"]["note"] == "best 100-episode mean 100.0"


@pytest.mark.parametrize(
    ("x", "down"), [(4123.0, 4100.0), (143.2, 140.0), (-96.0, -96.0), (-250.3, -260.0)]
)
def test_two_significant_digits_rounding_down(x: float, down: float) -> None:
    assert rescore.two_digits_down(x) == pytest.approx(down)


def test_a_folder_without_runs_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        rescore.main([str(tmp_path)])
    assert exited.value.code == 2
    assert "no finished runs" in capsys.readouterr().err
