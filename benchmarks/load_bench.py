"""Load: several API processes on PostgreSQL under jobs, websocket clients and a query storm.

Starts N `rollout serve` processes (jobs disabled) on one fresh PostgreSQL database (the one on
127.0.0.1:5432, or a throwaway server), then, with our own asyncio client (httpx.AsyncClient +
websockets, spread over several client processes):

- E simulated experiments report like real trainer jobs: their own job token, the real ingest
  endpoint (`POST /api/v1/jobs/experiments/{id}/metrics`), one row of 30 metrics per
  iteration at `--rate` iterations/s, each job on its own phase (rows that fall due while a
  POST is in flight go in the next batch, as the job's reporter does), a log line per
  iteration and a small checkpoint upload every `--checkpoint-every` iterations. Experiment i
  talks to API process i mod N.
- W websocket clients: most follow one experiment's stream, on API processes other than the
  one that ingests it (so every message crosses processes through LISTEN/NOTIFY); every tenth
  follows the list stream. Each row carries the monotonic time just before its POST; a client
  that receives it computes ingest -> websocket latency (CLOCK_MONOTONIC is system-wide).
- a query storm over GET metrics (all series, max_points=1000), the experiment list, one
  experiment and its checkpoints: `--query-rate` queries/s arriving open loop (Poisson, each
  timed from when it was due, so a backlog shows), and/or `--query-tasks` closed loops that
  each send the next query when the last is answered (they take whatever the machine has);
- /health of every API process probed every 50 ms throughout.

The jobs, the storm and the /health probe each run in a process of their own, and the
websocket clients in `--ws-procs` more: a busy client loop must not delay another one's clock.

Errors (must be 0): failed or non-2xx requests, websocket failures, steps a stream client never
received, and stored point counts that differ from what the jobs sent. Closes with 1013 ("catch
up": a lagging client) are reconnected with since_step and reported separately.

    .venv/bin/python -m benchmarks.load_bench --workers 2 --experiments 20 --ws-clients 100 \\
        --query-rate 50 --duration 60 --write docs/benchmarks.md

`--viewers N` measures something else: N viewers of one experiment (benchmarks/load_viewers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import json
import math
import multiprocessing as mp
import os
import platform
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from benchmarks.docs_section import write_section

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- load_bench:start -->", "<!-- load_bench:end -->"
METRICS_PER_ROW = 30
STEPS_PER_ITERATION = 1024
SENT_AT = "bench_sent_at"  # the metric carrying the monotonic send time
HEALTH_EVERY_S = 0.05


@dataclass(frozen=True)
class Plan:
    urls: list[str]
    experiments: list[tuple[int, str]]  # (id, job token)
    ws_clients: int
    rate: float
    query_rate: float  # open-loop storm: queries/s, Poisson arrivals (0: none)
    query_tasks: int  # closed-loop storm: tasks that each send the next query on a reply
    checkpoint_every: int
    checkpoint_bytes: int
    start_at: float = 0.0  # time.monotonic() of the measured start (set by the gate)
    end_at: float = 0.0
    start_k: int = 0  # iterations each job has already reported (a preloaded backlog)


@dataclass
class Result:
    errors: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    health_ms: list[float] = field(default_factory=list)
    query_ms: list[float] = field(default_factory=list)
    posts: int = 0
    points: int = 0
    messages: int = 0
    reconnects: int = 0
    rows_sent: dict[int, int] = field(default_factory=dict)  # experiment -> rows (= last k)

    def merge(self, other: Result) -> None:
        self.errors += other.errors
        self.latencies_ms += other.latencies_ms
        self.health_ms += other.health_ms
        self.query_ms += other.query_ms
        self.posts += other.posts
        self.points += other.points
        self.messages += other.messages
        self.reconnects += other.reconnects
        self.rows_sent.update(other.rows_sent)


def _error(result: Result, what: str) -> None:
    if len(result.errors) < 200:
        result.errors.append(what)
    else:
        result.errors.append("...")


# --- simulated jobs ---------------------------------------------------------------------------


async def _job(plan: Plan, index: int, result: Result) -> None:
    """One experiment's job: rows due by the clock, sent in batches, then logs, checkpoints."""
    exp_id, token = plan.experiments[index]
    url = plan.urls[index % len(plan.urls)]
    base = f"/api/v1/jobs/experiments/{exp_id}"
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random(exp_id)
    names = [f"metric_{i:02d}" for i in range(METRICS_PER_ROW - 1)]
    archive = rng.randbytes(plan.checkpoint_bytes)
    # Real jobs start at different times: each iterates on its own phase, not in lockstep with
    # the others (20 jobs ticking at the same instant would be a burst no real cluster sends).
    start_at = plan.start_at + rng.random() / plan.rate
    k = plan.start_k
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
        while True:
            now = time.monotonic()
            if now >= plan.end_at:
                break
            due = plan.start_k + math.floor((now - start_at) * plan.rate) + 1
            if due <= k:
                await asyncio.sleep(start_at + (k - plan.start_k) / plan.rate - now)
                continue
            sent_at = time.monotonic()
            rows = [
                {
                    "step": i * STEPS_PER_ITERATION,
                    "time_s": max(0.0, sent_at - plan.start_at),
                    "values": {**{n: rng.random() for n in names}, SENT_AT: sent_at},
                }
                for i in range(k + 1, min(due, k + 500) + 1)
            ]
            if not await _post(client, result, f"{base}/metrics", {"rows": rows}):
                await asyncio.sleep(0.2)
                continue  # retried with the same rows (ingest is idempotent)
            result.posts += 1
            result.points += len(rows) * (METRICS_PER_ROW + 1)
            first, k = k + 1, rows[-1]["step"] // STEPS_PER_ITERATION
            lines = [f"iter {i} steps {i * STEPS_PER_ITERATION}" for i in range(first, k + 1)]
            await _post(client, result, f"{base}/logs", {"lines": lines})
            if plan.checkpoint_every and k // plan.checkpoint_every > (first - 1) // (
                plan.checkpoint_every
            ):
                await _upload(client, result, base, k, archive)
    result.rows_sent[exp_id] = k


