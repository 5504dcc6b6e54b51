"""/mcp/<name>: an upstream's tools as an MCP endpoint (streamable HTTP, stateless), served
in daphne's event loop beside Django (gateway.asgi routes /mcp and /mcp/ here); /mcp itself
offers every upstream's tools (mcp_gateway.combined), /mcp/gateway the gateway's own
(mcp_gateway.own_tools).

A request whose Origin is not one of the site's (MCP_ALLOWED_ORIGINS), or whose Host is not in
ALLOWED_HOSTS, answers 403 before anything else: the specification asks servers to check
Origin against DNS rebinding. A client that sends no Origin is not a browser, and passes.
The caller is known before the SDK sees the request (mcp_gateway.admission): a missing or
refused token answers 401 and a token without the `runs` scope 403, as JSON-RPC errors with
those HTTP statuses (an MCP client reads 401 as "authenticate"); an unknown upstream answers
404. A plain call of an immediate tool is then relayed (mcp_gateway.relay); anything else goes
to the official SDK's low-level Server (one Server for every upstream: which one and who calls
ride in a context variable the handlers read; the SDK starts each request's handler task from
the request's own task, so it sees them).
"""

import contextvars
import dataclasses
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from access.revocation import Credential
from mcp_gateway import (
    admission,
    calls,
    combined,
    forward,
    holding,
    own_tools,
    relay,
    tasks_ext,
    transport,
    upstreams,
)
from mcp_gateway.models import Upstream

PATH_PREFIX = "/mcp/"
# The most characters of a client's name and version, or its User-Agent, kept on its card.
CLIENT_CHARS = 80


@dataclass(frozen=True)
class Caller:
    # None on /mcp (every upstream) and /mcp/gateway (own_tools.NAME in `endpoint`).
    upstream: Upstream | None
    user: Any
    credential: Credential
    endpoint: str = ""
    user_agent: str = ""


_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("mcp_caller")


def handles(scope: dict[str, Any]) -> bool:
    return scope["path"] == PATH_PREFIX.rstrip("/") or scope["path"].startswith(PATH_PREFIX)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    caller = _caller.get()
    if caller.endpoint == own_tools.NAME:
        return types.ListToolsResult(tools=own_tools.TOOLS)
    if caller.upstream is None:
        return types.ListToolsResult(tools=await combined.tools(caller.user))
    return types.ListToolsResult(tools=await forward.tools(caller.upstream))


def _bounded(text: Any) -> str:
    shown = "".join(c for c in str(text or "") if c.isprintable())
    return shown[:CLIENT_CHARS]


