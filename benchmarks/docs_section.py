"""Benchmarks record their results in docs/benchmarks.md as marked sections, rewritten in place."""

from __future__ import annotations

from pathlib import Path


def write_section(
    path: Path, start: str, end: str, section: str, *, anchor: str, heading: str
) -> None:
    """Replace the block from `start` to `end` with `section` (which carries both markers); a
    file without it gets the section after `anchor`, or at its end under `heading`."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + section + rest.split(end, 1)[1]
    elif anchor in text:
        before, after = text.split(anchor, 1)
        text = before + anchor + "\n\n" + section + "\n" + after
    else:
        text = text.rstrip("\n") + f"\n\n{heading}\n\n" + section + "\n"
    path.write_text(text)
