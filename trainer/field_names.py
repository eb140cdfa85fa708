"""One message for a config key PPOConfig does not have, with the field it most likely meant.

The service (every route that takes a config, the sweep grid), `rollout train` and the browser
form (frontend/src/form/unknownKeys.ts, the same aliases and the same distance rule; a test
keeps the two alike) all say `unknown field 'learning_rate'; did you mean lr?` instead of
pydantic's "Extra inputs are not permitted".
"""

from __future__ import annotations

import functools
import typing
from typing import Any

from pydantic import BaseModel

from trainer.config import PPOConfig

# Names other PPO libraries (SB3, CleanRL, RLlib) use for PPOConfig's fields.
ALIASES: dict[str, str] = {
    "learning_rate": "lr",
    "clip_range": "clip_param",
    "clip_coef": "clip_param",
    "clip_range_vf": "vf_clip_param",
    "vf_coef": "vf_loss_coeff",
    "ent_coef": "entropy_coeff",
    "n_epochs": "num_epochs",
    "update_epochs": "num_epochs",
    "batch_size": "minibatch_size",
    "minibatch": "minibatch_size",
    "n_envs": "num_envs_per_env_runner",
    "num_envs": "num_envs_per_env_runner",
    "max_grad_norm": "grad_clip",
    "norm_adv": "normalize_advantages",
    "lambda": "gae_lambda",
    "env": "env_id",
    "total_timesteps": "stop.env_steps",
    "steps": "stop.env_steps",
    "target_kl": "kl_target",
}


@functools.cache
def config_paths() -> tuple[str, ...]:
    """Every PPOConfig field as a dotted path ("lr", "stop.env_steps", "model.hidden_sizes")."""

    def walk(model: type[BaseModel], prefix: str) -> list[str]:
        out = []
        for name, info in model.model_fields.items():
            annotation = info.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                out += walk(annotation, f"{prefix}{name}.")
            elif typing.get_origin(annotation) is not dict:
                out.append(f"{prefix}{name}")
        return out

    return tuple(walk(PPOConfig, ""))


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i]
        for j in range(1, len(b) + 1):
            row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])))
        prev = row
    return prev[len(b)]


def suggest_field(path: str, known: tuple[str, ...] | None = None) -> str | None:
    """The known field `path` most likely meant, or None when none is close: an alias, else
    the nearest name when at most a third of it differs."""
    known = config_paths() if known is None else known
    leaf = path.rsplit(".", 1)[-1].lower()
    alias = ALIASES.get(leaf)
    if alias is not None and alias in known:
        return alias
    best, best_score = None, None
    for candidate in known:
        score = min(
            edit_distance(path.lower(), candidate),
            edit_distance(leaf, candidate.rsplit(".", 1)[-1]),
        )
        if best_score is None or score < best_score:
            best, best_score = candidate, score
    if best is not None and best_score is not None and best_score <= max(1, len(leaf) // 3):
        return best
    return None


# Keys that were config fields once and now live elsewhere: where to give them.
MOVED: dict[str, str] = {
    "evaluation_every": (
        "'evaluation_every' is a setting of the experiment (or sweep, or study), not of its "
        "config: give it beside `config` (`rollout train` records no videos: `rollout evaluate "
        "CHECKPOINT --video FILE`)"
    ),
}


def unknown_field_message(path: str) -> str:
    """`unknown field 'learning_rate'; did you mean lr?` (the hint only when one is close)."""
    if path in MOVED:
        return MOVED[path]
    meant = suggest_field(path)
    return f"unknown field {path!r}" + (f"; did you mean {meant}?" if meant else "")


def config_error_message(error: Any) -> str:
    """A pydantic error of a PPOConfig as said to a user: unknown keys get the message above,
    validators' messages lose pydantic's "Value error, " prefix."""
    if error.get("type") == "extra_forbidden":
        return unknown_field_message(".".join(str(p) for p in error.get("loc", ())))
    return str(error.get("msg", "invalid value")).removeprefix("Value error, ")
