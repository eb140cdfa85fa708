"""Viewers of an experiment that really trains: where /health's time goes on a small machine.

`load_bench --viewers` (benchmarks/load_viewers.py) measures a crowd of websocket viewers of one
experiment whose job is simulated, on a service with jobs disabled. Here the service runs with
jobs enabled (its own local Ray head), and with `--train` (the default) the experiment is a real
CartPole-v1 run on the same cores, submitted over REST as a user would:

1. `rollout serve` on a fresh temp data dir (tests/serve_process.py), jobs enabled; wait for the
   head's warm-up job to end (GET /api/v1/cluster).
2. `--train`: POST /api/v1/experiments (CartPole-v1, stop.env_steps 50M, stop.wall_seconds a bit
   over the measurement), wait until it runs and has reported metrics, then `--train-warmup`
   seconds more (its backlog). `--no-train`: the control, same service minus the training: one
   running experiment with a job token (as load_bench makes them), `--backlog-steps` rows
   preloaded, whose Ray job is an idle `sleep` (else the reconciler fails a running experiment
   without a Ray job after 30 s), and a simulated job (load_bench's) posting rows at `--rate`.
3. `--viewers` websocket viewers of it (load_viewers' viewer: whole backlog, then live data),
   opened at one instant from `--ws-procs` client processes, and /health probed every 50 ms from
   a process of its own (and, unless `--ray-probe-every 0`, the Ray dashboard's /api/version,
   which every /health of a jobs-enabled service awaits), for `--duration` seconds.
   Every viewer must then have every step stored by the end of the window.
4. Over the window, from /proc: CPU seconds of the API process (its main thread apart), of the
   Ray job and its workers, of the Ray daemons (everything below `rollout serve`), of the client
   processes and of the rest of the machine; the API threads' time waiting on a run queue
   (/proc/<pid>/task/<tid>/schedstat, 2nd field): runnable but not running, which shows as
   /health latency without API CPU; load average and CPU pressure (/proc/pressure/cpu).
5. `--profile`: py-spy (`record --idle --threads`, 200 Hz, non-blocking unless
   `--profile-blocking`) on the API process over the window; the main thread's samples split
   into the event loop waiting and Python running (on a CPU or runnable), top frames by own
   samples, by inclusive samples, and the other threads' busiest frames. py-spy's own CPU (a
   quarter of a core at 200 Hz on this service's dozen threads) shows under `clients`.

Prints a table and writes benchmarks/results/<stamp>-viewers-training.json (and the profile).
The experiment and the server are stopped at the end whatever happens; processes are killed
only by the pids this script started (the server's process tree, noted while it runs).

    .venv/bin/python -m benchmarks.viewers_training --viewers 300 --duration 30 --train --profile
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import multiprocessing as mp
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import load_bench as lb  # noqa: E402
from benchmarks import load_viewers as lv  # noqa: E402
from trainer.process_guard import set_session_niceness  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FINISHED = {"succeeded", "failed", "stopped"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_EVERY_S = 0.5
SERVE_ENV = {
    "ROLLOUT_JOBS_ENABLED": "true",
    "ROLLOUT_API_TOKEN": None,
    "ROLLOUT_DATABASE_URL": None,  # SQLite in the data dir
    "ROLLOUT_RAY_ADDRESS": None,  # a private local head
    "RAY_ADDRESS": None,
    "ROLLOUT_JOBS_USER": None,
    "ROLLOUT_MIN_FREE_BYTES": "0",
}
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


# --- /proc ----------------------------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _stat_fields(text: str) -> list[str]:
    return text[text.rindex(")") + 2 :].split()


def _all_procs() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, start time, utime + stime in ticks) of every process."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (text := _read(f"/proc/{name}/stat")):
            f = _stat_fields(text)
            out[int(name)] = (int(f[1]), int(f[19]), int(f[11]) + int(f[12]))
    return out


def _cmdline(pid: int) -> list[str]:
    text = _read(f"/proc/{pid}/cmdline") or ""
    return [a for a in text.split("\0") if a]


def _label(pid: int) -> str:
    argv = _cmdline(pid)
    if len(argv) == 1 and " " in argv[0]:  # a process title: "ray-dashboard-JobHead-0 (...)"
        if not argv[0].startswith("/"):
            return argv[0].split()[0]
        argv = argv[0].split()
    if not argv:
        return (_read(f"/proc/{pid}/comm") or "?").strip()
    if argv[0].startswith("ray::"):
        return argv[0].split()[0]
    if "trainer.job" in argv:
        return "trainer.job (driver)"
    if "-m" in argv[:-1]:
        return f"python -m {argv[argv.index('-m') + 1]}"
    if "-c" in argv:
        return "python -c"
    base = os.path.basename(argv[0])
    if base.startswith("python") and len(argv) > 1:
        script = next((a for a in argv[1:] if not a.startswith("-")), argv[1])
        return os.path.basename(script)
    return base


def _tasks(pid: int) -> dict[int, dict[str, Any]]:
    """tid -> name, on-CPU ns, run-queue wait ns, timeslices, CPU ticks of a process's threads."""
    out = {}
    with contextlib.suppress(OSError):
        for name in os.listdir(f"/proc/{pid}/task"):
            base = f"/proc/{pid}/task/{name}"
            sched, stat = _read(f"{base}/schedstat"), _read(f"{base}/stat")
            if not sched or not stat:
                continue
            run_ns, wait_ns, slices = (int(x) for x in sched.split()[:3])
            f = _stat_fields(stat)
            out[int(name)] = {
                "name": (_read(f"{base}/comm") or "?").strip(),
                "run_ns": run_ns,
                "wait_ns": wait_ns,
                "slices": slices,
                "ticks": int(f[11]) + int(f[12]),
            }
    return out


