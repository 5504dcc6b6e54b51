"""The reads every request makes besides the run's (agents.statements), compiled once per
process: the standing grants that may approve it when it is raised, and its thread's last
receipt, which its decision's receipt chains to.

Every blocking call asks whether a grant approves it (agents.grants.decide_by_grant), and
nearly always none does; every decision reads the chain's head (agents.receipts.signed). The
ORM built the same statements each time: the grants' read alone was a tenth of a worker's CPU
in the full cycle (bench/HISTORY.md, session 25). Compiled as agents.statements' are
(infra.compiled); the sentinels are values no real row has.
"""

import uuid
from datetime import UTC, datetime

from django.db.models import F, Q

from agents.models import Grant, Suspension
from infra.compiled import Compiled, fields

# No user has this id: a run started by nobody (the API's service calls) matches only the
# grants made for any requester, as `requester_id IS NULL` alone would.
NOBODY = 0

_CANDIDATES = Compiled(
    lambda agent, tool, now, thread, requester: (
        Grant.objects.filter(
            agent_name=agent,
            tool_name=tool,
            revoked_at__isnull=True,
            expires_at__gt=now,
            uses__lt=F("max_uses"),
        )
        .filter(Q(thread__isnull=True) | Q(thread_id=thread))
        .filter(Q(requester__isnull=True) | Q(requester_id=requester))
        .order_by("expires_at", "created_at")
        .values_list(*fields(Grant))
    ),
    "\x00agent",
    "\x00tool",
    datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC),
    uuid.UUID(int=1),
    -7331,
)


def live_grants(
    agent_name: str, tool_name: str, now: datetime, thread_id: uuid.UUID, requester: int | None
) -> list[Grant]:
    """The grants in force for this agent's tool, in this run and for this requester (or for
    any), soonest to end first: the candidates `decide_by_grant` tries in turn."""
    who = NOBODY if requester is None else requester
    return _CANDIDATES.instances(Grant, agent_name, tool_name, now, thread_id, who)


_LAST_RECEIPT = Compiled(
    lambda thread: (
        Suspension.objects.filter(thread_id=thread, receipt_seq__isnull=False)
        .order_by("-receipt_seq")
        .values_list("receipt_seq", "receipt")[:1]
    ),
    uuid.UUID(int=1),
)


def last_receipt(thread_id: uuid.UUID) -> tuple[int, str] | None:
    """The place in its thread's chain and the receipt of the thread's last signed decision."""
    rows = _LAST_RECEIPT.rows(thread_id)
    return (rows[0][0], rows[0][1]) if rows else None
