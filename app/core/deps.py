"""Request-scoped dependencies shared by the domain routers (as `Annotated` aliases)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.core.config import Settings
from app.core.db import SessionMaker, read_only

# Requests that must never write: their sessions are read-only (deferred on SQLite, so a long
# read never holds the write lock that ingest needs).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


# Dependencies here are `async def` unless they do I/O: FastAPI runs a plain `def` dependency
# in its thread pool, and each such hop costs a request two thread switches (under load, two
# waits for a CPU and for the GIL).


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A session for one request; handlers that write call `session.commit()` themselves.

    GET / HEAD requests get a read-only session. Closed when the handler returns
    (`scope="function"`), not after the response is sent: a slow client (a checkpoint
    download) must hold no transaction. Opening one does no I/O; closing one does only while
    it still holds a transaction (the rollback), and then runs in the thread pool.
    """
    factory = request.app.state.sessionmaker
    if request.method in READ_METHODS:
        factory = read_only(factory)
    session = factory()
    try:
        yield session
    finally:
        if session.in_transaction():
            await run_in_threadpool(session.close)
        else:
            session.close()


def read_sessionmaker(state: Any) -> SessionMaker:
    """The read-only sessionmaker of an app (`app.state`): for /health, websocket backlogs."""
    return read_only(state.sessionmaker)


async def get_sessionmaker(request: Request) -> SessionMaker:
    return request.app.state.sessionmaker


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_jobs(request: Request) -> Any:
    """The jobs runtime, or None when jobs are disabled."""
    return getattr(request.app.state, "jobs", None)


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SessionMakerDep = Annotated[SessionMaker, Depends(get_sessionmaker)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
JobsDep = Annotated[Any, Depends(get_jobs)]
