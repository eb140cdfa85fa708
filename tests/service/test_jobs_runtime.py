"""The jobs runtime's own Ray head: started when no cluster is configured, gone after stop()."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker, migrate, transaction
from app.experiments import service
from app.experiments.schemas import ExperimentCreate
from app.jobs.runtime import MAX_RAY_TEMP_DIR_LEN, JobsRuntime, ray_temp_dir


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ray_temp_dir_stays_short_enough_for_unix_sockets(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 80)
    temp = ray_temp_dir(deep)
    assert len(str(temp)) <= MAX_RAY_TEMP_DIR_LEN + 20 and temp.is_dir()
    assert not temp.is_relative_to(deep)
    temp.rmdir()


@pytest.mark.ray
def test_local_head_is_started_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("ROLLOUT_RAY_ADDRESS", raising=False)
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'r.db'}")
    engine = make_engine(settings.resolved_database_url)
    migrate(engine)
    sessionmaker = make_sessionmaker(engine)

    async def scenario() -> tuple[int, dict, bool]:
        runtime = JobsRuntime(settings, sessionmaker, None)
        await runtime.start()
        assert runtime.head is not None and runtime.head.process is not None
        pgid = os.getpgid(runtime.head.process.pid)
        healthy = await runtime.healthy()
        info: dict = {}
        for _ in range(40):  # Ray reports its resources a few seconds after start
            info = await runtime.cluster_info()
            if info["resources"] is not None:
                break
            await asyncio.sleep(0.5)
        with transaction(sessionmaker) as session:  # as if its job were running on the head
            exp = service.create(session, ExperimentCreate(name="x", config={}))
            for to in ("queued", "running"):
                service.transition(session, exp.id, to, "test")
        await runtime.stop()
        return pgid, info, healthy

    pgid, info, healthy = asyncio.run(scenario())
    assert healthy
    assert info["local_head"] and info["resources"]["CPU"]["total"] >= 1
    assert not info["address"].endswith(":6379")
    assert not _alive(pgid), "a Ray process outlived the runtime"
    with transaction(sessionmaker) as session:
        [exp] = service.list_experiments(session)[0]
        assert exp.status.value == "stopped"
        assert "shut down" in service.events(session, exp.id)[-1].reason
    engine.dispose()
