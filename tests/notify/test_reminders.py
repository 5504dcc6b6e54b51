"""Reminders and escalation, applied by the sweep at their times (the clock given explicitly):
each step once, each an event in the audit trail, none after a decision or the deadline."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from agents import deadlines, decisions, payloads, reminders, tasks
from agents.models import Event, Suspension
from tests.notify.raised import agent_file, leads, raise_group

REMINDER = Event.Type.SUSPENSION_REMINDER
ESCALATED = Event.Type.SUSPENSION_ESCALATED


def steps() -> list[tuple[str, int | None]]:
    """The ladder events so far: (type, reminder number)."""
    rows = Event.objects.filter(type__in=[REMINDER, ESCALATED]).order_by("id")
    return [(e.type, e.payload.get("reminder")) for e in rows]


class LadderTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        self.alice = users["reviewer"]
        leads(users["teammate"])
        load_agents(agent_file())

    def test_a_request_is_raised_with_the_agents_ladder(self) -> None:
        _, [first, second] = raise_group(self.alice)

        assert first.reminders == [600, 120] and first.reminders_sent == 0
        assert first.escalate_to == "leads" and first.escalate_before == 120
        waits = first.expires_at - first.created_at
        assert timedelta(seconds=1199) < waits <= timedelta(seconds=1200)
        assert first.next_step_at == first.expires_at - timedelta(seconds=600)
        payload = Event.objects.get(type=Event.Type.AGENT_SUSPENDED, suspension=first).payload
        assert payload["ladder"] == {
            "reminders": [600, 120],
            "reminders_sent": 0,
            "next_reminder_at": (first.expires_at - timedelta(seconds=600)).isoformat(),
            "escalate_to": "leads",
            "escalate_at": (first.expires_at - timedelta(seconds=120)).isoformat(),
            "escalated_at": None,
        }
        assert second.group == first.group

    def test_reminders_and_the_escalation_go_at_their_times_once_each(self) -> None:
        _, [first, second] = raise_group(self.alice)
        deadline = first.expires_at

        assert reminders.apply_ladder_steps(now=deadline - timedelta(seconds=601)) == 0
        assert reminders.apply_ladder_steps(now=deadline - timedelta(seconds=600)) == 2
        assert reminders.apply_ladder_steps(now=deadline - timedelta(seconds=300)) == 0
        assert steps() == [(REMINDER, 1), (REMINDER, 1)]

        at = deadline - timedelta(seconds=120)
        assert reminders.apply_ladder_steps(now=at) == 4  # the 2nd reminder and escalation, each
        assert reminders.apply_ladder_steps(now=at) == 0
        assert reminders.apply_ladder_steps(now=deadline - timedelta(seconds=1)) == 0
        assert steps()[2:] == [(REMINDER, 2), (ESCALATED, None)] * 2

        first.refresh_from_db()
        assert first.reminders_sent == 2 and first.escalated_at == at and first.next_step_at is None
        escalation = Event.objects.get(type=ESCALATED, suspension=first)
        assert escalation.payload["escalate_to"] == "leads"
        assert escalation.payload["seconds_left"] == 120
        assert escalation.payload["ladder"]["escalated_at"] == at.isoformat()
        assert {e.suspension_id for e in Event.objects.filter(type=REMINDER)} == {
            first.pk,
            second.pk,
        }

    def test_a_late_sweep_sends_the_latest_reminder_and_counts_the_one_it_skipped(self) -> None:
        _, [first, _] = raise_group(self.alice)

        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=60))

        reminder = Event.objects.filter(type=REMINDER, suspension=first).get()
        assert reminder.payload["reminder"] == 2 and reminder.payload["skipped"] == 1
        assert Event.objects.filter(type=ESCALATED, suspension=first).count() == 1

    def test_a_decided_request_gets_no_more_steps(self) -> None:
        _, [first, second] = raise_group(self.alice)
        decisions.decide(first, self.alice, {"approved": True})

        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=600))

        assert [e.suspension_id for e in Event.objects.filter(type=REMINDER)] == [second.pk]

    def test_an_ignored_request_gets_no_more_steps_but_its_deadline(self) -> None:
        _, [first, second] = raise_group(self.alice)
        decisions.ignore(first, self.alice)
        first.refresh_from_db()
        assert first.next_step_at is None
        assert payloads.ladder_payload(first)["next_reminder_at"] is None

        for before in (600, 120, 1):
            reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=before))

        assert {e.suspension_id for e in Event.objects.filter(type__in=[REMINDER, ESCALATED])} == {
            second.pk
        }
        assert deadlines.expire_overdue(now=first.expires_at + timedelta(seconds=1)) == 2
        first.refresh_from_db()
        assert first.status == Suspension.Status.TIMED_OUT

    def test_a_request_ignored_with_its_next_step_still_set_gets_no_step(self) -> None:
        # As the ignore left a request before it stopped the ladder itself.
        _, [first, second] = raise_group(self.alice)
        decisions.ignore(first, self.alice)
        second.refresh_from_db()
        Suspension.objects.filter(pk=first.pk).update(next_step_at=second.next_step_at)

        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=60))

        assert [e.suspension_id for e in Event.objects.filter(type=REMINDER)] == [second.pk]
        assert not Event.objects.filter(type=ESCALATED, suspension=first).exists()

    def test_extending_an_ignored_request_does_not_start_its_ladder_again(self) -> None:
        _, [first, _] = raise_group(self.alice)
        decisions.ignore(first, self.alice)

        done = reminders.extend(first, self.alice, 600, "later")

        first.refresh_from_db()
        assert first.expires_at == done.old_expires_at + timedelta(seconds=600)
        assert first.next_step_at is None

    def test_the_sweep_applies_the_deadline_before_any_step(self, time_machine: Any) -> None:
        _, [first, _] = raise_group(self.alice)
        Suspension.objects.update(next_step_at=first.expires_at - timedelta(seconds=1))
        time_machine.move_to(first.expires_at + timedelta(seconds=1))

        found = tasks.sweep()

        assert found["timed_out"] == 2 and found["ladder_steps"] == 0
        assert steps() == []

    def test_the_steps_are_in_the_audit_trail(self, api: Any, users: dict[str, Any]) -> None:
        _, [first, _] = raise_group(self.alice)
        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=600))
        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=120))
        client = api(None).client
        client.force_login(users["admin"])

        page = client.get("/audit/").content.decode()

        assert page.count("Reminder") >= 4
        assert "reminder 1 of 2, 10 min before the deadline" in page
        assert "reminder 2 of 2, 2 min before the deadline" in page
        assert "to leads, 2 min before the deadline" in page


class ToolLadderTestCase:
    def test_a_tools_own_ladder_replaces_the_agents_whole(
        self, users: dict[str, Any], load_agents: Any
    ) -> None:
        leads()
        load_agents(agent_file(", reminders: [30s]"))

        _, [first, _] = raise_group(users["reviewer"])

        assert first.reminders == [30] and first.escalate_to == ""
        assert first.escalate_before is None

    def test_reminders_already_past_are_skipped_and_a_past_escalation_is_due_at_once(
        self, users: dict[str, Any], load_agents: Any
    ) -> None:
        leads()
        load_agents(agent_file(", timeout: 60").replace("timeout: 1200, ", ""))

        _, [first, _] = raise_group(users["reviewer"])

        assert first.expires_at - first.created_at <= timedelta(seconds=61)
        assert first.reminders_sent == 2  # 10 min and 2 min before a 1 min deadline
        assert first.next_step_at == first.expires_at - timedelta(seconds=120)
        reminders.apply_ladder_steps(now=first.created_at + timedelta(seconds=1))
        assert steps() == [(ESCALATED, None), (ESCALATED, None)]


@pytest.mark.django_db(transaction=True)
class TwoSweepersTestCase:
    def test_two_sweepers_at_once_apply_each_step_once(
        self, users: dict[str, Any], load_agents: Any
    ) -> None:
        leads()
        load_agents(agent_file())
        raised = [raise_group(users["reviewer"])[1] for _ in range(5)]
        at = raised[0][0].expires_at - timedelta(seconds=120)
        later = max(s.expires_at for group in raised for s in group) - timedelta(seconds=120)
        assert later - at < timedelta(seconds=5)
        start = threading.Barrier(2)
        counts: list[int] = []
        errors: list[BaseException] = []

        def sweeper() -> None:
            try:
                start.wait()
                counts.append(reminders.apply_ladder_steps(now=later))
            except BaseException as e:  # reported by the assertion below
                errors.append(e)
            finally:
                connection.close()

        threads = [threading.Thread(target=sweeper) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)

        assert errors == []
        # Ten requests: each sends its (latest) reminder and escalates, once in all.
        assert sum(counts) == 20
        assert Event.objects.filter(type=REMINDER).count() == 10
        assert Event.objects.filter(type=ESCALATED).count() == 10
        assert Suspension.objects.filter(next_step_at__isnull=False).count() == 0
