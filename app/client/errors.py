"""What the Python client raises. One hierarchy, so that callers can catch as widely as they like:

RolloutClientError            base
├── APIError                  the service answered with an error (its JSON error envelope)
├── ServiceUnreachable        no answer: connection refused, DNS, timeout, dropped stream
└── WaitTimeout               wait() / wait_evaluation() ran out of time (carries the last state)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx


class RolloutClientError(Exception):
    """Base of every error the client raises."""


@dataclass(frozen=True)
class FieldError:
    """One entry of a 422's `fields`: a dotted path ("config.lr") and what is wrong with it."""

    field: str
    message: str


class APIError(RolloutClientError):
    """An error response: `{"error": {"code", "message", "fields"?}}` (docs/api.md, Errors)."""

    def __init__(
        self, status: int, code: str, message: str, fields: list[FieldError] | None = None
    ) -> None:
        super().__init__(f"error {status}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields: list[FieldError] = fields or []

    @property
    def field(self) -> str | None:
        """The first field a 422 names (None for other errors)."""
        return self.fields[0].field if self.fields else None

    def describe(self) -> str:
        """One line for the error, one more per bad field."""
        lines = [str(self)] + [f"  {f.field}: {f.message}" for f in self.fields]
        return "\n".join(lines)

    @classmethod
    def from_response(cls, response: httpx.Response) -> APIError:
        """Parse the error envelope; a body that is not one (a proxy's page) keeps its text."""
        try:
            error: Any = response.json()["error"]
            fields = [
                FieldError(str(f["field"]), str(f["message"])) for f in error.get("fields") or []
            ]
            return cls(response.status_code, str(error["code"]), str(error["message"]), fields)
        except (ValueError, KeyError, TypeError):
            text = response.text.strip()[:500] or response.reason_phrase
            return cls(response.status_code, "http_error", text)


class ServiceUnreachable(RolloutClientError):
    """The service did not answer (or the connection broke mid-way)."""


class WaitTimeout(RolloutClientError):
    """Waiting for a terminal status took longer than asked; `last` is the last state seen."""

    def __init__(self, message: str, last: Any) -> None:
        super().__init__(message)
        self.last = last
