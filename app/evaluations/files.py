"""Evaluation files under the data dir: videos, and the job dir of an evaluation job.

    <data dir>/evaluations/<experiment id>/<evaluation id>.webm
    <data dir>/jobs/evaluations/<evaluation id>/          (the job's scratch space)

Removed with the evaluation, and with its experiment.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from app.checkpoints.storage import body_chunks
from app.core import layout
from app.core.config import Settings
from app.core.errors import InvalidInput

# The cap a job's encoder aims under (trainer.video.VideoLimits) and the upload limit.
VIDEO_MAX_BYTES = 2_000_000
VIDEO_MAX_FRAMES = 1000


async def receive_video(chunks: AsyncIterator[bytes], target: Path) -> int:
    """Stream an upload to `target` (replaced atomically); over VIDEO_MAX_BYTES is a 422.

    The evaluation's video in another format (a re-upload as .mp4 of a .webm) is removed
    once the new one is in place: an evaluation has one video file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".upload-", suffix=".part")
    tmp = Path(tmp_name)
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            async for chunk in body_chunks(chunks, target):
                size += len(chunk)
                if size > VIDEO_MAX_BYTES:
                    raise InvalidInput(f"the video is larger than {VIDEO_MAX_BYTES} bytes")
                out.write(chunk)
        if size == 0:
            raise InvalidInput("the video upload is empty")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for suffix in layout.VIDEO_SUFFIXES.values():
        if suffix != target.suffix:
            target.with_suffix(suffix).unlink(missing_ok=True)
    return size


def remove_evaluation_files(settings: Settings, evaluation_id: int, video_path: str | None) -> None:
    if video_path:
        (settings.data_dir / video_path).unlink(missing_ok=True)
    shutil.rmtree(layout.evaluation_job_dir(settings.data_dir, evaluation_id), ignore_errors=True)
