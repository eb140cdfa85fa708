"""Typed websocket messages of an experiment's live stream, as the client reads them.

The models are the service's own (app/live/messages.py): one vocabulary for publisher, carrier
and reader. Unknown types (a newer service) are skipped rather than failing, and unknown keys
are ignored.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from app.live.messages import (
    STREAM_ADAPTER,
    STREAM_TYPES,
    CheckpointMessage,
    EvaluationMessage,
    ExperimentStreamMessage,
    LogMessage,
    MetricsMessage,
    StatusMessage,
)

LiveMessage = ExperimentStreamMessage
KNOWN_TYPES = STREAM_TYPES

__all__ = [
    "KNOWN_TYPES",
    "CheckpointMessage",
    "EvaluationMessage",
    "LiveMessage",
    "LogMessage",
    "MetricsMessage",
    "StatusMessage",
    "parse_message",
]


def parse_message(raw: str | bytes) -> LiveMessage | None:
    """One websocket frame -> a typed message; None for a type this client does not know."""
    try:
        return STREAM_ADAPTER.validate_json(raw)
    except ValidationError:
        data = json.loads(raw)
        if isinstance(data, dict) and data.get("type") not in KNOWN_TYPES:
            return None
        raise
