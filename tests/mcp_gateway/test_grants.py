"""A standing grant (agents.grants) on an MCP upstream's gated tool: the calls it matches are
approved at once and the upstream is called for them, as for a person's approval."""

from agents.models import Event, Grant, Suspension
from mcp_gateway.models import UpstreamCall
from tests.mcp_gateway.conftest import call
from tests.mcp_gateway.test_proxy import Through, text


class GrantedCallsTestCase(Through):
    def test_a_granted_call_runs_the_upstream_without_waiting(self) -> None:
        held = self.call_later("delete_file", {"path": "/tmp/a"})
        grant = {
            "seconds": 600,
            "max_uses": 1,
            "conditions": [{"arg": "path", "op": "in", "value": ["/tmp/a", "/tmp/b"]}],
        }
        self.reviewer.decide("files", {"approved": True, "grant": grant})
        assert text(held.result()) == "deleted /tmp/a"
        # The next matching call is approved by the grant: no one decides it.
        result = call(self.url, self.token, "delete_file", {"path": "/tmp/b"})
        assert not result.is_error and text(result) == "deleted /tmp/b"
        s = Suspension.objects.get(tool_input={"path": "/tmp/b"})
        assert s.decided_by_name == "grant" and s.policy["grant"]["granted_by"] == "alice"
        assert UpstreamCall.objects.get(suspension=s).state == UpstreamCall.State.DONE
        [used] = Event.objects.filter(type=Event.Type.GRANT_USED)
        assert used.suspension_id == s.pk and used.payload["left"] == 0
        assert Grant.objects.get().uses == 1
        # Spent: the next one waits for a person (the held call gives up, pending).
        waiting = call(self.url, self.token, "delete_file", {"path": "/tmp/a"})
        assert waiting.is_error and "pending" in text(waiting)

    def call_later(self, tool: str, arguments: dict) -> "object":
        from tests.external.conftest import Later

        return Later(lambda: call(self.url, self.token, tool, arguments))
