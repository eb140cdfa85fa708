"""PPO: the training loop. One `train()` call is one iteration:

    sample a full batch (EnvRunnerGroup) -> learner update, GAE inside (LearnerGroup)
    -> push versioned weights + merged connector state to the runners -> metrics.

With `overlap_sampling`, the next batch is started right after this one is collected, so the
EnvRunners sample batch k+1 with the weights from before update k while the Learner trains on
batch k (policy lag 1; PPO's ratio uses the sampling policy's logp, so its clip bounds the
off-policyness).

Serial mode (no EnvRunner or Learner actors) never imports Ray. Stop criteria, checkpoints and
resuming live here too; the on-disk format is trainer/checkpoint.py's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.config import PPOConfig
from trainer.connectors import build_env_to_module
from trainer.env_runner import SampleResult
from trainer.env_runner_group import EnvRunnerGroup, ensure_ray, needs_ray
from trainer.envs import env_spaces
from trainer.episode_window import EpisodeWindow
from trainer.learner_group import LearnerGroup
from trainer.system_metrics import SystemMonitor
from trainer.timers import Timers


@dataclass(frozen=True)
class IterationResult:
    """What one `PPO.train_iteration()` did, typed; `metrics` is its flat form (computed once),
    the one dict every sink writes (the service's metric rows, metrics.jsonl, the console).

    `episode` holds the return window's statistics (episode_return_mean/min/max,
    episode_len_mean; NaN before the first finished episode), `learner` the learner's stats
    (losses, entropy, KL, ...), `timers` the phase timers (time_<phase>_s)."""

    iteration: int
    env_steps: int  # lifetime
    episodes: int  # lifetime, finished
    episode: dict[str, float]
    learner: dict[str, float]
    env_steps_per_s: float
    timers: dict[str, float]
    time_env_step_s: float
    time_inference_s: float
    time_s: float  # since the run's start_time
    policy_lag: int
    env_runner_restarts: int
    system: dict[str, float] = field(default_factory=dict)  # system/... (system_metrics.py)

    @property
    def episode_return_mean(self) -> float:
        return self.episode["episode_return_mean"]

    @cached_property
    def metrics(self) -> dict[str, float]:
        """The flat metrics: every value a float, keys as the dashboard and metrics.jsonl use."""
        return {
            "iteration": float(self.iteration),
            "env_steps": float(self.env_steps),
            "episodes": float(self.episodes),
            **self.episode,
            **self.learner,
            "env_steps_per_s": self.env_steps_per_s,
            **self.timers,
            "time_env_step_s": self.time_env_step_s,
            "time_inference_s": self.time_inference_s,
            "time_s": self.time_s,
            "policy_lag": float(self.policy_lag),
            "env_runner_restarts": float(self.env_runner_restarts),
            **self.system,
        }


class PPO:
    """Proximal Policy Optimization (Schulman et al. 2017) on the EnvRunner -> Learner split."""

    def __init__(self, config: PPOConfig, *, start_time: float | None = None) -> None:
        self.config = config
        self.start_time = time.monotonic() if start_time is None else start_time
        torch.manual_seed(config.seed)
        np.random.seed(config.seed)
        if needs_ray(config):
            ensure_ray(config)
        raw_obs_space, action_space = env_spaces(config.env_id, config.env_config)
        # The module sees the env-to-module output (stacked / normalised observations).
        obs_space = build_env_to_module(config, raw_obs_space, 1).output_space
        self.learner_group = LearnerGroup(config, obs_space, action_space)
        self.env_runners = EnvRunnerGroup(config)
        self.window = EpisodeWindow()
        # The Learner's GPU, where it is in this process (serial Learner, num_learners 0).
        local = self.learner_group.local
        self.system = SystemMonitor(local.device if local is not None else None)
        self.iteration = 0
        self.env_steps = 0  # lifetime, transitions only
        self.weights_version = 0
        self.last_metrics: dict[str, float] = {}
        self.last_result: IterationResult | None = None
        self.env_runners.sync_weights(
            self.weights_version, self.learner_group.get_inference_weights()
        )

    def train(self) -> dict[str, float]:
        """One iteration; returns its flat metrics (`train_iteration().metrics`)."""
        return self.train_iteration().metrics

    def train_iteration(self) -> IterationResult:
        """One iteration, typed. With overlap_sampling the EnvRunners sample the next batch
        (with the weights before this update) while the Learner trains."""
        batch_size = self.config.total_train_batch_size
        timers = Timers()
        with timers("iteration"):
            with timers("sample"):  # overlapped: the wait for the batch started last time
                results = self.env_runners.sample(batch_size)
            if self.config.overlap_sampling:
                self.env_runners.start_sample(batch_size)
            chunks = [chunk for r in results for chunk in r.chunks]
            steps = sum(r.env_steps for r in results)
            # The lr schedule reads the step count where this batch's sampling began (CleanRL
            # anneals at the start of an iteration): the last update of a run never gets lr 0.
            batch_start = self.env_steps
            self.env_steps += steps
            for r in results:
                self.window.add(r.episode_returns, r.episode_lengths)
            learner_stats = self.learner_group.update(chunks, batch_start)
            policy_lag = self.weights_version - min(r.weights_version for r in results)
            with timers("weight_sync"):  # overlapped: the runners load them after that batch
                self.weights_version += 1
                weights = self.learner_group.get_inference_weights()
                self.env_runners.sync_weights(self.weights_version, weights)
        self.iteration += 1
        result = self._result(results, steps, learner_stats, timers, policy_lag)
        self.last_result, self.last_metrics = result, result.metrics
        return result

    def _result(
        self,
        results: list[SampleResult],
        steps: int,
        learner_stats: dict[str, float],
        timers: Timers,
        policy_lag: int,
    ) -> IterationResult:
        seconds = timers.as_dict()
        return IterationResult(
            iteration=self.iteration,
            env_steps=self.env_steps,
            episodes=self.window.episodes,
            episode=self.window.as_dict(),
            learner=dict(learner_stats),
            env_steps_per_s=steps / max(seconds["time_iteration_s"], 1e-9),
            timers=seconds,
            time_env_step_s=sum(r.time_env_s for r in results),
            time_inference_s=sum(r.time_inference_s for r in results),
            time_s=time.monotonic() - self.start_time,
            policy_lag=policy_lag,
            env_runner_restarts=self.env_runners.restarts,
            system=self.system.sample(),
        )

    # --- stop criteria -------------------------------------------------------------------------
    def stop_reason(self) -> str | None:
        """The first stop criterion met ("episode_return_mean" | "env_steps" | "wall_seconds").

        The return criterion is the mean of the last 100 finished episodes: it cannot fire
        before 100 episodes have finished (a few lucky early episodes are not a result)."""
        stop = self.config.stop
        if (
            stop.episode_return_mean is not None
            and self.window.full
            and self.window.return_mean >= stop.episode_return_mean
        ):
            return "episode_return_mean"
        if stop.env_steps is not None and self.env_steps >= stop.env_steps:
            return "env_steps"
        if (
            stop.wall_seconds is not None
            and time.monotonic() - self.start_time >= stop.wall_seconds
        ):
            return "wall_seconds"
        return None

    # --- checkpoints ---------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The state after the last iteration. A sample in flight is not part of it (a resumed
        run samples afresh); it is let finish first, so the saved RNGs are at rest. The local
        EnvRunner's action stream is saved with the torch RNG (serial mode resumes the same
        draws); actors' streams are not (a resumed run starts new actors)."""
        self.env_runners.wait()
        local = self.env_runners.local
        return {
            "learner": self.learner_group.get_state(),
            "connector_state": self.env_runners.connector_state,
            "window": self.window.get_state(),
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "weights_version": self.weights_version,
            "env_runner_restarts": self.env_runners.restarts,
            "torch_rng": torch.get_rng_state(),
            **({"sampler_rng": local.get_rng_state()} if local is not None else {}),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.env_runners.discard_sample()  # sampled with weights that are being replaced
        self.learner_group.set_state(state["learner"])
        self.env_runners.connector_state = state["connector_state"]
        self.window.set_state(state["window"])
        self.iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])
        self.weights_version = int(state["weights_version"])
        self.env_runners.restarts = int(state["env_runner_restarts"])
        torch.set_rng_state(state["torch_rng"])
        if "sampler_rng" in state and self.env_runners.local is not None:
            self.env_runners.local.set_rng_state(state["sampler_rng"])
        # Runners get the restored weights AND filter stats (RLlib forgot the latter, #54408).
        self.env_runners.sync_weights(
            self.weights_version, self.learner_group.get_inference_weights()
        )

    def save_checkpoint(self, directory: str | Path) -> Path:
        from trainer.checkpoint import CheckpointInfo, save

        info = CheckpointInfo(
            config=self.config,
            iteration=self.iteration,
            env_steps=self.env_steps,
            episode_return_mean=self.window.return_mean,
        )
        return save(Path(directory), self.get_state(), info)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        config: PPOConfig | None = None,
        *,
        start_time: float | None = None,
    ) -> PPO:
        """Resume from a checkpoint directory or .tar.gz; `config` may override the saved one
        (e.g. a later stop criterion)."""
        from trainer.checkpoint import load

        saved_config, state = load(Path(path))
        algo = cls(config or saved_config, start_time=start_time)
        algo.set_state(state)
        return algo

    def stop(self) -> None:
        """Release the EnvRunner and Learner actors (serial mode: close the envs); a sample in
        flight is discarded."""
        self.env_runners.stop()
        self.learner_group.stop()
