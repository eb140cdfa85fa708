"""Wall-clock timers for the phases of a training iteration (reported as `time_<name>_s`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timers:
    """Wall-clock seconds per named phase of the current iteration (`time_<name>_s`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def as_dict(self) -> dict[str, float]:
        return {f"time_{name}_s": s for name, s in self.seconds.items()}