def _ctxt_switches(pid: int, tid: int) -> dict[str, int]:
    out = {}
    for line in (_read(f"/proc/{pid}/task/{tid}/status") or "").splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            out[key] = int(value)
    return out


def _machine() -> dict[str, float]:
    """Busy and total CPU ticks of the machine, CPU pressure (µs some task waited)."""
    first = (_read("/proc/stat") or "cpu 0 0 0 0 0").splitlines()[0].split()[1:]
    ticks = [int(x) for x in first[:8]]
    total = sum(ticks)
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    psi = float("nan")
    for line in (_read("/proc/pressure/cpu") or "").splitlines():
        if line.startswith("some"):
            psi = float(line.rsplit("total=", 1)[1])
    return {"busy": total - idle, "total": total, "psi_some_us": psi}


# --- what the window cost, from /proc -----------------------------------------------------------


@dataclass
class Watch:
    """CPU of the server's process tree and of our client processes over the window."""

    api_pid: int
    clients: dict[str, int] = field(default_factory=dict)  # label -> pid
    first: dict[tuple[int, int], int] = field(default_factory=dict)
    last: dict[tuple[int, int], int] = field(default_factory=dict)
    info: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)  # label, group
    seen: dict[int, int] = field(default_factory=dict)  # server tree: pid -> start time
    started: bool = False
    begin: dict[str, Any] = field(default_factory=dict)
    end: dict[str, Any] = field(default_factory=dict)

    def _tree(self, procs: dict[int, tuple[int, int, int]]) -> dict[int, tuple[str, str]]:
        """pid -> (label, group) of the server's process tree."""
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        groups: dict[int, tuple[str, str]] = {}
        if self.api_pid not in procs:
            return groups
        groups[self.api_pid] = ("api", "api")
        todo = [self.api_pid]
        while todo:
            parent = todo.pop()
            for pid in children.get(parent, []):
                label = self.info.get((pid, procs[pid][1]), ("",))[0] or _label(pid)
                if groups[parent][1] == "ray job + workers" or (
                    label.startswith("ray::") and label not in RAY_AGENTS
                ):
                    groups[pid] = (label, "ray job + workers")
                else:
                    groups[pid] = (label, "ray daemons")
                todo.append(pid)
        return groups

    def note_tree(self) -> None:
        """Remember the server's processes (pid + start time), for the clean-up."""
        procs = _all_procs()
        for pid in self._tree(procs):
            self.seen[pid] = procs[pid][1]

    def sample(self) -> None:
        procs = _all_procs()
        groups = self._tree(procs)
        for pid in groups:
            self.seen[pid] = procs[pid][1]
        for label, pid in self.clients.items():
            if pid in procs:
                groups[pid] = (label, "clients")
        for pid, (label, group) in groups.items():
            _, start, ticks = procs[pid]
            key = (pid, start)
            if key not in self.first:
                # Present at the start: its CPU since then; born during the window: all of it.
                self.first[key] = ticks if not self.started else 0
                self.info[key] = (label, group)
            self.last[key] = ticks
        self.started = True

    def mark(self) -> dict[str, Any]:
        return {
            "t": time.monotonic(),
            "machine": _machine(),
            "loadavg": os.getloadavg(),
            "tasks": _tasks(self.api_pid),
            "ctxt": _ctxt_switches(self.api_pid, self.api_pid),
        }

    def run(self, start_at: float, end_at: float, on_start: Any = None) -> None:
        time.sleep(max(0.0, start_at - time.monotonic()))
        if on_start is not None:
            on_start()
        self.begin = self.mark()
        self.sample()
        while time.monotonic() < end_at:
            time.sleep(max(0.0, min(SAMPLE_EVERY_S, end_at - time.monotonic())))
            self.sample()
        self.end = self.mark()

    def report(self) -> dict[str, Any]:
        if not self.begin or not self.end:
            return {}
        window = self.end["t"] - self.begin["t"]
        by_group: Counter[str] = Counter()
        by_label: dict[str, Counter[str]] = {}
        for key, last in self.last.items():
            label, group = self.info[key]
            seconds = (last - self.first[key]) / CLK_TCK
            by_group[group] += seconds
            by_label.setdefault(group, Counter())[label] += seconds
        m0, m1 = self.begin["machine"], self.end["machine"]
        cores = os.cpu_count() or 1
        machine_busy = (m1["busy"] - m0["busy"]) / CLK_TCK
        ours = sum(by_group.values())
        t0, t1 = self.begin["tasks"], self.end["tasks"]
        threads = []
        for tid, now in t1.items():
            was = t0.get(tid, {"run_ns": 0, "wait_ns": 0, "slices": 0, "ticks": 0})
            threads.append(
                {
                    "tid": tid,
                    "name": now["name"],
                    "main": tid == self.api_pid,
                    "cpu_s": (now["run_ns"] - was["run_ns"]) / 1e9,
                    "runqueue_wait_s": (now["wait_ns"] - was["wait_ns"]) / 1e9,
                    "timeslices": now["slices"] - was["slices"],
                }
            )
        threads.sort(key=lambda t: (not t["main"], -t["cpu_s"]))
        main = next((t for t in threads if t["main"]), None)
        c0, c1 = self.begin["ctxt"], self.end["ctxt"]
        return {
            "window_s": window,
            "cores": cores,
            "cpu_s": {
                **{g: round(s, 2) for g, s in by_group.most_common()},
                "rest of the machine": round(max(0.0, machine_busy - ours), 2),
                "machine busy": round(machine_busy, 2),
            },
            "cpu_s_by_process": {
                g: {k: round(v, 2) for k, v in c.most_common(8) if v > 0}
                for g, c in by_label.items()
            },
            "machine_busy_share": machine_busy / (window * cores) if window else float("nan"),
            "cpu_pressure_some_share": (m1["psi_some_us"] - m0["psi_some_us"]) / 1e6 / window
            if window
            else float("nan"),
            "loadavg_before": self.begin["loadavg"],
            "loadavg_after": self.end["loadavg"],
            "api_main_thread": None
            if main is None
            else {
                **{k: main[k] for k in ("cpu_s", "runqueue_wait_s", "timeslices")},
                "off_cpu_not_runnable_s": max(
                    0.0, window - main["cpu_s"] - main["runqueue_wait_s"]
                ),
                "nonvoluntary_switches": c1.get("nonvoluntary_ctxt_switches", 0)
                - c0.get("nonvoluntary_ctxt_switches", 0),
                "voluntary_switches": c1.get("voluntary_ctxt_switches", 0)
                - c0.get("voluntary_ctxt_switches", 0),
            },
            "api_threads": {
                "cpu_s": round(sum(t["cpu_s"] for t in threads), 3),
                "runqueue_wait_s": round(sum(t["runqueue_wait_s"] for t in threads), 3),
                "busiest": [t for t in threads if t["cpu_s"] > 0 or t["main"]][:8],
            },
        }


