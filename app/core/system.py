"""Service-level endpoints: health and the Ray cluster view (delegated to the jobs runtime)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.core.auth import require_api_token
from app.core.deps import read_sessionmaker
from app.core.errors import Unavailable

router = APIRouter(tags=["system"])
api_router = APIRouter(tags=["system"], dependencies=[Depends(require_api_token)])


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _database_ok(request: Request) -> bool:
    """Whether the database answers, in as few round trips as it takes: on PostgreSQL the
    pool's pre-ping of a checked-out connection is the probe (one round trip, no transaction;
    a dead connection is replaced, an unreachable server raises); SQLite has no server to
    ping, so a read-only SELECT 1 on the file."""
    state = request.app.state
    try:
        if state.engine.dialect.name == "postgresql":
            with state.engine.connect():
                pass
        else:
            with read_sessionmaker(state)() as session:
                session.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


async def health(request: Request) -> JSONResponse:
    """200 when the database answers; `ray` is null when jobs are disabled; `live` is the
    live feed (degraded while the PostgreSQL listener reconnects)."""
    database = await asyncio.to_thread(_database_ok, request)
    jobs = getattr(request.app.state, "jobs", None)
    ray: bool | None = None
    if jobs is not None:
        try:
            ray = bool(await _maybe_await(jobs.healthy()))
        except Exception:
            ray = False
    live = request.app.state.hub.feed
    ok = database and ray is not False and live.connected
    body = {
        "status": "ok" if ok else "degraded",
        "database": database,
        "ray": ray,
        "live": live.as_dict(),  # where live messages come from; postgres: the listener
    }
    return JSONResponse(body, status_code=200 if database else 503)


router.add_api_route("/health", health, methods=["GET"], include_in_schema=False)
api_router.add_api_route("/health", health, methods=["GET"])


@api_router.get("/cluster")
async def cluster(request: Request) -> Any:
    """Ray resources and running jobs, from the jobs runtime."""
    jobs = getattr(request.app.state, "jobs", None)
    if jobs is None:
        raise Unavailable("jobs are disabled on this service (ROLLOUT_JOBS_ENABLED=false)")
    return await _maybe_await(jobs.cluster_info())
