"""An upstream declared with `command:` is spoken to over stdio, a process per call
(mcp_gateway.forward), behind the same endpoint and rules as a streamable HTTP one."""

import os
import sys
from typing import Any

import pytest

from agents.models import Event, Suspension
from mcp_gateway.models import Upstream
from tests.conftest import wait_for
from tests.external.conftest import token
from tests.mcp_gateway.conftest import call, list_tools

# Read by the live daphne, started after collection with this process's environment: the
# `${...}` the upstream's `env:` names.
os.environ["MCP_TEST_STDIO_SIGNATURE"] = "signed by the environment"

# sys.executable rather than `python`: the command runs with only a minimal environment
# (the SDK's default: PATH, HOME and the like), and the venv's python need not be on PATH.
LOCAL = f"""
mcp_servers:
  - name: local-files
    command: [{sys.executable}, -m, tests.mcp_gateway.stdio_upstream]
    env: {{STDIO_NOTE_SIGNATURE: "${{MCP_TEST_STDIO_SIGNATURE}}"}}
    trust_annotations: true
"""


def text(result: Any) -> str:
    return " ".join(c.text for c in result.content)


class StdioTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, gateway_url: str, users: dict[str, Any], load_agents: Any) -> None:
        load_agents(LOCAL)
        self.url = f"{gateway_url}/mcp/local-files"
        self.caller = users["operator"]
        self.token = token(self.caller, "runs")

    def test_it_lists_the_stdio_servers_tools_in_order(self) -> None:
        tools = list_tools(self.url, self.token)
        assert [t.name for t in tools] == ["read_note", "delete_file"]
        assert tools[0].annotations.read_only_hint is True

    def test_a_read_only_tool_passes_through_with_the_declared_environment(self) -> None:
        stored = Upstream.objects.get(name="local-files")
        assert stored.url == "" and stored.command[1:] == ["-m", "tests.mcp_gateway.stdio_upstream"]
        # Kept as written: the secret is read from the gateway's environment at call time.
        assert stored.env == {"STDIO_NOTE_SIGNATURE": "${MCP_TEST_STDIO_SIGNATURE}"}
        result = call(self.url, self.token, "read_note", {"name": "todo"})
        assert not result.is_error, text(result)
        assert text(result) == "note todo: hello from stdio, signed by the environment"
        assert not Suspension.objects.exists()
        # Written just after the answer (mcp_gateway.audit).
        [event] = wait_for(
            lambda: list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)),
            what="the call's event",
        )
        assert event.actor_id == self.caller.pk and event.payload["outcome"] == "ok"