async def _post(client: httpx.AsyncClient, result: Result, path: str, body: Any) -> bool:
    try:
        response = await client.post(path, json=body)
    except httpx.HTTPError as exc:
        _error(result, f"POST {path}: {type(exc).__name__}")
        return False
    if response.status_code >= 300:
        _error(result, f"POST {path}: {response.status_code} {response.text[:200]}")
        return False
    return True


async def _upload(client: httpx.AsyncClient, result: Result, base: str, k: int, data: bytes):
    params = {"iteration": k, "env_steps": k * STEPS_PER_ITERATION}
    try:
        response = await client.put(f"{base}/checkpoints", params=params, content=data)
    except httpx.HTTPError as exc:
        _error(result, f"PUT checkpoint: {type(exc).__name__}")
        return
    if response.status_code >= 300:
        _error(result, f"PUT checkpoint: {response.status_code} {response.text[:200]}")


# --- query storm and health ---------------------------------------------------------------------


STORM_MAX_IN_FLIGHT = 256


def _storm_query(rng: random.Random, plan: Plan) -> tuple[str, dict[str, Any]]:
    exp_id = rng.choice(plan.experiments)[0]
    return rng.choice(
        [
            (f"/experiments/{exp_id}/metrics", {"max_points": 1000}),
            ("/experiments", {"limit": 50}),
            (f"/experiments/{exp_id}", {}),
            (f"/experiments/{exp_id}/checkpoints", {}),
        ]
    )


async def _query(
    client: httpx.AsyncClient, result: Result, path: str, params: dict[str, Any], since: float
) -> None:
    """One storm query; its latency counts from `since` (when it was due)."""
    try:
        response = await client.get(path, params=params)
    except httpx.HTTPError as exc:
        _error(result, f"GET {path}: {type(exc).__name__}")
        return
    result.query_ms.append((time.monotonic() - since) * 1000)
    if response.status_code != 200:
        _error(result, f"GET {path}: {response.status_code}")


async def _storm_closed(plan: Plan, index: int, result: Result) -> None:
    """A closed loop: the next query goes out when the reply to the last one is in."""
    url = plan.urls[index % len(plan.urls)]
    rng = random.Random(index)
    async with httpx.AsyncClient(base_url=f"{url}/api/v1", timeout=30) as client:
        while time.monotonic() < plan.start_at:
            await asyncio.sleep(0.05)
        while time.monotonic() < plan.end_at:
            path, params = _storm_query(rng, plan)
            await _query(client, result, path, params, time.monotonic())


