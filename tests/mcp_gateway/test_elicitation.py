"""An upstream's question (elicitation/create) during a call through /mcp/<name> goes to a
person as an input request, and their answer goes back to the upstream."""

import json
from datetime import timedelta
from typing import Any

import httpx2
import mcp_types as types
import pytest
from django.test import Client
from django.utils import timezone
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from agents import deadlines
from agents.models import Event, Suspension
from mcp_gateway import elicitation
from mcp_gateway.models import Upstream as Row
from mcp_gateway.upstreams import DEFAULT_TIMEOUT
from tests.conftest import wait_for
from tests.external.conftest import Later, Reviewer, token
from tests.mcp_gateway.conftest import Upstream, call, run


def text(result: Any) -> str:
    return " ".join(c.text for c in result.content)


class ElicitationTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self, files: Upstream, gateway_url: str, users: dict[str, Any], reviewer: Reviewer
    ) -> None:
        self.url = f"{gateway_url}/mcp/files"
        self.reviewer = reviewer
        self.caller = users["operator"]
        self.token = token(self.caller, "runs")

    def call_later(self, tool: str, arguments: dict[str, Any]) -> Later:
        return Later(lambda: call(self.url, self.token, tool, arguments))

    def question(self) -> dict[str, Any]:
        [s] = wait_for(lambda: self.reviewer.pending("files"), timeout=30, what="a question")
        return s

    def resume(self, s: dict[str, Any], decision: dict[str, Any]) -> Any:
        return self.reviewer.http.post(
            f"/api/threads/{s['thread']}/suspensions/{s['id']}/resume", json=decision
        )

    def test_the_reviewers_answer_reaches_the_upstream(self) -> None:
        held = self.call_later("confirm_name", {"suggested": "todo"})
        s = self.question()
        assert (s["kind"], s["tool"], s["agent"]) == ("input", "confirm_name", "files")
        assert s["schema"]["properties"]["name"]["type"] == "string"
        assert s["schema"]["properties"]["overwrite"]["type"] == "boolean"
        assert "Save the note as todo?" in s["prompt"] and self.caller.username in s["prompt"]
        # An answer that does not fit the form is refused while the reviewer can fix it.
        wrong = self.resume(s, {"response": json.dumps({"name": "todo.md"})})
        assert wrong.status_code == 400, wrong.text
        assert "response.overwrite" in wrong.json()["fields"], wrong.text
        answer = {"name": "todo.md", "overwrite": True}
        assert self.resume(s, {"response": json.dumps(answer)}).status_code == 202
        result = held.result()
        assert not result.is_error, text(result)
        assert text(result) == 'accept {"name": "todo.md", "overwrite": true}'
        # The request's own events are its trail: raised, decided, read by the gateway.
        kinds = set(Event.objects.filter(suspension_id=s["id"]).values_list("type", flat=True))
        assert {
            Event.Type.AGENT_SUSPENDED,
            Event.Type.SUSPENSION_DECIDED,
            Event.Type.AGENT_RESUMED,
        } <= kinds
        # Written just after the answer (mcp_gateway.audit).
        [called] = wait_for(
            lambda: list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)),
            what="the call's event",
        )
        assert called.payload["tool"] == "confirm_name" and called.payload["outcome"] == "ok"

    def test_a_rejection_reaches_the_upstream_as_decline(self) -> None:
        held = self.call_later("confirm_name", {"suggested": "todo"})
        s = self.question()
        assert self.resume(s, {"approved": False, "reason": "not now"}).status_code == 202
        assert text(held.result()) == "decline"
        assert Suspension.objects.get(pk=s["id"]).status == Suspension.Status.REJECTED

    def test_a_deadline_with_no_answer_reaches_the_upstream_as_cancel(self) -> None:
        held = self.call_later("confirm_name", {"suggested": "todo"})
        self.question()
        later = timezone.now() + timedelta(seconds=DEFAULT_TIMEOUT + 1)
        assert deadlines.expire_overdue(now=later) == 1
        assert text(held.result()) == "cancel"

    def test_a_question_whose_caller_gives_up_leaves_the_inbox(self) -> None:
        async def give_up() -> None:
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=httpx2.Timeout(30, read=3),
            )
            async with McpClient(streamable_http_client(self.url, http_client=http)) as client:
                await client.call_tool("confirm_name", {"suggested": "todo"})

        with pytest.raises(Exception):  # noqa: B017 - the client's read timeout, however wrapped
            run(give_up())
        s = wait_for(
            lambda: Suspension.objects.exclude(status="pending").first(),
            timeout=30,
            what="the question cancelled",
        )
        assert s.status == Suspension.Status.CANCELLED
        assert Event.objects.filter(
            type=Event.Type.SUSPENSION_CANCELLED, suspension_id=s.pk
        ).exists()

    def test_a_url_question_shows_the_url_and_its_host_and_is_accepted(self) -> None:
        held = self.call_later("sign_in", {})
        s = self.question()
        assert s["kind"] == "input" and s["tool"] == "sign_in"
        assert s["input"] == {
            "url": "https://login.example.com/auth?x=1",
            "host": "login.example.com",
        }
        assert self.resume(s, {"response": "signed in"}).status_code == 202
        assert text(held.result()) == "accept"


