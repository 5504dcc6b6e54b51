"""/mcp/gateway with the official MCP client: request_approval and ask_human raise requests
in the inbox, as POST /api/requests does, and answer once a person has decided."""

from datetime import timedelta
from typing import Any

import httpx
import httpx2
import pytest
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Implementation

from agents import deadlines, receipt_keys, receipts
from agents.agentfiles import AgentFileError
from agents.hashing import canonical_hash
from agents.models import Suspension
from mcp_gateway import upstreams
from tests.conftest import wait_for
from tests.external.conftest import Later, Reviewer, token
from tests.mcp_gateway.conftest import call, list_tools, run

CLIENT = Implementation(name="tests-client", version="9.1")


def text(result: Any) -> str:
    return " ".join(c.text for c in result.content)


def call_as(
    url: str, raw: str, tool: str, arguments: dict[str, Any], mode: Any = "auto", **headers: str
) -> Any:
    """A tools/call from a client that names itself (clientInfo) and may send more headers;
    `mode` "legacy" speaks the 2025 revisions (an initialize of its own, then the call)."""

    async def go() -> Any:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {raw}", **headers},
            timeout=httpx2.Timeout(30, read=120),
        )
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, client_info=CLIENT, mode=mode) as client:
            return await client.call_tool(tool, arguments)

    return run(go())


class OwnToolsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway_url: str, users: dict[str, Any], reviewer: Reviewer) -> None:
        self.url = f"{gateway_url}/mcp/gateway"
        self.reviewer = reviewer
        self.caller = users["operator"]
        self.token = token(self.caller, "runs")

    def later(self, tool: str, arguments: dict[str, Any]) -> Later:
        return Later(lambda: call_as(self.url, self.token, tool, arguments))

    def test_it_offers_request_approval_and_ask_human(self) -> None:
        tools = list_tools(self.url, self.token)
        assert [t.name for t in tools] == ["request_approval", "ask_human"]
        assert tools[0].input_schema["required"] == ["action", "arguments"]

    def test_an_approval_with_an_edit_returns_the_edited_arguments(self) -> None:
        held = self.later(
            "request_approval",
            {
                "action": "send_email",
                "arguments": {"to": "all@example.com"},
                "schema": {"type": "object", "properties": {"to": {"type": "string"}}},
                "prompt": "Mail everyone?",
            },
        )
        # The token's name is the agent when the call names none.
        s = self.reviewer.decide(
            "external-tests", {"approved": True, "modifiedArgs": {"to": "team@example.com"}}
        )
        result = held.result()
        assert not result.is_error, text(result)
        assert result.structured_content["approved"] is True
        assert result.structured_content["arguments"] == {"to": "team@example.com"}
        assert result.structured_content["request"] == s["id"]
        request = Suspension.objects.get()
        # The decision's signed receipt in the answer's _meta (agents.receipts).
        receipt = result.meta["io.github.approval-gateway/receipt"]
        assert receipt == request.receipt
        claims = receipts.verify(receipt, receipt_keys.jwks())
        assert claims["args_hash"] == canonical_hash({"to": "team@example.com"})
        assert request.kind == "confirmation" and request.tool_name == "send_email"
        assert request.prompt == "Mail everyone?"
        assert request.thread.created_by == self.caller
        # The card names the calling client and the token.
        shown = request.presentation["description"]
        assert "tests-client 9.1" in shown and "token external-tests" in shown

    def test_a_rejection_is_an_error_with_who_and_why(self) -> None:
        held = self.later("request_approval", {"action": "drop_table", "arguments": {}})
        self.reviewer.decide("external-tests", {"approved": False, "reason": "not today"})
        result = held.result()
        assert result.is_error
        assert "alice" in text(result) and "not today" in text(result)

    def test_the_agent_argument_names_the_asker(self) -> None:
        held = self.later(
            "request_approval", {"action": "deploy", "arguments": {}, "agent": "release-bot"}
        )
        self.reviewer.decide("release-bot", {"approved": True})
        assert held.result().structured_content["approved"] is True
        assert Suspension.objects.get().agent_name == "release-bot"

    def test_ask_human_returns_the_answer(self) -> None:
        held = self.later(
            "ask_human",
            {"question": "Which colour?", "schema": {"type": "object", "required": ["c"]}},
        )
        self.reviewer.decide("external-tests", {"response": '{"c": "blue"}'})
        result = held.result()
        assert not result.is_error, text(result)
        assert result.structured_content["answer"] == '{"c": "blue"}'
        assert result.structured_content["content"] == {"c": "blue"}
        request = Suspension.objects.get()
        assert request.kind == "input" and request.prompt == "Which colour?"

    def test_a_deadline_rejects(self) -> None:
        held = self.later("request_approval", {"action": "wipe", "arguments": {}, "timeout": 5})
        wait_for(lambda: Suspension.objects.exists(), what="the request")
        assert deadlines.expire_overdue(now=timezone.now() + timedelta(seconds=6)) == 1
        result = held.result()
        assert result.is_error and "timed_out by the deadline" in text(result)
        assert result.meta["status"] == "timed_out"

    def test_a_held_call_gives_up_and_its_retry_attaches_to_the_same_request(self) -> None:
        arguments = {"action": "reboot", "arguments": {"host": "db1"}}
        first = call(self.url, self.token, "request_approval", arguments)
        assert first.is_error and "pending" in text(first)
        [s] = Suspension.objects.all()
        assert str(s.pk) in text(first) and first.meta["request"] == str(s.pk)
        retry = self.later("request_approval", arguments)
        self.reviewer.decide("external-tests", {"approved": True})
        assert retry.result().structured_content["arguments"] == {"host": "db1"}
        assert Suspension.objects.count() == 1
        # Answered: the same call again asks again.
        again = self.later("request_approval", arguments)
        wait_for(lambda: Suspension.objects.count() == 2, what="a second request")
        self.reviewer.decide("external-tests", {"approved": False, "reason": "once"})
        assert again.result().is_error


class OwnToolsBadInputTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway_url: str, users: dict[str, Any]) -> None:
        self.gateway = gateway_url
        self.url = f"{gateway_url}/mcp/gateway"
        self.token = token(users["operator"], "runs")

    def refused(self, tool: str, arguments: dict[str, Any], match: str, **headers: str) -> None:
        """The call is answered with an MCP error (so it reached the tool) and raises nothing."""
        with pytest.raises(MCPError, match=match) as refused:
            call_as(self.url, self.token, tool, arguments, **headers)
        assert refused.value.code == INVALID_PARAMS
        assert not Suspension.objects.exists()

    def test_missing_arguments_are_refused(self) -> None:
        self.refused("request_approval", {"action": "x"}, "'arguments' is a required property")
        self.refused("ask_human", {}, "'question' is a required property")

    def test_arguments_the_request_would_refuse_are_refused(self) -> None:
        self.refused("request_approval", {"action": "two words", "arguments": {}}, "tool")
        self.refused(
            "request_approval",
            {
                "action": "pay",
                "arguments": {"n": "x"},
                "schema": {"properties": {"n": {"type": "integer"}}},
            },
            "arguments",
        )
        self.refused("ask_human", {"question": "?", "timeout": 10**9}, "timeout")
        self.refused("ask_human", {"question": "?", "schema": {"type": 5}}, "ask_human")

    def test_an_unknown_tool_is_refused(self) -> None:
        self.refused("delete_file", {}, "Unknown tool: delete_file")

    def post(self, headers: dict[str, str]) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        return httpx.post(
            self.url,
            json=body,
            headers={"Authorization": f"Bearer {self.token}", **headers},
            timeout=30,
        )

    def test_a_foreign_origin_is_403(self) -> None:
        r = self.post({"Origin": "http://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == -31403
        assert "Origin" in r.json()["error"]["message"]
        assert "WWW-Authenticate" not in r.headers

    def test_a_host_the_gateway_does_not_serve_is_403(self) -> None:
        r = self.post({"Host": "evil.example"})
        assert r.status_code == 403 and "Host" in r.json()["error"]["message"]

    def test_the_sites_own_origin_passes(self, settings: Any) -> None:
        [origin, *_] = settings.MCP_ALLOWED_ORIGINS
        self.refused("ask_human", {"question": ""}, "question", Origin=origin)

    def test_upstreams_may_not_take_the_gateways_names(self) -> None:
        url = "http://127.0.0.1:1/mcp"
        with pytest.raises(AgentFileError, match="'gateway' is taken"):
            upstreams.check({"name": "gateway", "url": url}, "f.yaml")
        with pytest.raises(AgentFileError, match="may not hold '__'"):
            upstreams.check({"name": "a__b", "url": url}, "f.yaml")
