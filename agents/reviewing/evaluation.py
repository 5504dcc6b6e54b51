"""A reviewer setting tried on past decisions (manage.py review_eval): how often it agrees
with people, the approvals it would have made that people rejected, and its cost.

The requests come from the audit export (`/audit/export.jsonl`: approvals.audit.record, a JSON
object a line). Only the ones people decided count: approved or rejected by a person, not by a
rule, a grant, a model or the deadline, and not questions. Each is replayed in the order it
was decided, shown to the model as the live review would show it (agents.reviewing.facts),
with the people's decisions before it in the file as its recent history. Nothing is written.
"""

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agents.models import Suspension
from agents.reviewing import answers, facts
from agents.reviewing.setting import Setting

NOT_PEOPLE = ("policy", "grant")  # decided_by of a rule's and a grant's decisions


@dataclass(frozen=True)
class Past:
    """One request of the export that people decided."""

    id: str
    thread: str
    agent: str
    tool: str
    arguments: Any
    modified_args: Any
    decision: str  # approve | reject: what people decided
    reason: str
    decided_at: str


@dataclass
class Replay:
    """What the setting would have done with the past requests."""

    setting: Setting
    replayed: int = 0
    agreed: int = 0
    decided: int = 0  # the requests it approved or rejected itself
    escalated: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # (the past request, the model's reason): approvals of requests people rejected
    wrong_approvals: list[tuple[Past, str]] = field(default_factory=list)
    # (the past request, the model's reason): rejections of requests people approved
    wrong_rejections: list[tuple[Past, str]] = field(default_factory=list)

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.decided if self.decided else None


def people_decided(lines: Iterable[str]) -> list[Past]:
    """The export's requests people decided, in the order they were decided. A line that is
    not a JSON object raises ValueError naming it."""
    found = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"line {n}: not JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise ValueError(f"line {n}: not a JSON object")
        by = str(row.get("decided_by") or "")
        if (
            row.get("kind", "confirmation") != Suspension.Kind.CONFIRMATION
            or row.get("status") not in (Suspension.Status.APPROVED, Suspension.Status.REJECTED)
            or not by
            or by in NOT_PEOPLE
            or by.startswith("model:")
        ):
            continue
        found.append(
            Past(
                id=str(row.get("id") or ""),
                thread=str(row.get("thread") or ""),
                agent=str(row.get("agent") or ""),
                tool=str(row.get("tool") or ""),
                arguments=row.get("arguments") or {},
                modified_args=row.get("modified_args"),
                decision="approve" if row["status"] == Suspension.Status.APPROVED else "reject",
                reason=str(row.get("reason") or ""),
                decided_at=str(row.get("decided_at") or ""),
            )
        )
    return sorted(found, key=lambda p: p.decided_at)


def _request(past: Past) -> Suspension:
    """The past request as the live review reads it (unsaved): its arguments as asked."""
    try:
        thread = uuid.UUID(past.thread)
    except ValueError:
        thread = uuid.uuid4()
    return Suspension(
        thread_id=thread,
        agent_name=past.agent,
        tool_name=past.tool,
        tool_input=past.arguments,
        presentation={},
        policy={},
    )


def _recent(before: list[Past]) -> list[dict[str, Any]]:
    return [
        {
            "arguments": facts.arguments_text(p.modified_args or p.arguments),
            "outcome": "approved" if p.decision == "approve" else "rejected",
            "decided_by": "person",
            "reason": facts.bounded(p.reason, facts.MAX_TEXT),
        }
        for p in reversed(before[-facts.HISTORY :])
    ]


def replay(pasts: list[Past], setting_for: Any) -> dict[str, Replay]:
    """Each request asked of the setting `setting_for(tool)` gives (None: not reviewed),
    counted per tool."""
    results: dict[str, Replay] = {}
    seen: dict[str, list[Past]] = {}
    for past in pasts:
        before = seen.setdefault(past.tool, [])
        setting = setting_for(past.tool)
        if setting is not None:
            result = results.setdefault(past.tool, Replay(setting))
            _one(result, past, before)
        before.append(past)
    return results


def _one(result: Replay, past: Past, before: list[Past]) -> None:
    result.replayed += 1
    s = _request(past)
    prompt = facts.quoted(facts.of(s, recent=_recent(before)))
    try:
        answer = answers.ask(result.setting, prompt, past.arguments)
    except answers.ReviewFailed as e:
        result.failed += 1
        result.input_tokens += e.input_tokens
        result.output_tokens += e.output_tokens
        return
    result.input_tokens += answer.input_tokens
    result.output_tokens += answer.output_tokens
    takes = answer.decision in result.setting.may or not result.setting.decides
    if answer.decision == "escalate" or not takes:
        result.escalated += 1
        return
    result.decided += 1
    if answer.decision == past.decision:
        result.agreed += 1
    elif answer.decision == "approve":
        result.wrong_approvals.append((past, answer.reason))
    else:
        result.wrong_rejections.append((past, answer.reason))
