"""Where a page's socket starts reading the Event table, and when an id gap may be passed.

Event ids come from a sequence, and on PostgreSQL two transactions can commit out of id order:
id 11 may be visible while id 10 is still being written. A reader that moved its cursor to 11
would never see 10. So pages start their socket a little behind the newest event (the client
applies events idempotently and ignores ids it has seen), and the consumer does not step over a
missing id until the event after the gap is GAP_WAIT old, or no writing transaction is open: by
then the gap's transaction has committed or rolled back (approvals.consumers.EventConsumer.replay
depends on this).
"""

from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from agents.models import Event

# Longer than any transaction that writes events (they are short: one state change each).
GAP_WAIT = timedelta(seconds=2)


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


def gap_settled(created_at: datetime, now: datetime | None = None) -> bool:
    """May a reader step over missing ids just before an event created at `created_at`?

    Yes once that event is GAP_WAIT old, or when no transaction that could still hold one of
    the missing ids is open: then the gap is for good (a rolled-back insert, a deleted thread).
    """
    return created_at <= (now or timezone.now()) - GAP_WAIT or not writers_in_flight()


def writers_in_flight() -> bool:
    """Is another connection to this database inside a transaction that has written?"""
    if connection.vendor != "postgresql":
        # SQLite transactions take the write lock before they insert (IMMEDIATE): ids become
        # visible in the order they were given, so no lower id can appear later.
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_xid IS NOT NULL AND pid <> pg_backend_pid())"
        )
        return bool(cursor.fetchone()[0])
