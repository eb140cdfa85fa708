"""uvicorn's HTTP/1.1 protocol with a deadline for each request's headers (slowloris).

uvicorn (0.55, h11) has no such deadline: `timeout_keep_alive` closes a connection that stays
idle after a response, but a new connection, or one that has started sending its next request,
may take forever to finish its headers, and each one holds a socket and a buffer. So each
request gets `timeout_s` from the connection (or the end of the previous response) until its
headers are complete; a websocket, once upgraded, is no longer this protocol's concern.

A connection whose first bytes ask for a websocket upgrade is parsed in its turn of the stream
set-ups (app/core/turns.py): a storm of viewers connecting at once is then parsed a few per
event-loop turn, and the HTTP requests that arrive meanwhile are read between them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from app.core.turns import stream_setups

UPGRADE_SNIFF_BYTES = 4096


def _asks_for_websocket(data: bytes) -> bool:
    return b"websocket" in data[:UPGRADE_SNIFF_BYTES].lower()


def header_timeout_protocol(timeout_s: float) -> type[asyncio.Protocol]:
    """An H11Protocol class whose requests must complete their headers within `timeout_s`."""

    class HeaderTimeoutH11Protocol(H11Protocol):
        header_timeout_s = timeout_s

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._deferred: list[bytes] | None = None
            self._first = True
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._deferred is not None:  # an upgrade waiting for its turn: keep the order
                self._deferred.append(data)
                return
            if self._first and _asks_for_websocket(data):
                self._first = False
                self._deferred = [data]
                stream_setups().run(self._parse_deferred)
                return
            self._first = False
            super().data_received(data)

        def _parse_deferred(self) -> None:
            chunks, self._deferred = self._deferred or [], None
            if not self.transport.is_closing():
                super().data_received(b"".join(chunks))

        def _arm(self) -> None:
            self._waiting_for = self.cycle  # the next request replaces this cycle
            self._header_timer: asyncio.TimerHandle | None = self.loop.call_later(
                self.header_timeout_s, self._headers_too_slow
            )

        def _disarm(self) -> None:
            timer, self._header_timer = getattr(self, "_header_timer", None), None
            if timer is not None:
                timer.cancel()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not self._waiting_for:
                self._disarm()  # the headers are in: the request is the app's business now

        def on_response_complete(self) -> None:
            # Armed before uvicorn starts the next cycle: a pipelined request already buffered
            # completes its headers inside the call below, which disarms the timer again.
            if not self.transport.is_closing():
                self._disarm()
                self._arm()
            super().on_response_complete()

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            # An upgraded connection belongs to the websocket protocol.
            if self.transport.get_protocol() is self and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Any) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutH11Protocol
