"""A tools/call through the gateway: an immediate tool relayed, a gated one held until its
request is decided (or MCP_HOLD_SECONDS), then called upstream once with the approved
arguments."""

import asyncio
import time
from typing import Any

import mcp_types as types
from django.conf import settings

from access import ratelimits
from access.revocation import Credential
from agents import external
from agents.models import Suspension
from approvals.waiters import waiting
from infra.aio import blocking, wait_event
from mcp_gateway import actions, elicitation, forward
from mcp_gateway.models import Upstream

SAFETY_POLL = 1.0
# The key under which the upstream gets the request's id, to recognise a call made again.
IDEMPOTENCY_META = "io.github.approval-gateway/idempotency-key"


def dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def immediate(
    upstream: Upstream,
    user: Any,
    tool: str,
    arguments: dict[str, Any],
    credential: Credential | None = None,
) -> types.CallToolResult:
    started = time.monotonic()
    # A question the upstream asks meanwhile goes to a person (mcp_gateway.elicitation).
    asks = elicitation.callback(upstream, user, tool, credential)
    result = await forward.call(upstream, tool, arguments, elicit=asks)
    seconds = time.monotonic() - started
    await blocking(actions.record)(user, upstream.name, tool, arguments, dump(result), seconds)
    return result


async def gated(
    upstream: Upstream,
    user: Any,
    credential: Credential,
    described: types.Tool,
    arguments: dict[str, Any],
) -> types.CallToolResult:
    try:
        s = await blocking(actions.attach_or_raise)(
            upstream, user, described.name, arguments, described
        )
    except ratelimits.Limited as e:
        return forward.failed(
            f"Not raised: {e.detail} Try again in {e.retry_after} s.", retry_after=e.retry_after
        )
    deadline = time.monotonic() + settings.MCP_HOLD_SECONDS
    # Subscribed before the read, so a decision made in between still wakes the wait.
    async with waiting("suspension", str(s.pk), credential) as waiter:
        while True:
            waiter.woken.clear()
            s = await blocking(actions.reread)(s.pk)
            if not s.pending:
                break
            left = deadline - time.monotonic()
            if left <= 0 or waiter.revoked:
                return _pending(s)
            await wait_event(waiter.woken, min(SAFETY_POLL, left))
    answer, final = await _decided(upstream, user, s, deadline)
    if final:
        # Answered: the next identical call is a new request (actions.attach_or_raise).
        await blocking(external.acknowledge)(s, user)
    return answer


async def _decided(
    upstream: Upstream, user: Any, s: Suspension, deadline: float
) -> tuple[types.CallToolResult, bool]:
    """The answer to a decided request, and whether it is final (not "under way")."""
    payload = external.request_payload(s)
    if not payload["approved"]:
        by = payload["decided_by"] or "the deadline"
        reason = payload["reason"] or "no reason given"
        refused = forward.failed(
            f"Not run: request {s.pk} was {s.status} by {by}: {reason}.",
            request=str(s.pk),
            status=s.status,
            decided_by=payload["decided_by"],
            reason=payload["reason"],
        )
        return refused, True
    arguments = payload["arguments"] or {}
    call, mine = await blocking(actions.claim)(s, arguments)
    if mine:
        started = time.monotonic()
        result = await forward.call(
            upstream, s.tool_name, arguments, meta={IDEMPOTENCY_META: str(s.pk)}
        )
        kept = dump(result)
        await blocking(actions.finish)(call, user, kept, time.monotonic() - started)
        return result, True
    # Another call claimed it (a retry or a second client): its result, once it has one.
    while True:
        kept = await blocking(actions.done_result)(call.pk)
        if kept is not None:
            return types.CallToolResult.model_validate(kept), True
        if time.monotonic() >= deadline:
            return _pending(s, "approved; the upstream call is under way"), False
        await asyncio.sleep(SAFETY_POLL / 4)


def _pending(s: Suspension, state: str = "pending") -> types.CallToolResult:
    page = f"/threads/{s.thread_id}/"
    return forward.failed(
        f"Request {s.pk} is {state}: a person must decide it (see {page}). Call again with "
        "the same arguments to wait for the decision; it will not be raised twice.",
        request=str(s.pk),
        status="pending",
        page=page,
    )