# --- client processes (each its own: a busy viewer loop must not delay the /health clock) --------


async def _viewer_shard(plan: lb.Plan, count: int, expected: Any) -> dict[str, Any]:
    """`count` of load_viewers' viewers, opened at the start; then every step stored by the end
    of the window (sent by the parent) must reach each of them within SETTLE_S."""
    result = lv.ViewerResult()
    done = asyncio.Event()
    seen: list[set[int]] = [set() for _ in range(count)]
    await asyncio.sleep(max(0.0, plan.start_at - time.monotonic()))
    tasks = [asyncio.create_task(lv._view(plan, result, s, done)) for s in seen]
    wait_s = plan.end_at - time.monotonic() + 300
    try:
        want = set(await asyncio.to_thread(expected.get, True, wait_s))
    except queue.Empty:
        want = set()
        result.errors.append("never told which steps to expect")
    deadline = time.monotonic() + lv.SETTLE_S
    while time.monotonic() < deadline and any(want - s for s in seen):
        await asyncio.sleep(0.2)
    done.set()
    _, pending = await asyncio.wait(tasks, timeout=90)
    for task in pending:
        task.cancel()
        result.errors.append("viewer did not end")
    missing = [len(want - s) for s in seen]
    for m in missing:
        if m:
            result.errors.append(f"viewer: {m} of {len(want)} steps never came")
    return {
        **asdict(result),
        "incomplete": sum(1 for m in missing if m),
        "missing_steps": sum(missing),
        "want": len(want),
    }


def _run_viewer_shard(
    plan: lb.Plan, count: int, gate: Any, expected: Any, out: Any, nice: int = 0
) -> None:
    import websockets.asyncio.client  # noqa: F401  (imported before the clock starts)

    if nice:  # before any thread starts: every thread of the shard inherits it
        # A session of its own, at that niceness as a whole: with autogroup scheduling a nice
        # value counts only within a session (trainer/process_guard.py).
        os.setsid()
        set_session_niceness(os.getpid(), nice)
        os.nice(nice)
    lb._quiet_gc()
    plan = gate.wait(plan)
    out.put(("viewers", asyncio.run(_viewer_shard(plan, count, expected))))


async def _probe(url: str, path: str, every_s: float, start_at: float, end_at: float) -> dict:
    """GET `path` every `every_s` (the next one as soon as a slow one is answered), timed."""
    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        while time.monotonic() < end_at:
            start = time.monotonic()
            try:
                response = await client.get(path)
                samples.append((start - start_at, (time.monotonic() - start) * 1000))
                if response.status_code != 200 or (
                    path == "/health" and response.json().get("status") != "ok"
                ):
                    errors.append(f"{path}: {response.status_code} {response.text[:200]}")
            except (httpx.HTTPError, ValueError) as exc:
                errors.append(f"{path}: {type(exc).__name__}")
            await asyncio.sleep(max(0.0, start + every_s - time.monotonic()))
    return {"samples": samples, "errors": errors[:50], "error_count": len(errors)}


