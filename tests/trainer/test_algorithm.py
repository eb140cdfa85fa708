"""PPO iteration, metrics, stop criteria, resuming, and EnvRunner actors (with a restart)."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.algorithm import PPO
from trainer.config import PPOConfig
from trainer.wire import STUDY_METRICS

REQUIRED_METRICS = {
    "iteration",
    "env_steps",
    "episodes",
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_len_mean",
    "policy_loss",
    "vf_loss",
    "entropy",
    "kl",
    "kl_coeff",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "lr",
    "env_steps_per_s",
    "time_sample_s",
    "time_gae_s",
    "time_sgd_s",
    "time_weight_sync_s",
    "time_iteration_s",
    "time_s",
    "policy_lag",
    "env_runner_restarts",
}
CLASSIC_CONTROL = [
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
]


def _config(**overrides: object) -> PPOConfig:
    base = {
        "num_envs_per_env_runner": 4,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 128,
        "num_epochs": 2,
        "stop": {"env_steps": 100_000},
    }
    return PPOConfig.model_validate({**base, **overrides})


def test_iteration_metrics_and_counters() -> None:
    algo = PPO(_config())
    try:
        first = algo.train()
        second = algo.train()
    finally:
        algo.stop()
    assert set(first) >= REQUIRED_METRICS
    assert set(first) >= set(STUDY_METRICS)  # what a study may optimise is always reported
    assert all(isinstance(v, float) for v in first.values())
    assert first["iteration"] == 1 and second["iteration"] == 2
    assert 256 <= first["env_steps"] < 256 + 4
    assert second["env_steps"] >= first["env_steps"] + 256
    assert second["episodes"] >= first["episodes"] > 0
    assert first["policy_lag"] == 0 and second["policy_lag"] == 0
    assert second["time_s"] > first["time_s"] > 0
    assert first["episode_return_min"] <= first["episode_return_mean"]
    assert first["episode_return_mean"] <= first["episode_return_max"]
    assert algo.weights_version == 2


def test_serial_mode_never_imports_ray() -> None:
    code = (
        "import sys; from trainer.algorithm import PPO; from trainer.config import PPOConfig\n"
        "a = PPO(PPOConfig(train_batch_size_per_learner=64, minibatch_size=64, num_epochs=1))\n"
        "a.train(); a.stop(); assert 'ray' not in sys.modules, 'ray was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_return_window_is_last_100_episodes() -> None:
    algo = PPO(_config(env_config={"max_episode_steps": 5}))
    try:
        for _ in range(3):
            metrics = algo.train()
    finally:
        algo.stop()
    assert metrics["episodes"] > 100
    assert len(algo.window.returns) == 100
    assert metrics["episode_return_mean"] == pytest.approx(np.mean(list(algo.window.returns)))


def test_stop_reasons() -> None:
    algo = PPO(_config(stop={"env_steps": 500, "episode_return_mean": 1e9}))
    try:
        assert algo.stop_reason() is None
        algo.train()
        assert algo.stop_reason() is None
        algo.train()
        assert algo.stop_reason() == "env_steps"
    finally:
        algo.stop()
    timed = PPO(_config(stop={"wall_seconds": 1e-3, "env_steps": None}))
    try:
        timed.train()
        assert timed.stop_reason() == "wall_seconds"
    finally:
        timed.stop()


def test_return_stop_is_the_last_100_episode_mean() -> None:
    # 5-step episodes: ~51 finish per 256-step iteration, every one with return 5 >= 1.
    low_bar = PPO(_config(env_config={"max_episode_steps": 5}, stop={"episode_return_mean": 1.0}))
    try:
        low_bar.train()
        assert 0 < low_bar.window.episodes < 100 and low_bar.window.return_mean >= 1.0
        assert low_bar.stop_reason() is None  # a mean of fewer than 100 episodes
        while low_bar.window.episodes < 100:
            low_bar.train()
        assert low_bar.stop_reason() == "episode_return_mean"
    finally:
        low_bar.stop()
    high_bar = PPO(_config(env_config={"max_episode_steps": 5}, stop={"episode_return_mean": 6}))
    try:
        for _ in range(3):
            high_bar.train()
        assert high_bar.window.full and high_bar.stop_reason() is None
    finally:
        high_bar.stop()


def test_linear_lr_is_the_lr_where_each_batch_began() -> None:
    algo = PPO(_config(lr=1e-3, lr_schedule="linear", stop={"env_steps": 768}))
    rows = []
    try:
        while algo.stop_reason() is None:
            start = algo.env_steps
            rows.append((start, algo.train()["lr"]))
    finally:
        algo.stop()
    assert len(rows) == 3
    assert rows[0] == (0, pytest.approx(1e-3))  # the first update trains at the full lr
    for start, lr in rows:
        assert lr == pytest.approx(1e-3 * (1 - start / 768))
    assert rows[-1][1] > 1e-3 / 4  # the last update still learns (~1/3 of the lr)


@pytest.mark.parametrize("env_id", CLASSIC_CONTROL)
def test_every_classic_control_env_runs_an_iteration(env_id: str) -> None:
    algo = PPO(_config(env_id=env_id))
    try:
        metrics = algo.train()
    finally:
        algo.stop()
    assert metrics["env_steps"] >= 256
    assert math.isfinite(metrics["policy_loss"]) and math.isfinite(metrics["vf_loss"])


def test_resume_restores_counters_weights_filter_and_window(tmp_path: Path) -> None:
    config = _config(normalize_observations=True)
    algo = PPO(config)
    try:
        for _ in range(3):
            algo.train()
        path = algo.save_checkpoint(tmp_path / "ckpt")
        weights = algo.learner_group.get_inference_weights()
        filter_state = algo.env_runners.connector_state
        window = list(algo.window.returns)
        kl_coeff = algo.learner_group.get_state()["kl_coeff"]
    finally:
        algo.stop()
    resumed = PPO.from_checkpoint(path)
    try:
        assert resumed.iteration == 3 and resumed.env_steps == algo.env_steps
        assert resumed.weights_version == 3
        assert list(resumed.window.returns) == window
        assert resumed.env_runners.connector_state == filter_state
        runner = resumed.env_runners.local
        assert runner is not None and runner.get_connector_state() == filter_state
        assert runner.weights_version == 3
        for k, v in resumed.learner_group.get_inference_weights().items():
            np.testing.assert_array_equal(v, weights[k])
        for k, v in runner.module.inference_state_dict().items():
            np.testing.assert_array_equal(v.numpy(), weights[k])
        assert resumed.learner_group.get_state()["kl_coeff"] == kl_coeff
        metrics = resumed.train()
        assert metrics["iteration"] == 4
        assert metrics["env_steps"] > algo.env_steps
    finally:
        resumed.stop()


def test_resume_restores_torch_rng_and_the_action_stream(tmp_path: Path) -> None:
    algo = PPO(_config())
    try:
        algo.train()
        path = algo.save_checkpoint(tmp_path / "ckpt")
        expected = torch.rand(3)
        assert algo.env_runners.local is not None
        expected_draws = algo.env_runners.local.rng.random(3)  # the numpy policy's stream
    finally:
        algo.stop()
    resumed = PPO.from_checkpoint(path)
    try:
        torch.testing.assert_close(torch.rand(3), expected)
        assert resumed.env_runners.local is not None
        np.testing.assert_array_equal(resumed.env_runners.local.rng.random(3), expected_draws)
    finally:
        resumed.stop()


def _wait_until_dead(actor: object, timeout_s: float = 30.0) -> None:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.get_connector_state.remote(), timeout=5)
        except (RayActorError, GetTimeoutError):
            return
        time.sleep(0.1)
    raise AssertionError(f"actor still alive {timeout_s}s after ray.kill")


@pytest.mark.ray
def test_env_runner_actors_sample_and_recover_from_a_killed_runner(ray_client: None) -> None:
    import ray

    algo = PPO(_config(num_env_runners=2, num_cpus_per_env_runner=0.5, normalize_observations=True))
    try:
        first = algo.train()
        assert first["env_steps"] >= 256 and first["env_runner_restarts"] == 0
        assert first["policy_lag"] == 0
        # Both runners normalise with the merged stats of everything either has seen.
        states = ray.get([a.get_connector_state.remote() for a in algo.env_runners.actors])
        assert states[0] == states[1] == algo.env_runners.connector_state
        assert states[0]["obs_filter"]["count"] >= first["env_steps"]
        victim = algo.env_runners.actors[0]
        ray.kill(victim, no_restart=True)
        _wait_until_dead(victim)  # ray.kill is asynchronous: a sample() may still slip through
        second = algo.train()
        assert second["env_runner_restarts"] == 1
        assert second["env_steps"] >= first["env_steps"] + 256
        third = algo.train()  # the replacement runner samples with the current weights
        assert third["env_runner_restarts"] == 1 and third["policy_lag"] == 0
        states = ray.get([a.get_connector_state.remote() for a in algo.env_runners.actors])
        assert states[0] == states[1] == algo.env_runners.connector_state
    finally:
        algo.stop()
