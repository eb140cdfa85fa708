"""Devices and precision: where the driver's EnvRunner acts, how batches reach the device,
and what each Learner precision does. The CUDA side of these paths runs on the GPU benchmark
machine (benchmarks/atari.py); here: the choices, the CPU paths, and bf16 autocast on a CPU."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import torch

from tests.trainer.test_learner import BOX, DISCRETE, OBS, _config, make_chunks
from trainer.cli import build_config
from trainer.config import PPOConfig
from trainer.devices import HostToDevice, inference_device, learner_device, set_matmul_precision
from trainer.env_runner import EnvRunner
from trainer.learner import PPOLearner


def _cuda_present(monkeypatch: pytest.MonkeyPatch, present: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: present)


@pytest.mark.parametrize(
    ("fields", "local", "cuda", "expected"),
    [
        ({}, True, True, "cpu"),  # a CPU Learner: the policy stays on the CPU
        ({"num_gpus_per_learner": 1}, True, True, "cuda:0"),  # serial mode beside a GPU Learner
        ({"num_gpus_per_learner": 1}, True, False, "cpu"),  # no CUDA here after all
        ({"num_gpus_per_learner": 1}, False, True, "cpu"),  # an EnvRunner actor
        ({"num_gpus_per_learner": 1, "num_learners": 1}, True, True, "cpu"),  # Learner elsewhere
        ({"num_gpus_per_learner": 1, "inference_device": "cpu"}, True, True, "cpu"),
        ({"inference_device": "cuda"}, True, True, "cuda:0"),
        ({"inference_device": "cuda"}, False, True, "cpu"),
    ],
)
def test_where_the_policy_runs(monkeypatch, fields, local, cuda, expected) -> None:
    _cuda_present(monkeypatch, cuda)
    assert inference_device(PPOConfig(**fields), local=local) == torch.device(expected)


def test_asking_for_cuda_without_it_is_a_clear_error(monkeypatch) -> None:
    _cuda_present(monkeypatch, False)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        inference_device(PPOConfig(inference_device="cuda"), local=True)


def test_the_learner_device_follows_its_gpus() -> None:
    assert learner_device(PPOConfig()) == torch.device("cpu")
    assert learner_device(PPOConfig(num_gpus_per_learner=0.5)) == torch.device("cuda:0")


def test_cpu_batches_are_not_copied() -> None:
    obs = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    moved = HostToDevice(torch.device("cpu"))(obs)
    assert moved.dtype == torch.uint8 and moved.data_ptr() == obs.ctypes.data


def test_tf32_flags_follow_the_precision_of_a_cuda_learner() -> None:
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        set_matmul_precision(torch.device("cuda:0"), "tf32")
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        set_matmul_precision(torch.device("cuda:0"), "fp32")
        assert not torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cudnn.allow_tf32
        set_matmul_precision(torch.device("cpu"), "tf32")  # a CPU Learner leaves them alone
        assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _update(precision: str, discrete: bool) -> tuple[PPOLearner, dict[str, float]]:
    learner = PPOLearner(_config(learner_precision=precision), OBS, DISCRETE if discrete else BOX)
    chunks = make_chunks(None, np.random.default_rng(3), discrete=discrete)
    stats = learner.update(chunks, env_steps=0).as_dict()
    return learner, {k: v for k, v in stats.items() if not k.startswith("time_")}


@pytest.mark.parametrize("discrete", [True, False])
def test_precisions_on_a_cpu_learner(discrete: bool) -> None:
    fp32, fp32_stats = _update("fp32", discrete)
    tf32, tf32_stats = _update("tf32", discrete)
    bf16, bf16_stats = _update("bf16", discrete)
    # TF32 is a CUDA feature: on a CPU the update is exactly fp32's.
    assert tf32_stats == fp32_stats
    for a, b in zip(fp32.module.parameters(), tf32.module.parameters(), strict=True):
        assert torch.equal(a, b)
    # bf16 autocast ran (the weights moved differently) and the update stayed sane.
    assert all(np.isfinite(v) for v in bf16_stats.values())
    assert bf16_stats["policy_loss"] == pytest.approx(fp32_stats["policy_loss"], abs=0.05)
    assert bf16_stats["vf_loss"] == pytest.approx(fp32_stats["vf_loss"], rel=0.1)
    diffs = [
        float((a - b).abs().max())
        for a, b in zip(fp32.module.parameters(), bf16.module.parameters(), strict=True)
    ]
    assert max(diffs) > 0
    assert all(p.dtype == torch.float32 for p in bf16.module.parameters())


def test_a_cpu_env_runner_samples_as_before() -> None:
    runner = EnvRunner(PPOConfig(num_envs_per_env_runner=4, seed=5))
    try:
        assert runner.device == torch.device("cpu")
        result = runner.sample(64)
        assert result.env_steps >= 64
        assert all(c.logp.dtype == np.float32 for c in result.chunks)
    finally:
        runner.stop()


def _cli_args(*sets: str) -> argparse.Namespace:
    return argparse.Namespace(
        env="CartPole-v1", seed=None, stop_return=None, stop_steps=None, stop_seconds=None,
        set=list(sets),
    )  # fmt: skip


def test_rollout_train_learns_on_the_gpu_when_there_is_one(monkeypatch) -> None:
    _cuda_present(monkeypatch, True)
    assert build_config({}, _cli_args()).config.num_gpus_per_learner == 1
    # What the user says wins; DDP Learner actors get exactly the GPUs asked for.
    assert build_config({}, _cli_args("num_gpus_per_learner=0")).config.num_gpus_per_learner == 0
    config = build_config({}, _cli_args("num_learners=2")).config
    assert config.num_gpus_per_learner == 0
    resumed = PPOConfig(num_gpus_per_learner=0).to_json_dict()  # a saved config says 0
    assert build_config(resumed, _cli_args()).config.num_gpus_per_learner == 0
    _cuda_present(monkeypatch, False)
    assert build_config({}, _cli_args()).config.num_gpus_per_learner == 0
