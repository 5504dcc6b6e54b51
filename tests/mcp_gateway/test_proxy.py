"""/mcp/<name> with the official MCP client: tools pass through, gated calls wait for a
person, and the upstream runs once per approval."""

import os
import signal
import time
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from agents.models import Event, Suspension
from mcp_gateway.models import UpstreamCall
from tests.conftest import wait_for
from tests.external.conftest import Later, Reviewer, token
from tests.mcp_gateway.conftest import FILES, Upstream, call, list_tools, run


def request_id(s: dict[str, Any]) -> Any:
    return Suspension.objects.get(pk=s["id"]).pk


def text(result: Any) -> str:
    return " ".join(c.text for c in result.content)


class Through:
    """A test of calls through /mcp/files by the operator, decided by a reviewer over REST."""

    ENDPOINT = "/mcp/files"

    @pytest.fixture(autouse=True)
    def setup(
        self, files: Upstream, gateway_url: str, users: dict[str, Any], reviewer: Reviewer
    ) -> None:
        self.upstream = files
        self.url = f"{gateway_url}{self.ENDPOINT}"
        self.reviewer = reviewer
        self.caller = users["operator"]
        self.token = token(self.caller, "runs")


class ProxyTestCase(Through):
    def call_later(self, tool: str, arguments: dict[str, Any]) -> Later:
        return Later(lambda: call(self.url, self.token, tool, arguments))

    def test_it_lists_the_upstreams_tools_in_order_with_their_annotations(self) -> None:
        tools = list_tools(self.url, self.token)
        assert [t.name for t in tools] == [
            "read_note",
            "delete_file",
            "confirm_name",
            "sign_in",
            "choose_name",
        ]
        assert tools[0].annotations.read_only_hint is True
        assert tools[1].annotations.destructive_hint is True

    def test_a_read_only_tool_passes_through_and_is_audited(self) -> None:
        result = call(self.url, self.token, "read_note", {"name": "todo"})
        assert not result.is_error and text(result) == "note todo: hello"
        assert not Suspension.objects.exists()
        # Written just after the answer (mcp_gateway.audit).
        [event] = wait_for(
            lambda: list(Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)),
            what="the call's event",
        )
        assert event.actor_id == self.caller.pk
        assert event.payload["tool"] == "read_note" and event.payload["outcome"] == "ok"
        assert event.payload["args_hash"] and event.payload["duration_ms"] >= 0

    def test_an_approval_with_an_edit_runs_the_upstream_once_with_the_edit(self) -> None:
        held = self.call_later("delete_file", {"path": "/etc/passwd"})
        s = self.reviewer.decide(
            "files", {"approved": True, "modifiedArgs": {"path": "/tmp/scratch"}}
        )
        result = held.result()
        assert not result.is_error, text(result)
        assert text(result) == "deleted /tmp/scratch"
        [done] = self.upstream.deleted()
        assert done["path"] == "/tmp/scratch"
        # The headers' ${ENV} came from the gateway's environment; the request id rode _meta.
        assert done["authorization"] == "Bearer upstream-secret"
        assert done["meta"]["io.github.approval-gateway/idempotency-key"] == s["id"]
        assert UpstreamCall.objects.get().state == UpstreamCall.State.DONE
        [event] = Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)
        assert event.suspension_id == request_id(s) and event.payload["gated"] is True
        assert event.actor_id == self.caller.pk and event.payload["outcome"] == "ok"
        request = Suspension.objects.get()
        assert request.agent_name == "files" and request.tool_name == "delete_file"
        # One thread per caller and upstream, named so on its page.
        assert request.thread.title == f"{self.caller.username}'s MCP calls to files"
        assert request.tool_schema["properties"]["path"]["type"] == "string"

    def test_a_rejection_reaches_the_client_and_the_upstream_never_runs(self) -> None:
        held = self.call_later("delete_file", {"path": "/srv"})
        self.reviewer.decide("files", {"approved": False, "reason": "not that one"})
        result = held.result()
        assert result.is_error
        assert "not that one" in text(result) and "alice" in text(result)
        assert self.upstream.deleted() == []
        # The sweep says so of its call: not run.
        wait_for(
            lambda: UpstreamCall.objects.get().state == UpstreamCall.State.NOT_RUN,
            what="the call marked not run",
        )

    def test_a_held_call_gives_up_and_its_retry_attaches_to_the_same_request(self) -> None:
        first = call(self.url, self.token, "delete_file", {"path": "/var/log"})
        assert first.is_error and "pending" in text(first)
        [s] = Suspension.objects.all()
        assert str(s.pk) in text(first)
        retry = self.call_later("delete_file", {"path": "/var/log"})
        self.reviewer.decide("files", {"approved": True})
        result = retry.result()
        assert text(result) == "deleted /var/log"
        assert Suspension.objects.count() == 1
        assert len(self.upstream.deleted()) == 1
        # Answered: the same call again is a new request, not the old approval spent twice.
        again = self.call_later("delete_file", {"path": "/var/log"})
        wait_for(lambda: Suspension.objects.count() == 2, what="a second request")
        self.reviewer.decide("files", {"approved": False, "reason": "once is enough"})
        assert again.result().is_error
        assert len(self.upstream.deleted()) == 1


