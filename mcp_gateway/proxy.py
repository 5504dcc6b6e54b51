"""/mcp/<name>: an upstream's tools as an MCP endpoint (streamable HTTP, stateless), served
in daphne's event loop beside Django (gateway.asgi routes /mcp/ here).

The caller is known before the SDK sees the request: a missing or refused token answers 401
and a token without the `runs` scope 403, as JSON-RPC errors with those HTTP statuses (an
MCP client reads 401 as "authenticate"); an unknown upstream answers 404. Then the official
SDK's low-level Server handles the MCP messages (one Server for every upstream: which one and
who calls ride in a context variable the handlers read; the SDK starts each request's handler
task from the request's own task, so it sees them).
"""

import asyncio
import contextvars
from dataclasses import dataclass
from typing import Any

import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.responses import JSONResponse

from access import scopes
from access.auth import bearer
from access.models import Scope, digest
from access.revocation import Credential
from infra.aio import blocking
from mcp_gateway import calls, forward, upstreams
from mcp_gateway.models import Upstream

PATH_PREFIX = "/mcp/"
# The scope a token needs: an MCP caller acts as an agent does, starting work of its own.
SCOPE = Scope.RUNS
# JSON-RPC errors of our own for the HTTP refusals (as a2a_server.rpc answers them).
UNAUTHENTICATED = -31401
PERMISSION_DENIED = -31403
NOT_FOUND = -31404


@dataclass(frozen=True)
class Caller:
    upstream: Upstream
    user: Any
    credential: Credential


_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("mcp_caller")


def handles(scope: dict[str, Any]) -> bool:
    return scope["path"].startswith(PATH_PREFIX)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=await forward.tools(_caller.get().upstream))


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    caller = _caller.get()
    upstream = caller.upstream
    listed = {t.name: t for t in await forward.tools(upstream)}
    described = listed.get(params.name)
    if described is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name} ({upstream.name}).")
    arguments = params.arguments or {}
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
    return await calls.gated(upstream, caller.user, caller.credential, described, arguments)


server: Server[Any] = Server("approval-gateway", on_list_tools=list_tools, on_call_tool=call_tool)


class Sessions:
    """The SDK's session manager, run for the life of the process in a task of its own:
    daphne sends no ASGI lifespan, so it starts with the first request."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self.lock = asyncio.Lock()
        self.task: asyncio.Task[None] | None = None

    async def started(self) -> StreamableHTTPSessionManager:
        async with self.lock:
            if self.manager is None:
                manager = StreamableHTTPSessionManager(
                    app=server, stateless=True, json_response=True
                )
                ready = asyncio.Event()
                self.task = asyncio.create_task(self._run(manager, ready))
                await ready.wait()
                self.manager = manager
        return self.manager

    async def _run(self, manager: StreamableHTTPSessionManager, ready: asyncio.Event) -> None:
        async with manager.run():
            ready.set()
            await asyncio.Event().wait()


sessions = Sessions()


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


def _upstream(name: str) -> Upstream | None:
    return Upstream.objects.filter(name=name).first()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = dict(scope.get("headers", []))
    header = headers.get(b"authorization", b"").decode("latin-1")
    caller = await blocking(bearer)(header)
    user = caller.user
    name = scope["path"][len(PATH_PREFIX) :].rstrip("/")
    if user is None or not user.is_authenticated:
        response = refusal(
            401, UNAUTHENTICATED, caller.refusal or "Send Authorization: Bearer <token>."
        )
    elif not scopes.allows(user, SCOPE):
        response = refusal(
            403, PERMISSION_DENIED, f"This token lacks the scope this needs: {SCOPE}.", scope=SCOPE
        )
    elif not await blocking(user.has_perm)("agents.add_thread"):
        response = refusal(403, PERMISSION_DENIED, "You do not have permission to do this.")
    elif "/" in name or (upstream := await blocking(_upstream)(name)) is None:
        response = refusal(404, NOT_FOUND, f"No MCP server named {name!r} is behind this gateway.")
    else:
        raw = header.partition(" ")[2].strip()
        _caller.set(Caller(upstream, user, Credential(user.pk, token_digest=digest(raw))))
        manager = await sessions.started()
        await manager.handle_request(scope, receive, send)
        return
    await response(scope, receive, send)
