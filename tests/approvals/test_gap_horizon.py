"""The gap horizon (agents.cursor.gap_horizon) on PostgreSQL: an id may be stepped over
once no open transaction can still commit it, and only an open writer of events holds the
horizon back, not every open transaction in the database."""

from typing import Any

import psycopg
import pytest
from django.db import connection

from agents.cursor import gap_horizon

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="SQLite gives ids under its write lock, so they become visible in order and the "
        "horizon is always the top (its own test: test_consumer's gap tests run on both)",
    ),
]

INSERT = (
    "INSERT INTO agents_event (type, payload, actor_name, created_at, prev_hash, hash)"
    " VALUES ('AGENT_MESSAGE', '{}', '', now(), '', '') RETURNING id"
)


def other_connection() -> Any:
    s = connection.settings_dict
    return psycopg.connect(
        host=s["HOST"] or "127.0.0.1",
        port=s["PORT"] or 5432,
        user=s["USER"],
        password=s["PASSWORD"] or None,
        dbname=s["NAME"],
    )


def test_only_open_writers_of_events_hold_the_horizon_back() -> None:
    slow, fast, bystander = other_connection(), other_connection(), other_connection()
    try:
        held = slow.execute(INSERT).fetchone()[0]  # open, not committed
        passed = fast.execute(INSERT).fetchone()[0]
        fast.commit()
        assert passed > held
        # Another open transaction that writes, but no events (a token's last use, say).
        bystander.execute("SELECT pg_current_xact_id()")

        assert gap_horizon() < held  # the slow writer may still commit `held`
        slow.commit()
        # Nothing can fill a gap below `passed` now, though the bystander is still open.
        assert gap_horizon() >= passed
    finally:
        for c in (slow, fast, bystander):
            c.close()


def test_a_writer_that_rolled_back_to_a_savepoint_registers_again() -> None:
    writer = other_connection()
    try:
        writer.execute("SAVEPOINT s")
        writer.execute(INSERT)
        writer.execute("ROLLBACK TO SAVEPOINT s")
        # Its lock went with the savepoint: it holds nothing back now.
        assert (
            gap_horizon()
            >= writer.execute("SELECT last_value FROM agents_event_id_seq").fetchone()[0]
        )
        again = writer.execute(INSERT).fetchone()[0]
        assert gap_horizon() < again
        writer.commit()
        assert gap_horizon() >= again
    finally:
        writer.close()


def test_a_reader_is_not_held_back_by_its_own_transaction() -> None:
    # A transaction that wrote events sees them itself: its own registration must not hide
    # the ids after it from its own reads (the email and webhook fan-outs read and write).
    from django.db import transaction

    from agents.models import Event

    with transaction.atomic():
        mine = Event.objects.create(type="AGENT_MESSAGE", payload={})
        assert gap_horizon() >= mine.id


def test_another_databases_writers_do_not_hold_the_horizon_back() -> None:
    """pg_locks lists the whole cluster's locks: a writer of another database (another gateway
    on the same server, another test run) registers with its own sequence's value, which says
    nothing of this database's ids. Seen in CI as Slack's fan-out stalling behind a gap."""
    from agents.cursor import WRITER_LOCK_BASE

    writer = other_connection()
    writer.execute(INSERT).fetchone()
    writer.commit()
    s = connection.settings_dict
    elsewhere = psycopg.connect(
        host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432, user=s["USER"], dbname="postgres"
    )
    try:
        # A writer of that database registered at a low value of its own sequence.
        elsewhere.execute("SELECT pg_advisory_xact_lock_shared(%s)", [WRITER_LOCK_BASE + 1])
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_sequence_last_value(pg_get_serial_sequence('agents_event', 'id'))"
            )
            last = cursor.fetchone()[0]
        assert last > 1 and gap_horizon() == last
    finally:
        elsewhere.close()
        writer.close()


@pytest.fixture
def other_database() -> Any:
    """A second database on the same server (another application, a second gateway), made
    for the test and dropped after it; a connection to it, in a transaction."""
    s = connection.settings_dict
    name = f"{s['NAME']}_other"
    server = {"host": s["HOST"] or "127.0.0.1", "port": s["PORT"] or 5432, "user": s["USER"]}
    with psycopg.connect(**server, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    elsewhere = psycopg.connect(**server, dbname=name)
    try:
        yield elsewhere
    finally:
        elsewhere.close()
        with psycopg.connect(**server, dbname="postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_writer_in_another_database_does_not_hold_our_events_back(other_database: Any) -> None:
    """The readers (the hub, a socket's replay, the fan-outs through settled_read; the A2A
    streams through settled_through) step over a gap that is gone for good at once, though a
    writer of another database on the server is open, registered as ours register."""
    from a2a_server.reads import settled_through
    from agents.cursor import WRITER_LOCK_BASE, settled_read
    from agents.models import Event

    # In the other database, a writer of events registers at a low value of its own
    # sequence (the trigger of migration agents 0008 takes this lock) and stays open.
    other_database.execute("SELECT pg_advisory_xact_lock_shared(%s)", [WRITER_LOCK_BASE + 1])
    # Here: an id given and rolled back (a gap that can never fill), then an event after it,
    # dated ahead so that its age cannot settle the gap: only the horizon can.
    writer = other_connection()
    try:
        before = writer.execute(INSERT).fetchone()[0]
        writer.rollback()
        ahead = INSERT.replace("now()", "now() + interval '1 hour'")
        after_gap = writer.execute(ahead).fetchone()[0]
        writer.commit()
    finally:
        writer.close()
    assert after_gap > before

    def read(after: int) -> list[tuple[int, Any]]:
        rows = Event.objects.filter(id__gt=after).order_by("id")
        return list(rows.values_list("id", "created_at"))

    rows, stopped = settled_read(before - 1, read, key=lambda row: row)
    assert [pk for pk, _ in rows] == [after_gap] and not stopped
    assert settled_through() >= after_gap
