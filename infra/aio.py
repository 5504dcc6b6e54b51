"""Small asyncio helpers shared by the long-lived loops of the server process."""

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from asgiref.sync import SyncToAsync, sync_to_async
from django.db import close_old_connections

log = logging.getLogger(__name__)


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


def blocking(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` as a coroutine function run in a worker thread, its database connection given
    back after, but not in the one thread that thread-sensitive calls share: a stream's poll,
    or the events hub's read, must not wait behind another request's transaction or another
    socket's call.

    What channels' database_sync_to_async(func, thread_sensitive=False) does, but for one
    thing: channels' test communicator replaces the close_old_connections that channels calls
    with a no-op while a test talks to a socket (channels.testing.ApplicationCommunicator), so
    the hub's and the presence board's reads, in threads of their own, kept their connections
    and PostgreSQL's pool ran dry in the socket tests. This calls Django's directly."""

    def call(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(call, thread_sensitive=False)


def in_server_thread() -> bool:
    """Whether this thread runs a sync_to_async call for an event loop of this process (a
    request or socket thread of daphne), so that async_to_sync hands a coroutine to that loop
    rather than start a loop of its own. asgiref records it only in a thread-local of its
    SyncToAsync (`main_event_loop_pid`, set in the thread that runs the call); a forked child
    inherits the parent's record, hence the pid."""
    return getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid()


def detached_task(coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """A task for a loop shared by every connection of the process, started in a context of
    its own: asyncio.create_task would copy the context of the request or socket that happens
    to start it, and with it that caller's log ids and asgiref's per-request executor, which
    the task's thread-sensitive calls would then keep using after the request has ended."""
    return asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())


_process_loop: tuple[int, asyncio.AbstractEventLoop] | None = None
_process_loop_lock = threading.Lock()


def process_loop() -> asyncio.AbstractEventLoop:
    """An event loop that lives as long as this process, run in a daemon thread of its own
    and made at first use (after a fork, the child makes its own: a thread does not cross a
    fork). For synchronous code (a Celery task) whose coroutines keep things open between
    calls, as connections to a server, which `asyncio.run`'s loop of one call would close."""
    global _process_loop
    with _process_loop_lock:
        if _process_loop is None or _process_loop[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="process-loop", daemon=True).start()
            _process_loop = (os.getpid(), loop)
        return _process_loop[1]


def run_in_process_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run `coroutine` on this process's lasting loop (process_loop) and wait for its result,
    from synchronous code. Anything that stops the wait (a time limit's exception) cancels
    it."""
    future = asyncio.run_coroutine_threadsafe(coroutine, process_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


# How often a group's member joins again: channels_redis's core layer forgets group members
# after a day; the pub/sub layer (settings.CHANNEL_LAYERS) never does, and a new member costs
# one SUBSCRIBE.
REJOIN_INTERVAL = 3600


async def follow_group(
    layer: Any,
    group: str,
    handle: Callable[[dict[str, Any]], Awaitable[None]],
    retry: float,
    name: str,
) -> None:
    """Hand every message sent to `group` to `handle`, forever (until cancelled).

    Each round joins on a channel of its own and leaves it after REJOIN_INTERVAL: the pub/sub
    layer drops a channel whose receive was cancelled, so a channel is never reused. When the
    layer fails (Redis away), the round ends and the next starts `retry` seconds later; the
    callers' safety polls cover what was missed meanwhile.
    """
    while True:
        channel = None
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REJOIN_INTERVAL):
                    while True:
                        await handle(await layer.receive(channel))
        except Exception:
            log.warning("%s: channel layer unavailable, retrying", name, exc_info=True)
            await asyncio.sleep(retry)
        finally:
            if channel is not None:
                with contextlib.suppress(Exception):
                    await layer.group_discard(group, channel)