async def _storm_open(plan: Plan, result: Result) -> None:
    """An open loop: queries arrive at `plan.query_rate` per second (Poisson), round-robin over
    the API processes, whether or not earlier ones were answered; each one's latency counts
    from when it was due, so a slow service cannot hide its backlog (no coordinated
    omission). More than STORM_MAX_IN_FLIGHT unanswered queries is an error."""
    rng = random.Random(0)
    clients = [
        httpx.AsyncClient(
            base_url=f"{u}/api/v1",
            timeout=30,
            limits=httpx.Limits(max_connections=STORM_MAX_IN_FLIGHT),
        )
        for u in plan.urls
    ]
    in_flight: set[asyncio.Task[None]] = set()
    try:
        due = plan.start_at
        i = 0
        while True:
            due += rng.expovariate(plan.query_rate)
            if due >= plan.end_at:
                break
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if len(in_flight) >= STORM_MAX_IN_FLIGHT:
                _error(result, f"query storm: {len(in_flight)} queries unanswered")
                continue
            path, params = _storm_query(rng, plan)
            task = asyncio.create_task(_query(clients[i % len(clients)], result, path, params, due))
            i += 1
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        if in_flight:
            await asyncio.wait(in_flight, timeout=60)
    finally:
        for client in clients:
            await client.aclose()


async def _health(plan: Plan, result: Result) -> None:
    clients = [httpx.AsyncClient(base_url=u, timeout=10) for u in plan.urls]
    try:
        while time.monotonic() < plan.start_at:
            await asyncio.sleep(0.01)
        i = 0
        while time.monotonic() < plan.end_at:
            client = clients[i % len(clients)]
            i += 1
            start = time.monotonic()
            try:
                response = await client.get("/health")
                result.health_ms.append((time.monotonic() - start) * 1000)
                if response.status_code != 200 or response.json()["status"] != "ok":
                    _error(result, f"/health: {response.status_code} {response.text[:200]}")
            except httpx.HTTPError as exc:
                _error(result, f"/health: {type(exc).__name__}")
            await asyncio.sleep(max(0.0, start + HEALTH_EVERY_S - time.monotonic()))
    finally:
        for client in clients:
            await client.aclose()


# --- websocket clients --------------------------------------------------------------------------


@dataclass
class _Follower:
    exp_id: int | None  # None: the list stream
    url: str
    steps: set[int] = field(default_factory=set)


