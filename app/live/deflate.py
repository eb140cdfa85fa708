"""Websocket compression done once for a crowd: a large message sent to many viewers is
deflated once, and every connection sends the same bytes.

Browsers (and the Python client) negotiate permessage-deflate (RFC 7692), and each connection
then compresses every message it sends with a compressor of its own. A crowd of viewers of
one experiment receives the same backlog, the same strings (app/live/backlog.py), so that is
the same work done once per viewer: measured with 500 viewers of one running experiment
(benchmarks/load_viewers.py), deflate took three quarters of the API's event loop, and
/health waited behind it.

How the bytes can be shared: a message of at least `SHARE_MIN_BYTES` (a live metrics row is
about 1 kB, a backlog chunk hundreds) is compressed from a fresh compressor, with no history,
so its bytes depend only on its text and the connection's window size and settings; they are
kept in a small cache for the next viewer. A message compressed without history decodes
whatever history the client's decompressor holds. After such a message the connection's own
compressor starts afresh too, because what it may point back into must be a suffix of what
the client has seen (the messages since).
What this gives up: a live row compressed without history is bigger (a 20-metric row of
848 bytes: 470 bytes instead of 270 with the history); in exchange it is compressed once, not
once per viewer.

The frame goes one step further (`SharedFrames`): a server's frames are not masked, so a
large text sent to connections with the same settings is the same bytes on every wire. Its
frame is built once (encoded, compressed, framed) and every further connection writes those
bytes to its socket, skipping uvicorn's and websockets' per-send work.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from uvicorn.config import Config
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.extensions.base import Extension
from websockets.extensions.permessage_deflate import (
    PerMessageDeflate,
    ServerPerMessageDeflateFactory,
)
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

if TYPE_CHECKING:
    from uvicorn._types import ASGISendEvent
    from websockets.http11 import Request

# The ASGI scope extension under which a websocket offers `send_now`.
SEND_NOW_EXTENSION = "rollout.send_now"
# Only the tiniest messages compress better with the connection's history than they cost a
# crowd: a live row, a log line or a status is compressed and framed once for everyone
# (larger on the wire without history; cheaper for the service by far).
SHARE_MIN_BYTES = 64
CACHE_MAX_BYTES = 32 * 1024**2  # SharedFrames: whole frames, what a crowd is sent
# SharedCompressor: compressed payloads. A frame's payload is kept in SharedFrames already, so
# this cache only serves large messages sent outside a shared frame (websockets' own send); a
# small one keeps the same bytes from being held twice at full size.
COMPRESSED_CACHE_MAX_BYTES = 4 * 1024**2
# uvicorn's own permessage-deflate settings (uvicorn/protocols/websockets/websockets_sansio_impl.py)
WINDOW_BITS = 12
COMPRESS_SETTINGS: dict[str, Any] = {"memLevel": 5}


class SharedCompressor:
    """Compressed messages by content, least recently used dropped past `max_bytes` (each
    entry counts its message and its compressed form)."""

    def __init__(self, max_bytes: int = COMPRESSED_CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        # (length, CRC-32, window bits, settings) -> (message, compressed): the CRC finds the
        # entry, comparing the message itself makes it exact.
        self._cache: OrderedDict[tuple[Any, ...], tuple[bytes, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.compressions = 0  # tests and benchmarks count them
        self.hits = 0

    def compress(self, data: bytes, window_bits: int, settings: dict[str, Any]) -> bytes:
        """`data` deflated without history and sync-flushed, less the flush's 4-byte tail
        (RFC 7692, 7.2.1): the payload of one compressed message. Thread-safe: zlib lets go
        of the GIL while it compresses, so a backlog's reading thread can do it off the loop."""
        key = (len(data), zlib.crc32(data), window_bits, tuple(sorted(settings.items())))
        with self._lock:
            found = self._cache.get(key)
            if found is not None and found[0] == data:
                self._cache.move_to_end(key)
                self.hits += 1
                return found[1]
        encoder = zlib.compressobj(wbits=-window_bits, **settings)
        payload = (encoder.compress(data) + encoder.flush(zlib.Z_SYNC_FLUSH))[:-4]
        size = len(data) + len(payload)
        with self._lock:
            self.compressions += 1
            if key not in self._cache and size <= self.max_bytes:
                self._cache[key] = (data, payload)
                self._bytes += size
                while self._bytes > self.max_bytes:
                    _, (message, dropped) = self._cache.popitem(last=False)
                    self._bytes -= len(message) + len(dropped)
        return payload


