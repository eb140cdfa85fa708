"""The in-process live hub: thread-safe publish, topics, and lagging subscribers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest

from app.live.hub import FANOUT_SLICE, Lagged, LiveHub

pytestmark = pytest.mark.timeout(30)


def test_publish_from_a_worker_thread_reaches_subscribers_of_the_topic():
    async def scenario() -> list[dict]:
        hub = LiveHub()
        await hub.start()
        async with hub.subscribe("a") as sub_a, hub.subscribe("b") as sub_b:
            thread = threading.Thread(target=lambda: hub.publish("a", {"n": 1}))
            thread.start()
            thread.join()
            got = (await asyncio.wait_for(sub_a.get(), 5)).data
            assert sub_b._queue.empty()
        assert hub.subscriber_count("a") == 0
        return [got]

    assert asyncio.run(scenario()) == [{"n": 1}]


def test_a_subscriber_that_falls_behind_is_told_so():
    async def scenario() -> None:
        hub = LiveHub(max_queue=3)
        await hub.start()
        async with hub.subscribe("t") as sub:
            for i in range(5):
                hub.publish("t", {"i": i})
            assert [(await sub.get()).data for _ in range(3)] == [{"i": 0}, {"i": 1}, {"i": 2}]
            with pytest.raises(Lagged):
                await sub.get()

    asyncio.run(scenario())


def test_publish_before_start_or_after_stop_is_dropped():
    async def scenario() -> None:
        hub = LiveHub()
        hub.publish("t", {"early": True})
        await hub.start()
        async with hub.subscribe("t") as sub:
            await hub.stop()
            hub.publish("t", {"late": True})
            await asyncio.sleep(0.05)
            assert sub._queue.empty()

    asyncio.run(scenario())


def test_a_message_is_encoded_once_for_all_its_subscribers():
    async def scenario() -> None:
        hub = LiveHub()
        await hub.start()
        async with hub.subscribe("t") as first, hub.subscribe("t") as second:
            hub.publish("t", {"type": "log", "lines": ["é", "x"]})
            a, b = await first.get(), await second.get()
            assert a is b  # one shared message: its JSON text is computed once
            assert a.text == '{"type":"log","lines":["é","x"]}'
            assert json.loads(a.text) == a.data
            assert a.text is b.text

    asyncio.run(scenario())


def test_a_direct_subscriber_gets_everything_in_order_when_it_must_wait():
    """Messages go out at once through `direct` while nothing waits; a refused one (a socket
    pushing back) and everything after it are queued until the subscriber's task has sent
    them, so the order holds whichever way each message went."""

    async def scenario() -> tuple[list[int], list[int]]:
        hub = LiveHub()
        await hub.start()
        wire: list[int] = []
        went_direct: list[int] = []
        open_ = {"now": True}

        def direct(message) -> bool:  # type: ignore[no-untyped-def]
            if not open_["now"]:
                return False
            wire.append(message.data["i"])
            went_direct.append(message.data["i"])
            return True

        async with hub.subscribe("t") as sub:
            sub.direct = direct
            for i in range(3):
                hub.publish("t", {"i": i})  # direct
            open_["now"] = False
            hub.publish("t", {"i": 3})  # refused: queued
            open_["now"] = True
            hub.publish("t", {"i": 4})  # something is queued: queued too
            assert sub._queue.qsize() == 2
            queued = await sub.get()
            sub.sending = True  # the subscriber's task sends it meanwhile
            hub.publish("t", {"i": 5})  # must not overtake it
            wire.append(queued.data["i"])
            sub.sending = False
            while not sub._queue.empty():
                wire.append((await sub.get()).data["i"])
            hub.publish("t", {"i": 6})  # nothing waits: direct again
        return wire, went_direct

    wire, went_direct = asyncio.run(scenario())
    assert wire == list(range(7))
    assert went_direct == [0, 1, 2, 6]


def test_a_crowds_fan_out_is_sliced_across_turns_in_publish_order():
    """300 subscribers: each message reaches FANOUT_SLICE of them per turn of the event loop,
    so a callback that became ready meanwhile (an HTTP request) runs before the crowd is
    served; every subscriber still gets every message, in publish order."""

    async def scenario() -> tuple[list[list[int]], int, int]:
        hub = LiveHub()
        await hub.start()
        received: list[list[int]] = [[] for _ in range(300)]
        served_when_request_ran: list[int] = []
        async with contextlib.AsyncExitStack() as stack:
            subs = [await stack.enter_async_context(hub.subscribe("t")) for _ in range(300)]
            for i, sub in enumerate(subs):
                sub.direct = lambda m, i=i: received[i].append(m.data["n"]) is None
            for n in range(3):
                hub.publish("t", {"n": n})
            in_publish_turn = sum(len(r) for r in received)
            asyncio.get_running_loop().call_soon(
                lambda: served_when_request_ran.append(sum(len(r) for r in received))
            )
            for _ in range(100):
                await asyncio.sleep(0)
        return received, in_publish_turn, served_when_request_ran[0]

    received, in_publish_turn, when_request_ran = asyncio.run(scenario())
    assert in_publish_turn == FANOUT_SLICE
    assert when_request_ran < 3 * 300
    assert received == [[0, 1, 2]] * 300


def test_a_hub_whose_loop_ended_mid_fan_out_serves_again_on_the_next():
    """A hub whose loop ended (without a stop) while a crowd's fan-out was under way starts
    afresh on the next loop: nothing of the old fan-out lingers or blocks, and new messages
    reach every subscriber."""
    old_subscribers = contextlib.AsyncExitStack()

    async def first_loop(hub: LiveHub) -> None:
        await hub.start()
        for _ in range(4 * FANOUT_SLICE):
            await old_subscribers.enter_async_context(hub.subscribe("old"))
        hub.publish("old", {"n": 0})  # the rest of its fan-out is left for later turns

    async def second_loop(hub: LiveHub) -> list[list[int]]:
        await hub.start()
        received: list[list[int]] = [[] for _ in range(2 * FANOUT_SLICE)]
        async with contextlib.AsyncExitStack() as stack:
            for i in range(len(received)):
                sub = await stack.enter_async_context(hub.subscribe("t"))
                sub.direct = lambda m, i=i: received[i].append(m.data["n"]) is None
            hub.publish("t", {"n": 1})
            for _ in range(10):
                await asyncio.sleep(0)
        return received

    hub = LiveHub()
    loop = asyncio.new_event_loop()
    loop.run_until_complete(first_loop(hub))
    loop.close()  # its remaining turns never run
    assert hub._fanouts  # the fan-out was cut short
    assert asyncio.run(second_loop(hub)) == [[1]] * (2 * FANOUT_SLICE)
