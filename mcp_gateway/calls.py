"""A tools/call through the gateway: an immediate tool relayed, a gated one held until its
request is decided and, once approved, a worker has called the upstream with the approved
arguments (mcp_gateway.runner), or until MCP_HOLD_SECONDS."""

import time
from typing import Any

import mcp_types as types

from access import ratelimits
from access.revocation import Credential
from agents import external
from agents.models import Suspension
from infra.aio import blocking
from mcp_gateway import actions, audit, elicitation, forward, holding, runner
from mcp_gateway.models import Upstream


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
    result = await forward.call(upstream, tool, arguments, elicit=asks, relayed=True)
    seconds = time.monotonic() - started
    # Its event is written just after the answer (mcp_gateway.audit).
    outcome = {"isError": result.is_error}
    audit.later(actions.called(user, upstream.name, tool, arguments, outcome, seconds))
    return result


async def gated(
    upstream: Upstream,
    user: Any,
    credential: Credential,
    described: types.Tool,
    arguments: dict[str, Any],
    via: str = "",
    progress: holding.Progress | None = None,
) -> types.CallToolResult:
    """A gated call: its request raised (or attached to), then held (mcp_gateway.holding)."""
    try:
        s = await blocking(actions.attach_or_raise)(
            upstream, user, described.name, arguments, described, via
        )
    except ratelimits.Limited as e:
        return holding.not_raised(e)
    sent = False

    async def answer(s: Suspension) -> types.CallToolResult | None:
        """The refusal, or the upstream's answer once a worker has called it; None while that
        call is still to come. Seeing the approval first, the held call has a worker make it
        now (mcp_gateway.runner; a call nobody holds is sent by the sweep)."""
        nonlocal sent
        if not external.request_payload(s)["approved"]:
            return holding.refused(s)
        kept = await blocking(actions.done_result)(s)
        if kept is None and not sent:
            sent = True
            await blocking(runner.send)(s.pk)
        return None if kept is None else types.CallToolResult.model_validate(kept)

    return await holding.hold(s, user, credential, answer, progress)
