"""Submit, stop and inspect experiment jobs through the Ray Jobs API.

One experiment = one Ray job running `<this interpreter> -m trainer.job`: the same virtualenv as
the service, no runtime_env upload of the project. Everything the job needs travels in its
runtime_env environment (never on its command line): the API URL, its experiment id and a
one-time claim it exchanges for its job token (Ray's dashboard lists every job's runtime_env:
a claim read there after the job started is spent). Of the service's environment only
`PASSTHROUGH_ENV` goes with it. The Ray SDK client is blocking (requests), so every call runs
in a thread. Cluster usage comes from the dashboard's HTTP API (asynchronously, no Ray driver
in the API).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from app.jobs.resources import ClusterResources, JobResources
from trainer.process_guard import WORKER_SETUP_HOOK
from trainer.wire import (
    ENV_API_URL,
    ENV_EXPERIMENT_ID,
    ENV_JOB_CLAIM,
    ENV_JOB_DIR,
    ENV_JOB_NICENESS,
    ENV_REFERENCE_PATHS,
    RAY_ENV,
)

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

# Ray settings a job's processes must share with the cluster (auth mode above all), and the
# trainer's switch to its reference implementations (set for the service, it holds for its jobs).
PASSTHROUGH_ENV = (*RAY_ENV, "RAY_AUTH_TOKEN_PATH", ENV_REFERENCE_PATHS)
LOG_TAIL_LINES = 100


class RayJobState(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    MISSING = "MISSING"  # the cluster does not know the job (restarted cluster, deleted job)

    @property
    def is_terminal(self) -> bool:
        return self not in (RayJobState.PENDING, RayJobState.RUNNING)


@dataclass(frozen=True)
class RayJob:
    state: RayJobState
    message: str = ""
    exit_code: int | None = None


class RayUnavailable(RuntimeError):
    """The Ray dashboard (Jobs API) did not answer."""


@dataclass(frozen=True)
class JobRequest:
    """Everything needed to launch one experiment."""

    experiment_id: int
    resources: JobResources
    claim: str  # exchanged by the job for its token: the token itself never reaches Ray
    api_url: str
    job_dir: Path
    # What the job runs (`python -m <module>`) and what else it finds in its environment:
    # evaluations run trainer.evaluation_job with their evaluation id.
    entrypoint_module: str = "trainer.job"
    extra_env: dict[str, str] = field(default_factory=dict)
    # Above 0: the job's driver runs under `nice -n` and its Ray workers lower their own
    # priority to it (training yields the CPU to the API; scheduled evaluations take only idle
    # CPU).
    niceness: int = 0


# /health's view of Ray (RayJobLauncher.reachable): refreshed in the background after 1 s,
# waited for only when older than 5 s.
REACHABLE_REFRESH_S = 1.0
REACHABLE_STALE_S = 5.0


class RayJobLauncher:
    """The service's handle on a Ray cluster's Jobs API and usage numbers.

    `address` is a dashboard URL or a cluster address (resolved to the dashboard through the
    cluster itself). Connecting may fail while the cluster is down: the service starts anyway
    and `ensure_connected()` (called by every reconciler tick) retries, at most every few
    seconds.
    """

    RETRY_CONNECT_S = 5.0

    def __init__(self, address: str, *, stop_grace_s: float) -> None:
        self.address = address
        self.stop_grace_s = stop_grace_s
        self.dashboard_url = address.rstrip("/") if address.startswith("http") else ""
        self._client: JobSubmissionClient | None = None
        self._http: httpx.AsyncClient | None = None
        self._reachable = False
        self._reachable_at = -float("inf")  # monotonic time of the last answer
        self._reachable_check: asyncio.Future[bool] | None = None
        self._last_attempt = -float("inf")
        self.last_error = ""

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def connect(self) -> None:
        from ray.job_submission import JobSubmissionClient

        self._last_attempt = time.monotonic()
        try:
            url = self.dashboard_url or await asyncio.to_thread(dashboard_url_for, self.address)
            client = await asyncio.to_thread(JobSubmissionClient, url)
        except Exception as exc:
            self.last_error = f"Ray at {self.address}: {type(exc).__name__}: {exc}"
            raise RayUnavailable(self.last_error) from exc
        self.dashboard_url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.dashboard_url, timeout=10)
        self._client = client
        self.last_error = ""

    async def ensure_connected(self) -> None:
        if self.connected:
            return
        if time.monotonic() - self._last_attempt < self.RETRY_CONNECT_S:
            raise RayUnavailable(self.last_error or "not connected to Ray yet")
        await self.connect()

    async def close(self) -> None:
        if self._reachable_check is not None:
            self._reachable_check.cancel()
        if self._http is not None:
            await self._http.aclose()

    @property
    def client(self) -> JobSubmissionClient:
        if self._client is None:
            raise RayUnavailable(self.last_error or "not connected to Ray")
        return self._client

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RayUnavailable(self.last_error or "not connected to Ray")
        return self._http

    # --- jobs ---------------------------------------------------------------------------------
    def runtime_env(self, request: JobRequest) -> dict[str, Any]:
        env_vars = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        env_vars |= {
            ENV_API_URL: request.api_url,
            ENV_JOB_CLAIM: request.claim,
            ENV_EXPERIMENT_ID: str(request.experiment_id),
            ENV_JOB_DIR: str(request.job_dir),
            # The job supervisor SIGKILLs the driver this long after stop_job's SIGTERM (Ray's
            # default is 3 s): leave time to save and upload a final checkpoint.
            "RAY_JOB_STOP_WAIT_TIME_S": str(int(self.stop_grace_s)),
            "PYTHONUNBUFFERED": "1",
        }
        env_vars |= request.extra_env
        if request.niceness > 0:
            env_vars[ENV_JOB_NICENESS] = str(request.niceness)
        # Every Ray worker of the job makes itself non-dumpable first: another job (user code,
        # same OS user) cannot read its memory (trainer/process_guard.py).
        return {"env_vars": env_vars, "worker_process_setup_hook": WORKER_SETUP_HOOK}

    async def submit(self, submission_id: str, request: JobRequest) -> str:
        """Start the experiment's job; returns the Ray submission id."""
        kwargs = self.submit_kwargs(submission_id, request)
        try:
            return await asyncio.to_thread(lambda: self.client.submit_job(**kwargs))
        except (ConnectionError, OSError) as exc:
            raise RayUnavailable(str(exc)) from exc

    def submit_kwargs(self, submission_id: str, request: JobRequest) -> dict[str, Any]:
        """JobSubmissionClient.submit_job's arguments for `request`."""
        need = request.resources
        entrypoint = f"{sys.executable} -m {request.entrypoint_module}"
        if request.niceness > 0:
            entrypoint = f"nice -n {request.niceness} {entrypoint}"
        kwargs: dict[str, Any] = {
            "entrypoint": entrypoint,
            "submission_id": submission_id,
            "runtime_env": self.runtime_env(request),
            "entrypoint_num_cpus": need.driver_cpus,
            "metadata": {"rollout_experiment_id": str(request.experiment_id)},
        }
        if need.driver_gpus:
            kwargs["entrypoint_num_gpus"] = need.driver_gpus
        return kwargs

    async def submit_module(self, submission_id: str, module: str) -> str:
        """A service job of our own (`python -m <module>`, e.g. the head's warm-up): no
        experiment, no token, no CPU of the queue's budget."""
        env_vars = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        env_vars["PYTHONUNBUFFERED"] = "1"
        kwargs: dict[str, Any] = {
            "entrypoint": f"{sys.executable} -m {module}",
            "submission_id": submission_id,
            "runtime_env": {"env_vars": env_vars},
            "entrypoint_num_cpus": 0,
            "metadata": {"rollout_service_job": module},
        }
        try:
            return await asyncio.to_thread(lambda: self.client.submit_job(**kwargs))
        except (ConnectionError, OSError, RuntimeError) as exc:
            raise RayUnavailable(str(exc)) from exc

    async def stop(self, submission_id: str) -> bool:
        """SIGTERM the job's driver (it saves a final checkpoint); False if no such job."""
        return await stop_job(self.client, submission_id)

    async def job(self, submission_id: str) -> RayJob:
        return await job_info(self.client, submission_id)

    async def log_tail(self, submission_id: str, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines of the job's driver log ('' if Ray has none)."""
        return await job_log_tail(self.client, submission_id, lines)

    # --- cluster --------------------------------------------------------------------------------
    async def cluster_resources(self) -> ClusterResources | None:
        """Totals and usage over all nodes; None while Ray has not reported them yet."""
        try:
            response = await self.http.get("/api/cluster_status")
            response.raise_for_status()
            usage = response.json()["data"]["clusterStatus"]["loadMetricsReport"]["usage"]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise RayUnavailable(f"cluster status from {self.dashboard_url}: {exc}") from exc
        if "CPU" not in usage:
            return None
        used_cpus, total_cpus = usage["CPU"]
        used_gpus, total_gpus = usage.get("GPU", (0.0, 0.0))
        return ClusterResources(
            total_cpus=float(total_cpus),
            used_cpus=float(used_cpus),
            total_gpus=float(total_gpus),
            used_gpus=float(used_gpus),
        )

    async def reachable(self) -> bool:
        """Whether Ray's dashboard answers, for /health. Under load the dashboard takes tens to
        hundreds of ms (it shares the cores with training), and /health must not wait for it:
        the last answer serves while it is younger than REACHABLE_STALE_S, one check at a time
        refreshes it in the background once it is older than REACHABLE_REFRESH_S, and only a
        stale answer (or none yet) is waited for. A dead cluster shows within seconds."""
        age = time.monotonic() - self._reachable_at
        check = self._reachable_check
        if age >= REACHABLE_REFRESH_S and (check is None or check.done()):
            check = self._reachable_check = asyncio.ensure_future(self._check_reachable())
        if age < REACHABLE_STALE_S or check is None:
            return self._reachable
        return await asyncio.shield(check)

    async def _check_reachable(self) -> bool:
        ok = False
        if self._http is not None:
            try:
                response = await self._http.get("/api/version", timeout=3)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
        self._reachable, self._reachable_at = ok, time.monotonic()
        return ok


async def job_info(client: JobSubmissionClient, submission_id: str) -> RayJob:
    """The job's state from `client` (in a thread): MISSING if the cluster has no such job,
    RayUnavailable when it does not answer."""
    try:
        info = await asyncio.to_thread(client.get_job_info, submission_id)
    except RuntimeError as exc:
        if _is_not_found(exc):
            return RayJob(RayJobState.MISSING, f"Ray job {submission_id} does not exist")
        raise RayUnavailable(str(exc)) from exc
    except (ConnectionError, OSError) as exc:
        raise RayUnavailable(str(exc)) from exc
    return RayJob(
        RayJobState(str(info.status.value)),
        message=info.message or "",
        exit_code=getattr(info, "driver_exit_code", None),
    )


async def job_log_tail(client: JobSubmissionClient, submission_id: str, lines: int) -> str:
    """The last `lines` lines of the job's driver log ('' if Ray has none or does not answer)."""
    try:
        text = await asyncio.to_thread(client.get_job_logs, submission_id)
    except Exception:
        return ""
    return "\n".join(text.splitlines()[-lines:])


async def stop_job(client: JobSubmissionClient, submission_id: str) -> bool:
    """`client.stop_job` in a thread: False if the cluster has no such job, RayUnavailable
    when it does not answer."""
    try:
        return await asyncio.to_thread(client.stop_job, submission_id)
    except RuntimeError as exc:
        if _is_not_found(exc):
            return False
        raise RayUnavailable(str(exc)) from exc
    except (ConnectionError, OSError) as exc:
        raise RayUnavailable(str(exc)) from exc


def _is_not_found(exc: Exception) -> bool:
    return "status code 404" in str(exc)


def dashboard_url_for(address: str) -> str:
    """The Jobs API URL of a cluster given as `http(s)://dashboard`, `ray://...` or `host:port`.

    Resolving a GCS address asks the cluster itself (blocking; call it in a thread).
    """
    if address.startswith(("http://", "https://")):
        return address
    from ray.dashboard.utils import get_address_for_submission_client

    return get_address_for_submission_client(address)
