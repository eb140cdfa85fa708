"""System metrics: what the trainer process and the machine use, sampled per iteration."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainer.algorithm import PPO
from trainer.config import PPOConfig
from trainer.system_metrics import SystemMonitor

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")


def test_a_busy_process_reads_near_one_core_and_an_idle_one_near_none() -> None:
    monitor = SystemMonitor()
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # one core busy
        pass
    busy = monitor.sample()
    time.sleep(0.5)
    idle = monitor.sample()
    assert 40.0 < busy["system/cpu_percent"] < 110.0, busy  # a shared machine may take some
    assert idle["system/cpu_percent"] < 25.0, idle
    for sample in (busy, idle):
        assert 10.0 < sample["system/rss_mb"] < 10_000.0
        assert 0.0 <= sample["system/node_cpu_percent"] <= 100.0
        assert 0.0 < sample["system/node_memory_percent"] < 100.0
        assert not any(k.startswith("system/gpu") for k in sample)  # no GPU here


def test_every_iteration_reports_them() -> None:
    config = PPOConfig(
        num_envs_per_env_runner=4,
        train_batch_size_per_learner=64,
        minibatch_size=64,
        num_epochs=1,
        stop={"env_steps": 128},
    )
    algo = PPO(config)
    try:
        # /proc/stat moves in 10 ms ticks and an iteration this small can be shorter: wait one
        # tick (the sub-tick case has its own test below).
        time.sleep(0.02)
        first = algo.train()
        time.sleep(0.02)
        second = algo.train()
    finally:
        algo.stop()
    for metrics in (first, second):
        assert {"system/cpu_percent", "system/rss_mb", "system/node_cpu_percent"} <= set(metrics)
        assert metrics["system/cpu_percent"] >= 0.0


def test_an_iteration_shorter_than_a_clock_tick_repeats_the_last_node_figure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/proc/stat counts in 10 ms ticks: two samples within one tick have no delta of their
    own. The figure is the last one, and the baseline stays until the ticks move."""
    from trainer import system_metrics

    ticks = iter([(0, 0), (50, 100), (50, 100), (50, 100), (150, 200)])
    monkeypatch.setattr(system_metrics, "_node_ticks", lambda: next(ticks))
    monitor = system_metrics.SystemMonitor()  # baseline (0, 0)
    assert monitor.sample()["system/node_cpu_percent"] == 50.0
    assert monitor.sample()["system/node_cpu_percent"] == 50.0  # no tick passed: repeated
    assert monitor.sample()["system/node_cpu_percent"] == 50.0
    assert monitor.sample()["system/node_cpu_percent"] == 100.0  # (150-50) / (200-100)
