"""Small helpers shared by the browser tests: bounded waits and reading chart state."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.core.config import Settings


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


def new_page(browser: Any, errors: list[str], **context_options: Any) -> tuple[Any, Any]:
    """A page in a fresh browser context (options as Browser.new_context takes them) whose
    console errors and uncaught page errors are appended to `errors`; returns (context, page)."""
    context = browser.new_context(**context_options)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    return context, page


def dashboard_settings(data_dir: Path, frontend_dir: Path, **overrides: Any) -> Settings:
    """A service for the dashboard built in `frontend_dir`, its SQLite file in `data_dir`; jobs
    run only when a `ray_address` is given."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": f"sqlite:///{data_dir / 'rollout.db'}",
        "jobs_enabled": "ray_address" in overrides,
        "frontend_dir": frontend_dir,
    }
    return Settings(**{**values, **overrides})
