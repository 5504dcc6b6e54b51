"""Before a deadline: reminders, escalation, and a reviewer's one extension.

A suspension is raised with its ladder (agents.runtime.ladder) and the time of its next step,
`next_step_at`, stored and indexed like its deadline (invariant 4). The sweeper applies the
steps that have fallen due (apply_ladder_steps); each is a conditional update under the
thread's lock, so two sweepers apply it once, and each writes its event in the same
transaction: SUSPENSION_REMINDER, SUSPENSION_ESCALATED. Outward channels (email in notify/,
webhooks) read those events; nothing here sends anything. An ignored suspension gets no more
steps (agents.decisions.ignore); its deadline still applies.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import events, locks
from agents.deadlines import expire_overdue
from agents.models import AgentDefinition, Event, Suspension
from agents.payloads import ladder_payload
from agents.runtime import ladder
from agents.runtime.ladder import Ladder

log = logging.getLogger(__name__)
S = Suspension.Status


def agent_ladder(agent_name: str) -> Ladder:
    """The agent's own ladder, for tools that set none. A stored ladder that no longer reads
    (it is checked when saved) gives none rather than failing the run."""
    return ladder_of(AgentDefinition.objects.filter(name=agent_name).first())


def ladder_of(row: AgentDefinition | None) -> Ladder:
    """agent_ladder for an agent's row already read (None: the agent is gone)."""
    if row is None:
        return Ladder()
    try:
        return row.ladder()
    except ValueError:
        log.warning("agent %s: its reminders or escalation do not read; none apply", row.name)
        return Ladder()


def ladder_fields(steps: Ladder, expires_at: datetime, now: datetime) -> dict[str, Any]:
    """A new suspension's ladder columns. Reminders whose time has passed already are behind
    it (the request itself is the first notice); an escalation whose time has passed is due
    at once: it is for requests that have little time left."""
    sent = ladder.due(expires_at, steps.reminders, None, now).reminders
    return {
        "reminders": list(steps.reminders),
        "reminders_sent": sent,
        "escalate_to": steps.escalate_to,
        "escalate_before": steps.escalate_before,
        "next_step_at": ladder.next_step_at(
            expires_at, steps.reminders, sent, steps.escalate_before, escalated=False
        ),
    }


def _seconds_left(s: Suspension, now: datetime) -> int | None:
    return max(0, int((s.expires_at - now).total_seconds())) if s.expires_at else None


def apply_ladder_steps(now: datetime | None = None, limit: int = 500) -> int:
    """Apply the reminders and escalations that have fallen due; returns how many events.

    A sweeper that was away and finds several reminders of one suspension due sends the
    latest only (its event counts the ones it skipped)."""
    now = now or timezone.now()
    # Ignored ones are closed for people (agents.decisions.ignore clears their next step; this
    # keeps it so for rows ignored before it did, and for an extension after the ignore).
    rows = Suspension.objects.filter(
        status=S.PENDING, next_step_at__lte=now, ignored_at__isnull=True
    )
    with transaction.atomic():
        found = list(rows.order_by("next_step_at").values_list("pk", "thread_id")[:limit])
        if not found:
            return 0
        locks.threads(t for _, t in found)
        # Read again under the locks: a step another sweeper applied meanwhile has moved
        # next_step_at past now, and a decision has taken the row out of the pending set.
        due_rows = list(rows.filter(pk__in=[pk for pk, _ in found]).order_by("next_step_at"))
        written: list[Event] = []
        for s in due_rows:
            assert s.expires_at is not None  # a ladder runs only before a deadline
            step = ladder.due(s.expires_at, s.reminders, s.escalate_before, now)
            sent = max(step.reminders, s.reminders_sent)
            escalate = step.escalate and s.escalated_at is None
            after = {
                "reminders_sent": sent,
                "escalated_at": now if escalate else s.escalated_at,
            }
            after["next_step_at"] = ladder.next_step_at(
                s.expires_at,
                s.reminders,
                sent,
                s.escalate_before,
                escalated=after["escalated_at"] is not None,
            )
            n = Suspension.objects.filter(
                pk=s.pk,
                status=S.PENDING,
                reminders_sent=s.reminders_sent,
                escalated_at=s.escalated_at,
                expires_at=s.expires_at,
            ).update(**after)
            if not n:
                continue
            before = s.reminders_sent
            for key, value in after.items():
                setattr(s, key, value)
            common = {
                "tool": s.tool_name,
                "agent": s.agent_name,
                "group": str(s.group),
                "expires_at": s.expires_at.isoformat(),
                "seconds_left": _seconds_left(s, now),
                "on_timeout": s.on_timeout,
                "ladder": ladder_payload(s),
            }
            if sent > before:
                written.append(
                    Event(
                        type=Event.Type.SUSPENSION_REMINDER,
                        thread_id=s.thread_id,
                        suspension_id=s.pk,
                        payload={
                            **common,
                            "reminder": sent,
                            "of": len(s.reminders),
                            "before_deadline": s.reminders[sent - 1],
                            "skipped": sent - before - 1,
                        },
                    )
                )
            if escalate:
                written.append(
                    Event(
                        type=Event.Type.SUSPENSION_ESCALATED,
                        thread_id=s.thread_id,
                        suspension_id=s.pk,
                        payload={
                            **common,
                            "escalate_to": s.escalate_to,
                            "before_deadline": s.escalate_before,
                        },
                    )
                )
        events.record_many(written)
    return len(written)


