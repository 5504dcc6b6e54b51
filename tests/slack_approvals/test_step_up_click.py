"""A Slack Approve click on a `step_up` request (agents.policy) is refused: a passkey is asked
for on the request's page, which the ephemeral answer names; Reject needs no passkey."""

import time
from typing import Any

import pytest

from agents.models import AgentDefinition, Event, Suspension
from slack_approvals.models import SlackLink
from tests.slack_approvals.conftest import agent_file, deliver, raise_request
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_interactions import click, signed_post


class StepUpClickTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.slack = slack
        load_agents(agent_file())
        AgentDefinition.objects.filter(name="payer").update(
            policy={"tools": {"transfer_funds": {"step_up": True}}}
        )
        deliver()
        SlackLink.objects.create(user=users["reviewer"], slack_user_id="U0ALICE")

    def told(self) -> list[tuple[str, str]]:
        return [(c.body["user"], c.body["text"]) for c in self.slack.called("chat.postEphemeral")]

    def test_approve_is_refused_with_the_page_named_and_reject_is_taken(self) -> None:
        s = raise_request()
        deliver()
        assert click(s, "U0ALICE").status_code == 200
        s.refresh_from_db()
        assert s.status == Suspension.Status.PENDING
        assert not Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED").exists()
        [(to, text)] = self.told()
        assert to == "U0ALICE"
        assert "needs your passkey" in text
        assert f"/threads/{s.thread_id}/#s-{s.pk}" in text
        # Reject opens its modal (a reason), then decides without any passkey.
        click(s, "U0ALICE", action="reject")
        [view] = self.slack.views
        values = {"reason": {"reason_text": {"type": "plain_text_input", "value": "Not yet."}}}
        payload = {
            "type": "view_submission",
            "user": {"id": "U0ALICE"},
            "trigger_id": f"submit-{time.monotonic_ns()}",
            "view": {**view, "id": "V1", "state": {"values": values}},
        }
        assert signed_post(payload).status_code == 200
        s.refresh_from_db()
        assert (s.status, s.decided_by_name) == ("rejected", "alice")
