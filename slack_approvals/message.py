"""What a Slack message about a request says: Block Kit blocks, drawn from the request's row as
it is when the message is posted or updated.

Everything in it that an agent or a caller wrote (the summary filled from the arguments, the
arguments, names) is untrusted: it is cut to a bound (approvals.excerpt, as the pages cut it),
controls are written visibly as the pages show them, and &, < and > are escaped as Slack's
mrkdwn requires, so no text can mention `@channel`, make a link or end the code block.
"""

import json
from datetime import datetime
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from agents import policy, presentation
from agents.models import Event, Suspension
from approvals import excerpt
from approvals.templatetags.visible import CONTROL, code_point

# Slack refuses a section's text over 3,000 characters: the arguments get at most this many
# bytes (fewer when the pages' own card limit is lower), the rest is behind Open.
MAX_ARGUMENT_BYTES = 2500
MAX_LINE = 300  # characters of the summary and of a decision's reason

S = Suspension.Status


def escaped(text: Any, limit: int = MAX_LINE) -> str:
    """Untrusted text for mrkdwn: cut, controls visible, &, < and > escaped."""
    text = str(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = CONTROL.sub(lambda m: f"[{code_point(m.group())}]", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # A zero-width space between backticks: no value opens or closes a code block.
    return text.replace("```", "`\u200b`\u200b`")


def arguments(s: Suspension) -> str:
    """The arguments as a code block, bounded as a card bounds them."""
    text = json.dumps(s.tool_input, indent=2, ensure_ascii=False)
    part = excerpt.cut(text, min(excerpt.card_limit(), MAX_ARGUMENT_BYTES))
    shown = escaped(part.text, limit=MAX_ARGUMENT_BYTES)
    note = f"\n_{part.note}: Open shows all of it_" if part.cut else ""
    return f"```{shown}```{note}"


def card_url(s: Suspension) -> str:
    """The thread page at the request's card (after login; opening it changes nothing)."""
    path = reverse("thread", kwargs={"thread_id": s.thread_id})
    return f"{settings.SITE_URL.rstrip('/')}{path}#s-{s.pk}"


def deadline(s: Suspension, now: datetime) -> str:
    """The deadline in words: "Decide by 14:02 (12 min left)"."""
    if s.expires_at is None:
        return "No deadline"
    at = timezone.localtime(s.expires_at).strftime("%H:%M %Z")
    seconds = int((s.expires_at - now).total_seconds())
    if seconds <= 0:
        return f"The deadline ({at}) has passed"
    if seconds < 120:
        left = f"{seconds} s left"
    elif seconds < 7200:
        left = f"{seconds // 60} min left"
    else:
        left = f"{seconds // 3600} h {seconds % 3600 // 60} min left"
    automatic = "approved" if s.on_timeout == Suspension.OnTimeout.APPROVE else "rejected"
    return f"Decide by {at} ({left}); then it is {automatic} automatically"


def outcome(s: Suspension) -> str:
    """What became of the request, in a line: "Approved by Dana at 14:02 · invoice checked";
    "" while it waits."""
    reason = f" · {escaped(s.reason)}" if s.reason else ""
    at = timezone.localtime(s.decided_at).strftime("%H:%M") if s.decided_at else ""
    by = f" by {escaped(s.decided_by_name)}" if s.decided_by_name else " automatically"
    when = f" at {at}" if at else ""
    if s.status == S.APPROVED:
        return f"Approved{by}{when}{reason}"
    if s.status == S.REJECTED:
        return f"Rejected{by}{when}{reason}"
    if s.status == S.RESPONDED:
        return f"Answered{by}{when}"
    if s.status == S.TIMED_OUT:
        verb = "Approved" if s.approved else "Rejected"
        return f"{verb} automatically at the deadline"
    if s.status == S.CANCELLED:
        return "Cancelled: the run no longer waits for it"
    return ""


def reply(s: Suspension, event: Event, now: datetime) -> str:
    """A reminder or an escalation, as a reply in the message's thread: "Reminder 1 of 2:
    decide by 14:02 UTC (12 min left); then it is rejected automatically"."""
    p = event.payload or {}
    left = deadline(s, now)
    left = left[:1].lower() + left[1:]
    if event.type == Event.Type.SUSPENSION_ESCALATED:
        to = p.get("escalate_to") or s.escalate_to
        names = ", ".join(str(n) for n in to) if isinstance(to, list) else str(to or "")
        return f"Escalated to {escaped(names, limit=500)}: {left}"
    return f"Reminder {int(p.get('reminder') or 0)} of {int(p.get('of') or 0)}: {left}"


def votes(s: Suspension) -> str:
    """A quorum's count while it waits: "1 of 2 approvals"; "" without a quorum."""
    required = policy.of(s)["quorum"]
    if required <= 1 or s.status != S.PENDING:
        return ""
    return f"{len(policy.approvals(s))} of {required} approvals"


def compose(s: Suspension, now: datetime | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The message's fallback text (notifications, screen readers) and its blocks."""
    now = now or timezone.now()
    explained = presentation.payload(s)
    agent = escaped(explained["asker"] or s.agent_name)
    summary = escaped(explained["summary"]) or f"{agent} wants to run `{escaped(s.tool_name)}`"
    starter = escaped(s.thread.created_by_name) if s.thread.created_by_name else "nobody named"
    asks = (
        "asks a question" if s.kind == Suspension.Kind.INPUT else f"calls `{escaped(s.tool_name)}`"
    )
    text = f"{agent} waits for a decision: {summary}"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{summary}*"}},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"{agent} {asks} · run started by {starter}"}],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": arguments(s)}},
    ]
    done = outcome(s)
    if done:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{done}*"}})
        blocks.append(actions(s, buttons=False))
        return f"{done}: {summary}", blocks
    count = votes(s)
    line = deadline(s, now) + (f" · {count}" if count else "")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": line}]})
    blocks.append(actions(s, buttons=True))
    return text, blocks


def answerable(s: Suspension) -> bool:
    """A question Slack can answer (slack_approvals.answers): in words or a form; a URL to
    visit is opened from the card, not typed."""
    return s.kind == Suspension.Kind.INPUT and presentation.payload(s)["answer"] != "url"


def actions(s: Suspension, buttons: bool) -> dict[str, Any]:
    """Approve and Reject… (Answer… for a question) while the request waits for a decision,
    and Open always."""
    elements: list[dict[str, Any]] = []
    if buttons and s.kind == Suspension.Kind.INPUT:
        if answerable(s):
            elements.append(
                {
                    "type": "button",
                    "action_id": "answer",
                    "text": {"type": "plain_text", "text": "Answer…"},
                    "style": "primary",
                    "value": str(s.pk),
                }
            )
    elif buttons:
        elements += [
            {
                "type": "button",
                "action_id": "approve",
                "text": {"type": "plain_text", "text": "Approve"},
                "style": "primary",
                "value": str(s.pk),
            },
            {
                "type": "button",
                "action_id": "reject",
                "text": {"type": "plain_text", "text": "Reject…"},
                "style": "danger",
                "value": str(s.pk),
            },
        ]
    elements.append(
        {
            "type": "button",
            "action_id": "open",
            "text": {"type": "plain_text", "text": "Open"},
            "url": card_url(s),
        }
    )
    return {"type": "actions", "block_id": f"request:{s.pk}", "elements": elements}
