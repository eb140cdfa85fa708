"""Typed websocket messages of an experiment's live stream (app/live/topics.py is the server side).

Each message is a JSON object with a `type`; unknown types (a newer service) are skipped by the
client rather than failing, and unknown keys are ignored.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from app.checkpoints.schemas import CheckpointPublic
from app.evaluations.schemas import EvaluationPublic
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.schemas import ExperimentPublic


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MetricsMessage(_Message):
    """Columnar: one entry per step in every series, steps ascending."""

    type: Literal["metrics"]
    experiment_id: int
    step: list[int]
    series: dict[str, list[float | None]]

    def last(self, name: str) -> float | None:
        """The series' value at the last step of this message (None when it has none)."""
        column = self.series.get(name)
        return column[-1] if column else None


class StatusMessage(_Message):
    type: Literal["status"]
    experiment_id: int
    status: ExperimentStatus
    from_status: ExperimentStatus | None = None
    reason: str = ""
    error: str | None = None
    experiment: ExperimentPublic | None = Field(
        default=None, description="Sent with the status that ends the backlog."
    )


class CheckpointMessage(_Message):
    type: Literal["checkpoint"]
    experiment_id: int
    checkpoint: CheckpointPublic


class LogMessage(_Message):
    type: Literal["log"]
    experiment_id: int
    lines: list[str]


class EvaluationMessage(_Message):
    type: Literal["evaluation"]
    experiment_id: int
    evaluation_id: int
    evaluation: EvaluationPublic | None = Field(description="None: the evaluation was deleted.")


LiveMessage = Annotated[
    MetricsMessage | StatusMessage | CheckpointMessage | LogMessage | EvaluationMessage,
    Field(discriminator="type"),
]
_ADAPTER: TypeAdapter[LiveMessage] = TypeAdapter(LiveMessage)
KNOWN_TYPES = frozenset({"metrics", "status", "checkpoint", "log", "evaluation"})


def parse_message(raw: str | bytes) -> LiveMessage | None:
    """One websocket frame -> a typed message; None for a type this client does not know."""
    try:
        return _ADAPTER.validate_json(raw)
    except ValidationError:
        data = json.loads(raw)
        if isinstance(data, dict) and data.get("type") not in KNOWN_TYPES:
            return None
        raise
