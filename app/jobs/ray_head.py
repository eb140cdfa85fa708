"""Start and stop a private local Ray head.

Ray's defaults collide with other services on a shared machine (port 6379 may be Redis) and
`ray stop` kills every Ray process by name, so the service and the tests start their own head
in its own process session, on explicitly chosen free ports, with a private temp dir, and stop
it by its own process id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from trainer.process_guard import set_session_niceness
from trainer.wire import RAY_ENV

log = logging.getLogger(__name__)

# What a local head (so every Ray worker and job driver it starts, where user code runs) may
# inherit of the service's environment: an allowlist, not a denylist, so a credential the
# operator keeps in the service's environment for something else (AWS_SECRET_ACCESS_KEY, a
# cloud token) never reaches a job. Only what Python, Ray, torch and the envs read.
CLUSTER_ENV_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
        "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED", "PYTHONWARNINGS", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
        "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "MUJOCO_GL", "PYOPENGL_PLATFORM",
        "SDL_VIDEODRIVER", "SDL_AUDIODRIVER", "DISPLAY",
        # The job's own tuning knob (trainer/job.py), not a service setting.
        "ROLLOUT_REPORTER_PATIENCE_S",
    }
)  # fmt: skip
# Families of settings: Ray's own (auth mode, ports, logging), locale, and the compute
# libraries' (CUDA device selection, thread counts, NCCL/gloo transport, torch).
CLUSTER_ENV_PREFIXES = (
    "RAY_", "LC_", "CUDA_", "NVIDIA_", "NCCL_", "GLOO_", "OMP_", "MKL_", "KMP_", "OPENBLAS_",
    "TORCH_", "TORCHINDUCTOR_", "MUJOCO_",
)  # fmt: skip


def cluster_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The part of `environ` (default: this process's) a local Ray head may inherit."""
    source = dict(os.environ if environ is None else environ)
    return {
        key: value
        for key, value in source.items()
        if key in CLUSTER_ENV_NAMES or key.startswith(CLUSTER_ENV_PREFIXES)
    }


# Linux prctl(2) option and capability(7) numbers.
PR_CAPBSET_DROP = 24
# CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON: each lets root read the /proc/<pid>/environ of
# a non-dumpable process (ptrace_may_access, PTRACE_MODE_READ; checked one by one on Linux 6.18).
INTROSPECTION_CAPS = (19, 21, 38)
# Run before `ray start` when the service runs as root: the head and everything it starts
# (job drivers, user code) lose those capabilities for good, so they cannot read the API's
# environment once it is non-dumpable (`make_undumpable`).
_DROP_PTRACE = (
    "import ctypes, os, sys; libc = ctypes.CDLL(None); "
    f"[libc.prctl({PR_CAPBSET_DROP}, cap, 0, 0, 0) for cap in {INTROSPECTION_CAPS}]; "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def free_ports(count: int) -> list[int]:
    """Ask the kernel for `count` distinct free TCP ports on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process from /proc; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[19])


def proc_start_time(pid: int) -> int | None:
    """When a running (non-zombie) process started, in clock ticks since boot; None if gone."""
    stat = _proc_stat(pid)
    if stat is None or stat[0] == "Z":
        return None
    return stat[2]


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below `root` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
                children.setdefault(stat[1], []).append(int(entry.name))
                started[int(entry.name)] = stat[2]
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found[child] = started[child]
                todo.append(child)
    return found


def alive(processes: dict[int, int]) -> list[int]:
    """The pids of `processes` still running (same start time, so not a reused pid)."""
    result = []
    for pid, started in processes.items():
        stat = _proc_stat(pid)
        if stat is not None and stat[0] != "Z" and stat[2] == started:
            result.append(pid)
    return result


def kill_if_alive(processes: dict[int, int], timeout_s: float = 10.0) -> None:
    for pid in alive(processes):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.05)


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Return once no process of the group is left (SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def apply_ray_env() -> None:
    """Make this process (and the children it starts) speak the head's auth mode."""
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)


