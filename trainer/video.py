"""Episode videos: frames from an env's `rgb_array` rendering, encoded as they arrive.

Two formats, both played by Chromium (checked in Debian's Chromium 156) and both encoded by the
ffmpeg that PyAV's wheel bundles:
- `.webm`: VP9 (libvpx, realtime mode), what the service stores and the dashboard plays;
  royalty-free, so every Chromium build plays it;
- `.mp4`: H.264 (libx264, yuv420p, `faststart`), for `rollout evaluate --video out.mp4` and
  players outside the browser.

A video has a size cap: at most `max_frames` frames (a long episode keeps every `frame_step`-th
frame, planned from the env's step limit so playback stays at real speed) and at most
`max_bytes` (the episode is cut before the file would grow past it). `VideoInfo` says which
happened. Frames are encoded one by one, so memory stays at one frame whatever the episode's
length.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_FPS = 30


@dataclass(frozen=True)
class VideoFormat:
    codec: str  # ffmpeg encoder
    container: str  # ffmpeg muxer
    media_type: str
    label: str  # what the API and the dashboard show
    options: dict[str, str]
    container_options: dict[str, str]


FORMATS: dict[str, VideoFormat] = {
    ".webm": VideoFormat(
        codec="libvpx-vp9",
        container="webm",
        media_type="video/webm",
        label="vp9",
        # Realtime mode at the fastest speed: ~400 frames/s for CartPole's 600x400 on one core
        # where the "good" deadline manages ~20. Constrained quality, capped at `bit_rate`.
        # No lag: each frame's packet comes out at once, so the byte cap is known while adding.
        options={
            "deadline": "realtime",
            "cpu-used": "8",
            "crf": "32",
            "row-mt": "1",
            "lag-in-frames": "0",
        },
        container_options={},
    ),
    ".mp4": VideoFormat(
        codec="libx264",
        container="mp4",
        media_type="video/mp4",
        label="h264",
        options={"preset": "veryfast", "tune": "zerolatency", "crf": "23"},
        # The index goes first so a browser can start playing before the whole file arrived.
        container_options={"movflags": "+faststart"},
    ),
}
BIT_RATE = 1_000_000


@dataclass(frozen=True)
class VideoLimits:
    """The size cap of one video."""

    max_bytes: int = 2_000_000
    max_frames: int = 1000
    max_side: int = 640  # larger frames are scaled down (aspect kept)


@dataclass(frozen=True)
class VideoInfo:
    """What was encoded, and how it differs from the episode it shows."""

    codec: str
    media_type: str
    size_bytes: int
    frames: int  # frames in the file
    fps: float
    width: int
    height: int
    source_frames: int  # frames the episode rendered (reset + every step)
    frame_step: int  # every `frame_step`-th rendered frame was kept (1: all of them)
    cut: bool  # the video ends before the episode did (frame or byte cap)

    @property
    def duration_s(self) -> float:
        return self.frames / self.fps if self.fps > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class VideoError(RuntimeError):
    """A frame that cannot be encoded (wrong shape or type)."""


def video_format(path: Path) -> VideoFormat:
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: the video file must end in .webm or .mp4")
    return fmt


# Thinning beyond every 4th frame makes motion unreadable: longer episodes are cut instead.
MAX_FRAME_STEP = 4


def plan_frame_step(expected_frames: int | None, max_frames: int) -> int:
    """Keep every k-th frame so an episode of `expected_frames` fits in `max_frames` (k at
    most MAX_FRAME_STEP)."""
    if not expected_frames or expected_frames <= max_frames:
        return 1
    return min(MAX_FRAME_STEP, math.ceil(expected_frames / max_frames))


def even_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Scale down to `max_side` on the longer side; yuv420p needs even dimensions."""
    scale = min(1.0, max_side / max(width, height))
    w = max(2, int(width * scale) // 2 * 2)
    h = max(2, int(height * scale) // 2 * 2)
    return w, h


def check_frame(frame: Any) -> np.ndarray:
    """An HxWx3 uint8 RGB array, or VideoError saying what the env returned instead."""
    if not isinstance(frame, np.ndarray):
        raise VideoError(f"the env's render() returned {type(frame).__name__}, not an image")
    if frame.ndim != 3 or frame.shape[2] not in (3, 4) or min(frame.shape[:2]) < 2:
        raise VideoError(f"the env's render() returned an array of shape {frame.shape}")
    if frame.dtype != np.uint8:
        raise VideoError(f"the env's render() returned {frame.dtype} pixels, not uint8")
    return np.ascontiguousarray(frame[..., :3])


class VideoWriter:
    """Encodes rendered frames to `path` as they come, within `limits`.

    `add(frame)` takes every frame of the episode (it keeps every `frame_step`-th one) and
    returns False once the video is full; `close()` finishes the file and returns its
    VideoInfo (None if no frame was added: the file is removed then).
    """

    def __init__(
        self,
        path: Path,
        fps: float | None,
        frame_step: int = 1,
        limits: VideoLimits | None = None,
    ) -> None:
        self.path = Path(path)
        self.format = video_format(self.path)
        self.limits = limits or VideoLimits()
        self.frame_step = max(1, frame_step)
        source_fps = Fraction(fps or DEFAULT_FPS).limit_denominator(1000)
        self.rate = source_fps / self.frame_step
        self.source_frames = 0
        self.frames = 0
        self.cut = False
        self._container: Any = None
        self._stream: Any = None
        self._packet_bytes = 0
        # Stop adding frames this far below the byte cap: room for the frame being added, the
        # encoder's last packets and the container's own bytes. (The file on disk says little
        # while writing: the WebM muxer holds whole clusters in memory.)
        self._byte_budget = self.limits.max_bytes - max(64 * 1024, self.limits.max_bytes // 20)

    def add(self, frame: np.ndarray) -> bool:
        """Feed the next rendered frame; False once no further frame will be kept."""
        if self.cut:
            return False
        index = self.source_frames
        self.source_frames += 1
        if index % self.frame_step:
            return True
        if self.frames >= self.limits.max_frames or self._packet_bytes > self._byte_budget:
            self.cut = True
            return False
        rgb = check_frame(frame)
        if self._container is None:
            self._open(rgb.shape[1], rgb.shape[0])
        self._encode(rgb)
        self.frames += 1
        return True

    def _open(self, width: int, height: int) -> None:
        import av

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fmt = self.format
        self._container = av.open(
            str(self.path), "w", format=fmt.container, options=fmt.container_options
        )
        stream = self._container.add_stream(fmt.codec, rate=self.rate, options=fmt.options)
        stream.width, stream.height = even_size(width, height, self.limits.max_side)
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = BIT_RATE
        self._stream = stream

    def _encode(self, rgb: np.ndarray) -> None:
        import av

        stream = self._stream
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame = frame.reformat(width=stream.width, height=stream.height, format="yuv420p")
        self._mux(stream.encode(frame))

    def _mux(self, packets: Any) -> None:
        for packet in packets:
            self._packet_bytes += packet.size
            self._container.mux(packet)

    def close(self) -> VideoInfo | None:
        """Flush the encoder and finish the file; None (and no file) without frames."""
        if self._container is None:
            self.path.unlink(missing_ok=True)
            return None
        self._mux(self._stream.encode())
        self._container.close()
        width, height = self._stream.width, self._stream.height
        self._container = None
        return VideoInfo(
            codec=self.format.label,
            media_type=self.format.media_type,
            size_bytes=self.path.stat().st_size,
            frames=self.frames,
            fps=float(self.rate),
            width=width,
            height=height,
            source_frames=self.source_frames,
            frame_step=self.frame_step,
            cut=self.cut,
        )

    def discard(self) -> None:
        """Abandon the video (rendering failed): close what is open and remove the file."""
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.close()
            self._container = None
        self.path.unlink(missing_ok=True)


def probe(path: Path) -> dict[str, Any]:
    """Decode a video completely: frame count, size, codec and duration (for tests and
    checks after an upload)."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        codec = stream.codec_context.name
        width, height = stream.codec_context.width, stream.codec_context.height
        rate = float(stream.average_rate or stream.guessed_rate or 0)
    return {"frames": frames, "width": width, "height": height, "codec": codec, "fps": rate}


# MuJoCo picks its OpenGL platform when it is first imported: GLFW (its default) needs a
# display, EGL renders off-screen on the GPU or through Mesa, OSMesa in software.
HEADLESS_MUJOCO_GL = "egl"


def headless_rendering() -> None:
    """Render to arrays without a display: SDL (pygame: classic control, Box2D) with its dummy
    driver, MuJoCo through EGL. Called before the first env is made; a value the user set wins."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("MUJOCO_GL", HEADLESS_MUJOCO_GL)


def rendering_hint(exc: BaseException) -> str:
    """What to do about a render failure, where one is known (MuJoCo without an OpenGL)."""
    if "OpenGL" in str(exc) or type(exc).__module__.startswith("mujoco"):
        return (
            f" (MuJoCo renders headless through MUJOCO_GL=egl, the default here, or "
            f"MUJOCO_GL=osmesa; this process has MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}: "
            "install libEGL (Debian: libegl1) or OSMesa (libosmesa6))"
        )
    return ""
