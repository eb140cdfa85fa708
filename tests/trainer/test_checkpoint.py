"""Checkpoint format: directory and .tar.gz, retention, policy loading and evaluation."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from trainer.algorithm import PPO
from trainer.checkpoint import (
    FORMAT_VERSION,
    CheckpointManager,
    evaluate,
    load,
    load_policy,
    pack,
    read_meta,
)
from trainer.config import PPOConfig


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[PPO, Path]:
    config = PPOConfig(
        num_envs_per_env_runner=4,
        train_batch_size_per_learner=256,
        minibatch_size=128,
        num_epochs=2,
        normalize_observations=True,
        frame_stack=2,
    )
    algo = PPO(config)
    for _ in range(2):
        algo.train()
    path = algo.save_checkpoint(tmp_path_factory.mktemp("ckpt") / "checkpoint_000002")
    algo.stop()
    return algo, path


def test_directory_layout_and_meta(trained: tuple[PPO, Path]) -> None:
    algo, path = trained
    assert sorted(p.name for p in path.iterdir()) == ["checkpoint.json", "state.pt"]
    meta = json.loads((path / "checkpoint.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["iteration"] == 2 and meta["env_steps"] == algo.env_steps
    assert meta["episode_return_mean"] == pytest.approx(algo.window.return_mean)
    assert PPOConfig.model_validate(meta["config"]) == algo.config


def test_archive_loads_like_the_directory(trained: tuple[PPO, Path], tmp_path: Path) -> None:
    _, path = trained
    archive = pack(path, tmp_path / "ckpt.tar.gz")
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["checkpoint.json", "state.pt"]
    config_dir, state_dir = load(path)
    config_tar, state_tar = load(archive)
    assert config_dir == config_tar
    assert state_dir["iteration"] == state_tar["iteration"] == 2
    assert read_meta(archive) == read_meta(path)


def test_archive_with_a_top_level_folder(trained: tuple[PPO, Path], tmp_path: Path) -> None:
    _, path = trained
    archive = tmp_path / "nested.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(path, arcname="checkpoint_000002")
    assert read_meta(archive)["iteration"] == 2


def test_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "junk.txt").write_text("x")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "junk.txt")
    with pytest.raises(FileNotFoundError):
        load(tmp_path)


def test_policy_uses_trained_weights_and_frozen_filter(trained: tuple[PPO, Path]) -> None:
    algo, path = trained
    policy = load_policy(path)
    weights = algo.learner_group.get_inference_weights()
    for k, v in policy.module.inference_state_dict().items():
        np.testing.assert_array_equal(v.numpy(), weights[k])
    assert policy.env_to_module.get_state() == algo.env_runners.connector_state
    obs = np.zeros(4, np.float32)
    policy.reset()
    action = policy.act(obs)
    assert action.shape == () and int(action) in (0, 1)
    assert policy.env_to_module.get_state() == algo.env_runners.connector_state  # frozen


def test_evaluate_from_archive(trained: tuple[PPO, Path], tmp_path: Path) -> None:
    _, path = trained
    archive = pack(path, tmp_path / "ckpt.tar.gz")
    result = evaluate(archive, episodes=3, seed=5)
    again = evaluate(path, episodes=3, seed=5)
    assert result.returns == again.returns  # deterministic policy, seeded resets
    assert result.lengths == [int(r) for r in result.returns]  # CartPole: +1 per step
    assert 1.0 <= result.mean <= 500.0 and result.std >= 0.0


def _fake_save(manager: CheckpointManager, iteration: int, ret: float, tmp: Path) -> Path:
    path = manager.root / f"checkpoint_{iteration:06d}"
    path.mkdir(parents=True)
    (path / "checkpoint.json").write_text(json.dumps({"episode_return_mean": ret}))
    manager._prune()
    return path


def test_retention_keeps_latest_and_best(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "checkpoints", keep=2)
    returns = [10.0, 300.0, 20.0, 30.0, 40.0]
    for i, ret in enumerate(returns, start=1):
        _fake_save(manager, i, ret, tmp_path)
    names = [p.name for p in manager.checkpoints()]
    assert names == ["checkpoint_000002", "checkpoint_000004", "checkpoint_000005"]
    assert manager.best() is not None and manager.best().name == "checkpoint_000002"
    assert manager.latest() is not None and manager.latest().name == "checkpoint_000005"
