"""Stream set-ups a few per event-loop turn (app/core/turns.py): a storm is spread in order,
and what became ready meanwhile runs between its slices."""

from __future__ import annotations

import asyncio

import pytest

from app.core.turns import TurnBudget

pytestmark = pytest.mark.timeout(30)


def test_a_storm_goes_through_a_few_per_turn_in_order_with_requests_in_between() -> None:
    async def scenario() -> tuple[list[tuple[int, int]], list[int]]:
        loop = asyncio.get_running_loop()
        budget = TurnBudget(4, loop)
        turn = {"n": 0}
        stop = False

        def tick() -> None:  # counts the loop's turns
            turn["n"] += 1
            if not stop:
                loop.call_soon(tick)

        loop.call_soon(tick)
        passed: list[tuple[int, int]] = []  # (caller, turn it went on in)
        request_ran: list[int] = []  # how many callers had passed when the request ran

        async def caller(i: int) -> None:
            await budget.take()
            passed.append((i, turn["n"]))

        tasks = [asyncio.create_task(caller(i)) for i in range(13)]
        await asyncio.sleep(0)  # every caller reached take() in this turn
        loop.call_soon(lambda: request_ran.append(len(passed)))
        await asyncio.gather(*tasks)
        stop = True
        return passed, request_ran

    passed, request_ran = asyncio.run(scenario())
    assert [i for i, _ in passed] == list(range(13))  # in the order they asked
    per_turn: dict[int, int] = {}
    for _, turn in passed:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert max(per_turn.values()) <= 4 and len(per_turn) >= 4
    assert request_ran[0] < 13  # a request that became ready meanwhile did not wait for all


def test_a_caller_cancelled_while_it_waits_gives_its_place_to_the_next() -> None:
    async def scenario() -> list[int]:
        budget = TurnBudget(1, asyncio.get_running_loop())
        passed: list[int] = []

        async def caller(i: int) -> None:
            await budget.take()
            passed.append(i)

        tasks = [asyncio.create_task(caller(i)) for i in range(4)]
        await asyncio.sleep(0)
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return passed

    assert asyncio.run(scenario()) == [0, 2, 3]


class _Transport(asyncio.Transport):
    """Just enough of a socket's transport for uvicorn's HTTP protocol to start."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


def test_an_upgrade_request_is_parsed_in_its_turn_and_its_bytes_stay_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A storm of upgrade requests waits for the set-up budget; a plain HTTP request on
    another connection is read at once; a waiting upgrade's later bytes join it in order, and
    one whose connection closed meanwhile is dropped unparsed."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.server import ServerState

    from app.core.http_server import header_timeout_protocol
    from app.core.turns import stream_setups

    parsed: list[tuple[str, bytes]] = []

    def record(self: H11Protocol, data: bytes) -> None:
        parsed.append((self.name, data))  # type: ignore[attr-defined]

    monkeypatch.setattr(H11Protocol, "data_received", record)
    upgrade = b"GET /api/v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"

    async def scenario() -> list[list[tuple[str, bytes]]]:
        config = uvicorn.Config(app=lambda *a: None, log_level="warning")
        protocol = header_timeout_protocol(5.0)
        loop = asyncio.get_running_loop()

        def connect(name: str) -> H11Protocol:
            conn = protocol(config, ServerState(), {}, loop)  # type: ignore[call-arg]
            conn.name = name  # type: ignore[attr-defined]
            conn.connection_made(_Transport())
            return conn

        budget = stream_setups()
        for _ in range(budget.per_turn):  # this turn's set-ups are spoken for
            budget.run(lambda: None)
        first, second, gone = connect("first"), connect("second"), connect("gone")
        first.data_received(upgrade)
        second.data_received(upgrade)
        gone.data_received(upgrade)
        gone.transport.close()
        first.data_received(b"Connection: Upgrade\r\n\r\n")
        connect("plain").data_received(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        steps = [list(parsed)]
        for _ in range(3):
            await asyncio.sleep(0)
            steps.append(list(parsed))
        for conn in (first, second, gone):
            conn._disarm()  # type: ignore[attr-defined]
        return steps

    steps = asyncio.run(scenario())
    assert steps[0] == [("plain", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")]
    assert steps[-1][1:] == [
        ("first", upgrade + b"Connection: Upgrade\r\n\r\n"),
        ("second", upgrade),
    ]
