"""A tools/call through the gateway: an immediate tool relayed, a gated one held until its
request is decided and, once approved, a worker has called the upstream with the approved
arguments (mcp_gateway.runner), or until MCP_HOLD_SECONDS."""

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
    via: str = "",
) -> types.CallToolResult:
    try:
        s = await blocking(actions.attach_or_raise)(
            upstream, user, described.name, arguments, described, via
        )
    except ratelimits.Limited as e:
        return forward.failed(
            f"Not raised: {e.detail} Try again in {e.retry_after} s.", retry_after=e.retry_after
        )
    deadline = time.monotonic() + settings.MCP_HOLD_SECONDS
    # Subscribed before the read, so a decision or a result written in between still wakes the
    # wait: the decision's event and the upstream call's (MCP_TOOL_CALLED) both name the request.
    async with waiting("suspension", str(s.pk), credential) as waiter:
        while True:
            waiter.woken.clear()
            s = await blocking(actions.reread)(s.pk)
            if not s.pending:
                answer = await _answer(s)
                if answer is not None:
                    # Answered: the next identical call is a new request (attach_or_raise).
                    await blocking(external.acknowledge)(s, user)
                    return answer
            left = deadline - time.monotonic()
            if left <= 0 or waiter.revoked:
                state = "pending" if s.pending else "approved; the upstream call is under way"
                return _pending(s, state)
            await wait_event(waiter.woken, min(SAFETY_POLL, left))


async def _answer(s: Suspension) -> types.CallToolResult | None:
    """What the client gets for a decided request: the refusal, or the upstream's answer once
    a worker has called it (mcp_gateway.runner); None while that call is still to come."""
    payload = external.request_payload(s)
    if not payload["approved"]:
        by = payload["decided_by"] or "the deadline"
        reason = payload["reason"] or "no reason given"
        return forward.failed(
            f"Not run: request {s.pk} was {s.status} by {by}: {reason}.",
            request=str(s.pk),
            status=s.status,
            decided_by=payload["decided_by"],
            reason=payload["reason"],
        )
    kept = await blocking(actions.done_result)(s)
    return None if kept is None else types.CallToolResult.model_validate(kept)


def _pending(s: Suspension, state: str = "pending") -> types.CallToolResult:
    page = f"/threads/{s.thread_id}/"
    return forward.failed(
        f"Request {s.pk} is {state}: a person must decide it (see {page}). Call again with "
        "the same arguments to wait for the decision; it will not be raised twice.",
        request=str(s.pk),
        status="pending",
        page=page,
    )
