"""A real upstream MCP server for the tests: `python -m tests.mcp_gateway.upstream PORT LOG`.

`read_note` only reads (readOnlyHint); `delete_file` is destructive and appends one JSON line
per call to LOG (its arguments, the Authorization header it was sent and the call's `_meta`),
so a test counts the side effects; a path under /slow/ then takes 30 s."""

import json
import sys
from pathlib import Path

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

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


if __name__ == "__main__":
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
