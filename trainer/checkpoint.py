"""Checkpoints: save / load / pack, retention, and a policy for use outside the service.

A checkpoint is a directory:
    checkpoint.json   format version, config, iteration, env_steps, episode_return_mean
    state.pt          torch.save of PPO.get_state(): learner (weights, optimizer, kl coeff),
                      observation-filter stats, episode window, counters, torch RNG
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from trainer.config import PPOConfig
from trainer.video import (
    VideoInfo,
    VideoLimits,
    VideoWriter,
    headless_rendering,
    plan_frame_step,
    rendering_hint,
)

if TYPE_CHECKING:
    from trainer.algorithm import PPO

FORMAT_VERSION = 1
META_FILE = "checkpoint.json"
STATE_FILE = "state.pt"
# Bounds on what loading an archive may unpack: a checkpoint is two files (plus a folder);
# an Atari CNN's state with its optimizer is ~50 MB, so 2 GiB leaves room for large networks
# while a crafted archive cannot fill the disk.
MAX_ARCHIVE_MEMBERS = 16
MAX_EXTRACTED_BYTES = 2 * 1024**3


def save(directory: Path, algo: PPO) -> Path:
    """Write `algo`'s checkpoint into `directory`, atomically: readers (and a crash at any
    point) see the old checkpoint or the complete new one, never a partial or missing one.

    The files are written and fsynced in a hidden sibling directory, which then takes the
    target's place in one rename (an existing target is swapped with it, RENAME_EXCHANGE, and
    deleted afterwards). A failed save removes its partial files and leaves the target as it
    was.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        ret = algo.window.return_mean
        meta = {
            "format_version": FORMAT_VERSION,
            "iteration": algo.iteration,
            "env_steps": algo.env_steps,
            "episode_return_mean": ret if math.isfinite(ret) else None,
            "config": algo.config.to_json_dict(),
        }
        torch.save(algo.get_state(), tmp / STATE_FILE)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
        for path in (tmp / STATE_FILE, tmp / META_FILE, tmp):
            _fsync(path)
        _move_into_place(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync(directory.parent)
    return directory


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


def read_meta(path: Path) -> dict[str, Any]:
    with _CheckpointDir(Path(path)) as directory:
        return json.loads((directory / META_FILE).read_text())


def load(path: Path) -> tuple[PPOConfig, dict[str, Any]]:
    """(config, PPO state) from a checkpoint directory or .tar.gz."""
    with _CheckpointDir(Path(path)) as directory:
        meta = json.loads((directory / META_FILE).read_text())
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported checkpoint format {meta.get('format_version')}")
        state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=True)
    return PPOConfig.model_validate(meta["config"]), state


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
            tar.extract(member, dest, filter="data")


class CheckpointManager:
    """Saves checkpoints as root/checkpoint_<iteration>, keeping the `keep` latest plus the
    one with the best episode_return_mean."""

    def __init__(self, root: Path, keep: int) -> None:
        self.root = Path(root)
        self.keep = keep

    def save(self, algo: PPO) -> Path:
        path = save(self.root / f"checkpoint_{algo.iteration:06d}", algo)
        self._prune()
        return path

    def checkpoints(self) -> list[Path]:
        return sorted(p for p in self.root.glob("checkpoint_*") if (p / META_FILE).is_file())

    def best(self) -> Path | None:
        scored = [(self._score(p), p) for p in self.checkpoints()]
        scored = [(s, p) for s, p in scored if s is not None]
        return max(scored)[1] if scored else None

    def latest(self) -> Path | None:
        found = self.checkpoints()
        return found[-1] if found else None

    @staticmethod
    def _score(path: Path) -> float | None:
        return json.loads((path / META_FILE).read_text()).get("episode_return_mean")

    def _prune(self) -> None:
        found = self.checkpoints()
        keep = set(found[-self.keep :])
        best = self.best()
        if best is not None:
            keep.add(best)
        for path in found:
            if path not in keep:
                shutil.rmtree(path, ignore_errors=True)


# --- using a trained policy outside the service ------------------------------------------------
@dataclass
class Policy:
    """The inference module + its observation connectors (filter stats frozen).

    `act(obs)` takes ONE observation of the env and returns the action to send it; call
    `reset()` at every episode start (frame stacking starts from zeros).
    """

    config: PPOConfig
    module: Any  # PPOModule, inference-only
    env_to_module: Any  # EnvToModulePipeline for one env
    module_to_env: Any  # ModuleToEnvPipeline
    _first: bool = True

    def reset(self) -> None:
        self._first = True

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        batch = self.env_to_module(np.asarray(obs)[None], np.array([self._first]))  # [1, *obs]
        self._first = False
        actions, _, _ = self.module.sample(torch.from_numpy(batch), explore=not deterministic)
        return self.module_to_env(actions.numpy())[0]


def load_policy(path: str | Path) -> Policy:
    from trainer.connectors import build_env_to_module, build_module_to_env
    from trainer.envs import env_spaces
    from trainer.module import PPOModule

    config, state = load(Path(path))
    obs_space, action_space = env_spaces(config.env_id, config.env_config)
    env_to_module = build_env_to_module(config, obs_space, 1)
    env_to_module.set_state(state["connector_state"])
    for piece in env_to_module.pieces:
        if hasattr(piece, "update_stats"):
            piece.update_stats = False
    module = PPOModule(env_to_module.output_space, action_space, config.model, inference_only=True)
    module.load_inference_state_dict(_module_weights(state["learner"]))
    module.eval()
    return Policy(config, module, env_to_module, build_module_to_env(action_space))


