"""A module's parameters in one flat buffer, and torch's Adam over it: the hand-written step's
optimizer.

On a CPU a small network's optimizer step is per-tensor overhead: torch's Adam walks its
parameter list in Python (~130 us for the 12 tensors of a 64x64 actor-critic, fused or not) and
clip_grad_norm_ takes a norm per tensor. Over one flat buffer each is a handful of operations.
FlatAdam keeps torch's Adam state and state dict, so a checkpoint moves freely between this and
the autograd step's EagerAdam (trainer/optim.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from trainer.optim import EagerAdam


class FlatParameters:
    """A module's parameters and their gradients as views into two flat buffers.

    The parameters stay the module's own nn.Parameter objects (state dicts, the EnvRunners'
    weights and checkpoints see no difference); only their storage moves.
    """

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        numel = sum(p.numel() for p in params)
        first = params[0]
        self.data = torch.empty(numel, dtype=first.dtype, device=first.device)
        self.grad = torch.zeros_like(self.data)
        offset = 0
        for p in params:
            n = p.numel()
            self.data[offset : offset + n].copy_(p.detach().reshape(-1))
            p.data = self.data[offset : offset + n].view_as(p)
            p.grad = self.grad[offset : offset + n].view_as(p)
            offset += n
        self.params = params

    def clip_grad_norm_(self, max_norm: float) -> float:
        """torch.nn.utils.clip_grad_norm_ over the flat gradient (a CPU buffer): the norm before
        clipping. One BLAS dot and at most one scaling, in numpy (a torch call each costs more
        than the arithmetic on these buffers)."""
        grad = self.grad.numpy()
        norm = math.sqrt(float(np.dot(grad, grad)))
        coef = max_norm / (norm + 1e-6)
        if coef < 1.0:
            grad *= np.float32(coef)
        return norm


class FlatAdam(EagerAdam):
    """torch.optim.Adam's update (no weight decay, no amsgrad) on FlatParameters' buffers.

    The per-parameter state torch's Adam keeps ('step', 'exp_avg', 'exp_avg_sq') is here too, as
    views into flat moment buffers, so state_dict() and load_state_dict() are torch's own and a
    checkpoint moves freely between this and the autograd path's Adam.
    """

    def __init__(self, flat: FlatParameters, *, lr: float, eps: float) -> None:
        # fused=True as the autograd path's Adam: its param_groups (and so a checkpoint's) are the
        # same, and the kernel below is the one that setting runs.
        super().__init__(flat.params, lr=lr, eps=eps, fused=True)
        self.flat = flat
        self._exp_avg = torch.zeros_like(flat.data)
        self._exp_avg_sq = torch.zeros_like(flat.data)
        self._step = torch.tensor(0.0)  # one counter for every parameter's state
        self._step_count = self._step.numpy()

    def _bind_state(self) -> None:
        """Every parameter's state as views of the flat moments, one shared step counter."""
        offset = 0
        for p in self.flat.params:
            n = p.numel()
            self.state[p] = {
                "step": self._step,
                "exp_avg": self._exp_avg[offset : offset + n].view_as(p),
                "exp_avg_sq": self._exp_avg_sq[offset : offset + n].view_as(p),
            }
            offset += n

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        if closure is not None:
            raise ValueError("FlatAdam takes no closure")
        self.update()
        return None

    def update(self) -> None:
        """One Adam step. The hot loop calls this, not step(): torch wraps every optimizer's
        step() in a profiler record_function and a walk over step hooks, ~30 us a call, more
        than the update of a small network's flat buffer."""
        if not self.state:
            self._bind_state()
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        self._step_count += 1.0  # numpy view of the step tensor: no torch dispatch
        # The kernel torch.optim.Adam(fused=True) runs, here over one flat tensor: the same
        # arithmetic as the autograd path's Adam, in one operation instead of a Python loop.
        torch._fused_adam_(
            [self.flat.data],
            [self.flat.grad],
            [self._exp_avg],
            [self._exp_avg_sq],
            [],
            [self._step],
            amsgrad=False,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=0.0,
            eps=group["eps"],
            maximize=False,
        )

    def state_dict(self) -> dict[str, Any]:
        """torch's format, each parameter with its own step tensor: torch's Adam increments
        every parameter's step in place, so a shared one would count several times there."""
        packed = super().state_dict()
        packed["state"] = {i: {**s, "step": s["step"].clone()} for i, s in packed["state"].items()}
        return packed

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        loaded = dict(self.state)
        if not loaded:
            return
        steps = {float(s["step"]) for s in loaded.values()}
        if len(steps) != 1:
            raise ValueError(f"Adam state with differing step counts {sorted(steps)}")
        self._step.fill_(steps.pop())
        self._bind_state()
        for p, s in loaded.items():
            self.state[p]["exp_avg"].copy_(s["exp_avg"])
            self.state[p]["exp_avg_sq"].copy_(s["exp_avg_sq"])
