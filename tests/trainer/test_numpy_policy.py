"""NumpyPolicy: the EnvRunner's numpy forward pass and draws against PPOModule's torch ones."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer import distributions
from trainer.config import ModelConfig
from trainer.fast.policy import NumpyPolicy
from trainer.module import PPOModule

VEC = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
DISCRETE = gym.spaces.Discrete(4)
BOX = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
MODELS = {
    "tanh": ModelConfig(hidden_sizes=(16, 8)),
    "relu, no ortho, log_std -2": ModelConfig(
        hidden_sizes=(32,), activation="relu", ortho_init=False, log_std_init=-2.0
    ),
    "gsde": ModelConfig(hidden_sizes=(8, 8), use_sde=True, log_std_init=-1.0),
}

EVERY_MODEL = pytest.mark.parametrize("model", list(MODELS.values()), ids=list(MODELS))
EVERY_SPACE = pytest.mark.parametrize("action_space", [DISCRETE, BOX], ids=["discrete", "box"])


def _pair(
    action_space: gym.Space, model: ModelConfig, seed: int = 0
) -> tuple[PPOModule, NumpyPolicy]:
    torch.manual_seed(seed)
    module = PPOModule(VEC, action_space, model, inference_only=True)
    with torch.no_grad():  # biases too, so that a layout mistake shows
        for p in module.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return module, NumpyPolicy(module, np.random.default_rng(seed))


def _obs(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 5)).astype(np.float32)


@EVERY_MODEL
@EVERY_SPACE
def test_dist_inputs_and_deterministic_actions_are_the_modules(
    action_space: gym.Space, model: ModelConfig
) -> None:
    module, policy = _pair(action_space, model)
    obs = _obs(7)
    actions, logp, dist_inputs = policy.sample(obs, explore=False)
    t_actions, t_logp, t_inputs = module.sample(torch.from_numpy(obs), explore=False)
    np.testing.assert_allclose(dist_inputs, t_inputs.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logp, t_logp.numpy(), rtol=1e-5, atol=1e-5)
    if action_space is DISCRETE:
        np.testing.assert_array_equal(actions, t_actions.numpy())
        assert actions.dtype == np.int64
    else:
        np.testing.assert_allclose(actions, t_actions.numpy(), rtol=1e-5, atol=1e-6)
        assert actions.dtype == np.float32
    assert logp.dtype == dist_inputs.dtype == np.float32


@EVERY_MODEL
@EVERY_SPACE
def test_sampled_log_probs_are_the_distributions(
    action_space: gym.Space, model: ModelConfig
) -> None:
    """What the Learner recomputes from (dist_inputs, actions) is what the runner recorded."""
    _, policy = _pair(action_space, model)
    sde = policy.sde_noise(6) if policy.use_sde and action_space is BOX else None
    actions, logp, dist_inputs = policy.sample(_obs(6), explore=True, sde_noise=sde)
    dist = distributions.for_action_space(action_space)
    expected = dist.logp(torch.from_numpy(dist_inputs), torch.from_numpy(actions))
    np.testing.assert_allclose(logp, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_categorical_draws_follow_the_softmax() -> None:
    _, policy = _pair(DISCRETE, MODELS["tanh"])
    obs = np.repeat(_obs(1), 40_000, axis=0)
    actions, _, logits = policy.sample(obs)
    probs = torch.softmax(torch.from_numpy(logits[0]), -1).numpy()
    freq = np.bincount(actions, minlength=4) / len(actions)
    # 40k draws: each frequency within ~4.5 standard errors (sqrt(p (1 - p) / n) <= 0.0025).
    np.testing.assert_allclose(freq, probs, atol=0.012)


def test_gaussian_draws_have_the_policys_mean_and_std() -> None:
    _, policy = _pair(BOX, MODELS["relu, no ortho, log_std -2"])
    obs = np.repeat(_obs(1), 40_000, axis=0)
    actions, _, dist_inputs = policy.sample(obs)
    mean, std = dist_inputs[0, :3], np.exp(dist_inputs[0, 3:])
    np.testing.assert_allclose(actions.mean(0), mean, atol=5 * std.max() / 200)
    np.testing.assert_allclose(actions.std(0), std, rtol=0.03)


def test_gsde_actions_follow_the_noise_matrix() -> None:
    module, policy = _pair(BOX, MODELS["gsde"])
    obs = _obs(3)
    noise = policy.sde_noise(3)
    assert noise.shape == (3, 8, 3) and noise.dtype == np.float32
    a1, _, dist_inputs = policy.sample(obs, sde_noise=noise)
    a2, _, _ = policy.sample(obs, sde_noise=noise)
    np.testing.assert_array_equal(a1, a2)  # the same matrices: the same actions
    emb = module.pi_encoder(torch.from_numpy(obs)).detach().numpy()
    for b in range(3):
        np.testing.assert_allclose(a1[b] - dist_inputs[b, :3], emb[b] @ noise[b], rtol=1e-5)
    # Over many matrices one state's actions have the std the dist inputs carry.
    many = policy.sample(np.repeat(obs[:1], 20_000, 0), sde_noise=policy.sde_noise(20_000))[0]
    np.testing.assert_allclose(many.std(0), np.exp(dist_inputs[0, 3:]), rtol=0.03)


def test_sync_takes_newly_loaded_weights() -> None:
    module, policy = _pair(BOX, MODELS["tanh"])
    before = policy.sample(_obs(2), explore=False)[2]
    state = {k: v + 0.5 for k, v in module.inference_state_dict().items()}
    module.load_inference_state_dict(state)
    assert np.array_equal(policy.sample(_obs(2), explore=False)[2], before)  # still the copy
    policy.sync()
    expected = module.dist_inputs(torch.from_numpy(_obs(2))).detach().numpy()
    np.testing.assert_allclose(policy.sample(_obs(2), explore=False)[2], expected, rtol=1e-5)


def test_the_same_generator_state_gives_the_same_draws() -> None:
    _, a = _pair(DISCRETE, MODELS["tanh"], seed=3)
    _, b = _pair(DISCRETE, MODELS["tanh"], seed=3)
    obs = _obs(64)
    np.testing.assert_array_equal(a.sample(obs)[0], b.sample(obs)[0])
    state = a.rng.bit_generator.state
    first = a.sample(obs)[0]
    a.rng.bit_generator.state = state
    np.testing.assert_array_equal(a.sample(obs)[0], first)


def test_images_and_gpus_keep_the_torch_path() -> None:
    image = gym.spaces.Box(0, 255, (44, 44, 3), np.uint8)
    cnn = PPOModule(image, DISCRETE, ModelConfig(cnn_channels=(8, 16, 16)), inference_only=True)
    assert not NumpyPolicy.supports(cnn, torch.device("cpu"))
    mlp = PPOModule(VEC, DISCRETE, ModelConfig(), inference_only=True)
    assert NumpyPolicy.supports(mlp, torch.device("cpu"))
    assert not NumpyPolicy.supports(mlp, torch.device("cuda"))