class QuestionTestCase:
    """What of the upstream's question is taken, before anything is stored."""

    def test_a_nested_schema_is_refused(self) -> None:
        nested = {"type": "object", "properties": {"a": {"type": "object"}}}
        with pytest.raises(elicitation.Refused):
            elicitation.flat(nested)

    def test_flat_primitives_and_enums_are_taken(self) -> None:
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 40},
                "size": {"type": "integer", "minimum": 1},
                "ratio": {"type": "number"},
                "ok": {"type": "boolean", "default": False},
                "colour": {"type": "string", "enum": ["red", "blue"]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            },
            "required": ["name"],
        }
        assert elicitation.flat(schema) == schema

    def test_the_message_is_bounded(self, users: dict[str, Any]) -> None:
        params = types.ElicitRequestURLParams(
            message="x" * 5000 + "\x1b[31m", url="https://h.example/p", elicitation_id="1"
        )
        asked = elicitation._question(Row(name="files"), users["operator"], "t", params)
        assert len(asked["prompt"]) < elicitation.MAX_MESSAGE + 200
        assert "\x1b" not in asked["prompt"]
        assert asked["arguments"]["host"] == "h.example"


class QuestionCardTestCase:
    """The inbox card of an upstream's question: a form drawn from its schema, escaped."""

    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        self.client = Client()
        self.client.force_login(users["reviewer"])

    def ask(self, params: Any) -> Suspension:
        upstream = Row(name="files", url="http://127.0.0.1:1/mcp")
        asked = elicitation._question(upstream, self.users["operator"], "confirm", params)
        return elicitation.raise_question(upstream, self.users["operator"], "confirm", asked)

    def test_a_form_question_shows_a_field_per_property_and_a_decline(self) -> None:
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "<i>the</i> name"},
                "overwrite": {"type": "boolean"},
                "colour": {"type": "string", "enum": ["red", "blue"]},
                "copies": {"type": "integer", "minimum": 1},
            },
            "required": ["name", "overwrite"],
        }
        s = self.ask(
            types.ElicitRequestFormParams(message="<script>x</script>", requested_schema=schema)
        )
        html = self.client.get("/").content.decode()
        card = html[html.index(f'id="s-{s.pk}"') :].split("</article>")[0]
        assert 'name="field-name"' in card and 'type="text"' in card
        assert 'type="checkbox" id="answer-' in card  # overwrite: required, a checkbox
        assert '<option value="&quot;red&quot;"' in card
        assert 'type="number"' in card and 'min="1"' in card
        assert 'data-action="decline"' in card
        assert 'textarea name="response"' not in card
        assert "<script>x</script>" not in html and "<i>the</i>" not in html

    def test_a_url_question_shows_the_url_as_text(self) -> None:
        s = self.ask(
            types.ElicitRequestURLParams(
                message="sign in", url="https://login.example.com/a", elicitation_id="1"
            )
        )
        card = self.client.get("/").content.decode()
        card = card[card.index(f'id="s-{s.pk}"') :].split("</article>")[0]
        assert "login.example.com" in card and 'href="https://login.example.com' not in card
        assert 'data-action="decline"' in card


class ApprovedCallElicitationTestCase:
    """A gated tool's approved call, made by the worker, passes the upstream's question on too."""

    @pytest.fixture(autouse=True)
    def setup(
        self,
        files: Upstream,
        gateway_url: str,
        users: dict[str, Any],
        reviewer: Reviewer,
        load_agents: Any,
    ) -> None:
        from tests.mcp_gateway.conftest import FILES

        load_agents(
            FILES.format(url=files.url)
            + "    tool_overrides:\n      confirm_name: {execution_mode: blocking}\n"
        )
        self.url = f"{gateway_url}/mcp/files"
        self.reviewer = reviewer
        self.token = token(users["operator"], "runs")

    def test_the_question_asked_during_an_approved_call_is_answered_from_the_inbox(
        self,
    ) -> None:
        arguments = {"suggested": "plan"}
        held = Later(lambda: call(self.url, self.token, "confirm_name", arguments))
        confirmation = self.reviewer.decide("files", {"approved": True})
        assert confirmation["kind"] == "confirmation"
        # The worker calls the upstream, which asks: a question of its own in the inbox.
        [question] = wait_for(
            lambda: [s for s in self.reviewer.pending("files") if s["kind"] == "input"],
            timeout=30,
            what="the upstream's question",
        )
        assert question["tool"] == "confirm_name"
        answer = {"name": "plan.md", "overwrite": False}
        r = self.reviewer.http.post(
            f"/api/threads/{question['thread']}/suspensions/{question['id']}/resume",
            json={"response": json.dumps(answer)},
        )
        assert r.status_code == 202, r.text
        result = held.result()
        for _ in range(5):  # held past MCP_HOLD_SECONDS: the retry attaches and gets it
            if "Call again" not in text(result):
                break
            result = call(self.url, self.token, "confirm_name", arguments)
        assert text(result) == 'accept {"name": "plan.md", "overwrite": false}', text(result)
