"""benchmarks/references.py: the curve math by hand, and the whole command against a fake peer
that speaks the episode-report protocol (the real peer needs the SB3 venv and minutes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from app.references.schemas import ReferenceCurves
from benchmarks import contenders, references
from benchmarks.contenders import PEER_SCRIPTS
from benchmarks.references import Episode, band, curves_of, rolling_mean, value_at


def _episodes(*points: tuple[float, int, float]) -> list[Episode]:
    return [Episode(t, steps, ret) for t, steps, ret in points]


def test_rolling_mean_is_the_last_window():
    eps = _episodes((1, 10, 1.0), (2, 20, 3.0), (3, 30, 5.0), (4, 40, 7.0))
    assert [m for _, m in rolling_mean(eps, window=2)] == [1.0, 2.0, 4.0, 6.0]
    assert [m for _, m in rolling_mean(eps, window=100)] == [1.0, 2.0, 3.0, 4.0]


def test_value_at_is_a_step_function_held_after_the_end():
    xs, ys = [10.0, 20.0], [1.0, 2.0]
    assert value_at(xs, ys, 5) is None
    assert value_at(xs, ys, 10) == 1.0 and value_at(xs, ys, 19.9) == 1.0
    assert value_at(xs, ys, 20) == 2.0 and value_at(xs, ys, 1e9) == 2.0


def test_band_starts_where_all_curves_have_values_and_holds_finished_ones():
    a = ([0.0, 10.0, 20.0], [0.0, 10.0, 20.0])
    b = ([5.0, 15.0], [4.0, 6.0])  # starts later, ends earlier
    out = band([a, b], points=5, x_digits=0)
    assert out.x == [5, 9, 12, 16, 20]  # 5, 8.75, 12.5, 16.25, 20 rounded
    # x=5: a=0, b=4; x=8.75: a=0, b=4; x=12.5: a=10, b=4; x=16.25: a=10, b=6; x=20: a=20, b=6
    assert out.min == [0.0, 0.0, 4.0, 6.0, 6.0]
    assert out.max == [4.0, 4.0, 10.0, 10.0, 20.0]
    assert out.mean == [2.0, 2.0, 7.0, 8.0, 13.0]


def test_band_ends_round_up_so_every_curve_is_in():
    a = ([0.123, 1.0], [1.0, 2.0])
    b = ([0.2, 1.2345], [3.0, 4.0])
    out = band([a, b], points=3)
    # lo 0.2, hi 1.2345: the ends round up to 0.2 and 1.24; the middle 0.71725 to 0.72.
    assert out.x == [0.2, 0.72, 1.24]
    assert out.min == [1.0, 1.0, 2.0] and out.max == [3.0, 3.0, 4.0]
    late = band([([0.1234, 1.0], [5.0, 6.0])], points=2)
    assert late.x == [0.13, 1.0] and late.mean == [5.0, 6.0]


def test_several_episodes_ending_on_one_step_keep_the_last_window():
    eps = _episodes((1, 8, 2.0), (1, 8, 4.0), (2, 16, 6.0))
    (by_steps,), (by_time,) = curves_of([eps], window=100)
    assert by_steps == ([8.0, 16.0], [3.0, 4.0])
    assert by_time == ([1.0, 2.0], [3.0, 4.0])


FAKE_PEER = """
import argparse, json, os, sys, time
sys.path.insert(0, {peers!r})
from episode_report import EpisodeReport

parser = argparse.ArgumentParser()
parser.add_argument("--env")
parser.add_argument("--seed", type=int)
parser.add_argument("--entry", type=json.loads)
parser.add_argument("--total-timesteps", type=int)
args = parser.parse_args()
assert args.entry == {{"n_envs": 2, "n_timesteps": 10000}}
report = EpisodeReport(None)
for i in range(1, 51):
    steps = i * args.total_timesteps // 50
    report.episode(steps, float(i + 10 * args.seed))
    time.sleep(0.001)
"""


def test_the_command_writes_a_valid_reference(monkeypatch, tmp_path: Path, capsys):
    script = tmp_path / "fake_reference.py"
    script.write_text(FAKE_PEER.format(peers=str(PEER_SCRIPTS)))
    monkeypatch.setattr(references, "PYTHON", Path(sys.executable))
    monkeypatch.setattr(references, "SCRIPT", script)
    monkeypatch.setattr(references, "sb3_version", lambda: "0.0-fake")
    monkeypatch.setattr(contenders, "zoo_entry", lambda env: {"n_envs": 2, "n_timesteps": 10000})
    out = tmp_path / "data"
    argv = ["--envs", "Fake-v1", "--seeds", "0,1,2", "--points", "20", "--out", str(out)]
    argv += ["--budget", "Fake-v1=5000", "--results-dir", str(tmp_path / "results")]
    assert references.main(argv) == 0
    path = out / "Fake-v1.json"
    assert "wrote" in capsys.readouterr().out
    ref = ReferenceCurves.model_validate_json(path.read_text())
    assert ref.seeds == [0, 1, 2] and ref.budget_env_steps == 5000
    assert "stable-baselines3 0.0-fake" in ref.source and "entry Fake-v1" in ref.source
    assert ref.notes == "runs cut at 5000 of the zoo's 10000 env steps"
    assert [r.episodes for r in ref.runs] == [50, 50, 50]
    # Seed s returns i + 10 s: the window mean after 50 episodes is 25.5 + 10 s.
    assert [r.final_return for r in ref.runs] == [25.5, 35.5, 45.5]
    assert ref.env_steps.x[0] == 100 and ref.env_steps.x[-1] == 5000
    assert ref.env_steps.mean[-1] == pytest.approx(35.5)
    assert ref.env_steps.min[-1] == 25.5 and ref.env_steps.max[-1] == 45.5
    # Wall time is rounded to 0.01 s: this fast fake run may merge grid points.
    assert 1 < len(ref.wall_time_s.x) <= 20 and ref.wall_time_s.mean[-1] == pytest.approx(35.5)
    # One top-level key per line.
    lines = path.read_text().splitlines()
    assert (
        lines[0] == "{" and lines[-1] == "}" and len(lines) == len(json.loads(path.read_text())) + 2
    )


def test_a_failing_peer_writes_nothing(monkeypatch, tmp_path: Path):
    script = tmp_path / "broken.py"
    script.write_text("import sys\nsys.exit('boom')\n")
    monkeypatch.setattr(references, "PYTHON", Path(sys.executable))
    monkeypatch.setattr(references, "SCRIPT", script)
    monkeypatch.setattr(references, "sb3_version", lambda: "0.0-fake")
    monkeypatch.setattr(contenders, "zoo_entry", lambda env: {"n_timesteps": 10})
    out = tmp_path / "data"
    argv = ["--envs", "Fake-v1", "--seeds", "0", "--out", str(out)]
    with pytest.raises(RuntimeError, match="exit 1"):
        references.main([*argv, "--results-dir", str(tmp_path / "results")])
    assert not list(out.glob("*.json"))


@pytest.mark.parametrize("env_id", references.ENVS)
def test_sb3_runs_the_entry_the_preset_was_ported_from(env_id: str) -> None:
    entry = references.peer_settings(env_id)
    assert entry["n_timesteps"] > 0 and entry.get("policy", "MlpPolicy") == "MlpPolicy"


def test_an_env_without_an_entry_is_refused() -> None:
    with pytest.raises(SystemExit, match="no rl-zoo entry"):
        references.peer_settings("my_envs:Custom-v0")
