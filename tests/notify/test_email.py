"""Email through Django's SMTP backend to a real SMTP server (aiosmtpd) the tests start: one
email per group of calls to each opted-in reviewer, a link that opens the card and changes
nothing, reminders to the same people, escalations to the group, each sent once."""

import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from agents import decisions, reminders
from agents.models import AgentDefinition, Event, Suspension
from notify import outbox
from notify.models import Email, EmailAttempt, EmailOptIn
from tests.notify.raised import agent_file, emailed, leads, raise_group


def deliver() -> list[int]:
    """What beat and the worker do: events to emails, then each email's send task."""
    made: list[int] = []
    while True:
        passed, batch = outbox.fan_out()
        made += batch
        if not passed:
            break
    for pk in made:
        outbox.send(pk)
    return made


def links(body: str) -> list[str]:
    return re.findall(r"Open it: (\S+)", body)


class RequestEmailTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, mailbox: Any) -> None:
        self.users = users
        self.alice, self.bob = users["reviewer"], users["teammate"]
        self.mailbox = mailbox
        emailed(self.alice, self.bob, users["outsider"])
        leads()
        load_agents(agent_file())
        deliver()  # the events so far (the agents' load) are behind the cursor

    def test_the_opted_in_reviewer_gets_one_email_for_a_group_of_two_calls(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=AgentDefinition.objects.get(name="payer"))
        # The outsider opted in too (say, before losing the permission): not a decider, no email.
        EmailOptIn.objects.create(user=self.users["outsider"], agent=None)
        _, [first, second] = raise_group(self.alice)

        deliver()

        [received] = self.mailbox.to("alice@example.com")
        assert self.mailbox.to("bob@example.com") == []
        assert self.mailbox.to("mallory@example.com") == []
        assert received.subject == "payer asks for a decision: transfer_funds"
        assert received.message.get_content_type() == "text/plain"
        body = received.body
        assert "It made 2 calls together" in body
        assert '"to_account": "B-2"' in body and '"to_account": "C-3"' in body
        assert "then it is rejected automatically" in body
        assert "Ladder: reminders 10m and 2m before the deadline; escalates to leads 2m" in body
        assert first.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC") in body
        assert links(body) == [
            f"http://localhost:8000/threads/{first.thread_id}/#s-{first.pk}",
            f"http://localhost:8000/threads/{first.thread_id}/#s-{second.pk}",
        ]
        assert received.message["Auto-Submitted"] == "auto-generated"
        assert Email.objects.get().status == Email.Status.SENT

    def test_the_link_opens_the_card_after_login_and_changes_nothing(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        _, [first, second] = raise_group(self.alice)
        deliver()
        link = urlsplit(links(self.mailbox.to("alice@example.com")[0].body)[0])
        before = Event.objects.count()

        anonymous = Client().get(link.path)
        assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
        browser = Client()
        assert browser.login(username="alice", password="alice-password-1")
        page = browser.get(link.path)

        assert page.status_code == 200
        html = page.content.decode()
        assert f'id="s-{first.pk}"' in html and f'id="s-{second.pk}"' in html
        assert link.fragment == f"s-{first.pk}"
        assert Event.objects.count() == before
        assert Suspension.objects.filter(status=Suspension.Status.PENDING).count() == 2

    def test_an_email_is_made_and_sent_once(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        raise_group(self.alice)
        [pk] = deliver()

        assert deliver() == []
        assert outbox.send(pk) is False  # a second delivery of the task
        assert len(self.mailbox.to("alice@example.com")) == 1
        email = Email.objects.get()
        assert email.attempts == 1 and email.finished_at is not None

    def test_arguments_are_plain_text_with_invisible_characters_shown(
        self, load_agents: Any
    ) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        load_agents(agent_file().replace("to_account: B-2", 'to_account: "<b>B-2</b>\\u202e"'))
        raise_group(self.alice)

        deliver()

        body = self.mailbox.to("alice@example.com")[0].body
        assert '"to_account": "<b>B-2</b>[U+202E]"' in body
        assert "\u202e" not in body

    def test_a_group_decided_before_its_email_goes_is_not_sent(self) -> None:
        EmailOptIn.objects.create(user=self.alice, agent=None)
        _, [first, second] = raise_group(self.alice)
        [pk] = outbox.fan_out()[1]
        for s in (first, second):
            decisions.decide(s, self.bob, {"approved": True})

        assert outbox.send(pk) is False
        assert Email.objects.get().status == Email.Status.SKIPPED
        assert self.mailbox.messages == []


class ReminderEmailTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, mailbox: Any) -> None:
        self.alice, self.bob = users["reviewer"], users["teammate"]
        self.carol = users["outsider"]  # in the leads group, which may decide
        self.mailbox = mailbox
        emailed(self.alice, self.bob, self.carol)
        leads(self.carol)
        load_agents(agent_file())
        deliver()
        EmailOptIn.objects.create(user=self.alice, agent=None)

    def test_reminders_go_to_the_opted_in_and_the_escalation_to_the_group(self) -> None:
        _, [first, _] = raise_group(self.alice)
        deliver()
        self.mailbox.clear()

        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=600))
        deliver()
        [reminder] = self.mailbox.to("alice@example.com")
        assert reminder.subject.startswith("Reminder: payer still waits for a decision")
        assert len(links(reminder.body)) == 2  # one email for the group's two reminders
        assert self.mailbox.to("mallory@example.com") == []

        self.mailbox.clear()
        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=120))
        deliver()

        # The second reminder goes to the opted-in and, now escalated, to the group as well;
        # the escalation to the group only.
        subjects = sorted(m.subject.split(":")[0] for m in self.mailbox.to("mallory@example.com"))
        assert subjects == ["Escalated to leads", "Reminder"]
        for m in self.mailbox.to("mallory@example.com"):
            assert "you are in the group leads, which these requests were escalated to" in m.body
        [escalation] = [m for m in self.mailbox.messages if m.subject.startswith("Escalated")]
        assert "payer waits for a decision" in escalation.subject
        assert "you are in the group leads" in escalation.body
        [reminder] = self.mailbox.to("alice@example.com")
        assert reminder.subject.startswith("Reminder")
        assert self.mailbox.to("bob@example.com") == []

    def test_an_ignored_request_gets_no_reminder_or_escalation_email(self) -> None:
        _, [first, second] = raise_group(self.alice)
        deliver()
        self.mailbox.clear()
        for s in (first, second):
            decisions.ignore(s, self.bob)

        for before in (600, 120):
            reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=before))
        deliver()

        assert self.mailbox.messages == []
        assert not Event.objects.filter(
            type__in=[Event.Type.SUSPENSION_REMINDER, Event.Type.SUSPENSION_ESCALATED]
        ).exists()

    def test_a_reminder_email_made_before_the_ignore_is_not_sent(self) -> None:
        _, [first, second] = raise_group(self.alice)
        deliver()
        self.mailbox.clear()
        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=600))
        [pk] = outbox.fan_out()[1]
        for s in (first, second):
            decisions.ignore(s, self.bob)

        assert outbox.send(pk) is False
        assert Email.objects.get(pk=pk).status == Email.Status.SKIPPED
        assert self.mailbox.messages == []

    def test_a_refused_send_is_tried_again_after_a_wait(self, settings: Any) -> None:
        raise_group(self.alice)
        good_port = settings.EMAIL_PORT
        settings.EMAIL_PORT = 1  # nothing listens there
        [pk] = deliver()

        email = Email.objects.get(pk=pk)
        assert email.status == Email.Status.PENDING and email.attempts == 1
        assert email.last_error and email.next_attempt_at > timezone.now()
        assert outbox.enqueue_due() == 0  # not before its wait is over

        settings.EMAIL_PORT = good_port
        assert outbox.send(pk, now=email.next_attempt_at) is True
        assert len(self.mailbox.to("alice@example.com")) == 1
        # Each attempt in the log (agents.delivery.outbox), the refusal's error kept.
        log = EmailAttempt.objects.filter(email_id=pk).values_list("number", "succeeded", "error")
        assert list(log) == [(1, False, email.last_error), (2, True, "")]

    def test_a_mailbox_refused_for_good_ends_the_retries_and_a_busy_one_does_not(self) -> None:
        EmailOptIn.objects.create(user=self.bob, agent=None)
        raise_group(self.alice)
        self.mailbox.refusing["alice@example.com"] = "550 5.1.1 No such user here"
        self.mailbox.refusing["bob@example.com"] = "451 4.3.0 Try again later"
        made = deliver()

        emails = {e.to: e for e in Email.objects.filter(pk__in=made)}
        refused, busy = emails["alice@example.com"], emails["bob@example.com"]
        # A 5xx reply is permanent (RFC 5321): sending it again would be refused again.
        assert refused.status == Email.Status.FAILED and refused.attempts == 1
        assert "550" in refused.last_error and refused.next_attempt_at is None
        # A 4xx reply is not: the email waits for its next attempt.
        assert busy.status == Email.Status.PENDING and busy.attempts == 1
        assert "451" in busy.last_error and busy.next_attempt_at > timezone.now()

    def test_a_sender_killed_mid_send_leaves_the_email_to_be_sent_once_more(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        raise_group(self.alice)
        [pk] = outbox.fan_out()[1]
        # Killed after its claim: the claim runs out and the sweep queues the email again.
        now = timezone.now()
        Email.objects.filter(pk=pk).update(
            lock_token="killed", locked_until=now + outbox.CLAIM, attempts=1
        )
        queued: list[tuple[int, str]] = []
        monkeypatch.setattr(
            outbox.outbox, "enqueue", lambda ids, token: queued.extend((i, token) for i in ids)
        )

        assert outbox.enqueue_due(now=now + timedelta(seconds=59)) == 0
        assert outbox.send(pk, now=now + timedelta(seconds=59)) is False
        later = now + outbox.CLAIM + timedelta(seconds=1)
        assert outbox.enqueue_due(now=later) == 1
        [(queued_pk, token)] = queued
        assert queued_pk == pk
        # The sweep's task holds the email now: a send without its token waits.
        assert outbox.send(pk, now=later) is False
        assert outbox.send(pk, now=later, token=token) is True
        assert len(self.mailbox.to("alice@example.com")) == 1

    def test_group_members_who_cannot_open_the_thread_are_not_emailed(self) -> None:
        from django.contrib.auth.models import Group

        Group.objects.get(name="leads").permissions.remove(
            Permission.objects.get(codename="view_thread")
        )
        _, [first, _] = raise_group(self.alice)
        reminders.apply_ladder_steps(now=first.expires_at - timedelta(seconds=120))

        deliver()

        assert self.mailbox.to("mallory@example.com") == []
        assert len(self.mailbox.to("alice@example.com")) == 2  # the request and the reminder
