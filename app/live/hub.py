"""The in-process live hub: fans messages out to websocket subscribers by topic.

`publish` is thread-safe and never blocks: handlers running in FastAPI's thread pool (and
sessions committing there) hand messages to the event loop with `call_soon_threadsafe`, so a
metric ingested reaches a connected client without any polling. Each subscriber has a bounded
queue; one that falls too far behind is told so (`Lagged`) and its websocket closes, and the
client reconnects with `since_step` to catch up from the database. `resync` does the same on
purpose, for subscribers that may have missed messages (the PostgreSQL feed was down).

Each message is encoded to JSON once per process, however many websockets send it.

A message reaches at most FANOUT_SLICE subscribers per turn of the event loop, the rest in the
turns after, messages in the order they were published: a crowd's fan-out then never holds the
loop for long, and an HTTP request that arrives meanwhile waits for one slice, not for every
viewer's write.

`feed` says where messages come from and whether that source is connected (/health shows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from typing import Any

_LAGGED = object()

FANOUT_SLICE = 32  # subscriber offers per event-loop turn: about 1-2 ms of socket writes


class Lagged(Exception):
    """The subscriber's queue overflowed; messages were dropped."""


class Published:
    """One published message as every subscriber of its topic receives it: the object, and its
    JSON text, encoded on first use and then shared by all the websockets that send it."""

    __slots__ = ("_text", "data")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:  # only the event loop's thread reads it: no lock needed
            self._text = json.dumps(self.data, separators=(",", ":"), ensure_ascii=False)
        return self._text


class Subscription:
    """A subscriber's queue, and optionally its direct way out.

    `direct` (set by a websocket once its backlog is sent) writes a message at once and says
    whether it did: a crowd's viewers are then served in the publishing turn of the event loop,
    with no task woken per viewer. A message goes direct only while nothing is queued or being
    sent (`sending`), so the subscriber still receives everything in order.
    """

    def __init__(self, max_queue: int) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=max_queue + 1)
        self._max = max_queue
        self.lagged = False
        self.direct: Callable[[Published], bool] | None = None
        self.sending = False  # the subscriber's own task is sending a queued message

    def _offer(self, message: Published) -> None:
        if self.lagged:
            return
        if (
            self.direct is not None
            and not self.sending
            and self._queue.empty()
            and self.direct(message)
        ):
            return
        if self._queue.qsize() >= self._max:
            self._lag()
            return
        self._queue.put_nowait(message)

    def _lag(self) -> None:
        if not self.lagged:
            self.lagged = True
            self._queue.put_nowait(_LAGGED)

    async def get(self) -> Published:
        item = await self._queue.get()
        if item is _LAGGED:
            raise Lagged("subscriber fell behind")
        return item


class _Fanout:
    """A published message still being handed to the subscribers its topic had then."""

    __slots__ = ("done", "message", "subscriptions")

    def __init__(self, message: Published, subscriptions: tuple[Subscription, ...]) -> None:
        self.message = message
        self.subscriptions = subscriptions
        self.done = 0


@dataclass(frozen=True)
class FeedStatus:
    """Where live messages come from: this process (`memory`) or PostgreSQL (`postgres`)."""

    backend: str = "memory"
    connected: bool = True
    reconnects: int = 0
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class LiveHub:
    def __init__(self, max_queue: int = 10_000) -> None:
        self._max_queue = max_queue
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subscribers: dict[str, set[Subscription]] = defaultdict(set)
        self._feed_lock = threading.Lock()
        self._feed = FeedStatus()
        self._fanouts: deque[_Fanout] = deque()
        self._draining = False

    @property
    def feed(self) -> FeedStatus:
        with self._feed_lock:
            return self._feed

    def set_feed(self, status: FeedStatus) -> None:
        """Thread-safe: the PostgreSQL listener reports its state from its own thread."""
        with self._feed_lock:
            self._feed = status

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._fanouts.clear()  # a loop that ended mid-fan-out left them behind
        self._draining = False

    async def stop(self) -> None:
        self._loop = None
        self._fanouts.clear()

    def publish(self, topic: str, message: dict[str, Any]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._deliver(topic, message)
        else:
            loop.call_soon_threadsafe(self._deliver, topic, message)

    def _deliver(self, topic: str, message: dict[str, Any]) -> None:
        subscriptions = self._subscribers.get(topic)
        if not subscriptions:
            return
        self._fanouts.append(_Fanout(Published(message), tuple(subscriptions)))
        if not self._draining:
            self._drain()

    def _drain(self) -> None:
        """Offer pending messages to up to FANOUT_SLICE subscribers, in publish order; what is
        left goes on in the next turn, after whatever became ready meanwhile."""
        budget = FANOUT_SLICE
        fanouts = self._fanouts
        while fanouts and budget > 0:
            fanout = fanouts[0]
            end = min(len(fanout.subscriptions), fanout.done + budget)
            for subscription in fanout.subscriptions[fanout.done : end]:
                subscription._offer(fanout.message)
            budget -= end - fanout.done
            fanout.done = end
            if end == len(fanout.subscriptions):
                fanouts.popleft()
        loop = self._loop
        if fanouts and loop is not None and not loop.is_closed():
            self._draining = True
            loop.call_soon(self._drain)
        else:
            self._draining = False
            fanouts.clear()  # the hub stopped: nobody is left to receive them

    def resync(self, topic: str | None = None) -> None:
        """Make the subscribers of `topic` (all, without one) reconnect and catch up from the
        database; thread-safe. For subscribers that may have missed messages."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self._resync, topic)

    def _resync(self, topic: str | None) -> None:
        topics = [topic] if topic is not None else list(self._subscribers)
        for name in topics:
            for subscription in tuple(self._subscribers.get(name, ())):
                subscription._lag()

    def subscriber_count(self, topic: str) -> int:
        return len(self._subscribers.get(topic, ()))

    @contextlib.asynccontextmanager
    async def subscribe(self, *topics: str) -> AsyncIterator[Subscription]:
        subscription = Subscription(self._max_queue)
        for topic in topics:
            self._subscribers[topic].add(subscription)
        try:
            yield subscription
        finally:
            for topic in topics:
                subs = self._subscribers.get(topic)
                if subs is not None:
                    subs.discard(subscription)
                    if not subs:
                        del self._subscribers[topic]
