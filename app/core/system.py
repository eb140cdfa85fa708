"""Service-level endpoints: health and the Ray cluster view (delegated to the jobs runtime);
the data dir's disk state, which /health reports and new experiments are checked against."""

from __future__ import annotations

import asyncio
import inspect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.core.auth import require_api_token
from app.core.config import Settings
from app.core.deps import read_sessionmaker
from app.core.errors import RolloutError

# Whatever ROLLOUT_MIN_FREE_BYTES says (0 included), the database and the logs need some room:
# below this the disk counts as full.
MIN_HEADROOM_BYTES = 1024**2


class InsufficientStorage(RolloutError):
    """507: storing this would break the storage quota or the free-space reserve."""

    status_code: ClassVar[int] = 507
    code: ClassVar[str] = "insufficient_storage"


def free_bytes(path: Path) -> int:
    """Free bytes (for unprivileged users) on the filesystem of `path` or its nearest
    existing parent."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


@dataclass(frozen=True)
class DiskState:
    """The data dir's filesystem: free bytes against the floor (ROLLOUT_MIN_FREE_BYTES, at
    least MIN_HEADROOM_BYTES)."""

    free_bytes: int
    floor_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> DiskState:
        floor = max(settings.min_free_bytes, MIN_HEADROOM_BYTES)
        return cls(free_bytes=free_bytes(settings.data_dir), floor_bytes=floor)

    @property
    def ok(self) -> bool:
        return self.free_bytes >= self.floor_bytes

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "free_bytes": self.free_bytes, "floor_bytes": self.floor_bytes}


def require_disk_room(settings: Settings, what: str) -> None:
    """507 when the data dir's disk is below its floor: a run started now could store
    neither its checkpoints nor, soon, its metrics. Deleting finished experiments frees
    space (DELETE removes their files first, so it works on a full disk)."""
    disk = DiskState.of(settings)
    if not disk.ok:
        raise InsufficientStorage(
            f"cannot accept {what}: the data dir's disk is nearly full ({disk.free_bytes:,} "
            f"bytes free, {disk.floor_bytes:,} must stay free: ROLLOUT_MIN_FREE_BYTES); "
            "delete finished experiments or free space on the disk"
        )


router = APIRouter(tags=["system"])
api_router = APIRouter(tags=["system"], dependencies=[Depends(require_api_token)])


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _probe(request: Request) -> tuple[bool, DiskState]:
    """The database and the disk, in one worker-thread hop: under load each hop waits for a
    pool thread and for the GIL, and /health is what says whether the service keeps up."""
    return _database_ok(request), DiskState.of(request.app.state.settings)


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
    live feed (degraded while the PostgreSQL listener reconnects); `disk` the data dir's
    free space against its floor (degraded below it: new experiments are refused with 507)."""
    database, disk = await asyncio.to_thread(_probe, request)
    jobs = getattr(request.app.state, "jobs", None)
    ray: bool | None = None
    if jobs is not None:
        try:
            ray = bool(await _maybe_await(jobs.healthy()))
        except Exception:
            ray = False
    live = request.app.state.hub.feed
    ok = database and ray is not False and live.connected and disk.ok
    body = {
        "status": "ok" if ok else "degraded",
        "database": database,
        "ray": ray,
        "live": live.as_dict(),  # where live messages come from; postgres: the listener
        "disk": disk.as_dict(),
    }
    return JSONResponse(body, status_code=200 if database else 503)


router.add_api_route("/health", health, methods=["GET"], include_in_schema=False)
api_router.add_api_route("/health", health, methods=["GET"])


@api_router.get("/cluster")
async def cluster(request: Request) -> Any:
    """Ray resources and running jobs, from the jobs runtime. A service with jobs disabled
    answers 200 saying so: a state of this service, not an outage."""
    jobs = getattr(request.app.state, "jobs", None)
    if jobs is None:
        return {
            "jobs_enabled": False,
            "message": "jobs are disabled on this service (ROLLOUT_JOBS_ENABLED=false)",
        }
    return {"jobs_enabled": True, **await _maybe_await(jobs.cluster_info())}
