"""Answer…: a question answered from Slack. The message of a question offers Answer… (not
Approve and Reject…); the modal asks in words, or with a field per property of the answer's
schema; the submission answers as the page does, and the run goes on with it."""

import json
import time
from typing import Any

import pytest

from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from slack_approvals.models import SlackLink
from tests.slack_approvals.conftest import deliver
from tests.slack_approvals.standin import SlackStandIn
from tests.slack_approvals.test_interactions import click, signed_post

ASKER = """
agents:
  - name: asker
    model: scripted
    tools: [ask_user]
    slack: {channel: C0PAYMENTS}
    script:
      - tool_calls:
          - {name: ask_user, input: {question: "Which <b>account</b> pays?"}}
      - text: Thanks.
"""

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "The note's name"},
        "copies": {"type": "integer"},
        "size": {"enum": ["small", "large"]},
        "overwrite": {"type": "boolean"},
    },
    "required": ["name"],
}


def submit(view: dict[str, Any], slack_user: str, values: dict[str, Any]) -> Any:
    payload = {
        "type": "view_submission",
        "user": {"id": slack_user},
        "trigger_id": f"submit-{time.monotonic_ns()}",
        "view": {**view, "id": "V1", "state": {"values": values}},
    }
    return signed_post(payload)


def typed(value: str) -> dict[str, Any]:
    return {"value": {"type": "plain_text_input", "value": value}}


def chosen(view: dict[str, Any], block: str, label: str) -> dict[str, Any]:
    [field] = [b for b in view["blocks"] if b.get("block_id") == block]
    [option] = [o for o in field["element"]["options"] if o["text"]["text"] == label]
    return {"value": {"type": "static_select", "selected_option": option}}


class AnswerTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any, slack: SlackStandIn) -> None:
        self.users = users
        self.slack = slack
        load_agents(ASKER)
        SlackLink.objects.create(user=users["reviewer"], slack_user_id="U0ALICE")
        asker = AgentDefinition.objects.get(name="asker")
        self.thread = starting.start_thread(asker, "go", users["reviewer"])
        Engine().advance(self.thread.pk)
        self.thread.refresh_from_db()
        assert self.thread.status == Thread.Status.SUSPENDED
        self.s = self.thread.suspensions.get()
        assert self.s.kind == Suspension.Kind.INPUT

    def buttons(self) -> list[str]:
        [message] = self.slack.messages.values()
        [actions] = [b for b in message["blocks"] if b["type"] == "actions"]
        return [e["text"]["text"] for e in actions["elements"]]

    def test_a_question_is_answered_in_words_and_the_run_goes_on(self) -> None:
        deliver()
        assert self.buttons() == ["Answer…", "Open"]
        click(self.s, "U0ALICE", action="answer")
        [view] = self.slack.views
        assert view["private_metadata"] == str(self.s.pk)
        # The question is the agent's text: escaped for Slack's mrkdwn, never markup.
        assert "&lt;b&gt;account&lt;/b&gt;" in view["blocks"][0]["text"]["text"]
        answer = submit(view, "U0ALICE", {"text": {"answer_text": {"value": "ACC-7 <b>"}}})
        assert answer.status_code == 200 and answer.content == b""
        self.s.refresh_from_db()
        assert (self.s.status, self.s.response, self.s.decided_by_name) == (
            "approved",
            "ACC-7 <b>",
            "alice",
        )
        deliver()
        assert self.buttons() == ["Open"]  # answered: the message says so, with no buttons

    def test_an_unlinked_user_gets_no_modal_and_a_refused_answer_keeps_the_modal(self) -> None:
        click(self.s, "U0STRANGER", action="answer")
        assert self.slack.views == []
        click(self.s, "U0ALICE", action="answer")
        [view] = self.slack.views
        answer = submit(view, "U0STRANGER", {"text": {"answer_text": {"value": "no"}}})
        body = answer.json()
        assert body["response_action"] == "errors" and "not linked" in body["errors"]["text"]
        self.s.refresh_from_db()
        assert self.s.status == "pending"

    def test_a_question_with_a_schema_gets_a_field_per_property(self) -> None:
        presentation = {**(self.s.presentation or {}), "answer": "form"}
        Suspension.objects.filter(pk=self.s.pk).update(
            tool_schema=SCHEMA, presentation=presentation
        )
        self.s.refresh_from_db()
        click(self.s, "U0ALICE", action="answer")
        [view] = self.slack.views
        fields = [b for b in view["blocks"] if b["type"] == "input"]
        assert [(f["label"]["text"], f["element"]["type"], f["optional"]) for f in fields] == [
            ("Name", "plain_text_input", False),
            ("copies", "number_input", True),
            ("overwrite", "static_select", True),
            ("size", "static_select", True),
        ]
        assert fields[0]["hint"]["text"] == "The note's name"

        wrong = submit(view, "U0ALICE", {"field:0": typed("n"), "field:1": typed("two")})
        assert wrong.json() == {
            "response_action": "errors",
            "errors": {"field:1": "Not a valid integer."},
        }
        values = {
            "field:0": typed("minutes"),
            "field:1": typed("2"),
            "field:2": chosen(view, "field:2", "false"),
            "field:3": chosen(view, "field:3", "large"),
        }
        assert submit(view, "U0ALICE", values).status_code == 200
        self.s.refresh_from_db()
        assert self.s.status == "approved"
        assert json.loads(self.s.response) == {
            "name": "minutes",
            "copies": 2,
            "size": "large",
            "overwrite": False,
        }
