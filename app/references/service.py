"""Reference curves: the JSON files shipped in app/references/data/, read once and validated."""

from __future__ import annotations

import functools
from pathlib import Path

from app.references.schemas import ReferenceCurves

DATA_DIR = Path(__file__).resolve().parent / "data"


@functools.cache
def load_all(directory: Path = DATA_DIR) -> tuple[ReferenceCurves, ...]:
    """Every reference file, sorted by env id then label. A malformed file raises: the files
    are part of the release (benchmarks/references.py writes them, a test reads them all)."""
    found = [
        ReferenceCurves.model_validate_json(path.read_text())
        for path in sorted(directory.glob("*.json"))
    ]
    return tuple(sorted(found, key=lambda r: (r.env_id, r.label)))


def list_references(env_id: str | None = None) -> list[ReferenceCurves]:
    """All references, or those for one env id (exact match; empty when there is none)."""
    return [r for r in load_all() if env_id is None or r.env_id == env_id]
