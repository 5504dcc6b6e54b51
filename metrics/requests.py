"""Requests: each time an agent stopped for a person, and how that ended, read from the rows.

Two things are requests:

- a suspension (one blocking tool call): kind `confirmation` (an approval) or `input` (an
  `ask_user` question). Raised at `created_at`; closed at `decided_at`, with its status.
- a wait for a message (the agent answered with text and waits for the user's reply): kind
  `message`, tool "". Raised by its INPUT_REQUIRED event; closed by the first later event of
  its thread that is an INPUT_PROVIDED (answered), an INPUT_TIMEOUT (timed out), or a
  THREAD_CANCELLED or THREAD_FAILED (cancelled).

A suspension a rule, a standing grant, a rule over history or a reviewing model decided
(agents.tiers) never waited for a person: it is no request here (/api/metrics/tiers counts it).

Outcomes: `answered` (a person approved, rejected, answered or replied), `timed_out` (the
deadline or input timeout came first, whatever the deadline then did), `cancelled` (the run was
cancelled while it waited), `pending` (still open). The response time of an answered request is
closed − raised.
"""

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Window,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Lag

from agents.models import Event, Suspension
from agents.tiers import Tier

S = Suspension.Status
E = Event.Type

# A suspension's status as an outcome.
OUTCOMES = {
    S.APPROVED: "answered",
    S.REJECTED: "answered",
    S.RESPONDED: "answered",
    S.TIMED_OUT: "timed_out",
    S.CANCELLED: "cancelled",
    S.PENDING: "pending",
}
# The events that close a wait for a message, and the outcome each means.
CLOSING = {
    E.INPUT_PROVIDED: "answered",
    E.INPUT_TIMEOUT: "timed_out",
    E.THREAD_CANCELLED: "cancelled",
    E.THREAD_FAILED: "cancelled",
}
MESSAGE = "message"
# The suspensions that waited for a person: all but those a machine's tier decided.
FOR_A_PERSON = ~Q(tier__in=[Tier.RULE, Tier.GRANT, Tier.HISTORY, Tier.MODEL])


@dataclass(frozen=True)
class Request:
    agent: str
    kind: str  # confirmation, input, message
    tool: str
    raised_at: datetime
    closed_at: datetime | None
    outcome: str  # answered, timed_out, cancelled, pending

    @property
    def response_seconds(self) -> float | None:
        """How long a person took to answer; None unless answered."""
        if self.outcome != "answered" or self.closed_at is None:
            return None
        return (self.closed_at - self.raised_at).total_seconds()


def waits() -> QuerySet[Event]:
    """INPUT_REQUIRED events, each with the asking agent and the type and time of the event
    that closed it (None while it is open). The closing event is found through
    agents_event's (thread, id) index, a few rows after the request."""
    closing = Event.objects.filter(
        thread_id=OuterRef("thread_id"), id__gt=OuterRef("id"), type__in=list(CLOSING)
    ).order_by("id")
    return Event.objects.filter(type=E.INPUT_REQUIRED).annotate(
        agent=KT("payload__agent"),
        closed_type=Subquery(closing.values("type")[:1]),
        closed_at=Subquery(closing.values("created_at")[:1]),
    )


def replies() -> QuerySet[Event]:
    """INPUT_REQUIRED and INPUT_PROVIDED events, each with the type (`asked_type`) and time
    (`asked_at`) of the one before it in its thread: an INPUT_PROVIDED after an INPUT_REQUIRED
    is the answer to that wait (`REPLY`). One pass over them in (thread, id) order, where a
    subquery per answer would cost an index lookup each, on every scrape."""
    before = {"partition_by": [F("thread_id")], "order_by": F("id").asc()}
    return Event.objects.filter(type__in=[E.INPUT_REQUIRED, E.INPUT_PROVIDED]).annotate(
        asked_type=Window(Lag("type"), **before),
        asked_at=Window(Lag("created_at"), **before),
    )


REPLY = Q(type=E.INPUT_PROVIDED, asked_type=E.INPUT_REQUIRED)


def _suspensions(rows: QuerySet[Suspension]) -> Iterator[Request]:
    fields = ("agent_name", "kind", "tool_name", "created_at", "decided_at", "status")
    for agent, kind, tool, raised, closed, status in rows.values_list(*fields).iterator(2000):
        yield Request(agent, kind, tool, raised, closed, OUTCOMES[status])


def _waits(rows: QuerySet[Event]) -> Iterator[Request]:
    fields = ("agent", "created_at", "closed_type", "closed_at")
    for agent, raised, closed_type, closed in rows.values_list(*fields).iterator(2000):
        outcome = CLOSING.get(closed_type, "pending")
        yield Request(agent or "", MESSAGE, "", raised, closed, outcome)


@dataclass
class Tally:
    """Requests by outcome, and the total response time of the answered ones."""

    outcomes: Counter[str]
    answered_seconds: float


def tally_raised_between(since: datetime, until: datetime) -> Tally:
    """The requests raised in [since, until), counted: suspensions by one aggregate query,
    waits one by one (there are far fewer)."""
    answered = [s for s, outcome in OUTCOMES.items() if outcome == "answered"]
    found = (
        Suspension.objects.filter(FOR_A_PERSON, created_at__gte=since, created_at__lt=until)
        .values_list("status")
        .annotate(
            n=Count("pk"),
            waited=Sum(
                ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField()),
                filter=Q(status__in=answered),
            ),
        )
        .order_by()
    )
    outcomes: Counter[str] = Counter()
    seconds = 0.0
    for status, n, waited in found:
        outcomes[OUTCOMES[status]] += n
        seconds += waited.total_seconds() if waited is not None else 0.0
    for request in _waits(waits().filter(created_at__gte=since, created_at__lt=until)):
        outcomes[request.outcome] += 1
        seconds += request.response_seconds or 0.0
    return Tally(outcomes, seconds)


def open_during(since: datetime, until: datetime) -> Iterator[Request]:
    """Every request raised before `until` and not closed before `since`: what a chart of
    [since, until) needs to count what was raised, closed and still open in it."""
    yield from _suspensions(
        Suspension.objects.filter(FOR_A_PERSON, created_at__lt=until).filter(
            Q(created_at__gte=since) | Q(status=S.PENDING) | Q(decided_at__gte=since)
        )
    )
    yield from _waits(
        waits()
        .filter(created_at__lt=until)
        .filter(Q(created_at__gte=since) | Q(closed_at__isnull=True) | Q(closed_at__gte=since))
    )
