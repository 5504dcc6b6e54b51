"""The writes of a gated MCP call (mcp_gateway.actions): one request per call and retry, one
upstream call per approval."""

from types import SimpleNamespace
from typing import Any

import pytest

from mcp_gateway import actions
from mcp_gateway.models import Upstream, UpstreamCall

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


class ActionsTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.caller = users["operator"]
        self.upstream = Upstream.objects.create(name="files", url="http://127.0.0.1:9/mcp")
        self.tool = SimpleNamespace(input_schema=SCHEMA, description="Delete a file.")

    def raise_(self, arguments: dict[str, Any]) -> Any:
        return actions.attach_or_raise(
            self.upstream, self.caller, "delete_file", arguments, self.tool
        )

    def test_the_same_call_again_attaches_to_its_pending_request(self) -> None:
        first = self.raise_({"path": "/a"})
        assert self.raise_({"path": "/a"}).pk == first.pk
        assert self.raise_({"path": "/b"}).pk != first.pk

    def test_an_approval_is_claimed_once(self) -> None:
        s = self.raise_({"path": "/a"})
        call, mine = actions.claim(s, {"path": "/a"})
        again, theirs = actions.claim(s, {"path": "/a"})
        assert mine and not theirs and again.pk == call.pk
        assert UpstreamCall.objects.count() == 1
        assert actions.done_result(call.pk) is None
        actions.finish(call, self.caller, {"content": [], "isError": False}, 0.01)
        assert actions.done_result(call.pk) == {"content": [], "isError": False}
