"""Checkpoint archives on disk: streamed in, hashed on the way, renamed into place atomically."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from app.core.errors import InvalidInput

MAX_CHECKPOINT_BYTES = 20 * 1024**3


@dataclass(frozen=True)
class StoredFile:
    path: Path
    size_bytes: int
    sha256: str


def experiment_dir(root: Path, experiment_id: int) -> Path:
    return root / str(experiment_id)


def archive_path(root: Path, experiment_id: int, iteration: int) -> Path:
    return experiment_dir(root, experiment_id) / f"iteration-{iteration:08d}.tar.gz"


async def receive(chunks: AsyncIterator[bytes], target: Path) -> StoredFile:
    """Write a request body to `target` without holding it in memory; replace atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".upload-", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in chunks:
                if not chunk:
                    continue
                size += len(chunk)
                if size > MAX_CHECKPOINT_BYTES:
                    raise InvalidInput("the checkpoint is too large")
                digest.update(chunk)
                out.write(chunk)
        if size == 0:
            raise InvalidInput("the checkpoint upload is empty")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return StoredFile(path=target, size_bytes=size, sha256=digest.hexdigest())


def remove_files(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def remove_experiment_dir(root: Path, experiment_id: int) -> None:
    shutil.rmtree(experiment_dir(root, experiment_id), ignore_errors=True)
