"""The acting policy: one interface, two implementations, chosen in one place (`make_policy`).

EnvRunners and evaluations act through an `ActingPolicy`: observations in, (actions, log-probs,
dist_inputs) out, all numpy. The torch implementation runs the PPOModule itself (any encoder,
any device); the numpy one (trainer/fast/policy.py) runs an MLP on a CPU without torch's
per-operation dispatch. Both hold the same module: it owns the weights, and `sync()` after a
load lets an implementation take them. ROLLOUT_REFERENCE_PATHS=1 (trainer/fast/switch.py)
makes every choice the torch one.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from trainer.devices import HostToDevice, StepOutputs
from trainer.fast.policy import NumpyPolicy
from trainer.fast.switch import reference_paths
from trainer.module import PPOModule

SDENoise = torch.Tensor | np.ndarray  # [N, hidden, A] gSDE exploration matrices


class ActingPolicy(Protocol):
    """What an EnvRunner or an evaluation calls to act."""

    def sample(
        self, obs: np.ndarray, explore: bool = True, sde_noise: SDENoise | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[N, *obs] -> (actions [N, *action] as sampled, logp [N], dist_inputs [N, D]).
        explore=False: the argmax or the mean. With gSDE, exploring adds latent @ sde_noise."""
        ...

    def sde_noise(self, n: int) -> SDENoise:
        """[n, hidden, A] fresh gSDE exploration matrices, in this policy's own form."""
        ...

    def sync(self) -> None:
        """Take the module's weights after a load."""
        ...

    def seed(self, seed: int) -> None:
        """Restart the draws from `seed`."""
        ...


class TorchPolicy:
    """The PPOModule acting on its own device: observations go there (from pinned memory when
    the caller's buffers are pinned), the three outputs come back in one copy from a GPU."""

    def __init__(
        self,
        module: PPOModule,
        device: torch.device,
        *,
        outputs: StepOutputs | None = None,
        stream: torch.cuda.Stream | None = None,
        pinned: bool = False,
    ) -> None:
        """`outputs` packs a GPU step's outputs (needed on a GPU); `stream` is the one the
        caller samples on; `pinned`: the observations given are in pinned memory."""
        if device.type == "cuda" and outputs is None:
            raise ValueError("a TorchPolicy on a GPU needs StepOutputs for its results")
        self.module = module
        self.device = device
        self._to_device = HostToDevice(device)
        self._outputs = outputs
        self._stream = stream
        self._pinned = pinned

    def sample(
        self, obs: np.ndarray, explore: bool = True, sde_noise: SDENoise | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = self._to_device(obs, pinned=self._pinned)
        actions, logp, dist_inputs = self.module.sample(x, explore, sde_noise)  # type: ignore[arg-type]
        if self._outputs is not None and self.device.type == "cuda":
            return self._outputs.fetch(actions, logp, dist_inputs, self._stream)
        return actions.numpy(), logp.numpy(), dist_inputs.numpy()

    def sde_noise(self, n: int) -> torch.Tensor:
        return self.module.sde_noise(n)

    def sync(self) -> None:
        """Nothing to take: the module is the weights."""

    def seed(self, seed: int) -> None:
        torch.manual_seed(seed)


def make_policy(
    module: PPOModule,
    device: torch.device,
    rng: np.random.Generator,
    *,
    outputs: StepOutputs | None = None,
    stream: torch.cuda.Stream | None = None,
    pinned: bool = False,
) -> ActingPolicy:
    """The numpy policy for an MLP on a CPU (drawing from `rng`), unless the reference paths
    are forced; the torch one otherwise (the keywords are TorchPolicy's)."""
    if NumpyPolicy.supports(module, device) and not reference_paths():
        return NumpyPolicy(module, rng)
    return TorchPolicy(module, device, outputs=outputs, stream=stream, pinned=pinned)
