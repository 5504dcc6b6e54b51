"""What the reviewing model is shown: only what the gateway derives itself.

The tool (its name, description and risk), the canonical arguments (bounded), an edit's
difference, the run's first user message, the policy's reasons and the recent decisions of
the same agent's calls of the same tool. Never the agent's own words: not the text it wrote
before the call (Suspension.prompt), not its reasoning or any assistant message of its frame,
not the title an outside agent gave its run. An agent can plead; a reviewer must not be
persuaded by it. Everything is quoted as data inside one JSON document, whose `<` are escaped
so no value can close the block it is quoted in.
"""

import json
from typing import Any

from agents import policy
from agents.hashing import canonical_hash, canonical_json
from agents.models import Event, Suspension, Thread
from agents.rules import rule_text

MAX_ARGUMENTS = 4000  # characters of the canonical arguments
MAX_TEXT = 500  # characters of a description, a first message, a reason
HISTORY = 10  # recent decisions of the same agent and tool


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def arguments_text(value: Any) -> str:
    """The arguments as canonical JSON, cut at MAX_ARGUMENTS (the cut is said)."""
    text = canonical_json(value)
    if len(text) <= MAX_ARGUMENTS:
        return text
    return text[:MAX_ARGUMENTS] + f"… [cut: {len(text)} characters in all]"


def difference(before: Any, after: Any) -> dict[str, Any] | None:
    """An edit's difference at the top level: {changed (canonical JSON of {name: [before,
    after]}, bounded), added, removed}; None when nothing was edited."""
    if after is None or canonical_hash(before) == canonical_hash(after):
        return None
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {"before": arguments_text(before), "after": arguments_text(after)}
    changed = {
        k: [before[k], after[k]]
        for k in sorted(before.keys() & after.keys())
        if canonical_hash(before[k]) != canonical_hash(after[k])
    }
    return {
        "changed": arguments_text(changed),
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
    }


def first_message(s: Suspension) -> str:
    """The message the run was started with (a person's words); none for an outside agent's
    run, whose title is the agent's own."""
    runs = Thread.objects.filter(pk=s.thread_id).values_list("external_run_id", flat=True)
    external = runs.first()
    if external is None or external:
        return ""  # no such run (replayed from an export: review_eval), or an outside agent's
    found = (
        Event.objects.filter(thread_id=s.thread_id, type=Event.Type.THREAD_STARTED)
        .values_list("payload", flat=True)
        .first()
    )
    message = found.get("message") if isinstance(found, dict) else None
    return bounded(message, MAX_TEXT) if isinstance(message, str) else ""


def policy_reasons(s: Suspension) -> list[str]:
    """Why the request waits, in the policy's words: its rules, none of which decided it."""
    rules = policy.of(s)
    found = ["No rule and no standing grant decided this request."]
    for key in ("auto_approve", "auto_reject"):
        for i, rule in enumerate(rules.get(key) or []):
            found.append(f"{key}[{i}] ({rule_text(rule)}) does not hold.")
    if rules.get("four_eyes"):
        found.append("Four eyes: whoever started the run may not decide it.")
    return found


def history(s: Suspension, limit: int = HISTORY) -> list[dict[str, Any]]:
    """The last `limit` decided requests of the same agent and tool, newest first: their
    arguments, outcome, which tier decided and the decider's reason."""
    rows = (
        Suspension.objects.filter(agent_name=s.agent_name, tool_name=s.tool_name)
        .exclude(pk=s.pk)
        .exclude(status__in=[Suspension.Status.PENDING, Suspension.Status.CANCELLED])
        .exclude(decided_at__isnull=True)
        .order_by("-decided_at")
        .values_list("tool_input", "modified_args", "status", "tier", "reason")[:limit]
    )
    return [
        {
            "arguments": arguments_text(edited if edited is not None else args),
            "outcome": status,
            "decided_by": tier or "",
            "reason": bounded(reason or "", MAX_TEXT),
        }
        for args, edited, status, tier, reason in rows
    ]


def of(s: Suspension, recent: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything the model is shown of `s`, as one JSON-able document; `recent` stands for
    the recent decisions when a request is replayed (review_eval)."""
    shown = s.presentation or {}
    return {
        "tool": s.tool_name,
        "description": bounded(str(shown.get("description") or ""), MAX_TEXT),
        "risk": shown.get("risk") or "normal",
        "agent": s.agent_name,
        "arguments": arguments_text(s.tool_input),
        "edit": difference(s.tool_input, s.modified_args),
        "first_user_message": first_message(s),
        "policy_reasons": policy_reasons(s),
        "recent_decisions": history(s) if recent is None else recent[:HISTORY],
    }


def quoted(facts: dict[str, Any]) -> str:
    """The document as the model reads it: JSON between markers, with every `<` escaped
    (JSON's \\u003c), so a value cannot end the block and speak as the gateway."""
    body = json.dumps(facts, ensure_ascii=False, indent=1, sort_keys=True).replace("<", "\\u003c")
    return f"<request_data>\n{body}\n</request_data>"
