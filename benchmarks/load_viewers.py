"""Viewers mode of the load benchmark: a crowd of dashboard viewers of one running experiment.

`load_bench --viewers N` starts one `rollout serve` (SQLite, jobs disabled), gives one running
experiment a backlog of `--backlog-steps` rows of 30 metrics through the ingest API, then at one
instant opens N websocket streams of it (spread over `--ws-procs` client processes) while a
simulated job keeps reporting at `--rate` iterations/s, /health is probed every 50 ms, the API's
RSS is sampled and 30 slowloris connections trickle header lines without ever ending them.

Each viewer is *live* once it has its whole backlog and then a metric the job sent after the
crowd arrived. Errors (must be 0): websocket failures, steps a viewer never received, failed
/health probes, slowloris connections left open.

    .venv/bin/python -m benchmarks.load_bench --viewers 500 --backlog-steps 2891 --duration 30 \\
        --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import multiprocessing as mp
import os
import platform
import socket
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks import load_bench as lb
from benchmarks.docs_section import write_section

START, END = "<!-- load_bench:viewers:start -->", "<!-- load_bench:viewers:end -->"
SLOWLORIS = 30
SETTLE_S = 15.0  # after the job's last row: every viewer must have it by then


@dataclass
class ViewerResult:
    errors: list[str] = field(default_factory=list)
    backlog_s: list[float] = field(default_factory=list)
    live_s: list[float] = field(default_factory=list)
    reconnects: int = 0


async def _view(plan: lb.Plan, result: ViewerResult, steps: set[int], done: asyncio.Event) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    exp_id = plan.experiments[0][0]
    base = plan.urls[0].replace("http", "ws", 1) + f"/api/v1/experiments/{exp_id}/stream"
    first_live = (plan.start_k + 1) * lb.STEPS_PER_ITERATION
    had_backlog = had_live = False
    while not done.is_set():
        url = f"{base}?since_step={max(steps, default=-1)}"
        try:
            async with connect(url, open_timeout=60, max_size=2**26) as ws:
                while not done.is_set():
                    try:
                        raw = await asyncio.wait_for(ws.recv(), 0.5)
                    except TimeoutError:
                        continue
                    message = json.loads(raw)
                    now = time.monotonic() - plan.start_at
                    if message["type"] == "status" and not had_backlog:
                        had_backlog = True
                        result.backlog_s.append(now)
                    elif message["type"] == "metrics":
                        steps.update(message["step"])
                        if had_backlog and not had_live and message["step"][-1] >= first_live:
                            had_live = True
                            result.live_s.append(now)
                return
        except ConnectionClosed as closed:
            if closed.rcvd is not None and closed.rcvd.code == 1013:
                result.reconnects += 1
                continue
            result.errors.append(f"viewer: closed {closed}")
            return
        except (OSError, TimeoutError) as exc:
            result.errors.append(f"viewer: {type(exc).__name__}: {exc}")
            return


async def _viewers(plan: lb.Plan, count: int, expected: Any) -> ViewerResult:
    result = ViewerResult()
    done = asyncio.Event()
    seen: list[set[int]] = [set() for _ in range(count)]
    await asyncio.sleep(max(0.0, plan.start_at - time.monotonic()))
    tasks = [asyncio.create_task(_view(plan, result, s, done)) for s in seen]
    rows: dict[int, int] = await asyncio.to_thread(expected.get)  # once the job has ended
    want = {k * lb.STEPS_PER_ITERATION for k in range(1, rows[plan.experiments[0][0]] + 1)}
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline and any(want - s for s in seen):
        await asyncio.sleep(0.2)
    done.set()
    await asyncio.gather(*tasks)
    for s in seen:
        if want - s:
            result.errors.append(f"viewer: {len(want - s)} of {len(want)} steps never came")
    return result


def _run_viewers(plan: lb.Plan, count: int, gate: lb._Gate, expected: Any, out: Any) -> None:
    import websockets.asyncio.client  # noqa: F401  (imported before the clock starts)

    lb._quiet_gc()
    plan = gate.wait(plan)
    out.put(("viewers", asdict(asyncio.run(_viewers(plan, count, expected)))))


def _slowloris(host: str, port: int, start_at: float, end_at: float) -> list[float | None]:
    """Seconds until the server closed each connection (None: still open at the end)."""
    time.sleep(max(0.0, start_at - time.monotonic()))
    socks, closed_after = [], [None] * SLOWLORIS
    for _ in range(SLOWLORIS):
        sock = socket.create_connection((host, port), timeout=10)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        sock.setblocking(False)
        socks.append(sock)
    opened = time.monotonic()
    while time.monotonic() < end_at and None in closed_after:
        for i, sock in enumerate(socks):
            if closed_after[i] is not None:
                continue
            try:
                sock.send(b"X-Slow: 1\r\n")
                if sock.recv(1024) == b"":
                    closed_after[i] = time.monotonic() - opened
            except BlockingIOError:
                pass
            except OSError:
                closed_after[i] = time.monotonic() - opened
        time.sleep(1.0)
    for sock in socks:
        sock.close()
    return closed_after


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _preload(url: str, exp_id: int, token: str, rows: int) -> None:
    names = [f"metric_{i:02d}" for i in range(lb.METRICS_PER_ROW - 1)]
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        for first in range(1, rows + 1, 500):
            batch = [
                {"step": k * lb.STEPS_PER_ITERATION, "time_s": float(k),
                 "values": {**{n: k / (i + 1) for i, n in enumerate(names)}, lb.SENT_AT: 0.0}}
                for k in range(first, min(first + 500, rows + 1))
            ]  # fmt: skip
            response = client.post(
                f"/api/v1/jobs/experiments/{exp_id}/metrics", json={"rows": batch}
            )
            if response.is_error:
                raise SystemExit(f"preloading the backlog: {response.status_code} {response.text}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tests.serve_process import rollout_serve

    env = {"ROLLOUT_JOBS_ENABLED": "false", "ROLLOUT_API_TOKEN": None,
           "ROLLOUT_MIN_FREE_BYTES": "0", "ROLLOUT_DATABASE_URL": None}  # fmt: skip
    tmp = tempfile.TemporaryDirectory(prefix="rollout-viewers-")
    with tmp, rollout_serve(Path(tmp.name), env=env) as server:
        (exp_id, token) = lb._experiments(f"sqlite:///{Path(tmp.name) / 'rollout.db'}", 1)[0]
        _preload(server.url, exp_id, token, args.backlog_steps)
        plan = lb.Plan(urls=[server.url], experiments=[(exp_id, token)], ws_clients=0,
                       rate=args.rate, query_rate=0, query_tasks=0, checkpoint_every=0,
                       checkpoint_bytes=0, start_k=args.backlog_steps)  # fmt: skip
        return _drive(args, plan, server.proc.pid)


def _drive(args: argparse.Namespace, plan: lb.Plan, pid: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out, expected = ctx.Queue(), ctx.Queue()
    gate = lb._Gate(ctx.Queue(), ctx.Queue())
    shards = max(1, args.ws_procs)
    counts = [len(range(s, args.viewers, shards)) for s in range(shards)]
    viewers = [
        ctx.Process(target=_run_viewers, args=(plan, n, gate, expected, out)) for n in counts
    ]
    loads = [
        ctx.Process(target=lb._run_load, args=(plan, r, gate, out)) for r in ("jobs", "health")
    ]
    processes = [*viewers, *loads]
    for process in processes:
        process.start()
    errors: list[str] = []
    health: list[float] = []
    merged = ViewerResult()
    rss = {"before": _rss_mb(pid), "peak": 0.0}
    try:
        for _ in processes:
            gate.readies.get(timeout=300)
        start_at = time.monotonic() + args.warmup
        end_at = start_at + args.duration
        for _ in processes:
            gate.go.put((start_at, end_at))
        host, port = plan.urls[0].removeprefix("http://").split(":")
        slow: list[Any] = []
        slow_thread = threading.Thread(
            target=lambda: slow.extend(_slowloris(host, int(port), start_at, end_at)), daemon=True
        )
        slow_thread.start()
        pending = len(processes)
        while pending:
            rss["peak"] = max(rss["peak"], _rss_mb(pid))
            with contextlib.suppress(Exception):
                role, fields = out.get(timeout=0.25)
                pending -= 1
                if role == "viewers":
                    part = ViewerResult(**fields)
                    merged.errors += part.errors
                    merged.backlog_s += part.backlog_s
                    merged.live_s += part.live_s
                    merged.reconnects += part.reconnects
                else:
                    result = lb.Result(**fields)
                    errors += result.errors
                    health += result.health_ms
                    if role == "jobs":
                        for _ in viewers:
                            expected.put(result.rows_sent)
            if time.monotonic() > end_at + SETTLE_S + 120:
                errors.append("timed out waiting for the client processes")
                break
        rss["after"] = _rss_mb(pid)
        slow_thread.join(timeout=5)
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    still_open = sum(1 for s in slow if s is None) if slow else SLOWLORIS
    if still_open:
        errors.append(f"{still_open} of {SLOWLORIS} slowloris connections still open")
    if len(merged.live_s) < args.viewers:
        errors.append(f"{args.viewers - len(merged.live_s)} viewers never went live")
    errors += merged.errors
    return {
        "errors": len(errors),
        "error_samples": errors[:10],
        "viewers_live": len(merged.live_s),
        "backlog_p50_s": lb._pct(merged.backlog_s, 0.5),
        "backlog_max_s": max(merged.backlog_s, default=float("nan")),
        "live_p50_s": lb._pct(merged.live_s, 0.5),
        "live_max_s": max(merged.live_s, default=float("nan")),
        "reconnects": merged.reconnects,
        "health_samples": len(health),
        "health_p50_ms": lb._pct(health, 0.5),
        "health_p99_ms": lb._pct(health, 0.99),
        "rss_before_mb": rss["before"],
        "rss_peak_mb": rss["peak"],
        "rss_after_mb": rss["after"],
        "slowloris_closed": SLOWLORIS - still_open,
        "slowloris_max_s": max((s for s in slow if s is not None), default=float("nan")),
    }


def command(args: argparse.Namespace) -> str:
    return (
        f".venv/bin/python -m benchmarks.load_bench --viewers {args.viewers} "
        f"--backlog-steps {args.backlog_steps} --rate {args.rate:g} --duration {args.duration:g} "
        f"--ws-procs {args.ws_procs} --write docs/benchmarks.md"
    )


def markdown(args: argparse.Namespace, s: dict[str, Any]) -> str:
    def ok(good: bool) -> str:
        return "met" if good else "**missed**"

    rows = [
        ("errors (websocket failures, missing steps, failed /health, open slowloris)",
         f"{s['errors']}", "0", ok(s["errors"] == 0)),
        ("viewers live (whole backlog, then a new metric)", f"{s['viewers_live']} of "
         f"{args.viewers}", f"{args.viewers}", ok(s["viewers_live"] == args.viewers)),
        ("backlog received, p50 / max (s)", f"{s['backlog_p50_s']:.1f} / "
         f"{s['backlog_max_s']:.1f}", "", ""),
        ("live, p50 / max (s)", f"{s['live_p50_s']:.1f} / {s['live_max_s']:.1f}", "< 10",
         ok(s["live_max_s"] < 10)),
        ("/health, p50 / p99 (ms)", f"{s['health_p50_ms']:.1f} / {s['health_p99_ms']:.1f}",
         "p99 < 50", ok(s["health_p99_ms"] < 50)),
        ("API RSS before / peak / after (MB)", f"{s['rss_before_mb']:.0f} / "
         f"{s['rss_peak_mb']:.0f} / {s['rss_after_mb']:.0f}", "", ""),
        ("slowloris connections closed; slowest (s)", f"{s['slowloris_closed']} of {SLOWLORIS}; "
         f"{s['slowloris_max_s']:.1f}", f"{SLOWLORIS}", ok(s["slowloris_closed"] == SLOWLORIS)),
        ("1013 reconnects; /health samples", f"{s['reconnects']}; {s['health_samples']:,}", "",
         ""),
    ]  # fmt: skip
    lines = [
        START,
        "### Viewers (benchmarks/load_bench.py --viewers)",
        "",
        f"`{command(args)}` — {dt.date.today().isoformat()}, {platform.machine()}, "
        f"{os.cpu_count()} cores (load average {os.getloadavg()[1]:.1f} over the last 5 "
        f"minutes). One `rollout serve` (SQLite, jobs disabled); one running experiment with a "
        f"backlog of {args.backlog_steps:,} rows of {lb.METRICS_PER_ROW} metrics; "
        f"{args.viewers} websocket viewers of it opened at one instant from {args.ws_procs} "
        f"client processes while its simulated job reports {args.rate:g} iterations/s; "
        f"/health every {lb.HEALTH_EVERY_S * 1000:.0f} ms and {SLOWLORIS} slowloris "
        f"connections (a header line a second, never the end) for {args.duration:g} s.",
        "",
        "| measure | value | target | |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
        END,
    ]
    return "\n".join(lines)


def write(path: Path, section: str) -> None:
    write_section(path, START, END, section, anchor=lb.END, heading="## Service")
