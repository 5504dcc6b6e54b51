"""Slack through a real Celery worker: the run's request is posted by the worker, a click in
Slack approves it, the worker resumes the run, and the message is updated."""

import json
from typing import Any

import pytest

from agents.models import Suspension, Thread
from slack_approvals import fanout
from slack_approvals.models import SlackLink
from tests.conftest import operator_of, wait_for
from tests.slack_approvals.conftest import agent_file
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_interactions import click

pytestmark = pytest.mark.worker


class SlackWorkerTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self, worker: Any, api: Any, users: dict[str, Any], load_agents: Any, slack: SlackStandIn
    ) -> None:
        load_agents(agent_file())
        self.admin = api("admin")
        self.slack = slack
        SlackLink.objects.create(user=users["reviewer"], slack_user_id="U0ALICE")
        # The cursor is made now, before the run: a new one starts at the events settled by
        # then (agents.cursor.locked_position), as in tests/webhooks/test_delivery_worker.py.
        fanout.fan_out()

    def test_a_click_approves_the_worker_resumes_and_the_message_is_updated(self) -> None:
        r = operator_of(self.admin).post("/api/threads", {"agent": "payer", "message": "pay"})
        assert r.status_code == 201, r.content
        thread = r.json()["id"]
        s = wait_for(
            lambda: Suspension.objects.filter(thread_id=thread, status="pending").first(),
            what="the run to suspend",
        )
        wait_for(lambda: self.slack.messages, timeout=20, what="the request's message")
        [message] = self.slack.messages.values()
        assert message["channel"] == "C0PAYMENTS"
        assert click(s, "U0ALICE").status_code == 200
        wait_for(
            lambda: Thread.objects.filter(pk=thread, status="completed").exists(),
            timeout=20,
            what="the worker to resume the run to its end",
        )
        wait_for(
            lambda: "Approved by alice at" in json.dumps(message["blocks"]),
            timeout=20,
            what="the message to be updated",
        )
        assert len(self.slack.called("chat.postMessage")) == 1
