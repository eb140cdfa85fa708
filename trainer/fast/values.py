"""The Learner's GAE value pass for an MLP on a CPU, with tanh in its sigmoid form.

Why: the value pass is the one large forward pass of a CPU run (the whole train batch plus
one bootstrap row per chunk, at once), and there torch's CPU tanh kernel is the largest cost:
on a 2048 x 64 activation it takes ~590 us on one thread, 2 sigmoid(2x) - 1 (the same
function, ~1e-7 apart) ~240 us. With that form and no Module calls CartPole's 64x64 value pass
takes about half the time it takes through the module (docs/benchmarks.md). Below
`_SIGMOID_FORM_MIN_NUMEL` elements a layer keeps torch's tanh: its one kernel costs about what
the form's four do there. The reference is `PPOModule.values` (nn.Tanh);
tests/trainer/test_hand_grad.py compares the two.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from trainer.module import MLPEncoder, PPOModule

_SIGMOID_FORM_MIN_NUMEL = 32768  # a 512 x 64 activation


def _tanh_(x: torch.Tensor) -> torch.Tensor:
    """tanh of x, in place."""
    if x.numel() < _SIGMOID_FORM_MIN_NUMEL:
        return x.tanh_()
    return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)


class MLPValues:
    """`values(obs)`: PPOModule.values of an MLP module on a CPU, without autograd or Module
    calls. Holds the module's parameters (not copies): it always sees the current weights."""

    def __init__(self, module: PPOModule) -> None:
        encoder = module.pi_encoder if module.vf_encoder is None else module.vf_encoder
        if not isinstance(encoder, MLPEncoder) or module.vf_head is None:
            raise ValueError("MLPValues needs a full PPOModule with an MLP encoder")
        self._layers = [(m.weight, m.bias) for m in encoder.linears]
        self._head = (module.vf_head.weight, module.vf_head.bias)
        self._activation = _tanh_ if encoder.activation == "tanh" else torch.relu_

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """[B, obs_dim] -> [B]."""
        x = obs if obs.dtype == torch.float32 else obs.to(torch.float32)
        for weight, bias in self._layers:
            x = self._activation(F.linear(x, weight, bias))
        weight, bias = self._head
        return F.linear(x, weight, bias).squeeze(-1)
