"""A checkpoint's checkpoint.json for assertions: production code reads it only through
`trainer.checkpoint.load`, which also loads the weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer.checkpoint import META_FILE, _CheckpointDir


def read_meta(path: Path) -> dict[str, Any]:
    """checkpoint.json of a checkpoint directory or .tar.gz, opened the way `load` opens it."""
    with _CheckpointDir(Path(path)) as directory:
        return json.loads((directory / META_FILE).read_text())
