"""The new-experiment form is built from a copy of PPOConfig's schema; it must not go stale."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_form_schema_matches_ppo_config() -> None:
    exporter = runpy.run_path(str(ROOT / "frontend" / "scripts" / "export_config_schema.py"))
    committed = (ROOT / "frontend" / "src" / "form" / "ppoSchema.json").read_text()
    assert committed == exporter["render"](), (
        "frontend/src/form/ppoSchema.json is stale: run "
        "`.venv/bin/python frontend/scripts/export_config_schema.py`"
    )
