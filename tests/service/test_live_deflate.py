"""Shared websocket compression (app/live/deflate.py): large messages are deflated once for
every connection, and each client decodes exactly what was sent, small messages with their
connection's history included."""

from __future__ import annotations

import json

import pytest
from websockets.extensions.permessage_deflate import (
    ClientPerMessageDeflateFactory,
    PerMessageDeflate,
)
from websockets.frames import Frame, Opcode

from app.live.deflate import (
    SHARE_MIN_BYTES,
    SharedCompressor,
    SharedFrames,
    shared_deflate_factory,
)


def _connection(
    compressor: SharedCompressor, **client_options: object
) -> tuple[PerMessageDeflate, PerMessageDeflate]:
    """A negotiated (server, client) pair, as a browser's offer and our factory agree it."""
    client_factory = ClientPerMessageDeflateFactory(**client_options)  # type: ignore[arg-type]
    offer = client_factory.get_request_params()
    response, server = shared_deflate_factory(compressor).process_request_params(offer, [])
    client = client_factory.process_response_params(response, [])
    assert isinstance(server, PerMessageDeflate) and isinstance(client, PerMessageDeflate)
    return server, client


def _messages() -> list[bytes]:
    """Small live-like rows around large backlog-like chunks; the rows repeat each other
    and the chunks, so a compressor with history points back into them."""
    row = json.dumps({"type": "metrics", "step": [7], "series": {"loss": [0.25]}}).encode()
    chunk = json.dumps(
        {"type": "metrics", "step": list(range(4000)), "series": {"loss": [0.25] * 4000}}
    ).encode()
    other = chunk.replace(b"0.25", b"0.5")
    assert len(chunk) >= SHARE_MIN_BYTES and len(row) < SHARE_MIN_BYTES
    return [row, row, chunk, row, row + row, other, row, chunk, row]


def _roundtrip(server: PerMessageDeflate, client: PerMessageDeflate, data: bytes) -> bytes:
    sent = server.encode(Frame(Opcode.TEXT, data))
    assert sent.rsv1  # compressed
    return bytes(client.decode(sent).data)


@pytest.mark.parametrize(
    "client_options",
    [{}, {"client_no_context_takeover": True}, {"server_no_context_takeover": True}],
    ids=["context-takeover", "client-no-takeover", "server-no-takeover"],
)
def test_every_client_decodes_what_was_sent(client_options: dict[str, object]) -> None:
    compressor = SharedCompressor()
    connections = [_connection(compressor, **client_options) for _ in range(3)]
    for data in _messages():
        for server, client in connections:
            assert _roundtrip(server, client, data) == data


def test_a_large_message_is_compressed_once_for_every_connection() -> None:
    compressor = SharedCompressor()
    connections = [_connection(compressor) for _ in range(5)]
    messages = _messages()
    sizes: dict[bytes, set[int]] = {}
    for data in messages:
        for server, client in connections:
            sent = server.encode(Frame(Opcode.TEXT, data))
            assert bytes(client.decode(sent).data) == data
            sizes.setdefault(data, set()).add(len(sent.data))
    large = [m for m in messages if len(m) >= SHARE_MIN_BYTES]
    assert compressor.compressions == len(set(large)) >= 2
    assert compressor.hits == len(large) * len(connections) - len(set(large))
    for data in set(large):
        assert len(sizes[data]) == 1  # the same bytes for everyone
        assert min(sizes[data]) < len(data) / (4 if len(data) > 4096 else 1)  # and compressed


def test_the_cache_stays_within_its_bound() -> None:
    compressor = SharedCompressor(max_bytes=4096)
    server, client = _connection(compressor)
    for i in range(50):
        data = json.dumps({"i": i, "noise": [(i * k) % 997 for k in range(8000)]}).encode()
        assert _roundtrip(server, client, data) == data
    assert compressor._bytes <= 4096 and compressor.compressions == 50


def test_messages_that_share_a_checksum_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.live import deflate

    monkeypatch.setattr(deflate.zlib, "crc32", lambda data: 0)  # every lookup collides
    compressor = SharedCompressor()
    server, client = _connection(compressor)
    first, second = b"a" * 4096, b"b" * 4096
    for data in (first, second, first, second):
        assert _roundtrip(server, client, data) == data
    assert compressor.hits == 1 and compressor.compressions == 3


