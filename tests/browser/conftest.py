"""Browser test fixtures: Debian's Chromium driven by Playwright against a real service.

Never `playwright install`: the system Chromium is used. Without /usr/bin/chromium every
browser test is skipped with that reason.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing (apt-get install chromium)")
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def frontend_dist() -> Path:
    """The built dashboard; built here (as `make frontend` does) when it is missing."""
    dist = ROOT / "frontend" / "dist"
    if not (dist / "index.html").exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed to build the dashboard (frontend/dist is missing)"
        front = ROOT / "frontend"
        if not (front / "node_modules").exists():
            install = [npm, "ci", "--no-audit", "--no-fund"]
            subprocess.run(install, cwd=front, check=True, timeout=300)
        subprocess.run([npm, "run", "build"], cwd=front, check=True, timeout=300)
    return dist


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def jobs_server(
    ray_head: object, frontend_dist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """The service of one test module, with jobs on the shared Ray head (real evaluations)."""
    from tests.browser.helpers import dashboard_settings
    from tests.browser.server import live_server

    data_dir = tmp_path_factory.mktemp("browser-jobs")
    address = ray_head.address  # type: ignore[attr-defined]
    settings = dashboard_settings(data_dir, frontend_dist, ray_address=address)
    with live_server(settings) as live:
        yield live
