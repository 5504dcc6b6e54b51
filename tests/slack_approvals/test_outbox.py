"""Sending to Slack: a failing Slack is retried and each attempt shows in the delivery log; a
rate limit waits its Retry-After; the bot's token is never logged; direct messages go to the
linked people a route names."""

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agents import decisions
from slack_approvals import outbox
from slack_approvals.models import SlackAttempt, SlackDelivery, SlackLink, SlackMessage
from tests.slack_approvals.conftest import TOKEN, agent_file, deliver, raise_request
from tests.slack_approvals.standin import SlackStandIn


def due_now() -> None:
    """The clock moved past every retry's wait."""
    SlackDelivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())


class OutboxTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        self.load = load_agents
        load_agents(agent_file())
        deliver()

    def test_slack_answering_500_is_retried_and_shows_in_the_delivery_log(
        self, caplog: Any
    ) -> None:
        caplog.set_level(logging.DEBUG)
        s = raise_request()
        self.slack.fail_next(2)
        before = timezone.now()
        assert deliver() == ["pending"]
        delivery = SlackDelivery.objects.get()
        assert delivery.status == "pending" and delivery.attempts == 1
        assert delivery.last_error == "internal_error (HTTP 500)"
        assert delivery.next_attempt_at >= before + timedelta(seconds=outbox.RETRY_SCHEDULE[0])
        assert deliver() == []  # not due yet: nothing is sent early
        due_now()
        assert deliver() == ["pending"]
        due_now()
        assert deliver() == ["succeeded"]
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_error) == ("succeeded", 3, "")
        log = list(
            SlackAttempt.objects.filter(delivery=delivery).values_list(
                "succeeded", "status_code", "error"
            )
        )
        assert log == [
            (False, 500, "internal_error (HTTP 500)"),
            (False, 500, "internal_error (HTTP 500)"),
            (True, None, ""),
        ]
        assert SlackMessage.objects.filter(suspension=s).count() == 1
        assert len(self.slack.messages) == 1
        assert TOKEN not in caplog.text and TOKEN.split("-")[-1] not in caplog.text

    def test_a_rate_limit_waits_its_retry_after(self) -> None:
        raise_request()
        self.slack.rate_limit_next(retry_after=30)
        before = timezone.now()
        assert deliver() == ["pending"]
        delivery = SlackDelivery.objects.get()
        assert delivery.last_error == "ratelimited (HTTP 429)"
        assert delivery.next_attempt_at >= before + timedelta(seconds=30)

    def test_an_error_slack_would_repeat_fails_at_once(self) -> None:
        raise_request()
        self.slack.fail_next(status=200, error="channel_not_found")
        assert deliver() == ["failed"]
        delivery = SlackDelivery.objects.get()
        assert (delivery.attempts, delivery.last_error) == (1, "channel_not_found (HTTP 200)")
        assert delivery.finished_at is not None

    def test_a_delivery_fails_when_the_schedule_runs_out(self) -> None:
        raise_request()
        self.slack.fail_next(len(outbox.RETRY_SCHEDULE) + 1)
        results = []
        for _ in range(len(outbox.RETRY_SCHEDULE) + 1):
            results += deliver()
            due_now()
        assert results == ["pending"] * len(outbox.RETRY_SCHEDULE) + ["failed"]
        assert SlackAttempt.objects.count() == len(outbox.RETRY_SCHEDULE) + 1
        assert self.slack.messages == {}

    def test_an_update_waits_for_its_request_to_be_posted(self) -> None:
        s = raise_request()
        self.slack.fail_next()
        deliver()  # the post failed once and waits for its retry
        decisions.decide(s, self.users["reviewer"], {"approved": True})
        assert deliver() == ["pending"]  # the update: not posted yet
        due_now()
        deliver()
        due_now()
        deliver()
        [message] = self.slack.messages.values()
        assert any("Approved by alice" in str(b) for b in message["blocks"])

    def test_direct_messages_go_to_the_linked_people_the_route_names(self, caplog: Any) -> None:
        caplog.set_level(logging.INFO)
        leads = Group.objects.create(name="leads")
        leads.user_set.add(self.users["teammate"], self.users["outsider"])
        SlackLink.objects.create(user=self.users["reviewer"], slack_user_id="U0ALICE")
        SlackLink.objects.create(user=self.users["teammate"], slack_user_id="U0BOB")
        self.load(agent_file(dm=", dm: [alice, leads, nobody]"))
        s = raise_request()
        assert sorted(deliver()) == ["succeeded"] * 3
        opened = [c.body["users"] for c in self.slack.called("conversations.open")]
        assert sorted(opened) == ["U0ALICE", "U0BOB"]
        posted = sorted(c.body["channel"] for c in self.slack.called("chat.postMessage"))
        assert posted == ["C0PAYMENTS", "D0ALICE", "D0BOB"]
        assert SlackMessage.objects.filter(suspension=s).count() == 3
        # Mallory is in the group but has no linked Slack account: skipped, and said so.
        assert "no linked Slack account for ['mallory']" in caplog.text
        assert "no user or group is named ['nobody']" in caplog.text
        decisions.decide(s, self.users["reviewer"], {"approved": True})
        deliver()
        assert sorted(c.body["channel"] for c in self.slack.called("chat.update")) == posted
