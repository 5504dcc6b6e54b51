"""How a reviewer's card explains a call: the tool's description, a summary of the call filled
from its arguments, what approving does, the reasons offered for a rejection, and who asked.

A tool declares a summary template in the registry (`summary=`) or an agent file's
tool_overrides (`summary:`): text with placeholders naming arguments, `{amount}`, or a path into
one, `{payee.country}`. Placeholders are replaced by the arguments' values as plain text, and
nothing else is evaluated: str.format would let a template reach attributes
(`{amount.__class__}`), so the replacement is a regular expression of names only. The result
is text, shown with Django's autoescape like every argument (invariant 6); the before/after of
an edit is filled here too (approvals.fragments.review_fragment).
"""

import json
import re
from typing import Any

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")
MAX_SUMMARY = 300  # characters of a template
MAX_VALUE = 120  # characters of one filled-in value
MAX_REASONS = 12
MAX_REASON = 200


def check_summary(template: Any, schema: dict[str, Any], name: str) -> None:
    """A summary template must be short text naming only the tool's arguments."""
    if template is None:
        return
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"{name}: summary must be text, like 'Transfer {{amount}} to {{to}}'")
    if len(template) > MAX_SUMMARY:
        raise ValueError(f"{name}: summary is longer than {MAX_SUMMARY} characters")
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    unknown = [p for p in PLACEHOLDER.findall(template) if p.split(".")[0] not in properties]
    if unknown:
        raise ValueError(
            f"{name}: summary names {unknown}, which the tool's input_schema does not have "
            f"(its arguments: {', '.join(sorted(properties)) or 'none'})"
        )


def check_reject_reasons(reasons: Any, name: str) -> tuple[str, ...]:
    """Reasons a reviewer may pick when rejecting (free text stays allowed)."""
    if reasons is None:
        return ()
    if not isinstance(reasons, (list, tuple)) or len(reasons) > MAX_REASONS:
        raise ValueError(f"{name}: reject_reasons must be a list of at most {MAX_REASONS} texts")
    for reason in reasons:
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise ValueError(
                f"{name}: each of reject_reasons must be text of 1 to {MAX_REASON} characters"
            )
    return tuple(dict.fromkeys(r.strip() for r in reasons))


def value_text(value: Any) -> str:
    """One argument as the summary writes it."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _lookup(args: Any, path: str) -> Any:
    value = args
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def fill(template: str, args: Any) -> str:
    """The template with each placeholder replaced by its argument (empty when missing)."""
    if not template:
        return ""
    text = PLACEHOLDER.sub(lambda m: value_text(_lookup(args, m.group(1))), template)
    return " ".join(text.split())


def approve_does(tool: Any) -> str:
    """What approving does, in a sentence."""
    if tool.kind == "input":
        return ""
    if tool.func is None:
        return "The agent is told you approved, and goes on."
    return f"The agent runs {tool.name} with these arguments."


def snapshot(tool: Any) -> dict[str, Any]:
    """What a suspension keeps of its tool, as the agent offered it (Suspension.presentation)."""
    return {
        "description": tool.description,
        "summary": tool.summary or "",
        "reject_reasons": list(tool.reject_reasons),
        "approve_does": approve_does(tool),
        "risk": tool.risk,
    }


def asked_via(lineage: str) -> str:
    """The agents between the run's first agent and the one asking, as people name them:
    "main → skill:writer → agent:research" is asked via "writer"; a call of the run's
    first agent, or of an agent it called directly, is asked via nobody ("")."""
    parts = [p.strip() for p in (lineage or "").split("→")]
    between = parts[1:-1]
    return ", then ".join(p.split(":", 1)[-1] for p in between if p)


def asker(lineage: str, agent: str) -> str:
    """Who asks, as the card names it: the agent, with its instance number when it is one of
    several run side by side ("researcher[2]")."""
    last = [p.strip() for p in (lineage or "").split("→")][-1]
    name = last.split(":", 1)[-1] if last and last != "main" else ""
    return name or agent


def payload(s: Any) -> dict[str, Any]:
    """The card's explanation of a suspension (agents.payloads.suspension_payload)."""
    kept = s.presentation or {}
    if not kept:
        # Made before suspensions kept it: the tool as registered now.
        tool = s.registered_tool
        kept = snapshot(tool) if tool is not None else {}
    template = kept.get("summary") or ""
    edited = s.modified_args
    return {
        "description": kept.get("description", ""),
        "summary_template": template,
        "summary": fill(template, s.tool_input),
        "edited_summary": fill(template, edited) if edited is not None and template else "",
        "approve_does": kept.get("approve_does", ""),
        # Kept since the inbox's triage (issue 26); older requests are "normal".
        "risk": kept.get("risk") or "normal",
        "reject_reasons": list(kept.get("reject_reasons") or []),
        "asked_via": asked_via(s.lineage),
        "asker": asker(s.lineage, s.agent_name),
        # How a question is answered: "form" (a JSON object of its schema's fields) or "url"
        # (an MCP upstream's elicitation: mcp_gateway.elicitation); "" for free text.
        "answer": kept.get("answer", ""),
    }
