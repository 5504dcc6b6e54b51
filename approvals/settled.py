"""The read of settled events after a cursor: the rows every socket may apply, as socket messages.

A reader does not step over a missing id until the gap has settled (approvals.cursor), so a
batch never skips an event that is still being committed. The hub (approvals.hub) and a
socket that is behind its batches (approvals.consumers) both read through here.
"""

from dataclasses import dataclass
from typing import Any

from agents.models import Event
from agents.wire import socket_message
from approvals.cursor import gap_horizon, gap_settled

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
