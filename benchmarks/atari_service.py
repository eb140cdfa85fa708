"""Pong through the service, as a user runs it: `rollout serve`, one experiment over REST, its
curve live in the dashboard.

    python benchmarks/atari_service.py --seed 2 [--seconds 2700] [--port 8765]

Starts `rollout serve` on a fresh data dir (its own local Ray head), submits
`{"env_id": "ALE/Pong-v5", "seed": S, "stop": {"episode_return_mean": 20, "wall_seconds": T}}`
with POST /api/v1/experiments, waits for it to end, and takes screenshots of its dashboard page
(Chromium, as the browser tests drive it) every few minutes and when the 100-episode mean first
reaches 18 and 20; then evaluates the final checkpoint over REST (10 episodes, with a video)
and plays that video in the experiment page's evaluation viewer. Writes
`<stamp>-service-pong.json` (the times: from the experiment's creation, and the job's own
clock), its metrics and the screenshots under --results. The run is the service's: nothing in
it is tuned for the benchmark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.serve_process import rollout_serve  # noqa: E402

TARGETS = (18.0, 20.0)
FINISHED = {"succeeded", "failed", "stopped"}
SCREENSHOT_EVERY_S = 300.0


def crossings(series: dict[str, Any]) -> dict[str, dict[str, float]]:
    """First (job time, env steps) at which the 100-episode mean reached each target."""
    steps = series["episode_return_mean"]["step"]
    values = series["episode_return_mean"]["value"]
    clock = dict(zip(series["time_s"]["step"], series["time_s"]["value"], strict=True))
    found: dict[str, dict[str, float]] = {}
    for step, value in zip(steps, values, strict=True):
        for target in TARGETS:
            key = f"{target:g}"
            if key not in found and value is not None and value >= target:
                found[key] = {"t": clock.get(step, float("nan")), "env_steps": step}
    return found


def seconds_between(a: str | None, b: str | None) -> float | None:
    if not a or not b:
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def evaluate_in_dashboard(api: httpx.Client, page: Any, exp_id: int, episodes: int) -> Any:
    """`rollout evaluate`'s REST twin on the final checkpoint (with a video), then its video
    in the experiment page's evaluation viewer: playable, and it plays."""
    body = {"checkpoint": "latest", "episodes": episodes, "record_video": True}
    created = api.post(f"/experiments/{exp_id}/evaluations", json=body)
    created.raise_for_status()
    eval_id = created.json()["id"]
    deadline = time.monotonic() + 1800
    ev: dict[str, Any] = {}
    while time.monotonic() < deadline:
        ev = api.get(f"/evaluations/{eval_id}").json()
        if ev["status"] in FINISHED:
            break
        time.sleep(10)
    page.reload()
    page.locator(f'table.eval-list tr[data-evaluation="{eval_id}"]').click()
    video = page.locator("video[data-evaluation-video]")
    video.wait_for(timeout=60_000)
    page.wait_for_function(
        "() => document.querySelector('video[data-evaluation-video]').readyState >= 2",
        timeout=60_000,
    )
    page.evaluate("() => document.querySelector('video[data-evaluation-video]').play()")
    page.wait_for_timeout(3000)
    playback = page.evaluate(
        """() => { const v = document.querySelector('video[data-evaluation-video]');
                   return {currentTime: v.currentTime, duration: v.duration,
                           width: v.videoWidth, height: v.videoHeight,
                           error: v.error && v.error.message}; }"""
    )
    keys = ("status", "episodes_done", "return_mean", "return_std", "return_min", "return_max")
    return {**{k: ev.get(k) for k in keys}, "video": ev.get("video"), "playback": playback}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="ALE/Pong-v5", help="another env id: a quick dry run")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2700.0, help="the run's wall budget")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--episodes", type=int, default=10, help="of the final evaluation")
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks/results/atari")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.results
    out.mkdir(parents=True, exist_ok=True)
    data_dir = out / f"{stamp}-service-runs"
    data_dir.mkdir()
    config = {
        "env_id": args.env,
        "seed": args.seed,
        "stop": {"episode_return_mean": 20, "wall_seconds": args.seconds},
    }
    name = f"{args.env.split('/')[-1].lower()}-seed-{args.seed}"
    body = {"name": name, "config": config, "tags": ["benchmark"]}
    with rollout_serve(data_dir, port=args.port) as server, sync_playwright() as pw:
        api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
        created = api.post("/experiments", json=body)
        created.raise_for_status()
        exp_id = created.json()["id"]
        print(f"experiment {exp_id}: {server.url}/#/experiments/{exp_id}", flush=True)
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server.url}/#/experiments/{exp_id}")
        shots: list[str] = []

        def screenshot(label: str) -> None:
            name = f"{stamp}-service-pong-{label}.png"
            page.screenshot(path=str(out / name), full_page=True)
            if name not in shots:
                shots.append(name)

        deadline = time.monotonic() + args.seconds + 600
        last_shot = time.monotonic()
        seen: set[str] = set()
        exp: dict[str, Any] = {}
        while time.monotonic() < deadline:
            time.sleep(15)
            exp = api.get(f"/experiments/{exp_id}").json()
            best = exp.get("best_return")
            for target in TARGETS:
                key = f"{target:g}"
                if key not in seen and best is not None and best >= target:
                    seen.add(key)
                    screenshot(f"reached-{key}")
            if time.monotonic() - last_shot > SCREENSHOT_EVERY_S:
                screenshot("latest")
                last_shot = time.monotonic()
            print(
                f"{exp['status']} steps {exp.get('env_steps')} return "
                f"{exp.get('episode_return_mean')} best {best}",
                flush=True,
            )
            if exp["status"] in FINISHED:
                break
        page.wait_for_timeout(3000)
        screenshot("final")
        evaluation = evaluate_in_dashboard(api, page, exp_id, args.episodes)
        screenshot("evaluation")
        browser.close()
        metrics = api.get(f"/experiments/{exp_id}/metrics").json()["series"]
        (out / f"{stamp}-service-pong.metrics.json").write_text(json.dumps(metrics))
        summary = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join(["python benchmarks/atari_service.py", *(argv or sys.argv[1:])]),
            "experiment": {k: exp.get(k) for k in ("id", "status", "env_steps", "best_return")},
            "reason": (exp.get("events") or [{}])[-1].get("reason"),
            "queued_s": seconds_between(exp.get("created_at"), exp.get("started_at")),
            "wall_s": seconds_between(exp.get("created_at"), exp.get("finished_at")),
            # `t` is the job's own clock (time_s, from its start), as `rollout train` reports.
            "crossings": crossings(metrics),
            "evaluation": evaluation,
            "screenshots": shots,
            "config": exp.get("config"),
        }
        (out / f"{stamp}-service-pong.json").write_text(json.dumps(summary, indent=2))
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
