"""A real upstream MCP server for the tests: `python -m tests.mcp_gateway.upstream PORT LOG`.

`read_note` only reads (readOnlyHint); `delete_file` is destructive and appends one JSON line
per call to LOG (its arguments, the Authorization header and session id it was sent and the
call's `_meta`),
so a test counts the side effects (a path under /slow/ then takes 30 s). `confirm_name` asks
its client for input (`elicitation/create`, form mode) and returns what it was answered;
`sign_in` asks it to visit a URL (URL mode); `choose_name`, last, asks as the SDK's resolvers
do, in the way of the revision the client speaks.

The server is stateful and answers over SSE: the SDK sends a server-initiated request such
as `elicitation/create` only on a session's stream (a stateless or JSON-only transport has
no back-channel for it and fails the tool)."""

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp_types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("files")
LOG = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("upstream.log")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Read a note."""
    return f"note {name}: hello"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
async def delete_file(path: str, ctx: Context) -> str:
    """Delete a file."""
    headers = ctx.headers or {}
    meta = ctx.request_context.meta
    line = {
        "path": path,
        "authorization": headers.get("authorization", ""),
        "session": headers.get("mcp-session-id", ""),
        "meta": meta.model_dump(mode="json", by_alias=True)
        if hasattr(meta, "model_dump")
        else meta,
    }
    with LOG.open("a") as f:
        f.write(json.dumps(line) + "\n")
    if path.startswith("/slow/"):
        # A long deletion: a test kills the gateway's worker while it waits for this.
        await anyio.sleep(30)
    return f"deleted {path}"


class Confirmation(BaseModel):
    name: str
    overwrite: bool


# Read-only as far as the gateway knows (so it passes without a request of its own): it only
# asks, and says what it was told.
@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def confirm_name(suggested: str, ctx: Context) -> str:
    """Ask the user to confirm a note's name."""
    answer = await ctx.elicit(f"Save the note as {suggested}?", Confirmation)
    if answer.action == "accept":
        return f"accept {json.dumps(answer.data.model_dump(), sort_keys=True)}"
    return answer.action


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def sign_in(ctx: Context) -> str:
    """Ask the user to sign in on a page of the upstream's (URL-mode elicitation)."""
    answer = await ctx.elicit_url(
        "Sign in to <b>files</b>", "https://login.example.com/auth?x=1", "sign-in-1"
    )
    return answer.action


def ask_to_choose(suggested: str) -> Elicit[Confirmation]:
    return Elicit(f"Save the note as {suggested}?", Confirmation)


# Asks as the SDK's resolvers do: over the session on the 2025 revisions, with an
# `input_required` result on 2026-07-28 (the client answers, then calls again).
@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def choose_name(
    suggested: str,
    answer: Annotated[ElicitationResult[Confirmation], Resolve(ask_to_choose)],
) -> str:
    """Ask the user to choose a note's name, in either revision's way."""
    if answer.action == "accept":
        return f"chose {json.dumps(answer.data.model_dump(), sort_keys=True)}"
    return answer.action


def only_2025(app: Any) -> Any:
    """The app as a server of the 2025 revisions only answers a request of a newer one: HTTP
    400, as the 1.x SDK's transport refuses an MCP-Protocol-Version it does not know."""

    async def refusing(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] == "http" and headers.get(b"mcp-protocol-version", b"") >= b"2026":
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "server-error",
                    "error": {
                        "code": -32600,
                        "message": "Bad Request: Unsupported protocol version",
                    },
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return refusing


if __name__ == "__main__":
    # A third argument, `json`: stateless, answering in JSON (no session: questions only as
    # `input_required` results, to a 2026-07-28 client); `2025`: the 2025 revisions only.
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    plain = mode == "json"
    app = server.streamable_http_app(stateless_http=plain, json_response=plain)
    if mode == "2025":
        app = only_2025(app)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