def _module_weights(learner_state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The full module state dict inside a LearnerGroup state; only its policy part is used."""
    module = learner_state["module"]
    critic = ("vf_encoder.", "vf_head.")
    return {k: v for k, v in module.items() if not k.startswith(critic)}


@dataclass(frozen=True)
class EvaluationResult:
    """Per-episode returns and lengths, and the video of the first episode when one was asked
    for (or why there is none)."""

    returns: list[float]
    lengths: list[int]
    video: VideoInfo | None = None
    video_message: str | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))


EpisodeCallback = Callable[[int, float, int], None]
VideoCallback = Callable[[VideoInfo | None, str | None], None]


def evaluate(
    path: str | Path,
    episodes: int,
    seed: int = 0,
    deterministic: bool = True,
    *,
    video: Path | None = None,
    video_limits: VideoLimits | None = None,
    on_episode: EpisodeCallback | None = None,
    on_video: VideoCallback | None = None,
) -> EvaluationResult:
    """Run `episodes` fresh episodes of one env (episode k reset with `seed + k`).

    With `video`, the first episode is rendered (`render_mode="rgb_array"`) and encoded to that
    file (.webm or .mp4) within `video_limits`; an env that cannot render leaves a message in
    the result instead, and its returns are recorded all the same. `on_episode(index, return,
    length)` is called after every episode, `on_video(info, message)` as soon as the video file
    is complete (after the first episode, before the others run).
    """
    import gymnasium as gym

    if video is not None:
        headless_rendering()  # before the first env: MuJoCo reads MUJOCO_GL on import
    policy = load_policy(path)
    torch.manual_seed(seed)
    config = policy.config
    env = gym.make(config.env_id, **config.env_config)
    returns: list[float] = []
    lengths: list[int] = []
    info, message = None, None
    try:
        for episode in range(episodes):
            if episode == 0 and video is not None:
                recording = _Recording.start(config.env_id, config.env_config, video, video_limits)
                total, length = recording.run(policy, env, seed, deterministic)
                info, message = recording.info, recording.message
                if on_video is not None:
                    on_video(info, message)
            else:
                total, length = _run_episode(policy, env, seed + episode, deterministic)
            returns.append(total)
            lengths.append(length)
            if on_episode is not None:
                on_episode(episode, total, length)
    finally:
        env.close()
    return EvaluationResult(returns, lengths, info, message)


def _run_episode(
    policy: Policy, env: Any, seed: int, deterministic: bool, recording: _Recording | None = None
) -> tuple[float, int]:
    """One episode: (undiscounted return, steps); frames go to `recording` while it records."""
    obs, _ = env.reset(seed=seed)
    policy.reset()
    if recording is not None:
        recording.capture()
    total, length, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs, deterministic))
        total += float(reward)
        length += 1
        done = terminated or truncated
        if recording is not None:
            recording.capture()
    return total, length


class _Recording:
    """The first episode's env with `rgb_array` rendering and the writer its frames go to.

    Every way rendering can fail (the env refuses the render mode, render() raises or returns
    no image) ends the recording with a message; the episode itself goes on.
    """

    def __init__(self, env: Any, writer: VideoWriter | None, message: str | None) -> None:
        self.env = env
        self.writer = writer
        self.message = message
        self.info: VideoInfo | None = None

    @classmethod
    def start(
        cls, env_id: str, env_config: dict[str, Any], path: Path, limits: VideoLimits | None
    ) -> _Recording:
        import gymnasium as gym

        limits = limits or VideoLimits()  # evaluate() has set up headless rendering
        try:
            env = gym.make(env_id, **{**env_config, "render_mode": "rgb_array"})
        except Exception as exc:
            return cls(
                None,
                None,
                f"{env_id} cannot render frames (render_mode='rgb_array'): "
                f"{type(exc).__name__}: {exc}",
            )
        if env.render_mode != "rgb_array":
            env.close()
            return cls(None, None, f"{env_id} does not support render_mode='rgb_array'")
        steps = env.spec.max_episode_steps if env.spec is not None else None
        step = plan_frame_step(steps + 1 if steps else None, limits.max_frames)
        fps = env.metadata.get("render_fps")
        return cls(env, VideoWriter(path, fps, step, limits), None)

    def run(
        self, policy: Policy, fallback: Any, seed: int, deterministic: bool
    ) -> tuple[float, int]:
        """Play one episode on the rendering env (or `fallback` when there is none)."""
        try:
            result = _run_episode(policy, self.env or fallback, seed, deterministic, self)
            self.finish()
            return result
        finally:
            self.close()

    def capture(self) -> None:
        if self.writer is None:
            return
        try:
            frame = self.env.render()
            if not self.writer.add(frame):
                self._stop()  # full: the rest of the episode is not rendered
        except Exception as exc:
            at = self.writer.source_frames
            self.message = (
                f"rendering failed at frame {at}: {type(exc).__name__}: {exc}{rendering_hint(exc)}"
            )
            self.writer.discard()
            self.writer = None

    def _stop(self) -> None:
        assert self.writer is not None
        self.info = self.writer.close()
        self.writer = None

    def finish(self) -> None:
        """The episode ended: finish the file."""
        if self.writer is not None:
            self._stop()
        if self.info is None and self.message is None:
            self.message = "the episode rendered no frame"

    def close(self) -> None:
        if self.writer is not None:
            self.writer.discard()
            self.writer = None
        if self.env is not None:
            self.env.close()
            self.env = None
