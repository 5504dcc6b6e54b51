"""A wake-up that cannot be sent fails nothing: the event is committed, the caller goes on."""

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
