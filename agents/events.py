"""Recording events: the one way state changes are announced, always after commit."""

import asyncio
import contextlib
from typing import Any
from uuid import UUID

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.dispatch import Signal

from agents import chain
from agents.models import Event
from agents.wire import socket_message
from infra import aio, transactions
from infra.compiled import insert

EVENTS_GROUP = "events"

# Sent once after each transaction that recorded events commits, in the committing process,
# with `events`, the ones it wrote: outward channels that keep their own cursor listen
# (webhooks.fanout.nudge). A receiver's error is its own to log; it never reaches the caller.
committed = Signal()


def record(
    type: str,
    *,
    thread_id: UUID | None = None,
    suspension_id: UUID | None = None,
    actor: Any = None,
    payload: dict[str, Any] | None = None,
) -> Event:
    """Write an event in the caller's transaction, chained (agents.chain), and wake the
    sockets once it commits."""
    event = Event(
        type=type,
        thread_id=thread_id,
        suspension_id=suspension_id,
        actor=actor,
        actor_name=getattr(actor, "username", ""),
        payload=payload or {},
    )
    with _transaction():
        chain.seal([event])
        _insert([event])
        wake_after_commit([event])
    return event


def record_many(events: list[Event]) -> list[Event]:
    """Write `events` in one insert, chained in list order."""
    if not events:
        return []
    for event in events:
        if event.actor is not None and not event.actor_name:
            event.actor_name = event.actor.username
    with _transaction():
        chain.seal(events)
        _insert(events)
        wake_after_commit(events)
    return events


def _insert(written: list[Event]) -> None:
    """Event.objects.bulk_create(written), in batches of INSERT_BATCH rows, by a statement
    written once (infra.compiled.insert): the ORM built the same statement again at every step
    (bench/README.md)."""
    for start in range(0, len(written), INSERT_BATCH):
        insert(written[start : start + INSERT_BATCH])


# Rows per INSERT: well under both databases' limits on a statement's parameters.
INSERT_BATCH = 500


def _transaction() -> Any:
    """The caller's transaction, or one of its own when there is none: the chain's lock and
    the rows it guards must commit together."""
    if transactions.in_transaction():
        return contextlib.nullcontext()
    return transaction.atomic()


class _Wake:
    """The commit callback that wakes the sockets: one per transaction (and savepoint level, so
    a savepoint rolled back takes its events' wake-up with it), carrying the events written at
    that level, so that the hubs (approvals.hub) need not read back what was just written."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        # Threads whose live lines (agents.streaming) changed at that level too: the same
        # wake-up tells the hubs, instead of one more message each.
        self.live: set[str] = set()
        # Django names a failing commit callback by its __qualname__, which only functions
        # and classes have of their own.
        self.__qualname__ = f"{__name__}._Wake"

    def __call__(self) -> None:
        committed.send_robust(Event, events=self.events)
        broadcast(wake_message(self.events, self.live))


def _pending_wake() -> "_Wake | None":
    """The wake-up already scheduled at the current transaction's level, if any."""
    return next(
        (
            func
            for func, at_this_level in transactions.scheduled()
            if isinstance(func, _Wake) and at_this_level
        ),
        None,
    )


def wake_after_commit(written: list[Event] | None = None) -> None:
    """Schedule one wake-up per transaction; the Event table stays the truth (invariant 5).
    `written`: the events this call wrote, carried by the wake-up when they are small."""
    wake = _pending_wake()
    if wake is None:
        wake = _Wake()
        transaction.on_commit(wake, robust=True)
    wake.events.extend(written or [])


def live_with_wake(thread_id: UUID) -> bool:
    """Let the transaction's events wake-up say that `thread_id`'s live line changed too;
    False when this transaction has none (the caller wakes the hubs itself)."""
    wake = _pending_wake()
    if wake is None:
        return False
    wake.live.add(str(thread_id))
    return True


# The most a wake-up carries of its events' socket messages (bytes); beyond it, the hubs read
# the events from the table as they would without them.
CARRIED_LIMIT = 32 * 1024


def wake_message(written: list[Event], live: set[str] | None = None) -> dict[str, Any]:
    """WAKE, with the events written (id, socket message, created_at), when all of them fit in
    CARRIED_LIMIT and have their ids, and the threads whose live lines changed (`live`). The
    messages are the events' wire form (agents.wire), the same text the hubs read back."""
    wake = {**WAKE, "live": sorted(live)} if live else WAKE
    rows, size = [], 0
    for event in sorted(written, key=lambda e: e.id or 0):
        if event.id is None:
            return wake
        text = socket_message(event.as_message())
        size += len(text)
        if size > CARRIED_LIMIT:
            return wake
        rows.append([event.id, text, event.created_at.isoformat()])
    return {**wake, "rows": rows} if rows else wake


def broadcast(message: dict[str, Any]) -> None:
    """Send `message` to every server process's socket hub (approvals.hub), if there is a
    channel layer; without one the hubs find out by reading the tables themselves."""
    layer = get_channel_layer()
    if layer is None:
        return  # no channel layer: the sockets tail the Event table themselves
    # Here, not with the module: redis-py and channels_redis (some 5 MB) are for a process
    # with a channel layer, not for the embedded setup's (issue 42).
    from infra import pubsub

    sender = pubsub.sync_sender(layer)
    if sender is not None:
        # channels_redis's pub/sub layer: its PUBLISH, sent from this thread (infra.pubsub).
        sender.group_send(EVENTS_GROUP, message)
        return
    if aio.in_server_thread():
        # A server thread (daphne): the server's own loop sends it.
        async_to_sync(layer.group_send)(EVENTS_GROUP, message)
        return
    # A worker: async_to_sync would start a thread, a loop and a Redis connection for
    # every wake-up; one loop per process, kept, costs much less (bench/README.md).
    future = asyncio.run_coroutine_threadsafe(
        layer.group_send(EVENTS_GROUP, message), aio.process_loop()
    )
    future.result(timeout=10)


WAKE = {"type": "events.wake"}
