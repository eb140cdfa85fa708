"""Request-scoped dependencies shared by the domain routers (as `Annotated` aliases)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import SessionMaker


def get_session(request: Request) -> Iterator[Session]:
    """A session for one request; handlers that write call `session.commit()` themselves.

    Closed when the handler returns (`scope="function"`), not after the response is sent: on
    SQLite every transaction holds the write lock, and a slow client (a checkpoint download)
    must not hold it.
    """
    with request.app.state.sessionmaker() as session:
        yield session


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
