"""Cancelling a thread: its pending suspensions cancelled and its stack unwound at once, or,
when a tool is running, once the worker running it has recorded its result.

A tool that runs when the cancel arrives may already have acted (a transfer made, an email
sent), so the trail must say what it did: the thread is `cancelling` (THREAD_CANCELLING)
until its TOOL_RESULT is saved, and THREAD_CANCELLED follows it. The cancel itself never waits:
the worker holding the lease records the result (Checkpoints._tool_returned) and finishes the
cancel in the same transaction. A worker that dies during the tool stops renewing its lease;
the sweeper (settle_abandoned) or another cancel then finishes it, and THREAD_CANCELLED names
the tool whose result never came (`tools_unfinished`).
"""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from agents import events, locks
from agents.models import Event, StackFrame, Suspension, Thread

S = Suspension.Status
ACTIVE = StackFrame.Status.ACTIVE
CANCELLING = Thread.Status.CANCELLING


class AlreadyFinished(Exception):
    """The thread has already ended."""


def cancel_request(
    s: Suspension,
    user: Any,
    reason: str,
    now: datetime | None = None,
    decided_by: bool = True,
) -> bool:
    """Cancel one request if it is still pending, with its SUSPENSION_CANCELLED event: True
    when this call did. `decided_by`: the user cancelled it (False: it was withdrawn on their
    behalf, as an upstream's question whose call ended is, and names no one)."""
    now = now or timezone.now()
    by = getattr(user, "username", "") if decided_by else ""
    with transaction.atomic():
        n = Suspension.objects.filter(pk=s.pk, status=S.PENDING).update(
            status=S.CANCELLED,
            approved=False,
            reason=reason,
            decided_by=user if decided_by else None,
            decided_by_name=by,
            decided_at=now,
        )
        if n:
            events.record(
                Event.Type.SUSPENSION_CANCELLED,
                thread_id=s.thread_id,
                suspension_id=s.pk,
                actor=user,
                payload={
                    "tool": s.tool_name,
                    "agent": s.agent_name,
                    "status": S.CANCELLED,
                    "decided_by": by or None,
                    "reason": reason,
                },
            )
    return bool(n)


def cancel_thread(
    thread_id: UUID,
    user: Any,
    now: datetime | None = None,
    reason: str = "the run was cancelled",
) -> Thread:
    """Cancel the run: its pending suspensions at once, and its stack at once unless a tool is
    running under a live lease; then the thread is `cancelling` until that tool's result is
    recorded (tool_recorded). A thread already cancelling is finished here if the workers of
    its tools stopped, else left as it is."""
    now = now or timezone.now()
    with transaction.atomic():
        thread = locks.thread(pk=thread_id)
        if thread is None:
            raise Thread.DoesNotExist(thread_id)
        if thread.finished:
            raise AlreadyFinished(thread.status)
        if thread.status == CANCELLING:
            settle(thread, now)
            return thread
        pending = list(thread.suspensions.filter(status=S.PENDING))
        for s in pending:
            cancel_request(s, user, reason, now)
        asked = {
            "cancelled_by": getattr(user, "username", None),
            "reason": reason,
            "suspensions_cancelled": len(pending),
        }
        running = _running_tools(thread, now)
        if not running:
            _unwind(thread, user, getattr(user, "username", ""), asked, now)
            return thread
        thread.status = CANCELLING
        thread.save(update_fields=["status", "updated_at"])
        # No worker takes an instance up meanwhile (agents.leases.claim_lane), to call its
        # model for nothing: its next checkpoint would stop it.
        thread.frames.filter(status=ACTIVE, instance__gt=0).update(runnable_since=None)
        events.record(
            Event.Type.THREAD_CANCELLING,
            thread_id=thread.id,
            actor=user,
            payload={"status": CANCELLING, **asked, "waiting_for": running},
        )
    return thread


def waits_for(thread_id: UUID, owner: str, lane: int | None) -> bool:
    """Whether the thread is cancelling and waits for the tool that `owner` ran on its main
    stack (or in the lane `lane`), whose lease it holds: its result is then saved, and
    tool_recorded called, in the same transaction. Locks the thread's row, as the events'
    chain does."""
    row = locks.thread_values(thread_id, "lease_owner", "running_tool", status=CANCELLING)
    if row is None:
        return False
    lease_owner, running = row
    if lane is None:
        return lease_owner == owner and bool(running)
    return (
        StackFrame.objects.filter(pk=lane, lease_owner=owner, status=ACTIVE)
        .exclude(running_tool="")
        .exists()
    )


def tool_recorded(thread_id: UUID, lane: int | None, now: datetime) -> None:
    """The result of a tool the cancel waited for is saved: its lease goes back, and the
    cancel is finished unless another tool still runs (in another lane)."""
    gone = {"running_tool": "", "lease_owner": "", "lease_expires_at": None}
    if lane is None:
        Thread.objects.filter(pk=thread_id).update(**gone)
    else:
        # Not runnable either: nothing runs in a cancelling thread.
        StackFrame.objects.filter(pk=lane).update(runnable_since=None, **gone)
    settle(Thread.objects.get(pk=thread_id), now)


