"""Stream set-ups a few per event-loop turn (app/live/turns.py): a storm is spread in order,
and what became ready meanwhile runs between its slices."""

from __future__ import annotations

import asyncio

import pytest

from app.live.turns import TurnBudget

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
