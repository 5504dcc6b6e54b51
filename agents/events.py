"""Recording events: the one way state changes are announced, always after commit."""

from typing import Any

from asgiref.sync import async_to_sync
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
    async_to_sync(layer.group_send)(EVENTS_GROUP, {"type": "events.wake"})
