"""Deadlines that fall between two sweeps get a task of their own, due at the deadline; the
stored expires_at and the sweep every second stay the backstop (invariant 4)."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import deadlines, decisions, tasks
from agents.models import Event, Suspension, Thread
from tests.approvals import state


class DeadlineTaskTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], db: Any) -> None:
        self.alice = users["reviewer"]
        self.operator = users["operator"]  # starts the runs alice decides (four eyes)

    def test_due_soon_lists_only_pending_deadlines_before_the_next_sweep(self) -> None:
        # Deadlines some seconds away, so a slow machine does not pass them while it builds
        # the rows; the window ("before the next sweep") is scaled to match. Each further
        # away than SWEEP_IDLE_SECONDS (10) when raised: nearer ones had a task from the start.
        _, [soon] = state.suspended(self.operator, expires_in=20)
        _, [later] = state.suspended(self.operator, expires_in=60)
        _, [decided] = state.suspended(self.operator, expires_in=20)
        decisions.decide(decided, self.alice, {"approved": True})
        _, [overdue] = state.suspended(self.operator, expires_in=20)
        Suspension.objects.filter(pk=overdue.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )

        due = deadlines.due_soon(within=timedelta(seconds=30))

        assert due == [(soon.pk, Suspension.objects.get(pk=soon.pk).expires_at)]
        assert later.pk not in {pk for pk, _ in due}

    def test_a_deadline_raised_within_the_clocks_longest_sleep_is_not_listed_again(
        self,
    ) -> None:
        # Raised 5 s away (SWEEP_IDLE_SECONDS is 10): the engine gave it a task of its own
        # (agents.dispatch.at_deadline), as the clock may be asleep past it.
        _, [near] = state.suspended(self.operator, expires_in=5)
        _, [extended] = state.suspended(self.operator, expires_in=5)
        Suspension.objects.filter(pk=extended.pk).update(
            expires_at=timezone.now() + timedelta(seconds=20)  # moved past the raise's task
        )

        due = deadlines.due_soon(within=timedelta(seconds=30))

        assert [pk for pk, _ in due] == [extended.pk]
        assert near.pk not in {pk for pk, _ in due}

    def test_the_sweep_gives_each_deadline_before_the_next_sweep_a_task_due_then(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _, [soon] = state.suspended(self.operator, expires_in=0.5)
        # Raised a minute ago with a minute to go: the sweep, not the raise, gives it its task.
        Suspension.objects.filter(pk=soon.pk).update(
            timeout=60, created_at=timezone.now() - timedelta(seconds=59.5)
        )
        state.suspended(self.operator, expires_in=30)
        sent: list[tuple[tuple, dict]] = []
        monkeypatch.setattr(
            tasks.expire_suspension, "apply_async", lambda *a, **kw: sent.append((a, kw))
        )

        tasks.sweep()

        expires_at = Suspension.objects.get(pk=soon.pk).expires_at
        assert sent == [(((str(soon.pk),),), {"eta": expires_at + tasks.EXPIRY_MARGIN})]

    def test_a_deadline_task_applies_the_deadline_once_and_never_early(
        self, time_machine: Any
    ) -> None:
        thread, [s] = state.suspended(self.operator, expires_in=0.5)

        assert tasks.expire_suspension(str(s.pk)) == 0  # early: nothing changes
        assert Suspension.objects.get(pk=s.pk).status == Suspension.Status.PENDING

        time_machine.move_to(timezone.now() + timedelta(seconds=1))
        assert tasks.expire_suspension(str(s.pk)) == 1
        assert tasks.expire_suspension(str(s.pk)) == 0  # delivered twice: applied once
        s.refresh_from_db()
        assert s.status == Suspension.Status.TIMED_OUT and s.approved is False
        assert Event.objects.filter(suspension=s, type="SUSPENSION_TIMEOUT").count() == 1
        assert Thread.objects.get(pk=thread.pk).status == Thread.Status.RUNNING

    def test_a_deadline_task_leaves_a_decided_suspension_alone(self, time_machine: Any) -> None:
        _, [s] = state.suspended(self.operator, expires_in=0.5)
        decisions.decide(s, self.alice, {"approved": False, "reason": "no"})

        time_machine.move_to(timezone.now() + timedelta(seconds=1))
        assert tasks.expire_suspension(str(s.pk)) == 0
        s.refresh_from_db()
        assert s.status == Suspension.Status.REJECTED and s.reason == "no"
        assert not Event.objects.filter(suspension=s, type="SUSPENSION_TIMEOUT").exists()