def _run_probes(plan: lb.Plan, ray_url: str | None, ray_every: float, gate: Any, out: Any) -> None:
    lb._quiet_gc()
    plan = gate.wait(plan)

    async def main() -> dict[str, Any]:
        probes = [_probe(plan.urls[0], "/health", lb.HEALTH_EVERY_S, plan.start_at, plan.end_at)]
        if ray_url and ray_every > 0:
            probes.append(_probe(ray_url, "/api/version", ray_every, plan.start_at, plan.end_at))
        results = await asyncio.gather(*probes)
        return {"health": results[0], "ray": results[1] if len(results) > 1 else None}

    out.put(("probes", asyncio.run(main())))


# --- the experiment ----------------------------------------------------------------------------


def _wait_warmup(api: httpx.Client, timeout_s: float) -> dict[str, Any]:
    """The cluster view once the head's warm-up job has ended (or the timeout passed)."""
    deadline = time.monotonic() + timeout_s
    cluster: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            cluster = api.get("/cluster").json()
            warmup = cluster.get("warmup") or {}
            if cluster.get("dashboard_url") and warmup.get("state") not in ("pending", "running"):
                return cluster
        time.sleep(1)
    print(f"warning: Ray warm-up not over after {timeout_s:.0f} s: {cluster.get('warmup')}")
    return cluster


def _submit_training(api: httpx.Client, wall_s: float, timeout_s: float) -> int:
    config = {
        "env_id": "CartPole-v1",
        "stop": {"env_steps": 50_000_000, "wall_seconds": wall_s, "episode_return_mean": None},
    }
    body = {"name": "viewers-training", "config": config, "tags": ["benchmark"]}
    response = api.post("/experiments", json=body)
    response.raise_for_status()
    exp_id = response.json()["id"]
    deadline = time.monotonic() + timeout_s
    exp: dict[str, Any] = {}
    while time.monotonic() < deadline:
        exp = api.get(f"/experiments/{exp_id}").json()
        if exp["status"] in FINISHED:
            logs = api.get(f"/experiments/{exp_id}/logs").text[-2000:]
            raise RuntimeError(f"experiment {exp_id} ended before the window: {exp}\n{logs}")
        if exp["status"] == "running" and (exp.get("env_steps") or 0) > 0:
            return exp_id
        time.sleep(1)
    raise TimeoutError(f"experiment {exp_id} not running with metrics in {timeout_s:.0f} s: {exp}")


def _sleep_job(dashboard_url: str, seconds: float, timeout_s: float) -> str:
    """An idle Ray job (`sleep`) for the simulated experiment to own."""
    sid = f"viewers-bench-sleep-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    body = {"entrypoint": f"sleep {math.ceil(seconds)}", "submission_id": sid}
    httpx.post(f"{dashboard_url}/api/jobs/", json=body, timeout=60).raise_for_status()
    deadline = time.monotonic() + timeout_s
    info: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            info = httpx.get(f"{dashboard_url}/api/jobs/{sid}", timeout=10).json()
            if info.get("status") == "RUNNING":
                return sid
            if info.get("status") in ("FAILED", "STOPPED", "SUCCEEDED"):
                break
        time.sleep(0.5)
    raise RuntimeError(f"the idle Ray job did not start: {info}")


def _simulated_experiment(data_dir: Path, ray_job_id: str) -> tuple[int, str]:
    """A running experiment owning `ray_job_id`, with a job token (load_bench's, plus the job)."""
    from app.core.db import make_engine, make_sessionmaker, transaction
    from app.experiments import service as experiments
    from app.experiments.models import Experiment
    from app.experiments.schemas import ExperimentCreate

    engine = make_engine(f"sqlite:///{data_dir / 'rollout.db'}")
    try:
        with transaction(make_sessionmaker(engine)) as session:
            exp = experiments.create(
                session,
                ExperimentCreate(name="viewers (simulated job)", config={"env_id": "CartPole-v1"}),
            )
            for to in ("queued", "running"):
                experiments.transition(session, exp.id, to, "viewers benchmark")
            row = session.get(Experiment, exp.id)
            assert row is not None
            row.ray_job_id = ray_job_id
            exp_id, token = exp.id, experiments.issue_job_token(session, exp.id)
    finally:
        engine.dispose()
    return exp_id, token


def _stop_experiment(api: httpx.Client, exp_id: int, timeout_s: float = 60) -> str:
    status = "?"
    with contextlib.suppress(httpx.HTTPError):
        api.post(f"/experiments/{exp_id}/stop")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            status = api.get(f"/experiments/{exp_id}").json()["status"]
            if status in FINISHED:
                break
        time.sleep(1)
    return status


def _stored_steps(api: httpx.Client, exp_id: int) -> list[int]:
    response = api.get(
        f"/experiments/{exp_id}/metrics", params={"names": "time_s", "max_points": 100_000}
    )
    response.raise_for_status()
    return response.json()["series"].get("time_s", {"step": []})["step"]


# --- py-spy ---------------------------------------------------------------------------------------


