"""Pure ASGI guards that keep web pages the user visits away from the API.

- `HostGuard` refuses a request (HTTP or websocket) whose Host header is not one this service
  answers to: loopback names and addresses, the address it is bound to, the host of its public
  URL, and `ROLLOUT_ALLOWED_HOSTS`. A DNS-rebinding page (evil.test resolving to 127.0.0.1)
  sends `Host: evil.test` and is refused before any route runs.
- `OriginGuard` refuses state-changing requests (POST, PUT, PATCH, DELETE) and websocket
  handshakes that carry an Origin other than the service's own (or `ROLLOUT_ALLOWED_ORIGINS`),
  and POSTs with a form-able content type (the "simple requests" a page may send cross-origin
  without a CORS preflight). Clients without an Origin (CLI, httpx, jobs) are not browsers and
  pass.

Both answer with the service's error envelope; a refused websocket gets it as an HTTP denial
response where the server supports that, else a 1008 close before the handshake completes.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import Settings, is_loopback

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The content types a page may POST cross-origin without a preflight (the Fetch standard's
# CORS-safelisted request-header values): no API route takes them.
FORM_CONTENT_TYPES = frozenset(
    {"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"}
)
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
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
        # A listed port is ignored: the check is on names, as for loopback ones.
        names = {
            parsed[0]
            for e in entries
            if not e.startswith(".") and (parsed := split_host(e)) is not None
        }
        if settings.host not in WILDCARD_BINDS:
            names.add(settings.host.lower().strip("[]"))
        if settings.public_url and (public := urlsplit(settings.public_url).hostname):
            names.add(public.lower())
        suffixes = tuple(e for e in entries if e.startswith(".") and len(e) > 1)
        return cls(frozenset(names), suffixes, any_host="*" in entries)

    def allows(self, host: str) -> bool:
        if self.any_host or is_loopback(host) or host in self.names:
            return True
        return any(host == s[1:] or host.endswith(s) for s in self.suffixes)


# Health probes address the machine, not a name: Kubernetes sends `Host: <pod IP>`. /health
# is open without a token anyway, so answering it under any name gives a rebinding page nothing.
OPEN_PATHS = frozenset({"/health"})


class HostGuard:
    """Answer only requests addressed to an allowed host (DNS-rebinding protection)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.allowed.any_host:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] in OPEN_PATHS and scope["method"] == "GET":
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


class OriginGuard:
    """Refuse cross-origin writes and websockets, and form-able POST bodies."""

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str]) -> None:
        self.app = app
        self.allowed = frozenset(o for o in (normalize_origin(a) for a in allowed_origins) if o)
        self.any_origin = any(a.strip() == "*" for a in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        guarded = kind == "websocket" or (kind == "http" and scope["method"] in UNSAFE_METHODS)
        if not guarded:
            await self.app(scope, receive, send)
            return
        origin = header(scope, b"origin")
        if origin is not None and not self._allows(scope, origin):
            message = (
                f"cross-origin request from {origin[:100]!r} refused: only pages served by this "
                "service (or listed in ROLLOUT_ALLOWED_ORIGINS) may change state or open streams"
            )
            await deny(scope, receive, send, 403, "cross_origin", message)
            return
        if kind == "http" and scope["method"] == "POST":
            content_type = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if content_type in FORM_CONTENT_TYPES:
                message = f"POST bodies must be application/json, not {content_type}"
                await deny(scope, receive, send, 415, "unsupported_media_type", message)
                return
        await self.app(scope, receive, send)

    def _allows(self, scope: Scope, origin: str) -> bool:
        if self.any_origin:
            return True
        normalized = normalize_origin(origin)
        return normalized is not None and (
            normalized in self.allowed or normalized == own_origin(scope)
        )


def normalize_origin(origin: str) -> str | None:
    """`scheme://host[:port]` with the default port dropped; None for `null` or junk."""
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        return None
    parsed = split_host(parts.netloc)
    if parsed is None:
        return None
    return _origin(parts.scheme, *parsed)


def own_origin(scope: Scope) -> str | None:
    """The origin a page served by this service has: the request's scheme and Host."""
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme"))
    parsed = split_host(header(scope, b"host") or "")
    if parsed is None or scheme not in ("http", "https"):
        return None
    return _origin(scheme, *parsed)


def _origin(scheme: str, host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    if port is None or port == DEFAULT_PORTS[scheme]:
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


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
