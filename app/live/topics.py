"""Live topics and message builders (the server side of the websocket message union).

Every message is a JSON object with a `type`:

- `metrics`:    {"type", "experiment_id", "step": [..], "series": {name: [value | null, ..]}}
                columnar, one entry per step, steps ascending
- `status`:     {"type", "experiment_id", "status", "from_status", "reason", "at", "error"}
                (the one sent after an experiment stream's backlog also has "experiment":
                ExperimentPublic)
- `checkpoint`: {"type", "experiment_id", "checkpoint": CheckpointPublic}
- `log`:        {"type", "experiment_id", "lines": [..]}
- `evaluation`: {"type", "experiment_id", "evaluation_id", "evaluation": EvaluationPublic | null}
                (null: the evaluation was deleted)
- `experiment`: {"type", "experiment": ExperimentPublic} (list page: status / progress changes)
- `deleted`:    {"type", "experiment_id"} (list page)
"""

from __future__ import annotations

from typing import Any

ALL_EXPERIMENTS = "experiments"


def experiment_topic(experiment_id: int) -> str:
    return f"experiment:{experiment_id}"


def metrics_message(
    experiment_id: int, steps: list[int], series: dict[str, list[float | None]]
) -> dict[str, Any]:
    return {"type": "metrics", "experiment_id": experiment_id, "step": steps, "series": series}


def columnar(rows: list[tuple[int, str, float]]) -> tuple[list[int], dict[str, list[float | None]]]:
    """(step, name, value) points -> sorted steps and one aligned column per name."""
    steps = sorted({step for step, _, _ in rows})
    index = {step: i for i, step in enumerate(steps)}
    series: dict[str, list[float | None]] = {}
    for step, name, value in rows:
        column = series.get(name)
        if column is None:
            column = series[name] = [None] * len(steps)
        column[index[step]] = value
    return steps, series