class NotPending(Exception):
    """The suspension was decided, timed out or cancelled: its deadline no longer matters."""

    def __init__(self, suspension: Suspension) -> None:
        super().__init__(suspension.status)
        self.suspension = suspension


class AlreadyExtended(Exception):
    """The deadline was moved once already; a suspension is extended at most once."""

    def __init__(self, suspension: Suspension) -> None:
        super().__init__(suspension.extended_by_name)
        self.suspension = suspension


@dataclass
class Extended:
    suspension: Suspension
    old_expires_at: datetime | None


def extend(
    suspension: Suspension,
    user: Any,
    seconds: int,
    reason: str,
    now: datetime | None = None,
) -> Extended:
    """Move a pending suspension's deadline `seconds` later, once, with a reason.

    Reminders still ahead of the new deadline go out at their times before it; an escalation
    that happened stays. Raises NotPending or AlreadyExtended, changing nothing (but a
    deadline found passed is applied first, as a decision would find it: agents.decisions.decide).
    """
    if seconds < 1:
        raise ValueError("seconds must be positive")
    now = now or timezone.now()
    with transaction.atomic():
        locks.threads([suspension.thread_id])
        s = Suspension.objects.get(pk=suspension.pk)
        if s.status == S.PENDING and s.expires_at is not None and s.expires_at <= now:
            expire_overdue(now=now, only=s.pk)
            s.refresh_from_db()
        refused = _refusal(s)
        if refused is None:
            old = s.expires_at
            _extend(s, user, seconds, reason, now)
    # Raised after the block, so a deadline applied above is committed.
    if refused is not None:
        raise refused
    return Extended(s, old)


def _refusal(s: Suspension) -> Exception | None:
    if s.status != S.PENDING:
        return NotPending(s)
    if s.extended_at is not None:
        return AlreadyExtended(s)
    return None


def _extend(s: Suspension, user: Any, seconds: int, reason: str, now: datetime) -> None:
    """The extension's update and event; the caller holds the thread's lock."""
    old = s.expires_at
    new = (old or now) + timedelta(seconds=seconds)
    sent = min(s.reminders_sent, ladder.due(new, s.reminders, None, now).reminders)
    fields = {
        "expires_at": new,
        "reminders_sent": sent,
        # An ignored request's ladder stays stopped; only its deadline moves.
        "next_step_at": None
        if s.ignored_at is not None
        else ladder.next_step_at(
            new, s.reminders, sent, s.escalate_before, escalated=s.escalated_at is not None
        ),
        "extended_at": now,
        "extended_by": user,
        "extended_by_name": getattr(user, "username", ""),
        "extension_seconds": seconds,
        "extension_reason": reason,
    }
    n = Suspension.objects.filter(
        pk=s.pk, status=S.PENDING, extended_at__isnull=True, expires_at=old
    ).update(**fields)
    if n != 1:  # the thread's lock makes this unreachable; the update stays conditional
        s.refresh_from_db()
        raise _refusal(s) or AlreadyExtended(s)
    for key, value in fields.items():
        setattr(s, key, value)
    events.record(
        Event.Type.SUSPENSION_EXTENDED,
        thread_id=s.thread_id,
        suspension_id=s.pk,
        actor=user,
        payload={
            "tool": s.tool_name,
            "agent": s.agent_name,
            "group": str(s.group),
            "by": s.extended_by_name or None,
            "reason": reason,
            "seconds": seconds,
            "old_expires_at": old.isoformat() if old else None,
            "expires_at": new.isoformat(),
            "ladder": ladder_payload(s),
        },
    )