def _read_frame(wire: bytes) -> tuple[Frame, bytes]:
    """One unmasked server frame off the front of `wire` (RFC 6455, 5.2), and the rest."""
    first, second = wire[0], wire[1]
    assert not second & 0x80  # servers do not mask
    length, at = second & 0x7F, 2
    if length == 126:
        length, at = int.from_bytes(wire[2:4], "big"), 4
    elif length == 127:
        length, at = int.from_bytes(wire[2:10], "big"), 10
    frame = Frame(
        Opcode(first & 0x0F),
        wire[at : at + length],
        fin=bool(first & 0x80),
        rsv1=bool(first & 0x40),
    )
    return frame, wire[at + length :]


def test_a_crowd_shares_one_frame_per_setting_and_every_client_decodes_it() -> None:
    """Large texts go out as one shared frame per connection setting (deflate or none); small
    ones with each connection's history, which must then not point into a shared message the
    connection's own compressor never saw: every client decodes every message exactly."""
    compressor, frames = SharedCompressor(), SharedFrames()
    deflated = [_connection(compressor) for _ in range(3)]
    deflated.append(_connection(compressor, server_no_context_takeover=True))
    texts = [m.decode() for m in _messages()]
    received: list[list[str]] = [[] for _ in range(len(deflated) + 1)]
    for text in texts:
        for i, (server, client) in enumerate(deflated):
            wire = frames.frame(text, [server]) if len(text) >= SHARE_MIN_BYTES else None
            if wire is None:  # websockets' own send
                wire = Frame(Opcode.TEXT, text.encode()).serialize(mask=False, extensions=[server])
            frame, rest = _read_frame(wire)
            assert rest == b"" and frame.fin and frame.rsv1
            received[i].append(bytes(client.decode(frame).data).decode())
        plain = frames.frame(text, [])  # a client that negotiated no compression
        assert plain is not None
        frame, _ = _read_frame(plain)
        assert not frame.rsv1
        received[-1].append(bytes(frame.data).decode())
    assert all(got == texts for got in received)
    large = {t for t in texts if len(t) >= SHARE_MIN_BYTES}
    # One build per large text for the deflated connections, one per text without deflate.
    assert frames.builds == len(large) + len(set(texts))
    assert compressor.compressions == len(large)
    shared = sum(1 for t in texts if len(t) >= SHARE_MIN_BYTES) * len(deflated)
    assert frames.hits == shared + len(texts) - frames.builds


@pytest.mark.parametrize(
    "client_options",
    [{}, {"client_max_window_bits": True}, {"client_no_context_takeover": True}],
    ids=["websockets", "browser", "client-no-takeover"],
)
def test_frames_built_off_the_loop_are_the_ones_a_viewer_sends(
    client_options: dict[str, object],
) -> None:
    """A backlog's reading thread builds its frames (`prebuild`) for the settings clients
    negotiate; the viewer that sends them afterwards builds nothing and decodes them exactly."""
    compressor, frames = SharedCompressor(), SharedFrames()
    texts = tuple(m.decode() for m in _messages())
    frames.prebuild(texts, compressor)
    built = frames.builds
    server, client = _connection(compressor, **client_options)
    for text in texts:
        if len(text) < SHARE_MIN_BYTES:
            continue
        wire = frames.frame(text, [server])
        assert wire is not None
        frame, rest = _read_frame(wire)
        assert rest == b"" and frame.rsv1
        assert bytes(client.decode(frame).data).decode() == text
    assert frames.builds == built > 0


def test_shared_frames_stay_within_their_bound_and_refuse_other_extensions() -> None:
    frames = SharedFrames(max_bytes=8192)
    server, _ = _connection(SharedCompressor())
    for i in range(20):
        assert frames.frame(f"{i:04d}" + "x" * 2000, [server]) is not None
    assert frames._bytes <= 8192 and frames.builds == 20
    plain_deflate, _ = _connection(SharedCompressor())
    other = PerMessageDeflate(False, False, 12, 12)  # websockets' own, not the shared one
    assert frames.frame("y" * 4096, [other]) is None
    assert frames.frame("y" * 4096, [plain_deflate, plain_deflate]) is None
