"""How a suspension is shown in events and the API: its payload, reminders and extension."""

from datetime import datetime, timedelta
from typing import Any

from agents import policy, presentation
from agents.models import Suspension

S = Suspension.Status


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def ladder_payload(s: Suspension) -> dict[str, Any]:
    """A suspension's reminders and escalation as the card shows them: when the next
    reminder goes (none once ignored), who it escalates to and when (or when it was)."""
    expires = s.expires_at
    left = s.reminders[s.reminders_sent :] if expires and s.ignored_at is None else []
    escalate_at = None
    if expires and s.escalate_before is not None:
        escalate_at = expires - timedelta(seconds=s.escalate_before)
    return {
        "reminders": list(s.reminders),
        "reminders_sent": s.reminders_sent,
        # `left` is empty without a deadline.
        "next_reminder_at": iso(expires - timedelta(seconds=left[0])) if expires and left else None,
        "escalate_to": s.escalate_to or None,
        "escalate_at": iso(escalate_at),
        "escalated_at": iso(s.escalated_at),
    }


def extension_payload(s: Suspension) -> dict[str, Any] | None:
    """Who moved the deadline, by how much and why; None while it has not been moved."""
    if s.extended_at is None:
        return None
    return {
        "by": s.extended_by_name or None,
        "at": s.extended_at.isoformat(),
        "seconds": s.extension_seconds,
        "reason": s.extension_reason,
    }


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
        "ladder": ladder_payload(s),
        "extension": extension_payload(s),
        # What a decision binds to (agents.versions): the pages send them back as `seen`.
        "args_hash": s.args_hash or None,
        "agent_version": s.agent_version,
        # Who may decide and how far a quorum has come (agents.policy).
        "policy": policy.payload(s),
        # What the card says about the call (agents.presentation).
        "presentation": presentation.payload(s),
        # What a reviewing model said of it (agents.reviewing); None when none was asked.
        "review": s.review or None,
        # Dismissed from the inbox without a decision (ignore): by whom and when.
        "ignored": {"by": s.ignored_by_name or None, "at": s.ignored_at.isoformat()}
        if s.ignored_at
        else None,
    }
