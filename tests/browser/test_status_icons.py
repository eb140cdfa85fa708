"""Every status badge on the list page shows a drawn icon, never a missing-glyph box.

Debian's Chromium has no font with U+29D7 (the hourglass the `queued` badge once used), so it
painted an empty box. For each status this test checks, in the real browser:
- the badge's text is exactly the status name (the icon is not a text glyph);
- the icon is an inline SVG with a painted size (rasterised on a canvas: opaque pixels) and
  the badge is wider than its label by at least the icon;
- no character of the badge renders like a codepoint no font has (the missing-glyph box), by
  comparing canvas renderings in the badge's own font.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.db import transaction
from app.experiments import service as experiments
from tests.browser.helpers import dashboard_settings, new_page, wait_until
from tests.browser.server import live_server

pytestmark = pytest.mark.browser

PATHS: dict[str, tuple[str, ...]] = {
    "pending": (),
    "queued": ("queued",),
    "running": ("queued", "running"),
    "stopping": ("queued", "running", "stopping"),
    "succeeded": ("queued", "running", "succeeded"),
    "failed": ("queued", "running", "failed"),
    "stopped": ("stopped",),
}

# Runs in the page: measures one badge and looks for missing glyphs in its text.
MEASURE = """
async (status) => {
  const badge = document.querySelector(`tr[data-id] .badge[data-status="${status}"]`);
  const icon = badge.querySelector(".st-icon");
  const label = badge.querySelector(".st-label");
  const box = (e) => (e ? e.getBoundingClientRect() : { width: 0, height: 0 });
  const style = getComputedStyle(badge);
  const font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;

  // The missing-glyph box: how this font draws codepoints that no font has.
  const render = (text) => {
    const c = document.createElement("canvas");
    c.width = 48; c.height = 48;
    const g = c.getContext("2d");
    g.font = font; g.fillStyle = "#000"; g.textBaseline = "middle";
    g.fillText(text, 4, 24);
    return Array.from(g.getImageData(0, 0, 48, 48).data).join(",");
  };
  const boxes = new Set(["\\u{10FFFD}", "\\u{E0FFF}", "\\u{FFFFE}"].map(render));
  const chars = [...badge.textContent].filter((ch) => ch.trim());
  const missing = chars.filter((ch) => boxes.has(render(ch)));

  // Paint the icon on a canvas as the browser renders it: count its opaque pixels.
  let painted = 0;
  if (icon instanceof SVGSVGElement) {
    const copy = icon.cloneNode(true);
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    copy.setAttribute("width", "32"); copy.setAttribute("height", "32");
    copy.setAttribute("color", style.color);
    const url = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(copy.outerHTML);
    const img = new Image();
    await new Promise((ok, fail) => { img.onload = ok; img.onerror = fail; img.src = url; });
    const c = document.createElement("canvas");
    c.width = 32; c.height = 32;
    const g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    const px = g.getImageData(0, 0, 32, 32).data;
    for (let i = 3; i < px.length; i += 4) if (px[i] > 64) painted++;
  }
  return {
    text: badge.textContent.trim(),
    iconTag: icon ? icon.tagName.toLowerCase() : null,
    icon: { width: box(icon).width, height: box(icon).height },
    label: box(label).width,
    badge: box(badge).width,
    painted,
    missing,
  };
}
"""


def _problems(status: str, m: dict[str, Any]) -> list[str]:
    out = []
    if m["text"] != status:
        out.append(f"text {m['text']!r} is not just the status name (a text glyph?)")
    if m["iconTag"] != "svg":
        out.append(f"icon element is {m['iconTag']!r}, not an inline svg")
    if m["icon"]["width"] < 8 or m["icon"]["height"] < 8:
        out.append(f"icon box {m['icon']} is too small to see")
    if m["painted"] < 20:
        out.append(f"icon paints {m['painted']} opaque pixels of 32x32")
    if m["badge"] < m["label"] + m["icon"]["width"]:
        out.append(f"badge {m['badge']:.1f} px is not wider than label + icon")
    if m["missing"]:
        out.append(f"missing glyphs (rendered as the empty box): {m['missing']}")
    return out


def test_every_status_badge_has_a_drawn_icon(
    browser: Any, frontend_dist: Path, tmp_path: Path, artifacts: Path
) -> None:
    settings = dashboard_settings(tmp_path, frontend_dist)
    errors: list[str] = []
    with live_server(settings) as server:
        context, page = new_page(browser, errors, viewport={"width": 1200, "height": 900})
        try:
            for status, path in PATHS.items():
                body = {"name": f"badge {status}", "config": {"env_id": "CartPole-v1"}}
                exp_id = httpx.post(f"{server.url}/api/v1/experiments", json=body).json()["id"]
                for target in path:
                    with transaction(server.app.state.sessionmaker) as session:
                        experiments.transition(session, exp_id, target, f"test: {target}")

            page.goto(f"{server.url}/#/")
            badges = page.locator("tr[data-id] .badge")
            wait_until(lambda: badges.count() == len(PATHS), 30, "one row per status")
            found = {badges.nth(i).get_attribute("data-status") for i in range(badges.count())}
            assert found == set(PATHS)
            problems = {}
            for status in PATHS:
                measured = page.evaluate(MEASURE, status)
                bad = _problems(status, measured)
                if bad:
                    problems[status] = bad
            if problems:
                page.screenshot(path=str(artifacts / "status_icons.png"), full_page=True)
            assert not problems, problems
        finally:
            context.close()
    assert not errors, errors
