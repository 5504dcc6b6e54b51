"""Reminders and escalations reply in the request's message thread, once each, while it
waits; a moved deadline updates the message."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agents import decisions, reminders
from slack_approvals.models import SlackDelivery
from tests.slack_approvals.conftest import agent_file, deliver, raise_request
from tests.slack_approvals.standin import SlackStandIn

LADDER = "    reminders: [8m, 6m]\n    escalate_to: leads\n    escalate_at: 4m\n    slack:"


class ThreadReplyTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        Group.objects.get_or_create(name="leads")
        load_agents(agent_file().replace("    slack:", LADDER))
        self.users = users
        self.slack = slack
        self.s = raise_request()
        deliver()
        [(self.channel, self.ts)] = list(slack.messages)

    def replies(self) -> list[str]:
        return [r["text"] for r in self.slack.replies.get((self.channel, self.ts), [])]

    def test_reminders_and_the_escalation_reply_in_the_thread_once_each(self) -> None:
        assert self.s.expires_at is not None
        reminders.apply_ladder_steps(self.s.expires_at - timedelta(minutes=7))
        deliver()
        deliver()  # nothing new: the reply is not sent again
        [first] = self.replies()
        assert first.startswith("Reminder 1 of 2: decide by ") and "rejected automatically" in first
        reminders.apply_ladder_steps(self.s.expires_at - timedelta(minutes=3))
        deliver()
        texts = self.replies()
        assert len(texts) == 3, texts
        assert texts[1].startswith("Reminder 2 of 2: ")
        assert texts[2].startswith("Escalated to leads: decide by ")
        assert len(self.slack.messages) == 1  # replies, not new messages

    def test_a_reply_retried_after_a_failure_is_sent_once(self) -> None:
        assert self.s.expires_at is not None
        self.slack.fail_next(1)
        reminders.apply_ladder_steps(self.s.expires_at - timedelta(minutes=7))
        deliver()
        assert self.replies() == []
        SlackDelivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())
        deliver()
        assert len(self.replies()) == 1
        reply = SlackDelivery.objects.get(action=SlackDelivery.Action.REPLY)
        assert (reply.status, reply.attempts, reply.replied_in) == ("succeeded", 2, [self.channel])

    def test_a_request_decided_before_its_reminder_is_sent_gets_no_reply(self) -> None:
        assert self.s.expires_at is not None
        reminders.apply_ladder_steps(self.s.expires_at - timedelta(minutes=7))
        decisions.decide(self.s, self.users["reviewer"], {"approved": True})
        deliver()
        assert self.replies() == []
        [message] = self.slack.messages.values()
        assert "Approved by alice" in str(message["blocks"])

    def test_an_extended_deadline_updates_the_message(self) -> None:
        before = str(next(iter(self.slack.messages.values()))["blocks"])
        reminders.extend(self.s, self.users["teammate"], 3600, "waiting on finance")
        deliver()
        after = str(next(iter(self.slack.messages.values()))["blocks"])
        assert before != after and "Decide by " in after
