"""An agent file's `slack:` field: stored as the agent's route, refused with a message naming
the field, and dropped when the file no longer says it."""

from typing import Any

import mcp_types as types
import pytest

from agents.agentfiles import AgentFileError
from agents.models import AgentDefinition
from mcp_gateway.actions import attach_or_raise
from mcp_gateway.models import Upstream
from slack_approvals.models import SlackRoute
from tests.slack_approvals.conftest import agent_file, deliver, raise_request


class RouteTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any], load_agents: Any) -> None:
        self.load = load_agents

    def test_it_stores_the_channel_and_the_people_to_message(self) -> None:
        self.load(agent_file(dm=", dm: [alice, reviewers]"))
        route = SlackRoute.objects.get(agent="payer")
        assert (route.channel, route.dm) == ("C0PAYMENTS", ["alice", "reviewers"])
        assert route.source.endswith(".yaml")
        # The field is the app's: the agent's own row is loaded as ever, without it.
        assert AgentDefinition.objects.get(name="payer").tools == ["transfer_funds"]

    def test_a_file_without_the_field_drops_the_route(self) -> None:
        self.load(agent_file())
        self.load(agent_file().replace("    slack: {channel: C0PAYMENTS}\n", ""))
        assert not SlackRoute.objects.exists()

    @pytest.mark.parametrize(
        ("value", "words"),
        [
            ("{channel: general}", "slack.channel: 'general' is not a Slack channel id"),
            ("{dm: alice}", "slack.dm: expected a list of user or group names"),
            ("{chanel: C0PAYMENTS}", "slack: unknown field(s) ['chanel']"),
            ("C0PAYMENTS", "slack: expected a mapping with 'channel' and/or 'dm'"),
            ("{dm: []}", "slack: expected a 'channel' or a 'dm' list"),
        ],
    )
    def test_a_bad_value_fails_the_load_naming_the_field(self, value: str, words: str) -> None:
        text = agent_file().replace("{channel: C0PAYMENTS}", value)
        with pytest.raises(AgentFileError) as e:
            self.load(text)
        assert "agent 'payer': " + words in str(e.value)
        # All or nothing: the agent itself was not loaded either.
        assert not AgentDefinition.objects.filter(name="payer").exists()


FILES = """
mcp_servers:
  - name: files
    url: http://127.0.0.1:9/mcp
    slack: {channel: C0FILES}
"""


class McpServerRouteTestCase:
    """An MCP server's `slack:` field routes the requests its gated calls raise, as an agent's
    does: they hang on an agent of the server's name."""

    def test_a_gated_calls_request_is_posted_to_the_servers_channel(
        self, users: dict[str, Any], load_agents: Any, slack: Any
    ) -> None:
        load_agents(FILES)
        route = SlackRoute.objects.get(agent="files")
        assert (route.channel, route.dm) == ("C0FILES", [])
        upstream = Upstream.objects.get(name="files")  # the MCP side loaded it, field and all
        tool = types.Tool(name="delete_file", description="Delete a file.", inputSchema={})
        s = attach_or_raise(upstream, users["operator"], "delete_file", {"path": "/x"}, tool)
        deliver()
        [posted] = slack.called("chat.postMessage")
        assert posted.body["channel"] == "C0FILES"
        assert str(s.pk) in str(posted.body["blocks"])

        load_agents(FILES.replace("    slack: {channel: C0FILES}\n", ""))
        assert not SlackRoute.objects.filter(agent="files").exists()


class ToolRouteTestCase:
    """`slack:` under tool_overrides: that tool's requests go there instead of the agent's
    route; for an agent and for an MCP server."""

    def test_a_tools_route_takes_its_requests(
        self, users: dict[str, Any], load_agents: Any, slack: Any
    ) -> None:
        load_agents(
            agent_file().replace(
                "    slack: {channel: C0PAYMENTS}\n",
                "    slack: {channel: C0PAYMENTS}\n"
                "    tool_overrides:\n"
                "      transfer_funds: {timeout: 900, slack: {channel: C0TREASURY}}\n",
            )
        )
        route = SlackRoute.objects.get(agent="payer")
        assert route.tools == {"transfer_funds": {"channel": "C0TREASURY", "dm": []}}
        # The agent's own override is loaded as ever, without the field.
        assert AgentDefinition.objects.get(name="payer").tool_overrides == {
            "transfer_funds": {"timeout": 900}
        }
        raise_request()
        deliver()
        [posted] = slack.called("chat.postMessage")
        assert posted.body["channel"] == "C0TREASURY"

    def test_an_mcp_servers_tool_route_alone_makes_a_route(
        self, users: dict[str, Any], load_agents: Any, slack: Any
    ) -> None:
        load_agents(
            FILES.replace(
                "    slack: {channel: C0FILES}\n",
                "    tool_overrides:\n      delete_file: {slack: {channel: C0DELETES}}\n",
            )
        )
        assert Upstream.objects.get(name="files").tool_overrides == {"delete_file": {}}
        route = SlackRoute.objects.get(agent="files")
        assert (route.channel, route.tools) == (
            "",
            {"delete_file": {"channel": "C0DELETES", "dm": []}},
        )
        tool = types.Tool(name="delete_file", description="Delete a file.", inputSchema={})
        attach_or_raise(
            Upstream.objects.get(name="files"),
            users["operator"],
            "delete_file",
            {"path": "/x"},
            tool,
        )
        other = types.Tool(name="read_note", description="Read.", inputSchema={})
        attach_or_raise(
            Upstream.objects.get(name="files"), users["operator"], "read_note", {"name": "n"}, other
        )
        deliver()
        # Only the routed tool's request is posted: the server itself has no route.
        assert [c.body["channel"] for c in slack.called("chat.postMessage")] == ["C0DELETES"]

    def test_a_bad_tool_route_fails_the_load_naming_the_field(
        self, users: dict[str, Any], load_agents: Any
    ) -> None:
        with pytest.raises(
            AgentFileError, match=r"tool_overrides.transfer_funds.slack.channel: 'x'"
        ):
            load_agents(
                agent_file().replace(
                    "    slack: {channel: C0PAYMENTS}\n",
                    "    tool_overrides:\n      transfer_funds: {slack: {channel: x}}\n",
                )
            )
