"""The demo `make run` serves (`manage.py serve --demo`): the demo agents loaded, the demo
accounts reset, and the socket of the demo MCP server (demo/mcp_notes.py) opened where
demo/agents.yaml declares it, before the processes start."""

import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from django.conf import settings

from agents.agentfiles import load
from demo import accounts
from mcp_gateway import upstreams
from mcp_gateway.models import Upstream

AGENTS = Path(__file__).resolve().parent / "agents.yaml"
NOTES = "notes"


@dataclass
class Demo:
    changed: dict[str, list[str]]  # the agents loading demo/agents.yaml created, updated
    logins: list[accounts.Login]
    notes_url: str  # the demo MCP server's address, as declared
    notes: socket.socket | None = field(default=None)  # its listening socket, if it could open
    notes_refused: str = ""  # why not, in a person's words

    def notes_command(self) -> list[str]:
        assert self.notes is not None
        return [sys.executable, "-m", "demo.mcp_notes", "--fd", str(self.notes.fileno())]


def prepare() -> Demo:
    """Load the demo agents, reset the demo accounts, open the demo MCP server's socket."""
    changed: dict[str, list[str]] = {}
    for agent, change in load([AGENTS]):
        if change:
            changed.setdefault(change, []).append(agent.name)
    logins = [accounts.reviewer(), accounts.admin()]
    url = notes_url()
    if settings.DEMO_MCP_PORT:
        # Elsewhere than declared (tests running side by side): the upstream follows.
        url = urlsplit(url)._replace(netloc=f"127.0.0.1:{settings.DEMO_MCP_PORT}").geturl()
        notes = Upstream.objects.get(name=NOTES)
        notes.url = url
        notes.save(update_fields=["url"])
        upstreams.mirror(notes)
    demo = Demo(changed, logins, url)
    address = urlsplit(url)
    try:
        demo.notes = socket.create_server((address.hostname, address.port))
    except OSError as e:
        demo.notes_refused = f"{address.hostname}:{address.port} is in use ({e.strerror})"
    else:
        demo.notes.set_inheritable(True)
    return demo


def notes_url() -> str:
    """Where demo/agents.yaml declares the demo MCP server: the one place that says it."""
    declared = yaml.safe_load(AGENTS.read_text())["mcp_servers"]
    return next(server["url"] for server in declared if server["name"] == NOTES)
