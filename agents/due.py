"""When the sweeper is next needed, for the clock (gateway.clock) that sleeps until then.

While anything is in motion (a thread or an agent instance that should run, a cancel waiting
for a tool) the sweeper runs every SWEEP_INTERVAL_SECONDS, as a stalled run must be found
within seconds. Otherwise nothing can fall due but what is stored with its time: a deadline,
a reminder or escalation, an input's timeout, a grant's end. The clock then sleeps until the
earliest of those, and at most SWEEP_IDLE_SECONDS, so an idle gateway does not wake several
times a second. A deadline raised while it sleeps is timed by a task of its own (a run raises
it, so the clock may be asleep: agents.dispatch.at_deadline).

Every query below reads one of the partial indexes the sweeper's own queries use."""

from datetime import datetime

from django.conf import settings
from django.utils import timezone

from agents.models import Event, Grant, StackFrame, Suspension, Thread
from agents.reviewing.asking import ASKED

S = Suspension.Status


def in_motion() -> bool:
    """A thread or instance that should run, a cancel still settling, or a request whose
    reviewing model has not answered: the sweeper's requeue_stalled, settle_abandoned and
    settle_unanswered may have work at any moment."""
    return (
        Thread.objects.filter(status__in=[Thread.Status.RUNNING, Thread.Status.CANCELLING])
        .values("pk")
        .exists()
        or StackFrame.objects.filter(instance__gt=0, status=StackFrame.Status.ACTIVE)
        .values("pk")
        .exists()
        or Suspension.objects.filter(status=S.PENDING, review__outcome=ASKED).values("pk").exists()
    )


def next_due() -> datetime | None:
    """The earliest stored time at which the sweeper has something to do, if any."""
    found = [
        Suspension.objects.filter(status=S.PENDING, expires_at__isnull=False)
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first(),
        Suspension.objects.filter(
            status=S.PENDING, next_step_at__isnull=False, ignored_at__isnull=True
        )
        .order_by("next_step_at")
        .values_list("next_step_at", flat=True)
        .first(),
        Thread.objects.filter(status=Thread.Status.WAITING_INPUT, input_expires_at__isnull=False)
        .order_by("input_expires_at")
        .values_list("input_expires_at", flat=True)
        .first(),
        Grant.objects.filter(ended_at__isnull=True, revoked_at__isnull=True)
        .order_by("expires_at")
        .values_list("expires_at", flat=True)
        .first(),
    ]
    times = [t for t in found if t is not None]
    return min(times) if times else None


def plan(now: datetime | None = None) -> tuple[float, bool]:
    """(seconds until the sweeper should run again, whether anything is in motion):
    SWEEP_INTERVAL_SECONDS while anything is, else until the next stored due time, at most
    SWEEP_IDLE_SECONDS."""
    if in_motion():
        return float(settings.SWEEP_INTERVAL_SECONDS), True
    idle = max(float(settings.SWEEP_IDLE_SECONDS), float(settings.SWEEP_INTERVAL_SECONDS))
    due = next_due()
    if due is None:
        return idle, False
    now = now or timezone.now()
    return min(max((due - now).total_seconds(), 0.0), idle), False


def last_event_id() -> int:
    """The newest event's id (0 for none): the channels' sweeps have nothing new to fan out
    while it stays the same."""
    return Event.objects.order_by("-id").values_list("id", flat=True).first() or 0
