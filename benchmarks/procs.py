"""Start a benchmarked run in its own session, watch its process tree, and stop all of it.

Memory is the summed RSS of the root process and every descendant (RLlib starts a dozen
processes: raylet, GCS, workers), sampled from /proc, since ``getrusage`` only reports the
largest single process. Shared pages (torch's libraries mapped by several processes) are
counted once per process, as ``ps`` and ``top`` count them.

Processes are remembered as (pid, start time): a pid that exited and was reused by someone
else's process is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class ProcStat(NamedTuple):
    ppid: int
    state: str
    session: int
    start_ticks: int  # field 22 of /proc/PID/stat: start time since boot, in clock ticks


def read_stat(pid: int) -> ProcStat | None:
    """Parent, state and start time of a process; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces or parentheses: split after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return ProcStat(int(fields[1]), fields[0].decode(), int(fields[3]), int(fields[19]))


def process_tree(root: int, root_start: int | None = None) -> dict[int, int]:
    """The root, all its living descendants, and the members of the session the root leads
    (children that outlived their parent and were re-parented), as pid -> start ticks.

    `root_start` (the root's start ticks) guards the session match after the root has exited:
    only processes started after it count.
    """
    stats: dict[int, ProcStat] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                stats[int(entry.name)] = stat
    children: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        children.setdefault(stat.ppid, []).append(pid)
    leader = stats.get(root)
    if leader is not None and root_start is not None and leader.start_ticks != root_start:
        return {}  # the root is gone and its pid was reused: nothing here is ours
    if root_start is None and leader is not None:
        root_start = leader.start_ticks
    tree: dict[int, int] = {}
    todo = [root] if leader is not None else []
    if root_start is not None:
        todo += [
            pid
            for pid, stat in stats.items()
            if stat.session == root and stat.start_ticks >= root_start and pid != root
        ]
    while todo:
        pid = todo.pop()
        if pid in tree:
            continue
        tree[pid] = stats[pid].start_ticks
        todo.extend(children.get(pid, ()))
    return tree


def rss_bytes(pids: Iterable[int]) -> int:
    """Summed resident set size of the given processes (vanished ones count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * PAGE_SIZE
        except (OSError, IndexError, ValueError):
            continue
    return total


def alive(known: Mapping[int, int]) -> dict[int, int]:
    """The known processes that still run (same pid AND start time, not a zombie)."""
    living = {}
    for pid, start in known.items():
        stat = read_stat(pid)
        if stat is not None and stat.start_ticks == start and stat.state != "Z":
            living[pid] = start
    return living


class TreeMemory:
    """Background sampler of a process tree's summed RSS; keeps the peak and every pid seen."""

    def __init__(self, root: int, interval_s: float = 0.2) -> None:
        self.root = root
        self.interval_s = interval_s
        self.peak_rss = 0
        self.peak_processes = 0
        self.known: dict[int, int] = {}
        stat = read_stat(root)
        self.root_start = stat.start_ticks if stat is not None else None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-memory", daemon=True)

    def start(self) -> TreeMemory:
        self._thread.start()
        return self

    def sample(self) -> None:
        tree = process_tree(self.root, self.root_start)
        rss = rss_bytes(tree)
        with self._lock:
            self.known.update(tree)
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_processes = max(self.peak_processes, len(tree))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Run:
    """One benchmarked process, started in a new session so that it can be stopped whole."""

    def __init__(self, cmd: list[str], env: Mapping[str, str], cwd: Path, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._stdout = (log_dir / "stdout.log").open("wb")
        self._stderr = (log_dir / "stderr.log").open("wb")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=self._stderr,
            start_new_session=True,
        )
        self.memory = TreeMemory(self.proc.pid).start()

    def elapsed(self) -> float:
        """Seconds since just before Popen: the clock every time-to-target is read from."""
        return time.monotonic() - self.t0

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def stop(self, grace_s: float = 5.0) -> int:
        """SIGTERM the whole tree, wait, SIGKILL what is left; returns the root's exit code."""
        if not self.exited():
            self.memory.sample()
        self.memory.stop()
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (not self.exited() or self._leftovers()):
            time.sleep(0.05)
        self._signal(signal.SIGKILL)
        code = self.proc.wait(timeout=grace_s)
        self._stdout.close()
        self._stderr.close()
        return code

    def _leftovers(self) -> dict[int, int]:
        return alive({**self.memory.known, **process_tree(self.proc.pid, self.memory.root_start)})

    def _signal(self, sig: signal.Signals) -> None:
        if not self.exited():  # not yet reaped: the pid and its group id cannot be reused
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
        for pid in self._leftovers():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
