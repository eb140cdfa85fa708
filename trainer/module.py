"""PPOModule: the actor-critic network shared by EnvRunners (policy only) and Learners.

Encoder: an MLP for 1-D Box observations, the Nature CNN (Mnih et al. 2015) for image
observations (3-D Box; uint8 pixels are scaled to [0, 1] inside the network so EnvRunners ship
compact uint8 arrays). Whether an image is [C, H, W] or [H, W, C] is declared on its space by
the env pipeline (trainer/obs_layout.py), never guessed from the shape. Separate actor and critic
encoders unless `vf_share_layers` (separate networks are the more robust PPO default,
Andrychowicz et al. 2021, "What matters in on-policy RL").
Orthogonal initialisation as in CleanRL / SB3: hidden layers gain sqrt(2), policy head 0.01
(near-uniform initial policy), value head 1.0.

An inference-only module (EnvRunners) has no critic: it cannot compute values, and its state dict
is exactly `inference_state_dict()` of a full module.

Axes: B batch, D = dist_inputs width, A = action dim.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from trainer import distributions
from trainer.config import ModelConfig
from trainer.obs_layout import image_layout

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}
# Nature CNN kernels/strides; layers beyond the third use 3x3 stride 1.
_CNN_KERNELS: tuple[tuple[int, int], ...] = ((8, 4), (4, 2), (3, 1))
_CRITIC_PREFIXES = ("vf_encoder.", "vf_head.")
SDE_EPS = 1e-6  # gSDE: added to the action variance before its log (SB3's epsilon)


def _init(layer: nn.Module, gain: float, ortho: bool) -> nn.Module:
    """Orthogonal weights with `gain` and zero biases, or PyTorch's default init (ortho=False)."""
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


def _is_image(space: gym.spaces.Box) -> bool:
    return len(space.shape) == 3


class MLPEncoder(nn.Module):
    """[B, obs_dim] -> [B, hidden_sizes[-1]]."""

    def __init__(self, obs_dim: int, model: ModelConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in model.hidden_sizes:
            layers += [
                _init(nn.Linear(width, h), math.sqrt(2), model.ortho_init),
                _ACTIVATIONS[model.activation](),
            ]
            width = h
        self.net = nn.Sequential(*layers)  # the state dict's layout ("net.0.weight", ...)
        self.out_dim = width
        self.activation = model.activation

    @property
    def linears(self) -> list[nn.Linear]:
        """The Linear layers in order (what the fast paths read the weights from)."""
        return [m for m in self.net if isinstance(m, nn.Linear)]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs if obs.dtype == torch.float32 else obs.to(torch.float32)
        return self.net(x)


class CNNEncoder(nn.Module):
    """[B, H, W, C] or [B, C, H, W] image (as the space declares) -> [B, cnn_dense] (Nature CNN).

    The convolutions compute in channels-last memory (weights and activations): oneDNN's CPU
    kernels train the Nature CNN 1.3-1.6x faster per row that way (docs/benchmarks.md, Atari),
    and cuDNN prefers it for TF32 and half precision. Only the memory layout changes, not the
    logical [B, C, H, W] shapes, the results or the state dict's keys and shapes."""

    def __init__(self, space: gym.spaces.Box, model: ModelConfig) -> None:
        super().__init__()
        shape = tuple(int(s) for s in space.shape)
        self.channels_last = image_layout(space) == "channels_last"
        in_ch = shape[2] if self.channels_last else shape[0]
        hw = shape[:2] if self.channels_last else shape[1:]
        self.scale = 1.0 / 255.0 if space.dtype == np.uint8 else 1.0
        layers: list[nn.Module] = []
        ch = in_ch
        for i, out_ch in enumerate(model.cnn_channels):
            k, s = _CNN_KERNELS[i] if i < len(_CNN_KERNELS) else (3, 1)
            layers += [
                _init(nn.Conv2d(ch, out_ch, k, s), math.sqrt(2), model.ortho_init),
                nn.ReLU(),
            ]
            ch = out_ch
        layers.append(nn.Flatten())
        self.conv = nn.Sequential(*layers).to(memory_format=torch.channels_last)
        with torch.no_grad():
            try:
                flat = self.conv(torch.zeros(1, in_ch, *hw)).shape[1]
            except RuntimeError as exc:
                raise ValueError(f"image observations {shape} are too small for the CNN") from exc
        self.dense = nn.Sequential(
            _init(nn.Linear(flat, model.cnn_dense), math.sqrt(2), model.ortho_init), nn.ReLU()
        )
        self.out_dim = model.cnn_dense

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.to(torch.float32) * self.scale
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)  # [B, H, W, C] -> [B, C, H, W], already channels-last memory
        return self.dense(self.conv(x.contiguous(memory_format=torch.channels_last)))


def _make_encoder(space: gym.spaces.Box, model: ModelConfig) -> MLPEncoder | CNNEncoder:
    if _is_image(space):
        return CNNEncoder(space, model)
    if len(space.shape) == 1:
        return MLPEncoder(int(space.shape[0]), model)
    raise ValueError(
        f"unsupported observation shape {space.shape}: 1-D vectors or 3-D images are supported"
    )


