"""Deadlines: timeouts applied, the ones due soon found, and stalled threads sent again."""

import time
from datetime import datetime, timedelta
from typing import Any, cast
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agents import dispatch, events, locks, receipts
from agents.groups import resume_if_group_done, resume_lanes
from agents.models import Event, StackFrame, Suspension, Thread
from agents.tiers import Tier

S = Suspension.Status


def _timeout_fields(s: Suspension, now: datetime) -> dict[str, Any]:
    approve = s.on_timeout == Suspension.OnTimeout.APPROVE
    return {
        "status": S.TIMED_OUT,
        "approved": approve,
        "reason": ("approved" if approve else "rejected") + " automatically at the deadline",
        "decided_at": now,
        "tier": Tier.DEADLINE,
    }


def _signed(s: Suspension, now: datetime) -> None:
    """The timed-out suspension's fields as _timeout_fields wrote them, and its receipt,
    signed by the clock (the caller holds the thread's lock)."""
    for name, value in _timeout_fields(s, now).items():
        setattr(s, name, value)
    receipts.issue(s, {"kind": "deadline"})


def _timeout_event(s: Suspension) -> Event:
    approve = s.on_timeout == Suspension.OnTimeout.APPROVE
    return Event(
        type=Event.Type.SUSPENSION_TIMEOUT,
        thread_id=s.thread_id,
        suspension_id=s.pk,
        payload={
            "tool": s.tool_name,
            "agent": s.agent_name,
            "status": S.TIMED_OUT,
            "approved": approve,
            "on_timeout": s.on_timeout,
            "expires_at": s.expires_at.isoformat() if s.expires_at else None,
            "receipt": s.receipt or None,
        },
    )


def time_out(s: Suspension, now: datetime) -> bool:
    """Apply a suspension's on_timeout; the caller holds the thread's lock."""
    n = Suspension.objects.filter(pk=s.pk, status=S.PENDING).update(**_timeout_fields(s, now))
    if not n:
        return False
    _signed(s, now)
    events.record_many([_timeout_event(s)])
    resume_if_group_done(s, now)
    return True


def expire_overdue(
    now: datetime | None = None, limit: int = 500, only: UUID | str | None = None
) -> int:
    """Apply on_timeout to pending suspensions past their deadline (or to the one named by
    `only`, if it is); returns how many. One transaction per batch of `limit`."""
    now = now or timezone.now()
    rows = Suspension.objects.filter(status=S.PENDING, expires_at__lte=now)
    if only is not None:
        rows = rows.filter(pk=only)
    # The runs it resumes are the clock's: behind any a person is waiting on (dispatch).
    with transaction.atomic(), dispatch.unattended():
        found = list(rows.order_by("expires_at").values_list("pk", "thread_id")[:limit])
        if not found:
            return 0
        # The threads' locks first, in one order (decide, cancel and the engine take a
        # thread's lock before its suspensions'), then the rows again: a decision that
        # committed meanwhile has taken them out of the pending set.
        locks.threads(t for _, t in found)
        overdue = list(rows.filter(pk__in=[pk for pk, _ in found]))
        if not overdue:
            return 0
        for on_timeout in Suspension.OnTimeout.values:
            same = [s for s in overdue if s.on_timeout == on_timeout]
            if same:
                Suspension.objects.filter(pk__in=[s.pk for s in same], status=S.PENDING).update(
                    **_timeout_fields(same[0], now)
                )
        for s in overdue:
            _signed(s, now)
        events.record_many([_timeout_event(s) for s in overdue])
        groups = {s.group for s in overdue}
        open_groups = set(
            Suspension.objects.filter(group__in=groups, status=S.PENDING).values_list(
                "group", flat=True
            )
        )
        done = [s for s in overdue if s.group not in open_groups]
        lanes = dict(
            StackFrame.objects.filter(pk__in={s.frame_id for s in done}).values_list(
                "pk", "lane_id"
            )
        )
        resume_lanes([lanes[s.frame_id] for s in done if lanes.get(s.frame_id)], now)
        complete = {s.thread_id for s in done if not lanes.get(s.frame_id)}
        runnable = list(
            Thread.objects.filter(pk__in=complete, status=Thread.Status.SUSPENDED).values_list(
                "pk", flat=True
            )
        )
        if runnable:
            Thread.objects.filter(pk__in=runnable).update(
                status=Thread.Status.RUNNING, runnable_since=now, updated_at=now
            )
            for pk in runnable:
                dispatch.enqueue_thread(pk)
    return len(overdue)


