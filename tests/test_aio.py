"""infra.aio.wait_event: the wait every long-lived loop of the server uses."""

import asyncio

import pytest

from infra.aio import wait_event


async def loop_until_cancelled(event: asyncio.Event, rounds: list[int]) -> None:
    # The shape of the hub's and the presence board's loops.
    while True:
        event.clear()
        rounds.append(1)
        await wait_event(event, 1.0)


def test_a_cancellation_that_meets_a_wake_up_ends_the_loop() -> None:
    # On 3.11, asyncio.wait_for returned the event's result here and dropped the cancellation:
    # the loop went on, and asyncio.run never returned (a CI run hung at exit this way).
    async def main() -> None:
        event = asyncio.Event()
        rounds: list[int] = []
        task = asyncio.create_task(loop_until_cancelled(event, rounds))
        await asyncio.sleep(0.01)
        event.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 2)

    asyncio.run(main())


def test_returns_when_set_and_after_the_time() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        started = loop.time()
        await wait_event(event, 0.05)
        waited = loop.time() - started
        loop.call_later(0.01, event.set)
        started = loop.time()
        await wait_event(event, 5)
        return waited, loop.time() - started

    timed_out, woken = asyncio.run(main())
    assert 0.04 <= timed_out < 1
    assert woken < 1
