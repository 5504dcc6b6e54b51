"""The state changes people and the clock make: start, message, decide, cancel, expire.

Each is one transaction that writes its events; enqueues happen after commit (invariant 1).
Decisions are conditional updates, so of approve, reject, timeout and cancel exactly one wins
(invariant 2). Every change that touches a thread's suspensions locks the thread row first, so
two decisions of one group cannot both miss that the group is complete.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents import events
from agents.models import AgentDefinition, Event, StackFrame, Suspension, Thread
from agents.runtime import subagents
from agents.runtime.subagents import AgentSpec

S = Suspension.Status


def suspension_payload(s: Suspension) -> dict[str, Any]:
    """How a suspension is shown in events and the API."""
    return {
        "id": str(s.id),
        "thread": str(s.thread_id),
        "group": str(s.group),
        "agent": s.agent_name,
        "lineage": s.lineage,
        "tool": s.tool_name,
        "tool_use_id": s.tool_use_id,
        "input": s.tool_input,
        "schema": s.tool_schema,
        "kind": s.kind,
        "prompt": s.prompt,
        "status": s.status,
        "timeout": s.timeout,
        "on_timeout": s.on_timeout,
        "expires_at": s.expires_at.isoformat() if s.expires_at else None,
        "created_at": s.created_at.isoformat() if s.created_at else None,
        "decision": s.outcome() if s.status != S.PENDING else None,
        "resumed_at": s.resumed_at.isoformat() if s.resumed_at else None,
    }


def _enqueue(thread_id: Any) -> None:
    from agents import tasks

    tasks.resume_thread.delay_on_commit(str(thread_id))


def find_agent(name: str) -> AgentSpec | None:
    """The runtime's view of a stored agent (the engine's `AgentResolver`)."""
    agent = AgentDefinition.objects.filter(name=name).first()
    return agent.as_spec() if agent is not None else None


def start_thread(agent: AgentDefinition, message: str, user: Any) -> Thread:
    main = subagents.build_frame(agent.as_spec(), StackFrame.Type.MAIN, message, find_agent)
    with transaction.atomic():
        thread = Thread.objects.create(
            agent=agent,
            created_by=user,
            title=message[:200],
            status=Thread.Status.RUNNING,
            runnable_since=timezone.now(),
        )
        StackFrame.objects.create(
            thread=thread,
            depth=0,
            agent_name=main.agent_name,
            agent_type=StackFrame.Type.MAIN,
            messages=main.messages,
            system_prompt=main.system_prompt,
            model=main.model,
            max_iterations=main.max_iterations,
            max_tokens=main.max_tokens,
            tools=main.tools,
            tool_overrides=main.tool_overrides,
        )
        events.record(
            Event.Type.THREAD_STARTED,
            thread_id=thread.id,
            actor=user,
            payload={"agent": agent.name, "message": message, "status": thread.status},
        )
        from agents import tasks

        tasks.start_thread.delay_on_commit(str(thread.id))
    return thread


class NotWaiting(Exception):
    """The thread is not waiting for a message."""


def post_message(thread_id: Any, text: str, user: Any) -> Thread:
    """A user message goes to the top of the stack and the thread runs again."""
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        if thread.status != Thread.Status.WAITING_INPUT:
            raise NotWaiting(thread.status)
        top = thread.frames.filter(status=StackFrame.Status.ACTIVE).order_by("-depth").first()
        if top is None:
            raise NotWaiting(thread.status)
        from agents.runtime import messages as msgs

        msgs.add_user_text(top.messages, text)
        top.iteration = 0  # the iteration limit counts model calls since the user last spoke
        top.save(update_fields=["messages", "iteration", "updated_at"])
        thread.status = Thread.Status.RUNNING
        thread.runnable_since = timezone.now()
        thread.save(update_fields=["status", "runnable_since", "updated_at"])
        events.record(
            Event.Type.USER_MESSAGE,
            thread_id=thread.id,
            actor=user,
            payload={"text": text, "frame": top.label, "depth": top.depth},
        )
        _enqueue(thread.id)
    return thread


@dataclass
class Decided:
    suspension: Suspension
    created: bool  # this call took the decision (False: it was already taken)


def same_decision(s: Suspension, decision: dict[str, Any]) -> bool:
    """Is `decision` what was recorded? Repeating it is harmless; anything else conflicts."""
    if s.status not in (S.APPROVED, S.REJECTED):
        return False
    if s.kind == Suspension.Kind.INPUT and "response" in decision:
        return s.status == S.APPROVED and s.response == decision["response"]
    return (
        s.approved == decision.get("approved")
        and (s.reason or "") == (decision.get("reason") or "")
        and s.modified_args == decision.get("modifiedArgs")
    )


def decide(
    suspension: Suspension, user: Any, decision: dict[str, Any], now: datetime | None = None
) -> Decided:
    """Record a person's decision: {"approved", "reason", "modifiedArgs"} or {"response"}."""
    now = now or timezone.now()
    if "response" in decision:
        fields = {"status": S.APPROVED, "approved": True, "response": decision["response"]}
    else:
        fields = {
            "status": S.APPROVED if decision["approved"] else S.REJECTED,
            "approved": bool(decision["approved"]),
            "reason": decision.get("reason") or "",
            "modified_args": decision.get("modifiedArgs"),
        }
    with transaction.atomic():
        Thread.objects.select_for_update().filter(pk=suspension.thread_id).first()
        won = (
            Suspension.objects.filter(pk=suspension.pk, status=S.PENDING)
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
            .update(decided_by=user, decided_at=now, **fields)
        )
        if not won:
            current = Suspension.objects.select_related("decided_by").get(pk=suspension.pk)
            if current.status == S.PENDING:
                # The deadline passed before the sweeper saw it: the clock decided first.
                _time_out(current, now)
                current.refresh_from_db()
            return Decided(current, created=False)
        current = Suspension.objects.select_related("decided_by").get(pk=suspension.pk)
        events.record(
            Event.Type.SUSPENSION_DECIDED,
            thread_id=current.thread_id,
            suspension_id=current.pk,
            actor=user,
            payload={"tool": current.tool_name, "agent": current.agent_name, **current.outcome()},
        )
        _resume_if_group_done(current, now)
    return Decided(current, created=True)


