"""Small helpers shared by the browser tests: bounded waits and reading chart state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll until `condition()` is truthy and return it; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.25)


def chart_points(page: Any, title: str) -> int:
    """How many x positions the chart titled `title` currently draws (its data-points)."""
    value = page.locator(f'[data-chart="{title}"]').get_attribute("data-points")
    return int(value or 0)


def chart_drawn(page: Any, title: str) -> int:
    """How many x positions the chart titled `title` renders in its current x range."""
    value = page.locator(f'[data-chart="{title}"]').get_attribute("data-drawn")
    return int(value or 0)
