"""One Ray cluster per job, each as an OS user of its own: jobs that cannot touch each other.

Ray has no per-job authorization: every worker of a cluster holds the cluster's credentials,
so a job's code can stop any other job of its cluster (the Jobs API, or `ray.kill` of its
actors) and, as the same OS user, read the others' files. With `ROLLOUT_JOBS_USERS` the
service gives each job a private local Ray head of its own instead (as KubeRay's RayJob gives
each job a RayCluster), started as a jobs user no other running job has, with Ray's token
authentication and a token file only that user (and the service) can read:

- another job's processes, job dir, Ray temp dir and token belong to another OS user;
- another job's dashboard and GCS refuse a process without their token;
- a job runs as a user of the pool only while it runs: its processes are killed and its job dir
  handed back to the service when it ends, so the next job of that user finds nothing.

The users are the queue's slots: with every user busy the next job waits ("waiting for
cluster resources"), as it does for CPUs. A head takes a few seconds to start; the job is
`PENDING` meanwhile. Each cluster is recorded in the data dir (`job-clusters/`), so an API
process that restarts adopts the clusters still running (their jobs carry on) and cleans up
after the others (their experiments are then lost and salvaged like any missing job).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import pwd
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core import layout
from app.jobs import head_state
from app.jobs.launcher import (
    LOG_TAIL_LINES,
    JobRequest,
    RayJob,
    RayJobLauncher,
    RayJobState,
    RayUnavailable,
    job_info,
    job_log_tail,
    stop_job,
)
from app.jobs.ray_head import LocalRayHead, alive
from app.jobs.resources import ClusterResources

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

log = logging.getLogger(__name__)

# How long a job's head may take to answer, and an adopted one after a restart.
START_TIMEOUT_S = 120.0
ADOPT_TIMEOUT_S = 15.0
# Ended jobs' final state and log tail, kept for the reconciler after their cluster is gone.
ENDED_KEPT = 1000
# How often a job is offered again to a fresh head whose job agent is not up yet.
SUBMIT_RETRY_S = 1.0
# How often the launcher looks at its clusters' jobs itself: a run that reports its own end
# is no longer asked about by the reconciler, and its cluster must go all the same.
WATCH_EVERY_S = 2.0


@dataclass(frozen=True)
class ClusterRecord:
    """What finds a job's cluster again after the API restarts (`job-clusters/<id>.json`)."""

    submission_id: str
    user: str
    token: str
    pid: int
    started: int
    boot_id: str
    address: str
    dashboard_url: str
    temp_dir: str
    job_dir: str
    cpus: float


