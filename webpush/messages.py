"""What a push says: which agent waits for what, how long is left, and where its card is;
never the arguments, the prompt or the agent's words (a lock screen is not private).

A notification's `tag` is its group's (the calls one assistant message made together): a
reminder or an escalation replaces the request's notification, and a `closed` push with the
same tag takes it away once nothing in the group waits. Names are untrusted: controls made
visible (notify.compose.shown), each part cut to a notification's room; the service worker
shows them as text.
"""

from datetime import datetime
from typing import Any
from uuid import UUID

from django.urls import reverse

from agents.models import Suspension
from notify.compose import left, shown

MAX_TITLE_CHARS = 80
MAX_BODY_CHARS = 160
# What a person reads for each kind of notice; `{agent}` and `{asks}` are filled in.
TITLES = {
    "request": "{agent} asks for {asks}",
    "reminder": "Reminder: {agent} still waits for {asks}",
    "escalation": "Escalated to {group}: {agent} waits for {asks}",
}


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tag(group: UUID) -> str:
    return f"request-{group}"


def card_path(s: Suspension) -> str:
    """The card on its thread's page; the worker opens it on the origin it serves."""
    return f"{reverse('thread', kwargs={'thread_id': s.thread_id})}#s-{s.pk}"


def shown_push(kind: str, group: list[Suspension], now: datetime) -> dict[str, Any]:
    """The payload that shows a group's notice: `kind` request, reminder or escalation."""
    pending = [s for s in group if s.pending] or group
    first = pending[0]
    deadline = min((s.expires_at for s in pending if s.expires_at), default=None)
    asks = "a question" if all(s.kind == Suspension.Kind.INPUT for s in pending) else "a decision"
    title = TITLES[kind].format(
        agent=_cut(shown(first.agent_name), 40), asks=asks, group=_cut(shown(first.escalate_to), 30)
    )
    tools = ", ".join(dict.fromkeys(shown(s.tool_name) for s in pending))
    more = f" ({len(pending)} calls)" if len(pending) > 1 else ""
    return {
        "type": "show",
        "tag": tag(first.group),
        "title": _cut(title, MAX_TITLE_CHARS),
        "body": _cut(f"{tools}{more} · {left(deadline, now)}", MAX_BODY_CHARS),
        "url": card_path(first),
        # A reminder or escalation alerts again; the request's first notice alerts anyway.
        "renotify": kind != "request",
    }


def closed_push(group: UUID) -> dict[str, Any]:
    """The payload that takes a group's notification away."""
    return {"type": "close", "tag": tag(group)}
