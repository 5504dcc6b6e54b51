"""/mcp/<name>: an upstream's tools as an MCP endpoint (streamable HTTP, stateless), served
in daphne's event loop beside Django (gateway.asgi routes /mcp and /mcp/ here); /mcp itself
offers every upstream's tools (mcp_gateway.combined), /mcp/gateway the gateway's own
(mcp_gateway.own_tools).

A request whose Origin is not one of the site's (MCP_ALLOWED_ORIGINS), or whose Host is not in
ALLOWED_HOSTS, answers 403 before anything else: the specification asks servers to check
Origin against DNS rebinding. A client that sends no Origin is not a browser, and passes.
The caller is known before the SDK sees the request: a missing or refused token answers 401
and a token without the `runs` scope 403, as JSON-RPC errors with those HTTP statuses (an
MCP client reads 401 as "authenticate"); an unknown upstream answers 404. Then the official
SDK's low-level Server handles the MCP messages (one Server for every upstream: which one and
who calls ride in a context variable the handlers read; the SDK starts each request's handler
task from the request's own task, so it sees them).
"""

import contextvars
import dataclasses
from dataclasses import dataclass
from typing import Any

import jsonschema
import mcp_types as types
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.responses import JSONResponse

from access import scopes
from access.auth import bearer
from access.models import Scope, digest
from access.revocation import Credential
from infra.aio import blocking
from mcp_gateway import (
    calls,
    combined,
    forward,
    holding,
    own_tools,
    statements,
    tasks_ext,
    transport,
    upstreams,
)
from mcp_gateway.models import Upstream

PATH_PREFIX = "/mcp/"
# The most characters of a client's name and version, or its User-Agent, kept on its card.
CLIENT_CHARS = 80
# The scope a token needs: an MCP caller acts as an agent does, starting work of its own.
SCOPE = Scope.RUNS
# JSON-RPC errors of our own for the HTTP refusals (as a2a_server.rpc answers them).
UNAUTHENTICATED = -31401
PERMISSION_DENIED = -31403
NOT_FOUND = -31404


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
    listed = {t.name: t for t in await forward.tools(upstream)}
    described = listed.get(tool)
    if described is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name} ({upstream.name}).")
    # Arguments the tool would refuse raise no request and reach no upstream.
    problem = jsonschema.validators.validator_for(described.input_schema)(
        described.input_schema
    ).iter_errors(arguments)
    if (first := next(problem, None)) is not None:
        where = ".".join(str(p) for p in first.absolute_path) or "arguments"
        raise MCPError(
            types.INVALID_PARAMS, f"Invalid arguments for {params.name}: {where}: {first.message}"
        )
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


server: Server[Any] = Server("approval-gateway", on_list_tools=list_tools)
server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
# The Tasks extension: advertised in server/discover, and its methods (mcp_gateway.tasks_ext).
server.extensions[tasks_ext.EXTENSION] = {}
task_get, task_cancel = tasks_ext.handlers(_caller.get)
server.add_request_handler("tasks/get", types.GetTaskRequestParams, task_get)
server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, task_cancel)


def refusal(status: int, code: int, message: str, **data: Any) -> JSONResponse:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": code, "message": message, **({"data": data} if data else {})},
    }
    response = JSONResponse(body, status_code=status)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="mcp"'
    if status == 403:
        response.headers["WWW-Authenticate"] = f'Bearer error="insufficient_scope", scope="{SCOPE}"'
    return response


def foreign(headers: dict[bytes, bytes]) -> str | None:
    """Why a request comes from outside the site (a browser page of another origin, or a
    Host the gateway does not serve), or None."""
    origin = headers.get(b"origin")
    if origin is not None and origin.decode("latin-1").lower() not in settings.MCP_ALLOWED_ORIGINS:
        return "Requests from this Origin are refused: only the gateway's own pages may call."
    domain, _ = split_domain_port(headers.get(b"host", b"").decode("latin-1"))
    allowed = settings.ALLOWED_HOSTS or (
        [".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else []
    )
    if not domain or not validate_host(domain, allowed):
        return "This Host is not one the gateway serves (ALLOWED_HOSTS)."
    return None


def _admit(header: str, name: str) -> tuple[Any, JSONResponse | None, Upstream | None]:
    """Who calls (the bearer token's user), the refusal to answer instead, and the upstream
    named by the path: read in one worker thread, not one hop each."""
    caller = bearer(header)
    user = caller.user
    if user is None or not user.is_authenticated:
        why = caller.refusal or "Send Authorization: Bearer <token>."
        return user, refusal(401, UNAUTHENTICATED, why), None
    if not scopes.allows(user, SCOPE):
        why = f"This token lacks the scope this needs: {SCOPE}."
        return user, refusal(403, PERMISSION_DENIED, why, scope=SCOPE), None
    if not user.has_perm("agents.add_thread"):
        return user, refusal(403, PERMISSION_DENIED, "You do not have permission to do this."), None
    if name in ("", own_tools.NAME):
        return user, None, None  # /mcp (every upstream) and /mcp/gateway (the gateway's own)
    upstream = None if "/" in name else statements.upstream_named(name)
    if upstream is None:
        why = f"No MCP server named {name!r} is behind this gateway."
        return user, refusal(404, NOT_FOUND, why), None
    if not upstreams.may_call(upstream, user):
        return user, refusal(403, PERMISSION_DENIED, upstreams.refusal(upstream)), None
    return user, None, upstream


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = dict(scope.get("headers", []))
    if (why := foreign(headers)) is not None:
        # Before the token is read: a page elsewhere learns nothing of it. No token would do,
        # so no WWW-Authenticate asks for one.
        response = refusal(403, PERMISSION_DENIED, why)
        del response.headers["WWW-Authenticate"]
        await response(scope, receive, send)
        return
    header = headers.get(b"authorization", b"").decode("latin-1")
    name = scope["path"][len(PATH_PREFIX) :].rstrip("/")
    user, refused, upstream = await blocking(_admit)(header, name)
    if refused is not None:
        await refused(scope, receive, send)
        return
    await _serve(scope, receive, send, Caller(upstream, user, _credential(user, header), name))


def _credential(user: Any, header: str) -> Credential:
    return Credential(user.pk, token_digest=digest(header.partition(" ")[2].strip()))


async def _serve(scope: dict[str, Any], receive: Any, send: Any, caller: Caller) -> None:
    """The SDK answers the request, with who calls and where in the context its handlers read."""
    agent = dict(scope.get("headers", [])).get(b"user-agent", b"").decode("latin-1")
    _caller.set(dataclasses.replace(caller, user_agent=agent))
    await transport.handle(server, scope, receive, send)
