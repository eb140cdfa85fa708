"""Text no backend can store, refused at the door for every route at once.

A JSON string may spell a lone UTF-16 surrogate (`"\\ud83d"`): Python's parser accepts it, but
the str it makes cannot be encoded as UTF-8, so the database driver, the JSON response and the
log writer all fail on it later (a 500, or a stored row that breaks every page that lists it).
NUL (U+0000) is refused in query strings for the same reason it is refused in stored text
(app/core/text.py). This pure ASGI middleware answers 422 naming the field before any route
runs, so nothing is stored:

- JSON request bodies: any key or string value holding a lone surrogate (a valid pair, an
  escaped emoji, is fine); a byte scan for `\\uD8..`-`\\uDF..` escapes comes first, so bodies
  without one (every metrics batch a job posts) are not parsed twice;
- query strings: any parameter whose name or value holds a NUL.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.text import NUL_MESSAGE

SURROGATE_MESSAGE = "must not contain lone UTF-16 surrogates (\\ud800-\\udfff)"
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def bad_text(value: str) -> str | None:
    """Why `value` cannot be encoded as UTF-8 (stored, logged or sent back), or None."""
    return SURROGATE_MESSAGE if _LONE_SURROGATE.search(value) else None


def first_bad_string(value: Any) -> tuple[str, str] | None:
    """(dotted path, message) of the first key or string with a lone surrogate, else None.

    Iterative: the body may be nested deeper than the recursion limit (the schemas refuse
    that themselves, with their own message)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if (why := bad_text(item)) is not None:
                return path or "body", why
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                if (why := bad_text(key)) is not None:
                    return child_path.encode("utf-8", "backslashreplace").decode(), f"key {why}"
                stack.append((child, child_path))
        elif isinstance(item, list):
            stack.extend((child, f"{path}.{i}" if path else str(i)) for i, child in enumerate(item))
    return None


class TextGuardMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if (found := _bad_query(scope.get("query_string", b""))) is not None:
            if scope["type"] == "http":
                await _invalid(send, *found)
            else:  # a websocket handshake: refuse it before it is accepted
                await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if _ESCAPED_SURROGATE.search(body):
            try:
                parsed = json.loads(body)
            except ValueError:  # not JSON: the route's own parser says so
                parsed = None
            if (found := first_bad_string(parsed)) is not None:
                await _invalid(send, *found)
                return
        await self.app(scope, _replay([{"type": "http.request", "body": body}], receive), send)


def _bad_query(query_string: bytes) -> tuple[str, str] | None:
    """(query.NAME, message) of the first parameter holding a NUL, else None. (Percent-escapes
    are decoded as UTF-8 with replacement, as the routes see them: no surrogate gets through.)"""
    text = query_string.decode("latin-1")
    if "%00" not in text and "\x00" not in text:
        return None
    for name, value in parse_qsl(text, keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return f"query.{name.replace(chr(0), '')}", NUL_MESSAGE
    return None


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"json" in value.lower()
    return False


def _replay(messages: list[Message], then: Receive) -> Receive:
    """`messages` first, then the client's own (its disconnect, when it comes)."""
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        return await then()

    return receive


async def _invalid(send: Send, field: str, why: str) -> None:
    """app.core.errors' 422 envelope, naming the field."""
    error = {
        "code": "invalid_input",
        "message": "the request is invalid",
        "fields": [{"field": field, "message": why}],
    }
    body = json.dumps({"error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 422,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