def via(ctx: Any, caller: Caller) -> str:
    """The calling client as its card names it: its clientInfo (sent at initialize, or in
    each request's _meta by a client of the stateless revision), else its User-Agent; and the
    token's name. Untrusted text: printable, bounded, and escaped where it is shown."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    if info is not None:
        client = f"client {_bounded(info.name)} {_bounded(info.version)}".rstrip()
    elif caller.user_agent:
        client = f"client {_bounded(caller.user_agent)}"
    else:
        client = "an unnamed client"
    token = getattr(getattr(caller.user, "api_token", None), "name", "")
    return f"{client}, token {_bounded(token)}" if token else client


def progress(ctx: Any) -> holding.Progress | None:
    """Progress notifications for a held call, when its client asked for them (a
    progressToken; such a request is answered over SSE: mcp_gateway.transport)."""
    meta = getattr(ctx, "meta", None) or {}
    if meta.get("progress_token") is None and meta.get("progressToken") is None:
        return None

    async def report(waited: float, message: str) -> None:
        await ctx.session.report_progress(round(waited, 1), None, message)

    return report


async def call_tool(
    ctx: Any, params: types.CallToolRequestParams
) -> types.CallToolResult | dict[str, Any]:
    caller = _caller.get()
    arguments = params.arguments or {}
    if caller.endpoint == own_tools.NAME:
        return await own_tools.call(
            caller.user, caller.credential, via(ctx, caller), params.name, arguments, progress(ctx)
        )
    if caller.upstream is None:
        upstream, tool = await combined.resolve(caller.user, params.name)
    else:
        upstream, tool = caller.upstream, params.name
    listing = await forward.listing(upstream)
    described = listing.named.get(tool)
    if described is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name} ({upstream.name}).")
    # Arguments the tool would refuse raise no request and reach no upstream.
    if (problem := listing.problem(described, arguments)) is not None:
        raise MCPError(types.INVALID_PARAMS, f"Invalid arguments for {params.name}: {problem}")
    read_only = bool(described.annotations and described.annotations.read_only_hint)
    if upstreams.is_immediate(upstream, described.name, read_only):
        return await calls.immediate(
            upstream, caller.user, described.name, arguments, caller.credential
        )
    if tasks_ext.declared(ctx):
        # A client of the Tasks extension gets a task at once instead of a held call.
        return await tasks_ext.create(upstream, caller.user, described, arguments, via(ctx, caller))
    return await calls.gated(
        upstream,
        caller.user,
        caller.credential,
        described,
        arguments,
        via(ctx, caller),
        progress(ctx),
    )


def input_schema(name: str) -> dict[str, Any] | None:
    """A tool's input schema, for the SDK's check of `Mcp-Param-*` headers on 2026-07-28
    (without it, the SDK runs the whole tools/list handler for every call to find it): from
    the caller's upstream's listing as last read (the call reads it first: a listing not kept
    has just been checked by the call itself, which the SDK then serves unvalidated)."""
    caller = _caller.get(None)
    if caller is None:
        return None
    if caller.endpoint == own_tools.NAME:
        own = {t.name: t for t in own_tools.TOOLS}.get(name)
        return own.input_schema if own is not None else None
    if caller.upstream is not None:
        listing, tool = forward.kept(caller.upstream), name
    else:
        server_name, _, tool = name.partition(combined.SEPARATOR)
        listing = forward.kept_named(server_name)
    described = listing.named.get(tool) if listing is not None else None
    return described.input_schema if described is not None else None


server: Server[Any] = Server(
    "approval-gateway", on_list_tools=list_tools, get_tool_input_schema=input_schema
)
server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
# The Tasks extension: advertised in server/discover, and its methods (mcp_gateway.tasks_ext).
server.extensions[tasks_ext.EXTENSION] = {}
task_get, task_cancel = tasks_ext.handlers(_caller.get)
server.add_request_handler("tasks/get", types.GetTaskRequestParams, task_get)
server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, task_cancel)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = dict(scope.get("headers", []))
    if (why := admission.foreign(headers)) is not None:
        # Before the token is read: a page elsewhere learns nothing of it. No token would do,
        # so no WWW-Authenticate asks for one.
        response = admission.refusal(403, admission.PERMISSION_DENIED, why)
        del response.headers["WWW-Authenticate"]
        await response(scope, receive, send)
        return
    header = headers.get(b"authorization", b"").decode("latin-1")
    name = scope["path"][len(PATH_PREFIX) :].rstrip("/")
    user, refused, upstream = await admission.admit(header, name)
    if refused is not None:
        await refused(scope, receive, send)
        return
    credential = admission.credential(user, header)
    await _serve(scope, receive, send, Caller(upstream, user, credential, name), header)


def _server_info() -> dict[str, Any]:
    return server.server_info_stamp


async def _serve(
    scope: dict[str, Any], receive: Any, send: Any, caller: Caller, header: str
) -> None:
    """The SDK answers the request, with who calls and where in the context its handlers read;
    a plain call of an immediate tool is relayed without it (mcp_gateway.relay)."""
    agent = dict(scope.get("headers", [])).get(b"user-agent", b"").decode("latin-1")
    caller = dataclasses.replace(caller, user_agent=agent)
    _caller.set(caller)
    if scope.get("method") != "POST" or caller.endpoint == own_tools.NAME:
        await transport.handle(server, scope, receive, send)
        return
    if (body := await transport.body(scope, receive, send)) is None:
        return
    if await relay.answered(
        resolver(caller, header), caller.user, caller.credential, scope, body, send, _server_info
    ):
        return
    await transport.handle(server, scope, receive, send, body)


def resolver(caller: Caller, header: str) -> relay.Resolve:
    """What a tool's name calls on the caller's endpoint: on /mcp/<name>, that upstream's tool;
    on /mcp, `<server>__<tool>`'s, when the caller may call that server (admitted to
    /mcp/<server>, the admission kept as there); else the SDK answers (combined.resolve)."""
    upstream = caller.upstream
    if upstream is not None:

        async def named(tool: str) -> tuple[Upstream, str] | None:
            return upstream, tool

        return named

    async def combined_(tool: str) -> tuple[Upstream, str] | None:
        server, separated, own = tool.partition(combined.SEPARATOR)
        if not (separated and server and own) or server == own_tools.NAME:
            return None
        _, refused, found = await admission.admit(header, server)
        return (found, own) if refused is None and found is not None else None

    return combined_
