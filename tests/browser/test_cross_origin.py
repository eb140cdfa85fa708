"""Browser safety in real Chromium: a page from another origin (a second local web server on
127.0.0.1, another port) cannot read the stream websocket, stop, resume, submit or delete,
with or without an API token configured (even when the page knows the token), and a
DNS-rebinding page (evil.test resolving to 127.0.0.1) is refused by its Host header; the
dashboard itself keeps working, its token travelling as a websocket subprotocol.

Needs no Ray: a simulated job reports through the real job-side API.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.browser.helpers import chart_points, new_page, wait_until
from tests.browser.server import LiveServer, free_port, live_server
from tests.browser.simulate import SimulatedJob

pytestmark = pytest.mark.browser

TOKEN = "browser-s3cret/token"

# Everything a hostile page can try, each attempt recorded as what the page could observe.
ATTACK_JS = """
async ({api, ws, id, protocols}) => {
  const seen = {};
  const attempt = async (name, url, init) => {
    try {
      const r = await fetch(url, init);
      seen[name] = init.mode === "no-cors" ? `opaque ${r.type}` : `read ${r.status}`;
    } catch (e) {
      seen[name] = `blocked`;
    }
  };
  const exp = `${api}/experiments/${id}`;
  // "Simple" requests: sent without a preflight, the server's answer decides.
  await attempt("stop", `${exp}/stop`, {method: "POST", mode: "no-cors"});
  await attempt("resume", `${exp}/resume`, {method: "POST", mode: "no-cors"});
  await attempt("submit-text", `${api}/experiments`, {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain"},
    body: JSON.stringify({name: "evil", config: {env_id: "evilmodule:Env-v0"}})});
  // Preflighted requests: no CORS grant, so the browser never sends them.
  const json = {"Content-Type": "application/json"};
  await attempt("submit-json", `${api}/experiments`, {method: "POST", headers: json,
    body: JSON.stringify({name: "evil", config: {}})});
  await attempt("delete", exp, {method: "DELETE"});
  await attempt("stop-cors", `${exp}/stop`, {method: "POST"});
  await attempt("read", exp, {});
  // The classic CSRF: a form posted into a hidden frame.
  const frame = document.createElement("iframe");
  frame.name = "sink";
  document.body.appendChild(frame);
  const form = document.createElement("form");
  Object.assign(form, {method: "POST", action: `${exp}/stop`, target: "sink"});
  document.body.appendChild(form);
  form.submit();
  // The live stream, with the token as the dashboard would offer it.
  seen.stream = await new Promise((resolve) => {
    const socket = new WebSocket(`${ws}/experiments/${id}/stream?since_step=-1`, protocols);
    const messages = [];
    socket.onmessage = (m) => messages.push(m.data);
    socket.onclose = () => resolve({opened: false, messages});
    socket.onopen = () => setTimeout(() => resolve({opened: true, messages}), 1000);
    setTimeout(() => resolve({timeout: true, messages}), 10000);
  });
  await new Promise((r) => setTimeout(r, 500));  // let the form post land
  return seen;
}
"""


class AttackerSite:
    """A plain web server on another port: the page a user might visit while Rollout runs."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / "index.html").write_text("<!doctype html><title>cat pictures</title><body>")
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> AttackerSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def subprotocols(token: str | None) -> list[str]:
    if token is None:
        return ["rollout"]
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return ["rollout", f"rollout.token.{encoded}"]


@pytest.fixture(params=[None, TOKEN], ids=["no-token", "token"])
def service(
    request: pytest.FixtureRequest, frontend_dist: Path, tmp_path: Path
) -> Iterator[tuple[LiveServer, str | None, httpx.Client]]:
    token: str | None = request.param
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'rollout.db'}",
        jobs_enabled=False,
        frontend_dir=frontend_dist,
        api_token=token,
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with (
        live_server(settings) as server,
        httpx.Client(base_url=f"{server.url}/api/v1", headers=headers) as api,
    ):
        yield server, token, api


def snapshot(api: httpx.Client) -> list[tuple[int, str, str]]:
    items = api.get("/experiments", params={"limit": 100}).json()["items"]
    return sorted((e["id"], e["name"], e["status"]) for e in items)


