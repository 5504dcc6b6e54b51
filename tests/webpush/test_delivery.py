"""Pushes to reviewers' devices, through pywebpush to the push-service stand-in: a request
reaches the devices of the people its email would reach (the stand-in decrypts it with the
subscription's keys and checks the VAPID JWT), says what waits and for which agent but not
the arguments, and is taken away once decided; a gone subscription is removed, other
failures retried a bounded number of times."""

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import door, reminders
from agents.models import AgentDefinition, Event
from notify.models import EmailOptIn
from tests.notify.raised import agent_file, leads, raise_group
from tests.webpush.standin import PushService
from webpush import devices, fanout, keys, outbox
from webpush.models import Device, Push


def deliver(box: outbox.Outbox = outbox.outbox) -> dict[int, str]:
    """What beat and the worker do: events to pushes, then each push's send task."""
    made: list[int] = []
    while True:
        step = fanout.fan_out()
        made += step.made
        if not step.passed:
            break
    return {pk: box.send(pk) for pk in made}


class PushDeliveryTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, push: PushService) -> None:
        self.alice, self.bob, self.mallory = users["reviewer"], users["teammate"], users["outsider"]
        self.push = push
        leads(users["outsider"])
        load_agents(agent_file())
        self.phone = push.subscribe("alice-phone")
        devices.add(self.alice, self.phone.info(), "Alice's phone")
        push.subscribe("bob-laptop")
        devices.add(self.bob, push.subscriptions["bob-laptop"].info(), "Bob's laptop")
        deliver()  # the events so far are behind the cursor

    def test_a_request_reaches_the_opted_in_reviewers_device_without_its_arguments(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=AgentDefinition.objects.get(name="payer"))
        thread, [first, second] = raise_group(self.alice)

        sent = deliver()

        assert list(sent.values()) == ["succeeded"]  # one push for the group of two calls
        [got] = self.push.to("alice-phone")
        assert self.push.to("bob-laptop") == []  # Bob did not opt in: email would not reach him
        body = got.payload.pop("body")
        assert re.fullmatch(r"transfer_funds \(2 calls\) · (19|20) min left", body), body
        assert got.payload == {
            "type": "show",
            "tag": f"request-{first.group}",
            "title": "payer asks for a decision",
            "url": f"/threads/{thread.pk}/#s-{first.pk}",
            "renotify": False,
        }
        # No argument's value reaches the lock screen.
        for value in ("A-1", "B-2", "C-3", "200", "300", "Two payments"):
            assert value not in got.payload["title"] + body
            assert f'"{value}"' not in got.plaintext
        # Signed with the gateway's VAPID key, for this push service, with a subject.
        assert got.vapid_key == keys.public_key()
        assert got.claims["aud"] == self.push.origin
        assert got.claims["sub"] == "mailto:gateway@localhost"
        assert got.headers["urgency"] == "high"
        assert got.headers["topic"] == first.group.hex
        assert 1100 <= int(got.headers["ttl"]) <= 1200  # until the deadline (20 min)
        assert self.push.refused == []
        assert Device.objects.get(user=self.alice).last_push_at is not None

    def test_the_escalation_reaches_the_groups_devices_and_a_reminder_replaces_the_notice(
        self,
    ) -> None:
        # Mallory is in the leads, whom the requests escalate to (tests.notify.raised).
        devices.add(self.mallory, self.push.subscribe("mallory-phone").info(), "Phone")
        EmailOptIn.objects.create(user=self.alice, agent=None)
        _, [first, _] = raise_group(self.alice)
        deliver()

        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=600))
        deliver()
        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=120))
        deliver()

        titles = [r.payload["title"] for r in self.push.to("alice-phone")]
        assert titles == [
            "payer asks for a decision",
            "Reminder: payer still waits for a decision",
            "Reminder: payer still waits for a decision",
        ]
        # The group the request escalated to (the leads, Mallory among them) hears of it.
        escalated = [r.payload for r in self.push.to("mallory-phone")]
        assert {p["title"] for p in escalated} == {
            "Escalated to leads: payer waits for a decision",
            "Reminder: payer still waits for a decision",
        }
        # One tag per request group: each notice replaces the one before, and alerts again.
        tags = {r.payload["tag"] for r in self.push.received}
        assert tags == {f"request-{first.group}"}
        assert all(r.payload["renotify"] for r in self.push.received[1:])

    def test_a_decided_request_sends_the_push_that_closes_its_notification(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        _, [first, second] = raise_group(self.alice)
        deliver()

        door.take(first, self.bob, door.Decision.approve())
        assert list(deliver().values()) == []  # the second call still waits: nothing closes
        door.take(second, self.bob, door.Decision.reject("not this one"))
        sent = deliver()

        assert list(sent.values()) == ["succeeded"]
        shown, closing = self.push.to("alice-phone")
        assert closing.payload == {"type": "close", "tag": shown.payload["tag"]}
        assert closing.headers["topic"] == shown.headers["topic"]
        assert self.push.to("bob-laptop") == []  # Bob was shown nothing, so nothing closes

    def test_a_request_decided_before_its_push_went_sends_neither(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        _, group = raise_group(self.alice)
        for s in group:
            door.take(s, self.bob, door.Decision.approve())

        sent = deliver()

        assert sorted(sent.values()) == ["skipped", "skipped"]  # the notice, then its close
        assert self.push.received == []

    def test_a_close_waits_for_its_notice_to_go_first(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        self.push.answers["alice-phone"] = 503
        _, group = raise_group(self.alice)
        [notice] = deliver()
        assert Push.objects.get(pk=notice).status == Push.Status.PENDING  # to be retried
        for s in group:
            door.take(s, self.bob, door.Decision.approve())
        step = fanout.fan_out()
        [close] = step.made

        assert outbox.send(close) == "waiting"
        assert Push.objects.get(pk=close).status == Push.Status.PENDING

    def test_a_gone_subscription_is_removed_and_audited(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        self.push.answers["alice-phone"] = 410
        raise_group(self.alice)

        assert list(deliver().values()) == ["dead-lettered"]

        assert not Device.objects.filter(user=self.alice).exists()
        removed = Event.objects.get(type=devices.Notice.REMOVED)
        assert removed.actor is None
        assert removed.payload["user"] == "alice"
        assert removed.payload["via"] == "the push service answered 410"
        assert removed.payload["push_service"] == "127.0.0.1"

    def test_other_failures_are_retried_on_a_schedule_then_given_up(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        self.push.answers["alice-phone"] = 500
        raise_group(self.alice)
        now = timezone.now() + timedelta(seconds=1)  # after the fan-out makes the push
        [(pk, first)] = deliver(outbox.Outbox(clock=lambda: now, jitter=lambda: 1.0)).items()
        assert first == "retry"
        outcomes = []
        for wait in outbox.RETRY_SCHEDULE:
            now += timedelta(seconds=wait + 1)
            box = outbox.Outbox(clock=lambda at=now: at, jitter=lambda: 1.0)
            outcomes.append(box.send(pk))

        assert outcomes == ["retry"] * (len(outbox.RETRY_SCHEDULE) - 1) + ["dead-lettered"]
        failed = Push.objects.get(pk=pk)
        assert failed.status == Push.Status.FAILED
        assert failed.attempts == len(outbox.RETRY_SCHEDULE) + 1
        assert len(self.push.to("alice-phone")) == failed.attempts
        assert Device.objects.filter(user=self.alice).exists()  # a failure is not a gone device
