"""EnvRunner sample buffers are kept across calls, and never overwritten while a chunk of them
is alive; the resolution defaults that depend on where the run learns."""

from __future__ import annotations

import numpy as np

from trainer.config import PPOConfig
from trainer.env_runner import EnvRunner
from trainer.resolve import resolve_config, usable_cores


def test_buffers_are_reused_once_their_chunks_are_gone() -> None:
    runner = EnvRunner(PPOConfig(num_envs_per_env_runner=4, seed=3))
    try:
        first = runner.sample(64)
        base = id(first.chunks[0].obs.base)  # an id: a reference would hold the set
        held = [c.obs.copy() for c in first.chunks]
        second = runner.sample(64)  # first's chunks are alive: another set
        assert id(second.chunks[0].obs.base) != base
        for chunk, copy in zip(first.chunks, held, strict=True):
            np.testing.assert_array_equal(chunk.obs, copy)
        del first, chunk
        third = runner.sample(64)  # no chunk of the first set is left: it is written again
        assert id(third.chunks[0].obs.base) == base
    finally:
        runner.stop()


def test_derived_defaults_for_the_learner_device() -> None:
    cpu = resolve_config({"env_id": "ALE/Pong-v5"})
    assert cpu.config.torch_num_threads == max(1, usable_cores())
    assert not cpu.config.overlap_sampling and "torch_num_threads" in cpu.derived
    gpu = resolve_config({"env_id": "ALE/Pong-v5", "num_gpus_per_learner": 1})
    assert gpu.config.overlap_sampling and gpu.config.torch_num_threads == 1
    mine = resolve_config(
        {"env_id": "ALE/Pong-v5", "num_gpus_per_learner": 1, "overlap_sampling": False}
    )
    assert not mine.config.overlap_sampling
    again = resolve_config(cpu.config.to_json_dict())
    assert again.config == cpu.config and again.derived == ()
