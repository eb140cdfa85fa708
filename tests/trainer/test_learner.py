"""PPOLearner smoke tests on small synthetic tasks: a few on-policy updates must learn.

The task is a contextual bandit played in episode chunks: observations are random, the reward says
how good the action was for the observation (Discrete: 1 when the action is 1 exactly when
obs[0] > 0; Box: -(a - obs[0])^2). Chunks end terminated, truncated or cut, so GAE with
bootstraps runs on every update.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer.batch import build_train_batch
from trainer.config import ModelConfig, PPOConfig
from trainer.episode import EpisodeChunk
from trainer.learner import PPOLearner, adapt_lr
from trainer.sgd_step import StepKind

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
DISCRETE = gym.spaces.Discrete(2)
BOX = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

EVERY_STEP = pytest.mark.parametrize("sgd_step", ["hand-written", "autograd"])


def reward_for(obs: np.ndarray, actions: np.ndarray, discrete: bool) -> np.ndarray:
    if discrete:
        return (actions == (obs[:, 0] > 0)).astype(np.float32)
    return -np.square(actions[:, 0] - obs[:, 0]).astype(np.float32)


def make_chunks(
    policy: torch.nn.Module | None,
    rng: np.random.Generator,
    *,
    num_chunks: int = 16,
    length: int = 32,
    discrete: bool = True,
) -> list[EpisodeChunk]:
    """Chunks sampled with `policy` (a PPOModule), or uniformly at random without one."""
    chunks = []
    for i in range(num_chunks):
        obs = rng.uniform(-1.0, 1.0, (length + 1, 4)).astype(np.float32)  # [T+1, 4]
        if policy is None:
            width = 2
            dist_inputs = np.zeros((length, width), np.float32)  # uniform / N(0, 1)
            if discrete:
                actions = rng.integers(0, 2, length)
                logp = np.full(length, math.log(0.5), np.float32)
            else:
                actions = rng.normal(size=(length, 1)).astype(np.float32)
                logp = (-0.5 * actions[:, 0] ** 2 - 0.5 * math.log(2 * math.pi)).astype(np.float32)
        else:
            a, lp, di = policy.sample(torch.from_numpy(obs[:-1]))
            actions, logp, dist_inputs = a.numpy(), lp.numpy(), di.numpy()
        rewards = reward_for(obs[:-1], actions, discrete)
        ending = i % 3  # 0 terminated, 1 truncated, 2 cut
        chunks.append(
            EpisodeChunk(
                id=f"ep{i}",
                t_started=0,
                obs=obs,
                actions=actions,
                rewards=rewards,
                logp=logp,
                dist_inputs=dist_inputs,
                terminated=ending == 0,
                truncated=ending == 1,
                weights_version=0,
            )
        )
    return chunks


def _config(**overrides) -> PPOConfig:
    base = {
        "train_batch_size_per_learner": 512,
        "minibatch_size": 128,
        "num_epochs": 4,
        "lr": 3e-3,
        "gamma": 0.5,
        "model": ModelConfig(hidden_sizes=(32, 32)),
    }
    return PPOConfig(**{**base, **overrides})


def _mean_greedy_reward(learner: PPOLearner, discrete: bool, rng: np.random.Generator) -> float:
    obs = rng.uniform(-1.0, 1.0, (2000, 4)).astype(np.float32)
    actions, _, _ = learner.module.sample(torch.from_numpy(obs), explore=False)
    return float(reward_for(obs, actions.numpy(), discrete).mean())


@pytest.mark.parametrize("discrete", [True, False])
def test_on_policy_updates_learn_the_bandit(discrete: bool) -> None:
    rng = np.random.default_rng(0)
    learner = PPOLearner(_config(), OBS, DISCRETE if discrete else BOX)
    before = _mean_greedy_reward(learner, discrete, rng)
    first = None
    for _ in range(15):
        stats = learner.update(make_chunks(learner.module, rng, discrete=discrete), env_steps=0)
        first = first or stats
    after = _mean_greedy_reward(learner, discrete, rng)
    if discrete:
        assert before < 0.75 and after > 0.9, (before, after)
    else:
        assert after > before + 0.2 and after > -0.1, (before, after)
    assert stats.vf_loss < first.vf_loss
    assert stats.num_steps_trained == 512
    assert learner.num_updates == 15 and learner.num_steps_trained == 15 * 512


def test_stats_are_complete_and_finite() -> None:
    learner = PPOLearner(_config(kl_coeff=0.2), OBS, DISCRETE)
    stats = learner.update(make_chunks(None, np.random.default_rng(1)), env_steps=0).as_dict()
    expected = {
        "policy_loss",
        "vf_loss",
        "entropy",
        "kl",
        "kl_coeff",
        "clip_fraction",
        "explained_variance",
        "grad_norm",
        "lr",
        "num_steps_trained",
        "time_gae_s",
        "time_sgd_s",
    }
    assert set(stats) == expected
    assert all(math.isfinite(v) for v in stats.values())
    assert 0.0 < stats["entropy"] <= math.log(2) + 1e-6
    assert stats["time_gae_s"] > 0 and stats["time_sgd_s"] > 0


def test_adaptive_kl_coefficient_moves_with_the_update_kl() -> None:
    # A big lr and many epochs on stale uniform data push the KL far above a tiny target.
    learner = PPOLearner(_config(kl_coeff=0.2, kl_target=1e-4, lr=1e-2), OBS, DISCRETE)
    stats = learner.update(make_chunks(None, np.random.default_rng(2)), env_steps=0)
    assert stats.kl > 2e-4
    assert stats.kl_coeff == pytest.approx(0.3)
    off = PPOLearner(_config(kl_coeff=0.0), OBS, DISCRETE)
    assert off.update(make_chunks(None, np.random.default_rng(2)), 0).kl_coeff == 0.0


def test_linear_lr_schedule_follows_env_steps() -> None:
    cfg = _config(lr=1e-3, lr_schedule="linear", stop={"env_steps": 10_000})
    learner = PPOLearner(cfg, OBS, DISCRETE)
    chunks = make_chunks(None, np.random.default_rng(3))
    assert learner.update(chunks, env_steps=2_500).lr == pytest.approx(7.5e-4)
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(7.5e-4)
    assert learner.update(chunks, env_steps=10_000).lr == 0.0


def test_adapt_lr_follows_rl_games_rule_within_its_bounds() -> None:
    assert adapt_lr(3e-4, kl=0.03, kl_target=0.01) == pytest.approx(2e-4)
    assert adapt_lr(3e-4, kl=0.001, kl_target=0.01) == pytest.approx(4.5e-4)
    assert adapt_lr(3e-4, kl=0.01, kl_target=0.01) == 3e-4  # within [target / 2, 2 target]
    assert adapt_lr(0.009, kl=0.0, kl_target=0.01) == 0.01  # capped
    assert adapt_lr(1.2e-6, kl=1.0, kl_target=0.01) == 1e-6  # floored


@EVERY_STEP
def test_kl_adaptive_lr_moves_after_every_minibatch_step(sgd_step: StepKind) -> None:
    chunks = make_chunks(None, np.random.default_rng(3))
    # A tiny lr keeps every step's KL far under target / 2: x1.5 after each of 2 x 3 steps.
    cfg = _config(lr=1e-6, lr_schedule="kl_adaptive", minibatch_size=256, num_epochs=3)
    learner = PPOLearner(cfg, OBS, DISCRETE, sgd_step=sgd_step)
    assert learner.update(chunks, env_steps=0).lr == pytest.approx(1e-6 * 1.5**6)
    # The next update starts where this one left off.
    assert learner.optimizer.param_groups[0]["lr"] == pytest.approx(1e-6 * 1.5**6)
    # A target no step meets (the chunks' uniform policy is not the network's): every one of
    # the 4 x 2 steps divides the lr by 1.5.
    cfg = _config(lr=1e-3, lr_schedule="kl_adaptive", kl_target=1e-12, minibatch_size=256)
    learner = PPOLearner(cfg, OBS, DISCRETE, sgd_step=sgd_step)
    assert learner.update(chunks, env_steps=0).lr == pytest.approx(1e-3 / 1.5**8)


def test_kl_adaptive_lr_survives_a_checkpoint() -> None:
    chunks = make_chunks(None, np.random.default_rng(3))
    cfg = _config(lr=1e-6, lr_schedule="kl_adaptive", minibatch_size=512, num_epochs=2)
    learner = PPOLearner(cfg, OBS, DISCRETE)
    learner.update(chunks, env_steps=0)
    restored = PPOLearner(cfg, OBS, DISCRETE)
    restored.set_state(learner.get_state())
    assert restored.adaptive_lr == pytest.approx(1e-6 * 1.5**2)
    assert restored.update(chunks, 512).lr == learner.update(chunks, 512).lr
    old = learner.get_state()
    del old["adaptive_lr"]  # a checkpoint from before the schedule existed
    restored.set_state(old)
    assert restored.adaptive_lr == 1e-6


def test_state_round_trip_reproduces_the_next_update() -> None:
    rng = np.random.default_rng(4)
    cfg = _config(kl_coeff=0.2)
    learner = PPOLearner(cfg, OBS, BOX)
    learner.update(make_chunks(None, rng, discrete=False), env_steps=0)
    state = learner.get_state()
    chunks = make_chunks(None, rng, discrete=False)
    expected = learner.update(chunks, env_steps=512)

    restored = PPOLearner(cfg.model_copy(update={"seed": 7}), OBS, BOX)
    restored.set_state(state)
    got = restored.update(chunks, env_steps=512)
    for key in ("policy_loss", "vf_loss", "kl", "kl_coeff", "grad_norm"):
        assert getattr(got, key) == pytest.approx(getattr(expected, key), rel=1e-5), key
    for (name, a), b in zip(
        learner.module.state_dict().items(), restored.module.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)
    assert restored.num_updates == 2 and restored.num_steps_trained == 1024


def test_inference_weights_are_numpy_policy_weights() -> None:
    learner = PPOLearner(_config(), OBS, DISCRETE)
    learner.update(make_chunks(None, np.random.default_rng(5)), env_steps=0)
    weights = learner.get_inference_weights()
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    from trainer.module import PPOModule

    policy = PPOModule(OBS, DISCRETE, _config().model, inference_only=True)
    policy.load_inference_state_dict(weights)
    obs = torch.randn(8, 4)
    torch.testing.assert_close(policy.dist_inputs(obs), learner.module.dist_inputs(obs))


def test_tiny_batch_still_takes_every_minibatch_step() -> None:
    # 3 steps of data with 4 minibatches per epoch (from the config): rows are cycled.
    learner = PPOLearner(_config(minibatch_size=128), OBS, DISCRETE)
    chunks = make_chunks(None, np.random.default_rng(6), num_chunks=1, length=3)
    stats = learner.update(chunks, env_steps=0)
    assert math.isfinite(stats.policy_loss) and stats.num_steps_trained == 3


def _record_minibatches(learner: PPOLearner, chunks: list[EpisodeChunk]) -> list[Any]:
    """Every minibatch one update's gradient steps saw, on whichever SGD step the Learner runs
    (the hand-written step gets numpy minibatches, autograd TrainBatches)."""
    seen: list[Any] = []
    step: Any = learner.sgd_step
    gradients = step.gradients

    def recording(mb: Any, kl_coeff: float) -> Any:
        seen.append(mb)
        return gradients(mb, kl_coeff)

    step.gradients = recording
    learner.update(chunks, env_steps=0)
    return seen


def _minibatch_rows(learner: PPOLearner, chunks: list[EpisodeChunk]) -> list[int]:
    """Rows of every minibatch gradient step of one update."""
    return [len(mb) for mb in _record_minibatches(learner, chunks)]


@pytest.mark.parametrize(
    ("batch", "minibatch", "expected"),
    [
        (1000, 600, [600, 400]),  # not a divisor: the last minibatch takes the rest
        (1000, 300, [300, 300, 300, 100]),
        (1000, 250, [250] * 4),
        (1000, 1000, [1000]),
    ],
)
@EVERY_STEP
def test_minibatches_have_minibatch_size_rows(
    batch: int, minibatch: int, expected: list[int], sgd_step: StepKind
) -> None:
    cfg = _config(train_batch_size_per_learner=batch, minibatch_size=minibatch, num_epochs=2)
    learner = PPOLearner(cfg, OBS, DISCRETE, sgd_step=sgd_step)
    assert learner.sgd_step.name == sgd_step
    chunks = make_chunks(None, np.random.default_rng(8), num_chunks=10, length=100)  # 1000 rows
    assert _minibatch_rows(learner, chunks) == expected * 2
    assert learner.num_minibatches == len(expected)


def test_minibatch_count_follows_the_config_whatever_the_shard_size() -> None:
    # DDP ranks must take the same number of steps: shards a little larger or smaller than
    # train_batch_size_per_learner keep the config's count (every row once per epoch).
    cfg = _config(train_batch_size_per_learner=1000, minibatch_size=300, num_epochs=1)
    learner = PPOLearner(cfg, OBS, DISCRETE)
    rng = np.random.default_rng(9)
    larger = make_chunks(None, rng, num_chunks=10, length=101)  # 1010 rows
    assert _minibatch_rows(learner, larger) == [300, 300, 300, 110]
    smaller = make_chunks(None, rng, num_chunks=10, length=88)  # 880 rows < 3 x 300
    assert _minibatch_rows(learner, smaller) == [220] * 4


def test_train_batch_uses_one_value_pass_and_masks_bootstrap_rows() -> None:
    chunks = make_chunks(None, np.random.default_rng(7), num_chunks=5, length=7)
    calls: list[int] = []

    def value_fn(obs: torch.Tensor) -> torch.Tensor:
        calls.append(len(obs))
        return obs[:, 0] * 10.0  # V(s) = 10 * obs[0]

    batch = build_train_batch(
        chunks, value_fn, gamma=0.9, lam=1.0, normalize_advantages=True, device="cpu"
    )
    assert calls == [5 * 8]  # B + K rows, one pass
    assert len(batch) == 35
    real_obs = np.concatenate([c.obs[:-1] for c in chunks])
    torch.testing.assert_close(batch.obs, torch.from_numpy(real_obs))
    torch.testing.assert_close(batch.values, torch.from_numpy(real_obs[:, 0] * 10.0))
    assert abs(batch.advantages.mean().item()) < 1e-5
    assert batch.advantages.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)
    # Last target of a cut chunk (index 2): r + 0.9 * V(bootstrap obs).
    cut = chunks[2]
    expected = cut.rewards[-1] + 0.9 * 10.0 * cut.obs[-1, 0]
    assert batch.value_targets[3 * 7 - 1].item() == pytest.approx(expected, rel=1e-5)


def test_initial_weights_depend_on_the_seed_only() -> None:
    torch.manual_seed(123)
    expected_draw = torch.rand(3)
    torch.manual_seed(123)
    a = PPOLearner(_config(seed=5), OBS, DISCRETE).get_inference_weights()
    torch.testing.assert_close(torch.rand(3), expected_draw)  # the caller's RNG is untouched
    b = PPOLearner(_config(seed=5), OBS, DISCRETE).get_inference_weights()
    c = PPOLearner(_config(seed=6), OBS, DISCRETE).get_inference_weights()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def test_image_observations_update_with_a_split_value_pass(monkeypatch) -> None:
    """uint8 frames through the CNN; the value pass runs in slices bounded for memory."""
    import trainer.learner as learner_module

    monkeypatch.setattr(learner_module, "_IMAGE_VALUE_ROWS", {"cpu": 16})
    space = gym.spaces.Box(0, 255, (36, 36, 2), np.uint8)
    cfg = _config(
        train_batch_size_per_learner=64,
        minibatch_size=32,
        num_epochs=2,
        model=ModelConfig(cnn_channels=(4, 8, 8)),
    )
    learner = PPOLearner(cfg, space, DISCRETE)
    rng = np.random.default_rng(8)
    chunks = []
    for i in range(4):
        frames = rng.integers(0, 256, (17, 36, 36, 2), dtype=np.uint8)  # [T+1, H, W, C]
        a, lp, di = learner.module.sample(torch.from_numpy(frames[:-1]))
        chunks.append(
            EpisodeChunk(
                f"img{i}",
                0,
                frames,
                a.numpy(),
                np.ones(16, np.float32),
                lp.numpy(),
                di.numpy(),
                terminated=i == 0,
                truncated=False,
                weights_version=0,
            )
        )
    before = learner.get_inference_weights()
    stats = learner.update(chunks, env_steps=0)
    assert stats.num_steps_trained == 64 and math.isfinite(stats.vf_loss)
    after = learner.get_inference_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def _minibatch_advantages(learner: PPOLearner, chunks: list[EpisodeChunk]) -> list[torch.Tensor]:
    """The advantages every minibatch gradient step of one update saw."""
    return [torch.tensor(np.array(mb.advantages)) for mb in _record_minibatches(learner, chunks)]


@EVERY_STEP
@pytest.mark.parametrize("minibatch", [100, 1000])
def test_advantages_standardised_per_minibatch_as_sb3(minibatch: int, sgd_step: StepKind) -> None:
    cfg = _config(
        train_batch_size_per_learner=1000,
        minibatch_size=minibatch,
        num_epochs=2,
        normalize_advantages_over="minibatch",
    )
    chunks = make_chunks(None, np.random.default_rng(8), num_chunks=10, length=100)
    seen = _minibatch_advantages(PPOLearner(cfg, OBS, DISCRETE, sgd_step=sgd_step), chunks)
    assert len(seen) == 2 * (1000 // minibatch)
    for adv in seen:
        assert abs(adv.mean().item()) < 1e-5
        assert adv.std().item() == pytest.approx(1.0, abs=1e-4)  # unbiased, as torch's in SB3


def test_advantages_standardised_over_the_batch_by_default() -> None:
    cfg = _config(train_batch_size_per_learner=1000, minibatch_size=100, num_epochs=1)
    assert cfg.normalize_advantages_over == "batch"
    chunks = make_chunks(None, np.random.default_rng(8), num_chunks=10, length=100)
    seen = _minibatch_advantages(PPOLearner(cfg, OBS, DISCRETE), chunks)
    whole = torch.cat(seen)
    assert abs(whole.mean().item()) < 1e-5
    assert whole.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)
    assert max(abs(adv.mean().item()) for adv in seen) > 0.01  # minibatches are left as drawn


def test_unknown_normalisation_scope_is_rejected_by_name() -> None:
    with pytest.raises(ValueError, match="normalize_advantages_over"):
        _config(normalize_advantages_over="epoch")
