"""The read of settled events after a cursor: the rows every socket may apply, as socket messages.

A reader does not step over a missing id until the gap has settled (agents.cursor), so a
batch never skips an event that is still being committed. The hub (approvals.hub) and a
socket that is behind its batches (approvals.consumers) both read through here.
"""

from dataclasses import dataclass
from typing import Any

from agents.cursor import settled_read
from agents.models import Event
from agents.wire import socket_message

BATCH = 500


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


def read_after(after: int, limit: int = BATCH) -> list[Row]:
    """Events after `after` in id order, as socket messages (blocking: call it in a thread)."""
    rows = Event.objects.filter(id__gt=after).order_by("id")[:limit]
    return [Row(e.id, socket_message(e.as_message()), e.created_at) for e in rows]


def read_settled(after: int) -> tuple[list[Row], bool]:
    """Events after `after` up to the first gap that has not settled (agents.cursor), and
    whether such a gap stopped the read. Blocking: call it in a thread."""
    return settled_read(after, read_after, _id_and_time)


def _id_and_time(row: Row) -> tuple[int, Any]:
    return row.id, row.created_at
