"""The env ids the service checks submitted configs against are the installed ones."""

from __future__ import annotations

import json
import subprocess
import sys

from trainer.env_catalog import render, unknown_env_message
from trainer.env_ids import REGISTERED_ENV_IDS


def test_the_catalog_is_what_gymnasium_and_ale_py_register() -> None:
    # A fresh interpreter: other tests register envs of their own in this one's registry.
    script = (
        "import json; from trainer.env_catalog import registered_env_ids as ids; "
        "print(json.dumps(ids()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    ids = json.loads(out.stdout)
    assert list(REGISTERED_ENV_IDS) == ids, "run `python -m trainer.env_catalog` to regenerate"
    assert render(ids).count("\n") == len(ids) + 4
    assert {"CartPole-v1", "ALE/Pong-v5", "HalfCheetah-v5", "LunarLander-v3"} <= set(ids)


def test_unknown_ids_are_named_with_close_matches() -> None:
    message = unknown_env_message("CartPol-v1")
    assert message is not None and "'CartPol-v1'" in message and "CartPole-v1" in message
    assert "ALE/Pong-v5" in (unknown_env_message("ALE/Pongg-v5") or "")
    nothing_close = unknown_env_message("Zzzzzzzzzz-v0")
    assert nothing_close is not None and "did you mean" not in nothing_close
    for known in ("CartPole-v1", "ALE/Pong-v5", "my_envs:Custom-v0", "evilmodule:Env"):
        assert unknown_env_message(known) is None, known
