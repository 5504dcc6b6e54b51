"""Requests raised through the engine from an agent file with a ladder, for the notify tests."""

from typing import Any

from django.contrib.auth.models import Group

from access.permissions import REVIEWERS
from agents import starting
from agents.engine import Engine
from agents.models import AgentDefinition, Suspension, Thread
from tests.conftest import operator

PAYER = """
agents:
  - name: payer
    model: scripted
    tools: [transfer_funds, displayConfirmation]
    reminders: [10m, 2m]
    escalate_to: leads
    escalate_at: 2
    tool_overrides:
      transfer_funds: {timeout: 1200%(transfer)s}
    script:
      - text: Two payments; please confirm both.
        tool_calls:
          - {name: transfer_funds, input: {from_account: A-1, to_account: B-2, amount: 200}}
          - {name: transfer_funds, input: {from_account: A-1, to_account: C-3, amount: 300}}
      - text: Done.
"""


def leads(*members: Any) -> Group:
    """The group requests escalate to; its members may open threads and decide (the
    reviewers' permissions), though they are not reviewers."""
    group, _ = Group.objects.get_or_create(name="leads")
    group.permissions.add(*reviewers().permissions.all())
    group.user_set.add(*members)
    return group


def agent_file(transfer: str = "") -> str:
    """The payer agent; `transfer` adds to transfer_funds' overrides (", reminders: [30s]")."""
    return PAYER % {"transfer": transfer}


def raise_group(user: Any, engine: Engine | None = None) -> tuple[Thread, list[Suspension]]:
    """Start the payer and run it until it waits for its two transfers."""
    # Started by the operator: whoever starts a run may not decide it (four eyes).
    thread = starting.start_thread(AgentDefinition.objects.get(name="payer"), "pay", operator())
    (engine or Engine()).advance(thread.pk)
    thread.refresh_from_db()
    assert thread.status == Thread.Status.SUSPENDED
    return thread, list(thread.suspensions.order_by("created_at", "id"))


def emailed(*users: Any) -> None:
    for user in users:
        user.email = f"{user.username}@example.com"
        user.save(update_fields=["email"])


def reviewers() -> Group:
    return Group.objects.get(name=REVIEWERS)
