"""Request body limits, enforced before anything reads or parses a body.

A pure ASGI middleware (no BaseHTTPMiddleware: it must not buffer the body, and streamed
uploads must stay streamed). A request whose Content-Length is over its limit is answered 413
without calling the app at all; a body without Content-Length (chunked) is counted as it is
received, and the chunk that passes the limit raises `BodyTooLarge` (a 413 HTTPException), so
the JSON parser or the upload's writer never sees more than the limit. Routes that stream
archives (checkpoint and video uploads from jobs) get their own, larger limit; their storage
quotas apply on top (app/checkpoints/storage.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

INVALID = -1


class BodyTooLarge(HTTPException):
    """The body passed its limit while it streamed in (rendered as the error envelope)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


@dataclass(frozen=True)
class LargeBodyRoute:
    """Requests with this method whose path matches `pattern` (a regex) get the upload limit."""

    method: str
    pattern: str


class BodyLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        max_upload_bytes: int,
        upload_routes: Iterable[LargeBodyRoute] = (),
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_upload_bytes = max_upload_bytes
        self._uploads = [(r.method.upper(), re.compile(r.pattern)) for r in upload_routes]

    def limit_for(self, method: str, path: str) -> int:
        for route_method, pattern in self._uploads:
            if method == route_method and pattern.fullmatch(path):
                return self.max_upload_bytes
        return self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["method"], scope["path"])
        declared = _content_length(scope)
        if declared == INVALID:
            await _error(send, 400, "bad_request", "the Content-Length header is not a number")
            return
        if declared is not None and declared > limit:
            message = f"the request body ({declared} bytes) is larger than {limit} bytes"
            await _error(send, 413, "payload_too_large", message)
            return

        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge as exc:  # raised where no exception handler was in the way
            if started:
                raise
            await _error(send, 413, "payload_too_large", str(exc.detail))


def _content_length(scope: Scope) -> int | None:
    """The declared body size; None without the header, INVALID when it is not a number."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            if not text.isdigit():
                return INVALID
            return int(text) if len(text) <= 18 else 10**18  # over any limit, and no huge int

    return None


async def _error(send: Send, status: int, code: str, message: str) -> None:
    """The error envelope of app.core.errors, sent without touching the request body."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
