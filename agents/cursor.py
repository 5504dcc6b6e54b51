"""Where a page's socket starts reading the Event table, and when an id gap may be passed.

Event ids come from a sequence, and on PostgreSQL two transactions can commit out of id order:
id 11 may be visible while id 10 is still being written. A reader that moved its cursor to 11
would never see 10. So pages start their socket a little behind the newest event (the client
applies events idempotently and ignores ids it has seen), and readers (approvals.hub) do not
step over a missing id until it is gone for good:

- when the event after the gap is GAP_WAIT old (no transaction that writes events lasts that
  long), or
- when the gap lies at or below the gap horizon: an id below which every id has committed or
  rolled back, so a read made *after* the horizon was taken shows every one of them that will
  ever exist. The order matters: the horizon is taken first, the rows are read after it.
  (Taking it after the read would let a transaction commit in between, unseen, and its event
  be stepped over.)

The horizon on PostgreSQL: every transaction that writes events registers first (a trigger
before its first insert takes an id, migration agents 0008), by holding a shared advisory
lock whose key carries the sequence's last value as it read it, L; every id it inserts
afterwards is above L. A reader takes the sequence's last value S, then the smallest
L among the registered writers still open: the horizon is the lower of the two. An id at or
below it that is not visible yet can never become visible: its writer either registered
before the reader looked at the locks (then its L is below the id, so the horizon is too), or
after (then it took the id after the reader read S, so the id is above S). Before this, the
horizon needed a moment with no writing transaction open anywhere in the database, which a
busy gateway rarely has: events waited GAP_WAIT behind every gap (bench/README.md).
"""

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import connection
from django.utils import timezone

from agents.models import Event

T = TypeVar("T")

# Longer than any transaction that writes events (they are short: one state change each).
GAP_WAIT = timedelta(seconds=2)

# Event writers' advisory lock keys (see the module's text): WRITER_LOCK_BASE + L, for L below
# WRITER_SPAN (2**40 event ids). The base, "EW" in ASCII shifted past the span, keeps these
# keys apart from every other advisory lock (agents.chain.THREADLESS_LOCK is "EVCHAIN").
# Migration agents 0008 repeats the base in its trigger.
WRITER_SPAN = 2**40
WRITER_LOCK_BASE = 0x4557 << 40


def page_cursor(now: datetime | None = None) -> int:
    """The id a freshly rendered page subscribes after: every event up to it has committed."""
    settled = (now or timezone.now()) - GAP_WAIT
    # Walks the primary key backwards from the newest event, so it reads only the last moments.
    newest_settled = (
        Event.objects.filter(created_at__lte=settled)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    return newest_settled or 0


def gap_horizon() -> int:
    """Every missing event id up to the returned one is gone for good (see the module's text).

    Call it before reading the rows it is applied to.
    """
    if connection.vendor != "postgresql":
        # SQLite transactions take the write lock before they insert (IMMEDIATE): ids become
        # visible in the order they were given, so no lower id can appear later.
        return 2**63 - 1
    with connection.cursor() as cursor:
        # Two statements, in this order: the sequence first, then the registered writers.
        cursor.execute(
            "SELECT pg_sequence_last_value(pg_get_serial_sequence(%s, 'id'))",
            [Event._meta.db_table],
        )
        last = cursor.fetchone()[0] or 0
        cursor.execute(
            "SELECT min(((classid::bigint << 32) | objid::bigint) - %s) FROM pg_locks"
            " WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
            # pg_locks shows the whole cluster's: another database's writers (another gateway,
            # another test run) hold keys of their own sequence, which say nothing of this one.
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            # The reader's own transaction sees its own rows: it holds nothing back from itself.
            " AND pid <> pg_backend_pid()"
            " AND classid::bigint >= %s AND classid::bigint < %s",
            [WRITER_LOCK_BASE, WRITER_LOCK_BASE >> 32, (WRITER_LOCK_BASE + WRITER_SPAN) >> 32],
        )
        oldest_writer = cursor.fetchone()[0]
    return last if oldest_writer is None else min(last, oldest_writer)


def gap_settled(
    next_id: int, created_at: datetime, horizon: int, now: datetime | None = None
) -> bool:
    """May a reader step over the missing ids just before event `next_id`?"""
    return next_id <= horizon or created_at <= (now or timezone.now()) - GAP_WAIT


def contiguous(
    after: int,
    rows: Sequence[T],
    horizon: int,
    key: Callable[[T], tuple[int, datetime]],
    now: datetime | None = None,
) -> tuple[list[T], bool]:
    """The rows (ids ascending; `key` gives a row's id and created_at) that a reader at
    `after` may take, up to the first gap that has not settled, and whether such a gap
    stopped them. Every reader of the Event table steps over gaps through here."""
    taken: list[T] = []
    cursor = after
    for row in rows:
        pk, created_at = key(row)
        if pk != cursor + 1 and not gap_settled(pk, created_at, horizon, now):
            return taken, True
        taken.append(row)
        cursor = pk
    return taken, False


def settled_read(
    after: int, read: Callable[[int], Sequence[T]], key: Callable[[T], tuple[int, datetime]]
) -> tuple[list[T], bool]:
    """`read(after)` up to the first gap that has not settled, and whether such a gap stopped
    it. A gap costs the horizon, then a second read: in that order (see the module's text).
    Blocking: call it in a thread from async code."""
    rows, stopped = contiguous(after, read(after), 0, key)
    if stopped:
        horizon = gap_horizon()
        rows, stopped = contiguous(after, read(after), horizon, key)
    return rows, stopped


def locked_position(model: Any, name: str) -> Any:
    """A fan-out's cursor row (`model`: a name and a position), locked for this transaction.
    A new one starts at the newest event that has surely committed: what came before the
    fan-out first ran has nowhere to go (agents.delivery.fanout)."""
    row = model.objects.select_for_update().filter(name=name).first()
    if row is None:
        model.objects.get_or_create(name=name, defaults={"position": page_cursor()})
        row = model.objects.select_for_update().get(name=name)
    return row
