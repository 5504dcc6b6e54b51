"""Calls an agent made together share one Slack message: each with its own buttons, updated
as each is decided, and the run goes on when all are."""

import json
from typing import Any

import pytest

from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from slack_approvals.models import SlackLink, SlackMessage
from tests.slack_approvals.conftest import deliver
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_interactions import click

BATCH = """
agents:
  - name: batcher
    model: scripted
    tools: [transfer_funds]
    slack: {channel: C0PAYMENTS}
    script:
      - text: Three payments.
        tool_calls:
%s
      - text: Done.
"""
CALL = (
    '          - {name: transfer_funds, input: {from_account: A-1, to_account: "B-%d", amount: %d}}'
)


def agent_file(calls: int) -> str:
    return BATCH % "\n".join(CALL % (n, 100 + n) for n in range(1, calls + 1))


class GroupMessageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        self.load = load_agents
        SlackLink.objects.create(user=users["reviewer"], slack_user_id="U0ALICE")

    def start(self, calls: int) -> tuple[Thread, list[Suspension]]:
        self.load(agent_file(calls))
        thread = starting.start_thread(
            AgentDefinition.objects.get(name="batcher"), "pay", self.users["operator"]
        )
        Engine().advance(thread.pk)
        thread.refresh_from_db()
        return thread, list(thread.suspensions.order_by("created_at", "pk"))

    def message(self) -> dict[str, Any]:
        [message] = self.slack.messages.values()
        return message

    def buttons(self) -> list[tuple[str, str]]:
        return [
            (e["action_id"], e.get("value", ""))
            for b in self.message()["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
        ]

    def test_three_calls_made_together_share_one_message(self) -> None:
        thread, calls = self.start(3)
        assert len(calls) == 3 and len({s.group for s in calls}) == 1
        deliver()
        assert len(self.slack.called("chat.postMessage")) == 1
        shown = json.dumps(self.message()["blocks"], ensure_ascii=False)
        assert "made 3 calls together" in shown and "3 wait for a decision" in shown
        approves = [v for a, v in self.buttons() if a == "approve"]
        assert approves == [str(s.pk) for s in calls]
        assert SlackMessage.objects.filter(suspension__in=calls).count() == 3

        click(calls[1], "U0ALICE")
        deliver()
        shown = json.dumps(self.message()["blocks"], ensure_ascii=False)
        assert "2 wait for a decision" in shown and "Approved by alice" in shown
        assert [v for a, v in self.buttons() if a == "approve"] == [
            str(calls[0].pk),
            str(calls[2].pk),
        ]

        click(calls[0], "U0ALICE")
        click(calls[2], "U0ALICE")
        deliver()
        shown = json.dumps(self.message()["blocks"], ensure_ascii=False)
        assert "all decided" in shown and shown.count("Approved by alice") == 3
        assert [a for a, _ in self.buttons()] == ["open", "open", "open"]
        assert len(self.slack.called("chat.postMessage")) == 1  # updates, never a new message
        Engine().advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == Thread.Status.COMPLETED

    def test_a_large_group_stays_within_slacks_limit(self) -> None:
        _, calls = self.start(12)
        deliver()
        blocks = self.message()["blocks"]
        assert len(blocks) <= 50
        assert len([a for a, _ in self.buttons() if a == "approve"]) == 10
        assert "and 2 more" in json.dumps(blocks)