def expire_all_overdue(budget: float = 10.0, limit: int = 500) -> int:
    """Batches of expire_overdue until none is left or `budget` seconds have passed (the
    next sweep goes on from there)."""
    started = time.monotonic()
    done = 0
    while True:
        n = expire_overdue(limit=limit)
        done += n
        if n < limit or time.monotonic() - started > budget:
            return done


def due_soon(
    within: timedelta, now: datetime | None = None, limit: int = 500
) -> list[tuple[UUID, datetime]]:
    """Pending suspensions whose deadline falls in the coming `within`: (id, expires_at).
    Not the ones raised with a deadline SWEEP_IDLE_SECONDS away or sooner (and not extended
    since): each has had a task of its own from the start (agents.dispatch.at_deadline)."""
    now = now or timezone.now()
    timed_at_raise = timedelta(seconds=settings.SWEEP_IDLE_SECONDS)
    # expires_at is not null in these rows (filtered so).
    return cast(
        "list[tuple[UUID, datetime]]",
        list(
            Suspension.objects.filter(
                status=S.PENDING, expires_at__gt=now, expires_at__lte=now + within
            )
            .exclude(
                timeout__lte=timed_at_raise.total_seconds(),
                expires_at__lte=F("created_at") + timed_at_raise,
            )
            .order_by("expires_at")
            .values_list("pk", "expires_at")[:limit]
        ),
    )


# A thread enqueued again and still not taken waits twice as long before the next time, up to
# this many doublings: a long queue is not flooded with copies of the same thread.
MAX_REQUEUE_DOUBLINGS = 4


def requeue_stalled(now: datetime | None = None, limit: int = 200) -> int:
    """Enqueue again the runnable threads no worker has taken for a while (invariant 4).

    runnable_since is pushed into the future by the back-off: after its n-th re-enqueue a
    thread is due again STALLED_AFTER_SECONDS × 2^n later. A worker's claim resets both.
    """
    now = now or timezone.now()
    stalled = timedelta(seconds=settings.STALLED_AFTER_SECONDS)
    rows = list(
        Thread.objects.filter(status=Thread.Status.RUNNING, runnable_since__lt=now - stalled)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .order_by("runnable_since")
        .values_list("pk", "requeues")[:limit]
    )
    lanes = list(
        StackFrame.objects.filter(
            instance__gt=0,
            status=StackFrame.Status.ACTIVE,
            runnable_since__lt=now - stalled,
        )
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .order_by("runnable_since")
        .values_list("pk", "requeues")[:limit]
    )
    if not rows and not lanes:
        return 0
    # Behind the runs a person's decision sends: a long queue is what left these stalled.
    with transaction.atomic(), dispatch.unattended():
        for model, found in ((Thread, rows), (StackFrame, lanes)):
            for n in sorted({n for _, n in found}):
                wait = stalled * (2 ** min(n, MAX_REQUEUE_DOUBLINGS) - 1)
                model.objects.filter(pk__in=[pk for pk, m in found if m == n]).update(
                    runnable_since=now + wait, requeues=F("requeues") + 1
                )
        for pk, _ in rows:
            dispatch.enqueue_thread(pk)
        for frame_id, _ in lanes:
            dispatch.enqueue_instance(frame_id)
    return len(rows) + len(lanes)
