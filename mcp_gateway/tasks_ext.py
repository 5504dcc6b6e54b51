"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`, revision 2026-07-28) for gated
calls: a client that declares it gets a task at once instead of a held call, polls
`tasks/get`, and may `tasks/cancel` the request.

A task is its request: the task id is the suspension's id, and its state is read from the
database on every `tasks/get` (the suspension's status, and the UpstreamCall row once the
approved call was claimed), so any gateway process answers it and a task outlives a restart.
Nothing here calls the upstream: the approved call is made by whoever claims its
UpstreamCall (mcp_gateway.calls, or the worker), and a task only reports what that row holds.
Only the caller who raised a request sees its task; to anyone else it does not exist.
"""

from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from access import ratelimits
from agents import cancelling, external
from agents.models import Suspension
from approvals.http import parse_uuid
from infra.aio import blocking
from mcp_gateway import actions, holding
from mcp_gateway.calls import dump
from mcp_gateway.models import Upstream, UpstreamCall

EXTENSION = "io.modelcontextprotocol/tasks"
# How often a client should poll: a person decides in seconds at best, so every two seconds
# costs little and shows a decision soon enough.
POLL_MS = 2000
CANCEL_REASON = "cancelled by its caller (tasks/cancel)"
NOT_FOUND = "Failed to retrieve task: Task not found"


def declared(ctx: Any) -> bool:
    """Did this request's client declare the extension (in the 2026-07-28 per-request
    capabilities, which the SDK reads into the connection)?"""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # the extension is of the 2026-07-28 revision; older clients are held
    capabilities = getattr(ctx.session, "client_capabilities", None)
    return bool(capabilities and capabilities.extensions and EXTENSION in capabilities.extensions)


# The task of a request ------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def refusal(s: Suspension) -> dict[str, Any]:
    """The tool result of a request that was not approved, as the held call says it."""
    return dump(holding.with_receipt(holding.refused(s), s))


def state(s: Suspension, call: UpstreamCall | None) -> dict[str, Any]:
    """The task of request `s` (a DetailedTask of the specification), from what the database
    holds now."""
    updated = max(t for t in (s.created_at, s.decided_at, call and call.finished_at) if t)
    task: dict[str, Any] = {
        "taskId": str(s.pk),
        "createdAt": _iso(s.created_at),
        "lastUpdatedAt": _iso(updated),
        # Requests are kept with the rest of the trail: a task does not expire.
        "ttlMs": None,
        "pollIntervalMs": POLL_MS,
    }
    if s.pending:
        return {**task, "status": "working", "statusMessage": holding.who_decides(s)}
    if s.status == Suspension.Status.CANCELLED:
        by = s.decided_by_name or "the gateway"
        return {**task, "status": "cancelled", "statusMessage": f"Cancelled by {by}: {s.reason}"}
    if not external.request_payload(s)["approved"]:
        # A refusal is a tool result with isError, so a completed task (the specification
        # keeps `failed` for JSON-RPC errors).
        message = f"Not run: {s.status}."
        return {**task, "status": "completed", "statusMessage": message, "result": refusal(s)}
    if call is None or call.state != UpstreamCall.State.DONE or call.result is None:
        return {**task, "status": "working", "statusMessage": "approved; calling the upstream"}
    result = call.result
    if s.receipt:
        # The decision's signed receipt beside the upstream's answer, as a held call has it.
        result = {**result, "_meta": {**result.get("_meta", {}), holding.RECEIPT_META: s.receipt}}
    done = {"status": "completed", "statusMessage": "Approved and run.", "result": result}
    return {**task, **done}


TERMINAL = ("completed", "cancelled", "failed")


def mine(user: Any, upstream: Upstream | None, task_id: str) -> Suspension | None:
    """The request behind `task_id` when `user` raised it through `upstream` (None: /mcp, any
    upstream), else None (a task of another caller is not found, rather than forbidden: its id
    says nothing)."""
    pk = parse_uuid(task_id)
    if pk is None:
        return None
    through = {"agent_name": upstream.name} if upstream is not None else {}
    return (
        Suspension.objects.select_related("thread")
        .filter(
            pk=pk,
            thread__created_by=user,
            thread__external_run_id__startswith="mcp:",
            **through,
        )
        .first()
    )


def read(user: Any, upstream: Upstream | None, task_id: str) -> dict[str, Any] | None:
    """The task as its caller sees it now; a terminal one counts as the decision having
    reached the caller, so the same call made again raises a new request
    (mcp_gateway.actions.attach_or_raise)."""
    s = mine(user, upstream, task_id)
    if s is None:
        return None
    task = state(s, UpstreamCall.objects.filter(suspension=s).first())
    if task["status"] in TERMINAL:
        external.acknowledge(s, user)
    return task


def cancel(user: Any, upstream: Upstream | None, task_id: str) -> bool:
    """Cancel the caller's pending request, as cancelling its run does for each of its
    requests (agents.cancelling), audited as SUSPENSION_CANCELLED by the caller. False when
    there is no such task; a request already decided is left as it is (cancellation is
    cooperative in the specification: the task then ends as decided)."""
    s = mine(user, upstream, task_id)
    if s is None:
        return False
    cancelling.cancel_request(s, user, CANCEL_REASON)
    return True


# The protocol ---------------------------------------------------------------------------


async def create(
    upstream: Upstream,
    user: Any,
    described: types.Tool,
    arguments: dict[str, Any],
    via: str = "",
) -> dict[str, Any] | types.CallToolResult:
    """A gated call as a task: its request raised (or the open one a retry attaches to) and
    committed before the CreateTaskResult is sent, so the client's first tasks/get finds it."""
    try:
        s = await blocking(actions.attach_or_raise)(
            upstream, user, described.name, arguments, described, via
        )
    except ratelimits.Limited as e:
        return holding.not_raised(e)
    task = await blocking(read)(user, upstream, str(s.pk))
    assert task is not None  # raised by this caller through this upstream just now
    return {**task, "resultType": "task"}


def _required(ctx: Any) -> None:
    """tasks/* from a 2026-07-28 client that did not declare the extension: the error the
    specification names (-32021)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and not declared(ctx):
        raise MCPError(
            types.MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
        )


def handlers(caller: Any) -> tuple[Any, Any]:
    """The tasks/get and tasks/cancel handlers; `caller()` is the request's
    mcp_gateway.proxy.Caller (the upstream and the user)."""

    async def get(ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
        _required(ctx)
        who = caller()
        task = await blocking(read)(who.user, who.upstream, params.task_id)
        if task is None:
            raise MCPError(types.INVALID_PARAMS, NOT_FOUND)
        return {**task, "resultType": "complete"}

    async def cancel_(ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        _required(ctx)
        who = caller()
        if not await blocking(cancel)(who.user, who.upstream, params.task_id):
            raise MCPError(types.INVALID_PARAMS, NOT_FOUND)
        return {"resultType": "complete"}

    return get, cancel_