def _py_spy() -> str:
    exe = Path(sys.executable).with_name("py-spy")
    if not exe.exists():
        print("py-spy is missing: installing it into the venv", flush=True)
        pip = [sys.executable, "-m", "pip", "install", "py-spy"]
        if subprocess.run([*pip[:3], "--version"], capture_output=True).returncode != 0:
            uv = shutil.which("uv")
            if uv is None:
                raise RuntimeError("neither pip nor uv is there to install py-spy")
            pip = [uv, "pip", "install", "--python", sys.executable, "py-spy"]
        subprocess.run(pip, check=True, timeout=300)
    return str(exe)


# A main-thread sample whose leaf is one of these is the event loop waiting for work: uvloop's
# loop is native code, so Runner.run is the last Python frame while it waits in epoll (or runs
# its own C code, which no Python frame shows); asyncio's own loop waits in selectors' select().
LOOP_WAIT = {"Runner.run (asyncio/runners.py)"}
# The frames a loop iteration's work runs on: what is above them is a request, a websocket...
LOOP_DISPATCH = {"Runner.run (asyncio/runners.py)", "Handle._run (asyncio/events.py)"}
FRAME = re.compile(r"^(?P<name>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")


def _short(path: str) -> str:
    for marker in ("site-packages/", "/lib/python3.11/", "/lib/python3.12/"):
        if marker in path:
            return path.split(marker, 1)[1]
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(ROOT))
    return path


def _function(frame: str) -> str:
    """'name (file:line)' -> 'name (file)'."""
    m = FRAME.match(frame)
    return f"{m['name']} ({m['file']})" if m else frame


def _stacks(path: Path, fmt: str, rate: int) -> list[tuple[int, str, tuple[str, ...], int]]:
    """(tid, thread name, frames root first as 'name (file)', samples) from py-spy's output."""
    out = []
    if fmt == "raw":
        head = re.compile(r"thread \((0x[0-9a-fA-F]+|\d+)\)(?:: (.*))?")
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            stack, count = line.rsplit(" ", 1)
            parts = stack.split(";")
            m = head.fullmatch(parts[0])
            tid, name = (int(m[1], 0), m[2] or "") if m else (-1, parts[0])
            frames = tuple(_function(f) for f in (parts[1:] if m else parts))
            out.append((tid, name, frames, int(count)))
    else:
        data = json.loads(path.read_text())
        names = [f"{f['name']} ({_short(f.get('file') or '?')})" for f in data["shared"]["frames"]]
        head = re.compile(r'Thread (\d+)(?: "(.*)")?')
        for profile in data["profiles"]:
            m = head.match(profile.get("name", ""))
            tid, name = (int(m[1]), m[2] or "") if m else (-1, profile.get("name", ""))
            counts: Counter[tuple[str, ...]] = Counter()
            for sample, weight in zip(profile["samples"], profile["weights"], strict=True):
                counts[tuple(names[i] for i in sample)] += max(1, round(weight * rate))
            out.extend((tid, name, frames, n) for frames, n in counts.items())
    return out


def _idle_leaf(frame: str) -> bool:
    """Frames a thread that waits for work sits in (heuristic, for the non-main threads)."""
    name = frame.split(" (", 1)[0]
    return name.rsplit(".", 1)[-1] in {
        "select", "poll", "wait", "sleep", "_worker", "get", "accept", "recv", "recv_into",
        "_wait_for_tstate_lock", "readline", "read",
    }  # fmt: skip


def summarize_profile(path: Path, fmt: str, rate: int, api_pid: int, window_s: float) -> dict:
    stacks = _stacks(path, fmt, rate)
    main_tid = api_pid if any(s[0] == api_pid for s in stacks) else None
    is_main = [s[0] == api_pid if main_tid else s[1] == "MainThread" for s in stacks]
    main = [s for s, m in zip(stacks, is_main, strict=True) if m]
    total = sum(s[3] for s in main)
    idle = own = unplaced = 0
    own_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for _, _, frames, n in main:
        leaf = frames[-1] if frames else ""
        if leaf in LOOP_WAIT or leaf.endswith(".select (selectors.py)"):
            idle += n
            continue
        own += n
        own_counts[leaf] += n
        entry = max((i for i, f in enumerate(frames) if f in LOOP_DISPATCH), default=None)
        if entry is None:
            unplaced += n  # no event-loop frame: a torn (non-blocking) sample, or start-up
        for frame in set(frames[(-1 if entry is None else entry) + 1 :]):
            inclusive[frame] += n
    others: Counter[str] = Counter()
    per_thread: Counter[str] = Counter()
    for (tid, name, frames, n), m in zip(stacks, is_main, strict=True):
        if m or not frames:
            continue
        per_thread[name or str(tid)] += n
        if not _idle_leaf(frames[-1]):
            others[f"[{name or tid}] {frames[-1]}"] += n
    return {
        "file": str(path),
        "main_thread_samples": total,
        "expected_samples": round(rate * window_s),
        "main_samples_without_loop_frame": unplaced,
        "main_idle_samples": idle,
        "main_busy_samples": own,
        "main_busy_share": own / total if total else float("nan"),
        "top_own": own_counts.most_common(15),
        "top_inclusive": inclusive.most_common(15),
        # The service's own frames (the generic ASGI chain above tops the list otherwise).
        "top_inclusive_app": [(f, n) for f, n in inclusive.most_common() if " (app/" in f][:15],
        "other_threads_samples": dict(per_thread.most_common(12)),
        "other_threads_top_busy": others.most_common(10),
    }


