"""One unknown-key message everywhere: the service's and `rollout train`'s suggestions follow
the same aliases and distance rule as the browser form's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainer.field_names import ALIASES, config_paths, suggest_field, unknown_field_message
from trainer.resolve import resolve_config

FORM_ALIASES = Path(__file__).parents[2] / "frontend" / "src" / "form" / "unknownKeys.ts"


def test_suggestions_as_users_mistype_them() -> None:
    cases = {
        "learning_rate": "lr",
        "entropy_coef": "entropy_coeff",
        "stop.steps": "stop.env_steps",
        "model.hidden_size": "model.hidden_sizes",
        "n_epochs": "num_epochs",
        "lr_rate": None,
        "something_else_entirely": None,
    }
    for typed, meant in cases.items():
        assert suggest_field(typed) == meant, typed
    assert (
        unknown_field_message("learning_rate") == "unknown field 'learning_rate'; did you mean lr?"
    )
    assert unknown_field_message("zzz") == "unknown field 'zzz'"
    assert {"lr", "stop.env_steps", "model.cnn_dense"} <= set(config_paths())
    assert not any(p.startswith("env_config") for p in config_paths())


def test_the_form_knows_the_same_aliases() -> None:
    block = FORM_ALIASES.read_text().split("const ALIASES", 1)[1].split("};", 1)[0]
    form = dict(re.findall(r'^\s+(\w+): "([\w.]+)",$', block, flags=re.M))
    assert form == ALIASES


def test_rollout_train_says_it_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trainer.cli import main

    config = tmp_path / "c.json"
    config.write_text('{"env_id": "CartPole-v1", "learning_rate": 0.001}')
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "out")]) != 0
    error = capsys.readouterr().err
    assert "learning_rate: unknown field 'learning_rate'; did you mean lr?" in error
    assert resolve_config({"lr": 1e-3}).config.lr == 1e-3
