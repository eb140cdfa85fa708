"""Write the PPOConfig JSON schema and defaults that the new-experiment form is built from.

Run from the repository root: `.venv/bin/python frontend/scripts/export_config_schema.py`.
A test (tests/browser/test_config_schema_mirror.py) fails when the committed file is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "frontend" / "src" / "form" / "ppoSchema.json"


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from trainer.config import PPOConfig

    doc = {
        "schema": PPOConfig.model_json_schema(),
        "defaults": PPOConfig().to_json_dict(),
    }
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def main() -> None:
    OUT.write_text(render())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
