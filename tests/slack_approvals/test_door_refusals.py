"""A Slack click decides through the one door (agents.door.take) and is told the outcome in
Slack's words: a click the policy refuses changes nothing and its clicker is told the
policy's rule in the words the API uses; a quorum's vote is taken and nobody is told off."""

from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents.models import AgentDefinition, Event, Suspension
from slack_approvals.models import SlackLink
from tests.conftest import Api
from tests.slack_approvals.conftest import agent_file, deliver, raise_request
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_interactions import click


class SlackDoorTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        Group.objects.get_or_create(name="finance")
        self.users = users
        self.slack = slack
        load_agents(agent_file())
        deliver()
        SlackLink.objects.create(user=users["reviewer"], slack_user_id="U0ALICE")
        SlackLink.objects.create(user=users["teammate"], slack_user_id="U0BOB")

    def told(self) -> list[tuple[str, str]]:
        return [(c.body["user"], c.body["text"]) for c in self.slack.called("chat.postEphemeral")]

    def with_policy(self, policy: dict[str, Any]) -> Suspension:
        AgentDefinition.objects.filter(name="payer").update(policy=policy)
        return raise_request()

    def test_a_click_the_groups_rule_refuses_is_told_the_rule_and_changes_nothing(self) -> None:
        s = self.with_policy({"groups": ["finance"]})
        assert click(s, "U0ALICE").status_code == 200
        s.refresh_from_db()
        assert s.status == "pending"
        assert not Event.objects.filter(suspension=s, type="SUSPENSION_DECIDED").exists()
        path = f"/api/threads/{s.thread_id}/suspensions/{s.pk}/resume"
        refused = Api(self.users["reviewer"]).post(path, {"approved": True})
        assert refused.status_code == 403 and refused.json()["rule"] == "groups"
        assert self.told() == [("U0ALICE", "Only group finance may decide this request.")]

    def test_a_quorum_vote_is_taken_silently_and_the_second_decides(self) -> None:
        s = self.with_policy({"quorum": 2})
        click(s, "U0ALICE")
        s.refresh_from_db()
        assert s.status == "pending" and s.votes.count() == 1
        assert self.told() == []
        click(s, "U0ALICE")  # again: the policy says she already approved
        [(to, text)] = self.told()
        assert to == "U0ALICE" and text.startswith("You already approved")
        click(s, "U0BOB")
        s.refresh_from_db()
        assert s.status == "approved"
