"""infra.aio: the wait every long-lived loop of the server uses, and `blocking`, the thread
their database calls run in."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from infra.aio import blocking, wait_event


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


def test_a_blocking_call_does_not_wait_behind_the_shared_thread() -> None:
    # Another socket's slow call holds the thread that thread-sensitive calls share.
    release = threading.Event()

    async def main() -> tuple[bool, str]:
        busy = asyncio.ensure_future(sync_to_async(release.wait, thread_sensitive=True)(10))
        try:
            await asyncio.sleep(0.05)
            name = await asyncio.wait_for(blocking(lambda: threading.current_thread().name)(), 5)
            return busy.done(), name
        finally:
            release.set()
            await busy

    busy_done, name = asyncio.run(main())
    assert not busy_done
    assert name != threading.current_thread().name


def test_a_blocking_call_gives_its_connection_back_even_under_channels_test_communicator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # channels.testing's communicator makes channels' own close_old_connections a no-op while
    # a test talks to a socket; the hub's reads must still close their thread's connection.
    monkeypatch.setattr("channels.db.close_old_connections", lambda: None)
    calls: list[str] = []
    monkeypatch.setattr(
        "infra.aio.close_old_connections",
        lambda: calls.append(threading.current_thread().name),
    )

    def work(n: int) -> int:
        calls.append("work")
        return n + 1

    assert asyncio.run(blocking(work)(1)) == 2
    assert calls[1] == "work" and calls[0] == calls[2] != threading.current_thread().name
