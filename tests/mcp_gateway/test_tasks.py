"""The Tasks extension (io.modelcontextprotocol/tasks) on /mcp/<name>, with the official MCP
client declaring it: a gated call is a task at once, polled with tasks/get, cancelled with
tasks/cancel, and seen only by its caller."""

import time
from datetime import timedelta
from typing import Any, Literal

import anyio
import httpx
import httpx2
import pytest
from django.contrib.auth.models import Group
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolResult,
    CancelTaskRequestParams,
    GetTaskRequestParams,
    Request,
    Result,
)

from agents import deadlines
from agents.models import Event, Suspension
from mcp_gateway.models import UpstreamCall
from tests.conftest import wait_for
from tests.external.conftest import Later, Reviewer, token
from tests.mcp_gateway.conftest import Upstream, run

TASKS = "io.modelcontextprotocol/tasks"

FILES = """
mcp_servers:
  - name: files
    url: {url}
    headers: {{Authorization: "Bearer ${{MCP_TEST_FILES_TOKEN}}"}}
    trust_annotations: true
    policy: {{groups: [ops]}}
"""


class TaskResult(Result):
    """A task as the gateway sends it: a CreateTaskResult (resultType "task") or the answer
    to tasks/get (resultType "complete")."""

    result_type: str = "complete"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None


class CreatedTask(TaskResult):
    result_type: Literal["task"] = "task"


