"""The in-process live hub: thread-safe publish, topics, and lagging subscribers."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from app.live.hub import Lagged, LiveHub

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
