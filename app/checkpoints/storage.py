"""Checkpoint archives on disk: streamed in under quota, hashed on the way, renamed into place.

An upload is written to a temp file (`.upload-*.part`) in its experiment's directory and only
renamed to its final name inside the transaction that records its row; every failure path
removes both. Final names carry a random suffix, so a failed re-upload of an iteration can never
remove (or overwrite) the archive a committed row points to. What a crash still leaves behind
(a temp file, an archive whose row never committed, the directory of a deleted experiment) is
removed by `app.checkpoints.orphans` at the next start.

Space is checked before an upload (from its Content-Length) and while it streams, against
`max_storage_bytes` (archives kept plus uploads in flight, counted on disk, so several API
processes see each other's uploads) and `min_free_bytes` (free space left on the filesystem).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import secrets
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from starlette.requests import ClientDisconnect

from app.core import layout
from app.core.config import Settings
from app.core.errors import InvalidInput, RolloutError
from app.core.system import InsufficientStorage, free_bytes

log = logging.getLogger(__name__)
MAX_CHECKPOINT_BYTES = 20 * 1024**3
# How often (in bytes received) an upload re-checks the quota and the free space.
CHECK_EVERY_BYTES = 4 * 1024**2
TEMP_PREFIX, TEMP_SUFFIX = ".upload-", ".part"
ARCHIVE_SUFFIX = ".tar.gz"


class UploadAborted(RolloutError):
    """The client went away before its upload's body was complete (nobody reads the reply)."""

    status_code: ClassVar[int] = 400
    code: ClassVar[str] = "upload_aborted"


async def body_chunks(chunks: AsyncIterator[bytes], target: Path) -> AsyncIterator[bytes]:
    """`chunks` (a request body); a client that disconnects mid-upload is one WARNING line
    and an UploadAborted, not an ERROR traceback (a job killed or cut off mid-upload retries,
    or is gone)."""
    size = 0
    try:
        async for chunk in chunks:
            size += len(chunk)
            yield chunk
    except ClientDisconnect:
        log.warning("upload to %s aborted: the client disconnected after %d bytes", target, size)
        raise UploadAborted("the client disconnected before the upload was complete") from None


@dataclass(frozen=True)
class StoredFile:
    path: Path
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class StorageLimits:
    max_bytes: int | None
    min_free_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> StorageLimits:
        return cls(settings.max_storage_bytes, settings.min_free_bytes)

    def check(self, root: Path, adding: int, *, exclude: Path | None = None) -> None:
        """Raise InsufficientStorage if `adding` more bytes under `root` break a limit.

        `exclude` (the upload's own temp file) is not counted: its bytes are in `adding`.
        """
        if self.max_bytes is not None:
            used = used_bytes(root, exclude=exclude)
            if used + adding > self.max_bytes:
                raise InsufficientStorage(
                    f"checkpoint storage is full: {used + adding:,} bytes would exceed "
                    f"ROLLOUT_MAX_STORAGE_BYTES={self.max_bytes:,}"
                )
        free = free_bytes(root)
        already_on_disk = exclude.stat().st_size if exclude and exclude.exists() else 0
        if free - (adding - already_on_disk) < self.min_free_bytes:
            raise InsufficientStorage(
                f"the data dir's disk is nearly full: {free:,} bytes free, "
                f"ROLLOUT_MIN_FREE_BYTES={self.min_free_bytes:,} must stay free"
            )


def used_bytes(root: Path, *, exclude: Path | None = None) -> int:
    """Bytes of every file under `root` (archives and uploads in flight)."""
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if exclude is not None and path == exclude:
                continue
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue  # removed meanwhile (retention, a finished upload)
    return total


def experiment_dir(root: Path, experiment_id: int) -> Path:
    return layout.experiment_checkpoints_dir(root, experiment_id)


def new_archive_path(root: Path, experiment_id: int, iteration: int) -> Path:
    """A final name never used before: `iteration-00000012-<random>.tar.gz`."""
    name = f"iteration-{iteration:08d}-{secrets.token_hex(6)}{ARCHIVE_SUFFIX}"
    return experiment_dir(root, experiment_id) / name


def is_temp(path: Path) -> bool:
    return path.name.startswith(TEMP_PREFIX) and path.name.endswith(TEMP_SUFFIX)


def _out_of_space(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


async def receive(
    chunks: AsyncIterator[bytes], directory: Path, root: Path, limits: StorageLimits
) -> StoredFile:
    """Stream a request body into a temp file in `directory`, checking space as it grows.

    Returns the temp file (the caller renames it into place or removes it); on any failure
    the temp file is gone. A full disk (ENOSPC) is an InsufficientStorage like a broken limit.
    """
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    next_check = 0  # check on the first chunk, then every CHECK_EVERY_BYTES, then at the end
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in body_chunks(chunks, directory):
                if not chunk:
                    continue
                if size + len(chunk) > MAX_CHECKPOINT_BYTES:
                    raise InvalidInput("the checkpoint is too large")
                if size + len(chunk) >= next_check:
                    out.flush()
                    await asyncio.to_thread(limits.check, root, size + len(chunk), exclude=tmp)
                    next_check = size + len(chunk) + CHECK_EVERY_BYTES
                size += len(chunk)
                digest.update(chunk)
                out.write(chunk)
            if size == 0:
                raise InvalidInput("the checkpoint upload is empty")
            out.flush()
            await asyncio.to_thread(limits.check, root, size, exclude=tmp)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if _out_of_space(exc):
            raise InsufficientStorage(f"the data dir's disk is full: {exc.strerror}") from None
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return StoredFile(path=tmp, size_bytes=size, sha256=digest.hexdigest())


def discard(paths: list[Path], directory: Path | None = None) -> None:
    """Remove files of a failed upload, and `directory` too if that leaves it empty (the
    experiment may have been deleted meanwhile; an empty directory is made again on need)."""
    remove_files(paths)
    if directory is not None:
        with contextlib.suppress(OSError):  # not empty (other archives), or gone
            directory.rmdir()


def remove_files(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
