"""A gated MCP call whose server's policy says `step_up: true` (agents.policy): its request
keeps that policy, an approval through the API is refused towards the request's page, where a
passkey is asked for, and a rejection is taken (its call marked not run)."""

from types import SimpleNamespace
from typing import Any

import pytest

from mcp_gateway import actions, runner
from mcp_gateway.models import Upstream, UpstreamCall
from tests.approvals.state import resume_url
from tests.conftest import Api

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


class McpStepUpTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, users: dict[str, Any]) -> None:
        self.users = users
        upstream = Upstream.objects.create(
            name="files", url="http://127.0.0.1:9/mcp", policy={"step_up": True}
        )
        tool = SimpleNamespace(input_schema=SCHEMA, description="Delete a file.")
        self.s = actions.attach_or_raise(
            upstream, users["operator"], "delete_file", {"path": "/a"}, tool
        )

    def test_an_api_approval_is_refused_and_a_rejection_is_taken(self) -> None:
        alice = Api(self.users["reviewer"])
        r = alice.post(resume_url(self.s), {"approved": True})
        assert r.status_code == 403 and r.json()["rule"] == "step_up", r.content
        assert f"/threads/{self.s.thread_id}/#s-{self.s.pk}" in r.json()["detail"]
        assert runner.approved_waiting() == []
        r = alice.post(resume_url(self.s), {"approved": False, "reason": "Keep it."})
        assert r.status_code == 202, r.content
        assert runner.sweep()["not_run"] == 1
        assert UpstreamCall.objects.get(suspension=self.s).state == UpstreamCall.State.NOT_RUN
