"""How a launched job gets its token: it exchanges the one-time claim from its environment.

Ray's dashboard lists every job's runtime_env, so the launcher puts a claim there, never the
token; the job redeems it at `POST {api}/api/v1/jobs/{kind}/{id}/token` as soon as it starts
(retrying while the API is unreachable) and keeps the token in memory only. A claim read from
the dashboard later is already spent. A job started by hand may set `ROLLOUT_JOB_TOKEN`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping

import httpx

from trainer.reporter import RETRYABLE_STATUS, Backoff
from trainer.wire import API_PREFIX, ENV_JOB_CLAIM, ENV_JOB_TOKEN, JobTokenGrant

log = logging.getLogger(__name__)

REDEEM_TIMEOUT_S = 120.0


def job_token(
    environ: Mapping[str, str], api_url: str, path: str, timeout_s: float = REDEEM_TIMEOUT_S
) -> str:
    """The job's token: `ROLLOUT_JOB_TOKEN`, else the redeemed `ROLLOUT_JOB_CLAIM`.

    `path` is the job's resource under /api/v1/jobs, e.g. `experiments/7`. Exits with a clear
    message when neither is set or the claim is refused (spent, or the run has ended).
    """
    if token := environ.get(ENV_JOB_TOKEN):
        return token
    claim = environ.get(ENV_JOB_CLAIM)
    if not claim:
        raise SystemExit(f"missing environment variable {ENV_JOB_CLAIM} (or {ENV_JOB_TOKEN})")
    os.environ.pop(ENV_JOB_CLAIM, None)  # spent either way: keep it from child processes
    return _redeem(f"{api_url.rstrip('/')}{API_PREFIX}/jobs/{path}/token", claim, timeout_s)


def _redeem(url: str, claim: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    backoff = Backoff()
    failures = 0
    with httpx.Client(timeout=10, headers={"Authorization": f"Bearer {claim}"}) as client:
        while True:
            problem: str
            try:
                response = client.post(url)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return JobTokenGrant.model_validate(response.json()).token
                if response.status_code not in RETRYABLE_STATUS:
                    raise SystemExit(
                        f"the API refused this job's claim ({response.status_code}): "
                        f"{response.text[:500]}"
                    )
                problem = f"HTTP {response.status_code}"
            failures += 1
            delay = backoff.delay(failures)
            if time.monotonic() + delay > deadline:
                raise SystemExit(
                    f"could not redeem the job claim at {url} in {timeout_s}s: {problem}"
                )
            log.info("redeeming the job claim failed (%s); retrying in %.1fs", problem, delay)
            time.sleep(delay)
