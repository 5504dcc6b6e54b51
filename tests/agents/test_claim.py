"""A worker's claim of a thread and its read of what it claimed (agents.engine): on PostgreSQL
one statement, which must give the row as the claim left it, or nothing when it claimed
nothing; elsewhere the claim and then the read."""

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.engine import claimed_thread_with_agent, engine
from agents.models import Thread
from tests.approvals import state


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL's statement (SQLite claims, then reads)"
)
def test_the_claimed_row_comes_back_as_the_claim_left_it_with_its_agent(
    users: dict[str, Any],
) -> None:
    thread = state.thread(users["operator"])
    now = timezone.now()
    until = now + timedelta(seconds=10)
    with CaptureQueriesContext(connection) as queries:
        claimed = claimed_thread_with_agent(thread.pk, "worker-a", until, now)
    assert len(queries.captured_queries) == 1
    assert claimed is not None and claimed.pk == thread.pk
    # The values the update wrote, not the ones before it.
    assert claimed.lease_owner == "worker-a"
    assert claimed.lease_expires_at == until
    assert claimed.runnable_since == now
    assert claimed.agent.name == "payer" and claimed.agent.pk == thread.agent_id
    stored = Thread.objects.get(pk=thread.pk)
    assert (stored.lease_owner, stored.lease_expires_at) == ("worker-a", until)

    # Held by worker-a: another worker claims nothing, reads nothing, changes nothing.
    assert claimed_thread_with_agent(thread.pk, "worker-b", until, now) is None
    assert Thread.objects.get(pk=thread.pk).lease_owner == "worker-a"
    # Nor a thread that is not running.
    done = state.thread(users["operator"], status=Thread.Status.COMPLETED)
    assert claimed_thread_with_agent(done.pk, "worker-b", until, now) is None
    assert Thread.objects.get(pk=done.pk).lease_owner == ""


@pytest.mark.django_db(transaction=True)
def test_a_thread_whose_lease_is_held_is_not_advanced(users: dict[str, Any]) -> None:
    thread = state.thread(users["operator"])
    held = timezone.now() + timedelta(seconds=30)
    Thread.objects.filter(pk=thread.pk).update(lease_owner="other", lease_expires_at=held)
    assert engine.advance(thread.pk) is False
    stored = Thread.objects.get(pk=thread.pk)
    assert (stored.lease_owner, stored.lease_expires_at) == ("other", held)
