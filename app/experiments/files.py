"""An experiment's files on this machine, removed with it (app/core/layout.py says where)."""

from __future__ import annotations

import shutil

from app.core import layout
from app.core.config import Settings


def remove_experiment_files(settings: Settings, experiment_id: int) -> None:
    """Its checkpoint archives, its job's local files and its evaluations' videos.

    Called once its rows are deleted but before the commit: on a full disk (the documented
    remedy) the commit itself needs the room they free (SQLite's write-ahead log). A commit that
    fails anyway leaves a finished experiment without files; deleting it again completes."""
    for folder in layout.experiment_file_dirs(
        settings.data_dir, settings.checkpoints_dir, experiment_id
    ):
        shutil.rmtree(folder, ignore_errors=True)
