"""The hand-written SGD step: what trainer/autograd_step.py does, without autograd's and the
optimizer's per-operation and per-tensor overhead.

One minibatch step is the PPO loss's gradients written out by hand (hand_grad.py) into the
module's flat gradient buffer, one BLAS dot for the norm and its clipping, and one fused Adam
kernel over the flat parameters (flat_adam.py). Each epoch runs on the torch thread count
`ThreadChoice` times (threads.py). Minibatches are numpy views of the train batch (batch.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from trainer.batch import TrainBatch
from trainer.config import PPOConfig
from trainer.fast import hand_grad
from trainer.fast.batch import NumpyBatch
from trainer.fast.flat_adam import FlatAdam, FlatParameters
from trainer.fast.threads import ThreadChoice
from trainer.fast.values import MLPValues
from trainer.module import PPOModule
from trainer.optim import ADAM_EPS


class HandWrittenStep:
    """The SGD step (trainer/sgd_step.py `SGDStep`) of an MLP PPOModule on a CPU Learner."""

    name = "hand-written"

    @staticmethod
    def supports(
        module: PPOModule, config: PPOConfig, device: torch.device, world_size: int
    ) -> bool:
        return hand_grad.supports(module, config, device, world_size)

    def __init__(self, module: PPOModule, config: PPOConfig) -> None:
        self._flat = FlatParameters(list(module.parameters()))
        self._gradients = hand_grad.HandGradients(module, config)
        self.optimizer = FlatAdam(self._flat, lr=config.lr, eps=ADAM_EPS)
        self._max_norm = config.grad_clip if config.grad_clip is not None else float("inf")
        self._threads = ThreadChoice(config.torch_num_threads)
        self.values = MLPValues(module)

    def prepare(self, batch: TrainBatch) -> NumpyBatch:
        return NumpyBatch.of(batch)

    def new_sums(self) -> np.ndarray:
        return np.zeros(6)

    @contextmanager
    def epoch(self, steps: int) -> Iterator[None]:
        """Runs the epoch on the thread count ThreadChoice picks, and times it for it."""
        threads = self._threads.pick()
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        yield
        self._threads.record(threads, (time.perf_counter() - t0) / steps)

    def gradients(self, mb: NumpyBatch, kl_coeff: float = 0.0) -> np.ndarray:
        """The loss's gradients into param.grad; the [5] losses. kl_coeff is always 0 here
        (supports() refuses the KL penalty)."""
        return self._gradients.compute(mb)

    def __call__(self, mb: NumpyBatch, kl_coeff: float) -> tuple[np.ndarray, float]:
        losses = self.gradients(mb, kl_coeff)
        grad_norm = self._flat.clip_grad_norm_(self._max_norm)
        self.optimizer.update()
        return losses, grad_norm
