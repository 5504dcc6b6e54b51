"""A past written straight into the rows: requests raised and closed at chosen times, for
the tests and screenshots of the metrics, whose figures depend on when things happened."""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread

S = Suspension.Status


@dataclass
class Made:
    """What `request` wrote: the rows the figures come from."""

    kind: str
    raised_at: datetime
    closed_at: datetime | None
    outcome: str  # answered, timed_out, cancelled, pending
    suspension: Suspension | None = None
    thread: Thread | None = None


def _thread(agent: str) -> tuple[Thread, StackFrame]:
    definition, _ = AgentDefinition.objects.get_or_create(
        name=agent, defaults={"model": "scripted"}
    )
    thread = Thread.objects.create(
        agent=definition, title="history", status=Thread.Status.SUSPENDED
    )
    frame = StackFrame.objects.create(thread=thread, agent_name=agent, model="scripted")
    return thread, frame


def suspension(
    agent: str,
    raised_at: datetime,
    status: str = S.PENDING,
    after: float | None = None,
    tool: str = "transfer_funds",
    kind: str = Suspension.Kind.CONFIRMATION,
    resumed_after: float | None = None,
    tier: str | None = None,
) -> Made:
    """A suspension raised at `raised_at` and, unless pending, closed `after` seconds later
    with `status` (and resumed `resumed_after` seconds after that), by `tier` (agents.tiers;
    by default a person's approval or rejection, the deadline's timeout)."""
    thread, frame = _thread(agent)
    s = Suspension.objects.create(
        thread=thread,
        frame=frame,
        group=thread.pk,
        agent_name=agent,
        tool_use_id=f"toolu_{thread.pk.hex[:12]}",
        tool_name=tool,
        kind=kind,
        status=status,
    )
    closed = raised_at + timedelta(seconds=after) if status != S.PENDING else None
    resumed = closed + timedelta(seconds=resumed_after) if closed and resumed_after else None
    if tier is None:
        tier = {S.APPROVED: "person", S.REJECTED: "person", S.TIMED_OUT: "deadline"}.get(status, "")
    Suspension.objects.filter(pk=s.pk).update(
        created_at=raised_at, decided_at=closed, resumed_at=resumed, tier=tier
    )
    s.refresh_from_db()
    outcome = {S.APPROVED: "answered", S.REJECTED: "answered"}.get(status, status)
    return Made(kind, raised_at, closed, outcome, suspension=s, thread=thread)


def wait(agent: str, raised_at: datetime, closing: str | None = None, after: float = 0) -> Made:
    """A wait for a message (INPUT_REQUIRED) raised at `raised_at`, closed `after` seconds
    later by an event of type `closing` (INPUT_PROVIDED, INPUT_TIMEOUT, THREAD_CANCELLED), or
    still open."""
    thread, _ = _thread(agent)
    # Written with their own times: events are never updated (a trigger refuses it).
    Event.objects.create(
        thread=thread,
        type=Event.Type.INPUT_REQUIRED,
        payload={"agent": agent},
        created_at=raised_at,
    )
    closed = None
    if closing:
        closed = raised_at + timedelta(seconds=after)
        Event.objects.create(thread=thread, type=closing, payload={}, created_at=closed)
    # A thread waits for input exactly while its last wait is open.
    status = Thread.Status.WAITING_INPUT if closing is None else Thread.Status.COMPLETED
    Thread.objects.filter(pk=thread.pk).update(status=status)
    outcome = {
        None: "pending",
        Event.Type.INPUT_PROVIDED: "answered",
        Event.Type.INPUT_TIMEOUT: "timed_out",
    }.get(closing, "cancelled")
    return Made("message", raised_at, closed, outcome, thread=thread)


def day(now: datetime, seed: int = 11) -> list[Made]:
    """A busy day for four agents: requests through the day, most answered within minutes,
    some timed out or cancelled, a few still pending, a slow afternoon for one agent."""
    rng = random.Random(seed)
    agents = ["payments", "ops-cleanup", "research", "support"]
    made: list[Made] = []
    for hour in range(24, 0, -1):
        for _ in range(rng.randint(2, 9)):
            agent = rng.choice(agents)
            raised = now - timedelta(hours=hour) + timedelta(seconds=rng.uniform(0, 3600))
            roll = rng.random()
            slow = agent == "research" and 6 <= hour <= 10
            if roll < 0.08:
                made.append(suspension(agent, raised, S.TIMED_OUT, after=900, resumed_after=0.05))
            elif roll < 0.11:
                made.append(suspension(agent, raised, S.CANCELLED, after=rng.uniform(5, 60)))
            elif roll < 0.2:
                made.append(
                    wait(agent, raised, Event.Type.INPUT_PROVIDED, after=rng.uniform(20, 400))
                )
            elif hour <= 2 and roll > 0.85:
                made.append(suspension(agent, raised))
            else:
                status = S.APPROVED if rng.random() < 0.8 else S.REJECTED
                after = rng.lognormvariate(4.2 if slow else 3.2, 0.8)
                made.append(
                    suspension(
                        agent,
                        raised,
                        status,
                        after=min(after, 880),
                        resumed_after=rng.uniform(0.01, 0.3),
                        kind=rng.choice(["confirmation", "confirmation", "input"]),
                        tool="transfer_funds" if agent == "payments" else "delete_records",
                    )
                )
    return made


def any_of(made: list[Made], **match: Any) -> list[Made]:
    return [m for m in made if all(getattr(m, k) == v for k, v in match.items())]


def tiers(now: datetime, reviewer: Any) -> None:
    """The last hour of the tiers of review, for the metrics page's tables: requests a rule, a
    grant, a history rule and a model decided; people's decisions after a shadow model's
    recommendation; and `reviewer`'s decisions with the moment each card was shown."""
    from presence.models import CardView

    for n, tier in enumerate(["rule", "rule", "grant", "history", "model", "model", "model"]):
        suspension("payments", now - timedelta(minutes=50 - n), S.APPROVED, after=1, tier=tier)
    shadowed = [("approve", S.APPROVED)] * 6 + [("approve", S.REJECTED), ("reject", S.REJECTED)]
    shadowed += [("escalate", S.APPROVED), ("reject", S.APPROVED)]
    for n, (said, status) in enumerate(shadowed):
        made = suspension("payments", now - timedelta(minutes=40 - n), status, after=2 + 5 * n)
        assert made.suspension is not None and made.closed_at is not None
        s = made.suspension
        review = {"model": "scripted", "mode": "shadow", "recommendation": said, "reason": "r"}
        Suspension.objects.filter(pk=s.pk).update(
            review=review, decided_by=reviewer, decided_by_name=reviewer.username
        )
        # Shown a second after it was raised: the quick ones were approved within 2 s.
        CardView.objects.create(
            suspension=s, user=reviewer, first_shown_at=made.raised_at + timedelta(seconds=1)
        )
