"""`rollout train` / `rollout evaluate` as a user runs them: real subprocesses, real learning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.checkpoint_meta import read_meta
from trainer.checkpoint import pack
from trainer.checkpoint_manager import CheckpointManager

ROLLOUT = str(Path(sys.executable).with_name("rollout"))
LEARN_TIMEOUT_S = 420  # CartPole to 475 takes seconds on a quiet machine; CI shares 2 cores


def rollout(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None, cwd: Path | None = None
):
    return subprocess.run(
        [ROLLOUT, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_invalid_config_is_reported_per_field(tmp_path: Path) -> None:
    result = rollout(
        "train", "--set", "lr=-1", "--set", "stop.env_steps=0", "--set", "bogus=1",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    for field in ("lr:", "stop.env_steps:", "bogus:"):
        assert field in result.stderr
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_bad_config_file_and_unknown_env(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("num_epochs: [oops\n")
    result = rollout("train", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path))
    assert result.returncode == 2 and "cannot parse" in result.stderr
    result = rollout("train", "--env", "NoSuchEnv-v9", "--out", str(tmp_path))
    assert result.returncode == 2 and "NoSuchEnv-v9" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_env_from_a_missing_module_is_one_line_naming_the_module(tmp_path: Path) -> None:
    result = rollout("train", "--env", "nosuchmodule:Foo-v0", "--out", str(tmp_path / "run"))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "cannot import module 'nosuchmodule'" in line
    assert not (tmp_path / "run").exists()


def test_a_users_own_env_module_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "my_envs.py").write_text(
        "import gymnasium as gym\n"
        'gym.register(id="ShortPole-v0", max_episode_steps=20,\n'
        '             entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv")\n'
    )
    result = rollout(
        "train", "--env", "my_envs:ShortPole-v0", "--stop-steps", "512",
        "--set", "train_batch_size_per_learner=256", "--set", "minibatch_size=256",
        "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = _metrics(tmp_path / "run")
    assert rows[-1]["env_steps"] >= 512
    assert 0 < rows[-1]["episode_len_mean"] <= 20  # our registration's time limit


def test_config_file_and_dotted_overrides(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "env_id: Acrobot-v1\nnum_epochs: 1\nmodel:\n  hidden_sizes: [16]\n"
    )
    out = tmp_path / "run"
    result = rollout(
        "train", "--config", str(tmp_path / "c.yaml"), "--set", "model.hidden_sizes=[8,8]",
        "--set", "train_batch_size_per_learner=256", "--set", "minibatch_size=256",
        "--stop-steps", "500", "--seed", "3", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["env_id"] == "Acrobot-v1" and config["seed"] == 3
    assert config["model"]["hidden_sizes"] == [8, 8] and config["stop"]["env_steps"] == 500
    assert "iter 2 |" in result.stdout and "stopped: env_steps" in result.stdout
    assert "evaluation_every" not in result.stderr


def test_evaluation_every_says_where_it_belongs(tmp_path: Path) -> None:
    """It left PPOConfig for the service's experiment: a config that sets it is refused with
    where to give it, not with "unknown field"."""
    result = rollout(
        "train", "--env", "CartPole-v1", "--set", "evaluation_every=2",
        "--stop-steps", "256", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "is a setting of the experiment" in result.stderr
    assert "rollout evaluate CHECKPOINT --video FILE" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


def test_train_prints_and_saves_the_resolved_config_of_its_preset(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = rollout(
        "train", "--env", "Pendulum-v1", "--set", "train_batch_size_per_learner=256",
        "--set", "num_epochs=1", "--stop-steps", "256", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("preset: classic_control_continuous + Pendulum, set ")
    assert "rl-baselines3-zoo hyperparams/ppo.yml (commit 00128b5d): Pendulum-v1" in lines[0]
    assert "  gamma = 0.95" in lines and "  lr = 0.001" in lines
    assert "  normalize_rewards = false" in lines  # rl-zoo's Pendulum entry: no VecNormalize
    assert not any(line.startswith("  num_epochs =") for line in lines)  # the user's own
    start = lines.index(f"resolved config (saved to {out / 'config.json'}):")
    end = lines.index("}", start)
    printed = json.loads("\n".join(lines[start + 1 : end + 1]))
    assert printed == json.loads((out / "config.json").read_text())
    assert printed["preset"] == "classic_control_continuous" and printed["gamma"] == 0.95
    assert printed["num_epochs"] == 1 and printed["train_batch_size_per_learner"] == 256


def _learn_cartpole(out: Path, *extra: str, env: dict[str, str] | None = None) -> None:
    result = rollout(
        "train", "--env", "CartPole-v1", "--stop-return", "475", *extra, "--out", str(out),
        timeout=LEARN_TIMEOUT_S, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "stopped: episode_return_mean" in result.stdout
    rows = _metrics(out)
    assert rows[-1]["episode_return_mean"] >= 475
    assert all(
        r["episode_return_mean"] is None or r["episode_return_mean"] < 475 for r in rows[:-1]
    )
    for key in ("iteration", "env_steps", "episode_return_mean", "episodes", "time_s"):
        assert key in rows[-1]
    assert [r["iteration"] for r in rows] == list(range(1, len(rows) + 1))
    assert rows[-1]["episodes"] >= 100


def test_cartpole_learns_serially_then_evaluate_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _learn_cartpole(out)
    final = CheckpointManager(out / "checkpoints", keep=5).latest()
    assert final is not None
    rows = _metrics(out)
    assert read_meta(final)["iteration"] == rows[-1]["iteration"]
    archive = pack(final, tmp_path / "final.tar.gz")  # what the service hands to users

    result = rollout("evaluate", str(archive), "--episodes", "5", "--seed", "1")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["episodes"] == 5 and report["return_mean"] >= 300, report

    resumed_out = tmp_path / "resumed"
    steps = int(rows[-1]["env_steps"])
    result = rollout(
        "train", "--resume", str(archive), "--stop-steps", str(steps + 9000),
        "--set", "stop.episode_return_mean=null", "--out", str(resumed_out), timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    resumed = _metrics(resumed_out)
    assert resumed[0]["iteration"] == rows[-1]["iteration"] + 1
    assert resumed[0]["env_steps"] > steps
    # Fresh episodes of a good policy last ~500 steps: 16 envs finish some after ~8000 steps.
    assert resumed[-1]["episodes"] > rows[-1]["episodes"]
    assert resumed[-1]["env_steps"] >= steps + 9000
    # The restored policy keeps performing (window and weights carried over).
    assert resumed[0]["episode_return_mean"] >= 400


@pytest.mark.ray
def test_cartpole_learns_with_env_runner_actors(tmp_path: Path, ray_head) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    _learn_cartpole(
        out,
        "--set", "num_env_runners=2", "--set", "num_cpus_per_env_runner=0.5",
        env={"RAY_ADDRESS": ray_head.address},
    )  # fmt: skip
    assert _metrics(out)[-1]["env_runner_restarts"] == 0


@pytest.mark.ray
def test_ddp_learners_with_an_env_runner_actor(tmp_path: Path, ray_head) -> None:  # type: ignore[no-untyped-def]
    # The fully distributed path: an EnvRunner actor feeds two Learner actors that train with
    # torch DDP (gloo), each on train_batch_size_per_learner steps. Reached 200 at ~37k steps.
    out = tmp_path / "run"
    result = rollout(
        "train", "--set", "num_learners=2", "--set", "num_cpus_per_learner=0.5",
        "--set", "num_env_runners=1", "--set", "num_cpus_per_env_runner=0.5",
        "--stop-return", "200", "--stop-steps", "200000", "--out", str(out),
        timeout=LEARN_TIMEOUT_S, env={"RAY_ADDRESS": ray_head.address},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "episode_return_mean reached" in result.stdout
    rows = _metrics(out)
    assert rows[-1]["episode_return_mean"] >= 200
    # Two learners: each iteration samples both learners' shares.
    assert rows[0]["env_steps"] >= 2 * 512


def test_ctrl_c_saves_a_checkpoint_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [ROLLOUT, "train", "--stop-steps", "100000000", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text():
            assert time.monotonic() < deadline, "no iteration finished in time"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 130, stderr
    assert "interrupted; checkpoint" in stdout
    latest = CheckpointManager(out / "checkpoints", keep=5).latest()
    assert latest is not None
    assert read_meta(latest)["iteration"] == _metrics(out)[-1]["iteration"]


TINY_RUN = (
    "--env", "CartPole-v1", "--stop-steps", "1024", "--set", "train_batch_size_per_learner=512",
    "--set", "minibatch_size=128", "--set", "num_epochs=1", "--set", "num_gpus_per_learner=0",
)  # fmt: skip


def test_a_used_out_dir_is_refused_unless_overwrite_or_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = rollout("train", *TINY_RUN, "--out", str(out), timeout=180)
    assert first.returncode == 0, first.stderr[-2000:]
    before = (out / "metrics.jsonl").read_text()

    again = rollout("train", *TINY_RUN, "--out", str(out), timeout=180)
    assert again.returncode == 2, again.stdout[-2000:]
    assert "is not empty" in again.stderr and "--overwrite" in again.stderr
    assert "Traceback" not in again.stderr
    assert (out / "metrics.jsonl").read_text() == before  # nothing appended or replaced

    replaced = rollout("train", *TINY_RUN, "--out", str(out), "--overwrite", timeout=180)
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert [r["iteration"] for r in _metrics(out)] == [1, 2]
    reported = replaced.stdout.rsplit("checkpoint ", 1)[1].strip()
    assert Path(reported).exists(), replaced.stdout[-1000:]
    kept = CheckpointManager(out / "checkpoints", keep=5).latest()
    assert kept is not None and read_meta(kept)["iteration"] == 2

    both = rollout("train", "--resume", str(kept), "--overwrite", "--out", str(out))
    assert both.returncode == 2 and "exclude each other" in both.stderr

    resumed = rollout("train", "--resume", str(kept), "--stop-steps", "2048", "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [r["iteration"] for r in _metrics(out)] == [1, 2, 3, 4]  # the run goes on
