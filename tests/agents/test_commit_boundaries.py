"""Invariant 1: each state change is one transaction with its Event, and Celery hears of it only
after that transaction commits."""

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from agents import cancelling, deadlines, decisions, dispatch, replies, starting
from agents.models import Event, Suspension, Thread
from tests.approvals import state


class Rollback(Exception):
    """Raised inside an outer transaction to undo it."""


def enqueued(callbacks: list[Callable[[], Any]]) -> list[tuple[str, tuple]]:
    """The Celery sends waiting for commit: agents.dispatch registers partial(send, task, ...)."""
    return [
        (cb.args[0].name, cb.args[1:])
        for cb in callbacks
        if isinstance(cb, functools.partial) and cb.func is dispatch.send
    ]


class CommitBoundaryTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], django_capture_on_commit_callbacks: Any) -> None:
        self.alice = users["reviewer"]
        self.operator = users["operator"]  # starts the runs alice decides (four eyes)
        self.capture = django_capture_on_commit_callbacks
        self.thread, [self.s] = state.suspended(self.operator)

    def test_a_decision_and_its_event_commit_together_then_the_resume_is_sent(self) -> None:
        with self.capture() as callbacks:
            decided = decisions.decide(self.s, self.alice, {"approved": True})
            # Written in the caller's transaction; the send waits for that transaction's commit.
            assert decided.created
            assert Event.objects.filter(suspension=self.s, type="SUSPENSION_DECIDED").exists()
            waiting = [func for _, func, _ in transaction.get_connection().run_on_commit]
            assert enqueued(waiting) == [("agents.tasks.resume_thread", (str(self.thread.pk),))]
        assert enqueued(callbacks) == [("agents.tasks.resume_thread", (str(self.thread.pk),))]

    def test_a_rolled_back_decision_leaves_no_decision_no_event_and_sends_nothing(self) -> None:
        with self.capture() as callbacks, pytest.raises(Rollback), transaction.atomic():
            decisions.decide(self.s, self.alice, {"approved": True})
            raise Rollback
        assert callbacks == []
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING and self.s.decided_by is None
        assert not Event.objects.filter(type="SUSPENSION_DECIDED").exists()
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.SUSPENDED
        # Nothing of the undone attempt stands in the way of the real decision.
        assert decisions.decide(self.s, self.alice, {"approved": False}).created

    def test_a_rolled_back_timeout_leaves_the_suspension_pending(self) -> None:
        later = timezone.now() + timedelta(hours=1)
        with self.capture() as callbacks, pytest.raises(Rollback), transaction.atomic():
            assert deadlines.expire_overdue(now=later) == 1
            raise Rollback
        assert callbacks == []
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING
        assert not Event.objects.filter(type="SUSPENSION_TIMEOUT").exists()

        with self.capture() as callbacks:
            assert deadlines.expire_overdue(now=later) == 1
        assert enqueued(callbacks) == [("agents.tasks.resume_thread", (str(self.thread.pk),))]
        assert Event.objects.filter(suspension=self.s, type="SUSPENSION_TIMEOUT").count() == 1

    def test_a_rolled_back_cancel_changes_nothing(self) -> None:
        with self.capture() as callbacks, pytest.raises(Rollback), transaction.atomic():
            cancelling.cancel_thread(self.thread.pk, self.alice)
            raise Rollback
        assert callbacks == []
        self.s.refresh_from_db()
        assert self.s.status == Suspension.Status.PENDING
        assert Thread.objects.get(pk=self.thread.pk).status == Thread.Status.SUSPENDED
        assert set(self.thread.frames.values_list("status", flat=True)) == {"active"}
        assert list(Event.objects.values_list("type", flat=True)) == ["AGENT_SUSPENDED"]

    def test_a_start_is_sent_only_when_the_thread_is_committed(self) -> None:
        agent = state.agent("payer")
        with self.capture() as callbacks, pytest.raises(Rollback), transaction.atomic():
            starting.start_thread(agent, "go", self.operator)
            raise Rollback
        assert callbacks == []
        assert Thread.objects.count() == 1  # only the one made by setup
        assert not Event.objects.filter(type="THREAD_STARTED").exists()

        with self.capture() as callbacks:
            thread = starting.start_thread(agent, "go", self.operator)
        assert enqueued(callbacks) == [("agents.tasks.start_thread", (str(thread.pk),))]
        assert Event.objects.filter(thread=thread, type="THREAD_STARTED").count() == 1

    def test_a_message_is_sent_only_when_committed(self) -> None:
        waiting = state.thread(self.alice, status=Thread.Status.WAITING_INPUT)
        with self.capture() as callbacks, pytest.raises(Rollback), transaction.atomic():
            replies.post_message(waiting.pk, "hello", self.alice)
            raise Rollback
        assert callbacks == []
        assert Thread.objects.get(pk=waiting.pk).status == Thread.Status.WAITING_INPUT
        assert len(waiting.frames.get().messages) == 1
        assert not Event.objects.filter(type="USER_MESSAGE").exists()

        with self.capture() as callbacks:
            replies.post_message(waiting.pk, "hello", self.alice)
        assert enqueued(callbacks) == [("agents.tasks.resume_thread", (str(waiting.pk),))]

    def test_a_refused_decision_sends_nothing(self) -> None:
        decisions.decide(self.s, self.alice, {"approved": True})
        with self.capture() as callbacks:
            decided = decisions.decide(self.s, self.alice, {"approved": False})
        assert not decided.created and decided.suspension.status == Suspension.Status.APPROVED
        assert enqueued(callbacks) == []
        assert Event.objects.filter(type="SUSPENSION_DECIDED").count() == 1
