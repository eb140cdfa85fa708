"""LearnerGroup: one in-process PPOLearner, or N Ray actors doing data-parallel torch DDP.

num_learners = 0: the learner lives in the caller's process (serial mode; Ray is not imported).
num_learners = N > 0: N actors; rank 0 picks a free TCP port on its node, every rank joins the
process group there (gloo on CPU, nccl when num_gpus_per_learner > 0), DDP broadcasts rank 0's
weights and all-reduces gradients, so all ranks hold identical weights after every update. Each
rank gets an equal share of the steps (trainer/batch.py `shard_chunks`) and computes GAE and
advantage standardisation on its own shard (as RLlib does).

`ray.remote` is applied in exactly one place (`_remote_worker_class`), to a thin wrapper around
the plain PPOLearner. All remote calls are submitted first and gathered with one `ray.get`.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import gymnasium as gym
import numpy as np

from trainer.batch import shard_chunks
from trainer.config import PPOConfig
from trainer.devices import learner_device
from trainer.episode import EpisodeChunk
from trainer.learner import PPOLearner

# Waits with a bound: actors that cannot be scheduled (not enough CPUs/GPUs) must fail loudly.
_SETUP_TIMEOUT_S = 180.0
# A collective that waits longer than this on a dead peer raises instead of hanging the job.
_COLLECTIVE_TIMEOUT = timedelta(minutes=10)
# Stats that add up over learners rather than average; timings report the slowest rank.
_SUMMED = frozenset({"num_steps_trained"})
_MAXED = frozenset({"time_gae_s", "time_sgd_s"})


class LearnerWorker:
    """One DDP rank in a Ray actor: joins the process group, then holds a PPOLearner."""

    def __init__(
        self,
        config: PPOConfig,
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Discrete | gym.spaces.Box,
        rank: int,
        world_size: int,
    ) -> None:
        self.config = config
        self.spaces = (observation_space, action_space)
        self.rank, self.world_size = rank, world_size
        self.learner: PPOLearner | None = None

    def rendezvous_address(self) -> tuple[str, int]:
        """This node's address and a TCP port free on it (asked of rank 0 only)."""
        import ray

        host = ray.util.get_node_ip_address()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return host, s.getsockname()[1]

    def setup(self, host: str, port: int) -> None:
        import torch.distributed as dist

        dist.init_process_group(
            init_method=f"tcp://{host}:{port}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=_COLLECTIVE_TIMEOUT,
            **process_group_options(self.config.num_gpus_per_learner),
        )
        self.learner = PPOLearner(
            self.config,
            *self.spaces,
            device=learner_device(self.config),
            rank=self.rank,
            world_size=self.world_size,
        )

    def update(self, chunks: list[EpisodeChunk], env_steps: int) -> dict[str, float]:
        return self._learner().update(chunks, env_steps).as_dict()

    def get_inference_weights(self) -> dict[str, np.ndarray]:
        return self._learner().get_inference_weights()

    def get_state(self) -> dict[str, Any]:
        return self._learner().get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._learner().set_state(state)

    def _learner(self) -> PPOLearner:
        if self.learner is None:
            raise RuntimeError("LearnerWorker.setup() has not run")
        return self.learner


def process_group_options(num_gpus_per_learner: float) -> dict[str, Any]:
    """Backend (and device) of the DDP group. nccl binds each rank to its GPU (device_id, so
    its barrier does not guess cuda:<rank>); learners with a fraction of a GPU may share one,
    which NCCL refuses (one rank per device), so they all-reduce through gloo."""
    if num_gpus_per_learner < 1:
        return {"backend": "gloo"}
    import inspect

    import torch
    import torch.distributed as dist

    options: dict[str, Any] = {"backend": "nccl"}
    if "device_id" in inspect.signature(dist.init_process_group).parameters:
        options["device_id"] = torch.device("cuda", 0)  # Ray narrows the visible GPUs
    return options


def _remote_worker_class() -> Any:
    import ray

    return ray.remote(max_restarts=0)(LearnerWorker)


def average_stats(results: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-learner stats -> one dict: means, except step counts (summed) and timings (max)."""
    out: dict[str, float] = {}
    for key in results[0]:
        vals = [r[key] for r in results]
        if key in _SUMMED:
            out[key] = float(sum(vals))
        elif key in _MAXED:
            out[key] = float(max(vals))
        else:
            out[key] = float(np.mean(vals))
    return out


class LearnerGroup:
    """The learning side of the algorithm behind four coarse calls: update, weights, state, stop."""

    def __init__(
        self,
        config: PPOConfig,
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Discrete | gym.spaces.Box,
    ) -> None:
        self.config = config
        self.local: PPOLearner | None = None
        self.workers: list[Any] = []
        if config.num_learners == 0:
            device = learner_device(config)
            self.local = PPOLearner(config, observation_space, action_space, device=device)
            return
        import ray

        n = config.num_learners
        remote_cls = _remote_worker_class().options(
            num_cpus=config.num_cpus_per_learner, num_gpus=config.num_gpus_per_learner
        )
        self.workers = [
            remote_cls.remote(config, observation_space, action_space, rank, n) for rank in range(n)
        ]
        try:
            host, port = ray.get(
                self.workers[0].rendezvous_address.remote(), timeout=_SETUP_TIMEOUT_S
            )
            ray.get([w.setup.remote(host, port) for w in self.workers], timeout=_SETUP_TIMEOUT_S)
        except Exception:
            self.stop()
            raise

    @property
    def num_learners(self) -> int:
        return max(1, len(self.workers))

    def update(self, chunks: Sequence[EpisodeChunk], env_steps: int) -> dict[str, float]:
        """One PPO update on `chunks`; metrics averaged over learners."""
        if self.local is not None:
            return self.local.update(chunks, env_steps).as_dict()
        import ray

        shards = shard_chunks(chunks, len(self.workers))
        futures = [w.update.remote(s, env_steps) for w, s in zip(self.workers, shards, strict=True)]
        return average_stats(ray.get(futures))

    def get_inference_weights(self) -> dict[str, np.ndarray]:
        """Policy weights (numpy); every DDP rank holds the same, so rank 0 answers."""
        if self.local is not None:
            return self.local.get_inference_weights()
        import ray

        return ray.get(self.workers[0].get_inference_weights.remote())

    def get_state(self) -> dict[str, Any]:
        if self.local is not None:
            return self.local.get_state()
        import ray

        return ray.get(self.workers[0].get_state.remote())

    def set_state(self, state: dict[str, Any]) -> None:
        if self.local is not None:
            self.local.set_state(state)
            return
        import ray

        ref = ray.put(state)
        ray.get([w.set_state.remote(ref) for w in self.workers])

    def stop(self) -> None:
        """Kill the learner actors (idempotent)."""
        if self.workers:
            import ray

            for w in self.workers:
                ray.kill(w)
            self.workers = []