class PPOModule(nn.Module):
    """Actor-critic for Discrete or 1-D Box actions."""

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Discrete | gym.spaces.Box,
        model: ModelConfig,
        *,
        inference_only: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(observation_space, gym.spaces.Box):
            raise ValueError(f"observation space must be a Box, got {observation_space!r}")
        self.dist = distributions.for_action_space(action_space)
        self.inference_only = inference_only
        self.shared = model.vf_share_layers
        self.pi_encoder = _make_encoder(observation_space, model)
        hidden = self.pi_encoder.out_dim
        if self.dist is distributions.Categorical:
            self.pi_head = _init(nn.Linear(hidden, int(action_space.n)), 0.01, model.ortho_init)
            self.log_std: nn.Parameter | None = None
        else:
            action_dim = int(action_space.shape[0])
            self.pi_head = _init(nn.Linear(hidden, action_dim), 0.01, model.ortho_init)
            # State-independent log std (CleanRL / SB3), initial std exp(log_std_init); with
            # gSDE one per (hidden unit, action) pair, the std of the noise matrix's entries.
            shape = (hidden, action_dim) if model.use_sde else (action_dim,)
            self.log_std = nn.Parameter(torch.full(shape, model.log_std_init))
        self.use_sde = model.use_sde and self.log_std is not None
        self.vf_encoder: nn.Module | None = None
        self.vf_head: nn.Linear | None = None
        if not inference_only:
            if not self.shared:
                self.vf_encoder = _make_encoder(observation_space, model)
            self.vf_head = _init(nn.Linear(hidden, 1), 1.0, model.ortho_init)

    # --- forward passes ----------------------------------------------------------------------
    def _pi_from_embedding(self, emb: torch.Tensor) -> torch.Tensor:
        out = self.pi_head(emb)  # [B, n] logits or [B, A] mean
        if self.log_std is None:
            return out
        if self.use_sde:
            # gSDE: the noise latent @ M (M ~ N(0, std^2) per entry) is, for one state, normal
            # with variance latent^2 @ std^2 per action (SB3's StateDependentNoiseDistribution:
            # the latent is detached, epsilon 1e-6 under the square root).
            variance = emb.detach().square() @ self.log_std.exp().square()  # [B, A]
            return torch.cat([out, 0.5 * torch.log(variance + SDE_EPS)], dim=-1)
        return torch.cat([out, self.log_std.expand_as(out)], dim=-1)  # [B, 2A]

    def dist_inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """[B, *obs] -> [B, D]."""
        return self._pi_from_embedding(self.pi_encoder(obs))

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """[B, *obs] -> [B]."""
        if self.vf_head is None:
            raise RuntimeError("an inference-only PPOModule has no value function")
        encoder = self.pi_encoder if self.vf_encoder is None else self.vf_encoder
        return self.vf_head(encoder(obs)).squeeze(-1)

    def forward_train(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, *obs] -> (dist_inputs [B, D], values [B]); one encoder pass when shared."""
        if self.vf_head is None:
            raise RuntimeError("an inference-only PPOModule has no value function")
        emb = self.pi_encoder(obs)
        vf_emb = emb if self.vf_encoder is None else self.vf_encoder(obs)
        return self._pi_from_embedding(emb), self.vf_head(vf_emb).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_train(obs)

    @torch.no_grad()
    def sde_noise(self, n: int) -> torch.Tensor:
        """[n, hidden, A]: one gSDE exploration matrix per env, entries N(0, std^2)."""
        if not self.use_sde or self.log_std is None:
            raise RuntimeError("sde_noise needs a continuous-action module with model.use_sde")
        std = self.log_std.exp()
        return torch.randn((n, *std.shape), device=std.device) * std

    @torch.no_grad()
    def sample(
        self, obs: torch.Tensor, explore: bool = True, sde_noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """[B, *obs] -> (actions [B, ...], logp [B], dist_inputs [B, D]), without autograd.

        explore=False gives the argmax (Discrete) or the mean (Box), with its log-prob. With
        gSDE and `sde_noise` ([B, hidden, A], from sde_noise()), exploring adds latent @ noise
        to the mean, row by row; without it, noise is drawn afresh for this call.
        """
        if explore and self.use_sde:
            emb = self.pi_encoder(obs)
            dist_inputs = self._pi_from_embedding(emb)
            noise = self.sde_noise(emb.shape[0]) if sde_noise is None else sde_noise
            mean = dist_inputs[:, : noise.shape[-1]]
            actions = mean + torch.bmm(emb.unsqueeze(1), noise).squeeze(1)
            return actions, self.dist.logp(dist_inputs, actions), dist_inputs
        dist_inputs = self.dist_inputs(obs)
        if explore:
            actions, logp = self.dist.sample(dist_inputs)
        else:
            actions = self.dist.deterministic(dist_inputs)
            logp = self.dist.logp(dist_inputs, actions)
        return actions, logp, dist_inputs

    # --- weights for EnvRunners --------------------------------------------------------------
    def inference_state_dict(self) -> dict[str, torch.Tensor]:
        """The policy part of the weights (what an inference-only copy holds), detached."""
        return {
            k: v.detach()
            for k, v in self.state_dict().items()
            if not k.startswith(_CRITIC_PREFIXES)
        }

    def load_inference_state_dict(self, state: Mapping[str, torch.Tensor | np.ndarray]) -> None:
        """Load policy weights (torch tensors or numpy arrays); critic weights stay as they are."""
        # Copy: arrays from Ray's object store are read-only views (torch warns on those), and
        # load_state_dict copies into the parameters anyway.
        tensors = {
            k: v if isinstance(v, torch.Tensor) else torch.from_numpy(np.array(v))
            for k, v in state.items()
        }
        missing, unexpected = self.load_state_dict(tensors, strict=False)
        missing = [k for k in missing if not k.startswith(_CRITIC_PREFIXES)]
        if missing or unexpected:
            raise ValueError(
                f"policy weights do not match this module: missing {missing}, "
                f"unexpected {unexpected}"
            )
