"""Devices: where the Learner and the driver's EnvRunner compute, and how data gets there.

A GPU pays twice on image envs: the Learner's SGD, and the EnvRunner's policy forward passes
(a Nature CNN on 64 Atari frames takes milliseconds on a CPU core, every vector step). The
driver's EnvRunner shares the Learner's GPU in serial mode; observations cross as uint8 (4x
smaller than float32; the encoder converts on the device) through one pinned host buffer, so
the copy is a DMA that does not stage through pageable memory.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import torch

from trainer.config import PPOConfig


def learner_device(config: PPOConfig) -> torch.device:
    """The device of a Learner in this process (Ray narrows CUDA_VISIBLE_DEVICES to its GPU)."""
    return torch.device("cuda:0" if config.num_gpus_per_learner > 0 else "cpu")


def inference_device(config: PPOConfig, *, local: bool) -> torch.device:
    """Where an EnvRunner runs its policy; `local`: it lives in the driver (serial mode)."""
    wanted = config.inference_device
    if not local or wanted == "cpu":
        return torch.device("cpu")
    if wanted == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("inference_device 'cuda' was asked for, but CUDA is not available")
        return torch.device("cuda:0")
    gpu_learner_here = config.num_learners == 0 and config.num_gpus_per_learner > 0
    return torch.device("cuda:0" if gpu_learner_here and torch.cuda.is_available() else "cpu")


def set_matmul_precision(device: torch.device, precision: str) -> None:
    """TF32 for matmuls and convolutions of a CUDA Learner unless `precision` is 'fp32'
    (process-wide flags: one Learner per process)."""
    if device.type == "cuda":
        allow = precision != "fp32"
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow


def forward_autocast(device: torch.device, precision: str) -> AbstractContextManager[None]:
    """bfloat16 autocast for forward passes when `precision` is 'bf16'; a no-op otherwise.
    Callers cast what comes out to float32 before log-probs and losses."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


class HostToDevice:
    """Moves [N, *obs] numpy batches of one shape to `device`: as is (no copy) for the CPU,
    through one reused pinned buffer and an asynchronous copy for a GPU.

    Contract: the caller waits for the results of one batch (e.g. `.cpu()` on the actions)
    before passing the next one, so the pinned buffer is never overwritten mid-copy.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pinned: torch.Tensor | None = None

    def __call__(self, array: np.ndarray) -> torch.Tensor:
        host = torch.from_numpy(array)
        if self.device.type == "cpu":
            return host
        pinned = self._pinned
        if pinned is None or pinned.shape != host.shape or pinned.dtype != host.dtype:
            pinned = self._pinned = torch.empty(host.shape, dtype=host.dtype, pin_memory=True)
        pinned.copy_(host)
        return pinned.to(self.device, non_blocking=True)
