"""One message for the calls an agent made together (a group: agents.models.Suspension.group),
as the inbox shows them together: each call with its summary, arguments, deadline or outcome
and its own buttons, under a line that says how many there are. The agent goes on when all are
decided. Slack takes at most 50 blocks a message: past MAX_SHOWN calls the message says how
many more there are, and Open leads to them.

A request alone is composed by slack_approvals.message, whose parts this reuses.
"""

from datetime import datetime
from typing import Any

from django.utils import timezone

from agents import presentation
from agents.models import Suspension
from slack_approvals import message
from slack_approvals.message import escaped

MAX_SHOWN = 10  # 3 blocks a call, and the head: well under Slack's 50


def members(s: Suspension) -> list[Suspension]:
    """The requests raised with `s` (itself included), in the order they were made."""
    return list(
        Suspension.objects.select_related("thread")
        .filter(thread_id=s.thread_id, group=s.group)
        .order_by("created_at", "pk")
    )


def compose(s: Suspension, now: datetime | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The message of `s`'s group (or of `s` alone): fallback text and blocks."""
    group = members(s)
    if len(group) <= 1:
        return message.compose(s, now)
    now = now or timezone.now()
    first = group[0]
    agent = escaped(presentation.payload(first)["asker"] or first.agent_name)
    starter = (
        escaped(first.thread.created_by_name) if first.thread.created_by_name else "nobody named"
    )
    waiting = sum(1 for m in group if m.status == Suspension.Status.PENDING)
    head = f"*{agent} made {len(group)} calls together*"
    state = f"{waiting} wait for a decision" if waiting else "all decided"
    about = f"run started by {starter} · {state} · the agent goes on when all are decided"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": head}},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": about}],
        },
    ]
    for m in group[:MAX_SHOWN]:
        blocks += _call(m, now)
    if len(group) > MAX_SHOWN:
        more = len(group) - MAX_SHOWN
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"and {more} more: open the thread to see them"}
                ],
            }
        )
    text = f"{agent} made {len(group)} calls together: {state}"
    return text, blocks


def _call(s: Suspension, now: datetime) -> list[dict[str, Any]]:
    """One call of the group: its summary and arguments, its deadline or outcome, its buttons."""
    explained = presentation.payload(s)
    summary = escaped(explained["summary"]) or f"`{escaped(s.tool_name)}`"
    done = message.outcome(s)
    if done:
        line = f"*{done}*"
    else:
        count = message.votes(s)
        line = message.deadline(s, now) + (f" · {count}" if count else "")
    return [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"*{summary}*\n{message.arguments(s)}"[:3000]},
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": line}]},
        message.actions(s, buttons=not done),
    ]
