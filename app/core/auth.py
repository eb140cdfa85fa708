"""API and job tokens.

Two kinds of bearer tokens:
- the API token (settings.api_token): when configured, every /api/v1 request and websocket
  needs it; unset, the service trusts loopback clients (and `rollout serve` refuses to listen
  elsewhere);
- a job token, issued per experiment at launch: it authorises only the job-side endpoints of
  that one experiment. Only its SHA-256 is stored. It never travels through Ray either: the
  launcher puts a one-time claim in the job's runtime_env (which Ray's dashboard lists), and
  the job exchanges it for its token over HTTP (`redeem_claim`); a claim read later is spent.

A token never travels in a URL (access logs, browser history and proxies keep URLs). Browsers
cannot set headers on a websocket handshake, so the dashboard offers two subprotocols:
`rollout` and `rollout.token.<base64url of the token>` (the way Kubernetes passes bearer tokens
from browsers, `base64url.bearer.authorization.k8s.io.<token>`); the service answers with
`rollout`, never echoing the token. Other clients may send `Authorization: Bearer` instead.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Protocol, TypeVar

from fastapi import Depends, Request, WebSocket
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.errors import Forbidden, InvalidInput, Unauthorized

STREAM_PROTOCOL = "rollout"
TOKEN_PROTOCOL_PREFIX = "rollout.token."


def new_token() -> str:
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str | None, expected_hash: str | None) -> bool:
    if not token or not expected_hash:
        return False
    return hmac.compare_digest(hash_token(token), expected_hash)


class HoldsJobToken(Protocol):
    """A row with a job: an experiment or an evaluation."""

    job_token_hash: str | None
    job_claim_hash: str | None


class RunsAJob(HoldsJobToken, Protocol):
    status: Any  # an ExperimentStatus or EvaluationStatus: has is_finished and value


def check_job_token(row: RunsAJob, token: str, what: str, *, finished_ok: bool) -> None:
    """Forbidden unless `token` is the row's job token and its run has not ended.

    A job token is revoked by its row's end: once finished, nothing its job sends is taken (no
    late points, files or status), so a job running on behind a terminal status cannot rewrite
    what the row shows. `finished_ok` lets a retried final status report through (it changes
    nothing). Writers load the row with its lock, so an end committed meanwhile is seen.
    """
    if not token_matches(token, row.job_token_hash):
        raise Forbidden(f"this token may not write to {what}")
    if row.status.is_finished and not finished_ok:
        raise Forbidden(f"{what} has ended ({row.status.value}): its job token is revoked")


def issue_claim(row: HoldsJobToken) -> str:
    """A one-time claim for the row's next job; any earlier token and claim stop working."""
    claim = new_token()
    row.job_claim_hash = hash_token(claim)
    row.job_token_hash = None
    return claim


def redeem_claim(row: HoldsJobToken, claim: str) -> str | None:
    """The job token for a valid claim (which is spent by it); None for any other claim."""
    if not token_matches(claim, row.job_claim_hash):
        return None
    token = new_token()
    row.job_claim_hash = None
    row.job_token_hash = hash_token(token)
    return token


Row = TypeVar("Row", bound=RunsAJob)


@dataclass(frozen=True)
class JobTokens(Generic[Row]):
    """The job-token services of one kind of row (experiments, evaluations): both kinds issue,
    claim, redeem and authorize alike; each states only what differs."""

    what: str  # "experiment": in messages
    load: Callable[..., Row]  # (session, id, *, lock) -> the row, or NotFound
    live: Callable[[Row], bool]  # its job may redeem its claim (the run has not ended)

    def issue(self, session: Session, row_id: int) -> str:
        """A fresh token for the row's job; replaces any earlier one. Only its hash is kept."""
        row = self.load(session, row_id, lock=True)
        token = new_token()
        row.job_token_hash = hash_token(token)
        return token

    def claim(self, session: Session, row_id: int) -> str:
        """The one-time claim the launcher hands to the row's next job."""
        return issue_claim(self.load(session, row_id, lock=True))

    def redeem(self, session: Session, row_id: int, claim: str) -> str:
        """The job token for the launched job's claim; Forbidden once spent, replaced by a
        later launch, or the run ended."""
        row = self.load(session, row_id, lock=True)
        token = redeem_claim(row, claim) if self.live(row) else None
        if token is None:
            raise Forbidden(
                f"this claim is not valid for {self.what} {row_id}: already redeemed, "
                f"replaced by a later launch, or the {self.what} is not running"
            )
        return token

    def authorize(
        self,
        session: Session,
        row_id: int,
        token: str,
        *,
        finished_ok: bool = False,
        lock: bool = False,
    ) -> Row:
        """The row, if `token` is its job token and its run has not ended; Forbidden otherwise
        (other jobs' tokens included; `check_job_token`). Writers pass `lock`."""
        row = self.load(session, row_id, lock=lock)
        check_job_token(row, token, f"{self.what} {row_id}", finished_ok=finished_ok)
        return row


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


async def require_api_token(request: Request) -> None:
    """Dependency of every user-facing /api/v1 route (async: no I/O, no thread-pool hop)."""
    check_api_token(request.app.state.settings, bearer(request.headers.get("authorization")))


def token_protocol(token: str) -> str:
    """The subprotocol that carries `token` (base64url: any token is a valid header token)."""
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return TOKEN_PROTOCOL_PREFIX + encoded


def _from_protocol(value: str) -> str | None:
    encoded = value[len(TOKEN_PROTOCOL_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode() or None
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def websocket_token(websocket: WebSocket) -> str | None:
    """The API token a websocket handshake presents (subprotocol or Authorization header).

    `?token=` is refused outright, not read: uvicorn has already written the URL to its access
    log by the time we see it, so accepting it would keep a leaking client working.
    """
    if "token" in websocket.query_params:
        raise InvalidInput(
            "never put the API token in the URL (servers and proxies log URLs): offer the "
            f"websocket subprotocols {STREAM_PROTOCOL!r} and {TOKEN_PROTOCOL_PREFIX}<base64url "
            "of the token>, or send Authorization: Bearer <token>"
        )
    for protocol in websocket.scope.get("subprotocols", ()):
        if protocol.startswith(TOKEN_PROTOCOL_PREFIX):
            return _from_protocol(protocol) or ""
    return bearer(websocket.headers.get("authorization"))


def stream_subprotocol(websocket: WebSocket) -> str | None:
    """`rollout` when the client offered it (a browser fails a handshake that picks none)."""
    return STREAM_PROTOCOL if STREAM_PROTOCOL in websocket.scope.get("subprotocols", ()) else None


async def job_token(request: Request) -> str:
    token = bearer(request.headers.get("authorization"))
    if token is None:
        raise Unauthorized("a job token is required (Authorization: Bearer <token>)")
    return token


JobTokenDep = Annotated[str, Depends(job_token)]
