"""Recording events: the one way state changes are announced, always after commit."""

import asyncio
import os
import threading
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agents.models import Event

EVENTS_GROUP = "events"


def record(
    type: str,
    *,
    thread_id: Any = None,
    suspension_id: Any = None,
    actor: Any = None,
    payload: dict[str, Any] | None = None,
) -> Event:
    """Write an event in the caller's transaction and wake the sockets once it commits."""
    event = Event.objects.create(
        type=type,
        thread_id=thread_id,
        suspension_id=suspension_id,
        actor=actor,
        payload=payload or {},
    )
    wake_after_commit()
    return event


def record_many(events: list[Event]) -> list[Event]:
    if not events:
        return []
    created = Event.objects.bulk_create(events)
    wake_after_commit()
    return created


def wake_after_commit() -> None:
    """Schedule one wake-up per transaction; the Event table stays the truth (invariant 5)."""
    connection = transaction.get_connection()
    if any(func is _wake for _, func, _ in connection.run_on_commit):
        return
    transaction.on_commit(_wake, robust=True)


def _wake() -> None:
    layer = get_channel_layer()
    if layer is None:
        return  # no channel layer: the sockets tail the Event table themselves
    if getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid():
        # A server thread (daphne): the server's own loop sends it.
        async_to_sync(layer.group_send)(EVENTS_GROUP, WAKE)
        return
    # A worker or beat: async_to_sync would start a thread, a loop and a Redis connection for
    # every wake-up; one loop per process, kept, costs a fifth of that.
    future = asyncio.run_coroutine_threadsafe(layer.group_send(EVENTS_GROUP, WAKE), _loop())
    future.result(timeout=10)


WAKE = {"type": "events.wake"}
_sender: tuple[int, asyncio.AbstractEventLoop] | None = None
_sender_lock = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    """This process's loop for sending wake-ups (a forked worker child starts its own)."""
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="wake-sender", daemon=True).start()
            _sender = (os.getpid(), loop)
        return _sender[1]
