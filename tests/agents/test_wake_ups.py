"""Wake-ups after commit (agents.events): one per transaction, carrying its events; one that
cannot be sent fails nothing."""

import pytest
from django.db import transaction

from agents import events
from agents.models import Event


@pytest.mark.django_db(transaction=True)
def test_a_wake_up_that_cannot_be_sent_is_logged_and_the_commit_stands(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(message: dict) -> None:
        raise RuntimeError("no channel layer today")

    monkeypatch.setattr(events, "broadcast", refuse)
    with transaction.atomic():
        written = events.record("AGENT_MESSAGE", payload={"text": "hello"})

    assert Event.objects.filter(pk=written.pk).exists()
    # Django names the failed callback (it needs a __qualname__ to, or the commit raises).
    assert "agents.events._Wake" in caplog.text and "no channel layer today" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_one_wake_up_per_transaction_carries_every_event_it_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[dict] = []
    monkeypatch.setattr(events, "broadcast", sent.append)
    with transaction.atomic():
        first = events.record("AGENT_MESSAGE", payload={"n": 1})
        second = events.record("AGENT_MESSAGE", payload={"n": 2})

    [message] = sent
    assert [row[0] for row in message["rows"]] == [first.pk, second.pk]


@pytest.mark.django_db(transaction=True)
def test_events_of_a_savepoint_rolled_back_are_not_announced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[dict] = []
    monkeypatch.setattr(events, "broadcast", sent.append)
    with transaction.atomic():
        kept = events.record("AGENT_MESSAGE", payload={"n": 1})
        try:
            with transaction.atomic():
                events.record("AGENT_MESSAGE", payload={"n": 2})
                raise ValueError("undo")
        except ValueError:
            pass

    assert [row[0] for message in sent for row in message.get("rows", [])] == [kept.pk]


@pytest.mark.django_db(transaction=True)
def test_events_written_in_several_inserts_keep_their_order_and_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events, "INSERT_BATCH", 2)
    written = events.record_many(
        [Event(type="AGENT_MESSAGE", payload={"n": n, "text": 'it\'s "x"'}) for n in range(5)]
    )
    stored = list(Event.objects.order_by("id"))
    assert [e.id for e in written] == [e.id for e in stored]
    assert [e.payload["n"] for e in stored] == [0, 1, 2, 3, 4]
    assert [e.prev_hash for e in stored[1:]] == [e.hash for e in stored[:-1]]
    assert all(not e._state.adding for e in written)
