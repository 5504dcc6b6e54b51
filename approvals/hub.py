"""One reader of the Event table per server process, fanned out to the process's sockets.

Were every socket to query the Event table on every wake-up, a thousand open inboxes would
make a thousand queries per event. The hub reads each new event once per process (and event
loop), encodes it once, and hands the batch to every socket it serves; a socket that is
behind the batch (it has just connected with an old cursor, or it fell behind) reads the table
itself (approvals.consumers). The Event table stays the truth (invariant 5): the channel
layer, when there is one, only wakes the hub, and a slow poll covers a lost wake-up; with no
channel layer the hub tails the table.

The hub applies the same rule as a socket to a missing id: it does not step over one until
the gap has settled (approvals.cursor), so a batch never skips an event that is still being
committed.
"""

import asyncio
import contextlib
import json
import logging
import weakref
from dataclasses import dataclass
from typing import Any, Protocol

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from agents.events import EVENTS_GROUP
from agents.models import Event
from approvals.cursor import GAP_WAIT, gap_horizon, gap_settled, page_cursor

log = logging.getLogger(__name__)

BATCH = 500
TAIL_INTERVAL = 0.1  # no channel layer: how often the table is read
SAFETY_POLL = 1.0  # with a channel layer: a lost wake-up delays an event at most this long
REJOIN_INTERVAL = 3600  # channels-redis forgets group members after a day


@dataclass(frozen=True)
class Row:
    id: int
    text: str  # the socket message, JSON-encoded once for every socket
    created_at: Any


@dataclass(frozen=True)
class Batch:
    """Events the hub read, ids ascending. `prev`: every event up to it came in earlier
    batches, so a socket whose cursor is at least `prev` misses nothing by applying `rows`."""

    prev: int
    rows: list[Row]


class Subscriber(Protocol):
    def deliver(self, batch: Batch) -> None: ...


def read_after(after: int, limit: int = BATCH) -> list[Row]:
    """Events after `after` in id order, as socket messages (blocking: call it in a thread)."""
    rows = Event.objects.filter(id__gt=after).select_related("actor").order_by("id")[:limit]
    return [
        Row(
            e.id,
            json.dumps({**e.as_message(), "actor": e.actor.username if e.actor else None}),
            e.created_at,
        )
        for e in rows
    ]


def contiguous(after: int, rows: list[Row], horizon: int) -> tuple[list[Row], bool]:
    """The rows that may be applied after `after`, and whether an unsettled gap stopped them."""
    taken: list[Row] = []
    cursor = after
    for row in rows:
        if row.id != cursor + 1 and not gap_settled(row.id, row.created_at, horizon):
            return taken, True
        taken.append(row)
        cursor = row.id
    return taken, False


def read_settled(after: int) -> tuple[list[Row], bool]:
    """Events after `after` up to the first gap that has not settled (approvals.cursor), and
    whether such a gap stopped the read. Blocking: call it in a thread."""
    rows, stopped = contiguous(after, read_after(after), horizon=0)
    if stopped:
        # A gap: learn the horizon, then read again, in that order.
        horizon = gap_horizon()
        rows, stopped = contiguous(after, read_after(after), horizon)
    return rows, stopped


class EventHub:
    def __init__(self) -> None:
        self.layer = get_channel_layer()
        self.cursor: int | None = None
        self.subscribers: set[Subscriber] = set()
        self.wake = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.reads = 0  # table reads, for the benchmarks and tests that count them

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.add(subscriber)
        if not self.tasks:
            self.tasks = [asyncio.create_task(self._run())]
            if self.layer is not None:
                self.tasks.append(asyncio.create_task(self._listen()))

    async def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)
        if self.subscribers or not self.tasks:
            return
        # The last socket left: stop reading. A later socket starts the hub afresh.
        tasks, self.tasks, self.cursor = self.tasks, [], None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self) -> None:
        if self.cursor is None:
            # Start a little behind the newest event, where every id has committed; the
            # sockets ignore what they already have.
            self.cursor = await database_sync_to_async(page_cursor)()
        while True:
            self.wake.clear()
            stopped_at_gap = await self._publish_new()
            if self.layer is None:
                interval = TAIL_INTERVAL
            elif stopped_at_gap:
                interval = GAP_WAIT.total_seconds() / 4
            else:
                interval = SAFETY_POLL
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), interval)

    async def _publish_new(self) -> bool:
        while True:
            rows, stopped_at_gap = await self._read(self.cursor)
            if rows:
                batch = Batch(self.cursor, rows)
                self.cursor = rows[-1].id
                for subscriber in list(self.subscribers):
                    subscriber.deliver(batch)
            if stopped_at_gap or len(rows) < BATCH:
                return stopped_at_gap

    @database_sync_to_async
    def _read(self, after: int) -> tuple[list[Row], bool]:
        self.reads += 1
        return read_settled(after)

    async def _listen(self) -> None:
        """Wake the reader on each wake-up the channel layer brings."""
        channel = await self.layer.new_channel()
        try:
            while True:
                try:
                    await self.layer.group_add(EVENTS_GROUP, channel)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(REJOIN_INTERVAL):
                            while True:
                                await self.layer.receive(channel)
                                self.wake.set()
                except Exception:
                    # Redis went away: the safety poll goes on delivering; try again shortly.
                    log.warning("events hub: channel layer unavailable, retrying", exc_info=True)
                    await asyncio.sleep(SAFETY_POLL)
        finally:
            with contextlib.suppress(Exception):
                await self.layer.group_discard(EVENTS_GROUP, channel)


_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EventHub]" = (
    weakref.WeakKeyDictionary()
)


def hub() -> EventHub:
    """The hub of the running event loop (daphne runs one per process)."""
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = EventHub()
    return found