class BadInputTestCase:
    @pytest.fixture(autouse=True)
    def setup(self, files: Upstream, gateway_url: str, users: dict[str, Any]) -> None:
        self.upstream = files
        self.gateway = gateway_url
        self.url = f"{gateway_url}/mcp/files"
        self.token = token(users["operator"], "runs")

    def post(self, path: str, body: Any, raw_token: str | None = None) -> httpx.Response:
        headers = {"Accept": "application/json, text/event-stream"}
        if raw_token is not None:
            headers["Authorization"] = f"Bearer {raw_token}"
        data = body if isinstance(body, str) else None
        return httpx.post(
            f"{self.gateway}{path}",
            content=data,
            json=None if data is not None else body,
            headers={**headers, "Content-Type": "application/json"},
            timeout=30,
        )

    def assert_nothing_happened(self) -> None:
        assert not Suspension.objects.exists()
        assert self.upstream.deleted() == []

    def test_no_token_is_401(self) -> None:
        r = self.post("/mcp/files", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401 and r.json()["error"]["code"] == -31401
        assert r.headers["WWW-Authenticate"].startswith("Bearer")

    def test_a_token_without_the_scope_is_403(self, users: dict[str, Any]) -> None:
        raw = token(users["reviewer"], "decide")
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "delete_file", "arguments": {"path": "/"}},
        }
        r = self.post("/mcp/files", body, raw)
        assert r.status_code == 403 and r.json()["error"]["data"]["scope"] == "runs"
        self.assert_nothing_happened()

    def test_an_unknown_upstream_is_404(self) -> None:
        r = self.post("/mcp/nope", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, self.token)
        assert r.status_code == 404 and "nope" in r.json()["error"]["message"]

    def test_a_caller_outside_the_upstreams_callers_is_refused(
        self, load_agents: Any, users: dict[str, Any]
    ) -> None:
        from django.contrib.auth.models import Group

        load_agents(FILES.format(url=self.upstream.url) + "    callers: [ops]\n")
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "delete_file", "arguments": {"path": "/"}},
        }
        r = self.post("/mcp/files", body, self.token)
        assert r.status_code == 403
        assert r.json()["error"]["message"] == (
            "Only members of group ops may call the tools of files."
        )
        # /mcp neither lists its tools nor calls them.
        assert list_tools(f"{self.gateway}/mcp", self.token) == []
        for tool, arguments in (("delete_file", {"path": "/"}), ("read_note", {"name": "x"})):
            with pytest.raises(MCPError, match="Only members of group ops"):
                call(f"{self.gateway}/mcp", self.token, f"files__{tool}", arguments)
        self.assert_nothing_happened()
        # A member of the group may.
        users["operator"].groups.add(Group.objects.get_or_create(name="ops")[0])
        assert [t.name for t in list_tools(f"{self.gateway}/mcp", self.token)][0] == (
            "files__read_note"
        )
        result = call(self.url, self.token, "read_note", {"name": "x"})
        assert text(result) == "note x: hello"

    def test_a_malformed_body_is_a_parse_error(self) -> None:
        r = self.post("/mcp/files", '{"jsonrpc": "2.0", "id": 1, "meth', self.token)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        self.assert_nothing_happened()

    def test_an_unknown_tool_is_an_error_and_raises_nothing(self) -> None:
        with pytest.raises(MCPError, match="Unknown tool: format_disk") as refused:
            call(self.url, self.token, "format_disk", {})
        assert refused.value.code == INVALID_PARAMS
        self.assert_nothing_happened()

    def test_arguments_the_tool_refuses_raise_nothing(self) -> None:
        with pytest.raises(MCPError, match="Invalid arguments for delete_file: path") as refused:
            call(self.url, self.token, "delete_file", {"path": 5})
        assert refused.value.code == INVALID_PARAMS
        self.assert_nothing_happened()


