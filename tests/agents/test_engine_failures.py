"""What the engine does when something it did not expect goes wrong inside a run."""

from typing import Any

import pytest

from agents import deadlines, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Event, Thread
from agents.runtime.llm import LLMRequest, LLMResponse


class Broken:
    """A provider with a bug: it raises something that is not an LLMError."""

    def complete(self, request: LLMRequest) -> LLMResponse:
        raise RuntimeError("the provider has a bug")


@pytest.mark.django_db(transaction=True)
class EngineFailureTestCase:
    def test_it_fails_the_thread_instead_of_leaving_it_runnable_forever(self, users: Any) -> None:
        agent = AgentDefinition.objects.create(
            name="fragile", model="scripted", script=[{"text": "hi"}]
        )
        thread = starting.start_thread(agent, "go", users["reviewer"])

        assert Engine(provider=lambda frame: Broken()).advance(thread.pk) is True

        thread.refresh_from_db()
        assert thread.status == Thread.Status.FAILED
        assert thread.error == "Internal error: RuntimeError: the provider has a bug"
        assert thread.lease_owner == "" and thread.lease_expires_at is None
        failed = Event.objects.get(thread=thread, type=Event.Type.THREAD_FAILED)
        assert "the provider has a bug" in failed.payload["error"]
        # The sweeper has nothing to re-enqueue, even long after.
        from datetime import timedelta

        from django.utils import timezone

        assert deadlines.requeue_stalled(now=timezone.now() + timedelta(hours=1)) == 0
        # The user's message is still there.
        assert thread.frames.get(depth=0).messages[0]["content"][0]["text"] == "go"


@pytest.mark.django_db(transaction=True)
def test_a_cancel_that_wins_after_the_claim_ends_the_run_quietly(
    users: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancel can land between a worker's claim and its read of the stack: it unwound the
    stack and ended the run, so the worker finds no frame. That is no empty stack to warn an
    operator about, and the run stays cancelled, not failed."""
    from agents import stack
    from agents.cancelling import cancel_thread

    agent = AgentDefinition.objects.create(name="quick", model="scripted", script=[{"text": "hi"}])
    thread = starting.start_thread(agent, "go", users["operator"])
    load = stack.Stack.load

    def cancelled_meanwhile(self: Any, step: Any) -> Any:
        cancel_thread(thread.pk, users["operator"])
        return load(self, step)

    monkeypatch.setattr(stack.Stack, "load", cancelled_meanwhile)
    with caplog.at_level("INFO", logger="agents.runs"):
        Engine().advance(thread.pk)
    thread.refresh_from_db()
    assert thread.status == Thread.Status.CANCELLED
    assert not Event.objects.filter(thread=thread, type=Event.Type.THREAD_FAILED).exists()
    assert "empty stack" not in caplog.text
    assert f"thread {thread.pk} ended while it was claimed" in caplog.text
