"""API and job tokens.

Two kinds of bearer tokens:
- the API token (settings.api_token): when configured, every /api/v1 request and websocket
  needs it; unset, the service trusts loopback clients (and `rollout serve` refuses to listen
  elsewhere);
- a job token, issued per experiment at launch: it authorises only the job-side endpoints of
  that one experiment. Only its SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Annotated

from fastapi import Depends, Request, WebSocket

from app.core.config import Settings
from app.core.errors import Unauthorized


def new_token() -> str:
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str | None, expected_hash: str | None) -> bool:
    if not token or not expected_hash:
        return False
    return hmac.compare_digest(hash_token(token), expected_hash)


def bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def check_api_token(settings: Settings, presented: str | None) -> None:
    expected = settings.api_token_value
    if expected is None:
        return
    if presented is None:
        raise Unauthorized("an API token is required (Authorization: Bearer <token>)")
    if not hmac.compare_digest(presented.encode(), expected.encode()):
        raise Unauthorized("the API token is not valid")


def require_api_token(request: Request) -> None:
    """Dependency of every user-facing /api/v1 route."""
    check_api_token(request.app.state.settings, bearer(request.headers.get("authorization")))


def websocket_token(websocket: WebSocket) -> str | None:
    return websocket.query_params.get("token") or bearer(websocket.headers.get("authorization"))


def job_token(request: Request) -> str:
    token = bearer(request.headers.get("authorization"))
    if token is None:
        raise Unauthorized("a job token is required (Authorization: Bearer <token>)")
    return token


JobTokenDep = Annotated[str, Depends(job_token)]