# --- the run -----------------------------------------------------------------------------------


def _pcts(values: list[float]) -> dict[str, float]:
    return {
        "samples": len(values),
        "p50_ms": lb._pct(values, 0.5),
        "p99_ms": lb._pct(values, 0.99),
        "max_ms": max(values, default=float("nan")),
    }


def measure(
    args: argparse.Namespace,
    api_pid: int,
    plan: lb.Plan,
    ray_url: str | None,
    api: httpx.Client,
    watch: Watch,
    out_dir: Path,
    stamp: str,
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out, expected = ctx.Queue(), ctx.Queue()
    gate = lb._Gate(ctx.Queue(), ctx.Queue())
    shards = max(1, args.ws_procs)
    counts = [len(range(s, args.viewers, shards)) for s in range(shards)]
    procs: dict[str, Any] = {
        f"viewers-{i}": ctx.Process(
            target=_run_viewer_shard,
            args=(plan, n, gate, expected, out, args.viewers_nice),
            daemon=True,
        )
        for i, n in enumerate(counts)
    }
    procs["probes"] = ctx.Process(
        target=_run_probes, args=(plan, ray_url, args.ray_probe_every, gate, out), daemon=True
    )
    if not args.train:
        procs["simulated job"] = ctx.Process(
            target=lb._run_load, args=(plan, "jobs", gate, out), daemon=True
        )
    spy: dict[str, Any] = {"exe": _py_spy()} if args.profile else {}
    for p in procs.values():
        p.start()
    try:
        deadline = time.monotonic() + 300
        for _ in procs:
            gate.readies.get(timeout=max(1.0, deadline - time.monotonic()))
        start_at = time.monotonic() + args.warmup
        end_at = start_at + args.duration
        for _ in procs:
            gate.go.put((start_at, end_at))
        watch.clients.update({label: p.pid for label, p in procs.items()})

        def start_profile() -> None:
            if not args.profile:
                return
            ext = "json" if args.profile_format == "speedscope" else "txt"
            spy["path"] = out_dir / f"{stamp}-viewers-training-profile.{ext}"
            cmd = [
                spy["exe"], "record", "--rate", str(args.profile_rate),
                "--duration", str(math.ceil(args.duration)), "--format", args.profile_format,
                "--idle", "--threads", "--pid", str(api_pid), "-o", str(spy["path"]),
            ]  # fmt: skip
            if not args.profile_blocking:
                cmd.append("--nonblocking")
            spy["log"] = open(out_dir / f"{stamp}-viewers-training-py-spy.log", "w")  # noqa: SIM115
            spy["proc"] = subprocess.Popen(cmd, stdout=spy["log"], stderr=subprocess.STDOUT)
            watch.clients["py-spy"] = spy["proc"].pid

        watcher = threading.Thread(
            target=watch.run, args=(start_at, end_at, start_profile), daemon=True
        )
        watcher.start()

        viewers: list[dict[str, Any]] = []
        probes: dict[str, Any] = {}
        sim: dict[str, Any] = {}
        told = False
        pending = len(procs)
        give_up = end_at + lv.SETTLE_S + 240
        while pending and time.monotonic() < give_up:
            if not told and time.monotonic() >= end_at and (args.train or sim):
                want = _stored_steps(api, plan.experiments[0][0])
                for _ in counts:
                    expected.put(want)
                told = True
            try:
                role, fields = out.get(timeout=0.5)
            except queue.Empty:
                continue
            pending -= 1
            if role == "viewers":
                viewers.append(fields)
            elif role == "probes":
                probes = fields
            else:
                sim = fields or {"rows_sent": {}}
        watcher.join(timeout=30)
        errors: list[str] = []
        if pending:
            errors.append(f"{pending} client processes never reported")
    finally:
        for p in procs.values():
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        if "proc" in spy:
            try:
                spy["proc"].wait(timeout=args.duration + 60)
            except subprocess.TimeoutExpired:
                spy["proc"].kill()
                spy["proc"].wait(timeout=10)
            spy["log"].close()

    live = [s for v in viewers for s in v["live_s"]]
    backlog = [s for v in viewers for s in v["backlog_s"]]
    for v in viewers:
        errors += v["errors"][:20]
    health = probes.get("health") or {"samples": [], "errors": [], "error_count": 0}
    ray = probes.get("ray")
    errors += health["errors"][:10]
    if sim:
        errors += sim.get("errors", [])[:10]
    live_max = max(live, default=float("nan"))
    steady = [ms for t, ms in health["samples"] if not math.isnan(live_max) and t >= live_max]
    report = watch.report()
    summary: dict[str, Any] = {
        "viewers": args.viewers,
        "viewers_nice": args.viewers_nice,
        "viewers_live": len(live),
        "viewers_incomplete": sum(v["incomplete"] for v in viewers),
        "missing_steps": sum(v["missing_steps"] for v in viewers),
        "steps_expected": max((v["want"] for v in viewers), default=0),
        "reconnects": sum(v["reconnects"] for v in viewers),
        "backlog_s": {"p50": lb._pct(backlog, 0.5), "max": max(backlog, default=float("nan"))},
        "live_s": {"p50": lb._pct(live, 0.5), "max": live_max},
        "health": {
            **_pcts([ms for _, ms in health["samples"]]),
            "failed": health["error_count"],
            "after_all_live": _pcts(steady),
            "worst": sorted(health["samples"], key=lambda s: -s[1])[:8],
        },
        "ray_dashboard_version": None
        if ray is None
        else {
            **_pcts([ms for _, ms in ray["samples"]]),
            "failed": ray["error_count"],
            "every_s": args.ray_probe_every,
        },
        "simulated_job": None
        if args.train
        else {"rows_sent": sim.get("rows_sent"), "posts": sim.get("posts")},
        "proc": report,
    }
    if spy.get("path") and Path(spy["path"]).exists():
        summary["profile"] = summarize_profile(
            Path(spy["path"]), args.profile_format, args.profile_rate, api_pid, args.duration
        )
        summary["profile"]["blocking"] = args.profile_blocking
    elif args.profile:
        log = out_dir / f"{stamp}-viewers-training-py-spy.log"
        summary["profile"] = {"error": (log.read_text() if log.exists() else "")[-1500:]}
        errors.append("py-spy wrote no profile")
    if len(live) < args.viewers:
        errors.append(f"{args.viewers - len(live)} viewers never went live")
    summary["errors"] = len(errors)
    summary["error_samples"] = errors[:20]
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    from app.jobs.ray_head import kill_if_alive
    from tests.serve_process import rollout_serve

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.results
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="rollout-viewers-training-"))
    watch: Watch | None = None
    summary: dict[str, Any] = {}
    try:
        with rollout_serve(tmp, env=SERVE_ENV, start_timeout_s=args.start_timeout) as server:
            api_pid = server.proc.pid
            watch = Watch(api_pid)
            watch.note_tree()
            api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
            exp_id: int | None = None
            t0 = time.monotonic()
            try:
                cluster = _wait_warmup(api, args.start_timeout)
                ray_url = cluster.get("dashboard_url")
                print(f"service up, Ray warm-up over: {time.monotonic() - t0:.0f} s", flush=True)
                budget = args.train_warmup + args.warmup + args.duration + lv.SETTLE_S + 420
                if args.train:
                    exp_id = _submit_training(api, budget, args.start_timeout)
                    print(
                        f"experiment {exp_id} training: {time.monotonic() - t0:.0f} s", flush=True
                    )
                    time.sleep(args.train_warmup)
                    plan_token, start_k = "", 0
                else:
                    if not ray_url:
                        raise RuntimeError(f"no Ray dashboard in /cluster: {cluster}")
                    sid = _sleep_job(ray_url, budget, args.start_timeout)
                    exp_id, plan_token = _simulated_experiment(tmp, sid)
                    lv._preload(server.url, exp_id, plan_token, args.backlog_steps)
                    start_k = args.backlog_steps
                    print(f"experiment {exp_id} simulated (Ray job {sid})", flush=True)
                watch.note_tree()
                plan = lb.Plan(
                    urls=[server.url], experiments=[(exp_id, plan_token)], ws_clients=0,
                    rate=args.rate, query_rate=0, query_tasks=0, checkpoint_every=0,
                    checkpoint_bytes=0, start_k=start_k,
                )  # fmt: skip
                exp_before = api.get(f"/experiments/{exp_id}").json()
                rows_before = len(_stored_steps(api, exp_id))
                summary = measure(args, api_pid, plan, ray_url, api, watch, out_dir,
                                  stamp)  # fmt: skip
                summary["experiment"] = {
                    "id": exp_id,
                    "status_during": api.get(f"/experiments/{exp_id}").json()["status"],
                    "env_steps_before": exp_before.get("env_steps"),
                    "rows_before": rows_before,
                    "rows_at_end": summary["steps_expected"],
                }
            finally:
                if exp_id is not None:
                    final = _stop_experiment(api, exp_id)
                    summary.setdefault("experiment", {})["final_status"] = final
                watch.note_tree()
                api.close()
    except BaseException:
        for log in sorted(tmp.glob("server-*.log")):
            print(f"--- {log} (tail) ---\n{log.read_text(errors='replace')[-3000:]}")
        raise
    finally:
        if watch is not None:
            kill_if_alive(watch.seen)  # what the server's stop left behind, by pid + start time
        if args.keep_data:
            print(f"data dir kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python -m benchmarks.viewers_training", *sys.argv[1:]]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **summary,
    }
    path = out_dir / f"{stamp}-viewers-training.json"
    path.write_text(json.dumps(summary, indent=2, default=str))
    summary["json"] = str(path)
    return summary


