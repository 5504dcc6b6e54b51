"""Who may call /mcp, /mcp/<name> and /mcp/gateway, checked before the SDK sees a request.

A request whose Origin is not one of the site's, or whose Host the gateway does not serve,
is refused first (`foreign`); then the bearer token's user must hold the `runs` scope and the
permission to start work, and the upstream the path names must exist and take this caller
(`admit`). Refusals are JSON-RPC errors with the HTTP status an MCP client acts on.

An admission is reused for ADMITTED_SECONDS by the same token on the same path (or, for a
call on /mcp, to the server its tool's name names: mcp_gateway.proxy.resolver): an agent
calls tool after tool, and reading its token, user, permission and upstream for each call
was a third of the gateway's time on an immediate call (bench/README.md, issue 30). So a
revoked or expired token, a permission taken away or an upstream's `callers` changed is
refused within that second (an expiry at once: it is checked on every reuse), well inside
the CHECK_INTERVAL that an open socket may outlive its credentials (access.revocation).
Refusals are never reused: a caller refused is read again on its next request.
"""

import time
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from starlette.responses import JSONResponse

from access import scopes
from access.auth import bearer
from access.models import Scope, digest
from access.revocation import Credential
from infra.aio import blocking
from mcp_gateway import own_tools, statements, upstreams
from mcp_gateway.models import Upstream

# The scope a token needs: an MCP caller acts as an agent does, starting work of its own.
SCOPE = Scope.RUNS
# JSON-RPC errors of our own for the HTTP refusals (as a2a_server.rpc answers them).
UNAUTHENTICATED = -31401
PERMISSION_DENIED = -31403
NOT_FOUND = -31404
ADMITTED_SECONDS = 1.0
ADMITTED_MOST = 4096  # admissions kept at once; past it, all are forgotten

# (the Authorization header's digest, the path's name) -> (until, user, upstream)
_admitted: dict[tuple[str, str], tuple[float, Any, Upstream | None]] = {}


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


def _read(header: str, name: str) -> tuple[Any, JSONResponse | None, Upstream | None]:
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


async def admit(header: str, name: str) -> tuple[Any, JSONResponse | None, Upstream | None]:
    """The caller of a request with this Authorization header on /mcp/<name> (`name` "" for
    /mcp), the refusal to answer it with (None when admitted), and the upstream it names."""
    key = (digest(header), name)
    now = time.monotonic()
    kept = _admitted.get(key)
    if kept is not None and kept[0] > now:
        user = kept[1]
        token = getattr(user, "api_token", None)
        if token is None or token.refusal() is None:
            return user, None, kept[2]
    user, refused, upstream = await blocking(_read)(header, name)
    if refused is None:
        if len(_admitted) >= ADMITTED_MOST:
            _admitted.clear()
        _admitted[key] = (now + ADMITTED_SECONDS, user, upstream)
    else:
        _admitted.pop(key, None)
    return user, refused, upstream


def credential(user: Any, header: str) -> Credential:
    return Credential(user.pk, token_digest=digest(header.partition(" ")[2].strip()))
