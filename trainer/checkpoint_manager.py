"""`rollout train`'s checkpoint directory: root/checkpoint_<iteration>, the latest and the best."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.checkpoint import META_FILE

if TYPE_CHECKING:
    from trainer.algorithm import PPO


class CheckpointManager:
    """Saves checkpoints as root/checkpoint_<iteration>, keeping the `keep` latest plus the
    one with the best episode_return_mean."""

    def __init__(self, root: Path, keep: int) -> None:
        self.root = Path(root)
        self.keep = keep

    def save(self, algo: PPO) -> Path:
        path = algo.save_checkpoint(self.root / f"checkpoint_{algo.iteration:06d}")
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
