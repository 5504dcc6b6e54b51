"""People before the clock: the runs a deadline's timeout, an input's timeout or the
sweeper's re-enqueue sends are queued behind the ones a person's decision sends, so a
backlog of timeouts never holds a person's approval back (bench/backlog.py measures it)."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import deadlines, decisions, dispatch
from agents.models import Thread
from gateway.celery import app
from tests.approvals import state


def sent(callbacks: list[Any]) -> dict[str, Any]:
    """The thread ids sent to a worker by the callbacks, with the priority each was sent at."""
    return {
        cb.args[1]: cb.keywords.get("priority")
        for cb in callbacks
        if getattr(cb, "func", None) is dispatch.send
    }


class PriorityTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], db: Any) -> None:
        self.alice = users["reviewer"]
        self.operator = users["operator"]

    def test_a_timeouts_resume_is_sent_behind_a_decisions(
        self, django_capture_on_commit_callbacks: Any
    ) -> None:
        timed = state.suspended(self.operator, expires_in=60)[1][0]
        decided = state.suspended(self.operator, expires_in=3600)[1][0]
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            decisions.decide(decided, self.alice, {"approved": True})
            deadlines.expire_overdue(now=timezone.now() + timedelta(minutes=5))
        assert sent(callbacks) == {
            str(decided.thread_id): None,
            str(timed.thread_id): dispatch.UNATTENDED_PRIORITY,
        }

    def test_the_sweepers_re_enqueue_is_sent_behind(
        self, django_capture_on_commit_callbacks: Any
    ) -> None:
        thread = state.thread(self.alice)
        long_ago = timezone.now() - timedelta(minutes=10)
        Thread.objects.filter(pk=thread.pk).update(
            status=Thread.Status.RUNNING, runnable_since=long_ago
        )
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            assert deadlines.requeue_stalled() == 1
        assert sent(callbacks) == {str(thread.pk): dispatch.UNATTENDED_PRIORITY}


def test_the_broker_hands_out_a_persons_task_before_the_clocks_backlog() -> None:
    """On this setup's broker (Redis, or the embedded one's folder), as a worker reads it."""
    name = f"test-fair-{uuid.uuid4().hex}"
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue(name)
        try:
            for n in range(5):
                queue.put({"n": f"clock-{n}"}, priority=dispatch.UNATTENDED_PRIORITY)
            queue.put({"n": "person"})
            queue.put({"n": "agent"})
            got = []
            for _ in range(7):
                message = queue.get(timeout=5)
                got.append(message.payload["n"])
                message.ack()
        finally:
            queue.clear()
            queue.close()
    assert sorted(got[:2]) == ["agent", "person"]
    assert sorted(got[2:]) == [f"clock-{n}" for n in range(5)]
