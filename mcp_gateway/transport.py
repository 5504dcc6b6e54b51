"""The SDK's streamable HTTP transport for /mcp, run for the life of the process.

Two session managers, both stateless: one answers each POST with one JSON body (the common
case, and the cheaper one), the other with an SSE stream, for a call whose client asked for
progress (a `progressToken` in its `_meta`): notifications need a stream to travel on, and the
SDK drops them in JSON mode. Which one a request goes to is read from its body, read here whole
(bounded by DATA_UPLOAD_MAX_MEMORY_SIZE, as Django bounds the API's) and handed on unchanged.

daphne sends no ASGI lifespan, so the managers start with the first request, each in a task of
its own.
"""

import asyncio
import json
from typing import Any

from django.conf import settings
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse

TOO_LARGE = -32600  # JSON-RPC "invalid request"


class Sessions:
    def __init__(self) -> None:
        self.managers: dict[bool, StreamableHTTPSessionManager] = {}
        self.lock = asyncio.Lock()
        self.tasks: list[asyncio.Task[None]] = []

    async def started(self, server: Server[Any], streamed: bool) -> StreamableHTTPSessionManager:
        async with self.lock:
            if streamed not in self.managers:
                manager = StreamableHTTPSessionManager(
                    app=server, stateless=True, json_response=not streamed
                )
                ready = asyncio.Event()
                self.tasks.append(asyncio.create_task(self._run(manager, ready)))
                await ready.wait()
                self.managers[streamed] = manager
        return self.managers[streamed]

    async def _run(self, manager: StreamableHTTPSessionManager, ready: asyncio.Event) -> None:
        async with manager.run():
            ready.set()
            await asyncio.Event().wait()


sessions = Sessions()


def wants_progress(body: bytes) -> bool:
    """Does this POST carry a request whose client asked for progress notifications?"""
    if b"progressToken" not in body:
        return False  # the common case, without parsing
    try:
        message = json.loads(body)
    except ValueError:
        return False  # the SDK answers a parse error
    messages = message if isinstance(message, list) else [message]
    return any(
        isinstance(m, dict)
        and isinstance(m.get("params"), dict)
        and isinstance(m["params"].get("_meta"), dict)
        and m["params"]["_meta"].get("progressToken") is not None
        for m in messages
    )


async def body(scope: dict[str, Any], receive: Any, send: Any) -> bytes | None:
    """A POST's body, read whole; None when it was answered here instead (over
    DATA_UPLOAD_MAX_MEMORY_SIZE: 413) or its client left before it came."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went away before its body came
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if limit is not None and size > limit:
            response = JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": TOO_LARGE, "message": f"The body is over {limit} bytes."},
                },
                status_code=413,
            )
            await response(scope, receive, send)
            return None
        if not message.get("more_body"):
            return b"".join(chunks)


async def handle(
    server: Server[Any], scope: dict[str, Any], receive: Any, send: Any, read: bytes | None = None
) -> None:
    """Hand the request to the SDK, with the manager its body asks for; `read`: a POST's
    body, when it has been read already (`body`)."""
    if scope.get("method") != "POST":
        manager = await sessions.started(server, streamed=False)
        await manager.handle_request(scope, receive, send)
        return
    if read is None and (read := await body(scope, receive, send)) is None:
        return
    given = False

    async def replay() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": read, "more_body": False}
        result: dict[str, Any] = await receive()
        return result

    manager = await sessions.started(server, streamed=wants_progress(read))
    await manager.handle_request(scope, replay, send)