def test_another_origin_cannot_stop_resume_submit_delete_or_stream(
    browser: Any, service: tuple[LiveServer, str | None, httpx.Client], tmp_path: Path
) -> None:
    server, token, api = service
    running = api.post("/experiments", json={"name": "victim", "config": {}}).json()["id"]
    job = SimulatedJob(server, running)
    job.status("running", "simulated job started")
    job.iterations(3)
    ended = api.post("/experiments", json={"name": "ended", "config": {}}).json()["id"]
    assert api.post(f"/experiments/{ended}/stop").json()["status"] == "stopped"
    before = snapshot(api)

    errors: list[str] = []
    context, page = new_page(browser, errors)
    try:
        with AttackerSite(tmp_path / "site") as site:
            page.goto(site.url)
            args = {
                "api": f"{server.url}/api/v1",
                "ws": server.url.replace("http", "ws") + "/api/v1",
                "protocols": subprotocols(token),  # the worst case: the page knows the token
            }
            seen = {
                target: page.evaluate(ATTACK_JS, {**args, "id": exp_id})
                for target, exp_id in (("running", running), ("ended", ended))
            }
    finally:
        context.close()
        job.close()

    assert snapshot(api) == before, seen  # nothing stopped, resumed, submitted or deleted
    for target, result in seen.items():
        # Preflighted requests never leave the browser; reads of the answers are refused.
        for name in ("submit-json", "delete", "stop-cors", "read"):
            assert result[name] == "blocked", (target, name, result)
        # The stream never opens and no message reaches the page.
        assert result["stream"]["messages"] == [], (target, result["stream"])
        assert result["stream"].get("opened") is False, (target, result["stream"])
    logs = api.get(f"/experiments/{running}/logs").json()["lines"]
    assert not any("evil" in line for line in logs)


def test_a_dns_rebinding_page_is_refused_by_its_host(
    browser: Any, service: tuple[LiveServer, str | None, httpx.Client]
) -> None:
    """evil.test resolves to 127.0.0.1 (as after a rebinding): its pages are same-origin with
    themselves, so only the Host header tells them apart from the dashboard."""
    server, _, api = service
    exp_id = api.post("/experiments", json={"name": "victim", "config": {}}).json()["id"]
    before = snapshot(api)
    port = server.url.rsplit(":", 1)[1]
    rules = "--host-resolver-rules=MAP evil.test 127.0.0.1"
    # A second Chromium of the same Playwright session, with its own resolver rules.
    rebinding = browser.browser_type.launch(
        executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, rules]
    )
    try:
        page = rebinding.new_page()
        response = page.goto(f"http://evil.test:{port}/")
        assert response is not None and response.status == 400
        assert json.loads(page.inner_text("body"))["error"]["code"] == "invalid_host"
        stop = page.evaluate(
            """async (url) => {
                const r = await fetch(url, {method: "POST"});
                return [r.status, (await r.json()).error.code];
            }""",
            f"http://evil.test:{port}/api/v1/experiments/{exp_id}/stop",
        )
        assert stop == [400, "invalid_host"]
    finally:
        rebinding.close()
    assert snapshot(api) == before


def test_the_dashboard_still_streams_and_stops(
    browser: Any, service: tuple[LiveServer, str | None, httpx.Client]
) -> None:
    from playwright.sync_api import expect

    server, token, api = service
    exp_id = api.post("/experiments", json={"name": "mine", "config": {}}).json()["id"]
    job = SimulatedJob(server, exp_id)
    job.status("running", "simulated job started")
    job.iterations(5)
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1200, "height": 850})
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    try:
        if token:  # as if entered in the dashboard's token box earlier
            page.add_init_script(f"localStorage.setItem('rollout.token', {json.dumps(token)})")
        page.goto(f"{server.url}/#/experiments/{exp_id}")
        wait_until(lambda: chart_points(page, "Episode return") == 5, 30, "history")
        expect(page.locator("#conn")).to_have_attribute("data-state", "online")
        job.iterations(3)  # live, over the websocket
        wait_until(lambda: chart_points(page, "Episode return") == 8, 30, "live points")
        page.locator('[data-action="stop"]').click()
        badge = page.locator(".title-line .badge")
        expect(badge).to_have_attribute("data-status", "stopping", timeout=15_000)
    finally:
        context.close()
        job.close()
    assert api.get(f"/experiments/{exp_id}").json()["status"] == "stopping"
    assert sockets and not any("token" in url for url in sockets), sockets
    assert not errors, errors
