"""System metrics per iteration (`system/...`), charted next to the learning curves.

What a tracker user expects beside the returns (W&B's system panel): how busy the trainer is
and how much memory it holds, the machine's load, and the GPU where the Learner has one. Read
from /proc (Linux; elsewhere only the GPU values), a few small files per iteration: well under
a millisecond, against iterations of tens of milliseconds and more.

    system/cpu_percent          the trainer process (100 = one core busy), since the last sample
    system/rss_mb               its resident memory
    system/node_cpu_percent     the whole machine (100 = every core busy)
    system/node_memory_percent  the machine's memory in use (MemTotal - MemAvailable)
    system/gpu_memory_mb        tensors the Learner holds on its GPU (torch's allocator)
    system/gpu_utilization_percent  that GPU's utilisation (NVML, where torch can read it)

The trainer process is the driver: in serial mode (no EnvRunner or Learner actors) it does all
the work; Ray actors are processes of their own and count in the node's figures only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

PREFIX = "system/"
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_MB = 1024 * 1024


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _process_ticks_and_rss() -> tuple[int, int] | None:
    """(utime + stime in clock ticks, resident pages) of this process."""
    stat = _read("/proc/self/stat")
    if stat is None:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3
    return int(fields[11]) + int(fields[12]), int(fields[21])


def _node_ticks() -> tuple[int, int] | None:
    """(busy, total) clock ticks of every core (the first line of /proc/stat)."""
    stat = _read("/proc/stat")
    if stat is None:
        return None
    values = [int(v) for v in stat.split("\n", 1)[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def _node_memory_percent() -> float | None:
    meminfo = _read("/proc/meminfo")
    if meminfo is None:
        return None
    kb = {}
    for line in meminfo.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable"):
            kb[key] = int(rest.split()[0])
    if kb.get("MemTotal", 0) <= 0 or "MemAvailable" not in kb:
        return None
    return 100.0 * (1.0 - kb["MemAvailable"] / kb["MemTotal"])


class SystemMonitor:
    """Samples the metrics above; each call's CPU figures cover the time since the last."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.device = device if device is not None and device.type == "cuda" else None
        self._nvml = self.device is not None
        self._last_wall = time.monotonic()
        own = _process_ticks_and_rss()
        self._last_ticks = own[0] if own else None
        self._last_node = _node_ticks()
        self._node_percent: float | None = None

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        now = time.monotonic()
        wall = now - self._last_wall
        own = _process_ticks_and_rss()
        if own is not None:
            ticks, pages = own
            if self._last_ticks is not None and wall > 0:
                out[PREFIX + "cpu_percent"] = (
                    100.0 * (ticks - self._last_ticks) / _TICKS_PER_S / wall
                )
            out[PREFIX + "rss_mb"] = pages * _PAGE_BYTES / _MB
            self._last_ticks = ticks
        node = _node_ticks()
        if node is not None and self._last_node is not None and node[1] > self._last_node[1]:
            busy = node[0] - self._last_node[0]
            self._node_percent = 100.0 * busy / (node[1] - self._last_node[1])
            self._last_node = node
        elif self._last_node is None:
            self._last_node = node
        # An iteration shorter than a clock tick (10 ms) has no figure of its own: it reports
        # the last one, and the next covers both.
        if self._node_percent is not None:
            out[PREFIX + "node_cpu_percent"] = self._node_percent
        memory = _node_memory_percent()
        if memory is not None:
            out[PREFIX + "node_memory_percent"] = memory
        self._last_wall = now
        if self.device is not None:
            out.update(self._gpu())
        return out

    def _gpu(self) -> dict[str, float]:
        assert self.device is not None
        out = {PREFIX + "gpu_memory_mb": torch.cuda.memory_allocated(self.device) / _MB}
        if self._nvml:
            try:
                out[PREFIX + "gpu_utilization_percent"] = float(torch.cuda.utilization(self.device))
            except Exception:  # no NVML bindings (pynvml) or no permission: skip it for good
                self._nvml = False
        return out
