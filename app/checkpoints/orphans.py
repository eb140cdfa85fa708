"""At start-up, remove files under the data dir that no database row accounts for.

Uploads are atomic from the outside (temp file, row, rename, in one transaction), but a crash
can still leave a temp file, an archive whose row never committed, an archive a committed
replacement made stale, or the directories of an experiment deleted while its job or an upload
was still writing. Each API process does this at start-up; only entries untouched for `grace_s`
go, so an upload in flight in another API process on the same data dir is never disturbed.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from app.checkpoints import storage
from app.checkpoints.models import Checkpoint
from app.core import layout
from app.core.config import Settings
from app.core.db import SessionMaker, read_only
from app.experiments.models import Experiment

log = logging.getLogger(__name__)

# Longer than any rename-to-commit gap and any pause of a live upload's stream.
ORPHAN_GRACE_S = 600.0


@dataclass
class SweepReport:
    removed: list[Path] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.removed)


def _newest_mtime(path: Path) -> float:
    """The latest modification time of `path` and (for a directory) everything in it."""
    try:
        newest = path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
    if path.is_dir():
        for child in path.rglob("*"):
            try:
                newest = max(newest, child.stat().st_mtime)
            except FileNotFoundError:
                continue
    return newest


def _known(sessionmaker: SessionMaker) -> tuple[set[int], set[str]]:
    with read_only(sessionmaker)() as session:
        ids = set(session.scalars(select(Experiment.id)))
        paths = set(session.scalars(select(Checkpoint.path)))
    return ids, paths


def remove_orphans(
    settings: Settings, sessionmaker: SessionMaker, *, grace_s: float = ORPHAN_GRACE_S
) -> SweepReport:
    """Remove orphaned checkpoint files and directories, and job dirs of deleted experiments."""
    ids, paths = _known(sessionmaker)
    cutoff = time.time() - grace_s
    report = SweepReport()

    def remove(path: Path) -> None:
        if _newest_mtime(path) > cutoff:
            return
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        report.removed.append(path)

    root = settings.checkpoints_dir
    for entry in _children(root):
        if entry.is_dir() and entry.name.isdigit():
            if int(entry.name) not in ids:
                remove(entry)
                continue
            for file in _children(entry):
                relative = str(file.relative_to(root))
                if file.is_file() and (storage.is_temp(file) or relative not in paths):
                    remove(file)
        elif entry.is_file() and storage.is_temp(entry):
            remove(entry)
    for entry in _children(layout.jobs_dir(settings.data_dir)):
        if entry.is_dir() and entry.name.isdigit() and int(entry.name) not in ids:
            remove(entry)
    if report.removed:
        log.warning(
            "removed %d orphaned files/directories under %s: %s",
            len(report),
            settings.data_dir,
            ", ".join(str(p) for p in report.removed[:20]),
        )
    return report


def _children(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir())
    except FileNotFoundError:
        return []