@dataclass
class JobCluster:
    """One job's private cluster: starting (`starting` not done), running, or being released."""

    submission_id: str
    user: str
    token: str
    temp_dir: Path
    job_dir: Path
    cpus: float
    head: LocalRayHead | None = None
    client: JobSubmissionClient | None = None
    starting: asyncio.Task[None] | None = None
    error: str = ""  # why it could not start

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def uid_of(user: str) -> tuple[int, int]:
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def processes_of(uid: int) -> dict[int, int]:
    """pid -> start time of every live process whose real uid is `uid` (Linux /proc). Zombies
    are left out: they hold nothing and run nothing, and whether they are reaped is up to
    their parent (pid 1 in a container without an init)."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        uids = next((line.split()[1:] for line in status.splitlines() if line[:4] == "Uid:"), [])
        fields = stat[stat.rindex(")") + 2 :].split()
        if uids and int(uids[0]) == uid and fields[0] != "Z":
            found[int(entry.name)] = int(fields[19])
    return found


def kill_user_processes(user: str, timeout_s: float = 10.0) -> list[int]:
    """SIGKILL every process of `user` (a pool user runs one job's processes, nothing else)
    and wait for them; the pids still there after `timeout_s`."""
    uid, _ = uid_of(user)
    deadline = time.monotonic() + timeout_s
    while True:
        processes = processes_of(uid)
        for pid in alive(processes):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if not processes or time.monotonic() > deadline:
            return list(processes)
        time.sleep(0.05)


def give_dir(path: Path, uid: int, gid: int) -> None:
    """`path` and everything in it owned by uid:gid, the top 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.lchown(Path(root) / name, uid, gid)
    os.chown(path, uid, gid)
    path.chmod(0o700)


class JobClustersLauncher(RayJobLauncher):
    """The launcher's interface over one private local Ray cluster per job."""

    def __init__(
        self,
        data_dir: Path,
        users: list[str],
        *,
        stop_grace_s: float,
        total_cpus: float | None = None,
    ) -> None:
        super().__init__("one local Ray cluster per job", stop_grace_s=stop_grace_s)
        self.data_dir = data_dir
        self.users = list(users)
        self.total_cpus = float(total_cpus or os.cpu_count() or 1)
        self._clusters: dict[str, JobCluster] = {}
        self._ended: dict[str, tuple[RayJob, str]] = {}
        self._releasing: set[asyncio.Task[None]] = set()
        self._draining: set[str] = set()  # users whose ended job's cluster is being released
        self._connected = False
        self._watch: asyncio.Task[None] | None = None

    # --- connection: adopt what an earlier API process left --------------------------------
    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def records_dir(self) -> Path:
        return layout.job_clusters_dir(self.data_dir)

    async def connect(self) -> None:
        self.records_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for path in sorted(self.records_dir.glob("*.json")):
            try:
                record = ClusterRecord(**json.loads(path.read_text()))
            except (OSError, ValueError, TypeError) as exc:
                log.warning("unreadable job cluster record %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            await self._adopt(record)
        self._connected = True
        self._watch = asyncio.create_task(self._watch_jobs(), name="rollout-job-clusters")

    async def _watch_jobs(self) -> None:
        """Release each cluster whose job ended, whoever asks about it (`job`)."""
        while True:
            await asyncio.sleep(WATCH_EVERY_S)
            for submission_id, cluster in list(self._clusters.items()):
                if cluster.starting is None or cluster.starting.done():
                    try:
                        await self.job(submission_id)
                    except Exception as exc:
                        log.debug("job cluster %s: %s", submission_id, exc)

    async def ensure_connected(self) -> None:
        if not self._connected:
            await self.connect()

    async def _adopt(self, record: ClusterRecord) -> None:
        cluster = JobCluster(
            submission_id=record.submission_id,
            user=record.user,
            token=record.token,
            temp_dir=Path(record.temp_dir),
            job_dir=Path(record.job_dir),
            cpus=record.cpus,
        )
        head = LocalRayHead.adopt(record.pid, record.started, record.address, record.dashboard_url)
        head.auth_token = record.token
        same_boot = record.boot_id == head_state.boot_id()
        if same_boot and head.running:
            try:
                await asyncio.to_thread(head.wait_ready, ADOPT_TIMEOUT_S)
            except (RuntimeError, TimeoutError) as exc:
                log.warning("job cluster of %s does not answer: %s", record.submission_id, exc)
            else:
                cluster.head = head
                cluster.client = await asyncio.to_thread(self._client_for, cluster)
                self._clusters[record.submission_id] = cluster
                log.warning(
                    "adopted the Ray cluster of job %s (user %s); it carries on",
                    record.submission_id,
                    record.user,
                )
                return
        # Gone or mute: what is left of it goes; the reconciler finds its job missing.
        cluster.head = head if same_boot else None
        await asyncio.to_thread(self._release_now, cluster)

    # --- jobs ---------------------------------------------------------------------------------
    def free_users(self) -> list[str]:
        busy = {c.user for c in self._clusters.values()} | self._draining
        return [u for u in self.users if u not in busy]

    async def submit(self, submission_id: str, request: JobRequest) -> str:
        """Start the job's own cluster in the background and the job on it; the job is
        PENDING until then (`job`)."""
        free = self.free_users()
        if not free:
            raise RayUnavailable("every jobs user runs a job; the job waits for one")
        cluster = JobCluster(
            submission_id=submission_id,
            user=free[0],
            token=secrets.token_urlsafe(32),
            temp_dir=Path(tempfile.mkdtemp(prefix="rjob-", dir="/tmp")),
            job_dir=request.job_dir,
            cpus=request.resources.cpus,
        )
        self._clusters[submission_id] = cluster
        cluster.starting = asyncio.create_task(
            self._start(cluster, request), name=f"rollout-cluster-{submission_id}"
        )
        return submission_id

    async def _start(self, cluster: JobCluster, request: JobRequest) -> None:
        try:
            uid, gid = uid_of(cluster.user)
            await asyncio.to_thread(give_dir, cluster.job_dir, uid, gid)
            # Ray opens its temp dir to everyone (0777, logs included): it sits in a private
            # dir of the user's, beside the token.
            await asyncio.to_thread(give_dir, cluster.temp_dir, uid, gid)
            ray_dir = cluster.temp_dir / "ray"
            ray_dir.mkdir()
            head = LocalRayHead(
                num_cpus=max(1, math.ceil(request.resources.cpus - 1e-9)),
                temp_dir=ray_dir,
                user=cluster.user,
                niceness=request.niceness,
                auth_token=cluster.token,
                auth_token_file=cluster.temp_dir / "auth_token",
                start_timeout_s=START_TIMEOUT_S,
            )
            cluster.head = head
            await asyncio.to_thread(head.launch)
            self._save(cluster)  # before it is ready: a restart must find it
            await asyncio.to_thread(head.wait_ready)
            cluster.client = await asyncio.to_thread(self._client_for, cluster)
            kwargs = self.submit_kwargs(cluster.submission_id, request)
            kwargs["runtime_env"]["env_vars"] |= {
                "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN_PATH": str(head.auth_token_file),
            }
            await self._submit_when_ready(cluster, kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            cluster.error = f"its Ray cluster did not start: {type(exc).__name__}: {exc}"
            log.warning("job %s: %s", cluster.submission_id, cluster.error)

    async def _submit_when_ready(self, cluster: JobCluster, kwargs: dict[str, Any]) -> None:
        """Submit the job. A fresh head's dashboard answers before its job agent does (Ray:
        "No available agent to submit job, please try again later") and may drop a connection
        while it settles: both are retried until the head's start timeout. A retry that finds
        the job already there (the dropped answer was a yes) is that yes."""
        client = cluster.client
        assert client is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        retried = False
        while True:
            try:
                await asyncio.to_thread(lambda: client.submit_job(**kwargs))
                return
            except RuntimeError as exc:
                if retried and "already exists" in str(exc):
                    return
                if "try again later" not in str(exc) or time.monotonic() > deadline:
                    raise
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
            retried = True
            await asyncio.sleep(SUBMIT_RETRY_S)

    def _client_for(self, cluster: JobCluster) -> JobSubmissionClient:
        from ray.job_submission import JobSubmissionClient

        assert cluster.head is not None
        return JobSubmissionClient(cluster.head.dashboard_url, headers=cluster.headers)

    def _save(self, cluster: JobCluster) -> None:
        assert cluster.head is not None
        record = ClusterRecord(
            submission_id=cluster.submission_id,
            user=cluster.user,
            token=cluster.token,
            **head_state.whereabouts(cluster.head),
            temp_dir=str(cluster.temp_dir),
            job_dir=str(cluster.job_dir),
            cpus=cluster.cpus,
        )
        target = self.records_dir / f"{cluster.submission_id}.json"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(json.dumps(asdict(record)))
        tmp.chmod(0o600)
        tmp.replace(target)

    async def job(self, submission_id: str) -> RayJob:
        cluster = self._clusters.get(submission_id)
        if cluster is None:
            ended = self._ended.get(submission_id)
            if ended is not None:
                return ended[0]
            return RayJob(RayJobState.MISSING, f"Ray job {submission_id} does not exist")
        if cluster.starting is not None and not cluster.starting.done():
            return RayJob(RayJobState.PENDING, "its Ray cluster is starting")
        if cluster.error or cluster.client is None:
            return await self._end(cluster, RayJob(RayJobState.FAILED, cluster.error))
        try:
            job = await job_info(cluster.client, submission_id)
        except RayUnavailable:
            if cluster.head is not None and not cluster.head.running:
                lost = RayJob(RayJobState.MISSING, "the job's own Ray cluster ended")
                return await self._end(cluster, lost)
            raise
        if job.state.is_terminal:  # missing included: the cluster never got it
            return await self._end(cluster, job)
        return job

    async def _end(self, cluster: JobCluster, job: RayJob) -> RayJob:
        """The job is over: keep its final state and log tail, then release its cluster (in
        the background: stopping a head takes seconds). Once: a second caller (the watch and
        the reconciler ask at the same time) gets what the first recorded."""
        submission_id = cluster.submission_id
        if self._clusters.get(submission_id) is not cluster:
            ended = self._ended.get(submission_id)
            return ended[0] if ended is not None else job
        del self._clusters[submission_id]
        self._ended[submission_id] = (job, "")
        while len(self._ended) > ENDED_KEPT:
            self._ended.pop(next(iter(self._ended)))
        if cluster.client is not None:
            tail = await job_log_tail(cluster.client, submission_id, LOG_TAIL_LINES)
            self._ended[submission_id] = (job, tail)
        # Its user serves no other job before every process of it is gone.
        self._draining.add(cluster.user)
        task = asyncio.create_task(asyncio.to_thread(self._release_now, cluster))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)
        task.add_done_callback(lambda _: self._draining.discard(cluster.user))
        return job

    def _release_now(self, cluster: JobCluster) -> None:
        """Stop the cluster, kill whatever its user still runs, hand its job dir back to the
        service and forget it (blocking)."""
        if cluster.head is not None:
            cluster.head.stop()
        survivors = kill_user_processes(cluster.user)
        if survivors:
            log.error("processes %s of jobs user %s did not exit", survivors, cluster.user)
        with contextlib.suppress(FileNotFoundError):
            give_dir(cluster.job_dir, os.getuid(), os.getgid())
        shutil.rmtree(cluster.temp_dir, ignore_errors=True)
        (self.records_dir / f"{cluster.submission_id}.json").unlink(missing_ok=True)

    async def stop(self, submission_id: str) -> bool:
        cluster = self._clusters.get(submission_id)
        if cluster is None:
            return False
        if cluster.starting is not None and not cluster.starting.done():
            cluster.starting.cancel()
            with contextlib.suppress(BaseException):
                await cluster.starting
            await self._end(cluster, RayJob(RayJobState.STOPPED, "stopped while starting"))
            return True
        if cluster.client is None:
            return False
        return await stop_job(cluster.client, submission_id)

    async def log_tail(self, submission_id: str, lines: int = LOG_TAIL_LINES) -> str:
        ended = self._ended.get(submission_id)
        if ended is not None:
            return "\n".join(ended[1].splitlines()[-lines:])
        cluster = self._clusters.get(submission_id)
        if cluster is None or cluster.client is None:
            return ""
        return await job_log_tail(cluster.client, submission_id, lines)

    async def submit_module(self, submission_id: str, module: str) -> str:
        raise RayUnavailable("no service jobs run with one cluster per job")

    # --- resources and shutdown ---------------------------------------------------------------
    async def cluster_resources(self) -> ClusterResources | None:
        """This machine's CPUs; the running jobs' clusters use theirs, and with no jobs user
        free nothing more fits."""
        used = sum(c.cpus for c in self._clusters.values())
        if not self.free_users():
            used = self.total_cpus
        return ClusterResources(total_cpus=self.total_cpus, used_cpus=min(used, self.total_cpus))

    async def reachable(self) -> bool:
        return self._connected

    async def stop_all(self) -> None:
        """Stop every job's cluster (the service shuts down; their drivers were stopped)."""
        await self._stop_watching()
        clusters = list(self._clusters.values())
        self._clusters.clear()
        for cluster in clusters:
            if cluster.starting is not None and not cluster.starting.done():
                cluster.starting.cancel()
                with contextlib.suppress(BaseException):
                    await cluster.starting
        await asyncio.gather(*(asyncio.to_thread(self._release_now, c) for c in clusters))
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)

    async def _stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None

    async def close(self) -> None:
        await self._stop_watching()
        if self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)


def cluster_per_job_users_ok() -> str | None:
    """Why this process cannot run jobs as other users (None when it can)."""
    if not sys.platform.startswith("linux"):
        return "one cluster per job needs Linux"
    if os.geteuid() != 0:
        return "one cluster per job switches users: run the service as root"
    return None
