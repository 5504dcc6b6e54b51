"""The demo's MCP server, notes: `make run` (`manage.py serve --demo`) starts it on
127.0.0.1:9301, and demo/agents.yaml puts it behind the gateway at /mcp/notes.

Its notes live in memory, a few to start with, back on every start. `list_notes` and
`read_note` only read (readOnlyHint, which the declaration trusts: they pass at once);
`delete_note` deletes, and waits for a reviewer. Plain Python and the official MCP SDK, no
Django: `python -m demo.mcp_notes --port 9301`, or `--fd N` to serve a socket already
listening (serve opens it, so a port in use is said once, not retried)."""

import argparse
import socket

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

STARTING_NOTES = {
    "welcome": "This note comes from the demo MCP server behind the gateway.",
    "groceries": "Milk, bread, coffee.",
    "launch": "Ship version 2.0 on Friday; tell the partners first.",
}
notes = dict(STARTING_NOTES)
# Its warnings only: the SDK says at INFO that it started, and more on every call.
server = MCPServer("notes", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def list_notes() -> list[str]:
    """The names of the notes."""
    return sorted(notes)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Read a note by its name."""
    if name not in notes:
        raise ToolError(f"No note named {name!r}; list_notes names them.")
    return notes[name]


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_note(name: str) -> str:
    """Delete a note by its name."""
    if notes.pop(name, None) is None:
        raise ToolError(f"No note named {name!r}; list_notes names them.")
    return f"Deleted the note {name!r}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")
    where.add_argument("--fd", type=int, help="serve this listening socket")
    args = parser.parse_args()
    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=args.port or 0, log_level="warning"
    )
    sockets = [socket.socket(fileno=args.fd)] if args.fd is not None else None
    uvicorn.Server(config).run(sockets=sockets)


if __name__ == "__main__":
    main()
