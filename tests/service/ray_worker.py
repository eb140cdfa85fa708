"""A second Ray node on this machine, joined to a head we started: for placement tests.

Ray rewrites the loopback names it knows (`localhost`, `127.0.0.1`, `::1`) in an `--address` to
the machine's own IP, but no other address of the loopback range: both nodes use
`NODE_IP` (127.0.0.2), so the cluster's traffic never leaves the loopback interface. The head
must be started with `node_ip=NODE_IP`.

Like the service's own head (app.jobs.ray_head), it runs `ray start --block` in its own process
session on explicitly chosen free ports (never 6379) and is stopped by its own pid with
SIGTERM, then whatever it left behind by pid; `ray stop` is never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.jobs.ray_head import LocalRayHead, descendants, free_ports, kill_if_alive
from trainer.wire import RAY_ENV

# Loopback, but not one of the names Ray rewrites to the machine's external address.
NODE_IP = "127.0.0.2"


@dataclass
class LocalRayWorker:
    """A worker node with `num_cpus` CPUs and the custom resources `resources`."""

    head: LocalRayHead
    num_cpus: int
    resources: dict[str, float]
    object_store_bytes: int = 128 * 1024**2
    start_timeout_s: float = 60.0
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    log_path: Path | None = field(default=None, init=False)

    def start(self) -> LocalRayWorker:
        assert self.head.temp_dir is not None
        deadline = time.monotonic() + self.start_timeout_s
        while (before := self._cpus()) is None:  # the head reports its resources soon after
            if time.monotonic() > deadline:
                raise TimeoutError(f"the head at {self.head.dashboard_url} reports no CPUs")
            time.sleep(0.5)
        node_mgr, obj_mgr, agent_listen, agent_grpc, runtime_env, metrics = free_ports(6)
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray_bin) if ray_bin.exists() else "ray",
            "start",
            f"--address={self.head.address}",
            "--block",
            f"--node-ip-address={self.head.node_ip}",
            f"--num-cpus={self.num_cpus}",
            f"--resources={json.dumps(self.resources)}",
            f"--node-manager-port={node_mgr}",
            f"--object-manager-port={obj_mgr}",
            f"--dashboard-agent-listen-port={agent_listen}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={runtime_env}",
            f"--metrics-export-port={metrics}",
            f"--object-store-memory={self.object_store_bytes}",
            "--disable-usage-stats",
        ]
        self.log_path = self.head.temp_dir / "worker.log"
        log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the node
        self.process = subprocess.Popen(
            cmd,
            # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (which keeps a single node on 127.0.0.1)
            # makes `ray start --address` refuse to join.
            env={**os.environ, **RAY_ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_joined(before)
        return self

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.log_path.read_text() if self.log_path else "")[-2000:]
        return ""

    def _cpus(self) -> float | None:
        """The cluster's total CPUs as the head's dashboard reports them."""
        with contextlib.suppress(httpx.HTTPError, KeyError, ValueError, TypeError):
            status = httpx.get(f"{self.head.dashboard_url}/api/cluster_status", timeout=3)
            usage = status.json()["data"]["clusterStatus"]["loadMetricsReport"]["usage"]
            return float(usage["CPU"][1])
        return None

    def _wait_joined(self, before: float) -> None:
        """Until the cluster's CPUs have grown by ours (the dashboard's keys are camel-cased,
        so the custom resource's own name is not what it reports)."""
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the worker node exited early: {self.log_tail()}")
            cpus = self._cpus()
            if cpus is not None and cpus >= before + self.num_cpus:
                return
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"the worker node did not join in {self.start_timeout_s}s")

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.process is None or self.process.poll() is not None:
            self.process = None
            return
        pgid = os.getpgid(self.process.pid)
        spawned = descendants(self.process.pid)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        kill_if_alive(spawned)
        self.process = None