def _resume_if_group_done(s: Suspension, now: datetime) -> None:
    if Suspension.objects.filter(group=s.group, status=S.PENDING).exists():
        return
    n = Thread.objects.filter(pk=s.thread_id, status=Thread.Status.SUSPENDED).update(
        status=Thread.Status.RUNNING, runnable_since=now, updated_at=now
    )
    if n:
        _enqueue(s.thread_id)


def _time_out(s: Suspension, now: datetime) -> bool:
    """Apply a suspension's on_timeout; the caller holds the thread's lock."""
    approve = s.on_timeout == Suspension.OnTimeout.APPROVE
    n = Suspension.objects.filter(pk=s.pk, status=S.PENDING).update(
        status=S.TIMED_OUT,
        approved=approve,
        reason=("approved" if approve else "rejected") + " automatically at the deadline",
        decided_at=now,
    )
    if not n:
        return False
    events.record(
        Event.Type.SUSPENSION_TIMEOUT,
        thread_id=s.thread_id,
        suspension_id=s.pk,
        payload={
            "tool": s.tool_name,
            "agent": s.agent_name,
            "status": S.TIMED_OUT,
            "approved": approve,
            "on_timeout": s.on_timeout,
            "expires_at": s.expires_at.isoformat() if s.expires_at else None,
        },
    )
    _resume_if_group_done(s, now)
    return True


def expire_overdue(now: datetime | None = None, limit: int = 500, only: Any = None) -> int:
    """Apply on_timeout to pending suspensions past their deadline (or to the one named by
    `only`, if it is); returns how many."""
    now = now or timezone.now()
    rows = Suspension.objects.filter(status=S.PENDING, expires_at__lte=now)
    if only is not None:
        rows = rows.filter(pk=only)
    overdue = list(rows.order_by("expires_at")[:limit])
    done = 0
    for s in overdue:
        with transaction.atomic():
            Thread.objects.select_for_update().filter(pk=s.thread_id).first()
            done += _time_out(s, now)
    return done


def due_soon(within: timedelta, now: datetime | None = None, limit: int = 500) -> list[Any]:
    """Pending suspensions whose deadline falls in the coming `within`: (id, expires_at)."""
    now = now or timezone.now()
    return list(
        Suspension.objects.filter(
            status=S.PENDING, expires_at__gt=now, expires_at__lte=now + within
        )
        .order_by("expires_at")
        .values_list("pk", "expires_at")[:limit]
    )


def requeue_stalled(now: datetime | None = None, limit: int = 200) -> int:
    """Enqueue again the runnable threads no worker has taken for a while (invariant 4)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.STALLED_AFTER_SECONDS)
    ids = list(
        Thread.objects.filter(status=Thread.Status.RUNNING, runnable_since__lt=stale)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .order_by("runnable_since")
        .values_list("pk", flat=True)[:limit]
    )
    if not ids:
        return 0
    with transaction.atomic():
        Thread.objects.filter(pk__in=ids).update(runnable_since=now)
        for pk in ids:
            _enqueue(pk)
    return len(ids)


class AlreadyFinished(Exception):
    """The thread has already ended."""


def cancel_thread(thread_id: Any, user: Any, now: datetime | None = None) -> Thread:
    """Unwind the whole stack: pending suspensions and active frames become cancelled."""
    now = now or timezone.now()
    with transaction.atomic():
        thread = Thread.objects.select_for_update().get(pk=thread_id)
        if thread.finished:
            raise AlreadyFinished(thread.status)
        pending = list(thread.suspensions.filter(status=S.PENDING))
        for s in pending:
            n = Suspension.objects.filter(pk=s.pk, status=S.PENDING).update(
                status=S.CANCELLED,
                approved=False,
                reason="the run was cancelled",
                decided_by=user,
                decided_at=now,
            )
            if n:
                events.record(
                    Event.Type.SUSPENSION_CANCELLED,
                    thread_id=thread.id,
                    suspension_id=s.pk,
                    actor=user,
                    payload={
                        "tool": s.tool_name,
                        "agent": s.agent_name,
                        "status": S.CANCELLED,
                        "decided_by": getattr(user, "username", None),
                    },
                )
        active = thread.frames.filter(status=StackFrame.Status.ACTIVE)
        unwound = [f.label for f in active.order_by("depth")]
        active.update(status=StackFrame.Status.CANCELLED, updated_at=now)
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
                "suspensions_cancelled": len(pending),
                "frames_cancelled": unwound,
                "stack": [],
            },
        )
    return thread
