"""The FastAPI application factory.

Nothing is built at import time: `create_app(settings)` wires routers, and its lifespan builds
the engine, migrates the database to head, starts the live hub and (when jobs are enabled) the
jobs runtime, and tears them down in reverse order. Tests build as many isolated apps as they
like. This module and the routers it imports never import torch, gymnasium or Ray.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.checkpoints.orphans import remove_orphans
from app.checkpoints.router import job_router as checkpoints_jobs
from app.checkpoints.router import router as checkpoints
from app.core import system
from app.core.body_limit import BodyLimitMiddleware, LargeBodyRoute
from app.core.browser_guard import AllowedHosts, HostGuard, OriginGuard
from app.core.config import Settings
from app.core.db import PROJECT_ROOT, SessionMaker, make_engine, make_sessionmaker, migrate
from app.core.errors import NotFound, install_error_handlers
from app.core.text_guard import TextGuardMiddleware
from app.core.turns import StreamTurns
from app.evaluations.router import job_router as evaluations_jobs
from app.evaluations.router import router as evaluations
from app.experiments.router import job_router as experiments_jobs
from app.experiments.router import router as experiments
from app.live.hub import LiveHub
from app.live.pg_notify import MetricsLoader, PgListener, conninfo, notify
from app.live.router import router as live
from app.metrics.router import job_router as metrics_jobs
from app.metrics.router import router as metrics
from app.metrics.router import summary_router as metric_summaries
from app.metrics.service import metrics_message_between
from app.presets.router import router as presets
from app.references.router import router as references
from app.studies.router import experiments_router as study_trials
from app.studies.router import router as studies
from app.sweeps.router import router as sweeps
from trainer.wire import API_PREFIX

SWAGGER_UI_PATH = "/swagger-ui"
# The routes whose body is a file streamed to disk: they get settings.max_upload_bytes.
UPLOAD_ROUTES = (
    LargeBodyRoute("PUT", rf"{API_PREFIX}/jobs/experiments/[^/]+/checkpoints"),
    LargeBodyRoute("PUT", rf"{API_PREFIX}/jobs/evaluations/[^/]+/video"),
)


# Every router served under /api/v1 (the fuzz test walks these for routes left out of the schema).
API_ROUTERS: tuple[APIRouter, ...] = (
    experiments,
    metrics,
    metric_summaries,
    checkpoints,
    presets,
    references,
    experiments_jobs,
    metrics_jobs,
    checkpoints_jobs,
    evaluations,
    evaluations_jobs,
    sweeps,
    studies,
    study_trials,
    live,
    system.api_router,
)


# A young collection every 10,000 net allocations instead of 700: fewer objects of requests
# in flight get promoted to the old generations, whose collections pause every request.
GC_THRESHOLDS = (10_000, 10, 10)


def create_app(settings: Settings | None = None, *, server_gc: bool = False) -> FastAPI:
    """The service's app. `server_gc` (for a server process, not for tests that build many
    apps in one process) tunes the cyclic garbage collector once the lifespan has started:
    everything alive then (FastAPI, SQLAlchemy, Alembic, the schemas: it lives as long as the
    process) is frozen out of its sight, so a full collection no longer walks it, and young
    collections run less often (GC_THRESHOLDS). Each full collection paused the server for
    100-250 ms under load without it; benchmarks/load_bench.py measures the difference."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.prepare_data_dir()
        engine = make_engine(settings.resolved_database_url)
        await asyncio.to_thread(migrate, engine)
        hub = LiveHub()
        await hub.start()
        listener = None
        if settings.uses_pg_notify:
            sessionmaker = make_sessionmaker(engine, hub, notifier=notify, settings=settings)
            listener = PgListener(conninfo(engine), hub, _metrics_loader(sessionmaker))
            await asyncio.to_thread(listener.start)
        else:
            sessionmaker = make_sessionmaker(engine, hub, settings=settings)
        await asyncio.to_thread(remove_orphans, settings, sessionmaker)
        app.state.engine = engine
        app.state.hub = hub
        app.state.sessionmaker = sessionmaker
        app.state.jobs = None
        runtime = None
        try:
            if settings.jobs_enabled:
                from app.jobs.runtime import JobsRuntime

                runtime = JobsRuntime(settings, sessionmaker, hub)
                await runtime.start()
                app.state.jobs = runtime
            if server_gc:
                gc.collect()
                gc.freeze()
                gc.set_threshold(*GC_THRESHOLDS)
            yield
        finally:
            if runtime is not None:
                await runtime.stop()
            if listener is not None:
                await asyncio.to_thread(listener.stop)
            await hub.stop()
            engine.dispose()

    app = FastAPI(
        title="Rollout",
        version="0.1.0",
        description="Run and watch PPO experiments on Ray.",
        lifespan=lifespan,
        docs_url=None,  # _serve_docs: Swagger UI from the service's own files
        redoc_url=None,  # ReDoc loads its script from a CDN: blank offline; /docs is the one
    )
    app.state.settings = settings
    install_error_handlers(app)
    # Added last runs first: a foreign Host is refused before its Origin is even looked at, and
    # both before the body is read (or refused for its size), and text no backend can store is
    # refused (app/core/text_guard.py) in a body already bounded in size.
    app.add_middleware(TextGuardMiddleware)
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=settings.max_request_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
        upload_routes=UPLOAD_ROUTES,
    )
    app.add_middleware(OriginGuard, allowed_origins=settings.allowed_origins)
    app.add_middleware(HostGuard, allowed=AllowedHosts.from_settings(settings))
    app.add_middleware(StreamTurns)  # a storm of viewers set up a few per loop turn

    api = APIRouter(prefix=API_PREFIX)
    for router in API_ROUTERS:
        api.include_router(router)
    app.include_router(api)
    app.include_router(system.router)
    dist = settings.frontend_dir or PROJECT_ROOT / "frontend" / "dist"
    _serve_docs(app, dist)
    _serve_frontend(app, dist)
    return app


