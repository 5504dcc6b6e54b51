"""When the sweeper is next needed (agents.due), and the deadlines the engine times itself
because the clock may sleep past them (agents.dispatch.at_deadline)."""

from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.utils import timezone

from agents import dispatch, due, starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from tests.approvals import state


@pytest.fixture
def timing(settings: Any) -> Any:
    settings.SWEEP_INTERVAL_SECONDS = 1
    settings.SWEEP_IDLE_SECONDS = 10
    return settings


@pytest.mark.django_db
class PlanTestCase:
    def test_with_nothing_stored_the_clock_sleeps_its_longest(self, timing: Any) -> None:
        assert due.plan() == (10.0, False)

    def test_it_wakes_at_the_next_deadline_when_that_comes_first(
        self, timing: Any, users: Any
    ) -> None:
        state.suspended(users["operator"], expires_in=4)
        state.suspended(users["operator"], expires_in=600)
        seconds, moving = due.plan()
        assert not moving
        assert 3.0 < seconds <= 4.0

    def test_a_reminder_an_input_and_a_grant_are_due_times_too(
        self, timing: Any, users: Any
    ) -> None:
        now = timezone.now()
        _, [s] = state.suspended(users["operator"], expires_in=600)
        Suspension.objects.filter(pk=s.pk).update(next_step_at=now + timedelta(seconds=7))
        assert due.next_due() == now + timedelta(seconds=7)
        waiting = state.thread(users["operator"], status=Thread.Status.WAITING_INPUT)
        Thread.objects.filter(pk=waiting.pk).update(input_expires_at=now + timedelta(seconds=5))
        assert due.next_due() == now + timedelta(seconds=5)
        # An ignored request has no reminder for anyone: not a reason to wake.
        Thread.objects.filter(pk=waiting.pk).update(status=Thread.Status.CANCELLED)
        Suspension.objects.filter(pk=s.pk).update(ignored_at=now)
        assert due.next_due() == Suspension.objects.get(pk=s.pk).expires_at

    def test_an_overdue_deadline_makes_it_run_at_once(self, timing: Any, users: Any) -> None:
        _, [s] = state.suspended(users["operator"], expires_in=600)
        Suspension.objects.filter(pk=s.pk).update(expires_at=timezone.now() - timedelta(seconds=5))
        assert due.plan() == (0.0, False)

    def test_a_run_in_motion_brings_back_the_short_interval(self, timing: Any, users: Any) -> None:
        state.thread(users["operator"], status=Thread.Status.RUNNING)
        assert due.plan() == (1.0, True)

    def test_the_newest_event_id_moves_with_each_event(self, users: Any) -> None:
        before = due.last_event_id()
        state.suspended(users["operator"])  # records AGENT_SUSPENDED
        assert due.last_event_id() > before


def _gate(timeout: int) -> AgentDefinition:
    return AgentDefinition.objects.create(
        name="gate",
        model="scripted",
        tools=["transfer_funds"],
        tool_overrides={"transfer_funds": {"timeout": timeout}},
        script=[
            {"tool_calls": [{"name": "transfer_funds", "input": dict(state.TRANSFER)}]},
            {"text": "done"},
        ],
    )


@pytest.mark.django_db(transaction=True)
class RaisedDeadlineTestCase:
    def _sent(self, monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple, dict]]:
        sent: list[tuple[tuple, dict]] = []
        task = current_app.tasks[dispatch.EXPIRE_SUSPENSION]
        monkeypatch.setattr(task, "apply_async", lambda *a, **kw: sent.append((a, kw)))
        return sent

    def test_a_deadline_nearer_than_the_clocks_longest_sleep_gets_its_own_task(
        self, timing: Any, users: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        sent = self._sent(monkeypatch)
        thread = starting.start_thread(_gate(5), "pay", users["operator"])
        Engine().advance(thread.pk)

        s = Suspension.objects.get(thread=thread)
        assert s.status == Suspension.Status.PENDING and s.timeout == 5
        assert sent == [
            (((str(s.pk),),), {"declare": [], "eta": s.expires_at + dispatch.EXPIRY_MARGIN})
        ]

    def test_a_farther_deadline_is_left_to_the_clock(
        self, timing: Any, users: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        sent = self._sent(monkeypatch)
        thread = starting.start_thread(_gate(60), "pay", users["operator"])
        Engine().advance(thread.pk)

        assert Suspension.objects.get(thread=thread).status == Suspension.Status.PENDING
        assert sent == []

    def test_a_near_input_timeout_gets_its_own_task_too(
        self, timing: Any, users: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from tests.agents.test_input_rules import waiting

        sent: list[tuple[tuple, dict]] = []
        task = current_app.tasks[dispatch.EXPIRE_INPUT]
        monkeypatch.setattr(task, "apply_async", lambda *a, **kw: sent.append((a, kw)))
        thread = waiting(users, input_timeout=5)
        assert thread.input_expires_at is not None
        eta = thread.input_expires_at + dispatch.EXPIRY_MARGIN
        assert sent == [(((str(thread.pk),),), {"declare": [], "eta": eta})]
        # Its task, once due, ends the wait as the sweeper would.
        Thread.objects.filter(pk=thread.pk).update(input_expires_at=timezone.now())
        assert task(str(thread.pk)) == 1
        assert Thread.objects.get(pk=thread.pk).status != Thread.Status.WAITING_INPUT


@pytest.mark.django_db
def test_an_idle_sleep_as_long_as_the_stale_limit_is_refused(settings: Any) -> None:
    from django.core.checks import run_checks

    settings.SWEEP_IDLE_SECONDS = 10
    assert "gateway.E004" not in {e.id for e in run_checks()}
    # /readyz would call an idle gateway's sweeper stale between two sweeps.
    settings.SWEEP_IDLE_SECONDS = settings.SWEEP_STALE_SECONDS
    assert "gateway.E004" in {e.id for e in run_checks()}
