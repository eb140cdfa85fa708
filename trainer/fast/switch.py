"""ROLLOUT_REFERENCE_PATHS: the one switch that turns the fast paths off.

With it set to 1, every choice between a fast implementation and its torch reference (the SGD
step, trainer/sgd_step.py; the acting policy, trainer/policy.py) takes the reference. Why a
switch: when a run misbehaves, the first question is whether a fast path computes something
other than its reference; answering it must not need a code change. Read here and nowhere else;
the service passes it on to the jobs it launches (app/jobs/launcher.py).
"""

from __future__ import annotations

import os

from trainer.wire import ENV_REFERENCE_PATHS

_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")


def reference_paths() -> bool:
    """Whether the environment forces the torch reference implementations."""
    value = os.environ.get(ENV_REFERENCE_PATHS, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(
        f"{ENV_REFERENCE_PATHS}={value!r}: expected 1 (or true) to force the "
        "reference paths, or 0 / unset for the fast ones"
    )