def _metrics_loader(sessionmaker: SessionMaker) -> MetricsLoader:
    def load(experiment_id: int, step_min: int, step_max: int) -> dict[str, Any]:
        with sessionmaker() as session:
            return metrics_message_between(session, experiment_id, step_min, step_max)

    return load


def _serve_docs(app: FastAPI, dist: Path) -> None:
    """/docs, the OpenAPI page, with Swagger UI's script and styles served from dist/swagger-ui/
    (the frontend build copies them from npm's swagger-ui-dist), so it works offline. Without
    a built frontend it is FastAPI's stock page, which loads them from a CDN."""
    assets = dist / "swagger-ui"
    local: dict[str, str] = {}
    if (assets / "swagger-ui-bundle.js").is_file():
        app.mount(SWAGGER_UI_PATH, StaticFiles(directory=assets), name="swagger-ui")
        local = {
            "swagger_js_url": f"{SWAGGER_UI_PATH}/swagger-ui-bundle.js",
            "swagger_css_url": f"{SWAGGER_UI_PATH}/swagger-ui.css",
            "swagger_favicon_url": f"{SWAGGER_UI_PATH}/favicon-32x32.png",
        }

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API", **local
        )


def _serve_frontend(app: FastAPI, dist: Path) -> None:
    """Serve the built dashboard at / with index.html for client-side routes."""
    index = dist / "index.html"
    if not index.is_file():
        return
    if (dist / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=dist / "assets"), name="assets")
    root = dist.resolve()

    @app.get("/{path:path}", include_in_schema=False)
    async def frontend(path: str) -> FileResponse:
        if path.startswith(API_PREFIX.strip("/") + "/") or path == API_PREFIX.strip("/"):
            raise NotFound(f"no API route /{path}")
        candidate = (root / path).resolve()
        if path and candidate.is_file() and candidate.is_relative_to(root):
            return FileResponse(candidate)
        return FileResponse(index)
