"""The OpenAPI schema is the service's public contract: it changes only on purpose. A change
fails here until the snapshot is regenerated (and the diff reviewed) with

    .venv/bin/python -m tests.service.test_openapi_snapshot
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from app.core.config import Settings
from app.main import create_app

SNAPSHOT = Path(__file__).with_name("openapi.json")


def current_schema() -> str:
    schema = create_app(Settings(jobs_enabled=False)).openapi()
    return json.dumps(schema, sort_keys=True, indent=1) + "\n"


def test_the_openapi_schema_matches_its_snapshot() -> None:
    now, then = current_schema(), SNAPSHOT.read_text()
    if now != then:
        diff = difflib.unified_diff(
            then.splitlines(), now.splitlines(), "openapi.json", "the app's schema", lineterm=""
        )
        shown = "\n".join(list(diff)[:80])
        raise AssertionError(
            f"the OpenAPI schema changed; if on purpose, regenerate the snapshot with "
            f"`.venv/bin/python -m tests.service.test_openapi_snapshot`:\n{shown}"
        )


if __name__ == "__main__":
    SNAPSHOT.write_text(current_schema())
    print(f"wrote {SNAPSHOT}")
