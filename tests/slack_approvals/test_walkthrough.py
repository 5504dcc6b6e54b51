"""docs/slack.md walked through as a reader would, against the Slack stand-in: the settings
it names, its agent file loaded with `load_agents`, a reviewer linked with the Connect Slack
step as its numbered steps say, then a request posted where the route says and approved with a
click in Slack at the manifest's interactivity URL."""

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client

from access import ratelimits
from access.permissions import REVIEWERS
from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from slack_approvals.models import SlackLink
from tests.slack_approvals.conftest import deliver
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_docs import PAGE, yaml_blocks
from tests.slack_approvals.test_interactions import signed_post


def interactivity_path() -> str:
    manifest = yaml_blocks()[0]
    return "/" + manifest["settings"]["interactivity"]["request_url"].split("/", 3)[3]


def press(channel: str, action_id: str, value: str) -> Any:
    """dana's press of a button in `channel`, as Slack signs and sends it."""
    payload = {
        "type": "block_actions",
        "user": {"id": "U0DANA"},
        "trigger_id": f"trigger-{time.monotonic_ns()}",
        "channel": {"id": channel},
        "container": {"type": "message", "channel_id": channel, "message_ts": "1.1"},
        "actions": [{"action_id": action_id, "value": value, "type": "button"}],
    }
    return signed_post(payload)


class WalkthroughTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        ratelimits.storage().reset()

    def test_the_pages_steps_work_as_written(self, tmp_path: Path, settings: Any) -> None:
        text = PAGE.read_text()
        # "Slack is off until both are set": the stand-in's fixture set them, as the page says.
        for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_API_URL"):
            assert f"`{name}`" in text and getattr(settings, name)

        # The people the page's route names: dana, and the group finance-leads.
        dana = User.objects.create_user("dana", password="dana-password-1")
        dana.groups.add(Group.objects.get(name=REVIEWERS))
        Group.objects.create(name="finance-leads").user_set.add(self.users["teammate"])

        # "Route an agent's requests": the page's agent file, loaded with load_agents. The page
        # leaves out the model; the test's agent is scripted, to run here.
        [agent] = yaml_blocks()[1]["agents"]
        agent.update(
            model="scripted",
            script=[
                {
                    "tool_calls": [
                        {
                            "name": "transfer_funds",
                            "input": {"from_account": "A-1", "to_account": "B-2", "amount": 200},
                        }
                    ]
                },
                {"text": "Paid."},
            ],
        )
        path = tmp_path / "payer.yaml"
        path.write_text(yaml.safe_dump({"agents": [agent]}))
        call_command("load_agents", str(path))

        # "Link reviewers' Slack accounts", steps 1 to 4, for dana.
        browser = Client()
        browser.force_login(dana)
        email = browser.get("/email/").content.decode()
        assert 'href="/slack/connect"' in email  # step 1: Email in the navigation, then the link
        assert browser.post("/slack/connect", {"member_id": "U0DANA"}).status_code == 302
        [dm] = [c.body for c in self.slack.called("chat.postMessage")]  # step 3
        assert dm["channel"] == "U0DANA" and "asked the approval gateway" in dm["text"]
        blocks = json.loads(dm["blocks"]) if isinstance(dm["blocks"], str) else dm["blocks"]
        [button] = blocks[1]["elements"]
        assert button["text"]["text"] == "Yes, link my account"
        assert "Check Slack" in browser.get("/slack/connect").content.decode()
        assert interactivity_path() == "/slack/interactions"
        assert press("D0DANA", button["action_id"], button["value"]).status_code == 200  # step 4
        assert SlackLink.objects.get(slack_user_id="U0DANA").user == dana
        assert "Linked to gateway user dana" in json.dumps(list(self.slack.messages.values()))
        assert "Unlink" in browser.get("/slack/connect").content.decode()

        # A run: its request is posted in the route's channel and to dana (linked); bob, in
        # finance-leads, is not linked, so the page's "skipped" applies to him.
        thread = starting.start_thread(
            AgentDefinition.objects.get(name="payer"), "pay", self.users["operator"]
        )
        Engine().advance(thread.pk)
        s = Suspension.objects.get(thread=thread)
        deliver()
        posted = [
            c.body["channel"]
            for c in self.slack.called("chat.postMessage")
            if c.body["channel"] != "U0DANA"
        ]
        assert sorted(posted) == ["C0123ABCD", "D0DANA"]
        channel_message = next(m for (c, _), m in self.slack.messages.items() if c == "C0123ABCD")
        shown = json.dumps(channel_message["blocks"])
        assert '"Approve"' in shown and '"Reject\\u2026"' in shown and '"Open"' in shown

        # "What the message shows" → Approve, pressed by dana in the channel.
        assert press("C0123ABCD", "approve", str(s.pk)).status_code == 200
        s.refresh_from_db()
        assert (s.status, s.decided_by_name) == ("approved", "dana")
        deliver()
        channel_message = next(m for (c, _), m in self.slack.messages.items() if c == "C0123ABCD")
        assert "Approved by dana" in json.dumps(channel_message["blocks"])
        Engine().advance(thread.pk)
        thread.refresh_from_db()
        assert thread.status == Thread.Status.COMPLETED
