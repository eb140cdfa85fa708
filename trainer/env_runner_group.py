"""EnvRunnerGroup: one in-process EnvRunner (serial mode) or N EnvRunner Ray actors.

The only place `ray.remote` touches an EnvRunner. Contract with the actors (Acme-style thin
actors): `sample(num_timesteps) -> SampleResult` and `set_weights(version, weights,
connector_state)`. Weights go into the object store once per iteration (one `ray.put`); sample
futures are collected with one `ray.get`. Ray is imported lazily: serial mode never loads it.

Fault tolerance: an actor that dies (RayActorError) is replaced by a fresh one that gets the
current weights and connector state; its lost samples are re-sampled from the group, and the
restart is counted (`restarts`) and logged.

Overlap (config.overlap_sampling): `start_sample(n)` begins the next batch in the background
(serial mode: one sampling thread; Ray: the actors' sample() calls are submitted and not
waited for) and the next `sample(n)` collects it. Weights synced meanwhile reach the runners
after that sample: Ray actors run calls in order, and the local runner gets them when its
thread is done (never while it is stepping). So a batch started before update k is sampled with
the weights before it: policy lag 1.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import logging
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainer.config import PPOConfig
from trainer.connectors import merge_filter_states
from trainer.env_runner import EnvRunner, SampleResult
from trainer.wire import RAY_ENV

log = logging.getLogger(__name__)

SAMPLE_TIMEOUT_S = 600.0  # a runner that takes longer is treated as hung (clear error)
MAX_ROUNDS = 8  # sampling rounds per iteration before giving up (every round lost a runner)


@dataclass
class _InFlight:
    """A sample started by start_sample(): the local thread's future, or the actors' refs."""

    num_timesteps: int
    local: concurrent.futures.Future[SampleResult] | None = None
    remote: list[Any] | None = None


def needs_ray(config: PPOConfig) -> bool:
    return config.num_env_runners > 0 or config.num_learners > 0


def ensure_ray(config: PPOConfig) -> None:
    """Connect to RAY_ADDRESS, or start a private local Ray when none is running.

    Local mode follows the platform rules: explicit CPUs and object store size (the default is
    30 % of RAM), a private temp dir (a stale default one can hang `ray.init`), no dashboard.
    Ray's local head picks a free GCS port (never 6379, where Redis may listen).
    """
    import ray

    if ray.is_initialized():
        return
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    address = os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":
        temp_dir = tempfile.mkdtemp(prefix="rollout-ray-", dir="/tmp")  # short: socket paths
        ray.init(
            address="local",
            num_cpus=max(2, math.ceil(config.ray_cpus)),
            num_gpus=math.ceil(config.num_learners * config.num_gpus_per_learner),
            object_store_memory=256 * 1024**2,
            include_dashboard=False,
            _temp_dir=temp_dir,
            log_to_driver=True,
        )
        atexit.register(_shutdown_local_ray, temp_dir)
    else:
        ray.init(address=address, log_to_driver=True)


@functools.cache
def _remote_env_runner() -> Any:
    """The one place EnvRunner becomes a Ray actor class (built once per process)."""
    import ray

    return ray.remote(EnvRunner)


def _shutdown_local_ray(temp_dir: str) -> None:
    """Stop the private Ray this process started and remove its session files."""
    import ray

    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


class EnvRunnerGroup:
    """Samples a whole train batch per call, from one local runner or from N Ray actors."""

    def __init__(self, config: PPOConfig) -> None:
        self.config = config
        self.restarts = 0
        self.connector_state: dict[str, Any] = {}  # merged global state (obs filter stats)
        self._weights: tuple[int, Any] | None = None  # (version, weights or their ObjectRef)
        self.local: EnvRunner | None = None
        self._actors: list[Any] = []
        self._generation: list[int] = []
        self._in_flight: _InFlight | None = None
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None  # serial overlap
        self._local_weights_stale = False  # the local runner waits for self._weights
        if config.num_env_runners == 0:
            self.local = EnvRunner(config, worker_index=0)
        else:
            self._actors = [self._new_actor(i + 1, 0) for i in range(config.num_env_runners)]
            self._generation = [0] * config.num_env_runners

    def _new_actor(self, worker_index: int, generation: int) -> Any:
        return (
            _remote_env_runner()
            .options(num_cpus=self.config.num_cpus_per_env_runner)
            .remote(self.config, worker_index, generation, seed_torch=True)
        )

    # --- weights -------------------------------------------------------------------------------
    def sync_weights(self, version: int, weights: dict[str, np.ndarray]) -> None:
        """Send policy weights and the merged connector state to every runner (no wait: actor
        calls run in order, so the next sample() already sees them)."""
        if self.local is not None:
            self._weights = (version, weights)
            if self._in_flight is None:
                self.local.set_weights(version, weights, self.connector_state)
            else:  # its thread is stepping with the current weights: load them after it
                self._local_weights_stale = True
            return
        import ray

        ref = ray.put(weights)
        self._weights = (version, ref)
        for actor in self._actors:
            actor.set_weights.remote(version, ref, self.connector_state)

    # --- sampling ------------------------------------------------------------------------------
    def sample(self, num_timesteps: int) -> list[SampleResult]:
        """At least `num_timesteps` env steps, split evenly over the runners: the sample that
        start_sample() began if one is in flight, else a new one."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None and in_flight.num_timesteps != num_timesteps:
            raise ValueError(
                f"a sample of {in_flight.num_timesteps} steps is in flight, not {num_timesteps}"
            )
        if self.local is not None:
            if in_flight is not None and in_flight.local is not None:
                results = [in_flight.local.result(timeout=SAMPLE_TIMEOUT_S)]
            else:
                results = [self.local.sample(num_timesteps)]
        else:
            started = in_flight.remote if in_flight is not None else None
            results = self._sample_remote(num_timesteps, started)
        self.connector_state = merge_filter_states(
            self.connector_state, [r.connector_delta for r in results]
        )
        self._load_deferred_weights()
        return results

    def start_sample(self, num_timesteps: int) -> None:
        """Begin sampling `num_timesteps` steps in the background; sample() collects them."""
        if self._in_flight is not None:
            raise RuntimeError("a sample is already in flight")
        if self.local is not None:
            if self._thread is None:
                self._thread = concurrent.futures.ThreadPoolExecutor(1, "rollout-sampler")
            future = self._thread.submit(self.local.sample, num_timesteps)
            self._in_flight = _InFlight(num_timesteps, local=future)
            return
        quota = math.ceil(num_timesteps / len(self._actors))
        refs = [actor.sample.remote(quota) for actor in self._actors]
        self._in_flight = _InFlight(num_timesteps, remote=refs)

    def wait(self) -> None:
        """Let an in-flight local sample finish (it is kept for the next sample() call): the
        RNGs its action sampling draws from (its numpy generator, or the process's torch RNG
        on the module's path) are then at rest."""
        if self._in_flight is not None and self._in_flight.local is not None:
            concurrent.futures.wait([self._in_flight.local], timeout=SAMPLE_TIMEOUT_S)

    def discard_sample(self) -> None:
        """Drop an in-flight sample (its steps are never trained on or counted); a local one
        is waited for first, so the env is never closed or reloaded mid-step."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return
        if in_flight.local is not None:
            concurrent.futures.wait([in_flight.local], timeout=SAMPLE_TIMEOUT_S)
        self._load_deferred_weights()
        # Ray: the actors finish the call and drop its result; later calls queue behind it.

    def _load_deferred_weights(self) -> None:
        """The local runner's sample is done: load what sync_weights() held back meanwhile."""
        if self._local_weights_stale and self.local is not None and self._weights is not None:
            self._local_weights_stale = False
            self.local.set_weights(*self._weights, self.connector_state)

    def _sample_remote(self, num_timesteps: int, started: list[Any] | None) -> list[SampleResult]:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        results: list[SampleResult] = []
        collected = 0
        for _ in range(MAX_ROUNDS):
            if collected >= num_timesteps:
                return results
            quota = math.ceil((num_timesteps - collected) / len(self._actors))
            futures = started or [actor.sample.remote(quota) for actor in self._actors]
            started = None
            try:
                round_results = ray.get(futures, timeout=SAMPLE_TIMEOUT_S)
            except RayActorError:
                round_results = self._collect_survivors(futures)
            except GetTimeoutError as exc:
                raise TimeoutError(
                    f"EnvRunners did not return {quota} steps within {SAMPLE_TIMEOUT_S}s"
                ) from exc
            results.extend(round_results)
            collected += sum(r.env_steps for r in round_results)
        if collected < num_timesteps:
            raise RuntimeError(f"EnvRunners kept failing: {MAX_ROUNDS} rounds lost a runner")
        return results

    def _collect_survivors(self, futures: list[Any]) -> list[SampleResult]:
        """Results of the runners that are alive; replace the dead ones."""
        import ray
        from ray.exceptions import RayActorError

        alive: list[SampleResult] = []
        for i, future in enumerate(futures):
            try:
                alive.append(ray.get(future, timeout=SAMPLE_TIMEOUT_S))
            except RayActorError as exc:
                self._restart(i, exc)
        return alive

    def _restart(self, i: int, exc: Exception) -> None:
        import ray

        self.restarts += 1
        self._generation[i] += 1
        log.warning(
            "EnvRunner %d died (%s); restarting it (restart #%d)",
            i + 1,
            type(exc).__name__,
            self.restarts,
        )
        ray.kill(self._actors[i], no_restart=True)
        actor = self._new_actor(i + 1, self._generation[i])
        if self._weights is not None:
            version, ref = self._weights
            actor.set_weights.remote(version, ref, self.connector_state)
        self._actors[i] = actor

    @property
    def actors(self) -> list[Any]:
        """The runner actors (tests kill one to check recovery)."""
        return list(self._actors)

    def stop(self) -> None:
        self.discard_sample()
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None
        if self.local is not None:
            self.local.stop()
        if self._actors:
            import ray

            for actor in self._actors:
                ray.kill(actor, no_restart=True)
            self._actors = []
