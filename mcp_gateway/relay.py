"""The quick answer to the commonest request on /mcp/<name> and /mcp: a `tools/call` of an
immediate tool, relayed to the upstream and its result answered, without the SDK's server.

Written here rather than left to the SDK, for a reason measured (bench/README.md, issue 30):
the SDK's server builds for every POST what a long-lived session would build once (a
transport, a dispatcher and a task group on the 2025 revisions; a runner, a connection, an
OpenTelemetry span and a `tools/list` dispatch to check `Mcp-Param-*` headers on 2026-07-28),
which was half of the gateway's time on an immediate call whose budget is 3 ms over the
upstream's own. A relayed call needs none of it: one JSON request in, one JSON answer out.

So only a request that is plainly such a call is answered here, after the same checks the
SDK makes; anything else (a notification, a batch, another method, a tool unknown or gated,
arguments the schema refuses, a progress token, `Mcp-Param-*` headers, a version or header
the SDK would refuse) goes on to the SDK, which answers it, errors included. What the client
reads is the SDK's answer to the same request: the result shaped by the SDK's own per-revision
serializer, `resultType` and the `serverInfo` stamp on 2026-07-28, the same JSON-RPC envelope
and status; tests/mcp_gateway/test_relay.py compares the two answers byte for byte (parsed)
on both revisions, so an SDK that changes its answer fails that test, not a client.
"""

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.inbound import (
    MCP_PROTOCOL_VERSION_HEADER,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from access.revocation import Credential
from mcp_gateway import calls, forward, upstreams
from mcp_gateway.models import Upstream

METHOD = "tools/call"
PARAM_HEADER = b"mcp-param-"
# The keys a plain call's params may hold; another (a 2025-11-25 `task`) is the SDK's.
PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})
SERVER_INFO = types.SERVER_INFO_META_KEY


@dataclass(frozen=True)
class Call:
    """A plain tools/call: its JSON-RPC id, tool, arguments and protocol revision."""

    id: str | int
    tool: str
    arguments: dict[str, Any]
    version: str


def _declares_json(content_type: str) -> bool:
    """As the SDK's transport reads Content-Type (StreamableHTTPServerTransport's check):
    one part before any parameters is exactly application/json."""
    return any(p.strip() == "application/json" for p in content_type.split(";")[0].split(","))


def _accepts_json(accept: str) -> bool:
    """As the SDK reads Accept (mcp.server.streamable_http.check_accept_headers)."""
    types_ = [t.strip().split(";")[0].strip().lower() for t in accept.split(",")]
    return any(t in ("application/json", "application/*", "*/*") for t in types_)


def plain_call(raw_headers: list[tuple[bytes, bytes]], body: bytes) -> Call | None:
    """The call this POST plainly is, or None for anything the SDK should answer."""
    if b'"tools/call"' not in body or b"progressToken" in body:
        return None  # not a call, or one wanting notifications (an SSE answer)
    headers: dict[str, str] = {}
    for key, value in raw_headers:
        if key.startswith(PARAM_HEADER):
            return None  # the SDK checks Mcp-Param-* headers against the tool's schema
        headers[key.decode("latin-1")] = value.decode("latin-1")
    if not _declares_json(headers.get("content-type", "")):
        return None
    if not _accepts_json(headers.get("accept", "")):
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    rid, params = message.get("id"), message.get("params")
    if message.get("method") != METHOD or type(rid) not in (str, int):
        return None
    if not isinstance(params, dict) or not params.keys() <= PLAIN_PARAMS:
        return None
    tool, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(tool, str) or not isinstance(arguments, dict):
        return None
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version is None or version in HANDSHAKE_PROTOCOL_VERSIONS:
        # A 2025 client: the SDK's stateless transport serves it without a session.
        return Call(rid, tool, arguments, version or types.DEFAULT_NEGOTIATED_VERSION)
    if find_duplicated_routing_header(
        (k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers
    ):
        return None
    verdict = classify_inbound_request(message, headers=headers)
    if not isinstance(verdict, InboundModernRoute):
        return None
    return Call(rid, tool, arguments, verdict.protocol_version)


def answer_body(
    call: Call, result: types.CallToolResult, server_info: Callable[[], dict[str, Any]]
) -> bytes:
    """The JSON-RPC answer the SDK's server gives a tools/call that returned `result`."""
    shaped = methods.serialize_server_result(
        METHOD, call.version, result.model_dump(by_alias=True, mode="json", exclude_none=True)
    )
    if call.version in MODERN_PROTOCOL_VERSIONS:
        shaped.setdefault("resultType", "complete")
        meta = shaped.get("_meta")
        if meta is None:
            shaped["_meta"] = {SERVER_INFO: server_info()}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO) is None:
            shaped["_meta"] = {**meta, SERVER_INFO: server_info()}
    envelope = {"jsonrpc": "2.0", "id": call.id, "result": shaped}
    return json.dumps(envelope, separators=(",", ":")).encode()


# The upstream a tool's name on the endpoint calls, and the tool's own name there; None when
# the SDK is to answer (an unknown tool, or a server the caller may not call, on /mcp).
Resolve = Callable[[str], Awaitable[tuple[Upstream, str] | None]]


async def answered(
    resolve: Resolve,
    user: Any,
    credential: Credential,
    scope: dict[str, Any],
    body: bytes,
    send: Any,
    server_info: Callable[[], dict[str, Any]],
) -> bool:
    """Answer the request here when it is a plain call of an upstream's immediate tool with
    valid arguments; False (nothing sent) when the SDK is to answer it."""
    call = plain_call(scope.get("headers", []), body)
    if call is None:
        return False
    found = await resolve(call.tool)
    if found is None:
        return False
    upstream, tool = found
    listing = await forward.listing(upstream)
    described = listing.named.get(tool)
    if described is None or listing.problem(described, call.arguments) is not None:
        return False  # the SDK answers the error
    read_only = bool(described.annotations and described.annotations.read_only_hint)
    if not upstreams.is_immediate(upstream, described.name, read_only):
        return False
    result = await calls.immediate(upstream, user, described.name, call.arguments, credential)
    content = answer_body(call, result, server_info)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})
    return True