async def _follow(
    plan: Plan, follower: _Follower, result: Result, ready: asyncio.Event, done: asyncio.Event
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    ws_base = follower.url.replace("http", "ws", 1) + "/api/v1"
    first = True
    while not done.is_set():
        if follower.exp_id is None:
            path = f"{ws_base}/stream"
        else:
            since = max(follower.steps, default=-1)
            path = f"{ws_base}/experiments/{follower.exp_id}/stream?since_step={since}"
        try:
            async with connect(path, open_timeout=30, max_size=2**24) as ws:
                if first:
                    ready.set()
                    first = False
                await _receive(ws, follower, result, done)
                return
        except ConnectionClosed as closed:
            if closed.rcvd is not None and closed.rcvd.code == 1013:
                result.reconnects += 1  # asked to catch up: reconnect from the last step
                continue
            _error(result, f"websocket {path}: closed {closed}")
            return
        except (OSError, TimeoutError) as exc:
            _error(result, f"websocket {path}: {type(exc).__name__}: {exc}")
            ready.set()
            return


async def _receive(ws: Any, follower: _Follower, result: Result, done: asyncio.Event) -> None:
    while not done.is_set():
        try:
            raw = await asyncio.wait_for(ws.recv(), 0.5)
        except TimeoutError:
            continue
        now = time.monotonic()
        message = json.loads(raw)
        result.messages += 1
        if message.get("type") != "metrics":
            continue
        sent = message["series"].get(SENT_AT, [])
        for step, at in zip(message["step"], sent, strict=False):
            if step not in follower.steps and at is not None:
                follower.steps.add(step)  # a backlog after a reconnect may repeat steps
                result.latencies_ms.append((now - at) * 1000)


async def _followers(plan: Plan, shard: int, shards: int, expected: Any, gate: _Gate) -> Result:
    result = Result()
    followers = []
    for j in range(shard, plan.ws_clients, shards):
        url = plan.urls[(j + 1) % len(plan.urls)]  # not the process that ingests (mostly)
        if j % 10 == 9:
            followers.append(_Follower(None, url))
        else:
            exp_index = j % len(plan.experiments)
            url = plan.urls[(exp_index + 1 + j // len(plan.experiments)) % len(plan.urls)]
            followers.append(_Follower(plan.experiments[exp_index][0], url))
    done = asyncio.Event()
    readies = [asyncio.Event() for _ in followers]
    tasks = [
        asyncio.create_task(_follow(plan, f, result, r, done))
        for f, r in zip(followers, readies, strict=True)
    ]
    await asyncio.gather(*(r.wait() for r in readies))
    await asyncio.to_thread(gate.ready)
    rows_sent: dict[int, int] = await asyncio.to_thread(expected.get)  # after the jobs end
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not _complete(followers, rows_sent):
        await asyncio.sleep(0.1)
    done.set()
    await asyncio.gather(*tasks)
    for f in followers:
        if f.exp_id is None:
            continue
        want = {k * STEPS_PER_ITERATION for k in range(1, rows_sent.get(f.exp_id, 0) + 1)}
        missing = want - f.steps
        if missing:
            _error(result, f"stream of experiment {f.exp_id}: {len(missing)} steps never came")
    return result


def _complete(followers: list[_Follower], rows_sent: dict[int, int]) -> bool:
    return all(f.exp_id is None or len(f.steps) >= rows_sent.get(f.exp_id, 0) for f in followers)


# --- client processes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Gate:
    """Client processes start slowly on a busy machine: each says when it is ready (imports
    done, websockets connected) and the load starts at a time the parent picks after that."""

    readies: Any
    go: Any

    def ready(self) -> None:
        self.readies.put(os.getpid())

    def wait(self, plan: Plan) -> Plan:
        self.ready()
        start_at, end_at = self.go.get(timeout=600)
        return replace(plan, start_at=start_at, end_at=end_at)


def _quiet_gc() -> None:
    """The client processes are the measuring instrument: their own collector pauses (tens
    of ms for a full collection) would show up as the service's latency. The same tuning as
    `rollout serve` (app.main.GC_THRESHOLDS)."""
    from app.main import GC_THRESHOLDS

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _run_followers(
    plan: Plan, shard: int, shards: int, expected: Any, gate: _Gate, out: Any
) -> None:
    _quiet_gc()
    out.put(("followers", asdict(asyncio.run(_followers(plan, shard, shards, expected, gate)))))


LOAD_ROLES = ("jobs", "storm", "health")


def _run_load(plan: Plan, role: str, gate: _Gate, out: Any) -> None:
    """One kind of load per process: a busy client (the storm's JSON parsing, twenty jobs)
    must not delay the clock of another measurement (a /health probe) on the same loop."""
    import httpx  # noqa: F401  (imported before the clock starts)

    _quiet_gc()
    plan = gate.wait(plan)

    async def main() -> Result:
        result = Result()
        if role == "jobs":
            await asyncio.gather(*(_job(plan, i, result) for i in range(len(plan.experiments))))
        elif role == "storm":
            closed = (_storm_closed(plan, i, result) for i in range(plan.query_tasks))
            opened = [_storm_open(plan, result)] if plan.query_rate > 0 else []
            await asyncio.gather(*closed, *opened)
        else:
            await _health(plan, result)
        return result

    out.put((role, asdict(asyncio.run(main()))))


# --- set-up -------------------------------------------------------------------------------------


def _experiments(database_url: str, count: int) -> list[tuple[int, str]]:
    """Running experiments with job tokens, as the launcher leaves them for their jobs."""
    from app.core.db import make_engine, make_sessionmaker, transaction
    from app.experiments import service as experiments
    from app.experiments.schemas import ExperimentCreate

    engine = make_engine(database_url)
    sessionmaker = make_sessionmaker(engine)
    out = []
    config = {"env_id": "CartPole-v1", "keep_checkpoints": 3}
    for i in range(count):
        with transaction(sessionmaker) as session:
            exp = experiments.create(session, ExperimentCreate(name=f"load {i}", config=config))
            for to in ("queued", "running"):
                experiments.transition(session, exp.id, to, "load benchmark")
            out.append((exp.id, experiments.issue_job_token(session, exp.id)))
    engine.dispose()
    return out


def _stored_rows(url: str, exp_id: int) -> int:
    response = httpx.get(
        f"{url}/api/v1/experiments/{exp_id}/metrics",
        params={"names": "time_s", "max_points": 100_000},
        timeout=60,
    )
    response.raise_for_status()
    return len(response.json()["series"].get("time_s", {"step": []})["step"])


@contextlib.contextmanager
def _servers(database_url: str, data_dir: Path, count: int) -> Iterator[list[str]]:
    from tests.serve_process import rollout_serve

    env = {
        "ROLLOUT_DATABASE_URL": database_url,
        "ROLLOUT_JOBS_ENABLED": "false",
        "ROLLOUT_API_TOKEN": None,
        "ROLLOUT_MIN_FREE_BYTES": "0",
    }
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(rollout_serve(data_dir, env=env)).url for _ in range(count)]
        yield urls


def run(args: argparse.Namespace, database_url: str) -> dict[str, Any]:
    tmp = tempfile.TemporaryDirectory(prefix="rollout-load-")
    with tmp, _servers(database_url, Path(tmp.name), args.workers) as urls:
        plan = Plan(
            urls=urls,
            experiments=_experiments(database_url, args.experiments),
            ws_clients=args.ws_clients,
            rate=args.rate,
            query_rate=args.query_rate,
            query_tasks=args.query_tasks,
            checkpoint_every=args.checkpoint_every,
            checkpoint_bytes=args.checkpoint_kb * 1024,
        )
        total = _drive(plan, args.ws_procs, args.warmup, args.duration)
        for exp_id, rows in total.rows_sent.items():
            stored = _stored_rows(urls[0], exp_id)
            if stored != rows:
                _error(total, f"experiment {exp_id}: {stored} rows stored, {rows} sent")
    return summarize(args, total)


def _drive(plan: Plan, ws_procs: int, warmup_s: float, duration_s: float) -> Result:
    """Run the load processes (jobs, storm, health) and the websocket processes; merge what
    they measured."""
    ctx = mp.get_context("spawn")
    out, expected = ctx.Queue(), ctx.Queue()
    gate = _Gate(ctx.Queue(), ctx.Queue())
    shards = max(1, ws_procs)
    followers = [
        ctx.Process(target=_run_followers, args=(plan, s, shards, expected, gate, out))
        for s in range(shards)
    ]
    loads = [ctx.Process(target=_run_load, args=(plan, r, gate, out)) for r in LOAD_ROLES]
    processes = [*followers, *loads]
    for process in processes:
        process.start()
    total = Result()
    try:
        for _ in processes:
            gate.readies.get(timeout=300)
        start_at = time.monotonic() + warmup_s
        for _ in loads:
            gate.go.put((start_at, start_at + duration_s))
        pending = len(processes)
        while pending:
            role, fields = out.get(timeout=warmup_s + duration_s + 120)
            pending -= 1
            result = Result(**fields)
            total.merge(result)
            if role == "jobs":
                for _ in followers:
                    expected.put(result.rows_sent)
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return total


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def summarize(args: argparse.Namespace, r: Result) -> dict[str, Any]:
    return {
        "errors": len(r.errors),
        "error_samples": r.errors[:10],
        "posts_per_s": r.posts / args.duration,
        "points_per_s": r.points / args.duration,
        "messages": r.messages,
        "reconnects": r.reconnects,
        "latency_samples": len(r.latencies_ms),
        "latency_p50_ms": _pct(r.latencies_ms, 0.5),
        "latency_p99_ms": _pct(r.latencies_ms, 0.99),
        "health_samples": len(r.health_ms),
        "health_p50_ms": _pct(r.health_ms, 0.5),
        "health_p99_ms": _pct(r.health_ms, 0.99),
        "queries": len(r.query_ms),
        "query_p50_ms": _pct(r.query_ms, 0.5),
        "query_p99_ms": _pct(r.query_ms, 0.99),
    }


def command(args: argparse.Namespace) -> str:
    return (
        f".venv/bin/python -m benchmarks.load_bench --workers {args.workers} "
        f"--experiments {args.experiments} --ws-clients {args.ws_clients} "
        f"--rate {args.rate:g} --query-rate {args.query_rate:g} --query-tasks {args.query_tasks} "
        f"--duration {args.duration:g} "
        "--write docs/benchmarks.md"
    )


def markdown(args: argparse.Namespace, s: dict[str, Any]) -> str:
    def ok(good: bool) -> str:
        return "met" if good else "**missed**"

    rows = [
        ("errors (failed requests, websocket failures, missing steps, count mismatches)",
         f"{s['errors']}", "0", ok(s["errors"] == 0)),
        ("ingest -> websocket, p50 (ms)", f"{s['latency_p50_ms']:.1f}", "", ""),
        ("ingest -> websocket, p99 (ms)", f"{s['latency_p99_ms']:.1f}", "< 100",
         ok(s["latency_p99_ms"] < 100)),
        ("/health, p50 (ms)", f"{s['health_p50_ms']:.1f}", "", ""),
        ("/health, p99 (ms)", f"{s['health_p99_ms']:.1f}", "< 50", ok(s["health_p99_ms"] < 50)),
        ("query storm, p50 / p99 (ms)", f"{s['query_p50_ms']:.1f} / {s['query_p99_ms']:.1f}",
         "", ""),
        ("ingest POSTs/s (points/s)", f"{s['posts_per_s']:.0f} ({s['points_per_s']:,.0f})", "",
         ""),
        ("websocket messages received; 1013 reconnects", f"{s['messages']:,}; {s['reconnects']}",
         "", ""),
        ("samples: latency / health / queries",
         f"{s['latency_samples']:,} / {s['health_samples']:,} / {s['queries']:,}", "", ""),
    ]  # fmt: skip
    lines = [
        START,
        "### Load (benchmarks/load_bench.py)",
        "",
        f"`{command(args)}` — {dt.date.today().isoformat()}, {platform.machine()}, "
        f"{os.cpu_count()} cores (load average {os.getloadavg()[1]:.1f} over the last 5 "
        f"minutes). {args.workers} `rollout serve` processes (jobs disabled) on one PostgreSQL "
        f"database; {args.experiments} simulated jobs ({args.rate:g} iterations/s each, "
        f"{METRICS_PER_ROW} metrics per row, a log line per iteration, a "
        f"{args.checkpoint_kb} kB checkpoint every {args.checkpoint_every} iterations); "
        f"{args.ws_clients} websocket clients; {_storm_words(args)}; /health every "
        f"{HEALTH_EVERY_S * 1000:.0f} ms; {args.duration:g} s measured after "
        f"{args.warmup:g} s of warm-up. Client: our own asyncio client (httpx + websockets) "
        f"in {args.ws_procs + len(LOAD_ROLES)} processes ({args.ws_procs} for the websockets, "
        "one each for the jobs, the query storm and the /health probe); each job iterates on "
        "its own phase.",
        "",
        "| measure | value | target | |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
        END,
    ]
    return "\n".join(lines)


def _storm_words(args: argparse.Namespace) -> str:
    parts = []
    if args.query_rate > 0:
        parts.append(f"a query storm of {args.query_rate:g} queries/s (open loop, Poisson)")
    if args.query_tasks:
        parts.append(f"{args.query_tasks} closed-loop query-storm tasks")
    return " and ".join(parts) or "no query storm"


def write(path: Path, section: str) -> None:
    write_section(
        path, START, END, section, anchor="<!-- service_bench:end -->", heading="## Service"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="API processes (about one per core)")
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--ws-clients", type=int, default=100)
    parser.add_argument("--rate", type=float, default=2.0, help="iterations/s per experiment")
    parser.add_argument(
        "--query-rate",
        type=float,
        default=50.0,
        help="open-loop query storm, queries/s (Poisson arrivals; 0: none)",
    )
    parser.add_argument(
        "--query-tasks",
        type=int,
        default=0,
        help="closed-loop query storm: tasks that each send a query as soon as the last is in",
    )
    parser.add_argument("--checkpoint-every", type=int, default=20, help="0: no checkpoints")
    parser.add_argument("--checkpoint-kb", type=int, default=100)
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument(
        "--ws-procs",
        type=int,
        default=2,
        help="websocket client processes (besides one "
        "process each for the jobs, the query storm and the /health probe)",
    )
    parser.add_argument(
        "--viewers",
        type=int,
        default=0,
        help="viewers mode (benchmarks/load_viewers.py): this many websocket viewers of one "
        "running experiment with a backlog, on one SQLite service",
    )
    parser.add_argument(
        "--backlog-steps", type=int, default=2891, help="viewers mode: backlog rows"
    )
    parser.add_argument("--database-url", help="default: a fresh database on 127.0.0.1:5432")
    parser.add_argument("--write", type=Path, help="update this markdown file's Load section")
    args = parser.parse_args()
    if args.viewers:
        from benchmarks import load_viewers

        summary = load_viewers.run(args)
        section = load_viewers.markdown(args, summary)
        print(json.dumps(summary, indent=2))
        print(section)
        if args.write:
            load_viewers.write(args.write, section)
        raise SystemExit(1 if summary["errors"] else 0)
    if args.database_url:
        summary = run(args, args.database_url)
    else:
        from tests.service.postgres import fresh_database

        with fresh_database() as url:
            summary = run(args, url)
    section = markdown(args, summary)
    print(json.dumps(summary, indent=2))
    print(section)
    if args.write:
        write(args.write, section)
    if summary["errors"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