@dataclass
class LocalRayHead:
    """A Ray head process owned by this process; `address` and `dashboard_url` once started."""

    num_cpus: int | None = None
    object_store_bytes: int = 256 * 1024**2
    temp_dir: Path | None = None
    start_timeout_s: float = 60.0
    # Loopback keeps the cluster on this machine alone. Other nodes can only join a head on an
    # address they can reach (Ray rewrites a loopback --address to the machine's own IP).
    node_ip: str = "127.0.0.1"
    # The OS user the head, so every Ray worker and job driver (user code), runs as: another
    # user than the service's cannot read the service's /proc/<pid>/environ or its database
    # (ROLLOUT_JOBS_USER; docs/operations.md, "Production isolation"). Needs the right to
    # switch users (root, CAP_SETUID).
    user: str | None = None
    # The CPU priority of the head's session as a whole (its daemons and every Ray worker;
    # job drivers run in sessions of their own) against the other sessions of the machine:
    # trainer/process_guard.py `set_session_niceness`.
    niceness: int = 0
    # Ray's token authentication for this head alone (app/jobs/job_clusters.py): its daemons
    # and workers read the token from a file in the temp dir that only `user` may read, and
    # its dashboard and GCS refuse whoever does not send it.
    auth_token: str | None = None
    # Where the token is written (default: the temp dir, which Ray opens to everyone: give a
    # file in a directory only `user` may enter).
    auth_token_file: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    pid: int | None = field(default=None, init=False)
    started: int = field(default=0, init=False)
    address: str = field(default="", init=False)
    dashboard_url: str = field(default="", init=False)
    _owned_temp: bool = field(default=False, init=False)

    def start(self) -> LocalRayHead:
        self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    @classmethod
    def adopt(cls, pid: int, started: int, address: str, dashboard_url: str) -> LocalRayHead:
        """A handle on a head an earlier process started (checked by the caller to be it)."""
        head = cls()
        head.pid, head.started = pid, started
        head.address, head.dashboard_url = address, dashboard_url
        return head

    @property
    def running(self) -> bool:
        return self.pid is not None and bool(alive({self.pid: self.started}))

    def launch(self) -> None:
        """Start `ray start --head --block` in its own session; `wait_ready()` waits for it."""
        if self.temp_dir is None:
            # Ray's socket paths must stay short (AF_UNIX limit), so use /tmp directly.
            self.temp_dir = Path(tempfile.mkdtemp(prefix="rray-", dir="/tmp"))
            self._owned_temp = True
        (
            gcs,
            dash,
            client,
            agent_listen,
            agent_grpc,
            runtime_env,
            metrics,
            node_mgr,
            obj_mgr,
            autoscaler_metrics,
            dash_metrics,
        ) = free_ports(11)
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray_bin) if ray_bin.exists() else "ray",
            "start",
            "--head",
            "--block",
            f"--node-ip-address={self.node_ip}",
            f"--port={gcs}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            f"--ray-client-server-port={client}",
            f"--dashboard-agent-listen-port={agent_listen}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={runtime_env}",
            f"--metrics-export-port={metrics}",
            f"--node-manager-port={node_mgr}",
            f"--object-manager-port={obj_mgr}",
            f"--object-store-memory={self.object_store_bytes}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        if self.num_cpus is not None:
            cmd.append(f"--num-cpus={self.num_cpus}")
        env = {
            **cluster_environ(),
            **RAY_ENV,
            "AUTOSCALER_METRIC_PORT": str(autoscaler_metrics),
            "DASHBOARD_METRIC_PORT": str(dash_metrics),
            # On SIGTERM Ray first drains the node for Serve's proxies, up to 30 s by
            # default: longer than stop()'s wait, so every Ctrl-C of the service waited 20 s
            # and ended in SIGKILL. This head runs no Serve: tear down at once.
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        }
        if self.node_ip != "127.0.0.1":
            env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "1"  # "0" refuses other nodes
        if self.auth_token is not None:
            if self.auth_token_file is None:
                self.auth_token_file = self.temp_dir / "auth_token"
            env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.auth_token_file)}
        as_user = self._as_user(env)
        if not as_user and sys.platform.startswith("linux") and os.geteuid() == 0:
            cmd = [sys.executable, "-c", _DROP_PTRACE, *cmd]
        log = open(self.temp_dir / "head.log", "wb")  # noqa: SIM115 - lives as long as the head
        self.process = subprocess.Popen(
            cmd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.temp_dir if self.user else None,
            **as_user,
        )
        self.pid = self.process.pid
        self.started = proc_start_time(self.pid) or 0
        if self.niceness:
            set_session_niceness(self.pid, self.niceness)
        self.address = f"{self.node_ip}:{gcs}"
        self.dashboard_url = f"http://127.0.0.1:{dash}"

    def _as_user(self, env: dict[str, str]) -> dict[str, Any]:
        """Popen's arguments (and `env`'s names) that start the head as `self.user`; the
        token file (if any) written for it alone."""
        assert self.temp_dir is not None
        token_file = self.auth_token_file
        if self.auth_token is not None and token_file is not None:
            token_file.write_text(self.auth_token)
            token_file.chmod(0o600)
        if self.user is None:
            return {}
        entry = pwd.getpwnam(self.user)
        home = Path(entry.pw_dir)
        if not home.is_dir() or home.stat().st_uid != entry.pw_uid:
            # No home of its own (nobody's is /nonexistent, daemon's /usr/sbin): a private one.
            home = self.temp_dir / "home"
            home.mkdir(mode=0o700, exist_ok=True)
            os.chown(home, entry.pw_uid, entry.pw_gid)
        os.chown(self.temp_dir, entry.pw_uid, entry.pw_gid)
        self.temp_dir.chmod(0o700)
        if self.auth_token is not None and token_file is not None:
            os.chown(token_file, entry.pw_uid, entry.pw_gid)
        env.update(HOME=str(home), USER=self.user, LOGNAME=self.user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def answers(self, timeout_s: float = 2.0) -> bool:
        """The head's dashboard (the Jobs API) answers."""
        headers = {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token else {}
        with contextlib.suppress(httpx.HTTPError):
            response = httpx.get(
                f"{self.dashboard_url}/api/version", timeout=timeout_s, headers=headers
            )
            return response.status_code == 200
        return False

    def wait_ready(self, timeout_s: float | None = None) -> None:
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"Ray head exited early; see {self.temp_dir}/head.log")
            if self.answers():
                return
            time.sleep(0.5)
        raise TimeoutError(f"Ray head not ready in {timeout_s}s; see {self.temp_dir}")

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM the head's process group (ours alone), then SIGKILL what is left.

        Ray starts job drivers in sessions of their own, so they are not in the head's group
        and would outlive it (orphaned, still training): every process below the head is
        noted first and killed at the end if it is still there. Works by pid, so an adopted
        head (started by an earlier process, not our child) stops the same way.
        """
        if self.pid is not None and self.running:
            pgid = self.pid  # started with start_new_session: the leader of its own group
            spawned = descendants(self.pid)
            # `ray start --block` tears its daemons down itself on SIGTERM.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            if not self._wait_exit(timeout_s):
                log.warning("the Ray head did not exit %.0f s after SIGTERM: killed", timeout_s)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                self._wait_exit(5)
            # Ray daemons and workers run in the same session; make sure none outlives us.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            _wait_group_gone(pgid, timeout_s=10.0)
            kill_if_alive(spawned)
        elif self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=1)  # reap our child
        self.process = None
        self.pid = None
        if self._owned_temp and self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _wait_exit(self, timeout_s: float) -> bool:
        """Wait for the leader to exit (reaping it when it is our child)."""
        if self.process is not None:
            try:
                self.process.wait(timeout=timeout_s)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout_s
        while self.running and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self.running

    def __enter__(self) -> LocalRayHead:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
