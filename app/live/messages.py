"""The live messages, one typed vocabulary for every side: the domains that publish them
(after commit, app/core/db.py `publish_after_commit`), the hub and PostgreSQL NOTIFY that carry
them (app/live/hub.py, pg_notify.py), the websocket route that sends them (app/live/router.py)
and the Python client that parses them (app/client/live.py).

An experiment's stream (`experiment_topic`) carries `ExperimentStreamMessage`; the list page's
topic (`ALL_EXPERIMENTS`) carries `ListMessage`. Each is a JSON object with a `type`; readers
ignore unknown keys, and the client skips unknown types (a newer service).

Metrics messages are the hot path (every ingest): `app/live/topics.metrics_message` builds
their dict directly, in this model's shape (a test checks it parses as `MetricsMessage`).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from app.checkpoints.schemas import CheckpointPublic
from app.evaluations.schemas import EvaluationPublic
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.schemas import ExperimentPublic


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON object as sent."""
        return self.model_dump(mode="json")


class MetricsMessage(_Message):
    """Columnar: one entry per step in every series, steps ascending."""

    type: Literal["metrics"] = "metrics"
    experiment_id: int
    step: list[int]
    series: dict[str, list[float | None]]

    def last(self, name: str) -> float | None:
        """The series' value at the last step of this message (None when it has none)."""
        column = self.series.get(name)
        return column[-1] if column else None


class StatusMessage(_Message):
    type: Literal["status"] = "status"
    experiment_id: int
    status: ExperimentStatus
    from_status: ExperimentStatus | None = None
    reason: str = ""
    at: dt.datetime | None = None
    error: str | None = None
    experiment: ExperimentPublic | None = Field(
        default=None, description="Sent with the status that ends the backlog."
    )


class CheckpointMessage(_Message):
    type: Literal["checkpoint"] = "checkpoint"
    experiment_id: int
    checkpoint: CheckpointPublic


class LogMessage(_Message):
    type: Literal["log"] = "log"
    experiment_id: int
    lines: list[str]


class EvaluationMessage(_Message):
    type: Literal["evaluation"] = "evaluation"
    experiment_id: int
    evaluation_id: int
    evaluation: EvaluationPublic | None = Field(description="None: the evaluation was deleted.")


class ExperimentMessage(_Message):
    """List topic: an experiment's current summary (created, changed status, made progress)."""

    type: Literal["experiment"] = "experiment"
    experiment: ExperimentPublic


class DeletedMessage(_Message):
    """List topic: the experiment is gone."""

    type: Literal["deleted"] = "deleted"
    experiment_id: int


ExperimentStreamMessage = Annotated[
    MetricsMessage | StatusMessage | CheckpointMessage | LogMessage | EvaluationMessage,
    Field(discriminator="type"),
]
ListMessage = Annotated[ExperimentMessage | DeletedMessage, Field(discriminator="type")]
STREAM_ADAPTER: TypeAdapter[ExperimentStreamMessage] = TypeAdapter(ExperimentStreamMessage)
LIST_ADAPTER: TypeAdapter[ListMessage] = TypeAdapter(ListMessage)
STREAM_TYPES = frozenset({"metrics", "status", "checkpoint", "log", "evaluation"})
