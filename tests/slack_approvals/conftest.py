"""Slack fixtures: the local Web API stand-in, Slack turned on against it, and a request
raised through the engine by an agent whose file routes it to Slack.

The worker is a process of its own that reads its settings from the environment when it
starts, so the stand-in's port and the Slack settings are put in the environment here, at
collection, before any test starts the session's worker; the `slack` fixture serves that port
and gives this process the same settings.
"""

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from slack_approvals import fanout
from tests.conftest import operator
from tests.slack_approvals.standin import SlackStandIn

TOKEN = "xoxb-1-standin-token"
SECRET = "standin-signing-secret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = int(os.environ.setdefault("SLACK_STANDIN_PORT", str(_free_port())))
WORKER_ENV = {
    "SLACK_BOT_TOKEN": TOKEN,
    "SLACK_SIGNING_SECRET": SECRET,
    "SLACK_API_URL": f"http://127.0.0.1:{PORT}/api/",
}
for _name, _value in WORKER_ENV.items():
    os.environ.setdefault(_name, _value)

PAYER = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds]
    slack: {channel: C0PAYMENTS%(dm)s}
    script:
      - text: One payment; please confirm.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: "%(to)s", amount: 200}}
      - text: Done.
"""


def agent_file(to: str = "B-2", dm: str = "") -> str:
    """The payer agent, routed to #payments; `dm` adds to its route (", dm: [alice]")."""
    return PAYER % {"to": to, "dm": dm}


@pytest.fixture
def slack(settings: Any) -> Iterator[SlackStandIn]:
    """The stand-in, served on the port the worker was told, with Slack on against it."""
    standin = SlackStandIn(port=PORT).start()
    for name, value in WORKER_ENV.items():
        setattr(settings, name, value)
    yield standin
    standin.stop()


def raise_request(engine: Engine | None = None, starter: Any = None) -> Suspension:
    """Start the payer (as the operator, who decides nothing: four eyes) and run it until it
    waits."""
    payer = AgentDefinition.objects.get(name="payer")
    thread = starting.start_thread(payer, "pay", starter or operator())
    (engine or Engine()).advance(thread.pk)
    thread.refresh_from_db()
    assert thread.status == Thread.Status.SUSPENDED
    return thread.suspensions.get()


def deliver() -> list[str]:
    """What the nudge, beat and the worker do: events to deliveries, then each pending one
    sent now; returns what became of those that were due."""
    from slack_approvals import outbox
    from slack_approvals.models import SlackDelivery

    fanout.fan_out_all()
    pending = SlackDelivery.objects.filter(status=SlackDelivery.Status.PENDING).order_by("id")
    results = [outbox.send(pk) for pk in pending.values_list("pk", flat=True)]
    return [str(r) for r in results if r]
