"""An experiment that already has a checkpoint, written straight into a service's database and
data dir (no training job): what evaluation end-to-end and browser tests start from."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from app.checkpoints import service as checkpoints
from app.checkpoints import storage
from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker, transaction
from app.experiments import service as experiments
from app.experiments.schemas import ExperimentCreate
from trainer.wire import CheckpointMeta


def train_checkpoint(directory: Path, iterations: int = 2, seed: int = 0) -> Path:
    """A briefly trained CartPole checkpoint, packed as the service stores it."""
    from trainer.algorithm import PPO
    from trainer.checkpoint import pack
    from trainer.config import PPOConfig

    config = PPOConfig(
        num_envs_per_env_runner=8,
        train_batch_size_per_learner=1024,
        minibatch_size=256,
        num_epochs=4,
        seed=seed,
    )
    algo = PPO(config)
    for _ in range(iterations):
        algo.train()
    path = algo.save_checkpoint(directory / "checkpoint")
    algo.stop()
    return pack(path)


def seed_experiment(settings: Settings, archive: Path, name: str = "trained") -> tuple[int, int]:
    """A finished experiment whose one checkpoint is `archive`: (experiment id, checkpoint id)."""
    from tests.checkpoint_meta import read_meta

    meta = read_meta(archive)
    engine = make_engine(settings.resolved_database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            exp = experiments.create(session, ExperimentCreate(name=name, config=meta["config"]))
            experiments.transition(session, exp.id, "stopped", "trained outside this service")
            target = storage.new_archive_path(settings.checkpoints_dir, exp.id, meta["iteration"])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(archive, target)
            data = target.read_bytes()
            stored = storage.StoredFile(target, len(data), hashlib.sha256(data).hexdigest())
            checkpoint, _ = checkpoints.register(
                session,
                exp,
                CheckpointMeta(
                    iteration=meta["iteration"],
                    env_steps=meta["env_steps"],
                    episode_return_mean=meta["episode_return_mean"],
                ),
                stored,
                settings.checkpoints_dir,
            )
            return exp.id, checkpoint.id
    finally:
        engine.dispose()
