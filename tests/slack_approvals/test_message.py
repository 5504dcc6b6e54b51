"""A request of a routed agent posts one Block Kit message to its channel, with the buttons,
and its decision updates that message in place, whoever or whatever decided."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import decisions
from agents.deadlines import time_out
from agents.models import Suspension
from slack_approvals.models import SlackDelivery, SlackMessage
from tests.slack_approvals.conftest import TOKEN, agent_file, deliver, raise_request
from tests.slack_approvals.standin import SlackStandIn


def texts(blocks: list[dict[str, Any]]) -> str:
    """Every text the blocks show, one per line."""
    found = []
    for block in blocks:
        if "text" in block:
            found.append(block["text"]["text"])
        for element in block.get("elements", []):
            found.append(
                element["text"]["text"] if element.get("type") == "button" else element["text"]
            )
    return "\n".join(found)


def buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


class MessageTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.alice = users["reviewer"]
        self.slack = slack
        self.load = load_agents
        load_agents(agent_file())
        deliver()  # the cursor starts after what is already there

    def posted(self) -> dict[str, Any]:
        [call] = self.slack.called("chat.postMessage")
        return call.body

    def test_a_request_posts_one_message_with_the_buttons(self) -> None:
        s = raise_request()
        assert deliver() == ["succeeded"]
        deliver()  # nothing more
        [call] = self.slack.called("chat.postMessage")
        assert call.authorization == f"Bearer {TOKEN}"
        body = call.body
        assert body["channel"] == "C0PAYMENTS"
        blocks = body["blocks"]
        shown = texts(blocks)
        assert "payer calls `transfer_funds` · run started by olivia" in shown
        assert '"to_account": "B-2"' in shown
        assert "Decide by " in shown and "then it is rejected automatically" in shown
        assert buttons(blocks) == ["approve", "reject", "open"]
        actions = next(b for b in blocks if b["type"] == "actions")["elements"]
        assert actions[0]["value"] == actions[1]["value"] == str(s.pk)
        assert actions[2]["url"] == f"http://localhost:8000/threads/{s.thread_id}/#s-{s.pk}"
        message = SlackMessage.objects.get(suspension=s)
        assert (message.channel, message.ts) == ("C0PAYMENTS", self.slack.messages and message.ts)
        assert self.slack.message("C0PAYMENTS", message.ts)["blocks"] == blocks

    def test_arguments_are_escaped_for_mrkdwn_and_bounded(self, settings: Any) -> None:
        settings.DISPLAY_MAX_CARD_BYTES = 200
        self.load(agent_file(to="<!channel> & <https://evil|click> ```x" + "y" * 400))
        raise_request()
        deliver()
        shown = texts(self.posted()["blocks"])
        assert "<!channel>" not in shown and "<https" not in shown
        assert "&lt;!channel&gt; &amp; &lt;https://evil|click&gt;" in shown
        assert shown.count("```") == 2  # the value opens or closes no code block
        assert "more bytes: Open shows all of it" in shown
        # Slack refuses a section's text over 3,000 characters.
        assert all(len(b["text"]["text"]) <= 3000 for b in self.posted()["blocks"] if "text" in b)

    def test_an_agent_without_a_route_posts_nothing(self) -> None:
        self.load(agent_file().replace("    slack: {channel: C0PAYMENTS}\n", ""))
        raise_request()
        deliver()
        assert self.slack.calls == [] and not SlackDelivery.objects.exists()

    def test_slack_off_posts_nothing(self, settings: Any) -> None:
        settings.SLACK_BOT_TOKEN = ""
        raise_request()
        from slack_approvals import tasks

        assert tasks.fan_out() == 0 and tasks.sweep() == {}
        assert self.slack.calls == [] and not SlackDelivery.objects.exists()

    def test_a_decision_made_on_the_page_updates_the_message_in_place(self) -> None:
        s = raise_request()
        deliver()
        decisions.decide(s, self.alice, {"approved": True, "reason": "invoice checked"})
        assert deliver() == ["succeeded"]
        [update] = self.slack.called("chat.update")
        message = SlackMessage.objects.get(suspension=s)
        assert (update.body["channel"], update.body["ts"]) == (message.channel, message.ts)
        s.refresh_from_db()
        at = timezone.localtime(s.decided_at).strftime("%H:%M")
        now = self.slack.message(message.channel, message.ts)
        assert f"*Approved by alice at {at} · invoice checked*" in texts(now["blocks"])
        assert buttons(now["blocks"]) == ["open"]
        assert len(self.slack.messages) == 1

    def test_a_deadline_rejects_and_says_so(self) -> None:
        s = raise_request()
        deliver()
        time_out(Suspension.objects.get(pk=s.pk), timezone.now() + timedelta(hours=2))
        deliver()
        [message] = self.slack.messages.values()
        assert "*Rejected automatically at the deadline*" in texts(message["blocks"])
        assert buttons(message["blocks"]) == ["open"]

    def test_a_quorum_shows_its_count_until_it_decides(self, users: dict[str, Any]) -> None:
        self.load(agent_file().replace("    slack:", "    policy: {quorum: 2}\n    slack:"))
        s = raise_request()
        deliver()
        decisions.decide(s, self.alice, {"approved": True})
        deliver()
        [message] = self.slack.messages.values()
        assert "1 of 2 approvals" in texts(message["blocks"])
        assert buttons(message["blocks"]) == ["approve", "reject", "open"]
        decisions.decide(s, users["teammate"], {"approved": True})
        deliver()
        assert "*Approved by bob at " in texts(message["blocks"])
        assert len(self.slack.called("chat.update")) == 2