class GetTask(Request[GetTaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the Mcp-Name header the specification asks for on tasks/*


class CancelTask(Request[CancelTaskRequestParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


async def get(session: Any, task_id: str) -> TaskResult:
    return await session.send_request(
        GetTask(params=GetTaskRequestParams(task_id=task_id)), TaskResult
    )


async def until_done(task: TaskResult, ctx: ClaimContext) -> CallToolResult:
    """The client side of the extension: poll tasks/get until the task ends."""
    while task.status == "working":
        # The gateway's pollIntervalMs, shortened so the test does not wait for nothing.
        await anyio.sleep(min((task.poll_interval_ms or 1000) / 1000, 0.2))
        task = await get(ctx.session, task.task_id)
    if task.status != "completed" or task.result is None:
        raise RuntimeError(f"task {task.task_id} ended {task.status}: {task.status_message}")
    return CallToolResult.model_validate(task.result)


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=until_done)]


def connect(url: str, raw_token: str, tasks: bool = True) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {raw_token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    return Client(
        streamable_http_client(url, http_client=http), extensions=[Tasks()] if tasks else None
    )


def text(result: Any) -> str:
    return " ".join(c["text"] if isinstance(c, dict) else c.text for c in result["content"])


class TasksTestCase:
    @pytest.fixture(autouse=True)
    def setup(
        self,
        upstream: Upstream,
        gateway_url: str,
        load_agents: Any,
        users: dict[str, Any],
        reviewer: Reviewer,
        worker: Any,  # makes the approved calls (mcp_gateway.runner)
    ) -> None:
        upstream.calls.unlink(missing_ok=True)
        load_agents(FILES.format(url=upstream.url))
        Group.objects.get_or_create(name="ops")[0].user_set.add(users["reviewer"])
        self.upstream = upstream
        self.url = f"{gateway_url}/mcp/files"
        self.reviewer = reviewer
        self.caller = users["operator"]
        self.token = token(self.caller, "runs")

    def start(self, tool: str, arguments: dict[str, Any]) -> TaskResult:
        """A tools/call that declares the extension; the task it gets, as it came."""

        async def go() -> Any:
            async with connect(self.url, self.token) as client:
                return await client.session.call_tool(tool, arguments, allow_claimed=True)

        return run(go())

    def get(self, task_id: str, raw_token: str | None = None) -> TaskResult:
        async def go() -> Any:
            async with connect(self.url, raw_token or self.token) as client:
                return await get(client.session, task_id)

        return run(go())

    def cancel(self, task_id: str, raw_token: str | None = None) -> Any:
        async def go() -> Any:
            async with connect(self.url, raw_token or self.token) as client:
                return await client.session.send_request(
                    CancelTask(params=CancelTaskRequestParams(task_id=task_id)), Result
                )

        return run(go())

    def until(self, task_id: str, status: str, timeout: float = 20) -> TaskResult:
        def seen() -> TaskResult | None:
            task = self.get(task_id)
            return task if task.status == status else None

        return wait_for(seen, timeout=timeout, what=f"task {task_id} {status}")

    def test_a_gated_call_is_a_working_task_at_once_saying_who_decides_by_when(self) -> None:
        started = time.monotonic()
        task = self.start("delete_file", {"path": "/etc/passwd"})
        assert time.monotonic() - started < 5  # not held: MCP_HOLD_SECONDS is 15 here
        assert isinstance(task, CreatedTask) and task.status == "working"
        s = Suspension.objects.get()
        assert task.task_id == str(s.pk)
        assert "a reviewer of group ops other than olivia" in task.status_message
        deadline = s.expires_at.strftime("%Y-%m-%d %H:%M UTC")
        assert f"by {deadline}" in task.status_message
        assert task.poll_interval_ms and task.created_at
        polled = self.get(task.task_id)
        assert polled.status == "working" and polled.result_type == "complete"
        assert polled.status_message == task.status_message
        # The same call again while it is pending is the same task, not a second request.
        assert self.start("delete_file", {"path": "/etc/passwd"}).task_id == task.task_id
        assert Suspension.objects.count() == 1
        assert self.upstream.deleted() == []

    def test_a_task_of_the_combined_endpoint_is_polled_there(self) -> None:
        # /mcp names the tool <server>__<tool>; its tasks/get and tasks/cancel find the task
        # of any upstream the caller raised it through.
        self.url = self.url.removesuffix("/files")
        task = self.start("files__delete_file", {"path": "/opt/a"})
        assert task.status == "working" and self.get(task.task_id).status == "working"
        self.reviewer.decide("files", {"approved": True})
        done = self.until(task.task_id, "completed")
        assert text(done.result) == "deleted /opt/a"
        second = self.start("files__delete_file", {"path": "/opt/b"})
        self.cancel(second.task_id)
        assert self.get(second.task_id).status == "cancelled"
        assert [d["path"] for d in self.upstream.deleted()] == ["/opt/a"]

    def test_the_gateway_advertises_the_extension(self) -> None:
        async def go() -> Any:
            async with connect(self.url, self.token) as client:
                return await client.session.discover()

        assert TASKS in run(go()).capabilities.extensions

    def test_the_task_on_the_wire(self) -> None:
        """The CreateTaskResult as a client without the SDK reads it (raw JSON-RPC)."""
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "delete_file",
                "arguments": {"path": "/mnt"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
                },
            },
        }
        r = httpx.post(
            self.url,
            json=body,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "delete_file",
            },
            timeout=10,
        )
        assert r.status_code == 200, r.text
        task = r.json()["result"]
        assert task["resultType"] == "task" and task["status"] == "working"
        assert task["taskId"] == str(Suspension.objects.get().pk)
        assert task["ttlMs"] is None and task["createdAt"].endswith("Z")

    def test_an_approved_task_completes_with_the_upstreams_result(self) -> None:
        task = self.start("delete_file", {"path": "/etc/passwd"})
        self.reviewer.decide("files", {"approved": True, "modifiedArgs": {"path": "/tmp/x"}})
        # The worker makes the approved call (mcp_gateway.runner); tasks/get only reads.
        done = self.until(task.task_id, "completed")
        assert text(done.result) == "deleted /tmp/x" and not done.result.get("isError")
        assert UpstreamCall.objects.get().arguments == {"path": "/tmp/x"}
        assert len(self.upstream.deleted()) == 1
        # The caller has its answer: the same call again is a new request.
        again = self.start("delete_file", {"path": "/etc/passwd"})
        assert again.task_id != task.task_id and Suspension.objects.count() == 2

    def test_a_rejection_completes_the_task_with_an_error_result_through_the_client(
        self,
    ) -> None:
        async def go() -> Any:
            async with connect(self.url, self.token) as client:
                # The client's claim resolver polls tasks/get until the task ends.
                return await client.call_tool("delete_file", {"path": "/srv"})

        held = Later(lambda: run(go()))
        self.reviewer.decide("files", {"approved": False, "reason": "not that one"})
        result = held.result()
        assert result.is_error
        said = " ".join(c.text for c in result.content)
        assert "not that one" in said and "alice" in said
        assert self.upstream.deleted() == []
        assert UpstreamCall.objects.get().state != UpstreamCall.State.DONE

    def test_a_deadline_completes_the_task_with_an_error_result(self) -> None:
        task = self.start("delete_file", {"path": "/boot"})
        s = Suspension.objects.get()
        assert deadlines.expire_overdue(now=s.expires_at + timedelta(seconds=1), only=s.pk)
        ended = self.get(task.task_id)
        assert ended.status == "completed" and ended.result["isError"] is True
        assert "timed_out by the deadline" in text(ended.result)
        assert "rejected automatically at the deadline" in text(ended.result)
        assert self.upstream.deleted() == []

    def test_tasks_cancel_cancels_the_request_and_is_audited(self) -> None:
        task = self.start("delete_file", {"path": "/var"})
        assert self.cancel(task.task_id) is not None
        s = Suspension.objects.get()
        assert s.status == Suspension.Status.CANCELLED and s.decided_by_id == self.caller.pk
        [event] = Event.objects.filter(type=Event.Type.SUSPENSION_CANCELLED)
        assert event.actor_id == self.caller.pk and event.suspension_id == s.pk
        cancelled = self.get(task.task_id)
        assert cancelled.status == "cancelled" and "olivia" in cancelled.status_message
        assert self.reviewer.pending("files") == []
        assert self.upstream.deleted() == []

    def test_another_caller_finds_no_such_task(self, users: dict[str, Any]) -> None:
        task = self.start("delete_file", {"path": "/home"})
        other = token(users["teammate"], "runs")
        users["teammate"].user_permissions.add(*self.caller.user_permissions.all())
        for attempt in (self.get, self.cancel):
            with pytest.raises(MCPError) as e:
                attempt(task.task_id, other)
            assert e.value.error.code == INVALID_PARAMS
        with pytest.raises(MCPError) as e:
            self.get("not-a-task")
        assert e.value.error.code == INVALID_PARAMS
        assert Suspension.objects.get().status == Suspension.Status.PENDING

    def test_a_client_without_the_extension_is_held_and_may_not_poll(self) -> None:
        async def go() -> Any:
            async with connect(self.url, self.token, tasks=False) as client:
                return await client.call_tool("delete_file", {"path": "/opt"})

        held = Later(lambda: run(go()))
        self.reviewer.decide("files", {"approved": False, "reason": "no"})
        assert held.result().is_error
        s = Suspension.objects.get()

        async def poll() -> Any:
            async with connect(self.url, self.token, tasks=False) as client:
                return await get(client.session, str(s.pk))

        with pytest.raises(MCPError) as e:
            run(poll())
        assert e.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