SHARED = SharedCompressor()  # one per process: every connection of every app shares it


class SharedPerMessageDeflate(PerMessageDeflate):
    """permessage-deflate whose large messages come from `compressor`."""

    def __init__(self, *args: Any, compressor: SharedCompressor = SHARED, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.compressor = compressor
        self._history_stale = False
        # What a shared message's compressed bytes depend on besides its text: fixed at the
        # handshake, and looked up for every viewer of every message.
        self.shared_key: tuple[Any, ...] = (
            self.local_max_window_bits,
            tuple(sorted(self.compress_settings.items())),
        )

    def shared_sent(self) -> None:
        """A message compressed without history went out: the client's history now ends with
        it, which this connection's own compressor has not seen, so that compressor starts
        afresh before its next message (all it points back into must be in the client's
        history). Lazily: a crowd's connections mostly send shared messages only."""
        if not self.local_no_context_takeover:
            self._history_stale = True

    def encode(self, frame: Frame) -> Frame:
        shareable = (
            frame.opcode in (Opcode.TEXT, Opcode.BINARY)
            and frame.fin
            and len(frame.data) >= SHARE_MIN_BYTES
        )
        if not shareable:
            if self._history_stale:
                self.encoder = zlib.compressobj(
                    wbits=-self.local_max_window_bits, **self.compress_settings
                )
                self._history_stale = False
            return super().encode(frame)
        payload = self.compressor.compress(
            bytes(frame.data), self.local_max_window_bits, self.compress_settings
        )
        self.shared_sent()
        return Frame(frame.opcode, payload, frame.fin, True, frame.rsv2, frame.rsv3)


class SharedFrames:
    """Whole server frames of large texts by (text, the connection's compression settings),
    least recently used dropped past `max_bytes` (an entry counts its text and its frame).

    Keyed by the text itself: a published message's text is one object, whose hash Python
    computes once, so a lookup for the next viewer costs no pass over the text.
    """

    def __init__(self, max_bytes: int = CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._cache: OrderedDict[tuple[str, Any], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.builds = 0  # tests and benchmarks count them
        self.hits = 0

    def frame(self, text: str, extensions: list[Extension]) -> bytes | None:
        """The bytes of `text` as one unmasked text frame for a connection that negotiated
        `extensions` (none, or shared permessage-deflate); None for any other extension."""
        if not extensions:
            settings: Any = None
        elif len(extensions) == 1 and isinstance(extensions[0], SharedPerMessageDeflate):
            settings = extensions[0].shared_key
        else:
            return None
        key = (text, settings)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                self.hits += 1
        if found is not None:
            if extensions:
                extensions[0].shared_sent()  # type: ignore[attr-defined]
            return found
        # Built through the connection's own extension: the same bytes as websockets' own
        # send, and the connection's history marked as after any shared message.
        frame = Frame(Opcode.TEXT, text.encode()).serialize(mask=False, extensions=extensions)
        size = len(text) + len(frame)
        with self._lock:
            self.builds += 1
            if key not in self._cache and size <= self.max_bytes:
                self._cache[key] = frame
                self._bytes += size
                while self._bytes > self.max_bytes:
                    (dropped, _), old = self._cache.popitem(last=False)
                    self._bytes -= len(dropped) + len(old)
        return frame

    def prebuild(self, texts: tuple[str, ...], compressor: SharedCompressor | None = None) -> None:
        """Build the frames of `texts` for the settings browsers and the Python client
        negotiate with this server, ahead of the first viewer's send (thread-safe: a backlog's
        reading thread calls it, and the event loop then only writes the bytes)."""
        for text in texts:
            if len(text) >= SHARE_MIN_BYTES:
                self.frame(text, [default_deflate(compressor or SHARED)])


def default_deflate(compressor: SharedCompressor) -> SharedPerMessageDeflate:
    """The extension a connection gets when its client offers permessage-deflate without
    narrowing the server's window (browsers, websockets): this server's settings."""
    return SharedPerMessageDeflate(
        False, False, WINDOW_BITS, WINDOW_BITS, dict(COMPRESS_SETTINGS), compressor=compressor
    )


FRAMES = SharedFrames()  # one per process, like SHARED


class SharedDeflateFactory(ServerPerMessageDeflateFactory):
    """Negotiates as websockets' factory does; the extension it agrees to shares compression."""

    def __init__(self, compressor: SharedCompressor = SHARED, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compressor = compressor

    def process_request_params(
        self, params: Any, accepted_extensions: Any
    ) -> tuple[list[tuple[str, str | None]], Extension]:
        response, agreed = super().process_request_params(params, accepted_extensions)
        assert isinstance(agreed, PerMessageDeflate)
        shared = SharedPerMessageDeflate(
            agreed.remote_no_context_takeover,
            agreed.local_no_context_takeover,
            agreed.remote_max_window_bits,
            agreed.local_max_window_bits,
            agreed.compress_settings,
            compressor=self.compressor,
        )
        return response, shared


def shared_deflate_factory(compressor: SharedCompressor = SHARED) -> SharedDeflateFactory:
    return SharedDeflateFactory(
        compressor,
        server_max_window_bits=WINDOW_BITS,
        client_max_window_bits=WINDOW_BITS,
        compress_settings=dict(COMPRESS_SETTINGS),
    )


class SharedDeflateWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets-sansio protocol, with `SharedDeflateFactory` in place of its
    permessage-deflate factory (same negotiated settings)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: Any = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        extensions = [shared_deflate_factory()] if config.ws_per_message_deflate else []
        self.conn = ServerProtocol(
            extensions=extensions,
            max_size=config.ws_max_size,
            logger=logging.getLogger("uvicorn.error"),
        )
        self.frames = FRAMES

    def handle_connect(self, event: Request) -> None:
        """uvicorn's handshake; the app finds `send_now` in the scope's extensions."""
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:
            scope["extensions"][SEND_NOW_EXTENSION] = {"send_now": self.send_now}

    def send_now(self, text: str) -> bool:
        """Write `text` to the socket at once, if it goes as a shared frame and the connection
        is open and not pushing back; False when it must take the awaited way (`send`).

        The live hub hands a published message to each viewer this way (app/live/hub.py), in
        the same turn of the event loop: no task wakes up per viewer, no ASGI layers."""
        if (
            self.disconnected
            or not self.writable.is_set()
            or len(text) < SHARE_MIN_BYTES
            or not self._open_for_data()
        ):
            return False
        frame = self.frames.frame(text, self.conn.extensions)
        if frame is None:
            return False
        self.transport.write(frame)
        return True

    async def send(self, message: ASGISendEvent) -> None:
        """A large text goes out as the crowd's shared frame (`send_now`, once the socket takes
        more); everything else, and any connection not plainly open, takes uvicorn's way."""
        if message["type"] == "websocket.send":
            text = message.get("text")
            if text is not None and message.get("bytes") is None and len(text) >= SHARE_MIN_BYTES:
                await self.writable.wait()
                if self.disconnected:
                    raise ClientDisconnected()
                if self.send_now(text):
                    return
        await super().send(message)

    def _open_for_data(self) -> bool:
        return (
            self.handshake_complete
            and not self.close_sent
            and self.initial_response is None
            and self.conn.state is State.OPEN
            and not self.conn.expect_continuation_frame
        )
