"""Cancelling a thread: its stack unwound and its pending suspensions cancelled, at once."""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from agents import events
from agents.models import Event, StackFrame, Suspension, Thread

S = Suspension.Status


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
    """Unwind the whole stack: pending suspensions and active frames become cancelled."""
    now = now or timezone.now()
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        if thread.finished:
            raise AlreadyFinished(thread.status)
        pending = list(thread.suspensions.filter(status=S.PENDING))
        for s in pending:
            cancel_request(s, user, reason, now)
        active = thread.frames.filter(status=StackFrame.Status.ACTIVE)
        unwound = [f.label for f in active.order_by("depth", "id")]
        instances = list(active.filter(instance__gt=0))
        active.update(
            status=StackFrame.Status.CANCELLED,
            updated_at=now,
            lease_owner="",
            lease_expires_at=None,
            runnable_since=None,
        )
        StackFrame.objects.filter(pk__in=[f.pk for f in instances]).update(finished_at=now)
        events.record_many(
            [
                Event(
                    type=Event.Type.INSTANCE_FINISHED,
                    thread_id=thread.id,
                    actor=user,
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
        )
        thread.status = Thread.Status.CANCELLED
        thread.lease_owner = ""
        thread.lease_expires_at = None
        thread.save(update_fields=["status", "lease_owner", "lease_expires_at", "updated_at"])
        events.record(
            Event.Type.THREAD_CANCELLED,
            thread_id=thread.id,
            actor=user,
            payload={
                "status": thread.status,
                "cancelled_by": getattr(user, "username", None),
                "reason": reason,
                "suspensions_cancelled": len(pending),
                "frames_cancelled": unwound,
                "stack": [],
            },
        )
    return thread
