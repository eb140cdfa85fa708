"""Dashboard speed in real Chromium against the real service (simulated jobs, no Ray).

    .venv/bin/python benchmarks/dashboard_bench.py [--points 1000000] [--experiments 20]
        [--list-seconds 30] [--memory-seconds 120] [--json out.json]

1. chart: one experiment with a `--points`-long return series. Time from opening its page to
   the return chart drawn (the server min/max-downsamples to a few thousand points), frame
   times while the cursor sweeps the chart, and a drag-zoom round trip (full resolution).
2. list: `--experiments` experiments reporting an iteration per second each; on the list page:
   frames per second, long tasks, and how late the last update shows after the final post.
3. memory: one experiment streaming fast into its open page for `--memory-seconds`; JS heap
   (after a forced GC) and points held, sampled over time: bounded buffers keep both flat.
4. sweep: a sweep of 5 learning rates x 4 seeds (20 members) reporting an iteration per second
   each, on its sweep page (bands, ranking, scatter refreshed live): frames per second and
   long tasks over `--list-seconds`.
5. charts30: the experiment page of a `--points`-long run with 30 series charted (the default
   charts plus 13 chosen with Choose charts), its job posting an iteration of every series per
   second: frames per second and long tasks over `--list-seconds`.
Results are printed; docs/benchmarks.md ("Dashboard") keeps the numbers with this command.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.config import Settings  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.browser.server import LiveServer, live_server  # noqa: E402
from tests.browser.simulate import SimulatedJob  # noqa: E402

# Starts recording the gaps between animation frames for %d ms; `window.__frames` resolves to
# them. Not awaited here, so the benchmark can drive the page meanwhile.
FRAME_PROBE = """() => { window.__frames = new Promise((resolve) => {
  const gaps = []; let last = performance.now(); const end = last + %d;
  function tick(t) {
    gaps.push(t - last); last = t;
    if (t < end) requestAnimationFrame(tick); else resolve(gaps);
  }
  requestAnimationFrame(tick);
}); }"""
FRAMES = "() => window.__frames"

LONG_TASKS = """() => { window.__long = [];
  new PerformanceObserver((l) => {
    for (const e of l.getEntries()) window.__long.push(e.duration);
  }).observe({ type: "longtask", buffered: false }); }"""


def create(server: LiveServer, name: str, config: dict[str, Any] | None = None) -> int:
    r = httpx.post(f"{server.url}/api/v1/experiments", json={"name": name, "config": config or {}})
    r.raise_for_status()
    return int(r.json()["id"])


def post_long_series(job: SimulatedJob, points: int, batch: int = 10_000) -> float:
    """`points` rows of just the return (plus the wall time the API stores with every row)."""
    t0 = time.perf_counter()
    for start in range(0, points, batch):
        rows = [
            {
                "step": (i + 1) * 64,
                "time_s": (i + 1) * 0.01,
                "values": {"episode_return_mean": 200 + 150 * ((i * 7919) % 1000) / 1000},
            }
            for i in range(start, min(points, start + batch))
        ]
        job.client.post("/metrics", json={"rows": rows}).raise_for_status()
    return time.perf_counter() - t0


def chart_points(page: Any, title: str) -> int:
    value = page.locator(f'[data-chart="{title}"]').get_attribute("data-points")
    return int(value or 0)


def wait(cond: Any, timeout: float) -> float:
    t0 = time.perf_counter()
    while not cond():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("benchmark wait timed out")
        time.sleep(0.01)
    return time.perf_counter() - t0


def bench_chart(browser: Any, server: LiveServer, points: int) -> dict[str, Any]:
    exp_id = create(server, "one-million")
    job = SimulatedJob(server, exp_id)
    job.status("running", "simulated")
    ingest_s = post_long_series(job, points)
    job.close()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    t0 = time.perf_counter()
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    wait(lambda: chart_points(page, "Episode return") > 0, 120)
    first_draw_s = time.perf_counter() - t0
    drawn = chart_points(page, "Episode return")
    over = page.locator('[data-chart="Episode return"] .u-over')
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    page.evaluate(LONG_TASKS)
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    page.evaluate(FRAME_PROBE % 3000)
    for k in range(60):  # sweep the cursor across the chart for ~3 s
        page.mouse.move(box["x"] + box["width"] * (k % 30) / 30, box["y"] + box["height"] / 2)
        time.sleep(0.045)
    gaps = page.evaluate(FRAMES)[1:]
    y = box["y"] + box["height"] / 2
    before = chart_points(page, "Episode return")
    t1 = time.perf_counter()
    page.mouse.move(box["x"] + box["width"] * 0.50, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.52, y, steps=4)
    page.mouse.up()
    wait(lambda: chart_points(page, "Episode return") != before, 60)
    zoom_s = time.perf_counter() - t1
    long_tasks = page.evaluate("() => window.__long")
    page.close()
    return {
        "points": points,
        "ingest_s": round(ingest_s, 1),
        "first_draw_s": round(first_draw_s, 2),
        "points_drawn": drawn,
        "hover_fps": round(1000 * len(gaps) / max(1.0, sum(gaps)), 1),
        "hover_frame_max_ms": round(max(gaps), 1),
        "zoom_round_trip_s": round(zoom_s, 2),
        "long_tasks_ms": [round(x) for x in long_tasks],
    }


def drive_live(page: Any, jobs: list[SimulatedJob], seconds: int) -> tuple[int, list[float]]:
    """One iteration per job per second for `seconds` while the page's frames are recorded;
    returns (updates posted, frame gaps in ms). Long tasks are recorded from the start too."""
    page.evaluate(LONG_TASKS)
    page.evaluate(FRAME_PROBE % (seconds * 1000))
    t_end = time.perf_counter() + seconds
    posts = 0
    while time.perf_counter() < t_end:
        tick = time.perf_counter()
        for job in jobs:
            job.iterations(1)
            posts += 1
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - tick)))
    return posts, page.evaluate(FRAMES)[1:]


def frame_stats(gaps: list[float], long_tasks: list[float]) -> dict[str, Any]:
    return {
        "fps": round(1000 * len(gaps) / max(1.0, sum(gaps)), 1),
        "frame_p50_ms": round(statistics.median(gaps), 1),
        "frame_max_ms": round(max(gaps), 1),
        "long_tasks": len(long_tasks),
        "long_task_max_ms": round(max(long_tasks, default=0)),
    }


def bench_list(browser: Any, server: LiveServer, n: int, seconds: int) -> dict[str, Any]:
    jobs = []
    for i in range(n):
        exp_id = create(server, f"live-{i:02d}", {"stop": {"env_steps": 10_000_000}})
        job = SimulatedJob(server, exp_id, seed=i)
        job.status("running", "simulated")
        jobs.append(job)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server.url}/#/")
    wait(lambda: page.locator("tbody tr").count() >= n, 30)
    page.locator("#conn[data-state=online]").wait_for(timeout=30_000)
    posts, gaps = drive_live(page, jobs, seconds)
    final = jobs[0].step
    # How late is the last update on screen after the final post?
    first_row = page.locator(f'tr[data-id="{jobs[0].experiment_id}"] td.num').nth(2)
    target = f"{final / 1e3:.1f}k" if final >= 1e4 else str(final)
    lag_s = wait(lambda: first_row.inner_text() == target, 30)
    long_tasks = page.evaluate("() => window.__long")
    page.close()
    for job in jobs:
        job.close()
    return {
        "experiments": n,
        "seconds": seconds,
        "updates_posted": posts,
        **frame_stats(gaps, long_tasks),
        "last_update_shown_after_s": round(lag_s, 2),
    }


def bench_sweep(browser: Any, server: LiveServer, seconds: int) -> dict[str, Any]:
    body = {
        "name": "live sweep",
        "config": {"stop": {"env_steps": 10_000_000}},
        "grid": {"lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2]},
        "seeds": [0, 1, 2, 3],
        "max_parallel": 20,
    }
    r = httpx.post(f"{server.url}/api/v1/sweeps", json=body)
    r.raise_for_status()
    sweep = r.json()
    jobs = []
    for i, member in enumerate(sweep["members"]):
        job = SimulatedJob(server, member["id"], seed=i)
        job.status("running", "simulated")
        job.iterations(5)
        jobs.append(job)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server.url}/#/sweeps/{sweep['id']}")
    chart = '[data-chart="Episode return (mean over seeds)"]'
    wait(lambda: int(page.locator(chart).get_attribute("data-points") or 0) > 2, 30)
    page.locator("#conn[data-state=online]").wait_for(timeout=30_000)
    posts, gaps = drive_live(page, jobs, seconds)
    long_tasks = page.evaluate("() => window.__long")
    page.close()
    for job in jobs:
        job.close()
    return {
        "members": len(jobs),
        "seconds": seconds,
        "updates_posted": posts,
        **frame_stats(gaps, long_tasks),
    }


# Charted beyond the default charts' 17 series (Choose charts on the experiment page): 30 in all.
EXTRA_SERIES = ["grad_norm", "lr", "episodes", *(f"custom_{i:02d}" for i in range(10))]


class WideJob(SimulatedJob):
    """A simulated job whose iterations carry ten more series than a PPO iteration."""

    def iterations(self, n: int, steps_per_iteration: int = 512) -> None:
        from tests.browser.simulate import metric_values

        rows = []
        for _ in range(n):
            self.step += steps_per_iteration
            self.time_s += 0.055
            values = metric_values(self.step, self.time_s, self.rng)
            values.update({f"custom_{i:02d}": self.rng.random() for i in range(10)})
            rows.append({"step": self.step, "time_s": self.time_s, "values": values})
        self.client.post("/metrics", json={"rows": rows}).raise_for_status()


def bench_charts30(browser: Any, server: LiveServer, points: int, seconds: int) -> dict[str, Any]:
    """The experiment page of a `points`-long run with 30 series charted (the defaults plus 13
    chosen), while its job posts an iteration of all of them per second."""
    exp_id = create(server, "thirty-series", {"stop": {"env_steps": 10_000_000_000}})
    job = WideJob(server, exp_id)
    job.status("running", "simulated")
    ingest_s = post_long_series(job, points)
    job.step = points * 64
    job.iterations(5)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    choice = json.dumps({"hidden": [], "extra": EXTRA_SERIES})
    context.add_init_script(f"localStorage.setItem('rollout.charts.v1', {json.dumps(choice)})")
    page = context.new_page()
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    wait(lambda: chart_points(page, "custom_09") > 0, 60)
    wait(lambda: chart_points(page, "Episode return") > 0, 60)
    charts = page.locator("[data-chart]:visible").count()
    page.locator("#conn[data-state=online]").wait_for(timeout=30_000)
    before = chart_points(page, "custom_09"), chart_points(page, "Episode return")
    posts, gaps = drive_live(page, [job], seconds)
    # The last posts on screen: every chart took the live points (not a page sitting idle).
    wait(lambda: chart_points(page, "custom_09") >= before[0] + posts, 30)
    after = chart_points(page, "custom_09"), chart_points(page, "Episode return")
    long_tasks = page.evaluate("() => window.__long")
    context.close()
    job.close()
    return {
        "points": points,
        "ingest_s": round(ingest_s, 1),
        "charts": charts,
        "series": 17 + len(EXTRA_SERIES),
        "seconds": seconds,
        "updates_posted": posts,
        "custom_09_points": [before[0], after[0]],
        "return_points": [before[1], after[1]],
        **frame_stats(gaps, long_tasks),
    }


def bench_memory(browser: Any, server: LiveServer, seconds: int) -> dict[str, Any]:
    exp_id = create(server, "long-stream", {"stop": {"env_steps": 10_000_000_000}})
    job = SimulatedJob(server, exp_id)
    job.status("running", "simulated")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    page.locator("#conn[data-state=online]").wait_for(timeout=30_000)

    def heap_mb() -> float:
        cdp.send("HeapProfiler.collectGarbage")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return round(metrics["JSHeapUsedSize"] / 2**20, 1)

    samples = []
    t0 = time.perf_counter()
    next_sample = 0.0
    while (elapsed := time.perf_counter() - t0) < seconds:
        job.iterations(100)  # 100 iterations x 21 metrics per post, as fast as ingest allows
        if elapsed >= next_sample:
            samples.append(
                {
                    "t_s": round(elapsed),
                    "points_streamed_per_series": job.step // 512,
                    "points_drawn": chart_points(page, "Episode length"),
                    "js_heap_mb": heap_mb(),
                }
            )
            next_sample += seconds / 8
    samples.append(
        {
            "t_s": round(time.perf_counter() - t0),
            "points_streamed_per_series": job.step // 512,
            "points_drawn": chart_points(page, "Episode length"),
            "js_heap_mb": heap_mb(),
        }
    )
    job.close()
    page.close()
    return {"seconds": seconds, "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--list-seconds", type=int, default=30)
    parser.add_argument("--memory-seconds", type=int, default=120)
    parser.add_argument(
        "--only", choices=["chart", "list", "memory", "sweep", "charts30"], action="append"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing")
    from playwright.sync_api import sync_playwright

    which = args.only or ["chart", "list", "memory", "sweep", "charts30"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="rollout-dash-bench-") as tmp:
        settings = Settings(
            data_dir=Path(tmp),
            database_url=f"sqlite:///{tmp}/rollout.db",
            jobs_enabled=False,
            frontend_dir=ROOT / "frontend" / "dist",
        )
        with live_server(settings) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            if "chart" in which:
                results["chart"] = bench_chart(browser, server, args.points)
                print(json.dumps({"chart": results["chart"]}), flush=True)
            if "list" in which:
                results["list"] = bench_list(browser, server, args.experiments, args.list_seconds)
                print(json.dumps({"list": results["list"]}), flush=True)
            if "memory" in which:
                results["memory"] = bench_memory(browser, server, args.memory_seconds)
                print(json.dumps({"memory": results["memory"]}), flush=True)
            if "sweep" in which:
                results["sweep"] = bench_sweep(browser, server, args.list_seconds)
                print(json.dumps({"sweep": results["sweep"]}), flush=True)
            if "charts30" in which:
                results["charts30"] = bench_charts30(
                    browser, server, args.points, args.list_seconds
                )
                print(json.dumps({"charts30": results["charts30"]}), flush=True)
            browser.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
