"""The per-agent cap on pending requests: a run is not started for an agent that already has
MAX_PENDING_PER_AGENT requests waiting for a person.

What counts: the pending suspensions of the agent's runs, and its runs still working with
none pending (each may yet ask; without them, runs started together would all find the count
below the cap and overshoot it together). Starts for one agent take their turn: on PostgreSQL
a lock on the agent's row (FOR NO KEY UPDATE, so the new thread's foreign key check does not
wait on it), on SQLite the write lock every transaction takes first (gateway.settings:
IMMEDIATE). The count is read after the turn is taken and the thread is written in the same
transaction, so N starts at once never admit more than the cap allows.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from access.ratelimits import Limited
from agents.models import AgentDefinition, Suspension, Thread
from infra.compiled import sql_of

# Retry-After when nothing pending has a deadline sooner: a decision frees a place any time.
RETRY_AFTER = 30


def waiting(agent: AgentDefinition, up_to: int) -> int:
    """How many of `agent`'s requests count against the cap, counted up to `up_to`."""
    pending = Suspension.objects.filter(thread__agent=agent, status=Suspension.Status.PENDING)
    # An outside agent's run (agents.external) is always `running` here: only its pending
    # requests count.
    working = Thread.objects.filter(
        agent=agent, status=Thread.Status.RUNNING, external_run_id=""
    ).exclude(
        Exists(Suspension.objects.filter(thread=OuterRef("pk"), status=Suspension.Status.PENDING))
    )
    # Both counts in one statement, each stopping at `up_to` (a LIMIT in a subquery, which
    # the ORM's count() of a sliced union cannot give on SQLite).
    parts = [sql_of(qs.values("pk")[:up_to]) for qs in (pending, working)]
    with connections[Thread.objects.db].cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT COUNT(*) FROM ({}) a), (SELECT COUNT(*) FROM ({}) b)".format(
                *(sql for sql, _ in parts)
            ),
            [*parts[0][1], *parts[1][1]],
        )
        counted, working_count = cursor.fetchone()
    return min(up_to, counted + working_count)


def retry_after(agent: AgentDefinition) -> int:
    """Seconds until the soonest deadline among the agent's pending requests, at most
    RETRY_AFTER: by then one place at least is free, unless more came."""
    soonest = (
        Suspension.objects.filter(
            thread__agent=agent, status=Suspension.Status.PENDING, expires_at__isnull=False
        )
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first()
    )
    if soonest is None:
        return RETRY_AFTER
    left = (soonest - timezone.now()) / timedelta(seconds=1)
    return max(1, min(RETRY_AFTER, int(left) + 1))


@contextmanager
def admitted(agent: AgentDefinition) -> Iterator[None]:
    """A transaction in which a run of `agent` may start: raises Limited (429) when the agent
    has MAX_PENDING_PER_AGENT requests waiting (0: no cap). Start the run inside it."""
    cap = settings.MAX_PENDING_PER_AGENT
    with transaction.atomic():
        if cap > 0:
            # The agent's turn (see the module's docstring); a no-op on SQLite.
            turn = AgentDefinition.objects.select_for_update(no_key=True).filter(pk=agent.pk)
            list(turn.values_list("pk", flat=True))
            if waiting(agent, cap) >= cap:
                raise Limited(
                    "too_many_pending",
                    f"{agent.name} already has {cap} requests waiting for a person "
                    f"(MAX_PENDING_PER_AGENT); try again once some are decided.",
                    retry_after(agent),
                )
        yield
