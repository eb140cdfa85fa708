"""Devices: where the Learner and the driver's EnvRunner compute, and how data gets there.

A GPU pays twice on image envs: the Learner's SGD, and the EnvRunner's policy forward passes
(a Nature CNN on 64 Atari frames takes milliseconds on a CPU core, every vector step). The
driver's EnvRunner shares the Learner's GPU in serial mode; observations cross as uint8 (4x
smaller than float32; the encoder converts on the device) from pinned host memory (the
EnvRunner's own sample buffers when they are pinned, else one reused pinned buffer), so the copy
is a DMA that does not stage through pageable memory. What the policy outputs comes back in one
copy per step (`StepOutputs`), not one per tensor.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import torch

from trainer.config import PPOConfig


def set_cpu_threads(n: int) -> None:
    """Threads for CPU math in this process: n for torch's pool, one for numpy's BLAS.

    The numpy paths (the policy, the hand-written step) do their wide matmuls through torch
    (trainer/fast/hand_grad.py `_matmul`), so one pool is enough, and two would fight:
    OpenBLAS's idle workers spin for as long as calls keep coming (through a whole sampling
    phase), and with both pools at two threads on two cores the HalfCheetah minibatch step took
    8.4 ms instead of 0.8, and at random twice its time even with OpenBLAS's threads limited to
    its SGD phase. torch's OpenMP workers sleep soon after their last parallel region. OpenBLAS
    would also start one thread per core of the machine, not of the CPUs Ray reserved for an
    actor."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(n)
    threadpool_limits(1, user_api="blas")


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
    before passing the next one, so the pinned buffer is never overwritten mid-copy. With
    `pinned=True` the array itself is in pinned memory and is uploaded from where it is; the
    caller keeps it unchanged until that wait.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._pinned: torch.Tensor | None = None

    def __call__(self, array: np.ndarray, *, pinned: bool = False) -> torch.Tensor:
        host = torch.from_numpy(array)
        if self.device.type == "cpu":
            return host
        if pinned:
            return host.to(self.device, non_blocking=True)
        pinned = self._pinned
        if pinned is None or pinned.shape != host.shape or pinned.dtype != host.dtype:
            pinned = self._pinned = torch.empty(host.shape, dtype=host.dtype, pin_memory=True)
        pinned.copy_(host)
        return pinned.to(self.device, non_blocking=True)


class StepOutputs:
    """What a policy step hands back to the host, in one device -> host copy: actions, log-probs
    and distribution inputs packed as float64 columns [N, A + 1 + D] (float64 holds int64
    Discrete actions and float32 values exactly), copied into one pinned buffer.

    Three `.cpu()` calls were three blocking copies per step, each one waiting for whatever the
    device had queued before it (with overlapped sampling: the Learner's kernels).
    """

    def __init__(self, num_envs: int, action_example: np.ndarray, dist_dim: int) -> None:
        self.action_dtype = action_example.dtype
        self.action_shape = action_example.shape[1:]  # [*action]: () for Discrete
        self.action_width = int(np.prod(self.action_shape, dtype=np.int64))
        self.width = self.action_width + 1 + dist_dim
        self.num_envs = num_envs
        self._host: torch.Tensor | None = None

    def pack(
        self, actions: torch.Tensor, logp: torch.Tensor, dist_inputs: torch.Tensor
    ) -> torch.Tensor:
        """actions [N, *action], logp [N], dist_inputs [N, D] -> [N, A + 1 + D] float64."""
        n = self.num_envs
        return torch.cat(
            [
                actions.reshape(n, self.action_width).to(torch.float64),
                logp.reshape(n, 1).to(torch.float64),
                dist_inputs.reshape(n, -1).to(torch.float64),
            ],
            dim=1,
        )

    def unpack(self, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[N, A + 1 + D] -> (actions [N, *action] as sampled, logp [N], dist_inputs [N, D])."""
        a = self.action_width
        actions = packed[:, :a].astype(self.action_dtype).reshape(self.num_envs, *self.action_shape)
        logp = packed[:, a].astype(np.float32)
        return actions, logp, packed[:, a + 1 :].astype(np.float32)

    def fetch(
        self,
        actions: torch.Tensor,
        logp: torch.Tensor,
        dist_inputs: torch.Tensor,
        stream: torch.cuda.Stream | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pack on the device, copy once into pinned memory, wait for `stream` (the one the
        step ran on; None: the current one), unpack on the host."""
        packed = self.pack(actions, logp, dist_inputs)
        if packed.device.type == "cpu":
            return self.unpack(packed.numpy())
        if self._host is None:
            self._host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
        self._host.copy_(packed, non_blocking=True)
        (stream or torch.cuda.current_stream(packed.device)).synchronize()
        return self.unpack(self._host.numpy())


class HostStaging:
    """A host buffer that batches are assembled in before they go to `device`, kept across
    calls (`reuse`): pinned for a GPU, so the upload is one asynchronous DMA; for the CPU the
    tensor is the buffer itself.

    take() waits until the previous upload from the buffer is done before handing it out
    again; on the CPU the caller must be done with the previous tensor (a Learner's batch of
    the last update is).
    """

    def __init__(self, device: torch.device, *, reuse: bool = True) -> None:
        self.device = device
        self.reuse = reuse
        self._buffer: torch.Tensor | None = None
        self._uploaded: torch.cuda.Event | None = None

    def take(self, rows: int, row_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A [rows, *row_shape] array of `dtype` to fill."""
        torch_dtype = torch.from_numpy(np.empty(0, dtype)).dtype
        buf = self._buffer
        fits = (
            buf is not None
            and buf.dtype == torch_dtype
            and tuple(buf.shape[1:]) == tuple(row_shape)
            and buf.shape[0] >= rows
        )
        if not fits:
            pin = self.device.type == "cuda"
            # 10 % headroom: batches overshoot their size by a few steps, chunk counts vary.
            capacity = rows + rows // 10 if self.reuse else rows
            buf = torch.empty((capacity, *row_shape), dtype=torch_dtype, pin_memory=pin)
            if self.reuse:
                self._buffer = buf
            self._uploaded = None
        elif self._uploaded is not None:
            self._uploaded.synchronize()
        assert buf is not None
        return buf[:rows].numpy()

    def upload(self, host: np.ndarray) -> torch.Tensor:
        """The filled array on the device."""
        tensor = torch.from_numpy(host)
        if self.device.type == "cpu":
            return tensor
        out = tensor.to(self.device, non_blocking=True)
        self._uploaded = torch.cuda.Event()
        self._uploaded.record(torch.cuda.current_stream(self.device))
        return out
