"""The demo's MCP server, notes: `make run` (`manage.py serve --demo`) starts it on
127.0.0.1:9301, and demo/agents.yaml puts it behind the gateway at /mcp/notes.

Its notes live in memory, a few to start with, back on every start. `list_notes` and
`read_note` only read (readOnlyHint, which the declaration trusts: they pass at once);
`delete_note` deletes, and waits for a reviewer. Plain Python and the official MCP SDK, no
Django: `python -m demo.mcp_notes --port 9301`, or `--fd N` to serve a socket already
listening (serve opens it, so a port in use is said once, not retried)."""

import argparse
import asyncio
import socket
from types import FrameType

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


class QuietServer(uvicorn.Server):
    """uvicorn's server, asleep while nobody calls it. uvicorn's own main loop wakes ten times a
    second to see whether it should stop and to date its answers (2 ms of CPU a second, idle:
    issue 42); this one waits for the signal that stops it. Its answers carry no Date header,
    which nothing here reads (Config(date_header=False)), so nothing needs that tick."""

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await self.on_tick(0)  # sets the default headers, once
        if not self.should_exit:
            await self._stop.wait()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(self._stop.set)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT")
    where.add_argument("--fd", type=int, help="serve this listening socket")
    args = parser.parse_args()
    config = uvicorn.Config(
        server.streamable_http_app(),
        host="127.0.0.1",
        port=args.port or 0,
        log_level="warning",
        date_header=False,
    )
    sockets = [socket.socket(fileno=args.fd)] if args.fd is not None else None
    QuietServer(config).run(sockets=sockets)


if __name__ == "__main__":
    main()
