"""Checkpoints: save / load / pack, retention, and a policy for use outside the service.

A checkpoint is a directory:
    checkpoint.json   format version, config, iteration, env_steps, episode_return_mean
    state.pt          torch.save of PPO.get_state(): learner (weights, optimizer, kl coeff),
                      observation-filter stats, episode window, counters, torch RNG
`pack()` turns it into one .tar.gz (what the service stores and users download); everything
that loads a checkpoint accepts the directory or that archive as it is.
"""

from __future__ import annotations

import json
import math
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from trainer.config import PPOConfig

if TYPE_CHECKING:
    from trainer.algorithm import PPO

FORMAT_VERSION = 1
META_FILE = "checkpoint.json"
STATE_FILE = "state.pt"


def save(directory: Path, algo: PPO) -> Path:
    """Write `algo`'s checkpoint into `directory` (replaced atomically if it exists)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
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
    if directory.exists():
        shutil.rmtree(directory)
    tmp.rename(directory)
    return directory


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

    Archives may hold the files at their root or inside one top-level folder.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp: Path | None = None

    def __enter__(self) -> Path:
        if self.path.is_dir():
            root = self.path
        elif self.path.is_file() and tarfile.is_tarfile(self.path):
            self._tmp = Path(tempfile.mkdtemp(prefix="rollout-ckpt-"))
            with tarfile.open(self.path) as tar:
                tar.extractall(self._tmp, filter="data")
            root = self._tmp
        else:
            raise FileNotFoundError(f"{self.path}: not a checkpoint directory or .tar.gz archive")
        if (root / META_FILE).is_file():
            return root
        found = sorted(root.glob(f"*/{META_FILE}"))
        if len(found) != 1:
            raise FileNotFoundError(f"{self.path}: no {META_FILE} in the checkpoint")
        return found[0].parent

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


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


def evaluate(
    path: str | Path, episodes: int, seed: int = 0, deterministic: bool = True
) -> tuple[float, float]:
    """(mean, std) of the undiscounted return over `episodes` fresh episodes of one env."""
    import gymnasium as gym

    policy = load_policy(path)
    torch.manual_seed(seed)
    env = gym.make(policy.config.env_id, **policy.config.env_config)
    returns = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            policy.reset()
            total, done = 0.0, False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(policy.act(obs, deterministic))
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return float(np.mean(returns)), float(np.std(returns))