class WorkerTestCase(Through):
    """The approved call is made by a Celery worker (mcp_gateway.runner), durably."""

    def answer(self, held: Later, arguments: dict[str, Any]) -> Any:
        """The held call's result, retried (attaching to the same request) while it says the
        request or its upstream call is still under way."""
        result = held.result()
        for _ in range(5):
            if "Call again" not in text(result):
                return result
            result = call(self.url, self.token, "delete_file", arguments)
        return result

    def test_a_worker_killed_during_the_upstream_call_leads_to_one_call_not_two(self) -> None:
        arguments = {"path": "/slow/archive"}
        held = Later(lambda: call(self.url, self.token, "delete_file", arguments))
        self.reviewer.decide("files", {"approved": True})
        wait_for(self.upstream.deleted, what="the upstream call to start")
        claimed = UpstreamCall.objects.get()
        assert claimed.state == UpstreamCall.State.CLAIMED
        # The process making the call (the worker's child) dies at once, mid-call.
        os.kill(int(claimed.worker.rsplit(":", 1)[1]), signal.SIGKILL)
        result = self.answer(held, arguments)
        assert result.is_error and "Interrupted" in text(result), text(result)
        assert "may have run it" in text(result)
        # The message comes back to a worker (acks_late): the claim keeps it from calling again.
        time.sleep(2)
        assert len(self.upstream.deleted()) == 1
        [event] = Event.objects.filter(type=Event.Type.MCP_TOOL_CALLED)
        assert event.payload["outcome"] == "interrupted"
        assert Suspension.objects.count() == 1

    def test_a_workers_next_approved_call_uses_the_session_its_last_one_opened(self) -> None:
        # Three approvals one after another, by a worker of two processes: one of them makes
        # two calls at least, and its second is made on the session its first opened (the
        # worker's lasting loop, infra.aio.process_loop), not after a handshake of its own.
        # A call held past MCP_HOLD_SECONDS (15 s here, tests.conftest.LIVE_ENV; a worker's
        # first call loads the MCP client, slow on a loaded machine) is called again, as its
        # answer says, and gets the same result.
        for n in range(3):
            arguments = {"path": f"/r{n}"}
            held = Later(
                lambda arguments=arguments: call(self.url, self.token, "delete_file", arguments)
            )
            self.reviewer.decide("files", {"approved": True})
            assert text(self.answer(held, arguments)) == f"deleted /r{n}"
        sessions = {line["path"]: line["session"] for line in self.upstream.deleted()}
        by_worker: dict[str, list[str]] = {}
        for made in UpstreamCall.objects.select_related("suspension"):
            path = made.suspension.tool_input["path"]
            by_worker.setdefault(made.worker, []).append(sessions[path])
        assert any(len(used) >= 2 for used in by_worker.values()), by_worker
        assert all(len(set(used)) == 1 for used in by_worker.values()), by_worker

    def test_a_deadline_rejects_and_the_upstream_never_runs(self, load_agents: Any) -> None:
        load_agents(
            FILES.format(url=self.upstream.url)
            + "    tool_overrides:\n      delete_file: {timeout: 2, on_timeout: reject}\n"
        )
        result = call(self.url, self.token, "delete_file", {"path": "/srv/old"})
        assert result.is_error and "the deadline" in text(result), text(result)
        [s] = Suspension.objects.all()
        assert s.status == Suspension.Status.TIMED_OUT
        assert self.upstream.deleted() == []


class ProgressTestCase(Through):
    """A held call whose client asked for progress is told who must decide, while it waits."""

    def test_a_held_call_reports_progress_then_returns_the_result(self) -> None:
        told: list[tuple[float, str | None]] = []

        async def go() -> Any:
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=httpx2.Timeout(30, read=120),
            )
            async with Client(streamable_http_client(self.url, http_client=http)) as client:

                async def progress(done: float, total: float | None, message: str | None) -> None:
                    told.append((done, message))

                return await client.call_tool(
                    "delete_file", {"path": "/tmp/p"}, progress_callback=progress
                )

        held = Later(lambda: run(go()))
        wait_for(lambda: told, what="a progress notification")
        s = Suspension.objects.get()
        assert told[0][1] is not None and told[0][1].startswith("Waiting for a reviewer")
        assert str(s.pk) in told[0][1]
        self.reviewer.decide("files", {"approved": True})
        result = held.result()
        assert text(result) == "deleted /tmp/p", text(result)
        assert len(self.upstream.deleted()) == 1
