"""LearnerGroup: sharding, the in-process learner, and data-parallel DDP over Ray actors."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from tests.trainer.test_learner import DISCRETE, OBS, make_chunks
from trainer.batch import build_train_batch, shard_chunks
from trainer.config import ModelConfig, PPOConfig
from trainer.learner import PPOLearner
from trainer.learner_group import LearnerGroup, average_stats


def _chunks_of(lengths: list[int], seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for n, length in enumerate(lengths):
        (chunk,) = make_chunks(None, rng, num_chunks=1, length=length)
        out.append(dataclasses.replace(chunk, id=f"episode-{n}"))
    return out


def test_shards_are_balanced_by_steps_whole_chunks_when_possible() -> None:
    chunks = _chunks_of([50, 40, 30, 20, 10, 10, 5, 5])
    shards = shard_chunks(chunks, 2)
    assert [sum(len(c) for c in s) for s in shards] == [85, 85]
    assert sorted(id(c) for s in shards for c in s) == sorted(id(c) for c in chunks)
    # 15 chunks of 32: whole chunks give 256 / 224, within 10 % of the 240 share: no split.
    shards = shard_chunks(_chunks_of([32] * 15), 2)
    assert sorted(sum(len(c) for c in s) for s in shards) == [224, 256]
    # Whole chunks would give 60 / 40, 20 % over the 50 share: split to 50 / 50.
    shards = shard_chunks(_chunks_of([60, 40]), 2)
    assert [sum(len(c) for c in s) for s in shards] == [50, 50]
    with pytest.raises(ValueError, match="2 env steps cannot feed 3 learners"):
        shard_chunks(_chunks_of([1, 1]), 3)


def test_a_long_chunk_is_split_so_every_learner_gets_its_share() -> None:
    chunks = _chunks_of([100, 11])
    shards = shard_chunks(chunks, 3)
    assert [sum(len(c) for c in s) for s in shards] == [37, 37, 37]
    pieces = sorted(
        (c for s in shards for c in s if c.id == chunks[0].id), key=lambda c: c.t_started
    )
    assert [c.t_started for c in pieces] == [0, 37, 74]
    np.testing.assert_array_equal(np.concatenate([c.rewards for c in pieces]), chunks[0].rewards)
    for head, tail in itertools.pairwise(pieces):
        np.testing.assert_array_equal(head.obs[-1], tail.obs[0])  # head bootstraps from V(s_k)
        assert not head.is_done  # a cut: the episode continues in `tail`
    assert pieces[-1].terminated == chunks[0].terminated


def test_splitting_leaves_td_advantages_unchanged() -> None:
    """With lambda = 0 a split is exact: the head's bootstrap V(s_k) is the TD target's V(s_k)."""
    chunks = _chunks_of([100, 11, 7])

    def value_fn(obs: torch.Tensor) -> torch.Tensor:
        return obs.sum(-1)

    def targets(cs):
        b = build_train_batch(cs, value_fn, gamma=0.9, lam=0.0, normalize_advantages=False)
        return {(float(o.sum()), float(a)) for o, a in zip(b.obs, b.value_targets, strict=True)}

    split = set().union(*(targets(s) for s in shard_chunks(chunks, 4)))
    assert split == targets(chunks)


def test_average_stats_sums_steps_and_takes_the_slowest_time() -> None:
    a = {"policy_loss": 1.0, "num_steps_trained": 100.0, "time_sgd_s": 0.5}
    b = {"policy_loss": 3.0, "num_steps_trained": 120.0, "time_sgd_s": 0.7}
    assert average_stats([a, b]) == {
        "policy_loss": 2.0,
        "num_steps_trained": 220.0,
        "time_sgd_s": 0.7,
    }


def test_local_group_runs_in_process() -> None:
    cfg = PPOConfig(train_batch_size_per_learner=512, minibatch_size=256, num_epochs=2)
    group = LearnerGroup(cfg, OBS, DISCRETE)
    assert group.local is not None and group.workers == []
    before = group.get_inference_weights()
    metrics = group.update(make_chunks(None, np.random.default_rng(1)), env_steps=512)
    assert metrics["num_steps_trained"] == 512
    after = group.get_inference_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    state = group.get_state()
    group.set_state(state)
    group.stop()


def _ddp_config(**overrides) -> PPOConfig:
    """Full-batch epochs without advantage standardisation: then 2 ranks x half the data do
    exactly what 1 learner does with all of it (mean of equal-size shard means = overall mean)."""
    base = {
        "num_learners": 2,
        "num_cpus_per_learner": 0.5,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 256,
        "num_epochs": 3,
        "normalize_advantages": False,
        "kl_coeff": 0.2,
        "lr": 1e-2,
        "model": ModelConfig(hidden_sizes=(16, 16)),
    }
    return PPOConfig(**{**base, **overrides})


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_ddp_learners_stay_identical_and_match_one_learner(ray_client) -> None:
    import ray

    cfg = _ddp_config()
    chunks = make_chunks(None, np.random.default_rng(2), num_chunks=16, length=32)  # 512 steps
    group = LearnerGroup(cfg, OBS, DISCRETE)
    try:
        initial = group.get_inference_weights()
        metrics = group.update(chunks, env_steps=512)
        states = ray.get([w.get_state.remote() for w in group.workers], timeout=60)
        rank0, rank1 = (s["module"] for s in states)
        for name in rank0:
            torch.testing.assert_close(rank0[name], rank1[name], rtol=0, atol=0, msg=name)
        after = group.get_inference_weights()
        assert any(not np.allclose(initial[k], after[k]) for k in initial)
        assert metrics["num_steps_trained"] == 512
        assert states[0]["kl_coeff"] == states[1]["kl_coeff"] == metrics["kl_coeff"]

        # One learner, the same initial weights (same seed), the combined batch in one minibatch.
        single_cfg = cfg.model_copy(
            update={"num_learners": 0, "train_batch_size_per_learner": 512, "minibatch_size": 512}
        )
        single = PPOLearner(single_cfg, OBS, DISCRETE)
        for name, value in single.get_inference_weights().items():
            np.testing.assert_array_equal(value, initial[name])
        single.update(chunks, env_steps=512)
        for name, value in single.module.state_dict().items():
            torch.testing.assert_close(rank0[name], value, rtol=1e-4, atol=1e-5, msg=name)

        # State goes out from rank 0 and back into every rank.
        group.set_state(single.get_state())
        states = ray.get([w.get_state.remote() for w in group.workers], timeout=60)
        for name, value in single.module.state_dict().items():
            torch.testing.assert_close(states[1]["module"][name], value, rtol=0, atol=0)
    finally:
        group.stop()
