"""/mcp with the official MCP client: every upstream's tools as `<server>__<tool>`, each call
going the way the same call on /mcp/<server> goes."""

from typing import Any

import httpx
import pytest
from django.test import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from agents.models import Event, Suspension
from tests.conftest import wait_for
from tests.external.conftest import Later, Reviewer, token
from tests.mcp_gateway.conftest import Upstream, call, list_tools
from tests.mcp_gateway.test_own_tools import call_as


def text(result: Any) -> str:
    return " ".join(c.text for c in result.content)


class CombinedTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self, files: Upstream, gateway_url: str, users: dict[str, Any], reviewer: Reviewer
    ) -> None:
        self.upstream = files
        self.url = f"{gateway_url}/mcp"
        self.reviewer = reviewer
        self.caller = users["operator"]
        self.token = token(self.caller, "runs")

    def test_it_lists_every_upstreams_tools_under_its_name(self) -> None:
        tools = list_tools(self.url, self.token)
        assert [t.name for t in tools] == [
            "files__read_note",
            "files__delete_file",
            "files__confirm_name",
            "files__sign_in",
            "files__choose_name",
        ]
        assert tools[0].annotations.read_only_hint is True
        assert tools[1].input_schema["properties"]["path"]["type"] == "string"

    def test_a_read_only_tool_passes_through(self) -> None:
        result = call(self.url, self.token, "files__read_note", {"name": "todo"})
        assert not result.is_error and text(result) == "note todo: hello"
        assert not Suspension.objects.exists()
        # Written just after the answer (mcp_gateway.audit).
        [event] = wait_for(
            lambda: list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)),
            what="the call's event",
        )
        assert event.payload["agent"] == "files" and event.payload["tool"] == "read_note"

    def test_a_gated_tool_waits_for_a_person_and_runs_once(self) -> None:
        held = Later(
            lambda: call_as(self.url, self.token, "files__delete_file", {"path": "/srv/old"})
        )
        self.reviewer.decide("files", {"approved": True})
        result = held.result()
        assert text(result) == "deleted /srv/old"
        assert [d["path"] for d in self.upstream.deleted()] == ["/srv/old"]
        request = Suspension.objects.get()
        assert request.agent_name == "files" and request.tool_name == "delete_file"
        # The card names the calling client (its clientInfo) and the token.
        assert "client tests-client 9.1, token external-tests" in request.prompt

    def test_a_stateless_call_without_client_info_is_named_by_its_user_agent(
        self, users: dict[str, Any]
    ) -> None:
        # A 2025-revision client sends clientInfo in an initialize of its own: the stateless
        # gateway's tools/call does not see it, and names the client by its User-Agent.
        held = Later(
            lambda: call_as(
                self.url,
                self.token,
                "files__delete_file",
                {"path": "/a"},
                mode="legacy",
                **{"User-Agent": "curl/8 <b>\x07"},
            )
        )
        self.reviewer.decide("files", {"approved": False})
        assert held.result().is_error
        request = Suspension.objects.get()
        assert "(client curl/8 <b>, token external-tests)" in request.prompt
        # The client's text is escaped where the card shows it.
        page = Client()
        page.force_login(users["reviewer"])
        html = page.get(f"/threads/{request.thread_id}/").content.decode()
        assert "curl/8 &lt;b&gt;, token external-tests" in html and "curl/8 <b>" not in html


class CombinedBadInputTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, files: Upstream, gateway_url: str, users: dict[str, Any]) -> None:
        self.upstream = files
        self.gateway = gateway_url
        self.url = f"{gateway_url}/mcp"
        self.token = token(users["operator"], "runs")

    def assert_nothing_happened(self) -> None:
        assert not Suspension.objects.exists()
        assert self.upstream.deleted() == []

    @pytest.mark.parametrize(
        "name", ["files__format_disk", "nope__delete_file", "delete_file", "files__"]
    )
    def test_an_unknown_tool_is_refused(self, name: str) -> None:
        with pytest.raises(MCPError, match=f"Unknown tool: {name}") as refused:
            call(self.url, self.token, name, {"path": "/"})
        assert refused.value.code == INVALID_PARAMS
        self.assert_nothing_happened()

    def test_arguments_the_tool_refuses_raise_nothing(self) -> None:
        with pytest.raises(MCPError, match="files__delete_file: .*'path' is a required") as refused:
            call(self.url, self.token, "files__delete_file", {})
        assert refused.value.code == INVALID_PARAMS
        self.assert_nothing_happened()

    def test_a_foreign_origin_is_403_and_calls_nothing(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "files__delete_file", "arguments": {"path": "/"}},
        }
        r = httpx.post(
            self.url,
            json=body,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Origin": "https://attacker.example",
                "Accept": "application/json, text/event-stream",
            },
            timeout=30,
        )
        assert r.status_code == 403 and r.json()["error"]["code"] == -31403
        self.assert_nothing_happened()

    def test_no_token_is_401(self) -> None:
        r = httpx.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401
