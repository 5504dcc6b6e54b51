"""The JSON-RPC of a relayed call to an HTTP upstream, on the wire (mcp_gateway.plain_http
keeps the session or the stateless revision it is sent on): requests built, a stateless one
with what a session would have said; an answer read as JSON or as an SSE stream (events of at
most MAX_EVENT bytes, as the SDK's transport bounds them, parsed by httpx's own event parser,
`httpx2.EventSource`, as the SDK's are); on the stream, notifications passed over, a question
(`elicitation/create`) sent to the call's `asks` (mcp_gateway.elicitation) and its answer
POSTed back, a `ping` answered, any other request refused as the SDK's client refuses a
capability it did not declare; HTTP and JSON-RPC errors raised as MCPError, read as the SDK's
transport reads them.
"""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import aiohttp
import httpx2
import mcp_types as types
from mcp.client.session import ElicitationFnT
from mcp.shared.exceptions import MCPError
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION

MAX_EVENT = 1024 * 1024  # mcp.client.streamable_http.DEFAULT_MAX_SSE_EVENT_SIZE
CLIENT_INFO = {"name": "approval-gateway", "version": "1"}
ACCEPT = "application/json, text/event-stream"
CAPABILITIES = {"elicitation": {"form": {}, "url": {}}}
CONNECTION_CLOSED = -32000  # the SDK's code for an answer that can never come
DRAIN_SECONDS = 0.5
MAX_ERROR = 64 * 1024  # bytes of an HTTP error's body read for its JSON-RPC error


class Line(Protocol):
    """Where a message is POSTed: the upstream's address, the HTTP client, and the headers
    of its session (mcp_gateway.plain_http's line)."""

    url: str
    http: aiohttp.ClientSession

    def headers(self) -> dict[str, str]: ...


def request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def stateless_request(
    version: str, rid: int, method: str, params: dict[str, Any], name: str = ""
) -> tuple[dict[str, Any], dict[str, str]]:
    """A request of a stateless revision and its headers: it carries what a session would
    have said (the revision, the client's capabilities and name) in its `_meta`, and its
    method (and tool) in the routing headers."""
    meta = {
        types.PROTOCOL_VERSION_META_KEY: version,
        types.CLIENT_CAPABILITIES_META_KEY: CAPABILITIES,
        types.CLIENT_INFO_META_KEY: CLIENT_INFO,
    }
    headers = {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": version,
        "mcp-method": method,
    }
    if name:
        headers["mcp-name"] = name
    return request(rid, method, {**params, "_meta": meta}), headers


def refuses_version(error: MCPError) -> bool:
    """A refusal of the request's revision: the 2026 code, or the 1.x SDK's message (its
    code is only "invalid request")."""
    message = str(error.error.message).lower()
    return error.code == UNSUPPORTED_PROTOCOL_VERSION or "unsupported protocol version" in message


async def raise_for_status(response: aiohttp.ClientResponse) -> None:
    """Raise for an HTTP error: the JSON-RPC error in its body if it has one (a stateless
    server refuses that way), as the SDK's transport reads it, else the status."""
    if response.status < 400:
        return
    error: Any = None
    if response.content_type == "application/json":
        with contextlib.suppress(ValueError, AttributeError, aiohttp.ClientError):
            error = json.loads(await response.content.read(MAX_ERROR)).get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code") if isinstance(error.get("code"), int) else CONNECTION_CLOSED
        raise MCPError(code, error["message"][:MAX_ERROR])
    raise MCPError(CONNECTION_CLOSED, f"The upstream answered HTTP {response.status}.")


async def post(line: Line, body: dict[str, Any]) -> None:
    """POST a message that has no answer of its own (a notification, a reply)."""
    async with line.http.post(line.url, json=body, headers=line.headers()) as sent:
        await raise_for_status(sent)
        await sent.read()


async def _messages(response: aiohttp.ClientResponse) -> AsyncIterator[Any]:
    """The JSON-RPC messages of an answer: its JSON body, or its SSE stream's `message`s."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        yield json.loads(await response.read())
        return
    if kind != "text/event-stream":
        raise MCPError(CONNECTION_CLOSED, f"Unexpected content type: {kind or 'none'}")
    # httpx's event parser, over the bytes as they come.
    events = httpx2.Response(
        response.status,
        headers={"content-type": kind},
        content=response.content.iter_any(),
        request=httpx2.Request("POST", str(response.url)),
    )
    async for event in httpx2.EventSource(events, max_event_size=MAX_EVENT):
        if event.event == "message" and event.data:
            yield json.loads(event.data)


async def final(
    line: Line, response: aiohttp.ClientResponse, rid: int, asks: ElicitationFnT | None
) -> dict[str, Any]:
    """The result of request `rid` from its answer, the upstream's questions answered. The
    answer is read to its end (for DRAIN_SECONDS at most after the result): a connection
    left with unread bytes cannot serve the next call, and a new one costs more than the
    call (bench/README.md)."""
    read = _messages(response)
    async for message in read:
        if not isinstance(message, dict):
            continue
        if message.get("id") == rid and "method" not in message:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_SECONDS):
                    async for _ in read:
                        pass
            if isinstance(message.get("error"), dict):
                error = message["error"]
                raise MCPError(error.get("code", CONNECTION_CLOSED), str(error.get("message")))
            result = message.get("result")
            if not isinstance(result, dict):
                raise MCPError(CONNECTION_CLOSED, "The upstream's answer has no result.")
            return result
        if "method" in message and "id" in message:
            await _reply(line, message, asks)
    raise MCPError(CONNECTION_CLOSED, "SSE stream ended without a response")


async def _reply(line: Line, asked: dict[str, Any], asks: ElicitationFnT | None) -> None:
    """Answer a request the upstream sent its client in the middle of a call."""
    method, rid = asked["method"], asked["id"]
    answer: Any
    if method == "ping":
        answer = {}
    elif method == "elicitation/create" and asks is not None:
        try:
            params = types.ElicitRequest.model_validate(asked).params
        except ValueError as e:
            answer = types.ErrorData(code=types.INVALID_PARAMS, message=str(e)[:500])
        else:
            answer = await asks(None, params)  # type: ignore[arg-type]  # unused by ours
    else:
        answer = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
    kind = "error" if isinstance(answer, types.ErrorData) else "result"
    await post(line, {"jsonrpc": "2.0", "id": rid, kind: _dump(answer)})


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value
