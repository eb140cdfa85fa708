"""The dashboard's wire types are generated from the service's schemas (OpenAPI and the live
messages); the committed file must not go stale, or tsc would check the UI against old types."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "frontend" / "node_modules" / ".bin" / "openapi-typescript"


@pytest.mark.skipif(not GENERATOR.exists(), reason="frontend dependencies not installed (npm ci)")
def test_wire_types_match_the_services_schemas() -> None:
    exporter = runpy.run_path(str(ROOT / "frontend" / "scripts" / "export_wire_types.py"))
    committed = (ROOT / "frontend" / "src" / "api" / "wire.gen.ts").read_text()
    assert committed == exporter["render"](), (
        "frontend/src/api/wire.gen.ts is stale: run "
        "`.venv/bin/python frontend/scripts/export_wire_types.py`"
    )


def test_the_stream_types_name_every_live_message() -> None:
    """Every model of app/live/messages.py is in the generated file (what types.ts aliases)."""
    from app.live import messages

    generated = (ROOT / "frontend" / "src" / "api" / "wire.gen.ts").read_text()
    names = [
        name
        for name, value in vars(messages).items()
        if isinstance(value, type)
        and issubclass(value, messages._Message)
        and value is not messages._Message
    ]
    assert len(names) == 7
    for name in names:
        assert f"        {name}: {{" in generated, name
