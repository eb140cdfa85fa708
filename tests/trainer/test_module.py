"""PPOModule: shapes per space, initialisation, inference-only copies and their weights."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer.config import ModelConfig
from trainer.module import PPOModule
from trainer.obs_layout import ImageBox

VEC = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
IMG = gym.spaces.Box(0, 255, (44, 44, 3), np.uint8)
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)


@pytest.mark.parametrize(
    ("obs_space", "act_space", "d", "action_shape"),
    [(VEC, DISCRETE, 3, ()), (VEC, BOX, 4, (2,)), (IMG, DISCRETE, 3, ())],
)
def test_shapes(obs_space, act_space, d: int, action_shape: tuple[int, ...]) -> None:
    module = PPOModule(obs_space, act_space, ModelConfig(cnn_channels=(8, 16, 16)))
    obs = torch.as_tensor(np.stack([obs_space.sample() for _ in range(5)]))
    assert module.dist_inputs(obs).shape == (5, d)
    assert module.values(obs).shape == (5,)
    actions, logp, dist_inputs = module.sample(obs)
    assert actions.shape == (5, *action_shape)
    assert logp.shape == (5,) and dist_inputs.shape == (5, d)
    assert not logp.requires_grad  # sampling never builds a graph
    di, v = module.forward_train(obs)
    torch.testing.assert_close(di, module.dist_inputs(obs))
    torch.testing.assert_close(v, module.values(obs))


def test_explore_false_is_argmax_or_mean() -> None:
    torch.manual_seed(0)
    obs = torch.randn(16, 4)
    discrete = PPOModule(VEC, DISCRETE, ModelConfig())
    actions, logp, dist_inputs = discrete.sample(obs, explore=False)
    torch.testing.assert_close(actions, dist_inputs.argmax(-1))
    torch.testing.assert_close(logp, dist_inputs.log_softmax(-1).max(-1).values)
    box = PPOModule(VEC, BOX, ModelConfig())
    actions, _, dist_inputs = box.sample(obs, explore=False)
    torch.testing.assert_close(actions, dist_inputs[:, :2])


def _assert_orthogonal_rows(weight: torch.Tensor, gain: float) -> None:
    # Orthogonal init with fewer rows than columns: W W^T = gain^2 I.
    eye = torch.eye(weight.shape[0])
    torch.testing.assert_close(weight @ weight.T, gain**2 * eye, atol=1e-5, rtol=1e-4)


def test_orthogonal_init_gains() -> None:
    module = PPOModule(VEC, DISCRETE, ModelConfig(hidden_sizes=(64, 64)))
    _assert_orthogonal_rows(module.pi_head.weight.detach(), 0.01)
    _assert_orthogonal_rows(module.vf_head.weight.detach(), 1.0)
    _assert_orthogonal_rows(module.pi_encoder.net[2].weight.detach(), math.sqrt(2))
    assert module.pi_head.bias.abs().sum().item() == 0.0
    # Near-uniform initial policy, std 1 for Box actions.
    probs = module.dist_inputs(torch.randn(8, 4)).softmax(-1)
    torch.testing.assert_close(probs, torch.full_like(probs, 1 / 3), atol=0.02, rtol=0)
    box = PPOModule(VEC, BOX, ModelConfig())
    torch.testing.assert_close(box.log_std.detach(), torch.zeros(2))


def test_ortho_init_false_keeps_pytorch_default_init() -> None:
    # PyTorch's nn.Linear default: weights and biases uniform in +-1/sqrt(fan_in), biases not 0.
    torch.manual_seed(0)
    module = PPOModule(VEC, BOX, ModelConfig(hidden_sizes=(64, 64), ortho_init=False))
    for layer in (module.pi_encoder.net[0], module.pi_encoder.net[2], module.pi_head):
        bound = 1 / math.sqrt(layer.weight.shape[1])
        assert layer.weight.abs().max().item() <= bound
        assert layer.bias.abs().sum().item() > 0.0
    # Not orthogonal: the policy head's rows are far from norm 0.01.
    row_norms = module.pi_head.weight.detach().norm(dim=1)
    assert (row_norms > 0.1).all()


def test_log_std_init_sets_the_initial_std() -> None:
    torch.manual_seed(0)
    box = PPOModule(VEC, BOX, ModelConfig(log_std_init=-2.0))
    torch.testing.assert_close(box.log_std.detach(), torch.full((2,), -2.0))
    obs = torch.zeros(20_000, 4)
    actions, _, dist_inputs = box.sample(obs)
    mean = dist_inputs[:, :2]
    std = (actions - mean).std(0)
    torch.testing.assert_close(std, torch.full((2,), math.exp(-2.0)), rtol=0.03, atol=0)
    # Discrete policies have no std to set.
    assert PPOModule(VEC, DISCRETE, ModelConfig(log_std_init=-2.0)).log_std is None


def test_separate_and_shared_encoders() -> None:
    separate = PPOModule(VEC, DISCRETE, ModelConfig())
    shared = PPOModule(VEC, DISCRETE, ModelConfig(vf_share_layers=True))
    assert separate.vf_encoder is not None and shared.vf_encoder is None
    n_sep = sum(p.numel() for p in separate.parameters())
    n_shared = sum(p.numel() for p in shared.parameters())
    assert n_sep - n_shared == sum(p.numel() for p in separate.vf_encoder.parameters())


@pytest.mark.parametrize("act_space", [DISCRETE, BOX])
@pytest.mark.parametrize("share", [False, True])
def test_inference_only_copy_takes_the_policy_weights(act_space, share: bool) -> None:
    model = ModelConfig(vf_share_layers=share)
    torch.manual_seed(0)
    full = PPOModule(VEC, act_space, model)
    torch.manual_seed(1)
    policy = PPOModule(VEC, act_space, model, inference_only=True)
    with pytest.raises(RuntimeError, match="no value function"):
        policy.values(torch.zeros(1, 4))
    weights = full.inference_state_dict()
    assert set(weights) == set(policy.state_dict())
    assert not any(k.startswith(("vf_encoder.", "vf_head.")) for k in weights)
    obs = torch.randn(8, 4)
    assert not torch.allclose(policy.dist_inputs(obs), full.dist_inputs(obs))
    # numpy arrays are what travels to EnvRunners.
    policy.load_inference_state_dict({k: v.numpy().copy() for k, v in weights.items()})
    torch.testing.assert_close(policy.dist_inputs(obs), full.dist_inputs(obs))


def test_loading_mismatched_weights_fails_clearly() -> None:
    policy = PPOModule(VEC, DISCRETE, ModelConfig(), inference_only=True)
    weights = PPOModule(VEC, DISCRETE, ModelConfig()).inference_state_dict()
    weights.pop("pi_head.bias")
    with pytest.raises(ValueError, match="missing"):
        policy.load_inference_state_dict(weights)


def test_image_layouts_and_uint8_scaling() -> None:
    torch.manual_seed(0)
    hwc = PPOModule(IMG, DISCRETE, ModelConfig(cnn_channels=(8, 16, 16)))
    chw_space = ImageBox(0, 255, (3, 44, 44), np.uint8, layout="channels_first")
    chw = PPOModule(chw_space, DISCRETE, ModelConfig(cnn_channels=(8, 16, 16)))
    chw.load_state_dict(hwc.state_dict())
    frames = torch.randint(0, 256, (2, 44, 44, 3), dtype=torch.uint8)
    # Same weights, same image in both layouts -> same outputs.
    torch.testing.assert_close(
        hwc.dist_inputs(frames), chw.dist_inputs(frames.permute(0, 3, 1, 2).contiguous())
    )
    # uint8 pixels are scaled to [0, 1] inside the network.
    float_space = gym.spaces.Box(0.0, 1.0, (44, 44, 3), np.float32)
    floats = PPOModule(float_space, DISCRETE, ModelConfig(cnn_channels=(8, 16, 16)))
    floats.load_state_dict(hwc.state_dict())
    torch.testing.assert_close(hwc.values(frames), floats.values(frames.float() / 255.0))


def test_the_declared_layout_decides_not_the_shape() -> None:
    """[40, 40, 40] fits both layouts: only the declaration can say where channels are."""
    model = ModelConfig(cnn_channels=(8, 16, 16))
    torch.manual_seed(0)
    first = PPOModule(
        ImageBox(0, 255, (40, 40, 40), np.uint8, layout="channels_first"), DISCRETE, model
    )
    last = PPOModule(
        ImageBox(0, 255, (40, 40, 40), np.uint8, layout="channels_last"), DISCRETE, model
    )
    last.load_state_dict(first.state_dict())
    frames = torch.randint(0, 256, (2, 40, 40, 40), dtype=torch.uint8)  # read as [C, H, W]
    torch.testing.assert_close(
        first.dist_inputs(frames), last.dist_inputs(frames.permute(0, 2, 3, 1).contiguous())
    )
    assert not torch.allclose(first.dist_inputs(frames), last.dist_inputs(frames))
    # Atari's [4, 84, 84] stack, declared channels first: 4 input channels.
    atari = PPOModule(
        ImageBox(0, 255, (4, 84, 84), np.uint8, layout="channels_first"), DISCRETE, model
    )
    assert atari.pi_encoder.conv[0].in_channels == 4


def test_unsupported_spaces_are_rejected() -> None:
    with pytest.raises(ValueError, match="observation shape"):
        PPOModule(gym.spaces.Box(-1, 1, (2, 3)), DISCRETE, ModelConfig())
    with pytest.raises(ValueError, match="action space"):
        PPOModule(VEC, gym.spaces.MultiDiscrete([2, 2]), ModelConfig())
    with pytest.raises(ValueError, match="too small"):
        PPOModule(gym.spaces.Box(0, 255, (8, 8, 3), np.uint8), DISCRETE, ModelConfig())


def test_an_mlp_encoder_is_its_sequential_with_the_state_dict_layout_of_checkpoints() -> None:
    """Checkpoints name the layers by their place in `net`; the forward pass is `net`'s."""
    torch.manual_seed(0)
    module = PPOModule(VEC, DISCRETE, ModelConfig(hidden_sizes=(8, 8)))
    encoder = module.pi_encoder
    assert {k for k in module.state_dict() if k.startswith("pi_encoder.")} == {
        "pi_encoder.net.0.weight", "pi_encoder.net.0.bias",
        "pi_encoder.net.2.weight", "pi_encoder.net.2.bias",
    }  # fmt: skip
    assert encoder.linears == [encoder.net[0], encoder.net[2]]
    assert isinstance(encoder.net[1], torch.nn.Tanh) and encoder.activation == "tanh"
    obs = torch.randn(5, 4)
    assert torch.equal(encoder(obs), encoder.net(obs))
    assert torch.equal(encoder(obs.double()), encoder.net(obs))  # float32 whatever comes in


