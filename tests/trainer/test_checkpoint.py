"""Checkpoint format: directory and .tar.gz, retention, policy loading and evaluation."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.checkpoint_meta import read_meta
from trainer import checkpoint
from trainer.algorithm import PPO
from trainer.checkpoint import FORMAT_VERSION, load, pack
from trainer.checkpoint_manager import CheckpointManager
from trainer.config import PPOConfig
from trainer.evaluation import evaluate, load_policy


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


def test_a_checkpoint_saved_with_a_retired_field_still_loads(
    trained: tuple[PPO, Path], tmp_path: Path
) -> None:
    """Checkpoints saved while evaluation_every was a config field hold it in their meta; no
    migration rewrites files, so loading drops the fields PPOConfig no longer has."""
    algo, path = trained
    old = tmp_path / "old"
    shutil.copytree(path, old)
    meta = json.loads((old / "checkpoint.json").read_text())
    meta["config"]["evaluation_every"] = 3
    (old / "checkpoint.json").write_text(json.dumps(meta))
    config, state = load(old)
    assert config == algo.config and state["iteration"] == 2
    with pytest.raises(ValueError, match="evaluation_every"):
        PPOConfig.model_validate(meta["config"])  # a config given today is refused


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


# --- failures, atomic saves and bounded extraction ----------------------------------------------
@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile's default dir for this test only, so leftovers of other processes never count."""
    tmp = tmp_path / "system-tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _archive(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_that_fails_to_load_leaves_no_temp_dir(
    trained: tuple[PPO, Path], tmp_path: Path, private_tmp: Path
) -> None:
    _, path = trained
    no_meta = _archive(tmp_path / "no_meta.tar.gz", {"notes.txt": b"hello"})
    with pytest.raises(FileNotFoundError, match=r"no checkpoint\.json"):
        load(no_meta)
    good = pack(path, tmp_path / "good.tar.gz").read_bytes()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises((tarfile.TarError, EOFError, OSError)):
        load(truncated)
    meta = json.loads((path / "checkpoint.json").read_text())
    future = _archive(
        tmp_path / "future.tar.gz",
        {"checkpoint.json": json.dumps({**meta, "format_version": 99}).encode()},
    )
    with pytest.raises(ValueError, match="unsupported checkpoint format"):
        load(future)
    assert list(private_tmp.iterdir()) == []


def test_extraction_is_bounded(
    trained: tuple[PPO, Path], tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path = trained
    archive = pack(path, tmp_path / "ckpt.tar.gz")
    monkeypatch.setattr(checkpoint, "MAX_EXTRACTED_BYTES", (path / "state.pt").stat().st_size)
    with pytest.raises(ValueError, match="refusing a checkpoint archive"):
        load(archive)  # state.pt alone fits, with checkpoint.json it does not
    many = _archive(tmp_path / "many.tar.gz", {f"f{i}": b"x" for i in range(17)})
    with pytest.raises(ValueError, match="refusing a checkpoint archive of more than 16 files"):
        load(many)
    assert list(private_tmp.iterdir()) == []
    monkeypatch.setattr(checkpoint, "MAX_EXTRACTED_BYTES", 2 * 1024**3)
    assert load(archive)[1]["iteration"] == 2


def test_a_failed_save_keeps_the_old_checkpoint_and_leaves_nothing(
    trained: tuple[PPO, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    algo, _ = trained
    target = algo.save_checkpoint(tmp_path / "ckpts" / "checkpoint_000002")

    def disk_full(obj: object, file: io.BufferedWriter) -> None:
        file.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        algo.save_checkpoint(target)
    assert [p.name for p in target.parent.iterdir()] == ["checkpoint_000002"]
    assert load(target)[1]["iteration"] == 2


def test_a_replacing_save_never_leaves_the_target_incomplete(
    trained: tuple[PPO, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    algo, _ = trained
    target = algo.save_checkpoint(tmp_path / "ckpts" / "checkpoint_000002")
    seen: list[int] = []
    rmtree = shutil.rmtree

    def watching_rmtree(path: object, *args: object, **kwargs: object) -> None:
        rmtree(path, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(read_meta(target)["iteration"])  # fails if the target is gone or partial

    monkeypatch.setattr(shutil, "rmtree", watching_rmtree)
    monkeypatch.setattr(algo, "iteration", 7)
    algo.save_checkpoint(target)
    monkeypatch.undo()
    assert seen and seen[-1] == 7
    assert read_meta(target)["iteration"] == 7
    assert [p.name for p in target.parent.iterdir()] == ["checkpoint_000002"]


@pytest.mark.parametrize("filters", [True, False], ids=["tarfile-filters", "python-3.11.2"])
def test_archives_with_links_or_paths_out_are_refused(
    trained: tuple[PPO, Path],
    tmp_path: Path,
    private_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    filters: bool,
) -> None:
    """With tarfile's "data" filter (Python >= 3.11.4) and without it (the checks made in its
    place): a checkpoint loads, an archive reaching out of its folder does not."""
    monkeypatch.setattr(checkpoint, "HAS_EXTRACTION_FILTERS", filters)
    _, path = trained
    assert load(pack(path, tmp_path / "ckpt.tar.gz"))[1]["iteration"] == 2
    outside = tmp_path / "outside.txt"
    link = tarfile.TarInfo("state.pt")
    link.type, link.linkname = tarfile.SYMTYPE, str(outside)
    for name, member in (
        ("up", _member("../outside.txt")),
        ("absolute", _member(str(outside))),
        ("link", link),
    ):
        archive = tmp_path / f"{name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.addfile(member, io.BytesIO(b"x") if member.isfile() else None)
        refused: Any = tarfile.FilterError if filters else ValueError
        if filters and name == "absolute":
            refused = FileNotFoundError  # the filter strips the leading "/": kept inside
        with pytest.raises(refused):
            load(archive)
        assert not outside.exists()
    assert list(private_tmp.iterdir()) == []


def _member(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 1
    return info
