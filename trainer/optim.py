"""Adam that runs eagerly without importing torch._dynamo.

torch.optim's Optimizer imports torch._dynamo (and with it sympy) on the first call of step(),
zero_grad(), add_param_group(), state_dict() or load_state_dict(): its decorators exist to keep
torch.compile from tracing into them. This trainer never compiles, and that import is about
0.6 s of CPU, a third of the start-up of a CartPole run. EagerAdam calls the undecorated
methods (functools.wraps keeps them as `__wrapped__`); the update, its state and its state
dict are exactly torch.optim.Adam's. Where a torch version lacks `__wrapped__`, the decorated
method is used as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.optim import Adam, Optimizer

# Adam eps as in CleanRL / SB3's PPO (torch's 1e-8 is less stable with tiny gradients); both
# SGD steps' Adam use it.
ADAM_EPS = 1e-5


def _undecorated(method: Callable[..., Any]) -> Callable[..., Any]:
    return getattr(method, "__wrapped__", method)


_STEP = _undecorated(Adam.step)
_ZERO_GRAD = _undecorated(Optimizer.zero_grad)
_ADD_PARAM_GROUP = _undecorated(Optimizer.add_param_group)
_STATE_DICT = _undecorated(Optimizer.state_dict)
_LOAD_STATE_DICT = _undecorated(Optimizer.load_state_dict)


class EagerAdam(Adam):
    """torch.optim.Adam for eager-only use (never inside torch.compile)."""

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        # What Adam.step's own decorator does besides the import: no autograd in the update.
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            return _STEP(self, closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _ZERO_GRAD(self, set_to_none)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _ADD_PARAM_GROUP(self, param_group)

    def state_dict(self) -> dict[str, Any]:
        return _STATE_DICT(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _LOAD_STATE_DICT(self, state_dict)
