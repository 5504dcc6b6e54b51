"""Where a page's socket starts reading the Event table, and when an id gap may be passed.

Event ids come from a sequence, and on PostgreSQL two transactions can commit out of id order:
id 11 may be visible while id 10 is still being written. A reader that moved its cursor to 11
would never see 10. So pages start their socket a little behind the newest event (the client
applies events idempotently and ignores ids it has seen), and readers (approvals.hub) do not
step over a missing id until it is gone for good:

- when the event after the gap is GAP_WAIT old (no transaction that writes events lasts that
  long), or
- when the gap lies below the gap horizon: the last id the sequence had given at a moment
  when no writing transaction was open. Every id below it had then committed or rolled back,
  so a read made *after* that moment shows every one of them that will ever exist. The order
  matters: the horizon is taken first, the rows are read after it. (Taking it after the read
  would let a transaction commit in between, unseen, and its event be stepped over.)
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


def gap_horizon() -> int:
    """Every missing event id up to the returned one is gone for good (see the module's text).

    Call it before reading the rows it is applied to.
    """
    if connection.vendor != "postgresql":
        # SQLite transactions take the write lock before they insert (IMMEDIATE): ids become
        # visible in the order they were given, so no lower id can appear later.
        return 2**63 - 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity"
            "  WHERE datname = current_database() AND backend_xid IS NOT NULL"
            "  AND pid <> pg_backend_pid()),"
            " pg_sequence_last_value(pg_get_serial_sequence(%s, 'id'))",
            [Event._meta.db_table],
        )
        quiet, last = cursor.fetchone()
    return (last or 0) if quiet else 0


def gap_settled(
    next_id: int, created_at: datetime, horizon: int, now: datetime | None = None
) -> bool:
    """May a reader step over the missing ids just before event `next_id`?"""
    return next_id <= horizon or created_at <= (now or timezone.now()) - GAP_WAIT
