"""A real upstream MCP server spoken to over stdio, for the tests:
`python -m tests.mcp_gateway.stdio_upstream` (the gateway starts it per call).

`read_note` only reads (readOnlyHint) and says the value of STDIO_NOTE_SIGNATURE from its
environment, so a test sees that a declared `env:` reached the process; `delete_file` is
destructive. Nothing may be printed to stdout but the protocol's messages."""

import os

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("local-files")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Read a note."""
    return f"note {name}: hello from stdio, {os.environ.get('STDIO_NOTE_SIGNATURE', 'unsigned')}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


if __name__ == "__main__":
    server.run(transport="stdio")
