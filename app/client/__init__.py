"""The Python client of the Rollout API: `RolloutClient` and the errors it raises.

    from app.client import RolloutClient

    with RolloutClient("http://127.0.0.1:8000", token=None) as rollout:
        exp = rollout.submit({"env_id": "CartPole-v1"}, name="cartpole")
        done = rollout.wait(exp.id, timeout=600)

Light on purpose: importing it loads httpx and pydantic, never torch, gymnasium or SQLAlchemy.
"""

from app.client.client import DEFAULT_URL, RolloutClient
from app.client.errors import (
    APIError,
    FieldError,
    RolloutClientError,
    ServiceUnreachable,
    WaitTimeout,
)
from app.client.live import (
    CheckpointMessage,
    EvaluationMessage,
    LiveMessage,
    LogMessage,
    MetricsMessage,
    StatusMessage,
)

__all__ = [
    "DEFAULT_URL",
    "APIError",
    "CheckpointMessage",
    "EvaluationMessage",
    "FieldError",
    "LiveMessage",
    "LogMessage",
    "MetricsMessage",
    "RolloutClient",
    "RolloutClientError",
    "ServiceUnreachable",
    "StatusMessage",
    "WaitTimeout",
]
