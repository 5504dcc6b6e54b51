"""/mcp: every upstream's tools the caller may use (its `callers` groups) on one endpoint,
each named `<server>__<tool>`, so a client configured once reaches them all. A call is split
on the first `__` and goes on as a call of /mcp/<server> would (mcp_gateway.proxy); upstream
names never hold `__` (upstreams.check)."""

import asyncio
import logging
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from infra.aio import blocking
from mcp_gateway import forward, statements, upstreams
from mcp_gateway.models import Upstream

SEPARATOR = upstreams.SEPARATOR

log = logging.getLogger(__name__)


def _upstreams(user: Any) -> list[Upstream]:
    return [u for u in Upstream.objects.order_by("name") if upstreams.may_call(u, user)]


async def tools(user: Any) -> list[types.Tool]:
    """Each upstream's tools in its order, the upstreams by name, of those `user` may call.
    An upstream that cannot be listed now is left out (and logged), rather than taking the
    others' tools away."""
    servers = await blocking(_upstreams)(user)
    listed = await asyncio.gather(*(forward.tools(u) for u in servers), return_exceptions=True)
    found: list[types.Tool] = []
    for upstream, its in zip(servers, listed, strict=True):
        if isinstance(its, BaseException):
            log.warning("MCP server %s could not be listed: %r", upstream.name, its)
            continue
        found += [t.model_copy(update={"name": name(upstream, t.name)}) for t in its]
    return found


def name(upstream: Upstream, tool: str) -> str:
    return f"{upstream.name}{SEPARATOR}{tool}"


def _upstream(server: str, user: Any) -> Upstream | None:
    upstream = statements.upstream_named(server)
    if upstream is not None and not upstreams.may_call(upstream, user):
        raise MCPError(types.INVALID_PARAMS, upstreams.refusal(upstream))
    return upstream


async def resolve(user: Any, combined: str) -> tuple[Upstream, str]:
    """The upstream and its tool's own name; an unknown server is an unknown tool, and one
    `user` may not call is refused in its words."""
    server, separated, tool = combined.partition(SEPARATOR)
    upstream = await blocking(_upstream)(server, user) if separated and tool else None
    if upstream is None:
        raise MCPError(
            types.INVALID_PARAMS,
            f"Unknown tool: {combined} (tools here are named <server>{SEPARATOR}<tool>).",
        )
    return upstream, tool
