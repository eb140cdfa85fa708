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

from app.live.deflate import SHARE_MIN_BYTES, SharedCompressor, shared_deflate_factory


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
    assert compressor.compressions == len(set(large)) == 2
    assert compressor.hits == len(large) * len(connections) - 2
    for data in set(large):
        assert len(sizes[data]) == 1  # the same bytes for everyone
        assert min(sizes[data]) < len(data) / 4  # and compressed


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
