"""Request-scoped dependencies shared by the domain routers (as `Annotated` aliases)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import SessionMaker, read_only

# Requests that must never write: their sessions are read-only (deferred on SQLite, so a long
# read never holds the write lock that ingest needs).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def get_session(request: Request) -> Iterator[Session]:
    """A session for one request; handlers that write call `session.commit()` themselves.

    GET / HEAD requests get a read-only session. Closed when the handler returns
    (`scope="function"`), not after the response is sent: a slow client (a checkpoint
    download) must hold no transaction.
    """
    factory = request.app.state.sessionmaker
    if request.method in READ_METHODS:
        factory = read_only(factory)
    with factory() as session:
        yield session


def read_sessionmaker(state: Any) -> SessionMaker:
    """The read-only sessionmaker of an app (`app.state`): for /health, websocket backlogs."""
    return read_only(state.sessionmaker)


def get_sessionmaker(request: Request) -> SessionMaker:
    return request.app.state.sessionmaker


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_jobs(request: Request) -> Any:
    """The jobs runtime, or None when jobs are disabled."""
    return getattr(request.app.state, "jobs", None)


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SessionMakerDep = Annotated[SessionMaker, Depends(get_sessionmaker)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
JobsDep = Annotated[Any, Depends(get_jobs)]
