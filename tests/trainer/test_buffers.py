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


def test_step_outputs_come_back_in_one_packed_copy() -> None:
    import gymnasium as gym
    import torch

    from trainer.devices import StepOutputs

    for space, example in (
        (gym.spaces.Discrete(6), np.zeros(1, np.int64)),
        (gym.spaces.Box(-1, 1, (3,)), np.zeros((1, 3), np.float32)),
    ):
        n = 5
        actions = torch.from_numpy(np.stack([space.sample() for _ in range(n)]))
        logp = torch.randn(n)
        dist = torch.randn(n, 7)
        out = StepOutputs(n, example, 7)
        got_a, got_logp, got_dist = out.unpack(out.pack(actions, logp, dist).numpy())
        assert got_a.dtype == example.dtype and got_a.shape == tuple(actions.shape)
        np.testing.assert_array_equal(got_a, actions.numpy())
        np.testing.assert_array_equal(got_logp, logp.numpy())
        np.testing.assert_array_equal(got_dist, dist.numpy())


def test_process_groups_bind_a_whole_gpu_and_share_a_fraction_through_gloo() -> None:
    import torch

    from trainer.learner_group import process_group_options

    assert process_group_options(0.0) == {"backend": "gloo"}
    assert process_group_options(0.5) == {"backend": "gloo"}
    whole = process_group_options(1.0)
    assert whole["backend"] == "nccl" and whole["device_id"] == torch.device("cuda", 0)


def test_a_gpu_learner_saves_and_restores_the_cuda_rng(monkeypatch) -> None:
    import torch

    from trainer.envs import env_spaces
    from trainer.learner import PPOLearner

    learner = PPOLearner(PPOConfig(), *env_spaces("CartPole-v1", {}))
    assert "cuda_rng" not in learner.get_state()  # a CPU learner has none
    restored: list[torch.Tensor] = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: torch.tensor([7]))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device: restored.append(s))
    learner.device = torch.device("cuda", 0)  # the wiring only: no GPU here
    state = learner.get_state()
    assert state["cuda_rng"].tolist() == [7]
    learner.set_state(state)
    assert [s.tolist() for s in restored] == [[7]]