def settle(thread: Thread, now: datetime) -> bool:
    """Finish the cancel of a cancelling thread (locked by the caller) once no tool runs:
    True when it did."""
    if _running_tools(thread, now):
        return False
    asked = thread.events.filter(type=Event.Type.THREAD_CANCELLING).order_by("-id").first()
    if asked is None:  # a cancelling thread always has one; a bare cancel all the same
        _unwind(thread, None, "", dict.fromkeys(ASKED), now)
        return True
    user = get_user_model().objects.filter(pk=asked.actor_id).first() if asked.actor_id else None
    _unwind(thread, user, asked.actor_name, {k: asked.payload.get(k) for k in ASKED}, now)
    return True


def settle_abandoned(now: datetime | None = None) -> int:
    """The sweeper's part: finish the cancels whose tools' workers stopped (their leases ran
    out) before the tools returned; how many."""
    now = now or timezone.now()
    done = 0
    stale = Thread.objects.filter(status=CANCELLING).exclude(lease_expires_at__gt=now)
    for pk in stale.values_list("pk", flat=True):
        with transaction.atomic():
            thread = locks.thread(pk=pk, status=CANCELLING)
            if thread is not None and settle(thread, now):
                done += 1
    return done


ASKED = ("cancelled_by", "reason", "suspensions_cancelled")


def _running_tools(thread: Thread, now: datetime) -> list[str]:
    """The tools running in the thread under a live lease: on its main stack, then in its
    agent instances' lanes."""
    running = []
    expires = thread.lease_expires_at
    if thread.running_tool and thread.lease_owner and expires is not None and expires > now:
        running.append(thread.running_tool)
    lanes = StackFrame.objects.filter(
        thread=thread, instance__gt=0, status=ACTIVE, lease_expires_at__gt=now
    ).exclude(running_tool="")
    return running + list(lanes.values_list("running_tool", flat=True))


def _unwind(thread: Thread, user: Any, name: str, asked: dict[str, Any], now: datetime) -> None:
    """Unwind the whole stack (in the caller's transaction, the thread locked): pending
    suspensions and active frames become cancelled, the thread with them. `user` and `name`:
    who cancelled (the user None when deleted, or for the clock); `asked`: the ASKED fields."""
    pending = list(thread.suspensions.filter(status=S.PENDING))
    for s in pending:  # none, unless the cancel waited for a tool
        cancel_request(s, user, asked["reason"] or "the run was cancelled", now)
    active = thread.frames.filter(status=ACTIVE)
    # Tools whose worker stopped before they returned (a lease that ran out, a step that
    # failed after the tool): whether they acted is not known.
    unfinished = [thread.running_tool] if thread.running_tool else []
    unfinished += (
        active.filter(instance__gt=0)
        .exclude(running_tool="")
        .values_list("running_tool", flat=True)
    )
    unwound = [f.label for f in active.order_by("depth", "id")]
    instances = list(active.filter(instance__gt=0))
    active.update(
        status=StackFrame.Status.CANCELLED,
        updated_at=now,
        lease_owner="",
        lease_expires_at=None,
        runnable_since=None,
        running_tool="",
    )
    StackFrame.objects.filter(pk__in=[f.pk for f in instances]).update(finished_at=now)
    mark = {"actor": user, "actor_name": name}
    events.record_many(
        [
            Event(
                type=Event.Type.INSTANCE_FINISHED,
                thread_id=thread.id,
                **mark,
                payload={
                    "instance": f.instance_name,
                    "frame_id": f.pk,
                    "agent": f.agent_name,
                    "index": f.instance,
                    "status": "cancelled",
                    "started_at": f.created_at.isoformat(),
                    "finished_at": now.isoformat(),
                    "duration_ms": int((now - f.created_at).total_seconds() * 1000),
                    "tools": list(f.tools_used),
                    "usage": {
                        "input_tokens": f.input_tokens,
                        "output_tokens": f.output_tokens,
                    },
                    "result": "",
                    "is_error": True,
                    "lane": f.pk,
                },
            )
            for f in instances
        ]
        + [
            Event(
                type=Event.Type.THREAD_CANCELLED,
                thread_id=thread.id,
                **mark,
                payload={
                    "status": Thread.Status.CANCELLED,
                    **asked,
                    "suspensions_cancelled": (asked["suspensions_cancelled"] or 0) + len(pending),
                    "frames_cancelled": unwound,
                    "tools_unfinished": unfinished,
                    "stack": [],
                },
            )
        ]
    )
    thread.status = Thread.Status.CANCELLED
    thread.lease_owner = ""
    thread.lease_expires_at = None
    thread.running_tool = ""
    fields = ["status", "lease_owner", "lease_expires_at", "running_tool", "updated_at"]
    thread.save(update_fields=fields)
