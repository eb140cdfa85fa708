"""Carries every unfinished study on, once per reconciler tick (app/jobs/reconciler.py).

Each study advances in its own transaction under its row lock (app/studies/service.advance):
one study's failure is logged and never holds up the others or the tick. Two API processes on
PostgreSQL take turns on the lock; on SQLite the database serializes them, and a trial number
taken meanwhile by the other process fails the insert, which rolls the whole advance back (the
next tick suggests again from what is stored).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import IntegrityError

from app.core.db import SessionMaker
from app.jobs.kernel import in_db
from app.studies import service

log = logging.getLogger(__name__)


class StudyDriver:
    def __init__(
        self, sessionmaker: SessionMaker, stop_run: Callable[[int], Awaitable[None]]
    ) -> None:
        self.sessionmaker = sessionmaker
        self.stop_run = stop_run  # SIGTERM a run's job (it is `stopping` already)
        self._last_error: dict[int, str] = {}

    async def tick(self) -> int:
        """Advance every unfinished study; returns how many trials were created."""
        created = 0
        for study_id in await in_db(self.sessionmaker, service.unfinished_ids):
            try:
                done = await in_db(self.sessionmaker, service.advance, study_id)
            except IntegrityError:
                log.info("study %d: another process suggested its next trial first", study_id)
                continue
            except Exception as exc:
                message = f"{type(exc).__name__}: {exc}"
                if self._last_error.get(study_id) != message:  # once, not every second
                    log.warning("study %d: %s", study_id, message, exc_info=True)
                self._last_error[study_id] = message
                continue
            self._last_error.pop(study_id, None)
            for run_id in done.stopping:
                await self.stop_run(run_id)
            created += done.created
        return created
