"""One status change for every kind of run (app/core/lifecycle.py): experiments and
evaluations move through the same sequence, each with its own state machine and record."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.core.db import SessionMaker, transaction
from app.core.errors import IllegalTransition
from app.evaluations import service as evaluations
from app.evaluations.models import Evaluation, EvaluationStatus
from app.experiments import service as experiments
from app.experiments.models import ExperimentEvent


@pytest.fixture
def run(client: TestClient, create_experiment: Any) -> tuple[SessionMaker, int]:
    """The app's sessions and a new experiment's id."""
    return client.app.state.sessionmaker, create_experiment()["id"]  # type: ignore[attr-defined]


def _events(maker: SessionMaker, experiment_id: int) -> list[tuple[str | None, str]]:
    with transaction(maker) as session:
        return [(e.from_status, e.to_status) for e in experiments.events(session, experiment_id)]


def test_an_experiment_moves_once_records_once_and_refuses_what_its_machine_forbids(
    run: tuple[SessionMaker, int],
) -> None:
    maker, exp_id = run
    with transaction(maker) as session:
        row = experiments.transition(session, exp_id, "running", "launched")
        assert row.status.value == "running" and row.started_at is not None
        started = row.started_at
        assert experiments.transition(session, exp_id, "running", "again") is row  # no-op
        assert row.started_at == started
    with transaction(maker) as session, pytest.raises(IllegalTransition, match="running to pend"):
        experiments.transition(session, exp_id, "pending", "back")
    with transaction(maker) as session:
        row = experiments.transition(session, exp_id, "failed", "crash", error="E", log_tail="T")
        assert (row.error, row.log_tail, row.finished_at is not None) == ("E", "T", True)
    assert _events(maker, exp_id) == [
        (None, "pending"),
        ("pending", "running"),
        ("running", "failed"),
    ]


def test_settle_moves_only_from_the_statuses_the_scheduler_saw(
    run: tuple[SessionMaker, int],
) -> None:
    maker, exp_id = run
    settle = experiments.LIFECYCLE.settle
    with transaction(maker) as session:
        # The job reported `running` meanwhile: the scheduler's `queued` does not overwrite it.
        experiments.transition(session, exp_id, "running", "the job's own report")
        assert not settle(session, exp_id, ("pending",), "queued", "waiting")
        assert settle(session, exp_id, ("running", "stopping"), "succeeded", "done")
        assert not settle(session, 10**6, ("running",), "failed", "gone")  # no such row
        count = session.scalar(select(func.count()).where(ExperimentEvent.experiment_id == exp_id))
    assert count == 3


def test_an_evaluation_moves_through_the_same_sequence_with_its_own_reason(
    run: tuple[SessionMaker, int],
) -> None:
    maker, exp_id = run
    with transaction(maker) as session:
        row = Evaluation(
            experiment_id=exp_id, checkpoint_id=1, checkpoint_ref="latest",
            checkpoint_iteration=1, checkpoint_env_steps=1, episodes=1, seed=0,
            deterministic=True, record_video=False, status=EvaluationStatus.pending,
        )  # fmt: skip
        session.add(row)
        session.flush()
        evaluation_id = row.id
    with transaction(maker) as session:
        row = evaluations.transition(session, evaluation_id, "running", "launched")
        assert (row.status.value, row.reason) == ("running", "launched")
        assert not evaluations.LIFECYCLE.settle(session, evaluation_id, ("pending",), "queued", "")
    with transaction(maker) as session, pytest.raises(IllegalTransition, match="evaluation"):
        evaluations.transition(session, evaluation_id, "pending", "back")
