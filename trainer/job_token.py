"""How a launched job gets its token: it exchanges the one-time claim from its environment.

Ray's dashboard lists every job's runtime_env, so the launcher puts a claim there, never the
token; the job redeems it at `POST {api}/api/v1/jobs/{kind}/{id}/token` as soon as it starts
(retrying while the API is unreachable) and keeps the token in memory only. A claim read from
the dashboard later is already spent. A job started by hand may set `ROLLOUT_JOB_TOKEN`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainer.api_client import ApiError, JobApiClient
from trainer.wire import API_PREFIX, ENV_JOB_CLAIM, ENV_JOB_TOKEN, JobTokenGrant

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
    return _redeem(api_url, path, claim, timeout_s)


def _redeem(api_url: str, path: str, claim: str, timeout_s: float) -> str:
    """POST the claim (as the bearer) to the job's /token route, with the job client's retry
    policy (trainer/api_client.py); a refusal or the deadline ends the job with its reason."""
    api = JobApiClient(api_url, claim, f"{API_PREFIX}/jobs/{path}", timeout_s=10)
    try:
        response = api.call("POST", "/token", timeout_s=timeout_s)
    except ApiError as exc:
        raise SystemExit(f"the API refused this job's claim ({exc.status}): {exc}") from None
    except TimeoutError as exc:
        raise SystemExit(f"could not redeem the job claim: {exc}") from None
    finally:
        api.close()
    return JobTokenGrant.model_validate(response.json()).token
