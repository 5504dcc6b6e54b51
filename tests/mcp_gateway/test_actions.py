"""The writes of a gated MCP call (mcp_gateway.actions, mcp_gateway.runner): one request per
call and retry, one upstream call per approval, and a dead worker's call never made again."""

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone

from agents import decisions
from agents.models import Event
from mcp_gateway import actions, runner
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

    def decide(self, s: Any, approved: bool, reviewer: Any) -> Any:
        decisions.decide(s, reviewer, {"approved": approved, "reason": "" if approved else "no"})
        return actions.reread(s.pk)

    def test_a_request_is_raised_with_its_upstream_call_waiting(self) -> None:
        s = self.raise_({"path": "/a"})
        call = UpstreamCall.objects.get(suspension=s)
        assert call.state == UpstreamCall.State.WAITING
        # Not approved yet: no worker may claim it.
        assert not runner.claim(s.pk, {"path": "/a"}, "w1")

    def test_an_approval_is_claimed_once(self, users: dict[str, Any]) -> None:
        s = self.decide(self.raise_({"path": "/a"}), True, users["reviewer"])
        assert runner.approved_waiting() == [s.pk]
        assert runner.claim(s.pk, {"path": "/a"}, "w1")
        assert not runner.claim(s.pk, {"path": "/a"}, "w2")
        call = UpstreamCall.objects.get(suspension=s)
        assert call.state == UpstreamCall.State.CLAIMED and call.worker == "w1"
        assert runner.approved_waiting() == []
        assert actions.done_result(s) is None

    def test_a_claim_whose_lease_ran_out_is_interrupted_never_called_again(
        self, users: dict[str, Any]
    ) -> None:
        s = self.decide(self.raise_({"path": "/a"}), True, users["reviewer"])
        assert runner.claim(s.pk, {"path": "/a"}, "w1")
        # A live lease is left alone.
        assert runner.sweep()["interrupted"] == 0
        UpstreamCall.objects.update(lease_until=timezone.now() - timedelta(seconds=1))
        assert runner.sweep()["interrupted"] == 1
        result = actions.done_result(s)
        assert result["isError"] and "Interrupted" in result["content"][0]["text"]
        [event] = Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)
        assert event.payload["outcome"] == "interrupted" and event.suspension_id == s.pk
        # Done: nothing claims it again, and a second sweep changes nothing.
        assert not runner.claim(s.pk, {"path": "/a"}, "w2")
        assert runner.sweep() == {"sent": 0, "interrupted": 0, "not_run": 0}

    def test_a_rejected_request_is_marked_not_run(self, users: dict[str, Any]) -> None:
        s = self.decide(self.raise_({"path": "/a"}), False, users["reviewer"])
        assert runner.sweep()["not_run"] == 1
        assert UpstreamCall.objects.get(suspension=s).state == UpstreamCall.State.NOT_RUN
        assert not runner.claim(s.pk, {"path": "/a"}, "w1")
