"""The events hub reads on for a while after its last subscriber leaves (approvals.hub.LINGER):
a process whose only subscribers come and go (MCP calls held for a person, outside agents'
long polls, and no reviewer's page open) keeps one hub, instead of joining the channel and
reading the table afresh for each, and missing a wake-up sent while it joined."""

import asyncio
from typing import Any

import pytest

from access.revocation import Credential
from approvals import hub as hub_module
from approvals.hub import hub
from tests.approvals.test_hub_context import Subscriber


def test_the_hub_lingers_after_its_last_subscriber_then_stops(
    users: dict[str, Any], transactional_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_module, "LINGER", 0.5)
    user = users["reviewer"]

    async def scenario() -> None:
        events_hub = hub()
        first = Subscriber(Credential(user.pk))
        events_hub.subscribe(first)
        reading = list(events_hub.tasks)
        assert reading
        await asyncio.sleep(0.1)
        await events_hub.unsubscribe(first)
        assert events_hub.tasks == reading and not any(t.done() for t in reading)
        # The next comes within LINGER: the same reader serves it, and does not stop under it.
        second = Subscriber(Credential(user.pk))
        events_hub.subscribe(second)
        assert events_hub.tasks == reading
        await asyncio.sleep(0.8)
        assert not any(t.done() for t in reading)
        # Nobody for LINGER: it stops; a later subscriber starts it afresh.
        await events_hub.unsubscribe(second)
        await asyncio.sleep(0.8)
        assert events_hub.tasks == [] and all(t.done() for t in reading)
        third = Subscriber(Credential(user.pk))
        events_hub.subscribe(third)
        assert events_hub.tasks and events_hub.tasks != reading
        await events_hub.unsubscribe(third)
        await asyncio.sleep(0.8)  # and it stops again
        assert events_hub.tasks == []

    asyncio.run(scenario())
