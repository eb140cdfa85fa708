"""Pure ASGI guards that keep web pages the user visits away from the API.

- `HostGuard` refuses a request (HTTP or websocket) whose Host header is not one this service
  answers to: loopback names and addresses, the address it is bound to, the host of its public
  URL, and `ROLLOUT_ALLOWED_HOSTS`. A DNS-rebinding page (evil.test resolving to 127.0.0.1)
  sends `Host: evil.test` and is refused before any route runs.

It answers with the service's error envelope; a refused websocket gets it as an HTTP denial
response where the server supports that, else a 1008 close before the handshake completes.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import Settings, is_loopback

WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
POLICY_VIOLATION = 1008


def split_host(value: str) -> tuple[str, int | None] | None:
    """`host[:port]` (IPv6 in brackets) -> (lower-case host, port); None if malformed."""
    value = value.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, sep, port_text = value.partition(":")
        rest = sep + port_text
    if rest and not rest.startswith(":"):
        return None
    port: int | None = None
    if rest:
        if not rest[1:].isdigit() or not 0 < int(rest[1:]) < 65536:
            return None
        port = int(rest[1:])
    host = host.rstrip(".")
    if not host or any(c in host for c in "/\\@ ?#"):
        return None
    return host, port


@dataclass(frozen=True)
class AllowedHosts:
    """The Host names this service answers to (ports are not checked: any port is fine)."""

    names: frozenset[str]
    suffixes: tuple[str, ...] = ()  # ".example.com" entries: the domain and its subdomains
    any_host: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> AllowedHosts:
        entries = [e.strip().lower() for e in settings.allowed_hosts if e.strip()]
        names = {e.strip("[]").rstrip(".") for e in entries if not e.startswith(".")}
        if settings.host not in WILDCARD_BINDS:
            names.add(settings.host.lower().strip("[]"))
        if settings.public_url and (public := urlsplit(settings.public_url).hostname):
            names.add(public.lower())
        suffixes = tuple(e for e in entries if e.startswith(".") and len(e) > 1)
        return cls(frozenset(names - {"*"}), suffixes, any_host="*" in entries)

    def allows(self, host: str) -> bool:
        if self.any_host or is_loopback(host) or host in self.names:
            return True
        return any(host == s[1:] or host.endswith(s) for s in self.suffixes)


class HostGuard:
    """Answer only requests addressed to an allowed host (DNS-rebinding protection)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.allowed.any_host:
            await self.app(scope, receive, send)
            return
        raw = header(scope, b"host")
        parsed = split_host(raw) if raw is not None else None
        if parsed is not None and self.allowed.allows(parsed[0]):
            await self.app(scope, receive, send)
            return
        shown = (raw or "")[:100]
        message = (
            f"this service does not answer to Host {shown!r}; add it to ROLLOUT_ALLOWED_HOSTS "
            "if that is how clients reach it"
            if raw
            else "the request has no Host header"
        )
        await deny(scope, receive, send, 400, "invalid_host", message)


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def deny(
    scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
) -> None:
    """Answer with the error envelope, over HTTP or as a websocket handshake refusal."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    connect: dict[str, Any] = await receive()
    if connect.get("type") != "websocket.connect":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": code})
