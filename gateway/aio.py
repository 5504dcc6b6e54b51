"""Small asyncio helpers shared by the long-lived loops of the server process."""

import asyncio
import contextlib


async def wait_event(event: asyncio.Event, seconds: float | None) -> None:
    """Wait until `event` is set or `seconds` have passed (forever when None).

    Not `asyncio.wait_for`: on Python 3.11 it loses a cancellation that arrives in the same
    loop turn as the event is set (fixed in 3.12), and a loop that waits this way then runs on
    after its task was cancelled, keeping the event loop (and the process) from closing.
    `asyncio.timeout` tells its own timeout from a cancellation, and lets the latter through.
    """
    if seconds is None:
        await event.wait()
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
