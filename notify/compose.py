"""What an email says: plain text, one email for a group of calls, a link to each call's card.

Tool arguments and the agent's words are untrusted (invariant 6): the email is plain text only,
and a control or direction-changing character is written as a visible `[U+202E]`, as the pages
show it (approvals.templatetags.visible). A long prompt or argument list is cut at the display
limit (approvals.excerpt), saying how much is left out and where the whole of it is.
"""

import json
from datetime import datetime
from textwrap import indent
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from agents.models import Event, Suspension
from agents.runtime.ladder import format_duration
from approvals import excerpt
from approvals.templatetags.visible import CONTROL, code_point

MAX_SUBJECT_CHARS = 200
INDENT = "      "
OPTED_IN, IN_GROUP = "opted_in", "in_group"


def shown(text: Any, whole: str = "") -> str:
    """Untrusted text as the email prints it: controls visible; with `whole`, the API path of
    the whole value, cut at the display limit."""
    text = str(text)
    if whole:
        part = excerpt.cut(text, url=f"{settings.SITE_URL.rstrip('/')}{whole}")
        text = f"{part.text} {part.note} (the whole value: {part.url})" if part.cut else text
    return CONTROL.sub(lambda m: f"[{code_point(m.group())}]", text)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "no deadline"


def left(value: datetime | None, now: datetime) -> str:
    """`12 min left`, as a reader takes it in at a glance."""
    if value is None:
        return "no deadline"
    seconds = int((value - now).total_seconds())
    if seconds <= 0:
        return "the deadline has passed"
    if seconds < 120:
        return f"{seconds} s left"
    if seconds < 7200:
        return f"{seconds // 60} min left"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min left"


def card_url(s: Suspension) -> str:
    """The thread page, at the call's card: it opens (after login) and changes nothing."""
    path = reverse("thread", kwargs={"thread_id": s.thread_id})
    return f"{settings.SITE_URL.rstrip('/')}{path}#s-{s.pk}"


def _call(s: Suspension) -> dict[str, Any]:
    whole = excerpt.suspension_url(s.pk)
    return {
        "tool": shown(s.tool_name),
        "kind": s.kind,
        # "main" says nothing; a sub-agent's or instance's path does.
        "lineage": shown(s.lineage) if "→" in s.lineage else "",
        "prompt": indent(shown(s.prompt, whole), INDENT) if s.prompt else "",
        "arguments": indent(
            shown(json.dumps(s.tool_input, indent=2, ensure_ascii=False), whole),
            INDENT,
        ),
        "status": s.status,
        "pending": s.pending,
        "deadline": when(s.expires_at),
        "on_timeout": s.on_timeout,
        "url": card_url(s),
    }


def _ladder(s: Suspension) -> str:
    parts = []
    if s.reminders:
        steps = " and ".join(format_duration(r) for r in s.reminders)
        parts.append(f"reminders {steps} before the deadline")
    if s.escalate_to and s.escalated_at is None and s.escalate_before is not None:
        parts.append(
            f"escalates to {shown(s.escalate_to)} {format_duration(s.escalate_before)} before it"
        )
    elif s.escalate_to and s.escalated_at is not None:
        parts.append(f"escalated to {shown(s.escalate_to)}")
    return "; ".join(parts)


def message(
    kind: str, group: list[Suspension], event: Event, now: datetime, why: str = OPTED_IN
) -> tuple[str, str]:
    """The subject and body of one email about `group`, the calls one assistant message made
    together (oldest first); `event` is what called for it, `why` why this person gets it
    (OPTED_IN, or IN_GROUP: the group the requests were escalated to)."""
    pending = [s for s in group if s.pending] or group
    first = pending[0]
    deadline = min((s.expires_at for s in pending if s.expires_at), default=None)
    agent = shown(first.agent_name)
    asks = "a question" if all(s.kind == Suspension.Kind.INPUT for s in pending) else "a decision"
    tools = ", ".join(dict.fromkeys(shown(s.tool_name) for s in pending))
    if kind == "reminder":
        subject = f"Reminder: {agent} still waits for {asks} ({left(deadline, now)}): {tools}"
    elif kind == "escalation":
        subject = (
            f"Escalated to {shown(first.escalate_to)}: {agent} waits for {asks} "
            f"({left(deadline, now)}): {tools}"
        )
    else:
        subject = f"{agent} asks for {asks}: {tools}"
    subject = " ".join(subject.split())  # one header line, whatever the names hold
    if len(subject) > MAX_SUBJECT_CHARS:
        subject = subject[: MAX_SUBJECT_CHARS - 1] + "…"
    body = render_to_string(
        "notify/email.txt",
        {
            "kind": kind,
            "agent": agent,
            "asks": asks,
            "calls": [_call(s) for s in group],
            "count": len(group),
            "deadline": when(deadline),
            "left": left(deadline, now),
            "ladder": _ladder(first),
            "escalate_to": shown(first.escalate_to),
            "reminder": event.payload.get("reminder"),
            "in_group": why == IN_GROUP,
            "preferences_url": f"{settings.SITE_URL.rstrip('/')}{reverse('email_preferences')}",
        },
    )
    return subject, body
