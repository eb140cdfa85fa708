"""Sampling overlapped with learning (overlap_sampling): policy lag, exactness when off,
checkpoints and stop with a sample in flight, learning, and EnvRunner actors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from trainer.algorithm import PPO
from trainer.config import PPOConfig
from trainer.resolve import resolve_config

# Metrics that depend on the clock, not on the data.
TIMED = {"env_steps_per_s", "time_s"}


def _config(**overrides: object) -> PPOConfig:
    base = {
        "num_envs_per_env_runner": 4,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 128,
        "num_epochs": 2,
        "normalize_observations": True,
        "stop": {"env_steps": 100_000},
    }
    return PPOConfig.model_validate({**base, **overrides})


def _run(config: PPOConfig, iterations: int) -> tuple[list[dict[str, float]], dict[str, Any]]:
    algo = PPO(config)
    try:
        rows = [algo.train() for _ in range(iterations)]
        weights = algo.learner_group.get_inference_weights()
    finally:
        algo.stop()
    return rows, weights


def _data(row: dict[str, float]) -> dict[str, float]:
    return {
        k: v
        for k, v in row.items()
        if k not in TIMED and not k.startswith(("time_", "system/"))  # clocks and load
    }


def _alternating_loop(config: PPOConfig, iterations: int) -> tuple[list[dict], dict[str, Any]]:
    """The loop without overlap written out from the same parts: sample -> update (lr at the
    batch's first step) -> push weights. What `overlap_sampling: false` must reproduce."""
    algo = PPO(config)
    stats = []
    try:
        for version in range(1, iterations + 1):
            results = algo.env_runners.sample(config.total_train_batch_size)
            start = algo.env_steps
            algo.env_steps += sum(r.env_steps for r in results)
            chunks = [c for r in results for c in r.chunks]
            stats.append(algo.learner_group.update(chunks, start))
            algo.env_runners.sync_weights(version, algo.learner_group.get_inference_weights())
        weights = algo.learner_group.get_inference_weights()
    finally:
        algo.stop()
    return stats, weights


def test_off_is_exactly_the_alternating_loop() -> None:
    config = _config()
    rows, weights = _run(config, 3)
    again, weights_again = _run(config, 3)
    reference, reference_weights = _alternating_loop(config, 3)
    for row, same, ref in zip(rows, again, reference, strict=True):
        np.testing.assert_equal(_data(row), _data(same))  # deterministic (nan == nan)
        for key in ("policy_loss", "vf_loss", "entropy", "kl", "grad_norm", "lr"):
            assert row[key] == ref[key], key
        assert row["policy_lag"] == 0
    for name, value in weights.items():
        np.testing.assert_array_equal(value, reference_weights[name], err_msg=name)
        np.testing.assert_array_equal(value, weights_again[name], err_msg=name)


def test_overlap_lags_exactly_one_version_after_the_first_iteration() -> None:
    off_rows, _ = _run(_config(), 4)
    on_rows, _ = _run(_config(overlap_sampling=True), 4)
    assert [r["policy_lag"] for r in on_rows] == [0, 1, 1, 1]
    assert [r["policy_lag"] for r in off_rows] == [0, 0, 0, 0]
    # The first batch is sampled and trained on alike; from the second on, overlap's batches
    # come from the weights one update older.
    np.testing.assert_equal(_data(on_rows[0]), _data(off_rows[0]))
    assert on_rows[1]["policy_loss"] != off_rows[1]["policy_loss"]
    for row in on_rows:
        assert row["env_steps_per_s"] > 0 and np.isfinite(row["policy_loss"])
    again, _ = _run(_config(overlap_sampling=True), 4)
    np.testing.assert_equal([_data(r) for r in again], [_data(r) for r in on_rows])


def test_checkpoint_resume_and_stop_with_a_sample_in_flight(tmp_path: Path) -> None:
    algo = PPO(_config(overlap_sampling=True))
    try:
        for _ in range(2):
            algo.train()
        assert algo.env_runners._in_flight is not None  # batch 3 is being sampled
        path = algo.save_checkpoint(tmp_path / "ckpt")
        saved_rng = torch.get_rng_state()
        saved_window = list(algo.window.returns)
        # The checkpoint is the state after iteration 2; the in-flight batch is kept and used.
        third = algo.train()
        assert third["iteration"] == 3 and third["policy_lag"] == 1
    finally:
        algo.stop()  # discards batch 4, which is in flight
    assert algo.env_runners._in_flight is None

    resumed = PPO.from_checkpoint(path)
    try:
        assert resumed.iteration == 2 and resumed.weights_version == 2
        assert list(resumed.window.returns) == saved_window
        torch.testing.assert_close(torch.get_rng_state(), saved_rng)  # saved at rest
        first = resumed.train()  # samples afresh with the saved weights
        assert first["iteration"] == 3 and first["policy_lag"] == 0
        assert resumed.train()["policy_lag"] == 1
    finally:
        resumed.stop()


def test_a_stop_criterion_ends_the_run_cleanly_with_overlap() -> None:
    algo = PPO(_config(overlap_sampling=True, stop={"env_steps": 700}))
    try:
        while algo.stop_reason() is None:
            algo.train()
        assert algo.stop_reason() == "env_steps" and algo.iteration == 3
        assert algo.env_runners._in_flight is not None  # batch 4, never trained on
    finally:
        algo.stop()  # waits for the sampling thread, then closes the envs
    assert algo.env_runners._in_flight is None and algo.env_runners._thread is None


def test_cartpole_learns_with_overlap() -> None:
    # Measured (seed 0 / 1, default settings): 475 after 111k / 146k env steps with overlap,
    # 71k / 88k without. A policy that does not learn stays near 20.
    config = PPOConfig(
        overlap_sampling=True, stop={"episode_return_mean": 300, "env_steps": 200_000}
    )
    algo = PPO(config)
    try:
        while algo.stop_reason() is None:
            algo.train()
        reason, ret, steps = algo.stop_reason(), algo.window.return_mean, algo.env_steps
        assert algo.last_metrics["policy_lag"] == 1
    finally:
        algo.stop()
    assert reason == "episode_return_mean", f"return {ret:.1f} after {steps} steps"


@pytest.mark.ray
def test_env_runner_actors_overlap(ray_client: None, tmp_path: Path) -> None:
    config = _config(overlap_sampling=True, num_env_runners=2, num_cpus_per_env_runner=0.5)
    algo = PPO(config)
    try:
        rows = [algo.train() for _ in range(3)]
        assert [r["policy_lag"] for r in rows] == [0, 1, 1]
        assert all(r["env_steps"] >= 256 * r["iteration"] for r in rows)
        path = algo.save_checkpoint(tmp_path / "ckpt")  # with the actors' batch in flight
        assert algo.train()["iteration"] == 4
    finally:
        algo.stop()
    resumed = PPO.from_checkpoint(path, config)
    try:
        assert resumed.iteration == 3
        assert [resumed.train()["policy_lag"] for _ in range(2)] == [0, 1]
    finally:
        resumed.stop()


def test_overlap_with_the_threaded_atari_vector_env() -> None:
    # ale-py steps its envs on C++ threads while the Learner trains the CNN in this process.
    config = resolve_config(
        {
            "env_id": "ALE/Pong-v5",
            "overlap_sampling": True,
            "num_envs_per_env_runner": 4,
            "train_batch_size_per_learner": 128,
            "minibatch_size": 64,
            "num_epochs": 1,
            "env_config": {"max_num_frames_per_episode": 100},  # 25-step episodes
        }
    ).config
    algo = PPO(config)
    try:
        rows = [algo.train() for _ in range(3)]
    finally:
        algo.stop()
    assert [r["policy_lag"] for r in rows] == [0, 1, 1]
    assert rows[-1]["env_steps"] >= 3 * 128 and rows[-1]["episodes"] >= 12
    assert all(np.isfinite(r["policy_loss"]) for r in rows)
