"""End to end: time_to_target.run_once against small fake peers that speak the episode-report
protocol, spawn a child process, and never exit on their own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.contenders import CONTENDERS, PEER_SCRIPTS, Contender
from benchmarks.procs import alive, process_tree
from benchmarks.time_to_target import parse_args, run_once
from trainer.presets import PRESETS

FAKE_PEER = """
import argparse, subprocess, sys, time
sys.path.insert(0, {peers!r})
from episode_report import EpisodeReport

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int)
parser.add_argument("--target", type=float)
args = parser.parse_args()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open({pid_file!r}, "w").write(str(child.pid))
report = EpisodeReport(args.target)
for i in range({episodes}):
    report.episode(500 * (i + 1), {episode_return})
    time.sleep(0.002)
time.sleep({linger})
"""


def _fake(tmp_path: Path, *, episode_return: float, episodes: int, linger: float) -> Contender:
    script = tmp_path / "fake_peer.py"
    script.write_text(
        FAKE_PEER.format(
            peers=str(PEER_SCRIPTS),
            pid_file=str(tmp_path / "child.pid"),
            episodes=episodes,
            episode_return=episode_return,
            linger=linger,
        )
    )
    return Contender("fake", "episodes", Path(sys.executable), "fake peer", script)


def _child_gone(tmp_path: Path) -> bool:
    pid = int((tmp_path / "child.pid").read_text())
    return not alive(process_tree(pid))


def test_run_once_times_the_crossing_and_stops_the_whole_tree(tmp_path: Path) -> None:
    contender = _fake(tmp_path, episode_return=500.0, episodes=150, linger=120)
    result = run_once(
        contender, "CartPole-v1", seed=0, target=475.0, timeout_s=60, run_dir=tmp_path / "run"
    )
    assert result.reached, result.note
    assert result.env_steps == 500 * 100  # the 100th episode completes the window
    assert 0 < result.time_to_target_s < 60
    assert result.first_report_s is not None and result.first_report_s <= result.time_to_target_s
    # The harness clock and the peer's own stamp (relative to BENCH_T0) agree.
    assert result.reported_time_s == pytest.approx(result.time_to_target_s, abs=1.0)
    assert result.peak_processes >= 2 and result.peak_rss_bytes > 0
    assert result.wall_s < 60  # stopped at the crossing, not left to linger
    assert _child_gone(tmp_path)
    assert (tmp_path / "run" / "episodes.jsonl").exists()


def test_run_once_gives_up_at_the_timeout(tmp_path: Path) -> None:
    contender = _fake(tmp_path, episode_return=10.0, episodes=150, linger=120)
    result = run_once(
        contender, "CartPole-v1", seed=0, target=475.0, timeout_s=3, run_dir=tmp_path / "run"
    )
    assert not result.reached and result.time_to_target_s is None
    assert "timeout" in result.note
    assert 3 <= result.wall_s < 20
    assert _child_gone(tmp_path)


def test_run_once_notices_an_early_exit(tmp_path: Path) -> None:
    contender = _fake(tmp_path, episode_return=10.0, episodes=5, linger=0)
    result = run_once(
        contender, "CartPole-v1", seed=0, target=475.0, timeout_s=60, run_dir=tmp_path / "run"
    )
    assert not result.reached and "exited" in result.note
    assert result.first_report_s is not None
    assert result.wall_s < 60


def test_run_once_stops_children_left_behind_by_an_early_exit(tmp_path: Path) -> None:
    contender = _fake(tmp_path, episode_return=10.0, episodes=1, linger=0)
    run_once(contender, "CartPole-v1", seed=0, target=475.0, timeout_s=60, run_dir=tmp_path / "run")
    assert _child_gone(tmp_path)  # same session, re-parented: still found and stopped


def test_sb3_runs_the_rl_zoo_entry_of_rollouts_preset(tmp_path: Path) -> None:
    command = CONTENDERS["sb3"].command("Acrobot-v1", 2, -100.0, tmp_path)
    entry = json.loads(command[command.index("--entry") + 1])
    assert command[command.index("--env") + 1] == "Acrobot-v1"
    assert entry == PRESETS["classic_control"].envs["Acrobot"].zoo_entry
    rollout = CONTENDERS["rollout"].command("Acrobot-v1", 2, -100.0, tmp_path)
    assert rollout[1:7] == ["train", "--env", "Acrobot-v1", "--stop-return", "-100", "--seed"]


def test_sb3_makes_its_envs_with_the_presets_env_kwargs(tmp_path: Path) -> None:
    """Ant's preset observes Ant-v4's 27 numbers (env_config); SB3 gets them too, as rl-zoo's
    --env-kwargs, and an env whose preset sets none gets no --env-kwargs."""
    ant = CONTENDERS["sb3"].command("Ant-v5", 0, 6000.0, tmp_path)
    kwargs = json.loads(ant[ant.index("--env-kwargs") + 1])
    assert kwargs == {"include_cfrc_ext_in_observation": False}
    assert json.loads(ant[ant.index("--entry") + 1]) == PRESETS["mujoco"].envs["Ant"].zoo_entry
    assert "--env-kwargs" not in CONTENDERS["sb3"].command("HalfCheetah-v5", 0, 4800.0, tmp_path)


def test_cartpole_only_peers_refuse_other_envs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CartPole-v1 only"):
        CONTENDERS["cleanrl"].command("Acrobot-v1", 0, -100.0, tmp_path)
    with pytest.raises(SystemExit):
        parse_args(["--env", "Acrobot-v1", "--peers", "rllib"])
    with pytest.raises(SystemExit):  # no target known: --target is needed
        parse_args(["--env", "MountainCar-v0", "--peers", "sb3"])
    args = parse_args(["--env", "Acrobot-v1", "--peers", "sb3"])
    assert args.target == -100.0 and args.peers == ["sb3"]
