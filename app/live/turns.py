"""A few stream set-ups per turn of the event loop: how a storm of viewers shares the loop.

When hundreds of viewers open their streams at once (a class, a demo, a reload of a shared
dashboard), every set-up becomes ready in the same turn of the event loop, and the loop runs
them all, back to back (middleware, routing, the token check, the handshake's reply, the
backlog's first writes), before it reads the next HTTP request: /health waited hundreds of
milliseconds behind them. `TurnBudget.take()` lets `per_turn` callers through in a turn and
queues the rest, in order, for the turns after; whatever else became ready meanwhile (an HTTP
request, a live message) runs between them.

`StreamTurns` takes a turn for every websocket before anything else runs; the experiment stream
takes another once its backlog is read (a shared read wakes all its viewers at once).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque

from starlette.types import ASGIApp, Receive, Scope, Send

SETUPS_PER_TURN = 8  # about a millisecond of set-up work each


class TurnBudget:
    """At most `per_turn` callers of `take()` go on in one turn of one event loop."""

    def __init__(self, per_turn: int, loop: asyncio.AbstractEventLoop) -> None:
        self.per_turn = per_turn
        self.loop = loop
        self._used = 0
        self._turn_scheduled = False
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def take(self) -> None:
        if self._used < self.per_turn and not self._waiting:
            self._use()
            return
        future = self.loop.create_future()
        self._waiting.append(future)
        await future  # a caller cancelled while it waits cancels its future: it is skipped

    def _use(self) -> None:
        self._used += 1
        if not self._turn_scheduled:
            self._turn_scheduled = True
            self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new turn: let the next callers through (they run in the turn after this one)."""
        self._turn_scheduled = False
        self._used = 0
        while self._waiting and self._used < self.per_turn:
            future = self._waiting.popleft()
            if not future.done():
                future.set_result(None)
                self._use()


_BUDGETS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnBudget] = (
    weakref.WeakKeyDictionary()
)


def stream_setups() -> TurnBudget:
    """The running loop's budget of stream set-ups (one per loop: tests serve apps on many)."""
    loop = asyncio.get_running_loop()
    budget = _BUDGETS.get(loop)
    if budget is None:
        budget = _BUDGETS[loop] = TurnBudget(SETUPS_PER_TURN, loop)
    return budget


class StreamTurns:
    """Pure ASGI middleware, outermost: each websocket waits for its turn before anything runs;
    HTTP requests pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await stream_setups().take()
        await self.app(scope, receive, send)
