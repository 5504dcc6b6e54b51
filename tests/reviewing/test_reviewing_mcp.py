"""An MCP server's declaration sets a reviewing model (`policy.review`): its gated calls are
reviewed like an agent's requests, and a tool its tool_overrides mark `irreversible` is kept
from the model unless the setting allows it."""

from types import SimpleNamespace
from typing import Any

import pytest

from agents.agentfiles import AgentFileError
from agents.reviewing import verdicts
from agents.rules import check_policy
from mcp_gateway import actions, upstreams
from mcp_gateway.models import Upstream, UpstreamCall

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
REVIEW = {
    "model": "scripted",
    "mode": "decide",
    "script": [
        {"when": {"arg": "path", "op": "==", "value": "/tmp/a"}, "decision": "approve"},
        {"decision": "escalate", "reason": "Not a scratch file."},
    ],
}


class McpReviewTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.caller = users["operator"]
        self.tool = SimpleNamespace(input_schema=SCHEMA, description="Delete a file.")

    def upstream(self, **overrides: Any) -> Upstream:
        fields = upstreams.check(
            {
                "name": "files",
                "url": "http://127.0.0.1:9/mcp",
                "policy": {"review": REVIEW},
                "tool_overrides": {"delete_file": overrides} if overrides else {},
            },
            "mcp_servers[0]",
        )
        return Upstream.objects.create(**fields)

    def test_its_gated_call_is_decided_by_the_servers_reviewing_model(self) -> None:
        s = actions.attach_or_raise(
            self.upstream(), self.caller, "delete_file", {"path": "/tmp/a"}, self.tool
        )
        assert s.review["outcome"] == "asked"

        verdicts.review(s.pk)

        s.refresh_from_db()
        assert (s.status, s.tier, s.decided_by_name) == ("approved", "model", "model:scripted")
        # Approved: the upstream call waits for a worker to make it, as after a person's.
        assert UpstreamCall.objects.get(suspension=s).state == UpstreamCall.State.WAITING

    def test_an_irreversible_tool_of_the_server_is_kept_from_the_model(self) -> None:
        upstream = self.upstream(irreversible=True)
        s = actions.attach_or_raise(upstream, self.caller, "delete_file", {"path": "/a"}, self.tool)

        assert (s.status, s.review) == ("pending", {})

    def test_a_bad_setting_in_the_declaration_is_refused(self) -> None:
        bad = {"review": {"model": "claude-haiku-4-5", "mode": "x"}}
        with pytest.raises(AgentFileError, match="review.mode"):
            upstreams.check({"name": "files", "url": "http://x/mcp", "policy": bad}, "mcp")
        assert check_policy({"review": None}, "policy") == {"review": None}
