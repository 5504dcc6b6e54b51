"""A call held for a person: the wait shared by a gated upstream call (mcp_gateway.calls) and
the gateway's own tools (mcp_gateway.own_tools), and the words every MCP answer uses for a
request that waits or was refused (the Tasks extension's too, mcp_gateway.tasks_ext).

The wait is woken by the process's event hub (approvals.waiters) and polls as a safety net;
it ends with the answer, or after MCP_HOLD_SECONDS with a "pending" result whose retry
attaches to the same request. A client that asked for progress (a `progressToken`) is told
who must decide by when, at once and every PROGRESS_SECONDS while it waits.
"""

import time
from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import Any

import mcp_types as types
from django.conf import settings

from access import ratelimits
from access.revocation import Credential
from agents import external, policy
from agents.models import Suspension
from approvals.waiters import waiting
from infra.aio import blocking, wait_event
from mcp_gateway import actions, forward

SAFETY_POLL = 1.0
PROGRESS_SECONDS = 5.0
# The key of a decided request's signed receipt in an answer's `_meta` (agents.receipts).
RECEIPT_META = "io.github.approval-gateway/receipt"

# The answer to a decided request, or None while it is not ready (an approved call whose
# upstream call a worker has yet to make).
Answer = Callable[[Suspension], Awaitable[types.CallToolResult | None]]
# Sends a progress notification: (seconds waited so far, what the client is waiting for).
Progress = Callable[[float, str], Awaitable[None]]


async def hold(
    s: Suspension,
    user: Any,
    credential: Credential,
    answer: Answer,
    progress: Progress | None = None,
) -> types.CallToolResult:
    """Wait for `s` to be answered, up to MCP_HOLD_SECONDS; once the caller has its answer,
    the same call again is a new request (mcp_gateway.actions.ask)."""
    started = time.monotonic()
    deadline = started + settings.MCP_HOLD_SECONDS
    told = 0.0  # when the client was last told how it stands (monotonic)
    # Subscribed before the read, so a decision or a result written in between still wakes
    # the wait: the decision's event and the upstream call's (MCP_TOOL_CALLED) name the request.
    async with waiting("suspension", str(s.pk), credential) as waiter:
        while True:
            waiter.woken.clear()
            s = await blocking(actions.reread)(s.pk)
            if not s.pending:
                found = await answer(s)
                if found is not None:
                    await blocking(external.acknowledge)(s, user)
                    return with_receipt(found, s)
            now = time.monotonic()
            left = deadline - now
            if left <= 0 or waiter.revoked:
                return pending(s)
            if progress is not None and now - told >= PROGRESS_SECONDS:
                told = now
                said = await blocking(who_decides)(s) if s.pending else "Approved; calling it."
                await progress(now - started, said)
            await wait_event(waiter.woken, min(SAFETY_POLL, left))


def with_receipt(result: types.CallToolResult, s: Suspension) -> types.CallToolResult:
    """The answer with the decision's signed receipt in its `_meta`, for the client to check
    against /.well-known/jwks.json before it acts."""
    if not s.receipt:
        return result
    return result.model_copy(update={"meta": {**(result.meta or {}), RECEIPT_META: s.receipt}})


def who_decides(s: Suspension) -> str:
    """What a pending request waits for: who may decide it, and by when."""
    rules = policy.of(s)
    count = int(rules.get("quorum") or 1)
    who = f"{count} reviewers" if count > 1 else "a reviewer"
    groups = [s.escalate_to] if s.escalated_at and s.escalate_to else rules.get("groups") or []
    if groups:
        who += f" of group {' or '.join(groups)}" if len(groups) > 1 else f" of group {groups[0]}"
    if rules.get("four_eyes") and (asker := rules.get("started_by")):
        who += f" other than {asker}"
    message = f"Waiting for {who} to decide"
    if s.expires_at is not None:
        deadline = s.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        then = "approved" if s.on_timeout == Suspension.OnTimeout.APPROVE else "rejected"
        message += f" by {deadline} (then it is {then})"
    return f"{message}; request {s.pk}, page /threads/{s.thread_id}/."


def refused(s: Suspension, lead: str = "Not run: request") -> types.CallToolResult:
    """A request that was not approved, as a tool result with isError: who decided and why."""
    payload = external.request_payload(s)
    by = payload["decided_by"] or "the deadline"
    reason = payload["reason"] or payload["response"] or "no reason given"
    return forward.failed(
        f"{lead} {s.pk} was {s.status} by {by}: {reason}.",
        request=str(s.pk),
        status=s.status,
        decided_by=payload["decided_by"],
        reason=payload["reason"],
    )


def not_raised(limited: ratelimits.Limited) -> types.CallToolResult:
    """A request the rate limits refused (access.ratelimits): when to try again."""
    return forward.failed(
        f"Not raised: {limited.detail} Try again in {limited.retry_after} s.",
        retry_after=limited.retry_after,
    )


def pending(s: Suspension) -> types.CallToolResult:
    """The answer of a call held MCP_HOLD_SECONDS: the request still waits for a person, or
    was approved and its call is still being made. Either way a retry attaches to it."""
    page = f"/threads/{s.thread_id}/"
    if s.pending:
        said = f"Request {s.pk} is pending: a person must decide it (see {page})."
        then = "the decision"
    else:
        said = f"Request {s.pk} was approved; its call is under way (see {page})."
        then = "its result"
    return forward.failed(
        f"{said} Call again with the same arguments to wait for {then}; it will not be raised "
        "or made twice.",
        request=str(s.pk),
        status="pending" if s.pending else s.status,
        page=page,
    )
