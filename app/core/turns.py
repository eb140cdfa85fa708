"""A few stream set-ups per turn of the event loop: how a storm of viewers shares the loop.

When hundreds of viewers open their streams at once (a class, a demo, a reload of a shared
dashboard), every set-up becomes ready in the same turn of the event loop, and the loop runs
them all, back to back (middleware, routing, the token check, the handshake's reply, the
backlog's first writes), before it reads the next HTTP request: /health waited hundreds of
milliseconds behind them. `TurnBudget.take()` lets `per_turn` callers through in a turn and
queues the rest, in order, for the turns after; whatever else became ready meanwhile (an HTTP
request, a live message) runs between them.

A websocket takes three turns: its upgrade request is parsed in one (app/core/http_server.py),
its ASGI app starts in another (`StreamTurns`), and the experiment stream takes a third once its
backlog is read (a shared read wakes all its viewers at once).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

SETUPS_PER_TURN = 2  # about a millisecond of set-up work each


class TurnBudget:
    """At most `per_turn` callbacks (`run`) or callers (`take`) go on in one turn of one loop."""

    def __init__(self, per_turn: int, loop: asyncio.AbstractEventLoop) -> None:
        self.per_turn = per_turn
        self.loop = loop
        self._used = 0
        self._turn_scheduled = False
        self._waiting: deque[Callable[[], object]] = deque()

    def run(self, callback: Callable[[], object]) -> None:
        """Call `callback` now if this turn has room, else in a later turn, in order."""
        if self._used < self.per_turn and not self._waiting:
            self._use()
            callback()
        else:
            self._waiting.append(callback)

    async def take(self) -> None:
        """Go on now if this turn has room, else wait for a later turn, in order."""
        future = self.loop.create_future()
        # A caller cancelled while it waits has a cancelled future: its turn is skipped.
        self.run(lambda: future.done() or future.set_result(None))
        await future

    def _use(self) -> None:
        self._used += 1
        if not self._turn_scheduled:
            self._turn_scheduled = True
            self.loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new turn: the next waiting callbacks run in it."""
        self._turn_scheduled = False
        self._used = 0
        while self._waiting and self._used < self.per_turn:
            callback = self._waiting.popleft()
            self._use()
            callback()


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
