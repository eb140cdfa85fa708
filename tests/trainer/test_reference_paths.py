"""ROLLOUT_REFERENCE_PATHS=1: every choice between a fast path and its torch reference takes the
reference (the Learner's SGD step, the EnvRunners' and evaluations' policy), and the service
passes the switch on to the jobs it launches."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer.config import PPOConfig
from trainer.env_runner import EnvRunner
from trainer.episode import EpisodeChunk
from trainer.fast.flat_adam import FlatAdam
from trainer.fast.policy import NumpyPolicy
from trainer.fast.switch import reference_paths
from trainer.learner import PPOLearner
from trainer.module import PPOModule
from trainer.policy import TorchPolicy, make_policy
from trainer.wire import ENV_REFERENCE_PATHS

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(2)
CONFIG = PPOConfig(seed=4, train_batch_size_per_learner=256, minibatch_size=64, num_epochs=2)
CPU = torch.device("cpu")


def _chunks(rng: np.random.Generator, n: int = 8, length: int = 32) -> list[EpisodeChunk]:
    """Chunks of a uniformly random policy over random observations."""
    return [
        EpisodeChunk(
            f"c{i}",
            0,
            rng.uniform(-1.0, 1.0, (length + 1, 4)).astype(np.float32),
            rng.integers(0, 2, length),
            rng.normal(size=length).astype(np.float32),
            np.full(length, np.log(0.5), np.float32),
            np.zeros((length, 2), np.float32),
            terminated=i % 2 == 0,
            truncated=False,
            weights_version=0,
        )
        for i in range(n)
    ]


def test_unset_the_fast_paths_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_REFERENCE_PATHS, raising=False)
    assert not reference_paths()
    learner = PPOLearner(CONFIG, OBS, DISCRETE)
    assert learner.sgd_step.name == "hand-written" and isinstance(learner.optimizer, FlatAdam)
    module = PPOModule(OBS, DISCRETE, CONFIG.model, inference_only=True)
    assert isinstance(make_policy(module, CPU, np.random.default_rng(0)), NumpyPolicy)


def test_the_switch_picks_the_reference_implementations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_REFERENCE_PATHS, "1")
    assert reference_paths()
    learner = PPOLearner(CONFIG, OBS, DISCRETE)
    assert learner.sgd_step.name == "autograd" and not isinstance(learner.optimizer, FlatAdam)
    runner = EnvRunner(CONFIG.model_copy(update={"num_envs_per_env_runner": 2}))
    assert isinstance(runner.policy, TorchPolicy)
    result = runner.sample(16)
    assert result.env_steps >= 16 and all(len(c.logp) == len(c) for c in result.chunks)
    runner.stop()
    module = PPOModule(OBS, DISCRETE, CONFIG.model, inference_only=True)
    # trainer/evaluation.py load_policy acts through make_policy as well.
    assert isinstance(make_policy(module, CPU, np.random.default_rng(0)), TorchPolicy)
    # A step named in code is still the one named.
    assert PPOLearner(CONFIG, OBS, DISCRETE, sgd_step="hand-written").sgd_step.name == (
        "hand-written"
    )


def test_an_update_under_the_switch_is_the_autograd_update(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_REFERENCE_PATHS, raising=False)
    autograd = PPOLearner(CONFIG, OBS, DISCRETE, sgd_step="autograd")
    expected = [autograd.update(_chunks(np.random.default_rng(u)), 256 * u) for u in range(2)]
    monkeypatch.setenv(ENV_REFERENCE_PATHS, "true")
    switched = PPOLearner(CONFIG, OBS, DISCRETE)
    got = [switched.update(_chunks(np.random.default_rng(u)), 256 * u) for u in range(2)]
    for a, b in zip(got, expected, strict=True):
        a_stats, b_stats = a.as_dict(), b.as_dict()
        for timing in ("time_gae_s", "time_sgd_s"):
            del a_stats[timing], b_stats[timing]
        assert a_stats == b_stats
    for p, q in zip(switched.module.parameters(), autograd.module.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize(("value", "forced"), [("0", False), ("", False), ("On", True)])
def test_the_switch_reads_yes_and_no(
    monkeypatch: pytest.MonkeyPatch, value: str, forced: bool
) -> None:
    monkeypatch.setenv(ENV_REFERENCE_PATHS, value)
    assert reference_paths() is forced


def test_a_value_that_is_neither_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_REFERENCE_PATHS, "sometimes")
    with pytest.raises(ValueError, match=ENV_REFERENCE_PATHS):
        PPOLearner(CONFIG, OBS, DISCRETE)


@pytest.mark.parametrize("set_for_service", [True, False])
def test_the_service_passes_the_switch_to_its_jobs(
    monkeypatch: pytest.MonkeyPatch, set_for_service: bool
) -> None:
    from app.jobs.launcher import JobRequest, RayJobLauncher
    from app.jobs.resources import JobResources

    if set_for_service:
        monkeypatch.setenv(ENV_REFERENCE_PATHS, "1")
    else:
        monkeypatch.delenv(ENV_REFERENCE_PATHS, raising=False)
    launcher = RayJobLauncher("http://ray.invalid:8265", stop_grace_s=1)
    request = JobRequest(
        experiment_id=1,
        resources=JobResources(driver_cpus=1.0, driver_gpus=0.0, actor_cpus=0.0, actor_gpus=0.0),
        claim="claim",
        api_url="http://127.0.0.1:8000",
        job_dir=Path("/tmp/job"),
    )
    env_vars = launcher.runtime_env(request)["env_vars"]
    assert env_vars.get(ENV_REFERENCE_PATHS) == ("1" if set_for_service else None)
