"""An experiment stream's backlog, read once for every viewer who asks at the same time.

A dashboard full of viewers of one running experiment (a class, a demo, a reload storm) opens
hundreds of streams within a second, each wanting the same backlog. Read and encoded per viewer
in thread-pool tasks of their own, 200 viewers held the pool (which /health shares) for tens of
seconds and the API's memory grew by a backlog per viewer. Instead viewers of one experiment
from one step share a read that has not started yet: at most
`MAX_CONCURRENT_READS` reads run at a time, in their own threads, and the messages are encoded
to JSON once, in the reading thread; every viewer sends the same strings.

A viewer subscribes to live messages before it asks, and a read is shared only by the viewers
that asked before it started, so nothing published in between is lost to any of them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

MAX_CONCURRENT_READS = 2
# Shared by every app of the process; not the event loop's default executor, which /health and
# the other short database calls use.
_EXECUTOR = ThreadPoolExecutor(MAX_CONCURRENT_READS, thread_name_prefix="rollout-backlog")


@dataclass(frozen=True)
class Backlog:
    texts: tuple[str, ...]  # the messages, JSON-encoded, in the order they are sent
    last_step: int  # the highest metrics step among them (since_step when there is none)


def encode(messages: list[dict[str, Any]], since_step: int) -> Backlog:
    last_step = since_step
    for message in messages:
        if message["type"] == "metrics" and message["step"]:
            last_step = max(last_step, message["step"][-1])
    texts = tuple(json.dumps(m, separators=(",", ":"), ensure_ascii=False) for m in messages)
    return Backlog(texts, last_step)


class SharedBacklogs:
    """Backlog reads of one app on one event loop, keyed by (experiment id, since step)."""

    def __init__(self, load: Callable[[int, int], Backlog]) -> None:
        self._load = load
        self.loop = asyncio.get_running_loop()
        self._waiting: dict[tuple[int, int], asyncio.Future[Backlog]] = {}
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_READS)
        self.reads = 0  # reads started (tests and benchmarks count them)

    async def get(self, experiment_id: int, since_step: int) -> Backlog:
        key = (experiment_id, since_step)
        future = self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
            self._waiting[key] = future
            asyncio.get_running_loop().create_task(self._read(key, future))
        # shield: a viewer that leaves while it waits does not cancel the others' read
        return await asyncio.shield(future)

    async def _read(self, key: tuple[int, int], future: asyncio.Future[Backlog]) -> None:
        async with self._slots:
            # From here on the read is under way: later viewers start (or join) the next one.
            del self._waiting[key]
            self.reads += 1
            loop = asyncio.get_running_loop()
            try:
                backlog = await loop.run_in_executor(_EXECUTOR, self._load, *key)
            except Exception as exc:
                future.set_exception(exc)
            else:
                future.set_result(backlog)


def _retrieve(future: asyncio.Future[Backlog]) -> None:
    """Mark a failed read's error as seen even when every viewer has left meanwhile."""
    if not future.cancelled():
        future.exception()
