"""Websocket endpoints: one experiment's backlog + live messages, and list-page updates."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Query, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from app.core.auth import check_api_token, stream_subprotocol, websocket_token
from app.core.deps import read_sessionmaker
from app.core.errors import NotFound, RolloutError
from app.core.params import MAX_INT64, MIN_INT64, ExperimentId
from app.core.turns import stream_setups
from app.experiments import service as experiments
from app.experiments.progress import to_public
from app.live.backlog import Backlog, SharedBacklogs, encode
from app.live.deflate import FRAMES, SEND_NOW_EXTENSION
from app.live.hub import Lagged, LiveHub, Published, Subscription
from app.live.messages import LogMessage, StatusMessage
from app.live.topics import ALL_EXPERIMENTS, columnar, experiment_topic, metrics_message
from app.metrics.service import recent_points

router = APIRouter(tags=["live"])

BACKLOG_MAX_STEPS = 10_000
BACKLOG_STEPS_PER_MESSAGE = 500
BACKLOG_LOG_LINES = 100
POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013


async def _authorized(websocket: WebSocket) -> bool:
    """Check the API token before the handshake completes; refuse it like an HTTP request."""
    try:
        check_api_token(websocket.app.state.settings, websocket_token(websocket))
    except RolloutError as exc:
        await _refuse(websocket, exc)
        return False
    return True


async def _refuse(websocket: WebSocket, exc: RolloutError) -> None:
    """The error envelope with its HTTP status where the server can send one, else a 1008 close
    (which clients see as a bare 403)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        response = JSONResponse(exc.body(), status_code=exc.status_code, headers=headers)
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=POLICY_VIOLATION, reason=exc.message[:120])


async def _accept(websocket: WebSocket) -> None:
    await websocket.accept(subprotocol=stream_subprotocol(websocket))


def _backlog(session: Session, experiment_id: int, since_step: int) -> list[dict[str, Any]]:
    """Metrics after `since_step` (columnar, in chunks), then the status, then recent logs."""
    exp = experiments.get(session, experiment_id)
    steps, series = columnar(recent_points(session, experiment_id, since_step, BACKLOG_MAX_STEPS))
    messages: list[dict[str, Any]] = []
    for start in range(0, len(steps), BACKLOG_STEPS_PER_MESSAGE):
        end = start + BACKLOG_STEPS_PER_MESSAGE
        chunk = {name: column[start:end] for name, column in series.items()}
        messages.append(metrics_message(experiment_id, steps[start:end], chunk))
    status = StatusMessage(
        experiment_id=experiment_id,
        status=exp.status,
        reason="current status",
        at=exp.updated_at,
        error=exp.error,
        experiment=to_public(exp),
    )
    messages.append(status.wire())
    lines = experiments.tail_logs(session, experiment_id, BACKLOG_LOG_LINES)
    if lines:
        messages.append(LogMessage(experiment_id=experiment_id, lines=lines).wire())
    return messages


def _backlogs(websocket: WebSocket) -> SharedBacklogs:
    """The app's shared backlog reads (made on first use, inside the event loop; again when a
    test serves the same app from another loop)."""
    state = websocket.app.state
    backlogs: SharedBacklogs | None = getattr(state, "live_backlogs", None)
    if backlogs is None or backlogs.loop is not asyncio.get_running_loop():

        def load(experiment_id: int, since_step: int) -> Backlog:
            with read_sessionmaker(state)() as session:
                backlog = encode(_backlog(session, experiment_id, since_step), since_step)
            FRAMES.prebuild(backlog.texts)  # compressed here, off the event loop
            return backlog

        backlogs = state.live_backlogs = SharedBacklogs(load)
    return backlogs


def _drop_seen_steps(live: Published, last_step: int) -> Published | None:
    """Live metrics already covered by the backlog (published while it was read) are dropped."""
    message = live.data
    if message.get("type") != "metrics" or not message["step"] or message["step"][0] > last_step:
        return live
    keep = [i for i, s in enumerate(message["step"]) if s > last_step]
    if not keep:
        return None
    series = {n: [col[i] for i in keep] for n, col in message["series"].items()}
    steps = [message["step"][i] for i in keep]
    return Published(metrics_message(message["experiment_id"], steps, series))


async def _pump(websocket: WebSocket, subscription: Subscription, last_step: int) -> None:
    """Forward live messages until the client leaves; close with 1013 when it lags.

    Where the server offers it (app/live/deflate.py `send_now`), a message is written as it is
    published; this task sends what had to wait (a small message, a socket pushing back)."""

    async def forward() -> None:
        while True:
            message = _drop_seen_steps(await subscription.get(), last_step)
            if message is not None:
                subscription.sending = True
                try:
                    await websocket.send_text(message.text)
                finally:
                    subscription.sending = False

    send_now = websocket.scope.get("extensions", {}).get(SEND_NOW_EXTENSION, {}).get("send_now")
    if send_now is not None:

        def direct(published: Published) -> bool:
            message = _drop_seen_steps(published, last_step)
            return True if message is None else bool(send_now(message.text))

        subscription.direct = direct

    async def watch_disconnect() -> None:
        while True:
            if (await websocket.receive())["type"] == "websocket.disconnect":
                return

    tasks = [asyncio.create_task(forward()), asyncio.create_task(watch_disconnect())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            exc = task.exception()
            if isinstance(exc, Lagged):
                await websocket.close(code=TRY_AGAIN_LATER, reason="too slow; reconnect")
            elif exc is not None and not isinstance(exc, WebSocketDisconnect):
                raise exc
    finally:
        subscription.direct = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


@router.websocket("/experiments/{experiment_id}/stream")
async def experiment_stream(
    websocket: WebSocket,
    experiment_id: ExperimentId,
    since_step: Annotated[int, Query(ge=MIN_INT64, le=MAX_INT64)] = -1,
) -> None:
    """Backlog after `since_step` (metrics, status, recent logs), then live messages."""
    if not await _authorized(websocket):
        return
    hub: LiveHub = websocket.app.state.hub
    async with hub.subscribe(experiment_topic(experiment_id)) as subscription:
        try:
            backlog = await _backlogs(websocket).get(experiment_id, since_step)
        except NotFound as exc:
            await websocket.close(code=POLICY_VIOLATION, reason=exc.message[:120])
            return
        await stream_setups().take()  # a shared read wakes all its viewers at once
        await _accept(websocket)
        for text in backlog.texts:
            await websocket.send_text(text)
        await _pump(websocket, subscription, backlog.last_step)


@router.websocket("/stream")
async def experiments_stream(websocket: WebSocket) -> None:
    """List-page updates: `experiment` summaries on every status / progress change, `deleted`."""
    if not await _authorized(websocket):
        return
    hub: LiveHub = websocket.app.state.hub
    async with hub.subscribe(ALL_EXPERIMENTS) as subscription:
        await _accept(websocket)
        await _pump(websocket, subscription, last_step=-1)