# --- output ---------------------------------------------------------------------------------------


def table(s: dict[str, Any]) -> str:
    h, a = s["health"], s["health"]["after_all_live"]
    p = s.get("proc") or {}
    cpu = p.get("cpu_s", {})
    mt = p.get("api_main_thread") or {}
    w = p.get("window_s", float("nan"))
    rows = [
        ("mode", "real CartPole-v1 training" if s["args"]["train"] else "simulated job"),
        ("viewers live (backlog, then live data)", f"{s['viewers_live']} of {s['viewers']}"),
        ("viewers missing steps (of steps stored)",
         f"{s['viewers_incomplete']} ({s['missing_steps']} steps; {s['steps_expected']} stored)"),
        ("backlog / live, p50 / max (s)", f"{s['backlog_s']['p50']:.1f} / "
         f"{s['backlog_s']['max']:.1f}; {s['live_s']['p50']:.1f} / {s['live_s']['max']:.1f}"),
        ("/health p50 / p99 / max (ms)",
         f"{h['p50_ms']:.1f} / {h['p99_ms']:.1f} / {h['max_ms']:.1f} ({h['samples']} probes, "
         f"{h['failed']} failed)"),
        ("/health after all viewers live, p99 / max (ms)",
         f"{a['p99_ms']:.1f} / {a['max_ms']:.1f}"),
    ]  # fmt: skip
    if s.get("ray_dashboard_version"):
        r = s["ray_dashboard_version"]
        rows.append(("Ray dashboard /api/version p50 / p99 / max (ms)",
                     f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} / {r['max_ms']:.1f}"))  # fmt: skip
    for group in ("api", "ray job + workers", "ray daemons", "clients", "rest of the machine"):
        if group in cpu:
            detail = (p.get("cpu_s_by_process") or {}).get(group, {})
            top = ", ".join(f"{k} {v:.1f}" for k, v in list(detail.items())[:4])
            rows.append((f"CPU s over {w:.1f} s: {group}", f"{cpu[group]:.2f}" +
                         (f" ({top})" if top and group != "api" else "")))  # fmt: skip
    if mt:
        rows.append(("API main thread: on CPU / run-queue wait / neither (s)",
                     f"{mt['cpu_s']:.2f} / {mt['runqueue_wait_s']:.2f} / "
                     f"{mt['off_cpu_not_runnable_s']:.2f} ({mt['nonvoluntary_switches']} "
                     "preemptions)"))  # fmt: skip
        at = p["api_threads"]
        rows.append(("API all threads: CPU / run-queue wait (s)",
                     f"{at['cpu_s']:.2f} / {at['runqueue_wait_s']:.2f}"))  # fmt: skip
    if p:
        rows.append(("machine: busy, CPU pressure (some), load avg before -> after",
                     f"{p['machine_busy_share']:.0%}, {p['cpu_pressure_some_share']:.0%}, "
                     f"{p['loadavg_before'][0]:.1f} -> {p['loadavg_after'][0]:.1f}"))  # fmt: skip
    prof = s.get("profile") or {}
    if "main_thread_samples" in prof:
        rows.append(("py-spy main thread: busy / idle samples (expected)",
                     f"{prof['main_busy_samples']} / {prof['main_idle_samples']} "
                     f"({prof['expected_samples']}); busy {prof['main_busy_share']:.0%}"),
                     )  # fmt: skip
    rows.append(("errors", f"{s['errors']}"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if "top_own" in prof:
        lines.append("py-spy, main thread busy, top frames by own samples:")
        lines += [f"  {n:6d}  {f}" for f, n in prof["top_own"][:10]]
        lines.append("py-spy, main thread busy, the service's frames by inclusive samples:")
        lines += [f"  {n:6d}  {f}" for f, n in prof["top_inclusive_app"][:10]]
        lines.append("py-spy, other threads, busiest leaf frames:")
        lines += [f"  {n:6d}  {f}" for f, n in prof["other_threads_top_busy"][:6]]
    elif prof.get("error"):
        lines.append(f"py-spy: {prof['error'][-500:]}")
    if s.get("error_samples"):
        lines.append("error samples: " + "; ".join(s["error_samples"][:5]))
    return "\n".join(lines)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.viewers_training", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--viewers", type=int, default=300)
    parser.add_argument("--ws-procs", type=int, default=2, help="viewer client processes")
    parser.add_argument(
        "--viewers-nice",
        type=int,
        default=0,
        choices=range(20),
        metavar="N",
        help="run the viewer clients in a session of their own at niceness N (19: as if they "
        "were browsers on other machines, taking only the CPU the service and the training "
        "leave)",
    )
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds")
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="seconds from the clients' ready to the window"
    )
    parser.add_argument(
        "--train",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a real CartPole-v1 run (default); --no-train: a simulated job at --rate",
    )
    parser.add_argument(
        "--train-warmup", type=float, default=15.0, help="seconds of training before the window"
    )
    parser.add_argument("--rate", type=float, default=2.0, help="--no-train: iterations/s")
    parser.add_argument("--backlog-steps", type=int, default=200, help="--no-train: rows first")
    parser.add_argument(
        "--ray-probe-every",
        type=float,
        default=0.1,
        help="seconds between probes of the Ray dashboard's /api/version (0: none)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy the API over the window")
    parser.add_argument("--profile-format", choices=("raw", "speedscope"), default="raw")
    parser.add_argument("--profile-rate", type=int, default=200)
    parser.add_argument(
        "--profile-blocking",
        action="store_true",
        help="let py-spy pause the API for each sample (default: --nonblocking)",
    )
    parser.add_argument(
        "--start-timeout", type=float, default=300.0, help="bound on each set-up wait (s)"
    )
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--keep-data", action="store_true", help="keep the temp data dir")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    summary = run(args)
    print(table(summary))
    print(f"wrote {summary['json']}")
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
