"""The checkpoint format: save / load / pack (retention: checkpoint_manager.py; a checkpoint's
policy outside the service: evaluation.py).

A checkpoint is a directory:
    checkpoint.json   format version, config, iteration, env_steps, episode_return_mean
    state.pt          torch.save of PPO.get_state(): learner (weights, optimizer, kl coeff),
                      observation-filter stats, episode window, counters, torch RNG, the
                      serial-mode EnvRunner's action stream (numpy generator state)
`pack()` turns it into one .tar.gz (what the service stores and users download); everything
that loads a checkpoint accepts the directory or that archive as it is.
"""

from __future__ import annotations

import ctypes
import functools
import json
import math
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import torch

from trainer.config import PPOConfig

FORMAT_VERSION = 1
META_FILE = "checkpoint.json"
STATE_FILE = "state.pt"
# Bounds on what loading an archive may unpack: a checkpoint is two files (plus a folder);
# an Atari CNN's state with its optimizer is ~50 MB, so 2 GiB leaves room for large networks
# while a crafted archive cannot fill the disk.
MAX_ARCHIVE_MEMBERS = 16
MAX_EXTRACTED_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class CheckpointInfo:
    """What checkpoint.json says about the state beside it."""

    config: PPOConfig
    iteration: int
    env_steps: int
    episode_return_mean: float  # NaN (no finished episode yet) is written as null

    def to_json_dict(self) -> dict[str, Any]:
        ret = self.episode_return_mean
        return {
            "format_version": FORMAT_VERSION,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "episode_return_mean": ret if math.isfinite(ret) else None,
            "config": self.config.to_json_dict(),
        }


def save(directory: Path, state: dict[str, Any], info: CheckpointInfo) -> Path:
    """Write a checkpoint (a PPO state, `PPO.get_state()`, and what it is) into `directory`,
    atomically: readers (and a crash at any point) see the old checkpoint or the complete new
    one, never a partial or missing one.

    The files are written and fsynced in a hidden sibling directory, which then takes the
    target's place in one rename (an existing target is swapped with it, RENAME_EXCHANGE, and
    deleted afterwards). A failed save removes its partial files and leaves the target as it
    was.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        _torch_save(state, tmp / STATE_FILE)
        (tmp / META_FILE).write_text(json.dumps(info.to_json_dict(), indent=2))
        for path in (tmp / STATE_FILE, tmp / META_FILE, tmp):
            _fsync(path)
        _move_into_place(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync(directory.parent)
    return directory


def _torch_save(state: dict[str, Any], path: Path) -> None:
    """torch.save, with a full disk raised as the OSError (ENOSPC, EDQUOT) callers handle.

    Given a path, torch's C++ writer reports a failed write as a RuntimeError without errno;
    through a Python file object the OSError happens in Python, but closing the archive then
    raises a RuntimeError over it (the OSError as its context). The OSError is what failed."""
    try:
        with open(path, "wb") as file:
            torch.save(state, file)
    except RuntimeError as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, OSError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise cause from exc


def _fsync(path: Path) -> None:
    """Flush a file's or a directory's entries to disk (a rename is only durable after it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_into_place(tmp: Path, directory: Path) -> None:
    """Rename the complete `tmp` to `directory`; an existing `directory` is exchanged with it
    in one step and then deleted (where the filesystem cannot exchange, it is first renamed
    aside, the one moment the target name is missing)."""
    try:
        os.rename(tmp, directory)  # atomic; fails when a non-empty directory is there
        return
    except OSError:
        if not directory.is_dir():
            raise
    if _exchange(tmp, directory):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old checkpoint
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{directory.name}-old-", dir=directory.parent))
    os.rename(directory, aside / "old")
    try:
        os.rename(tmp, directory)
    except OSError:
        os.rename(aside / "old", directory)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    renameat2 = getattr(_libc(), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


@functools.cache
def _libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def pack(directory: Path, archive: Path | None = None) -> Path:
    """directory -> .tar.gz with the checkpoint files at its root."""
    directory = Path(directory)
    archive = archive or directory.with_name(directory.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for name in (META_FILE, STATE_FILE):
            tar.add(directory / name, arcname=name)
    return archive


def load(path: Path) -> tuple[PPOConfig, dict[str, Any]]:
    """(config, PPO state) from a checkpoint directory or .tar.gz."""
    with _CheckpointDir(Path(path)) as directory:
        meta = json.loads((directory / META_FILE).read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported checkpoint format {meta.get('format_version')}")
        state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=True)
    return PPOConfig.from_saved(meta["config"]), state


class _CheckpointDir:
    """Context manager: a directory holding checkpoint.json, extracting an archive if needed.

    Archives may hold the files at their root or inside one top-level folder. Extraction is
    bounded (MAX_ARCHIVE_MEMBERS, MAX_EXTRACTED_BYTES, checked on each member's header before
    its data is written), and its temp dir is removed however the load ends, also when the
    archive is refused or holds no checkpoint.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp: Path | None = None

    def __enter__(self) -> Path:
        if self.path.is_dir():
            return self._root(self.path)
        if not (self.path.is_file() and tarfile.is_tarfile(self.path)):
            raise FileNotFoundError(f"{self.path}: not a checkpoint directory or .tar.gz archive")
        self._tmp = Path(tempfile.mkdtemp(prefix="rollout-ckpt-"))
        try:
            _extract_bounded(self.path, self._tmp)
            return self._root(self._tmp)
        except BaseException:
            self._cleanup()
            raise

    def _root(self, root: Path) -> Path:
        if (root / META_FILE).is_file():
            return root
        found = sorted(root.glob(f"*/{META_FILE}"))
        if len(found) != 1:
            raise FileNotFoundError(f"{self.path}: no {META_FILE} in the checkpoint")
        return found[0].parent

    def _cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __exit__(self, *exc: object) -> None:
        self._cleanup()


# tarfile's extraction filters came with Python 3.11.4 (Debian 12's python3.11 is 3.11.2).
HAS_EXTRACTION_FILTERS = hasattr(tarfile, "data_filter")


def _plain_member(member: tarfile.TarInfo, archive: Path) -> tarfile.TarInfo:
    """Where tarfile has no "data" filter: a checkpoint holds plain files and folders under
    its root, nothing else (no links, devices, absolute paths or `..`)."""
    parts = PurePosixPath(member.name).parts
    if not (member.isfile() or member.isdir()) or not parts or parts[0] == "/" or ".." in parts:
        raise ValueError(f"{archive}: refusing a checkpoint archive member {member.name!r}")
    return member


def _extract_bounded(archive: Path, dest: Path) -> None:
    """Extract `archive` into `dest` member by member (tarfile's "data" filter: no links out,
    no absolute paths, no devices), refusing it once it holds too many members or bytes."""
    total = 0
    with tarfile.open(archive) as tar:
        for count, member in enumerate(tar, start=1):
            total += member.size
            if count > MAX_ARCHIVE_MEMBERS or total > MAX_EXTRACTED_BYTES:
                raise ValueError(
                    f"{archive}: refusing a checkpoint archive of more than "
                    f"{MAX_ARCHIVE_MEMBERS} files or {MAX_EXTRACTED_BYTES} bytes unpacked"
                )
            if HAS_EXTRACTION_FILTERS:
                tar.extract(member, dest, filter="data")
            else:
                tar.extract(_plain_member(member, archive), dest, set_attrs=False)