def test_gsde_std_is_the_latent_weighted_noise_std() -> None:
    torch.manual_seed(0)
    module = PPOModule(VEC, BOX, ModelConfig(hidden_sizes=(8,), use_sde=True, log_std_init=-1.0))
    assert module.use_sde and module.log_std.shape == (8, 2)
    with torch.no_grad():
        module.log_std.copy_(torch.randn(8, 2) * 0.3 - 1.0)
    obs = torch.randn(5, 4)
    emb = module.pi_encoder(obs).detach()
    dist_inputs = module.dist_inputs(obs).detach()
    for b in range(5):  # reference loop: var[b, a] = sum_j emb[b, j]^2 * std[j, a]^2
        for a in range(2):
            var = sum(
                emb[b, j].item() ** 2 * math.exp(2 * module.log_std[j, a].item()) for j in range(8)
            )
            expected = 0.5 * math.log(var + 1e-6)
            assert dist_inputs[b, 2 + a].item() == pytest.approx(expected, abs=1e-6)  # float32


def test_gsde_actions_follow_the_noise_matrix_and_its_distribution() -> None:
    torch.manual_seed(0)
    module = PPOModule(VEC, BOX, ModelConfig(hidden_sizes=(8,), use_sde=True, log_std_init=-1.0))
    obs = torch.randn(3, 4)
    noise = module.sde_noise(3)
    assert noise.shape == (3, 8, 2)
    a1, logp, dist_inputs = module.sample(obs, sde_noise=noise)
    a2, _, _ = module.sample(obs, sde_noise=noise)
    torch.testing.assert_close(a1, a2)  # the same matrices: the same actions
    emb = module.pi_encoder(obs)
    for b in range(3):
        torch.testing.assert_close(a1[b] - dist_inputs[b, :2], emb[b] @ noise[b])
    mean, log_std = dist_inputs[:, :2], dist_inputs[:, 2:]
    normal = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(logp, normal.log_prob(a1).sum(-1))
    # Over many matrices, one state's actions have the distribution's std.
    many = module.sample(obs[:1].expand(20_000, 4), sde_noise=module.sde_noise(20_000))[0]
    torch.testing.assert_close(many.std(0), log_std[0].exp(), rtol=0.03, atol=0)
    # Deterministic actions are the mean; discrete policies ignore use_sde.
    torch.testing.assert_close(module.sample(obs, explore=False)[0], mean)
    assert not PPOModule(VEC, DISCRETE, ModelConfig(use_sde=True)).use_sde
